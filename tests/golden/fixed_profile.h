/* SPDX-License-Identifier: MIT */
/*
 * The fixed profiles behind the golden files, built in code so that every
 * id, time and weight is known: the unit tests render them in memory,
 * mkprofile writes them as dlflame.data for the CLI and browser tests.
 *
 * fixed: three threads of one trainer at 100 Hz (10 ms periods), with
 *   inlined, JIT, kernel and special frames, recursion, off-CPU blocks and
 *   runqueue waits, samples stored out of time order; "forward" at two
 *   source lines (reports merge them after profile__relabel), build-ids
 *   for the trainer and libdnnl.
 * hostile: the same shapes with every kind of hostile name.
 */
#ifndef DLFLAME_TESTS_FIXED_PROFILE_H
#define DLFLAME_TESTS_FIXED_PROFILE_H

#include <stdint.h>
#include <string.h>

#include "profile/profile.h"

#define FIXED_START 1000000000ULL /* ns */
#define FIXED_PERIOD 10000000ULL /* 10 ms */
#define MS 1000000ULL

struct fixed_frame {
	const char *name;
	size_t len; /* 0: strlen(name) */
	const char *module;
	enum frame_kind kind;
	const char *file; /* source file, NULL when unknown */
	uint32_t line;
};

/* Build-ids by module, as the recorder stores them. */
static inline const char *fixed_build_id(const char *module)
{
	if (!strcmp(module, "/usr/bin/mlp"))
		return "5f1d3c0a9e7b2d4c6a8e0f1b3d5c7a9e2b4d6f80";
	if (!strcmp(module, "/usr/lib/x86_64-linux-gnu/libdnnl.so.3"))
		return "a0b1c2d3e4f5061728394a5b6c7d8e9fa0b1c2d3";
	return "";
}

static inline int64_t fixed_stack(struct profile *p, const struct fixed_frame *f, size_t n)
{
	int64_t s = 0;

	for (size_t i = 0; i < n && s >= 0; i++) {
		const char *bid = fixed_build_id(f[i].module), *file = f[i].file ? f[i].file : "";
		int64_t name =
			profile__string(p, f[i].name, f[i].len ? f[i].len : strlen(f[i].name));
		int64_t mod = profile__string(p, f[i].module, strlen(f[i].module));
		int64_t fl = profile__string(p, file, strlen(file));
		int64_t b = profile__string(p, bid, strlen(bid));
		struct pf_frame pf;
		int64_t fr;

		if (name < 0 || mod < 0 || fl < 0 || b < 0)
			return -1;
		pf = (struct pf_frame){ .name = (uint32_t)name,
					.module = (uint32_t)mod,
					.kind = f[i].kind,
					.file = (uint32_t)fl,
					.line = f[i].file ? f[i].line : 0,
					.build_id = (uint32_t)b };
		fr = profile__frame_full(p, &pf);
		if (fr < 0)
			return -1;
		s = profile__stack(p, (uint32_t)s, (uint32_t)fr);
	}
	/* as the recorder marks them: a placeholder says why the stack was cut */
	if (s > 0) {
		enum stack_end end = STACK_END_COMPLETE;

		for (size_t i = 0; i < n; i++)
			if (!strcmp(f[i].name, "[truncated]"))
				end = STACK_END_COPY;
		profile__set_stack_end(p, (uint32_t)s, end);
	}
	return s;
}

static inline int64_t fixed_thread(struct profile *p, uint32_t pid, uint32_t tid, const char *comm,
				   size_t len)
{
	int64_t c = profile__string(p, comm, len ? len : strlen(comm));

	return c < 0 ? c : profile__thread(p, pid, tid, (uint32_t)c);
}

/* n samples of one stack, each `step` ns after the previous, from `at`. */
static inline int fixed_samples(struct profile *p, int64_t thread, int64_t stack,
				enum sample_kind kind, uint64_t at, uint64_t step, uint64_t weight,
				int n)
{
	for (int i = 0; i < n; i++) {
		struct pf_sample s = {
			.time = FIXED_START + at + (uint64_t)i * step,
			.weight = weight,
			.stack = (uint32_t)stack,
			.thread = (uint32_t)thread,
			.kind = kind,
		};

		if (thread < 0 || stack < 0 || profile__add_sample(p, &s))
			return -1;
	}
	return 0;
}

#define FF(...)                      \
	(const struct fixed_frame[]) \
	{                            \
		__VA_ARGS__          \
	}
#define FN(...) (sizeof(FF(__VA_ARGS__)) / sizeof(struct fixed_frame))
#define FSTACK(p, ...) fixed_stack(p, FF(__VA_ARGS__), FN(__VA_ARGS__))

