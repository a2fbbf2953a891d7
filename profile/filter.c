/* SPDX-License-Identifier: MIT */
/*
 * The filters and transforms every report takes (filter.h), applied once
 * by copying the chosen samples into a new profile. Names, frames and
 * stacks are copied lazily, as the samples reach them: a filtered view of
 * a long recording copies only the part it shows.
 */
#include "filter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define UNSET UINT32_MAX

struct copier {
	const struct profile *src;
	struct profile *dst;
	const struct profile_filter *f;
	bool kinds[SAMPLE_KIND_MAX];
	uint32_t *strings; /* src id -> dst id, UNSET until copied */
	uint32_t *frames;
	uint32_t *threads;
	uint8_t *keep_thread; /* 0: unknown, 1: kept, 2: filtered out */
	struct u64map stacks; /* src stack << 1 | runqueue -> dst stack */
	uint32_t *path;
	size_t path_cap;
	int64_t rq_frame; /* dst id of RUNQUEUE_FRAME, -1 until needed */
	uint8_t *hide_frame; /* f->python: src frame id -> 1 when the view leaves it out */
	uint64_t
		*cut; /* f->from_call: per src thread, the time its process starts, or UINT64_MAX */
	bool multi_host; /* src's threads ran on more than one host: labels name them */
};

static void copier_free(struct copier *c)
{
	free(c->cut);
	free(c->strings);
	free(c->frames);
	free(c->threads);
	free(c->keep_thread);
	free(c->path);
	free(c->hide_frame);
	u64map_free(&c->stacks);
}

/* CPython's API names: the module that holds them is the interpreter. */
static bool cpython_name(const char *name)
{
	return !strncmp(name, "_Py", 3) ||
	       (!strncmp(name, "Py", 2) && name[2] >= 'A' && name[2] <= 'Z');
}

/*
 * The python view's frames to leave out: native frames (and their inlined
 * levels) of interpreter modules, when the profile has Python frames.
 */
static int find_interpreter_frames(struct copier *c)
{
	size_t n = profile__nr_frames(c->src), nstr = profile__nr_strings(c->src);
	uint8_t *interp = calloc(nstr ? nstr : 1, 1);
	bool python = false;

	c->hide_frame = calloc(n ? n : 1, 1);
	if (!interp || !c->hide_frame) {
		free(interp);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct pf_frame *fr = profile__get_frame(c->src, (uint32_t)i);

		python |= fr->kind == FRAME_PYTHON;
		if (fr->kind == FRAME_USER && fr->module && fr->module < nstr && fr->name < nstr &&
		    cpython_name(profile__str(c->src, fr->name)))
			interp[fr->module] = 1;
	}
	for (size_t i = 0; python && i < n; i++) {
		const struct pf_frame *fr = profile__get_frame(c->src, (uint32_t)i);

		c->hide_frame[i] = (fr->kind == FRAME_USER || fr->kind == FRAME_INLINED) &&
				   fr->module < nstr && interp[fr->module];
	}
	free(interp);
	return 0;
}

