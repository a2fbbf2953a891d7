/* SPDX-License-Identifier: MIT */
/* Loading a report's input: a dlflame profile or a perf.data file, by magic. */
#ifndef DLFLAME_IMPORT_H
#define DLFLAME_IMPORT_H

#include "profile/profile.h"

/*
 * Reads `path` ("-": a perf pipe-mode stream on stdin) into a profile.
 * A perf.data file is decoded, unwound and symbolized with the same
 * collector as `record`. On failure prints one line (what, where, what to
 * do) and returns EXIT_BAD; 0 on success.
 */
int load_input(const char *path, struct profile **out);

#endif
