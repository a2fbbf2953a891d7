/* SPDX-License-Identifier: MIT */
/*
 * The outputs beyond plain folded and SVG: golden files of the fixed
 * profile (folded, top, trace, difffolded), the filters, pprof's wire
 * format, SVG modes, hostile names in every format and write errors.
 *
 * DLFLAME_UPDATE_GOLDEN=1 rewrites the golden files from the current
 * output instead of comparing (then review the diff).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "profile/filter.h"
#include "profile/profile.h"
#include "render/render.h"
#include "tests/golden/fixed_profile.h"

#define GOLDEN_DIR FIXTURES_SRC "/../golden"

/*
 * p: the profile as reports see it, a frame per function (relabelled, as
 * cmd/report.c does); recorded: a frame per source line.
 */
static struct profile *p, *recorded;

static void setup_fixed(void)
{
	recorded = profile__new();
	cr_assert_not_null(recorded);
	cr_assert_eq(fixed_profile(recorded), 0);
	p = profile__relabel(recorded, false);
	cr_assert_not_null(p);
}

static void setup_hostile(void)
{
	recorded = profile__new();
	cr_assert_not_null(recorded);
	cr_assert_eq(hostile_profile(recorded), 0);
	p = profile__relabel(recorded, false);
	cr_assert_not_null(p);
}

static void setup_empty(void)
{
	p = profile__new();
	cr_assert_not_null(p);
}

static void teardown(void)
{
	profile__free(p);
	profile__free(recorded);
	p = recorded = NULL;
}

TestSuite(golden, .init = setup_fixed, .fini = teardown, .timeout = 30);
TestSuite(filter, .init = setup_fixed, .fini = teardown, .timeout = 30);
TestSuite(top, .init = setup_fixed, .fini = teardown, .timeout = 30);
TestSuite(pprof, .init = setup_fixed, .fini = teardown, .timeout = 30);
TestSuite(svgmodes, .init = setup_fixed, .fini = teardown, .timeout = 30);
TestSuite(hostile, .init = setup_hostile, .fini = teardown, .timeout = 60);
TestSuite(outputs, .init = setup_empty, .fini = teardown, .timeout = 30);

static const struct render_select oncpu = { .kinds = { [SAMPLE_ONCPU] = true } };
static const struct render_select offcpu = { .kinds = { [SAMPLE_OFFCPU] = true },
					     .weight_ns = true };
static const struct render_select wall = {
	.kinds = { [SAMPLE_ONCPU] = true, [SAMPLE_OFFCPU] = true, [SAMPLE_RUNQUEUE] = true },
	.weight_ns = true,
};

enum fmt { F_FOLDED, F_SVG, F_TOP, F_PPROF, F_TRACE };

struct out {
	char *buf;
	size_t len;
};

/* Render q (p if NULL) in a format into memory; asserts success. */
static struct out render(const struct profile *q, enum fmt fmt, const struct render_select *sel,
			 const void *opts)
{
	struct out o = { 0 };
	FILE *f = open_memstream(&o.buf, &o.len);
	int err = -1;

	cr_assert_not_null(f);
	q = q ? q : p;
	switch (fmt) {
	case F_FOLDED:
		err = render_folded(q, sel, f);
		break;
	case F_SVG:
		err = render_svg(q, sel, opts, f);
		break;
	case F_TOP:
		err = render_top(q, sel, opts, f);
		break;
	case F_PPROF:
		err = render_pprof(q, sel, f);
		break;
	case F_TRACE:
		err = render_trace(q, sel, f);
		break;
	}
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(err, 0, "render %d: %d", fmt, err);
	return o;
}

/* p filtered by sel and f; the caller frees the result. */
static struct profile *filtered(const struct render_select *sel, const struct profile_filter *f)
{
	struct profile *q = NULL;

	cr_assert_eq(profile__filter(p, sel->kinds, f, &q), 0);
	cr_assert_not_null(q, "the filter should have made a copy");
	return q;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0;

