/* SPDX-License-Identifier: MIT */
/*
 * pprof's profile.proto (github.com/google/pprof/proto/profile.proto),
 * encoded by hand and gzip-compressed: the wire format needs only varints
 * and length-delimited fields, and this keeps protobuf out of the build.
 *
 * Field numbers used here:
 *   Profile:   sample_type 1, sample 2, mapping 3, location 4, function 5,
 *              string_table 6, duration_nanos 10, period_type 11,
 *              period 12, comment 13, default_sample_type 14
 *   ValueType: type 1, unit 2
 *   Sample:    location_id 1 (packed), value 2 (packed), label 3
 *   Label:     key 1, str 2, num 3
 *   Mapping:   id 1, filename 5, build_id 6, has_functions 7
 *   Location:  id 1, mapping_id 2, line 4
 *   Line:      function_id 1, line 2
 *   Function:  id 1, name 2, system_name 3, filename 4
 *
 * The profile keeps a frame per source line; pprof keeps a Function per
 * function (name and source file, or module when the file is unknown) and
 * the line in each Line, so `pprof -lines` and `-functions` both work.
 * Mappings are one per (module, build-id) and carry no addresses: dlflame
 * symbolized at record time, which has_functions tells pprof.
 *
 * A stack is stored root first, inlined frames above the frame they were
 * inlined into. pprof wants the leaf first and one Location per physical
 * frame, its Lines innermost first with the caller they were inlined into
 * last: so walking leaf to root, inlined frames gather into the Location of
 * the next frame that is not inlined.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "render/internal.h"

enum { WT_VARINT = 0, WT_BYTES = 2 };

/* Columns of Sample.value, in this order when selected. */
enum col { COL_SAMPLES, COL_CPU, COL_OFFCPU, COL_RUNQUEUE, COL_FAULT, COL_MAX };

struct pentry {
	uint32_t thread;
	uint32_t stack;
	uint64_t v[COL_MAX];
};

struct pprof {
	const struct profile *p;
	struct strbuf strings; /* encoded string_table fields */
	int64_t nr_strings;
	int64_t *str_idx; /* profile string id -> string table index, -1 unset */
	struct strbuf locations;
	struct u64map loc_ids; /* frame id, or hash of an inline chain (probed) -> id */
	uint64_t nr_locations;
	uint32_t *chains; /* the frames of each inline chain's location, back to back */
	size_t nr_chains, cap_chains;
	size_t *chain_at; /* per location id: offset in chains, SIZE_MAX for one frame */
	size_t cap_chain_at;
	uint32_t *fn_of; /* per frame: its Function's id, 0 until written */
	struct u64map fn_ids; /* name << 32 | file (or module) -> Function id */
	uint64_t nr_functions;
	struct strbuf functions;
	struct u64map map_ids; /* module << 32 | build-id -> Mapping id */
	uint64_t nr_mappings;
	struct strbuf mappings;
	struct strbuf mmsg; /* scratch: a Mapping */
	struct strbuf tmp; /* a name made clean */
	struct strbuf msg, sub; /* scratch: a Sample and its parts */
	struct strbuf lmsg, lsub; /* scratch: a Location and its Lines */
	struct strbuf fmsg; /* scratch: a Function */
	uint64_t *locs; /* one sample's location ids */
	size_t locs_cap;
};

static int pb_varint(struct strbuf *b, uint64_t v)
{
	uint8_t buf[10];
	size_t n = 0;

	do {
		buf[n] = v & 0x7f;
		v >>= 7;
		if (v)
			buf[n] |= 0x80;
		n++;
	} while (v);
	return sb_add(b, buf, n);
}

static int pb_key(struct strbuf *b, unsigned field, unsigned wt)
{
	return pb_varint(b, (uint64_t)field << 3 | wt);
}

/* proto3: a zero is the default and is not written */
static int pb_uint(struct strbuf *b, unsigned field, uint64_t v)
{
	int err;

	if (!v)
		return 0;
	err = pb_key(b, field, WT_VARINT);
	return err ? err : pb_varint(b, v);
}

static int pb_bytes(struct strbuf *b, unsigned field, const void *data, size_t len)
{
	int err = pb_key(b, field, WT_BYTES);

	if (!err)
		err = pb_varint(b, len);
	return err ? err : sb_add(b, data, len);
}

