/* SPDX-License-Identifier: MIT */
/*
 * The perf.data reader against files written by the real `perf record`
 * (Debian's linux-perf is the oracle): same sample counts as `perf script`,
 * every truncation and corruption reported, never a crash. perf record -z's
 * compressed stream is also decoded on its own (unzstd), from streams that
 * libzstd makes the way perf does.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "sampler/perfdata.h"
#include "sampler/unzstd.h"

static char dir[64];

static void setup(void)
{
	strcpy(dir, "/tmp/dlflame-pd-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert(!system("command -v perf >/dev/null"),
		  "perf is not installed: scripts/setup.sh installs linux-perf");
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		cr_log_warn("cannot remove %s", dir);
}

TestSuite(perfdata, .init = setup, .fini = teardown, .timeout = 120);

#define BUSY "sh -c 'i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done'"

/* perf record ARGS -o PATH -- BUSY, output to PATH (or to the stream with "-") */
static void perf_record(const char *args, const char *path)
{
	char cmd[1024];

	if (strcmp(args, "PIPE") == 0)
		snprintf(cmd, sizeof(cmd), "perf record -q -g -F 999 -o - -- %s 2>/dev/null > '%s'",
			 BUSY, path);
	else
		snprintf(cmd, sizeof(cmd), "perf record -q %s -F 999 -o '%s' -- %s >/dev/null 2>&1",
			 args, path, BUSY);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

struct counts {
	unsigned long samples, with_chain, mmaps, comms, switches, out_of_order;
	uint64_t last_time;
};

static int count_cb(void *ctx, const struct rec *r)
{
	struct counts *c = ctx;

	if (r->time) {
		if (r->time < c->last_time)
			c->out_of_order++;
		c->last_time = r->time;
	}
	switch (r->type) {
	case REC_SAMPLE:
		c->samples++;
		if (r->sample.nr > 1)
			c->with_chain++;
		break;
	case REC_MMAP2:
		c->mmaps++;
		break;
	case REC_COMM:
		c->comms++;
		break;
	case REC_SWITCH:
		c->switches++;
		break;
	default:
		break;
	}
	return 0;
}

static unsigned long perf_script_samples(const char *path)
{
	char cmd[512];
	unsigned long n = 0;

	/* one line per sample: -F tid,ip without the callchain */
	snprintf(cmd, sizeof(cmd), "perf script -i '%s' -F tid -G 2>/dev/null | wc -l", path);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%lu", &n), 1);
	pclose(f);
	return n;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	uint8_t *b = malloc(*len);
	cr_assert_eq(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

static void spit(const char *path, const void *b, size_t len)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(b, 1, len, f), len);
	fclose(f);
}

Test(perfdata, fp_file_matches_perf_script)
{
	char path[128];
	struct counts c = { 0 };
	struct perfdata_info info;
	struct perfdata_error e = { 0 };

	snprintf(path, sizeof(path), "%s/fp.data", dir);
	perf_record("-g", path);
	cr_assert_eq(perfdata__read(path, count_cb, &c, &info, &e), 0, "%s at %lu", e.what,
		     (unsigned long)e.offset);
	cr_assert_gt(c.samples, 50);
	cr_assert_eq(c.samples, perf_script_samples(path), "same samples as perf script");
	cr_assert_eq(c.samples, info.samples);
	cr_assert_gt(c.with_chain, c.samples / 2, "callchains decoded");
	cr_assert_gt(c.mmaps, 0);
	cr_assert_gt(c.comms, 0);
	cr_assert_eq(c.out_of_order, 0, "records come in time order");
	cr_assert(info.callchain && !info.dwarf && !info.pipe_mode && info.finalized);
	cr_assert_str_eq(info.event, "cpu-clock");
	cr_assert_eq(info.freq, 999);
}

Test(perfdata, dwarf_and_switch_events)
{
	char path[128];
	struct counts c = { 0 };
	struct perfdata_info info;
	struct perfdata_error e = { 0 };

	snprintf(path, sizeof(path), "%s/dw.data", dir);
	perf_record("--call-graph dwarf,4096 --switch-events", path);
	cr_assert_eq(perfdata__read(path, count_cb, &c, &info, &e), 0, "%s (%s) at %lu", e.what,
		     e.record, (unsigned long)e.offset);
	cr_assert(info.dwarf && info.switch_events);
	cr_assert_gt(c.samples, 50);
	cr_assert_eq(c.samples, perf_script_samples(path));
	cr_assert_gt(c.switches, 0);
}

Test(perfdata, pipe_mode_stream)
{
	char path[128];
	struct counts c = { 0 };
	struct perfdata_info info;
	struct perfdata_error e = { 0 };

	snprintf(path, sizeof(path), "%s/pipe.data", dir);
	perf_record("PIPE", path);
	cr_assert_eq(perfdata__read(path, count_cb, &c, &info, &e), 0, "%s at %lu", e.what,
		     (unsigned long)e.offset);
	cr_assert(info.pipe_mode);
	cr_assert_gt(c.samples, 50);
	cr_assert_eq(c.out_of_order, 0);
}

/* The ways to read a file-mode data section: read(), the default window, the smallest window. */
static const size_t windows[] = { SIZE_MAX, 0, 1 };
#define NWINDOWS (sizeof(windows) / sizeof(windows[0]))

/* Every way of reading gives the same result, and the same error: what, where, which record. */
static int same_result(const char *path, const char *why)
{
	struct perfdata_error first = { 0 };
	int first_r = 0;

	for (size_t w = 0; w < NWINDOWS; w++) {
		struct counts c = { 0 };
		struct perfdata_error e = { 0 };

		perfdata__set_window(windows[w]);
		int r = perfdata__read(path, count_cb, &c, NULL, &e);
		if (w == 0)
			first_r = r;
		cr_assert_eq(r, first_r, "%s (window %zu): got %d", why, windows[w], r);
		if (r != -EINVAL)
			continue;
		cr_assert_not_null(e.what, "%s", why);
		cr_assert_not_null(e.record, "%s", why);
		if (w == 0) {
			first = e;
			continue;
		}
		cr_assert_str_eq(e.what, first.what, "%s (window %zu)", why, windows[w]);
		cr_assert_str_eq(e.record, first.record, "%s (window %zu)", why, windows[w]);
		cr_assert_eq(e.offset, first.offset, "%s (window %zu): %s", why, windows[w],
			     e.what);
	}
	perfdata__set_window(0);
	return first_r;
}

static void expect_einval(const char *path, const char *why)
{
	int r = same_result(path, why);

	cr_assert_eq(r, -EINVAL, "%s: got %d", why, r);
}

/* Every record's kind, time and content, hashed in delivery order. */
struct digest {
	uint64_t h;
	unsigned long records;
};

static void mix(struct digest *d, const void *p, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		d->h = (d->h ^ b[i]) * 1099511628211ULL;
}

static int digest_cb(void *ctx, const struct rec *r)
{
	struct digest *d = ctx;

	d->records++;
	mix(d, &r->type, sizeof(r->type));
	mix(d, &r->time, sizeof(r->time));
	switch (r->type) {
	case REC_SAMPLE:
		mix(d, &r->sample.tid, sizeof(r->sample.tid));
		mix(d, r->sample.ips, r->sample.nr * sizeof(uint64_t));
		mix(d, &r->sample.uregs, sizeof(r->sample.uregs));
		if (r->sample.stack_size)
			mix(d, r->sample.stack, r->sample.stack_size);
		break;
	case REC_MMAP2:
		mix(d, r->mmap2.filename, strlen(r->mmap2.filename));
		break;
	case REC_COMM:
		mix(d, r->comm.comm, strlen(r->comm.comm));
		break;
	default:
		break;
	}
	return 0;
}

static struct digest digest_of(const char *path, size_t window)
{
	struct digest d = { .h = 1469598103934665603ULL };
	struct perfdata_error e = { 0 };

	perfdata__set_window(window);
	int r = perfdata__read(path, digest_cb, &d, NULL, &e);
	perfdata__set_window(0);
	cr_assert_eq(r, 0, "window %zu: %s (%s) at %lu", window, e.what, e.record,
		     (unsigned long)e.offset);
	return d;
}

Test(perfdata, truncations_and_corruption_are_errors)
{
	char path[128], bad[128];
	size_t len;

	snprintf(path, sizeof(path), "%s/t.data", dir);
	snprintf(bad, sizeof(bad), "%s/bad.data", dir);
	perf_record("-g", path);
	uint8_t *b = slurp(path, &len);
	uint64_t data_off = *(uint64_t *)(b + 40), data_size = *(uint64_t *)(b + 48);

	/* cut inside the header, the attrs, and at many points of the data section */
	size_t cuts[] = { 0, 7, 8, 16, 50, 103, 104, 200 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		spit(bad, b, cuts[i]);
		expect_einval(bad, "cut in the header");
	}
	for (uint64_t at = data_off + 1; at < data_off + data_size; at += (data_size / 37) | 1) {
		spit(bad, b, at);
		expect_einval(bad, "cut in the data");
	}
	/* a record size that runs past the end (perf 6.1 dies with SIGBUS on this) */
	uint8_t *c = malloc(len);
	memcpy(c, b, len);
	c[data_off + 6] = 0xff;
	c[data_off + 7] = 0xff;
	spit(bad, c, len);
	expect_einval(bad, "huge record size");
	/* a header that claims more data than the file holds */
	memcpy(c, b, len);
	uint64_t more = data_size + 4096;
	memcpy(c + 48, &more, sizeof(more));
	spit(bad, c, len);
	expect_einval(bad, "data size past the end of the file");
	/* an unfinished file (data size 0: read to the end of the file) cut in its data */
	memcpy(c, b, len);
	memset(c + 48, 0, 8);
	int cut_errors = 0;
	for (uint64_t at = data_off + 3; at < data_off + data_size; at += (data_size / 11) | 1) {
		spit(bad, c, at);
		/* a cut between two records is a shorter file, read whole */
		cut_errors += same_result(bad, "unfinished file cut in the data") == -EINVAL;
	}
	cr_assert_gt(cut_errors, 5);
	/* an AUXTRACE record whose payload runs past the data section, into perf's features */
	uint64_t aux = data_size - 8;
	cr_assert_gt(len, data_off + data_size + 8);
	memcpy(c, b, len);
	memset(c + data_off, 0, 8);
	c[data_off] = 71; /* PERF_RECORD_AUXTRACE */
	c[data_off + 6] = 16;
	memcpy(c + data_off + 8, &aux, sizeof(aux));
	spit(bad, c, len);
	expect_einval(bad, "aux payload past the data section");
	/* random bytes over the data: an error or a read, never a crash */
	srand(3);
	for (int round = 0; round < 200; round++) {
		struct counts cc = { 0 };
		struct perfdata_error e = { 0 };

		memcpy(c, b, len);
		for (int k = 0; k < 8; k++)
			c[data_off + (size_t)rand() % data_size] = (uint8_t)rand();
		spit(bad, c, len);
		perfdata__set_window((size_t)round % 2 ? SIZE_MAX : 1);
		int r = perfdata__read(bad, count_cb, &cc, NULL, &e);
		perfdata__set_window(0);
		cr_assert(r == 0 || r == -EINVAL, "round %d: %d", round, r);
	}
	free(c);
	free(b);
}

Test(perfdata, foreign_files)
{
	char bad[128];
	uint8_t junk[4096];

	snprintf(bad, sizeof(bad), "%s/junk", dir);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 131);
	spit(bad, junk, sizeof(junk));
	expect_einval(bad, "junk");
	spit(bad, "", 0);
	expect_einval(bad, "empty");
	expect_einval(dir, "a directory");
	cr_assert_eq(perfdata__read("/nonexistent.data", count_cb, NULL, NULL, NULL), -ENOENT);
	cr_assert(perfdata__is_perf_file("PERFILE2", 8));
	cr_assert(!perfdata__is_perf_file("DLFLAME\x01", 8));
}

