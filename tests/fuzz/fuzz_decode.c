/* SPDX-License-Identifier: MIT */
/*
 * The live path's record handling (sampler/ring.c, sampler/decode.c): the
 * input is a record layout (17 bytes: sample_type, sample_regs_user,
 * sample_id_all) and then a ring buffer's bytes with its head and tail (16
 * bytes); each record ring_next() takes out is decoded and read to its last
 * byte. The data area is the rest of the input, cut to a power of two.
 * Samples whose id (first, with PERF_SAMPLE_IDENTIFIER) is ALT_ID have a
 * layout of their own: sample_type without PERF_SAMPLE_PERIOD, as the live
 * page-fault events do. Each record is also trimmed as a drain pass copies
 * it (rec_trim, its stack copy cut or dropped): the copy is no longer, has
 * the length asked for first, and decodes.
 */
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/sampler.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/rec_touch.h"

#define HDR 33
#define MAX_RECS 256
#define ALT_ID 0x2a

static volatile uint64_t sink;

static uint64_t trimmed(const struct rec_layout *layout, const void *rec, size_t len)
{
	uint64_t sum = 0;
	struct rec r;

	/* as it is, its copy dropped, its copy cut to a length the input picks */
	for (int mode = 0; mode < 3; mode++) {
		bool drop = mode == 1;
		uint64_t keep = mode == 2 ? len % 4099 : UINT64_MAX;
		size_t want = rec_trim(layout, rec, len, NULL, drop, keep), n;
		/* 8-aligned, as records are in a ring */
		uint64_t *copy = malloc(len + 8);

		if (!copy)
			return sum;
		n = rec_trim(layout, rec, len, copy, drop, keep);
		if (n != want || n > len)
			abort();
		if (!rec_decode(layout, copy, n, &r))
			sum += rec_touch(&r);
		else if (!rec_decode(layout, rec, len, &r))
			abort(); /* the record decoded, its copy must */
		free(copy);
	}
	return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { .p = data, .size = size };
	struct rec_layout layout = { 0 };
	struct rec_alt alt;
	uint64_t head, tail, sum = 0;
	uint8_t *ring, *scratch;
	size_t rsize = 1;
	const void *rec;
	size_t len;
	struct rec r;

	if (size <= HDR)
		return 0;
	layout.sample_type = fuzz_u64(&in, 8);
	layout.sample_regs_user = fuzz_u64(&in, 8);
	layout.sample_id_all = fuzz_u64(&in, 1) & 1;
	alt = (struct rec_alt){ .id = ALT_ID,
				.sample_type = layout.sample_type & ~(uint64_t)PERF_SAMPLE_PERIOD,
				.period = 64 };
	layout.alts = &alt;
	layout.nr_alts = 1;
	head = fuzz_u64(&in, 8);
	tail = fuzz_u64(&in, 8);
	while (rsize * 2 <= size - HDR)
		rsize *= 2;
	/* copies of their exact size: a read past either end is a sanitizer report */
	ring = malloc(rsize);
	scratch = malloc(rsize);
	if (!ring || !scratch)
		goto out;
	memcpy(ring, data + HDR, rsize);
	/* the record as a whole, as perf.data hands it over */
	if (!rec_decode(&layout, ring, rsize, &r))
		sum += rec_touch(&r);
	for (int i = 0;
	     i < MAX_RECS && ring_next(ring, rsize, head, &tail, scratch, rsize, &rec, &len) == 1;
	     i++)
		if (!rec_decode(&layout, rec, len, &r))
			sum += rec_touch(&r) + trimmed(&layout, rec, len);
out:
	free(ring);
	free(scratch);
	sink = sum;
	return 0;
}
