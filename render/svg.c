/* SPDX-License-Identifier: MIT */
/*
 * Interactive SVG flame graph, in the manner of flamegraph.pl: the layout is
 * computed here, flame.js only re-scales it for zoom and colours it for
 * search.
 *
 * The call tree is the profile's stack prefix tree split per comm: node
 * (comm, stack) has parent (comm, parent stack), and (comm, 0) is the comm's
 * own node under the root "all". Interning made (parent, frame) unique, so
 * merging children by frame id needs no extra work. A flame chart (x is
 * time) is not a merged tree: it is laid out by streaming the samples in
 * time order and keeping only the boxes wide enough to draw.
 *
 * Each frame's <g> carries its exact position in weight units (data-s, the
 * weight left of it on its row, and data-w), so the script can zoom without
 * the rounding of pixel coordinates and can compute "Matched: X%" from
 * weights. Ancestors and descendants are found from those intervals and the
 * row (a tree's intervals nest or are disjoint), which keeps the XML flat:
 * nested <g> per frame would exceed XML parsers' depth limits on deep stacks.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "render/internal.h"
#include "render/flame_js.h"

#define ROOT 0u
#define NONE UINT32_MAX
#define DEFAULT_MAX_FRAMES 100000

/* Geometry, as flamegraph.pl draws it. */
#define FONT_SIZE 12
#define FONT_WIDTH 0.59 /* average glyph width of Verdana, in em */
#define FRAME_HEIGHT 16
#define FRAME_PAD 1
#define XPAD 10
#define YPAD_TOP (FONT_SIZE * 3)
#define YPAD_SUBTITLE (FONT_SIZE * 2)
#define YPAD_BOTTOM (FONT_SIZE * 2 + 10)

struct node {
	uint64_t weight; /* inclusive */
	uint64_t off; /* the off-CPU part of weight */
	uint64_t base; /* differential graphs: the base profile's inclusive weight */
	uint64_t start; /* weight left of this node on its row, set by the layout */
	uint32_t parent;
	uint32_t id; /* frame id; comm string id for a comm node */
	uint32_t depth; /* 0 for the root, 1 for comms */
	uint32_t child0; /* first child's index in tree.order */
	uint32_t nchild;
};

/*
 * Only the nodes wide enough to draw are ever created. Weights are summed
 * first per comm over the profile's own stack tree, in dense arrays indexed
 * by stack id: interning creates a parent before its children, so one pass
 * over the touched stack ids from the highest down sums every subtree.
 */
struct tree {
	const struct profile *p;
	struct node *v;
	size_t len;
	size_t cap;
	uint32_t *order; /* nodes grouped by parent; sorted by name when laid out */

	/* per stack id, for the comm being summed */
	uint64_t *w, *off, *base;
	uint32_t *node_of;
	uint64_t *touched; /* bitmap */
	size_t lo, hi; /* touched words */
};

static void tree_free(struct tree *t)
{
	free(t->v);
	free(t->order);
	free(t->w);
	free(t->off);
	free(t->base);
	free(t->node_of);
	free(t->touched);
}

static int new_node(struct tree *t, const struct node *n, uint32_t *idx)
{
	int err;

	if (t->len >= NONE)
		return -E2BIG;
	err = grow_array((void **)&t->v, &t->cap, t->len + 1, sizeof(*t->v));
	if (err)
		return err;
	t->v[t->len] = *n;
	*idx = (uint32_t)t->len++;
	return 0;
}

static void node_name(const struct tree *t, const struct node *n, const char **s, size_t *len,
		      uint32_t *kind)
{
	uint32_t str = n->id;

	*kind = FRAME_USER;
	if (n->depth > 1) {
		const struct pf_frame *f = profile__get_frame(t->p, n->id);

		str = f->name;
		*kind = f->kind;
	}
	*s = profile__str(t->p, str);
	*len = profile__str_len(t->p, str);
}

static int name_cmp(const char *xs, size_t xl, uint32_t xk, const char *ys, size_t yl, uint32_t yk)
{
	int c = memcmp(xs, ys, xl < yl ? xl : yl);

	if (c)
		return c;
	if (xl != yl)
		return xl < yl ? -1 : 1;
	return xk < yk ? -1 : xk > yk;
}

