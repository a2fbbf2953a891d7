/* SPDX-License-Identifier: MIT */
/*
 * DWARF unwinding of copied user stacks, with libunwind's remote interface,
 * and recovery of the callers of JIT code (which has no CFI).
 *
 * libunwind sees the target through its accessors:
 *  - registers: the sample's user registers;
 *  - memory: the sample's stack copy, [SP, SP + size), and the bytes of the
 *    mapped modules read from their files (never the live process);
 *  - find_proc_info: the module's .eh_frame_hdr search table, handed over as
 *    a UNW_INFO_FORMAT_REMOTE_TABLE whose FDEs libunwind reads through the
 *    memory accessor;
 *  - no dynamic unwind info.
 * Each module's program headers, .eh_frame_hdr and .eh_frame are read once,
 * by elf.c,
 * (module->unwind) and shared by every process that maps it; each process
 * has its own libunwind address space and register-state cache.
 *
 * JIT code (a perf-map range, or anonymous executable memory) has no CFI.
 * Its caller is found by scanning the copied stack upward from SP for a
 * word that (1) points into an executable mapping of a known module, (2)
 * follows an indirect call there, and (3) passes the caller's CFI: resumed
 * there with the registers oneDNN's preamble saved below it (or, for code
 * that saved nothing, with the sampled ones), the caller's chain unwinds to
 * the root or off the end of the copy (notes/onednn-jit.md). One step is
 * not enough: the kernel's own stack area holds stale frames of earlier
 * calls, whose first steps look fine.
 *
 * Complete stacks are remembered per process, keyed by the SP of each
 * frame. A walk that arrives at a remembered frame whose return addresses
 * are all still in the copy where they were takes the rest without
 * stepping. oneDNN's GEMM kernel running on its heap workspace keeps the
 * original rsp at [rsp + 120] and its callers are not in the copy at all:
 * from a call site it returned to before, at the SP that rsp gives, the
 * stack is climbed through call sites seen in earlier stacks, each SP given
 * by CFI, until it lands exactly on a remembered frame of the same function.
 *
 * Bounds: every read of the copy is checked against it; memory reads per
 * unwind, candidate callers per JIT frame, JIT frames per stack and the
 * remembered stacks are capped; SP must grow at every frame.
 */
#include <asm/perf_regs.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/internal.h"

/* Exported by libunwind, declared only in its private headers. */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as, unw_word_t ip,
					      unw_dyn_info_t *di, unw_proc_info_t *pi,
					      int need_unwind_info, void *arg);

#define UW_RECENT 8
/* memory reads per unwind: a few hundred per frame when nothing is cached */
#define UW_MAX_READS 200000
#define UW_CACHE_SIZE 2048 /* register states cached per process (about 300 bytes each) */
/* rbx, rbp, r12, r13, r14, r15: what oneDNN's jit_generator::preamble() pushes */
#define PREAMBLE_PUSHES 6
#define JIT_MAX_TRIALS 64
#define JIT_MAX_FRAMES 16
/* oneDNN's GEMM kernel on its heap workspace keeps the original rsp here */
#define GEMM_ORIG_SP_OFF 120
#define CHAIN_BUCKETS 512 /* power of two */
#define CHAIN_WAYS 4
#define CHAIN_DEPTH 256
#define RA_SLOTS 4096 /* power of two */
#define JIT_RET_SLOTS 256 /* power of two */
#define JIT_RET_WAYS 4
#define EDGE_SLOTS 4096 /* power of two */
#define EDGE_WAYS 8
#define FDE_SLOTS 1024 /* power of two */
#define SIZE_SLOTS 4096 /* power of two */
#define CLIMB_DEPTH 12
#define CLIMB_PROBES 48
/* what a probe reads for memory it does not have: odd, so never a real return address */
#define PROBE_MARK 1

