/* SPDX-License-Identifier: MIT */
/*
 * FlameGraph's folded stacks. Samples are summed per (comm, stack id) in a
 * hash map first, so the text of a stack is built once per distinct stack,
 * not once per sample.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "render/internal.h"

void agg_free(struct agg *a)
{
	if (!a)
		return;
	free(a->v);
	memset(a, 0, sizeof(*a));
}

void select_kinds(const struct render_select *sel, bool kinds[SAMPLE_KIND_MAX])
{
	bool any = false;

	for (int k = 0; sel && k < SAMPLE_KIND_MAX; k++)
		any |= sel->kinds[k];
	for (int k = 0; k < SAMPLE_KIND_MAX; k++)
		kinds[k] = any ? sel->kinds[k] : k == SAMPLE_ONCPU;
}

int agg_samples(const struct profile *p, const struct render_select *sel, struct agg *out)
{
	return agg_samples_range(p, sel, 0, profile__nr_samples(p), out);
}

int agg_samples_range(const struct profile *p, const struct render_select *sel, size_t first,
		      size_t end, struct agg *out)
{
	bool kinds[SAMPLE_KIND_MAX];
	bool by_ns = sel && sel->weight_ns;
	size_t nr_stacks = profile__nr_stacks(p);
	size_t nr_threads = profile__nr_threads(p);
	size_t nr_strings = profile__nr_strings(p);
	uint64_t last_key = UINT64_MAX, last_idx = 0;
	struct u64map idx;
	int err = 0;

	memset(out, 0, sizeof(*out));
	select_kinds(sel, kinds);
	if (end > profile__nr_samples(p))
		end = profile__nr_samples(p);
	u64map_init(&idx);
	for (size_t i = first; i < end; i++) {
		const struct pf_sample *s = profile__get_sample(p, i);
		const struct pf_thread *t;
		uint64_t w, key, v;

		if (s->kind >= SAMPLE_KIND_MAX || !kinds[s->kind])
			continue;
		w = by_ns ? s->weight : 1;
		if (!w)
			continue;
		if (s->stack >= nr_stacks || s->thread >= nr_threads) {
			err = -EINVAL;
			goto out;
		}
		t = profile__get_thread(p, s->thread);
		if (t->comm >= nr_strings) {
			err = -EINVAL;
			goto out;
		}
		/* cannot be UINT64_MAX (the map's empty key): ids are < their counts */
		key = (uint64_t)t->comm << 32 | s->stack;
		/* consecutive samples often repeat a stack: skip the lookup */
		if (key == last_key) {
			v = last_idx;
		} else if (!u64map_get(&idx, key, &v)) {
			err = grow_array((void **)&out->v, &out->cap, out->len + 1,
					 sizeof(*out->v));
			if (err)
				goto out;
			v = out->len;
			err = u64map_put(&idx, key, v);
			if (err)
				goto out;
			out->v[out->len++] =
				(struct agg_entry){ .comm = t->comm, .stack = s->stack };
		}
		last_key = key;
		last_idx = v;
		out->v[v].weight = sat_add(out->v[v].weight, w);
		if (s->kind == SAMPLE_OFFCPU || s->kind == SAMPLE_RUNQUEUE)
			out->v[v].off = sat_add(out->v[v].off, w);
		out->total = sat_add(out->total, w);
	}
out:
	u64map_free(&idx);
	if (err)
		agg_free(out);
	return err;
}

static const char *const kind_suffix[FRAME_KIND_MAX] = {
	[FRAME_KERNEL] = "_[k]",
	[FRAME_JIT] = "_[j]",
	[FRAME_INLINED] = "_[i]",
};

static int line_cmp(const void *a, const void *b)
{
	const struct folded_line *x = a, *y = b;
	int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);

	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

int frame_names_init(struct frame_names *nc, const struct profile *p)
{
	size_t n = profile__nr_frames(p);

	memset(nc, 0, sizeof(*nc));
	nc->off = malloc((n ? n : 1) * sizeof(*nc->off));
	nc->len = malloc((n ? n : 1) * sizeof(*nc->len));
	if (!nc->off || !nc->len) {
		frame_names_free(nc);
		return -ENOMEM;
	}
	memset(nc->off, 0xff, n * sizeof(*nc->off));
	return 0;
}

void frame_names_free(struct frame_names *nc)
{
	if (!nc)
		return;
	sb_free(&nc->text);
	free(nc->off);
	free(nc->len);
	memset(nc, 0, sizeof(*nc));
}

