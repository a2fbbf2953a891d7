/* SPDX-License-Identifier: MIT */
/*
 * The in-memory profile and its file format (dlflame.data).
 *
 * A profile is a set of interned tables:
 *   strings  - id 0 is always "" ;
 *   frames   - (name, module, kind); a frame is one node of a call stack;
 *   stacks   - a prefix tree: stack = (parent stack, frame). Stack id 0 is the
 *              empty stack (the root); stacks are stored root -> leaf, so the
 *              leaf frame of stack s is frames[stacks[s].frame] and its caller
 *              chain is stacks[s].parent, stacks[parent].parent, ... down to 0;
 *   threads  - (pid, tid, comm);
 *   samples  - (stack, thread, time, weight, kind).
 * plus metadata: the recorded command, event, frequency, start/end time,
 * lost-sample count and whether the recording was finalized.
 *
 * All functions return 0 (or an id) on success and a negative errno on
 * failure; none prints. Ids are dense and start at 0.
 */
#ifndef DLFLAME_PROFILE_H
#define DLFLAME_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum frame_kind {
	FRAME_USER = 0,
	FRAME_KERNEL = 1,
	FRAME_JIT = 2,
	FRAME_INLINED = 3,
	FRAME_SPECIAL = 4, /* placeholders such as [truncated], [unknown] */
	FRAME_PYTHON = 5, /* a Python function: name = qualname, file = co_filename, line */
	FRAME_KIND_MAX,
};

enum sample_kind {
	SAMPLE_ONCPU = 0,
	SAMPLE_OFFCPU = 1, /* voluntary blocking, weight in ns */
	SAMPLE_RUNQUEUE = 2, /* preempted, waiting for a CPU, weight in ns */
	SAMPLE_CALL = 3, /* a probed function's call: time its entry, weight its duration in ns,
			    stack the one it was called with (the function its leaf) */
	SAMPLE_FAULT =
		4, /* page faults where memory was first touched: weight in bytes (pages x 4096) */
	SAMPLE_RSS = 5, /* a process's resident set at time: weight in bytes; stack 0; its
			   process leader's thread (or another of its threads) */
	SAMPLE_KIND_MAX,
};

struct pf_frame {
	uint32_t name; /* string id */
	uint32_t module; /* string id, 0 when unknown */
	uint32_t kind; /* enum frame_kind */
	uint32_t file; /* string id of the source file, 0 when unknown */
	uint32_t line; /* source line, 0 when unknown */
	uint32_t build_id; /* string id: the module's build-id in lowercase hex, 0 when unknown */
};

struct pf_stack {
	uint32_t parent; /* stack id; 0 = this is a root frame */
	uint32_t frame; /* frame id; meaningless for stack 0 */
};

/*
 * How a stack's unwinding ended, stored per stack: complete, or cut and why.
 * A cut stack also ends in a visible placeholder frame ([truncated],
 * [JIT caller not recovered], [stack not sampled]); this says which cause.
 */
enum stack_end {
	STACK_END_UNKNOWN = 0, /* not recorded (format version 1), or no sample ends here */
	STACK_END_COMPLETE, /* reached the outermost frame of its thread */
	STACK_END_COPY, /* the user stack copy ended before the stack did */
	STACK_END_ERROR, /* an unwind error, missing CFI or an implausible frame */
	STACK_END_DEPTH, /* a depth limit: the unwinder's or the kernel's perf_event_max_stack */
	STACK_END_JIT, /* JIT code whose caller was not recovered */
	STACK_END_NO_USER, /* the kernel part only: the user stack was not sampled */
	STACK_END_NOT_SAMPLED, /* no stack: a block whose switch sample is missing, or before attach */
	STACK_END_FP, /* a frame-pointer chain that stopped short of a thread's outermost frame */
	STACK_END_PY_CHANGED, /* an eval call's Python frames changed between the sample and the read */
	STACK_END_PY_UNREAD, /* an eval call's Python frames could not be read or shown to be its own */
	STACK_END_NOT_ENTRY, /* CFI found no caller where no thread starts (a stale return address) */
	STACK_END_JIT_GUESSED, /* through JIT code whose preamble could not be read: callers guessed */
	STACK_END_DROPPED, /* the recording fell behind: the sample was kept, its stack copy not */
	STACK_END_MAX,
};

/* "complete", "stack copy exhausted", ...: what a report calls each end. */
const char *profile__stack_end_name(enum stack_end end);

