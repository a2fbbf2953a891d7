/* SPDX-License-Identifier: MIT */
/*
 * Seeds for fuzz_unwind.c from a real recording: reads a perf.data of
 * unwind.elf run without ASLR (perf record --call-graph dwarf; see
 * seeds.sh) and writes, for each user sample whose IP lies in unwind.elf at
 * FUZZ_BASE, one input (IP, SP, BP, u16 length, stack copy) to
 * OUTDIR/unwind-N, at most MAX files.
 *   seed-unwind PERF.DATA OUTDIR [MAX]
 */
#include <asm/perf_regs.h>
#include <stdio.h>
#include <stdlib.h>

#include "sampler/perfdata.h"

#define FUZZ_BASE 0x555555554000ull
#define FUZZ_END (FUZZ_BASE + 0x5000)

struct out {
	const char *dir;
	unsigned n, max;
};

static void put(FILE *f, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		fputc((int)(v >> (8 * i) & 0xff), f);
}

static int on_rec(void *ctx, const struct rec *r)
{
	const struct rec_sample *s = &r->sample;
	struct out *o = ctx;
	char path[4096];
	uint64_t len;
	FILE *f;

	if (r->type != REC_SAMPLE || !s->stack_size || o->n >= o->max ||
	    s->uregs.regs[PERF_REG_X86_IP] < FUZZ_BASE ||
	    s->uregs.regs[PERF_REG_X86_IP] >= FUZZ_END)
		return 0;
	snprintf(path, sizeof(path), "%s/unwind-%u", o->dir, o->n++);
	f = fopen(path, "wb");
	if (!f)
		return -1;
	len = s->stack_size > 0xffff ? 0xffff : s->stack_size;
	put(f, s->uregs.regs[PERF_REG_X86_IP], 8);
	put(f, s->uregs.regs[PERF_REG_X86_SP], 8);
	put(f, s->uregs.regs[PERF_REG_X86_BP], 8);
	put(f, len, 2);
	fwrite(s->stack, 1, len, f);
	return fclose(f) ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct out o = { .max = 8 };
	struct perfdata_error err = { 0 };
	int e;

	if (argc < 3) {
		fprintf(stderr, "usage: seed-unwind PERF.DATA OUTDIR [MAX]\n");
		return 2;
	}
	o.dir = argv[2];
	if (argc > 3)
		o.max = (unsigned)atoi(argv[3]);
	e = perfdata__read(argv[1], on_rec, &o, NULL, &err);
	if (e) {
		fprintf(stderr, "seed-unwind: %s: %s at %llu\n", argv[1],
			err.what ? err.what : "error", (unsigned long long)err.offset);
		return 1;
	}
	printf("seed-unwind: %u inputs\n", o.n);
	return 0;
}