/* A new string table entry; the index, or a negative errno. */
static int64_t add_string(struct pprof *pp, const char *s, size_t len)
{
	int err = pb_bytes(&pp->strings, 6, s, len);

	return err ? err : pp->nr_strings++;
}

/* The table index of profile string id, made valid UTF-8 without controls. */
static int64_t str_of(struct pprof *pp, uint32_t id)
{
	int64_t r;

	if (id >= profile__nr_strings(pp->p))
		return -EINVAL;
	if (pp->str_idx[id] >= 0)
		return pp->str_idx[id];
	if (!profile__str_len(pp->p, id)) {
		pp->str_idx[id] = 0;
		return 0;
	}
	pp->tmp.len = 0;
	r = sb_add_xml_clean(&pp->tmp, profile__str(pp->p, id), profile__str_len(pp->p, id));
	if (r >= 0)
		r = add_string(pp, pp->tmp.buf, pp->tmp.len);
	if (r >= 0)
		pp->str_idx[id] = r;
	return r;
}

/* The Function of a frame: frames that differ only by line share it. */
static int64_t add_function(struct pprof *pp, uint32_t frame)
{
	const struct pf_frame *f = profile__get_frame(pp->p, frame);
	uint32_t where = f->file ? f->file : f->module;
	uint64_t key = (uint64_t)f->name << 32 | where, id;
	int64_t name, file;
	int err;

	if (pp->fn_of[frame])
		return pp->fn_of[frame];
	if (u64map_get(&pp->fn_ids, key, &id)) {
		pp->fn_of[frame] = (uint32_t)id;
		return (int64_t)id;
	}
	name = str_of(pp, f->name);
	if (name < 0)
		return name;
	file = str_of(pp, where);
	if (file < 0)
		return file;
	if (pp->nr_functions >= UINT32_MAX - 1)
		return -E2BIG;
	id = ++pp->nr_functions;
	pp->fmsg.len = 0;
	err = pb_uint(&pp->fmsg, 1, id);
	if (!err)
		err = pb_uint(&pp->fmsg, 2, (uint64_t)name);
	if (!err)
		err = pb_uint(&pp->fmsg, 3, (uint64_t)name);
	if (!err)
		err = pb_uint(&pp->fmsg, 4, (uint64_t)file);
	if (!err)
		err = pb_bytes(&pp->functions, 5, pp->fmsg.buf, pp->fmsg.len);
	if (!err)
		err = u64map_put(&pp->fn_ids, key, id);
	if (err)
		return err;
	pp->fn_of[frame] = (uint32_t)id;
	return (int64_t)id;
}

/* The Mapping of a frame's module and build-id; 0 for none. */
static int64_t add_mapping(struct pprof *pp, uint32_t frame)
{
	const struct pf_frame *f = profile__get_frame(pp->p, frame);
	uint64_t key = (uint64_t)f->module << 32 | f->build_id, id;
	int64_t file, bid;
	int err;

	if (!f->module)
		return 0;
	if (u64map_get(&pp->map_ids, key, &id))
		return (int64_t)id;
	file = str_of(pp, f->module);
	if (file < 0)
		return file;
	bid = str_of(pp, f->build_id);
	if (bid < 0)
		return bid;
	id = ++pp->nr_mappings;
	pp->mmsg.len = 0;
	err = pb_uint(&pp->mmsg, 1, id);
	if (!err)
		err = pb_uint(&pp->mmsg, 5, (uint64_t)file);
	if (!err)
		err = pb_uint(&pp->mmsg, 6, (uint64_t)bid);
	if (!err)
		err = pb_uint(&pp->mmsg, 7, 1);
	if (!err)
		err = pb_bytes(&pp->mappings, 3, pp->mmsg.buf, pp->mmsg.len);
	if (!err)
		err = u64map_put(&pp->map_ids, key, id);
	return err ? err : (int64_t)id;
}

static bool chain_eq(const struct pprof *pp, uint64_t id, const uint32_t *frames, size_t n)
{
	size_t at = pp->chain_at[id];

	return at != SIZE_MAX && pp->chains[at] == n &&
	       !memcmp(pp->chains + at + 1, frames, n * sizeof(*frames));
}

