/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <asm/perf_regs.h>
#include <criterion/criterion.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "sampler/order.h"
#include "sampler/sampler.h"
#include "sampler/spill.h"
#include "util/util.h"

#define ST_DEFAULT                                                                                \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_CPU | \
	 PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN)

static const struct rec_layout layout = { .sample_type = ST_DEFAULT, .sample_id_all = true };

/* ---- building records by hand ------------------------------------------ */

struct rb {
	uint64_t words[512]; /* 8-byte aligned, like the kernel's records */
	size_t len;
};

static uint8_t *rb_bytes(struct rb *b)
{
	return (uint8_t *)b->words;
}

static void rb_start(struct rb *b, uint32_t type, uint16_t misc)
{
	struct perf_event_header h = { .type = type, .misc = misc };

	memset(b, 0, sizeof(*b));
	memcpy(rb_bytes(b), &h, sizeof(h));
	b->len = sizeof(h);
}

static void rb_u64(struct rb *b, uint64_t v)
{
	memcpy(rb_bytes(b) + b->len, &v, 8);
	b->len += 8;
}

static void rb_u32x2(struct rb *b, uint32_t x, uint32_t y)
{
	memcpy(rb_bytes(b) + b->len, &x, 4);
	memcpy(rb_bytes(b) + b->len + 4, &y, 4);
	b->len += 8;
}

/* A string with its NUL, padded to 8 bytes as the kernel does. */
static void rb_str(struct rb *b, const char *s)
{
	size_t n = strlen(s) + 1;

	memcpy(rb_bytes(b) + b->len, s, n);
	b->len += (n + 7) & ~(size_t)7;
}

/* sample_id trailer for ST_DEFAULT: TID, TIME, ID, CPU. */
static void rb_trailer(struct rb *b, uint32_t pid, uint32_t tid, uint64_t time)
{
	rb_u32x2(b, pid, tid);
	rb_u64(b, time);
	rb_u64(b, 77); /* id */
	rb_u32x2(b, 1, 0); /* cpu, res */
}

static size_t rb_end(struct rb *b)
{
	uint16_t size = (uint16_t)b->len;

	memcpy(rb_bytes(b) + 6, &size, 2);
	return b->len;
}

static void build_sample(struct rb *b, const uint64_t *ips, uint64_t nr)
{
	rb_start(b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
	rb_u64(b, 0x401000); /* ip */
	rb_u32x2(b, 100, 101);
	rb_u64(b, 123456789); /* time */
	rb_u64(b, 42); /* id */
	rb_u32x2(b, 1, 0); /* cpu */
	rb_u64(b, 1001001); /* period */
	rb_u64(b, nr);
	for (uint64_t i = 0; i < nr; i++)
		rb_u64(b, ips[i]);
	rb_end(b);
}

/* ---- rec_decode --------------------------------------------------------- */

Test(decode, sample_with_callchain)
{
	const uint64_t ips[] = { PERF_CONTEXT_KERNEL,
				 0xffffffff81000010ull,
				 0xffffffff81000020ull,
				 PERF_CONTEXT_USER,
				 0x401000,
				 0x402000 };
	struct rb b;
	struct rec r;

	build_sample(&b, ips, 6);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_SAMPLE);
	cr_assert_eq(r.time, 123456789);
	cr_assert_eq(r.sample.ip, 0x401000);
	cr_assert_eq(r.sample.pid, 100);
	cr_assert_eq(r.sample.tid, 101);
	cr_assert_eq(r.sample.time, 123456789);
	cr_assert_eq(r.sample.id, 42);
	cr_assert_eq(r.sample.cpu, 1);
	cr_assert_eq(r.sample.period, 1001001);
	cr_assert(r.sample.user);
	cr_assert_eq(r.sample.nr, 6);
	cr_assert_eq(r.sample.ips[0], PERF_CONTEXT_KERNEL);
	cr_assert_geq(r.sample.ips[0], PERF_CONTEXT_MAX);
	cr_assert_eq(r.sample.ips[2], 0xffffffff81000020ull);
	cr_assert_eq(r.sample.ips[3], PERF_CONTEXT_USER);
	cr_assert_eq(r.sample.ips[5], 0x402000);
	/* ips points into the record, not into a copy */
	cr_assert_eq((const void *)r.sample.ips, rb_bytes(&b) + 8 + 7 * 8);
}

Test(decode, sample_field_order_with_identifier_addr_stream)
{
	struct rec_layout l = { .sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP |
					       PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
					       PERF_SAMPLE_ADDR | PERF_SAMPLE_STREAM_ID |
					       PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
					       PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW,
				.sample_id_all = true };
	struct rb b;
	struct rec r;

	rb_start(&b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL);
	rb_u64(&b, 9); /* identifier */
	rb_u64(&b, 0x1111); /* ip */
	rb_u32x2(&b, 5, 6);
	rb_u64(&b, 777); /* time */
	rb_u64(&b, 0xdead); /* addr */
	rb_u64(&b, 0xbeef); /* stream id */
	rb_u32x2(&b, 3, 0);
	rb_u64(&b, 10); /* period */
	rb_u64(&b, 1);
	rb_u64(&b, 0x2222);
	rb_u64(&b, 0); /* raw: size 0 + padding, not decoded */
	rb_end(&b);
	cr_assert_eq(rec_decode(&l, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.sample.id, 9);
	cr_assert_eq(r.sample.ip, 0x1111);
	cr_assert_eq(r.sample.tid, 6);
	cr_assert_eq(r.time, 777);
	cr_assert_eq(r.sample.cpu, 3);
	cr_assert_eq(r.sample.period, 10);
	cr_assert_eq(r.sample.nr, 1);
	cr_assert_eq(r.sample.ips[0], 0x2222);
	cr_assert_not(r.sample.user);
}

/* IDENTIFIER, TID, TIME, [PERIOD,] one callchain entry: the sample of event id. */
static void build_id_sample(struct rb *b, uint64_t id, bool period)
{
	rb_start(b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
	rb_u64(b, id);
	rb_u32x2(b, 5, 6);
	rb_u64(b, 777); /* time */
	if (period)
		rb_u64(b, 10);
	rb_u64(b, 1);
	rb_u64(b, 0x2222);
	rb_end(b);
}

/*
 * Events with a layout of their own share the rings: a sample whose id is
 * an alt's has the alt's sample_type (here without PERIOD: it stands for
 * the alt's period), any other the layout's. Non-sample records keep the
 * one trailer.
 */
Test(decode, samples_of_an_event_with_a_layout_of_its_own)
{
	const uint64_t st =
		PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
	const struct rec_alt alts[] = { { .id = 3, .sample_type = st, .period = 64 },
					{ .id = 7, .sample_type = st, .period = 128 } };
	struct rec_layout l = { .sample_type = st | PERF_SAMPLE_PERIOD,
				.sample_id_all = true,
				.alts = alts,
				.nr_alts = 2 };
	struct rb b;
	struct rec r;

	build_id_sample(&b, 7, false);
	cr_assert_eq(rec_decode(&l, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.sample.id, 7);
	cr_assert_eq(r.sample.period, 128, "the alt's period");
	cr_assert_eq(r.sample.nr, 1);
	cr_assert_eq(r.sample.ips[0], 0x2222);
	cr_assert_eq(r.time, 777);
	build_id_sample(&b, 3, false);
	cr_assert_eq(rec_decode(&l, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.sample.period, 64);
	/* another id: the layout's own, with its period */
	build_id_sample(&b, 5, true);
	cr_assert_eq(rec_decode(&l, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.sample.period, 10);
	cr_assert_eq(r.sample.ips[0], 0x2222);
	/* read with the other's layout, each is malformed: the id chooses */
	build_id_sample(&b, 5, false);
	cr_assert_eq(rec_decode(&l, rb_bytes(&b), b.len, &r), -EINVAL);
	build_id_sample(&b, 7, true);
	cr_assert_eq(rec_decode(&l, rb_bytes(&b), b.len, &r), -EINVAL);
}

Test(decode, sample_read_layout_rejected)
{
	struct rec_layout l = { .sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_READ };
	struct rb b;
	struct rec r;

	rb_start(&b, PERF_RECORD_SAMPLE, 0);
	rb_u64(&b, 1);
	rb_u64(&b, 2);
	rb_end(&b);
	cr_assert_eq(rec_decode(&l, rb_bytes(&b), b.len, &r), -EINVAL);
}

static void build_mmap2(struct rb *b, bool build_id, const char *name)
{
	rb_start(b, PERF_RECORD_MMAP2,
		 PERF_RECORD_MISC_USER | (build_id ? PERF_RECORD_MISC_MMAP_BUILD_ID : 0));
	rb_u32x2(b, 200, 201);
	rb_u64(b, 0x7f0000000000ull); /* addr */
	rb_u64(b, 0x21000); /* len */
	rb_u64(b, 0x3000); /* pgoff */
	if (build_id) {
		uint8_t u[24] = { 20, 0, 0, 0 };

		for (int i = 0; i < 20; i++)
			u[4 + i] = (uint8_t)(0xa0 + i);
		memcpy(rb_bytes(b) + b->len, u, sizeof(u));
		b->len += sizeof(u);
	} else {
		rb_u32x2(b, 8, 1); /* maj, min */
		rb_u64(b, 123456); /* ino */
		rb_u64(b, 7); /* ino_generation */
	}
	rb_u32x2(b, 5 /* PROT_READ|PROT_EXEC */, 2 /* MAP_PRIVATE */);
	rb_str(b, name);
	rb_trailer(b, 200, 201, 5555);
	rb_end(b);
}

Test(decode, mmap2_inode)
{
	struct rb b;
	struct rec r;

	build_mmap2(&b, false, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_MMAP2);
	cr_assert_eq(r.mmap2.pid, 200);
	cr_assert_eq(r.mmap2.tid, 201);
	cr_assert_eq(r.mmap2.addr, 0x7f0000000000ull);
	cr_assert_eq(r.mmap2.len, 0x21000);
	cr_assert_eq(r.mmap2.pgoff, 0x3000);
	cr_assert_eq(r.mmap2.maj, 8);
	cr_assert_eq(r.mmap2.min, 1);
	cr_assert_eq(r.mmap2.ino, 123456);
	cr_assert_eq(r.mmap2.prot, 5);
	cr_assert_eq(r.mmap2.flags, 2);
	cr_assert_not(r.mmap2.has_build_id);
	cr_assert_str_eq(r.mmap2.filename, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	cr_assert_eq(r.time, 5555);
	cr_assert_eq(r.mmap2.time, 5555);
}

Test(decode, mmap2_build_id)
{
	struct rb b;
	struct rec r;

	build_mmap2(&b, true, "/bin/true");
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert(r.mmap2.has_build_id);
	cr_assert_eq(r.mmap2.build_id_size, 20);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(r.mmap2.build_id[i], 0xa0 + i);
	cr_assert_eq(r.mmap2.maj, 0);
	cr_assert_eq(r.mmap2.ino, 0);
	cr_assert_eq(r.mmap2.prot, 5);
	cr_assert_str_eq(r.mmap2.filename, "/bin/true");
	cr_assert_eq(r.time, 5555);

	/* a build-id size larger than the field is malformed */
	rb_bytes(&b)[40] = 21;
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), -EINVAL);
}

Test(decode, comm_exec)
{
	struct rb b;
	struct rec r;

	rb_start(&b, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
	rb_u32x2(&b, 300, 300);
	rb_str(&b, "python3");
	rb_trailer(&b, 300, 300, 999);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_COMM);
	cr_assert_eq(r.comm.pid, 300);
	cr_assert_str_eq(r.comm.comm, "python3");
	cr_assert(r.comm.exec);
	cr_assert_eq(r.time, 999);
	cr_assert_eq(r.comm.time, 999);

	/* without the misc bit it is a rename (prctl), not an exec */
	rb_bytes(&b)[4] = 0;
	rb_bytes(&b)[5] = 0;
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_not(r.comm.exec);
}

Test(decode, fork_and_exit)
{
	struct rb b;
	struct rec r;

	rb_start(&b, PERF_RECORD_FORK, 0);
	rb_u32x2(&b, 400, 300);
	rb_u32x2(&b, 401, 300);
	rb_u64(&b, 1000);
	rb_trailer(&b, 300, 300, 1001);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_FORK);
	cr_assert_eq(r.fork.pid, 400);
	cr_assert_eq(r.fork.ppid, 300);
	cr_assert_eq(r.fork.tid, 401);
	cr_assert_eq(r.fork.ptid, 300);
	cr_assert_eq(r.time, 1001); /* the trailer's clock wins */
	cr_assert_eq(r.fork.time, 1001);

	rb_start(&b, PERF_RECORD_EXIT, 0);
	rb_u32x2(&b, 400, 300);
	rb_u32x2(&b, 401, 300);
	rb_u64(&b, 2000);
	rb_trailer(&b, 400, 401, 2001);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_EXIT);
	cr_assert_eq(r.fork.tid, 401);
	cr_assert_eq(r.time, 2001);

	/* without sample_id_all the body's time is used */
	struct rec_layout nol = { .sample_type = ST_DEFAULT, .sample_id_all = false };

	rb_start(&b, PERF_RECORD_EXIT, 0);
	rb_u32x2(&b, 400, 300);
	rb_u32x2(&b, 401, 300);
	rb_u64(&b, 2000);
	rb_end(&b);
	cr_assert_eq(rec_decode(&nol, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.time, 2000);
}

Test(decode, lost_and_lost_samples)
{
	struct rb b;
	struct rec r;

	rb_start(&b, PERF_RECORD_LOST, 0);
	rb_u64(&b, 42);
	rb_u64(&b, 17);
	rb_trailer(&b, 1, 1, 3000);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_LOST);
	cr_assert_eq(r.lost.id, 42);
	cr_assert_eq(r.lost.lost, 17);
	cr_assert_eq(r.time, 3000);
	cr_assert_eq(r.lost.time, 3000);

	rb_start(&b, PERF_RECORD_LOST_SAMPLES, 0);
	rb_u64(&b, 5);
	rb_trailer(&b, 1, 1, 3001);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_LOST);
	cr_assert_eq(r.lost.lost, 5);
	cr_assert_eq(r.lost.id, 77); /* from the trailer */
	cr_assert_eq(r.time, 3001);
}

Test(decode, throttle_and_other)
{
	struct rb b;
	struct rec r;

	rb_start(&b, PERF_RECORD_UNTHROTTLE, 0);
	rb_u64(&b, 4000);
	rb_u64(&b, 42);
	rb_u64(&b, 42);
	rb_trailer(&b, 1, 1, 4001);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_THROTTLE);
	cr_assert_eq(r.time, 4001);

	rb_start(&b, PERF_RECORD_ITRACE_START, 0);
	rb_u32x2(&b, 1, 1);
	rb_trailer(&b, 1, 1, 4002);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_OTHER);
	cr_assert_eq(r.time, 4002);
}

