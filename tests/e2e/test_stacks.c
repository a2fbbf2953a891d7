/* SPDX-License-Identifier: MIT */
/*
 * Whole stacks, end to end: `dlflame record` (DWARF unwinding, the default)
 * on programs without frame pointers, on JIT code named by a perf map that
 * is deleted before the program exits, and on the oneDNN MLP.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

static char *dir;

static void setup(void)
{
	dir = make_dir();
}

static void teardown(void)
{
	rm_dir(dir);
}

TestSuite(stacks, .init = setup, .fini = teardown, .timeout = 300);

/* `dlflame record` of argv (after --), then the folded stacks of the result. */
static char *record_folded(char *const env[], const char *const *cmd)
{
	char *data = path_in(dir, "stacks.data");
	const char *argv[16] = {
		need_env("DLFLAME"), "record", "--forward-exit", "-o", data, "--"
	};
	const char *rep[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", NULL };
	struct run_result r;
	size_t n = 6;
	char *out;

	for (; *cmd && n < ARRAY_SIZE(argv) - 1; cmd++)
		argv[n++] = *cmd;
	argv[n] = NULL;
	r = run(dir, env, NULL, argv);
	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	cr_log_info("%s", r.err);
	run_free(&r);
	r = run(dir, NULL, NULL, rep);
	cr_assert_eq(r.status, 0, "report failed: %s", r.err);
	out = r.out;
	r.out = NULL;
	run_free(&r);
	free(data);
	return out;
}

/* One folded line split in place: frames[0] is the comm, frames[n-1] the leaf. */
struct line {
	char *frames[1100];
	size_t n;
	unsigned long count;
};

static bool next_line(char **cursor, struct line *l)
{
	char *s = *cursor, *eol, *sp;

	if (!*s)
		return false;
	eol = strchr(s, '\n');
	if (eol)
		*eol = '\0';
	*cursor = eol ? eol + 1 : s + strlen(s);
	sp = strrchr(s, ' ');
	cr_assert_not_null(sp, "folded line without a count: %s", s);
	*sp = '\0';
	l->count = strtoul(sp + 1, NULL, 10);
	l->n = 0;
	for (char *save = NULL, *f = strtok_r(s, ";", &save); f && l->n < ARRAY_SIZE(l->frames);
	     f = strtok_r(NULL, ";", &save))
		l->frames[l->n++] = f;
	return true;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/* The innermost user frame: kernel frames (_[k]) come after it. */
static size_t user_leaf(const struct line *l)
{
	size_t i = l->n;

	while (i > 1 && ends_with(l->frames[i - 1], "_[k]"))
		i--;
	return i - 1;
}

/* Do the frames before index `at` end in chain[0..k) (root first)? */
static bool has_callers(const struct line *l, size_t at, const char *const *chain, size_t k)
{
	if (at + 1 < k)
		return false;
	for (size_t i = 0; i < k; i++) {
		if (strcmp(l->frames[at + 1 - k + i], chain[i]))
			return false;
	}
	return true;
}

static void log_line(const struct line *l)
{
	char buf[2048];
	size_t len = 0;

	for (size_t i = 0; i < l->n && len < sizeof(buf); i++) {
		int r = snprintf(buf + len, sizeof(buf) - len, "%s;", l->frames[i]);

		if (r < 0)
			break;
		len += (size_t)r;
	}
	buf[sizeof(buf) - 1] = '\0';
	cr_log_info("%lu %s", l->count, buf);
}

Test(stacks, chain_without_frame_pointers_is_whole)
{
	const char *cmd[] = { need_env("FIXTURE_CHAIN"), "1.5", NULL };
	static const char *const chain[] = { "main", "a", "b", "c", "hot" };
	char *folded = record_folded(NULL, cmd), *cur = folded;
	unsigned long hot = 0, whole = 0, total = 0;
	struct line l;

	while (next_line(&cur, &l)) {
		size_t leaf = user_leaf(&l);

		total += l.count;
		if (strcmp(l.frames[leaf], "hot"))
			continue;
		hot += l.count;
		if (has_callers(&l, leaf, chain, ARRAY_SIZE(chain)))
			whole += l.count;
		else
			log_line(&l);
	}
	cr_assert_gt(hot, 500, "about 1500 samples expected in hot, got %lu of %lu", hot, total);
	cr_assert_eq(whole, hot, "%lu of %lu samples in hot show main;a;b;c;hot", whole, hot);
	free(folded);
}

Test(stacks, jit_frames_are_named_and_have_their_callers)
{
	const char *cmd[] = { need_env("FIXTURE_JIT"), "1.5", NULL };
	static const char *const plain[] = { "main", "call_plain", "jit_fixture_plain_[j]" };
	static const char *const pre[] = { "main", "call_preamble",
					   "jit_fixture_preamble_kernel_[j]" };
	static const char *const pre3[] = { "main", "call_preamble3",
					    "jit_fixture_preamble3_kernel_[j]" };
	char *folded = record_folded(NULL, cmd), *cur = folded;
	unsigned long n_plain = 0, ok_plain = 0, n_pre = 0, ok_pre = 0, total = 0, unnamed = 0;
	unsigned long n_pre3 = 0, ok_pre3 = 0;
	struct line l;

	while (next_line(&cur, &l)) {
		size_t leaf = user_leaf(&l);
		const char *f = l.frames[leaf];

		total += l.count;
		if (!strcmp(f, "[JIT]_[j]") || !strcmp(f, "[unknown]"))
			unnamed += l.count;
		if (!strcmp(f, plain[2])) {
			n_plain += l.count;
			if (has_callers(&l, leaf, plain, 3))
				ok_plain += l.count;
			else
				log_line(&l);
		} else if (!strcmp(f, pre[2])) {
			n_pre += l.count;
			if (has_callers(&l, leaf, pre, 3))
				ok_pre += l.count;
			else
				log_line(&l);
		} else if (!strcmp(f, pre3[2])) {
			n_pre3 += l.count;
			if (has_callers(&l, leaf, pre3, 3))
				ok_pre3 += l.count;
			else
				log_line(&l);
		}
	}
	/* the loops are the same length: about a third of the ~1500 samples each */
	cr_assert_gt(n_plain, 300, "jit_fixture_plain: %lu of %lu samples", n_plain, total);
	cr_assert_gt(n_pre, 300, "jit_fixture_preamble_kernel: %lu of %lu samples", n_pre, total);
	cr_assert_gt(n_pre3, 300, "jit_fixture_preamble3_kernel: %lu of %lu samples", n_pre3,
		     total);
	cr_assert_eq(ok_pre3, n_pre3, "%lu of %lu 3.x-preamble samples under main;call_preamble3",
		     ok_pre3, n_pre3);
	cr_assert_eq(ok_plain, n_plain, "%lu of %lu plain-JIT samples under main;call_plain",
		     ok_plain, n_plain);
	cr_assert_eq(ok_pre, n_pre, "%lu of %lu preamble-JIT samples under main;call_preamble",
		     ok_pre, n_pre);
	cr_assert_lt(unnamed, total / 100 + 1, "%lu samples in unnamed JIT code", unnamed);
	free(folded);
}

/*
 * A perf map an earlier process with the same pid left, read before the
 * process writes its own over it (the same length): none of its names may
 * show, and the process's own kernels are named from its own map. The
 * fixture waits until the recorder has read the old file, and exits 3 (a
 * failed record) when it never did.
 */
Test(stacks, jit_frames_are_never_named_from_an_earlier_processs_map)
{
	const char *cmd[] = { need_env("FIXTURE_JIT"), "1.0", "stale", NULL };
	char *folded = record_folded(NULL, cmd), *cur = folded;
	unsigned long total = 0, stale = 0, named = 0;
	struct line l;

	while (next_line(&cur, &l)) {
		const char *f = l.frames[user_leaf(&l)];

		total += l.count;
		if (!strncmp(f, "old_fixture_", 12)) {
			stale += l.count;
			log_line(&l);
		} else if (!strncmp(f, "jit_fixture_", 12)) {
			named += l.count;
		}
	}
	cr_assert_eq(stale, 0, "%lu of %lu samples named from the earlier process's map", stale,
		     total);
	/* about 1,000 samples in the kernels after the map was written, some before */
	cr_assert_gt(named, 500, "%lu of %lu samples in kernels named from the process's map",
		     named, total);
	free(folded);
}

/*
 * `dlflame record` of the MLP into data. Judged by how the unwinder says
 * each stack ended, never by the names of libc internals: without libc6-dbg
 * a worker's outermost frames (start_thread, clone3) have no names.
 */
/* record_mlp's last summary, for the failure messages of its callers */
static char last_summary[4096];

static char *record_mlp(char *const env[], const char *const *opts, const char *iterations)
{
	const char *mlp = need_mlp();
	char *data = path_in(dir, "mlp.data");
	const char *argv[16] = { need_env("DLFLAME"), "record", "-o", data };
	struct run_result r;
	size_t n = 4;

	for (; opts && *opts; opts++)
		argv[n++] = *opts;
	argv[n++] = "--";
	argv[n++] = mlp;
	argv[n++] = iterations;
	argv[n] = NULL;
	r = run(dir, env, NULL, argv);
	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	cr_log_info("%s", r.err);
	snprintf(last_summary, sizeof(last_summary), "%s", r.err);
	/* the summary states what the reports will */
	cr_assert_geq(complete_share(r.err), 0, "no completeness in the summary: %s", r.err);
	/* at most one line of hints, whatever the options */
	cr_assert_leq(count_str(r.err, "hint: "), 1, "%s", r.err);
	/*
	 * With the default copy size the stacks reach libc's thread entry. A
	 * smaller copy (opts) may stop before libc's frames, which then are not
	 * in any stack and not in the hint either.
	 */
	if (getenv("DLFLAME_TEST_NODEBUG") && !opts) {
		/* /usr/lib/debug is hidden: libc has no names; record says so in one line */
		cr_assert_eq(count_str(r.err, "hint: "), 1, "%s", r.err);
		cr_assert_not_null(strstr(r.err, "libc.so.6"), "%s", r.err);
		run_free(&r);
		/* ... and report --hints how to get them */
		r = run(dir, NULL, NULL,
			(const char *[]){ need_env("DLFLAME"), "report", "-i", data, "--hints",
					  NULL });
		cr_assert_eq(r.status, 0, "%s", r.err);
		cr_assert_not_null(strstr(r.out, "libc.so.6 (build-id "), "%s", r.out);
		cr_assert_not_null(strstr(r.out, "install libc6-dbg"), "%s", r.out);
		cr_assert_eq(count_str(r.out, "libc6-dbg"), 1, "said once: %s", r.out);
	}
	run_free(&r);
	return data;
}

struct trainer_stacks {
	unsigned long total, jit, jit_through_dnnl, complete, complete_entry, cut, cut_entry;
};

static void count_trainer(const char *data, struct trainer_stacks *t);

static void mlp_case(const char *threads, double want)
{
	char *env[] = { (char *)threads, NULL };
	char *data = record_mlp(env, NULL, "1500");
	double share = assert_ends_agree(data, NULL, true);
	struct trainer_stacks t;

	cr_log_info("%s: %.1f%% of stacks complete", threads, share);
	cr_assert_geq(share, want, "%s: %.1f%% of stacks complete: %s", threads, share,
		      last_summary);
	/* complete means at a thread's entry, by the files, not by the unwinder's word */
	count_trainer(data, &t);
	cr_assert_eq(t.complete_entry, t.complete,
		     "%lu of %lu samples counted complete start at a thread's entry",
		     t.complete_entry, t.complete);
	free(data);
}

Test(stacks, mlp_one_thread_stacks_are_complete)
{
	mlp_case("OMP_NUM_THREADS=1", 99.0);
}

Test(stacks, mlp_two_threads_stacks_are_complete)
{
	mlp_case("OMP_NUM_THREADS=2", 99.0);
}

/*
 * A copy too small for oneDNN's GEMM frame (about 13 KiB): those stacks are
 * cut, and the report says why, the copy first; JIT frames whose callers lie
 * beyond the copy say that instead.
 */
Test(stacks, small_copies_are_counted_cut_with_their_cause)
{
	char *env[] = { "OMP_NUM_THREADS=1", NULL };
	/*
	 * 1 KiB: with 4 KiB copies the stacks that do fit teach enough known
	 * stacks for grafts above recovered JIT callers to complete most others
	 * (90-97% complete, by timing); with oneDNN 3.x, whose GEMM kernel
	 * instances now learn their callers from each other, 2 KiB did too
	 * (50-90% complete, run to run). At 1 KiB: 0-2% on oneDNN 2.6 and 3.7.
	 */
	const char *opts[] = { "-g", "dwarf,1024", NULL };
	char *data = record_mlp(env, opts, "300");
	const char *argv[] = { need_env("DLFLAME"), "report", "-i", data, "--top", NULL };
	struct run_result r;
	double share = assert_ends_agree(data, NULL, true);

	cr_assert_lt(share, 90.0, "1 KiB copies: %.1f%% complete", share);
	r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "of stacks complete; cut: "), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "stack copy exhausted "), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "JIT caller not recovered "), "%s", r.out);
	run_free(&r);
	free(data);
}

