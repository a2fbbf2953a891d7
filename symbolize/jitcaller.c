/* SPDX-License-Identifier: MIT */
/*
 * Recovery of the callers of JIT code (oneDNN's kernels), which has no CFI;
 * see docs/onednn-jit.md. Driven by stackwalk.c one JIT frame at a time
 * (jitcaller__find), on top of the CFI walker of unwind.c.
 *
 * The caller is found by scanning the copied stack upward from SP for a
 * word that (1) points into an executable mapping of a known module, (2)
 * follows an indirect call there, and (3) passes the caller's CFI: resumed
 * there with the registers oneDNN's preamble saved below it (or, for code
 * that saved nothing, with the sampled ones), the caller's chain unwinds to
 * the root or off the end of the copy. One step is not enough: the kernel's
 * own stack area holds stale frames of earlier calls, whose first steps
 * look fine.
 *
 * oneDNN's GEMM kernel running on its heap workspace keeps the original rsp
 * at [rsp + 120] and its callers are not in the copy at all: from a call
 * site it returned to before, at the SP that rsp gives, the stack is climbed
 * through call sites seen in earlier stacks, each SP given by CFI, until it
 * lands exactly on a remembered frame of the same function.
 *
 * Bounds: every read of the copy is checked against it; candidate callers
 * per JIT frame, climbing depth and probes are capped.
 */
#include <libunwind.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/internal.h"
#include "symbolize/unwind.h"

/* rbx, rbp, r12, r13, r14, r15: what oneDNN's jit_generator::preamble() pushes */
#define PREAMBLE_PUSHES 6
#define JIT_MAX_TRIALS 64
/*
 * oneDNN's f32 GEMM kernels keep the rsp they had after the preamble in a
 * slot of their workspace frame: [rsp + 120] in the AVX-512 one,
 * [rsp + 152] in the AVX/AVX2 one (which always moves rsp: down by up to
 * 512 KiB for its buffer, or onto the heap). Both are tried.
 */
static const uint64_t gemm_orig_sp_off[] = { 120, 152 };
#define GEMM_OFFS (sizeof(gemm_orig_sp_off) / sizeof(gemm_orig_sp_off[0]))
#define JIT_RET_SLOTS 256 /* power of two */
#define JIT_RET_WAYS 4
#define EDGE_SLOTS 4096 /* power of two */
#define EDGE_WAYS 8
#define SIZE_SLOTS 4096 /* power of two */
#define CLIMB_DEPTH 12
#define CLIMB_PROBES 48

/* Where a piece of JIT code returned to lately (it may have several callers). */
struct jit_ret {
	uint64_t key;
	uint64_t ra[JIT_RET_WAYS]; /* most recent first */
	bool grafted; /* its caller was found by graft_gemm before */
	/* where above the SP its return address was found lately, most recent first; 0: unused */
	uint32_t ra_off[JIT_RET_WAYS];
};

/* Call sites seen calling a function (the return addresses just above its frames). */
struct edge_slot {
	uint64_t fn; /* start of the function */
	uint64_t up[EDGE_WAYS]; /* most recent first */
};

/* How far above a frame that returns to ra its caller's frame was. */
struct size_slot {
	uint64_t ra, size;
};

/* What a process's JIT frames taught us; hung on proc->jit. */
struct jit_proc {
	struct jit_ret *jit_rets;
	struct edge_slot *edges; /* call sites of functions, for climbing */
	struct size_slot *sizes;
};

void jitcaller__proc_free(struct jit_proc *j)
{
	if (!j)
		return;
	free(j->jit_rets);
	free(j->edges);
	free(j->sizes);
	free(j);
}

static struct jit_proc *jit_proc_get(struct proc *p)
{
	if (!p->jit)
		p->jit = calloc(1, sizeof(*p->jit));
	return p->jit;
}

/* ---- searching the copy ---- */

/*
 * The caller of the JIT frame at the end of f: scan the copy upward from its
 * SP for a return address after an indirect call whose caller chain then
 * unwinds with CFI to the root (or off the end of the copy). Stale return
 * addresses below the real one (the JIT frame's own stack area holds old
 * frames) pass the first steps but not the whole way. On success the
 * caller's frames are in f, w is the walker past them, and the result
 * says how that walk ended.
 */
