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
#include "util/util.h"

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

/* ---- the stack moves at the start of JIT code ---- */

#define REG_RSP 4
#define REG_RBP 5

static void preamble_step(struct preamble *p, size_t at)
{
	p->end[p->nsteps] = (uint16_t)at;
	p->depth[p->nsteps] = p->depth_now;
	p->npushed[p->nsteps] = p->npush;
	p->nsteps++;
}

/*
 * Decode code[0..len), the first bytes of a piece of JIT code, for as long
 * as the instructions are ones a prologue is made of: endbr64, vzeroupper,
 * push r64, a copy of rsp into a register (`mov rbp, rsp`), sub/add of an
 * immediate to rsp, a store to [rsp + disp]. The first other instruction
 * ends it, and so does one that moves rsp by an amount not in the code (an
 * `and rsp` alignment, a move into rsp).
 */
static void saved_sp_scan(const uint8_t *code, size_t len, struct preamble *p);

int insn_preamble(const uint8_t *code, size_t len, struct preamble *p)
{
	size_t i = 0;

	memset(p, 0, sizeof(*p));
	p->fp_at = -1;
	if (!code)
		return -1;
	while (i < len && p->nsteps < PREAMBLE_MAX_STEPS) {
		const uint8_t *b = code + i;
		size_t left = len - i;
		unsigned rex = 0, op, mod, reg, rm;

		if (left >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa) {
			i += 4; /* endbr64 */
			preamble_step(p, i);
			continue;
		}
		if (left >= 3 && b[0] == 0xc5 && b[1] == 0xf8 && b[2] == 0x77) {
			i += 3; /* vzeroupper */
			preamble_step(p, i);
			continue;
		}
		if ((b[0] & 0xf0) == 0x40) {
			rex = b[0];
			b++;
			left--;
		}
		if (!left)
			break;
		op = b[0];
		if (op >= 0x50 && op <= 0x57 && !(rex & 8)) {
			/* push r64 (REX.B: r8-r15) */
			unsigned r = (op - 0x50) | (rex & 1) << 3;

			if (r == REG_RSP || p->npush >= PREAMBLE_MAX_PUSHES)
				break;
			p->push[p->npush++] = (uint8_t)r;
			p->depth_now += 8;
			i += (size_t)(b - (code + i)) + 1;
			preamble_step(p, i);
			continue;
		}
		/* the rest are 64-bit forms with a ModRM byte */
		if (!(rex & 8) || left < 2)
			break;
		mod = b[1] >> 6;
		reg = ((b[1] >> 3) & 7) | (rex & 4) << 1;
		rm = (b[1] & 7) | (rex & 1) << 3;
		if ((op == 0x89 || op == 0x8b) && mod == 3) {
			/* mov r64, r64: 89 /r writes rm, 8b /r writes reg */
			unsigned dst = op == 0x89 ? rm : reg, src = op == 0x89 ? reg : rm;

			if (dst == REG_RSP)
				break;
			if (dst == REG_RBP)
				p->fp_at = src == REG_RSP ? (int8_t)p->npush : -1;
			if (dst == REG_RBP && src == REG_RSP)
				p->fp_depth = p->depth_now;
			i += (size_t)(b - (code + i)) + 2;
			preamble_step(p, i);
			continue;
		}
		if ((op == 0x83 || op == 0x81) && mod == 3 && rm == REG_RSP &&
		    (reg & 7) != 4 /* and: alignment */) {
			/* sub/add rsp, imm8 (sign-extended) or imm32 */
			size_t n = op == 0x83 ? 1 : 4;
			int64_t imm;

			if (left < 2 + n || ((reg & 7) != 5 && (reg & 7) != 0))
				break;
			if (op == 0x83) {
				imm = (int8_t)b[2];
			} else {
				int32_t v;

				memcpy(&v, b + 2, 4);
				imm = v;
			}
			if ((reg & 7) == 0)
				imm = -imm; /* add */
			if (imm < 0 ? (uint64_t)-imm > p->depth_now
				    : p->depth_now + (uint64_t)imm > PREAMBLE_MAX_DEPTH)
				break;
			p->depth_now = (uint32_t)((int64_t)p->depth_now + imm);
			i += (size_t)(b - (code + i)) + 2 + n;
			preamble_step(p, i);
			continue;
		}
		if (op == 0x89 && (mod == 1 || mod == 2) && (b[1] & 7) == 4 && left >= 3 &&
		    (b[2] & 7) == REG_RSP && ((b[2] >> 3) & 7) == 4 && !(rex & 3)) {
			/* mov [rsp + disp8/32], r64: a store, rsp stays */
			size_t n = mod == 1 ? 1 : 4;

			if (left < 3 + n)
				break;
			i += (size_t)(b - (code + i)) + 3 + n;
			preamble_step(p, i);
			continue;
		}
		break;
	}
	p->len = (uint16_t)(p->nsteps ? p->end[p->nsteps - 1] : 0);
	saved_sp_scan(code, len, p);
	return 0;
}