/*
 * Is a folded root frame a thread's entry? Judged from the module's file
 * with readelf, not by the unwinder: "lib+0xS" names the CFI range that
 * starts at S, an entry when its CFI marks the return address undefined
 * (glibc's clone3 and _start do); "[lib+0xV]" is code no CFI covers, an
 * entry when it is the ELF entry point's code (ld.so's _dl_start_user); a
 * named frame by its name.
 */
#define ENTRY_CODE 128
static const char *const entry_names[] = { "_start", "clone3",	"__clone3",
					   "clone",  "__clone", "_dl_start_user" };

static bool module_file(const char *base, char *path, size_t cap)
{
	static const char *const dirs[] = { "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
					    "/lib64", "/usr/bin",
					    "/usr/lib/python3/dist-packages/torch/lib" };

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		snprintf(path, cap, "%s/%s", dirs[i], base);
		if (!access(path, R_OK))
			return true;
	}
	return false;
}

/* readelf's ELF entry point of path; 0 if none. */
static unsigned long long elf_entry(const char *path)
{
	char cmd[600], line[512];
	unsigned long long entry = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -h '%s'", path);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p))
		if (strstr(line, "Entry point address:"))
			entry = strtoull(strchr(line, ':') + 1, NULL, 16);
	pclose(p);
	return entry;
}

