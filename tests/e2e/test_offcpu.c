/* SPDX-License-Identifier: MIT */
/*
 * End-to-end tests of off-CPU time and attach: blocked and runqueue time
 * charged to the right stacks with the right durations, `dlflame offcpu`,
 * attaching to many threads, and the oneDNN trainer's futex waits.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "profile/profile.h"
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

TestSuite(offcpu, .init = setup, .fini = teardown, .timeout = 180);
TestSuite(attach, .init = setup, .fini = teardown, .timeout = 180);

static struct profile *load(const char *path)
{
	struct profile_read_error e = { 0 };
	struct profile *p = NULL;
	int err = profile__read(path, &p, &e);

	cr_assert_eq(err, 0, "cannot read %s: %s (%s)", path, strerror(-err), e.what ? e.what : "");
	return p;
}

/* Does the stack hold a frame whose name contains `needle` (the whole name with exact)? */
static bool stack_has(const struct profile *p, uint32_t stack, const char *needle, bool exact)
{
	for (uint32_t s = stack; s; s = profile__get_stack(p, s)->parent) {
		const char *name = profile__str(
			p, profile__get_frame(p, profile__get_stack(p, s)->frame)->name);

		if (exact ? !strcmp(name, needle) : strstr(name, needle) != NULL)
			return true;
	}
	return false;
}

/* The name of a stack's root frame. */
struct sums {
	double ns[SAMPLE_KIND_MAX]; /* weight of the matching samples, by kind */
	size_t n[SAMPLE_KIND_MAX];
};

/* Sum the weights of samples whose stack holds `frame` (NULL: every sample) and, if comm, whose thread has that name. */
static struct sums sum_by_frame(const struct profile *p, const char *frame, bool exact,
				const char *comm)
{
	struct sums r = { 0 };

	for (size_t i = 0; i < profile__nr_samples(p); i++) {
		const struct pf_sample *s = profile__get_sample(p, i);
		const struct pf_thread *t = profile__get_thread(p, s->thread);

		if (s->kind >= SAMPLE_KIND_MAX)
			continue;
		if (comm && strcmp(profile__str(p, t->comm), comm))
			continue;
		if (frame && !stack_has(p, s->stack, frame, exact))
			continue;
		r.ns[s->kind] += (double)s->weight;
		r.n[s->kind]++;
	}
	return r;
}

static void record(const char *data, const char *const *extra, const char *fixture, const char *arg)
{
	const char *argv[16] = { need_env("DLFLAME"), "record", "-o", data };
	size_t n = 4;
	struct run_result r;

	for (; extra && *extra; extra++)
		argv[n++] = *extra;
	argv[n++] = "--";
	argv[n++] = fixture;
	argv[n++] = arg;
	argv[n] = NULL;
	r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	cr_assert_not_null(strstr(r.err, " s blocked"), "the summary gives the blocked time: %s",
			   r.err);
	/* hints at debug packages may follow (none with them installed); warnings may not */
	cr_assert_eq(count_str(r.err, "\n") - count_str(r.err, "dlflame: hint: "), 1,
		     "one summary line and no warning: %s", r.err);
	cr_assert_null(strstr(r.err, "warning"), "%s", r.err);
	run_free(&r);
}

static void assert_near(double got_ns, double want_s, double tol, const char *what)
{
	double got = got_ns / 1e9;

	cr_log_info("%s: %.4f s (want %.3f s +- %.0f%%)", what, got, want_s, tol * 100);
	cr_assert(got > want_s * (1 - tol) && got < want_s * (1 + tol),
		  "%s: %.4f s blocked, want %.3f s +- %.0f%%", what, got, want_s, tol * 100);
}

/*
 * One thread sleeps 10 x 100 ms in nap_100ms, another waits 700 ms on a
 * pipe in wait_on_pipe: each total is within 5% of the truth, voluntary
 * (not runqueue), on the thread that blocked.
 */
