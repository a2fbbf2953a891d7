/* SPDX-License-Identifier: MIT */
/*
 * speedscope's file format (https://www.speedscope.app/file-format-schema.json):
 * a shared frames table and one "sampled" profile per thread and view, its
 * samples in time order, each the list of its frames (root first) with a
 * weight. The format has no stack table, so each sample spells its whole
 * stack: consecutive samples of one stack become one sample (speedscope
 * draws them alike), and the frames are numbered hottest first, so that the
 * indices that fill the file are the shortest. Written as it is made: the
 * memory is the profile's samples and stacks, not the output.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "render/internal.h"

#define SCHEMA "https://www.speedscope.app/file-format-schema.json"
#define OFFCPU_LEAF "[off-CPU]"
#define NO_ID UINT32_MAX

enum view {
	VIEW_ONCPU,
	VIEW_OFFCPU, /* off-CPU and runqueue */
	VIEW_WALL, /* all of them in one time line */
	VIEW_FAULTS,
	VIEW_MAX,
};

static const char *const view_name[VIEW_MAX] = {
	[VIEW_ONCPU] = " (on-CPU)",
	[VIEW_OFFCPU] = " (off-CPU)",
	[VIEW_WALL] = " (wall)",
	[VIEW_FAULTS] = " (page faults)",
};

/* A frame of the file: a profile frame's function (or line), file and kind. */
struct ssframe {
	uint32_t name; /* string id; NO_ID: OFFCPU_LEAF */
	uint32_t file; /* string id: the source file, else the module; 0 none */
	uint32_t line; /* 0: not given */
	uint32_t kind;
	uint32_t next; /* the next frame of the same (name, file), or NO_ID */
	uint32_t index; /* in the file */
	uint64_t uses; /* how many times the written samples name it */
};

/* Sorted by profile, then time; then, in place, the profile's samples merged. */
struct entry {
	uint64_t at; /* start time; once merged: the weight */
	uint32_t key; /* thread group * VIEW_MAX + view */
	uint32_t ref; /* sample index; once merged: the canonical stack */
};

struct ss {
	const struct profile *p;
	const struct speedscope_opts *o;
	FILE *out;
	struct strbuf line;
	/* frames of the file */
	struct ssframe *frames;
	size_t nr_frames, cap_frames;
	uint32_t *of_frame; /* profile frame -> file frame, NO_ID unset */
	struct u64map by_name; /* name << 32 | file -> first file frame of that pair */
	uint32_t offcpu_frame;
	/* canonical stacks: stacks of file frames; 0 is the empty stack */
	struct cnode {
		uint32_t parent, frame;
	} * cn;
	size_t nr_canon, cap_canon;
	struct u64map canon; /* parent << 32 | file frame -> canonical stack */
	uint32_t *of_stack; /* profile stack -> canonical stack, NO_ID unset */
	uint32_t *path;
	size_t cap_path;
};

static const char *const kind_suffix[FRAME_KIND_MAX] = {
	[FRAME_KERNEL] = "_[k]",
	[FRAME_JIT] = "_[j]",
	[FRAME_INLINED] = "_[i]",
};

static int64_t new_frame(struct ss *s, uint32_t name, uint32_t file, uint32_t line, uint32_t kind)
{
	if (s->nr_frames >= NO_ID ||
	    grow_array((void **)&s->frames, &s->cap_frames, s->nr_frames + 1, sizeof(*s->frames)))
		return -ENOMEM;
	s->frames[s->nr_frames] = (struct ssframe){
		.name = name, .file = file, .line = line, .kind = kind, .next = NO_ID
	};
	return (int64_t)s->nr_frames++;
}

/* The file frame of profile frame f. */
static int64_t file_frame(struct ss *s, uint32_t f)
{
	const struct pf_frame *fr;
	uint32_t file, line, first;
	uint64_t key, v;
	int64_t id;

	if (s->of_frame[f] != NO_ID)
		return s->of_frame[f];
	fr = profile__get_frame(s->p, f);
	file = fr->file ? fr->file : fr->module;
	line = s->o && s->o->lines && fr->file ? fr->line : 0;
	if (fr->name >= profile__nr_strings(s->p) || file >= profile__nr_strings(s->p))
		return -EINVAL;
	key = (uint64_t)fr->name << 32 | file;
	if (!u64map_get(&s->by_name, key, &v)) {
		id = new_frame(s, fr->name, file, line, fr->kind);
		if (id < 0 || u64map_put(&s->by_name, key, (uint64_t)id))
			return -ENOMEM;
		return s->of_frame[f] = (uint32_t)id;
	}
	/* the same name and file: another kind or line? */
	for (first = (uint32_t)v; first != NO_ID; first = s->frames[first].next) {
		if (s->frames[first].kind == fr->kind && s->frames[first].line == line)
			return s->of_frame[f] = first;
		if (s->frames[first].next == NO_ID)
			break;
	}
	id = new_frame(s, fr->name, file, line, fr->kind);
	if (id < 0)
		return id;
	s->frames[first].next = (uint32_t)id;
	return s->of_frame[f] = (uint32_t)id;
}

