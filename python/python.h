/* SPDX-License-Identifier: MIT */
/*
 * python/: the Python frames of a sampled thread, read from the live
 * process without stopping it (process_vm_readv), and matched to the eval
 * calls the native unwinder found in the sample's stack copy.
 *
 * CPython 3.11 to 3.14 and later versions whose _Py_DebugOffsets hold up
 * (x86-64, builds with the GIL). The interpreter is found by symbol
 * (_PyRuntime, Py_Version in .dynsym of the executable or of libpython),
 * never by path. Everything read from the target is untrusted: every
 * pointer, length and count is checked, every walk bounded.
 *
 * Use: a sample is seen -> pyreader__snapshot() at once (the Python stack
 * changes within milliseconds); later, once its native stack is unwound ->
 * pyreader__match() splits the snapshot into one group per
 * _PyEval_EvalFrameDefault frame and says which groups are provably the
 * ones on the stack at the sample -> pyreader__describe() names frames.
 *
 * Library code: returns negative errno or a result, never prints.
 */
#ifndef DLFLAME_PYTHON_H
#define DLFLAME_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PY_MAX_FRAMES 256 /* Python frames read per thread (deeper chains are cut) */

struct pyreader;

struct pyreader *pyreader__new(void);
void pyreader__free(struct pyreader *r);

/*
 * Look for an interpreter in process pid (its mappings and their .dynsym).
 * Returns 1 when it runs a supported CPython (3.11-3.14, or later with
 * debug offsets that hold up), 0 when it has no interpreter (yet: call
 * again after it maps more code, e.g. after exec; pyreader__version is
 * then set when the interpreter is there but not initialized yet), -EPROTONOSUPPORT for
 * another CPython version or build (pyreader__version says which; 0 for
 * one older than 3.11, which has no Py_Version; pyreader__free_threaded
 * whether it is a free-threaded build), -EPERM/-EACCES when its memory cannot be read (no ptrace
 * access), -ESRCH when it is gone. The result is kept until
 * pyreader__forget; calling again re-probes.
 */
int pyreader__probe(struct pyreader *r, pid_t pid);
/*
 * Whether this process may call process_vm_readv at all: 0, or -errno of
 * reading its own memory. A seccomp filter that refuses the call whatever
 * the target (Docker's default profile without CAP_SYS_PTRACE) fails even
 * that; a target that is not ours to read does not.
 */
int pyreader__self_read(void);
/* PY_VERSION_HEX of pid's interpreter as found by the last probe, 0 if none. */
uint32_t pyreader__version(const struct pyreader *r, pid_t pid);
/* Whether the last probe found a free-threaded build (3.13t, 3.14t: not read). */
bool pyreader__free_threaded(const struct pyreader *r, pid_t pid);
/*
 * What a reader of pid's frames elsewhere needs (pybpf/: a BPF program
 * that walks them at the sample): the interpreter's addresses and the
 * field offsets the last probe took, from _Py_DebugOffsets on 3.13+ and
 * from the per-version tables on 3.11/3.12. PY_WALK_NO_FIELD where the
 * version has no such field.
 */
#define PY_WALK_NO_FIELD UINT32_MAX
struct py_walk {
	uint32_t version; /* PY_VERSION_HEX */
	uint64_t runtime; /* _PyRuntime's address in the process */
	uint64_t none; /* Py_None's address */
	uint64_t tag_mask; /* low bits of a frame's code pointer that are flags (3.14) */
	uint32_t rt_interp_head, is_next, is_threads_head; /* runtime, interpreter */
	uint32_t ts_next, ts_native_tid; /* thread state */
	uint32_t ts_cframe, cf_current; /* 3.11/3.12: tstate->cframe->current_frame */
	uint32_t ts_current_frame; /* 3.13 on: tstate->current_frame */
	uint32_t fr_code, fr_previous, fr_instr, fr_is_entry, fr_owner; /* _PyInterpreterFrame */
	uint32_t frame_bytes; /* the bytes of a frame that hold every field above */
	uint32_t stub_owner; /* owner of an eval call's entry frame; PY_WALK_NO_FIELD (3.11) */
	bool stub_runs_none; /* 3.13 on: that entry frame runs None */
	uint32_t owner_max; /* an owner byte above this: not a frame */
	uint32_t co_qualname, co_filename, co_firstlineno; /* a code object's names */
	/* a str object: its type, and where its length, state bits and characters lie */
	uint64_t str_type;
	uint32_t ob_type, uni_length, uni_state, uni_ascii_size, uni_compact_size;
	uint32_t str_kind_shift, str_compact_bit, str_ascii_bit;
};
/* 0 and *out, or -ENODEV when the last probe of pid found no interpreter it reads. */
int pyreader__walk(const struct pyreader *r, pid_t pid, struct py_walk *out);
/* Drop what is known of pid (it exec'd or exited). */
void pyreader__forget(struct pyreader *r, pid_t pid);