/*
 * The Location of frames[0..n), leaf first: the inlined frames, then the
 * frame they are inlined into. Equal chains share one Location: a single
 * frame is keyed by its id, a chain by its hash, probed on collisions.
 */
static int64_t location(struct pprof *pp, const uint32_t *frames, size_t n)
{
	uint64_t key = frames[0], id, h = hash_bytes(frames, n * sizeof(*frames), 7);
	int err = 0;

	for (uint64_t i = 0; n > 1; i++) {
		/* above every frame id, and never the map's reserved UINT64_MAX */
		key = ((h + i) & ~1ULL) | 1ULL << 63;
		if (!u64map_get(&pp->loc_ids, key, &id) || chain_eq(pp, id, frames, n))
			break;
	}
	if (u64map_get(&pp->loc_ids, key, &id))
		return (int64_t)id;
	id = ++pp->nr_locations;
	err = grow_array((void **)&pp->chain_at, &pp->cap_chain_at, id + 1, sizeof(*pp->chain_at));
	if (err)
		return err;
	pp->chain_at[id] = SIZE_MAX;
	if (n > 1) {
		err = grow_array((void **)&pp->chains, &pp->cap_chains, pp->nr_chains + n + 1,
				 sizeof(*pp->chains));
		if (err)
			return err;
		pp->chain_at[id] = pp->nr_chains;
		pp->chains[pp->nr_chains++] = (uint32_t)n;
		memcpy(pp->chains + pp->nr_chains, frames, n * sizeof(*frames));
		pp->nr_chains += n;
	}
	pp->lmsg.len = 0;
	err = pb_uint(&pp->lmsg, 1, id);
	if (!err) {
		/* the physical frame, last, is the one whose module was mapped */
		int64_t m = add_mapping(pp, frames[n - 1]);

		err = m < 0 ? (int)m : pb_uint(&pp->lmsg, 2, (uint64_t)m);
	}
	for (size_t i = 0; !err && i < n; i++) {
		int64_t fn = add_function(pp, frames[i]);

		pp->lsub.len = 0;
		err = fn < 0 ? (int)fn : pb_uint(&pp->lsub, 1, (uint64_t)fn);
		if (!err)
			err = pb_uint(&pp->lsub, 2, profile__get_frame(pp->p, frames[i])->line);
		if (!err)
			err = pb_bytes(&pp->lmsg, 4, pp->lsub.buf, pp->lsub.len);
	}
	if (!err)
		err = pb_bytes(&pp->locations, 4, pp->lmsg.buf, pp->lmsg.len);
	if (!err)
		err = u64map_put(&pp->loc_ids, key, id);
	return err ? err : (int64_t)id;
}

/* Location ids of stack, leaf first, into pp->locs. */
static int64_t stack_locations(struct pprof *pp, uint32_t stack)
{
	size_t nr_frames = profile__nr_frames(pp->p), n = 0;
	uint32_t group[64];
	size_t ng = 0;
	int err;

	while (stack) {
		const struct pf_stack *st = profile__get_stack(pp->p, stack);
		const struct pf_frame *f;
		bool inlined;

		if (st->parent >= stack || st->frame >= nr_frames)
			return -EINVAL;
		f = profile__get_frame(pp->p, st->frame);
		inlined = f->kind == FRAME_INLINED;
		group[ng++] = st->frame;
		stack = st->parent;
		/* a long inline chain is cut into several locations, not overflowed */
		if (!inlined || !stack || ng == sizeof(group) / sizeof(group[0])) {
			int64_t id = location(pp, group, ng);

			if (id < 0)
				return id;
			err = grow_array((void **)&pp->locs, &pp->locs_cap, n + 1,
					 sizeof(*pp->locs));
			if (err)
				return err;
			pp->locs[n++] = (uint64_t)id;
			ng = 0;
		}
	}
	return (int64_t)n;
}

static int add_label(struct strbuf *sample, struct strbuf *tmp, int64_t key, int64_t str,
		     uint64_t num)
{
	int err;

	tmp->len = 0;
	err = pb_uint(tmp, 1, (uint64_t)key);
	if (!err)
		err = pb_uint(tmp, 2, (uint64_t)str);
	if (!err)
		err = pb_uint(tmp, 3, num);
	return err ? err : pb_bytes(sample, 3, tmp->buf, tmp->len);
}