static bool find_caller(struct uw_ctx *ctx, struct walker *cur, struct walker *w, struct frames *f,
			const struct jit_ret *jr, enum walk_end *how)
{
	static const int pushed[PREAMBLE_PUSHES] = {
		UNW_X86_64_RBX, UNW_X86_64_RBP, UNW_X86_64_R12,
		UNW_X86_64_R13, UNW_X86_64_R14, UNW_X86_64_R15,
	};
	uint64_t sp = f->sps[f->n - 1], ra;
	size_t base = f->n;
	unsigned trials = 0;

	if (f->n >= f->max)
		return false;
	/*
	 * First without stepping: where this JIT code returned to lately, if
	 * the known stack from there is still in the copy. (Any other known
	 * frame further up would skip the frames in between.) A kernel's frame
	 * has the same size at most of its samples, so the slot where its
	 * return address was last time is tried before the copy is searched
	 * (the GEMM kernel's is 8 KiB up): a known stack from there is the same
	 * one a search would find, as no other slot below it starts one.
	 */
	for (int k = 0; jr && k < JIT_RET_WAYS && jr->ra_off[k]; k++) {
		if (!stack_word(ctx, sp + jr->ra_off[k], &ra) || !ra)
			continue;
		for (int i = 0; i < JIT_RET_WAYS; i++) {
			if (ra != jr->ra[i])
				continue;
			push(f, ra, sp + jr->ra_off[k] + 8);
			if (chain_join(ctx, f)) {
				*how = WALK_ROOT;
				return true;
			}
			f->n = base;
			break;
		}
	}
	if (jr) {
		for (uint64_t at = sp; stack_word(ctx, at, &ra); at += 8) {
			int i;

			for (i = 0; i < JIT_RET_WAYS && ra != jr->ra[i]; i++)
				;
			if (!ra || i == JIT_RET_WAYS)
				continue;
			f->n = base;
			push(f, ra, at + 8);
			if (chain_join(ctx, f)) {
				*how = WALK_ROOT;
				return true;
			}
		}
		f->n = base;
	}
	for (uint64_t at = sp; stack_word(ctx, at, &ra); at += 8) {
		if (!after_call(ctx, ra, true))
			continue;
		if (++trials > JIT_MAX_TRIALS)
			return false;
		for (int hyp = 0; hyp < 2; hyp++) {
			w->arg.ctx = ctx;
			memcpy(w->arg.regs, cur->arg.regs, sizeof(w->arg.regs));
			if (hyp == 0) {
				/* the preamble's pushes just below the return address, if there is room */
				if (at - sp < 8 * PREAMBLE_PUSHES)
					continue;
				for (int i = 0; i < PREAMBLE_PUSHES; i++)
					stack_word(ctx, at - 8 * (uint64_t)(i + 1),
						   &w->arg.regs[pushed[i]]);
			}
			/* else a leaf that saved nothing: the callee-saved registers are the caller's */
			w->arg.regs[UNW_X86_64_RSP] = at + 8;
			/* inside the call instruction: right for a call that ends its function too */
			w->arg.regs[UNW_X86_64_RIP] = ra - 1;
			walker_init(w, ctx);
			f->n = base;
			push(f, ra, at + 8);
			*how = walk(ctx, w, f);
			if (*how != WALK_FAIL)
				return true;
		}
	}
	f->n = base;
	return false;
}

/* ---- what complete stacks teach ---- */

static void edge_note(struct jit_proc *up, uint64_t fn, uint64_t up_ip)
{
	struct edge_slot *e;
	int i;

	if (!up->edges)
		up->edges = calloc(EDGE_SLOTS, sizeof(*up->edges));
	if (!up->edges)
		return;
	e = &up->edges[hash_u64(fn) & (EDGE_SLOTS - 1)];
	if (e->fn != fn)
		*e = (struct edge_slot){ .fn = fn };
	for (i = 0; i < EDGE_WAYS - 1 && e->up[i] != up_ip; i++)
		;
	memmove(e->up + 1, e->up, i * sizeof(*e->up));
	e->up[0] = up_ip;
}

