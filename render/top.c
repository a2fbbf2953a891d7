/* SPDX-License-Identifier: MIT */
/*
 * The top table: self and total weight per function, module or frame kind,
 * or per process (its samples' comm, labelled "comm-PID [container]" by
 * the filter; self and total are then the same).
 * Self goes to the group of the leaf frame; total to each group on the
 * stack once, however often the stack passes through it (recursion), so
 * totals never exceed 100%. Computed per distinct (comm, stack), not per
 * sample.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "render/internal.h"

#define JIT_MODULE "[jit]"
#define KERNEL_MODULE "[kernel]"
#define NO_MODULE "[unknown]"

static const char *const kind_names[FRAME_KIND_MAX] = {
	[FRAME_USER] = "user",	     [FRAME_KERNEL] = "kernel",	  [FRAME_JIT] = "jit",
	[FRAME_INLINED] = "inlined", [FRAME_SPECIAL] = "special", [FRAME_PYTHON] = "python",
};

struct row {
	uint64_t self;
	uint64_t total;
	uint32_t group;
	const char *name; /* into top.names, set once it stops moving */
	size_t off;
	size_t len;
};

struct top {
	const struct profile *p;
	enum top_by by;
	size_t nr_groups;
	uint64_t *self;
	uint64_t *total;
	size_t *stamp; /* last agg entry (+ 1) that counted the group's total */
	struct strbuf names;
	struct frame_names fn;
};

static uint32_t group_of(const struct top *t, uint32_t frame)
{
	const struct pf_frame *f = profile__get_frame(t->p, frame);
	size_t nr_strings = profile__nr_strings(t->p);

	switch (t->by) {
	case TOP_BY_KIND:
		return f->kind < FRAME_KIND_MAX ? f->kind : FRAME_SPECIAL;
	case TOP_BY_MODULE:
		/* perf-maps are per process: all JIT code is one group */
		if (f->kind == FRAME_JIT)
			return (uint32_t)nr_strings;
		if (f->module && f->module < nr_strings)
			return f->module;
		return (uint32_t)nr_strings + (f->kind == FRAME_KERNEL ? 1 : 2);
	default:
		return frame;
	}
}

static const char *base_name(const char *s, size_t *len)
{
	const char *slash = memrchr(s, '/', *len);

	/* "/usr/lib/libdnnl.so.3" -> "libdnnl.so.3"; "[kernel.kallsyms]" stays */
	if (slash && (size_t)(slash - s) + 1 < *len) {
		*len -= (size_t)(slash - s) + 1;
		return slash + 1;
	}
	return s;
}

static int group_name(struct top *t, uint32_t group, struct row *r)
{
	size_t nr_strings = profile__nr_strings(t->p);
	const char *s;
	size_t len;
	int err;

	r->off = t->names.len;
	switch (t->by) {
	case TOP_BY_KIND:
		err = sb_add(&t->names, kind_names[group], strlen(kind_names[group]));
		break;
	case TOP_BY_PROCESS:
		err = sb_add(&t->names, profile__str(t->p, group), profile__str_len(t->p, group));
		break;
	case TOP_BY_MODULE:
		if (group >= nr_strings) {
			s = group == nr_strings	      ? JIT_MODULE
			    : group == nr_strings + 1 ? KERNEL_MODULE
						      : NO_MODULE;
			err = sb_add(&t->names, s, strlen(s));
			break;
		}
		len = profile__str_len(t->p, group);
		s = base_name(profile__str(t->p, group), &len);
		err = sb_add_folded_name(&t->names, s, len);
		break;
	default:
		err = frame_name(t->p, &t->fn, group, &s, &len);
		if (!err)
			err = sb_add(&t->names, s, len);
		break;
	}
	r->len = t->names.len - r->off;
	return err;
}

static int count_entry(struct top *t, const struct agg_entry *e, size_t idx, uint32_t **frames,
		       size_t *cap)
{
	int64_t depth = profile__stack_frames(t->p, e->stack, frames, cap);

	if (depth < 0)
		return (int)depth;
	if (t->by == TOP_BY_PROCESS) {
		if (e->comm >= t->nr_groups)
			return -EINVAL;
		t->self[e->comm] = sat_add(t->self[e->comm], e->weight);
		t->total[e->comm] = sat_add(t->total[e->comm], e->weight);
		return 0;
	}
	if (!depth)
		return 0;
	t->self[group_of(t, (*frames)[depth - 1])] =
		sat_add(t->self[group_of(t, (*frames)[depth - 1])], e->weight);
	for (int64_t d = 0; d < depth; d++) {
		uint32_t g = group_of(t, (*frames)[d]);

		if (t->stamp[g] == idx + 1)
			continue;
		t->stamp[g] = idx + 1;
		t->total[g] = sat_add(t->total[g], e->weight);
	}
	return 0;
}

static int row_cmp(const void *a, const void *b, void *arg)
{
	const struct row *x = a, *y = b;
	bool by_total = *(const bool *)arg;
	uint64_t x1 = by_total ? x->total : x->self, y1 = by_total ? y->total : y->self;
	uint64_t x2 = by_total ? x->self : x->total, y2 = by_total ? y->self : y->total;
	int c;

	if (x1 != y1)
		return x1 > y1 ? -1 : 1;
	if (x2 != y2)
		return x2 > y2 ? -1 : 1;
	c = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);
	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->group < y->group ? -1 : x->group > y->group;
}

