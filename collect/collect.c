/* SPDX-License-Identifier: MIT */
/* Records in, samples out: the collector's dispatch, its stats, the end of a recording. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t read_max_stack(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_stack", "r");
	unsigned v = 127;

	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = 127;
		fclose(f);
	}
	return v;
}

static void deferred_free(struct deferred *d);

struct collector *collector__new(struct profile *prof, struct symbolizer *sym)
{
	struct collector *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->prof = prof;
	c->sym = sym;
	frames_init(&c->fr, prof, sym);
	threads_init(&c->th, prof);
	c->sb = (struct stack_builder){ .fr = &c->fr, .max_stack = read_max_stack() };
	c->off = (struct offcpu){
		.prof = prof, .fr = &c->fr, .th = &c->th, .sb = &c->sb, .st = &c->st
	};
	offcpu_init(&c->off);
	c->calls = (struct calls){ .prof = prof, .sb = &c->sb, .th = &c->th, .st = &c->st };
	calls_init(&c->calls);
	return c;
}

void collector__free(struct collector *c)
{
	if (!c)
		return;
	py_free(c->fr.py);
	frames_exit(&c->fr);
	threads_exit(&c->th);
	offcpu_exit(&c->off);
	calls_exit(&c->calls);
	for (size_t i = 0; i < c->nr_deferred; i++)
		deferred_free(&c->deferred[i]);
	free(c->deferred);
	free(c->pending);
	free(c);
}

void collector__python_bpf(struct collector *c, struct pybpf *b)
{
	if (c->fr.py)
		py_use_bpf(c->fr.py, b);
}

int collector__enable_python(struct collector *c)
{
	return c->fr.py ? 0 : py_init(&c->fr.py, &c->st.py);
}

void collector__on_stack_top(struct collector *c, collect_stack_top_cb cb, void *ctx)
{
	c->fr.top_cb = cb;
	c->fr.top_ctx = ctx;
}

void collector__enable_ranks(struct collector *c)
{
	c->ranks = true;
}

int collector__read_rank(struct collector *c, uint32_t pid)
{
	return ranks_read(c, pid);
}

enum early_want collector__early(void *ctx, const struct rec *r)
{
	struct collector *c = ctx;

	if (!c->fr.py || r->type != REC_SAMPLE)
		return EARLY_IDLE;
	/* a probe's entry: Python frames of a process already seen, never a stranger's */
	return py_early(c->fr.py, &r->sample, !EV_IS_PROBE(r->sample.event));
}

void collector__set_start(struct collector *c, uint64_t start_time)
{
	c->off.start_time = start_time;
}

int collector__set_comm(struct collector *c, uint32_t tid, const char *comm)
{
	return threads_set_comm(&c->th, tid, comm);
}

int collector__attached_thread(struct collector *c, uint32_t pid, uint32_t tid, bool blocked,
			       uint64_t pc, const char *wchan)
{
	return offcpu_attached(&c->off, pid, tid, blocked, pc, wchan);
}

const struct collect_stats *collector__stats(const struct collector *c)
{
	return &c->st;
}

/*
 * A process's first samples in JIT code come before anything is known of
 * its kernels' callers (oneDNN's GEMM kernel is grafted from call sites
 * learned later): such a sample whose caller was not recovered is kept (its
 * registers, callchain and stack copy) and unwound again later, when the
 * list is full, when its process exits (its mappings still known) or when
 * the recording ends. At most DEFER_MAX samples and DEFER_BYTES of
 * copies. (256 were too few for oneDNN 2.6's AVX-512 GEMM at two OpenMP
 * threads: the main thread's path through GOMP_parallel was learned after
 * the list had filled twice, and 2 of 5 MLP runs of 1500 iterations kept
 * 2.7% of their stacks cut, one 14.7%; with 1024, 99.7-99.9% in 8 runs.
 * Without debug files, 1024 were still too few now and then: 2 of 14 runs
 * of 800 iterations kept 14-16% cut, the list's older half committed
 * before anything was learned; CI's stacks-nodebug failed once so.)
 */
