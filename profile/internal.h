/* SPDX-License-Identifier: MIT */
/* The profile's tables, shared by profile.c and file.c only. */
#ifndef DLFLAME_PROFILE_INTERNAL_H
#define DLFLAME_PROFILE_INTERNAL_H

#include "profile.h"
#include "util/util.h"

struct pf_string {
	uint64_t off; /* into pool */
	uint64_t len; /* without the terminating NUL */
};

struct profile {
	char *pool; /* strings, each NUL-terminated */
	size_t pool_len, pool_cap;

	struct pf_string *strings;
	size_t nr_strings, cap_strings;
	struct pf_frame *frames;
	size_t nr_frames, cap_frames;
	struct pf_stack *stacks;
	uint32_t *depths;
	size_t nr_stacks, cap_stacks, cap_depths;
	struct pf_thread *threads;
	size_t nr_threads, cap_threads;
	struct pf_sample *samples;
	size_t nr_samples, cap_samples;

	/* interning: hash of the key -> id; collisions chained by probing on key hash */
	struct u64map string_ids, frame_ids, stack_ids, thread_ids;

	struct pf_meta meta;
};

#endif