/* ---- where a kernel keeps the rsp it had before moving it ---- */

#define SP_SCAN_MAX 64 /* instructions */

/* General registers an instruction without a ModRM byte writes (bit per register), or ~0 unknown. */
static uint32_t implicit_writes(uint8_t op, unsigned rex)
{
	switch (op) {
	case 0x04:
	case 0x05:
	case 0x0c:
	case 0x0d:
	case 0x14:
	case 0x15:
	case 0x1c:
	case 0x1d:
	case 0x24:
	case 0x25:
	case 0x2c:
	case 0x2d:
	case 0x34:
	case 0x35:
	case 0x98:
	case 0xa8:
	case 0xa9:
		return 1u << 0; /* rax (test with an immediate writes none: kept conservative) */
	case 0x99:
		return 1u << 2 | 1u; /* cqo: rdx */
	case 0x3c:
	case 0x3d:
		return 0; /* cmp */
	case 0x50 ... 0x57:
		return 0;
	case 0x58 ... 0x5f:
		return 1u << ((op - 0x58) | (rex & 1) << 3);
	case 0x90 ... 0x97:
		return 1u | 1u << ((op - 0x90) | (rex & 1) << 3);
	case 0xb0 ... 0xbf:
		return 1u << ((op & 7) | (rex & 1) << 3);
	case 0x70 ... 0x7f:
	case 0xe9:
	case 0xeb:
	case 0x0f:
		return 0;
	default:
		return ~0u;
	}
}

/*
 * Whether an instruction with a ModRM byte (one-byte or 0F map opcode op)
 * leaves general register r alone: true only where it is known to, as an
 * operand it reads, or where ModRM.reg is an opcode extension and r is not
 * the r/m register of a register form (mod 3).
 */
static bool reg_only_read(unsigned op)
{
	switch (op) {
	case 0x00:
	case 0x01:
	case 0x08:
	case 0x09:
	case 0x10:
	case 0x11:
	case 0x18:
	case 0x19:
	case 0x20:
	case 0x21:
	case 0x28:
	case 0x29:
	case 0x30:
	case 0x31:
	case 0x38:
	case 0x39:
	case 0x3a:
	case 0x3b:
	case 0x84:
	case 0x85:
	case 0x88:
	case 0x89:
	/* groups: ModRM.reg extends the opcode */
	case 0x80:
	case 0x81:
	case 0x83:
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
	case 0x8f:
		return true;
	default:
		return false;
	}
}

static bool rm_only_read(unsigned op, unsigned reg)
{
	switch (op) {
	case 0x02:
	case 0x03:
	case 0x0a:
	case 0x0b:
	case 0x12:
	case 0x13:
	case 0x1a:
	case 0x1b:
	case 0x22:
	case 0x23:
	case 0x2a:
	case 0x2b:
	case 0x32:
	case 0x33:
	case 0x38:
	case 0x39:
	case 0x3a:
	case 0x3b:
	case 0x84:
	case 0x85:
	case 0x8a:
	case 0x8b:
	case 0x8d:
	case 0x63:
	case 0x69:
	case 0x6b:
	case 0x1af:
	case 0x1b6:
	case 0x1b7:
	case 0x1be:
	case 0x1bf:
	case 0x140 ... 0x14f:
		return true;
	case 0x80:
	case 0x81:
	case 0x83:
		return (reg & 7) == 7; /* cmp */
	case 0xf6:
	case 0xf7:
		return (reg & 7) < 2; /* test */
	case 0xff:
		return (reg & 7) == 6; /* push */
	default:
		return false;
	}
}

