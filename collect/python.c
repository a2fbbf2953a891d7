/* SPDX-License-Identifier: MIT */
/*
 * Python frames in place of the interpreter's eval frames.
 *
 * A Python stack changes within milliseconds (22% of a trainer's stacks
 * within 3 ms), so a thread's frame chain is read from the process the
 * moment its sample leaves the ring (py_early, the sampler's early
 * callback), long before the sample is delivered in time order. When it is
 * delivered, the native unwind says where each _PyEval_EvalFrameDefault
 * call is; python/ anchors each call's group of Python frames on the frame
 * pointer the call kept in the stack copy, so a group is shown only when it
 * is provably the one on the stack at the sample. Otherwise one visible
 * placeholder takes its place and the stack's end says why.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#include <asm/perf_regs.h>

/* A process's Python state, as the early callback found it. */
enum py_state { PY_UNPROBED = 0, PY_NONE, PY_YES, PY_FAILED };

/* Probes of a process that has no interpreter, at most once a second each. */
#define PY_REPROBE_NS 1000000000ull
#define PY_MAX_REPROBES 10
/* One whose interpreter is there, not initialized yet: every 10 ms, for 10 s at most. */
#define PY_REPROBE_SOON_NS 10000000ull
#define PY_MAX_REPROBES_SOON 1000
/*
 * The first probes of any process also every 10 ms (and on top of the
 * others'): the early thread looks at a launched program's first samples
 * at once, when its interpreter may not even be mapped yet, and a second's
 * wait cost a pyenv CPython its first 150 samples' frames.
 */
#define PY_YOUNG_PROBES 30
#define PY_FRAME_SLOTS 8192 /* Python frames remembered by code object and line */
/* Snapshots waiting for their sample: beyond this many, those older than a second go. */
#define PY_PENDING_MAX 65536
#define PY_PENDING_AGE_NS 1000000000ull

struct py_proc {
	uint32_t pid;
	enum py_state state;
	bool soon; /* its interpreter is there, not initialized yet: probed again soon */
	bool bpf; /* its frames come from pybpf/'s records, copied at the sample */
	uint64_t bpf_since; /* from its samples of this time on (before: read after the sample) */
	uint32_t probes;
	uint64_t probed_at, next_probe; /* monotonic ns, the clock of the records */
};

/*
 * A record of pybpf/'s program is taken in the same overflow handler as
 * its sample (microseconds apart, measured by test_pybpf): it joins the
 * sample of its thread with the same ip within a millisecond, the time
 * between two samples of a thread at the default rate.
 */
#define PY_BPF_JOIN_NS 1000000ull
/*
 * A probe's entry: the program runs in the uprobe's handler before the
 * sample is written, and the thread may be preempted in between (tens of
 * milliseconds on a busy machine). Its record joins the entry sample of its
 * thread with the same ip and sp up to this long after it: the newest one
 * since the thread's previous entry sample (an older one is an earlier
 * call's, whose sample came before).
 */
#define PY_BPF_PROBE_NS 1000000000ull
/*
 * Records waiting for their samples, in bytes, all threads together: beyond
 * this, the oldest of the thread whose record comes go (counted unjoined).
 * Records wait as long as the recording is behind its rings (a second at
 * 25,000 probed calls a second is 5 MiB of three-frame records).
 */
#define PY_BPF_QUEUE_BYTES (64u << 20)
/*
 * How long after a process was probed, or a module body's code object read
 * for the first time, the early callback asks for samples every
 * EARLY_SLOW_MS (else it waits for the drain thread): a module's body is
 * freed once it ran, and a record naming it must be read before. Other code
 * objects live as long as their functions: reading one is no reason (in
 * Debian 13's CNN training loop a function sampled for the first time came
 * every second or two, and kept the early thread at 100 wakeups a second).
 */
#define PY_SOON_NS 1000000000ull

