/* SPDX-License-Identifier: MIT */
/*
 * record --probe and report --calls: exact call counts and durations from
 * entry and return uprobes. The oracle for counts is perf's own uprobe
 * (perf probe -x LIB FUNC, then perf stat -e probe_...); the fixture knows
 * its own calls (tests/fixtures/calls.c).
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

static char *dir;

static void setup(void)
{
	dir = make_dir();
}

static void teardown(void)
{
	rm_dir(dir);
}

TestSuite(calls, .init = setup, .fini = teardown, .timeout = 300);

struct row {
	unsigned long count;
	double total, min, max, avg;
};

/* The --calls row of function name; false if there is none. */
static bool calls_row(const char *table, const char *name, struct row *r)
{
	char line[512];
	const char *p = table;

	while (*p) {
		size_t n = strcspn(p, "\n");
		char fn[256];

		snprintf(line, sizeof(line), "%.*s",
			 (int)(n < sizeof(line) - 1 ? n : sizeof(line) - 1), p);
		if (sscanf(line, "%lu %lf %lf %lf %lf %*f%% %255s", &r->count, &r->total, &r->min,
			   &r->max, &r->avg, fn) == 6 &&
		    !strcmp(fn, name))
			return true;
		p += n + (p[n] == '\n');
	}
	return false;
}

/* the recorded command's output, from record_calls */
static char last_out[4096];

static char *record_calls(char *const env[], const char *const *probes, const char *const *cmd,
			  char **err_out)
{
	char *data = path_in(dir, "c.data");
	const char *argv[40] = { need_env("DLFLAME"), "record", "--forward-exit", "-o", data };
	size_t n = 5;
	struct run_result r;

	for (size_t i = 0; probes[i]; i++) {
		argv[n++] = "--probe";
		argv[n++] = probes[i];
	}
	argv[n++] = "--";
	for (size_t i = 0; cmd[i]; i++)
		argv[n++] = cmd[i];
	argv[n] = NULL;
	r = run(dir, env, NULL, argv);
	cr_assert_eq(r.status, 0, "%s", r.err);
	*err_out = strdup(r.err);
	snprintf(last_out, sizeof(last_out), "%s", r.out);
	run_free(&r);
	const char *rep[] = { need_env("DLFLAME"), "report", "-i", data, "--calls", NULL };
	r = run(dir, NULL, NULL, rep);
	cr_assert_eq(r.status, 0, "%s", r.err);
	char *table = strdup(r.out);
	run_free(&r);
	free(data);
	return table;
}

/*
 * report --trace of the last recording: the number of call spans, and that
 * the spans of each calls track nest (any two are disjoint or one holds
 * the other), as calls on one thread do.
 */
static const char nest_check[] =
	"import json, sys\n"
	"ev = [e for e in json.load(open(sys.argv[1]))['traceEvents'] if e.get('cat') == 'call']\n"
	"by = {}\n"
	"for e in ev: by.setdefault((e['pid'], e['tid']), []).append((e['ts'], e['ts'] + e['dur']))\n"
	"for spans in by.values():\n"
	"    spans.sort(key=lambda s: (s[0], -s[1]))\n"
	"    open_ = []\n"
	"    for a, b in spans:\n"
	"        while open_ and open_[-1] <= a: open_.pop()\n"
	"        if open_ and b > open_[-1] + 1e-3: sys.exit('overlap %r %r' % ((a, b), open_[-1]))\n"
	"        open_.append(b)\n"
	"print(len(ev))\n";

static unsigned long trace_calls(void)
{
	char *data = path_in(dir, "c.data"), *json = path_in(dir, "c.json");
	const char *rep[] = {
		need_env("DLFLAME"), "report", "-i", data, "--trace", "-o", json, NULL
	};
	const char *py[] = { "/usr/bin/python3", "-c", nest_check, json, NULL };
	struct run_result r = run(dir, NULL, NULL, rep);
	unsigned long n = 0;

	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	r = run(dir, NULL, NULL, py);
	cr_assert_eq(r.status, 0, "calls do not nest in the trace: %s", r.err);
	cr_assert_eq(sscanf(r.out, "%lu", &n), 1, "%s", r.out);
	run_free(&r);
	free(data);
	free(json);
	return n;
}