static void assert_rejected_sw(const void *data, size_t len)
{
	struct rec r;

	cr_assert_eq(rec_decode(&layout, data, len, &r), -EINVAL);
}

Test(decode, switch_records)
{
	struct rb b;
	struct rec r;

	/* out, preempted: the thread comes from the trailer */
	rb_start(&b, PERF_RECORD_SWITCH,
		 PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT);
	rb_trailer(&b, 300, 301, 5000);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_SWITCH);
	cr_assert_eq(r.sw.pid, 300);
	cr_assert_eq(r.sw.tid, 301);
	cr_assert_eq(r.sw.cpu, 1);
	cr_assert(r.sw.out);
	cr_assert(r.sw.preempt);
	cr_assert_eq(r.sw.time, 5000);
	cr_assert_eq(r.time, 5000);
	cr_assert_eq(r.id, 77, "the id of a non-sample record comes from its trailer");

	/* out, blocking */
	rb_start(&b, PERF_RECORD_SWITCH, PERF_RECORD_MISC_SWITCH_OUT);
	rb_trailer(&b, 300, 302, 5001);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert(r.sw.out);
	cr_assert_not(r.sw.preempt);
	cr_assert_eq(r.sw.tid, 302);

	/* in: PREEMPT means nothing without OUT */
	rb_start(&b, PERF_RECORD_SWITCH, PERF_RECORD_MISC_SWITCH_OUT_PREEMPT);
	rb_trailer(&b, 300, 301, 5002);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_not(r.sw.out);
	cr_assert_not(r.sw.preempt);

	/* CPU-wide: a body with the other task, then the trailer */
	rb_start(&b, PERF_RECORD_SWITCH_CPU_WIDE, PERF_RECORD_MISC_SWITCH_OUT);
	rb_u32x2(&b, 900, 901);
	rb_trailer(&b, 300, 303, 5003);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_SWITCH);
	cr_assert_eq(r.sw.tid, 303);
	cr_assert(r.sw.out);

	/* CPU-wide without its body */
	rb_start(&b, PERF_RECORD_SWITCH_CPU_WIDE, 0);
	rb_trailer(&b, 300, 303, 5004);
	rb_end(&b);
	assert_rejected_sw(rb_bytes(&b), b.len);
}

/* ---- DWARF-mode samples: user registers and stack copy ----------------- */

#define ST_DWARF (ST_DEFAULT | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER)
/* BX, SP, IP, R15 and XMM0 (bit 32: read, then dropped) */
#define DW_MASK                                                                              \
	((1ull << PERF_REG_X86_BX) | (1ull << PERF_REG_X86_SP) | (1ull << PERF_REG_X86_IP) | \
	 (1ull << PERF_REG_X86_R15) | (1ull << PERF_REG_X86_XMM0))

static const struct rec_layout dwarf_layout = { .sample_type = ST_DWARF,
						.sample_regs_user = DW_MASK,
						.sample_id_all = true };

/* A kernel-side callchain of two addresses, the registers, `size` stack bytes and dyn_size. */
static void build_dwarf_sample(struct rb *b, uint64_t abi, uint64_t size, uint64_t dyn)
{
	rb_start(b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
	rb_u64(b, 0x401234); /* ip */
	rb_u32x2(b, 100, 101);
	rb_u64(b, 5555); /* time */
	rb_u64(b, 42);
	rb_u32x2(b, 0, 0);
	rb_u64(b, 1000000);
	rb_u64(b, 2);
	rb_u64(b, PERF_CONTEXT_KERNEL);
	rb_u64(b, 0xffffffff81000010ull);
	rb_u64(b, abi);
	if (abi) {
		rb_u64(b, 0xb0b0); /* BX */
		rb_u64(b, 0x7ffc00001000ull); /* SP */
		rb_u64(b, 0x401234); /* IP */
		rb_u64(b, 0xf15f15); /* R15 */
		rb_u64(b, 0x5555aaaa); /* XMM0 */
	}
	rb_u64(b, size);
	for (uint64_t i = 0; i < size; i++)
		rb_bytes(b)[b->len + i] = (uint8_t)(i * 7);
	b->len += size;
	if (size)
		rb_u64(b, dyn);
	rb_end(b);
}

static void assert_dwarf_rejected(const struct rb *b)
{
	struct rec r, before;

	memset(&r, 0xa5, sizeof(r));
	before = r;
	cr_assert_eq(rec_decode(&dwarf_layout, b->words, b->len, &r), -EINVAL);
	cr_assert_eq(memcmp(&r, &before, sizeof(r)), 0, "output clobbered on failure");
}

Test(decode_dwarf, regs_scattered_by_bit_and_stack_copy)
{
	struct rb b;
	struct rec r;

	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 64, 64);
	cr_assert_eq(rec_decode(&dwarf_layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_SAMPLE);
	cr_assert_eq(r.sample.nr, 2);
	cr_assert_eq(r.sample.ips[1], 0xffffffff81000010ull);
	cr_assert_eq(r.sample.uregs.abi, PERF_SAMPLE_REGS_ABI_64);
	cr_assert_eq(r.sample.uregs.regs[PERF_REG_X86_BX], 0xb0b0);
	cr_assert_eq(r.sample.uregs.regs[PERF_REG_X86_SP], 0x7ffc00001000ull);
	cr_assert_eq(r.sample.uregs.regs[PERF_REG_X86_IP], 0x401234);
	cr_assert_eq(r.sample.uregs.regs[PERF_REG_X86_R15], 0xf15f15);
	cr_assert_eq(r.sample.uregs.regs[PERF_REG_X86_AX], 0, "a register not in the mask");
	cr_assert_eq(r.sample.uregs.mask, DW_MASK & 0xffffffffull, "XMM bits are dropped");
	cr_assert_eq(r.sample.stack_size, 64);
	/* the stack points into the record, right after its size */
	cr_assert_eq(r.sample.stack, rb_bytes(&b) + 8 + 9 * 8 + 6 * 8 + 8);
	for (int i = 0; i < 64; i++)
		cr_assert_eq(r.sample.stack[i], (uint8_t)(i * 7));
	cr_assert_eq(r.time, 5555);
}

Test(decode_dwarf, dyn_size_below_size_limits_the_copy)
{
	struct rb b;
	struct rec r;

	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 256, 40);
	cr_assert_eq(rec_decode(&dwarf_layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.sample.stack_size, 40);
	cr_assert_eq(r.sample.stack[39], (uint8_t)(39 * 7));

	/* the kernel could copy nothing */
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 256, 0);
	cr_assert_eq(rec_decode(&dwarf_layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.sample.stack_size, 0);
	cr_assert_null(r.sample.stack);
}

/* A copy cut by rec_trim decodes as the record did, in fewer bytes. */
static void assert_trimmed(struct rb *b, size_t want_len)
{
	struct rb t;
	struct rec r, rt;
	size_t n;

	memset(&t, 0xee, sizeof(t));
	cr_assert_eq(rec_decode(&dwarf_layout, rb_bytes(b), b->len, &r), 0);
	n = rec_trim(&dwarf_layout, rb_bytes(b), b->len, t.words, false, UINT64_MAX);
	cr_assert_eq(n, want_len, "%zu bytes, not %zu, of %zu", n, want_len, b->len);
	cr_assert_eq(rec_decode(&dwarf_layout, t.words, n, &rt), 0, "the copy decodes");
	cr_assert_eq(rt.sample.time, r.sample.time);
	cr_assert_eq(rt.sample.nr, r.sample.nr);
	cr_assert_eq(memcmp(rt.sample.ips, r.sample.ips, r.sample.nr * 8), 0);
	cr_assert_eq(memcmp(&rt.sample.uregs, &r.sample.uregs, sizeof(r.sample.uregs)), 0);
	cr_assert_eq(rt.sample.stack_size, r.sample.stack_size);
	if (r.sample.stack_size)
		cr_assert_eq(memcmp(rt.sample.stack, r.sample.stack, r.sample.stack_size), 0);
	else
		cr_assert_null(rt.sample.stack);
}

Test(decode_dwarf, trim_cuts_the_copy_to_dyn_size)
{
	struct rb b, t;

	/* 256 bytes copied, 40 valid: 40 kept; 37 valid: 40 kept (8-byte aligned) */
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 256, 40);
	assert_trimmed(&b, b.len - 256 + 40);
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 256, 37);
	assert_trimmed(&b, b.len - 256 + 40);
	/* nothing valid: no bytes, and no dyn_size field either */
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 256, 0);
	assert_trimmed(&b, b.len - 256 - 8);
	/* all valid, or no copy at all: the record as it is */
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 64, 64);
	assert_trimmed(&b, b.len);
	build_dwarf_sample(&b, 0, 0, 0);
	assert_trimmed(&b, b.len);
	cr_assert_eq(rec_trim(&dwarf_layout, rb_bytes(&b), b.len, t.words, false, UINT64_MAX),
		     b.len);
	cr_assert_eq(memcmp(t.words, b.words, b.len), 0);
	/* another kind of record, and one that does not decode: copied as they are */
	rb_start(&b, PERF_RECORD_COMM, 0);
	rb_u32x2(&b, 5, 5);
	rb_str(&b, "sh");
	rb_trailer(&b, 5, 5, 1);
	rb_end(&b);
	cr_assert_eq(rec_trim(&dwarf_layout, rb_bytes(&b), b.len, t.words, false, UINT64_MAX),
		     b.len);
	cr_assert_eq(memcmp(t.words, b.words, b.len), 0);
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 256, 300); /* dyn_size > size */
	cr_assert_eq(rec_trim(&dwarf_layout, rb_bytes(&b), b.len, t.words, false, UINT64_MAX),
		     b.len);
	cr_assert_eq(memcmp(t.words, b.words, b.len), 0);
}

