/* SPDX-License-Identifier: MIT */
/*
 * Field offsets per CPython version.
 *
 * 3.11 and 3.12 have no description of themselves in memory: their
 * offsets are fixed per minor version (checked with offsetof against
 * Debian's 3.11.2 and pyenv's 3.11.7 and 3.12.1 headers).
 *
 * From 3.13 on, every offset the reader needs is read from the
 * interpreter's own _Py_DebugOffsets, the first field of _PyRuntime:
 * a cookie, PY_VERSION_HEX, whether the build is free-threaded, then one
 * group of uint64_t words per struct, each group opening with the struct's
 * size. What is fixed per minor version is only where each word lies in
 * that block (3.14 added groups and fields in the middle); a version after
 * the newest one described here is read with the newest description, and
 * only if every check below holds for it. Every offset must lie, with the
 * field's width, inside its struct's stated size.
 *
 * What the block does not say is derived: the compact unicode header
 * (the ASCII header, then utf8_length and utf8: two words), that 3.14's
 * f_executable is a tagged _PyStackRef (its low two bits are flags), and
 * which frame owner marks an eval call's entry frame (3 on 3.12-3.14).
 */
#include <errno.h>
#include <string.h>

#include "python/internal.h"

static const struct py_layout py311 = {
	.rt_interp_head = 40,
	.is_next = 0,
	.is_threads_head = 16,
	.ts_next = 8,
	.ts_interp = PY_NO_FIELD,
	.ts_native_tid = 160,
	.ts_cframe = 56,
	.ts_current_frame = PY_NO_FIELD,
	.cf_current = 8, /* after uint8_t use_tracing */
	.cf_previous = 16,
	.fr_code = 32,
	.fr_previous = 48,
	.fr_instr = 56,
	.fr_is_entry = 68,
	.fr_owner = 69,
	.co_firstlineno = 72,
	.co_filename = 112,
	.co_qualname = 128,
	.co_linetable = 136,
	.co_code_adaptive = 184,
	.ob_type = 8,
	.ty_name = 24,
	.bytes_size = 16,
	.bytes_data = 32,
	.uni_length = 16,
	.uni_state = 32,
	.uni_ascii_size = 48, /* with wchar_t *wstr */
	.uni_compact_size = 72,
	.frame_bytes = 72,
	.tstate_bytes = 256,
	.stub_owner = PY_NO_FIELD,
};

static const struct py_layout py312 = {
	.rt_interp_head = 40,
	.is_next = 0,
	.is_threads_head = 72,
	.ts_next = 8,
	.ts_interp = PY_NO_FIELD,
	.ts_native_tid = 144,
	.ts_cframe = 56,
	.ts_current_frame = PY_NO_FIELD,
	.cf_current = 0,
	.cf_previous = 8,
	.fr_code = 0,
	.fr_previous = 8,
	.fr_instr = 56,
	.fr_is_entry = PY_NO_FIELD,
	.fr_owner = 70,
	.co_firstlineno = 68,
	.co_filename = 112,
	.co_qualname = 128,
	.co_linetable = 136,
	.co_code_adaptive = 192,
	.ob_type = 8,
	.ty_name = 24,
	.bytes_size = 16,
	.bytes_data = 32,
	.uni_length = 16,
	.uni_state = 32,
	.uni_ascii_size = 40,
	.uni_compact_size = 56,
	.frame_bytes = 72,
	.tstate_bytes = 256,
	.stub_owner = 3, /* FRAME_OWNED_BY_CSTACK */
};

/* The words of _Py_DebugOffsets the reader uses. */
enum dbg_word {
	D_VERSION,
	D_FREE_THREADED,
	D_RT_SIZE,
	D_RT_INTERP_HEAD,
	D_IS_SIZE,
	D_IS_NEXT,
	D_IS_THREADS_HEAD,
	D_TS_SIZE,
	D_TS_NEXT,
	D_TS_INTERP,
	D_TS_CURRENT_FRAME,
	D_TS_NATIVE_TID,
	D_FR_SIZE,
	D_FR_PREVIOUS,
	D_FR_EXECUTABLE,
	D_FR_INSTR,
	D_FR_OWNER,
	D_CO_SIZE,
	D_CO_FILENAME,
	D_CO_QUALNAME,
	D_CO_LINETABLE,
	D_CO_FIRSTLINENO,
	D_CO_CODE_ADAPTIVE,
	D_OB_SIZE,
	D_OB_TYPE,
	D_TY_SIZE,
	D_TY_NAME,
	D_BY_SIZE,
	D_BY_OB_SIZE,
	D_BY_SVAL,
	D_UNI_SIZE,
	D_UNI_STATE,
	D_UNI_LENGTH,
	D_UNI_ASCII_SIZE,
	D_COUNT
};