Test(perfdata, mapped_and_read_give_the_same_records)
{
	char path[128], moved[128];
	size_t len;

	snprintf(path, sizeof(path), "%s/same.data", dir);
	snprintf(moved, sizeof(moved), "%s/moved.data", dir);
	perf_record("--call-graph dwarf,8192", path);
	struct digest base = digest_of(path, SIZE_MAX);
	cr_assert_gt(base.records, 50);
	/* the default window holds the file; the smallest one moves many times */
	for (size_t w = 1; w < NWINDOWS; w++) {
		struct digest d = digest_of(path, windows[w]);
		cr_assert_eq(d.records, base.records, "window %zu", windows[w]);
		cr_assert_eq(d.h, base.h, "window %zu: other records or another order", windows[w]);
	}
	/* a data section 4 bytes off the u64 alignment: every record is copied, same result */
	uint8_t *b = slurp(path, &len);
	uint64_t data_off = *(uint64_t *)(b + 40);
	cr_assert_lt(*(uint64_t *)(b + 24), data_off, "attrs lie before the data");
	uint8_t *c = calloc(1, len + 4);
	memcpy(c, b, data_off);
	memcpy(c + data_off + 4, b + data_off, len - data_off);
	*(uint64_t *)(c + 40) = data_off + 4;
	spit(moved, c, len + 4);
	for (size_t w = 0; w < NWINDOWS; w++) {
		struct digest d = digest_of(moved, windows[w]);
		cr_assert_eq(d.h, base.h, "misaligned data, window %zu", windows[w]);
	}
	free(c);
	free(b);
}

