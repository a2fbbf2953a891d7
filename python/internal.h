/* SPDX-License-Identifier: MIT */
/*
 * Shared by the files of python/ only. Who calls whom:
 *
 *   reader.c   probe, snapshot, match, describe  -> layout.c, mem.c, elfsym.c
 *   layout.c   field offsets per CPython version (leaf)
 *   elfsym.c   symbols of a module's .dynsym (leaf)
 *   mem.c      reading the target's memory (leaf)
 */
#ifndef DLFLAME_PYTHON_INTERNAL_H
#define DLFLAME_PYTHON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "python/python.h"

/* ---- layout.c ---- */

#define PY_NO_FIELD UINT32_MAX

/* Where CPython keeps what the reader needs, for one minor version (x86-64). */
struct py_layout {
	uint32_t rt_interp_head; /* _PyRuntime.interpreters.head */
	uint32_t is_next, is_threads_head; /* PyInterpreterState */
	uint32_t ts_next, ts_native_tid; /* PyThreadState */
	uint32_t ts_cframe; /* 3.11/3.12: tstate->cframe, else PY_NO_FIELD */
	uint32_t ts_current_frame; /* 3.13: tstate->current_frame, else PY_NO_FIELD */
	uint32_t cf_current, cf_previous; /* _PyCFrame */
	uint32_t fr_code, fr_previous, fr_instr; /* _PyInterpreterFrame */
	uint32_t fr_is_entry, fr_owner; /* PY_NO_FIELD where the version has none */
	uint32_t co_firstlineno, co_filename, co_qualname, co_linetable, co_code_adaptive;
	uint32_t ob_type;
	uint32_t bytes_size, bytes_data; /* PyBytesObject: ob_size, ob_sval */
	uint32_t uni_length, uni_state, uni_ascii_size, uni_compact_size;
};

/*
 * The layout of CPython version (PY_VERSION_HEX); for 3.13 from the
 * _Py_DebugOffsets block read from the process (dbg: its words, n of them).
 * False for versions not supported or a debug block that does not hold up.
 */
bool py_layout_for(uint32_t version, const uint64_t *dbg, size_t n, struct py_layout *out);
/* Words of 3.13's _Py_DebugOffsets read (its size in 3.13.x). */
#define PY_DEBUG_OFFSETS_WORDS 73

/* ---- mem.c ---- */

/* Read n bytes at addr of pid: 0, -EFAULT (not all mapped), -ESRCH, -EPERM. */
int py_read(pid_t pid, uint64_t addr, void *buf, size_t n);
/*
 * Read n blocks of len bytes, block i at addrs[i] into buf + i * len, in one
 * system call: 0 when all were read, else the first error (as py_read).
 */
int py_readv(pid_t pid, const uint64_t *addrs, size_t n, size_t len, uint8_t *buf);

/* ---- elfsym.c ---- */

/* What the reader looks for in a module's .dynsym (0 when absent). */
struct py_syms {
	bool elf_ok; /* the file was read */
	bool is_exec; /* ET_EXEC: no load bias */
	uint64_t load_vaddr; /* p_vaddr of the first PT_LOAD, page-aligned down */
	uint64_t runtime, version, code_type, none, eval, eval_size;
};

/*
 * 0 (*out filled, maybe with nothing found) or a negative errno; -ESTALE
 * when ino is not 0 and the file at path has another inode.
 */
int py_elf_syms(const char *path, uint64_t ino, struct py_syms *out);

#endif