/* Where each word lies in one minor version's _Py_DebugOffsets (word indexes). */
struct dbg_desc {
	uint32_t minor; /* PY_VERSION_HEX >> 16 */
	uint8_t at[D_COUNT];
};

static const struct dbg_desc descs[] = {
	{ 0x030d, { [D_VERSION] = 1,	     [D_FREE_THREADED] = 2,	[D_RT_SIZE] = 3,
		    [D_RT_INTERP_HEAD] = 5,  [D_IS_SIZE] = 6,		[D_IS_NEXT] = 8,
		    [D_IS_THREADS_HEAD] = 9, [D_TS_SIZE] = 19,		[D_TS_NEXT] = 21,
		    [D_TS_INTERP] = 22,	     [D_TS_CURRENT_FRAME] = 23, [D_TS_NATIVE_TID] = 25,
		    [D_FR_SIZE] = 28,	     [D_FR_PREVIOUS] = 29,	[D_FR_EXECUTABLE] = 30,
		    [D_FR_INSTR] = 31,	     [D_FR_OWNER] = 33,		[D_CO_SIZE] = 34,
		    [D_CO_FILENAME] = 35,    [D_CO_QUALNAME] = 37,	[D_CO_LINETABLE] = 38,
		    [D_CO_FIRSTLINENO] = 39, [D_CO_CODE_ADAPTIVE] = 43, [D_OB_SIZE] = 44,
		    [D_OB_TYPE] = 45,	     [D_TY_SIZE] = 46,		[D_TY_NAME] = 47,
		    [D_BY_SIZE] = 64,	     [D_BY_OB_SIZE] = 65,	[D_BY_SVAL] = 66,
		    [D_UNI_SIZE] = 67,	     [D_UNI_STATE] = 68,	[D_UNI_LENGTH] = 69,
		    [D_UNI_ASCII_SIZE] = 70 } },
	/* 3.14: threads_main and two generation counters in the interpreter's
	 * group, stackpointer and tlbc_index in the frame's, co_tlbc in the
	 * code object's, a set object group */
	{ 0x030e, { [D_VERSION] = 1,	     [D_FREE_THREADED] = 2,	[D_RT_SIZE] = 3,
		    [D_RT_INTERP_HEAD] = 5,  [D_IS_SIZE] = 6,		[D_IS_NEXT] = 8,
		    [D_IS_THREADS_HEAD] = 9, [D_TS_SIZE] = 22,		[D_TS_NEXT] = 24,
		    [D_TS_INTERP] = 25,	     [D_TS_CURRENT_FRAME] = 26, [D_TS_NATIVE_TID] = 28,
		    [D_FR_SIZE] = 31,	     [D_FR_PREVIOUS] = 32,	[D_FR_EXECUTABLE] = 33,
		    [D_FR_INSTR] = 34,	     [D_FR_OWNER] = 36,		[D_CO_SIZE] = 39,
		    [D_CO_FILENAME] = 40,    [D_CO_QUALNAME] = 42,	[D_CO_LINETABLE] = 43,
		    [D_CO_FIRSTLINENO] = 44, [D_CO_CODE_ADAPTIVE] = 48, [D_OB_SIZE] = 50,
		    [D_OB_TYPE] = 51,	     [D_TY_SIZE] = 52,		[D_TY_NAME] = 53,
		    [D_BY_SIZE] = 74,	     [D_BY_OB_SIZE] = 75,	[D_BY_SVAL] = 76,
		    [D_UNI_SIZE] = 77,	     [D_UNI_STATE] = 78,	[D_UNI_LENGTH] = 79,
		    [D_UNI_ASCII_SIZE] = 80 } },
};

#define MAX_STRUCT (16u << 20) /* no struct the reader uses is this large */
#define MAX_FRAME_BYTES 128
#define MAX_TSTATE_BYTES 1024