/*
 * Dropped (the recording far behind): the sample without its copy, the
 * rest as it was, and it says the copy was dropped; the length asked for
 * first is the length written.
 */
Test(decode_dwarf, drop_keeps_the_sample_without_its_copy)
{
	struct rb b, t;
	struct rec r, rt;
	size_t n;

	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 256, 40);
	cr_assert_eq(rec_decode(&dwarf_layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_not(r.sample.stack_dropped);
	n = rec_trim(&dwarf_layout, rb_bytes(&b), b.len, NULL, true, UINT64_MAX);
	cr_assert_eq(n, b.len - 256 - 8);
	memset(&t, 0xee, sizeof(t));
	cr_assert_eq(rec_trim(&dwarf_layout, rb_bytes(&b), b.len, t.words, true, UINT64_MAX), n);
	cr_assert_eq(rec_decode(&dwarf_layout, t.words, n, &rt), 0, "the copy decodes");
	cr_assert(rt.sample.stack_dropped);
	cr_assert_eq(rt.sample.stack_size, 0);
	cr_assert_null(rt.sample.stack);
	cr_assert_eq(rt.sample.time, r.sample.time);
	cr_assert_eq(rt.sample.tid, r.sample.tid);
	cr_assert_eq(rt.sample.user, r.sample.user);
	cr_assert_eq(memcmp(&rt.sample.uregs, &r.sample.uregs, sizeof(r.sample.uregs)), 0);
	/* a copy of nothing: nothing to drop, and it does not say dropped */
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 256, 0);
	n = rec_trim(&dwarf_layout, rb_bytes(&b), b.len, t.words, true, UINT64_MAX);
	cr_assert_eq(n, b.len - 256 - 8);
	cr_assert_eq(rec_decode(&dwarf_layout, t.words, n, &rt), 0);
	cr_assert_not(rt.sample.stack_dropped);
	/* no copy field: as it is */
	build_dwarf_sample(&b, 0, 0, 0);
	cr_assert_eq(rec_trim(&dwarf_layout, rb_bytes(&b), b.len, NULL, true, UINT64_MAX), b.len);
	cr_assert_eq(rec_trim(&dwarf_layout, rb_bytes(&b), b.len, t.words, true, UINT64_MAX),
		     b.len);
	cr_assert_eq(memcmp(t.words, b.words, b.len), 0);
}

Test(decode_dwarf, kernel_thread_has_no_regs_and_no_stack)
{
	struct rb b;
	struct rec r;

	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_NONE, 0, 0);
	cr_assert_eq(rec_decode(&dwarf_layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.sample.uregs.abi, 0);
	cr_assert_eq(r.sample.uregs.mask, 0);
	cr_assert_eq(r.sample.stack_size, 0);
	cr_assert_null(r.sample.stack);
}

Test(decode_dwarf, raw_before_regs_is_skipped)
{
	struct rec_layout l = dwarf_layout;
	struct rb b, c;
	struct rec r;
	size_t split = 8 + 9 * 8; /* through the callchain */

	l.sample_type |= PERF_SAMPLE_RAW;
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 16, 16);
	/* insert RAW: u32 size 12 + 12 bytes = 16 */
	memset(&c, 0, sizeof(c));
	memcpy(rb_bytes(&c), rb_bytes(&b), split);
	c.len = split;
	rb_u32x2(&c, 12, 0xdddddddd);
	rb_u64(&c, 0xeeeeeeeeeeeeeeeeull);
	memcpy(rb_bytes(&c) + c.len, rb_bytes(&b) + split, b.len - split);
	c.len += b.len - split;
	rb_end(&c);
	cr_assert_eq(rec_decode(&l, rb_bytes(&c), c.len, &r), 0);
	cr_assert_eq(r.sample.uregs.regs[PERF_REG_X86_IP], 0x401234);
	cr_assert_eq(r.sample.stack_size, 16);

	/* a RAW size past the end */
	memcpy(rb_bytes(&c) + split, &(uint32_t){ 4000 }, 4);
	memset(&r, 0, sizeof(r));
	cr_assert_eq(rec_decode(&l, rb_bytes(&c), c.len, &r), -EINVAL);

	/* BRANCH_STACK before the registers cannot be framed without its attr */
	l.sample_type = ST_DWARF | PERF_SAMPLE_BRANCH_STACK;
	cr_assert_eq(rec_decode(&l, rb_bytes(&b), b.len, &r), -EINVAL);
}

Test(decode_dwarf, bad_sizes_rejected)
{
	struct rb b;
	size_t size_at = 8 + 9 * 8 + 6 * 8; /* offset of the stack's size */
	uint64_t v;

	/* dyn_size larger than size */
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 64, 72);
	assert_dwarf_rejected(&b);

	/* size larger than what is left, and sizes that wrap */
	const uint64_t bad[] = { 72, 4096, 1ull << 63, UINT64_MAX, UINT64_MAX - 7 };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 64, 64);
		memcpy(rb_bytes(&b) + size_at, &bad[i], 8);
		assert_dwarf_rejected(&b);
	}

	/* an ABI the kernel never writes */
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 8, 8);
	v = 3;
	memcpy(rb_bytes(&b) + 8 + 9 * 8, &v, 8);
	assert_dwarf_rejected(&b);

	/* registers cut short: the record ends inside them */
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 0, 0);
	b.len -= 16; /* drop the stack size and XMM0 */
	rb_end(&b);
	assert_dwarf_rejected(&b);

	/* every truncation of a valid DWARF sample */
	build_dwarf_sample(&b, PERF_SAMPLE_REGS_ABI_64, 32, 24);
	for (size_t n = 8; n < b.len; n += 8) {
		uint64_t *copy = malloc(n);
		uint16_t size = (uint16_t)n;
		struct rec r;

		memcpy(copy, rb_bytes(&b), n);
		memcpy((uint8_t *)copy + 6, &size, 2);
		cr_assert_eq(rec_decode(&dwarf_layout, copy, n, &r), -EINVAL,
			     "DWARF sample truncated to %zu decoded", n);
		free(copy);
	}
}

/* ---- malformed records -------------------------------------------------- */

static void assert_rejected(const void *data, size_t len)
{
	struct rec r, before;

	memset(&r, 0xa5, sizeof(r));
	before = r;
	cr_assert_eq(rec_decode(&layout, data, len, &r), -EINVAL);
	cr_assert_eq(memcmp(&r, &before, sizeof(r)), 0, "output clobbered on failure");
}

Test(decode_bad, callchain_nr_too_big)
{
	const uint64_t ips[] = { 1, 2, 3 };
	struct rb b;

	build_sample(&b, ips, 3);
	/* nr is the 7th u64 after the header */
	uint64_t nr = 4;

	memcpy(rb_bytes(&b) + 8 + 6 * 8, &nr, 8);
	assert_rejected(rb_bytes(&b), b.len);
	/* a count whose byte size wraps around 2^64 */
	nr = (UINT64_MAX / 8) + 2;
	memcpy(rb_bytes(&b) + 8 + 6 * 8, &nr, 8);
	assert_rejected(rb_bytes(&b), b.len);
	nr = UINT64_MAX;
	memcpy(rb_bytes(&b) + 8 + 6 * 8, &nr, 8);
	assert_rejected(rb_bytes(&b), b.len);
}

Test(decode_bad, unterminated_strings)
{
	struct rb b;

	rb_start(&b, PERF_RECORD_COMM, 0);
	rb_u32x2(&b, 1, 1);
	memcpy(rb_bytes(&b) + b.len, "ABCDEFGH", 8); /* no NUL */
	b.len += 8;
	rb_end(&b);
	{
		struct rec_layout nol = { .sample_type = ST_DEFAULT };
		struct rec r;

		cr_assert_eq(rec_decode(&nol, rb_bytes(&b), b.len, &r), -EINVAL);
	}

	/* The only NUL is inside the trailer: still unterminated. */
	rb_start(&b, PERF_RECORD_COMM, 0);
	rb_u32x2(&b, 1, 1);
	memcpy(rb_bytes(&b) + b.len, "ABCDEFGH", 8);
	b.len += 8;
	rb_trailer(&b, 1, 1, 10);
	rb_end(&b);
	assert_rejected(rb_bytes(&b), b.len);

	/* MMAP2 filename likewise */
	build_mmap2(&b, false, "/lib/x");
	memset(rb_bytes(&b) + 72, 'x', 8);
	assert_rejected(rb_bytes(&b), b.len);
}

Test(decode_bad, size_mismatch_and_truncation)
{
	const uint64_t ips[] = { 1, 2 };
	struct rb b;

	build_sample(&b, ips, 2);
	assert_rejected(rb_bytes(&b), b.len - 8); /* len != header.size */
	assert_rejected(rb_bytes(&b), b.len + 8);
	assert_rejected(rb_bytes(&b), 4); /* shorter than a header */
	assert_rejected(rb_bytes(&b), 0);

	/* header.size honest but too small for the fields */
	rb_start(&b, PERF_RECORD_FORK, 0);
	rb_u32x2(&b, 1, 1);
	rb_trailer(&b, 1, 1, 1);
	rb_end(&b);
	assert_rejected(rb_bytes(&b), b.len);

	/* too small for the trailer itself */
	rb_start(&b, PERF_RECORD_LOST, 0);
	rb_u64(&b, 1);
	rb_end(&b);
	assert_rejected(rb_bytes(&b), b.len);
}

/*
 * Every truncation of every kind of valid record, in a buffer of exactly
 * that size, is either decoded or rejected (run under ASan to catch reads
 * past the end).
 */
Test(decode_bad, every_truncation)
{
	const uint64_t ips[] = { PERF_CONTEXT_USER, 1, 2 };
	struct rb recs[4];
	struct rec r;

	build_sample(&recs[0], ips, 3);
	build_mmap2(&recs[1], false, "/usr/bin/dash");
	build_mmap2(&recs[2], true, "/usr/bin/dash");
	rb_start(&recs[3], PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
	rb_u32x2(&recs[3], 1, 1);
	rb_str(&recs[3], "sh");
	rb_trailer(&recs[3], 1, 1, 1);
	rb_end(&recs[3]);

	for (int k = 0; k < 4; k++) {
		for (size_t n = 0; n < recs[k].len; n += 8) {
			uint64_t *copy = malloc(n ? n : 1);
			uint16_t size = (uint16_t)n;

			memcpy(copy, rb_bytes(&recs[k]), n);
			if (n >= 8)
				memcpy((uint8_t *)copy + 6, &size, 2);
			cr_assert_eq(rec_decode(&layout, copy, n, &r), -EINVAL,
				     "record %d truncated to %zu decoded", k, n);
			free(copy);
		}
	}
}

/* ---- ring_next ---------------------------------------------------------- */

#define RING 128

/* Write a record the way the kernel does: at head, wrapping at the end. */
static void ring_put(uint8_t *ring, uint64_t *head, const void *rec, size_t len)
{
	for (size_t i = 0; i < len; i++)
		ring[(*head + i) % RING] = ((const uint8_t *)rec)[i];
	*head += len;
}

static void make_rec(struct rb *b, uint32_t type, size_t len, uint8_t fill)
{
	rb_start(b, type, 0);
	memset(rb_bytes(b) + 8, fill, len - 8);
	b->len = len;
	rb_end(b);
}

Test(ring, wrapping_record_is_reassembled)
{
	uint8_t ring[RING], scratch[256];
	uint64_t head = 96, tail = 96; /* 32 bytes before the end */
	const void *rec;
	size_t len;
	struct rb b;

	memset(ring, 0xee, sizeof(ring));
	make_rec(&b, PERF_RECORD_COMM, 56, 0);
	for (size_t i = 8; i < 56; i++)
		rb_bytes(&b)[i] = (uint8_t)i;
	ring_put(ring, &head, rb_bytes(&b), b.len);

	cr_assert_eq(ring_next(ring, RING, head, &tail, scratch, sizeof(scratch), &rec, &len), 1);
	cr_assert_eq(len, 56);
	cr_assert_eq(rec, (const void *)scratch);
	cr_assert_eq(memcmp(rec, rb_bytes(&b), 56), 0);
	cr_assert_eq(tail, head);
	cr_assert_eq(ring_next(ring, RING, head, &tail, scratch, sizeof(scratch), &rec, &len), 0);
}

Test(ring, several_records_in_order_across_the_end)
{
	uint8_t ring[RING], scratch[64];
	uint64_t head = 1000 * RING + 64, tail = head; /* large, not reduced offsets */
	size_t lens[] = { 24, 40, 16, 32, 8 };
	const void *rec;
	size_t len;
	struct rb b[5];

	for (int i = 0; i < 5; i++) {
		make_rec(&b[i], PERF_RECORD_MMAP2 + i, lens[i], (uint8_t)(0x10 * (i + 1)));
		ring_put(ring, &head, rb_bytes(&b[i]), b[i].len);
	}
	cr_assert_leq(head - tail, RING);
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(
			ring_next(ring, RING, head, &tail, scratch, sizeof(scratch), &rec, &len),
			1);
		cr_assert_eq(len, lens[i]);
		cr_assert_eq(memcmp(rec, rb_bytes(&b[i]), len), 0, "record %d", i);
		/* a record that does not wrap is not copied */
		if (rec != (const void *)scratch)
			cr_assert(rec >= (const void *)ring && rec < (const void *)(ring + RING));
	}
	cr_assert_eq(tail, head);
	cr_assert_eq(ring_next(ring, RING, head, &tail, scratch, sizeof(scratch), &rec, &len), 0);
}