static int64_t canon_child(struct ss *s, uint32_t parent, uint32_t frame)
{
	uint64_t key = (uint64_t)parent << 32 | frame, v;

	if (u64map_get(&s->canon, key, &v))
		return (int64_t)v;
	if (s->nr_canon >= NO_ID ||
	    grow_array((void **)&s->cn, &s->cap_canon, s->nr_canon + 1, sizeof(*s->cn)))
		return -ENOMEM;
	s->cn[s->nr_canon] = (struct cnode){ parent, frame };
	if (u64map_put(&s->canon, key, s->nr_canon))
		return -ENOMEM;
	return (int64_t)s->nr_canon++;
}

/* The canonical stack of profile stack id: its frames as the file names them. */
static int64_t canon_stack(struct ss *s, uint32_t id)
{
	size_t n = 0;
	int64_t c;

	/* the stacks not mapped yet, leaf first; parents have smaller ids */
	for (uint32_t at = id; s->of_stack[at] == NO_ID;) {
		uint32_t parent = profile__get_stack(s->p, at)->parent;

		if (parent >= at || n >= PROFILE_MAX_DEPTH)
			return -EINVAL;
		if (grow_array((void **)&s->path, &s->cap_path, n + 1, sizeof(*s->path)))
			return -ENOMEM;
		s->path[n++] = at;
		at = parent;
	}
	c = s->of_stack[n ? profile__get_stack(s->p, s->path[n - 1])->parent : id];
	while (n--) {
		uint32_t at = s->path[n];
		uint32_t f = profile__get_stack(s->p, at)->frame;
		int64_t ff;

		if (f >= profile__nr_frames(s->p))
			return -EINVAL;
		ff = file_frame(s, f);
		if (ff < 0)
			return ff;
		c = canon_child(s, (uint32_t)c, (uint32_t)ff);
		if (c < 0)
			return c;
		s->of_stack[at] = (uint32_t)c;
	}
	return c;
}

static enum view view_of(const struct speedscope_opts *o, uint32_t kind)
{
	if (kind == SAMPLE_FAULT)
		return VIEW_FAULTS;
	if (o && o->wall)
		return VIEW_WALL;
	return kind == SAMPLE_ONCPU ? VIEW_ONCPU : VIEW_OFFCPU;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if (x->at != y->at)
		return x->at < y->at ? -1 : 1;
	return x->ref < y->ref ? -1 : x->ref > y->ref;
}

/* Threads by host, pid, tid: a thread renamed on the way is one profile. */
static const struct profile *thread_order_p;

static int thread_cmp(const void *a, const void *b)
{
	const struct profile *p = thread_order_p;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	const struct pf_thread *tx = profile__get_thread(p, x), *ty = profile__get_thread(p, y);
	uint32_t hx = profile__thread_host(p, tx), hy = profile__thread_host(p, ty);

	if (hx != hy)
		return hx < hy ? -1 : 1;
	if (tx->pid != ty->pid)
		return tx->pid < ty->pid ? -1 : 1;
	if (tx->tid != ty->tid)
		return tx->tid < ty->tid ? -1 : 1;
	return x < y ? -1 : x > y;
}

static bool same_thread(const struct profile *p, const struct pf_thread *a,
			const struct pf_thread *b)
{
	return a->pid == b->pid && a->tid == b->tid &&
	       profile__thread_host(p, a) == profile__thread_host(p, b);
}

static int by_uses(const void *a, const void *b)
{
	const struct ssframe *x = *(const struct ssframe *const *)a;
	const struct ssframe *y = *(const struct ssframe *const *)b;

	if (x->uses != y->uses)
		return x->uses > y->uses ? -1 : 1;
	return x < y ? -1 : x > y;
}

