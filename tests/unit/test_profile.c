/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "profile/filter.h"
#include "profile/profile.h"

static struct profile *make_profile(void)
{
	struct profile *p = profile__new();
	cr_assert_not_null(p);
	int64_t fmain = profile__frame_str(p, "main", "app", FRAME_USER);
	int64_t fwork = profile__frame_str(p, "work", "app", FRAME_USER);
	int64_t fsys = profile__frame_str(p, "do_syscall_64", "[kernel.kallsyms]", FRAME_KERNEL);
	int64_t s1 = profile__stack(p, 0, fmain);
	int64_t s2 = profile__stack(p, s1, fwork);
	int64_t s3 = profile__stack(p, s2, fsys);
	int64_t comm = profile__string(p, "app", 3);
	int64_t t1 = profile__thread(p, 100, 100, comm);
	int64_t t2 = profile__thread(p, 100, 101, comm);

	cr_assert(fmain >= 0 && fwork >= 0 && fsys >= 0 && s3 > 0 && t2 > t1);
	for (int i = 0; i < 1000; i++) {
		struct pf_sample s = {
			.time = 1000000 + i * 1001001ULL,
			.weight = 1001001,
			.stack = i % 3 ? s2 : s3,
			.thread = i % 2 ? t1 : t2,
			.kind = SAMPLE_ONCPU,
		};
		cr_assert_eq(profile__add_sample(p, &s), 0);
	}
	struct pf_meta *m = profile__meta(p);
	m->start_time = 1000000;
	m->end_time = 2000000000;
	m->lost = 7;
	m->freq = 999;
	m->event = profile__string(p, "cpu-clock", 9);
	m->command = profile__string(p, "./app --x", 9);
	m->finalized = true;
	return p;
}

static uint64_t get_le64_test(const uint8_t *b)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static char tmpdir[64];