struct shrink {
	const char *path;
	off_t to;
	unsigned long records;
};

static int shrink_cb(void *ctx, const struct rec *r)
{
	struct shrink *s = ctx;

	(void)r;
	if (s->records++ == 0)
		cr_assert_eq(truncate(s->path, s->to), 0, "truncate %s", s->path);
	return 0;
}

/* A file cut short while it is read (mapped or not): an error, never SIGBUS. */
Test(perfdata, file_that_shrinks_while_read_is_an_error)
{
	char path[128], orig[128];
	size_t len;
	struct sigaction before, after;

	snprintf(orig, sizeof(orig), "%s/orig.data", dir);
	snprintf(path, sizeof(path), "%s/shrink.data", dir);
	perf_record("--call-graph dwarf,8192", orig);
	uint8_t *b = slurp(orig, &len);
	uint64_t data_off = *(uint64_t *)(b + 40), data_size = *(uint64_t *)(b + 48);
	cr_assert_gt(data_size, 8 * 65536, "enough data for the smallest window to move");
	cr_assert_eq(sigaction(SIGBUS, NULL, &before), 0);
	for (size_t w = 0; w < NWINDOWS; w++) {
		struct shrink s = { .path = path, .to = (off_t)((data_off + 4096) & ~4095ULL) };
		struct perfdata_error e = { 0 };

		spit(path, b, len);
		perfdata__set_window(windows[w]);
		int r = perfdata__read(path, shrink_cb, &s, NULL, &e);
		perfdata__set_window(0);
		cr_assert_gt(s.records, 0);
		if (windows[w] == SIZE_MAX && r == 0)
			continue; /* read() may have copied it all before the first record went out */
		cr_assert_eq(r, -EINVAL, "window %zu: got %d", windows[w], r);
		cr_assert_not_null(e.what);
		cr_assert_gt(e.offset, data_off, "window %zu: %s", windows[w], e.what);
		if (windows[w] != SIZE_MAX)
			cr_assert_str_eq(e.what, "the file shrank while it was read", "window %zu",
					 windows[w]);
	}
	/* the SIGBUS handler is put back, and a whole file reads again */
	cr_assert_eq(sigaction(SIGBUS, NULL, &after), 0);
	cr_assert_eq((void *)after.sa_handler, (void *)before.sa_handler);
	spit(path, b, len);
	struct digest d = digest_of(path, 0);
	cr_assert_gt(d.records, 50);
	free(b);
}

