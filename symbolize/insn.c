/* SPDX-License-Identifier: MIT */
/*
 * Is there a call instruction just before a return address? x86-64 code
 * cannot be decoded backwards, so every length a call can have is tried:
 * the bytes [ra - L, ra) must decode as one call instruction of exactly L
 * bytes. A stale word on the stack that happens to point into code rarely
 * passes this, and almost never together with the caller's CFI check.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolize/internal.h"

enum call_form { CALL_NONE, CALL_INDIRECT, CALL_RIPREL, CALL_DIRECT };

/* Decode b[0..len) as exactly one `call`; which form it is. */
static enum call_form decode_call(const uint8_t *b, size_t len)
{
	size_t i = 0;
	unsigned mod, reg, rm;

	if (len == 5 && b[0] == 0xe8)
		return CALL_DIRECT;
	if (i < len && (b[i] & 0xf0) == 0x40) /* REX: r8-r15 as base, index or register */
		i++;
	if (i + 2 > len || b[i] != 0xff)
		return CALL_NONE;
	i++;
	mod = b[i] >> 6;
	reg = (b[i] >> 3) & 7;
	rm = b[i] & 7;
	i++;
	if (reg != 2) /* FF /2 is call r/m64; /3 far call, /4 jmp, /6 push */
		return CALL_NONE;
	if (mod == 3)
		return i == len ? CALL_INDIRECT : CALL_NONE;
	if (mod == 0 && rm == 5) /* [rip + disp32] */
		return i + 4 == len ? CALL_RIPREL : CALL_NONE;
	if (rm == 4) {
		if (i >= len)
			return CALL_NONE;
		if (mod == 0 && (b[i] & 7) == 5) /* SIB without base: disp32 */
			i += 4;
		i++;
	}
	if (mod == 1)
		i += 1;
	else if (mod == 2)
		i += 4;
	return i == len ? CALL_INDIRECT : CALL_NONE;
}

/* The longest call: REX, FF, ModRM, SIB, disp32. */
#define CALL_MAX 8

static bool ends_in(const uint8_t *code, size_t len, bool indirect_only)
{
	for (size_t l = 2; l <= CALL_MAX && l <= len; l++) {
		enum call_form f = decode_call(code + len - l, l);

		if (f == CALL_INDIRECT || (!indirect_only && f != CALL_NONE))
			return true;
	}
	return false;
}

bool insn_is_indirect_call(const uint8_t *code, size_t len)
{
	return code && ends_in(code, len, true);
}

bool insn_is_call(const uint8_t *code, size_t len)
{
	return code && ends_in(code, len, false);
}