/* A snapshot kept for its sample: only the frames read. */
struct py_pending {
	uint64_t time;
	uint64_t ip; /* pybpf/'s records: the sampled ip, to join its sample */
	uint64_t usp; /* ... and the user SP at a sample of user code (0: kernel code) */
	bool probe; /* ... taken at a probe's entry, before its sample */
	uint64_t read_at; /* a snapshot: when its read was over (CLOCK_MONOTONIC, as samples) */
	uint32_t tid;
	uint32_t bytes; /* its allocation, counted in py->queued while it waits in a queue */
	struct py_snapshot snap; /* frames[snap.n] allocated */
};

static uint64_t pending_key(uint32_t tid, uint64_t time)
{
	uint64_t k = hash_u64(time ^ (uint64_t)tid << 44);

	return k == UINT64_MAX ? 0 : k;
}

int py_init(struct py_stacks **out, struct collect_python_stats *st)
{
	struct py_stacks *py = calloc(1, sizeof(*py));

	if (!py)
		return -ENOMEM;
	py->r = pyreader__new();
	py->scratch = malloc(sizeof(*py->scratch));
	py->frame_slots = calloc(PY_FRAME_SLOTS, sizeof(*py->frame_slots));
	if (!py->r || !py->scratch || !py->frame_slots) {
		pyreader__free(py->r);
		free(py->scratch);
		free(py->frame_slots);
		free(py);
		return -ENOMEM;
	}
	py->st = st;
	/*
	 * The early thread, real-time while it reads frames after the sample,
	 * waits for this lock while sampler__poll's thread names a sample
	 * under it: held by a thread the trainer preempted, it kept the early
	 * one 3-5 ms behind now and then, and a read that late finds frames
	 * that moved on (0.7% of eval calls "changed before read" on a split
	 * run with a busy neighbour, 0.2% with inheritance; a 10 ms probed
	 * call read after its return once in CI).
	 */
	mutex_init_inherit(&py->lock);
	u64map_init(&py->procs);
	u64map_init(&py->pending);
	u64map_init(&py->queues);
	*out = py;
	return 0;
}

void py_use_bpf(struct py_stacks *py, struct pybpf *b)
{
	pthread_mutex_lock(&py->lock);
	py->bpf = b;
	pthread_mutex_unlock(&py->lock);
}

static void drop_pending(struct py_stacks *py, bool all, uint64_t older_than)
{
	struct u64map *m = &py->pending;

	for (size_t i = 0; i < m->cap; i++) {
		struct py_pending *p;

		if (m->keys[i] == UINT64_MAX)
			continue;
		p = (struct py_pending *)(uintptr_t)m->vals[i];
		if (!all && p->time >= older_than)
			continue;
		free(p);
		if (!all) {
			u64map_del(m, m->keys[i]);
			i--; /* deletion may move a later key into this slot */
		}
	}
	if (all)
		u64map_free(m);
}

void py_free(struct py_stacks *py)
{
	if (!py)
		return;
	drop_pending(py, true, 0);
	for (size_t i = 0; i < py->nr_queues; i++) {
		struct py_queue *q = &py->queue_arr[i];

		for (size_t k = q->head; k < q->n; k++)
			free(q->items[k]);
		free(q->items);
	}
	free(py->queue_arr);
	u64map_free(&py->queues);
	u64map_free(&py->procs);
	free(py->procs_arr);
	free(py->scratch);
	free(py->frame_slots);
	pyreader__free(py->r);
	pthread_mutex_destroy(&py->lock);
	free(py);
}

static struct py_proc *proc_of(struct py_stacks *py, uint32_t pid, bool create)
{
	uint64_t v;

	if (u64map_get(&py->procs, pid, &v))
		return &py->procs_arr[v];
	if (!create || grow_array((void **)&py->procs_arr, &py->procs_cap, py->nr_procs + 1,
				  sizeof(*py->procs_arr)))
		return NULL;
	if (u64map_put(&py->procs, pid, py->nr_procs))
		return NULL;
	py->procs_arr[py->nr_procs] = (struct py_proc){ .pid = pid };
	return &py->procs_arr[py->nr_procs++];
}