static void mk_tmp(void)
{
	strcpy(tmpdir, "/tmp/dlflame-test-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tmp(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	cr_assert_eq(system(cmd), 0);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	*len = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(*len + 1);
	cr_assert_eq(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

TestSuite(profile, .init = mk_tmp, .fini = rm_tmp);

Test(profile, interning_is_stable)
{
	struct profile *p = profile__new();
	int64_t a = profile__string(p, "abc", 3);
	int64_t b = profile__string(p, "abd", 3);

	cr_assert_eq(profile__string(p, "", 0), 0, "string 0 is the empty string");
	cr_assert_neq(a, b);
	cr_assert_eq(profile__string(p, "abc", 3), a);
	int64_t f = profile__frame(p, a, b, FRAME_USER);
	cr_assert_eq(profile__frame(p, a, b, FRAME_USER), f);
	cr_assert_neq(profile__frame(p, a, b, FRAME_KERNEL), f);
	cr_assert_eq(profile__frame(p, 999, 0, FRAME_USER), -EINVAL);
	int64_t s = profile__stack(p, 0, f);
	cr_assert_eq(profile__stack(p, 0, f), s);
	cr_assert_eq(profile__stack_depth(p, s), 1);
	int64_t s2 = profile__stack(p, s, f);
	cr_assert_eq(profile__stack_depth(p, s2), 2);
	cr_assert_eq(profile__stack(p, 12345, f), -EINVAL);
	/* many strings survive rehashing */
	char buf[32];
	for (int i = 0; i < 50000; i++) {
		int n = snprintf(buf, sizeof(buf), "s%d", i);
		cr_assert_eq(profile__string(p, buf, n), 3 + i);
	}
	cr_assert_str_eq(profile__str(p, 3 + 4242), "s4242");
	profile__free(p);
}

Test(profile, round_trip)
{
	struct profile *p = make_profile(), *q = NULL;
	struct profile_read_error e = { 0 };
	char path[128];

	snprintf(path, sizeof(path), "%s/a.data", tmpdir);
	cr_assert_eq(profile__write(p, path), 0);
	cr_assert_eq(profile__read(path, &q, &e), 0, "%s at %lu", e.what, (unsigned long)e.offset);
	cr_assert_eq(profile__nr_samples(q), profile__nr_samples(p));
	cr_assert_eq(profile__nr_stacks(q), profile__nr_stacks(p));
	cr_assert_eq(profile__nr_threads(q), 2);
	for (size_t i = 0; i < profile__nr_samples(p); i++) {
		const struct pf_sample *a = profile__get_sample(p, i),
				       *b = profile__get_sample(q, i);
		cr_assert_eq(a->time, b->time);
		cr_assert_eq(a->weight, b->weight);
		cr_assert_eq(profile__stack_depth(p, a->stack), profile__stack_depth(q, b->stack));
		const struct pf_frame *fa =
			profile__get_frame(p, profile__get_stack(p, a->stack)->frame);
		const struct pf_frame *fb =
			profile__get_frame(q, profile__get_stack(q, b->stack)->frame);
		cr_assert_str_eq(profile__str(p, fa->name), profile__str(q, fb->name));
		cr_assert_eq(fa->kind, fb->kind);
		cr_assert_eq(profile__get_thread(p, a->thread)->tid,
			     profile__get_thread(q, b->thread)->tid);
	}
	const struct pf_meta *m = profile__cmeta(q);
	cr_assert_eq(m->lost, 7);
	cr_assert_eq(m->freq, 999);
	cr_assert(m->finalized);
	cr_assert_str_eq(profile__str(q, m->event), "cpu-clock");
	cr_assert_str_eq(profile__str(q, m->command), "./app --x");
	profile__free(p);
	profile__free(q);
}

Test(profile, write_replaces_symlink_instead_of_following_it)
{
	struct profile *p = make_profile();
	char path[128], victim[128];
	struct stat st;

	snprintf(path, sizeof(path), "%s/out.data", tmpdir);
	snprintf(victim, sizeof(victim), "%s/victim", tmpdir);
	FILE *f = fopen(victim, "w");
	fputs("keep", f);
	fclose(f);
	cr_assert_eq(symlink(victim, path), 0);
	cr_assert_eq(profile__write(p, path), 0);
	cr_assert_eq(lstat(path, &st), 0);
	cr_assert(S_ISREG(st.st_mode), "the symlink was replaced by a file");
	cr_assert_eq(stat(victim, &st), 0);
	cr_assert_eq(st.st_size, 4, "the symlink's target is untouched");
	profile__free(p);
}

Test(profile, every_truncation_is_an_error)
{
	struct profile *p = make_profile(), *q = NULL;
	char path[128];
	size_t len;

	snprintf(path, sizeof(path), "%s/t.data", tmpdir);
	cr_assert_eq(profile__write(p, path), 0);
	uint8_t *buf = slurp(path, &len);
	for (size_t cut = 0; cut < len; cut++) {
		struct profile_read_error e = { 0 };
		q = NULL;
		cr_assert_eq(profile__read_mem(buf, cut, &q, &e), -EINVAL, "cut at %zu", cut);
		cr_assert_null(q);
		cr_assert_not_null(e.what);
	}
	free(buf);
	profile__free(p);
}

Test(profile, bit_flips_never_crash_and_are_detected)
{
	struct profile *p = make_profile(), *q;
	char path[128];
	size_t len;

	snprintf(path, sizeof(path), "%s/f.data", tmpdir);
	cr_assert_eq(profile__write(p, path), 0);
	uint8_t *buf = slurp(path, &len);
	for (size_t i = 0; i < len * 8; i++) {
		size_t at = i / 8;
		uint8_t bit = 1u << (i % 8);
		struct profile_read_error e = { 0 };

		buf[at] ^= bit;
		q = NULL;
		int r = profile__read_mem(buf, len, &q, &e);
		cr_assert_eq(r, -EINVAL, "flip at %zu", at);
		profile__free(q);
		buf[at] ^= bit;
	}
	free(buf);
	profile__free(p);
}

Test(profile, foreign_and_empty_files)
{
	struct profile *q = NULL;
	struct profile_read_error e = { 0 };
	uint8_t junk[4096] = { 0 };

	cr_assert_eq(profile__read_mem(junk, 0, &q, &e), -EINVAL);
	cr_assert_str_eq(e.what, "empty file");
	srand(2);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = rand();
	cr_assert_eq(profile__read_mem(junk, sizeof(junk), &q, &e), -EINVAL);
	cr_assert_not_null(strstr(e.what, "magic"));
	memcpy(junk, PROFILE_MAGIC, 8);
	junk[8] = 99; /* version */
	junk[9] = junk[10] = junk[11] = 0;
	cr_assert_eq(profile__read_mem(junk, sizeof(junk), &q, &e), -EINVAL);
	cr_assert_not_null(strstr(e.what, "version"));
	cr_assert_eq(profile__read("/nonexistent/x.data", &q, &e), -ENOENT);
	cr_assert_eq(profile__read("/dev/null", &q, &e), -EINVAL, "a device is not read");
}

Test(profile, claimed_huge_payload_is_refused_before_allocating)
{
	struct profile *p = make_profile(), *q = NULL;
	struct profile_read_error e = { 0 };
	char path[128];
	size_t len;

	snprintf(path, sizeof(path), "%s/b.data", tmpdir);
	cr_assert_eq(profile__write(p, path), 0);
	uint8_t *buf = slurp(path, &len);
	buf[16 + 7] = 0x10; /* payload length: 2^60 */
	cr_assert_eq(profile__read_mem(buf, len, &q, &e), -EINVAL);
	cr_assert_not_null(strstr(e.what, "8 GiB"), "%s", e.what);
	free(buf);
	profile__free(p);
}

/* A chain of `depth` frames with a sample at every level, written to path. */
static void write_chain(const char *path, uint32_t depth)
{
	struct profile *p = profile__new();
	int64_t name = profile__string(p, "f", 1), t = profile__thread(p, 1, 1, (uint32_t)name);
	int64_t fr = profile__frame(p, (uint32_t)name, 0, FRAME_USER), st = 0;

	cr_assert(name > 0 && t >= 0 && fr >= 0);
	for (uint32_t d = 0; d < depth; d++) {
		st = profile__stack(p, (uint32_t)st, (uint32_t)fr);
		cr_assert_geq(st, 0);
		cr_assert_eq(profile__add_sample(p, &(struct pf_sample){ .time = d,
									 .weight = 1,
									 .stack = (uint32_t)st,
									 .thread = (uint32_t)t }),
			     0);
	}
	cr_assert_eq(profile__write(p, path), 0);
	profile__free(p);
}

/*
 * Deeper than the recorder writes: refused at once, so that no output has
 * to be built from depth x samples. As deep as it writes: read.
 */
Test(profile, stacks_deeper_than_recorded_are_refused)
{
	struct profile *q = NULL;
	struct profile_read_error e = { 0 };
	char path[128];

	snprintf(path, sizeof(path), "%s/deep.data", tmpdir);
	write_chain(path, PROFILE_MAX_DEPTH + 1);
	cr_assert_eq(profile__read(path, &q, &e), -EINVAL);
	cr_assert_not_null(strstr(e.what, "deeper than dlflame records"), "%s", e.what);
	cr_assert(e.in_payload);
	write_chain(path, PROFILE_MAX_DEPTH);
	cr_assert_eq(profile__read(path, &q, &e), 0);
	cr_assert_eq(profile__nr_samples(q), PROFILE_MAX_DEPTH);
	profile__free(q);
}

/*
 * Samples that compress better than any recording's (1,000,000 alike) are
 * stored, so that the reader's ratio cap never refuses what was written;
 * a header claiming more than that ratio is refused.
 */
Test(profile, compression_ratio_is_capped_both_ways)
{
	struct profile *p = make_profile(), *q = NULL;
	struct profile_read_error e = { 0 };
	struct pf_sample s0;
	char path[128];
	size_t len;
	uint8_t *buf;

	snprintf(path, sizeof(path), "%s/flat.data", tmpdir);
	s0 = *profile__get_sample(p, 0);
	for (int i = 0; i < 1000000; i++)
		cr_assert_eq(profile__add_sample(p, &s0), 0);
	cr_assert_eq(profile__write(p, path), 0);
	buf = slurp(path, &len);
	cr_assert_leq(get_le64_test(buf + 16), get_le64_test(buf + 24) * 100, "ratio %.0f:1",
		      (double)get_le64_test(buf + 16) / (double)get_le64_test(buf + 24));
	cr_assert_eq(profile__read_mem(buf, len, &q, &e), 0, "%s", e.what);
	cr_assert_eq(profile__nr_samples(q), profile__nr_samples(p));
	profile__free(q);
	free(buf);

	/* the payload length of a small file, claimed 200 times its compressed size */
	snprintf(path, sizeof(path), "%s/b.data", tmpdir);
	profile__free(p);
	p = make_profile();
	cr_assert_eq(profile__write(p, path), 0);
	buf = slurp(path, &len);
	uint64_t claim = get_le64_test(buf + 24) * 200;
	memcpy(buf + 16, &claim, 8);
	cr_assert_eq(profile__read_mem(buf, len, &q, &e), -EINVAL);
	cr_assert_not_null(strstr(e.what, "100:1"), "%s", e.what);
	free(buf);
	profile__free(p);
}

static int expand_double(void *ctx, uint32_t frame, uint32_t *out, size_t max)
{
	(void)ctx;
	cr_assert_geq(max, 2);
	out[0] = frame;
	out[1] = frame;
	return 2;
}

/* Inline levels past the deepest stack a profile holds are left out, and said so. */
Test(profile, expand_frames_stops_at_the_depth_cap)
{
	struct profile *p = profile__new();
	int64_t name = profile__string(p, "f", 1), t = profile__thread(p, 1, 1, (uint32_t)name);
	int64_t fr = profile__frame(p, (uint32_t)name, 0, FRAME_USER), st = 0;
	const uint32_t depth = PROFILE_MAX_DEPTH / 2 + 100;
	const struct pf_sample *s;

	for (uint32_t d = 0; d < depth; d++)
		st = profile__stack(p, (uint32_t)st, (uint32_t)fr);
	profile__set_stack_end(p, (uint32_t)st, STACK_END_COMPLETE);
	cr_assert_eq(profile__add_sample(p, &(struct pf_sample){ .weight = 1,
								 .stack = (uint32_t)st,
								 .thread = (uint32_t)t }),
		     0);
	cr_assert_eq(profile__expand_frames(p, expand_double, NULL), 0);
	s = profile__get_sample(p, 0);
	cr_assert_eq(profile__stack_depth(p, s->stack), PROFILE_MAX_DEPTH);
	cr_assert_eq(profile__stack_end(p, s->stack), STACK_END_DEPTH);
	profile__free(p);
}

static int64_t frame_at(struct profile *p, const char *name, const char *file, uint32_t line)
{
	struct pf_frame f = {
		.name = profile__string(p, name, strlen(name)),
		.module = profile__string(p, "app", 3),
		.kind = FRAME_USER,
		.file = profile__string(p, file, strlen(file)),
		.line = line,
		.build_id = profile__string(p, "abcdef", 6),
	};
	return profile__frame_full(p, &f);
}

Test(profile, lines_round_trip_and_relabel)
{
	struct profile *p = profile__new(), *q = NULL, *merged, *lines;
	struct profile_read_error e = { 0 };
	char path[128];
	int64_t fmain = frame_at(p, "main", "src/app.c", 10);
	int64_t w1 = frame_at(p, "work", "src/app.c", 20);
	int64_t w2 = frame_at(p, "work", "src/app.c", 21);
	int64_t comm = profile__string(p, "app", 3);
	int64_t t = profile__thread(p, 1, 1, comm);
	int64_t root = profile__stack(p, 0, fmain);
	int64_t s1 = profile__stack(p, root, w1), s2 = profile__stack(p, root, w2);

	cr_assert_neq(w1, w2, "frames at different lines are different frames");
	for (int i = 0; i < 10; i++) {
		struct pf_sample s = {
			.time = i, .weight = 1, .stack = i < 3 ? s1 : s2, .thread = t
		};
		cr_assert_eq(profile__add_sample(p, &s), 0);
	}
	snprintf(path, sizeof(path), "%s/l.data", tmpdir);
	cr_assert_eq(profile__write(p, path), 0);
	cr_assert_eq(profile__read(path, &q, &e), 0, "%s", e.what);
	const struct pf_frame *f = profile__get_frame(
		q, profile__get_stack(q, profile__get_sample(q, 0)->stack)->frame);
	cr_assert_str_eq(profile__str(q, f->file), "src/app.c");
	cr_assert_eq(f->line, 20);
	cr_assert_str_eq(profile__str(q, f->build_id), "abcdef");

	merged = profile__relabel(q, false);
	cr_assert_not_null(merged);
	cr_assert_eq(profile__nr_samples(merged), 10);
	cr_assert_eq(profile__nr_stacks(merged), 3,
		     "root, main, work: the two lines of work merge");
	cr_assert_eq(profile__get_sample(merged, 0)->stack, profile__get_sample(merged, 9)->stack);
	f = profile__get_frame(
		merged, profile__get_stack(merged, profile__get_sample(merged, 0)->stack)->frame);
	cr_assert_str_eq(profile__str(merged, f->name), "work");
	cr_assert_str_eq(profile__str(merged, f->build_id), "abcdef", "build-ids survive");

	lines = profile__relabel(q, true);
	cr_assert_not_null(lines);
	cr_assert_eq(profile__nr_stacks(lines), 4);
	f = profile__get_frame(
		lines, profile__get_stack(lines, profile__get_sample(lines, 0)->stack)->frame);
	cr_assert_str_eq(profile__str(lines, f->name), "work (app.c:20)");
	cr_assert_eq(profile__cmeta(lines)->lost, profile__cmeta(q)->lost);
	profile__free(p);
	profile__free(q);
	profile__free(merged);
	profile__free(lines);
}

/* ---- spilling samples to a temporary file -------------------------------- */

#define NR_SPILL 10007 /* not a multiple of any chunk size */

/* A profile with NR_SPILL distinct samples; spills every `at` samples into dir (0: never). */
static struct profile *spill_profile(size_t at, const char *dir)
{
	struct profile *p = profile__new();
	int64_t comm = profile__string(p, "app", 3);
	int64_t f = profile__frame_str(p, "hot", "app", FRAME_USER);
	int64_t s1 = profile__stack(p, 0, f), s2 = profile__stack(p, s1, f);
	int64_t t1 = profile__thread(p, 1, 1, comm), t2 = profile__thread(p, 1, 2, comm);

	cr_assert(s2 > s1 && t2 > t1);
	cr_assert_eq(profile__set_spill(p, at, dir), 0);
	for (uint64_t i = 0; i < NR_SPILL; i++) {
		struct pf_sample s = {
			.time = 1000 + i * 977,
			.weight = i * i + 1,
			.stack = i % 3 ? s1 : s2,
			.thread = i % 5 ? t1 : t2,
			.kind = i % SAMPLE_KIND_MAX,
		};
		cr_assert_eq(profile__add_sample(p, &s), 0);
	}
	profile__meta(p)->finalized = true;
	return p;
}

static size_t dir_entries(const char *dir)
{
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "exit $(ls -A %s | wc -l)", dir);
	return (size_t)WEXITSTATUS(system(cmd));
}

/* Open descriptors of this process that name a file in dir (deleted or not). */
static size_t fds_into(const char *dir)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "exit $(ls -l /proc/%d/fd | grep -c ' %s/')", (int)getpid(),
		 dir);
	return (size_t)WEXITSTATUS(system(cmd));
}

