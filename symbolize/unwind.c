/* SPDX-License-Identifier: MIT */
/*
 * DWARF unwinding of copied user stacks, with libunwind's remote interface:
 * the backend that stackwalk.c and jitcaller.c drive (see unwind.h).
 *
 * libunwind sees the target through its accessors:
 *  - registers: the sample's user registers;
 *  - memory: the sample's stack copy, [SP, SP + size), and the bytes of the
 *    mapped modules read from their files (never the live process);
 *  - find_proc_info: the module's .eh_frame_hdr search table, handed over as
 *    a UNW_INFO_FORMAT_REMOTE_TABLE whose FDEs libunwind reads through the
 *    memory accessor;
 *  - no dynamic unwind info.
 * Each module's program headers, .eh_frame_hdr and .eh_frame are read once
 * by elf.c (module->unwind) and shared by every process that maps it; each
 * process has its own libunwind address space and register-state cache.
 *
 * Complete stacks are remembered per process, keyed by the SP of each
 * frame. A walk that arrives at a remembered frame whose return addresses
 * are all still in the copy where they were takes the rest without
 * stepping.
 *
 * Bounds: every read of the copy is checked against it; memory reads per
 * unwind and the remembered stacks are capped; SP must grow at every frame.
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
#include "symbolize/unwind.h"

/* Exported by libunwind, declared only in its private headers. */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as, unw_word_t ip,
					      unw_dyn_info_t *di, unw_proc_info_t *pi,
					      int need_unwind_info, void *arg);

/* memory reads per unwind: a few hundred per frame when nothing is cached */
#define UW_MAX_READS 200000
#define UW_CACHE_SIZE 2048 /* register states cached per process (about 300 bytes each) */
#define CHAIN_DEPTH 256
#define RA_SLOTS 4096 /* power of two */
#define FDE_SLOTS 1024 /* power of two */
/* procedure infos remembered per process, power of two (about 250 bytes each) */
#define PI_SLOTS 2048
#define PI_INFO_MAX 128 /* libunwind's CIE summary (dwarf_cie_info_t) is 72 bytes in 1.6-1.8 */

/*
 * libunwind frees the unwind_info of a procedure info whose format is
 * UNW_INFO_FORMAT_TABLE (its own allocation) and leaves any other format's
 * to the accessors (1.6.2 to 1.8.2: dwarf/Gparser.c put_unwind_info), so
 * remembered infos are handed back as REMOTE_TABLE, which it otherwise
 * treats the same. Another major version is not assumed to.
 */
#if UNW_VERSION_MAJOR == 1
#define PI_REMEMBER 1
#else
#define PI_REMEMBER 0
#endif

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
		/* beneath its root, or ours, and only the file the module knows */
		mu->fd = module_open_file(m);
		mu->own_fd = mu->fd >= 0;
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

struct ra_slot {
	uint64_t ra;
	uint8_t v; /* RA_*; 0: empty */
};

struct fde_slot {
	uint64_t ip, start;
};

/* What dwarf_search_unwind_table found for one FDE of a module, with its CIE summary. */
struct pi_slot {
	const struct elf_file *mu; /* NULL: empty */
	uint64_t bias;
	int64_t index; /* the search table's entry */
	unw_proc_info_t pi; /* unwind_info NULL */
	bool has_info;
	uint8_t info[PI_INFO_MAX];
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
	free(u->fdes);
	free(u->infos);
	free(u->sps);
	free(u);
}

/* ---- the accessors ---- */

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
 * The module image (and its bias) that holds a runtime address: one this
 * unwind has used already (their ranges cover the segments perf announces
 * no mapping for: the read-only one holds .eh_frame), else the one behind
 * the mapping there, remembered from now on. NULL if none.
 */
static struct elf_file *module_at(struct uw_ctx *ctx, uint64_t addr, uint64_t *bias)
{
	struct elf_file *mu;
	struct map *m;

	for (unsigned i = 0; i < ctx->nrecent; i++) {
		struct uw_recent *r = &ctx->recent[i];

		if (addr >= r->start && addr < r->end) {
			*bias = r->bias;
			return r->mu;
		}
	}
	m = proc_lookup(ctx->p, addr);
	mu = m ? map_unwind(ctx, m, bias) : NULL;
	if (mu)
		remember(ctx, mu, *bias);
	return mu;
}

/* Module bytes at a runtime address. */
static int module_bytes(struct uw_ctx *ctx, uint64_t addr, void *dst, size_t len)
{
	uint64_t bias;
	struct elf_file *mu = module_at(ctx, addr, &bias);

	return mu ? elf_file__read(mu, addr - bias, dst, len) : -1;
}

