/* SPDX-License-Identifier: MIT */
/*
 * Shared by the files of python/ only. Who calls whom:
 *
 *   reader.c   probe, snapshot, match, describe  -> layout.c, mem.c, elfsym.c
 *   layout.c   field offsets per CPython version (leaf)
 *   elfsym.c   symbols of a module's .dynsym, the eval function's parts -> evalparts.c
 *   evalparts.c  the eval function's cold parts: jumps out of its hot part (leaf)
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

/*
 * A str object's state bits (PyASCIIObject.state, 3.11 to 3.14: interned
 * in the two lowest, then kind in three, compact, ascii).
 */
#define PY_STR_KIND_SHIFT 2
#define PY_STR_COMPACT_BIT 5
#define PY_STR_ASCII_BIT 6

/* Where CPython keeps what the reader needs, for one minor version (x86-64). */
struct py_layout {
	uint32_t rt_interp_head; /* _PyRuntime.interpreters.head */
	uint32_t is_next, is_threads_head; /* PyInterpreterState */
	uint32_t ts_next, ts_native_tid; /* PyThreadState */
	uint32_t ts_interp; /* 3.13+: tstate->interp (checked at probe), else PY_NO_FIELD */
	uint32_t ts_cframe; /* 3.11/3.12: tstate->cframe, else PY_NO_FIELD */
	uint32_t ts_current_frame; /* 3.13: tstate->current_frame, else PY_NO_FIELD */
	uint32_t cf_current, cf_previous; /* _PyCFrame */
	uint32_t fr_code, fr_previous, fr_instr; /* _PyInterpreterFrame */
	uint32_t fr_is_entry, fr_owner; /* PY_NO_FIELD where the version has none */
	uint32_t co_firstlineno, co_filename, co_qualname, co_linetable, co_code_adaptive;
	uint32_t ob_type;
	uint32_t ty_name; /* PyTypeObject.tp_name (checked at probe) */
	uint32_t bytes_size, bytes_data; /* PyBytesObject: ob_size, ob_sval */
	uint32_t uni_length, uni_state, uni_ascii_size, uni_compact_size;
	uint32_t frame_bytes, tstate_bytes; /* read of a frame, of a thread state */
	uint32_t stub_owner; /* owner of an eval call's entry frame; PY_NO_FIELD: none (3.11) */
	uint64_t tag_mask; /* low bits of f_executable that are flags (_PyStackRef, 3.14) */
	uint64_t runtime_size; /* sizeof(_PyRuntimeState) as stated, 0 if not */
};

/*
 * The layout of CPython version (PY_VERSION_HEX); from 3.13 on from the
 * _Py_DebugOffsets block read from the process (dbg: its first n words).
 * 0, -EPROTONOSUPPORT for a version not read, -EOPNOTSUPP for a
 * free-threaded build, -EBADMSG for a debug block that does not hold up.
 */
int py_layout_for(uint32_t version, const uint64_t *dbg, size_t n, struct py_layout *out);
/* Words of _Py_DebugOffsets read (3.13 has 73, 3.14 more; only the first are used). */
#define PY_DEBUG_OFFSETS_WORDS 96

/* ---- reader.c, for tests ---- */

/* The layout the last probe of pid took; false if it found no interpreter it reads. */
bool pyreader__layout(const struct pyreader *r, pid_t pid, struct py_layout *out);

/* ---- mem.c ---- */

/* Read n bytes at addr of pid: 0, -EFAULT (not all mapped), -ESRCH, -EPERM. */
int py_read(pid_t pid, uint64_t addr, void *buf, size_t n);
/*
 * Read n blocks of len bytes, block i at addrs[i] into buf + i * len, in one
 * system call: 0 when all were read, else the first error (as py_read).
 */
int py_readv(pid_t pid, const uint64_t *addrs, size_t n, size_t len, uint8_t *buf);

/* ---- elfsym.c ---- */

#define PY_EVAL_COLD_MAX 4

/* What the reader looks for in a module's .dynsym (0 when absent). */
struct py_syms {
	bool elf_ok; /* the file was read */
	bool is_exec; /* ET_EXEC: no load bias */
	uint64_t load_vaddr; /* p_vaddr of the first PT_LOAD, page-aligned down */
	uint64_t runtime, runtime_size, version, code_type, none, eval, eval_size;
	uint64_t str_type, bytes_type; /* PyUnicode_Type, PyBytes_Type */
	/* the eval function's parts the compiler put apart ([lo, hi) file vaddrs) */
	uint32_t nr_cold;
	bool eval_decoded; /* its hot part decoded to its end (the jumps out of it are known) */
	uint64_t cold_lo[PY_EVAL_COLD_MAX], cold_hi[PY_EVAL_COLD_MAX];
};

/* 0 (*out filled, maybe with nothing found) or a negative errno. */
int py_elf_syms(const char *path, struct py_syms *out);
/* The same, the eval's parts apart found only from .symtab or only from its jumps (tests). */
#define PY_PARTS_SYMTAB 1
#define PY_PARTS_JUMPS 2
int py_elf_syms_from(const char *path, struct py_syms *out, int parts);

/* ---- evalparts.c ---- */

/* A file's unwind tables as its bytes at their vaddrs. */
struct py_ehframe {
	const uint8_t *hdr, *eh;
	size_t hdr_size, eh_size;
	uint64_t hdr_vaddr, eh_vaddr;
};

/*
 * The parts of a function the compiler moved out of it (gcc's .cold):
 * code is its bytes at [vaddr, vaddr + len). Every instruction is decoded
 * from its start; a direct jump to a place outside it that lies inside
 * another FDE's range, not at that range's start (a tail call goes to a
 * function's start), names that range as one of its parts. Fills lo/hi
 * (max of them); returns how many, or -ENOEXEC when the code does not
 * decode exactly to its end (nothing is guessed then).
 */
int py_cold_parts(const uint8_t *code, size_t len, uint64_t vaddr, const struct py_ehframe *ef,
		  uint64_t *lo, uint64_t *hi, size_t max);

#endif
