/* SPDX-License-Identifier: MIT */
/*
 * Frame pointers: the user part of the kernel's callchain, as it walked
 * the frame-pointer chain. Whole only if it ends where CFI says a thread
 * starts (glibc's _start, clone3).
 */
#include "internal.h"

static bool fp_applies(const struct rec_sample *s)
{
	return true; /* every sample has a callchain, if only its IP */
}

static int fp_push_user(struct frames *fr, const struct rec_sample *s, uint32_t max_stack,
			enum stack_end *end)
{
	size_t addrs;
	uint64_t last_user;
	int err = push_callchain(fr, s, false, &addrs, &last_user);

	*end = STACK_END_COMPLETE;
	if (err)
		return err;
	if (addrs == 0)
		return frames_push_addr(fr, s->pid, s->ip, !s->user, false);
	/* a chain with no user part is a kernel thread's: whole */
	if (last_user && !symbolizer__outermost(fr->sym, s->pid, last_user))
		*end = STACK_END_FP;
	return 0;
}

const struct stack_source stack_source_fp = {
	.name = "frame pointers",
	.applies = fp_applies,
	.push_user = fp_push_user,
};