struct pf_thread {
	uint32_t pid;
	uint32_t tid;
	uint32_t comm; /* string id */
	uint32_t host; /* string id of the host it ran on; 0: the profile's own (meta.hostname) */
};

/*
 * A process's place in a distributed job, as its environment said when the
 * recorder first saw it (exec, fork, attach): its rank, local rank and the
 * job's size (PF_NO_RANK when not said), and which launcher's variables
 * said it. Keyed by (host, pid): a merged profile holds several hosts.
 */
#define PF_NO_RANK UINT32_MAX
struct pf_process {
	uint32_t host; /* string id; 0: the profile's own host */
	uint32_t pid;
	uint32_t rank, local_rank, world_size;
	uint32_t launcher; /* string id, e.g. "torchrun"; 0: none */
	/*
	 * Its container: the cgroup v2 path it ran in (string id; 0: not
	 * known, or the root cgroup "/") and the container its path names
	 * (string id: a runtime's 64-hex container id, else "pod:<uid>" of a
	 * Kubernetes pod; 0: none). The file's CTRS section.
	 */
	uint32_t cgroup, container;
};

struct pf_sample {
	uint64_t time; /* ns, CLOCK_MONOTONIC as the kernel stamps it */
	uint64_t weight; /* ns: sampling period (on-CPU) or blocked time */
	uint32_t stack; /* stack id */
	uint32_t thread; /* thread id */
	uint32_t kind; /* enum sample_kind */
};

struct pf_meta {
	uint64_t start_time; /* ns, first event; same clock as samples */
	uint64_t end_time; /* ns */
	uint64_t lost; /* samples lost to ring-buffer overflow */
	uint64_t freq; /* sampling frequency in Hz, 0 if period mode */
	uint32_t event; /* string id, e.g. "cpu-clock" */
	uint32_t command; /* string id, the recorded command line */
	uint32_t hostname; /* string id */
	/* ns: CLOCK_REALTIME - CLOCK_MONOTONIC when the recording began; 0 unknown */
	int64_t clock_offset;
	bool finalized; /* false if the recorder did not finish cleanly */
};

/*
 * A module whose code no symbol names in a share of the samples, as the
 * recorder found it (the HNTS section): what reports point at, once.
 */
struct pf_hint {
	uint32_t module; /* string id: the module's name, as its frames hold it */
	uint32_t build_id; /* string id: lower-case hex, or 0 */
	uint32_t path; /* string id: the file that was mapped, or 0 */
	uint64_t weight; /* of the samples with a frame in it that no symbol names */
	uint64_t total; /* of all the samples weighed (weight <= total) */
};

struct profile;

struct profile *profile__new(void);
void profile__free(struct profile *p);

/* Interning. Each returns the id (>= 0) or a negative errno. */
int64_t profile__string(struct profile *p, const char *s, size_t len);
int64_t profile__frame(struct profile *p, uint32_t name, uint32_t module, enum frame_kind kind);
int64_t profile__stack(struct profile *p, uint32_t parent, uint32_t frame);
/* Whether stack id is the one profile__stack(p, parent, frame) returns (no interning). */
bool profile__stack_is(const struct profile *p, uint32_t id, uint32_t parent, uint32_t frame);
int64_t profile__thread(struct profile *p, uint32_t pid, uint32_t tid, uint32_t comm);
/* The same on a host (string id; 0: the profile's own). */
int64_t profile__thread_on(struct profile *p, uint32_t host, uint32_t pid, uint32_t tid,
			   uint32_t comm);
int profile__add_sample(struct profile *p, const struct pf_sample *s);

/* Intern a frame with every field (ids must be valid string ids). */
int64_t profile__frame_full(struct profile *p, const struct pf_frame *f);
/*
 * A new frame that interning never returns, however equal its fields: a
 * placeholder that profile__expand_frames replaces later.
 */
int64_t profile__frame_unique(struct profile *p, const struct pf_frame *f);

/* Convenience: intern a frame by C strings. */
int64_t profile__frame_str(struct profile *p, const char *name, const char *module,
			   enum frame_kind kind);

/* Read access. Ids passed in must be < the matching count. */
size_t profile__nr_strings(const struct profile *p);
size_t profile__nr_frames(const struct profile *p);
size_t profile__nr_stacks(const struct profile *p); /* includes stack 0 */
size_t profile__nr_threads(const struct profile *p);
size_t profile__nr_samples(const struct profile *p); /* spilled ones included */