static uint32_t *unset_array(size_t n)
{
	uint32_t *a = malloc((n ? n : 1) * sizeof(*a));

	if (a)
		memset(a, 0xff, n * sizeof(*a));
	return a;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* A thread's process, on its host. */
static uint64_t proc_of(const struct profile *p, const struct pf_thread *t)
{
	return (uint64_t)profile__thread_host(p, t) << 32 | t->pid;
}

/*
 * Whether a probed function's name is the one --from-call gives: the same,
 * or, for PyTorch's operators (record --probe-ops), "aten::NAME[.OVERLOAD]"
 * for the entry at::_ops::NAME[_OVERLOAD]::call(...).
 */
/* want as record --probe takes it, FILE:FUNCTION: the FUNCTION part (a file has '/' or ".so") */
static const char *probe_function(const char *want)
{
	for (const char *c = want; *c; c++) {
		if (c[0] == ':' && c[1] == ':') {
			c++;
			continue;
		}
		if (*c == ':') {
			size_t len = (size_t)(c - want);

			if (memchr(want, '/', len) || memmem(want, len, ".so", 3))
				return c + 1;
			return want;
		}
	}
	return want;
}

static bool call_named(const char *name, const char *want)
{
	static const char ops[] = "at::_ops::";
	size_t i = sizeof(ops) - 1, k = 6;

	if (!strcmp(name, want) || !strcmp(name, probe_function(want)))
		return true;
	if (strncmp(want, "aten::", 6) || strncmp(name, ops, i))
		return false;
	for (; want[k]; k++, i++)
		if (name[i] != (want[k] == '.' ? '_' : want[k]))
			return false;
	return !strncmp(name + i, "::call", 6) && (!name[i + 6] || name[i + 6] == '(');
}
/*
 * --from-call: per thread, the start of its process's n-th call of the
 * function (calls are SAMPLE_CALL samples whose leaf is the function).
 */
static int find_cuts(struct copier *c)
{
	const struct profile *p = c->src;
	size_t ns = profile__nr_samples(p), nt = profile__nr_threads(p), n = 0;
	uint64_t *times = NULL, pid_cut;
	struct u64map cuts; /* pid -> cut */
	struct u64map seen; /* pid -> number of calls */
	int err = -ENOMEM;

	u64map_init(&cuts);
	u64map_init(&seen);
	c->cut = malloc((nt ? nt : 1) * sizeof(*c->cut));
	times = malloc((ns ? ns : 1) * sizeof(*times));
	if (!c->cut || !times)
		goto out;
	/* the calls' processes, then each one's call times */
	for (size_t i = 0; i < ns; i++) {
		const struct pf_sample *s = profile__get_sample(p, i);
		const struct pf_stack *st;
		const struct pf_frame *fr;
		uint64_t cnt = 0, pid;

		if (s->kind != SAMPLE_CALL || !s->stack || s->stack >= profile__nr_stacks(p) ||
		    s->thread >= nt)
			continue;
		st = profile__get_stack(p, s->stack);
		fr = profile__get_frame(p, st->frame);
		if (!call_named(profile__str(p, fr->name), c->f->from_call))
			continue;
		pid = proc_of(p, profile__get_thread(p, s->thread));
		u64map_get(&seen, pid, &cnt);
		if (u64map_put(&seen, pid, cnt + 1))
			goto out;
		n++;
	}
	err = n ? 0 : -ENOENT;
	if (err)
		goto out;
	for (size_t k = 0; k < seen.cap && !err; k++) {
		uint64_t pid = seen.keys[k], m = 0;

		if (pid == UINT64_MAX)
			continue;
		for (size_t i = 0; i < ns; i++) {
			const struct pf_sample *s = profile__get_sample(p, i);
			const struct pf_frame *fr;

			if (s->kind != SAMPLE_CALL || !s->stack ||
			    s->stack >= profile__nr_stacks(p) || s->thread >= nt ||
			    proc_of(p, profile__get_thread(p, s->thread)) != pid)
				continue;
			fr = profile__get_frame(p, profile__get_stack(p, s->stack)->frame);
			if (call_named(profile__str(p, fr->name), c->f->from_call))
				times[m++] = s->time;
		}
		qsort(times, m, sizeof(*times), cmp_u64);
		pid_cut = m >= c->f->from_call_n ? times[c->f->from_call_n - 1] : UINT64_MAX;
		if (u64map_put(&cuts, pid, pid_cut))
			err = -ENOMEM;
	}
	for (size_t t = 0; t < nt && !err; t++)
		if (!u64map_get(&cuts, proc_of(p, profile__get_thread(p, t)), &c->cut[t]))
			c->cut[t] = UINT64_MAX;
out:
	u64map_free(&cuts);
	u64map_free(&seen);
	free(times);
	return err;
}

static int copier_init(struct copier *c, struct profile *dst, const struct profile *src,
		       const bool kinds[SAMPLE_KIND_MAX], const struct profile_filter *f)
{
	memset(c, 0, sizeof(*c));
	c->src = src;
	c->dst = dst;
	c->f = f;
	c->rq_frame = -1;
	memcpy(c->kinds, kinds, sizeof(c->kinds));
	u64map_init(&c->stacks);
	c->strings = unset_array(profile__nr_strings(src));
	c->frames = unset_array(profile__nr_frames(src));
	c->threads = unset_array(profile__nr_threads(src));
	c->keep_thread = calloc(profile__nr_threads(src) + 1, 1);
	if (!c->strings || !c->frames || !c->threads || !c->keep_thread ||
	    (f && f->python && find_interpreter_frames(c))) {
		copier_free(c);
		return -ENOMEM;
	}
	if (f && f->from_call) {
		int err = f->from_call_n ? find_cuts(c) : -EINVAL;

		if (err) {
			copier_free(c);
			return err;
		}
	}
	for (size_t i = 0, n = profile__nr_threads(src), first = UNSET; i < n; i++) {
		uint32_t h = profile__thread_host(src, profile__get_thread(src, (uint32_t)i));

		if (first == UNSET)
			first = h;
		c->multi_host |= h != first;
	}
	return 0;
}

static int64_t copy_string(struct copier *c, uint32_t id)
{
	int64_t r;

	if (id >= profile__nr_strings(c->src))
		return -EINVAL;
	if (c->strings[id] != UNSET)
		return c->strings[id];
	r = profile__string(c->dst, profile__str(c->src, id), profile__str_len(c->src, id));
	if (r >= 0)
		c->strings[id] = (uint32_t)r;
	return r;
}

static int64_t copy_frame(struct copier *c, uint32_t id)
{
	const struct pf_frame *fr;
	struct pf_frame f;
	int64_t name, module, file, build_id, r;

	if (c->frames[id] != UNSET)
		return c->frames[id];
	fr = profile__get_frame(c->src, id);
	if (fr->kind >= FRAME_KIND_MAX)
		return -EINVAL;
	name = copy_string(c, fr->name);
	module = name < 0 ? name : copy_string(c, fr->module);
	file = module < 0 ? module : copy_string(c, fr->file);
	build_id = file < 0 ? file : copy_string(c, fr->build_id);
	if (build_id < 0)
		return build_id;
	f = (struct pf_frame){ .name = (uint32_t)name,
			       .module = (uint32_t)module,
			       .kind = fr->kind,
			       .file = (uint32_t)file,
			       .line = fr->line,
			       .build_id = (uint32_t)build_id };
	r = profile__frame_full(c->dst, &f);
	if (r >= 0)
		c->frames[id] = (uint32_t)r;
	return r;
}

static bool has_id(const uint32_t *ids, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++) {
		if (ids[i] == id)
			return true;
	}
	return false;
}

