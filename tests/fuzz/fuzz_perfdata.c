/* SPDX-License-Identifier: MIT */
/*
 * The perf.data reader (sampler/perfdata.c) and through it the record
 * decoder (sampler/decode.c): the input is a perf.data file, file mode or
 * pipe mode. It is read twice, through the mapped window and with read()
 * as pipe mode does, and both must deliver the same records and the same
 * result. Every record delivered is read to its last byte.
 */
#include <stdint.h>
#include <stdlib.h>

#include "sampler/perfdata.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/rec_touch.h"

struct seen {
	uint64_t n, sum;
};

static int on_rec(void *ctx, const struct rec *r)
{
	struct seen *s = ctx;

	s->n++;
	s->sum = s->sum * 31 + r->type + rec_touch(r);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_tmp_path("perf.data");
	struct seen mapped = { 0 }, plain = { 0 };
	struct perfdata_info info;
	struct perfdata_error err;
	int e1, e2;

	if (!path || fuzz_write_file(path, data, size))
		return 0;
	perfdata__set_window(0);
	e1 = perfdata__read(path, on_rec, &mapped, &info, &err);
	perfdata__set_window(SIZE_MAX);
	e2 = perfdata__read(path, on_rec, &plain, &info, &err);
	perfdata__set_window(0);
	if (e1 != e2 || mapped.n != plain.n || mapped.sum != plain.sum)
		abort(); /* the two ways of reading disagree */
	return 0;
}