static void block_totals(const char *callgraph)
{
	char *data = path_in(dir, "block.data");
	const char *extra[] = { "-g", callgraph, NULL };
	struct profile *p;
	struct sums nap, pipe, all;

	record(data, extra, need_env("FIXTURE_OFFCPU_BLOCK"), NULL);
	p = load(data);
	nap = sum_by_frame(p, "nap_100ms", true, NULL);
	pipe = sum_by_frame(p, "wait_on_pipe", true, NULL);
	all = sum_by_frame(p, NULL, false, NULL);
	assert_near(nap.ns[SAMPLE_OFFCPU], 1.0, 0.05, "nap_100ms");
	assert_near(pipe.ns[SAMPLE_OFFCPU], 0.7, 0.05, "wait_on_pipe");
	cr_assert_geq(nap.n[SAMPLE_OFFCPU], 10, "ten naps, ten blocks");
	cr_assert_lt(nap.ns[SAMPLE_RUNQUEUE], nap.ns[SAMPLE_OFFCPU] * 0.01);
	/* on the threads that blocked */
	assert_near(sum_by_frame(p, "nap_100ms", true, "sleeper").ns[SAMPLE_OFFCPU], 1.0, 0.05,
		    "nap_100ms on thread sleeper");
	assert_near(sum_by_frame(p, "wait_on_pipe", true, "reader").ns[SAMPLE_OFFCPU], 0.7, 0.05,
		    "wait_on_pipe on thread reader");
	/* blocking stacks go down into the kernel's scheduler */
	cr_assert_gt(sum_by_frame(p, "schedule", false, "sleeper").ns[SAMPLE_OFFCPU],
		     nap.ns[SAMPLE_OFFCPU] * 0.9);
	/* the whole run blocks about 0.7 s in main (join) too; nothing near 2x: no double count */
	cr_assert_lt(all.ns[SAMPLE_OFFCPU] / 1e9, 1.0 + 0.7 + 1.1);
	profile__free(p);
	free(data);
}

Test(offcpu, sleep_and_pipe_totals_fp)
{
	block_totals("fp");
}

Test(offcpu, sleep_and_pipe_totals_dwarf)
{
	block_totals("dwarf");
}

/* Two threads that never block, pinned to one CPU: they wait in the runqueue, they do not block. */
Test(offcpu, preemption_is_runqueue_not_blocking)
{
	char *data = path_in(dir, "preempt.data");
	const char *extra[] = { "-g", "fp", NULL };
	struct profile *p;
	struct sums spin;

	record(data, extra, need_env("FIXTURE_OFFCPU_PREEMPT"), "1");
	p = load(data);
	spin = sum_by_frame(p, "spin_pinned", true, NULL);
	cr_log_info("spin_pinned: %.3f s on CPU, %.3f s runqueue (%zu waits), %.3f s blocked",
		    spin.ns[SAMPLE_ONCPU] / 1e9, spin.ns[SAMPLE_RUNQUEUE] / 1e9,
		    spin.n[SAMPLE_RUNQUEUE], spin.ns[SAMPLE_OFFCPU] / 1e9);
	/*
	 * Each spins 1 s of wall time on a CPU it shares: about half of it
	 * waiting (more if other programs use that CPU too). Running plus
	 * waiting is the 2 s of wall time the two spent.
	 */
	cr_assert_gt(spin.ns[SAMPLE_RUNQUEUE] / 1e9, 0.6);
	cr_assert_lt(spin.ns[SAMPLE_RUNQUEUE] / 1e9, 2.0);
	cr_assert_lt(fabs((spin.ns[SAMPLE_RUNQUEUE] + spin.ns[SAMPLE_ONCPU]) / 1e9 - 2.0), 0.2,
		     "on CPU %.3f s + runqueue %.3f s is not the 2 s the threads spent",
		     spin.ns[SAMPLE_ONCPU] / 1e9, spin.ns[SAMPLE_RUNQUEUE] / 1e9);
	cr_assert_gt(spin.n[SAMPLE_RUNQUEUE], 20, "preempted many times");
	cr_assert_lt(spin.ns[SAMPLE_OFFCPU], spin.ns[SAMPLE_RUNQUEUE] * 0.05,
		     "%.3f s of preemption counted as blocking", spin.ns[SAMPLE_OFFCPU] / 1e9);
	profile__free(p);
	free(data);
}