static bool thread_wanted(const struct copier *c, const struct pf_thread *t)
{
	const struct profile_filter *f = c->f;
	const char *comm = profile__str(c->src, t->comm);
	size_t len = profile__str_len(c->src, t->comm);
	bool ok;

	if (!f)
		return true;
	if (f->nr_pids && !has_id(f->pids, f->nr_pids, t->pid))
		return false;
	if (f->nr_tids && !has_id(f->tids, f->nr_tids, t->tid))
		return false;
	ok = !f->nr_comms;
	for (size_t i = 0; !ok && i < f->nr_comms; i++)
		ok = strlen(f->comms[i]) == len && !memcmp(f->comms[i], comm, len);
	if (ok && f->nr_ranks) {
		const struct pf_process *pr = profile__thread_process(c->src, t);

		ok = pr && pr->rank != PF_NO_RANK && has_id(f->ranks, f->nr_ranks, pr->rank);
	}
	return ok;
}

/*
 * The name a thread is drawn under: its comm, or with --per-thread
 * "comm-PID/TID", with --per-rank "rank N" (or "comm-PID" without a rank),
 * both: "rank N comm-PID/TID"; a profile of several hosts prefixes the
 * host to pid labels ("host:comm-PID/TID"); a process in a container has
 * it after its pid label ("comm-PID/TID [container]": its container id's
 * first 12 digits, a pod's uid, or its cgroup path).
 */
