/* SPDX-License-Identifier: MIT */
#include "pipeline.h"

#include <asm/perf_regs.h>
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
	u64map_init(&pl->str_ids);
	u64map_init(&pl->offcpu_idx);
	u64map_init(&pl->loc_frames);
	u64map_init(&pl->kernel_frames);
	pl->max_stack = read_max_stack();
	return 0;
}

void pipeline__exit(struct pipeline *pl)
{
	u64map_free(&pl->comms);
	u64map_free(&pl->str_ids);
	u64map_free(&pl->offcpu_idx);
	u64map_free(&pl->loc_frames);
	u64map_free(&pl->kernel_frames);
	free(pl->ot);
	free(pl->frames);
	free(pl->locs);
}

int pipeline__set_comm(struct pipeline *pl, uint32_t tid, const char *comm)
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

/*
 * The profile's id of a symbolizer string. Those strings are interned by the
 * symbolizer and live as long as it, so their addresses are cached; only a
 * name formatted into the frame's own buffer is hashed each time.
 */
static int64_t string_id(struct pipeline *pl, const char *str, const struct sym_frame *sf)
{
	bool stable = !(str >= sf->buf && str < sf->buf + sizeof(sf->buf));
	uint64_t id;
	int64_t r;

	if (!str)
		return 0;
	if (stable && u64map_get(&pl->str_ids, (uint64_t)(uintptr_t)str, &id))
		return (int64_t)id;
	r = profile__string(pl->prof, str, strlen(str));
	if (r >= 0 && stable && u64map_put(&pl->str_ids, (uint64_t)(uintptr_t)str, (uint64_t)r))
		return -ENOMEM;
	return r;
}

static int64_t intern_frame(struct pipeline *pl, const struct sym_frame *sf)
{
	int64_t name = string_id(pl, sf->name, sf), module = string_id(pl, sf->module, sf);
	int64_t file = string_id(pl, sf->file, sf), build_id = string_id(pl, sf->build_id, sf);

	if (name < 0 || module < 0 || file < 0 || build_id < 0)
		return -ENOMEM;
	struct pf_frame f = {
		.name = (uint32_t)name,
		.module = (uint32_t)module,
		.kind = sf->kind,
		.file = (uint32_t)file,
		.line = sf->file ? sf->line : 0,
		.build_id = (uint32_t)build_id,
	};
	return profile__frame_full(pl->prof, &f);
}

static int push_id(struct pipeline *pl, size_t *n, int64_t id)
{
	if (id < 0)
		return (int)id;
	if (grow_array((void **)&pl->frames, &pl->frames_scratch_cap, *n + 1, sizeof(*pl->frames)))
		return -ENOMEM;
	pl->frames[(*n)++] = (uint32_t)id;
	return 0;
}

static int push_frame(struct pipeline *pl, size_t *n, const struct sym_frame *sf)
{
	return push_id(pl, n, intern_frame(pl, sf));
}

#define LOC_OFFSET_BITS 40

/*
 * The placeholder frame of an address in a module file, named in
 * pipeline__finish; -ENOENT when the address is not in one (or its offset
 * is beyond what a key holds): name it now.
 */
