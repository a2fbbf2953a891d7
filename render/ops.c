/* SPDX-License-Identifier: MIT */
/*
 * The framework's operator table (report --ops), as torch.profiler's
 * key_averages() prints it, from the stacks alone. PyTorch's dispatcher
 * enters every operator through a function of its own,
 * `at::_ops::STRUCT::call` (and, past a dispatch key such as autograd's,
 * `at::_ops::STRUCT::redispatch`), STRUCT being the operator's name and
 * overload joined by '_' (add.Tensor: add_Tensor). A stack's operator
 * levels are those frames, root first; a redispatch of the operator of
 * the level it is in continues that level (the same call, one dispatch
 * key further). Self time goes to the innermost level, total time to each
 * operator on the stack once; samples in no operator are counted apart.
 * Calls (SAMPLE_CALL samples of probed operator entries) give COUNT, AVG,
 * MIN and MAX.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "render/internal.h"

#define OPS_PREFIX "at::_ops::"
#define NO_OP UINT32_MAX
#define NOT_SEEN (UINT32_MAX - 1)

bool render_op_parse(const char *name, size_t len, struct render_op_ref *ref)
{
	static const char pre[] = OPS_PREFIX;
	size_t i = sizeof(pre) - 1, start, rest;

	if (!name || len <= i || memcmp(name, pre, i))
		return false;
	start = i;
	while (i < len && i - start <= RENDER_OP_MAX &&
	       ((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
		(name[i] >= '0' && name[i] <= '9') || name[i] == '_'))
		i++;
	if (i == start || i - start > RENDER_OP_MAX)
		return false;
	rest = len - i;
	ref->s = name + start;
	ref->len = i - start;
	if (rest >= 6 && !memcmp(name + i, "::call", 6) &&
	    (rest == 6 || name[i + 6] == '(' || name[i + 6] == ' ')) {
		ref->redispatch = false;
		return true;
	}
	if (rest >= 12 && !memcmp(name + i, "::redispatch", 12) &&
	    (rest == 12 || name[i + 12] == '(' || name[i + 12] == ' ')) {
		ref->redispatch = true;
		return true;
	}
	return false;
}

/* ---- operator names with their overloads ----------------------------------- */

static uint64_t struct_hash(const char *s, size_t len)
{
	uint64_t h = hash_bytes(s, len, 0x6f70735f6e616d65ull);

	return h == UINT64_MAX ? 0 : h; /* u64map keys exclude UINT64_MAX */
}

void render_op_names_init(struct render_op_names *n)
{
	memset(n, 0, sizeof(*n));
	u64map_init(&n->index);
}

void render_op_names_free(struct render_op_names *n)
{
	u64map_free(&n->index);
	free(n->text);
	memset(n, 0, sizeof(*n));
}

/* The entry at off: its struct name (NAME_OVERLOAD) and its schema name (NAME.OVERLOAD). */
static const char *entry_schema(const struct render_op_names *n, uint64_t off, size_t *len)
{
	*len = strlen(n->text + off);
	return n->text + off;
}

static bool entry_matches(const char *schema, size_t slen, const char *s, size_t len)
{
	if (slen != len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (schema[i] != s[i] && !(schema[i] == '.' && s[i] == '_'))
			return false;
	return true;
}

int render_op_names_add(struct render_op_names *n, const char *schema, size_t len)
{
	char key[RENDER_OP_MAX + 1];
	size_t dots = 0, off;
	uint64_t h, v;

	if (!len || len > RENDER_OP_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = schema[i];

		if (c == '.' && i && i + 1 < len && !dots++)
			key[i] = '_';
		else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '_')
			key[i] = c;
		else
			return -EINVAL;
	}
	h = struct_hash(key, len);
	if (u64map_get(&n->index, h, &v))
		return 0; /* known (or a hash twin: that struct stays unsplit) */
	if (n->len + len + 1 > n->cap) {
		size_t cap = n->cap ? n->cap * 2 : 4096;
		char *t;

		while (cap < n->len + len + 1)
			cap *= 2;
		t = realloc(n->text, cap);
		if (!t)
			return -ENOMEM;
		n->text = t;
		n->cap = cap;
	}
	off = n->len;
	memcpy(n->text + off, schema, len);
	n->text[off + len] = '\0';
	n->len += len + 1;
	if (u64map_put(&n->index, h, off)) {
		n->len = off;
		return -ENOMEM;
	}
	return 0;
}