/* libunwind's x86-64 register numbers -> perf's */
static const uint8_t perf_reg_of[] = {
	[UNW_X86_64_RAX] = PERF_REG_X86_AX,  [UNW_X86_64_RDX] = PERF_REG_X86_DX,
	[UNW_X86_64_RCX] = PERF_REG_X86_CX,  [UNW_X86_64_RBX] = PERF_REG_X86_BX,
	[UNW_X86_64_RSI] = PERF_REG_X86_SI,  [UNW_X86_64_RDI] = PERF_REG_X86_DI,
	[UNW_X86_64_RBP] = PERF_REG_X86_BP,  [UNW_X86_64_RSP] = PERF_REG_X86_SP,
	[UNW_X86_64_R8] = PERF_REG_X86_R8,   [UNW_X86_64_R9] = PERF_REG_X86_R9,
	[UNW_X86_64_R10] = PERF_REG_X86_R10, [UNW_X86_64_R11] = PERF_REG_X86_R11,
	[UNW_X86_64_R12] = PERF_REG_X86_R12, [UNW_X86_64_R13] = PERF_REG_X86_R13,
	[UNW_X86_64_R14] = PERF_REG_X86_R14, [UNW_X86_64_R15] = PERF_REG_X86_R15,
	[UNW_X86_64_RIP] = PERF_REG_X86_IP,
};
#define UW_NREGS (UNW_X86_64_RIP + 1)

void unwind__module_free(struct module *m)
{
	if (!m)
		return;
	elf_file__free(m->unwind);
	m->unwind = NULL;
}

/* The module's unwind tables, read at first use; NULL when it has none. */
static struct elf_file *module_unwind(struct module *m)
{
	struct elf_file *mu = m->unwind;
	struct stat st;

	if (mu)
		return mu->err ? NULL : mu;
	mu = elf_file__new();
	if (!mu)
		return NULL; /* tried again at the next frame */
	/* the file pinned when it was mapped, else the path (a binary deleted meanwhile is lost) */
	if (m->fd > STDERR_FILENO && !fstat(m->fd, &st) && S_ISREG(st.st_mode)) {
		mu->fd = m->fd;
	} else {
		mu->fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		mu->own_fd = mu->fd >= 0;
		if (mu->fd >= 0 && (fstat(mu->fd, &st) || !S_ISREG(st.st_mode))) {
			close(mu->fd);
			mu->fd = -1;
			mu->own_fd = false;
		}
	}
	mu->err = mu->fd < 0 ? -ENOENT : elf_file__parse(mu);
	if (mu->err == -ENOMEM) {
		elf_file__free(mu);
		return NULL;
	}
	m->unwind = mu;
	return mu->err ? NULL : mu;
}

/* bias: runtime address - ELF vaddr, from the PT_LOAD that the mapping starts in */
static bool map_bias(const struct elf_file *mu, const struct map *m, uint64_t *bias)
{
	const struct elf_seg *best = NULL;

	for (size_t i = 0; i < mu->nsegs; i++) {
		const struct elf_seg *l = &mu->segs[i];
		uint64_t page = l->off & ~4095ull;

		if (m->pgoff < page || m->pgoff - page >= (l->off - page) + l->filesz)
			continue;
		if (!best || ((l->flags & PF_X) && !(best->flags & PF_X)))
			best = l;
	}
	if (!best)
		return false;
	*bias = m->start - (best->vaddr - best->off + m->pgoff);
	return true;
}

/* ---- per process ---- */

/* A complete stack seen before, from the frame at sp down to the root. */
struct chain_slot {
	uint64_t sp;
	uint64_t *ips, *sps;
	uint32_t n, cap;
	uint64_t used; /* tick of the last store or join: the least recent way goes first */
	bool indirect; /* ips[0] follows an indirect call */
};

struct ra_slot {
	uint64_t ra;
	uint8_t v; /* RA_*; 0: empty */
};

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

struct fde_slot {
	uint64_t ip, start;
};

/* How far above a frame that returns to ra its caller's frame was. */
struct size_slot {
	uint64_t ra, size;
};

struct unwind_proc {
	unw_addr_space_t as;
	struct elf_file *vdso;
	bool vdso_tried;
	struct chain_slot *chains; /* known stacks, by the SP of each frame */
	uint64_t tick;
	struct ra_slot *verdicts; /* is there a call before this address? */
	struct jit_ret *jit_rets;
	struct edge_slot *edges;
	struct fde_slot *fdes;
	struct size_slot *sizes;
	uint64_t *sps; /* scratch: SP of every frame of the current unwind */
	size_t sps_cap;
};

void unwind__proc_free(struct unwind_proc *u)
{
	if (!u)
		return;
	if (u->as)
		unw_destroy_addr_space(u->as);
	elf_file__free(u->vdso);
	for (size_t i = 0; u->chains && i < CHAIN_BUCKETS * CHAIN_WAYS; i++) {
		free(u->chains[i].ips);
		free(u->chains[i].sps);
	}
	free(u->chains);
	free(u->verdicts);
	free(u->jit_rets);
	free(u->edges);
	free(u->fdes);
	free(u->sizes);
	free(u->sps);
	free(u);
}

/* ---- the accessors ---- */

