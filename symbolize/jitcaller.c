/* SPDX-License-Identifier: MIT */
/*
 * Recovery of the callers of JIT code (oneDNN's kernels), which has no CFI;
 * see docs/onednn-jit.md. Driven by stackwalk.c one JIT frame at a time
 * (jitcaller__find), on top of the CFI walker of unwind.c.
 *
 * Each kernel's preamble is decoded from its own code (insn.c), read from
 * the live process at its first frame and kept per perf-map line: which
 * registers it pushed, in what order, and how it moved rsp (oneDNN 2.x
 * pushes rbx, rbp, r12-r15; 3.x rbp, then mov rbp, rsp, then rbx,
 * r12-r15). Inside the preamble or an epilogue the return address's slot is
 * exact. In the body the caller is found by scanning the copied stack
 * upward from above the preamble's pushes for a word that (1) points into
 * an executable mapping of a known module, (2) follows an indirect call
 * there, and (3) passes the caller's CFI: resumed there with the registers
 * the preamble saved below it, the caller's chain unwinds to a thread's
 * entry, or off the end of the copy, or to more JIT code. One step is not
 * enough: the kernel's own stack area holds stale frames of earlier calls,
 * whose first steps look fine (and whose CFI may even stop as at a
 * thread's entry: unwind.c tells the two apart).
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
#include <sys/uio.h>

#include "symbolize/internal.h"
#include "symbolize/unwind.h"

/*
 * What a kernel whose code could not be read is taken to have pushed, when
 * no other kernel of its process was decoded: oneDNN 2.x's preamble (rbx,
 * rbp, r12-r15; 3.x pushes rbp first). Stacks recovered with it are marked
 * so (UNWIND_END_JIT_GUESSED), never complete.
 */
static const uint8_t preamble_2x[] = { 3, 5, 12, 13, 14, 15 };
#define JIT_MAX_TRIALS 64
/* Perf-map lines read at most in one sweep (the rest when their frames come). */
#define SWEEP_MAX 1024
#define JIT_RET_SLOTS 256 /* power of two, a multiple of TEACH_WAYS */
#define JIT_RET_WAYS 4
/*
 * The call sites and frame sizes complete stacks taught, in buckets of
 * TEACH_WAYS slots, the least recently taught going first. (Each had one
 * slot per hash: two functions that shared it took turns, and a stack seen
 * before is not taught again, so one lost its call sites for good; the MLP
 * at two threads lost its GEMM driver's so in 2 of 100 runs, and 12-29% of
 * its stacks.)
 */
#define TEACH_WAYS 4
#define EDGE_SLOTS 4096 /* power of two, a multiple of TEACH_WAYS */
#define EDGE_WAYS 8
#define SIZE_SLOTS 4096 /* power of two, a multiple of TEACH_WAYS */
#define CLIMB_DEPTH 12
/*
 * A climb goes no deeper than 2 steps, then 4, 8 and CLIMB_DEPTH, within one
 * budget of CLIMB_PROBES steps: the call sites of a function are tried most
 * recent first, and one depth-first search down a wrong one spent the whole
 * budget on a path that could only fail (the MLP at two threads: the main
 * thread's GEMM driver is called directly and through GOMP_parallel; 2 of
 * 100 runs kept 3-13% of their stacks cut so) before the right call site
 * one step further was tried. A deep climb costs 26 steps, not 12.
 */
static const unsigned climb_limits[] = { 2, 4, 8, CLIMB_DEPTH };
#define CLIMB_PROBES 48

/* What a slot of the tables below holds, and when it was last taught (jit_proc.tick). */
struct taught {
	uint64_t key, at;
};

/* Where a piece of JIT code returned to lately (it may have several callers). */
struct jit_ret {
	struct taught t; /* key: jit_key's */
	uint64_t ra[JIT_RET_WAYS]; /* most recent first */
	bool grafted; /* its caller was found by graft_gemm before */
	/* where above the SP its return address was found lately, most recent first; 0: unused */
	uint32_t ra_off[JIT_RET_WAYS];
};

/* Call sites seen calling a function (the return addresses just above its frames). */
struct edge_slot {
	struct taught t; /* key: the start of the function */
	uint64_t up[EDGE_WAYS]; /* most recent first */
};

/* How far above a frame that returns to ra (the key) its caller's frame was. */
struct size_slot {
	struct taught t;
	uint64_t size;
};

