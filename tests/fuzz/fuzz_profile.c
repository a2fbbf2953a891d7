/* SPDX-License-Identifier: MIT */
/*
 * The profile reader (profile/file.c): a dlflame.data file as input. A
 * profile that reads must be whole: every id it holds resolves, every stack
 * walks to the root, and relabelling it works.
 */
#include <stdlib.h>

#include "profile/profile.h"
#include "tests/fuzz/fuzz.h"

static volatile uint64_t sink;

static void walk(const struct profile *p)
{
	uint32_t *frames = NULL;
	size_t cap = 0;
	uint64_t sum = 0;

	for (size_t i = 0; i < profile__nr_strings(p); i++)
		sum += profile__str_len(p, (uint32_t)i) + (uint8_t)profile__str(p, (uint32_t)i)[0];
	for (size_t i = 0; i < profile__nr_frames(p); i++) {
		const struct pf_frame *f = profile__get_frame(p, (uint32_t)i);

		sum += profile__str_len(p, f->name) + profile__str_len(p, f->module) +
		       profile__str_len(p, f->file) + profile__str_len(p, f->build_id);
	}
	for (size_t i = 0; i < profile__nr_stacks(p); i++) {
		int64_t n = profile__stack_frames(p, (uint32_t)i, &frames, &cap);

		for (int64_t j = 0; j < n; j++)
			sum += profile__get_frame(p, frames[j])->kind;
		sum += profile__stack_depth(p, (uint32_t)i) + profile__stack_end(p, (uint32_t)i);
	}
	for (size_t i = 0; i < profile__nr_threads(p); i++)
		sum += profile__str_len(p, profile__get_thread(p, (uint32_t)i)->comm);
	for (size_t i = 0; i < profile__nr_samples(p); i++) {
		const struct pf_sample *s = profile__get_sample(p, i);

		sum += profile__get_thread(p, s->thread)->tid + s->stack + s->kind;
	}
	free(frames);
	sink = sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile_read_error err;
	uint8_t *file = NULL;
	size_t len;
	struct profile *p = NULL, *q;

	file = fuzz_profile_file(data, size, &len);
	if (!file || profile__read_mem(file, len, &p, &err) < 0) {
		free(file);
		return 0;
	}
	walk(p);
	q = profile__relabel(p, profile__has_lines(p));
	if (q) {
		walk(q);
		profile__free(q);
	}
	profile__free(p);
	free(file);
	return 0;
}