size_t render_op_name(const struct render_op_names *n, const char *s, size_t len, char *buf,
		      size_t size)
{
	const char *name = s;
	size_t nlen = len;
	uint64_t off;
	int w;

	if (n && n->text && u64map_get(&n->index, struct_hash(s, len), &off) && off < n->len) {
		size_t slen;
		const char *schema = entry_schema(n, off, &slen);

		if (entry_matches(schema, slen, s, len))
			name = schema;
	}
	w = snprintf(buf, size, "aten::%.*s", (int)nlen, name);
	if (w < 0)
		return 0;
	return (size_t)w < size ? (size_t)w : size ? size - 1 : 0;
}

/* ---- the table ----------------------------------------------------------------- */

struct op {
	char name[RENDER_OP_MAX + 8]; /* aten::NAME[.OVERLOAD] */
	size_t len;
	const char *s; /* its struct name, in the profile's strings */
	size_t slen;
};

struct op_row {
	uint32_t op;
	uint32_t root; /* string id of the samples' comm (--per-rank, --per-thread), or 0 */
	uint32_t caller; /* string id of the Python frame that called the outermost op, or 0 */
	uint64_t self, total;
	uint64_t count, sum, min, max;
	const char *text; /* the OPERATOR column, set once rows stop moving */
	size_t off, len;
};

struct level {
	uint32_t op;
	uint32_t depth;
};

struct ops_ctx {
	const struct profile *p;
	const struct ops_opts *o;
	uint32_t *frame_op; /* frame id -> op index | redispatch bit 31; NOT_SEEN, NO_OP */
	struct op *ops;
	size_t nr_ops, cap_ops;
	struct u64map op_index; /* struct hash -> op */
	struct op_row *rows;
	size_t nr_rows, cap_rows;
	struct u64map row_index; /* (root, caller) pair << 32 | op -> row */
	struct u64map pairs; /* root << 32 | caller -> pair */
	uint32_t *frames; /* the stack stack_levels looked at last, root first */
	size_t frames_cap;
	uint32_t depth;
	struct level *levels;
	size_t cap_levels;
	uint64_t in_ops, none, all; /* sampled ns: under some op, under none, in all */
	uint64_t none_cut; /* of none: in stacks cut short, whose operator is not known */
	uint64_t calls;
	size_t probed; /* ops with calls */
};

#define REDISPATCH_BIT (1u << 31)

static int op_of_frame(struct ops_ctx *c, uint32_t frame, uint32_t *out)
{
	const struct pf_frame *fr;
	struct render_op_ref ref;
	uint64_t h, v;

	if (c->frame_op[frame] != NOT_SEEN) {
		*out = c->frame_op[frame];
		return 0;
	}
	fr = profile__get_frame(c->p, frame);
	c->frame_op[frame] = NO_OP;
	*out = NO_OP;
	if (fr->kind != FRAME_USER && fr->kind != FRAME_INLINED)
		return 0;
	if (fr->name >= profile__nr_strings(c->p) ||
	    !render_op_parse(profile__str(c->p, fr->name), profile__str_len(c->p, fr->name), &ref))
		return 0;
	h = struct_hash(ref.s, ref.len);
	while (u64map_get(&c->op_index, h, &v)) {
		if (c->ops[v].slen == ref.len && !memcmp(c->ops[v].s, ref.s, ref.len))
			goto found;
		h = struct_hash((const char *)&h, sizeof(h)); /* a twin: probe on */
	}
	if (c->nr_ops >= REDISPATCH_BIT - 2 ||
	    grow_array((void **)&c->ops, &c->cap_ops, c->nr_ops + 1, sizeof(*c->ops)) ||
	    u64map_put(&c->op_index, h, c->nr_ops))
		return -ENOMEM;
	v = c->nr_ops++;
	c->ops[v].s = ref.s;
	c->ops[v].slen = ref.len;
	c->ops[v].len = render_op_name(c->o ? c->o->names : NULL, ref.s, ref.len, c->ops[v].name,
				       sizeof(c->ops[v].name));
found:
	c->frame_op[frame] = (uint32_t)v | (ref.redispatch ? REDISPATCH_BIT : 0);
	*out = c->frame_op[frame];
	return 0;
}

