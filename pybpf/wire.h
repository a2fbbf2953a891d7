/* SPDX-License-Identifier: MIT */
/*
 * What the BPF program (pyframes.bpf.c) and its loader (pybpf.c) share:
 * the per-process configuration the loader writes into a map, and the
 * record the program writes into the ring buffer at each sample. Both
 * sides are x86-64 (the BPF target has the same sizes and alignment for
 * these fixed-width fields). No CPython struct layout is written here:
 * every offset comes from python/'s layout of the process, through
 * struct pybpf_conf.
 */
#ifndef DLFLAME_PYBPF_WIRE_H
#define DLFLAME_PYBPF_WIRE_H

#include <linux/types.h>

#define PYBPF_MAX_FRAMES 256 /* frames copied per sample (a deeper chain is cut) */
#define PYBPF_MAX_THREADS 512 /* thread states walked to find the sampled thread's */
#define PYBPF_MAX_INTERPS 8 /* interpreters walked */
#define PYBPF_FRAME_BUF 128 /* bytes of one frame read at once (its fields lie there) */
#define PYBPF_NO_FIELD 0xffffffffu /* the version has no such field */
#define PYBPF_MAX_NAMES 16 /* code objects' names copied per sample (the innermost) */
#define PYBPF_QUAL_BYTES 128 /* of a co_qualname: its first ones when it is longer */
#define PYBPF_FILE_BYTES 192 /* of a co_filename: its last ones when it is longer */

/* One process whose frames are read, keyed by its pid (the host's). */
struct pybpf_conf {
	__u64 runtime; /* _PyRuntime's address in the process */
	__u64 none; /* Py_None's address: 3.13 on, an eval call's entry frame runs it */
	__u64 tag_mask; /* low bits of the code pointer that are flags (3.14: _PyStackRef) */
	__u64 ns_dev, ns_ino; /* its PID namespace: the thread states hold the ids seen there */
	__u32 rt_interp_head, is_next, is_threads_head;
	__u32 ts_next, ts_native_tid, ts_cframe, ts_current_frame, cf_current;
	__u32 fr_code, fr_previous, fr_instr, fr_is_entry, fr_owner;
	__u32 frame_bytes; /* read of one frame: every field above lies in it */
	__u32 stub_owner; /* owner of an eval call's entry frame; PYBPF_NO_FIELD: none (3.11) */
	__u32 stub_runs_none; /* 3.13 on: that entry frame also runs None */
	__u32 owner_max; /* an owner byte above this: not a frame */
	/*
	 * What names a code object, copied with it to prove it later: the
	 * co_bytes bytes from co_from are read at once, and co_qualname,
	 * co_filename (pointers) and co_firstlineno (an int) lie in them, as
	 * offsets from co_from
	 */
	__u32 co_from, co_bytes, co_qualname, co_filename, co_firstlineno;
	/*
	 * A code object run once (a module's body, a class's) is freed once it
	 * has run, often before it is named: the names of a code object the
	 * program has not seen before (struct pybpf_seen) are copied at the
	 * sample. A str: its type (0: not checked), where its length and state
	 * lie, the state's bits (kind, compact, ascii) and its header's size
	 * (ascii, other compact); names_ok 0: not copied.
	 */
	__u64 str_type;
	__u32 uni_length, uni_state, uni_ascii_size, uni_compact_size;
	__u32 str_kind_shift, str_compact_bit, str_ascii_bit, ob_type;
	__u32 names_ok, pad2;
};

/*
 * A code object whose names the program copied once: not again while it
 * is in the map (LRU). The same fields as the reader's proof that a code
 * object named before is the same one.
 */
struct pybpf_seen {
	__u64 code, qualname, filename;
	__u32 pid, firstline;
};

/*
 * The recorder's own PID namespace (its /proc/self/ns/pid): the pids it
 * configures and the perf samples it joins are seen from there, which is
 * not the initial namespace when dlflame itself runs in a PID namespace
 * (a container, a CI root). All zero: the initial namespace.
 */
struct pybpf_self {
	__u64 ns_dev, ns_ino;
};

#define PYBPF_F_ENTRY 1 /* 3.11: is_entry, the outermost frame of one C eval call */
#define PYBPF_F_STUB 2 /* 3.12 on: an eval call's entry frame (owned by the C stack) */

struct pybpf_frame {
	__u64 addr, code, instr;
	/*
	 * the code object's co_qualname and co_filename pointers and
	 * co_firstlineno at the sample (qualname 0: unread): it is named later,
	 * and a code object freed since whose address a new one took names
	 * another function (a module's <module> shares the qualname object)
	 */
	__u64 qualname, filename;
	__u32 flags;
	__u32 firstline;
};

/* How a record's walk ended. */
enum pybpf_status {
	PYBPF_OK = 0, /* the chain's end was reached */
	PYBPF_NO_TSTATE, /* the thread has no thread state (yet), n = 0 */
	PYBPF_FAULT, /* a pointer could not be read at the sample (not resident, or bad) */
	PYBPF_CUT, /* PYBPF_MAX_FRAMES frames copied, the chain goes on */
	PYBPF_BAD_FRAME, /* an owner byte out of range, or a loop: the chain was being changed */
	PYBPF_NO_NS, /* the thread's id in its namespace could not be had */
};

/* A record: this header, then n struct pybpf_frame, innermost first. */
struct pybpf_head {
	__u64 time; /* CLOCK_MONOTONIC ns (bpf_ktime_get_ns), the samples' clock */
	__u64 ip; /* the interrupted instruction: the sample's ip */
	__u64 tstate; /* the thread's PyThreadState, 0 if none was found */
	__u64 cframe; /* 3.11/3.12: tstate->cframe at the sample (a C stack address), else 0 */
	/*
	 * The user stack pointer at the sample when it interrupted user code
	 * (the sample's own user registers hold the same), else 0: with ip it
	 * tells apart samples of one thread in one instruction (the eval loop)
	 */
	__u64 usp;
	__u32 pid, tid; /* the host's ids */
	__u32 n;
	__u32 status; /* enum pybpf_status */
	__u32 flags; /* PYBPF_H_* */
	__u32 pad;
};

/* pybpf_head.flags: taken at a probe's entry (pyframes_probe), not at a sample */
#define PYBPF_H_PROBE 1
/*
 * A record of names: the head of the frames record written right after it
 * by the same run (time, tid), n struct pybpf_name instead of frames.
 */
#define PYBPF_H_NAMES 2

/* One str copied: length in characters, kind (bytes a character: 1, 2, 4), bytes copied */
struct pybpf_str {
	__u32 length, kind, bytes, pad;
};

/* A code object's co_qualname (its first bytes) and co_filename (its last), copied at the sample. */
struct pybpf_name {
	__u32 frame; /* the frame's index in the record that follows */
	__u32 pad;
	struct pybpf_str q, f;
	__u8 qual[PYBPF_QUAL_BYTES];
	__u8 file[PYBPF_FILE_BYTES];
};

/* Counters the program keeps, per CPU, summed by the loader. */
enum pybpf_counter {
	PYBPF_C_SAMPLES, /* samples of configured processes */
	PYBPF_C_RECORDS, /* records written */
	PYBPF_C_DROPPED, /* records the ring buffer had no room for */
	PYBPF_C_TSTATE_WALKS, /* thread lists walked (a thread's state was not cached) */
	PYBPF_C_BUSY, /* probes' entries with every slot of their CPU taken: no record */
	PYBPF_C_COUNT
};

#endif