/* ---- perf record -z ------------------------------------------------------- */

/* The COMPRESSED records' (type 81) offsets and sizes in a file-mode perf.data. */
static size_t compressed_records(const uint8_t *b, uint64_t *offs, uint16_t *sizes, size_t max)
{
	uint64_t data_off = *(uint64_t *)(b + 40), data_size = *(uint64_t *)(b + 48);
	size_t n = 0;

	for (uint64_t p = data_off; p < data_off + data_size;) {
		uint16_t size;
		uint32_t type;

		/* records need not be aligned (a COMPRESSED record's size is any) */
		memcpy(&size, b + p + 6, sizeof(size));
		memcpy(&type, b + p, sizeof(type));
		cr_assert_geq(size, 8);
		if (type == 81 && n < max) {
			offs[n] = p;
			sizes[n++] = size;
		}
		p += size;
	}
	return n;
}

Test(perfdata, compressed_file_matches_perf_script)
{
	char path[128], bad[128];
	struct counts c = { 0 };
	struct perfdata_info info;
	struct perfdata_error e = { 0 };
	uint64_t offs[4096];
	uint16_t sizes[4096];
	size_t len, n;

	snprintf(path, sizeof(path), "%s/z.data", dir);
	snprintf(bad, sizeof(bad), "%s/zbad.data", dir);
	perf_record("-z --call-graph dwarf,8192", path);
	cr_assert_eq(perfdata__read(path, count_cb, &c, &info, &e), 0, "%s (%s) at %lu", e.what,
		     e.record, (unsigned long)e.offset);
	cr_assert_gt(c.samples, 50);
	cr_assert_eq(c.samples, perf_script_samples(path), "same samples as perf script");
	cr_assert_eq(c.out_of_order, 0, "records come in time order");
	cr_assert(info.dwarf);
	/* mapped, read() and the smallest window: the same records in the same order */
	struct digest base = digest_of(path, SIZE_MAX);
	for (size_t w = 1; w < NWINDOWS; w++)
		cr_assert_eq(digest_of(path, windows[w]).h, base.h, "window %zu", windows[w]);

	uint8_t *b = slurp(path, &len);
	uint8_t *x = malloc(len);
	n = compressed_records(b, offs, sizes, 4096);
	cr_assert_gt(n, 3, "perf -z wrote COMPRESSED records");
	/* a payload's first bytes (frame or block header) inverted: corrupt zstd data */
	for (size_t k = 0; k < n; k += n / 3) {
		struct perfdata_error ek = { 0 };

		memcpy(x, b, len);
		for (size_t i = 8; i < 72 && i < sizes[k]; i++)
			x[offs[k] + i] ^= 0xff;
		spit(bad, x, len);
		expect_einval(bad, "corrupt payload");
		perfdata__read(bad, count_cb, &(struct counts){ 0 }, NULL, &ek);
		cr_assert_str_eq(ek.record, "COMPRESSED");
		cr_assert_str_eq(ek.what, "corrupt zstd data");
		cr_assert_eq(ek.offset, offs[k], "the offset of the corrupt COMPRESSED record");
	}
	/* a later perf's COMPRESSED2 (type 83) is said, not skipped with its samples */
	memcpy(x, b, len);
	x[offs[0]] = 83;
	spit(bad, x, len);
	expect_einval(bad, "COMPRESSED2");
	struct perfdata_error e2 = { 0 };
	perfdata__read(bad, count_cb, &(struct counts){ 0 }, NULL, &e2);
	cr_assert_str_eq(e2.record, "COMPRESSED2");
	cr_assert_eq(e2.offset, offs[0]);
	/* a COMPRESSED record cut short, its size field smaller: the stream goes wrong after it */
	memcpy(x, b, len);
	for (size_t k = 0; k < n; k++) {
		if (sizes[k] < 200)
			continue;
		uint16_t shorter = sizes[k] - 64;
		memcpy(x + offs[k] + 6, &shorter, 2);
		memset(x + offs[k] + shorter, 0, 64); /* padding: an empty record, size 0 */
		spit(bad, x, len);
		expect_einval(bad, "payload cut short");
		break;
	}
	/* random bytes over the compressed records: an error or a read, never a crash */
	srand(5);
	for (int round = 0; round < 100; round++) {
		struct perfdata_error er = { 0 };
		size_t k = (size_t)rand() % n;

		memcpy(x, b, len);
		for (int j = 0; j < 4; j++)
			x[offs[k] + 8 + (size_t)rand() % (sizes[k] - 8u)] = (uint8_t)rand();
		spit(bad, x, len);
		int r = perfdata__read(bad, count_cb, &(struct counts){ 0 }, NULL, &er);
		cr_assert(r == 0 || r == -EINVAL, "round %d: %d", round, r);
	}
	/* cut at many points of the data section */
	uint64_t data_off = *(uint64_t *)(b + 40), data_size = *(uint64_t *)(b + 48);
	for (uint64_t at = data_off + 1; at < data_off + data_size; at += (data_size / 23) | 1) {
		spit(bad, b, at);
		expect_einval(bad, "cut in the compressed data");
	}
	free(x);
	free(b);
}