/*
 * A kernel's preamble, decoded from its code when its perf-map line was
 * first seen (or its first frame unwound), and a copy of its code: the
 * epilogue test at a sampled IP reads the copy, since unwinding runs behind
 * the samples and a process's last samples are unwound after it exited
 * (an MLP run had 0.2-0.6% of its stacks guessed for want of those bytes).
 */
struct jit_kernel {
	uint64_t code, seq; /* its perf-map line: where it starts */
	bool read; /* its first bytes were read and decoded into pre */
	struct preamble pre;
	uint8_t *text; /* text_len bytes from code on, or NULL */
	size_t text_len;
};
/* At most this much of one process's kernels' code is kept (one kernel's: JIT_TEXT_MAX). */
#define PROC_TEXT_MAX (64u << 20)

/* What a process's JIT frames taught us; hung on proc->jit. */
struct jit_proc {
	struct jit_ret *jit_rets;
	struct edge_slot *edges; /* call sites of functions, for climbing */
	struct size_slot *sizes;
	uint64_t tick; /* complete stacks' frames taught */
	/*
	 * Every kernel of the perf map seen, by its start (kernel_at: code ->
	 * index). They were kept in 1,024 slots by hash, one kernel each: a
	 * kernel whose slot another took lost its copied code, and one unwound
	 * after the process exited had no preamble ("JIT preamble not read").
	 * Each is allocated alone: a preamble in use stays where it is while
	 * the walk it started reads more kernels.
	 */
	struct jit_kernel **kernels;
	size_t nkernels, kernels_cap;
	struct u64map kernel_at;
	struct epi_slot *epis; /* sampled IPs: epilogue or not */
	struct preamble last; /* the preamble decoded last, for kernels that cannot be read */
	bool have_last;
	uint64_t swept_seq; /* perf-map lines before this one were read (perfmap_entry.seq) */
	size_t text_bytes; /* kernels' code kept, in all */
};

void jitcaller__proc_free(struct jit_proc *j)
{
	if (!j)
		return;
	free(j->jit_rets);
	free(j->edges);
	free(j->sizes);
	for (size_t i = 0; i < j->nkernels; i++) {
		free(j->kernels[i]->text);
		free(j->kernels[i]);
	}
	free(j->kernels);
	u64map_free(&j->kernel_at);
	free(j->epis);
	free(j);
}

static struct jit_proc *jit_proc_get(struct proc *p)
{
	if (!p->jit)
		p->jit = calloc(1, sizeof(*p->jit));
	return p->jit;
}

/* ---- the kernel's preamble ---- */

/* x86 register numbers (as instructions encode them) -> libunwind's */
static const int unw_of_x86[16] = {
	UNW_X86_64_RAX, UNW_X86_64_RCX, UNW_X86_64_RDX, UNW_X86_64_RBX,
	UNW_X86_64_RSP, UNW_X86_64_RBP, UNW_X86_64_RSI, UNW_X86_64_RDI,
	UNW_X86_64_R8,	UNW_X86_64_R9,	UNW_X86_64_R10, UNW_X86_64_R11,
	UNW_X86_64_R12, UNW_X86_64_R13, UNW_X86_64_R14, UNW_X86_64_R15,
};

/* The first bytes of the code at addr in the live process; how many were read. */
static size_t read_code(uint32_t pid, uint64_t addr, uint8_t *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t got = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);

	return got > 0 ? (size_t)got : 0;
}

/* Copy the kernel's code from the live process, within the budgets; else k->text stays NULL. */
static void keep_text(struct uw_ctx *ctx, struct jit_kernel *k, const struct perfmap_entry *e)
{
	struct jit_proc *jp = ctx->jit;
	size_t len = e->end - e->code, got;

	if (len > JIT_TEXT_MAX || len > PROC_TEXT_MAX - jp->text_bytes)
		return;
	k->text = malloc(len);
	if (!k->text)
		return;
	got = read_code(ctx->p->pid, e->code, k->text, len);
	if (got != len) {
		free(k->text);
		k->text = NULL;
		return;
	}
	k->text_len = len;
	jp->text_bytes += len;
}

/*
 * Up to len bytes of code at addr, from kernel k's copy where it holds them
 * (k may be NULL), else from the live process; how many.
 */