/* May the instruction write general register r (as its ModRM reg, or as its r/m register)? */
static bool may_write(unsigned op, unsigned mod, unsigned reg, unsigned rm, unsigned r)
{
	return (reg == r && !reg_only_read(op)) || (mod == 3 && rm == r && !rm_only_read(op, reg));
}

/*
 * Decode past the prologue for where the code keeps its entry rsp once it
 * moves rsp by an amount the code does not hold (aligns it, or loads it
 * from an argument: oneDNN's f32 GEMM kernels run on a buffer below the
 * stack or on a heap workspace): a copy of rsp into a register while rsp is
 * still known (`mov rbp, rsp` after the pushes), rsp then moved, then a
 * store of that register to [rsp + disp]. Sets p->sp_slot (disp) and
 * p->sp_depth (how far below the entry SP the copied rsp was); -1 when no
 * such store comes before the first instruction the scan cannot follow
 * (a call or a return, an instruction it cannot decode, a write to the
 * copy it cannot rule out). What it finds is a candidate: the unwinder
 * checks the word there against the copy, as every recovered caller.
 */
static void saved_sp_scan(const uint8_t *code, size_t len, struct preamble *p)
{
	int copy = -1; /* the register holding rsp, as it was copy_depth below the entry SP */
	uint32_t depth = 0, copy_depth = 0;
	bool moved = false;
	size_t i = 0;

	p->sp_slot = -1;
	for (unsigned k = 0; k < SP_SCAN_MAX && i < len; k++) {
		const uint8_t *b = code + i;
		int64_t target;
		bool jump;
		size_t n = x86_insn_len(b, len - i, &target, &jump), at = 0;
		unsigned rex = 0, op, mod = 0, reg = 0, rm = 0;
		bool has_modrm, vex = false;

		if (!n)
			return;
		i += n;
		if (b[0] == 0xf3 && n == 4 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa)
			continue; /* endbr64 */
		if (b[0] == 0xc4 || b[0] == 0xc5 || b[0] == 0x62) {
			/* VEX/EVEX: the ModRM byte after the prefix and the opcode; R from the prefix */
			size_t pfx = b[0] == 0xc5 ? 1 : b[0] == 0xc4 ? 2 : 3;

			if (1 + pfx + 1 >= n)
				return;
			vex = true;
			rex = (b[1] & 0x80) ? 0 : 4;
			at = 1 + pfx + 1;
			op = b[1 + pfx];
		} else {
			if ((b[0] & 0xf0) == 0x40)
				rex = b[at++];
			if (at >= n)
				return;
			op = b[at++];
			if (b[0] == 0x66 || b[0] == 0xf2 || b[0] == 0xf3 || b[0] == 0xf0)
				return; /* a prefixed form: not followed */
			if (op == 0x0f) {
				if (at >= n)
					return;
				op = 0x100 | b[at++];
				if (op == 0x10f || op == 0x138 || op == 0x13a)
					return;
			}
		}
		if (op == 0xc3 || op == 0xc2 || op == 0xe8 || op == 0xc9 || op == 0xcc ||
		    (op == 0xff && at < n && ((b[at] >> 3 & 7) == 2 || (b[at] >> 3 & 7) == 4)))
			return; /* ret, call, leave, int3, an indirect call or jump */
		has_modrm = vex || (op >= 0x100 ? !(op >= 0x180 && op <= 0x18f) && op != 0x131 &&
							  op != 0x1a2
						: implicit_writes((uint8_t)op, rex) == ~0u);
		if (!has_modrm) {
			uint32_t w = op >= 0x100 ? (op == 0x131 || op == 0x1a2 ? 0xf : 0)
						 : implicit_writes((uint8_t)op, rex);

			if ((op & 0xf8) == 0x50 && op < 0x100 && !moved)
				depth += 8; /* push r64 */
			if ((op & 0xf8) == 0x58 && op < 0x100) {
				if (w & 1u << REG_RSP)
					return;
				if (!moved && depth < 8)
					return;
				if (!moved)
					depth -= 8; /* pop r64 */
			}
			if (copy >= 0 && (w & 1u << copy))
				copy = -1;
			continue;
		}
		if (at >= n)
			return;
		mod = b[at] >> 6;
		reg = (b[at] >> 3 & 7) | (rex & 4) << 1;
		rm = (b[at] & 7) | (rex & 1) << 3;
		if (vex) {
			/* a general register written through VEX (BMI): its ModRM reg */
			if (copy >= 0 && reg == (unsigned)copy)
				copy = -1;
			continue;
		}
		/* mov r64, rsp: the copy, while rsp is known */
		if ((rex & 8) && mod == 3 &&
		    ((op == 0x89 && reg == REG_RSP) || (op == 0x8b && rm == REG_RSP))) {
			unsigned dst = op == 0x89 ? rm : reg;

			if (dst == REG_RSP)
				continue;
			copy = !moved ? (int)dst : -1;
			copy_depth = depth;
			continue;
		}
		/* mov [rsp + disp], r64 with the copy, after rsp moved: found */
		if ((rex & 8) && op == 0x89 && (mod == 1 || mod == 2) && (b[at] & 7) == 4 &&
		    at + 1 < n && (b[at + 1] & 7) == REG_RSP && (b[at + 1] >> 3 & 7) == 4 &&
		    !(rex & 2) && copy >= 0 && reg == (unsigned)copy && moved) {
			int32_t disp;

			if (at + (mod == 1 ? 3 : 6) > n)
				return;
			if (mod == 1)
				disp = (int8_t)b[at + 2];
			else
				memcpy(&disp, b + at + 2, 4);
			if (disp < 0 || disp % 8)
				return;
			p->sp_slot = disp;
			p->sp_depth = copy_depth;
			return;
		}
		/* add/sub rsp, imm: rsp still known */
		if (mod == 3 && rm == REG_RSP && (op == 0x81 || op == 0x83) &&
		    ((reg & 7) == 5 || (reg & 7) == 0)) {
			int64_t imm;

			if (at + (op == 0x83 ? 2 : 5) > n)
				return;
			if (op == 0x83) {
				imm = (int8_t)b[at + 1];
			} else {
				int32_t v;

				memcpy(&v, b + at + 1, 4);
				imm = v;
			}
			if ((reg & 7) == 0)
				imm = -imm;
			if (!moved && (imm >= 0 || (uint64_t)-imm <= depth) &&
			    depth + imm <= PREAMBLE_MAX_DEPTH)
				depth = (uint32_t)((int64_t)depth + imm);
			else
				moved = true;
			continue;
		}
		/* anything else that may write rsp moves it by an amount not in the code */
		if (may_write(op, mod, reg, rm, REG_RSP))
			moved = true;
		/* one that may write the copy ends it */
		if (copy >= 0 && may_write(op, mod, reg, rm, (unsigned)copy))
			copy = -1;
	}
}