/*
 * The operator levels of a stack, root first, into c->levels; *caller the
 * name of the nearest Python frame outside the outermost level. Returns
 * the number of levels or a negative errno.
 */
static int64_t stack_levels(struct ops_ctx *c, uint32_t stack, uint32_t *caller)
{
	int64_t depth = profile__stack_frames(c->p, stack, &c->frames, &c->frames_cap);
	size_t n = 0;
	uint32_t py = 0;

	c->depth = depth > 0 ? (uint32_t)depth : 0;
	*caller = 0;
	if (depth < 0)
		return depth;
	for (int64_t d = 0; d < depth; d++) {
		uint32_t f = c->frames[d], op;
		int err = op_of_frame(c, f, &op);

		if (err)
			return err;
		if (op == NO_OP) {
			if (!n && profile__get_frame(c->p, f)->kind == FRAME_PYTHON)
				py = profile__get_frame(c->p, f)->name;
			continue;
		}
		/* a redispatch of the level's own operator: the same call, one key on */
		if ((op & REDISPATCH_BIT) && n && c->levels[n - 1].op == (op & ~REDISPATCH_BIT))
			continue;
		if (grow_array((void **)&c->levels, &c->cap_levels, n + 1, sizeof(*c->levels)))
			return -ENOMEM;
		c->levels[n++] = (struct level){ .op = op & ~REDISPATCH_BIT, .depth = (uint32_t)d };
	}
	if (n && c->o && c->o->by_caller)
		*caller = py;
	return (int64_t)n;
}

static int row_of(struct ops_ctx *c, uint32_t op, uint32_t root, uint32_t caller,
		  struct op_row **out)
{
	uint64_t key = (uint64_t)root << 32 | caller, pair, v;

	if (!u64map_get(&c->pairs, key, &pair)) {
		pair = c->pairs.len;
		if (u64map_put(&c->pairs, key, pair))
			return -ENOMEM;
	}
	key = pair << 32 | op;
	if (!u64map_get(&c->row_index, key, &v)) {
		if (grow_array((void **)&c->rows, &c->cap_rows, c->nr_rows + 1, sizeof(*c->rows)) ||
		    u64map_put(&c->row_index, key, c->nr_rows))
			return -ENOMEM;
		c->rows[c->nr_rows] = (struct op_row){
			.op = op, .root = root, .caller = caller, .min = UINT64_MAX
		};
		v = c->nr_rows++;
	}
	*out = &c->rows[v];
	return 0;
}

/* root: the samples' comm, which --per-rank and --per-thread make "rank N" or "comm-PID/TID" */
static int count_stack(struct ops_ctx *c, uint32_t comm, uint32_t stack, uint64_t w)
{
	uint32_t caller, root = c->o && c->o->by_root ? comm : 0;
	int64_t n = stack_levels(c, stack, &caller);
	struct op_row *r;
	int err;

	if (n < 0)
		return (int)n;
	c->all = sat_add(c->all, w);
	if (!n) {
		enum stack_end end = profile__stack_end(c->p, stack);

		c->none = sat_add(c->none, w);
		/* a cut stack may have lost its operators with its outer frames */
		if (end != STACK_END_COMPLETE && end != STACK_END_UNKNOWN)
			c->none_cut = sat_add(c->none_cut, w);
		return 0;
	}
	c->in_ops = sat_add(c->in_ops, w);
	for (int64_t i = 0; i < n; i++) {
		bool again = false;

		for (int64_t k = 0; k < i && !again; k++)
			again = c->levels[k].op == c->levels[i].op;
		if (again)
			continue; /* an operator within itself: its total once */
		err = row_of(c, c->levels[i].op, root, caller, &r);
		if (err)
			return err;
		r->total = sat_add(r->total, w);
	}
	/* the innermost level's (which may be an operator within itself) */
	err = row_of(c, c->levels[n - 1].op, root, caller, &r);
	if (err)
		return err;
	r->self = sat_add(r->self, w);
	return 0;
}

