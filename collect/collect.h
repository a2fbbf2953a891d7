/* SPDX-License-Identifier: MIT */
/*
 * The collection stage: decoded records -> stacks and samples in a profile.
 *
 * It owns what a recording means: each sample's stack, built from the
 * kernel's callchain and one user-stack source (frame pointers, or DWARF
 * unwinding of the copied stack), with how it ended; off-CPU time from
 * context switches (blocked, preempted, blocked before an attach, still
 * blocked at the end); naming the frames once the recording is over. One
 * collector serves a live recording (record, offcpu) and a perf.data file
 * alike: collector__record is the record callback of both readers.
 *
 * Library code: returns 0 or a negative errno, never prints.
 */
#ifndef DLFLAME_COLLECT_H
#define DLFLAME_COLLECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/profile.h"
#include "sampler/sampler.h"
#include "symbolize/symbolize.h"

/* The frame under which attach charges a thread blocked before the recording began. */
#define BLOCKED_BEFORE_FRAME "[blocked before recording]"
/* The stack of a block whose context-switch sample is missing (lost, or kernel excluded). */
#define NO_STACK_FRAME "[stack not sampled]"

/* Records that could not be used, by kind; each count is shown to the user. */
enum collect_drop {
	COLLECT_DROP_SAMPLE, /* an on-CPU sample not stored */
	COLLECT_DROP_SWITCH, /* a context switch (sample or record) not accounted */
	COLLECT_DROP_MAP, /* a mapping not tracked: its addresses may be [unknown] */
	COLLECT_DROP_TASK, /* a comm, fork or exit not tracked */
	COLLECT_DROP_MAX,
};

/* Python frames (collector__enable_python). */
struct collect_python_stats {
	uint64_t processes; /* processes found running a CPython whose frames are read */
	uint64_t samples; /* stacks with eval frames, on and off CPU */
	uint64_t groups_ok, groups_changed, groups_unread; /* eval calls shown, or placeholders */
	uint64_t snapshot_failures; /* reads that found the chain changing or unreadable */
	uint64_t snapshots; /* frame chains read */
	uint64_t delay_sum_ns, delay_max_ns; /* from each sample to its read */
	/* newest frames checked against the sampled registers, and found to have changed */
	uint64_t leaf_checks, leaf_mismatches;
	uint64_t failed_processes; /* Python processes whose frames cannot be read */
	uint32_t failed_pid; /* the first of them: its pid, why (negative errno), which version */
	int failed_err;
	uint32_t failed_version; /* PY_VERSION_HEX, 0 if not known */
	bool failed_free_threaded; /* it is a free-threaded build (not read) */
	/* frames copied at the sample by pybpf/'s program (collector__python_bpf) */
	uint64_t bpf_processes; /* processes whose frames came from it */
	uint64_t bpf_records; /* its records read */
	uint64_t bpf_joined; /* samples that had their record */
	uint64_t bpf_failed; /* records whose walk stopped short or whose code could not be named */
	uint64_t bpf_unjoined; /* records whose sample never came (lost) */
	uint64_t bpf_missing; /* samples of such a process that had no record */
	uint64_t bpf_unnamed; /* records with a code object freed before it was named */
	uint64_t bpf_before; /* its samples before the program was told of it (read after) */
};

struct collect_stats {
	uint64_t first_time, last_time; /* of the records seen (CLOCK_MONOTONIC ns) */
	uint64_t samples; /* on-CPU samples stored */
	uint64_t lost; /* records the kernel lost (PERF_RECORD_LOST) */
	uint64_t truncated; /* stacks cut short, drawn with [truncated] */
	uint64_t oncpu_ends[STACK_END_MAX]; /* on-CPU samples by how their stack ended */
	uint64_t offcpu_end_ns[STACK_END_MAX]; /* blocked and runqueue ns, likewise */
	uint64_t offcpu_samples; /* blocks stored (voluntary and runqueue) */
	uint64_t offcpu_ns, runq_ns; /* their total weights */
	uint64_t switch_unmatched; /* switch-ins without a switch-out (records lost) */
	uint64_t dropped[COLLECT_DROP_MAX];
	int drop_err[COLLECT_DROP_MAX]; /* the first error of each kind (negative errno) */
	struct collect_python_stats py;
	/* probed calls: stored, entries seen, never returned, records that paired nothing */
	uint64_t calls, call_entries, calls_unfinished, calls_unpaired;
	uint64_t fault_samples, fault_pages; /* page-fault samples, and the faults they stand for */
	/* JIT samples unwound again later, and of them those whose caller was then recovered */
	uint64_t deferred, deferred_recovered;
};

struct collector;

/* NULL when out of memory. The collector uses prof and sym; it owns neither. */
struct collector *collector__new(struct profile *prof, struct symbolizer *sym);
void collector__free(struct collector *c); /* accepts NULL */

/*
 * A rec_cb: feeds one record, in time order. Returns 0, or -ENOMEM, which
 * stops the recording; any other failure drops the record and is counted
 * in the stats.
 */
int collector__record(void *c, const struct rec *r);

/*
 * Attach: the events were opened at start_time (CLOCK_MONOTONIC ns). A
 * thread whose first record is a switch-in was blocked then, and one that
 * /proc saw sleeping and that has no record at all was blocked throughout:
 * they are charged from start_time. Call before the first record.
 */