Test(calls, fixture_counts_durations_recursion_and_calls_that_never_return)
{
	const char *probes[] = { "sleepy", "recurse", "dies", "jumps", "quick", NULL };
	const char *cmd[] = { need_env("FIXTURE_CALLS"), NULL };
	char *err, *table = record_calls(NULL, probes, cmd, &err);
	struct row r;
	unsigned long calls, unfinished, unpaired;
	const char *line = strstr(err, "probed calls"), *own;
	double own_avg;

	cr_log_info("%s", table);
	cr_assert(calls_row(table, "sleepy", &r), "%s", table);
	cr_assert_eq(r.count, 50);
	/* as long as the fixture itself timed them (10 ms, more on a busy machine) */
	own = strstr(last_out, "calls: sleepy 50 calls, ");
	cr_assert_not_null(own, "%s", last_out);
	cr_assert_eq(sscanf(own, "calls: sleepy 50 calls, %lf ms", &own_avg), 1, "%s", own);
	cr_assert(r.avg >= own_avg - 0.5 && r.avg <= own_avg + 0.5,
		  "sleepy: %.3f ms on average, %.3f ms as the fixture timed them", r.avg, own_avg);
	cr_assert(r.min <= r.avg && r.avg <= r.max && r.min >= 9.9, "%.3f %.3f %.3f", r.min, r.avg,
		  r.max);
	cr_assert(calls_row(table, "recurse", &r), "%s", table);
	cr_assert_eq(r.count, 120, "recurse: %lu calls", r.count);
	cr_assert(r.min >= 0 && r.max < 1000, "no absurd durations: %.3f..%.3f", r.min, r.max);
	cr_assert(calls_row(table, "quick", &r), "%s", table);
	cr_assert_eq(r.count, 1000);
	cr_assert_not(calls_row(table, "dies", &r), "a call that exits its thread never returns");
	cr_assert_not(calls_row(table, "jumps", &r), "a call left by longjmp never returns");
	cr_assert_not_null(line, "%s", err);
	while (line > err && line[-1] != '\n')
		line--;
	cr_assert_eq(
		sscanf(line, "dlflame: %lu probed calls; %lu never returned", &calls, &unfinished),
		2, "%s", line);
	cr_assert_eq(calls, 1170);
	cr_assert_eq(unfinished, 7, "3 thread exits and 4 longjmps: %s", line);
	cr_assert_not_null(strstr(line, "0 probe records paired nothing"), "%s", line);
	cr_assert_eq(trace_calls(), 1170, "every call a span in the trace");
	(void)unpaired;
	free(err);
	free(table);
}

/* perf's uprobe count of FUNC in LIB while running cmd with env. */
static unsigned long perf_count(const char *lib, const char *func, char *const env[],
				const char *const *cmd)
{
	const char *add[] = { "/usr/bin/perf", "probe", "-q", "-x", lib, func, NULL };
	const char *del[] = { "/usr/bin/perf", "probe", "-q", "-d", "probe_libdnnl:*", NULL };
	char ev[128];
	const char *argv[16] = { "/usr/bin/perf", "stat", "-x,", "-e", ev, "--" };
	struct run_result r;
	unsigned long n = 0;
	size_t k = 6;

	snprintf(ev, sizeof(ev), "probe_libdnnl:%s", func);
	r = run(dir, NULL, NULL, del);
	run_free(&r);
	r = run(dir, NULL, NULL, add);
	cr_assert_eq(r.status, 0, "perf probe: %s", r.err);
	run_free(&r);
	for (size_t i = 0; cmd[i]; i++)
		argv[k++] = cmd[i];
	argv[k] = NULL;
	r = run(dir, env, NULL, argv);
	cr_assert_eq(r.status, 0, "perf stat: %s", r.err);
	cr_assert_eq(sscanf(strstr(r.err, ev) ? strrchr(r.err, '\n') ? r.err : r.err : r.err,
			    "%lu,", &n),
		     1, "%s", r.err);
	run_free(&r);
	r = run(dir, NULL, NULL, del);
	run_free(&r);
	return n;
}

