/* SPDX-License-Identifier: MIT */
/*
 * DWARF: the user stack unwound by the symbolizer from the registers and
 * the stack copy the kernel took (PERF_SAMPLE_REGS_USER and STACK_USER),
 * through JIT code too.
 */
#include "internal.h"

#include <asm/perf_regs.h>
#include <errno.h>

static bool dwarf_applies(const struct rec_sample *s)
{
	return s->uregs.abi != 0;
}

static enum stack_end end_of(enum unwind_end end)
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
	case UNWIND_END_NOT_ENTRY:
		return STACK_END_NOT_ENTRY;
	case UNWIND_END_JIT_GUESSED:
		return STACK_END_JIT_GUESSED;
	default:
		return STACK_END_ERROR;
	}
}

/*
 * Where the sample's thread's stack ends, from its walk: raised by a walk
 * that reached the thread's entry; paused (the sampler told 0) by a walk
 * of a cut copy that did not, until a whole walk of an uncut copy.
 */
static void learn_top(struct frames *fr, const struct rec_sample *s, enum unwind_end how,
		      uint64_t reach)
{
	uint64_t v = 0, top;

	u64map_get(&fr->tops, s->tid, &v);
	top = v & ~TOP_PAUSED;
	if (how == UNWIND_END_ROOT && reach && (!s->stack_cut || !(v & TOP_PAUSED))) {
		/*
		 * The highest of its walks' reaches, which differ by a few words;
		 * but one beyond this copy, whose walk reached the thread's entry
		 * within it, was another stack's (before an exec, or of an
		 * earlier thread with the tid).
		 */
		if (top > s->uregs.regs[PERF_REG_X86_SP] &&
		    top - s->uregs.regs[PERF_REG_X86_SP] > s->stack_size)
			top = 0;
		if (reach <= top && !(v & TOP_PAUSED))
			return;
		top = reach > top ? reach : top;
		if (u64map_put(&fr->tops, s->tid, top))
			return; /* no memory: the sampler keeps whole copies */
		fr->top_cb(fr->top_ctx, s->tid, top);
	} else if (how != UNWIND_END_ROOT && s->stack_cut && !(v & TOP_PAUSED)) {
		/* without room to say so, the next whole walk does not tell it again: also safe */
		u64map_put(&fr->tops, s->tid, top | TOP_PAUSED);
		fr->top_cb(fr->top_ctx, s->tid, 0);
	}
}

static int dwarf_push_user(struct frames *fr, const struct rec_sample *s, uint32_t max_stack,
			   enum stack_end *end)
{
	uint64_t ips[COLLECT_MAX_DEPTH], sps[COLLECT_MAX_DEPTH];
	enum unwind_end how = UNWIND_END_ERROR;
	uint64_t reach = 0;
	int k = 0, err;

	*end = s->stack_dropped ? STACK_END_DROPPED : STACK_END_NO_USER;
	if (s->stack_size) {
		k = symbolizer__unwind_copy(fr->sym, s->pid, s->uregs.regs, s->uregs.mask, s->stack,
					    s->stack_size, s->stack_cut, ips, sps,
					    COLLECT_MAX_DEPTH, &how, &reach);
		if (k == -ENOMEM)
			return k;
		*end = STACK_END_ERROR;
		if (fr->top_cb)
			learn_top(fr, s, k > 0 ? how : UNWIND_END_ERROR, reach);
	}
	if (k <= 0) {
		/*
		 * Nothing unwound, and the kernel did not walk user frames:
		 * keep where the thread was in user space, marked cut.
		 */
		return frames_push_addr(fr, s->pid, s->uregs.regs[PERF_REG_X86_IP], false, false);
	}
	*end = end_of(how);
	if (py_wants(fr->py, s->pid))
		return py_push(fr, fr->py, s, ips, sps, k, end);
	for (int i = 0; i < k; i++) {
		err = frames_push_addr(fr, s->pid, ips[i], false, i > 0);
		if (err)
			return err;
	}
	return 0;
}

const struct stack_source stack_source_dwarf = {
	.name = "DWARF",
	.applies = dwarf_applies,
	.push_user = dwarf_push_user,
};