/* A numeric label with a unit (num_unit, field 4), which keeps a value of 0. */
static int add_num_label(struct strbuf *sample, struct strbuf *tmp, int64_t key, uint64_t num,
			 int64_t unit)
{
	int err;

	tmp->len = 0;
	err = pb_uint(tmp, 1, (uint64_t)key);
	if (!err)
		err = pb_uint(tmp, 3, num);
	if (!err)
		err = pb_uint(tmp, 4, (uint64_t)unit);
	return err ? err : pb_bytes(sample, 3, tmp->buf, tmp->len);
}

/*
 * The gzip stream, written as the profile is made: the samples (whose
 * location lists add up to depth x samples) go out one by one, and the
 * tables they point into (locations, functions, strings) at the end, which
 * protobuf allows (a message's fields may come in any order).
 */
struct gzsink {
	z_stream zs;
	FILE *out;
	unsigned char *buf;
	bool open;
};

#define GZ_BUF 65536

static int gz_open(struct gzsink *g, FILE *out)
{
	memset(g, 0, sizeof(*g));
	g->out = out;
	g->buf = malloc(GZ_BUF);
	if (!g->buf || deflateInit2(&g->zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	g->open = true;
	return 0;
}

static int gz_write(struct gzsink *g, const void *data, size_t len, bool finish)
{
	const unsigned char *d = data;

	do {
		uInt chunk = len > (1u << 30) ? 1u << 30 : (uInt)len;
		bool last = finish && chunk == len;
		int zr, err;

		g->zs.next_in = (unsigned char *)d;
		g->zs.avail_in = chunk;
		d += chunk;
		len -= chunk;
		do {
			g->zs.next_out = g->buf;
			g->zs.avail_out = GZ_BUF;
			zr = deflate(&g->zs, last ? Z_FINISH : Z_NO_FLUSH);
			if (zr == Z_STREAM_ERROR)
				return -EIO;
			err = put_buf(g->out, g->buf, GZ_BUF - g->zs.avail_out);
			if (err)
				return err;
		} while (g->zs.avail_out == 0);
	} while (len);
	return 0;
}

static void gz_close(struct gzsink *g)
{
	if (g->open)
		deflateEnd(&g->zs);
	free(g->buf);
	g->open = false;
	g->buf = NULL;
}

static int pentry_cmp(const void *a, const void *b)
{
	const struct pentry *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* Samples summed per (thread, stack). */
static int collect(const struct profile *p, const bool kinds[SAMPLE_KIND_MAX], struct pentry **out,
		   size_t *nr)
{
	size_t n = profile__nr_samples(p), len = 0, cap = 0;
	struct pentry *v = NULL;
	struct u64map idx;
	int err = 0;

	u64map_init(&idx);
	for (size_t i = 0; i < n; i++) {
		const struct pf_sample *s = profile__get_sample(p, i);
		uint64_t key, at;

		if (s->kind >= SAMPLE_KIND_MAX || !kinds[s->kind])
			continue;
		if (s->stack >= profile__nr_stacks(p) || s->thread >= profile__nr_threads(p)) {
			err = -EINVAL;
			break;
		}
		key = (uint64_t)s->thread << 32 | s->stack;
		if (!u64map_get(&idx, key, &at)) {
			err = grow_array((void **)&v, &cap, len + 1, sizeof(*v));
			if (!err)
				err = u64map_put(&idx, key, len);
			if (err)
				break;
			at = len++;
			v[at] = (struct pentry){ .thread = s->thread, .stack = s->stack };
		}
		switch (s->kind) {
		case SAMPLE_ONCPU:
			v[at].v[COL_SAMPLES]++;
			v[at].v[COL_CPU] = sat_add(v[at].v[COL_CPU], s->weight);
			break;
		case SAMPLE_OFFCPU:
			v[at].v[COL_OFFCPU] = sat_add(v[at].v[COL_OFFCPU], s->weight);
			break;
		case SAMPLE_RUNQUEUE:
			v[at].v[COL_RUNQUEUE] = sat_add(v[at].v[COL_RUNQUEUE], s->weight);
			break;
		case SAMPLE_FAULT:
			v[at].v[COL_FAULT] = sat_add(v[at].v[COL_FAULT], s->weight);
			break;
		default:
			break; /* calls and resident sets have tables of their own */
		}
	}
	u64map_free(&idx);
	if (err) {
		free(v);
		return err;
	}
	/* the order of the file does not depend on the map's */
	if (len)
		qsort(v, len, sizeof(*v), pentry_cmp);
	*out = v;
	*nr = len;
	return 0;
}

/*
 * The innermost PyTorch operator on a stack, as a string of the profile
 * (aten::NAME[.OVERLOAD]); 0 when none; a negative errno. cache: frame id
 * -> its operator's string + 1, or 0 for a frame that is no operator's.
 */
static int64_t op_label(struct pprof *pp, const struct render_op_names *ops, struct u64map *cache,
			uint32_t stack)
{
	size_t nstr = profile__nr_strings(pp->p);

	while (stack && stack < profile__nr_stacks(pp->p)) {
		const struct pf_stack *st = profile__get_stack(pp->p, stack);
		const struct pf_frame *fr = profile__get_frame(pp->p, st->frame);
		struct render_op_ref ref;
		char name[RENDER_OP_MAX + 8];
		uint64_t v;
		int64_t id;

		if (!u64map_get(cache, st->frame, &v)) {
			v = 0;
			if ((fr->kind == FRAME_USER || fr->kind == FRAME_INLINED) &&
			    fr->name < nstr &&
			    render_op_parse(profile__str(pp->p, fr->name),
					    profile__str_len(pp->p, fr->name), &ref)) {
				id = add_string(
					pp, name,
					render_op_name(ops, ref.s, ref.len, name, sizeof(name)));
				if (id < 0)
					return id;
				v = (uint64_t)id + 1;
			}
			if (u64map_put(cache, st->frame, v))
				return -ENOMEM;
		}
		if (v)
			return (int64_t)v - 1;
		if (st->parent >= stack)
			break;
		stack = st->parent;
	}
	return 0;
}

int render_pprof(const struct profile *p, const struct render_select *sel, FILE *out)
{
	return render_pprof_ops(p, sel, NULL, out);
}

int render_pprof_ops(const struct profile *p, const struct render_select *sel,
		     const struct render_op_names *ops, FILE *out)
{
	struct u64map op_cache;
	static const char *const col_type[COL_MAX] = { "samples", "cpu", "offcpu", "runqueue",
						       "faults" };
	static const char *const col_unit[COL_MAX] = { "count", "nanoseconds", "nanoseconds",
						       "nanoseconds", "bytes" };
	const struct pf_meta *m = profile__cmeta(p);
	struct pprof pp = { .p = p };
	struct strbuf prof = { 0 }, samples = { 0 };
	struct gzsink gz = { 0 };
	bool kinds[SAMPLE_KIND_MAX], cols[COL_MAX];
	int64_t s_comm, s_pid, s_tid, s_thread, s_rank, s_op, s_host, s_container, s_count, s_ns,
		s_cpu, type[COL_MAX] = { 0 }, unit[COL_MAX] = { 0 };
	int64_t dflt = 0, lost_note = 0;
	struct pentry *v = NULL;
	size_t nr = 0, nr_strings = profile__nr_strings(p);
	int err = -ENOMEM;

	select_kinds(sel, kinds);
	cols[COL_SAMPLES] = cols[COL_CPU] = kinds[SAMPLE_ONCPU];
	cols[COL_OFFCPU] = kinds[SAMPLE_OFFCPU];
	cols[COL_RUNQUEUE] = kinds[SAMPLE_RUNQUEUE];
	cols[COL_FAULT] = kinds[SAMPLE_FAULT];
	u64map_init(&op_cache);
	u64map_init(&pp.loc_ids);
	u64map_init(&pp.fn_ids);
	u64map_init(&pp.map_ids);
	pp.str_idx = malloc((nr_strings ? nr_strings : 1) * sizeof(*pp.str_idx));
	pp.fn_of = calloc(profile__nr_frames(p) + 1, sizeof(*pp.fn_of));
	if (!pp.str_idx || !pp.fn_of)
		goto out;
	memset(pp.str_idx, 0xff, nr_strings * sizeof(*pp.str_idx));

	/* string 0 is "" by the format's rule */
	err = add_string(&pp, "", 0) < 0 ? -ENOMEM : 0;
	for (int c = 0; !err && c < COL_MAX; c++) {
		if (!cols[c])
			continue;
		type[c] = add_string(&pp, col_type[c], strlen(col_type[c]));
		unit[c] = add_string(&pp, col_unit[c], strlen(col_unit[c]));
		if (type[c] < 0 || unit[c] < 0)
			err = -ENOMEM;
		else if (!dflt && c != COL_SAMPLES)
			dflt = type[c];
	}
	if (err)
		goto out;
	s_comm = add_string(&pp, "comm", 4);
	s_pid = add_string(&pp, "pid", 3);
	s_tid = add_string(&pp, "tid", 3);
	s_thread = add_string(&pp, "thread", 6);
	s_rank = add_string(&pp, "rank", 4);
	s_op = add_string(&pp, "op", 2);
	s_host = add_string(&pp, "host", 4);
	s_container = add_string(&pp, "container", 9);
	s_count = add_string(&pp, "count", 5);
	s_cpu = cols[COL_CPU] ? type[COL_CPU] : add_string(&pp, "cpu", 3);
	s_ns = cols[COL_CPU] ? unit[COL_CPU] : add_string(&pp, "nanoseconds", 11);
	if (s_comm < 0 || s_pid < 0 || s_tid < 0 || s_thread < 0 || s_rank < 0 || s_op < 0 ||
	    s_host < 0 || s_container < 0 || s_count < 0 || s_cpu < 0 || s_ns < 0)
		goto out;

	for (int c = 0; c < COL_MAX; c++) {
		if (!cols[c])
			continue;
		pp.msg.len = 0;
		err = pb_uint(&pp.msg, 1, (uint64_t)type[c]);
		if (!err)
			err = pb_uint(&pp.msg, 2, (uint64_t)unit[c]);
		if (!err)
			err = pb_bytes(&prof, 1, pp.msg.buf, pp.msg.len);
		if (err)
			goto out;
	}

	err = gz_open(&gz, out);
	if (!err)
		err = gz_write(&gz, prof.buf, prof.len, false);
	prof.len = 0;
	if (!err)
		err = collect(p, kinds, &v, &nr);
	if (err)
		goto out;
	/*
	 * pprof calls the first mapping the main binary: make it the module of
	 * the outermost user frame of the first stack, the program itself.
	 */
	for (size_t i = 0; i < nr; i++) {
		uint32_t s = v[i].stack, root = 0;

		while (s && profile__get_stack(p, s)->parent < s) {
			root = profile__get_stack(p, s)->frame;
			s = profile__get_stack(p, s)->parent;
		}
		if (v[i].stack && profile__get_frame(p, root)->kind == FRAME_USER) {
			int64_t map = add_mapping(&pp, root);

			err = map < 0 ? (int)map : 0;
			if (err)
				goto out;
			if (map)
				break;
		}
	}
	for (size_t i = 0; i < nr; i++) {
		const struct pf_thread *th = profile__get_thread(p, v[i].thread);
		struct strbuf *smp = &samples;
		const struct pf_process *pr = profile__thread_process(p, th);
		uint32_t host_id = profile__thread_host(p, th);
		int64_t n = stack_locations(&pp, v[i].stack), comm, host = 0, ctr = 0;

		if (n < 0) {
			err = (int)n;
			goto out;
		}
		comm = str_of(&pp, th->comm);
		if (comm >= 0 && host_id)
			host = str_of(&pp, host_id);
		/* a process's container: its id when its cgroup names one, else its cgroup */
		if (comm >= 0 && pr && (pr->container || pr->cgroup))
			ctr = str_of(&pp, pr->container ? pr->container : pr->cgroup);
		if (comm < 0 || host < 0 || ctr < 0) {
			err = comm < 0 ? (int)comm : host < 0 ? (int)host : (int)ctr;
			goto out;
		}
		/* the Sample body goes to pp.msg, then into samples as field 2 */
		pp.msg.len = 0;
		pp.sub.len = 0;
		for (int64_t k = 0; !err && k < n; k++)
			err = pb_varint(&pp.sub, pp.locs[k]);
		if (!err && pp.sub.len)
			err = pb_bytes(&pp.msg, 1, pp.sub.buf, pp.sub.len);
		pp.sub.len = 0;
		for (int c = 0; !err && c < COL_MAX; c++) {
			if (cols[c])
				err = pb_varint(&pp.sub, v[i].v[c]);
		}
		if (!err)
			err = pb_bytes(&pp.msg, 2, pp.sub.buf, pp.sub.len);
		if (!err)
			err = add_label(&pp.msg, &pp.sub, s_comm, comm, 0);
		if (!err)
			err = add_label(&pp.msg, &pp.sub, s_pid, 0, th->pid);
		if (!err)
			err = add_label(&pp.msg, &pp.sub, s_tid, 0, th->tid);
		/* the labels Pyroscope, Parca and pprof -tagfocus slice a job by */
		if (!err)
			err = add_label(&pp.msg, &pp.sub, s_thread, 0, th->tid);
		if (!err && host)
			err = add_label(&pp.msg, &pp.sub, s_host, host, 0);
		if (!err && ctr)
			err = add_label(&pp.msg, &pp.sub, s_container, ctr, 0);
		/* with a unit: pprof drops a numeric label whose value and unit are both 0 */
		if (!err && pr && pr->rank != PF_NO_RANK)
			err = add_num_label(&pp.msg, &pp.sub, s_rank, pr->rank, s_count);
		/* the framework operator the sample is in (report --ops's rows) */
		if (!err) {
			int64_t op = op_label(&pp, ops, &op_cache, v[i].stack);

			if (op < 0)
				err = (int)op;
			else if (op)
				err = add_label(&pp.msg, &pp.sub, s_op, op, 0);
		}
		if (!err)
			err = pb_bytes(smp, 2, pp.msg.buf, pp.msg.len);
		if (!err)
			err = gz_write(&gz, smp->buf, smp->len, false);
		smp->len = 0;
		if (err)
			goto out;
	}

	if (m->lost) {
		/* every report says so: here as a comment, which pprof prints */
		char note[96];
		int n = snprintf(
			note, sizeof(note),
			"dlflame: %llu samples lost while recording (ring buffer overflow)",
			(unsigned long long)m->lost);

		lost_note = add_string(&pp, note, (size_t)n);
		if (lost_note < 0) {
			err = (int)lost_note;
			goto out;
		}
	}
	err = sb_add(&prof, pp.mappings.buf, pp.mappings.len);
	if (!err)
		err = sb_add(&prof, pp.locations.buf, pp.locations.len);
	if (!err)
		err = sb_add(&prof, pp.functions.buf, pp.functions.len);
	if (!err)
		err = sb_add(&prof, pp.strings.buf, pp.strings.len);
	if (!err && m->end_time > m->start_time)
		err = pb_uint(&prof, 10, m->end_time - m->start_time);
	pp.msg.len = 0;
	if (!err)
		err = pb_uint(&pp.msg, 1, (uint64_t)s_cpu);
	if (!err)
		err = pb_uint(&pp.msg, 2, (uint64_t)s_ns);
	if (!err)
		err = pb_bytes(&prof, 11, pp.msg.buf, pp.msg.len);
	if (!err && m->freq)
		err = pb_uint(&prof, 12, 1000000000ULL / m->freq);
	if (!err && dflt)
		err = pb_uint(&prof, 14, (uint64_t)dflt);
	if (!err && lost_note)
		err = pb_uint(&prof, 13, (uint64_t)lost_note);
	if (!err)
		err = gz_write(&gz, prof.buf, prof.len, true);
	if (!err && (fflush(out) == EOF || ferror(out)))
		err = render_write_error();
out:
	u64map_free(&op_cache);
	gz_close(&gz);
	free(v);
	free(pp.str_idx);
	free(pp.fn_of);
	u64map_free(&pp.fn_ids);
	u64map_free(&pp.map_ids);
	sb_free(&pp.mappings);
	sb_free(&pp.mmsg);
	free(pp.locs);
	free(pp.chains);
	free(pp.chain_at);
	u64map_free(&pp.loc_ids);
	sb_free(&pp.strings);
	sb_free(&pp.locations);
	sb_free(&pp.functions);
	sb_free(&pp.tmp);
	sb_free(&pp.msg);
	sb_free(&pp.sub);
	sb_free(&pp.lmsg);
	sb_free(&pp.lsub);
	sb_free(&pp.fmsg);
	sb_free(&prof);
	sb_free(&samples);
	return err;
}