/*
 * Where rsp is at code offset off, if off is the start or the end of a
 * decoded step: how far below the entry SP, and how many pushes are done.
 */
bool preamble_at(const struct preamble *p, uint64_t off, uint32_t *depth, uint8_t *npush)
{
	*depth = 0;
	*npush = 0;
	if (off == 0)
		return true;
	for (unsigned k = 0; k < p->nsteps && p->end[k] <= off; k++) {
		if (p->end[k] == off) {
			*depth = p->depth[k];
			*npush = p->npushed[k];
			return true;
		}
	}
	return false;
}

/*
 * Does the code at ip leave its function with pops and a return (pop r64,
 * vzeroupper) to a ret? The registers popped, in order, into
 * regs; how many, or -1 when the code is not such an epilogue.
 */
int insn_epilogue(const uint8_t *code, size_t len, uint8_t *regs, size_t max)
{
	size_t i = 0;
	int n = 0;

	while (i < len) {
		const uint8_t *b = code + i;
		unsigned rex = 0;

		if (b[0] == 0xc3)
			return n;
		if (len - i >= 3 && b[0] == 0xc5 && b[1] == 0xf8 && b[2] == 0x77) {
			i += 3;
			continue;
		}
		if ((b[0] & 0xf0) == 0x40 && len - i >= 2) {
			rex = b[0];
			b++;
		}
		if (b[0] >= 0x58 && b[0] <= 0x5f && !(rex & 8)) {
			unsigned r = (b[0] - 0x58) | (rex & 1) << 3;

			if (r == REG_RSP || (size_t)n >= max)
				return -1;
			regs[n++] = (uint8_t)r;
			i += (size_t)(b - (code + i)) + 1;
			continue;
		}
		return -1;
	}
	return -1;
}
