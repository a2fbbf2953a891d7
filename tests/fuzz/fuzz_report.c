/* SPDX-License-Identifier: MIT */
/*
 * The report pipeline: a dlflame.data file read (profile/file.c) and drawn
 * in every output (render/): folded, SVG (flame graph, icicle, flame chart),
 * top by function, module and kind, pprof, trace, the differential outputs,
 * stack ends and symbol hints. Output goes to /dev/null.
 */
#include <stdio.h>
#include <stdlib.h>

#include "profile/filter.h"
#include "profile/profile.h"
#include "render/render.h"
#include "tests/fuzz/fuzz.h"

static FILE *null_out(void)
{
	static FILE *out;

	if (!out)
		out = fopen("/dev/null", "w");
	return out;
}

static void render_all(const struct profile *p, const struct render_select *sel, FILE *out)
{
	struct svg_opts svg = { .max_frames = 2000 };
	struct svg_opts chart = { .inverted = true, .flamechart = true, .max_frames = 2000 };
	struct render_symbol_hint hints[4];
	uint64_t ends[STACK_END_MAX];
	char line[256];
	size_t n;

	render_folded(p, sel, out);
	render_svg(p, sel, &svg, out);
	render_svg(p, sel, &chart, out);
	for (int by = TOP_BY_FUNCTION; by <= TOP_BY_KIND; by++) {
		struct top_opts top = { .by = (enum top_by)by, .by_total = by == TOP_BY_MODULE };

		render_top(p, sel, &top, out);
	}
	render_pprof(p, sel, out);
	render_trace(p, sel, out);
	{
		struct trace_opts bound = { .max_bytes = 4096 }, spans = { .max_spans = 3 };
		struct speedscope_opts ss = { .lines = true }, wall = { .wall = true };

		render_trace_bounded(p, sel, &bound, NULL, out);
		render_trace_bounded(p, sel, &spans, NULL, out);
		render_speedscope(p, sel, &ss, out);
		render_speedscope(p, sel, &wall, out);
	}
	render_ranks(p, out);
	render_calls(p, sel, true, out);
	render_memory(p, out);
	if (!render_stack_ends(p, sel, ends))
		render_ends_line(ends, line, sizeof(line));
	render_symbol_hints(p, sel, 0.01, hints, 4, &n);
}

/* --rank, --per-rank and dlflame merge of the profile with its relabelled self. */
static void ranks_views(const struct profile *p, const struct profile *named,
			const struct render_select *sel, FILE *out)
{
	static const uint32_t ranks[] = { 0, 1 };
	struct profile_filter f = { .ranks = ranks, .nr_ranks = 2, .per_rank = true };
	struct profile *view = NULL, *m = profile__new();
	struct profile_clash clash;

	if (!profile__filter(named, sel->kinds, &f, &view) && view) {
		render_folded(view, sel, out);
		profile__free(view);
	}
	profile__merge_clash(p, named, &clash);
	if (m && !profile__merge(m, p, true) && !profile__merge(m, named, false)) {
		render_folded(m, sel, out);
		render_ranks(m, out);
	}
	profile__free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct render_select oncpu = { .kinds = { [SAMPLE_ONCPU] = true } };
	struct render_select all = {
		.kinds = { [SAMPLE_ONCPU] = true,
			   [SAMPLE_OFFCPU] = true,
			   [SAMPLE_RUNQUEUE] = true },
		.weight_ns = true,
	};
	struct profile_read_error err;
	uint8_t *file = NULL;
	size_t len;
	struct profile *p = NULL, *named;
	FILE *out = null_out();

	if (!out)
		return 0;
	file = fuzz_profile_file(data, size, &len);
	if (!file || profile__read_mem(file, len, &p, &err) < 0) {
		free(file);
		return 0;
	}
	/* as `dlflame report` draws: one frame per function */
	named = profile__relabel(p, false);
	if (named) {
		render_all(named, &oncpu, out);
		render_all(named, &all, out);
		render_diff_folded(named, p, &all, true, out);
		render_diff_svg(p, named, &oncpu, false, NULL, out);
		ranks_views(p, named, &all, out);
		profile__free(named);
	}
	profile__free(p);
	free(file);
	fflush(out);
	return 0;
}
