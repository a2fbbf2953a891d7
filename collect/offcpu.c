/* SPDX-License-Identifier: MIT */
/*
 * Off-CPU time from context switches (no BPF). A context-switch sample gives
 * the stack a thread leaves the CPU with; PERF_RECORD_SWITCH out says when
 * and whether it was preempted (runnable, waiting for a CPU: runqueue time,
 * kept apart), switch in says when it runs again, and the time between is
 * charged to that stack. A thread still out when recording ends is charged
 * up to the end; one that exits is not charged past its exit. Attached
 * threads blocked before the recording began are charged from its start.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void offcpu_init(struct offcpu *o)
{
	u64map_init(&o->idx);
	o->ot = NULL;
	o->nr_ot = o->ot_cap = 0;
}

void offcpu_exit(struct offcpu *o)
{
	u64map_free(&o->idx);
	free(o->ot);
}

static struct offcpu_thread *ot_of(struct offcpu *o, uint32_t tid)
{
	uint64_t i;

	if (u64map_get(&o->idx, tid, &i))
		return &o->ot[i];
	if (grow_array((void **)&o->ot, &o->ot_cap, o->nr_ot + 1, sizeof(*o->ot)))
		return NULL;
	if (u64map_put(&o->idx, tid, o->nr_ot))
		return NULL;
	memset(&o->ot[o->nr_ot], 0, sizeof(*o->ot));
	return &o->ot[o->nr_ot++];
}

static int add_block(struct offcpu *o, uint32_t thread, uint32_t stack, uint64_t from, uint64_t to,
		     bool runqueue)
{
	struct pf_sample smp = {
		.time = from,
		.weight = to - from,
		.stack = stack,
		.thread = thread,
		.kind = runqueue ? SAMPLE_RUNQUEUE : SAMPLE_OFFCPU,
	};
	int err;

	if (to <= from)
		return 0;
	err = profile__add_sample(o->prof, &smp);
	if (err)
		return err;
	o->st->offcpu_samples++;
	if (runqueue)
		o->st->runq_ns += smp.weight;
	else
		o->st->offcpu_ns += smp.weight;
	o->st->offcpu_end_ns[profile__stack_end(o->prof, stack)] += smp.weight;
	return 0;
}

int offcpu_running(struct offcpu *o, uint32_t tid)
{
	struct offcpu_thread *t;

	if (!o->start_time)
		return 0;
	t = ot_of(o, tid);
	if (!t)
		return -ENOMEM;
	t->seen = true;
	return 0;
}

int offcpu_switch_sample(struct offcpu *o, const struct rec_sample *s)
{
	struct offcpu_thread *t = ot_of(o, s->tid);
	enum stack_end end;
	int64_t stack, thread;

	if (!t)
		return -ENOMEM;
	t->seen = true;
	if (t->dead)
		return 0;
	stack = build_stack(o->sb, s, &end);
	if (stack < 0)
		return (int)stack;
	thread = threads_id(o->th, s->pid, s->tid);
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
int offcpu_switch(struct offcpu *o, const struct rec_switch *sw)
{
	struct offcpu_thread *t = ot_of(o, sw->tid);
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
			stack = special_stack(o->fr, NO_STACK_FRAME);
			thread = threads_id(o->th, sw->pid, sw->tid);
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
		return add_block(o, t->thread, t->stack, t->out_time, sw->time, t->preempt);
	}
	if (!first || !o->start_time) {
		o->st->switch_unmatched += !first;
		return 0;
	}
	stack = t->has_before_stack ? t->before_stack : special_stack(o->fr, BLOCKED_BEFORE_FRAME);
	thread = threads_id(o->th, sw->pid, sw->tid);
	if (stack < 0 || thread < 0)
		return (int)(stack < 0 ? stack : thread);
	return add_block(o, (uint32_t)thread, (uint32_t)stack, o->start_time, sw->time, false);
}

int offcpu_task(struct offcpu *o, uint32_t tid, bool exited)
{
	struct offcpu_thread *t;
	uint64_t i;

	if (u64map_get(&o->idx, tid, &i))
		t = &o->ot[i];
	else if (exited || !o->start_time)
		return 0;
	else if (!(t = ot_of(o, tid)))
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

int offcpu_attached(struct offcpu *o, uint32_t pid, uint32_t tid, bool blocked, uint64_t pc,
		    const char *wchan)
{
	struct offcpu_thread *t = ot_of(o, tid);
	int64_t stack, thread;
	int err = 0;

	if (!t)
		return -ENOMEM;
	thread = threads_id(o->th, pid, tid);
	if (thread < 0)
		return (int)thread;
	t->attached = true;
	t->blocked_at_start = blocked;
	t->thread = (uint32_t)thread;
	/* leaf first: the kernel function it waits in, where it called the kernel, the marker */
	frames_reset(o->fr);
	if (wchan && *wchan && strcmp(wchan, "0")) {
		struct sym_frame sf = { .name = wchan,
					.module = "[kernel.kallsyms]",
					.kind = FRAME_KERNEL };

		err = frames_push_named(o->fr, &sf);
	}
	if (!err && pc)
		err = frames_push_addr(o->fr, pid, pc, false, false);
	if (!err)
		err = frames_push_special(o->fr, BLOCKED_BEFORE_FRAME);
	if (err)
		return err;
	stack = frames_stack(o->fr);
	if (stack < 0)
		return (int)stack;
	profile__set_stack_end(o->prof, (uint32_t)stack, STACK_END_NOT_SAMPLED);
	t->before_stack = (uint32_t)stack;
	t->has_before_stack = true;
	return 0;
}

int offcpu_finish(struct offcpu *o, uint64_t end_time)
{
	int err = 0;

	for (size_t i = 0; i < o->nr_ot && !err; i++) {
		struct offcpu_thread *t = &o->ot[i];

		if (t->out && !t->dead)
			err = add_block(o, t->thread, t->stack, t->out_time, end_time, t->preempt);
		/* sleeping when the attach began, and not one record since: blocked throughout */
		else if (t->attached && t->blocked_at_start && !t->seen && !t->dead &&
			 t->has_before_stack && o->start_time)
			err = add_block(o, t->thread, t->before_stack, o->start_time, end_time,
					false);
		t->out = false;
		t->seen = true;
	}
	return err;
}
