/* SPDX-License-Identifier: MIT */
/*
 * The perf-map reader (symbolize/perfmap.c): the input is a
 * /tmp/perf-PID.map file ("START SIZE name" lines), read from a private
 * temporary file, then looked up at and around every range it gave.
 */
#include <stdlib.h>
#include <unistd.h>

#include "symbolize/internal.h"
#include "tests/fuzz/fuzz.h"

#define MAX_PROBES 256

static volatile uint64_t sink;

static void probe(const struct perfmap *pm, uint64_t addr, uint64_t *sum)
{
	const struct perfmap_entry *e = perfmap__find(pm, addr);

	if (e)
		*sum += strlen(e->name) + e->end - e->start;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_tmp_path("perf-1.map");
	struct perfmap_stats st = { 0 };
	struct perfmap *pm;
	struct strpool pool;
	uint64_t sum = 0;

	if (!path || fuzz_write_file(path, data, size))
		return 0;
	pm = calloc(1, sizeof(*pm));
	if (!pm)
		return 0;
	strpool__init(&pool);
	if (!perfmap__read(pm, path, getuid(), &pool, &st)) {
		for (size_t i = 0; i < pm->nents && i < MAX_PROBES; i++) {
			const struct perfmap_entry *e = &pm->ents[i];

			probe(pm, e->start, &sum);
			probe(pm, e->start - 1, &sum);
			probe(pm, e->end, &sum);
			probe(pm, e->end - 1, &sum);
			probe(pm, e->start + (e->end - e->start) / 2, &sum);
		}
		/* a second read of the same, unchanged file adds nothing */
		perfmap__read(pm, path, getuid(), &pool, &st);
	}
	sink = sum + st.entries + st.malformed_lines;
	perfmap__free(pm);
	strpool__free(&pool);
	return 0;
}