/* Siblings in name order, as flamegraph.pl sorts its input lines. */
static int by_name(const void *a, const void *b, void *arg)
{
	const struct tree *t = arg;
	const struct node *x = &t->v[*(const uint32_t *)a], *y = &t->v[*(const uint32_t *)b];
	const char *xs, *ys;
	size_t xl, yl;
	uint32_t xk, yk;
	int c;

	node_name(t, x, &xs, &xl, &xk);
	node_name(t, y, &ys, &yl, &yk);
	c = name_cmp(xs, xl, xk, ys, yl, yk);
	if (c)
		return c;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Mark stack and its ancestors touched, stopping at the first already marked. */
static int touch(struct tree *t, uint32_t s)
{
	size_t nr_frames = profile__nr_frames(t->p);

	while (s && !(t->touched[s / 64] & 1ULL << (s % 64))) {
		const struct pf_stack *st = profile__get_stack(t->p, s);

		/* interning creates parents first; anything else could loop */
		if (st->parent >= s || st->frame >= nr_frames)
			return -EINVAL;
		t->touched[s / 64] |= 1ULL << (s % 64);
		if (s / 64 < t->lo)
			t->lo = s / 64;
		if (s / 64 > t->hi)
			t->hi = s / 64;
		s = st->parent;
	}
	return 0;
}

/*
 * The nodes of one comm: e[0..n) and base entries b[0..nb) of that comm.
 * Creates the comm's node and every (comm, stack) node at least min_w
 * heavy, parents before children, and clears the dense arrays again.
 */
static int tree_comm(struct tree *t, uint32_t comm, const struct agg_entry *const *e, size_t n,
		     const struct agg_entry *const *b, size_t nb, uint64_t min_w)
{
	uint32_t comm_node = NONE, idx;
	int err = 0;

	t->lo = SIZE_MAX;
	t->hi = 0;
	t->w[0] = 0;
	if (t->off)
		t->off[0] = 0;
	if (t->base)
		t->base[0] = 0;
	for (size_t i = 0; !err && i < n; i++) {
		t->w[e[i]->stack] = sat_add(t->w[e[i]->stack], e[i]->weight);
		if (t->off)
			t->off[e[i]->stack] = sat_add(t->off[e[i]->stack], e[i]->off);
		err = touch(t, e[i]->stack);
	}
	for (size_t i = 0; !err && i < nb; i++) {
		t->base[b[i]->stack] = sat_add(t->base[b[i]->stack], b[i]->weight);
		err = touch(t, b[i]->stack);
	}
	/* subtree sums: children have higher ids than their parents */
	for (size_t wd = t->hi + 1; !err && wd-- > t->lo && t->lo != SIZE_MAX;) {
		for (uint64_t bits = t->touched[wd]; bits;) {
			int bit = 63 - __builtin_clzll(bits);
			uint32_t s = (uint32_t)(wd * 64 + (size_t)bit), up;

			bits &= ~(1ULL << bit);
			up = profile__get_stack(t->p, s)->parent;
			t->w[up] = sat_add(t->w[up], t->w[s]);
			if (t->off)
				t->off[up] = sat_add(t->off[up], t->off[s]);
			if (t->base)
				t->base[up] = sat_add(t->base[up], t->base[s]);
		}
	}
	if (!err && t->w[0] && t->w[0] >= min_w) {
		struct node c = { .weight = t->w[0],
				  .off = t->off ? t->off[0] : 0,
				  .base = t->base ? t->base[0] : 0,
				  .parent = ROOT,
				  .id = comm,
				  .depth = 1 };

		err = new_node(t, &c, &comm_node);
	}
	/* nodes in ascending stack id: each parent is created before its children */
	for (size_t wd = t->lo; !err && comm_node != NONE && wd <= t->hi && t->lo != SIZE_MAX;
	     wd++) {
		for (uint64_t bits = t->touched[wd]; bits && !err;) {
			int bit = __builtin_ctzll(bits);
			uint32_t s = (uint32_t)(wd * 64 + (size_t)bit);
			const struct pf_stack *st = profile__get_stack(t->p, s);
			struct node v;

			bits &= bits - 1;
			if (!t->w[s] || t->w[s] < min_w)
				continue;
			v = (struct node){
				.weight = t->w[s],
				.off = t->off ? t->off[s] : 0,
				.base = t->base ? t->base[s] : 0,
				.parent = st->parent ? t->node_of[st->parent] : comm_node,
				.id = st->frame,
				.depth = profile__stack_depth(t->p, s) + 1,
			};
			err = new_node(t, &v, &idx);
			if (!err)
				t->node_of[s] = idx;
		}
	}
	/* clean for the next comm */
	for (size_t wd = t->lo; wd <= t->hi && t->lo != SIZE_MAX; wd++) {
		for (uint64_t bits = t->touched[wd]; bits;) {
			int bit = __builtin_ctzll(bits);
			uint32_t s = (uint32_t)(wd * 64 + (size_t)bit);

			bits &= bits - 1;
			t->w[s] = 0;
			if (t->off)
				t->off[s] = 0;
			if (t->base)
				t->base[s] = 0;
			t->node_of[s] = NONE;
		}
		t->touched[wd] = 0;
	}
	return err;
}

/* Entries of agg grouped by comm (a counting sort): group g is out[at[g]..at[g + 1]). */
static int by_comm(const struct agg *agg, const uint32_t *comm_idx, size_t nr_groups,
		   const struct agg_entry ***out, size_t **at)
{
	size_t *pos = calloc(nr_groups + 2, sizeof(*pos));
	const struct agg_entry **v = malloc((agg->len ? agg->len : 1) * sizeof(*v));

	if (!pos || !v) {
		free(pos);
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < agg->len; i++) {
		uint32_t g = comm_idx[agg->v[i].comm];

		pos[(g == NONE ? nr_groups : g) + 1]++;
	}
	for (size_t g = 1; g <= nr_groups + 1; g++)
		pos[g] += pos[g - 1];
	for (size_t i = 0; i < agg->len; i++) {
		uint32_t g = comm_idx[agg->v[i].comm];

		v[pos[g == NONE ? nr_groups : g]++] = &agg->v[i];
	}
	/* pos[g] is now the end of group g: shift back to starts */
	for (size_t g = nr_groups + 1; g > 0; g--)
		pos[g] = pos[g - 1];
	pos[0] = 0;
	*out = v;
	*at = pos;
	return 0;
}

/*
 * Build the nodes at least min_w heavy (and all with min_w 0) for agg
 * cur, with base weights from agg base if any.
 */
static int tree_build(struct tree *t, const struct agg *cur, const struct agg *base, uint64_t min_w)
{
	size_t nr_stacks = profile__nr_stacks(t->p), nr_strings = profile__nr_strings(t->p);
	const struct agg_entry **ce = NULL, **be = NULL;
	size_t *cat = NULL, *bat = NULL, nr_comms = 0;
	uint32_t *comm_idx = NULL, *comms = NULL, root;
	uint64_t off = 0;
	struct node r = { .weight = cur->total, .parent = NONE };
	int err = -ENOMEM;

	for (size_t i = 0; i < cur->len; i++)
		off = sat_add(off, cur->v[i].off);
	r.off = off;
	r.base = base ? base->total : 0;
	t->w = calloc(nr_stacks + 1, sizeof(*t->w));
	t->off = off ? calloc(nr_stacks + 1, sizeof(*t->off)) : NULL;
	t->base = base ? calloc(nr_stacks + 1, sizeof(*t->base)) : NULL;
	t->node_of = malloc((nr_stacks + 1) * sizeof(*t->node_of));
	t->touched = calloc(nr_stacks / 64 + 1, sizeof(*t->touched));
	comm_idx = malloc((nr_strings + 1) * sizeof(*comm_idx));
	comms = malloc((cur->len + 1) * sizeof(*comms));
	if (!t->w || (off && !t->off) || (base && !t->base) || !t->node_of || !t->touched ||
	    !comm_idx || !comms)
		goto out;
	memset(t->node_of, 0xff, (nr_stacks + 1) * sizeof(*t->node_of));
	memset(comm_idx, 0xff, (nr_strings + 1) * sizeof(*comm_idx));
	err = -EINVAL;
	for (size_t i = 0; i < cur->len; i++) {
		const struct agg_entry *e = &cur->v[i];

		if (e->comm >= nr_strings || e->stack >= nr_stacks)
			goto out;
		if (comm_idx[e->comm] == NONE) {
			comm_idx[e->comm] = (uint32_t)nr_comms;
			comms[nr_comms++] = e->comm;
		}
	}
	for (size_t i = 0; base && i < base->len; i++) {
		if (base->v[i].comm >= nr_strings || base->v[i].stack >= nr_stacks)
			goto out;
	}
	err = new_node(t, &r, &root);
	if (!err)
		err = by_comm(cur, comm_idx, nr_comms, &ce, &cat);
	if (!err && base)
		err = by_comm(base, comm_idx, nr_comms, &be, &bat);
	for (size_t g = 0; !err && g < nr_comms; g++)
		err = tree_comm(t, comms[g], ce + cat[g], cat[g + 1] - cat[g],
				base ? be + bat[g] : NULL, base ? bat[g + 1] - bat[g] : 0, min_w);
out:
	free(comm_idx);
	free(comms);
	free(ce);
	free(be);
	free(cat);
	free(bat);
	/* the dense arrays are done with */
	free(t->w);
	free(t->off);
	free(t->base);
	free(t->node_of);
	free(t->touched);
	t->w = t->off = t->base = t->touched = NULL;
	t->node_of = NULL;
	return err;
}

/* Group children by parent in t->order, in linear time. */
static int tree_link(struct tree *t)
{
	size_t n = t->len;

	t->order = malloc((n ? n : 1) * sizeof(*t->order));
	if (!t->order)
		return -ENOMEM;
	for (size_t i = 1; i < n; i++)
		t->v[t->v[i].parent].nchild++;
	for (size_t i = 0, next = 0; i < n; i++) {
		t->v[i].child0 = (uint32_t)next;
		next += t->v[i].nchild;
		t->v[i].nchild = 0;
	}
	for (size_t i = 1; i < n; i++) {
		struct node *parent = &t->v[t->v[i].parent];

		t->order[parent->child0 + parent->nchild++] = (uint32_t)i;
	}
	return 0;
}

static int u64_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x > y ? -1 : x < y;
}

