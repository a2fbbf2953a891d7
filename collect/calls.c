/* SPDX-License-Identifier: MIT */
/*
 * Probed calls: an entry uprobe's sample opens a call on its thread, the
 * matching return uprobe's closes it, and the call becomes one sample of
 * kind SAMPLE_CALL (time its entry, weight its duration, stack the one it
 * was called with).
 *
 * A return is matched by the stack pointer, not by order: at entry the
 * return address is on top of the stack, so the return fires with the
 * stack pointer one word above the entry's. Recursive calls each have
 * their own; calls left by longjmp (or by an exception unwinding through
 * them) are older entries deeper in the stack than a return that comes,
 * and are counted as never returned, never paired with the wrong return.
 * Calls still open when their thread exits or the recording ends are
 * counted likewise.
 */
#include <asm/perf_regs.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct open_call {
	uint64_t time, sp;
	uint32_t probe, stack, thread;
};

/* A thread's open calls, oldest first. */
struct call_stack {
	struct open_call *v;
	size_t n, cap;
};

/* Open calls per thread, beyond which a thread's oldest are dropped (counted). */
#define CALLS_MAX_OPEN 4096

void calls_init(struct calls *cl)
{
	u64map_init(&cl->threads);
}

static void drop_stack(struct calls *cl, uint64_t tid, bool count)
{
	uint64_t v;
	struct call_stack *cs;

	if (!u64map_get(&cl->threads, tid, &v))
		return;
	cs = (struct call_stack *)(uintptr_t)v;
	if (count)
		cl->st->calls_unfinished += cs->n;
	free(cs->v);
	free(cs);
	u64map_del(&cl->threads, tid);
}

void calls_exit(struct calls *cl)
{
	for (size_t i = 0; i < cl->threads.cap; i++) {
		struct call_stack *cs;

		if (cl->threads.keys[i] == UINT64_MAX)
			continue;
		cs = (struct call_stack *)(uintptr_t)cl->threads.vals[i];
		free(cs->v);
		free(cs);
	}
	u64map_free(&cl->threads);
}

static struct call_stack *stack_of(struct calls *cl, uint32_t tid, bool create)
{
	uint64_t v;
	struct call_stack *cs;

	if (u64map_get(&cl->threads, tid, &v))
		return (struct call_stack *)(uintptr_t)v;
	if (!create)
		return NULL;
	cs = calloc(1, sizeof(*cs));
	if (!cs || u64map_put(&cl->threads, tid, (uint64_t)(uintptr_t)cs)) {
		free(cs);
		return NULL;
	}
	return cs;
}

static bool sample_sp(const struct rec_sample *s, uint64_t *sp)
{
	if (!(s->uregs.mask >> PERF_REG_X86_SP & 1))
		return false;
	*sp = s->uregs.regs[PERF_REG_X86_SP];
	return true;
}

int calls_entry(struct calls *cl, const struct rec_sample *s, uint32_t probe)
{
	struct call_stack *cs;
	enum stack_end end;
	int64_t stack, thread;
	uint64_t sp;

	if (!sample_sp(s, &sp)) {
		cl->st->calls_unpaired++;
		return 0;
	}
	stack = build_stack(cl->sb, s, &end);
	if (stack < 0)
		return (int)stack;
	thread = threads_id(cl->th, s->pid, s->tid);
	if (thread < 0)
		return (int)thread;
	cs = stack_of(cl, s->tid, true);
	if (!cs)
		return -ENOMEM;
	if (cs->n == CALLS_MAX_OPEN) {
		/* runaway recursion without returns: the oldest goes, counted */
		memmove(cs->v, cs->v + 1, (cs->n - 1) * sizeof(*cs->v));
		cs->n--;
		cl->st->calls_unfinished++;
	}
	if (grow_array((void **)&cs->v, &cs->cap, cs->n + 1, sizeof(*cs->v)))
		return -ENOMEM;
	cs->v[cs->n++] = (struct open_call){ .time = s->time,
					     .sp = sp,
					     .probe = probe,
					     .stack = (uint32_t)stack,
					     .thread = (uint32_t)thread };
	cl->st->call_entries++;
	return 0;
}

int calls_return(struct calls *cl, const struct rec_sample *s, uint32_t probe)
{
	struct call_stack *cs = stack_of(cl, s->tid, false);
	uint64_t sp;
	size_t i;

	if (!cs || !sample_sp(s, &sp)) {
		cl->st->calls_unpaired++;
		return 0;
	}
	/* newest first: the call whose return address sat just below this sp */
	for (i = cs->n; i-- > 0;)
		if (cs->v[i].probe == probe && cs->v[i].sp + 8 == sp)
			break;
	if (i == SIZE_MAX) {
		cl->st->calls_unpaired++;
		return 0;
	}
	struct open_call c = cs->v[i];
	/* newer entries deeper in the stack were left without returning (longjmp) */
	for (size_t k = i + 1; k < cs->n; k++)
		if (cs->v[k].sp < sp)
			cl->st->calls_unfinished++;
	cs->n = i;
	if (s->time < c.time) {
		cl->st->calls_unpaired++;
		return 0;
	}
	struct pf_sample smp = {
		.time = c.time,
		.weight = s->time - c.time,
		.stack = c.stack,
		.thread = c.thread,
		.kind = SAMPLE_CALL,
	};
	cl->st->calls++;
	return profile__add_sample(cl->prof, &smp);
}

void calls_thread_exit(struct calls *cl, uint32_t tid)
{
	drop_stack(cl, tid, true);
}

void calls_finish(struct calls *cl)
{
	for (size_t i = 0; i < cl->threads.cap; i++) {
		struct call_stack *cs;

		if (cl->threads.keys[i] == UINT64_MAX)
			continue;
		cs = (struct call_stack *)(uintptr_t)cl->threads.vals[i];
		cl->st->calls_unfinished += cs->n;
		cs->n = 0;
	}
}
