/* SPDX-License-Identifier: MIT */
/*
 * The length of one x86-64 instruction, from its bytes alone: prefixes,
 * REX, VEX and EVEX, the one-, two- and three-byte opcode maps, ModRM,
 * SIB, displacements and immediates. For linear decodes of code that holds
 * no data: the eval function's parts (python/evalparts.c) and the first
 * instructions of JIT kernels (symbolize/insn.c).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* One-byte opcodes that take a ModRM byte (64-bit mode). */
static bool modrm1(uint8_t op)
{
	if (op < 0x40)
		return (op & 7) < 4;
	switch (op) {
	case 0x62:
	case 0x63:
	case 0x69:
	case 0x6b:
	case 0xc0:
	case 0xc1:
	case 0xc6:
	case 0xc7:
	case 0xd0:
	case 0xd1:
	case 0xd2:
	case 0xd3:
	case 0xf6:
	case 0xf7:
	case 0xfe:
	case 0xff:
		return true;
	default:
		return (op >= 0x80 && op <= 0x8f) || (op >= 0xd8 && op <= 0xdf);
	}
}

/* Two-byte (0F xx) opcodes without a ModRM byte. */
static bool no_modrm_0f(uint8_t op)
{
	return (op >= 0x05 && op <= 0x09) || op == 0x0b || (op >= 0x30 && op <= 0x37) ||
	       op == 0x77 || (op >= 0x80 && op <= 0x8f) || op == 0xa0 || op == 0xa1 || op == 0xa2 ||
	       op == 0xa8 || op == 0xa9 || op == 0xaa || (op >= 0xc8 && op <= 0xcf);
}

/* Immediate bytes of a two-byte (0F xx) opcode. */
static size_t imm_0f(uint8_t op)
{
	switch (op) {
	case 0x70:
	case 0x71:
	case 0x72:
	case 0x73:
	case 0xa4:
	case 0xac:
	case 0xba:
	case 0xc2:
	case 0xc4:
	case 0xc5:
	case 0xc6:
		return 1;
	default:
		return 0;
	}
}

/* Bytes of a ModRM byte at b and what follows it (SIB, displacement); 0 if short. */
static size_t modrm_len(const uint8_t *b, size_t len)
{
	unsigned mod, rm;
	size_t n = 1;

	if (!len)
		return 0;
	mod = b[0] >> 6;
	rm = b[0] & 7;
	if (mod != 3 && rm == 4) {
		if (len < 2)
			return 0;
		n++;
		if (mod == 0 && (b[1] & 7) == 5)
			n += 4;
	}
	if (mod == 0 && rm == 5)
		n += 4;
	else if (mod == 1)
		n += 1;
	else if (mod == 2)
		n += 4;
	return n <= len ? n : 0;
}

static int64_t sx(const uint8_t *b, size_t n)
{
	if (n == 1)
		return (int8_t)b[0];
	return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
			 (uint32_t)b[3] << 24);
}