struct uw_recent {
	struct elf_file *mu;
	uint64_t bias, start, end; /* runtime extent of the module */
};

struct uw_ctx {
	struct symbolizer *s;
	struct proc *p;
	struct unwind_proc *up;
	const uint8_t *stack;
	uint64_t sp0, size;
	struct uw_recent recent[UW_RECENT];
	unsigned nrecent, next_recent;
	unsigned reads;
	bool noinfo; /* find_proc_info found no CFI: libunwind is guessing */
	bool probe; /* memory outside the copy and the modules reads as PROBE_MARK */
	bool oob; /* a read fell just past the end of the copy */
};

/* The as_arg of one cursor: the context and the registers it starts from. */
struct uw_arg {
	struct uw_ctx *ctx;
	uint64_t regs[UW_NREGS];
};

static bool stack_word(const struct uw_ctx *ctx, uint64_t addr, uint64_t *val)
{
	if (addr < ctx->sp0 || addr - ctx->sp0 > ctx->size || ctx->size - (addr - ctx->sp0) < 8)
		return false;
	memcpy(val, ctx->stack + (addr - ctx->sp0), 8);
	return true;
}

/* The module image and bias behind an executable mapping; NULL if none. */
static struct elf_file *map_unwind(struct uw_ctx *ctx, const struct map *m, uint64_t *bias)
{
	struct elf_file *mu = NULL;

	if (m->type == MAP_T_FILE && m->mod) {
		mu = module_unwind(m->mod);
	} else if (m->type == MAP_T_VDSO) {
		if (!ctx->up->vdso_tried) {
			ctx->up->vdso_tried = true;
			ctx->up->vdso = elf_file__vdso();
		}
		mu = ctx->up->vdso && !ctx->up->vdso->err ? ctx->up->vdso : NULL;
	}
	if (!mu || !map_bias(mu, m, bias))
		return NULL;
	return mu;
}

static void remember(struct uw_ctx *ctx, struct elf_file *mu, uint64_t bias)
{
	struct uw_recent *r;

	for (unsigned i = 0; i < ctx->nrecent; i++) {
		if (ctx->recent[i].mu == mu && ctx->recent[i].bias == bias)
			return;
	}
	r = &ctx->recent[ctx->next_recent];
	ctx->next_recent = (ctx->next_recent + 1) % UW_RECENT;
	if (ctx->nrecent < UW_RECENT)
		ctx->nrecent++;
	*r = (struct uw_recent){
		.mu = mu, .bias = bias, .start = mu->lo + bias, .end = mu->hi + bias
	};
}

/*
 * Module bytes at a runtime address. Parts of a module that perf announces no
 * mapping for (its read-only segment holds .eh_frame) are found through the
 * modules this unwind has already used.
 */
static int module_bytes(struct uw_ctx *ctx, uint64_t addr, void *dst, size_t len)
{
	struct elf_file *mu;
	struct map *m;
	uint64_t bias;

	for (unsigned i = 0; i < ctx->nrecent; i++) {
		struct uw_recent *r = &ctx->recent[i];

		if (addr >= r->start && addr < r->end)
			return elf_file__read(r->mu, addr - r->bias, dst, len);
	}
	m = proc_lookup(ctx->p, addr);
	if (!m)
		return -1;
	mu = map_unwind(ctx, m, &bias);
	if (!mu)
		return -1;
	remember(ctx, mu, bias);
	return elf_file__read(mu, addr - bias, dst, len);
}