/* Each field the reader uses: its word, its width, the word of its struct's size. */
static const struct {
	uint8_t word, width, size_word;
	uint16_t off; /* in struct py_layout */
} fields[] = {
#define F(w, width, s, f)                                  \
	{                                                  \
		w, width, s, offsetof(struct py_layout, f) \
	}
	F(D_RT_INTERP_HEAD, 8, D_RT_SIZE, rt_interp_head),
	F(D_IS_NEXT, 8, D_IS_SIZE, is_next),
	F(D_IS_THREADS_HEAD, 8, D_IS_SIZE, is_threads_head),
	F(D_TS_NEXT, 8, D_TS_SIZE, ts_next),
	F(D_TS_INTERP, 8, D_TS_SIZE, ts_interp),
	F(D_TS_CURRENT_FRAME, 8, D_TS_SIZE, ts_current_frame),
	F(D_TS_NATIVE_TID, 8, D_TS_SIZE, ts_native_tid),
	F(D_FR_PREVIOUS, 8, D_FR_SIZE, fr_previous),
	F(D_FR_EXECUTABLE, 8, D_FR_SIZE, fr_code),
	F(D_FR_INSTR, 8, D_FR_SIZE, fr_instr),
	F(D_FR_OWNER, 1, D_FR_SIZE, fr_owner),
	F(D_CO_FILENAME, 8, D_CO_SIZE, co_filename),
	F(D_CO_QUALNAME, 8, D_CO_SIZE, co_qualname),
	F(D_CO_LINETABLE, 8, D_CO_SIZE, co_linetable),
	F(D_CO_FIRSTLINENO, 4, D_CO_SIZE, co_firstlineno),
	F(D_CO_CODE_ADAPTIVE, 0, D_CO_SIZE, co_code_adaptive), /* an array at the end */
	F(D_OB_TYPE, 8, D_OB_SIZE, ob_type),
	F(D_TY_NAME, 8, D_TY_SIZE, ty_name),
	F(D_BY_OB_SIZE, 8, D_BY_SIZE, bytes_size),
	F(D_BY_SVAL, 0, D_BY_SIZE, bytes_data),
	F(D_UNI_STATE, 4, D_UNI_SIZE, uni_state),
	F(D_UNI_LENGTH, 8, D_UNI_SIZE, uni_length),
	F(D_UNI_ASCII_SIZE, 0, D_UNI_SIZE, uni_ascii_size), /* a size: at most the whole */
#undef F
};

static uint32_t max3(uint32_t a, uint32_t b, uint32_t c)
{
	return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

static const struct dbg_desc *desc_for(uint32_t minor)
{
	const struct dbg_desc *d = &descs[0];

	for (size_t i = 0; i < sizeof(descs) / sizeof(descs[0]); i++)
		if (descs[i].minor <= minor)
			d = &descs[i];
	return d;
}

static int from_debug_offsets(uint32_t version, const uint64_t *dbg, size_t n, struct py_layout *l)
{
	const struct dbg_desc *d = desc_for(version >> 16);

	if (!dbg || n < 3 || memcmp(dbg, "xdebugpy", 8))
		return -EBADMSG;
	if (dbg[2] != 0)
		return -EOPNOTSUPP; /* free-threaded: another object and frame layout */
	for (size_t i = 0; i < D_COUNT; i++)
		if (d->at[i] >= n)
			return -EBADMSG;
	if (dbg[d->at[D_VERSION]] != version)
		return -EBADMSG;
	memset(l, 0, sizeof(*l));
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		uint64_t off = dbg[d->at[fields[i].word]], size = dbg[d->at[fields[i].size_word]];

		if (size > MAX_STRUCT || off > size || size - off < fields[i].width)
			return -EBADMSG;
		*(uint32_t *)((char *)l + fields[i].off) = (uint32_t)off;
	}
	l->runtime_size = dbg[d->at[D_RT_SIZE]];
	l->ts_cframe = PY_NO_FIELD;
	l->cf_current = l->cf_previous = PY_NO_FIELD;
	l->fr_is_entry = PY_NO_FIELD;
	l->stub_owner = 3; /* FRAME_OWNED_BY_CSTACK (3.13), FRAME_OWNED_BY_INTERPRETER (3.14) */
	l->tag_mask = version >> 16 >= 0x030e ? 3 : 0; /* _PyStackRef: Py_TAG_BITS */
	/* PyCompactUnicodeObject: the ASCII header, utf8_length and utf8 */
	l->uni_compact_size = l->uni_ascii_size + 16;
	if (l->uni_compact_size > dbg[d->at[D_UNI_SIZE]])
		return -EBADMSG;
	/* the bytes read of a frame and of a thread state: every field used, no more */
	l->frame_bytes = max3(l->fr_code, l->fr_previous, l->fr_instr) + 8;
	if (l->frame_bytes < l->fr_owner + 1)
		l->frame_bytes = l->fr_owner + 1;
	l->tstate_bytes =
		max3(l->ts_next, l->ts_interp, max3(l->ts_current_frame, l->ts_native_tid, 0)) + 8;
	if (l->frame_bytes > MAX_FRAME_BYTES || l->tstate_bytes > MAX_TSTATE_BYTES)
		return -EBADMSG;
	return 0;
}

int py_layout_for(uint32_t version, const uint64_t *dbg, size_t n, struct py_layout *out)
{
	switch (version >> 16) {
	case 0x030b:
		*out = py311;
		return 0;
	case 0x030c:
		*out = py312;
		return 0;
	default:
		/* 3.13 on: described by the interpreter itself; 3.x before 3.11: not read */
		if ((version >> 24) != 3 || (version >> 16 & 0xff) < 13)
			return -EPROTONOSUPPORT;
		return from_debug_offsets(version, dbg, n, out);
	}
}
