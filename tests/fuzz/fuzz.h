/* SPDX-License-Identifier: MIT */
/*
 * What every fuzz target shares. A target is one function,
 * LLVMFuzzerTestOneInput(data, size), that feeds one reader an input and
 * frees everything before it returns: libFuzzer calls it millions of times
 * with leak checking on, and replay.c calls it once per corpus file in the
 * normal test suite. Targets never print and never touch files outside the
 * private temporary directory below.
 */
#ifndef DLFLAME_FUZZ_H
#define DLFLAME_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * A private directory (mkdtemp under $TMPDIR or /tmp) removed at exit, and
 * the path of file `name` in it; NULL when it cannot be made. The returned
 * path is static: one per name, valid until exit.
 */
const char *fuzz_tmp_path(const char *name);
/* Write data[0..size) to path (mode 0600, replacing it). 0 or -1. */
int fuzz_write_file(const char *path, const uint8_t *data, size_t size);

/*
 * A dlflame.data file around a payload, as profile/file.c writes one: the
 * header (version 1 or 2 by bit 0 of mode, or 3 or 4 by bits 2-3 (1: 3,
 * 2 or 3: 4), finalized by bit 1) with the
 * right lengths and checksum, then the payload deflated. So that targets
 * reach the sections behind the checksum, an input not starting with the
 * magic is mode byte + payload. Returns a malloc'ed file, or NULL.
 */
uint8_t *fuzz_profile_file(const uint8_t *data, size_t size, size_t *len);

/* Little-endian readers over the input, yielding 0 past its end. */
struct fuzz_in {
	const uint8_t *p;
	size_t size, pos;
};

static inline uint64_t fuzz_u64(struct fuzz_in *in, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++, in->pos++)
		if (in->pos < in->size)
			v |= (uint64_t)in->p[in->pos] << (8 * i);
	return v;
}

#endif
