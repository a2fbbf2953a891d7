/* SPDX-License-Identifier: MIT */
/*
 * symbolize/: DWARF unwinding, JIT caller recovery and perf-map files.
 *
 * The unwinder runs on real stacks: capture_regs() below stores the
 * registers as perf would (IP = its return address, SP = the caller's SP)
 * and copies this thread's stack from there while the frames are live. The
 * copy is then unwound "remotely" for getpid(), with the maps read from
 * /proc/self/maps, and the chain of names is checked. JIT code is written
 * into anonymous executable memory and named through /tmp/perf-PID.map.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <asm/perf_regs.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbolize/internal.h"
#include "symbolize/symbolize.h"
#include "symbolize/unwind.h"

#include "tests/unit/capture.h"

/* A chain of calls that the compiler may neither inline nor turn into jumps. */
__attribute__((noipa)) static size_t uw_c(struct sample *smp)
{
	capture_regs(smp);
	__asm__ volatile("" ::: "memory");
	return smp->size + 1;
}

__attribute__((noipa)) static size_t uw_b(struct sample *smp)
{
	size_t r = uw_c(smp);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

__attribute__((noipa)) static size_t uw_a(struct sample *smp)
{
	size_t r = uw_b(smp);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

/* ---- unwinding and naming ---- */

struct unwound {
	uint64_t ips[256];
	const char *names[256];
	enum frame_kind kinds[256];
	int n;
	enum unwind_end end;
};

static struct symbolizer *sym;

static void setup(void)
{
	find_stack_top();
	sym = symbolizer__new();
	cr_assert_not_null(sym);
}

static void teardown(void)
{
	symbolizer__free(sym);
}

TestSuite(unwind, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(perfmap, .timeout = 60);
TestSuite(insn, .timeout = 10);

static void unwind_sample(const struct sample *smp, const uint8_t *stack, size_t size,
			  struct unwound *u)
{
	struct sym_frame f;

	cr_assert_eq(symbolizer__load_proc_maps(sym, (uint32_t)getpid()), 0);
	u->end = UNWIND_END_ROOT + 100;
	u->n = symbolizer__unwind(sym, (uint32_t)getpid(), smp->regs, regs_mask, stack, size,
				  u->ips, ARRAY_SIZE(u->ips), &u->end);
	cr_assert_geq(u->n, 1, "unwind failed: %d", u->n);
	for (int i = 0; i < u->n; i++) {
		symbolizer__resolve(sym, (uint32_t)getpid(), u->ips[i], false, i > 0, &f);
		u->names[i] = f.name;
		u->kinds[i] = f.kind;
	}
}

static void log_chain(const struct unwound *u)
{
	for (int i = 0; i < u->n; i++)
		cr_log_info("#%d %#" PRIx64 " %s", i, u->ips[i], u->names[i]);
	cr_log_info("end %d", u->end);
}

/* name, or name@VERSION (a versioned .dynsym name) */
static int find_name(const struct unwound *u, const char *name)
{
	size_t len = strlen(name);

	for (int i = 0; i < u->n; i++) {
		if (u->names[i] && !strncmp(u->names[i], name, len) &&
		    (u->names[i][len] == '\0' || u->names[i][len] == '@'))
			return i;
	}
	return -1;
}

/* The stack ends in __libc_start_main -> _start, cleanly (Criterion's main is in its library). */
static void assert_reaches_root(const struct unwound *u)
{
	cr_assert_eq(u->end, UNWIND_END_ROOT, "unwind ended with %d", u->end);
	cr_assert_geq(find_name(u, "__libc_start_main"), 0,
		      "__libc_start_main is not on the stack");
	cr_assert_str_eq(u->names[u->n - 1], "_start");
}

Test(unwind, own_stack_through_a_chain)
{
	struct sample *smp = sample_new();
	struct unwound u;

	uw_a(smp);
	cr_assert_gt(smp->size, 64);
	unwind_sample(smp, smp->stack, smp->size, &u);
	log_chain(&u);
	cr_assert_geq(u.n, 4);
	cr_assert_str_eq(u.names[0], "uw_c");
	cr_assert_str_eq(u.names[1], "uw_b");
	cr_assert_str_eq(u.names[2], "uw_a");
	cr_assert_str_eq(u.names[3], "unwind_own_stack_through_a_chain_impl");
	assert_reaches_root(&u);
	cr_assert_geq(symbolizer__stats(sym)->unwinds, 1);
	sample_free(smp);
}

/*
 * A function that realigns its stack as gcc does with a dynamic realign
 * argument pointer (libtorch 1.13's vectorized max-pool kernel, through
 * r13): the CFA in r10, then, once rbp is set up, a DWARF expression,
 * DW_CFA_def_cfa_expression *(rbp - 8), and rbp saved at rbp + 0. It
 * captures the sample inside its body. Written out so that the CFI is this
 * whatever the compiler.
 */
size_t uw_drap(struct sample *smp);
__asm__(".text\n"
	".type uw_drap, @function\n"
	"uw_drap:\n"
	".cfi_startproc\n"
	"	leaq 8(%rsp), %r10\n"
	"	.cfi_def_cfa %r10, 0\n"
	"	andq $-64, %rsp\n"
	"	pushq -8(%r10)\n"
	"	pushq %rbp\n"
	"	movq %rsp, %rbp\n"
	/* DW_CFA_expression rbp: DW_OP_breg6 0 */
	"	.cfi_escape 0x10, 0x06, 0x02, 0x76, 0x00\n"
	"	pushq %r10\n"
	/* DW_CFA_def_cfa_expression: DW_OP_breg6 -8, DW_OP_deref */
	"	.cfi_escape 0x0f, 0x03, 0x76, 0x78, 0x06\n"
	"	subq $8, %rsp\n"
	"	call capture_regs\n"
	"	movq $1, %rax\n"
	"	leaq -8(%rbp), %rsp\n"
	"	popq %r10\n"
	"	.cfi_def_cfa %r10, 0\n"
	"	popq %rbp\n"
	"	leaq -8(%r10), %rsp\n"
	"	.cfi_def_cfa %rsp, 8\n"
	"	ret\n"
	".cfi_endproc\n"
	".size uw_drap, .-uw_drap\n");

__attribute__((noipa)) static size_t uw_aligned_caller(struct sample *smp)
{
	size_t r = uw_drap(smp);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

/*
 * As a recording knows this process: only its executable mappings, which
 * perf announces (the read-only segments holding .eh_frame are not).
 */
static void exec_maps_only(struct symbolizer *s)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4096], perms[8], name[3000];
	unsigned long start, end, off;
	int n = 0;

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		name[0] = '\0';
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %2999s", &start, &end, perms, &off,
			   name) < 4 ||
		    perms[2] != 'x' || name[0] != '/')
			continue;
		cr_assert_eq(symbolizer__mmap(s, (uint32_t)getpid(), start, end - start, off,
					      PROT_READ | PROT_EXEC, name),
			     0);
		n++;
	}
	fclose(f);
	cr_assert_gt(n, 1);
}

/*
 * Two samples at one IP of that function, unwound one after the other: the
 * second finds the frame's rule in libunwind's cache, which keeps an
 * expression as the address of its bytes in .eh_frame and reads them again.
 * Both reach the root (the second once ended in an unwind error: the bytes
 * lie in a mapping perf does not announce, and nothing had looked up the
 * module yet in that unwind; 2.7% of a CNN run's stacks).
 */
Test(unwind, realigned_frame_twice_from_the_cache)
{
	struct symbolizer *s = symbolizer__new();
	struct sample *smp = sample_new();
	uint64_t ips[256];
	enum unwind_end end;
	int n;

	cr_assert_not_null(s);
	exec_maps_only(s);
	uw_aligned_caller(smp);
	for (int i = 0; i < 2; i++) {
		end = UNWIND_END_ROOT + 100;
		n = symbolizer__unwind(s, (uint32_t)getpid(), smp->regs, regs_mask, smp->stack,
				       smp->size, ips, ARRAY_SIZE(ips), &end);
		cr_assert_gt(n, 3, "unwind %d: %d frames", i + 1, n);
		cr_assert_eq(end, UNWIND_END_ROOT, "unwind %d ended with %d after %d frames", i + 1,
			     end, n);
	}
	symbolizer__free(s);
	sample_free(smp);
}

/*
 * Two samples in one function, at two call sites where its frame differs
 * in size (16 bytes pushed between them), so libunwind's cache, keyed by
 * IP, has a rule for neither of the second's. Its procedure info (the FDE's
 * range and CIE) is the one found for the first: remembered, and the rule
 * at the second IP is still computed from it. Written out so the CFI is
 * this whatever the compiler.
 */
size_t uw_two(struct sample *a, struct sample *b);
__asm__(".text\n"
	".type uw_two, @function\n"
	"uw_two:\n"
	".cfi_startproc\n"
	"	pushq %rbx\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbx, -16\n"
	"	movq %rsi, %rbx\n"
	"	call capture_regs\n"
	"	subq $16, %rsp\n"
	"	.cfi_def_cfa_offset 32\n"
	"	movq %rbx, %rdi\n"
	"	call capture_regs\n"
	"	addq $16, %rsp\n"
	"	.cfi_def_cfa_offset 16\n"
	"	popq %rbx\n"
	"	.cfi_def_cfa_offset 8\n"
	"	movq $1, %rax\n"
	"	ret\n"
	".cfi_endproc\n"
	".size uw_two, .-uw_two\n");