#define MLP "/usr/bin/mlp"
#define DNNL "/usr/lib/x86_64-linux-gnu/libdnnl.so.3"
#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define KSYMS "[kernel.kallsyms]"
#define JITMAP "/tmp/perf-100.map"

/*
 * The names of the frames, so that the hostile profile can reuse the
 * shapes: names[i] replaces the i-th distinct name when not NULL.
 */
static inline int fixed_build(struct profile *p, const struct fixed_frame *names)
{
	const struct fixed_frame d[] = {
		{ "main", 0, MLP, FRAME_USER, NULL, 0 }, /* 0 */
		{ "train_epoch", 0, MLP, FRAME_USER, NULL, 0 }, /* 1 */
		{ "forward", 0, MLP, FRAME_USER, "src/mlp.c", 120 }, /* 2 */
		{ "dnnl_primitive_execute", 0, DNNL, FRAME_USER, NULL, 0 }, /* 3 */
		{ "gemm_inner", 0, DNNL, FRAME_INLINED, NULL, 0 }, /* 4 */
		{ "brgemm_kernel_f32", 0, JITMAP, FRAME_JIT, NULL, 0 }, /* 5 */
		{ "backward", 0, MLP, FRAME_USER, NULL, 0 }, /* 6 */
		{ "read_batch", 0, MLP, FRAME_USER, NULL, 0 }, /* 7 */
		{ "read", 0, LIBC, FRAME_USER, NULL, 0 }, /* 8 */
		{ "ksys_read", 0, KSYMS, FRAME_KERNEL, NULL, 0 }, /* 9 */
		{ "schedule", 0, KSYMS, FRAME_KERNEL, NULL, 0 }, /* 10 */
		{ "reduce", 0, MLP, FRAME_USER, NULL, 0 }, /* 11 */
		{ "start_thread", 0, LIBC, FRAME_USER, NULL, 0 }, /* 12 */
		{ "gomp_thread_start", 0, "libgomp.so.1", FRAME_USER, NULL, 0 }, /* 13 */
		{ "[truncated]", 0, "", FRAME_SPECIAL, NULL, 0 }, /* 14 */
		{ "futex_wait", 0, KSYMS, FRAME_KERNEL, NULL, 0 }, /* 15 */
		{ "pthread_cond_wait", 0, LIBC, FRAME_USER, NULL, 0 }, /* 16 */
		{ "forward", 0, MLP, FRAME_USER, "src/mlp.c", 131 }, /* 17: another line */
	};
	struct fixed_frame f[sizeof(d) / sizeof(d[0])];
	const uint64_t P = FIXED_PERIOD;
	int64_t trainer, worker, loader, sfwd, sjit, sbwd, sread, srec, somp, swait, strunc, sbare;
	struct pf_meta *m = profile__meta(p);
	int64_t ev, cmd, host;
	int err = 0;

	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
		f[i] = names && names[i].name ? names[i] : d[i];

	trainer = fixed_thread(p, 100, 100, names && names[0].name ? "<b>trainer</b>" : "mlp", 0);
	worker =
		fixed_thread(p, 100, 101, names && names[0].name ? "omp;\x1b[1m" : "omp worker", 0);
	loader = fixed_thread(p, 100, 102, names && names[0].name ? "load\0er" : "loader",
			      names && names[0].name ? 7 : 0);

	sfwd = FSTACK(p, f[0], f[1], f[2], f[3], f[4]);
	sjit = FSTACK(p, f[0], f[1], f[2], f[5]);
	sbwd = FSTACK(p, f[0], f[1], f[6], f[3], f[4]);
	sread = FSTACK(p, f[0], f[1], f[7], f[8], f[9], f[10]);
	srec = FSTACK(p, f[0], f[1], f[11], f[11], f[11]);
	somp = FSTACK(p, f[12], f[13], f[5]);
	swait = FSTACK(p, f[12], f[13], f[16], f[15], f[10]);
	strunc = FSTACK(p, f[12], f[14]);
	sbare = FSTACK(p, f[0], f[1], f[17]);

	/* trainer: 0-40 ms forward, 40-60 JIT, blocked 60-85 reading, then on */
	err |= fixed_samples(p, trainer, sfwd, SAMPLE_ONCPU, 1 * P, P, P, 4);
	err |= fixed_samples(p, trainer, sjit, SAMPLE_ONCPU, 5 * P, P, P, 2);
	err |= fixed_samples(p, trainer, sread, SAMPLE_OFFCPU, 60 * MS, 0, 25 * MS, 1);
	err |= fixed_samples(p, trainer, sbwd, SAMPLE_ONCPU, 95 * MS, P, P, 3);
	err |= fixed_samples(p, trainer, srec, SAMPLE_ONCPU, 125 * MS, P, P, 2);
	err |= fixed_samples(p, trainer, sbare, SAMPLE_ONCPU, 145 * MS, P, P, 1);
	/* preempted for 4 ms, then one more sample of the same stack */
	err |= fixed_samples(p, trainer, sbare, SAMPLE_RUNQUEUE, 145 * MS, 0, 4 * MS, 1);
	err |= fixed_samples(p, trainer, sbare, SAMPLE_ONCPU, 159 * MS, P, P, 1);
	/* omp worker: JIT kernel, a wait, more kernel, a cut stack */
	err |= fixed_samples(p, worker, somp, SAMPLE_ONCPU, 1 * P, P, P, 5);
	err |= fixed_samples(p, worker, swait, SAMPLE_OFFCPU, 50 * MS, 0, 30 * MS, 1);
	err |= fixed_samples(p, worker, swait, SAMPLE_OFFCPU, 80 * MS, 0, 400 * 1000, 1);
	err |= fixed_samples(p, worker, somp, SAMPLE_ONCPU, 90 * MS, P, P, 2);
	err |= fixed_samples(p, worker, strunc, SAMPLE_ONCPU, 110 * MS, P, P, 1);
	/* loader: one long block, straddling 100 ms */
	err |= fixed_samples(p, loader, sread, SAMPLE_OFFCPU, 20 * MS, 0, 120 * MS, 1);
	/* out of time order, as per-CPU rings deliver them */
	err |= fixed_samples(p, trainer, sfwd, SAMPLE_ONCPU, 175 * MS, P, P, 1);
	err |= fixed_samples(p, trainer, sbwd, SAMPLE_ONCPU, 169 * MS, P, P, 1);
	if (err)
		return -1;

	ev = profile__string(p, "cpu-clock", 9);
	cmd = profile__string(p, "mlp 200", 7);
	host = profile__string(p, "golden", 6);
	if (ev < 0 || cmd < 0 || host < 0)
		return -1;
	m->start_time = FIXED_START;
	m->end_time = FIXED_START + 200 * MS;
	m->freq = 100;
	m->event = (uint32_t)ev;
	m->command = (uint32_t)cmd;
	m->hostname = (uint32_t)host;
	m->finalized = true;
	return 0;
}