/*
 * One unw_step of a cursor at code address at (its ip, or a return address
 * minus one). The module of that code is found first (module_at: from the
 * ones used, else remembered now): libunwind's per-thread cache holds a
 * frame's rule by IP, and a rule that is a DWARF expression (a CFA of
 * *(rbp - 24) in a function that realigns its stack, as libtorch 1.13's
 * max-pool kernel does) is kept as the address of its bytes in .eh_frame,
 * which a cache hit reads again without calling find_proc_info. Those
 * bytes lie in a segment perf announces no mapping for: unremembered, the
 * read failed and 2.7% of a CNN run's stacks ended at that kernel with an
 * unwind error.
 */
static int step(struct uw_ctx *ctx, struct walker *w, uint64_t at)
{
	uint64_t bias;
	int r;

	module_at(ctx, at, &bias);
	unwind_quiet = 1;
	r = unw_step(&w->c);
	unwind_quiet = 0;
	return r;
}

/*
 * The module's .eh_frame_hdr search table, as libunwind's remote-table
 * lookup takes it, cut to entry i (the one a search for the address would
 * find: elf_file__fde_index) and the next one, whose start libunwind reads
 * as the end of the first's code, as in the whole table: its own search
 * read the whole table through access_mem, a cache miss at each probe.
 */
static void table_info(unw_dyn_info_t *di, const struct map *m, struct elf_file *mu, uint64_t bias,
		       int64_t i)
{
	memset(di, 0, sizeof(*di));
	di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di->start_ip = m->start;
	di->end_ip = m->end;
	/* the table's offsets (datarel) are relative to the start of .eh_frame_hdr */
	di->u.rti.segbase = mu->hdr_vaddr + bias;
	di->u.rti.table_data = mu->table_vaddr + bias + (uint64_t)i * 8;
	/* in words, as libunwind counts it; each entry is two int32 */
	di->u.rti.table_len = ((uint64_t)i + 1 < mu->fde_count ? 16 : 8) / sizeof(unw_word_t);
}

/* The slot FDE i of mu (at bias) is remembered in; NULL without memory for them. */
static struct pi_slot *pi_slot(struct unwind_proc *up, const struct elf_file *mu, uint64_t bias,
			       int64_t i)
{
	if (!PI_REMEMBER)
		return NULL;
	if (!up->infos)
		up->infos = calloc(PI_SLOTS, sizeof(*up->infos));
	if (!up->infos)
		return NULL;
	return &up->infos[hash_u64((uint64_t)(uintptr_t)mu ^ bias ^ ((uint64_t)i << 20)) &
			  (PI_SLOTS - 1)];
}

/*
 * libunwind's procedure info for the code at ip of mapping m: its FDE's
 * range and, if asked, its CIE summary. A leaf's IP differs at almost every
 * sample, and libunwind's register-state cache, keyed by IP, misses each
 * time; the FDE behind it does not change, so what libunwind found for it
 * (the FDE and CIE parsed through access_mem) is remembered per process.
 * An unwind_info handed back from there is ours: REMOTE_TABLE, which
 * libunwind does not free. Memory is libunwind's on a miss, as before.
 */