__attribute__((noipa)) static size_t uw_two_caller(struct sample *a, struct sample *b)
{
	size_t r = uw_two(a, b);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

Test(unwind, second_ip_of_a_function_from_its_remembered_procedure_info)
{
	struct sample *a = sample_new(), *b = sample_new();
	struct unwound ua, ub;
	uint64_t found, remembered;

	uw_two_caller(a, b);
	cr_assert_eq(b->regs[PERF_REG_X86_SP] + 16, a->regs[PERF_REG_X86_SP]);
	unwind_sample(a, a->stack, a->size, &ua);
	log_chain(&ua);
	found = symbolizer__stats(sym)->proc_infos;
	remembered = symbolizer__stats(sym)->proc_infos_remembered;
	unwind_sample(b, b->stack, b->size, &ub);
	log_chain(&ub);
	cr_assert_gt(symbolizer__stats(sym)->proc_infos, found,
		     "libunwind had no rule for %#" PRIx64, ub.ips[0]);
	cr_assert_gt(symbolizer__stats(sym)->proc_infos_remembered, remembered,
		     "uw_two's procedure info was looked up again");
	cr_assert_str_eq(ua.names[0], "uw_two");
	cr_assert_str_eq(ub.names[0], "uw_two");
	cr_assert_str_eq(ub.names[1], "uw_two_caller");
	cr_assert_str_eq(ub.names[2],
			 "unwind_second_ip_of_a_function_from_its_remembered_procedure_info_impl");
	cr_assert_eq(ua.n, ub.n);
	for (int i = 1; i < ua.n; i++)
		cr_assert_eq(ua.ips[i], ub.ips[i], "frame %d: %#" PRIx64 " and %#" PRIx64, i,
			     ua.ips[i], ub.ips[i]);
	assert_reaches_root(&ub);
	sample_free(a);
	sample_free(b);
}

Test(unwind, depth_limit_truncates)
{
	struct sample *smp = sample_new();
	uint64_t ips[3];
	enum unwind_end end = UNWIND_END_ROOT;
	int n;

	uw_a(smp);
	cr_assert_eq(symbolizer__load_proc_maps(sym, (uint32_t)getpid()), 0);
	n = symbolizer__unwind(sym, (uint32_t)getpid(), smp->regs, regs_mask, smp->stack, smp->size,
			       ips, 3, &end);
	cr_assert_eq(n, 3);
	cr_assert_eq(end, UNWIND_END_DEPTH);
	sample_free(smp);
}

Test(unwind, bad_arguments)
{
	struct sample *smp = sample_new();
	uint64_t ips[4];
	enum unwind_end end;

	uw_a(smp);
	cr_assert_eq(symbolizer__unwind(NULL, 1, smp->regs, regs_mask, smp->stack, smp->size, ips,
					4, &end),
		     -EINVAL);
	/* no IP/SP in the mask */
	cr_assert_eq(symbolizer__unwind(sym, (uint32_t)getpid(), smp->regs, 1, smp->stack,
					smp->size, ips, 4, &end),
		     -EINVAL);
	/* a process we know nothing about */
	cr_assert_lt(symbolizer__unwind(sym, 0x7ffffff0u, smp->regs, regs_mask, smp->stack,
					smp->size, ips, 4, &end),
		     0);
	sample_free(smp);
}

/*
 * A copy placed right before a PROT_NONE page: any read past its end
 * crashes the test. Cut copies and garbage end TRUNCATED, never at a
 * made-up root.
 */
static uint8_t *guarded_copy(const uint8_t *src, size_t n, void **map, size_t *maplen)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t body = (n + page - 1) / page * page;
	uint8_t *m;

	*maplen = body + 2 * page;
	m = mmap(NULL, *maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(mprotect(m, page, PROT_NONE), 0);
	cr_assert_eq(mprotect(m + page + body, page, PROT_NONE), 0);
	*map = m;
	memcpy(m + page + body - n, src, n);
	return m + page + body - n;
}

Test(unwind, cut_copy_is_truncated_and_read_in_bounds)
{
	struct sample *smp = sample_new();
	struct unwound full, u;
	size_t maplen;
	void *map;

	uw_a(smp);
	unwind_sample(smp, smp->stack, smp->size, &full);
	cr_assert_eq(full.end, UNWIND_END_ROOT);
	/* every cut short of the whole copy ends for want of copy, and never reads past it */
	for (size_t cut = 0; cut < smp->size; cut += cut < 256 ? 8 : 1024) {
		uint8_t *copy = guarded_copy(smp->stack, cut, &map, &maplen);
		uint64_t grafts = symbolizer__stats(sym)->outer_grafts;

		unwind_sample(smp, copy, cut, &u);
		/* above _start's frame lie only argv and the environment */
		if (u.end == UNWIND_END_ROOT)
			cr_assert_eq(u.n, full.n, "cut %zu: a root, but not the whole stack", cut);
		else
			cr_assert_eq(u.end, UNWIND_END_COPY, "cut %zu: ended %d", cut, u.end);
		/*
		 * A copy this short cannot reach the root by itself: only by the
		 * known stack it climbed to (the full one unwound above), frame
		 * for frame (checked below).
		 */
		if (cut < 256 && u.end == UNWIND_END_ROOT)
			cr_assert_eq(symbolizer__stats(sym)->outer_grafts, grafts + 1,
				     "cut %zu reached the root without a graft", cut);
		cr_assert_leq(u.n, full.n);
		for (int i = 0; i < u.n; i++)
			cr_assert_eq(u.ips[i], full.ips[i], "cut %zu: frame %d differs", cut, i);
		munmap(map, maplen);
	}
	sample_free(smp);
}

/*
 * The reach of a whole walk (symbolizer__unwind_copy) is where the thread's
 * stack ends for its walks: a copy cut there walks to the root the same
 * way, with the same reach. A copy cut shorter and marked cut ends for want
 * of copy (or at the root, frame for frame, by a known stack found in it),
 * and nothing is grafted beyond its end.
 */
Test(unwind, a_copy_cut_at_the_reach_of_a_whole_walk_walks_the_same)
{
	struct sample *smp = sample_new();
	uint64_t ips[256], sps[256], ips2[256], sps2[256], reach, reach2, sp0;
	enum unwind_end end, end2;
	size_t maplen;
	void *map;
	int n, n2, short_walks = 0;

	uw_a(smp);
	sp0 = smp->regs[PERF_REG_X86_SP];
	cr_assert_eq(symbolizer__load_proc_maps(sym, (uint32_t)getpid()), 0);
	n = symbolizer__unwind_copy(sym, (uint32_t)getpid(), smp->regs, regs_mask, smp->stack,
				    smp->size, false, ips, sps, ARRAY_SIZE(ips), &end, &reach);
	cr_assert_eq(end, UNWIND_END_ROOT);
	cr_assert_gt(reach, sps[n - 1] - 8, "the outermost return address was read");
	cr_assert_leq(reach, sp0 + smp->size);
	cr_log_info("%d frames, reach %" PRIu64 " bytes of %zu", n, reach - sp0, smp->size);
	for (uint64_t len = reach - sp0; len + 256 > reach - sp0 && len > 0; len -= 8) {
		uint8_t *copy = guarded_copy(smp->stack, len, &map, &maplen);
		uint64_t grafts = symbolizer__stats(sym)->outer_grafts;

		n2 = symbolizer__unwind_copy(sym, (uint32_t)getpid(), smp->regs, regs_mask, copy,
					     len, true, ips2, sps2, ARRAY_SIZE(ips2), &end2,
					     &reach2);
		cr_assert_eq(symbolizer__stats(sym)->outer_grafts, grafts, "len %" PRIu64, len);
		if (len == reach - sp0) {
			cr_assert_eq(end2, UNWIND_END_ROOT);
			cr_assert_eq(reach2, reach);
		}
		if (end2 == UNWIND_END_ROOT) {
			cr_assert_eq(n2, n, "len %" PRIu64 ": a root, but not the whole stack",
				     len);
		} else {
			cr_assert_eq(end2, UNWIND_END_COPY, "len %" PRIu64 ": ended %d", len, end2);
			cr_assert_eq(reach2, 0, "len %" PRIu64, len);
			short_walks++;
		}
		for (int i = 0; i < n2; i++)
			cr_assert_eq(ips2[i], ips[i], "len %" PRIu64 ": frame %d differs", len, i);
		munmap(map, maplen);
	}
	cr_assert_gt(short_walks, 0, "every copy cut below the reach walked to the root");
	sample_free(smp);
}

/* A frame-pointer chain is whole when it ends where CFI says a thread starts. */
Test(unwind, outermost_is_where_cfi_ends_the_stack)
{
	struct sample *smp = sample_new();
	struct unwound u;

	uw_a(smp);
	unwind_sample(smp, smp->stack, smp->size, &u);
	cr_assert_eq(u.end, UNWIND_END_ROOT);
	cr_assert(symbolizer__outermost(sym, (uint32_t)getpid(), u.ips[u.n - 1]),
		  "%s is not outermost", u.names[u.n - 1]);
	for (int i = 1; i < u.n - 1; i++)
		cr_assert_not(symbolizer__outermost(sym, (uint32_t)getpid(), u.ips[i]),
			      "frame %d (%s) taken for the outermost", i, u.names[i]);
	cr_assert_not(symbolizer__outermost(sym, 999999999, u.ips[u.n - 1]));
	sample_free(smp);
}

Test(unwind, garbage_stack_ends_truncated)
{
	struct sample *smp = sample_new();
	uint64_t words[2048], code = (uint64_t)(uintptr_t)&uw_b;
	struct unwound u;
	unsigned seed = 12345;
	size_t maplen;
	void *map;
	uint8_t *copy;

	uw_a(smp);
	/* random words, and words that point into code just after calls */
	for (size_t i = 0; i < ARRAY_SIZE(words); i++) {
		seed = seed * 1103515245u + 12345u;
		words[i] = i % 3 ? ((uint64_t)seed << 32 | seed) : code + (seed % 64);
	}
	copy = guarded_copy((const uint8_t *)words, sizeof(words), &map, &maplen);
	unwind_sample(smp, copy, sizeof(words), &u);
	cr_assert_neq(u.end, UNWIND_END_ROOT);
	cr_assert_lt(u.n, 256);
	munmap(map, maplen);
	sample_free(smp);
}

/*
 * Our own stack, unwound with the CFI of a corrupted copy of this test
 * binary: a fake process maps the copy where the binary is mapped. Whatever
 * the bytes say, the unwind ends, in bounds.
 */
static void map_self_as(struct symbolizer *s, uint32_t pid, const char *self, const char *copy)
{
	char line[4096], perms[8], path[4096];
	uint64_t lo, hi, off;
	FILE *f = fopen("/proc/self/maps", "r");

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		uint32_t prot = 0;

		path[0] = '\0';
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %4095s", &lo, &hi,
			   perms, &off, path) < 4 ||
		    !strchr(perms, 'x'))
			continue;
		prot = PROT_READ | PROT_EXEC;
		symbolizer__mmap(s, pid, lo, hi - lo, off, prot, strcmp(path, self) ? path : copy);
	}
	fclose(f);
}

Test(unwind, corrupt_cfi_ends_in_bounds)
{
	struct sample *smp = sample_new();
	char self[4096], copy[] = "/tmp/dlflame-unwtest-XXXXXX";
	uint8_t *bin;
	size_t len;
	ssize_t n;
	int fd, in;
	unsigned seed = 1;
	struct stat st;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	cr_assert_gt(n, 0);
	self[n] = '\0';
	in = open(self, O_RDONLY);
	cr_assert_geq(in, 0);
	cr_assert_eq(fstat(in, &st), 0);
	len = (size_t)st.st_size;
	bin = malloc(len);
	cr_assert_eq(pread(in, bin, len, 0), (ssize_t)len);
	close(in);
	uw_a(smp);
	for (int round = 0; round < 40; round++) {
		struct symbolizer *s = symbolizer__new();
		uint64_t ips[256];
		enum unwind_end end = UNWIND_END_ROOT + 100;
		uint8_t *b = malloc(len);
		int k;

		memcpy(b, bin, len);
		/* flip bytes all over the file: headers, .eh_frame_hdr, .eh_frame, code */
		for (int i = 0; i < 64 + round * 64; i++) {
			seed = seed * 1103515245u + 12345u;
			b[(seed >> 4) % len] ^= (uint8_t)(seed >> 24 | 1);
		}
		fd = mkstemp(copy);
		cr_assert_geq(fd, 0);
		cr_assert_eq(write(fd, b, len), (ssize_t)len);
		close(fd);
		map_self_as(s, 0x7ffffff0u, self, copy);
		k = symbolizer__unwind(s, 0x7ffffff0u, smp->regs, regs_mask, smp->stack, smp->size,
				       ips, ARRAY_SIZE(ips), &end);
		cr_assert_geq(k, 1, "round %d: %d", round, k);
		cr_assert_leq(k, (int)ARRAY_SIZE(ips));
		/* one of the defined ends: a corrupt CFI may also find no caller short of an entry */
		cr_assert(end == UNWIND_END_ROOT || end == UNWIND_END_COPY ||
				  end == UNWIND_END_ERROR || end == UNWIND_END_DEPTH ||
				  end == UNWIND_END_JIT_NO_CALLER || end == UNWIND_END_NOT_ENTRY ||
				  end == UNWIND_END_JIT_GUESSED,
			  "round %d: end %d", round, (int)end);
		unlink(copy);
		strcpy(copy, "/tmp/dlflame-unwtest-XXXXXX");
		symbolizer__free(s);
		free(b);
	}
	free(bin);
	sample_free(smp);
}

/* ---- JIT code ---- */

typedef void (*jit_fn)(struct sample *);

/* The caller of the JIT code keeps a frame pointer: its CFA is rbp + 16, so
 * unwinding it needs the rbp that the preamble saved, not the one in the
 * registers (the JIT code loaded a constant into it). */
__attribute__((noipa, optimize("no-omit-frame-pointer"))) static size_t call_jit(jit_fn fn,
										 struct sample *smp)
{
	fn(smp);
	__asm__ volatile("" ::: "memory");
	return smp->size + 1;
}