#define DEFER_MAX 4096
#define DEFER_BYTES (64u << 20)

/* The sample s stands for in the profile, on stack. */
static int oncpu_sample(struct collector *c, const struct rec_sample *s, int64_t stack,
			struct pf_sample *out)
{
	int64_t thread = threads_id(&c->th, s->pid, s->tid);

	if (thread < 0)
		return (int)thread;
	*out = (struct pf_sample){
		.time = s->time,
		/* a fault sample weighs the bytes its faults touched (4 KiB pages) */
		.weight = s->event == EV_FAULT ? s->period * 4096 : s->period,
		.stack = (uint32_t)stack,
		.thread = (uint32_t)thread,
		.kind = s->event == EV_FAULT ? SAMPLE_FAULT : SAMPLE_ONCPU,
	};
	return 0;
}

static int add_oncpu(struct collector *c, const struct rec_sample *s, int64_t stack,
		     enum stack_end end)
{
	struct pf_sample smp;
	int err = oncpu_sample(c, s, stack, &smp);

	if (!err)
		err = profile__add_sample(c->prof, &smp);
	if (err)
		return err;
	if (s->event == EV_FAULT) {
		c->st.fault_samples++;
		c->st.fault_pages += s->period;
		return 0;
	}
	c->st.samples++;
	c->st.oncpu_ends[end]++;
	return 0;
}

/* What keeping s costs: its callchain and stack copy. */
static size_t deferred_size(const struct rec_sample *s)
{
	return s->nr * sizeof(*s->ips) + s->stack_size;
}

static void deferred_free(struct deferred *d)
{
	free(d->ips);
	free(d->stack);
}

/*
 * Unwind the kept samples of pid (0: all) again. Those that end well now
 * are stored; the rest too, unless retry: then they stay kept, and only
 * if none was stored does the older half go, however it ends (a full list
 * early in a run must not commit samples that a little more learning
 * would complete).
 */
static int flush_deferred(struct collector *c, uint32_t pid, bool retry)
{
	size_t kept = 0, stored = 0;
	int err = 0;

	for (size_t i = 0; i < c->nr_deferred; i++) {
		struct deferred *d = &c->deferred[i];
		enum stack_end end;
		int64_t stack;

		if (err || (pid && d->s.pid != pid)) {
			c->deferred[kept++] = *d;
			continue;
		}
		stack = build_stack(&c->sb, &d->s, &end);
		if (stack >= 0 && retry && end == STACK_END_JIT) {
			c->deferred[kept++] = *d;
			continue;
		}
		err = stack < 0 ? (int)stack : add_oncpu(c, &d->s, stack, end);
		if (!err && end != STACK_END_JIT)
			c->st.deferred_recovered++;
		stored++;
		c->deferred_bytes -= deferred_size(&d->s);
		deferred_free(d);
	}
	c->nr_deferred = kept;
	if (!err && retry && kept && !stored) {
		size_t half = kept / 2;

		/* nothing learned yet: the older half goes as it is */
		for (size_t i = 0; i < half; i++) {
			struct deferred *d = &c->deferred[i];
			enum stack_end end;
			int64_t stack;

			if (!err) {
				stack = build_stack(&c->sb, &d->s, &end);
				err = stack < 0 ? (int)stack : add_oncpu(c, &d->s, stack, end);
			}
			c->deferred_bytes -= deferred_size(&d->s);
			deferred_free(d);
		}
		memmove(c->deferred, c->deferred + half, (kept - half) * sizeof(*c->deferred));
		c->nr_deferred = kept - half;
	}
	return err;
}

