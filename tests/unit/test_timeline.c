/* SPDX-License-Identifier: MIT */
/*
 * Outputs for viewers of time: the speedscope file (golden files of the
 * fixed profile, merged runs, frames numbered hottest first, threads named
 * as --per-thread names them) and the bounded Chrome trace (the byte and
 * span bounds hold, every left-out span is counted once, unbounded is
 * render_trace).
 *
 * DLFLAME_UPDATE_GOLDEN=1 rewrites the golden files (then review the diff).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/filter.h"
#include "profile/profile.h"
#include "render/render.h"
#include "tests/golden/fixed_profile.h"

#define GOLDEN_DIR FIXTURES_SRC "/../golden"

static struct profile *recorded;

static void setup_fixed(void)
{
	recorded = profile__new();
	cr_assert_not_null(recorded);
	cr_assert_eq(fixed_profile(recorded), 0);
}

static void teardown(void)
{
	profile__free(recorded);
	recorded = NULL;
}

TestSuite(speedscope, .init = setup_fixed, .fini = teardown, .timeout = 30);
TestSuite(bounded, .fini = teardown, .timeout = 60);

struct out {
	char *buf;
	size_t len;
};

static bool has(const struct out *o, const char *needle)
{
	return memmem(o->buf, o->len, needle, strlen(needle)) != NULL;
}

static size_t count(const struct out *o, const char *needle)
{
	size_t n = 0, nl = strlen(needle);

	for (const char *h = o->buf; (h = memmem(h, o->len - (size_t)(h - o->buf), needle, nl));
	     h += nl)
		n++;
	return n;
}

static void golden(const char *name, const struct out *o)
{
	char path[512];
	FILE *f;
	char *want;
	long len;

	snprintf(path, sizeof(path), "%s/%s", GOLDEN_DIR, name);
	if (getenv("DLFLAME_UPDATE_GOLDEN")) {
		f = fopen(path, "wb");
		cr_assert_not_null(f, "cannot write %s", path);
		cr_assert_eq(fwrite(o->buf, 1, o->len, f), o->len);
		cr_assert_eq(fclose(f), 0);
		return;
	}
	f = fopen(path, "rb");
	cr_assert_not_null(f, "no golden file %s (DLFLAME_UPDATE_GOLDEN=1 makes it)", path);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	rewind(f);
	want = malloc((size_t)len + 1);
	cr_assert_not_null(want);
	cr_assert_eq(fread(want, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	cr_assert((size_t)len == o->len && !memcmp(want, o->buf, o->len),
		  "%s differs from the output:\n%.*s", name, (int)o->len, o->buf);
	free(want);
}

/* As report --speedscope makes it: filtered with threads labelled, not relabelled. */
static struct out speedscope_of(const struct render_select *sel, bool wall, bool lines)
{
	struct profile_filter f = { .per_thread = true, .per_rank = true };
	struct speedscope_opts so = { .wall = wall, .lines = lines };
	struct profile *view = NULL;
	struct out o = { 0 };
	FILE *out = open_memstream(&o.buf, &o.len);

	cr_assert_not_null(out);
	cr_assert_eq(profile__filter(recorded, sel->kinds, &f, &view), 0);
	cr_assert_not_null(view);
	cr_assert_eq(render_speedscope(view, sel, &so, out), 0);
	cr_assert_eq(fclose(out), 0);
	profile__free(view);
	return o;
}

static const struct render_select on_off = {
	.kinds = { [SAMPLE_ONCPU] = true, [SAMPLE_OFFCPU] = true },
	.weight_ns = true,
};
static const struct render_select wall_rq = {
	.kinds = { [SAMPLE_ONCPU] = true, [SAMPLE_OFFCPU] = true, [SAMPLE_RUNQUEUE] = true },
	.weight_ns = true,
};

Test(speedscope, golden)
{
	struct out o = speedscope_of(&on_off, false, false);

	golden("fixed.speedscope.json", &o);
	free(o.buf);
}

Test(speedscope, golden_wall_runqueue_lines)
{
	struct out o = speedscope_of(&wall_rq, true, true);

	golden("fixed-wall.speedscope.json", &o);
	free(o.buf);
}