__attribute__((noipa)) static size_t jit_outer(jit_fn fn, struct sample *smp)
{
	size_t r = call_jit(fn, smp);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

struct jit_code {
	uint8_t *mem;
	size_t len;
	jit_fn plain, preamble;
	size_t plain_len, preamble_len;
};

static size_t emit(uint8_t *p, const uint8_t *bytes, size_t n)
{
	memcpy(p, bytes, n);
	return n;
}

static size_t emit_call_capture(uint8_t *p)
{
	uint64_t target = (uint64_t)(uintptr_t)&capture_regs;
	size_t n = 0;

	n += emit(p + n, (const uint8_t[]){ 0x48, 0x83, 0xec, 0x08 }, 4); /* sub $8, %rsp */
	n += emit(p + n, (const uint8_t[]){ 0x48, 0xb8 }, 2); /* movabs $target, %rax */
	memcpy(p + n, &target, 8);
	n += 8;
	n += emit(p + n, (const uint8_t[]){ 0xff, 0xd0 }, 2); /* call *%rax */
	n += emit(p + n, (const uint8_t[]){ 0x48, 0x83, 0xc4, 0x08 }, 4); /* add $8, %rsp */
	return n;
}

/*
 * Two functions in one RWX anonymous page: a plain one that saves nothing,
 * and one with oneDNN's preamble (push rbx, rbp, r12-r15; a constant in rbp).
 */
static void jit_build(struct jit_code *j)
{
	static const uint8_t pushes[] = {
		0x53, 0x55, 0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57
	};
	static const uint8_t pops[] = {
		0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, 0x5d, 0x5b
	};
	uint64_t junk = 0x4141414141414141ull;
	uint8_t *p;
	size_t n = 0, start;

	j->len = 4096;
	j->mem = mmap(NULL, j->len, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	cr_assert_neq(j->mem, MAP_FAILED);
	p = j->mem;
	memset(p, 0xcc, j->len);

	j->plain = (jit_fn)(uintptr_t)p;
	n += emit_call_capture(p + n);
	n += emit(p + n, (const uint8_t[]){ 0xc3 }, 1);
	j->plain_len = n;

	n = start = 256;
	j->preamble = (jit_fn)(uintptr_t)(p + n);
	n += emit(p + n, pushes, sizeof(pushes));
	n += emit(p + n, (const uint8_t[]){ 0x48, 0xbd }, 2); /* movabs $junk, %rbp */
	memcpy(p + n, &junk, 8);
	n += 8;
	n += emit_call_capture(p + n);
	n += emit(p + n, pops, sizeof(pops));
	n += emit(p + n, (const uint8_t[]){ 0xc3 }, 1);
	j->preamble_len = n - start;
	__builtin___clear_cache((char *)p, (char *)p + j->len);
}

static char map_path[64];

static void write_perf_map(const struct jit_code *j)
{
	FILE *f;

	snprintf(map_path, sizeof(map_path), "/tmp/perf-%d.map", getpid());
	f = fopen(map_path, "w");
	cr_assert_not_null(f);
	fprintf(f, "%" PRIx64 " %zx jit_plain_kernel\n", (uint64_t)(uintptr_t)j->plain,
		j->plain_len);
	fprintf(f, "%" PRIx64 " %zx jit_avx512_core_preamble_kernel\n",
		(uint64_t)(uintptr_t)j->preamble, j->preamble_len);
	fclose(f);
}

static void jit_case(bool preamble)
{
	struct sample *smp = sample_new();
	struct jit_code j;
	struct unwound u;
	const struct symbolizer_stats *st;

	jit_build(&j);
	write_perf_map(&j);
	jit_outer(preamble ? j.preamble : j.plain, smp);
	unwind_sample(smp, smp->stack, smp->size, &u);
	log_chain(&u);
	unlink(map_path);
	cr_assert_geq(u.n, 4);
	cr_assert_str_eq(u.names[0],
			 preamble ? "jit_avx512_core_preamble_kernel" : "jit_plain_kernel");
	cr_assert_eq(u.kinds[0], FRAME_JIT);
	cr_assert_str_eq(u.names[1], "call_jit");
	cr_assert_str_eq(u.names[2], "jit_outer");
	assert_reaches_root(&u);
	st = symbolizer__stats(sym);
	cr_assert_eq(st->jit_callers_recovered, 1);
	cr_assert_eq(st->perfmap.entries, 2);
	/* both kernels' code read at the first frame of one: the other may be unwound too late */
	cr_assert_eq(st->jit_preambles_read, 2);

	/* again: now from the slot where its return address was, the same chain */
	struct unwound again;
	unwind_sample(smp, smp->stack, smp->size, &again);
	cr_assert_eq(again.n, u.n);
	for (int i = 0; i < u.n; i++)
		cr_assert_str_eq(again.names[i], u.names[i], "frame %d", i);
	cr_assert_eq(again.end, UNWIND_END_ROOT);
	cr_assert_eq(st->jit_callers_recovered, 2);
	munmap(j.mem, j.len);
	sample_free(smp);
}

Test(unwind, jit_plain_caller_recovered)
{
	jit_case(false);
}

Test(unwind, jit_preamble_caller_recovered_with_saved_registers)
{
	jit_case(true);
}

/*
 * A copy cut short above a JIT frame's caller: uncut, the walk from the
 * caller that runs off its end is taken, and a known stack completes it
 * (jitcaller__graft_outer); marked cut (where the thread's stack was known
 * to end), its end is no end of the stack, and nothing is taken or grafted
 * for running off it.
 */
Test(unwind, a_cut_copy_is_not_grafted_past_its_end)
{
	struct sample *smp = sample_new();
	uint64_t ips[256], sps[256], reach, sp0;
	struct jit_code j;
	struct unwound u;
	enum unwind_end end;
	unsigned grafted = 0;
	int n;

	jit_build(&j);
	write_perf_map(&j);
	jit_outer(j.plain, smp);
	unwind_sample(smp, smp->stack, smp->size, &u);
	assert_reaches_root(&u);
	sp0 = smp->regs[PERF_REG_X86_SP];
	for (size_t len = 8; len < smp->size; len += 8) {
		uint64_t grafts = symbolizer__stats(sym)->outer_grafts;

		n = symbolizer__unwind_copy(sym, (uint32_t)getpid(), smp->regs, regs_mask,
					    smp->stack, len, false, ips, sps, ARRAY_SIZE(ips), &end,
					    &reach);
		if (symbolizer__stats(sym)->outer_grafts == grafts)
			continue;
		cr_assert_eq(end, UNWIND_END_ROOT);
		cr_assert_eq(reach, 0, "len %zu: grafted, yet a reach", len);
		grafted++;
		n = symbolizer__unwind_copy(sym, (uint32_t)getpid(), smp->regs, regs_mask,
					    smp->stack, len, true, ips, sps, ARRAY_SIZE(ips), &end,
					    &reach);
		cr_assert_gt(n, 0);
		cr_assert_neq(end, UNWIND_END_ROOT, "len %zu: a cut copy reached the root", len);
		cr_assert_eq(symbolizer__stats(sym)->outer_grafts, grafts + 1,
			     "len %zu: a cut copy grafted", len);
		cr_assert_eq(reach, 0);
	}
	cr_log_info("%u copies of %zu lengths grafted uncut (sp %#" PRIx64 ")", grafted,
		    smp->size / 8, sp0);
	cr_assert_gt(grafted, 0, "no copy of this stack was grafted: the test's premise");
	unlink(map_path);
	munmap(j.mem, j.len);
	sample_free(smp);
}

Test(unwind, jit_without_caller_on_the_stack)
{
	struct sample *smp = sample_new();
	struct jit_code j;
	struct unwound u;
	size_t keep;

	jit_build(&j);
	write_perf_map(&j);
	jit_outer(j.preamble, smp);
	/* the copy ends before the return address: the caller cannot be found */
	keep = 8 * 7;
	unwind_sample(smp, smp->stack, keep, &u);
	unlink(map_path);
	cr_assert_eq(u.n, 1);
	cr_assert_eq(u.end, UNWIND_END_JIT_NO_CALLER);
	cr_assert_str_eq(u.names[0], "jit_avx512_core_preamble_kernel");
	cr_assert_eq(symbolizer__stats(sym)->jit_callers_missed, 1);
	munmap(j.mem, j.len);
	sample_free(smp);
}

/*
 * A kernel that, like oneDNN's GEMM kernel for large K, moves rsp to a heap
 * workspace after its preamble and keeps the original rsp at [rsp + 120]:
 * then its callers are not in the stack copy at all.
 */
typedef void (*ws_fn)(struct sample *, uint8_t *ws_top);

static ws_fn ws_build(void **mem)
{
	static const uint8_t pushes[] = {
		0x53, 0x55, 0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57
	};
	static const uint8_t pops[] = {
		0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, 0x5d, 0x5b
	};
	static const uint8_t head[] = {
		0x48, 0x89, 0xe5, /* mov %rsp, %rbp */
		0x48, 0x85, 0xf6, /* test %rsi, %rsi */
		0x74, 0x05, /* jz 1f */
		0x48, 0x89, 0xf4, /* mov %rsi, %rsp */
		0xeb, 0x0b, /* jmp 2f */
		0x48, 0x81, 0xec, 0x00, 0x02, 0x00, 0x00, /* 1: sub $0x200, %rsp */
		0x48, 0x83, 0xe4, 0xf0, /* and $-16, %rsp */
		0x48, 0x89, 0x6c, 0x24, 0x78, /* 2: mov %rbp, 120(%rsp) */
		0x48, 0xb8, /* movabs $capture_regs, %rax */
	};
	static const uint8_t tail[] = {
		0xff, 0xd0, /* call *%rax */
		0x48, 0x89, 0xec, /* mov %rbp, %rsp */
	};
	uint64_t target = (uint64_t)(uintptr_t)&capture_regs;
	uint8_t *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t n = 0;

	cr_assert_neq(p, MAP_FAILED);
	n += emit(p + n, pushes, sizeof(pushes));
	n += emit(p + n, head, sizeof(head));
	memcpy(p + n, &target, 8);
	n += 8;
	n += emit(p + n, tail, sizeof(tail));
	n += emit(p + n, pops, sizeof(pops));
	p[n++] = 0xc3;
	__builtin___clear_cache((char *)p, (char *)p + n);
	*mem = p;
	return (ws_fn)(uintptr_t)p;
}

__attribute__((noipa, optimize("no-omit-frame-pointer"))) static size_t
call_ws(ws_fn fn, struct sample *smp, uint8_t *ws_top)
{
	fn(smp, ws_top);
	__asm__ volatile("" ::: "memory");
	return smp->size + 1;
}

__attribute__((noipa)) static size_t ws_outer(ws_fn fn, struct sample *smp, uint8_t *ws_top)
{
	size_t r = call_ws(fn, smp, ws_top);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

/* The copy from the workspace's SP stays inside it. */
#define WS_LEN (2 * COPY_MAX)

/*
 * The workspace kernel built at *code and named in a perf map, as oneDNN's
 * kernels are (its preamble is read from its start), and a workspace of
 * WS_LEN bytes at *ws.
 */
static ws_fn ws_ready(uint8_t **ws, void **code)
{
	ws_fn fn = ws_build(code);
	FILE *pm;

	*ws = mmap(NULL, WS_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(*ws, MAP_FAILED);
	snprintf(map_path, sizeof(map_path), "/tmp/perf-%d.map", getpid());
	pm = fopen(map_path, "w");
	cr_assert_not_null(pm);
	fprintf(pm, "%" PRIx64 " 100 jit_ws_gemm_kernel\n", (uint64_t)(uintptr_t)*code);
	fclose(pm);
	return fn;
}

Test(unwind, jit_on_heap_workspace_takes_the_stack_seen_before)
{
	struct sample *on_stack = sample_new(), *on_heap = sample_new();
	struct unwound u;
	uint8_t *ws;
	void *code;
	ws_fn fn = ws_ready(&ws, &code);

	/* one call site, at the same depth, first with the kernel on the stack, then on the heap */
	for (int i = 0; i < 2; i++)
		ws_outer(fn, i ? on_heap : on_stack, i ? ws + COPY_MAX / 2 : NULL);
	cr_assert_lt((uint64_t)(uintptr_t)on_heap->regs[PERF_REG_X86_SP] - (uint64_t)(uintptr_t)ws,
		     WS_LEN, "the heap call ran on the workspace");

	/* nothing seen before: no caller */
	unwind_sample(on_heap, on_heap->stack, on_heap->size, &u);
	cr_assert_eq(u.end, UNWIND_END_JIT_NO_CALLER);
	cr_assert_eq(u.n, 1);

	unwind_sample(on_stack, on_stack->stack, on_stack->size, &u);
	log_chain(&u);
	cr_assert_str_eq(u.names[1], "call_ws");
	assert_reaches_root(&u);

	unwind_sample(on_heap, on_heap->stack, on_heap->size, &u);
	log_chain(&u);
	cr_assert_eq(u.end, UNWIND_END_ROOT);
	cr_assert_str_eq(u.names[1], "call_ws");
	cr_assert_str_eq(u.names[2], "ws_outer");
	assert_reaches_root(&u);
	cr_assert_eq(symbolizer__stats(sym)->jit_callers_recovered, 2);
	cr_assert_eq(symbolizer__stats(sym)->jit_callers_missed, 1);

	/* grafted last time: grafted first now, and the same chain */
	unwind_sample(on_heap, on_heap->stack, on_heap->size, &u);
	cr_assert_eq(u.end, UNWIND_END_ROOT);
	cr_assert_str_eq(u.names[1], "call_ws");
	cr_assert_str_eq(u.names[2], "ws_outer");
	/* on the stack again: its saved SP is in the copy, so its caller is searched for there */
	unwind_sample(on_stack, on_stack->stack, on_stack->size, &u);
	cr_assert_str_eq(u.names[1], "call_ws");
	assert_reaches_root(&u);
	cr_assert_eq(symbolizer__stats(sym)->jit_callers_recovered, 4);
	cr_assert_eq(symbolizer__stats(sym)->jit_preambles_read, 1);
	unlink(map_path);
	munmap(code, 4096);
	munmap(ws, WS_LEN);
	sample_free(on_stack);
	sample_free(on_heap);
}

/*
 * The climb from a grafted caller when one of its function's call sites
 * leads nowhere for many steps. call_ws is called through mid_b and mid_a
 * (learned from a stack that came in through wrap, at other SPs), and by a
 * deep recursion seen last: its call site is tried first. Only mid_a's frame
 * (seen above uw_c, from top) is known where the workspace call has it, two
 * steps up. A depth-first climb spent its budget in the recursion (CI's MLP
 * at two threads: the main thread's GEMM driver, called directly and through
 * GOMP_parallel, cut 2-13% of the stacks of 1 run in 40).
 */
__attribute__((noipa)) static size_t mid_b(ws_fn fn, struct sample *smp, uint8_t *ws_top)
{
	size_t r = call_ws(fn, smp, ws_top);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

__attribute__((noipa)) static size_t mid_a(ws_fn fn, struct sample *smp, uint8_t *ws_top,
					   bool known)
{
	size_t r = known ? uw_c(smp) : mid_b(fn, smp, ws_top);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

__attribute__((noipa)) static size_t top(ws_fn fn, struct sample *smp, uint8_t *ws_top, bool known)
{
	size_t r = mid_a(fn, smp, ws_top, known);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

/* the same calls below a larger frame: mid_a and all under it at other SPs */
__attribute__((noipa)) static size_t wrap(ws_fn fn, struct sample *smp)
{
	volatile uint8_t pad[512];
	size_t r;

	pad[0] = 1;
	r = mid_a(fn, smp, NULL, false);
	__asm__ volatile("" ::: "memory");
	return r + pad[0];
}

__attribute__((noipa)) static size_t recurse(ws_fn fn, struct sample *smp, int n)
{
	size_t r = n ? recurse(fn, smp, n - 1) : call_ws(fn, smp, NULL);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

/* the workspace call's frames far below the recursion's, so that none lies at an SP of another's */
__attribute__((noipa)) static size_t below(ws_fn fn, struct sample *const smp[3], uint8_t *ws_top)
{
	volatile uint8_t pad[16384];
	size_t r;

	pad[0] = 1;
	r = top(fn, smp[0], NULL, true) + wrap(fn, smp[1]) + top(fn, smp[2], ws_top, false);
	__asm__ volatile("" ::: "memory");
	return r + pad[0];
}

Test(unwind, jit_graft_climbs_past_a_call_site_that_leads_nowhere)
{
	struct sample *smp[4] = { sample_new(), sample_new(), sample_new(), sample_new() };
	struct unwound u;
	uint8_t *ws;
	void *code;
	ws_fn fn = ws_ready(&ws, &code);

	/* 0: top, mid_a, uw_c; 1: wrap, mid_a, mid_b, call_ws, kernel; 2: the same from top, on the heap */
	below(fn, smp, ws + COPY_MAX / 2);
	recurse(fn, smp[3], 40);

	unwind_sample(smp[0], smp[0]->stack, smp[0]->size, &u);
	cr_assert_str_eq(u.names[1], "mid_a");
	assert_reaches_root(&u);
	unwind_sample(smp[1], smp[1]->stack, smp[1]->size, &u);
	cr_assert_str_eq(u.names[2], "mid_b");
	cr_assert_str_eq(u.names[4], "wrap");
	assert_reaches_root(&u);
	/* the recursion last: its call site of call_ws is the one tried first */
	unwind_sample(smp[3], smp[3]->stack, smp[3]->size, &u);
	cr_assert_str_eq(u.names[2], "recurse");
	assert_reaches_root(&u);

	unwind_sample(smp[2], smp[2]->stack, smp[2]->size, &u);
	log_chain(&u);
	cr_assert_eq(u.end, UNWIND_END_ROOT, "ended %d after %d frames", u.end, u.n);
	cr_assert_str_eq(u.names[1], "call_ws");
	cr_assert_str_eq(u.names[2], "mid_b");
	cr_assert_str_eq(u.names[3], "mid_a");
	cr_assert_str_eq(u.names[4], "top");
	cr_assert_str_eq(u.names[5], "below");
	assert_reaches_root(&u);
	unlink(map_path);
	munmap(code, 4096);
	munmap(ws, WS_LEN);
	for (int i = 0; i < 4; i++)
		sample_free(smp[i]);
}

/* n keys alike in their hash's low 20 bits: one bucket in any table of up to 2^20 slots */
static void hash_alike(uint64_t *keys, size_t n)
{
	size_t k = 0;

	for (uint64_t a = 0x400000; k < n; a += 16) {
		if (!k || !((hash_u64(a) ^ hash_u64(keys[0])) & 0xfffff))
			keys[k++] = a;
	}
}

/*
 * Functions whose starts hash alike: each keeps the call sites complete
 * stacks taught it (they are taught once, when a stack is new), up to the
 * bucket's ways; one more takes the place of the one taught least lately.
 */
Test(unwind, call_sites_of_functions_that_hash_alike_are_kept)
{
	uint32_t pid = (uint32_t)getpid();
	uint64_t fn[5], ups[8];
	struct proc *p;

	cr_assert_eq(symbolizer__load_proc_maps(sym, pid), 0);
	p = proc_find(sym, pid);
	cr_assert_not_null(p);
	hash_alike(fn, ARRAY_SIZE(fn));
	for (int k = 0; k < 4; k++)
		jitcaller__teach_edge(p, fn[k], 0x1000 + k);
	jitcaller__teach_edge(p, fn[0], 0x2000);
	for (int k = 0; k < 4; k++) {
		size_t got = jitcaller__edges(p, fn[k], ups, ARRAY_SIZE(ups));

		cr_assert_eq(got, k ? 1 : 2, "function %d: %zu call sites", k, got);
		cr_assert_eq(ups[got - 1], 0x1000 + (uint64_t)k);
	}
	cr_assert_eq(ups[0], 0x1000 + 3);
	cr_assert_eq(jitcaller__edges(p, fn[0], ups, ARRAY_SIZE(ups)), 2);
	cr_assert_eq(ups[0], 0x2000, "most recent first");
	/* a fifth: the one taught least lately (fn[1]) makes room */
	jitcaller__teach_edge(p, fn[4], 0x1004);
	cr_assert_eq(jitcaller__edges(p, fn[1], ups, ARRAY_SIZE(ups)), 0);
	cr_assert_eq(jitcaller__edges(p, fn[4], ups, ARRAY_SIZE(ups)), 1);
	for (int k = 0; k < 4; k++)
		if (k != 1)
			cr_assert_geq(jitcaller__edges(p, fn[k], ups, ARRAY_SIZE(ups)), 1,
				      "function %d lost its call sites", k);
}

/*
 * JIT code of keys that hash alike (its perf-map names, or its mappings):
 * each keeps the return addresses it was seen with. (One slot per hash: two
 * kernels took turns, each emptying what the other had learnt.)
 */
Test(unwind, return_addresses_of_jit_code_that_hashes_alike_are_kept)
{
	uint32_t pid = (uint32_t)getpid();
	uint64_t key[4];
	struct proc *p;

	cr_assert_eq(symbolizer__load_proc_maps(sym, pid), 0);
	p = proc_find(sym, pid);
	cr_assert_not_null(p);
	hash_alike(key, ARRAY_SIZE(key));
	for (size_t k = 0; k < ARRAY_SIZE(key); k++)
		jitcaller__teach_ret(p, key[k], 0x1000 + k);
	for (size_t k = 0; k < ARRAY_SIZE(key); k++)
		cr_assert_eq(jitcaller__ret_of(p, key[k]), 0x1000 + k, "key %zu", k);
}

/* ---- oneDNN's preambles, as its two generations write them ---- */

/*
 * The first 32 bytes of kernels that oneDNN generated, dumped with
 * ONEDNN_JIT_DUMP=1 (one dnnl_dump_cpu_<name>.<n>.bin file per kernel, then
 * `head -c 32 FILE | xxd -i`) on an AVX2 machine: oneDNN 2.6.3 (Debian 12,
 * examples/mlp) and 3.7.2 (Debian 13, python3-torch 2.6 running
 * examples/cnn_train.py). 2.6 pushes rbx, rbp, r12-r15; 3.7 pushes rbp,
 * copies rsp into it, then pushes rbx, r12-r15; jit_single_blk_kernel,
 * which 3.7's reorder kernels call, saves nothing.
 */
static const uint8_t dnnl26_gemm[] = {
	/* jit_avx_gemm_f32_xbyak_gemm */
	0x53, 0x55, 0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57, 0x4c,
	0x8b, 0x5c, 0x24, 0x38, 0x48, 0x8b, 0x5c, 0x24, 0x40, 0x4c, 0x8b,
	0x7c, 0x24, 0x48, 0x4c, 0x8b, 0x64, 0x24, 0x50, 0x4c, 0x8b,
};
static const uint8_t dnnl26_softmax[] = {
	/* jit_softmax_t */
	0x53, 0x55, 0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57, 0x48,
	0xb8, 0x40, 0x53, 0xcf, 0xc5, 0xa1, 0x7f, 0x00, 0x00, 0x49, 0xbd,
	0x34, 0xbd, 0x9a, 0xc8, 0xa1, 0x7f, 0x00, 0x00, 0xc4, 0xc1,
};
static const uint8_t dnnl37_conv[] = {
	/* jit_avx2_conv_fwd_kernel_f32 */
	0x55, 0x48, 0x89, 0xe5, 0x53, 0x41, 0x54, 0x41, 0x55, 0x41, 0x56,
	0x41, 0x57, 0x48, 0x8b, 0x07, 0x48, 0x8b, 0x77, 0x08, 0x48, 0x8b,
	0x57, 0x10, 0x48, 0x8b, 0x5f, 0x18, 0x48, 0x8b, 0x8f, 0xf0,
};
static const uint8_t dnnl37_reorder[] = {
	/* jit_uni_reorder_kernel_f32 */
	0x55, 0x48, 0x89, 0xe5, 0x53, 0x41, 0x54, 0x41, 0x55, 0x41, 0x56,
	0x41, 0x57, 0x48, 0x8b, 0x37, 0x48, 0x8b, 0x57, 0x08, 0xc4, 0x41,
	0x08, 0x57, 0xf6, 0x4d, 0x31, 0xc0, 0x4d, 0x31, 0xc9, 0x41,
};
static const uint8_t dnnl37_single_blk[] = {
	/* jit_single_blk_kernel */
	0x80, 0xfa, 0x01, 0x0f, 0x84, 0xef, 0x00, 0x00, 0x00, 0xc5, 0xfc,
	0x10, 0x07, 0xc5, 0xfc, 0x10, 0x4f, 0x20, 0xc5, 0xfc, 0x10, 0x57,
	0x40, 0xc5, 0xfc, 0x10, 0x5f, 0x60, 0xc5, 0xfc, 0x10, 0xa7,
};
/* 3.7's postamble (the end of jit_avx2_conv_fwd_kernel_f32): pop r15-r12, rbx, rbp; vzeroupper; ret */
static const uint8_t dnnl37_post[] = {
	0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, 0x5b, 0x5d, 0xc5, 0xf8, 0x77, 0xc3,
};

/*
 * The first 112 bytes of oneDNN 2.6's f32 GEMM kernels (jit_avx512_common_
 * gemm_f32_xbyak_gemm; jit_avx_gemm_f32_xbyak_gemm, DNNL_MAX_CPU_ISA=AVX2),
 * read from a live examples/mlp: pushes, mov rbp, rsp, then rsp moved onto
 * a buffer (sub rsp, rax; and rsp, -4096) or the heap workspace (mov rsp,
 * [rsp + 0x68]), then mov [rsp + 0x78] (0x98), rbp.
 */
static const uint8_t dnnl26_gemm_avx512_head[] = {
	0x53, 0x55, 0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57, 0xbd, 0x00, 0x04, 0x00,
	0x00, 0x4c, 0x8b, 0x5c, 0x24, 0x38, 0x48, 0x8b, 0x5c, 0x24, 0x40, 0x4c, 0x8b, 0x7c,
	0x24, 0x48, 0x4c, 0x8b, 0x64, 0x24, 0x50, 0x4c, 0x8b, 0x6c, 0x24, 0x58, 0x48, 0x89,
	0xe5, 0xc5, 0xfa, 0x10, 0x01, 0xc4, 0xc1, 0x7a, 0x10, 0x0f, 0x48, 0x83, 0xfa, 0x54,
	0x0f, 0x8f, 0x21, 0x00, 0x00, 0x00, 0x48, 0x8d, 0x04, 0x95, 0x00, 0x00, 0x00, 0x00,
	0x48, 0x6b, 0xc0, 0x30, 0x48, 0x05, 0x00, 0x01, 0x00, 0x00, 0x48, 0x29, 0xc4, 0x48,
	0x81, 0xe4, 0x00, 0xf0, 0xff, 0xff, 0xe9, 0x05, 0x00, 0x00, 0x00, 0x48, 0x8b, 0x64,
	0x24, 0x68, 0x48, 0x89, 0x6c, 0x24, 0x78, 0x48, 0x89, 0x3c, 0x24, 0x48, 0x89, 0x74,
};
static const uint8_t dnnl26_gemm_avx_head[] = {
	0x53, 0x55, 0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57, 0x4c, 0x8b, 0x5c, 0x24,
	0x38, 0x48, 0x8b, 0x5c, 0x24, 0x40, 0x4c, 0x8b, 0x7c, 0x24, 0x48, 0x4c, 0x8b, 0x64,
	0x24, 0x50, 0x4c, 0x8b, 0x6c, 0x24, 0x58, 0x48, 0x89, 0xe5, 0xc5, 0xfa, 0x10, 0x01,
	0xc4, 0xc1, 0x7a, 0x10, 0x0f, 0x48, 0x81, 0xfa, 0xfc, 0x00, 0x00, 0x00, 0x0f, 0x8f,
	0x21, 0x00, 0x00, 0x00, 0x48, 0x8d, 0x04, 0x95, 0x00, 0x00, 0x00, 0x00, 0x48, 0xc1,
	0xe0, 0x04, 0x48, 0x05, 0x00, 0x01, 0x00, 0x00, 0x48, 0x29, 0xc4, 0x48, 0x81, 0xe4,
	0x00, 0xf0, 0xff, 0xff, 0xe9, 0x05, 0x00, 0x00, 0x00, 0x48, 0x8b, 0x64, 0x24, 0x68,
	0x48, 0x89, 0xac, 0x24, 0x98, 0x00, 0x00, 0x00, 0x48, 0x89, 0x3c, 0x24, 0x48, 0x89,
};

enum { RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15 };

/* Where each GEMM kernel keeps its rsp, read from its code; nothing where the code keeps none. */
Test(insn, kept_sp_of_onednn_gemm)
{
	struct preamble p;
	uint8_t code[sizeof(dnnl26_gemm_avx512_head)];

	cr_assert_eq(insn_preamble(dnnl26_gemm_avx512_head, sizeof(dnnl26_gemm_avx512_head), &p),
		     0);
	cr_assert_eq(p.sp_slot, 120, "%d", p.sp_slot);
	cr_assert_eq(p.sp_depth, 48, "after the six pushes: %u", p.sp_depth);
	cr_assert_eq(insn_preamble(dnnl26_gemm_avx_head, sizeof(dnnl26_gemm_avx_head), &p), 0);
	cr_assert_eq(p.sp_slot, 152, "%d", p.sp_slot);
	cr_assert_eq(p.sp_depth, 48);
	/* kernels that keep no rsp */
	cr_assert_eq(insn_preamble(dnnl26_gemm, sizeof(dnnl26_gemm), &p), 0);
	cr_assert_eq(p.sp_slot, -1);
	cr_assert_eq(insn_preamble(dnnl37_conv, sizeof(dnnl37_conv), &p), 0);
	cr_assert_eq(p.sp_slot, -1);
	/* cut before the store: none */
	cr_assert_eq(insn_preamble(dnnl26_gemm_avx512_head, 0x64, &p), 0);
	cr_assert_eq(p.sp_slot, -1);
	/* rbp written between the copy and the store (mov ebp, 0x400 over vmovss (%rcx)): none */
	memcpy(code, dnnl26_gemm_avx512_head, sizeof(code));
	code[0x2b] = 0xbd;
	code[0x2c] = 0x00;
	code[0x2d] = 0x04;
	code[0x2e] = 0x00;
	code[0x2f] = 0x00;
	cr_assert_eq(insn_preamble(code, sizeof(code), &p), 0);
	cr_assert_eq(p.sp_slot, -1, "%d", p.sp_slot);
	/* the store before rsp moved (the moves turned into nops): a frame slot, not a kept rsp */
	memcpy(code, dnnl26_gemm_avx512_head, sizeof(code));
	memset(code + 0x50, 0x90, 0x64 - 0x50);
	cr_assert_eq(insn_preamble(code, sizeof(code), &p), 0);
	cr_assert_eq(p.sp_slot, -1, "%d", p.sp_slot);
	/* a call between: not followed */
	memcpy(code, dnnl26_gemm_avx512_head, sizeof(code));
	code[0x5a] = 0xe8;
	cr_assert_eq(insn_preamble(code, sizeof(code), &p), 0);
	cr_assert_eq(p.sp_slot, -1, "%d", p.sp_slot);
}

static void assert_pushes(const struct preamble *p, const uint8_t *want, size_t n)
{
	cr_assert_eq(p->npush, n, "%u pushes, %zu expected", p->npush, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(p->push[i], want[i], "push %zu: r%u, r%u expected", i, p->push[i],
			     want[i]);
}

Test(insn, preambles_of_onednn_2_6_and_3_7)
{
	static const uint8_t v2[] = { RBX, RBP, R12, R13, R14, R15 };
	static const uint8_t v3[] = { RBP, RBX, R12, R13, R14, R15 };
	struct preamble p;
	uint32_t depth;
	uint8_t n;

	cr_assert_eq(insn_preamble(dnnl26_gemm, sizeof(dnnl26_gemm), &p), 0);
	assert_pushes(&p, v2, 6);
	cr_assert_eq(p.fp_at, -1);
	cr_assert_eq(p.depth_now, 48);
	cr_assert_eq(p.len, 10, "stops at the first load: %u", p.len);
	cr_assert_eq(insn_preamble(dnnl26_softmax, sizeof(dnnl26_softmax), &p), 0);
	assert_pushes(&p, v2, 6);
	cr_assert_eq(p.len, 10);

	for (int k = 0; k < 2; k++) {
		const uint8_t *code = k ? dnnl37_reorder : dnnl37_conv;

		cr_assert_eq(insn_preamble(code, 32, &p), 0);
		assert_pushes(&p, v3, 6);
		/* mov rbp, rsp after the first push: rbp is 8 below the entry SP */
		cr_assert_eq(p.fp_at, 1);
		cr_assert_eq(p.fp_depth, 8);
		cr_assert_eq(p.depth_now, 48);
		cr_assert_eq(p.len, 13);
	}
	/* inside the preamble: after push rbp and mov rbp, rsp; not inside an instruction */
	cr_assert(preamble_at(&p, 4, &depth, &n));
	cr_assert_eq(depth, 8);
	cr_assert_eq(n, 1);
	cr_assert(preamble_at(&p, 0, &depth, &n));
	cr_assert_eq(depth, 0);
	cr_assert_not(preamble_at(&p, 2, &depth, &n));
	cr_assert_not(preamble_at(&p, 20, &depth, &n));

	cr_assert_eq(insn_preamble(dnnl37_single_blk, sizeof(dnnl37_single_blk), &p), 0);
	cr_assert_eq(p.npush, 0);
	cr_assert_eq(p.len, 0);
	cr_assert_eq(p.depth_now, 0);
}

Test(insn, preamble_forms)
{
	static const uint8_t code[] = {
		0xf3, 0x0f, 0x1e, 0xfa, /* endbr64 */
		0x41, 0x57, /* push %r15 */
		0x48, 0x8b, 0xec, /* mov %rsp, %rbp (8b form) */
		0x48, 0x83, 0xec, 0x18, /* sub $0x18, %rsp */
		0x48, 0x81, 0xec, 0x00, 0x01, 0x00, 0x00, /* sub $0x100, %rsp */
		0x48, 0x83, 0xc4, 0x08, /* add $8, %rsp */
		0x48, 0x89, 0x44, 0x24, 0x10, /* mov %rax, 0x10(%rsp) */
		0xc5, 0xf8, 0x77, /* vzeroupper */
		0x48, 0x83, 0xe4, 0xc0, /* and $-64, %rsp: the end */
		0x53,
	};
	static const uint8_t rsp_from_reg[] = { 0x53, 0x48, 0x89, 0xc4, 0x55 }; /* mov %rax, %rsp */
	static const uint8_t clobber[] = { 0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xc5 };
	struct preamble p;
	uint8_t regs[16];

	cr_assert_eq(insn_preamble(code, sizeof(code), &p), 0);
	cr_assert_eq(p.npush, 1);
	cr_assert_eq(p.push[0], R15);
	cr_assert_eq(p.fp_at, 1);
	cr_assert_eq(p.depth_now, 8 + 0x18 + 0x100 - 8);
	cr_assert_eq(p.len, sizeof(code) - 5, "len %u", p.len);
	cr_assert_eq(insn_preamble(rsp_from_reg, sizeof(rsp_from_reg), &p), 0);
	cr_assert_eq(p.npush, 1);
	cr_assert_eq(p.len, 1);
	/* rbp written after the copy: no longer a frame pointer */
	cr_assert_eq(insn_preamble(clobber, sizeof(clobber), &p), 0);
	cr_assert_eq(p.fp_at, -1);
	/* truncated code ends the decoding, in bounds */
	cr_assert_eq(insn_preamble(code, 11, &p), 0);
	cr_assert_eq(p.len, 9);
	cr_assert_eq(insn_preamble(NULL, 4, &p), -1);

	cr_assert_eq(insn_epilogue(dnnl37_post, sizeof(dnnl37_post), regs, 16), 6);
	cr_assert_eq(regs[0], R15);
	cr_assert_eq(regs[5], RBP);
	cr_assert_eq(insn_epilogue(dnnl37_post + 9, sizeof(dnnl37_post) - 9, regs, 16), 1);
	cr_assert_eq(insn_epilogue(dnnl37_post, 8, regs, 16), -1, "no ret in the bytes");
	cr_assert_eq(insn_epilogue(dnnl37_conv, sizeof(dnnl37_conv), regs, 16), -1);
	cr_assert_eq(insn_epilogue(dnnl37_post, sizeof(dnnl37_post), regs, 3), -1);
}

/*
 * A kernel as the installed generations write it: the real preamble's
 * bytes, then a body that loads a constant into rbp, reserves `reserve`
 * bytes of stack of its own and calls capture_regs, then the postamble
 * that pops what the preamble pushed. Named in this process's perf map.
 */
struct gen_kernel {
	uint8_t *mem;
	jit_fn fn;
	size_t len;
	uint8_t *post; /* the first pop */
	struct preamble pre;
};

static void gen_build(struct gen_kernel *k, const uint8_t *code, size_t len, uint32_t reserve)
{
	uint64_t junk = 0x4242424242424242ull;
	uint8_t *p;
	size_t n = 0;
	FILE *f;

	cr_assert_eq(insn_preamble(code, len, &k->pre), 0);
	k->mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	cr_assert_neq(k->mem, MAP_FAILED);
	p = k->mem;
	memset(p, 0xcc, 4096);
	n += emit(p + n, code, k->pre.len);
	n += emit(p + n, (const uint8_t[]){ 0x48, 0xbd }, 2); /* movabs $junk, %rbp */
	memcpy(p + n, &junk, 8);
	n += 8;
	n += emit(p + n, (const uint8_t[]){ 0x48, 0x81, 0xec }, 3); /* sub $reserve, %rsp */
	memcpy(p + n, &reserve, 4);
	n += 4;
	n += emit_call_capture(p + n);
	n += emit(p + n, (const uint8_t[]){ 0x48, 0x81, 0xc4 }, 3); /* add $reserve, %rsp */
	memcpy(p + n, &reserve, 4);
	n += 4;
	k->post = p + n;
	for (int i = k->pre.npush - 1; i >= 0; i--) {
		if (k->pre.push[i] >= 8)
			p[n++] = 0x41;
		p[n++] = (uint8_t)(0x58 + (k->pre.push[i] & 7));
	}
	p[n++] = 0xc3;
	k->len = n;
	k->fn = (jit_fn)(uintptr_t)p;
	__builtin___clear_cache((char *)p, (char *)p + n);
	snprintf(map_path, sizeof(map_path), "/tmp/perf-%d.map", getpid());
	f = fopen(map_path, "w");
	cr_assert_not_null(f);
	fprintf(f, "%" PRIx64 " %zx jit_gen_kernel\n", (uint64_t)(uintptr_t)p, n);
	fclose(f);
}

static void gen_free(struct gen_kernel *k)
{
	unlink(map_path);
	munmap(k->mem, 4096);
}

/* The sample taken in the kernel's body, unwound whole: its caller and theirs, to _start. */
static void gen_whole(struct sample *smp, struct unwound *u)
{
	unwind_sample(smp, smp->stack, smp->size, u);
	log_chain(u);
	cr_assert_str_eq(u->names[0], "jit_gen_kernel");
	cr_assert_str_eq(u->names[1], "call_jit");
	cr_assert_str_eq(u->names[2], "jit_outer");
	assert_reaches_root(u);
}

/* A copy of smp as if sampled at ip with SP at sp (inside its copy), the registers otherwise the same. */
static struct sample *resampled(const struct sample *smp, uint64_t ip, uint64_t sp)
{
	struct sample *r = sample_new();
	uint64_t sp0 = smp->regs[PERF_REG_X86_SP];

	cr_assert(sp >= sp0 && sp - sp0 < smp->size);
	memcpy(r->regs, smp->regs, sizeof(r->regs));
	r->regs[PERF_REG_X86_IP] = ip;
	r->regs[PERF_REG_X86_SP] = sp;
	r->size = smp->size - (sp - sp0);
	memcpy(r->stack, smp->stack + (sp - sp0), r->size);
	return r;
}

static uint64_t word_at(const struct sample *smp, uint64_t addr)
{
	uint64_t v, sp0 = smp->regs[PERF_REG_X86_SP];

	cr_assert(addr >= sp0 && addr - sp0 + 8 <= smp->size);
	memcpy(&v, smp->stack + (addr - sp0), 8);
	return v;
}

/* Where the kernel's return address is in smp: the slot below its caller's SP. */
static uint64_t ret_slot(const struct sample *smp)
{
	uint64_t ips[64], sps[64];
	enum unwind_end end;
	int n = symbolizer__unwind_sps(sym, (uint32_t)getpid(), smp->regs, regs_mask, smp->stack,
				       smp->size, ips, sps, 64, &end);

	cr_assert_geq(n, 3);
	return sps[1] - 8;
}

/* The postamble's last pop: every register popped but the one pushed first. */
static uint64_t last_pop_ip(const struct gen_kernel *k)
{
	uint64_t ip = (uint64_t)(uintptr_t)k->post;

	for (int i = k->pre.npush - 1; i > 0; i--)
		ip += k->pre.push[i] >= 8 ? 2 : 1;
	return ip;
}

static void gen_case(const uint8_t *code, size_t len)
{
	struct sample *smp = sample_new(), *at;
	struct gen_kernel k;
	struct unwound u, v;
	uint64_t slot, start;
	int rbp_slot = -1;

	gen_build(&k, code, len, 0x200);
	jit_outer(k.fn, smp);
	gen_whole(smp, &u);
	cr_assert_eq(symbolizer__stats(sym)->jit_preambles_read, 1);
	cr_assert_eq(symbolizer__stats(sym)->jit_callers_recovered, 1);

	/* at the kernel's first instruction: the return address is at SP, the caller's rbp in rbp */
	slot = ret_slot(smp);
	for (int i = 0; i < k.pre.npush; i++)
		if (k.pre.push[i] == RBP)
			rbp_slot = i;
	cr_assert_geq(rbp_slot, 0);
	start = (uint64_t)(uintptr_t)k.mem;
	at = resampled(smp, start, slot);
	at->regs[PERF_REG_X86_BP] = word_at(smp, slot - 8 * (uint64_t)(rbp_slot + 1));
	unwind_sample(at, at->stack, at->size, &v);
	log_chain(&v);
	cr_assert_eq(v.n, u.n);
	cr_assert_str_eq(v.names[1], "call_jit");
	assert_reaches_root(&v);
	sample_free(at);

	/* at the last pop of the postamble: one register left on the stack */
	at = resampled(smp, last_pop_ip(&k), slot - 8);
	if (k.pre.push[0] != RBP)
		at->regs[PERF_REG_X86_BP] = word_at(smp, slot - 8 * (uint64_t)(rbp_slot + 1));
	unwind_sample(at, at->stack, at->size, &v);
	log_chain(&v);
	cr_assert_str_eq(v.names[1], "call_jit");
	assert_reaches_root(&v);
	sample_free(at);
	gen_free(&k);
	sample_free(smp);
}

Test(unwind, jit_caller_behind_a_onednn_2_6_preamble)
{
	gen_case(dnnl26_gemm, sizeof(dnnl26_gemm));
}

Test(unwind, jit_caller_behind_a_onednn_3_7_preamble)
{
	gen_case(dnnl37_conv, sizeof(dnnl37_conv));
}

/*
 * The kernel's own stack area holds a stale return address (one that
 * follows an indirect call, as a frame of an earlier call leaves it) whose
 * frame, as CFI reads it, returns to 0: libunwind stops there as it does at
 * a thread's entry. It is no entry: with the real return address beyond the
 * copy the stack is cut, and stays cut when unwound again (nothing wrong
 * was remembered); with it in the copy the stack is the real one.
 */
Test(unwind, stale_return_address_above_a_jit_frame_is_no_root)
{
	struct sample *smp = sample_new();
	struct gen_kernel k;
	struct unwound u, v;
	uint64_t ips[64], sps[64], sp0, x, slot;
	enum unwind_end end;
	int n;

	gen_build(&k, dnnl37_conv, sizeof(dnnl37_conv), 0x200);
	jit_outer(k.fn, smp);
	sp0 = smp->regs[PERF_REG_X86_SP];
	cr_assert_eq(symbolizer__load_proc_maps(sym, (uint32_t)getpid()), 0);
	n = symbolizer__unwind_sps(sym, (uint32_t)getpid(), smp->regs, regs_mask, smp->stack,
				   smp->size, ips, sps, 64, &end);
	cr_assert_geq(n, 3);
	cr_assert_eq(end, UNWIND_END_ROOT);
	slot = sps[1] - 8;
	/* the stale frame, in the kernel's 0x200 bytes: a return address into call_jit ... */
	x = sp0 + 0x100;
	cr_assert_lt(x + 0x40, slot - 48);
	memcpy(smp->stack + (x - sp0), &ips[1], 8);
	/* ... with rbp below it (either push order) pointing at a frame that returns to 0 */
	for (int i = 1; i <= 2; i++) {
		uint64_t b = x + 0x10;

		memcpy(smp->stack + (x - 8 * i - sp0), &b, 8);
	}
	memset(smp->stack + (x + 0x18 - sp0), 0, 8);

	for (int round = 0; round < 2; round++) {
		/* the copy ends below the real return address */
		unwind_sample(smp, smp->stack, slot - sp0, &u);
		log_chain(&u);
		cr_assert_neq(u.end, UNWIND_END_ROOT, "a stale frame taken for the root");
		cr_assert_eq(u.end, UNWIND_END_JIT_NO_CALLER);
		cr_assert_eq(u.n, 1);
	}
	unwind_sample(smp, smp->stack, smp->size, &v);
	log_chain(&v);
	cr_assert_str_eq(v.names[1], "call_jit");
	cr_assert_str_eq(v.names[2], "jit_outer");
	assert_reaches_root(&v);
	gen_free(&k);
	sample_free(smp);
}

/* A kernel whose code cannot be read (no perf map line): recovered as before, and said so. */
Test(unwind, jit_without_its_preamble_is_marked_guessed)
{
	struct sample *smp = sample_new();
	struct gen_kernel k;
	struct unwound u;

	gen_build(&k, dnnl26_gemm, sizeof(dnnl26_gemm), 0x200);
	unlink(map_path);
	jit_outer(k.fn, smp);
	unwind_sample(smp, smp->stack, smp->size, &u);
	log_chain(&u);
	cr_assert_eq(u.end, UNWIND_END_JIT_GUESSED);
	cr_assert_str_eq(u.names[1], "call_jit");
	cr_assert_eq(symbolizer__stats(sym)->jit_preambles_read, 0);
	gen_free(&k);
	sample_free(smp);
}

/* Name the kernel k in the perf map as `size` bytes long. */
static void gen_map_size(const struct gen_kernel *k, uint64_t size)
{
	FILE *f = fopen(map_path, "w");

	cr_assert_not_null(f);
	fprintf(f, "%" PRIx64 " %" PRIx64 " jit_gen_kernel\n", (uint64_t)(uintptr_t)k->mem, size);
	fclose(f);
}

/*
 * A sample of the kernel in *smp (built into k), taken in its epilogue after
 * all pops but one (rsp 8 below the return address), unwound into *v after
 * the kernel's code is gone (the trainer has exited: unwinding runs behind
 * the samples); the perf-map line, and what was read from the code while it
 * was there, stay. The body sample *smp was unwound whole first.
 */
static void epilogue_after_exit(struct gen_kernel *k, struct sample *smp, struct unwound *v)
{
	struct sample *at;
	struct unwound u;
	uint64_t slot;

	jit_outer(k->fn, smp);
	gen_whole(smp, &u);
	slot = ret_slot(smp);
	cr_assert_eq(munmap(k->mem, 4096), 0);
	at = resampled(smp, last_pop_ip(k), slot - 8);
	unwind_sample(at, at->stack, at->size, v);
	log_chain(v);
	sample_free(at);
}

/*
 * The kernel's code was copied when its preamble was read, and the copy
 * says how many pops are done at the sampled ip: the right caller,
 * complete. (Before the copy, an MLP run's last samples had 0.2-0.6% of its
 * stacks guessed.)
 */
Test(unwind, jit_epilogue_after_exit_read_from_the_copy)
{
	struct sample *smp = sample_new();
	struct gen_kernel k;
	struct unwound v;

	gen_build(&k, dnnl26_gemm, sizeof(dnnl26_gemm), 0x200);
	epilogue_after_exit(&k, smp, &v);
	cr_assert_str_eq(v.names[1], "call_jit");
	assert_reaches_root(&v);
	unlink(map_path);
	sample_free(smp);
}

/*
 * Kernels whose starts hash alike each keep their code. They had one slot
 * each of 1,024 by hash: the second one's perf-map line, read after the
 * first's, took the first's slot and freed its copy, and the first's
 * epilogue sample, unwound after the trainer exited, had no preamble
 * ("JIT preamble not read": Debian 13's CNN, 1.5% of a DDP run's stacks).
 */
Test(unwind, jit_kernels_whose_starts_hash_alike_keep_their_code)
{
	const size_t size = 1u << 20;
	struct sample *smp = sample_new(), *at;
	struct gen_kernel k;
	struct unwound u, v;
	uint64_t slot, other = 0, mine;
	uint8_t *buf = malloc(size);
	FILE *f;

	cr_assert_not_null(buf);
	gen_build(&k, dnnl26_gemm, sizeof(dnnl26_gemm), 0x200);
	mine = (uint64_t)(uintptr_t)k.mem;
	jit_outer(k.fn, smp);
	gen_whole(smp, &u); /* its preamble and code read */
	slot = ret_slot(smp);
	/* a second kernel, a copy of the first, where the start's hash agrees in its low 12 bits */
	for (uint64_t a = (uint64_t)(uintptr_t)buf; a + k.len < (uint64_t)(uintptr_t)buf + size;
	     a += 16)
		if (!((hash_u64(a) ^ hash_u64(mine)) & 0xfff)) {
			other = a;
			break;
		}
	cr_assert_neq(other, 0, "no start in 1 MiB hashes alike");
	memcpy((void *)(uintptr_t)other, k.mem, k.len);
	f = fopen(map_path, "a");
	cr_assert_not_null(f);
	fprintf(f, "%" PRIx64 " %zx jit_other_kernel\n", other, k.len);
	fclose(f);
	usleep(20000); /* the map is read again at most every few milliseconds */
	cr_assert_eq(symbolizer__jit_refresh(sym, (uint32_t)getpid()), 0);
	cr_assert_eq(munmap(k.mem, 4096), 0); /* the trainer exited */
	at = resampled(smp, last_pop_ip(&k), slot - 8);
	unwind_sample(at, at->stack, at->size, &v);
	log_chain(&v);
	cr_assert_str_eq(v.names[1], "call_jit");
	assert_reaches_root(&v);
	unlink(map_path);
	sample_free(at);
	sample_free(smp);
	free(buf);
}

/*
 * The same with a kernel too big to copy (its perf-map line is longer than
 * JIT_TEXT_MAX; its first bytes are read for the preamble). Whether the
 * sampled ip pops registers cannot be read once the code is gone: the pops
 * already done moved rsp past some pushes, and a search from above the
 * preamble's pushes skips the real return address and takes an outer one
 * (seen in a fresh Debian 13 root: 15 samples of the JIT fixture as
 * _start;__libc_start_main;...;kernel, counted complete). Never complete;
 * and what was guessed is not learned: the same kernel's body samples
 * unwound next are still right.
 */
Test(unwind, jit_epilogue_unread_is_never_complete)
{
	struct sample *smp = sample_new();
	struct gen_kernel k;
	struct unwound v;

	gen_build(&k, dnnl26_gemm, sizeof(dnnl26_gemm), 0x200);
	gen_map_size(&k, (uint64_t)JIT_TEXT_MAX + 4096);
	epilogue_after_exit(&k, smp, &v);
	cr_assert_neq(v.end, UNWIND_END_ROOT, "a guess counted complete: %s under %s", v.names[0],
		      v.n > 1 ? v.names[1] : "nothing");
	/* the slots an epilogue leaves the return address in are tried first: the right one */
	cr_assert_eq(v.end, UNWIND_END_JIT_GUESSED);
	cr_assert_str_eq(v.names[1], "call_jit");
	/* the body sample again: its caller as before, complete */
	unwind_sample(smp, smp->stack, smp->size, &v);
	log_chain(&v);
	cr_assert_str_eq(v.names[1], "call_jit");
	assert_reaches_root(&v);
	unlink(map_path);
	sample_free(smp);
}

/* ---- call instructions ---- */

struct insn_case {
	uint8_t bytes[8];
	size_t len;
	bool indirect, call;
};

static bool check(bool (*fn)(const uint8_t *, size_t), const uint8_t *b, size_t len)
{
	uint8_t buf[8];

	/* int3 before the instruction: no call ends in it */
	memset(buf, 0xcc, sizeof(buf));
	memcpy(buf + sizeof(buf) - len, b, len);
	return fn(buf, sizeof(buf));
}

Test(insn, call_forms)
{
	static const struct insn_case cases[] = {
		{ { 0xff, 0xd0 }, 2, true, true }, /* call *%rax */
		{ { 0x41, 0xff, 0xd3 }, 3, true, true }, /* call *%r11 */
		{ { 0xff, 0x10 }, 2, true, true }, /* call *(%rax) */
		{ { 0xff, 0x50, 0x08 }, 3, true, true }, /* call *8(%rax) */
		{ { 0x41, 0xff, 0x57, 0x10 }, 4, true, true }, /* call *16(%r15) */
		{ { 0xff, 0x90, 0x00, 0x01, 0x00, 0x00 }, 6, true, true }, /* call *0x100(%rax) */
		{ { 0xff, 0x14, 0x24 }, 3, true, true }, /* call *(%rsp) */
		{ { 0x41, 0xff, 0x54, 0x24, 0x08 }, 5, true, true }, /* call *8(%r12) */
		{ { 0xff, 0x14, 0xc5, 0, 0x10, 0, 0 }, 7, true, true }, /* call *0x1000(,%rax,8) */
		{ { 0x42, 0xff, 0x94, 0xc0, 0, 1, 0, 0 },
		  8,
		  true,
		  true }, /* call *0x100(%rax,%r8,8) */
		{ { 0xff, 0x15, 0x10, 0x20, 0, 0 }, 6, false, true }, /* call *x(%rip): GOT */
		{ { 0xe8, 0x10, 0x20, 0, 0 }, 5, false, true }, /* call rel32 */
		{ { 0xff, 0xe0 }, 2, false, false }, /* jmp *%rax */
		{ { 0xff, 0x20 }, 2, false, false }, /* jmp *(%rax) */
		{ { 0xff, 0x30 }, 2, false, false }, /* push (%rax) */
		{ { 0xff, 0x18 }, 2, false, false }, /* lcall *(%rax) */
		{ { 0x90, 0x90 }, 2, false, false },
		{ { 0x48, 0x89, 0xc7 }, 3, false, false }, /* mov %rax, %rdi */
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct insn_case *c = &cases[i];

		cr_expect_eq(check(insn_is_indirect_call, c->bytes, c->len), c->indirect,
			     "case %zu: indirect", i);
		cr_expect_eq(check(insn_is_call, c->bytes, c->len), c->call, "case %zu: call", i);
	}
	cr_assert_not(insn_is_call(NULL, 8));
	cr_assert_not(insn_is_indirect_call((const uint8_t[]){ 0xd0 }, 1));
}

/* ---- perf-map files ---- */

static char pm_dir[64];

static void pm_setup(void)
{
	strcpy(pm_dir, "/tmp/dlflame-pmtest-XXXXXX");
	cr_assert_not_null(mkdtemp(pm_dir));
}

static void pm_teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", pm_dir);
	if (system(cmd))
		cr_log_warn("cannot remove %s", pm_dir);
}

static char *pm_file(const char *name, const char *text)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", pm_dir, name);
	if (text) {
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fputs(text, f);
		fclose(f);
		chmod(path, 0644);
	}
	return path;
}

struct pm_fixture {
	struct perfmap pm;
	struct strpool pool;
	struct perfmap_stats st;
};

static void pmf_init(struct pm_fixture *f)
{
	memset(f, 0, sizeof(*f));
	strpool__init(&f->pool);
}

static void pmf_fini(struct pm_fixture *f)
{
	free(f->pm.ents);
	free(f->pm.segs);
	strpool__free(&f->pool);
}

static const char *name_at(const struct perfmap *pm, uint64_t addr)
{
	const struct perfmap_entry *e = perfmap__find(pm, addr);

	return e ? e->name : NULL;
}

Test(perfmap, malformed_lines_are_counted_and_skipped, .init = pm_setup, .fini = pm_teardown)
{
	struct pm_fixture f;
	const char *text = "1000 10 good_one\n"
			   "zz 10 not_hex\n"
			   "2000 nothing\n"
			   "3000 10\n"
			   "4000 0 zero_size\n"
			   "ffffffffffffff00 1000 wraps\n"
			   "12345678901234567 10 too_many_digits\n"
			   "5000 80000000 far_too_large\n"
			   "\n"
			   "0x6000 0x20 with 0x prefix and spaces\n"
			   "7000 10 crlf_name\r\n"
			   "8000 10 last_without_newline";

	pmf_init(&f);
	cr_assert_eq(perfmap__read(&f.pm, pm_file("m.map", text), getuid(), &f.pool, &f.st), 0);
	cr_assert_eq(f.st.entries, 3);
	cr_assert_eq(f.st.malformed_lines, 7);
	cr_assert_eq(f.st.reads, 1);
	cr_assert_str_eq(name_at(&f.pm, 0x1000), "good_one");
	cr_assert_str_eq(name_at(&f.pm, 0x100f), "good_one");
	cr_assert_null(name_at(&f.pm, 0x1010));
	cr_assert_str_eq(name_at(&f.pm, 0x601f), "with 0x prefix and spaces");
	cr_assert_str_eq(name_at(&f.pm, 0x7000), "crlf_name");
	/* a last line without its newline may be half-written: it waits for the next read */
	cr_assert_null(name_at(&f.pm, 0x8000));
	cr_assert_null(name_at(&f.pm, 0x2000));
	cr_assert_null(name_at(&f.pm, 0x5000));
	pmf_fini(&f);
}

Test(perfmap, overlaps_innermost_then_latest, .init = pm_setup, .fini = pm_teardown)
{
	struct pm_fixture f;
	/* a Winograd-style buffer with sub-ranges, a reused range, and names that repeat */
	const char *text = "10000 1000 wino_buffer\n"
			   "10100 100 wino_sub_a\n"
			   "10180 10 wino_tiny\n"
			   "10400 100 wino_sub_b\n"
			   "20000 100 old_kernel\n"
			   "20000 100 new_kernel\n"
			   "30000 40 jit_uni_kernel\n"
			   "30040 40 jit_uni_kernel\n";

	pmf_init(&f);
	cr_assert_eq(perfmap__read(&f.pm, pm_file("o.map", text), getuid(), &f.pool, &f.st), 0);
	cr_assert_str_eq(name_at(&f.pm, 0x10000), "wino_buffer");
	cr_assert_str_eq(name_at(&f.pm, 0x100ff), "wino_buffer");
	cr_assert_str_eq(name_at(&f.pm, 0x10100), "wino_sub_a");
	cr_assert_str_eq(name_at(&f.pm, 0x10185), "wino_tiny");
	cr_assert_str_eq(name_at(&f.pm, 0x10190), "wino_sub_a");
	cr_assert_str_eq(name_at(&f.pm, 0x10200), "wino_buffer");
	cr_assert_str_eq(name_at(&f.pm, 0x104ff), "wino_sub_b");
	cr_assert_str_eq(name_at(&f.pm, 0x10fff), "wino_buffer");
	cr_assert_null(name_at(&f.pm, 0x11000));
	cr_assert_str_eq(name_at(&f.pm, 0x20050), "new_kernel");
	cr_assert_str_eq(name_at(&f.pm, 0x3007f), "jit_uni_kernel");
	/* the same answers whatever the order of the lines */
	pmf_fini(&f);
	pmf_init(&f);
	text = "10400 100 wino_sub_b\n"
	       "10180 10 wino_tiny\n"
	       "10100 100 wino_sub_a\n"
	       "10000 1000 wino_buffer\n";
	cr_assert_eq(perfmap__read(&f.pm, pm_file("p.map", text), getuid(), &f.pool, &f.st), 0);
	cr_assert_str_eq(name_at(&f.pm, 0x10185), "wino_tiny");
	cr_assert_str_eq(name_at(&f.pm, 0x10190), "wino_sub_a");
	cr_assert_str_eq(name_at(&f.pm, 0x10200), "wino_buffer");
	pmf_fini(&f);
}

Test(perfmap, grows_and_is_read_from_where_it_stopped, .init = pm_setup, .fini = pm_teardown)
{
	struct pm_fixture f;
	char *path = pm_file("g.map", "1000 10 first\n2000 10 sec");
	FILE *fp;

	pmf_init(&f);
	cr_assert_eq(perfmap__read(&f.pm, path, getuid(), &f.pool, &f.st), 0);
	cr_assert_eq(f.st.entries, 1);
	fp = fopen(path, "a");
	fputs("ond\n3000 10 third\n", fp);
	fclose(fp);
	cr_assert_eq(perfmap__read(&f.pm, path, getuid(), &f.pool, &f.st), 0);
	cr_assert_eq(f.st.entries, 3, "the file was read again from the start");
	cr_assert_str_eq(name_at(&f.pm, 0x2000), "second");
	cr_assert_str_eq(name_at(&f.pm, 0x3000), "third");
	/* gone: what was read stays */
	unlink(path);
	cr_assert_eq(perfmap__read(&f.pm, path, getuid(), &f.pool, &f.st), -ENOENT);
	cr_assert_str_eq(name_at(&f.pm, 0x1000), "first");
	pmf_fini(&f);
}

/* Set path's modification time to `ago` seconds before now. */
static void pm_age(const char *path, time_t ago)
{
	struct timespec ts[2];

	cr_assert_eq(clock_gettime(CLOCK_REALTIME, &ts[0]), 0);
	ts[0].tv_sec -= ago;
	ts[1] = ts[0];
	cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0, "%s", strerror(errno));
}

static uint64_t realtime_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* fopen "w" over the file: truncated and written again, the same inode */
static void pm_rewrite(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	cr_assert_not_null(fp);
	fputs(text, fp);
	fclose(fp);
}

Test(perfmap, a_file_older_than_its_process_is_not_read, .init = pm_setup, .fini = pm_teardown)
{
	struct pm_fixture f;
	/* an earlier process's with the pid; then this one's, the same length (a DDP rank's case) */
	char *path =
		pm_file("s.map", "7f0000001000 40 old_kernel_a\n7f0000002000 40 old_kernel_b\n");
	uint64_t started;

	pmf_init(&f);
	pm_age(path, 3600);
	started = realtime_now() - 60 * 1000000000ull;
	cr_assert_eq(perfmap__read_since(&f.pm, path, getuid(), started, &f.pool, &f.st), -ESTALE);
	cr_assert_eq(f.st.stale_files, 1);
	cr_assert_eq(f.st.entries, 0);
	cr_assert_null(name_at(&f.pm, 0x7f0000001010), "an earlier process's kernel was named");
	/* still untouched: still not read */
	cr_assert_eq(perfmap__read_since(&f.pm, path, getuid(), started, &f.pool, &f.st), -ESTALE);
	cr_assert_eq(f.st.entries, 0);

	pm_rewrite(path, "7f0000009000 40 new_kernel_a\n7f000000a000 40 new_kernel_b\n");
	cr_assert_eq(perfmap__read_since(&f.pm, path, getuid(), started, &f.pool, &f.st), 0);
	cr_assert_eq(f.st.entries, 2, "read from where the stale file ended, not from its start");
	cr_assert_str_eq(name_at(&f.pm, 0x7f0000009010), "new_kernel_a");
	cr_assert_str_eq(name_at(&f.pm, 0x7f000000a010), "new_kernel_b");
	cr_assert_null(name_at(&f.pm, 0x7f0000001010));
	pmf_fini(&f);
}

Test(perfmap, what_a_process_appends_to_a_stale_file_is_read, .init = pm_setup, .fini = pm_teardown)
{
	struct pm_fixture f;
	char *path = pm_file("a.map", "7f0000001000 40 old_kernel\n");
	uint64_t started;
	FILE *fp;

	pmf_init(&f);
	pm_age(path, 3600);
	started = realtime_now() - 60 * 1000000000ull;
	cr_assert_eq(perfmap__read_since(&f.pm, path, getuid(), started, &f.pool, &f.st), -ESTALE);
	/* CPython's perf trampoline appends to the file it finds */
	fp = fopen(path, "a");
	fputs("7f0000005000 40 new_kernel\n", fp);
	fclose(fp);
	cr_assert_eq(perfmap__read_since(&f.pm, path, getuid(), started, &f.pool, &f.st), 0);
	cr_assert_eq(f.st.entries, 1);
	cr_assert_str_eq(name_at(&f.pm, 0x7f0000005010), "new_kernel");
	cr_assert_null(name_at(&f.pm, 0x7f0000001010), "the earlier process's line was read");
	pmf_fini(&f);
}

Test(perfmap, a_stale_file_written_over_with_its_own_bytes_is_read, .init = pm_setup,
     .fini = pm_teardown)
{
	struct pm_fixture f;
	const char *text = "7f0000001000 40 same_kernel\n";
	char *path = pm_file("w.map", text);
	uint64_t started;

	pmf_init(&f);
	pm_age(path, 3600);
	started = realtime_now() - 60 * 1000000000ull;
	cr_assert_eq(perfmap__read_since(&f.pm, path, getuid(), started, &f.pool, &f.st), -ESTALE);
	/* the same kernels at the same addresses (no ASLR): only the time says it is new */
	pm_rewrite(path, text);
	cr_assert_eq(perfmap__read_since(&f.pm, path, getuid(), started, &f.pool, &f.st), 0);
	cr_assert_str_eq(name_at(&f.pm, 0x7f0000001010), "same_kernel");
	pmf_fini(&f);
}

Test(perfmap, a_file_written_again_from_its_start_is_read_from_its_start, .init = pm_setup,
     .fini = pm_teardown)
{
	struct pm_fixture f;
	char *path = pm_file("r.map", "1000 10 first\n");

	pmf_init(&f);
	cr_assert_eq(perfmap__read(&f.pm, path, getuid(), &f.pool, &f.st), 0);
	/* read again unchanged: what it remembers of the file still holds */
	cr_assert_eq(perfmap__read(&f.pm, path, getuid(), &f.pool, &f.st), 0);
	/* longer than before: only its first bytes tell a rewrite from an append */
	pm_rewrite(path, "5000 10 rewritten\n6000 10 after_it\n");
	cr_assert_eq(perfmap__read(&f.pm, path, getuid(), &f.pool, &f.st), 0);
	cr_assert_str_eq(name_at(&f.pm, 0x5000), "rewritten");
	cr_assert_str_eq(name_at(&f.pm, 0x6000), "after_it");
	pmf_fini(&f);
}

Test(perfmap, overlong_lines_are_skipped, .init = pm_setup, .fini = pm_teardown)
{
	struct pm_fixture f;
	size_t len = 100000;
	char *text = malloc(len + 64);

	memset(text, 'a', len);
	memcpy(text, "1000 10 ", 8);
	strcpy(text + len, "\n2000 10 after\n");
	pmf_init(&f);
	cr_assert_eq(perfmap__read(&f.pm, pm_file("l.map", text), getuid(), &f.pool, &f.st), 0);
	cr_assert_eq(f.st.malformed_lines, 1);
	cr_assert_null(name_at(&f.pm, 0x1000));
	cr_assert_str_eq(name_at(&f.pm, 0x2000), "after");
	free(text);
	pmf_fini(&f);
}

static void expect_rejected(const char *path, uid_t uid)
{
	struct pm_fixture f;
	time_t t0 = time(NULL);

	pmf_init(&f);
	cr_assert_eq(perfmap__read(&f.pm, path, uid, &f.pool, &f.st), -EPERM, "%s", path);
	cr_assert_eq(f.st.rejected_files, 1);
	cr_assert_eq(f.st.entries, 0);
	cr_assert(f.pm.rejected);
	cr_assert_leq(time(NULL) - t0, 2, "reading %s took too long", path);
	pmf_fini(&f);
}

Test(perfmap, hostile_files_are_rejected, .init = pm_setup, .fini = pm_teardown)
{
	char target[128], path[128];
	struct stat st;
	int fd;

	/* a FIFO with no writer would block a plain open() or read() forever */
	snprintf(path, sizeof(path), "%s/fifo.map", pm_dir);
	cr_assert_eq(mkfifo(path, 0644), 0);
	expect_rejected(path, getuid());

	snprintf(target, sizeof(target), "%s", pm_file("real.map", "1000 10 x\n"));
	snprintf(path, sizeof(path), "%s/link.map", pm_dir);
	cr_assert_eq(symlink(target, path), 0);
	expect_rejected(path, getuid());
	snprintf(path, sizeof(path), "%s/zero.map", pm_dir);
	cr_assert_eq(symlink("/dev/zero", path), 0);
	expect_rejected(path, getuid());
	if (!stat("/dev/null", &st) && S_ISCHR(st.st_mode))
		expect_rejected("/dev/null", getuid());

	snprintf(path, sizeof(path), "%s", pm_file("ww.map", "1000 10 x\n"));
	cr_assert_eq(chmod(path, 0666), 0);
	expect_rejected(path, getuid());

	/* larger than the cap: never read (sparse, so the test stays cheap) */
	snprintf(path, sizeof(path), "%s", pm_file("huge.map", "1000 10 x\n"));
	fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)PERFMAP_MAX_FILE + 1), 0);
	close(fd);
	expect_rejected(path, getuid());

	/* owned by someone who is neither the target's user nor root */
	snprintf(path, sizeof(path), "%s", pm_file("other.map", "1000 10 x\n"));
	if (getuid() == 0) {
		cr_assert_eq(chown(path, 12345, 12345), 0);
		expect_rejected(path, 0 + 4242);
	} else {
		expect_rejected(path, getuid() + 1);
	}
}

Test(perfmap, root_owned_file_is_accepted, .init = pm_setup, .fini = pm_teardown)
{
	struct pm_fixture f;
	char *path = pm_file("r.map", "1000 10 x\n");
	struct stat st;

	cr_assert_eq(stat(path, &st), 0);
	pmf_init(&f);
	/* the file's owner is us; a target of another user accepts it only if we are root */
	cr_assert_eq(perfmap__read(&f.pm, path, st.st_uid == 0 ? 4242 : st.st_uid, &f.pool, &f.st),
		     0);
	cr_assert_eq(f.st.entries, 1);
	pmf_fini(&f);
}

/*
 * Our own pid's perf map (its path in path[0..cap)) with one entry at base,
 * named name, and an anonymous executable mapping around it.
 */
static void own_jit(char *path, size_t cap, uint64_t base, const char *name)
{
	uint32_t pid = (uint32_t)getpid();
	FILE *fp;

	snprintf(path, cap, "/tmp/perf-%u.map", pid);
	fp = fopen(path, "w");
	cr_assert_not_null(fp);
	fprintf(fp, "%" PRIx64 " 100 %s\n", base, name);
	fclose(fp);
	cr_assert_eq(symbolizer__mmap(sym, pid, base, 0x10000, 0, PROT_READ | PROT_EXEC, "//anon"),
		     0);
}

/* Through the public API: an anonymous executable mapping of our own pid. */
Test(perfmap, resolve_names_jit_frames_and_keeps_them, .init = setup, .fini = teardown)
{
	uint32_t pid = (uint32_t)getpid();
	uint64_t base = 0x7e0000000000ull;
	struct sym_frame f;
	char path[64];
	FILE *fp;

	own_jit(path, sizeof(path), base, "jit_avx512_common_gemm_f32_xbyak_gemm");
	symbolizer__resolve(sym, pid, base + 0x10, false, false, &f);
	cr_assert_str_eq(f.name, "jit_avx512_common_gemm_f32_xbyak_gemm");
	cr_assert_str_eq(f.module, "[JIT]");
	cr_assert_eq(f.kind, FRAME_JIT);
	/* anonymous executable memory the map does not cover */
	symbolizer__resolve(sym, pid, base + 0x1000, false, false, &f);
	cr_assert_str_eq(f.name, "[JIT]");
	cr_assert_eq(f.kind, FRAME_JIT);

	/* a kernel appended later is found after the rate limit */
	fp = fopen(path, "a");
	fprintf(fp, "%" PRIx64 " 100 jit_uni_eltwise_kernel\n", base + 0x2000);
	fclose(fp);
	usleep(2 * PERFMAP_REREAD_MS * 1000);
	symbolizer__resolve(sym, pid, base + 0x2010, false, false, &f);
	cr_assert_str_eq(f.name, "jit_uni_eltwise_kernel");

	/* deleted: still named */
	unlink(path);
	usleep(2 * PERFMAP_REREAD_MS * 1000);
	symbolizer__resolve(sym, pid, base + 0x20, false, false, &f);
	cr_assert_str_eq(f.name, "jit_avx512_common_gemm_f32_xbyak_gemm");
	cr_assert_eq(symbolizer__stats(sym)->perfmap.entries, 2);
	cr_assert_eq(symbolizer__stats(sym)->perfmap.rejected_files, 0);
}

Test(perfmap, unsafe_map_of_a_process_is_ignored, .init = setup, .fini = teardown)
{
	uint32_t pid = (uint32_t)getpid();
	uint64_t base = 0x7e0000000000ull;
	struct sym_frame f;
	char path[64];

	own_jit(path, sizeof(path), base, "injected");
	chmod(path, 0666);
	symbolizer__resolve(sym, pid, base + 0x10, false, false, &f);
	unlink(path);
	cr_assert_str_eq(f.name, "[JIT]");
	cr_assert_eq(symbolizer__stats(sym)->perfmap.rejected_files, 1);
}

/* A file written before this test process started: an earlier process's with our pid. */
Test(perfmap, a_process_is_not_named_from_an_earlier_processs_file, .init = setup, .fini = teardown)
{
	uint32_t pid = (uint32_t)getpid();
	uint64_t base = 0x7e0000000000ull, started;
	struct sym_frame f;
	char path[64];

	cr_assert_eq(proc_start_realtime(pid, &started), 0);
	cr_assert_leq(started, realtime_now());
	cr_assert_gt(started + 3600 * 1000000000ull, realtime_now(), "started over an hour ago?");
	own_jit(path, sizeof(path), base, "an_earlier_processs_kernel");
	pm_age(path, 3600 * 24);
	symbolizer__resolve(sym, pid, base + 0x10, false, false, &f);
	cr_assert_str_eq(f.name, "[JIT]");
	cr_assert_eq(symbolizer__stats(sym)->perfmap.stale_files, 1);
	/* this process writes its own over it */
	pm_rewrite(path, "7e0000000000 100 this_processs_kernel\n");
	usleep(2 * PERFMAP_REREAD_MS * 1000);
	symbolizer__resolve(sym, pid, base + 0x10, false, false, &f);
	unlink(path);
	cr_assert_str_eq(f.name, "this_processs_kernel");
}

/* A counter of this thread's rt_sigprocmask system calls (the tracepoint's), or -1. */
static int sigprocmask_counter(void)
{
	static const char *const ids[] = {
		"/sys/kernel/tracing/events/syscalls/sys_enter_rt_sigprocmask/id",
		"/sys/kernel/debug/tracing/events/syscalls/sys_enter_rt_sigprocmask/id",
	};
	struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_TRACEPOINT };
	unsigned long long id = 0;

	for (size_t i = 0; i < ARRAY_SIZE(ids) && !id; i++) {
		FILE *f = fopen(ids[i], "re");

		if (f) {
			if (fscanf(f, "%llu", &id) != 1)
				id = 0;
			fclose(f);
		}
	}
	cr_assert_neq(id, 0,
		      "no syscalls:sys_enter_rt_sigprocmask tracepoint (tracefs not mounted?)");
	a.config = id;
	a.disabled = 1;
	return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static uint64_t counted(int fd, void (*fn)(void *), void *arg)
{
	uint64_t n = 0;

	cr_assert_eq(ioctl(fd, PERF_EVENT_IOC_RESET, 0), 0);
	cr_assert_eq(ioctl(fd, PERF_EVENT_IOC_ENABLE, 0), 0);
	fn(arg);
	cr_assert_eq(ioctl(fd, PERF_EVENT_IOC_DISABLE, 0), 0);
	cr_assert_eq(read(fd, &n, sizeof(n)), (ssize_t)sizeof(n));
	return n;
}

struct unwind_job {
	const struct sample *smp;
	struct unwound *u;
};

static void do_unwind(void *arg)
{
	struct unwind_job *j = arg;

	j->u->n =
		symbolizer__unwind(sym, (uint32_t)getpid(), j->smp->regs, regs_mask, j->smp->stack,
				   j->smp->size, j->u->ips, ARRAY_SIZE(j->u->ips), &j->u->end);
}

static void do_setmask(void *arg)
{
	sigset_t old;

	(void)arg;
	sigprocmask(SIG_SETMASK, NULL, &old);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/*
 * libunwind's global cache lock blocks every signal around each step, two
 * system calls a step (symbolize/sigmask.c): a whole unwind makes none,
 * where the same calls outside it still reach the kernel.
 */
Test(unwind, steps_make_no_sigprocmask_calls)
{
	struct sample *smp = sample_new();
	struct unwound u = { .end = UNWIND_END_ROOT + 100 };
	struct unwind_job j = { smp, &u };
	int fd = sigprocmask_counter();

	cr_assert_geq(fd, 0, "perf_event_open of the tracepoint: %s", strerror(errno));
	cr_assert_eq(counted(fd, do_setmask, NULL), 2, "the counter counts this thread's calls");
	uw_a(smp);
	cr_assert_eq(symbolizer__load_proc_maps(sym, (uint32_t)getpid()), 0);
	/*
	 * twice: the first fills libunwind's cache (a miss masks four times
	 * more) and reads the thread's own mask once, for all its unwinds to
	 * come; the second steps from the cache
	 */
	for (int round = 0; round < 2; round++) {
		uint64_t n = counted(fd, do_unwind, &j);

		cr_assert_leq(n, round ? 0 : 1, "round %d: %" PRIu64 " calls", round, n);
		cr_assert_geq(u.n, 4, "round %d: %d frames", round, u.n);
		cr_assert_eq(u.end, UNWIND_END_ROOT, "round %d", round);
	}
	close(fd);
	sample_free(smp);
}

/*
 * While quiet, only SIG_SETMASK is answered without the kernel (with the
 * thread's own mask); SIG_BLOCK and SIG_UNBLOCK (a handler's) still act,
 * and when not quiet SIG_SETMASK acts too.
 */
Test(unwind, quiet_mask_answers_setmask_only)
{
	sigset_t full, old, now, usr1;

	sigfillset(&full);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	cr_assert_eq(pthread_sigmask(SIG_SETMASK, NULL, &old), 0);
	cr_assert_eq(sigismember(&old, SIGUSR1), 0);
	unwind_quiet = 1;
	cr_assert_eq(sigprocmask(SIG_SETMASK, &full, &now), 0);
	for (int sig = 1; sig < SIGRTMAX; sig++)
		cr_assert_eq(sigismember(&now, sig), sigismember(&old, sig),
			     "the thread's own mask answered: signal %d", sig);
	cr_assert_eq(pthread_sigmask(SIG_SETMASK, &full, NULL), 0);
	cr_assert_eq(sigprocmask(SIG_BLOCK, &usr1, NULL), 0);
	unwind_quiet = 0;
	cr_assert_eq(pthread_sigmask(SIG_SETMASK, NULL, &now), 0);
	cr_assert_eq(sigismember(&now, SIGUSR1), 1, "SIG_BLOCK acted while quiet");
	cr_assert_eq(sigismember(&now, SIGTERM), 0, "SIG_SETMASK did not");
	cr_assert_eq(sigprocmask(SIG_SETMASK, &old, NULL), 0);
	cr_assert_eq(pthread_sigmask(SIG_SETMASK, NULL, &now), 0);
	cr_assert_eq(sigismember(&now, SIGUSR1), 0, "SIG_SETMASK acts when not quiet");
}

/* The search-table entry for vaddr as a plain binary search finds it: the last start at or below. */
static int64_t fde_index_searched(struct elf_file *f, uint64_t vaddr)
{
	uint64_t lo = 0, hi = f->fde_count;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		uint8_t e[4];

		cr_assert_eq(elf_file__read(f, f->table_vaddr + mid * 8, e, sizeof(e)), 0);
		if (f->hdr_vaddr + (uint64_t)(int64_t)(int32_t)get_le32(e) <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int64_t)lo - 1;
}

/*
 * libc's table, every entry's first byte, the byte before it and one
 * inside, in an order that leaves each 64-byte slot remembering another
 * entry than the next question's: a remembered entry is used only when it
 * is the one the search finds.
 */
Test(unwind, fde_index_is_the_searchs_entry)
{
	Dl_info info;
	struct elf_file *f = elf_file__new();
	uint64_t asked = 0;

	cr_assert(dladdr((void *)&printf, &info) && info.dli_fname);
	cr_assert_not_null(f);
	f->fd = open(info.dli_fname, O_RDONLY | O_CLOEXEC);
	f->own_fd = true;
	cr_assert_geq(f->fd, 0, "%s", info.dli_fname);
	cr_assert_eq(elf_file__parse(f), 0);
	cr_assert_gt(f->fde_count, 1000, "libc's search table: %" PRIu64 " entries", f->fde_count);
	for (int pass = 0; pass < 2; pass++) {
		for (uint64_t j = 0; j < f->fde_count; j++) {
			uint8_t e[4];
			uint64_t start, at[3];

			cr_assert_eq(elf_file__read(f, f->table_vaddr + j * 8, e, sizeof(e)), 0);
			start = f->hdr_vaddr + (uint64_t)(int64_t)(int32_t)get_le32(e);
			at[0] = start - 1;
			at[1] = start + 3;
			at[2] = start;
			for (int k = 0; k < 3; k++) {
				uint64_t a = pass ? at[2 - k] : at[k];

				cr_assert_eq(elf_file__fde_index(f, a), fde_index_searched(f, a),
					     "code at %#" PRIx64, a);
				asked++;
			}
		}
	}
	cr_assert_eq(elf_file__fde_index(f, 0), -1);
	cr_assert_eq(elf_file__fde_index(f, UINT64_MAX), (int64_t)f->fde_count - 1);
	cr_log_info("%" PRIu64 " questions, %" PRIu64 " entries", asked, f->fde_count);
	elf_file__free(f);
}