static size_t code_at(struct uw_ctx *ctx, const struct jit_kernel *k, uint64_t addr, uint8_t *buf,
		      size_t len)
{
	if (k && k->text && addr >= k->code && addr - k->code < k->text_len) {
		size_t off = addr - k->code;

		if (len > k->text_len - off)
			len = k->text_len - off;
		memcpy(buf, k->text + off, len);
		return len;
	}
	return read_code(ctx->p->pid, addr, buf, len);
}

/*
 * The kernel of a perf-map line, its code read and its preamble decoded the
 * first time; NULL without memory.
 */
static struct jit_kernel *kernel_of(struct uw_ctx *ctx, const struct perfmap_entry *e)
{
	struct jit_proc *jp = ctx->jit;
	uint8_t code[PREAMBLE_CODE];
	struct jit_kernel *k;
	uint64_t v;
	size_t len;

	if (u64map_get(&jp->kernel_at, e->code, &v)) {
		k = jp->kernels[v];
		if (k->seq == e->seq)
			return k;
		/* a new kernel where a freed one started: its line replaces the old one's */
		jp->text_bytes -= k->text_len;
		free(k->text);
	} else {
		if (grow_array((void **)&jp->kernels, &jp->kernels_cap, jp->nkernels + 1,
			       sizeof(*jp->kernels)))
			return NULL;
		k = malloc(sizeof(*k));
		if (!k)
			return NULL;
		if (u64map_put(&jp->kernel_at, e->code, jp->nkernels)) {
			free(k);
			return NULL;
		}
		jp->kernels[jp->nkernels++] = k;
	}
	*k = (struct jit_kernel){ .code = e->code, .seq = e->seq };
	keep_text(ctx, k, e);
	len = e->end - e->code < sizeof(code) ? e->end - e->code : sizeof(code);
	len = code_at(ctx, k, e->code, code, len);
	if (len && !insn_preamble(code, len, &k->pre)) {
		k->read = true;
		ctx->s->stats.jit_preambles_read++;
		jp->last = k->pre;
		jp->have_last = true;
	} else {
		ctx->s->stats.jit_preambles_unread++;
	}
	return k;
}

/* Read the kernels of the perf-map lines added since the last sweep. */
static void sweep(struct uw_ctx *ctx, const struct perfmap *pm)
{
	struct jit_proc *jp = ctx->jit;
	unsigned n = 0;

	if (!pm || pm->seq == jp->swept_seq)
		return;
	for (size_t i = 0; i < pm->nents && n < SWEEP_MAX; i++) {
		if (pm->ents[i].seq >= jp->swept_seq && pm->ents[i].end > pm->ents[i].code) {
			kernel_of(ctx, &pm->ents[i]);
			n++;
		}
	}
	jp->swept_seq = pm->seq;
}

void jitcaller__refresh(struct symbolizer *s, struct proc *p)
{
	struct uw_ctx ctx = { .s = s, .p = p, .jit = jit_proc_get(p) };

	if (!ctx.jit || !p->perfmap || !p->perfmap->nents)
		return;
	sweep(&ctx, p->perfmap);
}

/*
 * The preamble of the kernel that ip lies in, decoded from its code in the
 * process's memory (its start is in the perf map) and kept. Every kernel
 * the perf map has named since the last time is read now too, while the
 * process is still there to be read: unwinding runs behind the samples, and
 * a kernel's first frame may be unwound after the trainer has exited. NULL
 * when the kernel's start is unknown or its code could not be read; then
 * *off and *kernel are not set (kernel may be NULL).
 */
static const struct preamble *kernel_preamble(struct uw_ctx *ctx, uint64_t ip, uint64_t *off,
					      const struct jit_kernel **kernel)
{
	const struct perfmap_entry *e = perfmap__lookup(ctx->s, ctx->p, ip);
	const struct perfmap *pm = ctx->p->perfmap;
	struct jit_proc *jp = ctx->jit;
	struct jit_kernel *k;

	if (!e || !jp || e->code > ip || e->end <= e->code)
		return NULL;
	sweep(ctx, pm);
	k = kernel_of(ctx, e);
	if (!k || !k->read)
		return NULL;
	*off = ip - e->code;
	if (kernel)
		*kernel = k;
	return &k->pre;
}

/*
 * What to take for a kernel whose code could not be read: the preamble of
 * the kernel decoded last in this process (one generator makes them all),
 * else oneDNN 2.x's.
 */