Test(profile, spilled_samples_round_trip_exactly)
{
	char spool[128], path[128], ref[128];
	struct profile_read_error e = { 0 };
	struct profile *p, *r, *q = NULL;

	snprintf(spool, sizeof(spool), "%s/spool", tmpdir);
	cr_assert_eq(mkdir(spool, 0700), 0);
	p = spill_profile(7, spool);
	cr_assert_gt(profile__nr_spilled(p), NR_SPILL - 8, "samples were spilled");
	cr_assert_eq(profile__nr_samples(p), NR_SPILL);
	cr_assert_eq(dir_entries(spool), 0, "the spool file is unlinked");
	cr_assert_eq(fds_into(spool), 1, "one spool file is open");

	snprintf(path, sizeof(path), "%s/spilled.data", tmpdir);
	cr_assert_eq(profile__write(p, path), 0);
	cr_assert_eq(profile__read(path, &q, &e), 0, "%s at %lu", e.what, (unsigned long)e.offset);
	cr_assert_eq(profile__nr_samples(q), NR_SPILL);
	cr_assert_eq(profile__nr_spilled(q), 0);
	r = spill_profile(0, NULL);
	for (size_t i = 0; i < NR_SPILL; i++) {
		const struct pf_sample *a = profile__get_sample(q, i),
				       *b = profile__get_sample(r, i);

		cr_assert(a->time == b->time && a->weight == b->weight && a->stack == b->stack &&
				  a->thread == b->thread && a->kind == b->kind,
			  "sample %zu differs", i);
	}

	/* the file is the one an unspilled profile gives, and the one compress2() gave */
	snprintf(ref, sizeof(ref), "%s/ref.data", tmpdir);
	cr_assert_eq(profile__write(r, ref), 0);
	size_t len, rlen;
	uint8_t *a = slurp(path, &len), *b = slurp(ref, &rlen);
	cr_assert_eq(len, rlen);
	cr_assert_eq(memcmp(a, b, len), 0, "spilling changes the file");
	uLongf plen = get_le64_test(a + 16), zlen = compressBound(plen);
	uint8_t *payload = malloc(plen), *z = malloc(zlen);
	uLongf got = plen;
	cr_assert_eq(uncompress(payload, &got, a + 40, len - 40), Z_OK);
	cr_assert_eq(got, plen);
	cr_assert_eq(compress2(z, &zlen, payload, plen, 6), Z_OK);
	cr_assert_eq(zlen, len - 40);
	cr_assert_eq(memcmp(z, a + 40, zlen), 0);

	/* relabel reads spilled samples back too */
	struct profile *v = profile__relabel(p, false);
	cr_assert_not_null(v);
	cr_assert_eq(profile__nr_samples(v), NR_SPILL);
	for (size_t i = 0; i < NR_SPILL; i++)
		cr_assert_eq(profile__get_sample(v, i)->time, profile__get_sample(r, i)->time);

	profile__free(v);
	profile__free(p);
	cr_assert_eq(fds_into(spool), 0, "the spool file is closed with the profile");
	cr_assert_eq(dir_entries(spool), 0);
	free(a);
	free(b);
	free(payload);
	free(z);
	profile__free(q);
	profile__free(r);
}