Test(ring, empty)
{
	uint8_t ring[RING] = { 0 }, scratch[64];
	uint64_t tail = 4096;
	const void *rec = NULL;
	size_t len = 0;

	cr_assert_eq(ring_next(ring, RING, 4096, &tail, scratch, sizeof(scratch), &rec, &len), 0);
	cr_assert_eq(tail, 4096);
	cr_assert_null(rec);
}

static void assert_corrupt(const uint8_t *ring, size_t size, uint64_t head, uint64_t tail0,
			   size_t scratch_size)
{
	uint8_t scratch[256];
	uint64_t tail = tail0;
	const void *rec = NULL;
	size_t len = 0;

	cr_assert_eq(ring_next(ring, size, head, &tail, scratch, scratch_size, &rec, &len),
		     -EINVAL);
	cr_assert_eq(tail, tail0, "tail moved on error");
}

Test(ring, corrupt_headers)
{
	uint8_t ring[RING];
	uint64_t head;
	struct rb b;
	uint16_t size;

	memset(ring, 0, sizeof(ring));
	head = 0;
	make_rec(&b, PERF_RECORD_COMM, 32, 1);
	ring_put(ring, &head, rb_bytes(&b), b.len);

	/* size 0 */
	size = 0;
	memcpy(ring + 6, &size, 2);
	assert_corrupt(ring, RING, head, 0, 256);
	/* smaller than a header */
	size = 4;
	memcpy(ring + 6, &size, 2);
	assert_corrupt(ring, RING, head, 0, 256);
	/* runs past head */
	size = 40;
	memcpy(ring + 6, &size, 2);
	assert_corrupt(ring, RING, head, 0, 256);
	/* not a multiple of 8 */
	size = 28;
	memcpy(ring + 6, &size, 2);
	assert_corrupt(ring, RING, head, 0, 256);
	/* larger than the scratch buffer */
	size = 32;
	memcpy(ring + 6, &size, 2);
	assert_corrupt(ring, RING, head, 0, 16);
	/* fewer bytes pending than a header */
	assert_corrupt(ring, RING, 4, 0, 256);
	/* more pending than the ring holds */
	assert_corrupt(ring, RING, RING + 8, 0, 256);
	/* a ring that is not a power of two */
	assert_corrupt(ring, 96, head, 0, 256);
}

/* ---- spills: records copied out of the rings ------------------------------ */

/* A record of len bytes (a multiple of 8) whose bytes after the header say seq. */
static void spill_rec(uint8_t *p, size_t len, uint32_t seq)
{
	struct perf_event_header h = { .type = PERF_RECORD_COMM, .size = (uint16_t)len };

	memcpy(p, &h, sizeof(h));
	for (size_t i = sizeof(h); i < len; i++)
		p[i] = (uint8_t)(seq + i);
}

static bool spill_rec_is(const uint8_t *p, size_t len, uint32_t seq)
{
	for (size_t i = sizeof(struct perf_event_header); i < len; i++)
		if (p[i] != (uint8_t)(seq + i))
			return false;
	return true;
}

/* Sizes that do not divide a chunk: records go to the next one, the rest is padding. */
static size_t spill_len(uint32_t seq)
{
	static const size_t lens[] = { 65528, 8, 33032, 12344, 64, 40000 };

	return lens[seq % 6];
}

Test(spill, records_never_straddle_chunks_and_come_back_in_order)
{
	struct spill_budget budget = { .max = 1000 };
	struct spill *f = calloc(1, sizeof(*f));
	uint64_t pos = 0, at, written = 0;
	const void *rec;
	size_t len;
	uint32_t n = 400;

	cr_assert_not_null(f);
	f->budget = &budget;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *dst = spill_room(f, spill_len(i), false);

		cr_assert_not_null(dst);
		spill_rec(dst, spill_len(i), i);
		spill_wrote(f, spill_len(i));
		written += spill_len(i);
	}
	cr_assert_eq(spill_head(f), 0, "nothing is visible before spill_publish");
	spill_publish(f);
	cr_assert_gt(spill_head(f), written, "padding at the chunks' ends");
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(spill_next(f, spill_head(f), &pos, &at, &rec, &len), 1);
		cr_assert_eq(len, spill_len(i));
		cr_assert_eq(rec, (const void *)spill_at(f, at));
		cr_assert_leq(at % SPILL_CHUNK + len, SPILL_CHUNK, "record %u straddles a chunk",
			      i);
		cr_assert(spill_rec_is(rec, len, i), "record %u", i);
	}
	cr_assert_eq(spill_next(f, spill_head(f), &pos, &at, &rec, &len), 0);
	cr_assert_eq(pos, spill_head(f));
	/* released: the chunks go, but for one kept for the writer */
	cr_assert_gt(budget.used, 5);
	spill_release(f, pos);
	cr_assert_leq(budget.used, 2);
	spill_free(f);
	cr_assert_eq(budget.used, 0);
	free(f);
}

Test(spill, budget_stops_the_writer_until_released)
{
	struct spill_budget budget = { .max = 2 };
	struct spill *f = calloc(1, sizeof(*f));
	uint64_t pos = 0, at, wpos;
	const void *rec;
	size_t len;
	uint32_t i;
	uint8_t *dst;

	cr_assert_not_null(f);
	f->budget = &budget;
	for (i = 0; (dst = spill_room(f, 65528, false)); i++) {
		spill_rec(dst, 65528, i);
		spill_wrote(f, 65528);
	}
	cr_assert_eq(i, 2 * (SPILL_CHUNK / 65528), "two chunks' worth, then none");
	cr_assert_eq(budget.used, 2);
	wpos = f->wpos;
	cr_assert_null(spill_room(f, 65528, false));
	cr_assert_eq(f->wpos, wpos, "a refusal changes nothing");
	spill_publish(f);
	/* the first chunk read and released: its memory is the next one's */
	for (uint32_t k = 0; k < SPILL_CHUNK / 65528; k++)
		cr_assert_eq(spill_next(f, spill_head(f), &pos, &at, &rec, &len), 1);
	cr_assert_eq(spill_next(f, spill_head(f), &pos, &at, &rec, &len), 1);
	spill_release(f, at);
	cr_assert_eq(budget.used, 2, "the released chunk is kept for the writer");
	dst = spill_room(f, 65528, false);
	cr_assert_not_null(dst);
	spill_rec(dst, 65528, i);
	spill_wrote(f, 65528);
	/* past the budget only when forced (the last pass, once the threads stopped) */
	while ((dst = spill_room(f, 65528, false))) {
		spill_rec(dst, 65528, ++i);
		spill_wrote(f, 65528);
	}
	cr_assert_not_null(spill_room(f, 65528, true));
	cr_assert_eq(budget.used, 3);
	spill_free(f);
	cr_assert_eq(budget.used, 0);
	free(f);
}

Test(spill, corrupt_header_is_rejected)
{
	struct spill_budget budget = { .max = 4 };
	struct spill *f = calloc(1, sizeof(*f));
	uint64_t pos = 0, at;
	const void *rec;
	size_t len;
	uint8_t *dst;
	uint16_t bad = 12;

	cr_assert_not_null(f);
	f->budget = &budget;
	dst = spill_room(f, 64, false);
	spill_rec(dst, 64, 1);
	memcpy(dst + 6, &bad, sizeof(bad));
	spill_wrote(f, 64);
	spill_publish(f);
	cr_assert_eq(spill_next(f, spill_head(f), &pos, &at, &rec, &len), -EINVAL);
	cr_assert_eq(pos, 0);
	/* a head before the position (a reader past what was written) */
	cr_assert_eq(spill_next(f, 0, &(uint64_t){ 64 }, &at, &rec, &len), -EINVAL);
	spill_free(f);
	free(f);
}

/* Pages of [p, p + len) the kernel has backed: a write to any other would fault. */
static size_t backed_pages(const uint8_t *p, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)p / page * page, end = ((uintptr_t)p + len) / page * page;
	size_t n = (end - start) / page, in = 0;
	unsigned char *vec = malloc(n);

	cr_assert_not_null(vec);
	cr_assert_eq(mincore((void *)start, end - start, vec), 0);
	for (size_t i = 0; i < n; i++)
		in += vec[i] & 1;
	free(vec);
	return in;
}

Test(spill, chunks_made_ahead_are_touched_and_kept_within_the_budget)
{
	struct spill_budget budget = { .max = 6 };
	struct spill *f = calloc(1, sizeof(*f));
	size_t page = (size_t)sysconf(_SC_PAGESIZE), whole = SPILL_CHUNK / page - 1;
	uint64_t pos = 0, at;
	const void *rec;
	uint8_t *dst;
	size_t len;

	cr_assert_not_null(f);
	f->budget = &budget;
	f->keep = 4;
	cr_assert_eq(spill_ready(f, 3), 3, "at most max at a time");
	cr_assert_eq(spill_ready(f, 3), 1, "then up to keep");
	cr_assert_eq(spill_ready(f, 3), 0, "and no more");
	cr_assert_eq(budget.used, 4, "the chunks made count against the budget");
	/* the writer takes them: no chunk more, no page it writes not backed yet */
	for (uint32_t i = 0; i < 4 * (SPILL_CHUNK / 65528); i++) {
		dst = spill_room(f, 65528, false);
		cr_assert_not_null(dst);
		if (i % (SPILL_CHUNK / 65528) == 0)
			cr_assert_geq(backed_pages(dst, SPILL_CHUNK - 16), whole,
				      "chunk %u: its pages were touched when it was made",
				      i / (uint32_t)(SPILL_CHUNK / 65528));
		spill_rec(dst, 65528, i);
		spill_wrote(f, 65528);
	}
	cr_assert_eq(budget.used, 4, "the writer took the chunks made ahead");
	spill_publish(f);
	/* released, they are kept again for the writer, up to keep */
	while (spill_next(f, spill_head(f), &pos, &at, &rec, &len) == 1)
		;
	spill_release(f, pos);
	cr_assert_eq(budget.used, 4);
	/* the last chunk is still the writer's */
	cr_assert_eq(spill_ready(f, 8), 1, "the three released chunks are spares, one more made");
	cr_assert_eq(budget.used, 5);
	spill_free(f);
	cr_assert_eq(budget.used, 0);
	/* the budget bounds what is made ahead */
	f->keep = 8;
	cr_assert_eq(spill_ready(f, 8), -ENOMEM);
	cr_assert_eq(budget.used, 6);
	spill_free(f);
	cr_assert_eq(budget.used, 0);
	free(f);
}

/* One thread writes while another reads and releases, as the drain thread and the recording's do. */
struct spill_race {
	struct spill *f;
	uint32_t n;
};

static void *spill_writer(void *arg)
{
	struct spill_race *w = arg;

	for (uint32_t i = 0; i < w->n; i++) {
		uint8_t *dst;

		/* over the budget: what it wrote is the reader's, then it waits for it */
		while (!(dst = spill_room(w->f, spill_len(i), false))) {
			spill_publish(w->f);
			sched_yield();
		}
		spill_rec(dst, spill_len(i), i);
		spill_wrote(w->f, spill_len(i));
		if (i % 7 == 0)
			spill_publish(w->f);
	}
	spill_publish(w->f);
	return NULL;
}