static const struct preamble *guess_preamble(struct uw_ctx *ctx, struct preamble *buf)
{
	if (ctx->jit && ctx->jit->have_last)
		return &ctx->jit->last;
	memset(buf, 0, sizeof(*buf));
	buf->fp_at = -1;
	buf->sp_slot = -1;
	buf->npush = sizeof(preamble_2x);
	memcpy(buf->push, preamble_2x, sizeof(preamble_2x));
	buf->depth_now = 8 * sizeof(preamble_2x);
	return buf;
}

/* ---- searching the copy ---- */

/* Does a walk that ended so go on to a thread's entry (or may, past the copy or a JIT frame)? */
static bool walk_usable(const struct uw_ctx *ctx, enum walk_end how)
{
	return how == WALK_ROOT || (how == WALK_OOB && !ctx->cut) || how == WALK_JIT ||
	       how == WALK_FULL;
}

/* Where a sampled IP of JIT code was: an epilogue (pops to a ret) or not. */
struct epi_slot {
	uint64_t ip;
	int8_t n; /* registers popped from ip on; -1: not an epilogue */
	uint8_t regs[PREAMBLE_MAX_PUSHES];
};
#define EPI_SLOTS 8192 /* power of two: 256 KiB a process with JIT code */

/* Is the sampled ip in an epilogue? Its pops, read once per ip from the copy of its kernel k
 * (NULL: none) or else from the process's memory. */
static const struct epi_slot *epilogue_at(struct uw_ctx *ctx, const struct jit_kernel *k,
					  uint64_t ip)
{
	struct jit_proc *jp = ctx->jit;
	struct epi_slot *e;
	uint8_t code[EPILOGUE_CODE];
	size_t len;

	if (!jp->epis)
		jp->epis = calloc(EPI_SLOTS, sizeof(*jp->epis));
	if (!jp->epis)
		return NULL;
	e = &jp->epis[hash_u64(ip) & (EPI_SLOTS - 1)];
	if (e->ip == ip)
		return e;
	len = code_at(ctx, k, ip, code, sizeof(code));
	if (!len)
		return NULL;
	e->ip = ip;
	e->n = (int8_t)insn_epilogue(code, len, e->regs, PREAMBLE_MAX_PUSHES);
	return e;
}

/*
 * Try the return address in slot `at` for the JIT frame of cur, with the
 * callee-saved registers as the kernel left them: regs[i] pushed at
 * at - 8 * (i + 1) for each i below n whose slot is still on the stack (at
 * or above sp; below it they were popped back already), the rest as the
 * JIT frame has them. The walk from there must end usably (walk_usable).
 */
static bool try_caller(struct uw_ctx *ctx, struct walker *cur, struct walker *w, struct frames *f,
		       const uint8_t *regs, unsigned n, uint64_t at, enum walk_end *how)
{
	uint64_t sp = f->sps[f->n - 1], ra;
	size_t base = f->n;

	if (!stack_word(ctx, at, &ra) || !after_call(ctx, ra, true))
		return false;
	w->arg.ctx = ctx;
	memcpy(w->arg.regs, cur->arg.regs, sizeof(w->arg.regs));
	for (unsigned i = 0; i < n && at >= sp + 8 * (uint64_t)(i + 1); i++)
		stack_word(ctx, at - 8 * (uint64_t)(i + 1), &w->arg.regs[unw_of_x86[regs[i] & 15]]);
	w->arg.regs[UNW_X86_64_RSP] = at + 8;
	/* inside the call instruction: right for a call that ends its function too */
	w->arg.regs[UNW_X86_64_RIP] = ra - 1;
	walker_init(w, ctx);
	push(f, ra, at + 8);
	*how = walk(ctx, w, f);
	if (walk_usable(ctx, *how))
		return true;
	f->n = base;
	return false;
}

/*
 * Where a known stack says this JIT code returned to: first without
 * stepping, from the slot where its return address was last time, then
 * from any slot of the copy that holds one of the addresses it returned to
 * lately. A chain is joined only where enough of its frames are still in
 * the copy (chain_join).
 */
