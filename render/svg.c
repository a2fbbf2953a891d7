/* SPDX-License-Identifier: MIT */
/*
 * Interactive SVG flame graph, in the manner of flamegraph.pl: the layout is
 * computed here, flame.js only re-scales it for zoom and colours it for
 * search.
 *
 * The call tree is the profile's stack prefix tree split per comm: node
 * (comm, stack) has parent (comm, parent stack), and (comm, 0) is the comm's
 * own node under the root "all". Interning made (parent, frame) unique, so
 * merging children by frame id needs no extra work.
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
	uint64_t weight; /* self weight until totals are summed, then total */
	uint64_t start; /* weight left of this node on its row */
	uint32_t parent;
	uint32_t id; /* frame id; comm string id for a comm node */
	uint32_t stack; /* 0 for comm nodes and the root */
	uint32_t depth; /* 0 for the root */
	uint32_t child0; /* first child's index in tree.order */
	uint32_t nchild;
};

struct tree {
	const struct profile *p;
	struct node *v;
	size_t len;
	size_t cap;
	uint32_t *order; /* nodes grouped by parent; sorted by name when laid out */
};

static void tree_free(struct tree *t)
{
	free(t->v);
	free(t->order);
}

static int new_node(struct tree *t, uint32_t id, uint32_t stack, uint32_t *idx)
{
	int err;

	if (t->len >= NONE)
		return -E2BIG;
	err = grow_array((void **)&t->v, &t->cap, t->len + 1, sizeof(*t->v));
	if (err)
		return err;
	t->v[t->len] = (struct node){ .parent = NONE, .id = id, .stack = stack };
	*idx = (uint32_t)t->len++;
	return 0;
}

/* Find or create node (comm, stack) and the missing part of its path. */
static int tree_path(struct tree *t, struct u64map *idx, uint32_t comm, uint32_t stack,
		     uint32_t *leaf)
{
	size_t nr_frames = profile__nr_frames(t->p);
	uint32_t child = NONE, n;
	uint64_t v;
	int err;

	for (;;) {
		const struct pf_stack *st = NULL;
		uint64_t key = (uint64_t)comm << 32 | stack;

		if (u64map_get(idx, key, &v)) {
			n = (uint32_t)v;
			if (child != NONE)
				t->v[child].parent = n;
			break;
		}
		if (stack) {
			st = profile__get_stack(t->p, stack);
			/* interning creates parents first; anything else could loop */
			if (st->parent >= stack || st->frame >= nr_frames)
				return -EINVAL;
		}
		err = new_node(t, st ? st->frame : comm, stack, &n);
		if (!err)
			err = u64map_put(idx, key, n);
		if (err)
			return err;
		if (child == NONE)
			*leaf = n;
		else
			t->v[child].parent = n;
		if (!st) {
			t->v[n].parent = ROOT;
			return 0;
		}
		child = n;
		stack = st->parent;
	}
	if (child == NONE)
		*leaf = n;
	return 0;
}