/* 12.3456 % -> "12.35%", locale-proof. */
static const char *fmt_pct(char *buf, size_t size, uint64_t part, uint64_t whole)
{
	unsigned long long c =
		whole ? (unsigned long long)((double)part * 10000.0 / (double)whole + 0.5) : 0;

	snprintf(buf, size, "%llu.%02llu%%", c / 100, c % 100);
	return buf;
}

static void describe(const struct render_select *sel, char *buf, size_t size)
{
	static const char *const names[SAMPLE_KIND_MAX] = {
		[SAMPLE_ONCPU] = "on-CPU",
		[SAMPLE_OFFCPU] = "off-CPU",
		[SAMPLE_RUNQUEUE] = "runqueue",
		[SAMPLE_CALL] = "calls",
		[SAMPLE_FAULT] = "page faults (kB touched)",
	};
	bool kinds[SAMPLE_KIND_MAX];
	size_t n = 0;

	select_kinds(sel, kinds);
	buf[0] = '\0';
	for (int k = 0; k < SAMPLE_KIND_MAX; k++) {
		if (kinds[k] && n < size)
			n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? " + " : "", names[k]);
	}
}

int render_top(const struct profile *p, const struct render_select *sel,
	       const struct top_opts *opts, FILE *out)
{
	static const char *const by_names[] = { "function", "module", "kind", "process" };
	bool by_ns = sel && sel->weight_ns, sort_total;
	struct top t = { .p = p, .by = opts ? opts->by : TOP_BY_FUNCTION };
	size_t rows = opts ? opts->rows : 0, nr = 0;
	struct row *v = NULL;
	uint32_t *frames = NULL;
	size_t frames_cap = 0;
	char what[64], a[32], b[32], line[256];
	uint64_t ends[STACK_END_MAX];
	struct agg agg;
	int err;

	if ((unsigned)t.by > TOP_BY_PROCESS)
		return -EINVAL;
	err = agg_samples(p, sel, &agg);
	if (err)
		return err;
	err = frame_names_init(&t.fn, p);
	if (err)
		goto out;
	t.nr_groups = t.by == TOP_BY_KIND      ? FRAME_KIND_MAX
		      : t.by == TOP_BY_MODULE  ? profile__nr_strings(p) + 3
		      : t.by == TOP_BY_PROCESS ? profile__nr_strings(p)
					       : profile__nr_frames(p);
	err = -ENOMEM;
	t.self = calloc(t.nr_groups + 1, sizeof(*t.self));
	t.total = calloc(t.nr_groups + 1, sizeof(*t.total));
	t.stamp = calloc(t.nr_groups + 1, sizeof(*t.stamp));
	if (!t.self || !t.total || !t.stamp)
		goto out;
	for (size_t i = 0; i < agg.len; i++) {
		err = count_entry(&t, &agg.v[i], i, &frames, &frames_cap);
		if (err)
			goto out;
	}

	err = -ENOMEM;
	v = malloc((t.nr_groups + 1) * sizeof(*v));
	if (!v)
		goto out;
	for (size_t g = 0; g < t.nr_groups; g++) {
		if (!t.total[g])
			continue;
		v[nr] = (struct row){ .self = t.self[g],
				      .total = t.total[g],
				      .group = (uint32_t)g };
		err = group_name(&t, (uint32_t)g, &v[nr]);
		if (err)
			goto out;
		nr++;
	}
	for (size_t i = 0; i < nr; i++)
		v[i].name = t.names.buf + v[i].off;
	sort_total = opts && opts->by_total;
	qsort_r(v, nr, sizeof(*v), row_cmp, &sort_total);

	describe(sel, what, sizeof(what));
	fprintf(out, "Total: %llu %s, %s; by %s, sorted by %s\n",
		(unsigned long long)print_count(agg.total, by_ns),
		!by_ns			   ? "samples"
		: sel->kinds[SAMPLE_FAULT] ? "kB"
					   : "us",
		what, by_names[t.by], opts && opts->by_total ? "total" : "self");
	if (profile__cmeta(p)->lost)
		fprintf(out, "Lost: %llu samples (ring buffer overflow)\n",
			(unsigned long long)profile__cmeta(p)->lost);
	err = render_stack_ends(p, sel, ends);
	if (err)
		goto out;
	if (render_ends_line(ends, line, sizeof(line)))
		fprintf(out, "%s\n", line);
	fprintf(out, "%12s %7s %12s %7s  %s\n", "SELF", "SELF%", "TOTAL", "TOTAL%",
		t.by == TOP_BY_KIND	 ? "KIND"
		: t.by == TOP_BY_MODULE	 ? "MODULE"
		: t.by == TOP_BY_PROCESS ? "PROCESS"
					 : "FUNCTION");
	for (size_t i = 0; i < nr && (!rows || i < rows); i++) {
		fprintf(out, "%12llu %7s %12llu %7s  ",
			(unsigned long long)print_count(v[i].self, by_ns),
			fmt_pct(a, sizeof(a), v[i].self, agg.total),
			(unsigned long long)print_count(v[i].total, by_ns),
			fmt_pct(b, sizeof(b), v[i].total, agg.total));
		if (put_buf(out, v[i].name, v[i].len) || fputc('\n', out) == EOF) {
			err = render_write_error();
			goto out;
		}
	}
	if (rows && nr > rows)
		fprintf(out, "(%zu more; -n 0 shows all)\n", nr - rows);
	err = fflush(out) == EOF || ferror(out) ? render_write_error() : 0;
out:
	agg_free(&agg);
	frame_names_free(&t.fn);
	sb_free(&t.names);
	free(t.self);
	free(t.total);
	free(t.stamp);
	free(frames);
	free(v);
	return err;
}
