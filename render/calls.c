/* SPDX-License-Identifier: MIT */
/*
 * The probed functions' table, as the framework profilers print theirs:
 * per function COUNT, TOTAL, MIN, MAX, AVG (ms) and the share of the
 * recording's wall time; by caller, one row per calling frame (and, when
 * that frame is native code called from Python, per Python frame that
 * made the call). From the SAMPLE_CALL samples (one per call, weight its
 * duration).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "render/internal.h"

struct call_row {
	uint32_t name; /* the function's name (string id) */
	uint32_t caller; /* with by_caller: the calling frame's name, else 0 */
	uint32_t py; /* with by_caller: the nearest Python frame past a native caller, or 0 */
	uint64_t count, total, min, max;
};

struct calls_ctx {
	const struct profile *p;
	bool by_caller;
	struct u64map index; /* name << 32 | pair -> row */
	struct u64map pairs; /* caller << 32 | py -> pair */
	struct call_row *rows;
	size_t n, cap;
	uint64_t first, last; /* the calls' span, when the profile has no times */
};

static uint32_t call_frame_name(const struct profile *p, uint32_t stack)
{
	const struct pf_stack *st = profile__get_stack(p, stack);

	return st && stack ? profile__get_frame(p, st->frame)->name : 0;
}

/* The name of the innermost Python frame from stack on outward, or 0. */
static uint32_t python_caller(const struct profile *p, uint32_t stack)
{
	while (stack) {
		const struct pf_stack *st = profile__get_stack(p, stack);
		const struct pf_frame *fr = profile__get_frame(p, st->frame);

		if (fr->kind == FRAME_PYTHON)
			return fr->name;
		if (st->parent >= stack)
			break;
		stack = st->parent;
	}
	return 0;
}

static int add_call(void *ctx, const struct pf_sample *s)
{
	struct calls_ctx *c = ctx;
	const struct pf_stack *st;
	uint32_t name, caller = 0, py = 0;
	uint64_t key, v, pair = 0;
	struct call_row *r;

	if (s->kind != SAMPLE_CALL || !s->stack || s->stack >= profile__nr_stacks(c->p))
		return 0;
	name = call_frame_name(c->p, s->stack);
	if (c->by_caller) {
		st = profile__get_stack(c->p, s->stack);
		caller = call_frame_name(c->p, st->parent);
		if (st->parent && st->parent < s->stack &&
		    profile__get_frame(c->p, profile__get_stack(c->p, st->parent)->frame)->kind !=
			    FRAME_PYTHON)
			py = python_caller(c->p, st->parent);
		key = (uint64_t)caller << 32 | py;
		if (!u64map_get(&c->pairs, key, &pair)) {
			pair = c->pairs.len;
			if (u64map_put(&c->pairs, key, pair))
				return -ENOMEM;
		}
	}
	key = (uint64_t)name << 32 | pair;
	if (!u64map_get(&c->index, key, &v)) {
		if (grow_array((void **)&c->rows, &c->cap, c->n + 1, sizeof(*c->rows)) ||
		    u64map_put(&c->index, key, c->n))
			return -ENOMEM;
		c->rows[c->n] = (struct call_row){
			.name = name, .caller = caller, .py = py, .min = UINT64_MAX
		};
		v = c->n++;
	}
	r = &c->rows[v];
	r->count++;
	r->total = sat_add(r->total, s->weight);
	if (s->weight < r->min)
		r->min = s->weight;
	if (s->weight > r->max)
		r->max = s->weight;
	if (!c->first || s->time < c->first)
		c->first = s->time;
	if (s->time + s->weight > c->last)
		c->last = s->time + s->weight;
	return 0;
}

static int by_total(const void *a, const void *b)
{
	const struct call_row *x = a, *y = b;

	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

int render_calls(const struct profile *p, const struct render_select *sel, bool by_caller,
		 FILE *out)
{
	struct calls_ctx c = { .p = p, .by_caller = by_caller };
	const struct pf_meta *m = profile__cmeta(p);
	uint64_t wall, calls = 0;
	int err;

	(void)sel;
	u64map_init(&c.index);
	u64map_init(&c.pairs);
	err = profile__foreach_sample(p, add_call, &c);
	if (err)
		goto out;
	if (c.n)
		qsort(c.rows, c.n, sizeof(*c.rows), by_total);
	wall = m->end_time > m->start_time ? m->end_time - m->start_time : c.last - c.first;
	for (size_t i = 0; i < c.n; i++)
		calls += c.rows[i].count;
	if (fprintf(out, "Calls: %llu of %zu %s; wall time %.3f s\n", (unsigned long long)calls,
		    c.n, by_caller ? "function and caller pairs" : "probed functions",
		    (double)wall / 1e9) < 0 ||
	    fprintf(out, "%10s %12s %10s %10s %10s %6s  %s\n", "COUNT", "TOTAL ms", "MIN ms",
		    "MAX ms", "AVG ms", "WALL%",
		    by_caller ? "FUNCTION <- CALLER" : "FUNCTION") < 0) {
		err = render_write_error();
		goto out;
	}
	for (size_t i = 0; i < c.n && !err; i++) {
		const struct call_row *r = &c.rows[i];
		struct strbuf name = { 0 };

		err = sb_add_folded_name(&name, profile__str(p, r->name),
					 profile__str_len(p, r->name));
		if (!err && by_caller) {
			err = sb_add(&name, " <- ", 4);
			if (!err)
				err = sb_add_folded_name(
					&name, r->caller ? profile__str(p, r->caller) : "[root]",
					r->caller ? profile__str_len(p, r->caller) : 6);
			/* native code between: which Python line made the call */
			if (!err && r->py)
				err = sb_add(&name, " <- ... <- ", 11);
			if (!err && r->py)
				err = sb_add_folded_name(&name, profile__str(p, r->py),
							 profile__str_len(p, r->py));
		}
		if (!err && fprintf(out, "%10llu %12.3f %10.3f %10.3f %10.3f %5.1f%%  %.*s\n",
				    (unsigned long long)r->count, ms(r->total), ms(r->min),
				    ms(r->max), ms(r->total) / (double)r->count,
				    wall ? 100.0 * (double)r->total / (double)wall : 0.0,
				    (int)name.len, name.buf) < 0)
			err = render_write_error();
		sb_free(&name);
	}
	if (!err && (fflush(out) == EOF || ferror(out)))
		err = render_write_error();
out:
	u64map_free(&c.index);
	u64map_free(&c.pairs);
	free(c.rows);
	return err;
}