Test(profile, spilled_write_errors_are_reported)
{
	char spool[128], path[128];
	struct profile *p;

	snprintf(spool, sizeof(spool), "%s/spool", tmpdir);
	cr_assert_eq(mkdir(spool, 0700), 0);
	p = spill_profile(100, spool);
	cr_assert_gt(profile__nr_spilled(p), 0);
	cr_assert_eq(profile__write(p, "/dev/full"), -ENOSPC);
	snprintf(path, sizeof(path), "%s/no/such/dir/a.data", tmpdir);
	cr_assert_lt(profile__write(p, path), 0);
	/* a device output is written in one pass after a measuring pass */
	cr_assert_eq(profile__write(p, "/dev/null"), 0);
	profile__free(p);
	cr_assert_eq(dir_entries(spool), 0, "no spool file is left behind");
	cr_assert_eq(fds_into(spool), 0);
}

Test(profile, spill_falls_back_to_tmpdir)
{
	struct profile *p = spill_profile(100, "/nonexistent-dlflame-dir");
	char path[128];
	struct profile *q = NULL;

	cr_assert_gt(profile__nr_spilled(p), 0);
	snprintf(path, sizeof(path), "%s/a.data", tmpdir);
	cr_assert_eq(profile__write(p, path), 0);
	cr_assert_eq(profile__read(path, &q, NULL), 0);
	cr_assert_eq(profile__nr_samples(q), NR_SPILL);
	profile__free(q);
	profile__free(p);
}

/*
 * Frames named only after recording: placeholder frames become chains
 * (an inline level and its function), stacks that become equal merge, and
 * every sample, spilled or not, follows its stack.
 */
struct expand_case {
	uint32_t ph1, ph2, fn, inl;
	int calls;
};

static int expand_cb(void *ctx, uint32_t frame, uint32_t *out, size_t max)
{
	struct expand_case *c = ctx;

	cr_assert_geq(max, 2);
	c->calls++;
	if (frame != c->ph1 && frame != c->ph2) {
		out[0] = frame;
		return 1;
	}
	out[0] = c->fn; /* root-first: the function, then what was inlined into it */
	out[1] = c->inl;
	return 2;
}