/*
 * After a complete unwind: the call sites seen calling each function
 * (edges) and each frame's size, for climbing from a graft.
 */
void jitcaller__note_stack(struct uw_ctx *ctx, const struct frames *f)
{
	struct jit_proc *up = jit_proc_get(ctx->p);

	if (!up)
		return;
	if (!up->sizes)
		up->sizes = calloc(SIZE_SLOTS, sizeof(*up->sizes));
	for (size_t i = 1; i + 1 < f->n; i++) {
		uint64_t fn = fde_start(ctx, f->ips[i]);

		if (fn)
			edge_note(up, fn, f->ips[i + 1]);
		if (up->sizes)
			up->sizes[hash_u64(f->ips[i]) & (SIZE_SLOTS - 1)] =
				(struct size_slot){ .ra = f->ips[i],
						    .size = f->sps[i + 1] - f->sps[i] };
	}
}

/* ---- JIT callers outside the copy ---- */

/*
 * The caller's SP of a frame that returns to ra: measured from CFI, else (a
 * frame-pointer frame, whose CFA depends on rbp) as it was last time.
 */
static bool frame_cfa(struct uw_ctx *ctx, uint64_t ra, uint64_t sp, uint64_t *cfa)
{
	const struct size_slot *z = ctx->jit && ctx->jit->sizes
					    ? &ctx->jit->sizes[hash_u64(ra) & (SIZE_SLOTS - 1)]
					    : NULL;

	if (probe_cfa(ctx, ra, sp, cfa))
		return true;
	if (!z || z->ra != ra || !z->size || sp + z->size < sp)
		return false;
	*cfa = sp + z->size;
	return true;
}

/* A known stack with a frame at sp in the same function as the call site ra. */
static const struct chain_slot *chain_in_function(struct uw_ctx *ctx, uint64_t sp, uint64_t ra)
{
	uint64_t start = fde_start(ctx, ra);
	const struct chain_slot *b, *best = NULL;

	if (!start || !ctx->up->chains)
		return NULL;
	b = chain_bucket(ctx->up, sp);
	for (int w = 0; w < CHAIN_WAYS; w++) {
		if (b[w].n && b[w].sp == sp && fde_start(ctx, b[w].ips[0]) == start &&
		    (!best || b[w].used > best->used))
			best = &b[w];
	}
	return best;
}

/* Append the rest of known stack c after the frame at the end of f. */
static bool graft_rest(struct frames *f, const struct chain_slot *c)
{
	if (f->n - 1 + c->n > f->max)
		return false;
	for (uint32_t j = 1; j < c->n; j++)
		push(f, c->ips[j], c->sps[j]);
	return true;
}

/*
 * Climb from the frame at the end of f (a call site whose SP is known, but
 * whose stack is not in the copy) until a frame lands exactly where a known
 * stack has a frame of the same function; the rest of the stack is that
 * one's. A thread's stack address says how deep a frame is, so the same
 * function at the same SP is the same frame. Each step up tries the call
 * sites seen calling the function in earlier stacks, at the SP given by the
 * function's CFI (its CFA). Measured on the MLP by hiding the callers of
 * JIT frames whose callers were in the copy: with the frame at the kernel's
 * caller SP unknown, 97% of grafts name every function right, 1.5% get one
 * frame wrong (a sibling at the same SP); a match at any function at the
 * right SP, not required to be a caller, got 5-10% wrong and is not used.
 */
