/* SPDX-License-Identifier: MIT */
/*
 * The kallsyms reader (symbolize/kallsyms.c): the input is a
 * /proc/kallsyms file ("ADDR TYPE NAME [MODULE]" lines), read from a
 * private temporary file, then looked up at and around every symbol.
 */
#include "symbolize/internal.h"
#include "tests/fuzz/fuzz.h"

#define MAX_PROBES 256

static volatile uint64_t sink;

static void probe(const struct kallsyms *k, uint64_t addr, uint64_t *sum)
{
	const char *name, *module;

	if (kallsyms__lookup(k, addr, &name, &module))
		*sum += strlen(name) + strlen(module);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_tmp_path("kallsyms");
	struct strpool pool;
	struct kallsyms k;
	uint64_t sum = 0;

	if (!path || fuzz_write_file(path, data, size))
		return 0;
	strpool__init(&pool);
	if (!kallsyms__load(&k, path, &pool)) {
		for (size_t i = 0; i < k.n && i < MAX_PROBES; i++) {
			probe(&k, k.syms[i].addr, &sum);
			probe(&k, k.syms[i].addr - 1, &sum);
			probe(&k, k.syms[i].addr + 1, &sum);
		}
		probe(&k, 0, &sum);
		probe(&k, UINT64_MAX, &sum);
		kallsyms__free(&k);
	}
	sink = sum;
	strpool__free(&pool);
	return 0;
}