Test(profile, expand_frames_rebuilds_stacks_and_repoints_samples)
{
	struct profile *p = profile__new(), *q = NULL;
	struct profile_read_error e = { 0 };
	struct expand_case c = { 0 };
	char path[128];
	int64_t fmain, s_main, s1, s2, s_k, t, fk;

	cr_assert_not_null(p);
	cr_assert_eq(profile__set_spill(p, 100, tmpdir), 0);
	fmain = profile__frame_str(p, "main", "app", FRAME_USER);
	c.ph1 = (uint32_t)profile__frame_str(p, "", "", FRAME_SPECIAL);
	c.ph2 = (uint32_t)profile__frame_str(p, "?", "", FRAME_SPECIAL);
	fk = profile__frame_str(p, "do_syscall_64", "[kernel.kallsyms]", FRAME_KERNEL);
	s_main = profile__stack(p, 0, (uint32_t)fmain);
	s1 = profile__stack(p, (uint32_t)s_main, c.ph1);
	s2 = profile__stack(p, (uint32_t)s_main, c.ph2);
	s_k = profile__stack(p, (uint32_t)s2, (uint32_t)fk);
	t = profile__thread(p, 1, 1, 0);
	cr_assert(s1 > 0 && s2 > 0 && s_k > 0 && t >= 0);
	/* interned by the callback's owner before expanding, as the collector does */
	c.fn = (uint32_t)profile__frame_str(p, "work", "app", FRAME_USER);
	c.inl = (uint32_t)profile__frame_str(p, "helper", "app", FRAME_INLINED);
	/* how each stack ended stays with it through the rebuild */
	cr_assert_eq(profile__set_stack_end(p, (uint32_t)s1, STACK_END_COMPLETE), 0);
	cr_assert_eq(profile__set_stack_end(p, (uint32_t)s_k, STACK_END_COPY), 0);

	for (int i = 0; i < 1000; i++) {
		struct pf_sample s = { .time = (uint64_t)i,
				       .weight = 1,
				       .stack = (uint32_t)(i % 3 == 0	? s1
							   : i % 3 == 1 ? s2
									: s_k),
				       .thread = (uint32_t)t };
		cr_assert_eq(profile__add_sample(p, &s), 0);
	}
	cr_assert_gt(profile__nr_spilled(p), 800);
	cr_assert_eq(profile__expand_frames(p, expand_cb, &c), 0);
	cr_assert_eq(c.calls, 4, "one call per frame in use");

	/* main, work, helper, do_syscall_64: the placeholders are gone */
	cr_assert_eq(profile__nr_frames(p), 4);
	for (size_t i = 0; i < profile__nr_frames(p); i++)
		cr_assert_neq(profile__get_frame(p, (uint32_t)i)->kind, FRAME_SPECIAL);
	/* root, main, main;work, main;work;helper, ...;do_syscall_64 */
	cr_assert_eq(profile__nr_stacks(p), 5);

	snprintf(path, sizeof(path), "%s/expanded.data", tmpdir);
	cr_assert_eq(profile__write(p, path), 0);
	cr_assert_eq(profile__read(path, &q, &e), 0, "%s at %lu", e.what, (unsigned long)e.offset);
	cr_assert_eq(profile__nr_samples(q), 1000);
	for (size_t i = 0; i < 1000; i++) {
		const struct pf_sample *s = profile__get_sample(q, i);
		const char *want[] = { "main", "work", "helper", "do_syscall_64" };
		size_t depth = s->time % 3 == 2 ? 4 : 3;
		uint32_t st = s->stack;

		cr_assert_eq(s->time, i);
		cr_assert_eq(profile__stack_depth(q, st), depth, "sample %zu", i);
		/* s1 and s2 became one stack, which keeps s1's end */
		cr_assert_eq(profile__stack_end(q, st),
			     s->time % 3 == 2 ? STACK_END_COPY : STACK_END_COMPLETE, "sample %zu",
			     i);
		for (size_t d = depth; d-- > 0; st = profile__get_stack(q, st)->parent)
			cr_assert_str_eq(
				profile__str(q,
					     profile__get_frame(q, profile__get_stack(q, st)->frame)
						     ->name),
				want[d], "sample %zu level %zu", i, d);
	}
	profile__free(q);
	profile__free(p);
}

static int expand_fail(void *ctx, uint32_t frame, uint32_t *out, size_t max)
{
	(void)ctx, (void)frame, (void)out, (void)max;
	return -ENOMEM;
}

static int expand_bad(void *ctx, uint32_t frame, uint32_t *out, size_t max)
{
	(void)ctx, (void)frame, (void)max;
	out[0] = 1u << 30; /* no such frame */
	return 1;
}

Test(profile, expand_frames_errors_are_returned)
{
	struct profile *p = make_profile();

	char path[128];
	struct profile *q = NULL;

	cr_assert_eq(profile__expand_frames(p, expand_fail, NULL), -ENOMEM);
	/* the profile is as it was */
	snprintf(path, sizeof(path), "%s/after-error.data", tmpdir);
	cr_assert_eq(profile__write(p, path), 0);
	cr_assert_eq(profile__read(path, &q, NULL), 0);
	cr_assert_eq(profile__nr_samples(q), 1000);
	cr_assert_eq(profile__nr_stacks(q), 4);
	profile__free(q);
	profile__free(p);
	p = make_profile();
	cr_assert_eq(profile__expand_frames(p, expand_bad, NULL), -EINVAL);
	profile__free(p);
}

Test(profile, stack_ends_are_kept_and_written)
{
	struct profile *p = make_profile(), *q = NULL, *r;
	struct profile_read_error e = { 0 };
	uint32_t leaf = (uint32_t)profile__nr_stacks(p) - 1; /* main;work;do_syscall_64 */
	char path[128];

	cr_assert_eq(profile__stack_end(p, leaf), STACK_END_UNKNOWN);
	cr_assert_eq(profile__set_stack_end(p, leaf, STACK_END_JIT), 0);
	/* the first end stays; unknown never overrides */
	cr_assert_eq(profile__set_stack_end(p, leaf, STACK_END_COMPLETE), 0);
	cr_assert_eq(profile__set_stack_end(p, leaf - 1, STACK_END_COMPLETE), 0);
	cr_assert_eq(profile__stack_end(p, leaf), STACK_END_JIT);
	cr_assert_eq(profile__set_stack_end(p, leaf, STACK_END_MAX), -EINVAL);
	cr_assert_eq(profile__set_stack_end(p, leaf + 1, STACK_END_COPY), -EINVAL);

	snprintf(path, sizeof(path), "%s/ends.data", tmpdir);
	cr_assert_eq(profile__write(p, path), 0);
	cr_assert_eq(profile__read(path, &q, &e), 0, "%s at %lu", e.what, (unsigned long)e.offset);
	for (size_t i = 0; i < profile__nr_samples(q); i++) {
		const struct pf_sample *s = profile__get_sample(q, i);

		cr_assert_eq(profile__stack_end(q, s->stack), profile__stack_depth(q, s->stack) == 3
								      ? STACK_END_JIT
								      : STACK_END_COMPLETE);
	}
	r = profile__relabel(q, false);
	cr_assert_not_null(r);
	for (size_t i = 0; i < profile__nr_samples(r); i++) {
		const struct pf_sample *s = profile__get_sample(r, i);

		cr_assert_eq(profile__stack_end(r, s->stack), profile__stack_depth(r, s->stack) == 3
								      ? STACK_END_JIT
								      : STACK_END_COMPLETE);
	}
	cr_assert_str_eq(profile__stack_end_name(STACK_END_COPY), "stack copy exhausted");
	profile__free(r);
	profile__free(q);
	profile__free(p);
}