static int64_t deferred_frame(struct pipeline *pl, uint32_t pid, uint64_t ip, bool kernel,
			      bool return_addr)
{
	struct u64map *map = &pl->loc_frames;
	struct sym_loc loc;
	uint64_t key, id;
	int64_t r;

	if (!symbolizer__locate(pl->sym, pid, ip, kernel, return_addr, &loc))
		return -ENOENT;
	if (loc.module == SYM_LOC_KERNEL) {
		map = &pl->kernel_frames;
		key = loc.offset;
	} else if (loc.offset >> LOC_OFFSET_BITS || loc.module >> (64 - LOC_OFFSET_BITS)) {
		return -ENOENT;
	} else {
		key = (uint64_t)loc.module << LOC_OFFSET_BITS | loc.offset;
	}
	if (u64map_get(map, key, &id))
		return (int64_t)id;
	if (pl->nr_locs >= UINT32_MAX - 1 ||
	    grow_array((void **)&pl->locs, &pl->locs_cap, pl->nr_locs + 1, sizeof(*pl->locs)))
		return -ENOMEM;
	struct pf_frame f = { .kind = FRAME_SPECIAL, .line = (uint32_t)pl->nr_locs + 1 };
	r = profile__frame_full(pl->prof, &f);
	if (r < 0)
		return r;
	if (u64map_put(map, key, (uint64_t)r))
		return -ENOMEM;
	pl->locs[pl->nr_locs++] = loc;
	return r;
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
	int64_t id = deferred_frame(pl, pid, ip, kernel, return_addr);
	size_t k;

	if (id != -ENOENT)
		return push_id(pl, n, id);
	k = symbolizer__resolve_inline(pl->sym, pid, ip, kernel, return_addr, sf,
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
			  size_t *addrs, uint64_t *last_user)
{
	bool kernel = !s->user, first_in_ctx = true;

	*addrs = 0;
	*last_user = 0;
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
		if (!kernel)
			*last_user = ip;
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

/* A stack cut for `end`: its visible placeholder root. */
static int push_cut(struct pipeline *pl, size_t *n, enum stack_end end)
{
	if (end == STACK_END_COMPLETE)
		return 0;
	if (end == STACK_END_JIT)
		return special_frame(pl, n, "[JIT caller not recovered]");
	pl->truncated++;
	return special_frame(pl, n, "[truncated]");
}

static enum stack_end stack_end_of(enum unwind_end end)
{
	switch (end) {
	case UNWIND_END_ROOT:
		return STACK_END_COMPLETE;
	case UNWIND_END_COPY:
		return STACK_END_COPY;
	case UNWIND_END_DEPTH:
		return STACK_END_DEPTH;
	case UNWIND_END_JIT_NO_CALLER:
		return STACK_END_JIT;
	default:
		return STACK_END_ERROR;
	}
}

/*
 * User frames from the copied stack, and how they ended; *done false if
 * there was nothing to unwind (*how then says why).
 */
static int push_unwound(struct pipeline *pl, size_t *n, const struct rec_sample *s, bool *done,
			enum stack_end *how)
{
	uint64_t ips[PIPELINE_MAX_DEPTH];
	enum unwind_end end = UNWIND_END_ERROR;
	int k, err;

	*done = false;
	*how = STACK_END_NO_USER;
	if (!s->uregs.abi || !s->stack_size)
		return 0;
	k = symbolizer__unwind(pl->sym, s->pid, s->uregs.regs, s->uregs.mask, s->stack,
			       s->stack_size, ips, PIPELINE_MAX_DEPTH, &end);
	*how = STACK_END_ERROR;
	if (k <= 0)
		return k == -ENOMEM ? k : 0; /* fall back to the kernel's user callchain */
	*done = true;
	for (int i = 0; i < k; i++) {
		err = push_addr(pl, n, s->pid, ips[i], false, i > 0);
		if (err)
			return err;
	}
	*how = stack_end_of(end);
	return push_cut(pl, n, *how);
}

/*
 * Builds the sample's stack into the profile and notes how it ended. The
 * result is the stack id, or a negative errno.
 */
static int64_t build_stack(struct pipeline *pl, const struct rec_sample *s)
{
	enum stack_end end = STACK_END_COMPLETE;
	size_t n = 0, addrs = 0;
	uint64_t last_user;
	bool unwound = false;
	int64_t stack = 0;
	int err;

	if (s->uregs.abi) {
		/* DWARF mode: the kernel part of the chain, then the unwound user frames */
		err = push_callchain(pl, &n, s, false, &addrs, &last_user);
		if (!err)
			err = push_unwound(pl, &n, s, &unwound, &end);
		if (!err && !unwound) {
			/*
			 * The kernel did not walk user frames, so the chain holds
			 * none. Keep where the thread was in user space, marked cut.
			 */
			err = push_addr(pl, &n, s->pid, s->uregs.regs[PERF_REG_X86_IP], false,
					false);
			if (!err)
				err = push_cut(pl, &n, end);
		}
	} else {
		/* frame-pointer mode, or nothing to unwind: the kernel's chain, whole */
		err = push_callchain(pl, &n, s, true, &addrs, &last_user);
		if (!err && addrs == 0)
			err = push_addr(pl, &n, s->pid, s->ip, !s->user, false);
		/*
		 * The kernel stops a chain at perf_event_max_stack entries (its
		 * root is missing) and a user part where the frame pointers end:
		 * whole only if that is a thread's outermost frame. A chain with
		 * no user part is a kernel thread's, whole.
		 */
		if (addrs >= pl->max_stack)
			end = STACK_END_DEPTH;
		else if (last_user && !symbolizer__outermost(pl->sym, s->pid, last_user))
			end = STACK_END_FP;
		if (!err && end == STACK_END_DEPTH)
			err = push_cut(pl, &n, end);
	}
	if (err)
		return err;
	for (size_t i = n; i-- > 0;) {
		stack = profile__stack(pl->prof, (uint32_t)stack, pl->frames[i]);
		if (stack < 0)
			return stack;
	}
	profile__set_stack_end(pl->prof, (uint32_t)stack, end);
	return stack;
}

/* ---- off-CPU time: context switches -------------------------------------- */

static struct offcpu_thread *ot_of(struct pipeline *pl, uint32_t tid)
{
	uint64_t i;

	if (u64map_get(&pl->offcpu_idx, tid, &i))
		return &pl->ot[i];
	if (grow_array((void **)&pl->ot, &pl->ot_cap, pl->nr_ot + 1, sizeof(*pl->ot)))
		return NULL;
	if (u64map_put(&pl->offcpu_idx, tid, pl->nr_ot))
		return NULL;
	memset(&pl->ot[pl->nr_ot], 0, sizeof(*pl->ot));
	return &pl->ot[pl->nr_ot++];
}

/* A stack of one special frame, for blocks whose real stack is not known. */
static int64_t special_stack(struct pipeline *pl, const char *name)
{
	size_t n = 0;
	int64_t stack;
	int err = special_frame(pl, &n, name);

	if (err)
		return err;
	stack = profile__stack(pl->prof, 0, pl->frames[0]);
	if (stack > 0)
		profile__set_stack_end(pl->prof, (uint32_t)stack, STACK_END_NOT_SAMPLED);
	return stack;
}

static int add_block(struct pipeline *pl, uint32_t thread, uint32_t stack, uint64_t from,
		     uint64_t to, bool runqueue)
{
	struct pf_sample smp = {
		.time = from,
		.weight = to - from,
		.stack = stack,
		.thread = thread,
		.kind = runqueue ? SAMPLE_RUNQUEUE : SAMPLE_OFFCPU,
	};

	if (to <= from)
		return 0;
	pl->offcpu_samples++;
	pl->offcpu_end_ns[profile__stack_end(pl->prof, stack)] += smp.weight;
	if (runqueue)
		pl->runq_ns += smp.weight;
	else
		pl->offcpu_ns += smp.weight;
	return profile__add_sample(pl->prof, &smp);
}

/* A context-switch sample: the stack a thread is leaving the CPU with. */
static int on_switch_sample(struct pipeline *pl, const struct rec_sample *s)
{
	struct offcpu_thread *t = ot_of(pl, s->tid);
	int64_t stack, thread;

	if (!t)
		return -ENOMEM;
	t->seen = true;
	if (t->dead)
		return 0;
	stack = build_stack(pl, s);
	if (stack < 0)
		return (int)stack;
	thread = thread_of(pl, s->pid, s->tid);
	if (thread < 0)
		return (int)thread;
	t->stack = (uint32_t)stack;
	t->thread = (uint32_t)thread;
	t->has_stack = true;
	return 0;
}

/*
 * PERF_RECORD_SWITCH. Out: the block starts, with the stack of the sample
 * the same switch wrote just before. In: it ends and is charged. A switch-in
 * with no switch-out before it is a thread that was blocked when an attach
 * began (charged from the start), or one just created (nothing to charge).
 */
static int on_switch(struct pipeline *pl, const struct rec_switch *sw)
{
	struct offcpu_thread *t = ot_of(pl, sw->tid);
	int64_t stack, thread;
	bool first;

	if (!t)
		return -ENOMEM;
	first = !t->seen;
	t->seen = true;
	if (t->dead)
		return 0;
	if (sw->out) {
		if (!t->has_stack) {
			stack = special_stack(pl, NO_STACK_FRAME);
			thread = thread_of(pl, sw->pid, sw->tid);
			if (stack < 0 || thread < 0)
				return (int)(stack < 0 ? stack : thread);
			t->stack = (uint32_t)stack;
			t->thread = (uint32_t)thread;
		}
		t->out = true;
		t->out_time = sw->time;
		t->preempt = sw->preempt;
		t->has_stack = false;
		return 0;
	}
	t->has_stack = false;
	if (t->out) {
		t->out = false;
		return add_block(pl, t->thread, t->stack, t->out_time, sw->time, t->preempt);
	}
	if (!first || !pl->start_time) {
		pl->switch_unmatched += !first;
		return 0;
	}
	stack = t->has_before_stack ? t->before_stack : special_stack(pl, BLOCKED_BEFORE_FRAME);
	thread = thread_of(pl, sw->pid, sw->tid);
	if (stack < 0 || thread < 0)
		return (int)(stack < 0 ? stack : thread);
	return add_block(pl, (uint32_t)thread, (uint32_t)stack, pl->start_time, sw->time, false);
}

/* A thread created while recording was not blocked before; one that exited is done. */
static int offcpu_task(struct pipeline *pl, uint32_t tid, bool exited)
{
	struct offcpu_thread *t;
	uint64_t i;

	if (u64map_get(&pl->offcpu_idx, tid, &i))
		t = &pl->ot[i];
	else if (exited || !pl->start_time)
		return 0;
	else if (!(t = ot_of(pl, tid)))
		return -ENOMEM;
	if (exited) {
		t->dead = true;
		t->out = false;
	} else {
		/* a new thread, or a tid reused after its thread exited */
		memset(t, 0, sizeof(*t));
		t->seen = true;
	}
	return 0;
}

int pipeline__attached_thread(struct pipeline *pl, uint32_t pid, uint32_t tid, bool blocked,
			      uint64_t pc, const char *wchan)
{
	struct offcpu_thread *t = ot_of(pl, tid);
	int64_t stack = 0, thread;
	size_t n = 0;
	int err = 0;

	if (!t)
		return -ENOMEM;
	thread = thread_of(pl, pid, tid);
	if (thread < 0)
		return (int)thread;
	t->attached = true;
	t->blocked_at_start = blocked;
	t->thread = (uint32_t)thread;
	/* leaf first: the kernel function it waits in, where it called the kernel, the marker */
	if (wchan && *wchan && strcmp(wchan, "0")) {
		struct sym_frame sf = { .name = wchan,
					.module = "[kernel.kallsyms]",
					.kind = FRAME_KERNEL };

		err = push_frame(pl, &n, &sf);
	}
	if (!err && pc)
		err = push_addr(pl, &n, pid, pc, false, false);
	if (!err)
		err = special_frame(pl, &n, BLOCKED_BEFORE_FRAME);
	for (size_t i = n; i-- > 0 && !err;) {
		stack = profile__stack(pl->prof, (uint32_t)stack, pl->frames[i]);
		if (stack < 0)
			err = (int)stack;
	}
	if (err)
		return err;
	profile__set_stack_end(pl->prof, (uint32_t)stack, STACK_END_NOT_SAMPLED);
	t->before_stack = (uint32_t)stack;
	t->has_before_stack = true;
	return 0;
}

/* profile_expand_fn: a placeholder becomes its frames, root-first; the rest stay. */
static int name_deferred(void *ctx, uint32_t frame, uint32_t *out, size_t max)
{
	struct pipeline *pl = ctx;
	const struct pf_frame *f = profile__get_frame(pl->prof, frame);
	struct sym_frame sf[PIPELINE_MAX_INLINE];
	size_t k;

	if (f->kind != FRAME_SPECIAL || f->name || !f->line || f->line > pl->nr_locs) {
		out[0] = frame;
		return 1;
	}
	k = symbolizer__resolve_loc(pl->sym, &pl->locs[f->line - 1], sf,
				    max < PIPELINE_MAX_INLINE ? max : PIPELINE_MAX_INLINE);
	for (size_t i = 0; i < k; i++) {
		int64_t id = intern_frame(pl, &sf[i]);

		if (id < 0)
			return (int)id;
		out[k - 1 - i] = (uint32_t)id;
	}
	return (int)k;
}

int pipeline__finish(struct pipeline *pl, uint64_t end_time)
{
	int err = 0;

	if (end_time < pl->last_time)
		end_time = pl->last_time;
	for (size_t i = 0; i < pl->nr_ot && !err; i++) {
		struct offcpu_thread *t = &pl->ot[i];

		if (t->out && !t->dead)
			err = add_block(pl, t->thread, t->stack, t->out_time, end_time, t->preempt);
		/* sleeping when the attach began, and not one record since: blocked throughout */
		else if (t->attached && t->blocked_at_start && !t->seen && !t->dead &&
			 t->has_before_stack && pl->start_time)
			err = add_block(pl, t->thread, t->before_stack, pl->start_time, end_time,
					false);
		t->out = false;
		t->seen = true;
	}
	if (!err && end_time > pl->last_time)
		pl->last_time = end_time;
	if (pl->nr_locs) {
		int e = profile__expand_frames(pl->prof, name_deferred, pl);

		pl->nr_locs = 0;
		u64map_free(&pl->loc_frames);
		u64map_init(&pl->loc_frames);
		u64map_free(&pl->kernel_frames);
		u64map_init(&pl->kernel_frames);
		if (!err)
			err = e;
	}
	return err;
}

static int on_sample(struct pipeline *pl, const struct rec_sample *s)
{
	int64_t thread, stack;

	if (s->event == EV_SWITCH)
		return on_switch_sample(pl, s);
	if (pl->start_time) {
		/* attach: a thread seen running was not blocked before the start */
		struct offcpu_thread *t = ot_of(pl, s->tid);

		if (!t)
			return -ENOMEM;
		t->seen = true;
	}
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
	pl->oncpu_ends[profile__stack_end(pl->prof, (uint32_t)stack)]++;
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
	case REC_MMAP2: {
		struct sym_file_id id = {
			.maj = r->mmap2.maj,
			.min = r->mmap2.min,
			.ino = r->mmap2.ino,
		};

		if (r->mmap2.has_build_id && r->mmap2.build_id_size <= sizeof(id.build_id)) {
			id.build_id_size = r->mmap2.build_id_size;
			memcpy(id.build_id, r->mmap2.build_id, id.build_id_size);
		}
		err = symbolizer__mmap_id(pl->sym, r->mmap2.pid, r->mmap2.addr, r->mmap2.len,
					  r->mmap2.pgoff, r->mmap2.prot, r->mmap2.filename, &id);
		break;
	}
	case REC_COMM:
		err = pipeline__set_comm(pl, r->comm.tid, r->comm.comm);
		if (!err)
			err = symbolizer__comm(pl->sym, r->comm.pid, r->comm.tid, r->comm.exec);
		break;
	case REC_FORK:
		/* a new thread or process starts with its parent thread's name */
		if (u64map_get(&pl->comms, r->fork.ptid, &comm))
			err = u64map_put(&pl->comms, r->fork.tid, comm);
		if (!err)
			err = symbolizer__fork(pl->sym, r->fork.pid, r->fork.ppid);
		if (!err)
			err = offcpu_task(pl, r->fork.tid, false);
		break;
	case REC_EXIT:
		err = symbolizer__exit(pl->sym, r->fork.pid, r->fork.tid);
		if (!err)
			err = offcpu_task(pl, r->fork.tid, true);
		break;
	case REC_SWITCH:
		err = on_switch(pl, &r->sw);
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
