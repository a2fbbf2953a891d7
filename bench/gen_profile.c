/* SPDX-License-Identifier: MIT */
/*
 * A large synthetic profile for bench/render_bench.sh, shaped like a long
 * trainer recording: many threads, a deep call tree whose stacks share
 * prefixes, a skewed choice of stacks (a few hot, a long tail), some
 * off-CPU blocks, frames at several source lines of their function (so
 * that the report folds lines into functions, as it does for real
 * recordings). Deterministic: the same arguments give the same file.
 *
 *   gen_profile OUT [SAMPLES [STACKS]]   (default 1000000 samples, 100000 stacks)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile.h"

#define NR_NAMES 6000
#define NR_LINES 3 /* source lines per function */
#define NR_THREADS 16

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next(void)
{
	/* xorshift64* */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ULL;
}

static double uniform(void)
{
	return (double)(next() >> 11) / (double)(1ULL << 53);
}

static int die(const char *what)
{
	fprintf(stderr, "gen_profile: %s failed\n", what);
	return 1;
}

int main(int argc, char **argv)
{
	unsigned long long nr_samples = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
	unsigned long long nr_stacks = argc > 3 ? strtoull(argv[3], NULL, 10) : 100000;
	struct profile *p = profile__new();
	uint32_t *frames, *stacks, threads[NR_THREADS];
	char name[128];
	struct pf_meta *m;
	uint64_t t = 1000000000ULL;

	if (argc < 2 || !p || !nr_stacks)
		return die("usage: gen_profile OUT [SAMPLES [STACKS]]; setup");
	frames = malloc(NR_NAMES * NR_LINES * sizeof(*frames));
	stacks = malloc(nr_stacks * sizeof(*stacks));
	if (!frames || !stacks)
		return die("malloc");
	for (int i = 0; i < NR_NAMES; i++) {
		enum frame_kind kind = i % 23 == 0   ? FRAME_KERNEL
				       : i % 31 == 0 ? FRAME_JIT
				       : i % 17 == 0 ? FRAME_INLINED
						     : FRAME_USER;
		const char *mod = kind == FRAME_KERNEL ? "[kernel.kallsyms]"
				  : kind == FRAME_JIT  ? "/tmp/perf-4242.map"
				  : i % 3	       ? "/usr/lib/x86_64-linux-gnu/libdnnl.so.3"
						       : "/usr/bin/mlp";
		int64_t f;

		snprintf(
			name, sizeof(name),
			i % 3 ? "dnnl::impl::cpu::x64::jit_uni_kernel_%d<(dnnl::impl::cpu::x64::cpu_isa_t)%d>::execute"
			      : "mlp_train_step_%d_%d",
			i, i % 7);
		for (int l = 0; l < NR_LINES; l++) {
			struct pf_frame pf = { .kind = kind, .line = 100 + 17 * (uint32_t)l };
			int64_t n = profile__string(p, name, strlen(name));
			int64_t m = profile__string(p, mod, strlen(mod));
			int64_t src = profile__string(p, "src/cpu/x64/jit_uni_kernel.cpp", 30);

			if (n < 0 || m < 0 || src < 0)
				return die("string");
			pf.name = (uint32_t)n;
			pf.module = (uint32_t)m;
			pf.file = (uint32_t)src;
			f = profile__frame_full(p, &pf);
			if (f < 0)
				return die("frame");
			frames[i * NR_LINES + l] = (uint32_t)f;
		}
	}
	for (int i = 0; i < NR_THREADS; i++) {
		int64_t c;
		int64_t th;

		snprintf(name, sizeof(name), i ? "omp_worker_%d" : "mlp", i);
		c = profile__string(p, name, strlen(name));
		th = c < 0 ? c : profile__thread(p, 4242, 4242 + (uint32_t)i, (uint32_t)c);
		if (th < 0)
			return die("thread");
		threads[i] = (uint32_t)th;
	}
	/* each stack: a prefix of an earlier one plus a few new frames */
	for (unsigned long long i = 0; i < nr_stacks; i++) {
		int64_t s = 0;
		uint32_t depth = 0;

		if (i) {
			s = stacks[next() % i];
			depth = profile__stack_depth(p, (uint32_t)s);
			for (uint32_t cut = (uint32_t)(next() % 6); cut && s; cut--) {
				s = profile__get_stack(p, (uint32_t)s)->parent;
				depth--;
			}
		}
		for (int add = 1 + (int)(next() % 4); add || depth < 8; add = add ? add - 1 : 0) {
			if (depth >= 80)
				break;
			s = profile__stack(p, (uint32_t)s, frames[next() % (NR_NAMES * NR_LINES)]);
			if (s < 0)
				return die("stack");
			depth++;
		}
		stacks[i] = (uint32_t)s;
	}
	for (unsigned long long i = 0; i < nr_samples; i++) {
		/* skewed: u^3 puts most samples on the first stacks */
		double u = uniform();
		struct pf_sample s = {
			.stack = stacks[(unsigned long long)((double)nr_stacks * u * u * u)],
			.thread = threads[next() % NR_THREADS],
			.kind = i % 50 == 0 ? SAMPLE_OFFCPU : SAMPLE_ONCPU,
		};

		s.weight = s.kind == SAMPLE_ONCPU ? 1010101 : 50000 + next() % 5000000;
		t += 1010101 / NR_THREADS;
		s.time = t;
		if (profile__add_sample(p, &s))
			return die("sample");
	}
	m = profile__meta(p);
	m->start_time = 1000000000ULL;
	m->end_time = t;
	m->freq = 990;
	m->finalized = true;
	if (profile__write(p, argv[1]))
		return die("profile__write");
	profile__free(p);
	free(frames);
	free(stacks);
	return 0;
}