void collector__set_start(struct collector *c, uint64_t start_time);
/*
 * Attach: a thread that existed when the recording began, as /proc saw it
 * after the events were opened: sleeping or not, where (user PC from
 * /proc/PID/task/TID/syscall, 0 if unknown) and on what (its wchan, NULL
 * if unknown). Name it with collector__set_comm first.
 */
int collector__attached_thread(struct collector *c, uint32_t pid, uint32_t tid, bool blocked,
			       uint64_t pc, const char *wchan);
/*
 * Python frames: read each sampled thread's Python frames (CPython
 * 3.11-3.14 and later) as soon as the sampler reads its sample (collector__early must
 * be the sampler's early callback), and show them in place of the
 * interpreter's eval frames in DWARF stacks. A live recording only: the
 * processes must be running. 0 or -ENOMEM.
 */
int collector__enable_python(struct collector *c);

/*
 * Told where a thread's stack ends for its walks (DWARF mode): top, the
 * highest end of the copy that any walk of its that reached the thread's
 * entry read; 0 when a walk of a copy cut there (rec_sample.stack_cut) ran
 * out, until a whole walk of an uncut copy says it again. The sampler then
 * keeps no more of its copies (sampler__stack_top). Called from
 * collector__record.
 */
typedef void (*collect_stack_top_cb)(void *ctx, uint32_t tid, uint64_t top);
void collector__on_stack_top(struct collector *c, collect_stack_top_cb cb, void *ctx);
/*
 * Take Python frames from b's records (pybpf/: copied by a BPF program at
 * each sample; b is attached to the sampler's events and stays the
 * caller's) for every Python process found from now on, instead of
 * reading them after the sample. NULL: read them after the sample. After
 * collector__enable_python.
 */
struct pybpf;
void collector__python_bpf(struct collector *c, struct pybpf *b);
/* A rec_early_cb: true while some process runs a Python whose frames are read. */
enum early_want collector__early(void *c, const struct rec *r);

/*
 * Ranks: read each process's rank in its job from its environment
 * (/proc/PID/environ) when it execs, keep its parent's when it forks
 * (collector__enable_ranks: a live recording only), and for a process
 * that existed before an attach (collector__read_rank). Into the
 * profile's processes. 0 or -ENOMEM; a process with no rank adds nothing.
 */
void collector__enable_ranks(struct collector *c);
int collector__read_rank(struct collector *c, uint32_t pid);
/*
 * The container a cgroup v2 path names: the 64-hex id of a runtime's scope
 * or directory (docker-ID.scope, cri-containerd-ID.scope, crio-ID.scope,
 * libpod-ID.scope, /docker/ID), innermost first, else a Kubernetes pod's
 * uid as "pod:UID" (kubepods-...-podUID.slice, /kubepods/.../podUID).
 * False when it names none. out: at least 80 bytes.
 */
bool collect__container_of_cgroup(const char *path, char *out, size_t size);
/* A launched process's rank from the environment it was given (NULL-terminated). */
int collector__rank_from_envp(struct collector *c, uint32_t pid, char *const envp[]);

/* What a launcher's variables say of a process: PF_NO_RANK where they say nothing. */
struct rank_env {
	uint32_t rank, local_rank, world_size;
	const char *launcher; /* "torchrun", "Open MPI", "MPICH/Intel MPI" or "Slurm" */
};
/*
 * The rank an environment block (NUL-separated VAR=value, as in
 * /proc/PID/environ) gives: true and *out, or false when none.
 */
bool collect__rank_from_env(const char *env, size_t len, struct rank_env *out);

/* Name a thread before its first record (attach: from /proc/PID/task/TID/comm). */
int collector__set_comm(struct collector *c, uint32_t tid, const char *comm);

/*
 * The recording ended at end_time: threads still off the CPU are charged
 * up to then, and the frames left for later are named. 0 or a negative
 * errno; call it even after an error stopped the records, or the profile
 * keeps placeholder frames.
 */
int collector__finish(struct collector *c, uint64_t end_time);

const struct collect_stats *collector__stats(const struct collector *c);

/*
 * A profile_loc_fn for the journal (profile__journal_sync): the frames
 * named only when the recording ends, as the module file and offset (or
 * kernel address) they stand for. Between records, on the recording's
 * thread.
 */
bool collector__journal_loc(void *c, uint32_t frame, struct pf_journal_loc *loc);

/*
 * For the journal: the samples held back for now (JIT samples whose caller
 * is not known yet, see collect.c), each on its stack as it would be stored
 * if the recording ended now. *out is the collector's, good until the next
 * record; 0 or a negative errno.
 */
int collector__pending(struct collector *c, const struct pf_sample **out, size_t *n);

struct collect_recover_stats {
	uint64_t frames_named; /* from the module files still on disk */
	uint64_t frames_unnamed; /* their file is gone or was replaced */
	uint64_t modules_missing;
};
/*
 * A journal read back (a recorder killed before it named its frames): each
 * location named as the recorder would have, from the files still on disk
 * (checked by build-id); kernel addresses by kallsyms only when same_boot
 * (and sym has kallsyms loaded). 0 or a negative errno.
 */
int collector__name_recovered(struct profile *p, struct symbolizer *sym, bool same_boot,
			      struct collect_recover_stats *st);

#endif