/* ---- attach ------------------------------------------------------------- */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static pid_t start_bg(const char *path, const char *a, const char *b, const char *c)
{
	const char *argv[] = { path, a, b, c, NULL };
	pid_t pid = run_bg(dir, argv);

	sleep_ms(300);
	cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "%s exited early", path);
	return pid;
}

/* Not stopped (T), not traced (t): attaching left the target running. */
static char state_of(pid_t pid)
{
	char path[64], line[512], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	p = strrchr(line, ')');
	return p ? p[2] : '?';
}

static void stop_bg(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Sum of the counts of folded lines, and of those holding a frame that contains `needle`. */
static double folded_sum(const char *folded, const char *needle, double *matching)
{
	double all = 0, hit = 0;
	char *copy = strdup(folded), *save = NULL;

	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' ');

		cr_assert_not_null(sp, "folded line without a count: %s", line);
		all += strtod(sp + 1, NULL);
		*sp = '\0';
		if (needle && strstr(line, needle))
			hit += strtod(sp + 1, NULL);
	}
	free(copy);
	if (matching)
		*matching = hit;
	return all;
}

/* `dlflame offcpu -p` on a process that sleeps in a loop, 2 s: about 2 s blocked, in nanosleep. */
Test(attach, offcpu_command_on_a_sleeping_loop)
{
	pid_t pid = start_bg(need_env("FIXTURE_OFFCPU_SLEEPLOOP"), NULL, NULL, NULL);
	char pids[16], *out = path_in(dir, "off.folded");
	const char *argv[] = { need_env("DLFLAME"), "offcpu", "-p", pids, "-d", "2",
			       "--folded",	    "-o",     out,  NULL };
	struct run_result r;
	double all, sleep_us;
	char *text;

	snprintf(pids, sizeof(pids), "%d", (int)pid);
	r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 0, "offcpu failed: %s", r.err);
	cr_assert_not_null(strstr(r.err, "blocked in"), "%s", r.err);
	cr_assert_eq(kill(pid, 0), 0, "the target is gone");
	cr_assert_neq(state_of(pid), 'T', "the target was left stopped");
	cr_assert_neq(state_of(pid), 't', "the target was left traced");
	stop_bg(pid);

	cr_assert_eq(access(out, R_OK), 0, "no output %s: %s", out, r.err);
	text = read_text(out);
	all = folded_sum(text, "nanosleep", &sleep_us);
	cr_log_info("offcpu -p: %.3f s blocked, %.3f s of it under nanosleep", all / 1e6,
		    sleep_us / 1e6);
	/* folded counts are microseconds */
	cr_assert(all > 2e6 * 0.85 && all < 2e6 * 1.15, "%.3f s blocked in 2 s", all / 1e6);
	cr_assert_gt(sleep_us, all * 0.9, "stacks down to the sleep call: %s", text);
	cr_assert_null(strstr(text, "spin"), "on-CPU samples in an off-CPU graph");
	free(text);
	run_free(&r);
	free(out);
}

