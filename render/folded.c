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

int agg_samples(const struct profile *p, const struct render_select *sel, struct agg *out)
{
	bool kinds[SAMPLE_KIND_MAX] = { [SAMPLE_ONCPU] = true };
	bool by_ns = sel && sel->weight_ns;
	size_t nr_samples = profile__nr_samples(p);
	size_t nr_stacks = profile__nr_stacks(p);
	size_t nr_threads = profile__nr_threads(p);
	size_t nr_strings = profile__nr_strings(p);
	uint64_t last_key = UINT64_MAX, last_idx = 0;
	struct u64map idx;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (sel) {
		bool any = false;

		for (int k = 0; k < SAMPLE_KIND_MAX; k++)
			any |= sel->kinds[k];
		if (any)
			memcpy(kinds, sel->kinds, sizeof(kinds));
	}
	u64map_init(&idx);
	for (size_t i = 0; i < nr_samples; i++) {
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
		out->total = sat_add(out->total, w);
	}
out:
	u64map_free(&idx);
	if (err)
		agg_free(out);
	return err;
}

int64_t stack_frames(const struct profile *p, uint32_t stack, uint32_t **frames, size_t *cap)
{
	size_t nr_stacks = profile__nr_stacks(p);
	size_t nr_frames = profile__nr_frames(p);
	size_t n = 0;
	int err;

	if (stack >= nr_stacks)
		return -EINVAL;
	while (stack) {
		const struct pf_stack *st = profile__get_stack(p, stack);

		/* interning creates parents first; anything else could loop */
		if (st->parent >= stack || st->frame >= nr_frames)
			return -EINVAL;
		err = grow_array((void **)frames, cap, n + 1, sizeof(**frames));
		if (err)
			return err;
		(*frames)[n++] = st->frame;
		stack = st->parent;
	}
	for (size_t i = 0; i < n / 2; i++) {
		uint32_t tmp = (*frames)[i];

		(*frames)[i] = (*frames)[n - 1 - i];
		(*frames)[n - 1 - i] = tmp;
	}
	return (int64_t)n;
}

static const char *const kind_suffix[FRAME_KIND_MAX] = {
	[FRAME_KERNEL] = "_[k]",
	[FRAME_JIT] = "_[j]",
	[FRAME_INLINED] = "_[i]",
};

struct line {
	const char *s; /* into a strbuf, filled in once the buffer stops moving */
	size_t off;
	size_t len;
	uint64_t weight;
};

static int line_cmp(const void *a, const void *b)
{
	const struct line *x = a, *y = b;
	int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);

	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* Sanitised name plus kind suffix of each frame, built on first use. */
struct name_cache {
	struct strbuf text;
	size_t *off; /* SIZE_MAX: not built yet */
	size_t *len;
};

static int frame_text(const struct profile *p, struct name_cache *nc, uint32_t f)
{
	const struct pf_frame *fr;
	const char *suffix;
	int err;

	if (nc->off[f] != SIZE_MAX)
		return 0;
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
	return err;
}

/* Count as printed: microseconds (rounded) when weighing by ns. */
static uint64_t folded_count(uint64_t w, bool by_ns)
{
	return by_ns ? w / 1000 + (w % 1000 >= 500) : w;
}

int render_folded(const struct profile *p, const struct render_select *sel, FILE *out)
{
	bool by_ns = sel && sel->weight_ns;
	size_t nr_frames = profile__nr_frames(p);
	struct name_cache nc = { 0 };
	struct strbuf keys = { 0 }, text = { 0 };
	struct line *lines = NULL;
	uint32_t *frames = NULL;
	size_t frames_cap = 0, n = 0, kept = 0;
	struct agg agg;
	int err;

	err = agg_samples(p, sel, &agg);
	if (err)
		return err;
	err = -ENOMEM;
	nc.off = malloc((nr_frames ? nr_frames : 1) * sizeof(*nc.off));
	nc.len = malloc((nr_frames ? nr_frames : 1) * sizeof(*nc.len));
	lines = calloc(agg.len ? agg.len : 1, sizeof(*lines));
	if (!nc.off || !nc.len || !lines)
		goto out;
	memset(nc.off, 0xff, nr_frames * sizeof(*nc.off));

	/* one key "comm;root;...;leaf" per distinct (comm, stack) */
	for (size_t i = 0; i < agg.len; i++) {
		const struct agg_entry *e = &agg.v[i];
		int64_t depth = stack_frames(p, e->stack, &frames, &frames_cap);

		if (depth < 0) {
			err = (int)depth;
			goto out;
		}
		lines[i].off = keys.len;
		lines[i].weight = e->weight;
		err = sb_add_folded_name(&keys, profile__str(p, e->comm),
					 profile__str_len(p, e->comm));
		for (int64_t d = 0; !err && d < depth; d++) {
			uint32_t f = frames[d];

			err = frame_text(p, &nc, f);
			if (!err)
				err = sb_add(&keys, ";", 1);
			if (!err)
				err = sb_add(&keys, nc.text.buf + nc.off[f], nc.len[f]);
		}
		if (err)
			goto out;
		lines[i].len = keys.len - lines[i].off;
	}
	for (size_t i = 0; i < agg.len; i++)
		lines[i].s = keys.buf + lines[i].off;

	/* different stacks can print alike once sanitised: merge them */
	qsort(lines, agg.len, sizeof(*lines), line_cmp);
	for (size_t i = 0; i < agg.len; i++) {
		if (n && !line_cmp(&lines[n - 1], &lines[i]))
			lines[n - 1].weight = sat_add(lines[n - 1].weight, lines[i].weight);
		else
			lines[n++] = lines[i];
	}

	/* sort whole lines, count included, as `LC_ALL=C sort` would */
	for (size_t i = 0; i < n; i++) {
		struct line l = lines[i];
		uint64_t count = folded_count(l.weight, by_ns);
		char num[24];
		int len;

		if (!count)
			continue; /* under half a microsecond */
		len = snprintf(num, sizeof(num), " %llu\n", (unsigned long long)count);
		l.off = text.len;
		err = sb_add(&text, l.s, l.len);
		if (!err)
			err = sb_add(&text, num, (size_t)len);
		if (err)
			goto out;
		l.len = text.len - l.off;
		lines[kept++] = l;
	}
	n = kept;
	for (size_t i = 0; i < n; i++)
		lines[i].s = text.buf + lines[i].off;
	qsort(lines, n, sizeof(*lines), line_cmp);

	err = 0;
	for (size_t i = 0; i < n; i++) {
		if (fwrite(lines[i].s, 1, lines[i].len, out) != lines[i].len) {
			err = render_write_error();
			goto out;
		}
	}
	if (fflush(out) == EOF || ferror(out))
		err = render_write_error();
out:
	agg_free(&agg);
	sb_free(&nc.text);
	free(nc.off);
	free(nc.len);
	sb_free(&keys);
	sb_free(&text);
	free(lines);
	free(frames);
	return err;
}
