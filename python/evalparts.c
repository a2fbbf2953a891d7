/* SPDX-License-Identifier: MIT */
/*
 * Where the eval loop runs. gcc may split _PyEval_EvalFrameDefault: the
 * exported symbol then covers only a short hot part that sets up and
 * jumps into a part placed elsewhere (.text.unlikely, an FDE of its own,
 * no symbol in a stripped file), where the loop runs. Debian's 3.14:
 * 1,184 bytes named, the loop in an unnamed 84 KB part.
 *
 * The parts are found from the code itself: the hot part is decoded
 * instruction by instruction from its start (gcc puts no data in .text,
 * so a linear decode is exact, and it must end exactly at the symbol's
 * end); each direct jump that leaves it and lands inside another FDE's
 * range, past that range's start, is a jump into one of its parts. A jump
 * to the start of a range is a tail call and names nothing.
 */
#include <errno.h>
#include <string.h>

#include "python/internal.h"

/* ---- instruction lengths ---------------------------------------------------- */

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

size_t py_insn_len(const uint8_t *b, size_t len, int64_t *target, bool *jump)
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

/* ---- FDE ranges --------------------------------------------------------------- */

#define DW_EH_PE_omit 0xff

/* An encoded pointer at p (format from enc's low bits), relative to at; false if unsupported. */
static bool enc_read(const uint8_t *p, size_t avail, uint8_t enc, uint64_t at, bool apply,
		     uint64_t *out, size_t *used)
{
	uint64_t v = 0;
	size_t n;

	switch (enc & 0x0f) {
	case 0x00:
	case 0x04:
	case 0x0c:
		n = 8;
		break;
	case 0x03:
	case 0x0b:
		n = 4;
		break;
	case 0x02:
	case 0x0a:
		n = 2;
		break;
	default:
		return false;
	}
	if (n > avail || (enc & 0x80))
		return false;
	memcpy(&v, p, n);
	if ((enc & 0x0f) == 0x0b)
		v = (uint64_t)(int64_t)(int32_t)v;
	else if ((enc & 0x0f) == 0x0a)
		v = (uint64_t)(int64_t)(int16_t)v;
	if (apply && (enc & 0x70) == 0x10)
		v += at;
	else if (apply && (enc & 0x70) != 0)
		return false;
	*out = v;
	*used = n;
	return true;
}