/* Written by the version-1 writer (before stack ends): still read, every end unknown. */
Test(profile, version_1_files_still_read)
{
	struct profile *p = NULL;
	struct profile_read_error e = { 0 };

	cr_assert_eq(profile__read(FIXTURES_SRC "/../golden/fixed-v1.data", &p, &e), 0, "%s at %lu",
		     e.what, (unsigned long)e.offset);
	cr_assert_gt(profile__nr_samples(p), 20);
	for (size_t i = 0; i < profile__nr_stacks(p); i++)
		cr_assert_eq(profile__stack_end(p, (uint32_t)i), STACK_END_UNKNOWN);
	cr_assert_not(profile__hints(p, &(const struct pf_hint *){ NULL }, &(size_t){ 0 }),
		      "no hints stored: reports compute them");
	profile__free(p);
}

/*
 * The recorder's symbol hints (HNTS) go through the file as stored, in a
 * section that readers of the same version without it skip: the version
 * stays 4. A profile without them says so, and bad entries are refused.
 */
Test(profile, hints_round_trip_and_profiles_without_them)
{
	struct profile *p = make_profile(), *q = NULL;
	struct profile_read_error e = { 0 };
	const struct pf_hint *h;
	size_t n = 99, len;
	char path[128];
	uint8_t *buf;

	snprintf(path, sizeof(path), "%s/h.data", tmpdir);
	cr_assert_eq(profile__write(p, path), 0);
	cr_assert_eq(profile__read(path, &q, &e), 0, "%s", e.what);
	cr_assert_not(profile__hints(q, &h, &n), "no hints stored: none read");
	cr_assert_eq(n, 0);
	profile__free(q);

	uint32_t lib = (uint32_t)profile__string(p, "libx.so.1", 9),
		 bid = (uint32_t)profile__string(p, "00aa11bb", 8),
		 file = (uint32_t)profile__string(p, "/usr/lib/libx.so.1", 18),
		 other = (uint32_t)profile__string(p, "liby.so", 7);
	struct pf_hint in[2] = { { lib, bid, file, 640, 1000 }, { other, 0, 0, 20, 1000 } };
	struct pf_hint bad = { lib, bid, (uint32_t)profile__nr_strings(p), 1, 2 };

	cr_assert_eq(profile__set_hints(p, &bad, 1), -EINVAL, "a string id it does not have");
	bad = (struct pf_hint){ lib, 0, 0, 3, 2 };
	cr_assert_eq(profile__set_hints(p, &bad, 1), -EINVAL, "more weight than the total");
	cr_assert_not(profile__hints(p, &h, &n), "nothing stored by a refused call");
	cr_assert_eq(profile__set_hints(p, in, 2), 0);
	cr_assert_eq(profile__write(p, path), 0);
	buf = slurp(path, &len);
	cr_assert_eq(buf[8], 4, "still version 4: the section is optional");
	free(buf);
	cr_assert_eq(profile__read(path, &q, &e), 0, "%s", e.what);
	cr_assert(profile__hints(q, &h, &n));
	cr_assert_eq(n, 2);
	cr_assert_str_eq(profile__str(q, h[0].module), "libx.so.1");
	cr_assert_str_eq(profile__str(q, h[0].build_id), "00aa11bb");
	cr_assert_str_eq(profile__str(q, h[0].path), "/usr/lib/libx.so.1");
	cr_assert_eq(h[0].weight, 640);
	cr_assert_eq(h[0].total, 1000);
	cr_assert_str_eq(profile__str(q, h[1].module), "liby.so");
	cr_assert_str_eq(profile__str(q, h[1].path), "");
	cr_assert_eq(h[1].weight, 20);
	profile__free(q);

	/* stored, but none: read back as stored and empty */
	cr_assert_eq(profile__set_hints(p, NULL, 0), 0);
	cr_assert_eq(profile__write(p, path), 0);
	cr_assert_eq(profile__read(path, &q, &e), 0, "%s", e.what);
	cr_assert(profile__hints(q, &h, &n));
	cr_assert_eq(n, 0);
	profile__free(q);
	profile__free(p);
}

/* The filters on a plain profile (their outputs are checked in test_outputs.c). */

static const bool oncpu_only[SAMPLE_KIND_MAX] = { [SAMPLE_ONCPU] = true };

Test(filter, time_base)
{
	struct profile *p = make_profile(), *e = profile__new();

	cr_assert_eq(profile__time_base(p), 1000000, "the recorded start");
	profile__meta(p)->start_time = 0;
	cr_assert_eq(profile__time_base(p), 1000000, "else the first sample");
	cr_assert_eq(profile__time_base(e), 0);
	profile__free(p);
	profile__free(e);
}

Test(filter, copies_only_when_needed)
{
	struct profile *p = make_profile(), *q = (struct profile *)1;
	struct profile_filter none = { 0 },
			      empty = { .has_time = true, .time_start = 5, .time_end = 5 };

	cr_assert_eq(profile__filter(p, oncpu_only, &none, &q), 0);
	cr_assert_null(q);
	q = (struct profile *)1;
	cr_assert_eq(profile__filter(p, oncpu_only, &empty, &q), -EINVAL);
	cr_assert_null(q);
	profile__free(p);
}

Test(filter, tid_per_thread_reverse)
{
	struct profile *p = make_profile(), *q = NULL;
	uint32_t tid = 101;
	struct profile_filter f = {
		.tids = &tid, .nr_tids = 1, .per_thread = true, .reverse = true
	};
	const struct pf_thread *t;
	const struct pf_stack *st;

	cr_assert_eq(profile__filter(p, oncpu_only, &f, &q), 0);
	cr_assert_not_null(q);
	cr_assert_eq(profile__nr_samples(q), 500, "thread 101 has every other sample");
	cr_assert_eq(profile__nr_threads(q), 1);
	t = profile__get_thread(q, 0);
	cr_assert_eq(t->tid, 101);
	cr_assert_str_eq(profile__str(q, t->comm), "app-100/101");
	cr_assert_eq(profile__cmeta(q)->start_time, 1000000);
	cr_assert_str_eq(profile__str(q, profile__cmeta(q)->command), "./app --x");
	for (size_t i = 0; i < profile__nr_samples(q); i++) {
		/* reversed: the root is the leaf, main is at the end */
		st = profile__get_stack(q, profile__get_sample(q, i)->stack);
		cr_assert_str_eq(profile__str(q, profile__get_frame(q, st->frame)->name), "main");
	}
	profile__free(q);
	profile__free(p);
}