/*
 * The reader puts released chunks back while the writer takes them (keep
 * spare slots, some made ahead); with a budget of max chunks.
 */
static void writer_and_reader(size_t max, size_t keep)
{
	struct spill_budget budget = { .max = max };
	struct spill_race w = { .f = calloc(1, sizeof(*w.f)), .n = 20000 };
	uint64_t pos = 0, at;
	const void *rec;
	size_t len;
	pthread_t t;

	cr_assert_not_null(w.f);
	w.f->budget = &budget;
	w.f->keep = keep;
	if (keep > 1)
		cr_assert_eq(spill_ready(w.f, keep / 2), (int)(keep / 2));
	cr_assert_eq(pthread_create(&t, NULL, spill_writer, &w), 0);
	for (uint32_t i = 0; i < w.n;) {
		int ret = spill_next(w.f, spill_head(w.f), &pos, &at, &rec, &len);

		cr_assert_geq(ret, 0);
		if (!ret) {
			sched_yield();
			continue;
		}
		cr_assert_eq(len, spill_len(i));
		cr_assert(spill_rec_is(rec, len, i), "record %u", i);
		if (i % 5 == 0)
			spill_release(w.f, pos);
		i++;
	}
	pthread_join(t, NULL);
	cr_assert_leq(budget.used, budget.max);
	spill_release(w.f, pos);
	spill_free(w.f);
	cr_assert_eq(budget.used, 0);
	free(w.f);
}

Test(spill, a_writer_and_a_reader_at_once, .timeout = 60)
{
	writer_and_reader(3, 0);
}

Test(spill, a_writer_and_a_reader_share_the_spares, .timeout = 60)
{
	writer_and_reader(8, 6);
}

/* ---- the ordering queue ------------------------------------------------ */

/* Records of the queue in delivery order: their bytes, in place (src[]) or copied. */
static const uint8_t *oq_data(const struct order *q, const struct order_rec *r, uint8_t src[][16])
{
	return r->off == ORDER_IN_PLACE ? src[r->pos] : order_copied(q, r);
}

Test(order, time_order_ties_in_arrival_order_and_holdback)
{
	/* times as two CPUs' rings would hand them in, interleaved */
	static const uint64_t times[] = { 30, 10, 20, 10, 50, 40, 20, 60 };
	uint8_t src[8][16];
	struct order q = { 0 };
	uint64_t last_time = 0, last_seq = 0;
	size_t due;

	for (size_t i = 0; i < ARRAY_SIZE(times); i++) {
		memset(src[i], (int)i, sizeof(src[i]));
		/* odd ones copied (as a record wrapping the ring's end), even ones in place */
		if (i % 2)
			cr_assert_eq(order_push_copy(&q, times[i], i, src[i], 13, 7, 1), 0);
		else
			cr_assert_eq(order_push(&q, times[i], i, 16, 7, 1), 0);
	}
	cr_assert_eq(q.nr, 8);
	cr_assert_eq(q.in_place, 4);
	cr_assert_eq(order_held(&q), 4 * 16, "copies are 8-byte aligned");
	/* a copy is independent of its source */
	memset(src[1], 0xff, sizeof(src[1]));
	order_sort(&q);
	due = order_due(&q, 30);
	cr_assert_eq(due, 5, "records up to the limit, the limit included");
	cr_assert_eq(order_due(&q, 9), 0);
	cr_assert_eq(order_due(&q, UINT64_MAX), 8);
	for (size_t i = 0; i < due; i++) {
		const struct order_rec *r = &q.recs[i];

		cr_assert_geq(r->time, last_time);
		if (r->time == last_time)
			cr_assert_gt(r->seq, last_seq, "a tie keeps arrival order");
		last_time = r->time;
		last_seq = r->seq;
		if (r->off != ORDER_IN_PLACE)
			cr_assert_eq(((uintptr_t)order_copied(&q, r)) % 8, 0);
		if (r->pos == 1)
			cr_assert_eq(oq_data(&q, r, src)[0], 1, "the copy was taken at push");
		else
			cr_assert_eq(oq_data(&q, r, src)[0], (uint8_t)r->pos);
	}
	cr_assert_eq(q.recs[0].pos, 1);
	cr_assert_eq(q.recs[1].pos, 3);

	/* held back: 40, 50, 60 stay for the next round, in order */
	order_keep(&q, due, 0);
	cr_assert_eq(q.nr, 3);
	cr_assert_eq(q.recs[0].time, 40);
	cr_assert_eq(q.recs[1].time, 50);
	cr_assert_eq(q.recs[2].time, 60);
	cr_assert_eq(q.in_place, 1);
	cr_assert_eq(order_held(&q), 2 * 16);
	/* a late arrival older than what waits goes first */
	cr_assert_eq(order_push(&q, 35, 0, 16, 7, 1), 0);
	order_sort(&q);
	cr_assert_eq(q.recs[0].time, 35);
	for (size_t i = 0; i < q.nr; i++)
		cr_assert_eq(oq_data(&q, &q.recs[i], src)[0], (uint8_t)q.recs[i].pos);
	order_keep(&q, order_due(&q, UINT64_MAX), 0);
	cr_assert_eq(q.nr, 0);
	cr_assert_eq(q.in_place, 0);
	cr_assert_eq(order_held(&q), 0);
	order_free(&q);
}

Test(order, packing_waits_for_pack_at_and_keeps_the_copies)
{
	uint8_t src[64][16];
	struct order q = { 0 };
	size_t cap;

	for (size_t i = 0; i < 64; i++) {
		memset(src[i], (int)i, sizeof(src[i]));
		cr_assert_eq(order_push_copy(&q, 1000 - i, i, src[i], 16, 0, 0), 0);
	}
	order_sort(&q);
	/* 60 delivered, 4 kept: below pack_at the holes stay */
	order_keep(&q, 60, 64 * 16);
	cr_assert_eq(q.nr, 4);
	cr_assert_eq(q.buf_len, 64 * 16);
	cr_assert_eq(order_held(&q), 4 * 16);
	cap = q.buf_cap;
	order_keep(&q, 1, 16);
	cr_assert_eq(q.nr, 3);
	cr_assert_eq(q.buf_len, 3 * 16, "packed");
	cr_assert_leq(q.buf_cap, cap);
	for (size_t i = 0; i < q.nr; i++) {
		cr_assert_eq(q.recs[i].time, 1000 - q.recs[i].pos);
		cr_assert_eq(order_copied(&q, &q.recs[i])[15], (uint8_t)q.recs[i].pos);
	}
	/* copy_in takes an in-place record out of its source */
	cr_assert_eq(order_push(&q, 5, 9, 16, 0, 0), 0);
	cr_assert_eq(q.in_place, 1);
	cr_assert_eq(order_copy_in(&q, &q.recs[q.nr - 1], src[9]), 0);
	cr_assert_eq(q.in_place, 0);
	cr_assert_eq(order_copied(&q, &q.recs[q.nr - 1])[0], 9);
	order_free(&q);
}

/* ---- sampler: options and messages -------------------------------------- */

Test(sampler, new_validates_and_free_accepts_null)
{
	struct sampler_opts o = { .mmap_pages = 3 };
	struct sampler *s;

	sampler__free(NULL);
	errno = 0;
	cr_assert_null(sampler__new(&o));
	cr_assert_eq(errno, EINVAL);
	s = sampler__new(NULL);
	cr_assert_not_null(s);
	cr_assert_eq(sampler__stats(s)->samples, 0);
	cr_assert_eq(sampler__start(s), -EINVAL, "start before launch");
	sampler__free(s);
}

Test(sampler, open_strerror_messages)
{
	char buf[512], par[32] = "", want[64];
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");

	cr_assert_not_null(f);
	cr_assert_not_null(fgets(par, sizeof(par), f));
	fclose(f);
	par[strcspn(par, "\n")] = '\0';
	snprintf(want, sizeof(want), "perf_event_paranoid = %s", par);

	sampler__open_strerror(-EPERM, buf, sizeof(buf));
	cr_assert(strstr(buf, want), "%s", buf);
	cr_assert(strstr(buf, "sysctl kernel.perf_event_paranoid=1"), "%s", buf);
	cr_assert(strstr(buf, "root"), "%s", buf);
	cr_assert_null(strchr(buf, '\n'));

	sampler__open_strerror(-ENOENT, buf, sizeof(buf));
	cr_assert(strstr(buf, "not found"), "%s", buf);
	sampler__open_strerror(-EACCES, buf, sizeof(buf));
	cr_assert(strstr(buf, "executable"), "%s", buf);
	sampler__open_strerror(-EOPNOTSUPP, buf, sizeof(buf));
	cr_assert(strstr(buf, "not supported"), "%s", buf);
	sampler__open_strerror(-EMFILE, buf, sizeof(buf));
	cr_assert(strstr(buf, "ulimit -n"), "%s", buf);
	sampler__open_strerror(-ENOMEM, buf, sizeof(buf));
	cr_assert(strstr(buf, "ulimit -l") && strstr(buf, "perf_event_mlock_kb"), "%s", buf);
	sampler__open_strerror(-ENOSYS, buf, sizeof(buf));
	cr_assert(strstr(buf, "seccomp"), "%s", buf);
	sampler__open_strerror(-EXDEV, buf, sizeof(buf));
	cr_assert(strstr(buf, strerror(EXDEV)), "%s", buf);

	/* truncates, still terminated */
	cr_assert_eq(sampler__open_strerror(-EPERM, buf, 10), buf);
	cr_assert_eq(strlen(buf), 9);
}

/*
 * The EPERM text in a child whose seccomp filter refuses perf_event_open
 * with EPERM, as a container runtime's default profile does (filter: install
 * one first); read back through a pipe.
 */
static void eperm_text(bool filter, char *buf, size_t size)
{
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = { .len = sizeof(prog) / sizeof(prog[0]), .filter = prog };
	int fds[2], status;
	ssize_t n, got = 0;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char text[1024];

		close(fds[0]);
		if (filter && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
			       prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog)))
			_exit(2);
		sampler__open_strerror(-EPERM, text, sizeof(text));
		if (write(fds[1], text, strlen(text)) < 0)
			_exit(3);
		_exit(0);
	}
	close(fds[1]);
	while (got + 1 < (ssize_t)size && (n = read(fds[0], buf + got, size - 1 - (size_t)got)) > 0)
		got += n;
	buf[got] = '\0';
	close(fds[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (%d)", status);
}

/* A seccomp filter that refuses perf_event_open is named as the cause, in one line. */
Test(sampler, open_strerror_names_a_seccomp_filter)
{
	char buf[1024];

	eperm_text(true, buf, sizeof(buf));
	cr_assert(strstr(buf, "seccomp filter refuses perf_event_open"), "%s", buf);
	cr_assert(strstr(buf, "seccomp=unconfined"), "%s", buf);
	cr_assert(strstr(buf, "dlflame record -p HOSTPID"), "%s", buf);
	cr_assert_null(strchr(buf, '\n'));
	/* without the filter it is not blamed */
	eperm_text(false, buf, sizeof(buf));
	cr_assert_null(strstr(buf, "seccomp filter"), "%s", buf);
	cr_assert(strstr(buf, "perf_event_paranoid"), "%s", buf);
}

/* ---- sampler: launching -------------------------------------------------- */

static bool no_children(void)
{
	return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

Test(launch, missing_command_is_enoent_without_forking)
{
	char *argv[] = { "dlflame-no-such-command-xyz", NULL };
	char *argv2[] = { "/nonexistent/dir/cmd", NULL };
	struct sampler *s = sampler__new(NULL);
	pid_t pid = 12345;

	cr_assert(no_children());
	cr_assert_eq(sampler__launch(s, argv, NULL, &pid), -ENOENT);
	cr_assert_eq(sampler__launch(s, argv2, NULL, &pid), -ENOENT);
	cr_assert_eq(pid, 12345);
	cr_assert(no_children(), "a child was forked");
	sampler__free(s);
}

Test(launch, not_executable_is_eacces)
{
	char path[] = "/tmp/dlflame-test-XXXXXX";
	int fd = mkstemp(path);
	char *argv[] = { path, NULL };
	struct sampler *s = sampler__new(NULL);
	pid_t pid;

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "#!/bin/sh\n", 10), 10);
	close(fd);
	chmod(path, 0644);
	cr_assert_eq(sampler__launch(s, argv, NULL, &pid), -EACCES);
	cr_assert(no_children());
	unlink(path);
	sampler__free(s);
}