/* Does the CFI range starting at start say, in its first row, that the return address is undefined? */
static bool cfi_ra_undefined(const char *path, unsigned long long start)
{
	char cmd[600], line[1024], want[64];
	int ra_col = -1, state = 0;
	bool undef = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -wF '%s' 2>/dev/null", path);
	snprintf(want, sizeof(want), "pc=%016llx..", start);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *save = NULL, *tok;
		int col = 0;

		if (state == 0 && strstr(line, want)) {
			state = 1;
		} else if (state == 1) {
			/* the header: LOC CFA reg... ra */
			for (tok = strtok_r(line, " \n", &save); tok;
			     tok = strtok_r(NULL, " \n", &save))
				if (!strcmp(tok, "ra"))
					ra_col = col;
				else
					col++;
			state = ra_col >= 0 ? 2 : 3;
		} else if (state == 2) {
			for (tok = strtok_r(line, " \n", &save); tok && col < ra_col;
			     tok = strtok_r(NULL, " \n", &save))
				col++;
			undef = tok && !strcmp(tok, "u");
			state = 3;
		}
	}
	pclose(p);
	return undef;
}

struct entry_verdict {
	char name[256];
	bool entry;
};

static bool is_thread_entry(const char *name, struct entry_verdict *seen, size_t *nseen)
{
	char base[256], path[512];
	unsigned long long off;
	bool bracket = name[0] == '[', entry = false;
	const char *plus;

	for (size_t i = 0; i < ARRAY_SIZE(entry_names); i++)
		if (!strcmp(name, entry_names[i]))
			return true;
	for (size_t i = 0; i < *nseen; i++)
		if (!strcmp(seen[i].name, name))
			return seen[i].entry;
	plus = strstr(name, "+0x");
	if (plus && (size_t)(plus - name - bracket) < sizeof(base)) {
		snprintf(base, sizeof(base), "%.*s", (int)(plus - name - bracket), name + bracket);
		off = strtoull(plus + 3, NULL, 16);
		if (module_file(base, path, sizeof(path))) {
			if (bracket) {
				unsigned long long e = elf_entry(path);

				entry = e && off >= e && off - e < ENTRY_CODE;
			} else {
				entry = cfi_ra_undefined(path, off);
			}
		}
	}
	if (*nseen < 64) {
		snprintf(seen[*nseen].name, sizeof(seen[*nseen].name), "%s", name);
		seen[(*nseen)++].entry = entry;
	}
	return entry;
}

