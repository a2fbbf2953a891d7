/* SPDX-License-Identifier: MIT */
/*
 * symbolizer__unwind and symbolizer__outermost: a sample's user stack,
 * walked with CFI by unwind.c, the callers of JIT frames recovered by
 * jitcaller.c, complete stacks remembered by both for later walks.
 */
#include <asm/perf_regs.h>
#include <errno.h>
#include <libunwind.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/internal.h"
#include "symbolize/unwind.h"

#define JIT_MAX_FRAMES 16

static enum unwind_end end_of(enum walk_end how)
{
	switch (how) {
	case WALK_ROOT:
		return UNWIND_END_ROOT;
	case WALK_OOB:
		return UNWIND_END_COPY;
	case WALK_FULL:
		return UNWIND_END_DEPTH;
	case WALK_JIT:
		return UNWIND_END_JIT_NO_CALLER;
	case WALK_NOT_ENTRY:
		return UNWIND_END_NOT_ENTRY;
	default:
		return UNWIND_END_ERROR;
	}
}

int symbolizer__unwind_sps(struct symbolizer *s, uint32_t pid, const uint64_t *regs,
			   uint64_t regs_mask, const uint8_t *stack, size_t stack_size,
			   uint64_t *ips, uint64_t *sps, size_t max, enum unwind_end *end)
{
	uint64_t reach;

	return symbolizer__unwind_copy(s, pid, regs, regs_mask, stack, stack_size, false, ips, sps,
				       max, end, &reach);
}

int symbolizer__unwind_copy(struct symbolizer *s, uint32_t pid, const uint64_t *regs,
			    uint64_t regs_mask, const uint8_t *stack, size_t stack_size, bool cut,
			    uint64_t *ips, uint64_t *sps, size_t max, enum unwind_end *end,
			    uint64_t *reach)
{
	const uint64_t need = 1ull << PERF_REG_X86_IP | 1ull << PERF_REG_X86_SP;
	struct uw_ctx ctx = { .s = s, .stack = stack, .size = stack_size, .cut = cut };
	struct walker wk[2], *w = &wk[0];
	struct unwind_proc *up;
	struct frames f;
	unsigned jit_frames = 0;
	bool grafted = false;
	enum walk_end how;

	if (!s || !regs || !ips || !end || !reach || (!stack && stack_size))
		return -EINVAL;
	*end = UNWIND_END_ERROR;
	*reach = 0;
	if ((regs_mask & need) != need)
		return -EINVAL;
	if (!max)
		return 0;
	ctx.p = proc_find(s, pid);
	if (!ctx.p)
		return -ESRCH;
	up = unwind_proc_get(ctx.p);
	if (!up)
		return -ENOMEM;
	if (grow_array((void **)&up->sps, &up->sps_cap, max, sizeof(*up->sps)))
		return -ENOMEM;
	ctx.up = up;
	s->stats.unwinds++;
	f = (struct frames){ .ips = ips, .sps = up->sps, .max = max };

	arg_from_perf(&w->arg, regs, regs_mask);
	ctx.sp0 = w->arg.regs[UNW_X86_64_RSP];
	/* a copy that would wrap around the address space is cut */
	if (ctx.size > UINT64_MAX - ctx.sp0)
		ctx.size = UINT64_MAX - ctx.sp0;
	walker_init(w, &ctx);
	push(&f, w->arg.regs[UNW_X86_64_RIP], ctx.sp0);
	/* the sampled IP ran, so code outside every known mapping is JIT code too */
	how = is_jit(&ctx, f.ips[0], true) ? WALK_JIT : walk(&ctx, w, &f);

	while (how == WALK_JIT) {
		struct walker *next = w == &wk[0] ? &wk[1] : &wk[0];
		enum jit_caller r;

		if (f.n >= f.max) {
			how = WALK_FULL;
			break;
		}
		if (++jit_frames > JIT_MAX_FRAMES) {
			how = WALK_FAIL;
			break;
		}
		/* registers of the JIT frame, for a caller that it saved nothing for */
		if (f.n > 1)
			walker_regs(w, w->arg.regs);
		r = jitcaller__find(&ctx, w, next, &f, &how);
		if (r == JIT_CALLER_WALKED) {
			w = next;
			continue;
		}
		*end = r == JIT_CALLER_GRAFTED ? end_of(how) : UNWIND_END_JIT_NO_CALLER;
		if (*end == UNWIND_END_ROOT && ctx.jit_guessed)
			*end = UNWIND_END_JIT_GUESSED;
		goto out;
	}
	/*
	 * Off the end of the copy above a JIT frame's recovered caller (oneDNN's
	 * GEMM driver frames sit above buffers the size of the copy): the rest
	 * of the stack, if a known one goes on from there. Other walks that run
	 * out of copy stay cut: nothing was inferred for them. Nor do walks of
	 * a copy cut where the thread's stack was known to end.
	 */
	if (how == WALK_OOB && jit_frames && !ctx.cut) {
		how = jitcaller__graft_outer(&ctx, &f);
		if (how == WALK_ROOT) {
			s->stats.outer_grafts++;
			grafted = true;
		}
	}
	*end = end_of(how);
	if (how == WALK_ROOT && ctx.jit_guessed) {
		/* at an entry, but through a JIT frame recovered without its preamble: not kept */
		*end = UNWIND_END_JIT_GUESSED;
		s->stats.unwind_errors++;
	} else if (how == WALK_ROOT) {
		/* a new stack: its call edges and frame sizes are learnt (for JIT callers) */
		if (chains_store(&ctx, &f))
			jitcaller__note_stack(&ctx, &f);
		/* the thread's entry reached within the copy: its stack ends by there */
		if (!grafted)
			*reach = ctx.reach;
	} else {
		s->stats.unwind_errors++;
	}
out:
	if (sps)
		memcpy(sps, f.sps, f.n * sizeof(*sps));
	return (int)f.n;
}

int symbolizer__unwind(struct symbolizer *s, uint32_t pid, const uint64_t *regs, uint64_t regs_mask,
		       const uint8_t *stack, size_t stack_size, uint64_t *ips, size_t max,
		       enum unwind_end *end)
{
	return symbolizer__unwind_sps(s, pid, regs, regs_mask, stack, stack_size, ips, NULL, max,
				      end);
}

bool symbolizer__outermost(struct symbolizer *s, uint32_t pid, uint64_t ra)
{
	/* no stack at all: a step that needs to read the return address fails */
	struct uw_ctx ctx = { .s = s, .sp0 = 1ull << 12 };
	struct frames f;
	struct walker w = { 0 };
	uint64_t ips[2], sps[2];

	if (!s || ra < 2)
		return false;
	ctx.p = proc_find(s, pid);
	if (!ctx.p || !(ctx.up = unwind_proc_get(ctx.p)))
		return false;
	f = (struct frames){ .ips = ips, .sps = sps, .max = 2 };
	/* inside the call instruction, as for any return address */
	w.arg.regs[UNW_X86_64_RIP] = ra - 1;
	w.arg.regs[UNW_X86_64_RSP] = ctx.sp0;
	walker_init(&w, &ctx);
	push(&f, ra - 1, ctx.sp0);
	return walk(&ctx, &w, &f) == WALK_ROOT && f.n == 1;
}