/*
 * Whether ip (an instruction address in pid, a sampled IP or a return
 * address minus one) lies in the interpreter's _PyEval_EvalFrameDefault:
 * its symbol's range or a part the compiler put apart (.cold).
 */
bool pyreader__is_eval(const struct pyreader *r, pid_t pid, uint64_t ip);

/*
 * Which of a sample's k native frames are eval calls. pcs[i]: frame i's
 * instruction (the sampled IP, or a return address minus one); cfas[i]:
 * its CFA (0 if unknown). A frame is one when its pc lies in
 * _PyEval_EvalFrameDefault or one of its parts the compiler put apart
 * (found at probe), or, elsewhere (a part not found), when its slot in the
 * copy holds an eval call's record (3.11/3.12: a _PyCFrame linked to the
 * next older eval call's; 3.13 on: the entry frame). Fills is_eval[0..k)
 * and, unless NULL, by_slot[0..k): found by its slot alone, outside the
 * eval code (pyreader__match's guessed); returns how many are.
 */
struct py_stack_copy;
size_t pyreader__find_evals(struct pyreader *r, pid_t pid, const uint64_t *pcs,
			    const uint64_t *cfas, size_t k, const struct py_stack_copy *copy,
			    bool *is_eval, bool *by_slot);

/* One Python frame (_PyInterpreterFrame) as read from the process. */
struct py_frame {
	uint64_t addr; /* where the frame lives */
	uint64_t code; /* its code object */
	uint64_t instr; /* its last instruction (prev_instr / instr_ptr) */
	uint32_t code_ref; /* the reader's record of the code object as it was when read */
	/*
	 * copied at the sample (pybpf/): the code object's co_qualname and
	 * co_filename pointers and co_firstlineno then, which
	 * pyreader__resolve requires it still has; qualname 0: not checked
	 */
	uint64_t qualname, filename;
	int32_t firstline;
	/*
	 * copied at the sample too, the first time the program saw the code
	 * object: the text of its co_qualname and co_filename, UTF-8; NULL if
	 * not. Read by pyreader__resolve only, during the call.
	 */
	const char *copied_qualname, *copied_filename;
	bool entry; /* 3.11: is_entry (the outermost frame of one C eval call) */
	bool stub; /* 3.12+: a frame owned by the C stack (marks an eval call's start) */
};

/* A thread's Python frame chain, innermost first, as it was when read. */
struct py_snapshot {
	uint64_t tstate; /* the thread's PyThreadState */
	uint64_t cframe; /* 3.11/3.12: tstate->cframe when read (a C stack address), else 0 */
	uint32_t n;
	bool cut; /* the chain went on past PY_MAX_FRAMES */
	/*
	 * Only the outer frames two walks read alike: the thread moved during
	 * each. Its innermost group may be cut anywhere and is never shown.
	 */
	bool partial;
	/*
	 * Copied at the sample itself (pybpf/), not read after it: a group
	 * whose anchor the copy does not hold is placed by its position when
	 * the chain has as many groups as the sample has eval calls and every
	 * anchor read agrees with that position.
	 */
	bool at_sample;
	struct py_frame frames[PY_MAX_FRAMES];
};

/*
 * Read thread tid's Python frames now. 0 on success (n may be 0: no Python
 * code running), -ENOENT when pid has no thread state for tid, -EFAULT when
 * the chain held a pointer that could not be read or was not a frame (the
 * interpreter was changing it: the snapshot is unusable), -ENODEV when pid
 * was not probed as Python, -ESRCH when it is gone.
 */
int pyreader__snapshot(struct pyreader *r, pid_t pid, pid_t tid, struct py_snapshot *out);

/*
 * The user stack the kernel copied at the sample: bytes [sp, sp + size);
 * and, when the sampled instruction itself lies in the newest eval call
 * (not in a function it called), the sampled registers (indexed as
 * enum perf_event_x86_regs, valid where regs_mask says), else regs NULL.
 */
struct py_stack_copy {
	uint64_t sp;
	const uint8_t *data;
	size_t size;
	const uint64_t *regs;
	uint64_t regs_mask;
};

enum py_group_state {
	PY_GROUP_OK = 0, /* the frames are the ones on the stack at the sample */
	PY_GROUP_CHANGED, /* the eval call's frames changed between sample and read */
	PY_GROUP_UNKNOWN, /* not provable: its slot lies outside the copy, layout not yet known */
	PY_GROUP_NOT_EVAL, /* a guessed call proved to be none: its frame is a native one */
};