/* The module's .eh_frame_hdr search table, as libunwind's remote-table lookup takes it. */
static void table_info(unw_dyn_info_t *di, const struct map *m, const struct elf_file *mu,
		       uint64_t bias)
{
	memset(di, 0, sizeof(*di));
	di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di->start_ip = m->start;
	di->end_ip = m->end;
	/* the table's offsets (datarel) are relative to the start of .eh_frame_hdr */
	di->u.rti.segbase = mu->hdr_vaddr + bias;
	di->u.rti.table_data = mu->table_vaddr + bias;
	/* in words, as libunwind counts it; each entry is two int32 */
	di->u.rti.table_len = mu->fde_count * 8 / sizeof(unw_word_t);
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			  int need_unwind_info, void *arg)
{
	struct uw_ctx *ctx = ((struct uw_arg *)arg)->ctx;
	struct elf_file *mu;
	unw_dyn_info_t di;
	struct map *m;
	uint64_t bias;
	int ret;

	m = proc_lookup(ctx->p, ip);
	mu = m && (m->prot & PROT_EXEC) ? map_unwind(ctx, m, &bias) : NULL;
	if (!mu || !mu->fde_count) {
		ctx->noinfo = true;
		return -UNW_ENOINFO;
	}
	remember(ctx, mu, bias);
	table_info(&di, m, mu, bias);
	ret = UNW_OBJ(dwarf_search_unwind_table)(as, ip, &di, pi, need_unwind_info, arg);
	if (ret == -UNW_ENOINFO)
		ctx->noinfo = true;
	return ret;
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	/* libunwind frees what dwarf_search_unwind_table allocated */
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dilap, void *arg)
{
	return -UNW_ENOINFO;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *valp, int write, void *arg)
{
	struct uw_ctx *ctx = ((struct uw_arg *)arg)->ctx;
	uint64_t v;

	if (write || ++ctx->reads > UW_MAX_READS)
		return -UNW_EINVAL;
	if (stack_word(ctx, addr, &v)) {
		*valp = v;
		return 0;
	}
	if (!module_bytes(ctx, addr, &v, sizeof(v))) {
		*valp = v;
		return 0;
	}
	/* measuring a frame (see probe_cfa): its saved values do not matter */
	if (ctx->probe) {
		*valp = PROBE_MARK;
		return 0;
	}
	/* past the copy but not far: the stack went on beyond what was copied */
	if (addr >= ctx->sp0 && addr - ctx->sp0 < ctx->size + (64u << 20))
		ctx->oob = true;
	return -UNW_EINVAL;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *valp, int write, void *arg)
{
	struct uw_arg *a = arg;

	if (write || reg < 0 || reg >= UW_NREGS)
		return -UNW_EBADREG;
	*valp = a->regs[reg];
	return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
			void *arg)
{
	return -UNW_EINVAL;
}

static int resume(unw_addr_space_t as, unw_cursor_t *cu, void *arg)
{
	return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *bufp, size_t buf_len,
			 unw_word_t *offp, void *arg)
{
	return -UNW_EINVAL;
}

static unw_accessors_t accessors = {
	.find_proc_info = find_proc_info,
	.put_unwind_info = put_unwind_info,
	.get_dyn_info_list_addr = get_dyn_info_list_addr,
	.access_mem = access_mem,
	.access_reg = access_reg,
	.access_fpreg = access_fpreg,
	.resume = resume,
	.get_proc_name = get_proc_name,
};

static struct unwind_proc *unwind_proc_get(struct proc *p)
{
	struct unwind_proc *u;

	if (p->unw)
		return p->unw;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->as = unw_create_addr_space(&accessors, 0);
	if (!u->as) {
		free(u);
		return NULL;
	}
	/*
	 * One thread drives a symbolizer. Debian's libunwind has no per-thread
	 * cache, so this policy is the address space's own cache without the
	 * lock (whose sigprocmask calls cost more than the steps they cache).
	 */
	unw_set_caching_policy(u->as, UNW_CACHE_PER_THREAD);
	/* oneDNN and its callers return to a few thousand distinct addresses */
	unw_set_cache_size(u->as, UW_CACHE_SIZE, 0);
	p->unw = u;
	return u;
}

/* ---- classifying addresses ---- */

/* Code without CFI that the JIT path handles: anonymous executable memory or a perf-map range. */
static bool is_jit(struct uw_ctx *ctx, uint64_t ip, bool leaf)
{
	struct map *m = proc_lookup(ctx->p, ip);

	if (m)
		return m->type == MAP_T_ANON && (m->prot & PROT_EXEC);
	/* the sampled IP is code that ran, even in a mapping we never heard of */
	return leaf || perfmap__lookup(ctx->s, ctx->p, ip) != NULL;
}

enum { RA_CHECKED = 1, RA_CALL = 2, RA_INDIRECT = 4 };

static uint8_t ra_verdict(struct uw_ctx *ctx, uint64_t ra)
{
	struct map *m = proc_lookup(ctx->p, ra);
	struct elf_file *mu;
	uint8_t code[8], v = RA_CHECKED;
	uint64_t bias;

	if (!m || !(m->prot & PROT_EXEC) || m->type == MAP_T_ANON || ra - m->start < sizeof(code))
		return v;
	mu = map_unwind(ctx, m, &bias);
	if (!mu || elf_file__read(mu, ra - bias - sizeof(code), code, sizeof(code)))
		return v;
	if (insn_is_call(code, sizeof(code)))
		v |= RA_CALL;
	if (insn_is_indirect_call(code, sizeof(code)))
		v |= RA_INDIRECT;
	return v;
}