/*
 * A zstd bomb in a real file: a frame of 8 MiB of FINISHED_ROUND records
 * (valid records, so only the caps stop them: perf's buffer for one
 * COMPRESSED record, 516 KiB, or the ratio) written over the payloads of
 * the first COMPRESSED records (the stream continues from one to the next,
 * and the first is where perf's frame begins), then a zstd skippable frame
 * to the end of the last one it reaches.
 */
Test(perfdata, compressed_bomb_stops_at_perfs_buffer_size)
{
	char path[128], bad[128];
	uint64_t offs[4096];
	uint16_t sizes[4096];
	size_t len, big = (size_t)8 << 20, n, k, room = 0;

	snprintf(path, sizeof(path), "%s/z.data", dir);
	snprintf(bad, sizeof(bad), "%s/bomb.data", dir);
	perf_record("-z -g", path);
	uint8_t *b = slurp(path, &len);
	n = compressed_records(b, offs, sizes, 4096);
	uint8_t *plain = malloc(big), *frame = malloc(ZSTD_compressBound(big) + 65536);
	for (size_t i = 0; i < big; i += 8) {
		uint32_t hdr[2] = { 68, 8u << 16 };
		memcpy(plain + i, hdr, 8);
	}
	size_t flen = ZSTD_compress(frame, ZSTD_compressBound(big), plain, big, 1);
	cr_assert(!ZSTD_isError(flen));
	/* as many payloads as the bomb and a skippable frame's header need */
	for (k = 0; k < n && room < flen + 8; k++)
		room += sizes[k] - 8u;
	cr_assert_geq(room, flen + 8, "%zu COMPRESSED records hold %zu bytes", n, room);
	uint32_t skip[2] = { 0x184D2A50, (uint32_t)(room - flen - 8) };
	memcpy(frame + flen, skip, 8);
	memset(frame + flen + 8, 0, room - flen - 8);
	for (size_t i = 0, at = 0; i < k; at += sizes[i] - 8u, i++)
		memcpy(b + offs[i] + 8, frame + at, sizes[i] - 8u);
	spit(bad, b, len);
	expect_einval(bad, "bomb");
	struct perfdata_error e = { 0 };
	perfdata__read(bad, count_cb, &(struct counts){ 0 }, NULL, &e);
	cr_assert_not_null(strstr(e.what, "zstd bomb"), "%s", e.what);
	cr_assert(e.offset >= offs[0] && e.offset <= offs[k - 1], "in the bomb's records: %lu",
		  (unsigned long)e.offset);
	cr_assert_str_eq(e.record, "COMPRESSED");
	free(plain);
	free(frame);
	free(b);
}

