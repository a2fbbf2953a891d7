/* SPDX-License-Identifier: MIT */
/*
 * The CFI walker of unwind.c as stackwalk.c and jitcaller.c drive it: the
 * state of one unwind, libunwind cursors over the sample's registers and
 * stack copy, the frames found so far, the known stacks of a process, and
 * jitcaller.c's interface. Internal to symbolize/.
 */
#ifndef DLFLAME_SYMBOLIZE_UNWIND_H
#define DLFLAME_SYMBOLIZE_UNWIND_H

#include <libunwind.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "symbolize/internal.h"

struct elf_file;
struct fde_slot;
struct pi_slot;
struct jit_proc;
struct ra_slot;

#define UW_NREGS (UNW_X86_64_RIP + 1)
#define UW_RECENT 8
#define CHAIN_BUCKETS 512 /* power of two */
#define CHAIN_WAYS 4
/* return addresses of a known stack that must be found in the copy to join it */
#define CHAIN_MIN_MATCH 2
/* what a probe reads for memory it does not have: odd, so never a real return address */
#define PROBE_MARK 1

/* A complete stack seen before, from the frame at sp down to the root. */
struct chain_slot {
	uint64_t sp;
	uint64_t *ips, *sps;
	uint32_t n, cap;
	uint64_t used; /* tick of the last store or join: the least recent way goes first */
	bool indirect; /* ips[0] follows an indirect call */
};

/* A process's unwinding state, hung on proc->unw (unwind.c owns it). */
struct unwind_proc {
	unw_addr_space_t as;
	struct elf_file *vdso;
	bool vdso_tried;
	struct chain_slot *chains; /* known stacks, by the SP of each frame */
	uint64_t tick;
	struct ra_slot *verdicts; /* is there a call before this address? */
	struct fde_slot *fdes;
	struct pi_slot *infos; /* libunwind's procedure infos, by FDE */
	uint64_t *sps; /* scratch: SP of every frame of the current unwind */
	size_t sps_cap;
};

struct uw_recent {
	struct elf_file *mu;
	uint64_t bias, start, end; /* runtime extent of the module */
};

/* One unwind: the process, the stack copy [sp0, sp0 + size) and caches. */
struct uw_ctx {
	struct symbolizer *s;
	struct proc *p;
	struct unwind_proc *up;
	struct jit_proc *jit; /* jitcaller.c's, NULL until it needs it */
	const uint8_t *stack;
	uint64_t sp0, size;
	struct uw_recent recent[UW_RECENT];
	unsigned nrecent, next_recent;
	unsigned reads;
	bool noinfo; /* find_proc_info found no CFI: libunwind is guessing */
	bool probe; /* memory outside the copy and the modules reads as PROBE_MARK */
	bool oob; /* a read fell just past the end of the copy */
	bool jit_guessed; /* a JIT caller was found without the kernel's preamble */
	/*
	 * The copy ends where the thread's stack was known to end, not where
	 * the kernel stopped: a walk that runs off its end is not taken as
	 * going on beyond it (no caller accepted for it, no outer frames grafted).
	 */
	bool cut;
	uint64_t reach; /* the end of the highest word of the copy read so far */
};

/* The as_arg of one cursor: the context and the registers it starts from. */
struct uw_arg {
	struct uw_ctx *ctx;
	uint64_t regs[UW_NREGS];
};

/* The state of one walk: a cursor and the registers it started from (its as_arg). */
struct walker {
	unw_cursor_t c;
	struct uw_arg arg;
	bool ok; /* the cursor could be initialised */
};

enum walk_end {
	WALK_ROOT, /* the outermost frame, by CFI */
	WALK_JIT, /* reached code without CFI that the JIT path handles */
	WALK_OOB, /* the next frame lies beyond the copy */
	WALK_FULL, /* no room for more frames */
	WALK_FAIL, /* an unwind error or an implausible frame */
	WALK_NOT_ENTRY, /* CFI stopped (unw_step 0) at a frame that is no thread's entry */
};

/* The frames found so far, leaf first: return addresses and the SP above each. */
struct frames {
	uint64_t *ips, *sps;
	size_t n, max;
};

static inline void push(struct frames *f, uint64_t ip, uint64_t sp)
{
	f->ips[f->n] = ip;
	f->sps[f->n++] = sp;
}

