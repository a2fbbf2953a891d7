/* SPDX-License-Identifier: MIT */
/*
 * A long recording made of a short real one, for bench/timeline_bench.sh:
 * the samples of IN repeated, each round moved by IN's span, until OUT
 * holds SAMPLES on-CPU samples (as record's summary counts them; the last
 * rounds cut by time), with the off-CPU ones of the same stretches. The stacks, threads
 * and the way stacks follow each other are the real recording's; only the
 * length is made up.
 *
 *   tile_profile IN OUT SAMPLES
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/filter.h"
#include "profile/profile.h"

static int die(const char *what, int err)
{
	fprintf(stderr, "tile_profile: %s (%s)\n", what, strerror(err < 0 ? -err : err));
	return 1;
}

int main(int argc, char **argv)
{
	bool kinds[SAMPLE_KIND_MAX];
	struct profile *in = NULL, *out;
	struct profile_read_error rerr = { 0 };
	const struct pf_meta *mi;
	struct pf_meta *mo;
	unsigned long long want;
	uint64_t span, base, first = UINT64_MAX, last = 0, per_round = 0, have = 0;
	int64_t s;
	int err;

	if (argc != 4 || !(want = strtoull(argv[3], NULL, 10))) {
		fprintf(stderr, "usage: tile_profile IN OUT SAMPLES\n");
		return 2;
	}
	err = profile__read(argv[1], &in, &rerr);
	if (err)
		return die(rerr.what ? rerr.what : "cannot read IN", err);
	out = profile__new();
	if (!out)
		return die("profile__new", 12);
	for (size_t i = 0; i < profile__nr_samples(in); i++) {
		const struct pf_sample *x = profile__get_sample(in, i);

		per_round += x->kind == SAMPLE_ONCPU;
		first = x->time < first ? x->time : first;
		last = x->time > last ? x->time : last;
	}
	if (!per_round)
		return die("IN holds no on-CPU sample", 22);
	/* a round lasts the recording, and one period more: rounds do not overlap */
	span = last - first + profile__get_sample(in, 0)->weight;
	base = profile__time_base(in);
	for (int k = 0; k < SAMPLE_KIND_MAX; k++)
		kinds[k] = true;
	for (uint64_t round = 0; have < want; round++) {
		uint64_t left = want - have;
		struct profile_filter f = { .time_shift = (int64_t)(round * span) };
		size_t from = profile__nr_samples(out);

		if (left < per_round) {
			/* the last round: as much of the recording's time as the samples left */
			f.has_time = true;
			f.time_start = 0;
			f.time_end = (first - base) + (uint64_t)((double)(last - first) *
								 (double)left / (double)per_round);
		}
		err = profile__copy(out, in, kinds, &f, false);
		if (err)
			return die("profile__copy", err);
		for (size_t i = from; i < profile__nr_samples(out); i++)
			have += profile__get_sample(out, i)->kind == SAMPLE_ONCPU;
	}
	mi = profile__cmeta(in);
	mo = profile__meta(out);
	*mo = *mi;
	s = profile__string(out, profile__str(in, mi->command), profile__str_len(in, mi->command));
	mo->command = s < 0 ? 0 : (uint32_t)s;
	s = profile__string(out, profile__str(in, mi->event), profile__str_len(in, mi->event));
	mo->event = s < 0 ? 0 : (uint32_t)s;
	s = profile__string(out, profile__str(in, mi->hostname),
			    profile__str_len(in, mi->hostname));
	mo->hostname = s < 0 ? 0 : (uint32_t)s;
	mo->end_time = mi->start_time + (have / per_round + 1) * span;
	err = profile__write(out, argv[2]);
	if (err)
		return die("cannot write OUT", err);
	printf("tile_profile: %llu on-CPU samples (%zu in all), %zu stacks, %zu threads -> %s\n",
	       (unsigned long long)have, profile__nr_samples(out), profile__nr_stacks(out),
	       profile__nr_threads(out), argv[2]);
	profile__free(in);
	profile__free(out);
	return 0;
}