Test(attach, offcpu_command_writes_svg_by_default)
{
	pid_t pid = start_bg(need_env("FIXTURE_OFFCPU_SLEEPLOOP"), NULL, NULL, NULL);
	char pids[16], *svg = path_in(dir, "offcpu.svg");
	const char *argv[] = { need_env("DLFLAME"), "offcpu", "-p", pids, "-d", "0.5", NULL };
	struct run_result r;
	struct stat st;

	snprintf(pids, sizeof(pids), "%d", (int)pid);
	r = run(dir, NULL, NULL, argv);
	stop_bg(pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(stat(svg, &st), 0, "no offcpu.svg: %s", r.err);
	cr_assert_gt(st.st_size, 1000);
	cr_assert_not_null(strstr(r.err, "offcpu.svg"), "%s", r.err);
	run_free(&r);
	free(svg);
}

Test(attach, usage_and_missing_targets)
{
	const char *dl = need_env("DLFLAME");
	const char *cases[][8] = {
		{ dl, "offcpu", NULL },
		{ dl, "offcpu", "-p", "abc", NULL },
		{ dl, "offcpu", "-p", "1,", NULL },
		{ dl, "offcpu", "-p", "1", "-t", "1", NULL },
		{ dl, "offcpu", "-p", "1", "-d", "0", NULL },
		{ dl, "offcpu", "-p", "1", "extra", NULL },
		{ dl, "record", "-p", "1", "--", "true", NULL },
		{ dl, "record", "-d", "x", "-p", "1", NULL },
		{ dl, "record", "-g", "dwarf,12", "--", "true", NULL },
		{ dl, "record", "-g", "dwarf,65536", "--", "true", NULL },
		{ dl, "record", "-g", "dwarf,", "--", "true", NULL },
		{ dl, "record", "-g", "lbr", "--", "true", NULL },
		{ dl, "record", "-g", "fp,8", "--", "true", NULL },
		{ dl, "offcpu", "-g", "dwarf,0", "-p", "1", NULL },
	};
	struct run_result r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = run(dir, NULL, NULL, cases[i]);
		cr_assert_eq(r.status, 2, "case %zu: %s", i, r.err);
		cr_assert_not_null(strstr(r.err, "--help"), "case %zu: %s", i, r.err);
		run_free(&r);
	}
	/* a pid that does not exist: runtime error, one line with the remedy */
	const char *gone[] = { dl, "offcpu", "-p", "1073741800", "-d", "1", NULL };
	r = run(dir, NULL, NULL, gone);
	cr_assert_eq(r.status, 1, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "no such process"), "%s", r.err);
	cr_assert_eq(count_str(r.err, "\n"), 1, "%s", r.err);
	run_free(&r);
}

/* Distinct threads of process pid that have samples, and the largest off-CPU+runqueue total of one. */
static size_t threads_with_samples(const struct profile *p, uint32_t pid, double *max_blocked)
{
	size_t nt = profile__nr_threads(p), n = 0;
	double *blocked = calloc(nt, sizeof(*blocked));
	bool *has = calloc(nt, sizeof(*has));

	for (size_t i = 0; i < profile__nr_samples(p); i++) {
		const struct pf_sample *s = profile__get_sample(p, i);

		has[s->thread] = true;
		/* blocked: off-CPU and runqueue time (not calls, page faults or resident sets) */
		if (s->kind == SAMPLE_OFFCPU || s->kind == SAMPLE_RUNQUEUE)
			blocked[s->thread] += (double)s->weight;
	}
	*max_blocked = 0;
	for (size_t t = 0; t < nt; t++) {
		if (!has[t] || profile__get_thread(p, (uint32_t)t)->pid != pid)
			continue;
		n++;
		if (blocked[t] > *max_blocked)
			*max_blocked = blocked[t];
	}
	free(blocked);
	free(has);
	return n;
}

/*
 * 100 threads, then 100 more created one every 5 ms from 200 ms on, before,
 * while and after dlflame attaches: all 201 are in the profile, none is
 * counted twice, and the recording ends by itself when the process exits.
 */
Test(attach, two_hundred_threads_some_created_after_the_attach)
{
	pid_t pid = start_bg(need_env("FIXTURE_OFFCPU_THREADS"), "100", "100", "3");
	char pids[16], *data = path_in(dir, "threads.data");
	const char *argv[] = {
		need_env("DLFLAME"), "record", "-g", "fp", "-p", pids, "-o", data, NULL
	};
	struct run_result r;
	struct profile *p;
	double max_blocked, span;
	size_t n;

	snprintf(pids, sizeof(pids), "%d", (int)pid);
	r = run(dir, NULL, NULL, argv);
	waitpid(pid, NULL, 0);
	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	cr_assert_not_null(strstr(r.err, "exited"), "ends when the target exits: %s", r.err);
	cr_assert_null(strstr(r.err, "not followed"), "%s", r.err);
	p = load(data);
	n = threads_with_samples(p, (uint32_t)pid, &max_blocked);
	span = (double)(profile__cmeta(p)->end_time - profile__cmeta(p)->start_time);
	cr_log_info("attach: %zu threads in the profile; at most %.3f s blocked per thread in "
		    "%.3f s",
		    n, max_blocked / 1e9, span / 1e9);
	cr_assert_geq(n, 201, "only %zu of 201 threads in the profile: %s", n, r.err);
	/* a thread followed twice (its own events and inherited ones) would show ~2x */
	cr_assert_lt(max_blocked, span * 1.02, "a thread blocked longer than the recording");
	profile__free(p);
	run_free(&r);
	free(data);
}

