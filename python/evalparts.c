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
#include "util/util.h"

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
		size_t k = x86_insn_len(code + at, len - at, &rel, &jump);
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