static int64_t thread_label(struct copier *c, const struct pf_thread *t)
{
	const struct profile_filter *f = c->f;
	const struct pf_process *pr = NULL;
	uint32_t host = profile__thread_host(c->src, t);
	const char *comm = profile__str(c->src, t->comm);
	size_t len;
	char *label;
	int n = 0, m;
	int64_t r;

	if (!f || (!f->per_thread && !f->per_rank && !f->per_process))
		return copy_string(c, t->comm);
	if (host >= profile__nr_strings(c->src))
		return -EINVAL;
	const struct pf_process *proc = profile__thread_process(c->src, t);
	const char *ctr = profile__container_label(c->src, proc);
	size_t ctr_len = ctr ? strlen(ctr) : 0;

	if (f->per_rank)
		pr = proc;
	if (pr && pr->rank == PF_NO_RANK)
		pr = NULL;
	/* a container id is known by its first 12 digits, as docker ps shows it */
	if (ctr && proc->container && ctr_len == 64)
		ctr_len = 12;
	len = profile__str_len(c->src, t->comm) + profile__str_len(c->src, host) + ctr_len + 64;
	label = malloc(len);
	if (!label)
		return -ENOMEM;
	if (pr)
		n = snprintf(label, len, "rank %u", pr->rank);
	if (!pr || f->per_thread || f->per_process) {
		m = snprintf(label + n, len - (size_t)n, "%s%s%s%s-%u", n ? " " : "",
			     c->multi_host ? profile__str(c->src, host) : "",
			     c->multi_host ? ":" : "", comm, t->pid);
		n += m;
		if (f->per_thread)
			n += snprintf(label + n, len - (size_t)n, "/%u", t->tid);
		if (ctr)
			n += snprintf(label + n, len - (size_t)n, " [%.*s]", (int)ctr_len, ctr);
	}
	r = profile__string(c->dst, label, (size_t)n);
	free(label);
	return r;
}

/* A host (src string id) in dst: with f->name_hosts, the source's own named too. */
static int64_t copy_host(struct copier *c, uint32_t host)
{
	if (!host && c->f && c->f->name_hosts)
		host = profile__cmeta(c->src)->hostname;
	return copy_string(c, host);
}

static int copy_processes(struct copier *c)
{
	for (size_t i = 0, n = profile__nr_processes(c->src); i < n; i++) {
		struct pf_process pr = *profile__get_process(c->src, i);
		int64_t host = copy_host(c, pr.host), launcher = copy_string(c, pr.launcher),
			cg = copy_string(c, pr.cgroup), ct = copy_string(c, pr.container);
		int err;

		if (host < 0 || launcher < 0)
			return host < 0 ? (int)host : (int)launcher;
		if (cg < 0 || ct < 0)
			return cg < 0 ? (int)cg : (int)ct;
		pr.host = (uint32_t)host;
		pr.launcher = (uint32_t)launcher;
		pr.cgroup = (uint32_t)cg;
		pr.container = (uint32_t)ct;
		err = profile__set_process(c->dst, &pr);
		if (err)
			return err;
	}
	return 0;
}

/* The dst thread of src thread id, or UNSET when the filters drop it. */
static int64_t copy_thread(struct copier *c, uint32_t id)
{
	const struct pf_thread *t;
	int64_t comm, host, r;

	if (c->keep_thread[id] == 2)
		return UNSET;
	if (c->threads[id] != UNSET)
		return c->threads[id];
	t = profile__get_thread(c->src, id);
	if (t->comm >= profile__nr_strings(c->src))
		return -EINVAL;
	if (!thread_wanted(c, t)) {
		c->keep_thread[id] = 2;
		return UNSET;
	}
	comm = thread_label(c, t);
	if (comm < 0)
		return comm;
	host = copy_host(c, t->host);
	if (host < 0)
		return host;
	r = profile__thread_on(c->dst, (uint32_t)host, t->pid, t->tid, (uint32_t)comm);
	if (r < 0)
		return r;
	c->threads[id] = (uint32_t)r;
	c->keep_thread[id] = 1;
	return r;
}