static void mlp_case(const char *threads)
{
	char omp[32];
	char *env[] = { omp, NULL };
	const char *mlp = need_mlp();
	const char *probes[] = { "dnnl_primitive_execute", NULL };
	const char *cmd[] = { mlp, "60", NULL };
	char *lib, *err, *table;
	unsigned long want;
	struct row r;

	cr_assert(!access("/usr/bin/perf", X_OK),
		  "perf (linux-perf) is the oracle and is not installed: run scripts/setup.sh");
	lib = linked_library(mlp, "libdnnl.so");
	snprintf(omp, sizeof(omp), "OMP_NUM_THREADS=%s", threads);
	want = perf_count(lib, "dnnl_primitive_execute", env, cmd);
	table = record_calls(env, probes, cmd, &err);
	cr_log_info("perf: %lu\n%s", want, table);
	cr_assert(calls_row(table, "dnnl_primitive_execute", &r), "%s", table);
	cr_assert_gt(want, 100);
	cr_assert_eq(r.count, want, "dlflame %lu, perf %lu", r.count, want);
	cr_assert_eq(trace_calls(), want, "as many spans in the trace as calls");
	free(lib);
	free(err);
	free(table);
}

Test(calls, mlp_count_equals_perfs_one_thread)
{
	mlp_case("1");
}

Test(calls, mlp_count_equals_perfs_two_threads)
{
	mlp_case("2");
}

Test(calls, a_function_found_nowhere_is_one_line_and_exit_2)
{
	const char *argv[] = { need_env("DLFLAME"),	  "record", "--probe", "recurze", "--",
			       need_env("FIXTURE_CALLS"), NULL };
	const char *argv2[] = {
		need_env("DLFLAME"),	   "record", "--probe", "libnosuchthing:f", "--",
		need_env("FIXTURE_CALLS"), NULL
	};
	struct run_result r = run(dir, NULL, NULL, argv);

	cr_assert_eq(r.status, 2, "%d: %s", r.status, r.err);
	cr_assert_eq(count_str(r.err, "\n"), 1, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "recurse"), "names like it: %s", r.err);
	run_free(&r);
	r = run(dir, NULL, NULL, argv2);
	cr_assert_eq(r.status, 2, "%d: %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "libnosuchthing"), "%s", r.err);
	run_free(&r);
}

/*
 * --probe MODULE:FUNCTION whose module exists but is never loaded (the
 * fixture does not use libm): one warning at the end naming it, and the
 * profile is kept with the other probe's calls. A module the fixture does
 * load (its own executable) gets no such warning.
 */
Test(calls, a_module_never_mapped_is_one_warning_at_the_end)
{
	char never[64], mapped[4096];
	const char *probes[] = { never, mapped, NULL };
	const char *cmd[] = { need_env("FIXTURE_CALLS"), "many", "100", "1000", NULL };
	char *err, *table;
	const char *w;
	struct row r;

	cr_assert_eq(access("/usr/lib/x86_64-linux-gnu/libm.so.6", R_OK), 0, "libc6 has libm");
	snprintf(never, sizeof(never), "libm.so.6:cbrt");
	snprintf(mapped, sizeof(mapped), "%s:quick", need_env("FIXTURE_CALLS"));
	table = record_calls(NULL, probes, cmd, &err);
	cr_log_info("%s\n%s", err, table);
	cr_assert(calls_row(table, "quick", &r), "the profile is kept: %s", table);
	cr_assert_eq(r.count, 100);
	cr_assert_not(calls_row(table, "cbrt", &r), "%s", table);
	cr_assert_eq(count_str(err, "warning: "), 1, "one warning: %s", err);
	w = strstr(err, "warning: --probe libm.so.6:cbrt: no recorded process loaded ");
	cr_assert_not_null(w, "%s", err);
	cr_assert_not_null(strstr(w, "libm.so.6, so cbrt never ran there"), "%s", err);
	cr_assert_null(strstr(err, "quick never ran"), "its own executable was mapped: %s", err);
	/* at the end, after the summary, in one line */
	cr_assert_gt(w - err, strstr(err, " samples, ") - err, "after the summary: %s", err);
	cr_assert(strchr(w, '\n') && strstr(w, "name one of them\n") ==
					     strchr(w, '\n') - strlen("name one of them"),
		  "one line: %s", err);
	free(err);
	free(table);
}