Test(launch, exec_failure_reported_by_start)
{
	char path[] = "/tmp/dlflame-test-XXXXXX";
	int fd = mkstemp(path);
	char *argv[] = { path, NULL };
	struct sampler *s = sampler__new(NULL);
	pid_t pid;
	int err;

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "#!/nonexistent/interp\n", 22), 22);
	close(fd);
	chmod(path, 0755);
	err = sampler__launch(s, argv, NULL, &pid);
	cr_assert_eq(err, 0, "launch: %s", strerror(-err));
	cr_assert_eq(sampler__start(s), -ENOENT);
	cr_assert(no_children(), "the failed child was not reaped");
	unlink(path);
	sampler__free(s);
}

Test(launch, free_kills_unstarted_child)
{
	char *argv[] = { "sleep", "100", NULL };
	struct sampler *s = sampler__new(NULL);
	pid_t pid;
	int err;

	err = sampler__launch(s, argv, NULL, &pid);
	cr_assert_eq(err, 0, "launch: %s", strerror(-err));
	cr_assert_eq(kill(pid, 0), 0);
	sampler__free(s);
	cr_assert_eq(kill(pid, 0), -1);
	cr_assert_eq(errno, ESRCH);
}

/* ---- sampler: a real recording ------------------------------------------ */

struct seen {
	uint64_t records, samples, samples_with_chain, last_time, order_errors;
	uint64_t own_pid_samples, bad_chain;
	bool comm_exec_sh, mmap_shell;
	char shell[PATH_MAX];
	pid_t self;
};