static int count_call(void *ctx, const struct pf_sample *s)
{
	struct ops_ctx *c = ctx;
	uint32_t root = 0, caller, leaf;
	struct op_row *r;
	int64_t n;
	int err;

	if (s->kind != SAMPLE_CALL || !s->stack)
		return 0;
	if (s->stack >= profile__nr_stacks(c->p) || s->thread >= profile__nr_threads(c->p))
		return -EINVAL;
	if (c->o && c->o->by_root) {
		root = profile__get_thread(c->p, s->thread)->comm;
		if (root >= profile__nr_strings(c->p))
			return -EINVAL;
	}
	n = stack_levels(c, s->stack, &caller);
	if (n <= 0)
		return (int)n;
	/* the called function is the leaf: an operator entry, or no row */
	leaf = c->frames[c->depth - 1];
	if ((c->frame_op[leaf] & REDISPATCH_BIT) || c->levels[n - 1].depth + 1 != c->depth)
		return 0;
	err = row_of(c, c->levels[n - 1].op, root, caller, &r);
	if (err)
		return err;
	if (!r->count)
		c->probed++;
	r->count++;
	c->calls++;
	r->sum = sat_add(r->sum, s->weight);
	if (s->weight < r->min)
		r->min = s->weight;
	if (s->weight > r->max)
		r->max = s->weight;
	return 0;
}

static int row_cmp(const void *a, const void *b, void *arg)
{
	const struct op_row *x = a, *y = b;
	bool by_total = *(const bool *)arg;
	uint64_t x1 = by_total ? x->total : x->self, y1 = by_total ? y->total : y->self;
	uint64_t x2 = by_total ? x->self : x->total, y2 = by_total ? y->self : y->total;
	int cmp;

	if (x1 != y1)
		return x1 > y1 ? -1 : 1;
	if (x2 != y2)
		return x2 > y2 ? -1 : 1;
	if (x->sum != y->sum)
		return x->sum > y->sum ? -1 : 1;
	cmp = memcmp(x->text, y->text, x->len < y->len ? x->len : y->len);
	if (cmp)
		return cmp;
	return x->len < y->len ? -1 : x->len > y->len;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static int row_text(struct ops_ctx *c, struct strbuf *sb, struct op_row *r)
{
	const struct op *op = &c->ops[r->op];
	int err = 0;

	r->off = sb->len;
	if (r->root) {
		err = sb_add(sb, "[", 1);
		if (!err)
			err = sb_add_folded_name(sb, profile__str(c->p, r->root),
						 profile__str_len(c->p, r->root));
		if (!err)
			err = sb_add(sb, "] ", 2);
	}
	if (!err)
		err = sb_add_folded_name(sb, op->name, op->len);
	if (!err && c->o && c->o->by_caller) {
		err = sb_add(sb, " <- ", 4);
		if (!err && r->caller)
			err = sb_add_folded_name(sb, profile__str(c->p, r->caller),
						 profile__str_len(c->p, r->caller));
		else if (!err)
			err = sb_add(sb, "[no Python caller]", 18);
	}
	r->len = sb->len - r->off;
	return err;
}

static void describe(const bool kinds[SAMPLE_KIND_MAX], char *buf, size_t size)
{
	static const char *const names[SAMPLE_KIND_MAX] = {
		[SAMPLE_ONCPU] = "on-CPU",
		[SAMPLE_OFFCPU] = "off-CPU",
		[SAMPLE_RUNQUEUE] = "runqueue",
	};
	size_t n = 0;

	buf[0] = '\0';
	for (int k = 0; k < SAMPLE_KIND_MAX; k++)
		if (kinds[k] && names[k] && n < size)
			n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? " + " : "", names[k]);
}

