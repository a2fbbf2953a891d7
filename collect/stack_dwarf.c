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

static int dwarf_push_user(struct frames *fr, const struct rec_sample *s, uint32_t max_stack,
			   enum stack_end *end)
{
	uint64_t ips[COLLECT_MAX_DEPTH], sps[COLLECT_MAX_DEPTH];
	enum unwind_end how = UNWIND_END_ERROR;
	int k = 0, err;

	*end = s->stack_dropped ? STACK_END_DROPPED : STACK_END_NO_USER;
	if (s->stack_size) {
		k = symbolizer__unwind_sps(fr->sym, s->pid, s->uregs.regs, s->uregs.mask, s->stack,
					   s->stack_size, ips, sps, COLLECT_MAX_DEPTH, &how);
		if (k == -ENOMEM)
			return k;
		*end = STACK_END_ERROR;
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
