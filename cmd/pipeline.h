/* SPDX-License-Identifier: MIT */
/*
 * Decoded records -> symbolized stacks in a profile. One pipeline serves
 * every source of records (a live recording now, perf.data later).
 */
#ifndef DLFLAME_PIPELINE_H
#define DLFLAME_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile/profile.h"
#include "sampler/sampler.h"
#include "symbolize/symbolize.h"
#include "util/util.h"

#define PIPELINE_MAX_DEPTH 1024 /* user frames unwound per sample */
#define PIPELINE_MAX_INLINE 16 /* inline levels per address */

/* Off-CPU state of one thread, between its switch-out and its switch-in. */
struct offcpu_thread {
	uint64_t out_time; /* when it left the CPU (valid while out) */
	uint32_t stack; /* where it blocked: the stack of its last context-switch sample */
	uint32_t thread; /* profile thread id */
	bool has_stack; /* a context-switch sample came since it last switched in */
	bool out; /* off the CPU now */
	bool preempt; /* ... because it was preempted (runnable, waiting for a CPU) */
	bool seen; /* a record of it arrived (or it was created while recording) */
	bool dead; /* it exited: later records of this tid are ignored */
	/* attach mode: what /proc said of it when the recording began */
	bool attached; /* it existed then */
	bool blocked_at_start; /* sleeping (S or D) */
	bool has_before_stack;
	uint32_t before_stack; /* BLOCKED_BEFORE_FRAME, its user PC and kernel wait channel */
};

/* The frame under which attach charges a thread blocked before the recording began. */
#define BLOCKED_BEFORE_FRAME "[blocked before recording]"
/* The stack of a block whose context-switch sample is missing (lost, or kernel excluded). */
#define NO_STACK_FRAME "[stack not sampled]"

struct pipeline {
	struct profile *prof;
	struct symbolizer *sym;
	struct u64map comms; /* tid -> comm string id */
	struct u64map str_ids; /* address of a symbolizer string -> profile string id */
	uint32_t max_stack; /* kernel.perf_event_max_stack: a chain this long was cut */
	uint64_t first_time, last_time;
	uint64_t samples, lost, truncated;
	uint64_t oncpu_ends[STACK_END_MAX]; /* on-CPU samples by how their stack ended */
	uint64_t offcpu_end_ns[STACK_END_MAX]; /* blocked and runqueue ns, likewise */
	uint64_t frames_scratch_cap;
	uint32_t *frames; /* scratch: frame ids of one sample, leaf first */
	int err; /* first error that stopped the pipeline */

	/*
	 * Kernel addresses and addresses in module files are named once
	 * recording is over, so that reading kallsyms, symbol tables and DWARF
	 * does not compete with the target: until then each distinct location
	 * is a placeholder frame (FRAME_SPECIAL, name 0, line = its index in
	 * locs + 1).
	 */
	struct u64map loc_frames; /* module << 40 | offset -> placeholder frame id */
	struct u64map kernel_frames; /* kernel address -> placeholder frame id */
	struct sym_loc *locs;
	size_t nr_locs, locs_cap;

	/*
	 * Attach mode: when the events were opened. A thread whose first record
	 * is a switch-in was blocked then, and one that /proc saw sleeping and
	 * that has no record at all was blocked throughout: they are charged
	 * from here. Their stack at that time is unknowable (nothing copies a
	 * blocked thread's stack); they are drawn under BLOCKED_BEFORE_FRAME,
	 * with the user PC and kernel wait channel /proc gives. 0 at launch.
	 */
	uint64_t start_time;
	struct u64map offcpu_idx; /* tid -> index in ot[] */
	struct offcpu_thread *ot;
	size_t nr_ot, ot_cap;
	uint64_t offcpu_samples; /* blocks emitted (voluntary and runqueue) */
	uint64_t offcpu_ns, runq_ns; /* their total weights */
	uint64_t switch_unmatched; /* switch-ins without a switch-out (records lost) */
};

int pipeline__init(struct pipeline *pl, struct profile *prof, struct symbolizer *sym);
void pipeline__exit(struct pipeline *pl);
/* A rec_cb: feeds one record. Returns 0 or a negative errno (out of memory). */
int pipeline__record(void *pl, const struct rec *r);
/*
 * The recording ended at end_time (CLOCK_MONOTONIC ns, as the records):
 * threads still off the CPU are charged up to then, and the frames left
 * for later are named. 0 or a negative errno; call it even after an error
 * stopped the records, or the profile keeps placeholder frames.
 */
int pipeline__finish(struct pipeline *pl, uint64_t end_time);
/*
 * Attach: a thread that existed when the recording began, as /proc saw it
 * after the events were opened: sleeping or not, where (user PC from
 * /proc/PID/task/TID/syscall, 0 if unknown) and on what (its wchan, NULL if
 * unknown). Name it with pipeline__set_comm first.
 */
int pipeline__attached_thread(struct pipeline *pl, uint32_t pid, uint32_t tid, bool blocked,
			      uint64_t pc, const char *wchan);
/* Name a thread before its first record (attach: from /proc/PID/task/TID/comm). */
int pipeline__set_comm(struct pipeline *pl, uint32_t tid, const char *comm);

/*
 * A recording, as `record` and `offcpu` run it: sampler -> pipeline ->
 * profile. The functions print their own errors (this is cmd/) and return
 * an exit code, except session__run.
 */
struct session {
	struct sampler *s;
	struct symbolizer *sym;
	struct profile *prof;
	struct pipeline pl;
	bool pipeline_ready;
	bool attached, offcpu;
	bool targets_gone; /* attach: the recording ended because they exited */
	uint64_t end_time; /* CLOCK_MONOTONIC ns when the recording stopped */
	char *command; /* attach: the first target's command line, or NULL */
};

int session__open(struct session *ss, const struct sampler_opts *so);
void session__close(struct session *ss); /* also after a failed open */
int session__attach(struct session *ss, const pid_t *pids, size_t n, bool threads_only);
/* SIGINT, SIGTERM and SIGHUP stop session__run (the profile is still written). */
void session__handle_signals(void);
int session__run(struct session *ss, pid_t child, uint64_t duration_ns, int *status,
		 bool *child_done);
void session__fill_meta(struct session *ss, uint64_t freq, const char *command);
void session__warnings(struct session *ss);

/* 0 or a negative errno: whether a file could be created at path. */
int check_output_dir(const char *path);

#endif