/*
 * Does ra point into a module's code, just after a call (an indirect one, if
 * asked)? The JIT scan asks this of every word of the copy, so the answers
 * are cached per process, and words that cannot be user addresses are
 * turned away first.
 */
static bool after_call(struct uw_ctx *ctx, uint64_t ra, bool indirect)
{
	struct unwind_proc *up = ctx->up;
	struct ra_slot *slot;

	if (ra < 4096 || ra >> 47)
		return false;
	if (!up->verdicts)
		up->verdicts = calloc(RA_SLOTS, sizeof(*up->verdicts));
	if (!up->verdicts)
		return ra_verdict(ctx, ra) & (indirect ? RA_INDIRECT : RA_CALL);
	slot = &up->verdicts[hash_u64(ra) & (RA_SLOTS - 1)];
	if (slot->ra != ra || !slot->v) {
		slot->ra = ra;
		slot->v = ra_verdict(ctx, ra);
	}
	return slot->v & (indirect ? RA_INDIRECT : RA_CALL);
}

/*
 * Is ip the signal trampoline (mov $__NR_rt_sigreturn, %rax; syscall)? A
 * signal handler returns there, and it returns to wherever the signal
 * interrupted: neither follows a call.
 */
static bool is_sigreturn(struct uw_ctx *ctx, uint64_t ip)
{
	static const uint8_t restore_rt[] = { 0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05 };
	uint8_t code[sizeof(restore_rt)];

	return !module_bytes(ctx, ip, code, sizeof(code)) &&
	       !memcmp(code, restore_rt, sizeof(code));
}

static void arg_from_perf(struct uw_arg *a, const uint64_t *regs, uint64_t mask)
{
	for (int r = 0; r < UW_NREGS; r++)
		a->regs[r] = mask & (1ull << perf_reg_of[r]) ? regs[perf_reg_of[r]] : 0;
}

static uint64_t reg_of(unw_cursor_t *c, int reg)
{
	unw_word_t v = 0;

	unw_get_reg(c, reg, &v);
	return v;
}

/* ---- walking ---- */

/* The state of one walk: a cursor and the registers it started from (its as_arg). */
struct walker {
	unw_cursor_t c;
	struct uw_arg arg;
	bool ok; /* the cursor could be initialised */
};

static void walker_init(struct walker *w, struct uw_ctx *ctx)
{
	w->arg.ctx = ctx;
	w->ok = unw_init_remote(&w->c, ctx->up->as, &w->arg) >= 0;
}

/* The registers a walker's cursor has now, for starting another one from there. */
static void walker_regs(struct walker *w, uint64_t *regs)
{
	uint64_t now[UW_NREGS];

	memcpy(now, regs, sizeof(now));
	for (int r = 0; r < UW_NREGS; r++) {
		unw_word_t v;

		if (unw_get_reg(&w->c, r, &v) >= 0)
			now[r] = v;
	}
	memcpy(regs, now, sizeof(now));
}

enum walk_end {
	WALK_ROOT, /* the outermost frame, by CFI */
	WALK_JIT, /* reached code without CFI that the JIT path handles */
	WALK_OOB, /* the next frame lies beyond the copy */
	WALK_FULL, /* no room for more frames */
	WALK_FAIL, /* an unwind error or an implausible frame */
};

struct frames {
	uint64_t *ips, *sps;
	size_t n, max;
};

static void push(struct frames *f, uint64_t ip, uint64_t sp)
{
	f->ips[f->n] = ip;
	f->sps[f->n++] = sp;
}

static bool chain_join(struct uw_ctx *ctx, struct frames *f);
static uint64_t fde_start(struct uw_ctx *ctx, uint64_t ra);

/*
 * A process's first frame: the code at the ELF entry point of its executable
 * or its interpreter, which calls on and never returns. glibc's _start says
 * so in its CFI; ld.so's entry (RTLD_START, running _dl_start and _dl_init
 * before the program's own _start) has no CFI at all, so a walk that stops
 * there has reached the root too. ip is a return address.
 */
#define ENTRY_CODE 128 /* bytes of entry code that call on */

static bool at_entry(struct uw_ctx *ctx, uint64_t ip)
{
	struct elf_file *mu;
	struct map *m = proc_lookup(ctx->p, ip);
	uint64_t bias, at;

	if (!m || !(mu = map_unwind(ctx, m, &bias)) || !mu->entry)
		return false;
	at = ip - 1 - bias;
	return at >= mu->entry && at - mu->entry < ENTRY_CODE;
}