int frame_name(const struct profile *p, struct frame_names *nc, uint32_t f, const char **s,
	       size_t *len)
{
	const struct pf_frame *fr;
	const char *suffix;
	int err = 0;

	if (f >= profile__nr_frames(p))
		return -EINVAL;
	if (nc->off[f] == SIZE_MAX) {
		fr = profile__get_frame(p, f);
		if (fr->name >= profile__nr_strings(p))
			return -EINVAL;
		nc->off[f] = nc->text.len;
		err = sb_add_folded_name(&nc->text, profile__str(p, fr->name),
					 profile__str_len(p, fr->name));
		suffix = fr->kind < FRAME_KIND_MAX ? kind_suffix[fr->kind] : NULL;
		if (!err && suffix)
			err = sb_add(&nc->text, suffix, strlen(suffix));
		nc->len[f] = nc->text.len - nc->off[f];
		if (err) {
			nc->off[f] = SIZE_MAX;
			return err;
		}
	}
	*s = nc->text.buf + nc->off[f];
	*len = nc->len[f];
	return 0;
}

int folded_lines(const struct profile *p, const struct agg *agg, struct strbuf *keys,
		 struct folded_line **out, size_t *nr)
{
	struct frame_names nc;
	struct folded_line *lines;
	uint32_t *frames = NULL;
	size_t frames_cap = 0, n = 0;
	int err;

	*out = NULL;
	*nr = 0;
	err = frame_names_init(&nc, p);
	if (err)
		return err;
	lines = calloc(agg->len ? agg->len : 1, sizeof(*lines));
	if (!lines) {
		err = -ENOMEM;
		goto out;
	}
	/* one key "comm;root;...;leaf" per distinct (comm, stack) */
	for (size_t i = 0; i < agg->len; i++) {
		const struct agg_entry *e = &agg->v[i];
		int64_t depth = profile__stack_frames(p, e->stack, &frames, &frames_cap);

		if (depth < 0) {
			err = (int)depth;
			goto out;
		}
		lines[i].off = keys->len;
		lines[i].weight = e->weight;
		err = sb_add_folded_name(keys, profile__str(p, e->comm),
					 profile__str_len(p, e->comm));
		for (int64_t d = 0; !err && d < depth; d++) {
			const char *s;
			size_t len;

			err = frame_name(p, &nc, frames[d], &s, &len);
			if (!err)
				err = sb_add(keys, ";", 1);
			if (!err)
				err = sb_add(keys, s, len);
		}
		if (err)
			goto out;
		lines[i].len = keys->len - lines[i].off;
	}
	for (size_t i = 0; i < agg->len; i++)
		lines[i].s = keys->buf + lines[i].off;

	/* different stacks can print alike once sanitised: merge them */
	qsort(lines, agg->len, sizeof(*lines), line_cmp);
	for (size_t i = 0; i < agg->len; i++) {
		if (n && !line_cmp(&lines[n - 1], &lines[i]))
			lines[n - 1].weight = sat_add(lines[n - 1].weight, lines[i].weight);
		else
			lines[n++] = lines[i];
	}
	*out = lines;
	*nr = n;
	lines = NULL;
out:
	free(lines);
	free(frames);
	frame_names_free(&nc);
	return err;
}

/*
 * Order of whole output lines, "text count\n", as `LC_ALL=C sort` would
 * sort them, without building them: texts differ before either ends
 * except when one is a prefix of the other, and then the tails decide.
 */
static int whole_line_cmp(const void *a, const void *b)
{
	const struct folded_line *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len, xl, yl;
	char xt[32], yt[32];
	int c = memcmp(x->s, y->s, n);

	if (c)
		return c;
	xl = (size_t)snprintf(xt, sizeof(xt), " %llu\n", (unsigned long long)x->weight);
	yl = (size_t)snprintf(yt, sizeof(yt), " %llu\n", (unsigned long long)y->weight);
	for (size_t i = n;; i++) {
		int xc = i < x->len ? (uint8_t)x->s[i] : i - x->len < xl ? xt[i - x->len] : -1;
		int yc = i < y->len ? (uint8_t)y->s[i] : i - y->len < yl ? yt[i - y->len] : -1;

		if (xc != yc || xc < 0)
			return xc < yc ? -1 : xc > yc;
	}
}

int render_folded(const struct profile *p, const struct render_select *sel, FILE *out)
{
	bool by_ns = sel && sel->weight_ns;
	struct strbuf keys = { 0 };
	struct folded_line *lines = NULL;
	size_t n = 0, kept = 0;
	struct agg agg;
	int err;

	err = agg_samples(p, sel, &agg);
	if (err)
		return err;
	err = folded_lines(p, &agg, &keys, &lines, &n);
	if (err)
		goto out;
	/* from here on, weight is the count as printed */
	for (size_t i = 0; i < n; i++) {
		lines[i].weight = print_count(lines[i].weight, by_ns);
		if (lines[i].weight) /* else under half a microsecond */
			lines[kept++] = lines[i];
	}
	n = kept;
	qsort(lines, n, sizeof(*lines), whole_line_cmp);
	for (size_t i = 0; !err && i < n; i++) {
		err = put_buf(out, lines[i].s, lines[i].len);
		if (!err && fprintf(out, " %llu\n", (unsigned long long)lines[i].weight) < 0)
			err = render_write_error();
	}
	if (!err && (fflush(out) == EOF || ferror(out)))
		err = render_write_error();
out:
	agg_free(&agg);
	sb_free(&keys);
	free(lines);
	return err;
}
