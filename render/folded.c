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
 * Streaming: lines are written as they are made, in the order `LC_ALL=C
 * sort` gives them, with memory bounded by the profile's stack tree, not
 * by the output (a deep chain with a sample per level prints the square
 * of its depth). A level's items are sorted by their whole text: a name's
 * own line is "name count\n", the lines under it start "name;", and
 * since names hold no ';' or newline, no item's text is a prefix of
 * another's, so sorting items level by level orders the whole lines.
 * Children with equal names are one group (their lines are one line).
 */
struct fitem {
	size_t off, len; /* the name, in fs->nc.text (frames) or fs->comms (comms) */
	bool comm;
	bool sub; /* the lines under the name; else its own line */
	uint64_t count; /* own line: the count printed */
	size_t first, n; /* sub: its nodes, [first, first + n) of the level's array */
};

struct fstream {
	const struct profile *p;
	FILE *out;
	bool by_ns;
	struct frame_names nc;
	struct strbuf comms; /* folded comm names */
	size_t *child_off; /* children of stack s: child[child_off[s] .. child_off[s + 1]) */
	uint32_t *child;
	uint32_t *mark; /* == gen: the stack is on the way to a line of the current comm */
	uint64_t *own; /* the current comm's weight ending at each stack */
	uint32_t gen;
	struct strbuf path; /* the text of the current level's parent */
	size_t *comm_off, *comm_len; /* each agg entry's comm name in comms */
};

static const struct fstream *fitem_fs; /* qsort's context */

static const char *fitem_text(const struct fstream *fs, const struct fitem *it)
{
	return (it->comm ? fs->comms.buf : fs->nc.text.buf) + it->off;
}

static int fitem_cmp(const void *a, const void *b)
{
	const struct fitem *x = a, *y = b;
	const char *xs = fitem_text(fitem_fs, x), *ys = fitem_text(fitem_fs, y);
	size_t n = x->len < y->len ? x->len : y->len, xl, yl;
	char xt[32], yt[32];
	int c = memcmp(xs, ys, n);

	if (c)
		return c;
	xl = x->sub ? (size_t)snprintf(xt, sizeof(xt), ";")
		    : (size_t)snprintf(xt, sizeof(xt), " %llu\n", (unsigned long long)x->count);
	yl = y->sub ? (size_t)snprintf(yt, sizeof(yt), ";")
		    : (size_t)snprintf(yt, sizeof(yt), " %llu\n", (unsigned long long)y->count);
	for (size_t i = n;; i++) {
		int xc = i < x->len ? (uint8_t)xs[i] : i - x->len < xl ? xt[i - x->len] : -1;
		int yc = i < y->len ? (uint8_t)ys[i] : i - y->len < yl ? yt[i - y->len] : -1;

		if (xc != yc || xc < 0)
			return xc < yc ? -1 : xc > yc;
	}
}

/* Stacks by their frame's name (built already), then by id. */
static int kid_cmp(const void *a, const void *b)
{
	const struct fstream *fs = fitem_fs;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint32_t fx = profile__get_stack(fs->p, x)->frame, fy = profile__get_stack(fs->p, y)->frame;
	size_t lx = fs->nc.len[fx], ly = fs->nc.len[fy];
	int c = memcmp(fs->nc.text.buf + fs->nc.off[fx], fs->nc.text.buf + fs->nc.off[fy],
		       lx < ly ? lx : ly);

	if (c)
		return c;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return x < y ? -1 : x > y;
}

static bool same_name(const struct fstream *fs, uint32_t x, uint32_t y)
{
	uint32_t fx = profile__get_stack(fs->p, x)->frame, fy = profile__get_stack(fs->p, y)->frame;

	return fs->nc.len[fx] == fs->nc.len[fy] &&
	       !memcmp(fs->nc.text.buf + fs->nc.off[fx], fs->nc.text.buf + fs->nc.off[fy],
		       fs->nc.len[fx]);
}

static int put_line(struct fstream *fs, const char *name, size_t len, uint64_t count)
{
	int err = put_buf(fs->out, fs->path.buf, fs->path.len);

	if (!err && fs->path.len)
		err = put_buf(fs->out, ";", 1);
	if (!err)
		err = put_buf(fs->out, name, len);
	if (!err && fprintf(fs->out, " %llu\n", (unsigned long long)count) < 0)
		err = render_write_error();
	return err;
}

static int emit_items(struct fstream *fs, struct fitem *items, size_t n, const uint32_t *nodes);