static void node_name(const struct tree *t, const struct node *n, const char **s, size_t *len,
		      uint32_t *kind)
{
	uint32_t str = n->id;

	*kind = FRAME_USER;
	if (n->stack) {
		const struct pf_frame *f = profile__get_frame(t->p, n->id);

		str = f->name;
		*kind = f->kind;
	}
	*s = profile__str(t->p, str);
	*len = profile__str_len(t->p, str);
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
	c = memcmp(xs, ys, xl < yl ? xl : yl);
	if (c)
		return c;
	if (xl != yl)
		return xl < yl ? -1 : 1;
	if (xk != yk)
		return xk < yk ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * Sum weights bottom-up, deepest nodes first (a counting sort by depth),
 * and group children by parent in t->order. Both are linear: a tree from a
 * long recording has millions of nodes, of which only the few thousand
 * wide enough to draw ever need their children sorted by name.
 */
static int tree_link(struct tree *t)
{
	size_t *at = NULL, n = t->len - 1;
	uint32_t *by_depth = NULL, max_depth = 0;
	int err = -ENOMEM;

	for (size_t i = 1; i < t->len; i++) {
		struct node *v = &t->v[i];

		v->depth = v->stack ? profile__stack_depth(t->p, v->stack) + 1 : 1;
		if (v->depth > max_depth)
			max_depth = v->depth;
	}
	t->order = malloc((n ? n : 1) * sizeof(*t->order));
	by_depth = malloc((n ? n : 1) * sizeof(*by_depth));
	at = calloc((size_t)max_depth + 2, sizeof(*at));
	if (!t->order || !by_depth || !at)
		goto out;
	for (size_t i = 1; i < t->len; i++)
		at[max_depth - t->v[i].depth + 1]++;
	for (size_t d = 1; d <= max_depth + 1; d++)
		at[d] += at[d - 1];
	for (size_t i = 1; i < t->len; i++)
		by_depth[at[max_depth - t->v[i].depth]++] = (uint32_t)i;
	for (size_t i = 0; i < n; i++) {
		struct node *v = &t->v[by_depth[i]];

		t->v[v->parent].weight = sat_add(t->v[v->parent].weight, v->weight);
	}

	for (size_t i = 1; i < t->len; i++)
		t->v[t->v[i].parent].nchild++;
	for (size_t i = 0, next = 0; i < t->len; i++) {
		t->v[i].child0 = (uint32_t)next;
		next += t->v[i].nchild;
		t->v[i].nchild = 0;
	}
	for (size_t i = 1; i < t->len; i++) {
		struct node *parent = &t->v[t->v[i].parent];

		t->order[parent->child0 + parent->nchild++] = (uint32_t)i;
	}
	err = 0;
out:
	free(at);
	free(by_depth);
	return err;
}

static int tree_build(struct tree *t, const struct agg *agg)
{
	size_t nr_strings = profile__nr_strings(t->p);
	struct u64map idx;
	uint32_t root;
	int err;

	u64map_init(&idx);
	err = new_node(t, 0, 0, &root);
	for (size_t i = 0; !err && i < agg->len; i++) {
		const struct agg_entry *e = &agg->v[i];
		uint32_t leaf = ROOT;

		if (e->comm >= nr_strings) {
			err = -EINVAL;
			break;
		}
		err = tree_path(t, &idx, e->comm, e->stack, &leaf);
		if (!err)
			t->v[leaf].weight = sat_add(t->v[leaf].weight, e->weight);
	}
	u64map_free(&idx);
	return err ? err : tree_link(t);
}

/*
 * Lay out rows from the root, pruning every node narrower than minwidth
 * (its descendants are narrower still). Fills emit[] in preorder, so the
 * root comes first and parents precede their children.
 */
static int tree_layout(struct tree *t, double scale, double minwidth, uint32_t *emit,
		       size_t *nr_emit, uint32_t *max_depth)
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
		for (uint32_t i = n->nchild; i-- > 0;) {
			uint32_t c = t->order[n->child0 + i];

			if ((double)t->v[c].weight * scale >= minwidth)
				todo[nr_todo++] = c;
		}
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
static struct rgb frame_colour(const char *name, size_t len, uint32_t kind)
{
	uint64_t h = hash_bytes(name, len, 0);
	double v1 = (double)(h & 0xffff) / 0xffff;
	double v2 = (double)(h >> 16 & 0xffff) / 0xffff;
	double v3 = (double)(h >> 32 & 0xffff) / 0xffff;

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
	case FRAME_INLINED: /* aqua */
		return (struct rgb){ 50 + (unsigned)(60 * v1), 165 + (unsigned)(55 * v2),
				     165 + (unsigned)(55 * v2) };
	default: /* [truncated], [unknown]: grey */
		return (struct rgb){ 170 + (unsigned)(40 * v1), 170 + (unsigned)(40 * v1),
				     170 + (unsigned)(40 * v1) };
	}
}

struct svg {
	FILE *out;
	const struct tree *t;
	const char *countname;
	bool by_ns;
	uint64_t total;
	double scale;
	unsigned height;
	struct strbuf name; /* the current frame's name, XML-clean */
};

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