static int proc_info(struct uw_ctx *ctx, unw_addr_space_t as, const struct map *m,
		     struct elf_file *mu, uint64_t bias, unw_word_t ip, unw_proc_info_t *pi,
		     int need_unwind_info, void *arg)
{
	int64_t i = elf_file__fde_index(mu, ip - bias);
	struct pi_slot *sl;
	unw_dyn_info_t di;
	bool mine;
	int ret;

	if (i < 0)
		return -UNW_ENOINFO;
	ctx->s->stats.proc_infos++;
	sl = pi_slot(ctx->up, mu, bias, i);
	mine = sl && sl->mu == mu && sl->bias == bias && sl->index == i;
	if (mine && ip >= sl->pi.start_ip && ip < sl->pi.end_ip &&
	    (!need_unwind_info || sl->has_info)) {
		ctx->s->stats.proc_infos_remembered++;
		*pi = sl->pi;
		pi->format = UNW_INFO_FORMAT_REMOTE_TABLE;
		pi->unwind_info = need_unwind_info ? sl->info : NULL;
		pi->unwind_info_size = need_unwind_info ? pi->unwind_info_size : 0;
		return 0;
	}
	table_info(&di, m, mu, bias, i);
	ret = UNW_OBJ(dwarf_search_unwind_table)(as, ip, &di, pi, need_unwind_info, arg);
	/* a search without the CIE summary does not replace this FDE's with it */
	if (ret < 0 || !sl || (mine && sl->has_info && !need_unwind_info))
		return ret;
	*sl = (struct pi_slot){ .mu = mu, .bias = bias, .index = i, .pi = *pi };
	sl->pi.unwind_info = NULL;
	if (need_unwind_info && pi->unwind_info && pi->unwind_info_size > 0 &&
	    (size_t)pi->unwind_info_size <= sizeof(sl->info)) {
		memcpy(sl->info, pi->unwind_info, (size_t)pi->unwind_info_size);
		sl->has_info = true;
	} else {
		sl->pi.unwind_info_size = 0;
	}
	return ret;
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			  int need_unwind_info, void *arg)
{
	struct uw_ctx *ctx = ((struct uw_arg *)arg)->ctx;
	struct elf_file *mu;
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
	ret = proc_info(ctx, as, m, mu, bias, ip, pi, need_unwind_info, arg);
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

struct unwind_proc *unwind_proc_get(struct proc *p)
{
	struct unwind_proc *u;

	if (p->unw)
		return p->unw;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	unwind_quiet = 1;
	u->as = unw_create_addr_space(&accessors, 0);
	if (!u->as) {
		unwind_quiet = 0;
		free(u);
		return NULL;
	}
	/*
	 * One thread drives a symbolizer. Debian's libunwind (1.6, 1.8) is
	 * built without a per-thread cache and takes this policy as the global
	 * one: the address space's own cache, behind a lock that masks signals
	 * around every lookup (two sigprocmask calls a step, a miss four more),
	 * which sigmask.c answers without system calls while we step. Still
	 * cheaper than no cache, whose every step parses its FDE.
	 */
	unw_set_caching_policy(u->as, UNW_CACHE_PER_THREAD);
	/* oneDNN and its callers return to a few thousand distinct addresses */
	unw_set_cache_size(u->as, UW_CACHE_SIZE, 0);
	unwind_quiet = 0;
	p->unw = u;
	return u;
}

/* ---- classifying addresses ---- */

/* Code without CFI that the JIT path handles: anonymous executable memory or a perf-map range. */
bool is_jit(struct uw_ctx *ctx, uint64_t ip, bool leaf)
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
bool after_call(struct uw_ctx *ctx, uint64_t ra, bool indirect)
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

void arg_from_perf(struct uw_arg *a, const uint64_t *regs, uint64_t mask)
{
	for (int r = 0; r < UW_NREGS; r++)
		a->regs[r] = mask & (1ull << perf_reg_of[r]) ? regs[perf_reg_of[r]] : 0;
}

uint64_t reg_of(unw_cursor_t *c, int reg)
{
	unw_word_t v = 0;

	unw_get_reg(c, reg, &v);
	return v;
}

/* ---- walking ---- */

void walker_init(struct walker *w, struct uw_ctx *ctx)
{
	w->arg.ctx = ctx;
	unwind_quiet = 1;
	w->ok = unw_init_remote(&w->c, ctx->up->as, &w->arg) >= 0;
	unwind_quiet = 0;
}

/* The registers a walker's cursor has now, for starting another one from there. */
void walker_regs(struct walker *w, uint64_t *regs)
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
 * Does the CFI of the code at ip (as a cursor takes it: a return address
 * minus one) end the stack, marking its return address undefined, as
 * _start's and clone3's do? One step from a stack that holds nothing: a
 * return address that CFI says is saved cannot be read, so only a frame
 * without one steps to its end. libunwind also stops (unw_step 0) where it
 * reads a return address of 0, which a stale frame can hold: that is no
 * thread's entry.
 */
static bool cfi_ends_stack(struct uw_ctx *ctx, uint64_t ip)
{
	struct walker w;
	bool noinfo = ctx->noinfo, oob = ctx->oob;
	int ret;

	memset(w.arg.regs, 0, sizeof(w.arg.regs));
	/* below every copy: each read of the stack fails */
	w.arg.regs[UNW_X86_64_RSP] = 1ull << 12;
	w.arg.regs[UNW_X86_64_RIP] = ip;
	ctx->noinfo = false;
	walker_init(&w, ctx);
	ret = w.ok ? step(ctx, &w, ip) : -1;
	ret = ret == 0 && !ctx->noinfo ? 0 : -1;
	ctx->noinfo = noinfo;
	ctx->oob = oob;
	return ret == 0;
}

/*
 * Step with CFI from the last frame of f until something stops it. Every
 * frame must lie above the one before (this bounds loops) and return to
 * code just after a call, or to JIT code, or from a signal handler.
 */
enum walk_end walk(struct uw_ctx *ctx, struct walker *w, struct frames *f)
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
		ret = step(ctx, w, f->n > 1 ? ip - 1 : ip);
		if (ret == 0 && ctx->noinfo)
			return f->n > 1 && at_entry(ctx, ip) ? WALK_ROOT : WALK_FAIL;
		/* a thread's entry only if CFI says so, not for a return address read as 0 */
		if (ret == 0)
			return cfi_ends_stack(ctx, f->n > 1 ? ip - 1 : ip) ? WALK_ROOT
									   : WALK_NOT_ENTRY;
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

/* ---- known stacks ---- */

/*
 * After a complete unwind (one that reached the root by CFI), each frame's
 * chain down to the root is kept, keyed by the frame's SP (jitcaller.c
 * keeps the call sites and frame sizes it saw, for its grafts). A
 * walk that arrives at a frame (ip, sp) that a kept chain starts with, and
 * finds every later return address of that chain in the copy where it was
 * before, has the rest of its stack without stepping: the same return
 * addresses at the same stack addresses are the same frames. Stacks grafted
 * for JIT code whose callers were outside the copy are not kept.
 */
struct chain_slot *chain_bucket(const struct unwind_proc *up, uint64_t sp)
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

bool chains_store(struct uw_ctx *ctx, const struct frames *f)
{
	struct unwind_proc *up = ctx->up;

	if (!up->chains) {
		up->chains = calloc(CHAIN_BUCKETS * CHAIN_WAYS, sizeof(*up->chains));
		if (!up->chains)
			return false;
	}
	/*
	 * Not the leaf: no walk arrives at it, and a new leaf every sample
	 * would evict the rest. The innermost chain known already: so is the
	 * stack (each of its outer chains was stored with it, or with a later
	 * stack through them), nothing more is learnt from it.
	 */
	bool first = true;

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
			if (first)
				return false;
			continue;
		}
		first = false;
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
	return true;
}

