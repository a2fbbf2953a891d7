/* SPDX-License-Identifier: MIT */
/*
 * Decoded records -> symbolized stacks in a profile. One pipeline serves
 * every source of records (a live recording now, perf.data later).
 */
#ifndef DLFLAME_PIPELINE_H
#define DLFLAME_PIPELINE_H

#include <stdint.h>

#include "profile/profile.h"
#include "sampler/sampler.h"
#include "symbolize/symbolize.h"
#include "util/util.h"

#define PIPELINE_MAX_DEPTH 1024 /* user frames unwound per sample */
#define PIPELINE_MAX_INLINE 16  /* inline levels per address */

struct pipeline {
	struct profile *prof;
	struct symbolizer *sym;
	struct u64map comms; /* tid -> comm string id */
	uint32_t max_stack;  /* kernel.perf_event_max_stack: a chain this long was cut */
	uint64_t first_time, last_time;
	uint64_t samples, lost, truncated;
	uint64_t frames_scratch_cap;
	uint32_t *frames; /* scratch: frame ids of one sample, leaf first */
	int err;          /* first error that stopped the pipeline */
};

int pipeline__init(struct pipeline *pl, struct profile *prof, struct symbolizer *sym);
void pipeline__exit(struct pipeline *pl);
/* A rec_cb: feeds one record. Returns 0 or a negative errno (out of memory). */
int pipeline__record(void *pl, const struct rec *r);

#endif