static bool known_caller(struct uw_ctx *ctx, struct frames *f, const struct jit_ret *jr,
			 uint64_t lo, enum walk_end *how)
{
	uint64_t sp = f->sps[f->n - 1], ra;
	size_t base = f->n;

	/*
	 * A kernel's frame has the same size at most of its samples, so the
	 * slot where its return address was last time is tried before the
	 * copy is searched (the GEMM kernel's is 8 KiB up).
	 */
	for (int k = 0; k < JIT_RET_WAYS && jr->ra_off[k]; k++) {
		if (sp + jr->ra_off[k] < lo || !stack_word(ctx, sp + jr->ra_off[k], &ra) || !ra)
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
	for (uint64_t at = lo; stack_word(ctx, at, &ra); at += 8) {
		int i;

		for (i = 0; i < JIT_RET_WAYS && ra != jr->ra[i]; i++)
			;
		if (!ra || i == JIT_RET_WAYS)
			continue;
		push(f, ra, at + 8);
		if (chain_join(ctx, f)) {
			*how = WALK_ROOT;
			return true;
		}
		f->n = base;
	}
	return false;
}

/*
 * The caller of the JIT frame at the end of f. Its kernel's preamble,
 * decoded from its code, says where the return address can be and which
 * registers lie below it:
 *  - at the start of the kernel or inside its preamble: exactly at SP plus
 *    what was pushed and reserved so far;
 *  - in an epilogue (pops to a ret): just above the registers still to pop;
 *  - in the body: at or above SP plus all the preamble did, with every
 *    pushed register below it; for a preamble that copied rsp into rbp,
 *    first where rbp says, if the body left rbp alone.
 * In the body the copy is scanned upward from there for a word that
 * follows an indirect call and whose caller's chain then unwinds with CFI
 * to a thread's entry (or off the end of the copy, or to more JIT code).
 * Stale return addresses (the kernel's own stack area holds frames of
 * earlier calls) pass the first steps but not the whole way. A kernel whose
 * code could not be read is searched as oneDNN 2.x's preamble would have
 * it (or as the kernel decoded last in the process), and ctx->jit_guessed
 * says so. On success the caller's frames are in f, w is the walker past
 * them, and *how says how that walk ended.
 */
static bool find_caller(struct uw_ctx *ctx, struct walker *cur, struct walker *w, struct frames *f,
			const struct jit_ret *jr, enum walk_end *how)
{
	uint64_t sp = f->sps[f->n - 1], ip = f->ips[f->n - 1], off = 0, ra, lo;
	const struct jit_kernel *k = NULL;
	struct preamble guess;
	const struct preamble *pre;
	unsigned trials = 0;
	uint32_t depth;
	uint8_t npush;

	if (f->n >= f->max)
		return false;
	pre = kernel_preamble(ctx, ip, &off, &k);
	if (!pre) {
		/* as before the preamble was read: 2.x's pushes, else a kernel that saved nothing */
		pre = guess_preamble(ctx, &guess);
		ctx->jit_guessed = true;
		if (jr && known_caller(ctx, f, jr, sp, how))
			return true;
		for (uint64_t at = sp; stack_word(ctx, at, &ra); at += 8) {
			if (!after_call(ctx, ra, true))
				continue;
			if (++trials > JIT_MAX_TRIALS)
				return false;
			if (at - sp >= pre->depth_now &&
			    try_caller(ctx, cur, w, f, pre->push, pre->npush, at, how))
				return true;
			if (try_caller(ctx, cur, w, f, pre->push, 0, at, how))
				return true;
		}
		return false;
	}
	/* the sampled IP at the start of the kernel or between its preamble's steps */
	if (f->n == 1 && preamble_at(pre, off, &depth, &npush))
		return try_caller(ctx, cur, w, f, pre->push, npush, sp + depth, how);
	if (f->n == 1 && off >= pre->len) {
		const struct epi_slot *e = epilogue_at(ctx, k, ip);

		/*
		 * Its code could not be read (the process has exited: unwinding
		 * runs behind the samples): an epilogue, whose pops moved rsp
		 * past some pushes, cannot be ruled out, and the search below
		 * would start above the return address and take an outer
		 * caller's (the JIT fixture, in a fresh Debian 13 root:
		 * _start;__libc_start_main;...;kernel, main and call_preamble
		 * skipped). What is found is a guess, never complete.
		 */
		if (!e) {
			ctx->jit_guessed = true;
			/*
			 * The slots an epilogue could have left the return
			 * address in, nearest first (j registers still to pop:
			 * the first j pushed); in the body these hold pushed
			 * registers, not return addresses, and fail.
			 */
			for (unsigned j = 0; j < pre->npush; j++)
				if (try_caller(ctx, cur, w, f, pre->push, j, sp + 8 * (uint64_t)j,
					       how))
					return true;
		}
		if (e && e->n >= 0) {
			uint8_t regs[PREAMBLE_MAX_PUSHES];

			/* popped from sp up: the last pop is the register pushed first */
			for (int i = 0; i < e->n; i++)
				regs[i] = e->regs[e->n - 1 - i];
			return try_caller(ctx, cur, w, f, regs, (unsigned)e->n,
					  sp + 8 * (uint64_t)e->n, how);
		}
	}
	lo = sp + pre->depth_now;
	if (jr && known_caller(ctx, f, jr, lo, how))
		return true;
	if (pre->fp_at >= 0) {
		uint64_t at = cur->arg.regs[UNW_X86_64_RBP] + pre->fp_depth;

		if (at >= lo && try_caller(ctx, cur, w, f, pre->push, pre->npush, at, how))
			return true;
	}
	for (uint64_t at = lo; stack_word(ctx, at, &ra); at += 8) {
		if (!after_call(ctx, ra, true))
			continue;
		if (++trials > JIT_MAX_TRIALS)
			return false;
		if (try_caller(ctx, cur, w, f, pre->push, pre->npush, at, how))
			return true;
	}
	return false;
}

/* ---- what complete stacks teach ---- */

/* The first slot of key's bucket of TEACH_WAYS in a table of n slots. */
static size_t bucket_of(uint64_t key, size_t n)
{
	return hash_u64(key) & (n - TEACH_WAYS);
}

/*
 * The slot of key in a table of n slots of stride bytes, each starting with
 * a struct taught; if take and there is none, the bucket's least lately
 * taught, emptied for it. NULL when there is none and not take, or for key
 * 0 (an empty slot's).
 */
static void *taught_slot(void *table, size_t stride, size_t n, uint64_t key, bool take)
{
	uint8_t *b = (uint8_t *)table + stride * bucket_of(key, n);
	struct taught *old = (struct taught *)b;

	if (!key)
		return NULL;
	for (int w = 0; w < TEACH_WAYS; w++) {
		struct taught *t = (struct taught *)(b + stride * (size_t)w);

		if (t->key == key)
			return t;
		if (t->at < old->at)
			old = t;
	}
	if (!take)
		return NULL;
	memset(old, 0, stride);
	old->key = key;
	return old;
}

/* fn's call sites (take: a slot for them if there is none) */
static struct edge_slot *edge_slot(struct edge_slot *t, uint64_t fn, bool take)
{
	return taught_slot(t, sizeof(*t), EDGE_SLOTS, fn, take);
}

/* the frame size above return address ra (take: a slot for it if there is none) */
static struct size_slot *size_slot(struct size_slot *t, uint64_t ra, bool take)
{
	return taught_slot(t, sizeof(*t), SIZE_SLOTS, ra, take);
}

static void edge_note(struct jit_proc *up, uint64_t fn, uint64_t up_ip)
{
	struct edge_slot *e;
	int i;

	if (!up->edges)
		up->edges = calloc(EDGE_SLOTS, sizeof(*up->edges));
	if (!up->edges)
		return;
	e = edge_slot(up->edges, fn, true);
	if (!e)
		return;
	e->t.at = ++up->tick;
	for (i = 0; i < EDGE_WAYS - 1 && e->up[i] != up_ip; i++)
		;
	memmove(e->up + 1, e->up, i * sizeof(*e->up));
	e->up[0] = up_ip;
}

/* The call sites seen calling the function that starts at fn, or NULL. */
static const struct edge_slot *edges_of(const struct jit_proc *up, uint64_t fn)
{
	return up && up->edges ? edge_slot(up->edges, fn, false) : NULL;
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
		struct size_slot *z;

		edge_note(up, fn, f->ips[i + 1]);
		z = up->sizes ? size_slot(up->sizes, f->ips[i], true) : NULL;
		if (!z)
			continue;
		z->size = f->sps[i + 1] - f->sps[i];
		z->t.at = ++up->tick;
	}
}