/* ---- the compressed stream on its own -------------------------------------- */

/*
 * perf's way: each chunk read from a ring is compressed and flushed (never
 * ended), and the output is cut into payloads of at most `most` bytes.
 * Returns the number of payloads; payload k is pay[k], of plen[k] bytes.
 */
static size_t perf_like_stream(const uint8_t *src, size_t len, size_t most, uint8_t ***pay,
			       size_t **plen)
{
	ZSTD_CStream *cs = ZSTD_createCStream();
	size_t cap = ZSTD_compressBound(len) + 4096, out_len = 0, n = 0;
	uint8_t *out = malloc(cap);

	cr_assert(!ZSTD_isError(ZSTD_initCStream(cs, 1)));
	for (size_t at = 0; at < len;) {
		size_t chunk = 1 + (size_t)rand() % 300000;
		if (chunk > len - at)
			chunk = len - at;
		ZSTD_inBuffer in = { src + at, chunk, 0 };
		ZSTD_outBuffer o = { out, cap, out_len };
		size_t left;
		do {
			left = ZSTD_compressStream2(cs, &o, &in, ZSTD_e_flush);
			cr_assert(!ZSTD_isError(left));
		} while (left);
		out_len = o.pos;
		at += chunk;
	}
	ZSTD_freeCStream(cs);
	*pay = NULL;
	*plen = NULL;
	for (size_t at = 0; at < out_len; n++) {
		size_t l = 1 + (size_t)rand() % most;
		if (l > out_len - at)
			l = out_len - at;
		*pay = realloc(*pay, (n + 1) * sizeof(**pay));
		*plen = realloc(*plen, (n + 1) * sizeof(**plen));
		(*pay)[n] = malloc(l);
		memcpy((*pay)[n], out + at, l);
		(*plen)[n] = l;
		at += l;
	}
	free(out);
	return n;
}