static int collect(void *ctx, const struct rec *r)
{
	struct seen *s = ctx;

	s->records++;
	if (r->time) {
		if (r->time < s->last_time)
			s->order_errors++;
		s->last_time = r->time;
	}
	switch (r->type) {
	case REC_SAMPLE:
		s->samples++;
		if (r->sample.nr > 0) {
			s->samples_with_chain++;
			if (!r->sample.ips)
				s->bad_chain++;
		}
		if (r->sample.pid == (uint32_t)s->self)
			s->own_pid_samples++;
		if (r->time != r->sample.time)
			s->order_errors++;
		break;
	case REC_COMM:
		if (r->comm.exec && !strcmp(r->comm.comm, "sh"))
			s->comm_exec_sh = true;
		break;
	case REC_MMAP2:
		if (!strcmp(r->mmap2.filename, s->shell))
			s->mmap_shell = true;
		break;
	default:
		break;
	}
	return 0;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

Test(record, burn_cpu_in_sh, .timeout = 60)
{
	char *argv[] = { "/bin/sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done",
			 NULL };
	struct seen seen = { .self = getpid() };
	const struct sampler_stats *st;
	struct sampler *s = sampler__new(NULL);
	char msg[512];
	int err, status = 0;
	uint64_t t0;
	pid_t pid;

	cr_assert_not_null(realpath("/bin/sh", seen.shell));
	err = sampler__launch(s, argv, NULL, &pid);
	cr_assert_eq(err, 0, "launch: %s", sampler__open_strerror(err, msg, sizeof(msg)));
	st = sampler__stats(s);
	cr_assert_not_null(st->event);
	cr_assert_eq(sampler__start(s), 0);
	for (;;) {
		err = sampler__poll(s, 100, collect, &seen);
		cr_assert_eq(err, 0, "poll: %s", strerror(-err));
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
	}
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/*
	 * The target is gone: poll must sleep, not return at once forever. A
	 * poll that handed records (its last ones, copied late on a busy
	 * machine) had reason to wake; one that handed none must have slept.
	 */
	cr_assert_eq(sampler__poll(s, 0, collect, &seen), 0);
	for (int tries = 0;; tries++) {
		uint64_t before = seen.records;

		cr_assert_lt(tries, 10, "every poll handed records after the target exited");
		t0 = mono_ms();
		cr_assert_eq(sampler__poll(s, 200, collect, &seen), 0);
		if (seen.records != before)
			continue;
		cr_assert_geq(mono_ms() - t0, 150, "poll returned at once after the target exited");
		break;
	}

	cr_assert_eq(sampler__drain(s, collect, &seen), 0);
	cr_log_info(
		"event %s, %llu records, %llu samples (%llu with callchains), lost %llu, bad %llu%s",
		st->event, (unsigned long long)st->records, (unsigned long long)st->samples,
		(unsigned long long)seen.samples_with_chain, (unsigned long long)st->lost,
		(unsigned long long)st->bad_records,
		st->kernel_excluded ? ", kernel excluded" : "");

	cr_assert_gt(seen.samples, 0);
	cr_assert_eq(seen.samples, st->samples);
	cr_assert_eq(seen.records, st->records);
	cr_assert_gt(seen.samples_with_chain, 0);
	cr_assert_eq(seen.bad_chain, 0);
	cr_assert(seen.comm_exec_sh, "no COMM exec record for sh");
	cr_assert(seen.mmap_shell, "no MMAP2 record for %s", seen.shell);
	cr_assert_eq(seen.order_errors, 0, "records out of time order");
	cr_assert_eq(seen.own_pid_samples, 0, "the profiler sampled itself");
	cr_assert_eq(st->bad_records, 0);
	sampler__free(s);
}

/* Two busy processes on two CPUs: records from both rings interleave in every round. */
Test(record, two_rings_merge_in_time_order, .timeout = 60)
{
	char *argv[] = { "/bin/sh", "-c",
			 "l() { i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done; }; l & l & wait",
			 NULL };
	struct seen seen = { .self = getpid() };
	struct sampler_opts o = { .freq = 4000, .mmap_pages = 8 };
	struct sampler *s = sampler__new(&o);
	char msg[512];
	int err, status = 0;
	pid_t pid;

	err = sampler__launch(s, argv, NULL, &pid);
	cr_assert_eq(err, 0, "launch: %s", sampler__open_strerror(err, msg, sizeof(msg)));
	cr_assert_eq(sampler__start(s), 0);
	for (;;) {
		/* long rounds, so that each one holds records of both CPUs */
		err = sampler__poll(s, 300, collect, &seen);
		cr_assert_eq(err, 0, "poll: %s", strerror(-err));
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
	}
	cr_assert_eq(sampler__drain(s, collect, &seen), 0);
	cr_assert_gt(seen.samples, 100);
	cr_assert_eq(seen.order_errors, 0, "records out of time order");
	cr_assert_eq(seen.records, sampler__stats(s)->records);
	sampler__free(s);
}

/* ---- DWARF mode, context switches and attach on real targets ----------- */

struct dwarf_seen {
	uint64_t samples, with_regs, with_stack, ip_matches, user_chain, max_stack;
	uint64_t oncpu, switch_samples, outs, ins, preempt_outs, outs_after_sample;
	uint64_t self_samples;
	uint64_t dropped, dropped_with_regs; /* samples kept without their stack copies */
	pid_t self;
	struct u64map last_sample; /* tid -> time of its last context-switch sample */
	struct u64map in_time; /* tid -> time it last came back */
	uint32_t want_pid; /* count only this process (0: all) */
};

static int collect_dwarf(void *ctx, const struct rec *r)
{
	struct dwarf_seen *d = ctx;
	const struct rec_sample *s = &r->sample;
	const uint64_t need = (1ull << PERF_REG_X86_IP) | (1ull << PERF_REG_X86_SP);
	uint64_t t;

	if (r->type == REC_SAMPLE) {
		if (s->pid == (uint32_t)d->self)
			d->self_samples++;
		if (d->want_pid && s->pid != d->want_pid)
			return 0;
		d->samples++;
		if (s->event == EV_SWITCH) {
			d->switch_samples++;
			u64map_put(&d->last_sample, s->tid, s->time);
		} else {
			d->oncpu++;
		}
		if (s->uregs.abi == PERF_SAMPLE_REGS_ABI_64 && (s->uregs.mask & need) == need &&
		    s->uregs.regs[PERF_REG_X86_SP])
			d->with_regs++;
		if (s->stack_size && s->stack)
			d->with_stack++;
		if (s->stack_dropped) {
			d->dropped++;
			d->dropped_with_regs +=
				!s->stack_size && !s->stack && (s->uregs.mask & need) == need;
		}
		if (s->stack_size > d->max_stack)
			d->max_stack = s->stack_size;
		if (s->user && s->uregs.regs[PERF_REG_X86_IP] == s->ip)
			d->ip_matches++;
		for (uint64_t i = 0; i < s->nr; i++)
			if (s->ips[i] == PERF_CONTEXT_USER)
				d->user_chain++;
	} else if (r->type == REC_SWITCH) {
		if (d->want_pid && r->sw.pid != d->want_pid)
			return 0;
		if (!r->sw.out) {
			d->ins++;
			u64map_put(&d->in_time, r->sw.tid, r->sw.time);
			return 0;
		}
		d->outs++;
		d->preempt_outs += r->sw.preempt;
		/* the stack sample of this switch: after the thread last came back, not after the record */
		if (u64map_get(&d->last_sample, r->sw.tid, &t) && t <= r->sw.time) {
			uint64_t in = 0;

			u64map_get(&d->in_time, r->sw.tid, &in);
			if (t >= in)
				d->outs_after_sample++;
		}
	}
	return 0;
}

static void run_until_exit(struct sampler *s, pid_t pid, struct dwarf_seen *d)
{
	int status, err;

	for (;;) {
		err = sampler__poll(s, 100, collect_dwarf, d);
		cr_assert_eq(err, 0, "poll: %s", strerror(-err));
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
	}
	cr_assert_eq(sampler__drain(s, collect_dwarf, d), 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

Test(dwarf, samples_carry_user_regs_and_stack, .timeout = 60)
{
	char *argv[] = { "/bin/sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
			 NULL };
	struct sampler_opts o = { .callgraph = CALLGRAPH_DWARF };
	struct dwarf_seen d = { .self = getpid() };
	struct sampler *s = sampler__new(&o);
	char msg[512];
	pid_t pid;
	int err;

	cr_assert_not_null(s);
	err = sampler__launch(s, argv, NULL, &pid);
	cr_assert_eq(err, 0, "launch: %s", sampler__open_strerror(err, msg, sizeof(msg)));
	cr_assert_eq(sampler__start(s), 0);
	run_until_exit(s, pid, &d);
	cr_log_info("DWARF: %llu samples, %llu with regs, %llu with a stack (max %llu bytes), "
		    "lost %llu",
		    (unsigned long long)d.samples, (unsigned long long)d.with_regs,
		    (unsigned long long)d.with_stack, (unsigned long long)d.max_stack,
		    (unsigned long long)sampler__stats(s)->lost);
	cr_assert_gt(d.samples, 50);
	/* a shell loop runs in user space almost all the time */
	cr_assert_geq(d.with_regs * 10, d.samples * 9, "%llu of %llu samples with IP and SP",
		      (unsigned long long)d.with_regs, (unsigned long long)d.samples);
	cr_assert_geq(d.with_stack * 10, d.samples * 9);
	cr_assert_gt(d.ip_matches, 0, "regs[IP] is the sampled IP in user mode");
	cr_assert_leq(d.max_stack, SAMPLER_DEFAULT_STACK_SIZE);
	cr_assert_eq(d.user_chain, 0, "the kernel walked user frames (exclude_callchain_user)");
	cr_assert_eq(sampler__stats(s)->bad_records, 0);
	cr_assert_eq(sampler__stats(s)->lost, 0);
	u64map_free(&d.last_sample);
	u64map_free(&d.in_time);
	sampler__free(s);
}

/*
 * CPU time process pid has used (user and system, in clock ticks), or -1
 * once it has exited (a zombie) or is gone; the test waits on it.
 */
static long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p, state;
	unsigned long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	/* state, then 10 fields, then utime and stime */
	if (!p ||
	    sscanf(p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %lu %lu", &state, &ut,
		   &st) != 3 ||
	    state == 'Z')
		return -1;
	return (long)(ut + st);
}

/*
 * The recording's thread far behind (here: it reads nothing until the
 * shell has run three seconds of CPU time): past three quarters of the
 * buffer, samples are kept without their stack copies, and none is lost.
 * The shell's environment (48 KiB) lies above its stack pointer, so a copy
 * is 32 KiB where the kernel can read the pages above the stack pointer's
 * own; CI once saw every copy end at that page's end (3,904 bytes). Three
 * seconds at 999 Hz are 12 MiB of records even then, past the 6 MiB where
 * stacks are dropped. Waiting on the shell's CPU time, not on the clock,
 * keeps the premise on a machine too busy to run it.
 */
Test(dwarf, far_behind_keeps_samples_without_stacks, .timeout = 120)
{
	char *argv[] = { "/bin/sh", "-c", "i=0; while [ $i -lt 5000000 ]; do i=$((i+1)); done",
			 NULL };
	static char big[48 * 1024];
	char *envp[] = { big, NULL };
	struct sampler_opts o = { .callgraph = CALLGRAPH_DWARF, .buffer_mb = 8 };
	struct dwarf_seen d = { .self = getpid() };
	struct sampler *s = sampler__new(&o);
	char msg[512];
	pid_t pid;
	int err;

	memset(big, 'x', sizeof(big) - 1);
	memcpy(big, "PAD=", 4);
	cr_assert_not_null(s);
	err = sampler__launch(s, argv, envp, &pid);
	cr_assert_eq(err, 0, "launch: %s", sampler__open_strerror(err, msg, sizeof(msg)));
	cr_assert_eq(sampler__start(s), 0);
	for (long t; (t = cpu_ticks(pid)) >= 0 && t < 3 * sysconf(_SC_CLK_TCK);)
		usleep(20000);
	cr_assert_geq(cpu_ticks(pid), 0,
		      "the shell ended before it had run three seconds: the test's "
		      "premise");
	run_until_exit(s, pid, &d);
	cr_log_info("far behind: %llu samples, %llu with a stack (max %llu bytes), %llu without "
		    "(dropped: %llu), lost %llu",
		    (unsigned long long)d.samples, (unsigned long long)d.with_stack,
		    (unsigned long long)d.max_stack, (unsigned long long)d.dropped,
		    (unsigned long long)sampler__stats(s)->stacks_dropped,
		    (unsigned long long)sampler__stats(s)->lost);
	/* the premise: the copies overflow three quarters of the buffer */
	cr_assert_gt(d.samples * (d.max_stack + 256), 6ull << 20,
		     "%llu samples of at most %llu bytes: the test's premise",
		     (unsigned long long)d.samples, (unsigned long long)d.max_stack);
	cr_assert_leq(d.max_stack, SAMPLER_DEFAULT_STACK_SIZE);
	cr_assert_gt(d.with_stack, 0, "stacks kept until the buffer was tight");
	cr_assert_gt(d.dropped, 0);
	cr_assert_eq(d.dropped, sampler__stats(s)->stacks_dropped);
	cr_assert_eq(d.dropped_with_regs, d.dropped, "a dropped copy leaves the registers");
	cr_assert_eq(sampler__stats(s)->lost, 0);
	cr_assert_eq(sampler__stats(s)->bad_records, 0);
	u64map_free(&d.last_sample);
	u64map_free(&d.in_time);
	sampler__free(s);
}

/*
 * sampler__stack_top: told where the shell's stack ends (here 4 KiB above
 * the SPs of its first samples; its environment, 48 KiB, lies above), the
 * drain keeps each copy written after the word only up to there and 512
 * bytes more, and says so; told 0, whole copies again. Judged by the
 * samples' times against the words' (both CLOCK_MONOTONIC): the drain may
 * be any distance ahead of this callback. The shell waits for a file
 * before each loop, so that each word has samples after it.
 */
struct cut_seen {
	struct sampler *s;
	const char *go, *again;
	uint32_t tid;
	int state; /* 0: learning its SP, 1: told the top, 2: told 0 */
	uint64_t max_sp, first, top, set_at, forgot_at;
	uint64_t cut, bad_cut, whole_below_top, after_forget, cut_after_forget;
};

static uint64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void touch(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	close(fd);
}

static int collect_cut(void *ctx, const struct rec *r)
{
	struct cut_seen *c = ctx;
	const struct rec_sample *s = &r->sample;
	uint64_t sp;

	if (r->type != REC_SAMPLE || !s->stack_size || !(s->uregs.mask & (1ull << PERF_REG_X86_SP)))
		return 0;
	sp = s->uregs.regs[PERF_REG_X86_SP];
	if (!c->tid)
		c->tid = s->tid;
	if (s->tid != c->tid)
		return 0;
	if (c->state == 0) {
		/* the samples of its first wait for the file */
		c->max_sp = sp > c->max_sp ? sp : c->max_sp;
		if (++c->first == 20) {
			c->top = c->max_sp + 4096;
			sampler__stack_top(c->s, c->tid, c->top);
			c->set_at = mono_now();
			c->state = 1;
			touch(c->go);
		}
		return 0;
	}
	if (s->stack_cut) {
		/* up to the top and the margin, rounded up to a word, and no byte less */
		if (sp >= c->top ||
		    s->stack_size != ((c->top - sp + SAMPLER_TOP_MARGIN + 7) & ~7ull))
			c->bad_cut++;
	}
	if (c->state == 1 && s->time > c->set_at) {
		c->cut += s->stack_cut;
		c->whole_below_top += !s->stack_cut && sp < c->top;
		if (c->cut == 200) {
			sampler__stack_top(c->s, c->tid, 0);
			c->forgot_at = mono_now();
			c->state = 2;
			touch(c->again);
		}
	} else if (c->state == 2 && s->time > c->forgot_at) {
		c->after_forget++;
		c->cut_after_forget += s->stack_cut;
	}
	return 0;
}

Test(dwarf, copies_are_cut_where_the_threads_stack_ends, .timeout = 60)
{
	char go[64], again[64], script[1024];
	char *argv[] = { "/bin/sh", "-c", script, NULL };
	static char big[48 * 1024];
	char *envp[] = { big, NULL };
	struct sampler_opts o = { .callgraph = CALLGRAPH_DWARF };
	struct cut_seen c = { .go = go, .again = again };
	char msg[512];
	pid_t pid;
	int status, err;

	snprintf(go, sizeof(go), "/tmp/dlflame-cut-%d-go", (int)getpid());
	snprintf(again, sizeof(again), "/tmp/dlflame-cut-%d-again", (int)getpid());
	unlink(go);
	unlink(again);
	snprintf(script, sizeof(script),
		 "while [ ! -e '%s' ]; do :; done; i=0; while [ $i -lt 1000000 ]; do "
		 "i=$((i+1)); done; while [ ! -e '%s' ]; do :; done; i=0; "
		 "while [ $i -lt 400000 ]; do i=$((i+1)); done",
		 go, again);
	memset(big, 'x', sizeof(big) - 1);
	memcpy(big, "PAD=", 4);
	c.s = sampler__new(&o);
	cr_assert_not_null(c.s);
	err = sampler__launch(c.s, argv, envp, &pid);
	cr_assert_eq(err, 0, "launch: %s", sampler__open_strerror(err, msg, sizeof(msg)));
	cr_assert_eq(sampler__start(c.s), 0);
	for (;;) {
		cr_assert_eq(sampler__poll(c.s, 100, collect_cut, &c), 0);
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
	}
	cr_assert_eq(sampler__drain(c.s, collect_cut, &c), 0);
	cr_log_info("cut: %llu after the word, %llu whole below the top; after 0: %llu samples, "
		    "%llu cut; %llu bytes cut",
		    (unsigned long long)c.cut, (unsigned long long)c.whole_below_top,
		    (unsigned long long)c.after_forget, (unsigned long long)c.cut_after_forget,
		    (unsigned long long)sampler__stats(c.s)->stack_bytes_cut);
	cr_assert_eq(c.state, 2, "the shell ended before 200 copies were cut");
	cr_assert_eq(c.bad_cut, 0, "a copy cut elsewhere than at the top and the margin");
	cr_assert_eq(c.whole_below_top, 0, "a copy written after the word, below the top, whole");
	cr_assert_geq(sampler__stats(c.s)->stacks_cut, 200);
	cr_assert_gt(sampler__stats(c.s)->stack_bytes_cut, 200ull * 16 * 1024,
		     "the environment above the top was not copied");
	cr_assert_gt(c.after_forget, 100, "samples after the word was taken back");
	cr_assert_eq(c.cut_after_forget, 0, "a copy written after 0 was cut");
	unlink(go);
	unlink(again);
	sampler__free(c.s);
}

Test(dwarf, stack_size_validated)
{
	struct sampler_opts o = { .callgraph = CALLGRAPH_DWARF, .stack_size = 100 };

	errno = 0;
	cr_assert_null(sampler__new(&o));
	cr_assert_eq(errno, EINVAL);
	o.stack_size = 65536;
	cr_assert_null(sampler__new(&o));
	o.callgraph = 7;
	o.stack_size = 0;
	cr_assert_null(sampler__new(&o));
	o.callgraph = CALLGRAPH_DWARF;
	o.stack_size = SAMPLER_MAX_STACK_SIZE;
	struct sampler *s = sampler__new(&o);
	cr_assert_not_null(s);
	sampler__free(s);
}

/* Context switches: each switch-out record follows the stack sample of the same switch. */
static void switch_case(enum callgraph_mode cg, bool only)
{
	char *argv[] = { "/bin/sh", "-c",
			 "for i in 1 2 3 4 5; do sleep 0.05; i=0; while [ $i -lt 2000 ]; do "
			 "i=$((i+1)); done; done",
			 NULL };
	struct sampler_opts o = { .callgraph = cg, .offcpu = true, .offcpu_only = only };
	struct dwarf_seen d = { .self = getpid() };
	struct sampler *s = sampler__new(&o);
	char msg[512];
	pid_t pid;
	int err;

	err = sampler__launch(s, argv, NULL, &pid);
	cr_assert_eq(err, 0, "launch: %s", sampler__open_strerror(err, msg, sizeof(msg)));
	cr_assert_eq(sampler__start(s), 0);
	run_until_exit(s, pid, &d);
	cr_log_info("switches: %llu out (%llu preempted), %llu in, %llu stack samples, %llu on-CPU",
		    (unsigned long long)d.outs, (unsigned long long)d.preempt_outs,
		    (unsigned long long)d.ins, (unsigned long long)d.switch_samples,
		    (unsigned long long)d.oncpu);
	cr_assert_geq(d.outs, 10, "five sleeps and five sleep(1) processes switch out");
	cr_assert_geq(d.ins, 10);
	cr_assert_lt(d.preempt_outs, d.outs);
	cr_assert_geq(d.switch_samples, d.outs);
	cr_assert_eq(d.outs_after_sample, d.outs, "a switch-out record without its stack sample");
	if (only)
		cr_assert_eq(d.oncpu, 0);
	else
		cr_assert_gt(d.oncpu, 0);
	if (cg == CALLGRAPH_DWARF)
		cr_assert_geq(d.with_stack * 2, d.samples, "blocked threads have a user stack");
	cr_assert_eq(d.self_samples, 0);
	cr_assert_eq(sampler__stats(s)->bad_records, 0);
	u64map_free(&d.last_sample);
	u64map_free(&d.in_time);
	sampler__free(s);
}

Test(offcpu, switch_records_and_samples_fp, .timeout = 60)
{
	switch_case(CALLGRAPH_FP, false);
}

Test(offcpu, switch_records_and_samples_dwarf_only, .timeout = 60)
{
	switch_case(CALLGRAPH_DWARF, true);
}

/* ---- attach ------------------------------------------------------------- */

static pid_t spawn(char *const argv[])
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

Test(attach, follows_a_running_process_until_it_exits, .timeout = 60)
{
	char *argv[] = {
		"/bin/sh", "-c",
		"while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 0.02; done",
		NULL
	};
	struct sampler_opts o = { .offcpu = true };
	struct dwarf_seen d = { .self = getpid() };
	struct sampler *s = sampler__new(&o);
	const struct sampler_stats *st = sampler__stats(s);
	char msg[512];
	uint64_t t0;
	pid_t pid = spawn(argv);
	int err;

	usleep(100000);
	d.want_pid = (uint32_t)pid;
	err = sampler__attach(s, &pid, 1, false);
	cr_assert_eq(err, 0, "attach: %s", sampler__open_strerror(err, msg, sizeof(msg)));
	cr_assert_eq(st->threads_followed, 1);
	cr_assert_eq(st->threads_missed, 0);
	cr_assert_gt(st->start_time, 0);
	cr_assert_eq(sampler__attach(s, &pid, 1, false), -EBUSY);
	t0 = mono_ms();
	while (mono_ms() - t0 < 700) {
		cr_assert_eq(sampler__poll(s, 100, collect_dwarf, &d), 0);
		cr_assert_not(sampler__targets_gone(s));
	}
	cr_assert_eq(kill(pid, 0), 0, "attaching stopped or killed the target");
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	t0 = mono_ms();
	while (!sampler__targets_gone(s)) {
		cr_assert_lt(mono_ms() - t0, 5000, "targets_gone never said so");
		cr_assert_eq(sampler__poll(s, 50, collect_dwarf, &d), 0);
	}
	cr_assert_eq(sampler__drain(s, collect_dwarf, &d), 0);
	cr_log_info("attach: %llu on-CPU, %llu switch samples, %llu out, %llu in",
		    (unsigned long long)d.oncpu, (unsigned long long)d.switch_samples,
		    (unsigned long long)d.outs, (unsigned long long)d.ins);
	cr_assert_gt(d.oncpu, 20);
	cr_assert_geq(d.outs, 10, "the sleeps are seen (children of the target, inherited)");
	cr_assert_geq(d.switch_samples, 10);
	cr_assert_eq(d.self_samples, 0, "dlflame sampled itself");
	u64map_free(&d.last_sample);
	u64map_free(&d.in_time);
	sampler__free(s);
}

Test(attach, missing_pid_and_tid)
{
	struct sampler *s = sampler__new(NULL);
	pid_t none = 0x3ffffff0, bad = -1;

	cr_assert_eq(sampler__attach(s, &none, 1, false), -ESRCH);
	cr_assert_eq(sampler__attach(s, &none, 1, true), -ESRCH);
	cr_assert_eq(sampler__attach(s, &bad, 1, false), -EINVAL);
	/* one of several missing */
	pid_t two[] = { getpid(), none };
	cr_assert_eq(sampler__attach(s, two, 2, false), -ESRCH);
	cr_assert_not(sampler__targets_gone(s), "not attached");
	sampler__free(s);
}

/* ---- attach: the threads found, as /proc saw them ---------------------- */

static void *sleeper(void *arg)
{
	int fd = *(int *)arg;
	char c;

	pthread_setname_np(pthread_self(), "smp-sleeper");
	/* blocked in read(2) until the test ends */
	while (read(fd, &c, 1) < 0)
		;
	return NULL;
}

/* In a forked child: one thread asleep in read(), the main thread spinning. */
static volatile uint64_t
	spins; /* what the spinning thread counts (kept: gcc 16 calls a local unused) */

static void __attribute__((noreturn)) sleep_and_spin(int fd)
{
	pthread_t t;

	pthread_create(&t, NULL, sleeper, &fd);
	for (;;)
		spins++;
}

static const struct sampler_thread *find_thread(const struct sampler_thread *t, size_t n, pid_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].tid == tid)
			return &t[i];
	return NULL;
}