Test(filter, runqueue_gets_its_frame)
{
	struct profile *p = make_profile(), *q = NULL;
	const bool rq[SAMPLE_KIND_MAX] = { [SAMPLE_RUNQUEUE] = true };
	struct pf_sample s = {
		.time = 3000000, .weight = 4000, .stack = 1, .kind = SAMPLE_RUNQUEUE
	};
	const struct pf_stack *st;

	cr_assert_eq(profile__add_sample(p, &s), 0);
	cr_assert_eq(profile__filter(p, rq, NULL, &q), 0);
	cr_assert_not_null(q, "runqueue frames are a copy");
	cr_assert_eq(profile__nr_samples(q), 1);
	st = profile__get_stack(q, profile__get_sample(q, 0)->stack);
	cr_assert_str_eq(profile__str(q, profile__get_frame(q, st->frame)->name), RUNQUEUE_FRAME);
	cr_assert_eq(profile__get_frame(q, st->frame)->kind, FRAME_SPECIAL);
	st = profile__get_stack(q, st->parent);
	cr_assert_str_eq(profile__str(q, profile__get_frame(q, st->frame)->name), "main");
	profile__free(q);
	profile__free(p);
}

/* ---- hosts, ranks and merging (format version 4) ---- */

/* A one-host recording: pid 100 (rank r) with a sample at `time` of `fn`. */
static struct profile *rank_profile(const char *host, uint32_t rank, int64_t clock_offset,
				    uint64_t time, const char *fn)
{
	struct profile *p = profile__new();
	int64_t h, comm, fr, st, t, l;

	cr_assert_not_null(p);
	h = profile__string(p, host, strlen(host));
	comm = profile__string(p, "python3", 7);
	l = profile__string(p, "torchrun", 8);
	fr = profile__frame_str(p, fn, "app", FRAME_USER);
	st = profile__stack(p, 0, (uint32_t)fr);
	t = profile__thread(p, 100, 100, (uint32_t)comm);
	cr_assert(h > 0 && comm > 0 && l > 0 && fr >= 0 && st > 0 && t >= 0);
	profile__meta(p)->hostname = (uint32_t)h;
	profile__meta(p)->clock_offset = clock_offset;
	profile__meta(p)->start_time = time - 1000;
	profile__meta(p)->end_time = time + 1000;
	profile__meta(p)->finalized = true;
	cr_assert_eq(profile__set_process(p, &(struct pf_process){ .pid = 100,
								   .rank = rank,
								   .local_rank = 0,
								   .world_size = 2,
								   .launcher = (uint32_t)l }),
		     0);
	cr_assert_eq(profile__add_sample(p, &(struct pf_sample){ .time = time,
								 .weight = 1000,
								 .stack = (uint32_t)st,
								 .thread = (uint32_t)t }),
		     0);
	return p;
}

static struct profile *write_read(const struct profile *p)
{
	char path[] = "/tmp/dlflame-v4-XXXXXX";
	int fd = mkstemp(path);
	struct profile *q = NULL;

	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(profile__write(p, path), 0);
	cr_assert_eq(profile__read(path, &q, NULL), 0);
	unlink(path);
	return q;
}

Test(profile, processes_and_clock_round_trip)
{
	struct profile *p = rank_profile("hostA", 1, -123456789, 5000, "f"), *q;
	const struct pf_process *pr;

	q = write_read(p);
	cr_assert_eq(profile__file_version(q), PROFILE_VERSION);
	cr_assert_eq(profile__cmeta(q)->clock_offset, -123456789);
	cr_assert_eq(profile__nr_processes(q), 1);
	/* the profile's own host: as 0 or by its name */
	pr = profile__process(q, 0, 100);
	cr_assert_not_null(pr);
	cr_assert_eq(profile__process(q, profile__cmeta(q)->hostname, 100), pr);
	cr_assert_null(profile__process(q, 0, 101));
	cr_assert_eq(pr->rank, 1);
	cr_assert_eq(pr->world_size, 2);
	cr_assert_eq(pr->local_rank, 0);
	cr_assert_str_eq(profile__str(q, pr->launcher), "torchrun");
	cr_assert_eq(profile__thread_process(q, profile__get_thread(q, 0)), pr);
	profile__free(p);
	profile__free(q);
}

/* Two hosts, the same pid on each: two processes, times on the first host's clock. */
Test(profile, merge_keeps_hosts_apart_and_aligns_clocks)
{
	struct profile *a = rank_profile("hostA", 0, 1000000000, 5000, "fa");
	struct profile *b = rank_profile("hostB", 1, 1000000000 + 3000, 5000, "fb");
	struct profile *m = profile__new(), *q, *view = NULL;
	struct profile_clash cl;
	bool kinds[SAMPLE_KIND_MAX] = { [SAMPLE_ONCPU] = true };

	cr_assert_eq(profile__merge_clash(a, b, &cl), 0);
	cr_assert_eq(profile__merge(m, a, true), 0);
	cr_assert_eq(profile__merge(m, b, false), 0);
	q = write_read(m);
	cr_assert_eq(profile__nr_threads(q), 2);
	cr_assert_eq(profile__nr_processes(q), 2);
	for (uint32_t i = 0; i < 2; i++) {
		const struct pf_thread *t = profile__get_thread(q, i);
		const struct pf_process *pr = profile__thread_process(q, t);
		const char *host = profile__str(q, profile__thread_host(q, t));

		cr_assert_eq(t->pid, 100);
		cr_assert_not_null(pr);
		cr_assert_str_eq(host, pr->rank ? "hostB" : "hostA");
	}
	/* b's wall clock is 3 us ahead of a's: its sample moves 3 us later */
	for (size_t i = 0; i < 2; i++) {
		const struct pf_sample *s = profile__get_sample(q, i);
		const struct pf_process *pr =
			profile__thread_process(q, profile__get_thread(q, s->thread));

		cr_assert_eq(s->time, pr->rank ? 8000u : 5000u);
	}
	cr_assert_eq(profile__cmeta(q)->start_time, 4000);
	cr_assert_eq(profile__cmeta(q)->end_time, 9000);
	/* --rank 1 --per-rank: b's sample only, under "rank 1" */
	uint32_t one = 1;
	struct profile_filter f = { .ranks = &one, .nr_ranks = 1, .per_rank = true };
	cr_assert_eq(profile__filter(q, kinds, &f, &view), 0);
	cr_assert_not_null(view);
	cr_assert_eq(profile__nr_samples(view), 1);
	cr_assert_str_eq(profile__str(view, profile__get_thread(view, 0)->comm), "rank 1");
	profile__free(view);
	/* --per-thread names hosts once there are two */
	f = (struct profile_filter){ .per_thread = true };
	cr_assert_eq(profile__filter(q, kinds, &f, &view), 0);
	cr_assert_str_eq(profile__str(view, profile__get_thread(view, 0)->comm),
			 "hostA:python3-100/100");
	profile__free(view);
	/* the same recording twice, and the same rank twice */
	cr_assert_eq(profile__merge_clash(a, a, &cl), -EEXIST);
	cr_assert(cl.process);
	cr_assert_eq(cl.pid, 100);
	cr_assert_str_eq(cl.host, "hostA");
	struct profile *c = rank_profile("hostC", 0, 0, 5000, "fc");
	cr_assert_eq(profile__merge_clash(a, c, &cl), -EEXIST);
	cr_assert_not(cl.process);
	cr_assert_eq(cl.rank, 0);
	profile__free(a);
	profile__free(b);
	profile__free(c);
	profile__free(m);
	profile__free(q);
}

