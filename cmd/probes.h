/* SPDX-License-Identifier: MIT */
/* record --probe: the files and offsets a [MODULE:]FUNCTION names. */
#ifndef DLFLAME_PROBES_H
#define DLFLAME_PROBES_H

#include <stdbool.h>

#include "sampler/sampler.h"
#include "symbolize/symbolize.h"

struct probe_set {
	struct sampler_probe probes[SAMPLER_MAX_PROBES];
	char *paths[SAMPLER_MAX_PROBES], *funcs[SAMPLER_MAX_PROBES];
	/* the --probe each came from, and whether it named its module */
	const char *specs[SAMPLER_MAX_PROBES];
	bool named[SAMPLER_MAX_PROBES];
	size_t n;
};

/*
 * Add the probes spec names (exe: the command to launch, to search without
 * a MODULE; NULL when attaching). EXIT_OK, or prints why not and returns
 * the exit code (a function found nowhere: 2, with names like it).
 */
int probes_resolve(struct probe_set *ps, const char *spec, const char *exe);
void probes_free(struct probe_set *ps);
/*
 * After the recording: one warning for each --probe MODULE:FUNCTION whose
 * module no recorded process mapped (its function never ran there).
 */
void probes_warn_unmapped(const struct probe_set *ps, const struct symbolizer *sym);

#endif