static int put_frame(struct svg *s, const struct node *n)
{
	char x[32], y[32], w[32], tx[32], ty[32], pct[32], cnt[40];
	double width = (double)n->weight * s->scale;
	double left = XPAD + (double)n->start * s->scale;
	double top = s->height - YPAD_BOTTOM - (n->depth + 1.0) * FRAME_HEIGHT + FRAME_PAD;
	uint64_t count = n->weight;
	const char *name;
	size_t len;
	uint32_t kind;
	struct rgb c;
	int64_t cps;

	if (n == s->t->v) {
		name = "all";
		len = 3;
		kind = FRAME_USER;
	} else {
		node_name(s->t, n, &name, &len, &kind);
	}
	s->name.len = 0;
	cps = sb_add_xml_clean(&s->name, name, len);
	if (cps < 0)
		return (int)cps;
	c = frame_colour(name, len, kind);
	if (s->by_ns)
		count = count / 1000 + (count % 1000 >= 500);

	fprintf(s->out, "<g class=\"f\" data-s=\"%llu\" data-w=\"%llu\"><title>",
		(unsigned long long)n->start, (unsigned long long)n->weight);
	if (render_xml_escape(s->name.buf, s->name.len, s->out))
		return render_write_error();
	fprintf(s->out, " (%s ", fmt_thousands(cnt, sizeof(cnt), count));
	if (put_escaped(s->out, s->countname))
		return render_write_error();
	fprintf(s->out,
		", %s%%)</title><rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%d\" "
		"fill=\"rgb(%u,%u,%u)\" rx=\"2\" ry=\"2\"/><text x=\"%s\" y=\"%s\">",
		fmt_fixed(pct, sizeof(pct), 100.0 * (double)n->weight / (double)s->total, true),
		fmt_fixed(x, sizeof(x), left, false), fmt_fixed(y, sizeof(y), top, false),
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

int render_svg(const struct profile *p, const struct render_select *sel,
	       const struct svg_opts *opts, FILE *out)
{
	bool by_ns = sel && sel->weight_ns;
	const char *title = opts && opts->title ? opts->title : "Flame Graph";
	const char *countname = opts && opts->countname ? opts->countname
				: by_ns			? "us"
							: "samples";
	unsigned width = opts && opts->width ? opts->width : 1200;
	double minwidth = opts && opts->minwidth != 0 ? opts->minwidth : 0.1;
	unsigned top = YPAD_TOP + (opts && opts->subtitle ? YPAD_SUBTITLE : 0);
	struct tree t = { .p = p };
	struct svg s = { .out = out, .t = &t, .countname = countname, .by_ns = by_ns };
	uint32_t *emit = NULL, max_depth = 0;
	size_t nr_emit = 0;
	struct agg agg;
	int err;

	/* a graph needs some room; 1M px is beyond any screen or viewer */
	if (width <= 2 * XPAD + 10 || width > 1000000 || !(minwidth >= 0) || isinf(minwidth))
		return -EINVAL;
	err = agg_samples(p, sel, &agg);
	if (err)
		return err;
	err = tree_build(&t, &agg);
	if (err)
		goto out;
	s.total = agg.total;
	s.scale = agg.total ? (double)(width - 2 * XPAD) / (double)agg.total : 0;

	err = -ENOMEM;
	emit = malloc(t.len * sizeof(*emit));
	if (!emit)
		goto out;
	if (agg.total) {
		err = tree_layout(&t, s.scale, minwidth, emit, &nr_emit, &max_depth);
		if (err)
			goto out;
	}
	s.height = top + (max_depth + 1) * FRAME_HEIGHT + YPAD_BOTTOM;

	err = put_header(&s, opts, title, width);
	if (err)
		goto out;
	if (!agg.total)
		fprintf(out, "<text x=\"%u\" y=\"%u\" text-anchor=\"middle\">No samples</text>\n",
			width / 2, top + FRAME_HEIGHT - 4);
	fprintf(out, "<g id=\"frames\">\n");
	for (size_t i = 0; i < nr_emit; i++) {
		err = put_frame(&s, &t.v[emit[i]]);
		if (err)
			goto out;
	}
	fprintf(out, "</g>\n</svg>\n");
	err = fflush(out) == EOF || ferror(out) ? render_write_error() : 0;
out:
	sb_free(&s.name);
	free(emit);
	tree_free(&t);
	agg_free(&agg);
	return err;
}