const char *profile__str(const struct profile *p, uint32_t id); /* NUL-terminated */
size_t profile__str_len(const struct profile *p, uint32_t id);
const struct pf_frame *profile__get_frame(const struct profile *p, uint32_t id);
const struct pf_stack *profile__get_stack(const struct profile *p, uint32_t id);
const struct pf_thread *profile__get_thread(const struct profile *p, uint32_t id);
/* The host a thread ran on: its own, or the profile's (string id). */
uint32_t profile__thread_host(const struct profile *p, const struct pf_thread *t);

/*
 * Processes' ranks. profile__set_process adds or replaces the entry of
 * (proc->host, proc->pid); string ids must be valid. 0, -EINVAL, -ENOMEM.
 * profile__process finds one (host 0 and the profile's own host name are
 * the same host), or NULL.
 */
int profile__set_process(struct profile *p, const struct pf_process *proc);
size_t profile__nr_processes(const struct profile *p);
const struct pf_process *profile__get_process(const struct profile *p, size_t i);
const struct pf_process *profile__process(const struct profile *p, uint32_t host, uint32_t pid);
/*
 * What a thread's process is labelled by as a container: its container id
 * when its cgroup names one, else its cgroup path; NULL when neither.
 */
const char *profile__container_label(const struct profile *p, const struct pf_process *pr);
/* The process entry of a thread's process, or NULL. */
const struct pf_process *profile__thread_process(const struct profile *p,
						 const struct pf_thread *t);

/* Only for i >= profile__nr_spilled(p): spilled samples are not in memory. */
const struct pf_sample *profile__get_sample(const struct profile *p, size_t i);
/*
 * The deepest stack a profile holds: the recorder cuts deeper ones (with a
 * [truncated] root, or at an inline level after naming) and the reader
 * refuses them, so no report's work grows with a hostile file's depth.
 */
#define PROFILE_MAX_DEPTH 8192

/* Depth of a stack: number of frames from root to leaf (0 for stack 0). */
uint32_t profile__stack_depth(const struct profile *p, uint32_t id);
/*
 * The frame ids of a stack, root first, into *frames (grown as needed, *cap
 * its capacity). Checks that parent ids decrease, so a corrupt table cannot
 * loop. Returns the depth, -EINVAL or -ENOMEM.
 */
int64_t profile__stack_frames(const struct profile *p, uint32_t stack, uint32_t **frames,
			      size_t *cap);

/*
 * How the samples whose leaf is `stack` were unwound. The first end set
 * stays (stacks that only a cause of [truncated] tells apart may share a
 * node); STACK_END_UNKNOWN never overrides. 0 or -EINVAL.
 */
int profile__set_stack_end(struct profile *p, uint32_t stack, enum stack_end end);
enum stack_end profile__stack_end(const struct profile *p, uint32_t id);

/*
 * Bounded memory for long recordings. With a threshold > 0, once that many
 * samples are held in memory, the next profile__add_sample() first moves them
 * to an unlinked temporary file in `dir` (or $TMPDIR, or /tmp, when dir is
 * NULL or refuses it); if that fails it returns the error and adds nothing.
 * profile__write() and profile__relabel() read spilled samples back, and the
 * file disappears with the profile (or with the process). threshold 0, the
 * default, never spills. Profiles loaded by profile__read() never spill, so
 * reports may use profile__get_sample() on every sample.
 */
int profile__set_spill(struct profile *p, size_t threshold, const char *dir);
/*
 * Calls fn for every sample in order, spilled ones included, until it
 * returns non-zero; returns that, or a negative errno from reading them back.
 */
typedef int (*profile_sample_fn)(void *ctx, const struct pf_sample *s);
int profile__foreach_sample(const struct profile *p, profile_sample_fn fn, void *ctx);
uint64_t profile__nr_spilled(const struct profile *p);

/*
 * A copy of p in which each frame's source location is folded into its
 * name ("name (file:line)", with_lines) or dropped (not with_lines), and the
 * frames, stacks and samples that become equal are merged: reports draw one
 * frame per function unless asked for lines. NULL when out of memory or when
 * spilled samples cannot be read back.
 */
struct profile *profile__relabel(const struct profile *p, bool with_lines);
/* Whether any frame has a source location, i.e. whether relabelling changes anything. */
bool profile__has_lines(const struct profile *p);

