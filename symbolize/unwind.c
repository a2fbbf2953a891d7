/* SPDX-License-Identifier: MIT */
/* Placeholder until the DWARF unwinder lands: callers fall back to the callchain. */
#include <errno.h>

#include "symbolize/symbolize.h"

int symbolizer__unwind(struct symbolizer *s, uint32_t pid, const uint64_t *regs,
		       uint64_t regs_mask, const uint8_t *stack, size_t stack_size, uint64_t *ips,
		       size_t max, enum unwind_end *end)
{
	return -ENOSYS;
}