/* The lines under the stacks `nodes` (one name's group) of the current comm. */
static int emit_level(struct fstream *fs, const uint32_t *nodes, size_t n)
{
	uint32_t *kids = NULL;
	struct fitem *items = NULL;
	size_t nk = 0, cap = 0, ni = 0;
	int err = 0;

	for (size_t i = 0; i < n && !err; i++) {
		for (size_t k = fs->child_off[nodes[i]]; k < fs->child_off[nodes[i] + 1]; k++) {
			uint32_t c = fs->child[k];
			const char *s;
			size_t len;

			if (fs->mark[c] != fs->gen)
				continue;
			err = frame_name(fs->p, &fs->nc, profile__get_stack(fs->p, c)->frame, &s,
					 &len);
			if (!err)
				err = grow_array((void **)&kids, &cap, nk + 1, sizeof(*kids));
			if (err)
				break;
			kids[nk++] = c;
		}
	}
	if (!err && nk && !(items = malloc(2 * nk * sizeof(*items))))
		err = -ENOMEM;
	if (!err && nk) {
		fitem_fs = fs;
		qsort(kids, nk, sizeof(*kids), kid_cmp);
	}
	for (size_t a = 0, b; !err && a < nk; a = b) {
		uint32_t f = profile__get_stack(fs->p, kids[a])->frame;
		uint64_t own = 0;
		bool sub = false;

		for (b = a; b < nk && (b == a || same_name(fs, kids[a], kids[b])); b++) {
			uint32_t c = kids[b];

			own = sat_add(own, fs->own[c]);
			for (size_t k = fs->child_off[c]; !sub && k < fs->child_off[c + 1]; k++)
				sub = fs->mark[fs->child[k]] == fs->gen;
		}
		own = print_count(own, fs->by_ns);
		if (own) /* else under half a microsecond */
			items[ni++] = (struct fitem){ .off = fs->nc.off[f],
						      .len = fs->nc.len[f],
						      .count = own };
		if (sub)
			items[ni++] = (struct fitem){ .off = fs->nc.off[f],
						      .len = fs->nc.len[f],
						      .sub = true,
						      .first = a,
						      .n = b - a };
	}
	if (!err)
		err = emit_items(fs, items, ni, kids);
	free(items);
	free(kids);
	return err;
}

static int emit_items(struct fstream *fs, struct fitem *items, size_t n, const uint32_t *nodes)
{
	int err = 0;

	fitem_fs = fs;
	if (n)
		qsort(items, n, sizeof(*items), fitem_cmp);
	for (size_t i = 0; i < n && !err; i++) {
		const struct fitem *it = &items[i];
		size_t at = fs->path.len;

		if (!it->sub) {
			err = put_line(fs, fitem_text(fs, it), it->len, it->count);
			continue;
		}
		err = at ? sb_add(&fs->path, ";", 1) : 0;
		if (!err)
			err = sb_add(&fs->path, fitem_text(fs, it), it->len);
		if (!err)
			err = emit_level(fs, nodes + it->first, it->n);
		fs->path.len = at;
	}
	return err;
}

/* Entries (agg indices) by comm name. */

static int entry_cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	const struct fstream *fs = fitem_fs;
	size_t lx = fs->comm_len[x], ly = fs->comm_len[y];
	int c = memcmp(fs->comms.buf + fs->comm_off[x], fs->comms.buf + fs->comm_off[y],
		       lx < ly ? lx : ly);

	if (c)
		return c;
	return lx < ly ? -1 : lx > ly;
}

/* The children index of the stack tree: child_off[] and child[]. */
static int build_children(struct fstream *fs)
{
	size_t n = profile__nr_stacks(fs->p);

	fs->child_off = calloc(n + 2, sizeof(*fs->child_off));
	fs->child = malloc((n ? n : 1) * sizeof(*fs->child));
	fs->mark = calloc(n ? n : 1, sizeof(*fs->mark));
	fs->own = calloc(n ? n : 1, sizeof(*fs->own));
	if (!fs->child_off || !fs->child || !fs->mark || !fs->own)
		return -ENOMEM;
	for (size_t s = 1; s < n; s++) {
		uint32_t parent = profile__get_stack(fs->p, (uint32_t)s)->parent;

		if (parent >= s)
			return -EINVAL;
		fs->child_off[parent + 2]++;
	}
	for (size_t s = 2; s < n + 2; s++)
		fs->child_off[s] += fs->child_off[s - 1];
	for (size_t s = 1; s < n; s++)
		fs->child[fs->child_off[profile__get_stack(fs->p, (uint32_t)s)->parent + 1]++] =
			(uint32_t)s;
	return 0;
}