/* Too few fds for every thread: the followed ones are recorded, the rest counted aloud. */
Test(attach, fd_limit_says_how_many_threads_are_missed)
{
	pid_t pid = start_bg(need_env("FIXTURE_OFFCPU_THREADS"), "100", "0", "2.5");
	char script[512], *data = path_in(dir, "few.data");
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct run_result r;
	struct profile *p;
	unsigned long missed;
	double max_blocked;
	size_t n;

	snprintf(script, sizeof(script),
		 "ulimit -n 200 && exec '%s' record -g fp -p %d -d 1 -o '%s'", need_env("DLFLAME"),
		 (int)pid, data);
	r = run(dir, NULL, NULL, argv);
	stop_bg(pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "threads are not followed"), "%s", r.err);
	cr_assert_not_null(strstr(r.err, "of 101 threads"), "%s", r.err);
	missed = strtoul(strstr(r.err, "warning: ") + 9, NULL, 10);
	cr_assert(missed > 0 && missed < 101, "%s", r.err);
	/* the threads not followed are not in the profile, not even as blocked */
	p = load(data);
	n = threads_with_samples(p, (uint32_t)pid, &max_blocked);
	cr_assert_eq(n, 101 - missed, "%zu threads in the profile, %lu of 101 missed", n, missed);
	profile__free(p);
	run_free(&r);
	free(data);
}

/* A thread asleep for the whole recording is charged all of it, under its own frame. */
Test(attach, blocked_throughout_is_charged_from_the_start)
{
	const char *argv0[] = { "/bin/sleep", "30", NULL };
	pid_t pid = run_bg(dir, argv0);
	char pids[16], *data = path_in(dir, "asleep.data");
	const char *argv[] = {
		need_env("DLFLAME"), "record", "-p", pids, "-d", "1", "-o", data, NULL
	};
	struct run_result r;
	struct profile *p;
	struct sums before;

	sleep_ms(200);
	snprintf(pids, sizeof(pids), "%d", (int)pid);
	r = run(dir, NULL, NULL, argv);
	stop_bg(pid);
	cr_assert_eq(r.status, 0, "%s", r.err);
	p = load(data);
	before = sum_by_frame(p, "[blocked before recording]", true, NULL);
	assert_near(before.ns[SAMPLE_OFFCPU], 1.0, 0.1, "blocked before and throughout");
	cr_assert_gt(sum_by_frame(p, "nanosleep", false, NULL).ns[SAMPLE_OFFCPU], 0.9e9,
		     "the user PC from /proc names where it sleeps");
	profile__free(p);
	run_free(&r);
	free(data);
}

/* ---- the oneDNN trainer -------------------------------------------------- */

/*
 * With OMP_WAIT_POLICY=passive the idle OpenMP worker sleeps on a futex
 * instead of spinning: that blocking shows up under libgomp with whole
 * stacks (down to the thread's start or main). Needs the DWARF unwinder:
 * Debian's libgomp has no frame pointers.
 */