/*
 * Replace frames by chains of frames, in place. For each frame some stack
 * uses, fn writes the frames it becomes, root-first, into out (at most max;
 * it may intern new frames, and writing just `frame` keeps it) and returns
 * how many (>= 1), or a negative errno. Stacks are rebuilt, stacks that
 * become equal are merged, samples (spilled ones too) are re-pointed, and
 * frames that no stack uses any more are dropped (frame ids change; string
 * and thread ids do not). Used to name frames only once recording is over.
 * 0, or a negative errno: from fn or out of memory with the profile as it
 * was (frames fn interned stay), from reading or writing spilled samples
 * with the profile fit only to be freed.
 */
typedef int (*profile_expand_fn)(void *ctx, uint32_t frame, uint32_t *out, size_t max);
int profile__expand_frames(struct profile *p, profile_expand_fn fn, void *ctx);

struct pf_meta *profile__meta(struct profile *p);
const struct pf_meta *profile__cmeta(const struct profile *p);

/*
 * File format. profile__write() writes to a temporary file next to path
 * and renames it over path (an existing symlink at path is replaced, not
 * followed). profile__read() validates every count and offset; on failure
 * it returns a negative errno and, if err is not NULL, a static
 * description of what is wrong and the byte offset where it was found.
 */
struct profile_read_error {
	const char *what; /* e.g. "bad magic", "truncated samples section" */
	uint64_t offset; /* offset in the file (or in the decompressed payload) */
	bool in_payload; /* offset counts in the decompressed payload */
};

int profile__write(const struct profile *p, const char *path);
int profile__read(const char *path, struct profile **out, struct profile_read_error *err);
/* The same, from memory (used by tests and by read). */
int profile__read_mem(const uint8_t *buf, size_t len, struct profile **out,
		      struct profile_read_error *err);

#define PROFILE_MAGIC "DLFLAME\x01"
#define PROFILE_JOURNAL_MAGIC "DLFJRNL\x01"

/*
 * The journal: while a recording runs, what it holds so far is appended
 * at the output path a few times a second, so that a recorder killed with
 * SIGKILL leaves a file profile__read reads (not finalized). The profile
 * written at the end replaces it (profile__write renames over it).
 *
 * Frames the recorder names only at the end are journaled as locations:
 * loc_fn says, for a frame id, whether it is one and where it points.
 */
struct pf_journal_loc {
	const char *path; /* the module file */
	const char *build_id; /* hex, or NULL */
	uint64_t offset; /* in the file; the address for a kernel frame */
	bool kernel;
};
typedef bool (*profile_loc_fn)(void *ctx, uint32_t frame, struct pf_journal_loc *loc);
struct pf_journal;
/* -ENOTSUP when path is not a regular file's (a device, a FIFO): no journal. */
int profile__journal_open(const struct profile *p, const char *path, struct pf_journal **out);
/*
 * pending: the samples the recorder holds back for now (stored later, when
 * more is known), as they would be stored now; each sync's replace the last
 * one's, and a journal read back ends with the last good sync's.
 */
int profile__journal_sync(struct pf_journal *j, profile_loc_fn fn, void *ctx,
			  const struct pf_sample *pending, size_t nr_pending);
void profile__journal_close(struct pf_journal *j);

/* A frame of a journal read back that the recorder had not named yet. */
struct pf_loc {
	uint32_t frame;
	uint32_t path; /* string ids */
	uint32_t build_id; /* 0: none */
	uint64_t offset;
	bool kernel;
};
size_t profile__nr_locs(const struct profile *p);
const struct pf_loc *profile__get_loc(const struct profile *p, size_t i);
/* The boot id of the recording (a journal's; string id, 0 unknown). */
uint32_t profile__boot_id(const struct profile *p);
/*
 * The symbol hints the recorder stored (replacing any; string ids must be
 * the profile's): from then on the profile has hints, even if none. 0,
 * -EINVAL for a bad string id or weight, -ENOMEM.
 */
int profile__set_hints(struct profile *p, const struct pf_hint *h, size_t n);
/* Whether hints were stored (not for an older file, a journal, an import); *h, *n: them. */
bool profile__hints(const struct profile *p, const struct pf_hint **h, size_t *n);
/*
 * 2: stack ends (ENDS section). Version 1 files still read, their stacks' ends unknown.
 * 3: call samples (SAMPLE_CALL), page-fault samples (SAMPLE_FAULT), resident-set samples
 *    (SAMPLE_RSS); the CRC covers the header.
 * 4: a host per thread, processes' ranks and the clock offset (JOBS section): profiles
 *    of several hosts (dlflame merge).
 */
#define PROFILE_VERSION 4
/* The version of the file p was read from (PROFILE_VERSION for a new profile). */
uint32_t profile__file_version(const struct profile *p);

#endif