/* The Python frames of one C eval call: snapshot frames [first, first + n). */
struct py_group {
	uint32_t first, n;
	enum py_group_state state;
	/*
	 * The innermost frame's instruction at the sample, when the sampled
	 * registers tell it (the eval loop keeps it in a register: which one is
	 * learned per process); else 0 and the frame's own, as read, stands.
	 */
	uint64_t instr;
};

/*
 * Split snap into one group per eval call of the sample: cfas[0..n) are
 * the CFAs of the sample's _PyEval_EvalFrameDefault frames, innermost
 * first (from the native unwind). Each eval call keeps, in its own C
 * frame, the address of its innermost Python frame (3.11/3.12: its
 * _PyCFrame; 3.13 on: its entry frame): read from the copy, it anchors
 * the group to the sample. The slot's offset below the CFA is learned per
 * process and checked on each use. Stub frames are not part of any group.
 * guessed (NULL: none) marks the calls found by their slot alone, outside
 * the eval code: one proved to be none gets PY_GROUP_NOT_EVAL. Returns 0
 * (groups[0..n) filled) or a negative errno (-EINVAL for n over
 * PY_MAX_FRAMES + 1).
 */
int pyreader__match(struct pyreader *r, pid_t pid, const struct py_snapshot *snap,
		    const struct py_stack_copy *copy, const uint64_t *cfas, const bool *guessed,
		    size_t n, struct py_group *groups);

/*
 * Check and name the code objects of a chain taken elsewhere (pybpf/:
 * frames copied at the sample): sets each frame's code_ref as
 * pyreader__snapshot does, reading the code objects not seen before. A
 * frame whose code is no code object (any more: a module's body, freed
 * once it ran) keeps code_ref 0: it must not be named from what now lies
 * at its address; unless its names were copied at a sample, this one's
 * (copied_qualname, copied_filename) or an earlier one's with the same
 * code object and names' pointers: it is named from those, without a line
 * (its line table went with it). How many frames stay unnamed, or -ENODEV
 * when pid was not probed as Python.
 */
int pyreader__resolve(struct pyreader *r, pid_t pid, struct py_snapshot *snap);

/*
 * A str's characters (chars of kind bytes each: 1, 2 or 4, as CPython
 * keeps them) as UTF-8 into out, which holds chars * 4 + 1 bytes; an
 * invalid code point becomes U+FFFD. Its length.
 */
size_t py_str_utf8(const uint8_t *raw, size_t chars, unsigned kind, char *out);

/* What a frame shows: strings owned by the reader, valid until it is freed. */
struct py_frame_info {
	const char *qualname; /* co_qualname */
	const char *filename; /* co_filename as the code object has it */
	uint32_t line; /* from co_linetable and the frame's instruction; 0 if unknown */
	uint32_t firstline; /* co_firstlineno */
	/*
	 * The code object as the reader knows it, never the same for another
	 * (another process, another code object at the address, names read
	 * again): with line, it decides every field above.
	 */
	uint64_t code_serial;
};

/*
 * Name a snapshot frame: code objects and strings are read once, cached by
 * address and checked (type PyCode_Type, header unchanged) on reuse.
 * 0, or -EFAULT when the code object cannot be read or is not one.
 */
int pyreader__describe(struct pyreader *r, pid_t pid, const struct py_frame *f,
		       struct py_frame_info *out);

struct pyreader_stats {
	uint64_t probes, processes; /* processes probed, and found running supported Python */
	uint64_t snapshots, snapshot_failures;
	uint64_t snapshot_retries; /* walks done again: the chain moved while it was read */
	uint64_t snapshot_partial; /* of the snapshots, those that kept only the outer frames */
	uint64_t reads, bytes_read; /* process_vm_readv calls and bytes */
	uint64_t code_cache_hits, code_reads;
	/* of code_reads, module bodies ("<module>": an import's or exec()'s code, freed once run) */
	uint64_t module_reads;
	uint64_t leaf_checks, leaf_mismatches; /* newest frames checked against the registers */
	uint64_t cold_evals; /* eval calls found by their slot, outside the eval symbol */
	uint64_t placed; /* groups of chains copied at the sample placed by position */
	/* groups found changed, by the first reason: no group is the anchor's, an
	 * older call's was, the anchor is the running group, the depth moved, the
	 * register disagrees */
	uint64_t changed_none, changed_after, changed_running, changed_shift, changed_leaf;
	uint64_t not_evals; /* calls found by their slot alone, proved not to be eval calls */
	uint64_t beyond_cut; /* calls older than a chain copied at the sample reaches */
	/* frames of freed code objects named from the names copied at a sample */
	uint64_t named_from_copy;
	/* 3.13 on: eval-call slots learned again after SLOT_MISSES samples without a stub there */
	uint64_t slots_unlearned;
};
const struct pyreader_stats *pyreader__stats(const struct pyreader *r);

#endif