/*
 * A --probe without MODULE whose function is only in a library the fixture
 * loads with dlopen (tests/fixtures/dlcalls.c), as PyTorch loads oneDNN.
 * Found nowhere: exit 2. Loaded by name from LD_LIBRARY_PATH: probed from
 * the start, COUNT exact. A copy loaded by path from elsewhere: probed when
 * it is mapped, which the summary says (with how late); the fixture makes
 * its calls 500 ms after the dlopen, as a trainer's first step comes long
 * after its import, and COUNT is exact again.
 */
Test(calls, a_library_loaded_by_dlopen_is_probed_without_its_module)
{
	const char *lib = need_env("FIXTURE_DLCALLS");
	char *libdir = strdup(lib), ldpath[4096], *env[] = { ldpath, NULL };
	char *copydir = path_in(dir, "elsewhere"), *copy = path_in(copydir, "libdlcalls.so");
	const char *probes[] = { "dl_tick", NULL };
	const char *by_name[] = { need_env("FIXTURE_CALLS"), "dlopen", "libdlcalls.so", "1000",
				  NULL };
	const char *by_path[] = { need_env("FIXTURE_CALLS"), "dlopen", copy, "1000", "500", NULL };
	const char *nowhere[] = { need_env("DLFLAME"),	     "record", "--probe", "dl_tick", "--",
				  need_env("FIXTURE_CALLS"), "dlopen", lib,	  "10",	     NULL };
	const char *cp[] = { "/bin/cp", lib, copy, NULL };
	char *err, *table, want[4200];
	const char *late;
	double ms = -1;
	struct row r;
	struct run_result rr;

	*strrchr(libdir, '/') = '\0';
	snprintf(ldpath, sizeof(ldpath), "LD_LIBRARY_PATH=%s", libdir);

	/* meson test sets LD_LIBRARY_PATH to the build's library directories: none here */
	rr = run(dir, (char *[]){ "LD_LIBRARY_PATH=", NULL }, NULL, nowhere);
	cr_assert_eq(rr.status, 2, "not in a library dlopen could find by name: %s", rr.err);
	cr_assert_eq(count_str(rr.err, "\n"), 1, "%s", rr.err);
	run_free(&rr);

	table = record_calls(env, probes, by_name, &err);
	cr_log_info("%s\n%s", err, table);
	cr_assert(calls_row(table, "dl_tick", &r), "%s\n%s", err, table);
	cr_assert_eq(r.count, 1000, "dl_tick: %lu calls", r.count);
	cr_assert_null(strstr(err, "also probed in"), "probed from the start: %s", err);
	free(err);
	free(table);

	cr_assert_eq(mkdir(copydir, 0755), 0);
	rr = run(dir, NULL, NULL, cp);
	cr_assert_eq(rr.status, 0, "%s", rr.err);
	run_free(&rr);
	table = record_calls(env, probes, by_path, &err);
	cr_log_info("%s\n%s", err, table);
	snprintf(want, sizeof(want), "--probe dl_tick: also probed in %s, which process ", copy);
	late = strstr(err, want);
	cr_assert_not_null(late, "the copy is probed when it is mapped: %s", err);
	late = strstr(late, " loaded during the recording, from ");
	cr_assert_not_null(late, "%s", err);
	cr_assert_eq(
		sscanf(late, " loaded during the recording, from %lf ms after it was mapped", &ms),
		1, "%s", err);
	cr_assert(ms >= 0 && ms < 500, "armed %.1f ms after the mapping: before the calls", ms);
	cr_assert(calls_row(table, "dl_tick", &r), "%s\n%s", err, table);
	cr_assert_eq(r.count, 1000, "dl_tick in the copy: %lu calls", r.count);
	free(err);
	free(table);
	free(libdir);
	free(copy);
	free(copydir);
}