static int flush_line(struct ss *s)
{
	int err = put_buf(s->out, s->line.buf, s->line.len);

	s->line.len = 0;
	return err;
}

static int add_str(struct strbuf *sb, const char *str)
{
	return sb_add(sb, str, strlen(str));
}

static int add_u64(struct strbuf *sb, uint64_t v)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);

	return sb_add(sb, buf, (size_t)n);
}

static int put_frame(struct ss *s, const struct ssframe *f, bool first)
{
	const struct profile *p = s->p;
	int err = add_str(&s->line, first ? "\n{\"name\":" : ",\n{\"name\":");

	if (!err && f->name == NO_ID) {
		err = sb_add_json(&s->line, OFFCPU_LEAF, strlen(OFFCPU_LEAF));
	} else if (!err) {
		const char *suffix = f->kind < FRAME_KIND_MAX ? kind_suffix[f->kind] : NULL;
		struct strbuf name = { 0 };

		err = sb_add(&name, profile__str(p, f->name), profile__str_len(p, f->name));
		if (!err && suffix && profile__str_len(p, f->name))
			err = add_str(&name, suffix);
		if (!err)
			err = sb_add_json(&s->line, name.buf, name.len);
		sb_free(&name);
	}
	if (!err && f->name != NO_ID && f->file && profile__str_len(p, f->file)) {
		err = add_str(&s->line, ",\"file\":");
		if (!err)
			err = sb_add_json(&s->line, profile__str(p, f->file),
					  profile__str_len(p, f->file));
	}
	if (!err && f->line) {
		err = add_str(&s->line, ",\"line\":");
		if (!err)
			err = add_u64(&s->line, f->line);
	}
	if (!err)
		err = add_str(&s->line, "}");
	return err ? err : flush_line(s);
}

/* One sample's stack: its frames' indices, root first. */
static int put_stack(struct ss *s, uint32_t c, bool first)
{
	size_t n = 0;
	int err;

	for (; c; c = s->cn[c].parent) {
		if (grow_array((void **)&s->path, &s->cap_path, n + 1, sizeof(*s->path)))
			return -ENOMEM;
		s->path[n++] = s->frames[s->cn[c].frame].index;
	}
	err = add_str(&s->line, first ? "[" : ",[");
	while (!err && n--) {
		err = add_u64(&s->line, s->path[n]);
		if (!err && n)
			err = sb_add(&s->line, ",", 1);
	}
	if (!err)
		err = sb_add(&s->line, "]", 1);
	/* the line is written out in pieces: its length stays bounded */
	if (!err && s->line.len >= 65536)
		err = flush_line(s);
	return err;
}

/* One profile: the merged samples e[0, n) of one thread and view. */
static int put_profile(struct ss *s, const struct entry *e, size_t n, uint32_t label, enum view v,
		       uint64_t total, bool first)
{
	int err = add_str(&s->line, first ? "\n{\"type\":\"sampled\",\"name\":"
					  : ",\n{\"type\":\"sampled\",\"name\":");
	struct strbuf name = { 0 };

	if (!err)
		err = sb_add(&name, profile__str(s->p, label), profile__str_len(s->p, label));
	if (!err)
		err = add_str(&name, view_name[v]);
	if (!err)
		err = sb_add_json(&s->line, name.buf, name.len);
	sb_free(&name);
	if (!err)
		err = add_str(&s->line, v == VIEW_FAULTS ? ",\"unit\":\"bytes\""
							 : ",\"unit\":\"nanoseconds\"");
	if (!err)
		err = add_str(&s->line, ",\"startValue\":0,\"endValue\":");
	if (!err)
		err = add_u64(&s->line, total);
	if (!err)
		err = add_str(&s->line, ",\n\"samples\":[");
	for (size_t i = 0; i < n && !err; i++)
		err = put_stack(s, e[i].ref, i == 0);
	if (!err)
		err = add_str(&s->line, "],\n\"weights\":[");
	for (size_t i = 0; i < n && !err; i++) {
		if (i)
			err = sb_add(&s->line, ",", 1);
		if (!err)
			err = add_u64(&s->line, e[i].at);
		if (!err && s->line.len >= 65536)
			err = flush_line(s);
	}
	if (!err)
		err = add_str(&s->line, "]}");
	return err ? err : flush_line(s);
}