Test(unzstd, records_split_across_payloads_come_back_whole)
{
	size_t cap = (size_t)4 << 20, len = 0, nrec = 0;
	uint8_t *src = malloc(cap);
	size_t *ends = malloc(cap / 8 * sizeof(*ends));

	srand(11);
	/* records of every size up to the largest, their bytes telling them apart */
	while (len < cap - 65536) {
		size_t size = rand() % 16 ? 8 + 8 * ((size_t)rand() % 64)
					  : 8 * (1 + (size_t)rand() % 8191);
		uint32_t hdr[2] = { 9, (uint32_t)size << 16 };
		memcpy(src + len, hdr, 8);
		for (size_t i = 8; i < size; i++)
			src[len + i] = i % 2 ? (uint8_t)rand() : (uint8_t)nrec;
		len += size;
		ends[nrec++] = len;
	}
	for (size_t most = 64; most <= 65527; most = most * 8 + 7) {
		uint8_t **pay;
		size_t *plen, got = 0, at_src = 0;
		size_t np = perf_like_stream(src, len, most, &pay, &plen);
		struct unzstd z;
		uint64_t last_at = 0;

		cr_assert_eq(unzstd_init(&z, 64 << 20), 0);
		for (size_t k = 0; k < np; k++) {
			const uint8_t *rec;
			size_t rlen;
			uint64_t at;
			int r;

			unzstd_feed(&z, pay[k], plen[k], 1000 * (k + 1));
			while ((r = unzstd_next(&z, &rec, &rlen, &at)) == 1) {
				cr_assert_lt(got, nrec);
				cr_assert_eq(rlen, ends[got] - at_src, "record %zu", got);
				cr_assert_eq(memcmp(rec, src + at_src, rlen), 0, "record %zu", got);
				cr_assert_eq((uintptr_t)rec % 8, 0, "aligned");
				/* begun in this payload's output or an earlier one's */
				cr_assert(at <= 1000 * (k + 1) && at >= last_at && at % 1000 == 0);
				last_at = at;
				at_src += rlen;
				got++;
			}
			cr_assert_eq(r, 0, "payload %zu: %s", k, z.what);
		}
		cr_assert_eq(got, nrec, "payloads of at most %zu bytes", most);
		cr_log_info("%zu records, %zu bytes, in %zu payloads of at most %zu", nrec, len, np,
			    most);
		cr_assert_eq(unzstd_end(&z), 0);
		unzstd_free(&z);
		for (size_t k = 0; k < np; k++)
			free(pay[k]);
		free(pay);
		free(plen);
	}
	free(src);
	free(ends);
}