/* The sleeper's tid, from /proc/PID/task once it has named itself. */
static pid_t sleeper_tid(pid_t pid)
{
	char path[300], comm[64];
	struct dirent *de;
	pid_t tid = 0;
	DIR *d;

	for (int tries = 0; !tid && tries < 200; tries++) {
		usleep(10000);
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		d = opendir(path);
		cr_assert_not_null(d);
		while (!tid && (de = readdir(d))) {
			FILE *f;

			snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, de->d_name);
			f = de->d_name[0] != '.' ? fopen(path, "re") : NULL;
			if (!f)
				continue;
			if (fgets(comm, sizeof(comm), f) && !strcmp(comm, "smp-sleeper\n"))
				tid = atoi(de->d_name);
			fclose(f);
		}
		closedir(d);
	}
	return tid;
}

Test(attach, threads_found_with_name_and_sleep, .timeout = 60)
{
	struct sampler *s = sampler__new(NULL), *s2 = sampler__new(NULL);
	const struct sampler_thread *t, *sl, *main_thread;
	char msg[512];
	int fds[2];
	size_t n = 7;
	pid_t pid, tid;
	int err;

	cr_assert_null(sampler__threads(s, &n), "no attach, no threads");
	cr_assert_eq(n, 0);
	cr_assert_eq(pipe(fds), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(fds[1]);
		sleep_and_spin(fds[0]);
	}
	close(fds[0]);
	tid = sleeper_tid(pid);
	cr_assert_gt(tid, 0, "the sleeper thread never showed up");
	usleep(50000); /* asleep in read() by now */

	err = sampler__attach(s, &pid, 1, false);
	cr_assert_eq(err, 0, "attach: %s", sampler__attach_strerror(err, msg, sizeof(msg)));
	t = sampler__threads(s, &n);
	cr_assert_not_null(t);
	cr_assert_eq(n, 2, "%zu threads", n);
	main_thread = find_thread(t, n, pid);
	sl = find_thread(t, n, tid);
	cr_assert_not_null(main_thread);
	cr_assert_not_null(sl);
	cr_assert_eq(sl->pid, pid);
	cr_assert_eq(main_thread->pid, pid);
	cr_assert(sl->followed && main_thread->followed);
	cr_assert_str_eq(sl->comm, "smp-sleeper");
	cr_assert(sl->blocked, "a thread in read() is asleep");
	cr_assert_not(main_thread->blocked, "a spinning thread is not");
	cr_assert_eq(main_thread->pc, 0);
	cr_assert_str_eq(main_thread->wchan, "");
	cr_assert_neq(sl->pc, 0, "the user PC of the blocked read()");
	cr_assert_lt(strlen(sl->wchan), SAMPLER_WCHAN_LEN);

	/* -t: just that thread, its process found from /proc */
	err = sampler__attach(s2, &tid, 1, true);
	cr_assert_eq(err, 0, "attach -t: %s", sampler__attach_strerror(err, msg, sizeof(msg)));
	t = sampler__threads(s2, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(t[0].tid, tid);
	cr_assert_eq(t[0].pid, pid);
	cr_assert(t[0].blocked);
	cr_assert_str_eq(t[0].comm, "smp-sleeper");

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(fds[1]);
	sampler__free(s);
	sampler__free(s2);
}

/* ---- attach: a thread followed twice is reported once ------------------ */

static void *short_lived(void *arg)
{
	for (int i = 0; i < 5; i++)
		usleep(2000);
	return NULL;
}

/* In a forked child: create a short-lived thread every 200 us, forever. */
static void __attribute__((noreturn)) churn_threads(void)
{
	pthread_attr_t a;
	pthread_t t;

	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	for (;;) {
		pthread_create(&t, &a, short_lived, NULL);
		usleep(200);
	}
}

struct dup_seen {
	struct u64map last; /* tid -> 1 + whether its last switch was out */
	struct u64map last_time; /* tid -> the time of its last switch */
	uint64_t switches, dups, forks;
	uint64_t same_time; /* of dups, those at the time of the one before: one record twice */
	uint64_t earlier; /* switches older than their thread's one before: out of order */
	uint64_t earlier_by; /* the first of those: by how much (ns) */
	uint64_t
		dup_gap; /* the first dup's time minus the one before's (ns; out of order if huge) */
	uint32_t pid;
};

/*
 * A thread's switches alternate out, in, out... A copy of each (from a
 * second event on the same thread) makes two outs or two ins in a row.
 */
static int collect_dups(void *ctx, const struct rec *r)
{
	struct dup_seen *d = ctx;
	uint64_t v;

	if (r->type == REC_FORK && r->fork.pid == d->pid)
		d->forks++;
	if (r->type != REC_SWITCH || r->sw.pid != d->pid)
		return 0;
	d->switches++;
	if (u64map_get(&d->last, r->sw.tid, &v) && v == 1u + r->sw.out) {
		uint64_t t = 0;

		/* a record delivered twice repeats its time; a reordered one does not */
		u64map_get(&d->last_time, r->sw.tid, &t);
		if (t == r->sw.time)
			d->same_time++;
		if (r->sw.time < t && !d->earlier++)
			d->earlier_by = t - r->sw.time;
		if (!d->dups)
			d->dup_gap = r->sw.time - t;
		d->dups++;
	}
	u64map_put(&d->last, r->sw.tid, 1u + r->sw.out);
	u64map_put(&d->last_time, r->sw.tid, r->sw.time);
	return 0;
}

/*
 * Attach to a process that creates a short-lived thread every 200 us and
 * count, for 400 ms, switches that come twice in a row for their thread.
 * mmap_pages 0: the sampler's default rings.
 */
static void churn_attached(uint32_t mmap_pages, struct dup_seen *d, struct sampler_stats *st)
{
	struct sampler_opts o = { .offcpu = true, .offcpu_only = true, .mmap_pages = mmap_pages };
	struct sampler *s = sampler__new(&o);
	char msg[512];
	uint64_t t0;
	pid_t pid;
	int err;

	cr_assert_not_null(s);
	u64map_init(&d->last);
	u64map_init(&d->last_time);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		churn_threads();
	d->pid = (uint32_t)pid;
	usleep(100000);
	err = sampler__attach(s, &pid, 1, false);
	cr_assert_eq(err, 0, "attach: %s", sampler__attach_strerror(err, msg, sizeof(msg)));
	t0 = mono_ms();
	while (mono_ms() - t0 < 400)
		cr_assert_eq(sampler__poll(s, 50, collect_dups, d), 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	cr_assert_eq(sampler__drain(s, collect_dups, d), 0);
	*st = *sampler__stats(s);
	cr_log_info("churn (%u pages a ring): %llu threads followed at attach, %llu created since, "
		    "%llu switches, %llu doubled (%llu out of order), %llu short rounds, %llu lost",
		    mmap_pages, (unsigned long long)st->threads_followed,
		    (unsigned long long)d->forks, (unsigned long long)d->switches,
		    (unsigned long long)d->dups, (unsigned long long)d->earlier,
		    (unsigned long long)st->short_rounds, (unsigned long long)st->lost);
	u64map_free(&d->last);
	u64map_free(&d->last_time);
	sampler__free(s);
}

/*
 * Two outs or two ins in a row: a record delivered twice (the same time)
 * or switches delivered out of their order. Either fails; the message says
 * which.
 */
static void assert_no_dups(const struct dup_seen *d)
{
	cr_assert_eq(d->dups, 0,
		     "%llu switches came twice in a row for their thread: %llu at the same time "
		     "(delivered twice), the rest not (out of order; the first %lld ns after the "
		     "one before)",
		     (unsigned long long)d->dups, (unsigned long long)d->same_time,
		     (long long)d->dup_gap);
}

/*
 * Threads created while attaching are found by a rescan after they already
 * inherited their creator's events: their records must not come twice.
 */
Test(attach, threads_created_while_attaching_are_not_doubled, .timeout = 60)
{
	struct dup_seen d = { 0 };
	struct sampler_stats st;

	churn_attached(0, &d, &st);
	cr_assert_gt(d.forks, 100, "threads created after the attach are followed (inherit)");
	cr_assert_gt(d.switches, 1000);
	cr_assert_eq(st.lost, 0);
	assert_no_dups(&d);
}

/*
 * Rings too small for the usual holdback: every round holds back less, and
 * a record one ring had must still not be sorted before an older one that
 * another ring's copy had not reached yet. (Delivering everything then put
 * a thread's switch-in 694 us after its next one, under ASan.)
 */
Test(attach, switches_stay_in_order_when_rounds_hold_back_less, .timeout = 60)
{
	struct dup_seen d = { 0 };
	struct sampler_stats st;

	churn_attached(8, &d, &st);
	cr_assert_gt(st.short_rounds, 0, "32 KiB rings hold less than the usual holdback");
	cr_assert_gt(d.switches, 1000);
	cr_assert_eq(d.earlier, 0,
		     "%llu switches were handed out after their thread's next one (the first "
		     "%llu ns before it)",
		     (unsigned long long)d.earlier, (unsigned long long)d.earlier_by);
	/* rings this small may lose records on a busy machine: a lost switch makes two in a row */
	if (!st.lost)
		assert_no_dups(&d);
}