/* Look for an interpreter in pid now, if it is time to; its state after. */
static enum py_state probe(struct py_stacks *py, struct py_proc *p)
{
	uint64_t now;
	int ret;

	if (p->state == PY_YES || p->state == PY_FAILED)
		return p->state;
	if (p->state == PY_NONE) {
		if (p->probes >=
			    (p->soon ? PY_MAX_REPROBES_SOON : PY_MAX_REPROBES + PY_YOUNG_PROBES) ||
		    (now = monotonic_ns()) < p->next_probe)
			return p->state;
	}
	ret = pyreader__probe(py->r, (pid_t)p->pid);
	p->probes++;
	p->probed_at = monotonic_ns();
	p->soon = ret == 0 && pyreader__version(py->r, (pid_t)p->pid);
	p->next_probe = p->probed_at + (p->soon || p->probes < PY_YOUNG_PROBES ? PY_REPROBE_SOON_NS
									       : PY_REPROBE_NS);
	if (ret == 1) {
		struct py_walk w;

		p->state = PY_YES;
		py->st->processes++;
		/* its frames copied at the sample, if the program takes its layout */
		if (py->bpf && !pyreader__walk(py->r, (pid_t)p->pid, &w) &&
		    !pybpf__add(py->bpf, (pid_t)p->pid, &w)) {
			p->bpf = true;
			p->bpf_since = monotonic_ns();
			py->st->bpf_processes++;
		}
	} else if (ret == 0 || ret == -ESRCH) {
		p->state = PY_NONE;
	} else {
		p->state = PY_FAILED;
		/* the first process whose Python could not be read is what the user hears of */
		if (!py->st->failed_pid) {
			py->st->failed_pid = p->pid;
			py->st->failed_err = ret;
			py->st->failed_version = pyreader__version(py->r, (pid_t)p->pid);
			py->st->failed_free_threaded =
				pyreader__free_threaded(py->r, (pid_t)p->pid);
		}
		py->st->failed_processes++;
	}
	return p->state;
}

static struct py_queue *queue_of(struct py_stacks *py, uint32_t tid, bool create)
{
	uint64_t v;

	if (u64map_get(&py->queues, tid, &v))
		return &py->queue_arr[v];
	if (!create ||
	    grow_array((void **)&py->queue_arr, &py->queues_cap, py->nr_queues + 1,
		       sizeof(*py->queue_arr)) ||
	    u64map_put(&py->queues, tid, py->nr_queues))
		return NULL;
	py->queue_arr[py->nr_queues] = (struct py_queue){ 0 };
	return &py->queue_arr[py->nr_queues++];
}