static bool climb(struct uw_ctx *ctx, struct frames *f, unsigned depth, unsigned *probes)
{
	uint64_t ra = f->ips[f->n - 1], sp = f->sps[f->n - 1], cfa, fn;
	const struct chain_slot *c = chain_in_function(ctx, sp, ra);
	const struct edge_slot *e;
	size_t base = f->n;

	if (c)
		return graft_rest(f, c);
	if (depth >= CLIMB_DEPTH || !ctx->jit || !ctx->jit->edges || f->n >= f->max || !*probes)
		return false;
	(*probes)--;
	fn = fde_start(ctx, ra);
	e = &ctx->jit->edges[hash_u64(fn) & (EDGE_SLOTS - 1)];
	if (!fn || e->fn != fn || !frame_cfa(ctx, ra, sp, &cfa))
		return false;
	for (int i = 0; i < EDGE_WAYS && e->up[i]; i++) {
		c = chain_in_function(ctx, cfa, e->up[i]);
		if (!c)
			continue;
		push(f, e->up[i], cfa);
		if (graft_rest(f, c))
			return true;
		f->n = base;
	}
	for (int i = 0; i < EDGE_WAYS && e->up[i]; i++) {
		push(f, e->up[i], cfa);
		if (climb(ctx, f, depth + 1, probes))
			return true;
		f->n = base;
	}
	return false;
}

/*
 * oneDNN's GEMM kernel running on its heap workspace keeps the rsp it had
 * after the preamble at [rsp + 120]: its caller's SP is that + 56, and its
 * caller's frames are outside the copy. The call sites this kernel returned
 * to before say where it was called from; climbing from there (see climb)
 * finds the rest. Any frame at that SP would not do: the caller pushed the
 * kernel's stack arguments, so its SP there is not its usual one.
 */
static enum walk_end graft_at(struct uw_ctx *ctx, struct frames *f, uint64_t sp,
			      const struct jit_ret *jr)
{
	unsigned probes = CLIMB_PROBES;
	size_t base = f->n;

	if (!ctx->up->chains)
		return WALK_FAIL;
	for (int r = 0; jr && r < JIT_RET_WAYS && jr->ra[r] && f->n < f->max; r++) {
		push(f, jr->ra[r], sp);
		if (climb(ctx, f, 0, &probes))
			return WALK_ROOT;
		f->n = base;
	}
	return WALK_FAIL;
}

static enum walk_end graft_gemm(struct uw_ctx *ctx, struct frames *f, const struct jit_ret *jr)
{
	uint64_t sp = f->sps[f->n - 1], orig;

	for (size_t i = 0; i < GEMM_OFFS; i++) {
		/* the saved rsp lies above the kernel's own frame, or on the heap */
		if (!stack_word(ctx, sp + gemm_orig_sp_off[i], &orig) || !orig || orig % 8 ||
		    orig == sp)
			continue;
		if (graft_at(ctx, f, orig + 8 * (PREAMBLE_PUSHES + 1), jr) == WALK_ROOT)
			return WALK_ROOT;
	}
	return WALK_FAIL;
}

/*
 * Whether to graft before searching the copy: this code's caller was found
 * by grafting before (it is a GEMM kernel), and the SP the kernel saved lies
 * outside the copy, so its caller's frames are not in it and a search of
 * the whole copy (the workspace holds no return addresses) could only fail
 * or be fooled. The same kernel also runs on the stack (smaller K): then
 * the saved SP is in the copy and its caller is searched for there. Half of
 * the MLP's samples are in the GEMM kernel: the search was most of the
 * unwinder's time.
 */
static bool graft_first(const struct uw_ctx *ctx, const struct frames *f, const struct jit_ret *jr)
{
	uint64_t orig;

	if (!jr || !jr->grafted)
		return false;
	for (size_t i = 0; i < GEMM_OFFS; i++)
		if (stack_word(ctx, f->sps[f->n - 1] + gemm_orig_sp_off[i], &orig) && orig &&
		    !(orig % 8) && (orig < ctx->sp0 || orig - ctx->sp0 >= ctx->size))
			return true;
	return false;
}

/* What identifies a piece of JIT code: its perf-map name, else its mapping. */
static uint64_t jit_key(struct uw_ctx *ctx, uint64_t ip)
{
	const struct perfmap_entry *e = perfmap__find(ctx->p->perfmap, ip);
	struct map *m;

	/* the name: a kernel generated many times is called from the same places */
	if (e)
		return (uint64_t)(uintptr_t)e->name;
	m = proc_lookup(ctx->p, ip);
	return m ? m->start : ip;
}

