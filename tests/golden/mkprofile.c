/* SPDX-License-Identifier: MIT */
/*
 * Writes the fixed profiles of fixed_profile.h, or one for a check of the
 * browser's:
 *   mkprofile fixed|hostile|wide|tower OUT
 * wide: a call tree of 10 x 10 x 10 x 12 x 7 functions, one sample per
 * leaf: 97,110 frames (97,112 with the root and the comm), every one the
 * same width at its depth.
 * tower: a training step that takes 90% of the samples, five frames deep,
 * beside a thin tower of 150 frames (import's dlopen stacks): a graph far
 * taller than a screen whose work is at the bottom.
 */
#include <stdio.h>
#include <string.h>

#include "tests/golden/fixed_profile.h"

static int wide_profile(struct profile *p)
{
	int64_t thread = fixed_thread(p, 1, 1, "wide", 0);

	static const int radix[5] = { 10, 10, 10, 12, 7 };

	for (int leaf = 0; leaf < 10 * 10 * 10 * 12 * 7; leaf++) {
		char names[5][16];
		struct fixed_frame f[5];
		int64_t s;

		for (int d = 4, v = leaf; d >= 0; v /= radix[d], d--) {
			snprintf(names[d], sizeof(names[0]), "f%d_%d", d, v % radix[d]);
			f[d] = (struct fixed_frame){ names[d], 0, "wide", FRAME_USER, NULL, 0 };
		}
		s = fixed_stack(p, f, 5);
		if (fixed_samples(p, thread, s, SAMPLE_ONCPU, (uint64_t)leaf * MS, 0, MS, 1))
			return -1;
	}
	profile__meta(p)->finalized = true;
	return 0;
}

static int tower_profile(struct profile *p)
{
	static const char *const work[] = { "main", "train", "step", "forward", "matmul" };
	struct fixed_frame f[152];
	char names[150][16];
	int64_t thread = fixed_thread(p, 1, 1, "trainer", 0), s;

	for (int d = 0; d < 5; d++)
		f[d] = (struct fixed_frame){ work[d], 0, "trainer", FRAME_USER, NULL, 0 };
	s = fixed_stack(p, f, 5);
	if (fixed_samples(p, thread, s, SAMPLE_ONCPU, 0, MS, MS, 900))
		return -1;
	f[1] = (struct fixed_frame){ "import", 0, "trainer", FRAME_USER, NULL, 0 };
	for (int d = 0; d < 150; d++) {
		snprintf(names[d], sizeof(names[0]), "dlopen_%d", d);
		f[2 + d] = (struct fixed_frame){ names[d], 0, "ld.so", FRAME_USER, NULL, 0 };
	}
	s = fixed_stack(p, f, 152);
	if (fixed_samples(p, thread, s, SAMPLE_ONCPU, 900 * MS, MS, MS, 100))
		return -1;
	profile__meta(p)->finalized = true;
	return 0;
}

int main(int argc, char **argv)
{
	struct profile *p = profile__new();
	int err;

	if (argc != 3 || (strcmp(argv[1], "fixed") && strcmp(argv[1], "hostile") &&
			  strcmp(argv[1], "wide") && strcmp(argv[1], "tower"))) {
		fprintf(stderr, "usage: mkprofile fixed|hostile|wide|tower OUT\n");
		return 2;
	}
	if (!p)
		return 1;
	err = !strcmp(argv[1], "fixed")	    ? fixed_profile(p)
	      : !strcmp(argv[1], "hostile") ? hostile_profile(p)
	      : !strcmp(argv[1], "wide")    ? wide_profile(p)
					    : tower_profile(p);
	if (!err)
		err = profile__write(p, argv[2]);
	profile__free(p);
	if (err) {
		fprintf(stderr, "mkprofile: cannot write %s (%d)\n", argv[2], err);
		return 1;
	}
	return 0;
}
