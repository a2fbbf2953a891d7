/* SPDX-License-Identifier: MIT */
/*
 * The filters and transforms every report takes (--pid, --tid, --comm,
 * --time, --min-block, --per-thread, --reverse, --complete, --cut, runqueue
 * frames), applied by copying the chosen samples into a new profile, so
 * that each output only ever sees a plain profile.
 *
 * Sample times: an on-CPU sample at time t stands for the period that ends
 * at t; an off-CPU or runqueue sample at time t stands for [t, t + weight),
 * t being the switch-out.
 */
#ifndef DLFLAME_PROFILE_FILTER_H
#define DLFLAME_PROFILE_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/profile.h"

/* The frame that profile__filter() puts on top of runqueue samples. */
#define RUNQUEUE_FRAME "[runqueue]"

/*
 * Filters and transforms that every report takes. Thread filters of
 * different kinds combine with AND, the values of one kind with OR.
 */
struct profile_filter {
	const uint32_t *pids; /* keep only these processes (nr_pids 0: all) */
	size_t nr_pids;
	const uint32_t *tids; /* keep only these threads */
	size_t nr_tids;
	const char *const *comms; /* keep only threads with one of these names */
	size_t nr_comms;
	bool has_time; /* keep [time_start, time_end) only */
	uint64_t time_start; /* ns from the profile's start */
	uint64_t time_end; /* ns from the profile's start; UINT64_MAX: to the end */
	uint64_t min_block; /* ns: off-CPU and runqueue samples shorter are dropped */
	bool per_thread; /* root each thread's stacks under "comm-PID/TID" */
	bool per_process; /* name each thread "comm-PID" (with its container): top --by process */
	bool complete_only; /* keep samples whose stack is complete */
	bool cut_only; /* keep samples whose stack was cut (or whose end is unknown) */
	bool reverse; /* stacks leaf first: the callers of each leaf */
	/*
	 * Python view: leave out the native frames of the interpreter itself
	 * (modules whose named frames are CPython's API, Py* and _Py*) in the
	 * stacks of profiles that have Python frames, as py-spy shows them.
	 */
	bool python;
	/*
	 * Warm-up skipped: in each process, only what happened from the start
	 * of its from_call_n-th call (1: the first) of probed function
	 * from_call on (a process with fewer calls: nothing).
	 */
	const char *from_call;
	uint64_t from_call_n;
	/* keep only processes with one of these ranks (pf_process.rank) */
	const uint32_t *ranks;
	size_t nr_ranks;
	/* root each rank's stacks under "rank N" (a process with no rank: "comm-PID") */
	bool per_rank;
	/*
	 * For merging (profile__copy into a profile of several hosts): every
	 * thread and process gets its host's name (the source's own host
	 * included), and sample times move by time_shift ns.
	 */
	bool name_hosts;
	int64_t time_shift;
};

/*
 * A new profile with only the samples of the kinds chosen (kinds[k]: keep
 * samples of kind k) that f keeps, transformed as f says (f may be NULL:
 * no filter); runqueue samples (when kept) get a RUNQUEUE_FRAME leaf.
 * Off-CPU blocks that straddle the time range are clipped to it. *out is
 * NULL when nothing needs to change: then use p as it is (a reader still
 * skips the kinds not chosen). Frees nothing of p; the caller frees *out
 * with profile__free(). 0, -EINVAL (an empty time range, a broken
 * profile), -ENOENT (f->from_call names no function with calls in p) or
 * -ENOMEM.
 */
int profile__filter(const struct profile *p, const bool kinds[SAMPLE_KIND_MAX],
		    const struct profile_filter *f, struct profile **out);

/*
 * Append the samples of src chosen by kinds and f to dst, interning src's
 * names, frames, stacks and threads into dst as needed, lazily: a filtered
 * view of a long recording copies only the part it shows. With rq_frames,
 * runqueue samples get a RUNQUEUE_FRAME leaf. Copies no metadata; copies
 * src's processes (their ranks) whole.
 */
int profile__copy(struct profile *dst, const struct profile *src, const bool kinds[SAMPLE_KIND_MAX],
		  const struct profile_filter *f, bool rq_frames);

/*
 * Merging (dlflame merge): profiles of one job's hosts into one. Call
 * profile__merge for each source in turn on a new profile (first: the
 * first source, whose clock the others' times move onto). Threads and
 * processes keep their hosts' names; metadata is joined (commands, lost
 * counts, start and end). 0 or a negative errno.
 */
int profile__merge(struct profile *dst, const struct profile *src, bool first);
/*
 * Whether two sources share an identity a merge must not join: a process
 * (the same pid on the same host name: the same recording twice?) or a
 * rank. -EEXIST and *clash say which; 0 when none; -ENOMEM.
 */
struct profile_clash {
	bool process; /* else a rank */
	uint32_t pid, rank;
	const char *host, *other_host; /* names, in the sources' string tables */
};
int profile__merge_clash(const struct profile *a, const struct profile *b,
			 struct profile_clash *clash);

/* Where sample times count from: the recorded start, or the first sample. */
uint64_t profile__time_base(const struct profile *p);

#endif