static struct jit_ret *jit_ret_slot(struct jit_proc *up, uint64_t key)
{
	if (!up)
		return NULL;
	if (!up->jit_rets)
		up->jit_rets = calloc(JIT_RET_SLOTS, sizeof(*up->jit_rets));
	return up->jit_rets ? &up->jit_rets[hash_u64(key) & (JIT_RET_SLOTS - 1)] : NULL;
}

/*
 * Frames left on the stack by a call the caller made before it called the
 * JIT code (oneDNN's GEMM driver allocates the workspace first) are
 * consistent: they unwind through the caller's live frame to the root. When
 * the chain recovered for JIT code passes through a frame that returns to
 * where this code returned to before, that frame is its caller and the ones
 * below it are stale.
 */
static void drop_stale(struct frames *f, size_t at, const struct jit_ret *jr)
{
	size_t k;

	if (!jr)
		return;
	for (k = at + 1; k < f->n; k++) {
		int i;

		for (i = 0; i < JIT_RET_WAYS && jr->ra[i] != f->ips[k]; i++)
			;
		if (i < JIT_RET_WAYS && f->ips[k])
			break;
	}
	if (k == f->n)
		return;
	memmove(f->ips + at, f->ips + k, (f->n - k) * sizeof(*f->ips));
	memmove(f->sps + at, f->sps + k, (f->n - k) * sizeof(*f->sps));
	f->n -= k - at;
}

static void jit_ret_note(struct jit_ret *jr, uint64_t ra, uint64_t ra_off)
{
	uint32_t off = ra_off <= UINT32_MAX ? (uint32_t)ra_off : 0;
	int i;

	for (i = 0; i < JIT_RET_WAYS - 1 && jr->ra[i] != ra; i++)
		;
	memmove(jr->ra + 1, jr->ra, i * sizeof(*jr->ra));
	jr->ra[0] = ra;
	if (!off)
		return;
	for (i = 0; i < JIT_RET_WAYS - 1 && jr->ra_off[i] != off; i++)
		;
	memmove(jr->ra_off + 1, jr->ra_off, i * sizeof(*jr->ra_off));
	jr->ra_off[0] = off;
}

enum walk_end jitcaller__graft_outer(struct uw_ctx *ctx, struct frames *f)
{
	unsigned probes = CLIMB_PROBES;
	size_t base = f->n;

	ctx->jit = jit_proc_get(ctx->p);
	if (f->n < 2 || !ctx->up->chains || !ctx->jit)
		return WALK_OOB;
	if (climb(ctx, f, 0, &probes))
		return WALK_ROOT;
	f->n = base;
	return WALK_OOB;
}

/* ---- one JIT frame ---- */

enum jit_caller jitcaller__find(struct uw_ctx *ctx, struct walker *cur, struct walker *next,
				struct frames *f, enum walk_end *how)
{
	struct symbolizer *s = ctx->s;
	struct jit_ret *jr;
	uint64_t key;
	size_t jit_at;
	bool grafted;

	ctx->jit = jit_proc_get(ctx->p);
	key = jit_key(ctx, f->ips[f->n - 1]);
	jr = jit_ret_slot(ctx->jit, key);
	if (jr && jr->key != key)
		*jr = (struct jit_ret){ .key = key };
	jit_at = f->n;
	grafted = graft_first(ctx, f, jr);
	*how = grafted ? graft_gemm(ctx, f, jr) : WALK_FAIL;
	if (*how == WALK_FAIL && find_caller(ctx, cur, next, f, jr, how)) {
		s->stats.jit_callers_recovered++;
		drop_stale(f, jit_at, jr);
		if (jr) {
			uint64_t off = f->sps[jit_at] - 8 - f->sps[jit_at - 1];

			jit_ret_note(jr, f->ips[jit_at], off < ctx->size ? off : 0);
		}
		return JIT_CALLER_WALKED;
	}
	if (*how == WALK_FAIL && !grafted)
		*how = graft_gemm(ctx, f, jr);
	if (*how != WALK_FAIL) {
		s->stats.jit_callers_recovered++;
		if (jr)
			jr->grafted = true;
		return JIT_CALLER_GRAFTED;
	}
	s->stats.jit_callers_missed++;
	return JIT_CALLER_MISSED;
}