/* The list has no room for s: DEFER_MAX samples, or DEFER_BYTES of copies. */
static bool deferred_full(const struct collector *c, const struct rec_sample *s)
{
	return c->nr_deferred == DEFER_MAX ||
	       (c->nr_deferred && c->deferred_bytes + deferred_size(s) > DEFER_BYTES);
}

/* Keep s for later: false when it cannot be (full, Python, out of memory). */
static bool defer(struct collector *c, const struct rec_sample *s)
{
	struct deferred *d;

	if (deferred_full(c, s) && flush_deferred(c, 0, true))
		return false;
	if (deferred_full(c, s) || py_wants(c->fr.py, s->pid))
		return false;
	if (!c->deferred && !(c->deferred = calloc(DEFER_MAX, sizeof(*c->deferred))))
		return false;
	d = &c->deferred[c->nr_deferred];
	d->s = *s;
	d->unwound = false;
	d->ips = s->nr ? malloc(s->nr * sizeof(*d->ips)) : NULL;
	d->stack = s->stack_size ? malloc(s->stack_size) : NULL;
	if ((s->nr && !d->ips) || (s->stack_size && !d->stack)) {
		deferred_free(d);
		return false;
	}
	if (s->nr)
		memcpy(d->ips, s->ips, s->nr * sizeof(*d->ips));
	if (s->stack_size)
		memcpy(d->stack, s->stack, s->stack_size);
	d->s.ips = d->ips;
	d->s.stack = d->stack;
	c->nr_deferred++;
	c->deferred_bytes += deferred_size(s);
	c->st.deferred++;
	return true;
}

static int on_sample(struct collector *c, const struct rec_sample *s)
{
	struct rec_sample fixed;
	enum stack_end end;
	int64_t stack;
	int err;

	/* inside a probed call: its return address, not the probe's trampoline */
	if (calls_put_back(&c->calls, s, &fixed))
		s = &fixed;
	if (s->event == EV_SWITCH)
		return offcpu_switch_sample(&c->off, s);
	if (EV_IS_PROBE(s->event))
		return EV_PROBE_IS_RETURN(s->event)
			       ? calls_return(&c->calls, s, EV_PROBE_INDEX(s->event))
			       : calls_entry(&c->calls, s, EV_PROBE_INDEX(s->event));
	/* attach: a thread seen running was not blocked before the start */
	err = offcpu_running(&c->off, s->tid);
	if (err)
		return err;
	stack = build_stack(&c->sb, s, &end);
	if (stack < 0)
		return (int)stack;
	if (end == STACK_END_JIT && defer(c, s))
		return 0;
	return add_oncpu(c, s, stack, end);
}

static int on_mmap2(struct collector *c, const struct rec_mmap2 *m)
{
	struct sym_file_id id = {
		.maj = m->maj,
		.min = m->min,
		.ino = m->ino,
	};

	if (m->has_build_id && m->build_id_size <= sizeof(id.build_id)) {
		id.build_id_size = m->build_id_size;
		memcpy(id.build_id, m->build_id, id.build_id_size);
	}
	return symbolizer__mmap_id(c->sym, m->pid, m->addr, m->len, m->pgoff, m->prot, m->filename,
				   &id);
}

/* What a failed record costs, for the count the user sees. */
static enum collect_drop drop_kind(const struct rec *r)
{
	switch (r->type) {
	case REC_SAMPLE:
		return r->sample.event == EV_SWITCH ? COLLECT_DROP_SWITCH : COLLECT_DROP_SAMPLE;
	case REC_SWITCH:
		return COLLECT_DROP_SWITCH;
	case REC_MMAP2:
		return COLLECT_DROP_MAP;
	default:
		return COLLECT_DROP_TASK;
	}
}