Test(speedscope, structure)
{
	struct out o = speedscope_of(&on_off, false, false);

	cr_assert(has(&o, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\""));
	cr_assert(has(&o, "\"name\":\"mlp 200\""), "the recorded command names the file");
	/* a profile per thread and view, named as --per-thread names the thread */
	cr_assert_eq(count(&o, "{\"type\":\"sampled\""), 5);
	cr_assert(has(&o, "\"name\":\"mlp-100/100 (on-CPU)\""));
	cr_assert(has(&o, "\"name\":\"mlp-100/100 (off-CPU)\""));
	cr_assert(has(&o, "\"name\":\"omp worker-100/101 (on-CPU)\""));
	cr_assert(has(&o, "\"name\":\"loader-100/102 (off-CPU)\""));
	cr_assert_not(has(&o, "loader-100/102 (on-CPU)"), "no profile without samples");
	/* the frame most samples name comes first: every trainer stack starts at main */
	cr_assert(has(&o, "\"frames\":[\n{\"name\":\"main\",\"file\":\"/usr/bin/mlp\"}"));
	/* a source file where known, the module else; two lines of forward are one frame */
	cr_assert_eq(count(&o, "{\"name\":\"forward\",\"file\":\"src/mlp.c\"}"), 1);
	cr_assert(has(&o, "{\"name\":\"ksys_read_[k]\",\"file\":\"[kernel.kallsyms]\"}"));
	/* the trainer's 4 forward samples, then 2 JIT ones: merged runs, weights in ns */
	cr_assert(has(&o, "\"weights\":[40000000,20000000,30000000,"), "%.*s", (int)o.len, o.buf);
	/* time order: the samples stored out of order come last, by time */
	cr_assert(has(&o, "10000000,10000000]}"));
	cr_assert(has(&o, "\"unit\":\"nanoseconds\",\"startValue\":0,\"endValue\":150000000"));
	free(o.buf);
}

Test(speedscope, wall_marks_blocked_time)
{
	struct out o = speedscope_of(&wall_rq, true, false);

	cr_assert_eq(count(&o, "{\"type\":\"sampled\""), 3, "one wall profile per thread");
	cr_assert(has(&o, "{\"name\":\"[off-CPU]\"}"));
	cr_assert(has(&o, "{\"name\":\"" RUNQUEUE_FRAME "\"}"));
	/* 150 ms on-CPU, 25 ms blocked, 4 ms waiting for a CPU */
	cr_assert(has(&o, "\"name\":\"mlp-100/100 (wall)\",\"unit\":\"nanoseconds\","
			  "\"startValue\":0,\"endValue\":179000000"));
	cr_assert_not(has(&o, "\"line\":"), "lines only with --lines");
	free(o.buf);
}

Test(speedscope, ranks_in_names_and_empty)
{
	struct pf_process pr = { .pid = 100, .rank = 3, .local_rank = 3, .world_size = 4 };
	const struct render_select none = { .kinds = { [SAMPLE_FAULT] = true } };
	struct out o;

	cr_assert_eq(profile__set_process(recorded, &pr), 0);
	o = speedscope_of(&on_off, false, false);
	cr_assert(has(&o, "\"name\":\"rank 3 mlp-100/100 (on-CPU)\""), "%.*s", (int)o.len, o.buf);
	free(o.buf);
	o = speedscope_of(&none, false, false);
	cr_assert(has(&o, "\"frames\":[]},\n\"profiles\":[]}\n"), "%.*s", (int)o.len, o.buf);
	free(o.buf);
}

/* bounded traces */

/*
 * Two threads of n samples each, 1 ms apart, whose leaf changes every
 * sample and whose middle frame after runs of 1 to 13 samples: many
 * short spans of many lengths under a few long ones.
 */
static void long_profile(int n)
{
	int64_t th[2];
	int run = 0, left = 0, layer = 0;

	recorded = profile__new();
	cr_assert_not_null(recorded);
	th[0] = fixed_thread(recorded, 10, 10, "trainer", 0);
	th[1] = fixed_thread(recorded, 10, 11, "worker", 0);
	for (int i = 0; i < n; i++) {
		char mid[16], leaf[16];
		int64_t s;

		if (!left--) {
			run = run % 13 + 1;
			left = run - 1;
			layer++;
		}
		snprintf(mid, sizeof(mid), "layer%d", layer % 5);
		snprintf(leaf, sizeof(leaf), "kernel%d", i % 3);
		s = FSTACK(recorded, { "main", 0, MLP, FRAME_USER, NULL, 0 },
			   { mid, 0, MLP, FRAME_USER, NULL, 0 },
			   { leaf, 0, JITMAP, FRAME_JIT, NULL, 0 });
		/* a gap after every 50 samples: outermost spans end too */
		for (int t = 0; t < 2; t++)
			cr_assert_eq(fixed_samples(recorded, th[t], s, SAMPLE_ONCPU,
						   (uint64_t)i * MS + (uint64_t)(i / 50) * 5 * MS,
						   0, MS, 1),
				     0);
	}
	profile__meta(recorded)->start_time = FIXED_START;
	profile__meta(recorded)->command = (uint32_t)profile__string(recorded, "long", 4);
}

static struct out trace_of(const struct trace_opts *o, struct trace_result *r)
{
	struct out out = { 0 };
	FILE *f = open_memstream(&out.buf, &out.len);

	cr_assert_not_null(f);
	cr_assert_eq(render_trace_bounded(recorded, NULL, o, r, f), 0);
	cr_assert_eq(fclose(f), 0);
	return out;
}