/* Per thread group: the label of its last sample's thread. */
struct group {
	uint32_t label; /* string id */
	uint64_t last; /* time of that sample */
};

int render_speedscope(const struct profile *p, const struct render_select *sel,
		      const struct speedscope_opts *opts, FILE *out)
{
	struct ss s = { .p = p, .o = opts, .out = out, .offcpu_frame = NO_ID };
	size_t n = profile__nr_samples(p), nr_threads = profile__nr_threads(p);
	size_t nr_stacks = profile__nr_stacks(p), nr = 0, nr_merged = 0, active = 0, np = 0;
	uint32_t *tgroup = NULL, *torder = NULL;
	struct group *groups = NULL;
	struct ssframe **order = NULL;
	struct entry *e = NULL;
	uint64_t *uses = NULL, best = 0;
	const struct pf_meta *m = profile__cmeta(p);
	bool kinds[SAMPLE_KIND_MAX];
	size_t nr_groups = 0;
	int err = -ENOMEM;

	select_kinds(sel, kinds);
	kinds[SAMPLE_CALL] = kinds[SAMPLE_RSS] = false;
	u64map_init(&s.by_name);
	u64map_init(&s.canon);
	tgroup = malloc((nr_threads ? nr_threads : 1) * sizeof(*tgroup));
	torder = malloc((nr_threads ? nr_threads : 1) * sizeof(*torder));
	groups = calloc(nr_threads ? nr_threads : 1, sizeof(*groups));
	s.of_frame = malloc((profile__nr_frames(p) ? profile__nr_frames(p) : 1) * sizeof(uint32_t));
	s.of_stack = malloc((nr_stacks ? nr_stacks : 1) * sizeof(uint32_t));
	e = malloc((n ? n : 1) * sizeof(*e));
	if (!tgroup || !torder || !groups || !s.of_frame || !s.of_stack || !e)
		goto out;
	memset(s.of_frame, 0xff, profile__nr_frames(p) * sizeof(uint32_t));
	memset(s.of_stack, 0xff, nr_stacks * sizeof(uint32_t));
	if (nr_stacks)
		s.of_stack[0] = 0;
	/* canonical stack 0: the empty stack */
	if (grow_array((void **)&s.cn, &s.cap_canon, 1, sizeof(*s.cn)))
		goto out;
	s.cn[0] = (struct cnode){ 0, NO_ID };
	s.nr_canon = 1;
	err = -EINVAL;
	if (m->command >= profile__nr_strings(p))
		goto out;

	/* thread groups: one per (host, pid, tid) */
	for (size_t i = 0; i < nr_threads; i++)
		torder[i] = (uint32_t)i;
	thread_order_p = p;
	qsort(torder, nr_threads, sizeof(*torder), thread_cmp);
	for (size_t i = 0; i < nr_threads; i++) {
		const struct pf_thread *t = profile__get_thread(p, torder[i]);

		if (t->comm >= profile__nr_strings(p))
			goto out;
		if (i && !same_thread(p, profile__get_thread(p, torder[i - 1]), t))
			nr_groups++;
		tgroup[torder[i]] = (uint32_t)nr_groups;
		groups[nr_groups].label = t->comm;
	}
	nr_groups += nr_threads > 0;
	if (nr_groups > UINT32_MAX / VIEW_MAX)
		goto out;

	/* the chosen samples, by thread and view, in time order */
	for (size_t i = 0; i < n; i++) {
		const struct pf_sample *sa = profile__get_sample(p, i);
		uint64_t at;
		uint32_t g;

		if (sa->kind >= SAMPLE_KIND_MAX || !kinds[sa->kind] || !sa->weight)
			continue;
		if (sa->thread >= nr_threads || sa->stack >= nr_stacks || i >= UINT32_MAX)
			goto out;
		g = tgroup[sa->thread];
		/* an on-CPU sample stands for the period that ends at its time */
		at = sa->time;
		if (sa->kind == SAMPLE_ONCPU)
			at = sa->time > sa->weight ? sa->time - sa->weight : 0;
		if (!groups[g].last || sa->time >= groups[g].last) {
			groups[g].last = sa->time;
			groups[g].label = profile__get_thread(p, sa->thread)->comm;
		}
		e[nr++] = (struct entry){ .at = at,
					  .key = g * VIEW_MAX + view_of(opts, sa->kind),
					  .ref = (uint32_t)i };
	}
	qsort(e, nr, sizeof(*e), entry_cmp);

	/* merged: each sample's canonical stack, a run of one stack summed */
	for (size_t i = 0; i < nr; i++) {
		const struct pf_sample *sa = profile__get_sample(p, e[i].ref);
		int64_t c = canon_stack(&s, sa->stack);

		if (c >= 0 && (e[i].key % VIEW_MAX) == VIEW_WALL && sa->kind == SAMPLE_OFFCPU) {
			if (s.offcpu_frame == NO_ID) {
				int64_t f = new_frame(&s, NO_ID, 0, 0, FRAME_SPECIAL);

				if (f < 0) {
					err = (int)f;
					goto out;
				}
				s.offcpu_frame = (uint32_t)f;
			}
			c = canon_child(&s, (uint32_t)c, s.offcpu_frame);
		}
		if (c < 0) {
			err = (int)c;
			goto out;
		}
		if (nr_merged && e[nr_merged - 1].key == e[i].key &&
		    e[nr_merged - 1].ref == (uint32_t)c) {
			e[nr_merged - 1].at = sat_add(e[nr_merged - 1].at, sa->weight);
			continue;
		}
		e[nr_merged++] =
			(struct entry){ .at = sa->weight, .key = e[i].key, .ref = (uint32_t)c };
	}

	/* frames numbered by how often the samples name them, most first */
	err = -ENOMEM;
	uses = calloc(s.nr_canon, sizeof(*uses));
	order = malloc((s.nr_frames ? s.nr_frames : 1) * sizeof(*order));
	if (!uses || !order)
		goto out;
	for (size_t i = 0; i < nr_merged; i++)
		uses[e[i].ref]++;
	for (size_t c = s.nr_canon; c-- > 1;) {
		uses[s.cn[c].parent] += uses[c];
		s.frames[s.cn[c].frame].uses += uses[c];
	}
	for (size_t i = 0; i < s.nr_frames; i++)
		order[i] = &s.frames[i];
	qsort(order, s.nr_frames, sizeof(*order), by_uses);
	for (size_t i = 0; i < s.nr_frames; i++)
		order[i]->index = (uint32_t)i;

	/* the profile shown first: the thread with the most on-CPU (or wall) weight */
	for (size_t i = 0, j; i < nr_merged; i = j, np++) {
		uint64_t total = 0;
		enum view v = e[i].key % VIEW_MAX;

		for (j = i; j < nr_merged && e[j].key == e[i].key; j++)
			total = sat_add(total, e[j].at);
		if ((v == VIEW_ONCPU || v == VIEW_WALL) && total > best) {
			best = total;
			active = np;
		}
	}

	err = add_str(&s.line, "{\"$schema\":\"" SCHEMA "\",\"exporter\":\"dlflame\",\"name\":");
	if (!err)
		err = profile__str_len(p, m->command)
			      ? sb_add_json(&s.line, profile__str(p, m->command),
					    profile__str_len(p, m->command))
			      : add_str(&s.line, "\"dlflame\"");
	if (!err)
		err = add_str(&s.line, ",\"activeProfileIndex\":");
	if (!err)
		err = add_u64(&s.line, active);
	if (!err)
		err = add_str(&s.line, ",\n\"shared\":{\"frames\":[");
	if (!err)
		err = flush_line(&s);
	for (size_t i = 0; i < s.nr_frames && !err; i++)
		err = put_frame(&s, order[i], i == 0);
	if (!err)
		err = add_str(&s.line, "]},\n\"profiles\":[");
	for (size_t i = 0, j; i < nr_merged && !err; i = j) {
		uint64_t total = 0;

		for (j = i; j < nr_merged && e[j].key == e[i].key; j++)
			total = sat_add(total, e[j].at);
		err = put_profile(&s, e + i, j - i, groups[e[i].key / VIEW_MAX].label,
				  e[i].key % VIEW_MAX, total, i == 0);
	}
	if (!err)
		err = add_str(&s.line, "]}\n");
	if (!err)
		err = flush_line(&s);
	if (!err && (fflush(out) == EOF || ferror(out)))
		err = render_write_error();
out:
	u64map_free(&s.by_name);
	u64map_free(&s.canon);
	free(s.frames);
	free(s.of_frame);
	free(s.cn);
	free(s.of_stack);
	free(s.path);
	sb_free(&s.line);
	free(tgroup);
	free(torder);
	free(groups);
	free(order);
	free(uses);
	free(e);
	return err;
}