/* A stream that stops inside a record, corrupt bytes, and bombs: errors, each where it is. */
Test(unzstd, errors_name_the_payload)
{
	size_t big = (size_t)64 << 20;
	uint8_t *plain = malloc(big), *frame = malloc(ZSTD_compressBound(big));
	const uint8_t *rec;
	size_t rlen, flen;
	uint64_t at;
	struct unzstd z;

	/* FINISHED_ROUND records: valid, and a level-1 frame of 64 MiB of them is ~6 KB */
	for (size_t i = 0; i < big; i += 8) {
		uint32_t hdr[2] = { 68, 8u << 16 };
		memcpy(plain + i, hdr, 8);
	}
	flen = ZSTD_compress(frame, ZSTD_compressBound(big), plain, big, 1);
	cr_assert(!ZSTD_isError(flen));
	cr_assert_lt(flen * UNZSTD_MAX_RATIO, big, "the frame is a bomb by the ratio too");

	/* more than one payload may expand to */
	cr_assert_eq(unzstd_init(&z, 1 << 20), 0);
	unzstd_feed(&z, frame, flen, 4242);
	while (unzstd_next(&z, &rec, &rlen, &at) == 1)
		;
	cr_assert_not_null(z.what);
	cr_assert_not_null(strstr(z.what, "perf's buffer"), "%s", z.what);
	cr_assert_eq(z.at, 4242);
	cr_assert_lt(z.total_out, (2 << 20) + UNZSTD_BUF, "stopped at the cap");
	unzstd_free(&z);

	/* more than the ratio, however large a payload may be */
	cr_assert_eq(unzstd_init(&z, (uint64_t)1 << 40), 0);
	unzstd_feed(&z, frame, flen, 77);
	int r;
	while ((r = unzstd_next(&z, &rec, &rlen, &at)) == 1)
		;
	cr_assert_eq(r, -EINVAL);
	cr_assert_not_null(strstr(z.what, "8192 times"), "%s", z.what);
	cr_assert_eq(z.at, 77);
	unzstd_free(&z);

	/* the same frame, corrupt in its first block */
	for (size_t i = 6; i < 40; i++)
		frame[i] ^= 0x5a;
	cr_assert_eq(unzstd_init(&z, 1 << 20), 0);
	unzstd_feed(&z, frame, flen, 88);
	while ((r = unzstd_next(&z, &rec, &rlen, &at)) == 1)
		;
	cr_assert_eq(r, -EINVAL);
	cr_assert_str_eq(z.what, "corrupt zstd data");
	cr_assert_eq(z.at, 88);
	unzstd_free(&z);

	/* a stream that ends inside a record: that record's kind and where it began */
	uint8_t one[64] = { 0 };
	uint32_t hdr[2] = { 9, 64u << 16 };
	memcpy(one, hdr, 8);
	flen = ZSTD_compress(frame, ZSTD_compressBound(sizeof(one)), one, 40, 1);
	cr_assert_eq(unzstd_init(&z, 1 << 20), 0);
	unzstd_feed(&z, frame, flen, 99);
	cr_assert_eq(unzstd_next(&z, &rec, &rlen, &at), 0);
	cr_assert_eq(unzstd_end(&z), -EINVAL);
	cr_assert_str_eq(z.what, "compressed data ends inside a record");
	cr_assert_eq(z.at, 99);
	cr_assert_eq(z.kind, 9);
	unzstd_free(&z);

	/* zeros where a record should begin: a size smaller than its header */
	memset(one, 0, sizeof(one));
	flen = ZSTD_compress(frame, ZSTD_compressBound(sizeof(one)), one, sizeof(one), 1);
	cr_assert_eq(unzstd_init(&z, 1 << 20), 0);
	unzstd_feed(&z, frame, flen, 111);
	cr_assert_eq(unzstd_next(&z, &rec, &rlen, &at), -EINVAL);
	cr_assert_str_eq(z.what, "record size smaller than its header");
	unzstd_free(&z);
	free(plain);
	free(frame);
}

/*
 * perf record -z: the decompressed records held between two rounds are
 * capped (1 GiB; a round of perf's holds a few MiB). The cap, lowered for
 * the test below what a real file's rounds hold, stops the read with its
 * error at a decompressed record; at the default the same file reads whole.
 */
Test(perfdata, compressed_records_held_between_rounds_are_capped)
{
	struct perfdata_error e = { 0 };
	struct counts c = { 0 };
	char path[128];
	int err;

	snprintf(path, sizeof(path), "%s/z.data", dir);
	perf_record("-z --call-graph dwarf,8192", path);
	perfdata__set_held_max(4096);
	err = perfdata__read(path, count_cb, &c, NULL, &e);
	perfdata__set_held_max(0);
	cr_assert_eq(err, -EINVAL);
	cr_assert_not_null(e.what);
	cr_assert_not_null(strstr(e.what, "between two rounds"), "%s", e.what);
	/* a record that came out of a COMPRESSED one */
	cr_assert(!strncmp(e.record, "compressed ", 11), "%s", e.record);
	memset(&c, 0, sizeof(c));
	memset(&e, 0, sizeof(e));
	cr_assert_eq(perfdata__read(path, count_cb, &c, NULL, &e), 0, "%s", e.what ? e.what : "");
	cr_assert_gt(c.samples, 100);
}