/*
 * Step with CFI from the last frame of f until something stops it. Every
 * frame must lie above the one before (this bounds loops) and return to
 * code just after a call, or to JIT code, or from a signal handler.
 */
static enum walk_end walk(struct uw_ctx *ctx, struct walker *w, struct frames *f)
{
	for (;;) {
		uint64_t ip = f->ips[f->n - 1], sp = f->sps[f->n - 1], nip, nsp;
		int ret;

		if (is_jit(ctx, ip, false))
			return WALK_JIT;
		if (f->n > 1 && chain_join(ctx, f))
			return WALK_ROOT;
		if (f->n >= f->max)
			return WALK_FULL;
		if (!w->ok)
			return WALK_FAIL;
		ctx->noinfo = false;
		ctx->oob = false;
		ret = unw_step(&w->c);
		if (ret == 0)
			return !ctx->noinfo || (f->n > 1 && at_entry(ctx, ip)) ? WALK_ROOT
									       : WALK_FAIL;
		if (ret < 0 && ctx->oob)
			return WALK_OOB;
		if (ret < 0)
			return f->n > 1 && at_entry(ctx, ip) ? WALK_ROOT : WALK_FAIL;
		nip = reg_of(&w->c, UNW_REG_IP);
		nsp = reg_of(&w->c, UNW_REG_SP);
		if (nsp <= sp)
			return WALK_FAIL;
		/* without CFI libunwind guesses (frame pointers, PLT): keep only a plausible guess */
		if (!after_call(ctx, nip, false) &&
		    (ctx->noinfo || (!is_jit(ctx, nip, false) && !is_sigreturn(ctx, nip) &&
				     !is_sigreturn(ctx, ip))))
			return ctx->noinfo && f->n > 1 && at_entry(ctx, ip) ? WALK_ROOT : WALK_FAIL;
		push(f, nip, nsp);
	}
}

/* ---- JIT callers ---- */

/*
 * The caller of the JIT frame at the end of f: scan the copy upward from its
 * SP for a return address after an indirect call whose caller chain then
 * unwinds with CFI to the root (or off the end of the copy). Stale return
 * addresses below the real one (the JIT frame's own stack area holds old
 * frames) pass the first steps but not the whole way. On success the
 * caller's frames are in f, w is the walker past them, and the result
 * says how that walk ended.
 */
static bool find_jit_caller(struct uw_ctx *ctx, struct walker *cur, struct walker *w,
			    struct frames *f, const struct jit_ret *jr, enum walk_end *how)
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

/* ---- known stacks ---- */

/*
 * After a complete unwind (one that reached the root by CFI), each frame's
 * chain down to the root is kept, keyed by the frame's SP, together with the
 * call sites seen calling each function (edges) and each frame's size. A
 * walk that arrives at a frame (ip, sp) that a kept chain starts with, and
 * finds every later return address of that chain in the copy where it was
 * before, has the rest of its stack without stepping: the same return
 * addresses at the same stack addresses are the same frames. Stacks grafted
 * for JIT code whose callers were outside the copy are not kept.
 */
static void edge_note(struct unwind_proc *up, uint64_t fn, uint64_t up_ip)
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

static struct chain_slot *chain_bucket(const struct unwind_proc *up, uint64_t sp)
{
	return &up->chains[(hash_u64(sp) & (CHAIN_BUCKETS - 1)) * CHAIN_WAYS];
}

static bool chain_is(const struct chain_slot *sl, const struct frames *f, size_t i, uint64_t ip0)
{
	size_t k = f->n - i;

	return sl->n == k && sl->sp == f->sps[i] && sl->ips[0] == ip0 &&
	       !memcmp(sl->ips + 1, f->ips + i + 1, (k - 1) * sizeof(*sl->ips)) &&
	       !memcmp(sl->sps + 1, f->sps + i + 1, (k - 1) * sizeof(*sl->sps));
}