void jitcaller__teach_edge(struct proc *p, uint64_t fn, uint64_t up_ip)
{
	struct jit_proc *up = jit_proc_get(p);

	if (up)
		edge_note(up, fn, up_ip);
}

size_t jitcaller__edges(struct proc *p, uint64_t fn, uint64_t *ups, size_t max)
{
	const struct edge_slot *e = edges_of(p->jit, fn);
	size_t n = 0;

	for (; e && n < EDGE_WAYS && n < max && e->up[n]; n++)
		ups[n] = e->up[n];
	return n;
}

/* ---- JIT callers outside the copy ---- */

/*
 * The caller's SP of a frame that returns to ra: measured from CFI, else (a
 * frame-pointer frame, whose CFA depends on rbp) as it was last time.
 */
static bool frame_cfa(struct uw_ctx *ctx, uint64_t ra, uint64_t sp, uint64_t *cfa)
{
	const struct size_slot *z =
		ctx->jit && ctx->jit->sizes ? size_slot(ctx->jit->sizes, ra, false) : NULL;

	if (probe_cfa(ctx, ra, sp, cfa))
		return true;
	if (!z || !z->size || sp + z->size < sp)
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
 * function's CFI (its CFA), to at most limit steps. Measured on the MLP by
 * hiding the callers of JIT frames whose callers were in the copy: with the
 * frame at the kernel's caller SP unknown, 97% of grafts name every function
 * right, 1.5% get one frame wrong (a sibling at the same SP); a match at any
 * function at the right SP, not required to be a caller, got 5-10% wrong and
 * is not used.
 */
static bool climb(struct uw_ctx *ctx, struct frames *f, unsigned depth, unsigned limit,
		  unsigned *probes)
{
	uint64_t ra = f->ips[f->n - 1], sp = f->sps[f->n - 1], cfa, fn;
	const struct chain_slot *c = chain_in_function(ctx, sp, ra);
	const struct edge_slot *e;
	size_t base = f->n;

	if (c)
		return graft_rest(f, c);
	if (depth >= limit || !ctx->jit || !ctx->jit->edges || f->n >= f->max || !*probes)
		return false;
	(*probes)--;
	fn = fde_start(ctx, ra);
	e = edges_of(ctx->jit, fn);
	if (!e || !frame_cfa(ctx, ra, sp, &cfa))
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
		if (climb(ctx, f, depth + 1, limit, probes))
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

	if (!ctx->up->chains || !jr)
		return WALK_FAIL;
	for (size_t l = 0; l < ARRAY_SIZE(climb_limits) && probes; l++) {
		for (int r = 0; r < JIT_RET_WAYS && jr->ra[r] && f->n < f->max; r++) {
			push(f, jr->ra[r], sp);
			if (climb(ctx, f, 0, climb_limits[l], &probes))
				return WALK_ROOT;
			f->n = base;
		}
	}
	return WALK_FAIL;
}

/*
 * The rsp a kernel kept before it moved rsp by an amount not in its code
 * (oneDNN's f32 GEMM: its buffer below the stack, or its heap workspace),
 * from the slot its own code stores it to (insn.c's decode: [rsp + 120] in
 * oneDNN 2.6's AVX-512 kernel, [rsp + 152] in its AVX/AVX2 one, each as
 * rsp was after the preamble's pushes). False without such a slot, or when
 * the word there cannot be a stack pointer.
 */
static bool kept_sp(struct uw_ctx *ctx, const struct preamble *pre, uint64_t sp, uint64_t *orig)
{
	return pre && pre->sp_slot >= 0 && stack_word(ctx, sp + (uint64_t)pre->sp_slot, orig) &&
	       *orig && !(*orig % 8) && *orig != sp;
}

static enum walk_end graft_gemm(struct uw_ctx *ctx, struct frames *f, const struct jit_ret *jr)
{
	uint64_t sp = f->sps[f->n - 1], orig, off;
	const struct preamble *pre = kernel_preamble(ctx, f->ips[f->n - 1], &off, NULL);

	/* a kernel whose code was not read has no slot to read: nothing is guessed */
	if (!kept_sp(ctx, pre, sp, &orig))
		return WALK_FAIL;
	/* the return address lies sp_depth above the rsp kept */
	return graft_at(ctx, f, orig + pre->sp_depth + 8, jr) == WALK_ROOT ? WALK_ROOT : WALK_FAIL;
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
static bool graft_first(struct uw_ctx *ctx, const struct frames *f, const struct jit_ret *jr)
{
	uint64_t orig, off;
	const struct preamble *pre;

	if (!jr || !jr->grafted)
		return false;
	pre = kernel_preamble(ctx, f->ips[f->n - 1], &off, NULL);
	return kept_sp(ctx, pre, f->sps[f->n - 1], &orig) &&
	       (orig < ctx->sp0 || orig - ctx->sp0 >= ctx->size);
}

/*
 * What identifies a piece of JIT code: its perf-map name, else its mapping.
 * oneDNN 3.x numbers each kernel it generates ("jit_avx_gemm_f32_xbyak_gemm.24",
 * its jitdump's "%s.%d"): the instances of one generator are one key. A
 * kernel generated many times is called from the same places, and an
 * instance that never showed its return address (the GEMM kernel on its
 * heap workspace) learns it from the others; every caller so learned is
 * still proven by climbing to a remembered chain.
 */
static uint64_t jit_key(struct uw_ctx *ctx, uint64_t ip)
{
	const struct perfmap_entry *e = perfmap__find(ctx->p->perfmap, ip);
	struct map *m;

	if (e && e->name) {
		size_t len = strlen(e->name), end = len;

		while (end && e->name[end - 1] >= '0' && e->name[end - 1] <= '9')
			end--;
		if (end < len && end > 1 && e->name[end - 1] == '.')
			len = end - 1;
		return hash_bytes(e->name, len, 0x6a69746b6579ull) | 1;
	}
	m = proc_lookup(ctx->p, ip);
	return m ? m->start : ip;
}

/* What JIT code of this key taught: its own slot, else one emptied for it; NULL without memory or key. */
static struct jit_ret *jit_ret_slot(struct jit_proc *up, uint64_t key)
{
	struct jit_ret *jr;

	if (!up)
		return NULL;
	if (!up->jit_rets)
		up->jit_rets = calloc(JIT_RET_SLOTS, sizeof(*up->jit_rets));
	if (!up->jit_rets)
		return NULL;
	jr = taught_slot(up->jit_rets, sizeof(*jr), JIT_RET_SLOTS, key, true);
	if (jr)
		jr->t.at = ++up->tick;
	return jr;
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

void jitcaller__teach_ret(struct proc *p, uint64_t key, uint64_t ra)
{
	struct jit_ret *jr = jit_ret_slot(jit_proc_get(p), key);

	if (jr)
		jit_ret_note(jr, ra, 0);
}

uint64_t jitcaller__ret_of(struct proc *p, uint64_t key)
{
	const struct jit_ret *jr =
		p->jit && p->jit->jit_rets
			? taught_slot(p->jit->jit_rets, sizeof(*jr), JIT_RET_SLOTS, key, false)
			: NULL;

	return jr ? jr->ra[0] : 0;
}

enum walk_end jitcaller__graft_outer(struct uw_ctx *ctx, struct frames *f)
{
	unsigned probes = CLIMB_PROBES;
	size_t base = f->n;

	ctx->jit = jit_proc_get(ctx->p);
	if (f->n < 2 || !ctx->up->chains || !ctx->jit)
		return WALK_OOB;
	for (size_t l = 0; l < ARRAY_SIZE(climb_limits) && probes; l++) {
		if (climb(ctx, f, 0, climb_limits[l], &probes))
			return WALK_ROOT;
		f->n = base;
	}
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
	jit_at = f->n;
	grafted = graft_first(ctx, f, jr);
	*how = grafted ? graft_gemm(ctx, f, jr) : WALK_FAIL;
	if (*how == WALK_FAIL) {
		if (find_caller(ctx, cur, next, f, jr, how)) {
			s->stats.jit_callers_recovered++;
			drop_stale(f, jit_at, jr);
			/*
			 * Only a caller found with the kernel's own code read is
			 * learned: the fast paths (known_caller) trust what was
			 * learned, so a guess noted here would make later
			 * stacks wrong and complete.
			 */
			if (jr && !ctx->jit_guessed) {
				uint64_t off = f->sps[jit_at] - 8 - f->sps[jit_at - 1];

				jit_ret_note(jr, f->ips[jit_at], off < ctx->size ? off : 0);
			}
			return JIT_CALLER_WALKED;
		}
		/* not how the candidates that failed ended */
		*how = grafted ? WALK_FAIL : graft_gemm(ctx, f, jr);
	}
	if (*how == WALK_ROOT) {
		s->stats.jit_callers_recovered++;
		if (jr)
			jr->grafted = true;
		return JIT_CALLER_GRAFTED;
	}
	s->stats.jit_callers_missed++;
	return JIT_CALLER_MISSED;
}
