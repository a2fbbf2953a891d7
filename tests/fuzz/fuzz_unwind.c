/* SPDX-License-Identifier: MIT */
/*
 * The DWARF unwinder (symbolize/unwind.c, stackwalk.c, jitcaller.c): the
 * input is up to four samples of one thread, each the registers perf
 * records (IP, SP, BP: 3 x u64), a u16 length and that many bytes of stack
 * copy, unwound in turn by one symbolizer (so later samples meet the known
 * stacks and JIT call sites of earlier ones).
 *
 * The process is fixed and machine-independent: a pid that cannot exist
 * (above the kernel's PID_MAX_LIMIT, so every /proc lookup fails), the
 * fixture unwind.elf (tests/fixtures/chain.c, committed so that the corpus
 * stays valid) mapped as the loader maps it at FUZZ_BASE, the base of a PIE
 * without ASLR, and an anonymous executable mapping that counts as JIT code.
 * The seeds are real samples of unwind.elf run without ASLR (seeds.sh).
 */
#include <asm/perf_regs.h>
#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symbolize/symbolize.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_PID 0x7ffffff0u
#define FUZZ_BASE 0x555555554000ull
#define FUZZ_JIT 0x7ffff7ff0000ull
#define FUZZ_JIT_LEN 0x8000ull
#define MAX_SAMPLES 4
#define MAX_FRAMES 128
#define MASK ((1ull << PERF_REG_X86_IP) | (1ull << PERF_REG_X86_SP) | (1ull << PERF_REG_X86_BP))

static Elf64_Phdr loads[8];
static size_t nloads;

/* The PT_LOADs of unwind.elf, once; false when it cannot be read. */
static bool read_loads(void)
{
	static int state; /* 0 not read, 1 read, -1 failed */
	Elf64_Ehdr eh;
	int fd;

	if (state)
		return state > 0;
	state = -1;
	fd = open(FUZZ_UNWIND_ELF, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) && eh.e_phentsize == sizeof(Elf64_Phdr)) {
		for (unsigned i = 0; i < eh.e_phnum && nloads < 8; i++) {
			Elf64_Phdr ph;

			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
			    sizeof(ph))
				break;
			if (ph.p_type == PT_LOAD)
				loads[nloads++] = ph;
		}
	}
	close(fd);
	if (nloads)
		state = 1;
	return state > 0;
}

static int map_process(struct symbolizer *s)
{
	for (size_t i = 0; i < nloads; i++) {
		const Elf64_Phdr *ph = &loads[i];
		uint64_t start = ph->p_vaddr & ~0xfffull;
		uint64_t end = (ph->p_vaddr + ph->p_memsz + 0xfff) & ~0xfffull;
		uint32_t prot = (ph->p_flags & PF_R ? PROT_READ : 0) |
				(ph->p_flags & PF_W ? PROT_WRITE : 0) |
				(ph->p_flags & PF_X ? PROT_EXEC : 0);

		if (symbolizer__mmap(s, FUZZ_PID, FUZZ_BASE + start, end - start,
				     ph->p_offset & ~0xfffull, prot, FUZZ_UNWIND_ELF))
			return -1;
	}
	return symbolizer__mmap(s, FUZZ_PID, FUZZ_JIT, FUZZ_JIT_LEN, 0, PROT_READ | PROT_EXEC,
				"//anon");
}

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { .p = data, .size = size };
	uint64_t regs[PERF_REG_X86_64_MAX] = { 0 }, ips[MAX_FRAMES], sps[MAX_FRAMES], sum = 0;
	struct symbolizer *s;

	if (!read_loads())
		return 0;
	s = symbolizer__new();
	if (!s)
		return 0;
	if (map_process(s))
		goto out;
	for (int i = 0; i < MAX_SAMPLES && in.pos < size; i++) {
		enum unwind_end end;
		uint8_t *stack;
		size_t len;
		int n;

		regs[PERF_REG_X86_IP] = fuzz_u64(&in, 8);
		regs[PERF_REG_X86_SP] = fuzz_u64(&in, 8);
		regs[PERF_REG_X86_BP] = fuzz_u64(&in, 8);
		len = (size_t)fuzz_u64(&in, 2);
		if (in.pos > size)
			break;
		if (len > size - in.pos)
			len = size - in.pos;
		/* a copy of its own size: a read past the stack copy is a sanitizer report */
		stack = malloc(len ? len : 1);
		if (!stack)
			break;
		memcpy(stack, data + in.pos, len);
		in.pos += len;
		n = symbolizer__unwind_sps(s, FUZZ_PID, regs, MASK, stack, len, ips, sps,
					   MAX_FRAMES, &end);
		free(stack);
		for (int j = 0; j < n; j++) {
			sum += ips[j] ^ sps[j];
			if (j)
				sum += symbolizer__outermost(s, FUZZ_PID, ips[j]);
		}
		sum += (uint64_t)end;
	}
out:
	sink = sum;
	symbolizer__free(s);
	return 0;
}