/* The frames pybpf/'s program copied at one sample: kept, named, until the sample comes. */
static int store_bpf(void *ctx, const struct pybpf_sample *b)
{
	struct py_stacks *py = ctx;
	struct py_proc *p = proc_of(py, (uint32_t)b->pid, false);
	struct py_pending *pp;
	struct py_queue *q;
	size_t size;

	py->st->bpf_records++;
	if (!p || !p->bpf || b->n > PY_MAX_FRAMES)
		return 0;
	/* a walk that stopped short (a frame not resident, a chain being changed) is not shown */
	if (b->status != PYBPF_OK && b->status != PYBPF_CUT && b->status != PYBPF_NO_TSTATE) {
		py->st->bpf_failed++;
		return 0;
	}
	size = offsetof(struct py_pending, snap.frames) + b->n * sizeof(b->frames[0]);
	pp = malloc(size);
	q = queue_of(py, (uint32_t)b->tid, true);
	if (!pp || !q) {
		free(pp);
		return 0;
	}
	pp->time = b->time;
	pp->ip = b->ip;
	pp->usp = b->usp;
	pp->probe = b->probe;
	pp->tid = (uint32_t)b->tid;
	pp->snap.tstate = b->tstate;
	pp->snap.cframe = b->cframe;
	pp->snap.n = b->n;
	pp->snap.cut = b->status == PYBPF_CUT;
	pp->snap.partial = false;
	pp->snap.at_sample = true;
	memcpy(pp->snap.frames, b->frames, b->n * sizeof(b->frames[0]));
	/*
	 * Named soon after the sample: a code object freed since (a module's
	 * body once imported) is left unnamed, and shown as such.
	 */
	if (pyreader__resolve(py->r, b->pid, &pp->snap) > 0)
		py->st->bpf_unnamed++;
	/* (the copied names were the record's: kept by the reader now, or not at all) */
	for (uint32_t i = 0; i < pp->snap.n; i++)
		pp->snap.frames[i].copied_qualname = pp->snap.frames[i].copied_filename = NULL;
	pp->bytes = (uint32_t)size;
	while (q->n > q->head && py->queued + size > PY_BPF_QUEUE_BYTES) {
		py->queued -= q->items[q->head]->bytes;
		free(q->items[q->head++]);
		py->st->bpf_unjoined++;
	}
	if (q->head && q->n == q->cap) {
		memmove(q->items, q->items + q->head, (q->n - q->head) * sizeof(*q->items));
		q->n -= q->head;
		q->head = 0;
	}
	if (grow_array((void **)&q->items, &q->cap, q->n + 1, sizeof(*q->items))) {
		free(pp);
		return 0;
	}
	q->items[q->n++] = pp;
	py->queued += size;
	return 0;
}

