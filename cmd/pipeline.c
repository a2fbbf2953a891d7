/* SPDX-License-Identifier: MIT */
#include "pipeline.h"

#include <errno.h>
#include <linux/perf_event.h>
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

int pipeline__init(struct pipeline *pl, struct profile *prof, struct symbolizer *sym)
{
	memset(pl, 0, sizeof(*pl));
	pl->prof = prof;
	pl->sym = sym;
	u64map_init(&pl->comms);
	pl->max_stack = read_max_stack();
	return 0;
}

void pipeline__exit(struct pipeline *pl)
{
	u64map_free(&pl->comms);
	free(pl->frames);
}

static int set_comm(struct pipeline *pl, uint32_t tid, const char *comm)
{
	int64_t id = profile__string(pl->prof, comm, strnlen(comm, 64));

	if (id < 0)
		return (int)id;
	return u64map_put(&pl->comms, tid, (uint64_t)id);
}

static int64_t thread_of(struct pipeline *pl, uint32_t pid, uint32_t tid)
{
	uint64_t comm;

	if (!u64map_get(&pl->comms, tid, &comm)) {
		/* a thread we saw no COMM or FORK for: name it after its tid */
		char buf[32];
		int n = snprintf(buf, sizeof(buf), "[tid %u]", tid);
		int64_t id = profile__string(pl->prof, buf, (size_t)n);
		if (id < 0)
			return id;
		comm = (uint64_t)id;
	}
	return profile__thread(pl->prof, pid, tid, (uint32_t)comm);
}

static int push_frame(struct pipeline *pl, size_t *n, const struct sym_frame *sf)
{
	int64_t id = profile__frame_str(pl->prof, sf->name, sf->module, sf->kind);

	if (id < 0)
		return (int)id;
	if (grow_array((void **)&pl->frames, &pl->frames_scratch_cap, *n + 1, sizeof(*pl->frames)))
		return -ENOMEM;
	pl->frames[(*n)++] = (uint32_t)id;
	return 0;
}

static int special_frame(struct pipeline *pl, size_t *n, const char *name)
{
	struct sym_frame sf = { .name = name, .module = "", .kind = FRAME_SPECIAL };

	return push_frame(pl, n, &sf);
}