/* The sum of every "hidden":N. */
static uint64_t hidden_sum(const struct out *o)
{
	const char *needle = "\"args\":{\"hidden\":";
	uint64_t sum = 0;

	for (const char *h = o->buf;
	     (h = memmem(h, o->len - (size_t)(h - o->buf), needle, strlen(needle)));
	     h += strlen(needle))
		sum += strtoull(h + strlen(needle), NULL, 10);
	return sum;
}

Test(bounded, unbounded_is_render_trace)
{
	struct trace_opts none = { 0 };
	struct trace_result r;
	struct out a, b = { 0 };
	FILE *f;

	long_profile(2000);
	a = trace_of(&none, &r);
	f = open_memstream(&b.buf, &b.len);
	cr_assert_eq(render_trace(recorded, NULL, f), 0);
	cr_assert_eq(fclose(f), 0);
	cr_assert(a.len == b.len && !memcmp(a.buf, b.buf, a.len));
	cr_assert_eq(r.tracks_cut, 0);
	cr_assert_eq(r.hidden, 0);
	cr_assert_eq(r.spans, count(&a, "\"ph\":\"X\""));
	free(a.buf);
	free(b.buf);
}

Test(bounded, bytes)
{
	struct trace_opts all = { .max_bytes = 1ULL << 40 }, small = { .max_bytes = 60000 };
	struct trace_result r0, r;
	struct out full, o;

	long_profile(2000);
	full = trace_of(&all, &r0);
	cr_assert_eq(r0.tracks_cut, 0, "a bound above the whole trace cuts nothing");
	cr_assert_gt(full.len, 4 * small.max_bytes);
	o = trace_of(&small, &r);
	cr_assert_leq(o.len, small.max_bytes, "%zu bytes", o.len);
	cr_assert_eq(r.tracks_cut, 2);
	/* every span is written or counted once, in a span above it or in a summary */
	cr_assert_eq(r.spans + r.hidden - count(&o, "\"cat\":\"hidden\""), r0.spans);
	cr_assert_eq(hidden_sum(&o), r.hidden);
	cr_assert_gt(r.min_ns, MS, "only spans longer than a sample are left");
	/* what was cut is said: in the tracks' names and in otherData */
	cr_assert(has(&o, "\"args\":{\"name\":\"trainer (spans under "), "%.*s", 3000, o.buf);
	cr_assert(has(&o, "\"span_bound\":\"60000 bytes\""));
	cr_assert(has(&o, "\"name\":\"main\""), "the longest spans stay");
	/* most of the budget is used: a bound is not an excuse to show nothing */
	cr_assert_gt(o.len, small.max_bytes / 3, "%zu bytes", o.len);
	free(full.buf);
	free(o.buf);
}

Test(bounded, spans_per_thread)
{
	struct trace_opts o = { .max_spans = 100 };
	struct trace_result r;
	struct out out;

	long_profile(2000);
	out = trace_of(&o, &r);
	cr_assert_eq(r.tracks_cut, 2);
	cr_assert_leq(count(&out, "\"ph\":\"X\""), 2 * o.max_spans);
	cr_assert_eq(r.spans, count(&out, "\"ph\":\"X\""));
	cr_assert_eq(hidden_sum(&out), r.hidden);
	cr_assert(has(&out, "\"span_bound\":\"100 spans per track\""));
	free(out.buf);
}

Test(bounded, calls_track)
{
	struct trace_opts o = { .max_spans = 100 };
	struct trace_result r;
	struct out out;
	int64_t th, s;

	recorded = profile__new();
	cr_assert_not_null(recorded);
	th = fixed_thread(recorded, 10, 10, "trainer", 0);
	s = FSTACK(recorded, { "main", 0, MLP, FRAME_USER, NULL, 0 },
		   { "step", 0, MLP, FRAME_USER, NULL, 0 });
	/* 1000 calls of step, one every 2 ms, lasting 0.5 to 1.5 ms */
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(fixed_samples(recorded, th, s, SAMPLE_CALL, (uint64_t)i * 2 * MS, 0,
					   MS / 2 + (uint64_t)(i % 100) * MS / 100, 1),
			     0);
	profile__meta(recorded)->start_time = FIXED_START;
	out = trace_of(&o, &r);
	cr_assert_eq(r.tracks_cut, 1);
	cr_assert_leq(r.spans, o.max_spans);
	cr_assert_geq(r.spans, o.max_spans / 2, "%llu", (unsigned long long)r.spans);
	cr_assert_eq(r.spans + r.hidden, 1000);
	cr_assert_eq(count(&out, "\"cat\":\"call\""), r.spans);
	cr_assert(has(&out, "\"args\":{\"name\":\"trainer calls (calls under "));
	free(out.buf);
}