/* `dlflame report` of data, --folded with one more option (NULL: none). */
static char *report_folded(const char *data, const char *opt)
{
	const char *rep[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", opt, NULL };
	struct run_result r = run(dir, NULL, NULL, rep);
	char *out;

	cr_assert_eq(r.status, 0, "report failed: %s", r.err);
	out = r.out;
	r.out = NULL;
	run_free(&r);
	return out;
}

/*
 * Count the stacks of a recorded trainer: those counted complete and cut,
 * how many of each start at a thread's entry, and the samples in JIT code
 * (leaf `_[j]`) whose stack passes through dnnl_primitive_execute and
 * starts at a thread's entry.
 */
static void count_trainer(const char *data, struct trainer_stacks *t)
{
	struct entry_verdict *seen = calloc(64, sizeof(*seen));
	size_t nseen = 0;

	memset(t, 0, sizeof(*t));
	cr_assert_not_null(seen);
	for (int pass = 0; pass < 2; pass++) {
		char *folded = report_folded(data, pass ? "--cut" : "--complete"), *cur = folded;
		struct line l;

		while (next_line(&cur, &l)) {
			size_t leaf = user_leaf(&l);
			bool entry = l.n > 1 && is_thread_entry(l.frames[1], seen, &nseen),
			     dnnl = false;

			t->total += l.count;
			if (pass) {
				t->cut += l.count;
				t->cut_entry += entry ? l.count : 0;
			} else {
				t->complete += l.count;
				t->complete_entry += entry ? l.count : 0;
				if (!entry)
					log_line(&l);
			}
			if (!ends_with(l.frames[leaf], "_[j]"))
				continue;
			t->jit += l.count;
			for (size_t i = 1; i < leaf; i++)
				dnnl |= !strncmp(l.frames[i], "dnnl_primitive_execute", 22);
			if (dnnl && entry)
				t->jit_through_dnnl += l.count;
			else
				log_line(&l);
		}
		free(folded);
	}
	free(seen);
	cr_log_info("%lu samples: %lu complete (%lu start at a thread entry), %lu cut (%lu do); "
		    "%lu in JIT code, %lu of them through dnnl_primitive_execute from an entry",
		    t->total, t->complete, t->complete_entry, t->cut, t->cut_entry, t->jit,
		    t->jit_through_dnnl);
}

/*
 * The PyTorch CNN (examples/cnn_train.py) with one thread, on the oneDNN
 * the system's python3-torch runs (2.6 on Debian 12, 3.7 on Debian 13):
 * every stack counted complete starts at its thread's entry, and the
 * samples in oneDNN's JIT kernels have their callers, through
 * dnnl_primitive_execute, to the thread's entry.
 */
Test(stacks, cnn_one_thread_jit_stacks_reach_their_entry, .timeout = 900)
{
	const char *probe[] = { "/usr/bin/python3", "-c", "import torch", NULL };
	char *script = path_in(need_env("EXAMPLES"), "cnn_train.py");
	char *data = path_in(dir, "cnn.data");
	char *env[] = { "OMP_NUM_THREADS=1", NULL };
	const char *argv[] = { need_env("DLFLAME"),
			       "record",
			       "--forward-exit",
			       "-o",
			       data,
			       "--",
			       "/usr/bin/python3",
			       script,
			       "30",
			       "--threads",
			       "1",
			       NULL };
	struct trainer_stacks t;
	struct run_result r = run(dir, NULL, NULL, probe);

	cr_assert_eq(r.status, 0, "python3-torch (scripts/setup.sh installs it): %s", r.err);
	run_free(&r);
	r = run(dir, env, NULL, argv);
	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	cr_log_info("%s", r.err);
	run_free(&r);
	/* Python-cut stacks end in their own placeholder, inside the stack */
	assert_ends_agree(data, NULL, false);
	count_trainer(data, &t);
	cr_assert_eq(t.complete_entry, t.complete,
		     "%lu of %lu samples counted complete start at a thread's entry",
		     t.complete_entry, t.complete);
	cr_assert_gt(t.jit, 100, "%lu samples in JIT code of %lu", t.jit, t.total);
	cr_assert_geq(t.jit_through_dnnl, t.jit * 99 / 100,
		      "%lu of %lu JIT samples through dnnl_primitive_execute from a thread entry",
		      t.jit_through_dnnl, t.jit);
	free(script);
	free(data);
}