/* One address -> its frames (inline levels first, then the function). */
static int push_addr(struct pipeline *pl, size_t *n, uint32_t pid, uint64_t ip, bool kernel,
		     bool return_addr)
{
	struct sym_frame sf[PIPELINE_MAX_INLINE];
	size_t k = symbolizer__resolve_inline(pl->sym, pid, ip, kernel, return_addr, sf,
					      PIPELINE_MAX_INLINE);

	for (size_t i = 0; i < k; i++) {
		int err = push_frame(pl, n, &sf[i]);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Frames from the kernel's callchain. With user_too false, only the kernel
 * part is taken (DWARF mode: user frames come from the unwinder).
 * Returns the number of addresses seen in the chain.
 */
static int push_callchain(struct pipeline *pl, size_t *n, const struct rec_sample *s, bool user_too,
			  size_t *addrs)
{
	bool kernel = !s->user, first_in_ctx = true;

	*addrs = 0;
	for (uint64_t i = 0; i < s->nr; i++) {
		uint64_t ip = s->ips[i];
		int err;

		if (ip >= PERF_CONTEXT_MAX) {
			if (ip == PERF_CONTEXT_KERNEL)
				kernel = true;
			else if (ip == PERF_CONTEXT_USER)
				kernel = false;
			else
				kernel = true; /* hypervisor/guest: never a user address */
			first_in_ctx = true;
			continue;
		}
		(*addrs)++;
		if (!kernel && !user_too)
			continue;
		/* the first address of a context is where the thread was; the rest return there */
		err = push_addr(pl, n, s->pid, ip, kernel, !first_in_ctx);
		first_in_ctx = false;
		if (err)
			return err;
	}
	return 0;
}

/* User frames from the copied stack; false if there is nothing to unwind. */
static int push_unwound(struct pipeline *pl, size_t *n, const struct rec_sample *s, bool *done)
{
	uint64_t ips[PIPELINE_MAX_DEPTH];
	enum unwind_end end = UNWIND_END_TRUNCATED;
	int k, err;

	*done = false;
	if (!s->uregs.abi || !s->stack_size)
		return 0;
	k = symbolizer__unwind(pl->sym, s->pid, s->uregs.regs, s->uregs.mask, s->stack,
			       s->stack_size, ips, PIPELINE_MAX_DEPTH, &end);
	if (k <= 0)
		return k == -ENOMEM ? k : 0; /* fall back to the kernel's user callchain */
	*done = true;
	for (int i = 0; i < k; i++) {
		err = push_addr(pl, n, s->pid, ips[i], false, i > 0);
		if (err)
			return err;
	}
	if (end == UNWIND_END_JIT_NO_CALLER)
		return special_frame(pl, n, "[JIT caller not recovered]");
	if (end == UNWIND_END_TRUNCATED) {
		pl->truncated++;
		return special_frame(pl, n, "[truncated]");
	}
	return 0;
}

/*
 * Builds the sample's stack into the profile. The result is the stack id,
 * or a negative errno.
 */
static int64_t build_stack(struct pipeline *pl, const struct rec_sample *s)
{
	size_t n = 0, addrs = 0;
	bool unwound = false;
	int64_t stack = 0;
	int err;

	err = push_callchain(pl, &n, s, false, &addrs);
	if (!err)
		err = push_unwound(pl, &n, s, &unwound);
	if (!err && !unwound) {
		/* frame-pointer mode, or nothing to unwind: the kernel's chain, whole */
		n = 0;
		err = push_callchain(pl, &n, s, true, &addrs);
		if (!err && addrs == 0)
			err = push_addr(pl, &n, s->pid, s->ip, !s->user, false);
		/* the kernel stops a chain at perf_event_max_stack entries: its root is missing */
		if (!err && addrs >= pl->max_stack) {
			pl->truncated++;
			err = special_frame(pl, &n, "[truncated]");
		}
	}
	if (err)
		return err;
	for (size_t i = n; i-- > 0;) {
		stack = profile__stack(pl->prof, (uint32_t)stack, pl->frames[i]);
		if (stack < 0)
			return stack;
	}
	return stack;
}

static int on_sample(struct pipeline *pl, const struct rec_sample *s)
{
	int64_t thread, stack;

	stack = build_stack(pl, s);
	if (stack < 0)
		return (int)stack;
	thread = thread_of(pl, s->pid, s->tid);
	if (thread < 0)
		return (int)thread;

	struct pf_sample smp = {
		.time = s->time,
		.weight = s->period,
		.stack = (uint32_t)stack,
		.thread = (uint32_t)thread,
		.kind = SAMPLE_ONCPU,
	};
	pl->samples++;
	return profile__add_sample(pl->prof, &smp);
}

int pipeline__record(void *ctx, const struct rec *r)
{
	struct pipeline *pl = ctx;
	uint64_t comm;
	int err = 0;

	if (r->time) {
		if (!pl->first_time || r->time < pl->first_time)
			pl->first_time = r->time;
		if (r->time > pl->last_time)
			pl->last_time = r->time;
	}
	switch (r->type) {
	case REC_SAMPLE:
		err = on_sample(pl, &r->sample);
		break;
	case REC_MMAP2:
		err = symbolizer__mmap(pl->sym, r->mmap2.pid, r->mmap2.addr, r->mmap2.len,
				       r->mmap2.pgoff, r->mmap2.prot, r->mmap2.filename);
		break;
	case REC_COMM:
		err = set_comm(pl, r->comm.tid, r->comm.comm);
		if (!err)
			err = symbolizer__comm(pl->sym, r->comm.pid, r->comm.tid, r->comm.exec);
		break;
	case REC_FORK:
		/* a new thread or process starts with its parent thread's name */
		if (u64map_get(&pl->comms, r->fork.ptid, &comm))
			err = u64map_put(&pl->comms, r->fork.tid, comm);
		if (!err)
			err = symbolizer__fork(pl->sym, r->fork.pid, r->fork.ppid);
		break;
	case REC_EXIT:
		err = symbolizer__exit(pl->sym, r->fork.pid, r->fork.tid);
		break;
	case REC_LOST:
		pl->lost += r->lost.lost;
		break;
	default:
		break;
	}
	/* a symbolizer that cannot track one mapping still names the rest */
	if (err && err != -ENOMEM)
		err = 0;
	if (err && !pl->err)
		pl->err = err;
	return err;
}