/* --from-call step:2: the first step's samples (its warm-up) are gone, the rest kept. */
Test(calls, from_call_leaves_out_the_warm_up)
{
	const char *probes[] = { "step", NULL };
	const char *cmd[] = { need_env("FIXTURE_CALLS"), "warmup", NULL };
	char *err, *table = record_calls(NULL, probes, cmd, &err), *data = path_in(dir, "c.data");
	const char *all[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", NULL };
	const char *from[] = { need_env("DLFLAME"), "report",	   "-i",     data,
			       "--folded",	    "--from-call", "step:2", NULL };
	const char *none[] = { need_env("DLFLAME"), "report",	   "-i",       data,
			       "--folded",	    "--from-call", "nosuch:1", NULL };
	struct run_result a = run(dir, NULL, NULL, all), f = run(dir, NULL, NULL, from);
	struct row r;
	unsigned long warm_all = count_frame(a.out, "warm", NULL),
		      work_all = count_frame(a.out, "work", NULL);
	unsigned long warm_from = count_frame(f.out, "warm", NULL),
		      work_from = count_frame(f.out, "work", NULL);

	cr_assert(calls_row(table, "step", &r), "%s", table);
	cr_assert_eq(r.count, 10);
	cr_assert_eq(a.status, 0, "%s", a.err);
	cr_assert_eq(f.status, 0, "%s", f.err);
	cr_log_info("warm %lu -> %lu, work %lu -> %lu", warm_all, warm_from, work_all, work_from);
	cr_assert_gt(warm_all, 100, "the warm-up is in the whole recording");
	cr_assert_eq(warm_from, 0, "the first call's samples are gone");
	cr_assert_geq(work_from, work_all * 95 / 100, "the later calls' samples are kept");
	run_free(&a);
	run_free(&f);
	a = run(dir, NULL, NULL, none);
	cr_assert_eq(a.status, 2, "%s", a.err);
	cr_assert_eq(count_str(a.err, "\n"), 1, "%s", a.err);
	run_free(&a);
	free(data);
	free(err);
	free(table);
}

/* The weight of the folded lines that hold `inner` and, of those, of the ones that hold `whole`. */
static unsigned long weigh(const char *folded, const char *inner, const char *whole,
			   unsigned long *with)
{
	unsigned long all = 0;

	*with = 0;
	for (const char *p = folded; *p;) {
		size_t n = strcspn(p, "\n");
		char *line = strndup(p, n), *sp = strrchr(line, ' ');
		unsigned long w = sp ? strtoul(sp + 1, NULL, 10) : 0;

		if (sp && strstr(line, inner)) {
			all += w;
			if (strstr(line, whole))
				*with += w;
		}
		free(line);
		p += n + (p[n] == '\n');
	}
	return all;
}

/*
 * A return probe puts the kernel's trampoline where its call's return
 * address was; a stack copied inside the call holds the trampoline there.
 * Every sample in step's callees still unwinds to main through step: the
 * return address the entry saw is put back (once, --probe-ops cut half of
 * the CNN's stacks there, and the frames above each probed call were lost).
 */
Test(calls, samples_inside_a_probed_call_unwind_past_its_return_probe)
{
	const char *probes[] = { "step", NULL };
	const char *cmd[] = { need_env("FIXTURE_CALLS"), "warmup", NULL };
	char *err, *table = record_calls(NULL, probes, cmd, &err), *data = path_in(dir, "c.data");
	const char *all[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", NULL };
	struct run_result a = run(dir, NULL, NULL, all);
	unsigned long warm_main, work_main,
		warm = weigh(a.out, ";warm", "main;step;warm", &warm_main),
		work = weigh(a.out, ";work", "main;step;work", &work_main);

	cr_assert_eq(a.status, 0, "%s", a.err);
	cr_log_info("warm %lu of %lu, work %lu of %lu under main;step", warm_main, warm, work_main,
		    work);
	cr_assert_gt(warm, 100, "%s", a.out);
	cr_assert_gt(work, 100, "%s", a.out);
	cr_assert_geq(warm_main * 100, warm * 99, "%s", a.out);
	cr_assert_geq(work_main * 100, work * 99, "%s", a.out);
	run_free(&a);
	free(data);
	free(err);
	free(table);
}

/*
 * Page faults (sampled by default): a fixture that first touches 96 MiB in
 * touch_a and 32 MiB in touch_b; report --faults weighs each sample by the
 * bytes its faults touched, so the shares are those of the memory: 75/25
 * within 5 points, and about the 128 MiB in all. With --no-faults: none.
 * (Sampling them is the default; --faults is still accepted.)
 */
Test(calls, page_fault_shares_follow_the_memory_touched)
{
	char *data = path_in(dir, "t.data");
	const char *rec[] = { need_env("DLFLAME"),	 "record", "--faults", "-o", data, "--",
			      need_env("FIXTURE_CALLS"), "touch",  NULL };
	const char *rep[] = { need_env("DLFLAME"), "report",   "-i", data,
			      "--faults",	   "--folded", NULL };
	const char *off[] = { need_env("DLFLAME"),	 "record", "--no-faults", "-o", data, "--",
			      need_env("FIXTURE_CALLS"), "touch",  NULL };
	struct run_result r = run(dir, NULL, NULL, rec);
	unsigned long a, b, total = 0;

	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	r = run(dir, NULL, NULL, rep);
	cr_assert_eq(r.status, 0, "%s", r.err);
	a = count_frame(r.out, "touch_a", &total);
	b = count_frame(r.out, "touch_b", NULL);
	cr_log_info("touch_a %lu kB, touch_b %lu kB, all %lu kB", a, b, total);
	cr_assert_gt(a + b, 0, "%s", r.out);
	cr_assert(fabs(100.0 * (double)a / (double)(a + b) - 75.0) <= 5.0, "touch_a %.1f%%",
		  100.0 * (double)a / (double)(a + b));
	cr_assert(a + b >= 128ul * 1048576 / 1000 * 9 / 10 &&
			  a + b <= 128ul * 1048576 / 1000 * 11 / 10,
		  "%lu kB for 128 MiB", a + b);
	run_free(&r);
	r = run(dir, NULL, NULL, off);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	r = run(dir, NULL, NULL, rep);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(count_frame(r.out, "touch_a", NULL), 0);
	cr_assert_not_null(strstr(r.err, "holds no page faults"), "%s", r.err);
	run_free(&r);
	free(data);
}

/* report --memory: the peak resident set of a fixture holding 200 MiB is that, within 10%. */
Test(calls, memory_table_peak_is_what_the_process_held)
{
	char *data = path_in(dir, "h.data");
	const char *rec[] = { need_env("DLFLAME"),	 "record", "--faults", "-o", data, "--",
			      need_env("FIXTURE_CALLS"), "hold",   NULL };
	const char *rep[] = { need_env("DLFLAME"), "report", "-i", data, "--memory", NULL };
	struct run_result r = run(dir, NULL, NULL, rec);
	unsigned long pid, n = 0;
	double min, avg, max, touched;
	const char *line;

	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	r = run(dir, NULL, NULL, rep);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_log_info("%s", r.out);
	line = strstr(r.out, "COMMAND\n");
	cr_assert_not_null(line, "%s", r.out);
	cr_assert_eq(
		sscanf(line + 8, "%lu %lu %lf %lf %lf %lf", &pid, &n, &min, &avg, &max, &touched),
		6, "%s", r.out);
	cr_assert_geq(n, 4, "resident-set samples: %lu", n);
	cr_assert(max >= 180 && max <= 220, "peak %.1f MiB for 200 MiB held", max);
	cr_assert(min <= avg && avg <= max, "%.1f %.1f %.1f", min, avg, max);
	cr_assert(touched >= 180 && touched <= 250, "touched %.1f MiB", touched);
	run_free(&r);
	/* and a counter track named RSS in the trace, a point per resident-set sample */
	const char *tr[] = {
		need_env("DLFLAME"), "report", "-i", data, "--trace", "-o", "-", NULL
	};
	r = run(dir, NULL, NULL, tr);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(count_str(r.out, "{\"name\":\"RSS\",\"ph\":\"C\""), n, "%s", r.err);
	run_free(&r);
	free(data);
}
