/* SPDX-License-Identifier: MIT */
/* Build-ids of files and of a profile's frames, for the container tests. */
#ifndef DLFLAME_TEST_BUILDIDS_H
#define DLFLAME_TEST_BUILDIDS_H

#include <stddef.h>

/* The GNU build-id of a file (readelf, run in dir), lower-case hex (free it). */
char *build_id(const char *dir, const char *path);
/*
 * How many frames of modules named module (exact basename) the profile at
 * data holds; each must carry build-id want (none came from another file of
 * that name, the host's).
 */
size_t frames_of(const char *data, const char *module, const char *want);

#endif
