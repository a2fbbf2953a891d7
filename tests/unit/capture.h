/* SPDX-License-Identifier: MIT */
/*
 * Capturing this thread's own registers and stack as perf would, for unit
 * tests of the unwinder and of the stack sources: capture_regs() stores the
 * registers (IP = its return address, SP = the caller's SP) and copies the
 * stack from there while the frames are live. Call find_stack_top() first.
 * One test binary includes this once.
 */
#ifndef DLFLAME_TESTS_CAPTURE_H
#define DLFLAME_TESTS_CAPTURE_H

#include <criterion/criterion.h>

#include <asm/perf_regs.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define COPY_MAX (64u << 10)

struct sample {
	uint64_t regs[PERF_REG_X86_64_MAX]; /* offset 0: capture_regs() writes here */
	uint8_t *stack;
	size_t size;
	size_t cap;
};

static const uint64_t regs_mask = (1ull << PERF_REG_X86_AX) | (1ull << PERF_REG_X86_BX) |
				  (1ull << PERF_REG_X86_CX) | (1ull << PERF_REG_X86_DX) |
				  (1ull << PERF_REG_X86_SI) | (1ull << PERF_REG_X86_DI) |
				  (1ull << PERF_REG_X86_BP) | (1ull << PERF_REG_X86_SP) |
				  (1ull << PERF_REG_X86_IP) | (0xffull << PERF_REG_X86_R8);

static uint64_t stack_top; /* end of the mapping that holds this thread's stack */

void capture_regs(struct sample *smp);
void copy_stack_c(struct sample *smp);

/*
 * The registers at the moment capture_regs returns: IP = the return
 * address, SP = the caller's SP; then the stack copy, made by a tail call so
 * that no frame of ours lies above SP.
 */
__asm__(".text\n"
	".globl capture_regs\n"
	".type capture_regs, @function\n"
	"capture_regs:\n"
	".cfi_startproc\n"
	"	movq %rax, 0(%rdi)\n"
	"	movq %rbx, 8(%rdi)\n"
	"	movq %rcx, 16(%rdi)\n"
	"	movq %rdx, 24(%rdi)\n"
	"	movq %rsi, 32(%rdi)\n"
	"	movq %rdi, 40(%rdi)\n"
	"	movq %rbp, 48(%rdi)\n"
	"	leaq 8(%rsp), %rax\n"
	"	movq %rax, 56(%rdi)\n"
	"	movq (%rsp), %rax\n"
	"	movq %rax, 64(%rdi)\n"
	"	movq %r8, 128(%rdi)\n"
	"	movq %r9, 136(%rdi)\n"
	"	movq %r10, 144(%rdi)\n"
	"	movq %r11, 152(%rdi)\n"
	"	movq %r12, 160(%rdi)\n"
	"	movq %r13, 168(%rdi)\n"
	"	movq %r14, 176(%rdi)\n"
	"	movq %r15, 184(%rdi)\n"
	"	jmp copy_stack_c\n"
	".cfi_endproc\n"
	".size capture_regs, .-capture_regs\n");

/* Reads the stack as perf does, redzones included: not for AddressSanitizer's eyes. */
__attribute__((no_sanitize_address)) void copy_stack_c(struct sample *smp)
{
	uint64_t sp = smp->regs[PERF_REG_X86_SP];
	const volatile uint8_t *src = (const volatile uint8_t *)(uintptr_t)sp;
	size_t n = smp->cap;

	if (stack_top > sp && stack_top - sp < n)
		n = (size_t)(stack_top - sp);
	for (size_t i = 0; i < n; i++)
		smp->stack[i] = src[i];
	smp->size = n;
}

static void find_stack_top(void)
{
	char line[512];
	uint64_t here = (uint64_t)(uintptr_t)&line, lo, hi;
	FILE *f = fopen("/proc/self/maps", "r");

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) == 2 && lo <= here && here < hi)
			stack_top = hi;
	}
	fclose(f);
	cr_assert_neq(stack_top, 0);
}

static struct sample *sample_new(void)
{
	struct sample *smp = calloc(1, sizeof(*smp));

	cr_assert_not_null(smp);
	smp->cap = COPY_MAX;
	smp->stack = malloc(COPY_MAX);
	cr_assert_not_null(smp->stack);
	return smp;
}

static void sample_free(struct sample *smp)
{
	free(smp->stack);
	free(smp);
}

#endif