/* One comm group's lines: its entries' stacks marked, then the tree under the root. */
static int emit_comm(struct fstream *fs, const struct agg *agg, const size_t *order, size_t n)
{
	uint32_t root = 0;
	int err;

	if (++fs->gen == 0) { /* wrapped: clear the marks */
		memset(fs->mark, 0, profile__nr_stacks(fs->p) * sizeof(*fs->mark));
		fs->gen = 1;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t s = agg->v[order[i]].stack;

		fs->own[s] = sat_add(fs->own[s], agg->v[order[i]].weight);
		while (s && fs->mark[s] != fs->gen) {
			fs->mark[s] = fs->gen;
			s = profile__get_stack(fs->p, s)->parent;
		}
	}
	fs->mark[0] = fs->gen;
	err = emit_level(fs, &root, 1);
	for (size_t i = 0; i < n; i++)
		fs->own[agg->v[order[i]].stack] = 0;
	return err;
}

int render_folded(const struct profile *p, const struct render_select *sel, FILE *out)
{
	struct fstream fs = { .p = p, .out = out, .by_ns = sel && sel->weight_ns };
	struct fitem *items = NULL;
	size_t *order = NULL, ni = 0;
	struct agg agg;
	int err;

	err = agg_samples(p, sel, &agg);
	if (err)
		return err;
	err = frame_names_init(&fs.nc, p);
	if (!err)
		err = build_children(&fs);
	if (!err) {
		order = malloc((agg.len ? agg.len : 1) * sizeof(*order));
		fs.comm_off = malloc((agg.len ? agg.len : 1) * sizeof(*fs.comm_off));
		fs.comm_len = malloc((agg.len ? agg.len : 1) * sizeof(*fs.comm_len));
		items = malloc((2 * agg.len + 1) * sizeof(*items));
		if (!order || !fs.comm_off || !fs.comm_len || !items)
			err = -ENOMEM;
	}
	/* the comms' names; entries grouped by name */
	for (size_t i = 0; !err && i < agg.len; i++) {
		uint32_t comm = agg.v[i].comm;

		order[i] = i;
		fs.comm_off[i] = fs.comms.len;
		err = sb_add_folded_name(&fs.comms, profile__str(p, comm),
					 profile__str_len(p, comm));
		fs.comm_len[i] = fs.comms.len - fs.comm_off[i];
	}
	if (!err) {
		fitem_fs = &fs;
		qsort(order, agg.len, sizeof(*order), entry_cmp);
	}
	/* the top level: a comm's own line (empty stacks) and the lines under it */
	for (size_t a = 0, b; !err && a < agg.len; a = b) {
		uint64_t own = 0;
		bool sub = false;

		for (b = a; b < agg.len && (b == a || !entry_cmp(&order[a], &order[b])); b++) {
			if (agg.v[order[b]].stack)
				sub = true;
			else
				own = sat_add(own, agg.v[order[b]].weight);
		}
		own = print_count(own, fs.by_ns);
		if (own)
			items[ni++] = (struct fitem){ .off = fs.comm_off[order[a]],
						      .len = fs.comm_len[order[a]],
						      .comm = true,
						      .count = own };
		if (sub)
			items[ni++] = (struct fitem){ .off = fs.comm_off[order[a]],
						      .len = fs.comm_len[order[a]],
						      .comm = true,
						      .sub = true,
						      .first = a,
						      .n = b - a };
	}
	if (!err) {
		fitem_fs = &fs;
		qsort(items, ni, sizeof(*items), fitem_cmp);
	}
	for (size_t i = 0; !err && i < ni; i++) {
		if (!items[i].sub) {
			err = put_line(&fs, fitem_text(&fs, &items[i]), items[i].len,
				       items[i].count);
			continue;
		}
		fs.path.len = 0;
		err = sb_add(&fs.path, fitem_text(&fs, &items[i]), items[i].len);
		if (!err)
			err = emit_comm(&fs, &agg, order + items[i].first, items[i].n);
		fs.path.len = 0;
	}
	if (!err && (fflush(out) == EOF || ferror(out)))
		err = render_write_error();
	agg_free(&agg);
	frame_names_free(&fs.nc);
	sb_free(&fs.comms);
	sb_free(&fs.path);
	free(fs.child_off);
	free(fs.child);
	free(fs.mark);
	free(fs.own);
	free(order);
	free(items);
	free(fs.comm_off);
	free(fs.comm_len);
	return err;
}