/* A journal read back keeps the ranks and the clock offset. */
Test(profile, journal_keeps_ranks)
{
	struct profile *p = rank_profile("hostA", 1, 777, 5000, "f"), *q = NULL;
	char path[] = "/tmp/dlflame-jr-XXXXXX";
	struct pf_journal *j;
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(profile__journal_open(p, path, &j), 0);
	cr_assert_eq(profile__journal_sync(j, NULL, NULL, NULL, 0), 0);
	profile__journal_close(j);
	cr_assert_eq(profile__read(path, &q, NULL), 0);
	unlink(path);
	cr_assert_eq(profile__cmeta(q)->clock_offset, 777);
	cr_assert_eq(profile__nr_processes(q), 1);
	cr_assert_eq(profile__get_process(q, 0)->rank, 1);
	profile__free(p);
	profile__free(q);
}

/*
 * Samples held back by the recorder travel as each sync's pending rows: a
 * journal read back ends with the last whole sync's (not every sync's, and
 * not those of a sync cut short by the kill), on stacks that exist.
 */
Test(profile, journal_keeps_the_last_pending_samples)
{
	struct profile *p = rank_profile("hostA", 0, 0, 5000, "f"), *q = NULL;
	char path[] = "/tmp/dlflame-jp-XXXXXX";
	int64_t fr = profile__frame_str(p, "jit_kernel", "[jit]", FRAME_USER);
	int64_t st = profile__stack(p, 0, (uint32_t)fr);
	struct pf_sample pend[3];
	struct pf_journal *j;
	struct stat sb;
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert(fr >= 0 && st > 0);
	for (int i = 0; i < 3; i++)
		pend[i] = (struct pf_sample){ .time = 6000 + (uint64_t)i,
					      .weight = 7,
					      .stack = (uint32_t)st };
	cr_assert_eq(profile__journal_open(p, path, &j), 0);
	cr_assert_eq(profile__journal_sync(j, NULL, NULL, pend, 3), 0);
	/* the next sync holds back one of them only: two were stored since */
	pend[0].weight = 9;
	cr_assert_eq(profile__add_sample(p, &pend[1]), 0);
	cr_assert_eq(profile__add_sample(p, &pend[2]), 0);
	cr_assert_eq(profile__journal_sync(j, NULL, NULL, pend, 1), 0);
	cr_assert_eq(stat(path, &sb), 0);
	/* a third sync, cut short by the kill, holds back none */
	cr_assert_eq(profile__add_sample(p, &pend[0]), 0);
	cr_assert_eq(profile__journal_sync(j, NULL, NULL, NULL, 0), 0);
	profile__journal_close(j);
	cr_assert_eq(truncate(path, sb.st_size + 20), 0);

	cr_assert_eq(profile__read(path, &q, NULL), 0);
	cr_assert_eq(profile__nr_samples(q), 4, "one stored, two stored later, one held back: %zu",
		     profile__nr_samples(q));
	cr_assert_eq(profile__get_sample(q, 3)->time, 6000);
	cr_assert_eq(profile__get_sample(q, 3)->weight, 9, "the last whole sync's");
	cr_assert_eq(profile__get_sample(q, 3)->stack, (uint32_t)st);
	profile__free(q);

	/* a pending sample on a stack no batch holds: the journal is refused, not misread */
	unlink(path);
	pend[0].stack = 1000;
	cr_assert_eq(profile__journal_open(p, path, &j), 0);
	cr_assert_eq(profile__journal_sync(j, NULL, NULL, pend, 1), 0);
	profile__journal_close(j);
	cr_assert_neq(profile__read(path, &q, NULL), 0);
	unlink(path);
	profile__free(p);
}

/* A process's container goes through the file (its own section) and labels its threads. */
Test(profile, containers_round_trip_and_label)
{
	struct profile *p = rank_profile("hostA", 1, 0, 5000, "f"), *q, *view = NULL;
	const char *id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	const char *cg = "/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef"
			 "0123456789abcdef.scope";
	struct pf_process pr = *profile__process(p, 0, 100);
	bool kinds[SAMPLE_KIND_MAX] = { [SAMPLE_ONCPU] = true };
	struct profile_filter f = { .per_thread = true };
	const struct pf_process *got;

	pr.cgroup = (uint32_t)profile__string(p, cg, strlen(cg));
	pr.container = (uint32_t)profile__string(p, id, strlen(id));
	cr_assert_eq(profile__set_process(p, &pr), 0);
	q = write_read(p);
	got = profile__process(q, 0, 100);
	cr_assert_not_null(got);
	cr_assert_eq(got->rank, 1, "the rank stays beside the container");
	cr_assert_str_eq(profile__str(q, got->cgroup), cg);
	cr_assert_str_eq(profile__str(q, got->container), id);
	cr_assert_str_eq(profile__container_label(q, got), id);
	cr_assert_eq(profile__filter(q, kinds, &f, &view), 0);
	cr_assert_str_eq(profile__str(view, profile__get_thread(view, 0)->comm),
			 "python3-100/100 [0123456789ab]");
	profile__free(view);
	f = (struct profile_filter){ .per_process = true };
	cr_assert_eq(profile__filter(q, kinds, &f, &view), 0);
	cr_assert_str_eq(profile__str(view, profile__get_thread(view, 0)->comm),
			 "python3-100 [0123456789ab]");
	profile__free(view);
	profile__free(p);
	profile__free(q);
}
