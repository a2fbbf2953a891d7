/* SPDX-License-Identifier: MIT */
/*
 * Field offsets per CPython minor version. 3.11 and 3.12 have no
 * description of themselves in memory: their offsets are fixed per minor
 * version (checked with offsetof against Debian's 3.11.2 and pyenv's
 * 3.11.7 and 3.12.1 headers). 3.13 describes itself in _Py_DebugOffsets,
 * the first field of _PyRuntime; what it does not cover (the _PyCFrame is
 * gone; the owner byte, the compact unicode header) is fixed in 3.13.
 */
#include <string.h>

#include "python/internal.h"

static const struct py_layout py311 = {
	.rt_interp_head = 40,
	.is_next = 0,
	.is_threads_head = 16,
	.ts_next = 8,
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
	.bytes_size = 16,
	.bytes_data = 32,
	.uni_length = 16,
	.uni_state = 32,
	.uni_ascii_size = 48, /* with wchar_t *wstr */
	.uni_compact_size = 72,
};

static const struct py_layout py312 = {
	.rt_interp_head = 40,
	.is_next = 0,
	.is_threads_head = 72,
	.ts_next = 8,
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
	.bytes_size = 16,
	.bytes_data = 32,
	.uni_length = 16,
	.uni_state = 32,
	.uni_ascii_size = 40,
	.uni_compact_size = 56,
};

/* Word indexes into 3.13's _Py_DebugOffsets (a cookie, then uint64_t fields). */
enum {
	DBG_VERSION = 1,
	DBG_RT_INTERP_HEAD = 5,
	DBG_IS_NEXT = 8,
	DBG_IS_THREADS_HEAD = 9,
	DBG_TS_NEXT = 21,
	DBG_TS_CURRENT_FRAME = 23,
	DBG_TS_NATIVE_TID = 25,
	DBG_FR_PREVIOUS = 29,
	DBG_FR_EXECUTABLE = 30,
	DBG_FR_INSTR = 31,
	DBG_FR_OWNER = 33,
	DBG_CO_FILENAME = 35,
	DBG_CO_QUALNAME = 37,
	DBG_CO_LINETABLE = 38,
	DBG_CO_FIRSTLINENO = 39,
	DBG_CO_CODE_ADAPTIVE = 43,
	DBG_OB_TYPE = 45,
	DBG_BYTES_SIZE = 65,
	DBG_BYTES_DATA = 66,
	DBG_UNI_STATE = 68,
	DBG_UNI_LENGTH = 69,
	DBG_UNI_ASCII_SIZE = 70,
};

/* An offset from the debug block: small enough to be one, or not usable. */
static bool dbg_field(const uint64_t *dbg, size_t i, uint32_t *out)
{
	if (dbg[i] >= 1u << 16)
		return false;
	*out = (uint32_t)dbg[i];
	return true;
}

static bool from_debug_offsets(const uint64_t *dbg, size_t n, struct py_layout *l)
{
	static const struct {
		size_t word;
		size_t off;
	} map[] = {
		{ DBG_RT_INTERP_HEAD, offsetof(struct py_layout, rt_interp_head) },
		{ DBG_IS_NEXT, offsetof(struct py_layout, is_next) },
		{ DBG_IS_THREADS_HEAD, offsetof(struct py_layout, is_threads_head) },
		{ DBG_TS_NEXT, offsetof(struct py_layout, ts_next) },
		{ DBG_TS_CURRENT_FRAME, offsetof(struct py_layout, ts_current_frame) },
		{ DBG_TS_NATIVE_TID, offsetof(struct py_layout, ts_native_tid) },
		{ DBG_FR_PREVIOUS, offsetof(struct py_layout, fr_previous) },
		{ DBG_FR_EXECUTABLE, offsetof(struct py_layout, fr_code) },
		{ DBG_FR_INSTR, offsetof(struct py_layout, fr_instr) },
		{ DBG_FR_OWNER, offsetof(struct py_layout, fr_owner) },
		{ DBG_CO_FILENAME, offsetof(struct py_layout, co_filename) },
		{ DBG_CO_QUALNAME, offsetof(struct py_layout, co_qualname) },
		{ DBG_CO_LINETABLE, offsetof(struct py_layout, co_linetable) },
		{ DBG_CO_FIRSTLINENO, offsetof(struct py_layout, co_firstlineno) },
		{ DBG_CO_CODE_ADAPTIVE, offsetof(struct py_layout, co_code_adaptive) },
		{ DBG_OB_TYPE, offsetof(struct py_layout, ob_type) },
		{ DBG_BYTES_SIZE, offsetof(struct py_layout, bytes_size) },
		{ DBG_BYTES_DATA, offsetof(struct py_layout, bytes_data) },
		{ DBG_UNI_STATE, offsetof(struct py_layout, uni_state) },
		{ DBG_UNI_LENGTH, offsetof(struct py_layout, uni_length) },
		{ DBG_UNI_ASCII_SIZE, offsetof(struct py_layout, uni_ascii_size) },
	};

	if (n < PY_DEBUG_OFFSETS_WORDS || memcmp(dbg, "xdebugpy", 8))
		return false;
	memset(l, 0, sizeof(*l));
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!dbg_field(dbg, map[i].word, (uint32_t *)((char *)l + map[i].off)))
			return false;
	l->ts_cframe = PY_NO_FIELD;
	l->cf_current = l->cf_previous = PY_NO_FIELD;
	l->fr_is_entry = PY_NO_FIELD;
	/* PyCompactUnicodeObject: the ASCII header, utf8_length and utf8 */
	l->uni_compact_size = l->uni_ascii_size + 16;
	/* a frame is read whole: every field used must lie in its first 72 bytes */
	return l->fr_code < 64 && l->fr_previous < 64 && l->fr_instr < 64 && l->fr_owner < 72;
}

bool py_layout_for(uint32_t version, const uint64_t *dbg, size_t n, struct py_layout *out)
{
	switch (version >> 16) {
	case 0x030b:
		*out = py311;
		return true;
	case 0x030c:
		*out = py312;
		return true;
	case 0x030d:
		return dbg && from_debug_offsets(dbg, n, out) && dbg[DBG_VERSION] >> 16 == 0x030d;
	default:
		return false;
	}
}
