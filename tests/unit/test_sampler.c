/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <linux/perf_event.h>

#include "sampler/sampler.h"

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

	rb_start(&b, PERF_RECORD_SWITCH, PERF_RECORD_MISC_SWITCH_OUT);
	rb_trailer(&b, 1, 1, 4002);
	rb_end(&b);
	cr_assert_eq(rec_decode(&layout, rb_bytes(&b), b.len, &r), 0);
	cr_assert_eq(r.type, REC_OTHER);
	cr_assert_eq(r.misc, PERF_RECORD_MISC_SWITCH_OUT);
	cr_assert_eq(r.time, 4002);
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

	/* The target is gone: poll must sleep, not return at once forever. */
	cr_assert_eq(sampler__poll(s, 0, collect, &seen), 0);
	t0 = mono_ms();
	cr_assert_eq(sampler__poll(s, 200, collect, &seen), 0);
	cr_assert_geq(mono_ms() - t0, 150, "poll returned at once after the target exited");

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