/* The word at addr of the stack copy; false outside it. */
static inline bool stack_word(struct uw_ctx *ctx, uint64_t addr, uint64_t *val)
{
	if (addr < ctx->sp0 || addr - ctx->sp0 > ctx->size || ctx->size - (addr - ctx->sp0) < 8)
		return false;
	memcpy(val, ctx->stack + (addr - ctx->sp0), 8);
	if (addr + 8 > ctx->reach)
		ctx->reach = addr + 8;
	return true;
}

/* ---- unwind.c ---- */

/* The process's unwinding state, created at first use; NULL on -ENOMEM. */
struct unwind_proc *unwind_proc_get(struct proc *p);
/* Start a cursor at w->arg.regs. */
void walker_init(struct walker *w, struct uw_ctx *ctx);
/* The registers a walker's cursor has now, for starting another one from there. */
void walker_regs(struct walker *w, uint64_t *regs);
void arg_from_perf(struct uw_arg *a, const uint64_t *regs, uint64_t mask);
uint64_t reg_of(unw_cursor_t *c, int reg);
/*
 * Step with CFI from the last frame of f until something stops it. Every
 * frame must lie above the one before (this bounds loops) and return to
 * code just after a call, or to JIT code, or from a signal handler.
 */
enum walk_end walk(struct uw_ctx *ctx, struct walker *w, struct frames *f);
/* Code without CFI that the JIT path handles: anonymous executable memory or a perf-map range. */
bool is_jit(struct uw_ctx *ctx, uint64_t ip, bool leaf);
/* Does ra point into a module's code, just after a call (an indirect one, if asked)? */
bool after_call(struct uw_ctx *ctx, uint64_t ra, bool indirect);
/* Start of the function (FDE) containing a return address; 0 if unknown. */
uint64_t fde_start(struct uw_ctx *ctx, uint64_t ra);
/* The CFA of the frame that returns to ra with the given SP, from CFI alone. */
bool probe_cfa(struct uw_ctx *ctx, uint64_t ra, uint64_t sp, uint64_t *cfa);
/* The CHAIN_WAYS known stacks that may have a frame at sp. */
struct chain_slot *chain_bucket(const struct unwind_proc *up, uint64_t sp);
/* Does the last frame of f start a known stack that the copy still holds? Then append it. */
bool chain_join(struct uw_ctx *ctx, struct frames *f);
/*
 * Remember a complete stack: true when it was new (stored), false when it
 * was known already or there is no memory for known stacks.
 */
bool chains_store(struct uw_ctx *ctx, const struct frames *f);

/* ---- jitcaller.c ---- */

enum jit_caller {
	JIT_CALLER_WALKED, /* its caller's frames follow in f; walking goes on with `next` */
	JIT_CALLER_GRAFTED, /* the rest of the stack was grafted from known stacks: done */
	JIT_CALLER_MISSED, /* not found: the stack ends at the JIT frame */
};

/*
 * The caller of the JIT frame at the end of f, which `cur` stopped at;
 * *how says how the walk ended behind it (WALKED, GRAFTED). Counts
 * stats.jit_callers_recovered and _missed.
 */
enum jit_caller jitcaller__find(struct uw_ctx *ctx, struct walker *cur, struct walker *next,
				struct frames *f, enum walk_end *how);
/* Learn from a complete stack: call sites and frame sizes, for later grafts. */
void jitcaller__note_stack(struct uw_ctx *ctx, const struct frames *f);
/* A call site up_ip seen calling the function at fn, as note_stack keeps it (for the tests). */
void jitcaller__teach_edge(struct proc *p, uint64_t fn, uint64_t up_ip);
/* The call sites kept for the function at fn, most recent first: how many (at most max). */
size_t jitcaller__edges(struct proc *p, uint64_t fn, uint64_t *ups, size_t max);
/* Return address ra seen for JIT code of this key, as jitcaller__find keeps it (for the tests). */
void jitcaller__teach_ret(struct proc *p, uint64_t key, uint64_t ra);
/* The return address kept last for JIT code of this key, or 0. */
uint64_t jitcaller__ret_of(struct proc *p, uint64_t key);
/*
 * A walk that ran off the end of the copy: climb from its last frame, as
 * from a JIT graft, until a frame lands where a known stack has a frame of
 * the same function; WALK_ROOT with the rest of that stack in f, else
 * WALK_OOB and f unchanged.
 */
enum walk_end jitcaller__graft_outer(struct uw_ctx *ctx, struct frames *f);

#endif
