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
	char *folded = record_folded(NULL, cmd), *cur = folded;
	unsigned long n_plain = 0, ok_plain = 0, n_pre = 0, ok_pre = 0, total = 0, unnamed = 0;
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
		}
	}
	/* the loops are the same length: about half of the ~1500 samples each */
	cr_assert_gt(n_plain, 300, "jit_fixture_plain: %lu of %lu samples", n_plain, total);
	cr_assert_gt(n_pre, 300, "jit_fixture_preamble_kernel: %lu of %lu samples", n_pre, total);
	cr_assert_eq(ok_plain, n_plain, "%lu of %lu plain-JIT samples under main;call_plain",
		     ok_plain, n_plain);
	cr_assert_eq(ok_pre, n_pre, "%lu of %lu preamble-JIT samples under main;call_preamble",
		     ok_pre, n_pre);
	cr_assert_lt(unnamed, total / 100 + 1, "%lu samples in unnamed JIT code", unnamed);
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
	if (getenv("DLFLAME_TEST_NODEBUG")) {
		/* /usr/lib/debug is hidden: libc has no names, and record says how to get them */
		cr_assert_not_null(strstr(r.err, "hint: "), "%s", r.err);
		cr_assert_not_null(strstr(r.err, "libc.so.6 (build-id "), "%s", r.err);
		cr_assert_not_null(strstr(r.err, "install libc6-dbg"), "%s", r.err);
		cr_assert_eq(count_str(r.err, "libc6-dbg"), 1, "said once: %s", r.err);
	}
	run_free(&r);
	return data;
}

static void mlp_case(const char *threads, double want)
{
	char *env[] = { (char *)threads, NULL };
	char *data = record_mlp(env, NULL, "1500");
	double share = assert_ends_agree(data, NULL, true);

	cr_log_info("%s: %.1f%% of stacks complete", threads, share);
	cr_assert_geq(share, want, "%s: %.1f%% of stacks complete: %s", threads, share,
		      last_summary);
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
	 * 2 KiB: with 4 KiB copies the stacks that do fit teach enough known
	 * stacks for grafts above recovered JIT callers to complete most others
	 * (90-97% complete, by timing).
	 */
	const char *opts[] = { "-g", "dwarf,2048", NULL };
	char *data = record_mlp(env, opts, "300");
	const char *argv[] = { need_env("DLFLAME"), "report", "-i", data, "--top", NULL };
	struct run_result r;
	double share = assert_ends_agree(data, NULL, true);

	cr_assert_lt(share, 90.0, "2 KiB copies: %.1f%% complete", share);
	r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "of stacks complete; cut: "), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "stack copy exhausted "), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "JIT caller not recovered "), "%s", r.out);
	run_free(&r);
	free(data);
}