/* Every record the program has written so far. */
static void drain_bpf(struct py_stacks *py)
{
	for (int i = 0; py->bpf && i < 64; i++)
		if (pybpf__poll(py->bpf, 0, store_bpf, py) <= 0)
			break;
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* A probe's entry, where the program may have run too (pybpf__probe_prog_fd). */
static bool probe_entry(const struct rec_sample *s)
{
	return EV_IS_PROBE(s->event) && !EV_PROBE_IS_RETURN(s->event);
}

/* Whether record pp may be the program's at sample s (a probe's entry or not). */
static bool joins(const struct py_queue *q, const struct py_pending *pp, const struct rec_sample *s,
		  bool entry)
{
	if (pp->probe != entry || pp->ip != s->ip)
		return false;
	/* both clocks are CLOCK_MONOTONIC: the record is never later than its sample */
	if (entry)
		return pp->time <= s->time && pp->time + PY_BPF_PROBE_NS >= s->time &&
		       pp->time > q->last_entry;
	return absdiff(pp->time, s->time) <= PY_BPF_JOIN_NS;
}

/*
 * Where in q the record of sample s is; q->n if it is not there. A probe's
 * entry takes the newest that joins: an older one's sample was lost.
 */
static size_t find_bpf(const struct py_queue *q, const struct rec_sample *s)
{
	bool entry = probe_entry(s);
	size_t found = q->n;

	for (size_t k = q->head; k < q->n; k++) {
		const struct py_pending *pp = q->items[k];

		if (pp->time > s->time + PY_BPF_JOIN_NS)
			break;
		if (!joins(q, pp, s, entry))
			continue;
		/*
		 * In user code the SP must agree too: samples of one thread in
		 * one instruction (the eval loop's) within the window are told
		 * apart by their stack depth, so a missing record never lends
		 * its neighbour's frames to a sample.
		 */
		if (pp->usp && (!(s->uregs.mask >> PERF_REG_X86_SP & 1) ||
				s->uregs.regs[PERF_REG_X86_SP] != pp->usp))
			continue;
		found = k;
		if (!entry)
			break;
	}
	return found;
}

/* The record of sample s, now the caller's; NULL if none. */
static struct py_pending *take_bpf(struct py_stacks *py, const struct rec_sample *s)
{
	struct py_queue *q;
	struct py_pending *pp;
	size_t k;

	drain_bpf(py);
	q = queue_of(py, s->tid, false);
	if (!q)
		return NULL;
	/* records older than any join window of this sample's: their samples never came */
	while (q->head < q->n &&
	       q->items[q->head]->time +
			       (q->items[q->head]->probe ? PY_BPF_PROBE_NS : PY_BPF_JOIN_NS) <
		       s->time) {
		py->queued -= q->items[q->head]->bytes;
		free(q->items[q->head++]);
		py->st->bpf_unjoined++;
	}
	k = find_bpf(q, s);
	if (probe_entry(s) && s->time > q->last_entry)
		q->last_entry = s->time;
	if (k == q->n)
		return NULL;
	pp = q->items[k];
	memmove(q->items + k, q->items + k + 1, (q->n - k - 1) * sizeof(*q->items));
	q->n--;
	py->queued -= pp->bytes;
	py->st->bpf_joined++;
	return pp;
}

/*
 * Whether the program's record of sample s has come. The program runs on a
 * probe's entry before its sample is written, so the record of a sample
 * being read is there, unless the kernel did not run it (the program not
 * attached to that probe) or its ring was full: the frames are read then.
 */
static bool has_bpf(struct py_stacks *py, const struct rec_sample *s)
{
	struct py_queue *q;

	drain_bpf(py);
	q = queue_of(py, s->tid, false);
	return q && find_bpf(q, s) < q->n;
}

/*
 * Whether pybpf/'s program saw sample s: it is on the on-CPU,
 * context-switch and page-fault events (sampler/events.c), not on probes,
 * whose frames are read after the sample.
 */
static bool bpf_covers(const struct rec_sample *s)
{
	return s->event == EV_ONCPU || s->event == EV_SWITCH || s->event == EV_FAULT;
}

/* A probe's return on thread tid at time t (the early callback: before any entry is delivered). */
static void note_return(struct py_stacks *py, uint32_t tid, uint64_t t)
{
	struct py_queue *q = queue_of(py, tid, true);

	if (q)
		q->rets[q->nrets++ % PY_RETS] = t;
}

/*
 * Whether a probe's entry at time t on thread tid was read (until read_at)
 * after the thread returned from a probed call that it entered since: its
 * frames then are another call's, or the caller's after it, never
 * checkable against the entry's stack copy (the caller's next call reuses
 * its frame's address). Nested probed calls make it say so too: a
 * placeholder, not a wrong caller. Also when the returns kept do not
 * reach back to t.
 */
static bool returned_before_read(struct py_stacks *py, uint32_t tid, uint64_t t, uint64_t read_at)
{
	struct py_queue *q = queue_of(py, tid, false);
	unsigned n;
	bool older = false;

	if (!q || !q->nrets)
		return false;
	n = q->nrets < PY_RETS ? q->nrets : PY_RETS;
	for (unsigned i = 0; i < n; i++) {
		uint64_t r = q->rets[(q->nrets - 1 - i) % PY_RETS];

		if (r > t && r <= read_at)
			return true;
		older |= r <= t;
	}
	return !older && q->nrets > PY_RETS;
}

/* The early callback's work for sample s, under the lock; the sample's process, if known. */
static struct py_proc *early_locked(struct py_stacks *py, const struct rec_sample *s, bool ours)
{
	struct py_proc *p = proc_of(py, s->pid, ours);
	struct py_pending *pp;
	uint64_t key, v, now;
	size_t size;

	if (EV_IS_PROBE(s->event) && EV_PROBE_IS_RETURN(s->event)) {
		if (p) /* a return is a probe's: ours is false, p a process seen before */
			note_return(py, s->tid, s->time);
		return p;
	}
	if (!p || probe(py, p) != PY_YES || !s->stack_size)
		return p;
	if (p->bpf && bpf_covers(s) && s->time >= p->bpf_since) {
		drain_bpf(py); /* nothing to read: the program copied the frames */
		return p;
	}
	if (p->bpf && probe_entry(s) && s->time >= p->bpf_since && has_bpf(py, s))
		return p;
	if (p->bpf && !ours)
		py->probe_reads = true;
	now = monotonic_ns();
	if (now > s->time) {
		py->st->delay_sum_ns += now - s->time;
		if (now - s->time > py->st->delay_max_ns)
			py->st->delay_max_ns = now - s->time;
	}
	if (pyreader__snapshot(py->r, (pid_t)s->pid, (pid_t)s->tid, py->scratch)) {
		py->st->snapshot_failures++;
		return p;
	}
	py->st->snapshots++;
	size = offsetof(struct py_pending, snap.frames) +
	       py->scratch->n * sizeof(py->scratch->frames[0]);
	pp = malloc(size);
	if (!pp)
		return p;
	memcpy(&pp->snap, py->scratch, size - offsetof(struct py_pending, snap));
	pp->time = s->time;
	pp->read_at = monotonic_ns();
	pp->tid = s->tid;
	key = pending_key(s->tid, s->time);
	if (u64map_get(&py->pending, key, &v))
		free((void *)(uintptr_t)v); /* the same sample twice (attach), or a collision */
	if (u64map_put(&py->pending, key, (uint64_t)(uintptr_t)pp)) {
		free(pp);
		return p;
	}
	if (py->pending.len > PY_PENDING_MAX && s->time > PY_PENDING_AGE_NS)
		drop_pending(py, false, s->time - PY_PENDING_AGE_NS);
	return p;
}

static void exec_locked(struct py_stacks *py, uint32_t pid, uint64_t time)
{
	struct py_proc *p = proc_of(py, pid, false);

	/* records come late: the early callback may have probed the new program already */
	if (p && p->probed_at < time) {
		if (p->bpf && py->bpf)
			pybpf__remove(py->bpf, (pid_t)pid);
		pyreader__forget(py->r, (pid_t)pid);
		*p = (struct py_proc){ .pid = pid };
	}
}

/* The snapshot taken for sample s, now the caller's; NULL if none. */
static struct py_pending *take(struct py_stacks *py, const struct rec_sample *s)
{
	uint64_t key = pending_key(s->tid, s->time), v;
	struct py_pending *pp;
	struct py_proc *p = proc_of(py, s->pid, false);
	/* a probe's entry: no record of the program, its frames were read */
	bool bpf = p && p->bpf && bpf_covers(s);

	if (bpf && s->time >= p->bpf_since) {
		pp = take_bpf(py, s);
		if (!pp)
			py->st->bpf_missing++;
		return pp;
	}
	if (bpf)
		py->st->bpf_before++;
	if (!u64map_get(&py->pending, key, &v)) {
		/* a probe's entry not read: the program copied its frames */
		if (p && p->bpf && probe_entry(s) && s->time >= p->bpf_since)
			return take_bpf(py, s);
		return NULL;
	}
	u64map_del(&py->pending, key);
	pp = (struct py_pending *)(uintptr_t)v;
	if (pp->tid != s->tid || pp->time != s->time) {
		free(pp);
		return NULL;
	}
	return pp;
}

static int push_frame(struct frames *fr, struct py_stacks *py, uint32_t pid,
		      const struct py_frame *f)
{
	struct py_frame_info info;
	struct pf_frame pf = { .kind = FRAME_PYTHON };
	struct py_frame_slot *slot;
	int64_t name, file, id;

	if (pyreader__describe(py->r, (pid_t)pid, f, &info))
		return 1;
	slot = &py->frame_slots[hash_u64(info.code_serial ^ (uint64_t)info.line << 40) %
				PY_FRAME_SLOTS];
	if (slot->serial == info.code_serial && slot->line == info.line)
		return frames_push_id(fr, slot->frame);
	name = profile__string(fr->prof, info.qualname, strlen(info.qualname));
	file = profile__string(fr->prof, info.filename, strlen(info.filename));
	if (name < 0 || file < 0)
		return -ENOMEM;
	pf.name = (uint32_t)name;
	pf.module = (uint32_t)file;
	pf.file = (uint32_t)file;
	pf.line = info.line;
	id = profile__frame_full(fr->prof, &pf);
	if (id < 0)
		return (int)id;
	*slot = (struct py_frame_slot){ .serial = info.code_serial,
					.line = info.line,
					.frame = (uint32_t)id };
	return frames_push_id(fr, id);
}

bool py_wants(struct py_stacks *py, uint32_t pid)
{
	struct py_proc *p;
	bool yes;

	if (!py)
		return false;
	pthread_mutex_lock(&py->lock);
	p = proc_of(py, pid, false);
	yes = p && p->state == PY_YES;
	pthread_mutex_unlock(&py->lock);
	return yes;
}

/*
 * Native frames ips[from..to) of the stack, pushed with the lock let go
 * once: naming them may read a module's symbols or debug info from disk,
 * and the early thread, real-time while it reads frames after the sample,
 * waited for the lock meanwhile (an 11 ms read, in a fresh Debian 12 root,
 * of a probed 10 ms call: its frames had moved on). Nothing of the lock's
 * is held across it.
 */
static int push_natives(struct frames *fr, struct py_stacks *py, uint32_t pid, const uint64_t *ips,
			int from, int to)
{
	int err = 0;

	pthread_mutex_unlock(&py->lock);
	for (int i = from; i < to && !err; i++)
		err = frames_push_addr(fr, pid, ips[i], false, i > 0);
	pthread_mutex_lock(&py->lock);
	return err;
}

/* Called with py->lock held, which push_natives lets go for each run of native frames. */
static int push_locked(struct frames *fr, struct py_stacks *py, const struct rec_sample *s,
		       const uint64_t *ips, const uint64_t *sps, int k, enum stack_end *end)
{
	struct py_stack_copy copy = { .sp = s->uregs.regs[PERF_REG_X86_SP],
				      .data = s->stack,
				      .size = s->stack_size };
	struct py_pending *pp = take(py, s);
	uint64_t cfas[PY_MAX_EVALS], pcs[COLLECT_MAX_DEPTH], fcfa[COLLECT_MAX_DEPTH];
	bool is_eval[COLLECT_MAX_DEPTH], by_slot[COLLECT_MAX_DEPTH], guessed[PY_MAX_EVALS];
	struct py_group groups[PY_MAX_EVALS];
	size_t n = 0, g = 0;
	bool changed = false, unread = false;
	int err = 0;

	/* a frame's CFA is its caller's SP: the outermost frame has none, and is no eval */
	for (int i = 0; i < k; i++) {
		pcs[i] = i ? ips[i] - 1 : ips[i];
		fcfa[i] = i + 1 < k ? sps[i + 1] : 0;
	}
	pyreader__find_evals(py->r, (pid_t)s->pid, pcs, fcfa, (size_t)k, &copy, is_eval, by_slot);
	for (int i = 0; i < k; i++) {
		if (is_eval[i] && n == PY_MAX_EVALS)
			is_eval[i] = false;
		if (is_eval[i]) {
			guessed[n] = by_slot[i];
			cfas[n++] = fcfa[i];
		}
	}
	/* the sampled registers are the newest eval call's own only when it was running */
	if (k > 1 && is_eval[0]) {
		copy.regs = s->uregs.regs;
		copy.regs_mask = s->uregs.mask;
	}
	if (!n) {
		free(pp);
		return push_natives(fr, py, s->pid, ips, 0, k);
	}
	py->st->samples++;
	if (pp && !pp->snap.at_sample && probe_entry(s) &&
	    returned_before_read(py, s->tid, s->time, pp->read_at)) {
		/* read after the call it entered was over: not that call's frames */
		for (size_t e = 0; e < n; e++)
			groups[e] = (struct py_group){ .state = PY_GROUP_CHANGED };
	} else if (!pp || pyreader__match(py->r, (pid_t)s->pid, &pp->snap, &copy, cfas, guessed, n,
					  groups)) {
		for (size_t e = 0; e < n; e++)
			groups[e] = (struct py_group){ .state = PY_GROUP_UNKNOWN };
	}
	for (int i = 0; i < k && !err; i++) {
		const struct py_group *gr;
		int ret = 0;

		if (!is_eval[i]) {
			int j = i + 1;

			while (j < k && !is_eval[j])
				j++;
			err = push_natives(fr, py, s->pid, ips, i, j);
			i = j - 1;
			continue;
		}
		gr = &groups[g++];
		if (gr->state == PY_GROUP_NOT_EVAL) {
			err = push_natives(fr, py, s->pid, ips, i, i + 1);
			continue;
		}
		if (gr->state == PY_GROUP_OK && pp && gr->first + gr->n <= pp->snap.n) {
			size_t mark = fr->n;

			for (uint32_t j = 0; j < gr->n && ret == 0; j++) {
				struct py_frame f = pp->snap.frames[gr->first + j];

				if (j == 0 && gr->instr)
					f.instr = gr->instr; /* where it was at the sample */
				/* copied at the sample, its code gone before it was named */
				if (pp->snap.at_sample && !f.code_ref)
					ret = frames_push_special(fr, PY_FREED_FRAME);
				else
					ret = push_frame(fr, py, s->pid, &f);
			}
			if (ret == 0) {
				py->st->groups_ok++;
				continue;
			}
			if (ret < 0) {
				err = ret;
				continue;
			}
			fr->n = mark; /* a code object could not be read: the whole group goes */
		}
		if (gr->state == PY_GROUP_CHANGED) {
			changed = true;
			py->st->groups_changed++;
			err = frames_push_special(fr, PY_CHANGED_FRAME);
		} else {
			unread = true;
			py->st->groups_unread++;
			err = frames_push_special(fr, PY_UNREAD_FRAME);
		}
	}
	free(pp);
	py->st->leaf_checks = pyreader__stats(py->r)->leaf_checks;
	py->st->leaf_mismatches = pyreader__stats(py->r)->leaf_mismatches;
	if (*end == STACK_END_COMPLETE && (changed || unread))
		*end = changed ? STACK_END_PY_CHANGED : STACK_END_PY_UNREAD;
	return err;
}

enum early_want py_early(struct py_stacks *py, const struct rec_sample *s, bool ours)
{
	const struct pyreader_stats *rs;
	enum early_want want = EARLY_IDLE;
	struct py_proc *p;
	uint64_t reads, procs;

	pthread_mutex_lock(&py->lock);
	rs = pyreader__stats(py->r);
	reads = rs->module_reads;
	procs = py->st->processes;
	p = early_locked(py, s, ours);
	/* the rings looked at quickly only while some process's frames are read after the sample */
	if (py->st->processes > py->st->bpf_processes || py->probe_reads ||
	    (p && p->state == PY_NONE && p->soon)) {
		/* (or a CPython starting up: probed again at its next samples) */
		want = EARLY_FAST;
	} else if (p && p->state == PY_NONE && p->probes < PY_YOUNG_PROBES) {
		/* a process just started: its next probe at the next look */
		want = EARLY_SOON;
	} else {
		/* soon while module bodies come and go (imports), or a process is new */
		if (rs->module_reads != reads || py->st->processes != procs)
			py->soon_until = s->time + PY_SOON_NS;
		if (s->time < py->soon_until)
			want = EARLY_SOON;
	}
	pthread_mutex_unlock(&py->lock);
	return want;
}

void py_exec(struct py_stacks *py, uint32_t pid, uint64_t time)
{
	pthread_mutex_lock(&py->lock);
	exec_locked(py, pid, time);
	pthread_mutex_unlock(&py->lock);
}

int py_push(struct frames *fr, struct py_stacks *py, const struct rec_sample *s,
	    const uint64_t *ips, const uint64_t *sps, int k, enum stack_end *end)
{
	int err;

	pthread_mutex_lock(&py->lock);
	err = push_locked(fr, py, s, ips, sps, k, end);
	pthread_mutex_unlock(&py->lock);
	return err;
}