static int64_t rq_frame(struct copier *c)
{
	if (c->rq_frame < 0)
		c->rq_frame = profile__frame_str(c->dst, RUNQUEUE_FRAME, NULL, FRAME_SPECIAL);
	return c->rq_frame;
}

static int64_t copy_stack(struct copier *c, uint32_t id, bool runqueue)
{
	uint64_t key = (uint64_t)id << 1 | runqueue, v;
	bool reverse = c->f && c->f->reverse;
	int64_t depth, parent = 0;

	if (u64map_get(&c->stacks, key, &v))
		return (int64_t)v;
	depth = profile__stack_frames(c->src, id, &c->path, &c->path_cap);
	if (depth < 0)
		return depth;
	for (int64_t d = 0, n = depth; d < n; d++) {
		int64_t fr;

		if (d == 0)
			depth = 0;
		if (c->hide_frame && c->hide_frame[c->path[d]])
			continue;
		fr = copy_frame(c, c->path[d]);
		if (fr < 0)
			return fr;
		c->path[depth++] = (uint32_t)fr;
	}
	if (runqueue) {
		int64_t fr = rq_frame(c);
		int err;

		if (fr < 0)
			return fr;
		err = grow_array((void **)&c->path, &c->path_cap, (size_t)depth + 1,
				 sizeof(*c->path));
		if (err)
			return err;
		c->path[depth++] = (uint32_t)fr;
	}
	for (int64_t d = 0; d < depth; d++) {
		uint32_t fr = c->path[reverse ? depth - 1 - d : d];

		parent = profile__stack(c->dst, (uint32_t)parent, fr);
		if (parent < 0)
			return parent;
	}
	if (u64map_put(&c->stacks, key, (uint64_t)parent))
		return -ENOMEM;
	profile__set_stack_end(c->dst, (uint32_t)parent, profile__stack_end(c->src, id));
	return parent;
}

/*
 * The part of a sample inside the time range, or 0 to drop it. On-CPU
 * samples are points; off-CPU blocks are intervals, clipped.
 */
static uint64_t clip(const struct copier *c, const struct pf_sample *s, uint64_t base)
{
	const struct profile_filter *f = c->f;
	uint64_t t, end;

	if (!f || !f->has_time)
		return s->weight;
	t = s->time > base ? s->time - base : 0;
	if (s->kind == SAMPLE_ONCPU)
		return t >= f->time_start && t < f->time_end ? s->weight : 0;
	end = sat_add(t, s->weight);
	if (t < f->time_start)
		t = f->time_start;
	if (end > f->time_end)
		end = f->time_end;
	return end > t ? end - t : 0;
}

/* --from-call: whether sample s (its copy o) is at or after its process's cut; o clipped. */
static bool from_cut(const struct copier *c, const struct pf_sample *s, struct pf_sample *o)
{
	uint64_t cut = c->cut[s->thread], end;

	if (cut == UINT64_MAX)
		return false;
	if (s->time >= cut)
		return true;
	/* a block that began before the cut: its part after it */
	if (s->kind != SAMPLE_OFFCPU && s->kind != SAMPLE_RUNQUEUE)
		return false;
	end = sat_add(s->time, o->weight);
	if (end <= cut)
		return false;
	o->weight = end - cut;
	o->time = cut;
	return true;
}

