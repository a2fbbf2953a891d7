/* SPDX-License-Identifier: MIT */
/*
 * Reads every byte a decoded record points to, so that a pointer or a
 * length the decoder let through wrong is a sanitizer report, not silence.
 */
#ifndef DLFLAME_FUZZ_REC_TOUCH_H
#define DLFLAME_FUZZ_REC_TOUCH_H

#include <string.h>

#include "sampler/sampler.h"

static inline uint64_t rec_touch(const struct rec *r)
{
	uint64_t sum = r->time ^ r->id ^ r->tid;

	switch (r->type) {
	case REC_SAMPLE:
		for (uint64_t i = 0; i < r->sample.nr; i++)
			sum += r->sample.ips[i];
		for (uint64_t i = 0; i < r->sample.stack_size; i++)
			sum += r->sample.stack[i];
		for (int i = 0; i < REC_REGS_MAX; i++)
			if (r->sample.uregs.mask & (1ull << i))
				sum += r->sample.uregs.regs[i];
		break;
	case REC_MMAP2:
		sum += strlen(r->mmap2.filename);
		for (unsigned i = 0; i < r->mmap2.build_id_size && i < sizeof(r->mmap2.build_id);
		     i++)
			sum += r->mmap2.build_id[i];
		break;
	case REC_COMM:
		sum += strlen(r->comm.comm);
		break;
	default:
		break;
	}
	return sum;
}

#endif