Test(offcpu, mlp_passive_omp_futex_waits_have_whole_stacks, .timeout = 300)
{
	const char *mlp = need_mlp();
	char *data = path_in(dir, "mlp.data");
	char *env[] = { "OMP_WAIT_POLICY=passive", "OMP_NUM_THREADS=2", NULL };
	const char *argv[] = { need_env("DLFLAME"), "record", "-o", data, "--", mlp, "100", NULL };
	struct run_result r;
	struct profile *p;
	double gomp = 0, whole = 0;

	r = run(dir, env, NULL, argv);
	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	p = load(data);
	for (size_t i = 0; i < profile__nr_samples(p); i++) {
		const struct pf_sample *s = profile__get_sample(p, i);
		if (s->kind != SAMPLE_OFFCPU || !stack_has(p, s->stack, "futex", false))
			continue;
		/* under libgomp: a frame of libgomp's module */
		bool in_gomp = false;

		for (uint32_t st = s->stack; st && !in_gomp;
		     st = profile__get_stack(p, st)->parent) {
			const struct pf_frame *f =
				profile__get_frame(p, profile__get_stack(p, st)->frame);

			in_gomp = strstr(profile__str(p, f->module), "libgomp") ||
				  strstr(profile__str(p, f->name), "GOMP_") ||
				  strstr(profile__str(p, f->name), "gomp_");
		}
		if (!in_gomp)
			continue;
		gomp += (double)s->weight;
		/* whole by how the unwinder says it ended, not by libc's names */
		if (profile__stack_end(p, s->stack) == STACK_END_COMPLETE)
			whole += (double)s->weight;
	}
	cr_log_info("MLP passive: %.3f s of futex waits under libgomp, %.0f%% with whole stacks",
		    gomp / 1e9, gomp ? 100 * whole / gomp : 0);
	cr_assert_gt(gomp / 1e9, 0.05, "no futex waits under libgomp: %s", r.err);
	cr_assert_geq(whole, gomp * 0.9, "only %.0f%% of futex-wait time has a whole stack",
		      100 * whole / gomp);
	{
		const char *sel[] = { "--offcpu", NULL };

		assert_ends_agree(data, sel, true);
	}
	profile__free(p);
	run_free(&r);
	free(data);
}

/* Ctrl-C ends an attached recording with a complete profile; the target runs on. */
Test(attach, sigint_finalizes_and_leaves_the_target_alone)
{
	pid_t pid = start_bg(need_env("FIXTURE_OFFCPU_SLEEPLOOP"), NULL, NULL, NULL);
	char pids[16], *data = path_in(dir, "int.data");
	const char *argv[] = { need_env("DLFLAME"), "record", "-p", pids, "-o", data, NULL };
	struct profile *p;
	pid_t rec;
	int st;

	snprintf(pids, sizeof(pids), "%d", (int)pid);
	rec = run_bg(dir, argv);
	sleep_ms(1000);
	cr_assert_eq(waitpid(rec, &st, WNOHANG), 0, "record -p ended by itself");
	kill(rec, SIGINT);
	cr_assert_eq(waitpid(rec, &st, 0), rec);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	cr_assert_eq(kill(pid, 0), 0, "the target did not survive");
	cr_assert_neq(state_of(pid), 'T');
	stop_bg(pid);
	p = load(data);
	cr_assert(profile__cmeta(p)->finalized);
	cr_assert_gt(sum_by_frame(p, NULL, false, NULL).ns[SAMPLE_OFFCPU], 0.5e9);
	profile__free(p);
	free(data);
}

/* A launched command gets the oneDNN perf-map switches, unless the user set either. */
Test(attach, launch_sets_onednn_jit_profile_unless_set)
{
	char *data = path_in(dir, "env.data"), *out = path_in(dir, "env.txt"), script[256];
	const char *argv[] = { need_env("DLFLAME"), "record", "-o",   data, "--",
			       "/bin/sh",	    "-c",     script, NULL };
	char *user[] = { "DNNL_JIT_PROFILE=6", NULL };
	struct run_result r;
	char line[128] = "";
	FILE *f;

	snprintf(script, sizeof(script),
		 "echo \"${ONEDNN_JIT_PROFILE-unset} ${DNNL_JIT_PROFILE-unset}\" > '%s'", out);
	r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	f = fopen(out, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	cr_assert_str_eq(line, "2 2\n");

	r = run(dir, user, NULL, argv);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	f = fopen(out, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	cr_assert_str_eq(line, "unset 6\n", "the user's choice is kept as it is");
	free(data);
	free(out);
}