static bool uleb(const uint8_t *p, size_t len, size_t *i, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned shift = 0; *i < len && shift < 64; shift += 7) {
		uint8_t b = p[(*i)++];

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

/* The FDE pointer encoding of the CIE at eh offset off; DW_EH_PE_omit if not read. */
static uint8_t cie_enc(const struct py_ehframe *ef, size_t off)
{
	const uint8_t *p = ef->eh;
	uint32_t len, id;
	size_t i, end;
	uint64_t v, auglen;
	const char *aug;

	if (off > ef->eh_size || ef->eh_size - off < 9)
		return DW_EH_PE_omit;
	memcpy(&len, p + off, 4);
	memcpy(&id, p + off + 4, 4);
	if (len == 0xffffffffu || id != 0 || len > ef->eh_size - off - 4)
		return DW_EH_PE_omit;
	end = off + 4 + len;
	i = off + 9; /* after the version */
	aug = (const char *)p + i;
	while (i < end && p[i])
		i++;
	if (i++ >= end || aug[0] != 'z')
		return aug[0] ? DW_EH_PE_omit : 0x00; /* no augmentation: absolute pointers */
	if (!uleb(p, end, &i, &v) || !uleb(p, end, &i, &v))
		return DW_EH_PE_omit; /* code and data alignment */
	if (p[off + 8] == 1)
		i++; /* the return address column: one byte in version 1 */
	else if (!uleb(p, end, &i, &v))
		return DW_EH_PE_omit;
	if (!uleb(p, end, &i, &auglen) || auglen > end - i)
		return DW_EH_PE_omit;
	for (const char *a = aug + 1; *a && i < end; a++) {
		size_t used;

		if (*a == 'R')
			return p[i];
		if (*a == 'L') {
			i++;
		} else if (*a == 'P') {
			if (!enc_read(p + i + 1, end - i - 1, p[i] & 0x7f, 0, false, &v, &used))
				return DW_EH_PE_omit;
			i += 1 + used;
		} else if (*a != 'S' && *a != 'B') {
			return DW_EH_PE_omit;
		}
	}
	return DW_EH_PE_omit;
}

/* The FDE range [lo, hi) holding pc, from the search table; false if none. */
static bool fde_range(const struct py_ehframe *ef, uint64_t pc, uint64_t *lo, uint64_t *hi)
{
	const uint8_t *h = ef->hdr;
	uint64_t count, v, fde, begin, range;
	size_t used, i, off, lo_i = 0, hi_i;
	uint32_t len, cie_ptr;
	int32_t s;
	uint8_t enc;

	if (!h || !ef->eh || ef->hdr_size < 12 || h[0] != 1 || h[2] != 0x03 || h[3] != 0x3b)
		return false;
	if (!enc_read(h + 4, ef->hdr_size - 4, h[1], ef->hdr_vaddr + 4, true, &v, &used))
		return false;
	i = 4 + used;
	if (i + 4 > ef->hdr_size)
		return false;
	memcpy(&len, h + i, 4);
	count = len;
	i += 4;
	if (count > (ef->hdr_size - i) / 8 || !count)
		return false;
	/* the last entry whose initial location is at or below pc */
	hi_i = (size_t)count;
	while (hi_i - lo_i > 1) {
		size_t mid = lo_i + (hi_i - lo_i) / 2;

		memcpy(&s, h + i + mid * 8, 4);
		if (ef->hdr_vaddr + (uint64_t)(int64_t)s <= pc)
			lo_i = mid;
		else
			hi_i = mid;
	}
	memcpy(&s, h + i + lo_i * 8 + 4, 4);
	fde = ef->hdr_vaddr + (uint64_t)(int64_t)s;
	if (fde < ef->eh_vaddr || fde - ef->eh_vaddr > ef->eh_size - 8)
		return false;
	off = (size_t)(fde - ef->eh_vaddr);
	memcpy(&len, ef->eh + off, 4);
	memcpy(&cie_ptr, ef->eh + off + 4, 4);
	if (len == 0xffffffffu || len < 8 || len > ef->eh_size - off - 4 || !cie_ptr ||
	    cie_ptr > off + 4)
		return false;
	enc = cie_enc(ef, off + 4 - cie_ptr);
	if (enc == DW_EH_PE_omit ||
	    !enc_read(ef->eh + off + 8, len - 4, enc, fde + 8, true, &begin, &used) ||
	    !enc_read(ef->eh + off + 8 + used, len - 4 - used, enc & 0x0f, 0, false, &range, &used))
		return false;
	if (pc < begin || pc - begin >= range)
		return false;
	*lo = begin;
	*hi = begin + range;
	return true;
}

int py_cold_parts(const uint8_t *code, size_t len, uint64_t vaddr, const struct py_ehframe *ef,
		  uint64_t *lo, uint64_t *hi, size_t max)
{
	size_t at = 0, n = 0;

	while (at < len) {
		int64_t rel;
		bool jump;
		size_t k = py_insn_len(code + at, len - at, &rel, &jump);
		uint64_t to, flo, fhi;
		bool known = false;

		if (!k)
			return -ENOEXEC;
		at += k;
		if (!jump)
			continue;
		to = vaddr + at + (uint64_t)rel;
		if (to >= vaddr && to < vaddr + len)
			continue;
		if (!fde_range(ef, to, &flo, &fhi) || to == flo || (flo <= vaddr && vaddr < fhi))
			continue;
		for (size_t j = 0; j < n; j++)
			known |= lo[j] == flo;
		if (!known && n < max) {
			lo[n] = flo;
			hi[n++] = fhi;
		}
	}
	return at == len ? (int)n : -ENOEXEC;
}