/*
 * The least weight a box needs to be drawn so that at most max boxes are:
 * the narrowest go first. Weights shrink from parent to child, so any
 * threshold keeps every drawn box's parent drawn.
 */
static int weight_cap(const uint64_t *w, size_t n, double scale, double minwidth, size_t max,
		      uint64_t *min_w)
{
	uint64_t *ws;
	size_t k = 0;

	*min_w = 0;
	for (size_t i = 0; i < n; i++)
		k += (double)w[i] * scale >= minwidth;
	if (k <= max)
		return 0;
	ws = malloc(k * sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	k = 0;
	for (size_t i = 0; i < n; i++) {
		if ((double)w[i] * scale >= minwidth)
			ws[k++] = w[i];
	}
	qsort(ws, k, sizeof(*ws), u64_desc);
	*min_w = sat_add(ws[max - 1], 1);
	free(ws);
	return 0;
}

/* Keep only the nodes at least min_w heavy; parents come before children. */
static void tree_prune(struct tree *t, uint64_t min_w, uint32_t *map)
{
	size_t n = 0;

	for (size_t i = 0; i < t->len; i++) {
		if (i && t->v[i].weight < min_w) {
			map[i] = NONE;
			continue;
		}
		map[i] = (uint32_t)n;
		t->v[n] = t->v[i];
		if (n)
			t->v[n].parent = map[t->v[n].parent];
		n++;
	}
	t->len = n;
}

/*
 * Lay out rows from the root (every node is wide enough: see tree_build).
 * Fills emit[] in preorder, so the root comes first and parents precede
 * their children.
 */
static int tree_layout(struct tree *t, uint32_t *emit, size_t *nr_emit, uint32_t *max_depth)
{
	uint32_t *todo = NULL;
	size_t nr_todo = 0, cap = 0;
	int err;

	*nr_emit = 0;
	*max_depth = 0;
	err = grow_array((void **)&todo, &cap, 1, sizeof(*todo));
	if (err)
		return err;
	todo[nr_todo++] = ROOT;
	while (nr_todo) {
		struct node *n = &t->v[todo[--nr_todo]];
		uint64_t cursor = n->start;

		emit[(*nr_emit)++] = (uint32_t)(n - t->v);
		if (n->depth > *max_depth)
			*max_depth = n->depth;
		err = grow_array((void **)&todo, &cap, nr_todo + n->nchild, sizeof(*todo));
		if (err)
			break;
		qsort_r(t->order + n->child0, n->nchild, sizeof(*t->order), by_name, t);
		for (uint32_t i = 0; i < n->nchild; i++) {
			struct node *c = &t->v[t->order[n->child0 + i]];

			c->start = cursor;
			cursor = sat_add(cursor, c->weight);
		}
		/* push right to left so that the leftmost child pops first */
		for (uint32_t i = n->nchild; i-- > 0;)
			todo[nr_todo++] = t->order[n->child0 + i];
	}
	free(todo);
	return err;
}

/*
 * Numbers without printf's %f: it follows LC_NUMERIC, and a decimal comma
 * would break every coordinate if the caller called setlocale().
 */
static const char *fmt_fixed(char *buf, size_t size, double v, bool keep_zeros)
{
	unsigned long long c;
	size_t n;

	if (!(v > 0))
		v = 0;
	if (v > 1e15)
		v = 1e15;
	c = (unsigned long long)(v * 100 + 0.5);
	n = (size_t)snprintf(buf, size, "%llu.%02llu", c / 100, c % 100);
	if (!keep_zeros) {
		while (n && buf[n - 1] == '0')
			buf[--n] = '\0';
		if (n && buf[n - 1] == '.')
			buf[--n] = '\0';
	}
	return buf;
}

/* 1234567 -> "1,234,567", as flamegraph.pl prints counts. */
static const char *fmt_thousands(char *buf, size_t size, uint64_t v)
{
	char digits[24];
	int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
	size_t o = 0;

	for (int i = 0; i < n && o + 2 < size; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

struct rgb {
	unsigned r, g, b;
};

/* Deterministic colour from the name, a palette per frame kind. */
static struct rgb frame_colour(const char *name, size_t len, uint32_t kind, bool offcpu)
{
	uint64_t h = hash_bytes(name, len, 0);
	double v1 = (double)(h & 0xffff) / 0xffff;
	double v2 = (double)(h >> 16 & 0xffff) / 0xffff;
	double v3 = (double)(h >> 32 & 0xffff) / 0xffff;

	if (kind == FRAME_SPECIAL && len == strlen(RUNQUEUE_FRAME) &&
	    !memcmp(name, RUNQUEUE_FRAME, len)) /* waiting for a CPU: purple */
		return (struct rgb){ 160 + (unsigned)(30 * v1), 110 + (unsigned)(30 * v1), 220 };
	if (offcpu && kind == FRAME_PYTHON) /* blocked, Python: teal */
		return (struct rgb){ 50 + (unsigned)(50 * v1), 160 + (unsigned)(40 * v1),
				     190 + (unsigned)(50 * v2) };
	if (offcpu) /* blocked: blue, kernel frames paler */
		return kind == FRAME_KERNEL
			       ? (struct rgb){ 110 + (unsigned)(50 * v1), 150 + (unsigned)(50 * v1),
					       225 + (unsigned)(30 * v2) }
			       : (struct rgb){ 60 + (unsigned)(60 * v1), 80 + (unsigned)(60 * v1),
					       190 + (unsigned)(55 * v2) };
	switch (kind) {
	case FRAME_USER: /* hot: red, orange, yellow */
		return (struct rgb){ 205 + (unsigned)(50 * v3), (unsigned)(230 * v1),
				     (unsigned)(55 * v2) };
	case FRAME_KERNEL: /* pale orange: more blue than any hot colour */
		return (struct rgb){ 215 + (unsigned)(35 * v1), 140 + (unsigned)(45 * v1),
				     80 + (unsigned)(40 * v2) };
	case FRAME_JIT: /* green */
		return (struct rgb){ 50 + (unsigned)(60 * v1), 190 + (unsigned)(65 * v2),
				     50 + (unsigned)(60 * v1) };
	case FRAME_PYTHON: /* blue: nothing else on CPU is */
		return (struct rgb){ 70 + (unsigned)(50 * v1), 130 + (unsigned)(50 * v2),
				     215 + (unsigned)(40 * v1) };
	case FRAME_INLINED: /* aqua */
		return (struct rgb){ 50 + (unsigned)(60 * v1), 165 + (unsigned)(55 * v2),
				     165 + (unsigned)(55 * v2) };
	default: /* [truncated], [unknown]: grey */
		return (struct rgb){ 170 + (unsigned)(40 * v1), 170 + (unsigned)(40 * v1),
				     170 + (unsigned)(40 * v1) };
	}
}

/* flamegraph.pl's differential scale: white when equal, red grew, blue shrank. */
static struct rgb diff_colour(double delta, double max)
{
	struct rgb c = { 255, 255, 255 };

	if (!(max > 0))
		return c;
	if (delta > 0)
		c.g = c.b = (unsigned)(210 * (max - delta) / max);
	else if (delta < 0)
		c.r = c.g = (unsigned)(210 * (max + delta) / max);
	return c;
}

enum box_type { BOX_ROOT, BOX_COMM, BOX_FRAME };

/* One drawn frame. */
struct box {
	uint64_t start;
	uint64_t weight;
	uint64_t off;
	uint64_t base;
	uint32_t depth;
	uint32_t id; /* comm string id or frame id */
	uint32_t type; /* enum box_type */
};

static struct box node_box(const struct tree *t, const struct node *n)
{
	return (struct box){
		.start = n->start,
		.weight = n->weight,
		.off = n->off,
		.base = n->base,
		.depth = n->depth,
		.id = n->id,
		.type = n == t->v      ? BOX_ROOT
			: n->depth > 1 ? BOX_FRAME
				       : BOX_COMM,
	};
}

struct svg {
	FILE *out;
	const struct profile *p;
	const char *countname;
	bool by_ns;
	bool mixed; /* on- and off-CPU samples together: tooltips say the split */
	bool diff;
	bool inverted;
	double base_scale; /* diff: base weight -> new's units */
	double max_delta;
	uint64_t total;
	double scale;
	unsigned height;
	unsigned top;
	struct strbuf name; /* the current frame's name, XML-clean */
};

static void box_name(const struct profile *p, const struct box *b, const char **s, size_t *len,
		     uint32_t *kind)
{
	*kind = FRAME_USER;
	if (b->type == BOX_ROOT) {
		*s = "all";
		*len = 3;
		return;
	}
	if (b->type == BOX_FRAME) {
		const struct pf_frame *f = profile__get_frame(p, b->id);

		*kind = f->kind;
		*s = profile__str(p, f->name);
		*len = profile__str_len(p, f->name);
		return;
	}
	*s = profile__str(p, b->id);
	*len = profile__str_len(p, b->id);
}

static double box_delta(const struct svg *s, const struct box *b)
{
	return (double)b->weight - (double)b->base * s->base_scale;
}

static int put(FILE *out, const char *s)
{
	return fputs(s, out) == EOF ? render_write_error() : 0;
}

static int put_escaped(FILE *out, const char *s)
{
	return render_xml_escape(s, strlen(s), out);
}

/* Label as flamegraph.pl fits it: whole, cut with "..", or nothing. */
static int put_label(FILE *out, const struct strbuf *name, int64_t cps, double width)
{
	int64_t fit = (int64_t)(width / (FONT_SIZE * FONT_WIDTH));
	size_t bytes = 0;

	if (fit < 3)
		return 0;
	if (cps <= fit)
		return render_xml_escape(name->buf, name->len, out);
	/* keep fit - 2 code points; the buffer is valid UTF-8 */
	for (int64_t kept = 0; bytes < name->len; bytes++) {
		if (((uint8_t)name->buf[bytes] & 0xc0) != 0x80 && kept++ == fit - 2)
			break;
	}
	if (render_xml_escape(name->buf, bytes, out))
		return render_write_error();
	return put(out, "..");
}

static int put_frame(struct svg *s, const struct box *b)
{
	char x[32], y[32], w[32], tx[32], ty[32], pct[32], cnt[40], extra[64] = "";
	double width = (double)b->weight * s->scale;
	double left = XPAD + (double)b->start * s->scale;
	double top =
		s->inverted ? s->top + (double)b->depth * FRAME_HEIGHT + FRAME_PAD
			    : s->height - YPAD_BOTTOM - (b->depth + 1.0) * FRAME_HEIGHT + FRAME_PAD;
	const char *name;
	size_t len;
	uint32_t kind;
	struct rgb c;
	int64_t cps;

	box_name(s->p, b, &name, &len, &kind);
	s->name.len = 0;
	cps = sb_add_xml_clean(&s->name, name, len);
	if (cps < 0)
		return (int)cps;
	if (s->diff) {
		double d = box_delta(s, b);
		char dp[32];

		c = diff_colour(d, s->max_delta);
		snprintf(extra, sizeof(extra), "; %s%s%%", d < 0 ? "-" : "+",
			 fmt_fixed(dp, sizeof(dp), 100.0 * fabs(d) / (double)s->total, true));
	} else {
		c = frame_colour(name, len, kind, b->off > b->weight - b->off);
		if (s->mixed && b->off) {
			char op[32];

			snprintf(extra, sizeof(extra), "; off-CPU %s%%",
				 fmt_fixed(op, sizeof(op),
					   100.0 * (double)b->off / (double)b->weight, false));
		}
	}

	fprintf(s->out, "<g class=\"f\" data-s=\"%llu\" data-w=\"%llu\"><title>",
		(unsigned long long)b->start, (unsigned long long)b->weight);
	if (render_xml_escape(s->name.buf, s->name.len, s->out))
		return render_write_error();
	fprintf(s->out, " (%s ", fmt_thousands(cnt, sizeof(cnt), print_count(b->weight, s->by_ns)));
	if (put_escaped(s->out, s->countname))
		return render_write_error();
	fprintf(s->out,
		", %s%%%s)</title><rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%d\" "
		"fill=\"rgb(%u,%u,%u)\" rx=\"2\" ry=\"2\"/><text x=\"%s\" y=\"%s\">",
		fmt_fixed(pct, sizeof(pct), 100.0 * (double)b->weight / (double)s->total, true),
		extra, fmt_fixed(x, sizeof(x), left, false), fmt_fixed(y, sizeof(y), top, false),
		fmt_fixed(w, sizeof(w), width, false), FRAME_HEIGHT - FRAME_PAD, c.r, c.g, c.b,
		fmt_fixed(tx, sizeof(tx), left + 3, false),
		fmt_fixed(ty, sizeof(ty), top + (FRAME_HEIGHT - FRAME_PAD) / 2.0 + 3, false));
	if (put_label(s->out, &s->name, cps, width))
		return render_write_error();
	return put(s->out, "</text></g>\n");
}

static const char svg_style[] =
	"<style type=\"text/css\">\n"
	"text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }\n"
	"#title { text-anchor: middle; font-size: 17px; }\n"
	"#subtitle { text-anchor: middle; fill: rgb(160,160,160); }\n"
	"#search, #clear, #unzoom { cursor: pointer; }\n"
	"#search:hover, #clear:hover, #unzoom:hover { fill: rgb(0,0,230); }\n"
	"#matched { text-anchor: end; }\n"
	".f { cursor: pointer; }\n"
	".f:hover rect { stroke: rgb(0,0,0); stroke-width: 0.5; }\n"
	".f text { pointer-events: none; }\n"
	".dim rect { fill-opacity: 0.5; }\n"
	".hide { display: none; }\n"
	"#frames.zoomed > g { visibility: hidden; }\n"
	"#frames.zoomed > g.z { visibility: visible; }\n"
	"</style>\n";

/* The script inside CDATA; "]]>" in it, which would end the section, is split. */
static int put_script(FILE *out)
{
	const char *js = flame_js, *end = flame_js + flame_js_len, *m;

	if (put(out, "<script type=\"text/ecmascript\"><![CDATA[\n"))
		return render_write_error();
	while ((m = memmem(js, (size_t)(end - js), "]]>", 3))) {
		size_t n = (size_t)(m - js) + 2;

		if (fwrite(js, 1, n, out) != n || put(out, "]]><![CDATA["))
			return render_write_error();
		js += n;
	}
	if (fwrite(js, 1, (size_t)(end - js), out) != (size_t)(end - js))
		return render_write_error();
	return put(out, "\n]]></script>\n");
}

static int put_header(struct svg *s, const struct svg_opts *o, const char *title, unsigned width)
{
	FILE *out = s->out;
	unsigned h = s->height;

	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n"
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" "
		"width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\">\n"
		"<defs><linearGradient id=\"background\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">"
		"<stop stop-color=\"#eeeeee\" offset=\"5%%\"/>"
		"<stop stop-color=\"#eeeeb0\" offset=\"95%%\"/>"
		"</linearGradient></defs>\n",
		width, h, width, h);
	if (put(out, svg_style) || put_script(out))
		return render_write_error();
	fprintf(out,
		"<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"url(#background)\"/>\n"
		"<text id=\"title\" x=\"%u\" y=\"%d\">",
		width, h, width / 2, FONT_SIZE * 2);
	if (put_escaped(out, title))
		return render_write_error();
	fprintf(out, "</text>\n");
	if (o && o->subtitle) {
		fprintf(out, "<text id=\"subtitle\" x=\"%u\" y=\"%d\">", width / 2, FONT_SIZE * 4);
		if (put_escaped(out, o->subtitle))
			return render_write_error();
		fprintf(out, "</text>\n");
	}
	fprintf(out,
		"<text id=\"unzoom\" class=\"hide\" x=\"%d\" y=\"%d\">Reset Zoom</text>\n"
		"<text id=\"search\" x=\"%u\" y=\"%d\">Search</text>\n"
		"<text id=\"clear\" class=\"hide\" x=\"%u\" y=\"%d\">Clear</text>\n"
		"<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n"
		"<text id=\"matched\" x=\"%u\" y=\"%u\"> </text>\n",
		XPAD, FONT_SIZE * 2, width - XPAD - 110, FONT_SIZE * 2, width - XPAD - 50,
		FONT_SIZE * 2, XPAD, h - YPAD_BOTTOM / 2, width - XPAD, h - YPAD_BOTTOM / 2);
	return ferror(out) ? render_write_error() : 0;
}

static const char *default_title(const struct render_select *sel, const struct svg_opts *o,
				 bool diff)
{
	bool kinds[SAMPLE_KIND_MAX];

	if (o && o->title)
		return o->title;
	if (diff)
		return o && o->inverted ? "Differential Icicle Graph" : "Differential Flame Graph";
	if (o && o->flamechart)
		return "Flame Chart";
	if (o && o->inverted)
		return "Icicle Graph";
	select_kinds(sel, kinds);
	if (!kinds[SAMPLE_ONCPU])
		return "Off-CPU Time Flame Graph";
	if (kinds[SAMPLE_OFFCPU] || kinds[SAMPLE_RUNQUEUE])
		return "Wall Time Flame Graph";
	return "Flame Graph";
}

/* Options checked and defaults applied; the minimum width in pixels. */
static int svg_setup(struct svg *s, const struct profile *p, const struct render_select *sel,
		     const struct svg_opts *o, unsigned *width, double *minwidth, size_t *max)
{
	bool kinds[SAMPLE_KIND_MAX];

	*width = o && o->width ? o->width : 1200;
	*minwidth = o && o->minwidth != 0 ? o->minwidth : 0.1;
	*max = o && o->max_frames ? o->max_frames : DEFAULT_MAX_FRAMES;
	/* a graph needs some room; 1M px is beyond any screen or viewer */
	if (*width <= 2 * XPAD + 10 || *width > 1000000 || !(*minwidth >= 0) || isinf(*minwidth))
		return -EINVAL;
	if (o && o->minwidth_pct) {
		if (*minwidth > 100)
			return -EINVAL;
		*minwidth = *minwidth / 100 * (*width - 2 * XPAD);
	}
	select_kinds(sel, kinds);
	memset(s, 0, sizeof(*s));
	s->p = p;
	s->by_ns = sel && sel->weight_ns;
	s->countname = o && o->countname ? o->countname : s->by_ns ? "us" : "samples";
	s->mixed = kinds[SAMPLE_ONCPU] && (kinds[SAMPLE_OFFCPU] || kinds[SAMPLE_RUNQUEUE]);
	s->inverted = o && o->inverted;
	s->base_scale = 1;
	s->top = YPAD_TOP + (o && o->subtitle ? YPAD_SUBTITLE : 0);
	return 0;
}

static int svg_emit(struct svg *s, const struct svg_opts *o, const char *title, unsigned width,
		    const struct box *boxes, size_t n, uint32_t max_depth)
{
	FILE *out = s->out;
	int err;

	s->scale = s->total ? (double)(width - 2 * XPAD) / (double)s->total : 0;
	s->height = s->top + (max_depth + 1) * FRAME_HEIGHT + YPAD_BOTTOM;
	for (size_t i = 0; s->diff && i < n; i++) {
		double d = fabs(box_delta(s, &boxes[i]));

		if (d > s->max_delta)
			s->max_delta = d;
	}
	err = put_header(s, o, title, width);
	if (err)
		return err;
	if (!s->total)
		fprintf(out, "<text x=\"%u\" y=\"%u\" text-anchor=\"middle\">No samples</text>\n",
			width / 2, s->top + FRAME_HEIGHT - 4);
	fprintf(out, "<g id=\"frames\">\n");
	for (size_t i = 0; i < n; i++) {
		err = put_frame(s, &boxes[i]);
		if (err)
			return err;
	}
	fprintf(out, "</g>\n</svg>\n");
	return fflush(out) == EOF || ferror(out) ? render_write_error() : 0;
}

/* The least weight whose box is at least minwidth pixels wide. */
static uint64_t min_weight(double scale, double minwidth)
{
	double w;

	if (!(scale > 0))
		return UINT64_MAX;
	w = ceil(minwidth / scale);
	if (w > 1.8e19)
		return UINT64_MAX;
	return w < 1 ? 1 : (uint64_t)w;
}

int svg_render(const struct profile *p, const struct render_select *sel, const struct agg *cur,
	       const struct agg *base, bool normalize, const struct svg_opts *opts, FILE *out)
{
	const char *title = default_title(sel, opts, base != NULL);
	struct tree t = { .p = p };
	struct box *boxes = NULL;
	uint32_t *emit = NULL, max_depth = 0;
	size_t nr_emit = 0, max;
	unsigned width;
	double minwidth;
	struct svg s;
	int err;

	if (opts && opts->flamechart && base)
		return -EINVAL;
	err = svg_setup(&s, p, sel, opts, &width, &minwidth, &max);
	if (err)
		return err;
	s.out = out;
	s.total = cur->total;
	s.diff = base != NULL;
	if (base && normalize && base->total)
		s.base_scale = (double)cur->total / (double)base->total;
	s.scale = s.total ? (double)(width - 2 * XPAD) / (double)s.total : 0;

	err = tree_build(&t, cur, base, min_weight(s.scale, minwidth));
	if (!err && t.len > max) {
		uint64_t *w = malloc(t.len * sizeof(*w)), cap_w = 0;
		uint32_t *map = malloc(t.len * sizeof(*map));

		err = -ENOMEM;
		if (w && map) {
			for (size_t i = 0; i < t.len; i++)
				w[i] = t.v[i].weight;
			err = weight_cap(w, t.len, 1, 0, max, &cap_w);
			if (!err)
				tree_prune(&t, cap_w, map);
		}
		free(w);
		free(map);
	}
	if (!err)
		err = tree_link(&t);
	if (err)
		goto out;
	err = -ENOMEM;
	emit = malloc(t.len * sizeof(*emit));
	if (!emit)
		goto out;
	if (s.total) {
		err = tree_layout(&t, emit, &nr_emit, &max_depth);
		if (err)
			goto out;
	}
	err = -ENOMEM;
	boxes = malloc((nr_emit ? nr_emit : 1) * sizeof(*boxes));
	if (!boxes)
		goto out;
	for (size_t i = 0; i < nr_emit; i++)
		boxes[i] = node_box(&t, &t.v[emit[i]]);
	/* the tree's nodes are no longer needed: free them before writing */
	free(emit);
	emit = NULL;
	tree_free(&t);
	memset(&t, 0, sizeof(t));
	err = svg_emit(&s, opts, title, width, boxes, nr_emit, max_depth);
out:
	sb_free(&s.name);
	free(boxes);
	free(emit);
	tree_free(&t);
	return err;
}

/* A flame chart: samples per comm (comms in name order), then in time order. */
struct fc_sample {
	uint64_t time;
	uint32_t rank; /* of the comm */
	uint32_t idx;
};

static int fc_cmp(const void *a, const void *b)
{
	const struct fc_sample *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int comm_cmp(const void *a, const void *b, void *arg)
{
	const struct profile *p = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = name_cmp(profile__str(p, x), profile__str_len(p, x), 0, profile__str(p, y),
			 profile__str_len(p, y), 0);

	return c ? c : x < y ? -1 : x > y;
}

static int box_cmp(const void *a, const void *b)
{
	const struct box *x = a, *y = b;

	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

struct fc {
	struct box *open; /* the current path: open[0] the comm, open[d] depth d + 1 */
	size_t nr_open;
	size_t cap_open;
	struct box *boxes;
	size_t nr_boxes;
	size_t cap_boxes;
	double scale;
	double minwidth;
};

/* Close the open boxes above `keep`, keeping those wide enough to draw. */
static int fc_close(struct fc *fc, size_t keep)
{
	while (fc->nr_open > keep) {
		struct box *b = &fc->open[--fc->nr_open];
		int err;

		if ((double)b->weight * fc->scale < fc->minwidth)
			continue;
		err = grow_array((void **)&fc->boxes, &fc->cap_boxes, fc->nr_boxes + 1,
				 sizeof(*fc->boxes));
		if (err)
			return err;
		fc->boxes[fc->nr_boxes++] = *b;
	}
	return 0;
}

static int fc_collect(const struct profile *p, const struct render_select *sel,
		      struct fc_sample **out, size_t *nr, uint64_t *total)
{
	bool by_ns = sel && sel->weight_ns, kinds[SAMPLE_KIND_MAX];
	size_t n = profile__nr_samples(p), k = 0, nr_comms = 0;
	size_t nr_strings = profile__nr_strings(p);
	uint32_t *rank = NULL, *comms = NULL;
	struct fc_sample *v;
	int err = -ENOMEM;

	select_kinds(sel, kinds);
	*total = 0;
	v = malloc((n ? n : 1) * sizeof(*v));
	rank = malloc((nr_strings ? nr_strings : 1) * sizeof(*rank));
	comms = malloc((nr_strings ? nr_strings : 1) * sizeof(*comms));
	if (!v || !rank || !comms)
		goto out;
	memset(rank, 0xff, nr_strings * sizeof(*rank));
	err = -EINVAL;
	for (size_t i = 0; i < n; i++) {
		const struct pf_sample *s = profile__get_sample(p, i);
		const struct pf_thread *t;

		if (s->kind >= SAMPLE_KIND_MAX || !kinds[s->kind] || !(by_ns ? s->weight : 1))
			continue;
		if (s->thread >= profile__nr_threads(p) || s->stack >= profile__nr_stacks(p) ||
		    i >= UINT32_MAX)
			goto out;
		t = profile__get_thread(p, s->thread);
		if (t->comm >= nr_strings)
			goto out;
		if (rank[t->comm] == UINT32_MAX) {
			rank[t->comm] = 0;
			comms[nr_comms++] = t->comm;
		}
		v[k++] = (struct fc_sample){ .time = s->time, .rank = t->comm, .idx = (uint32_t)i };
		*total = sat_add(*total, by_ns ? s->weight : 1);
	}
	qsort_r(comms, nr_comms, sizeof(*comms), comm_cmp, (void *)p);
	for (size_t i = 0; i < nr_comms; i++)
		rank[comms[i]] = (uint32_t)i;
	for (size_t i = 0; i < k; i++)
		v[i].rank = rank[v[i].rank];
	qsort(v, k, sizeof(*v), fc_cmp);
	*out = v;
	*nr = k;
	v = NULL;
	err = 0;
out:
	free(v);
	free(rank);
	free(comms);
	return err;
}

static int svg_flamechart(const struct profile *p, const struct render_select *sel,
			  const struct svg_opts *opts, FILE *out)
{
	bool by_ns = sel && sel->weight_ns;
	struct fc_sample *v = NULL;
	struct fc fc = { 0 };
	uint32_t *frames = NULL, max_depth = 0;
	size_t nr = 0, frames_cap = 0, max, kept = 0;
	uint64_t cursor = 0, off = 0, min_w = 0, *w = NULL;
	unsigned width;
	struct svg s;
	int err;

	err = svg_setup(&s, p, sel, opts, &width, &fc.minwidth, &max);
	if (err)
		return err;
	s.out = out;
	err = fc_collect(p, sel, &v, &nr, &s.total);
	if (err)
		goto out;
	fc.scale = s.total ? (double)(width - 2 * XPAD) / (double)s.total : 0;
	/* room for the root, drawn first */
	err = grow_array((void **)&fc.boxes, &fc.cap_boxes, 1, sizeof(*fc.boxes));
	if (err)
		goto out;
	fc.nr_boxes = 1;
	for (size_t i = 0; i < nr; i++) {
		const struct pf_sample *smp = profile__get_sample(p, v[i].idx);
		uint32_t comm = profile__get_thread(p, smp->thread)->comm;
		uint64_t wt = by_ns ? smp->weight : 1;
		int64_t depth = profile__stack_frames(p, smp->stack, &frames, &frames_cap);
		size_t common = 0;

		if (depth < 0) {
			err = (int)depth;
			goto out;
		}
		if (fc.nr_open && fc.open[0].id == comm) {
			common = 1;
			while (common < fc.nr_open && common - 1 < (size_t)depth &&
			       fc.open[common].id == frames[common - 1])
				common++;
		}
		err = fc_close(&fc, common);
		if (!err)
			err = grow_array((void **)&fc.open, &fc.cap_open, (size_t)depth + 1,
					 sizeof(*fc.open));
		if (err)
			goto out;
		for (size_t d = common; d <= (size_t)depth; d++) {
			fc.open[d] = (struct box){
				.start = cursor,
				.depth = (uint32_t)d + 1,
				.id = d ? frames[d - 1] : comm,
				.type = d ? BOX_FRAME : BOX_COMM,
			};
		}
		fc.nr_open = (size_t)depth + 1;
		if ((uint32_t)depth + 1 > max_depth)
			max_depth = (uint32_t)depth + 1;
		for (size_t d = 0; d < fc.nr_open; d++) {
			fc.open[d].weight = sat_add(fc.open[d].weight, wt);
			if (smp->kind == SAMPLE_OFFCPU || smp->kind == SAMPLE_RUNQUEUE)
				fc.open[d].off = sat_add(fc.open[d].off, wt);
		}
		cursor = sat_add(cursor, wt);
		if (smp->kind == SAMPLE_OFFCPU || smp->kind == SAMPLE_RUNQUEUE)
			off = sat_add(off, wt);
	}
	err = fc_close(&fc, 0);
	if (err)
		goto out;
	fc.boxes[0] = (struct box){ .weight = s.total, .off = off, .type = BOX_ROOT };

	/* cap the frame count, the narrowest first */
	err = -ENOMEM;
	w = malloc(fc.nr_boxes * sizeof(*w));
	if (!w)
		goto out;
	for (size_t i = 0; i < fc.nr_boxes; i++)
		w[i] = fc.boxes[i].weight;
	err = weight_cap(w, fc.nr_boxes, fc.scale, fc.minwidth, max, &min_w);
	if (err)
		goto out;
	max_depth = 0;
	for (size_t i = 0; i < fc.nr_boxes; i++) {
		if (i && fc.boxes[i].weight < min_w)
			continue;
		if (fc.boxes[i].depth > max_depth)
			max_depth = fc.boxes[i].depth;
		fc.boxes[kept++] = fc.boxes[i];
	}
	if (kept > 1)
		qsort(fc.boxes + 1, kept - 1, sizeof(*fc.boxes), box_cmp);
	err = svg_emit(&s, opts, default_title(sel, opts, false), width, s.total ? fc.boxes : NULL,
		       s.total ? kept : 0, max_depth);
out:
	sb_free(&s.name);
	free(v);
	free(w);
	free(frames);
	free(fc.open);
	free(fc.boxes);
	return err;
}

int render_svg(const struct profile *p, const struct render_select *sel,
	       const struct svg_opts *opts, FILE *out)
{
	struct agg agg;
	int err;

	if (opts && opts->flamechart)
		return svg_flamechart(p, sel, opts, out);
	err = agg_samples(p, sel, &agg);
	if (err)
		return err;
	err = svg_render(p, sel, &agg, NULL, false, opts, out);
	agg_free(&agg);
	return err;
}