int collector__record(void *ctx, const struct rec *r)
{
	struct collector *c = ctx;
	int err = 0;

	if (r->time) {
		if (!c->st.first_time || r->time < c->st.first_time)
			c->st.first_time = r->time;
		if (r->time > c->st.last_time)
			c->st.last_time = r->time;
	}
	switch (r->type) {
	case REC_SAMPLE:
		err = on_sample(c, &r->sample);
		break;
	case REC_MMAP2:
		err = on_mmap2(c, &r->mmap2);
		break;
	case REC_COMM:
		err = threads_set_comm(&c->th, r->comm.tid, r->comm.comm);
		if (!err)
			err = symbolizer__comm(c->sym, r->comm.pid, r->comm.tid, r->comm.exec);
		if (!err && r->comm.exec && c->fr.py)
			py_exec(c->fr.py, r->comm.pid, r->time);
		if (!err && r->comm.exec && c->ranks)
			err = ranks_read(c, r->comm.pid);
		break;
	case REC_FORK:
		err = threads_fork(&c->th, r->fork.ptid, r->fork.tid);
		if (!err)
			err = symbolizer__fork(c->sym, r->fork.pid, r->fork.ppid);
		if (!err)
			err = offcpu_task(&c->off, r->fork.tid, false);
		if (!err && r->fork.pid == r->fork.tid)
			err = ranks_fork(c, r->fork.pid, r->fork.ppid);
		break;
	case REC_EXIT:
		/* while the process's mappings are still known */
		if (r->fork.pid == r->fork.tid)
			err = flush_deferred(c, r->fork.pid, false);
		if (!err)
			err = symbolizer__exit(c->sym, r->fork.pid, r->fork.tid);
		if (!err)
			err = offcpu_task(&c->off, r->fork.tid, true);
		calls_thread_exit(&c->calls, r->fork.tid);
		break;
	case REC_SWITCH:
		err = offcpu_switch(&c->off, &r->sw);
		break;
	case REC_LOST:
		c->st.lost += r->lost.lost;
		break;
	default:
		break;
	}
	if (err == -ENOMEM)
		return err;
	if (err) {
		/* the rest of the recording goes on; what was dropped is counted */
		enum collect_drop k = drop_kind(r);

		if (!c->st.dropped[k]++)
			c->st.drop_err[k] = err;
	}
	return 0;
}

int collector__finish(struct collector *c, uint64_t end_time)
{
	int err, e;

	if (end_time < c->st.last_time)
		end_time = c->st.last_time;
	err = offcpu_finish(&c->off, end_time);
	if (!err && end_time > c->st.last_time)
		c->st.last_time = end_time;
	e = flush_deferred(c, 0, false);
	if (!err)
		err = e;
	c->st.truncated = c->sb.truncated;
	calls_finish(&c->calls);
	e = frames_name_deferred(&c->fr);
	return err ? err : e;
}

int collector__pending(struct collector *c, const struct pf_sample **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!c->nr_deferred)
		return 0;
	if (!c->pending && !(c->pending = calloc(DEFER_MAX, sizeof(*c->pending))))
		return -ENOMEM;
	/*
	 * Each is unwound once here (the next syncs reuse it): what was known
	 * then, a stack cut where its caller was not known yet, which is what a
	 * kill at that moment would leave. Once for all: unwinding the MLP's
	 * 650 kept samples took 1-21 ms a sync (measured).
	 */
	for (size_t i = 0; i < c->nr_deferred; i++) {
		struct deferred *d = &c->deferred[i];

		if (!d->unwound) {
			enum stack_end end;
			int64_t stack = build_stack(&c->sb, &d->s, &end);
			int err =
				stack < 0 ? (int)stack : oncpu_sample(c, &d->s, stack, &d->as_now);

			if (err)
				return err;
			d->unwound = true;
		}
		c->pending[i] = d->as_now;
	}
	*out = c->pending;
	*n = c->nr_deferred;
	return 0;
}

bool collector__journal_loc(void *c, uint32_t frame, struct pf_journal_loc *loc)
{
	struct collector *col = c;

	return frames_journal_loc(&col->fr, frame, loc);
}
