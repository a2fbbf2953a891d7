/* SPDX-License-Identifier: MIT */
/*
 * Every report and every recording state how many stacks were unwound
 * whole, and point, once, at the debug files that would name nameless
 * frames.
 */
#ifndef DLFLAME_QUALITY_H
#define DLFLAME_QUALITY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profile/profile.h"
#include "render/render.h"
#include "symbolize/symbolize.h"

/* The completeness line of the chosen samples into buf ("" for none). 0 or a negative errno. */
int quality_ends_line(const struct profile *p, const struct render_select *sel, char *buf,
		      size_t size);

#define QUALITY_MAX_HINTS 32

/* A module whose code no symbol names, with copies of its strings. */
struct quality_hint {
	char *module, *build_id, *path; /* "" when unknown */
	uint64_t weight, total;
};
struct quality_hints {
	struct quality_hint v[QUALITY_MAX_HINTS]; /* biggest share first */
	size_t n;
};

/*
 * record: the modules without symbols for 1% or more of the samples (on-CPU,
 * or blocked time when there are none), with the files sym mapped them from,
 * stored in the profile. 0 or a negative errno.
 */
int quality_store_hints(struct profile *p, const struct symbolizer *sym);
/* The hints a profile stored, or for one without (older, journal, perf.data, merge) computed now. */
int quality_hints_load(const struct profile *p, struct quality_hints *out);
void quality_hints_free(struct quality_hints *h);
/*
 * At most one "hint:" line on stderr: the modules without symbols for 5% or
 * more of the samples and their shares, in about 120 columns, pointing at
 * `report [-i input] --hints` (input NULL: the default profile).
 */
void quality_hint_line(const struct quality_hints *h, const char *input);
/* report --hints: every stored module, its build-id and file, and how to name its code. */
int quality_hints_list(const struct quality_hints *h, FILE *out);

#endif