/*
 * Does the last frame of f start a known stack that the copy still holds
 * (every return address of it where it was, at least CHAIN_MIN_MATCH of
 * them)? Then append it.
 */
bool chain_join(struct uw_ctx *ctx, struct frames *f)
{
	uint64_t ip = f->ips[f->n - 1], sp = f->sps[f->n - 1], w;
	struct chain_slot *b;

	if (!ctx->up->chains)
		return false;
	b = chain_bucket(ctx->up, sp);
	for (int way = 0; way < CHAIN_WAYS; way++) {
		struct chain_slot *sl = &b[way];
		uint32_t j;

		/*
		 * at least CHAIN_MIN_MATCH return addresses of the chain must be
		 * found in the copy: a chain that starts at the root has nothing
		 * to check, and one address alone is what a stale frame has
		 */
		if (!sl->n || sl->sp != sp || sl->ips[0] != ip || f->n - 1 + sl->n > f->max ||
		    sl->n < CHAIN_MIN_MATCH + 1)
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

/* ---- CFI of single frames ---- */

/* Start of the function (FDE) containing a return address; 0 if unknown. */
uint64_t fde_start(struct uw_ctx *ctx, uint64_t ra)
{
	struct uw_arg arg = { .ctx = ctx };
	struct elf_file *mu;
	struct fde_slot *slot = NULL;
	unw_proc_info_t pi;
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
	remember(ctx, mu, bias);
	if (proc_info(ctx, ctx->up->as, m, mu, bias, ra - 1, &pi, 0, &arg) < 0)
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
bool probe_cfa(struct uw_ctx *ctx, uint64_t ra, uint64_t sp, uint64_t *cfa)
{
	struct walker w;
	int ret;

	memset(w.arg.regs, 0, sizeof(w.arg.regs));
	w.arg.regs[UNW_X86_64_RSP] = sp;
	w.arg.regs[UNW_X86_64_RIP] = ra - 1;
	ctx->probe = true;
	ctx->noinfo = false;
	walker_init(&w, ctx);
	ret = w.ok ? step(ctx, &w, ra - 1) : -1;
	ctx->probe = false;
	if (ret <= 0 || ctx->noinfo || reg_of(&w.c, UNW_REG_IP) != PROBE_MARK)
		return false;
	*cfa = reg_of(&w.c, UNW_REG_SP);
	return *cfa > sp && *cfa - sp < (1u << 20);
}