	if (!f)
		return NULL;
	buf = malloc(1 << 20);
	cr_assert_not_null(buf);
	n = fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

static void golden(const char *name, const struct out *o)
{
	char path[512];
	char *want;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", GOLDEN_DIR, name);
	if (getenv("DLFLAME_UPDATE_GOLDEN")) {
		FILE *f = fopen(path, "wb");

		cr_assert_not_null(f, "cannot write %s", path);
		cr_assert_eq(fwrite(o->buf, 1, o->len, f), o->len);
		cr_assert_eq(fclose(f), 0);
		return;
	}
	want = slurp(path, &len);
	cr_assert_not_null(want, "no golden file %s (DLFLAME_UPDATE_GOLDEN=1 makes it)", path);
	cr_assert(len == o->len && !memcmp(want, o->buf, len), "%s differs from the output:\n%.*s",
		  name, (int)o->len, o->buf);
	free(want);
}

static void check_golden(const char *name, enum fmt fmt, const struct render_select *sel,
			 const void *opts)
{
	struct out o = render(NULL, fmt, sel, opts);

	golden(name, &o);
	free(o.buf);
}

/* Run a shell command with buf on its stdin; returns its exit status. */
static int pipe_to(const char *cmd, const char *buf, size_t len)
{
	FILE *f = popen(cmd, "w");
	int status;

	cr_assert_not_null(f);
	fwrite(buf, 1, len, f);
	status = pclose(f);
	cr_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static int xml_ok(const struct out *o)
{
	return pipe_to("xmllint --noout - 2>&1 >/dev/null | head -5 >&2", o->buf, o->len) == 0 &&
	       pipe_to("xmllint --noout - >/dev/null 2>&1", o->buf, o->len) == 0;
}

static int json_ok(const struct out *o)
{
	return pipe_to("python3 -m json.tool >/dev/null", o->buf, o->len) == 0;
}

static size_t count(const struct out *o, const char *needle)
{
	size_t n = 0, nl = strlen(needle);

	for (const char *h = o->buf; (h = memmem(h, o->len - (size_t)(h - o->buf), needle, nl));
	     h += nl)
		n++;
	return n;
}

static bool has(const struct out *o, const char *needle)
{
	return memmem(o->buf, o->len, needle, strlen(needle)) != NULL;
}

/* Golden outputs of the fixed profile. */

Test(golden, folded)
{
	check_golden("fixed.folded", F_FOLDED, &oncpu, NULL);
}

Test(golden, folded_offcpu)
{
	check_golden("fixed-offcpu.folded", F_FOLDED, &offcpu, NULL);
}

Test(golden, folded_wall_runqueue)
{
	struct profile *q = filtered(&wall, NULL);
	struct out o = render(q, F_FOLDED, &wall, NULL);

	golden("fixed-wall.folded", &o);
	free(o.buf);
	profile__free(q);
}

Test(golden, top)
{
	struct top_opts all = { .rows = 0 };

	check_golden("fixed.top", F_TOP, &oncpu, &all);
}

Test(golden, top_module_wall)
{
	struct top_opts o = { .by = TOP_BY_MODULE };
	const struct render_select sel = {
		.kinds = { [SAMPLE_ONCPU] = true, [SAMPLE_OFFCPU] = true }, .weight_ns = true
	};

	check_golden("fixed-module-wall.top", F_TOP, &sel, &o);
}

Test(golden, top_kind)
{
	struct top_opts o = { .by = TOP_BY_KIND, .by_total = true };

	check_golden("fixed-kind.top", F_TOP, &oncpu, &o);
}

Test(golden, trace)
{
	check_golden("fixed.trace.json", F_TRACE, &oncpu, NULL);
}

Test(golden, trace_wall_runqueue)
{
	struct profile *q = filtered(&wall, NULL);
	struct out o = render(q, F_TRACE, &wall, NULL);

	golden("fixed-wall.trace.json", &o);
	cr_assert(json_ok(&o));
	free(o.buf);
	profile__free(q);
}

/* new = the first 100 ms of the same profile: half the work, shifted */
Test(golden, difffolded)
{
	struct profile_filter f = { .has_time = true, .time_start = 0, .time_end = 100 * MS };
	struct profile *q = filtered(&oncpu, &f);
	struct out o = { 0 };
	FILE *mf = open_memstream(&o.buf, &o.len);

	cr_assert_eq(render_diff_folded(p, q, &oncpu, true, mf), 0);
	fclose(mf);
	golden("fixed.difffolded", &o);
	free(o.buf);

	/* raw counts: base's column is exactly its own folded counts */
	mf = open_memstream(&o.buf, &o.len);
	cr_assert_eq(render_diff_folded(p, q, &oncpu, false, mf), 0);
	fclose(mf);
	cr_assert(has(&o, "mlp;main;train_epoch;reduce;reduce;reduce 2 0\n"), "%s", o.buf);
	cr_assert(has(&o, "omp worker;start_thread;gomp_thread_start;brgemm_kernel_f32_[j] 7 6\n"),
		  "%s", o.buf);
	free(o.buf);
	profile__free(q);
}

/* Filters: exact outputs. */

static char *folded_of(const struct render_select *sel, const struct profile_filter *f)
{
	struct profile *q = NULL;
	struct out o;

	cr_assert_eq(profile__filter(p, sel->kinds, f, &q), 0);
	o = render(q, F_FOLDED, sel, NULL);
	profile__free(q);
	return o.buf;
}

Test(filter, nothing_to_do_means_no_copy)
{
	struct profile_filter none = { 0 };
	struct profile *q = (struct profile *)1;

	cr_assert_eq(profile__filter(p, oncpu.kinds, &none, &q), 0);
	cr_assert_null(q);
	cr_assert_eq(profile__filter(p, offcpu.kinds, NULL, &q), 0);
	cr_assert_null(q);
	/* runqueue samples get their frame: that is a copy */
	cr_assert_eq(profile__filter(p, wall.kinds, NULL, &q), 0);
	cr_assert_not_null(q);
	profile__free(q);
}

Test(filter, tid_pid_comm)
{
	uint32_t tid = 101, pid = 100, other = 7;
	const char *comms[] = { "loader", "nope" };
	struct profile_filter by_tid = { .tids = &tid, .nr_tids = 1 };
	struct profile_filter by_pid = { .pids = &other, .nr_pids = 1 };
	struct profile_filter both = { .pids = &pid, .nr_pids = 1, .comms = comms, .nr_comms = 2 };
	char *out;

	out = folded_of(&oncpu, &by_tid);
	cr_assert_str_eq(out,
			 "omp worker;start_thread;[truncated] 1\n"
			 "omp worker;start_thread;gomp_thread_start;brgemm_kernel_f32_[j] 7\n");
	free(out);
	out = folded_of(&oncpu, &by_pid);
	cr_assert_str_eq(out, "");
	free(out);
	out = folded_of(&offcpu, &both);
	cr_assert_str_eq(out, "loader;main;train_epoch;read_batch;read;ksys_read_[k];schedule_[k] "
			      "120000\n");
	free(out);
}

Test(filter, time_range_clips_blocks)
{
	/* [50 ms, 100 ms): on-CPU samples by their time, blocks clipped */
	struct profile_filter f = { .has_time = true, .time_start = 50 * MS, .time_end = 100 * MS };
	char *out;

	out = folded_of(&oncpu, &f);
	cr_assert_str_eq(out,
			 "mlp;main;train_epoch;backward;dnnl_primitive_execute;gemm_inner_[i] 1\n"
			 "mlp;main;train_epoch;forward;brgemm_kernel_f32_[j] 2\n"
			 "omp worker;start_thread;gomp_thread_start;brgemm_kernel_f32_[j] 2\n");
	free(out);
	out = folded_of(&offcpu, &f);
	/* loader 20-140 ms -> 50 ms inside; trainer 60-85 all; worker 50-80 and 80-80.4 */
	cr_assert_str_eq(out,
			 "loader;main;train_epoch;read_batch;read;ksys_read_[k];schedule_[k] "
			 "50000\n"
			 "mlp;main;train_epoch;read_batch;read;ksys_read_[k];schedule_[k] 25000\n"
			 "omp worker;start_thread;gomp_thread_start;pthread_cond_wait;"
			 "futex_wait_[k];schedule_[k] 30400\n");
	free(out);
}

Test(filter, min_block)
{
	/* the 0.4 ms futex wait goes, the 30 ms one stays */
	struct profile_filter f = { .min_block = 1000 * 1000 };
	char *out = folded_of(&offcpu, &f);

	cr_assert(strstr(out, "futex_wait_[k];schedule_[k] 30000\n"), "%s", out);
	free(out);
}

Test(filter, per_thread)
{
	struct profile_filter f = { .per_thread = true };
	char *out = folded_of(&oncpu, &f);

	cr_assert(strstr(out, "mlp-100/100;main;train_epoch;forward 2\n"), "%s", out);
	cr_assert(strstr(out, "omp worker-100/101;start_thread;[truncated] 1\n"), "%s", out);
	cr_assert_null(strstr(out, "\nmlp;"));
	free(out);
}

Test(filter, reverse)
{
	struct profile_filter f = { .reverse = true };
	char *out = folded_of(&oncpu, &f);

	cr_assert(strstr(out, "mlp;reduce;reduce;reduce;train_epoch;main 2\n"), "%s", out);
	cr_assert(strstr(out, "mlp;gemm_inner_[i];dnnl_primitive_execute;backward;train_epoch;main "
			      "4\n"),
		  "%s", out);
	free(out);
}

Test(filter, runqueue_frame)
{
	const struct render_select rq = { .kinds = { [SAMPLE_RUNQUEUE] = true },
					  .weight_ns = true };
	char *out = folded_of(&rq, NULL);

	cr_assert_str_eq(out, "mlp;main;train_epoch;forward;" RUNQUEUE_FRAME " 4000\n");
	free(out);
}

/* top */

Test(top, rows_and_sort)
{
	struct top_opts o = { .rows = 2, .by_total = true };
	struct out r = render(NULL, F_TOP, &oncpu, &o);

	cr_assert(has(&r, "Total: 23 samples, on-CPU; by function, sorted by total\n"), "%s",
		  r.buf);
	/* main and train_epoch, 15 of 23, then the footer */
	cr_assert(has(&r, "           0   0.00%           15  65.22%  main\n"), "%s", r.buf);
	cr_assert(has(&r, "(9 more; -n 0 shows all)\n"), "%s", r.buf);
	/* total, stack completeness, column names, two rows, footer */
	cr_assert(has(&r, "\n95.7% of stacks complete; cut: stack copy exhausted 4.3%\n"), "%s",
		  r.buf);
	cr_assert_eq(count(&r, "\n"), 6);
	free(r.buf);
}

Test(top, recursion_counts_once)
{
	struct top_opts o = { 0 };
	struct out r = render(NULL, F_TOP, &oncpu, &o);

	/* reduce;reduce;reduce twice: self 2, total 2, not 6 */
	cr_assert(has(&r, "           2   8.70%            2   8.70%  reduce\n"), "%s", r.buf);
	free(r.buf);
}

Test(top, lost_samples_shown)
{
	struct top_opts o = { 0 };
	struct out r;

	profile__meta(p)->lost = 17;
	r = render(NULL, F_TOP, &oncpu, &o);
	cr_assert(has(&r, "Lost: 17 samples (ring buffer overflow)\n"), "%s", r.buf);
	free(r.buf);
}

/* pprof: decode the wire format back. */

struct pb {
	const uint8_t *p, *end;
};

static uint64_t pb_varint(struct pb *b)
{
	uint64_t v = 0;

	for (int shift = 0; b->p < b->end; shift += 7) {
		uint8_t c = *b->p++;

		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
		cr_assert_lt(shift, 63, "varint too long");
	}
	cr_assert_fail("truncated varint");
	return 0;
}

/* Next field: its number; *sub is the bytes of a length-delimited field. */
static unsigned pb_next(struct pb *b, uint64_t *v, struct pb *sub)
{
	uint64_t key = pb_varint(b);

	if ((key & 7) == 0) {
		*v = pb_varint(b);
	} else {
		cr_assert_eq(key & 7, 2, "wire type %u", (unsigned)(key & 7));
		*v = pb_varint(b);
		cr_assert_leq(*v, (uint64_t)(b->end - b->p));
		sub->p = b->p;
		sub->end = b->p + *v;
		b->p += *v;
	}
	return (unsigned)(key >> 3);
}

static uint8_t *gunzip(const struct out *o, size_t *len)
{
	size_t cap = 1 << 20;
	uint8_t *buf = malloc(cap);
	z_stream zs = { 0 };

	cr_assert_not_null(buf);
	cr_assert_eq(inflateInit2(&zs, 15 + 16), Z_OK);
	zs.next_in = (uint8_t *)o->buf;
	zs.avail_in = (uInt)o->len;
	zs.next_out = buf;
	zs.avail_out = (uInt)cap;
	cr_assert_eq(inflate(&zs, Z_FINISH), Z_STREAM_END, "not one complete gzip stream");
	*len = zs.total_out;
	inflateEnd(&zs);
	return buf;
}

Test(pprof, wire_format)
{
	struct profile *q = filtered(&wall, NULL);
	struct out o = render(q, F_PPROF, &wall, NULL);
	size_t len, nr_strings = 0, nr_types = 0, nr_samples = 0, nr_locs = 0, nr_fns = 0;
	size_t two_lines = 0;
	uint64_t sum[4] = { 0 }, v;
	char strings[64][64];
	uint8_t *raw;
	struct pb b, sub, f;

	cr_assert(o.len > 18 && (uint8_t)o.buf[0] == 0x1f && (uint8_t)o.buf[1] == 0x8b);
	raw = gunzip(&o, &len);
	b = (struct pb){ raw, raw + len };
	while (b.p < b.end) {
		switch (pb_next(&b, &v, &sub)) {
		case 1:
			nr_types++;
			break;
		case 2: {
			size_t col = 0;

			nr_samples++;
			while (sub.p < sub.end) {
				if (pb_next(&sub, &v, &f) != 2)
					continue;
				while (f.p < f.end)
					sum[col++ % 4] += pb_varint(&f);
			}
			break;
		}
		case 4: {
			size_t lines = 0;

			nr_locs++;
			while (sub.p < sub.end)
				lines += pb_next(&sub, &v, &f) == 4;
			two_lines += lines == 2;
			break;
		}
		case 5:
			nr_fns++;
			break;
		case 6:
			cr_assert_lt(nr_strings, 64);
			snprintf(strings[nr_strings++], 64, "%.*s", (int)v, (const char *)sub.p);
			break;
		}
	}
	cr_assert_eq(nr_types, 4, "samples, cpu, offcpu, runqueue");
	cr_assert_str_eq(strings[0], "");
	cr_assert_str_eq(strings[1], "samples");
	cr_assert_str_eq(strings[2], "count");
	cr_assert_str_eq(strings[3], "cpu");
	/* (thread, stack) pairs: 7 for mlp, 3 for the worker, 1 loader */
	cr_assert_eq(nr_samples, 11);
	cr_assert_eq(sum[0], 23);
	cr_assert_eq(sum[1], 23 * FIXED_PERIOD);
	cr_assert_eq(sum[2], (25 + 30 + 120) * MS + 400000);
	cr_assert_eq(sum[3], 4 * MS);
	/* gemm_inner inlined into dnnl_primitive_execute: one location, two lines */
	cr_assert_eq(two_lines, 1);
	cr_assert_eq(nr_fns, 18, "17 named frames and [runqueue]");
	cr_assert_eq(nr_locs, 17, "18 functions, 2 of them in one location");
	free(raw);
	free(o.buf);
	profile__free(q);
}

Test(pprof, only_oncpu)
{
	struct out o = render(NULL, F_PPROF, &oncpu, NULL);
	size_t len, types = 0;
	uint8_t *raw = gunzip(&o, &len);
	struct pb b = { raw, raw + len }, sub;
	uint64_t v;

	while (b.p < b.end)
		types += pb_next(&b, &v, &sub) == 1;
	cr_assert_eq(types, 2);
	free(raw);
	free(o.buf);
}

/* As recorded, "forward" is two frames (two lines): one Function, two Lines. */
Test(pprof, lines_and_mappings)
{
	struct out o = render(recorded, F_PPROF, &oncpu, NULL);
	size_t len, nr_strings = 0, nr_maps = 0, nr_fns = 0;
	char strings[64][64];
	uint64_t forward = 0, v, fn_of_forward = 0, lines[2] = { 0 }, nl = 0, map_ids = 0;
	uint8_t *raw = gunzip(&o, &len);
	struct pb b = { raw, raw + len }, sub, f, g;

	/* the string table first: it is written after the messages that use it */
	while (b.p < b.end) {
		if (pb_next(&b, &v, &sub) == 6) {
			cr_assert_lt(nr_strings, 64);
			snprintf(strings[nr_strings++], 64, "%.*s", (int)v, (const char *)sub.p);
		}
	}
	for (size_t i = 0; i < nr_strings; i++)
		forward = !strcmp(strings[i], "forward") ? i : forward;
	cr_assert_neq(forward, 0);
	for (b.p = raw; b.p < b.end;) {
		unsigned field = pb_next(&b, &v, &sub);
		uint64_t id = 0, name = 0, file = 0, bid = 0;

		if (field == 3) { /* Mapping */
			nr_maps++;
			while (sub.p < sub.end) {
				unsigned k = pb_next(&sub, &v, &f);

				file = k == 5 ? v : file;
				bid = k == 6 ? v : bid;
				map_ids += k == 1 ? v : 0;
			}
			cr_assert_lt(file, nr_strings);
			if (!strcmp(strings[file], MLP))
				cr_assert_str_eq(strings[bid],
						 "5f1d3c0a9e7b2d4c6a8e0f1b3d5c7a9e2b4d6f80");
			/* pprof takes the first mapping for the main binary */
			if (nr_maps == 1)
				cr_assert_str_eq(strings[file], MLP);
		} else if (field == 5) { /* Function */
			nr_fns++;
			while (sub.p < sub.end) {
				unsigned k = pb_next(&sub, &v, &f);

				id = k == 1 ? v : id;
				name = k == 2 ? v : name;
				file = k == 4 ? v : file;
			}
			if (name == forward) {
				cr_assert_eq(fn_of_forward, 0, "one Function for both lines");
				fn_of_forward = id;
				cr_assert_str_eq(strings[file], "src/mlp.c");
			}
		}
	}
	cr_assert_neq(fn_of_forward, 0);
	for (b.p = raw; b.p < b.end;) {
		if (pb_next(&b, &v, &sub) != 4)
			continue;
		while (sub.p < sub.end) {
			uint64_t fn = 0, line = 0;

			if (pb_next(&sub, &v, &f) != 4)
				continue;
			while (f.p < f.end) {
				unsigned k = pb_next(&f, &v, &g);

				fn = k == 1 ? v : fn;
				line = k == 2 ? v : line;
			}
			if (fn == fn_of_forward && nl < 2)
				lines[nl++] = line;
		}
	}
	cr_assert_eq(nl, 2, "two locations of forward");
	cr_assert((lines[0] == 120 && lines[1] == 131) || (lines[0] == 131 && lines[1] == 120));
	/* on-CPU: mlp, libdnnl, libc, libgomp and the JIT map; [truncated] has none */
	cr_assert_eq(nr_maps, 5);
	cr_assert_eq(map_ids, 1 + 2 + 3 + 4 + 5);
	/* the 11 functions on-CPU; forward once */
	cr_assert_eq(nr_fns, 11);
	cr_assert_str_eq(strings[1], "samples");
	free(raw);
	free(o.buf);
}

/* SVG modes */

static double attr_of(const char *from, const char *attr)
{
	char needle[32];
	const char *a;

	snprintf(needle, sizeof(needle), " %s=\"", attr);
	a = strstr(from, needle);
	cr_assert_not_null(a);
	return strtod(a + strlen(needle), NULL);
}

/* The <g> of the first frame whose title starts with `title`. */
static const char *frame(const struct out *o, const char *title)
{
	char needle[256];
	const char *g;

	snprintf(needle, sizeof(needle), "<title>%s", title);
	g = strstr(o->buf, needle);
	cr_assert_not_null(g, "no frame %s", title);
	return g;
}

static void fill_of(const char *g, unsigned *r, unsigned *gr, unsigned *b)
{
	const char *f = strstr(g, "fill=\"rgb(");

	cr_assert_not_null(f);
	cr_assert_eq(sscanf(f, "fill=\"rgb(%u,%u,%u)", r, gr, b), 3);
}

Test(svgmodes, inverted_puts_the_root_on_top)
{
	struct svg_opts o = { .inverted = true };
	struct out s = render(NULL, F_SVG, &oncpu, &o), n = render(NULL, F_SVG, &oncpu, NULL);

	cr_assert(xml_ok(&s));
	cr_assert(has(&s, ">Icicle Graph<"));
	cr_assert_lt(attr_of(frame(&s, "all ("), "y"), attr_of(frame(&s, "main ("), "y"));
	cr_assert_gt(attr_of(frame(&n, "all ("), "y"), attr_of(frame(&n, "main ("), "y"));
	free(s.buf);
	free(n.buf);
}

Test(svgmodes, flamechart_keeps_time_order)
{
	struct svg_opts o = { .flamechart = true };
	struct out s = render(NULL, F_SVG, &oncpu, &o);
	const char *fwd = frame(&s, "forward (6 samples"), *bwd = frame(&s, "backward (3 samples");

	cr_assert(xml_ok(&s));
	cr_assert(has(&s, ">Flame Chart<"));
	/* forward (0-60 ms) comes back after backward and reduce: three boxes */
	cr_assert_eq(count(&s, "<title>forward ("), 3, "%s", s.buf);
	cr_assert_eq(count(&s, "<title>backward ("), 2);
	cr_assert_lt(attr_of(fwd, "x"), attr_of(bwd, "x"));
	/* the comm's samples in time order: x = samples before, in weight units */
	cr_assert(has(&s, "data-s=\"6\" data-w=\"3\"><title>backward ("), "%s", s.buf);
	free(s.buf);
}

Test(svgmodes, minwidth_percent_and_frame_cap)
{
	struct svg_opts pct = { .minwidth = 10, .minwidth_pct = true }, cap = { .max_frames = 5 };
	struct out a = render(NULL, F_SVG, &oncpu, &pct), b = render(NULL, F_SVG, &oncpu, &cap);

	/* 10% of 23 samples: 2.3; reduce (2) goes, forward (9) stays */
	cr_assert(has(&a, "<title>forward ("));
	cr_assert_not(has(&a, "<title>reduce ("));
	cr_assert_eq(count(&b, "<g class=\"f\""), 5, "%s", b.buf);
	cr_assert(has(&b, "<title>all ("));
	cr_assert(xml_ok(&b));
	free(a.buf);
	free(b.buf);
}

Test(svgmodes, wall_colours_offcpu_blue)
{
	struct profile *q = filtered(&wall, NULL);
	struct out s = render(q, F_SVG, &wall, NULL);
	unsigned r, g, b;

	cr_assert(has(&s, ">Wall Time Flame Graph<"));
	cr_assert(has(&s, "<title>read_batch (120,000 us, 29.31%; off-CPU 100%)</title>"), "%s",
		  s.buf);
	fill_of(frame(&s, "read_batch ("), &r, &g, &b);
	cr_assert(b > r && b > g, "off-CPU is blue: %u,%u,%u", r, g, b);
	fill_of(frame(&s, "forward ("), &r, &g, &b);
	cr_assert(r > b, "on-CPU is warm: %u,%u,%u", r, g, b);
	fill_of(frame(&s, RUNQUEUE_FRAME " ("), &r, &g, &b);
	cr_assert(r > 150 && b == 220, "runqueue is purple: %u,%u,%u", r, g, b);
	free(s.buf);
	profile__free(q);
}

Test(svgmodes, diff_colours_and_shape)
{
	struct profile_filter f = { .has_time = true, .time_start = 0, .time_end = 100 * MS };
	struct profile *q = filtered(&oncpu, &f);
	struct out o = { 0 };
	FILE *mf = open_memstream(&o.buf, &o.len);
	unsigned r, g, b;

	/* base = the first 100 ms, new = all of it: reduce only in new */
	cr_assert_eq(render_diff_svg(q, p, &oncpu, false, NULL, mf), 0);
	fclose(mf);
	cr_assert(xml_ok(&o));
	cr_assert(has(&o, ">Differential Flame Graph<"));
	fill_of(frame(&o, "reduce ("), &r, &g, &b);
	cr_assert(r == 255 && g < 210 && g == b, "grew: red, %u,%u,%u", r, g, b);
	cr_assert(has(&o, "<title>reduce (2 samples, 8.70%; +8.70%)</title>"), "%s", o.buf);
	free(o.buf);

	/* the other way round, normalised: shape of the first 100 ms */
	o.buf = NULL;
	mf = open_memstream(&o.buf, &o.len);
	cr_assert_eq(render_diff_svg(p, q, &oncpu, true, NULL, mf), 0);
	fclose(mf);
	cr_assert_not(has(&o, "<title>reduce ("));
	fill_of(frame(&o, "forward ("), &r, &g, &b);
	cr_assert(r == 255, "forward is a bigger share of the first 100 ms: %u,%u,%u", r, g, b);
	/* mlp's 7 of 13 samples in the first 100 ms, 15 of 23 in all: shrank */
	fill_of(frame(&o, "train_epoch ("), &r, &g, &b);
	cr_assert(b == 255 && r < 210 && r == g, "shrank: blue, %u,%u,%u", r, g, b);
	free(o.buf);
	profile__free(q);
}

Test(svgmodes, titles)
{
	struct out a = render(NULL, F_SVG, &offcpu, NULL), b = render(NULL, F_SVG, &oncpu, NULL);
	struct svg_opts t = { .title = "T", .subtitle = "S", .countname = "ticks" };
	struct out c = render(NULL, F_SVG, &oncpu, &t);

	cr_assert(has(&a, ">Off-CPU Time Flame Graph<"));
	cr_assert(has(&a, "us, "));
	cr_assert(has(&b, ">Flame Graph<"));
	cr_assert(has(&c, ">T</text>") && has(&c, ">S</text>") && has(&c, " ticks, "));
	free(a.buf);
	free(b.buf);
	free(c.buf);
}

Test(svgmodes, bad_options)
{
	struct svg_opts pct = { .minwidth = 101, .minwidth_pct = true };
	struct svg_opts chart = { .flamechart = true };
	FILE *f = fopen("/dev/null", "w");

	cr_assert_eq(render_svg(p, NULL, &pct, f), -EINVAL);
	cr_assert_eq(render_diff_svg(p, p, NULL, true, &chart, f), -EINVAL);
	fclose(f);
}

/* The interaction script is in the file, whole, and keeps zoom and search in the URL. */
Test(svgmodes, script_and_url_state)
{
	struct out s = render(NULL, F_SVG, &oncpu, NULL);

	cr_assert_eq(count(&s, "<script"), 1);
	cr_assert(has(&s, "history.replaceState"));
	cr_assert(has(&s, "'zoom=' + zoomed.d + ',' + zoomed.s"));
	cr_assert(has(&s, "hashchange"));
	free(s.buf);
}

/* Hostile names in every output. */

Test(hostile, svg_every_mode)
{
	struct svg_opts modes[] = {
		{ 0 },
		{ .inverted = true },
		{ .flamechart = true },
		{ .title = "<script>alert(9)</script>", .subtitle = "]]>", .countname = "\"'" },
	};
	const struct render_select *sels[] = { &oncpu, &wall };

	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		for (size_t k = 0; k < 2; k++) {
			struct profile *q = k ? filtered(sels[k], NULL) : NULL;
			struct out s = render(q, F_SVG, sels[k], &modes[m]);

			cr_assert_eq(strlen(s.buf), s.len, "NUL in the SVG");
			cr_assert(xml_ok(&s), "mode %zu sel %zu", m, k);
			cr_assert_eq(count(&s, "<script"), 1);
			cr_assert_eq(count(&s, "]]>"), 1);
			cr_assert_eq(count(&s, "\x1b"), 0);
			cr_assert_eq(count(&s, "<x/>"), 0);
			profile__free(q);
			free(s.buf);
		}
	}
}

Test(hostile, diff_svg)
{
	struct out o = { 0 };
	FILE *mf = open_memstream(&o.buf, &o.len);

	cr_assert_eq(render_diff_svg(p, p, &oncpu, true, NULL, mf), 0);
	fclose(mf);
	cr_assert(xml_ok(&o));
	cr_assert_eq(count(&o, "<script"), 1);
	free(o.buf);
}

/* Same shapes as the fixed profile: as many lines, each with as many frames. */
static void same_shape(const struct out *a, const struct out *b)
{
	size_t la = 0, lb = 0;
	unsigned sa[64] = { 0 }, sb[64] = { 0 };

	for (const char *c = a->buf, *s = c; c < a->buf + a->len; c++) {
		if (*c == '\n') {
			size_t semis = 0;

			for (const char *d = s; d < c; d++)
				semis += *d == ';';
			sa[semis < 63 ? semis : 63]++;
			la++;
			s = c + 1;
		}
	}
	for (const char *c = b->buf, *s = c; c < b->buf + b->len; c++) {
		cr_assert((unsigned char)*c >= 0x20 || *c == '\n', "control byte %#x", *c);
		if (*c == '\n') {
			size_t semis = 0;

			for (const char *d = s; d < c; d++)
				semis += *d == ';';
			sb[semis < 63 ? semis : 63]++;
			lb++;
			s = c + 1;
		}
	}
	cr_assert_eq(la, lb);
	cr_assert(!memcmp(sa, sb, sizeof(sa)), "a name added or removed a frame");
}

Test(hostile, folded_adds_no_frames)
{
	struct profile *fixed = profile__new(), *fw, *hw;
	struct out a, b;

	cr_assert_eq(fixed_profile(fixed), 0);
	a = render(fixed, F_FOLDED, &oncpu, NULL);
	b = render(NULL, F_FOLDED, &oncpu, NULL);
	same_shape(&a, &b);
	free(a.buf);
	free(b.buf);
	cr_assert_eq(profile__filter(fixed, wall.kinds, NULL, &fw), 0);
	cr_assert_eq(profile__filter(p, wall.kinds, NULL, &hw), 0);
	a = render(fw, F_FOLDED, &wall, NULL);
	b = render(hw, F_FOLDED, &wall, NULL);
	same_shape(&a, &b);
	free(a.buf);
	free(b.buf);
	profile__free(fw);
	profile__free(hw);
	profile__free(fixed);
}

Test(hostile, trace_json_valid)
{
	struct profile *q = filtered(&wall, NULL);
	struct out t = render(q, F_TRACE, &wall, NULL);

	cr_assert_eq(strlen(t.buf), t.len, "NUL in the JSON");
	cr_assert(json_ok(&t));
	cr_assert_eq(count(&t, "\x1b"), 0);
	cr_assert_eq(count(&t, "<"), 0, "markup escaped as \\u003c");
	cr_assert(has(&t, "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e"));
	profile__free(q);
	free(t.buf);
}

Test(hostile, top_and_pprof)
{
	struct top_opts all = { 0 }, mod = { .by = TOP_BY_MODULE };
	struct out t = render(NULL, F_TOP, &oncpu, &all), m = render(NULL, F_TOP, &oncpu, &mod);
	struct out pp = render(NULL, F_PPROF, &wall, NULL);
	size_t len, nr_strings = 0;
	uint8_t *raw;

	for (size_t i = 0; i < t.len; i++)
		cr_assert((unsigned char)t.buf[i] >= 0x20 || t.buf[i] == '\n');
	cr_assert_eq(count(&t, "\n"), 3 + 11, "a line per function, none split");
	cr_assert(has(&m, "lib:x.so\n"));
	raw = gunzip(&pp, &len);
	for (struct pb b = { raw, raw + len }, sub; b.p < b.end;) {
		uint64_t v;

		if (pb_next(&b, &v, &sub) != 6)
			continue;
		for (const uint8_t *c = sub.p; c < sub.end; c++)
			cr_assert(*c >= 0x20 && *c != 0x7f, "control byte in a pprof string");
		nr_strings++;
	}
	cr_assert_gt(nr_strings, 17);
	free(raw);
	free(t.buf);
	free(m.buf);
	free(pp.buf);
}

/* Empty profiles and write errors. */

Test(outputs, empty_profile)
{
	struct top_opts o = { 0 };
	struct out t = render(NULL, F_TOP, &oncpu, &o), j = render(NULL, F_TRACE, &oncpu, NULL);
	struct out pp = render(NULL, F_PPROF, &oncpu, NULL),
		   f = render(NULL, F_FOLDED, &wall, NULL);
	struct svg_opts chart = { .flamechart = true };
	struct out c = render(NULL, F_SVG, &oncpu, &chart);

	cr_assert(has(&t, "Total: 0 samples"));
	cr_assert(json_ok(&j));
	cr_assert_gt(pp.len, 18);
	cr_assert_eq(f.len, 0);
	cr_assert(xml_ok(&c));
	cr_assert(has(&c, "No samples"));
	free(t.buf);
	free(j.buf);
	free(pp.buf);
	free(f.buf);
	free(c.buf);
}

Test(outputs, json_string)
{
	static const struct {
		const char *in;
		size_t len;
		const char *out;
	} cases[] = {
		{ "a\"b\\c", 5, "\"a\\\"b\\\\c\"" },  { "<&>", 3, "\"\\u003c\\u0026\\u003e\"" },
		{ "\x1b\n\0", 3, "\"???\"" },	      { "\xff", 1, "\"\xef\xbf\xbd\"" },
		{ "\xe2\x80\xa8", 3, "\"\\u2028\"" }, { "", 0, "\"[unnamed]\"" },
		{ "\xc3\xa9", 2, "\"\xc3\xa9\"" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *buf = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&buf, &n);

		cr_assert_eq(render_json_string(cases[i].in, cases[i].len, f), 0);
		fclose(f);
		cr_assert_str_eq(buf, cases[i].out, "case %zu", i);
		free(buf);
	}
}

static char stdio_buf[1 << 20];

Test(outputs, write_errors)
{
	struct top_opts o = { 0 };
	struct svg_opts chart = { .flamechart = true };

	cr_assert_eq(fixed_profile(p), 0);
	for (int i = 0; i < 6; i++) {
		FILE *full = fopen("/dev/full", "w");
		int err;

		cr_assert_not_null(full);
		/* a buffer that holds it all: the error shows only when flushed */
		cr_assert_eq(setvbuf(full, stdio_buf, _IOFBF, sizeof(stdio_buf)), 0);
		switch (i) {
		case 0:
			err = render_top(p, NULL, &o, full);
			break;
		case 1:
			err = render_pprof(p, NULL, full);
			break;
		case 2:
			err = render_trace(p, NULL, full);
			break;
		case 3:
			err = render_diff_folded(p, p, NULL, true, full);
			break;
		case 4:
			err = render_diff_svg(p, p, NULL, true, NULL, full);
			break;
		default:
			err = render_svg(p, NULL, &chart, full);
			break;
		}
		cr_assert_eq(err, -ENOSPC, "output %d: %d", i, err);
		fclose(full);
	}
}