static inline int fixed_profile(struct profile *p)
{
	return fixed_build(p, NULL);
}

/* The same shapes, named with markup, quotes, ';', ESC, NUL and invalid UTF-8. */
static inline int hostile_profile(struct profile *p)
{
	const struct fixed_frame names[] = {
		{ "<script>alert(1)</script>", 0, "<m>", FRAME_USER, NULL, 0 },
		{ "\"onload=\"alert(2)", 0, MLP, FRAME_USER, NULL, 0 },
		{ "' onmouseover='x", 0, MLP, FRAME_USER, "<x>\x1b;\"/../\xff.c", 3 },
		{ "a;b;c", 0, "lib;x.so", FRAME_USER, NULL, 0 },
		{ "]]><x/>", 0, DNNL, FRAME_INLINED, NULL, 0 },
		{ "\x1b[31mred\x1b[0m", 0, JITMAP, FRAME_JIT, NULL, 0 },
		{ "nul\0inside", 10, MLP, FRAME_USER, NULL, 0 },
		{ "bad\xff\xc3utf8", 0, MLP, FRAME_USER, NULL, 0 },
		{ "\xed\xa0\x80surrogate", 0, LIBC, FRAME_USER, NULL, 0 },
		{ "</title><script>alert(3)</script>", 0, KSYMS, FRAME_KERNEL, NULL, 0 },
		{ "line\nbreak\r\t", 0, KSYMS, FRAME_KERNEL, NULL, 0 },
		{ "&amp;&lt;\\\"\\u0000", 0, MLP, FRAME_USER, NULL, 0 },
		{ "\xe2\x80\xa8sep\xe2\x80\xa9", 0, LIBC, FRAME_USER, NULL, 0 },
		{ "{\"x\":1}", 0, "", FRAME_USER, NULL, 0 },
		{ "", 0, "", FRAME_SPECIAL, NULL, 0 },
		{ "\xc2\x9b"
		  "2J",
		  0, KSYMS, FRAME_KERNEL, NULL, 0 },
		{ " 12 34", 0, LIBC, FRAME_USER, NULL, 0 },
		{ "' onmouseover='x", 0, MLP, FRAME_USER, "<x>\x1b;\"/../\xff.c", 9 },
	};

	return fixed_build(p, names);
}

#endif