int profile__copy(struct profile *dst, const struct profile *src, const bool kinds[SAMPLE_KIND_MAX],
		  const struct profile_filter *f, bool rq_frames)
{
	size_t nr_samples = profile__nr_samples(src);
	size_t nr_stacks = profile__nr_stacks(src);
	size_t nr_threads = profile__nr_threads(src);
	uint64_t base = profile__time_base(src);
	struct copier c;
	int err;

	err = copier_init(&c, dst, src, kinds, f);
	if (err)
		return err;
	err = copy_processes(&c);
	if (err) {
		copier_free(&c);
		return err;
	}
	for (size_t i = 0; i < nr_samples; i++) {
		const struct pf_sample *s = profile__get_sample(src, i);
		struct pf_sample o = *s;
		int64_t thr, stk;

		if (s->kind >= SAMPLE_KIND_MAX || !c.kinds[s->kind])
			continue;
		if (s->stack >= nr_stacks || s->thread >= nr_threads) {
			err = -EINVAL;
			break;
		}
		if (f && (s->kind == SAMPLE_OFFCPU || s->kind == SAMPLE_RUNQUEUE) &&
		    s->weight < f->min_block)
			continue;
		if (f && (f->complete_only || f->cut_only) &&
		    (profile__stack_end(src, s->stack) == STACK_END_COMPLETE) != f->complete_only)
			continue;
		o.weight = clip(&c, s, base);
		if (!o.weight && s->weight)
			continue;
		if (c.cut && !from_cut(&c, s, &o))
			continue;
		thr = copy_thread(&c, s->thread);
		if (thr == UNSET)
			continue;
		stk = thr < 0 ? thr
			      : copy_stack(&c, s->stack, rq_frames && s->kind == SAMPLE_RUNQUEUE);
		if (stk < 0) {
			err = (int)stk;
			break;
		}
		o.thread = (uint32_t)thr;
		o.stack = (uint32_t)stk;
		if (f && f->time_shift)
			o.time = f->time_shift < 0 && (uint64_t)-f->time_shift > o.time
					 ? 0
					 : o.time + (uint64_t)f->time_shift;
		err = profile__add_sample(dst, &o);
		if (err)
			break;
	}
	copier_free(&c);
	return err;
}

uint64_t profile__time_base(const struct profile *p)
{
	uint64_t base = profile__cmeta(p)->start_time;
	size_t n = profile__nr_samples(p);

	if (base)
		return base;
	base = UINT64_MAX;
	for (size_t i = 0; i < n; i++) {
		uint64_t t = profile__get_sample(p, i)->time;

		if (t < base)
			base = t;
	}
	return n ? base : 0;
}

static bool needs_copy(const bool kinds[SAMPLE_KIND_MAX], const struct profile_filter *f)
{
	if (kinds[SAMPLE_RUNQUEUE])
		return true;
	return f && (f->nr_pids || f->nr_tids || f->nr_comms || f->has_time || f->min_block ||
		     f->per_thread || f->per_process || f->reverse || f->complete_only ||
		     f->cut_only || f->python || f->from_call || f->nr_ranks || f->per_rank ||
		     f->name_hosts || f->time_shift);
}

static int copy_meta(struct profile *dst, const struct profile *src)
{
	const struct pf_meta *m = profile__cmeta(src);
	struct pf_meta *d = profile__meta(dst);
	const uint32_t ids[3] = { m->event, m->command, m->hostname };
	int64_t out[3];

	for (int i = 0; i < 3; i++) {
		if (ids[i] >= profile__nr_strings(src))
			return -EINVAL;
		out[i] = profile__string(dst, profile__str(src, ids[i]),
					 profile__str_len(src, ids[i]));
		if (out[i] < 0)
			return (int)out[i];
	}
	*d = *m;
	/* the time base stays that of the source, so --time means the same */
	d->start_time = profile__time_base(src);
	d->event = (uint32_t)out[0];
	d->command = (uint32_t)out[1];
	d->hostname = (uint32_t)out[2];
	return 0;
}

int profile__filter(const struct profile *p, const bool kinds[SAMPLE_KIND_MAX],
		    const struct profile_filter *f, struct profile **out)
{
	struct profile *q;
	int err;

	*out = NULL;
	if (f && f->has_time && f->time_start >= f->time_end)
		return -EINVAL;
	if (!needs_copy(kinds, f))
		return 0;
	q = profile__new();
	if (!q)
		return -ENOMEM;
	err = copy_meta(q, p);
	if (!err)
		err = profile__copy(q, p, kinds, f, true);
	if (err) {
		profile__free(q);
		return err;
	}
	*out = q;
	return 0;
}