int render_ops(const struct profile *p, const struct render_select *sel, const struct ops_opts *o,
	       FILE *out)
{
	struct render_select ns = sel ? *sel : (struct render_select){ 0 };
	struct ops_ctx c = { .p = p, .o = o };
	size_t rows = o ? o->rows : 0, nframes = profile__nr_frames(p);
	bool by_total = o && o->by_total, kinds[SAMPLE_KIND_MAX];
	struct strbuf text = { 0 };
	uint64_t ends[STACK_END_MAX];
	char what[64], line[256];
	struct agg agg = { 0 };
	int err;

	ns.weight_ns = true;
	ns.kinds[SAMPLE_CALL] = ns.kinds[SAMPLE_FAULT] = ns.kinds[SAMPLE_RSS] = false;
	select_kinds(&ns, kinds);
	u64map_init(&c.op_index);
	u64map_init(&c.row_index);
	u64map_init(&c.pairs);
	err = -ENOMEM;
	c.frame_op = malloc((nframes ? nframes : 1) * sizeof(*c.frame_op));
	if (!c.frame_op)
		goto out;
	for (size_t i = 0; i < nframes; i++)
		c.frame_op[i] = NOT_SEEN;
	err = agg_samples(p, &ns, &agg);
	for (size_t i = 0; !err && i < agg.len; i++)
		err = count_stack(&c, agg.v[i].comm, agg.v[i].stack, agg.v[i].weight);
	if (!err)
		err = profile__foreach_sample(p, count_call, &c);
	if (err)
		goto out;
	for (size_t i = 0; i < c.nr_rows && !err; i++)
		err = row_text(&c, &text, &c.rows[i]);
	if (err)
		goto out;
	for (size_t i = 0; i < c.nr_rows; i++)
		c.rows[i].text = text.buf + c.rows[i].off;
	if (c.nr_rows) /* no rows: rows may be NULL, which qsort_r must not get */
		qsort_r(c.rows, c.nr_rows, sizeof(*c.rows), row_cmp, &by_total);

	describe(kinds, what, sizeof(what));
	fprintf(out,
		"Operators: %.1f ms of %.1f ms %s in %zu operators (%.1f%%); in no operator: %.1f ms (%.1f%%)\n",
		ms(c.in_ops), ms(c.all), what, c.nr_ops, pct(c.in_ops, c.all), ms(c.none),
		pct(c.none, c.all));
	if (c.none_cut)
		fprintf(out,
			"Of the time in no operator, %.1f ms (%.1f%% of all) is in stacks cut short: "
			"their operator, if any, is not known\n",
			ms(c.none_cut), pct(c.none_cut, c.all));
	if (c.calls)
		fprintf(out,
			"Calls: %llu of %zu probed operators, counted and timed by probes (COUNT, AVG, MIN, MAX); SELF and TOTAL sampled\n",
			(unsigned long long)c.calls, c.probed);
	else
		fprintf(out,
			"Times sampled, calls not counted (record --probe-ops counts and times them)\n");
	if (profile__cmeta(p)->lost)
		fprintf(out, "Lost: %llu samples (ring buffer overflow)\n",
			(unsigned long long)profile__cmeta(p)->lost);
	err = render_stack_ends(p, &ns, ends);
	if (err)
		goto out;
	if (render_ends_line(ends, line, sizeof(line)))
		fprintf(out, "%s\n", line);
	fprintf(out, "%10s %6s %6s %10s %6s", "SELF ms", "SELF%", "OPS%", "TOTAL ms", "TOTAL%");
	if (c.calls)
		fprintf(out, " %8s %9s %9s %9s", "COUNT", "AVG ms", "MIN ms", "MAX ms");
	fprintf(out, "  %s\n", o && o->by_caller ? "OPERATOR <- PYTHON CALLER" : "OPERATOR");
	for (size_t i = 0; i < c.nr_rows && (!rows || i < rows); i++) {
		const struct op_row *r = &c.rows[i];

		fprintf(out, "%10.1f %5.1f%% %5.1f%% %10.1f %5.1f%%", ms(r->self),
			pct(r->self, c.all), pct(r->self, c.in_ops), ms(r->total),
			pct(r->total, c.all));
		if (c.calls && r->count)
			fprintf(out, " %8llu %9.3f %9.3f %9.3f", (unsigned long long)r->count,
				ms(r->sum) / (double)r->count, ms(r->min), ms(r->max));
		else if (c.calls)
			fprintf(out, " %8s %9s %9s %9s", "-", "-", "-", "-");
		if (fputs("  ", out) == EOF || put_buf(out, r->text, r->len) ||
		    fputc('\n', out) == EOF) {
			err = render_write_error();
			goto out;
		}
	}
	if (rows && c.nr_rows > rows)
		fprintf(out, "(%zu more; -n 0 shows all)\n", c.nr_rows - rows);
	err = fflush(out) == EOF || ferror(out) ? render_write_error() : 0;
out:
	agg_free(&agg);
	sb_free(&text);
	u64map_free(&c.op_index);
	u64map_free(&c.row_index);
	u64map_free(&c.pairs);
	free(c.frame_op);
	free(c.ops);
	free(c.rows);
	free(c.frames);
	free(c.levels);
	return err;
}
