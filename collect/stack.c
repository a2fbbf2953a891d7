/* SPDX-License-Identifier: MIT */
/*
 * One sample's stack: the kernel part from the kernel's callchain, the user
 * part from a stack source, and how it ended. A cut stack ends in a visible
 * placeholder: [truncated], or [JIT caller not recovered].
 */
#include "internal.h"

#include <asm/perf_regs.h>
#include <linux/perf_event.h>

int push_callchain(struct frames *fr, const struct rec_sample *s, bool kernel_part, size_t *addrs,
		   uint64_t *last_user)
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
		if (kernel != kernel_part)
			continue;
		/* the first address of a context is where the thread was; the rest return there */
		err = frames_push_addr(fr, s->pid, ip, kernel, !first_in_ctx);
		first_in_ctx = false;
		if (err)
			return err;
	}
	return 0;
}

/*
 * A stack cut for `end`: its visible placeholder root. A frame-pointer chain
 * that ends early keeps the look perf gives it (perf script's stacks, frame
 * for frame); its end says it was cut.
 */
static int push_cut(struct stack_builder *b, enum stack_end end)
{
	/* Python frames not shown: their placeholder stands where they would be */
	if (end == STACK_END_COMPLETE || end == STACK_END_FP || end == STACK_END_PY_CHANGED ||
	    end == STACK_END_PY_UNREAD)
		return 0;
	if (end == STACK_END_JIT)
		return frames_push_special(b->fr, "[JIT caller not recovered]");
	b->truncated++;
	return frames_push_special(b->fr, "[truncated]");
}

int64_t build_stack(struct stack_builder *b, const struct rec_sample *s, enum stack_end *endp)
{
	const struct stack_source *src =
		stack_source_dwarf.applies(s) ? &stack_source_dwarf : &stack_source_fp;
	enum stack_end end = STACK_END_COMPLETE;
	size_t addrs;
	uint64_t last_user;
	int64_t stack;
	int err;

	frames_reset(b->fr);
	err = push_callchain(b->fr, s, true, &addrs, &last_user);
	if (!err)
		err = src->push_user(b->fr, s, b->max_stack, &end);
	/*
	 * The kernel stops a chain at perf_event_max_stack entries: its root
	 * is missing. (Unwound user frames do not count against it.)
	 */
	if (!err && src == &stack_source_fp && addrs >= b->max_stack)
		end = STACK_END_DEPTH;
	/* no deeper than a profile holds: the root-most frames go, [truncated] stands there */
	if (!err && b->fr->n >= PROFILE_MAX_DEPTH) {
		b->fr->n = PROFILE_MAX_DEPTH - 1;
		end = STACK_END_DEPTH;
	}
	if (!err)
		err = push_cut(b, end);
	if (err)
		return err;
	stack = frames_stack(b->fr);
	if (stack < 0)
		return stack;
	profile__set_stack_end(b->fr->prof, (uint32_t)stack, end);
	*endp = end;
	return stack;
}

int64_t special_stack(struct frames *fr, const char *name)
{
	int64_t stack;
	int err;

	frames_reset(fr);
	err = frames_push_special(fr, name);
	if (err)
		return err;
	stack = frames_stack(fr);
	if (stack > 0)
		profile__set_stack_end(fr->prof, (uint32_t)stack, STACK_END_NOT_SAMPLED);
	return stack;
}
