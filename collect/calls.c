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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct open_call {
	uint64_t time, sp;
	uint64_t ra; /* the return address at sp when the call was entered, 0 if not copied */
	uint64_t ip; /* where it was entered: the probed instruction */
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
	u64map_init(&cl->tramps);
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
	u64map_free(&cl->tramps);
	free(cl->copy);
	cl->copy = NULL;
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
	uint64_t sp, ra = 0;

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
	/*
	 * The entry probe's sample is taken before the return probe's
	 * trampoline replaces the return address: the copy, from sp up, has it.
	 */
	if (s->stack_size >= 8)
		memcpy(&ra, s->stack, 8);
	cs->v[cs->n++] = (struct open_call){ .time = s->time,
					     .sp = sp,
					     .ra = ra,
					     .ip = s->uregs.mask >> PERF_REG_X86_IP & 1
							   ? s->uregs.regs[PERF_REG_X86_IP]
							   : s->ip,
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

/* A process without a [uprobes] page is looked at again after this long. */
#define CALLS_TRAMP_RECHECK_NS 10000000ull
/* At most this many bytes pushed by a return trampoline (its saved registers). */
#define CALLS_TRAMP_PUSHED 32

/*
 * Where pid's return probes return through: the start of its [uprobes]
 * mapping (the trampoline is its first slot), 0 when it has none yet (the
 * kernel maps it at the first probe hit, and not at all while it emulates
 * the probed instructions). Read from /proc once found; while not found,
 * at most every CALLS_TRAMP_RECHECK_NS of the samples' time (an odd value
 * in tramps: when it was last not found).
 */
static uint64_t trampoline_of(struct calls *cl, uint32_t pid, uint64_t now)
{
	char path[64], line[512];
	uint64_t v = 0, lo;
	FILE *f;

	if (u64map_get(&cl->tramps, pid, &v) && v) {
		if (!(v & 1))
			return v;
		if (now < (v & ~1ull) + CALLS_TRAMP_RECHECK_NS)
			return 0;
		v = 0;
	}
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);

		if (n >= 10 && !strcmp(line + n - 10, "[uprobes]\n") &&
		    sscanf(line, "%" SCNx64 "-", &lo) == 1) {
			v = lo;
			break;
		}
	}
	fclose(f);
	if (u64map_put(&cl->tramps, pid, v ? v : now | 1) || (v & 1))
		return 0;
	return v;
}

/*
 * A sample taken while the thread's user ip is in its [uprobes] page (at
 * tramp): the kernel steps a probed instruction there, out of line, or the
 * thread returns through the trampoline. Neither is code any unwinder
 * knows. Which one, and where the thread really is, follows from its
 * newest open call c, whose entry sample saw the probed instruction's
 * address and the return address:
 * - sp just above c's return address: the call has returned into the
 *   trampoline, which has not run yet; the thread is at that address.
 * - sp at c's return address, or a word below it (the stepped instruction
 *   was a push), and the return address's slot holds the trampoline or
 *   the return address itself: the probed instruction is being stepped,
 *   and the thread is at c's entry, its other registers untouched (a push
 *   or a stack adjustment changes none).
 * - sp a few words below, the slot overwritten: the trampoline has pushed
 *   the registers its system call keeps (kernels since 6.11 return
 *   through the uretprobe system call); the thread is at the return
 *   address, sp just above it.
 * Anything else is left as it is. Returns the offset in the copy where
 * the thread's stack starts (sp there), with *ip set; -1 when left.
 */
static int out_of_line(const struct open_call *c, const struct rec_sample *s, uint64_t sp,
		       uint64_t tramp, uint64_t *ip)
{
	uint64_t d, w;

	if (!c->ra)
		return -1;
	if (sp == c->sp + 8) {
		*ip = c->ra;
		return 0;
	}
	if (sp > c->sp || (d = c->sp - sp) > CALLS_TRAMP_PUSHED || !c->ip || s->stack_size < d + 16)
		return -1;
	memcpy(&w, s->stack + d, 8);
	if (w != tramp && w != c->ra) {
		*ip = c->ra;
		return (int)d + 8;
	}
	if (d > 8)
		return -1;
	*ip = c->ip;
	return (int)d;
}

bool calls_put_back(struct calls *cl, const struct rec_sample *s, struct rec_sample *out)
{
	/* every sample comes here: no look-up while no call is open anywhere */
	struct call_stack *cs = cl->threads.len ? stack_of(cl, s->tid, false) : NULL;
	uint64_t sp, tramp = 0, w, uip;
	bool copied = false;
	int shift = -1;

	if (!cs || !cs->n || s->stack_size < 8 || !sample_sp(s, &sp))
		return false;
	if (s->uregs.mask >> PERF_REG_X86_IP & 1) {
		uip = s->uregs.regs[PERF_REG_X86_IP];
		/* the kernel's XOL area: one page */
		if ((tramp = trampoline_of(cl, s->pid, s->time)) && uip >= tramp &&
		    uip - tramp < (uint64_t)getpagesize())
			shift = out_of_line(&cs->v[cs->n - 1], s, sp, tramp, &uip);
	}
	for (size_t i = 0; i < cs->n; i++) {
		const struct open_call *c = &cs->v[i];

		/* its return address's slot, in the copy */
		if (!c->ra || c->sp < sp || c->sp - sp > s->stack_size - 8)
			continue;
		memcpy(&w, s->stack + (c->sp - sp), 8);
		if (w == c->ra)
			continue; /* an entry probe alone, or no trampoline there */
		if (!tramp && !(tramp = trampoline_of(cl, s->pid, s->time)))
			return false;
		if (w != tramp)
			continue; /* the call's frame is gone (longjmp): left as it is */
		if (!copied) {
			if (grow_array((void **)&cl->copy, &cl->copy_cap, s->stack_size, 1))
				return false;
			memcpy(cl->copy, s->stack, s->stack_size);
			*out = *s;
			out->stack = cl->copy;
			copied = true;
		}
		memcpy(cl->copy + (c->sp - sp), &c->ra, 8);
	}
	if (shift < 0)
		return copied;
	if (!copied) {
		*out = *s;
		copied = true;
	}
	out->uregs.regs[PERF_REG_X86_IP] = uip;
	if (s->user)
		out->ip = uip;
	out->uregs.regs[PERF_REG_X86_SP] = sp + (uint64_t)shift;
	out->stack += shift;
	out->stack_size -= (uint64_t)shift;
	return copied;
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