size_t x86_insn_len(const uint8_t *b, size_t len, int64_t *target, bool *jump)
{
	size_t i = 0, m, imm = 0;
	bool opsize = false, addr32 = false, rexw = false;
	uint8_t op;

	*jump = false;
	*target = 0;
	for (;; i++) {
		if (i >= len || i >= 14)
			return 0;
		if (b[i] == 0x66)
			opsize = true;
		else if (b[i] == 0x67)
			addr32 = true;
		else if (!(b[i] == 0xf0 || b[i] == 0xf2 || b[i] == 0xf3 || b[i] == 0x2e ||
			   b[i] == 0x36 || b[i] == 0x3e || b[i] == 0x26 || b[i] == 0x64 ||
			   b[i] == 0x65))
			break;
	}
	if ((b[i] & 0xf0) == 0x40) {
		rexw = b[i] & 8;
		if (++i >= len)
			return 0;
	}
	op = b[i++];
	if (op == 0xc4 || op == 0xc5 || op == 0x62) {
		/* VEX (3 or 2 bytes) or EVEX (4): then the opcode and a ModRM byte */
		size_t pfx = op == 0xc5 ? 1 : op == 0xc4 ? 2 : 3;
		unsigned map;

		/* the prefix bytes, the opcode and the ModRM byte must all be there */
		if (i + pfx + 1 >= len)
			return 0;
		map = op == 0xc5 ? 1 : b[i] & (op == 0x62 ? 7 : 0x1f);
		if (map < 1 || map > 3)
			return 0;
		i += pfx;
		op = b[i++];
		if (map == 1 && op == 0x77)
			return i; /* vzeroupper, vzeroall */
		m = modrm_len(b + i, len - i);
		if (!m)
			return 0;
		i += m;
		i += map == 3 || (map == 1 && imm_0f(op)) ? 1 : 0;
		return i <= len ? i : 0;
	}
	if (op == 0x0f) {
		if (i >= len)
			return 0;
		op = b[i++];
		if (op == 0x38 || op == 0x3a) {
			if (i >= len)
				return 0;
			i++;
			m = modrm_len(b + i, len - i);
			if (!m)
				return 0;
			i += m + (op == 0x3a ? 1 : 0);
			return i <= len ? i : 0;
		}
		if (op >= 0x80 && op <= 0x8f) {
			if (i + 4 > len)
				return 0;
			*jump = true;
			*target = sx(b + i, 4);
			return i + 4;
		}
		if (op == 0x0f || op == 0x04 || op == 0x0a || op == 0x0c || op == 0x24 ||
		    op == 0x25 || op == 0x26 || op == 0x27 || op == 0x36 || op == 0x39 ||
		    (op >= 0x3b && op <= 0x3f) || op == 0xff)
			return 0; /* not emitted by gcc for x86-64 */
		if (!no_modrm_0f(op)) {
			m = modrm_len(b + i, len - i);
			if (!m)
				return 0;
			i += m;
		}
		i += imm_0f(op);
		return i <= len ? i : 0;
	}
	switch (op) {
	/* not valid in 64-bit mode */
	case 0x06:
	case 0x07:
	case 0x0e:
	case 0x16:
	case 0x17:
	case 0x1e:
	case 0x1f:
	case 0x27:
	case 0x2f:
	case 0x37:
	case 0x3f:
	case 0x60:
	case 0x61:
	case 0x82:
	case 0x9a:
	case 0xce:
	case 0xd4:
	case 0xd5:
	case 0xd6:
	case 0xea:
		return 0;
	case 0x70 ... 0x7f:
	case 0xeb:
	case 0xe0 ... 0xe3:
		if (i + 1 > len)
			return 0;
		*jump = op != 0xe0 && op != 0xe1 && op != 0xe2; /* loops are no way out */
		*target = sx(b + i, 1);
		return i + 1;
	case 0xe9:
		if (i + 4 > len)
			return 0;
		*jump = true;
		*target = sx(b + i, 4);
		return i + 4;
	case 0xe8:
		return i + 4 <= len ? i + 4 : 0;
	case 0xa0 ... 0xa3:
		imm = addr32 ? 4 : 8;
		break;
	case 0xb8 ... 0xbf:
		imm = rexw ? 8 : opsize ? 2 : 4;
		break;
	case 0xb0 ... 0xb7:
	case 0x6a:
	case 0xa8:
	case 0xcd:
	case 0xe4 ... 0xe7:
	case 0x04:
	case 0x0c:
	case 0x14:
	case 0x1c:
	case 0x24:
	case 0x2c:
	case 0x34:
	case 0x3c:
		imm = 1;
		break;
	case 0x05:
	case 0x0d:
	case 0x15:
	case 0x1d:
	case 0x25:
	case 0x2d:
	case 0x35:
	case 0x3d:
	case 0x68:
	case 0xa9:
		imm = opsize ? 2 : 4;
		break;
	case 0xc2:
	case 0xca:
		imm = 2;
		break;
	case 0xc8:
		imm = 3;
		break;
	default:
		break;
	}
	if (modrm1(op)) {
		uint8_t reg;

		m = modrm_len(b + i, len - i);
		if (!m)
			return 0;
		reg = b[i] >> 3 & 7;
		i += m;
		if (op == 0x80 || op == 0x83 || op == 0x6b || op == 0xc0 || op == 0xc1 ||
		    op == 0xc6 || (op == 0xf6 && reg < 2))
			imm = 1;
		else if (op == 0x81 || op == 0x69 || op == 0xc7 || (op == 0xf7 && reg < 2))
			imm = opsize ? 2 : 4;
	}
	i += imm;
	return i <= len ? i : 0;
}