static void chains_store(struct unwind_proc *up, struct uw_ctx *ctx, const struct frames *f)
{
	if (!up->chains) {
		up->chains = calloc(CHAIN_BUCKETS * CHAIN_WAYS, sizeof(*up->chains));
		if (!up->chains)
			return;
	}
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
	/* not the leaf: no walk arrives at it, and a new leaf every sample would evict the rest */
	for (size_t i = 1; i < f->n; i++) {
		struct chain_slot *b = chain_bucket(up, f->sps[i]), *sl = NULL;
		size_t k = f->n - i;
		uint64_t ip0 = f->ips[i];

		if (k > CHAIN_DEPTH || is_jit(ctx, f->ips[i], false))
			continue;
		up->tick++;
		for (int w = 0; w < CHAIN_WAYS && !sl; w++) {
			if (chain_is(&b[w], f, i, ip0))
				sl = &b[w];
		}
		if (sl) {
			sl->used = up->tick;
			continue;
		}
		/* the least recently used way; call sites of JIT code (for grafts) go last */
		sl = &b[0];
		for (int w = 1; w < CHAIN_WAYS; w++) {
			if (b[w].indirect < sl->indirect ||
			    (b[w].indirect == sl->indirect && b[w].used < sl->used))
				sl = &b[w];
		}
		if (sl->cap < k) {
			uint64_t *ips = realloc(sl->ips, k * sizeof(*ips)), *sps;

			if (ips)
				sl->ips = ips;
			sps = realloc(sl->sps, k * sizeof(*sps));
			if (sps)
				sl->sps = sps;
			if (!ips || !sps) {
				sl->n = 0;
				continue;
			}
			sl->cap = (uint32_t)k;
		}
		memcpy(sl->ips, f->ips + i, k * sizeof(*sl->ips));
		memcpy(sl->sps, f->sps + i, k * sizeof(*sl->sps));
		sl->ips[0] = ip0;
		sl->sp = f->sps[i];
		sl->n = (uint32_t)k;
		sl->indirect = after_call(ctx, f->ips[i], true);
		sl->used = up->tick;
	}
}

/* Does the last frame of f start a known stack that the copy still holds? Then append it. */
static bool chain_join(struct uw_ctx *ctx, struct frames *f)
{
	uint64_t ip = f->ips[f->n - 1], sp = f->sps[f->n - 1], w;
	struct chain_slot *b;

	if (!ctx->up->chains)
		return false;
	b = chain_bucket(ctx->up, sp);
	for (int way = 0; way < CHAIN_WAYS; way++) {
		struct chain_slot *sl = &b[way];
		uint32_t j;

		if (!sl->n || sl->sp != sp || sl->ips[0] != ip || f->n - 1 + sl->n > f->max)
			continue;
		for (j = 1; j < sl->n; j++) {
			if (!stack_word(ctx, sl->sps[j] - 8, &w) || w != sl->ips[j])
				break;
		}
		if (j < sl->n)
			continue;
		sl->used = ++ctx->up->tick;
		for (j = 1; j < sl->n; j++)
			push(f, sl->ips[j], sl->sps[j]);
		return true;
	}
	return false;
}

/* ---- JIT callers outside the copy ---- */

/* Start of the function (FDE) containing a return address; 0 if unknown. */
static uint64_t fde_start(struct uw_ctx *ctx, uint64_t ra)
{
	struct uw_arg arg = { .ctx = ctx };
	struct elf_file *mu;
	struct fde_slot *slot = NULL;
	unw_proc_info_t pi;
	unw_dyn_info_t di;
	uint64_t bias;
	struct map *m;

	if (!ctx->up->fdes)
		ctx->up->fdes = calloc(FDE_SLOTS, sizeof(*ctx->up->fdes));
	if (ctx->up->fdes) {
		slot = &ctx->up->fdes[hash_u64(ra) & (FDE_SLOTS - 1)];
		if (slot->ip == ra)
			return slot->start;
	}
	m = proc_lookup(ctx->p, ra - 1);
	mu = m && (m->prot & PROT_EXEC) ? map_unwind(ctx, m, &bias) : NULL;
	if (!mu || !mu->fde_count)
		return 0;
	table_info(&di, m, mu, bias);
	remember(ctx, mu, bias);
	if (UNW_OBJ(dwarf_search_unwind_table)(ctx->up->as, ra - 1, &di, &pi, 0, &arg) < 0)
		return 0;
	if (slot)
		*slot = (struct fde_slot){ .ip = ra, .start = pi.start_ip };
	return pi.start_ip;
}

/*
 * The CFA of the frame that returns to ra with the given SP, from CFI alone:
 * one step with memory that reads as PROBE_MARK. Only a frame whose CFA is
 * SP-based (optimised code without a frame pointer) can be measured.
 */
static bool probe_cfa(struct uw_ctx *ctx, uint64_t ra, uint64_t sp, uint64_t *cfa)
{
	struct walker w;
	int ret;

	memset(w.arg.regs, 0, sizeof(w.arg.regs));
	w.arg.regs[UNW_X86_64_RSP] = sp;
	w.arg.regs[UNW_X86_64_RIP] = ra - 1;
	ctx->probe = true;
	ctx->noinfo = false;
	walker_init(&w, ctx);
	ret = w.ok ? unw_step(&w.c) : -1;
	ctx->probe = false;
	if (ret <= 0 || ctx->noinfo || reg_of(&w.c, UNW_REG_IP) != PROBE_MARK)
		return false;
	*cfa = reg_of(&w.c, UNW_REG_SP);
	return *cfa > sp && *cfa - sp < (1u << 20);
}

/*
 * The caller's SP of a frame that returns to ra: measured from CFI, else (a
 * frame-pointer frame, whose CFA depends on rbp) as it was last time.
 */
static bool frame_cfa(struct uw_ctx *ctx, uint64_t ra, uint64_t sp, uint64_t *cfa)
{
	const struct size_slot *z =
		ctx->up->sizes ? &ctx->up->sizes[hash_u64(ra) & (SIZE_SLOTS - 1)] : NULL;

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
	if (depth >= CLIMB_DEPTH || !ctx->up->edges || f->n >= f->max || !*probes)
		return false;
	(*probes)--;
	fn = fde_start(ctx, ra);
	e = &ctx->up->edges[hash_u64(fn) & (EDGE_SLOTS - 1)];
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
	uint64_t orig;

	if (!stack_word(ctx, f->sps[f->n - 1] + GEMM_ORIG_SP_OFF, &orig))
		return WALK_FAIL;
	return graft_at(ctx, f, orig + 8 * (PREAMBLE_PUSHES + 1), jr);
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

	if (!jr || !jr->grafted || !stack_word(ctx, f->sps[f->n - 1] + GEMM_ORIG_SP_OFF, &orig))
		return false;
	return orig < ctx->sp0 || orig - ctx->sp0 >= ctx->size;
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

static struct jit_ret *jit_ret_slot(struct unwind_proc *up, uint64_t key)
{
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

/* ---- the unwinder ---- */

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
	default:
		return UNWIND_END_ERROR;
	}
}

int symbolizer__unwind(struct symbolizer *s, uint32_t pid, const uint64_t *regs, uint64_t regs_mask,
		       const uint8_t *stack, size_t stack_size, uint64_t *ips, size_t max,
		       enum unwind_end *end)
{
	const uint64_t need = 1ull << PERF_REG_X86_IP | 1ull << PERF_REG_X86_SP;
	struct uw_ctx ctx = { .s = s, .stack = stack, .size = stack_size };
	struct walker wk[2], *w = &wk[0];
	struct unwind_proc *up;
	struct frames f;
	unsigned jit_frames = 0;
	enum walk_end how;

	if (!s || !regs || !ips || !end || (!stack && stack_size))
		return -EINVAL;
	*end = UNWIND_END_ERROR;
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
		struct jit_ret *jr;
		uint64_t key;
		size_t jit_at;
		bool grafted;

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
		key = jit_key(&ctx, f.ips[f.n - 1]);
		jr = jit_ret_slot(up, key);
		if (jr && jr->key != key)
			*jr = (struct jit_ret){ .key = key };
		jit_at = f.n;
		grafted = graft_first(&ctx, &f, jr);
		how = grafted ? graft_gemm(&ctx, &f, jr) : WALK_FAIL;
		if (how == WALK_FAIL && find_jit_caller(&ctx, w, next, &f, jr, &how)) {
			s->stats.jit_callers_recovered++;
			drop_stale(&f, jit_at, jr);
			if (jr) {
				uint64_t off = f.sps[jit_at] - 8 - f.sps[jit_at - 1];

				jit_ret_note(jr, f.ips[jit_at], off < ctx.size ? off : 0);
			}
			w = next;
			continue;
		}
		if (how == WALK_FAIL && !grafted)
			how = graft_gemm(&ctx, &f, jr);
		if (how != WALK_FAIL) {
			s->stats.jit_callers_recovered++;
			if (jr)
				jr->grafted = true;
			*end = end_of(how);
			return (int)f.n;
		}
		s->stats.jit_callers_missed++;
		*end = UNWIND_END_JIT_NO_CALLER;
		return (int)f.n;
	}
	*end = end_of(how);
	if (how == WALK_ROOT) {
		/* also the frames that came from a known stack: that marks them recently used */
		chains_store(up, &ctx, &f);
	} else {
		s->stats.unwind_errors++;
	}
	return (int)f.n;
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
