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
#include <linux/perf_event.h>
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

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
/*
 * A busy loop, then a wait: a CPU-bound loop on an idle CPU may never be
 * switched out, and --switch-events then has nothing to record (the
 * sanitizers' run once saw no switch); sleep blocks, and so does the
 * shell waiting for it.
 */
#define BUSY "sh -c 'i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done; sleep 0.02'"

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

/* The first event's name as perf says it ("task-clock:ppp" -> "task-clock"): its default varies. */
static void perf_event_name(const char *path, char *name, size_t size)
{
	char cmd[512];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "perf evlist -i '%s' 2>/dev/null", path);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(name, (int)size, f), "perf evlist -i %s", path);
	pclose(f);
	name[strcspn(name, ":\n")] = '\0';
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
	/* perf 6.12 on: task-clock where there is no PMU, cpu-clock before */
	char event[64];
	perf_event_name(path, event, sizeof(event));
	cr_assert_str_eq(info.event, event);
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
	/* little-endian u64 fields at unaligned offsets: through memcpy */
	uint64_t v = data_off + 4, table;
	memcpy(c + 40, &v, 8);
	/* the feature sections after the data moved too: one { offset, size } per bit set */
	memcpy(&v, b + 48, 8);
	table = data_off + 4 + v;
	for (int bit = 0, nth = 0; bit < 256; bit++) {
		if (!(b[72 + bit / 8] & (1u << (bit % 8))))
			continue;
		memcpy(&v, c + table + 16 * nth, 8);
		v += 4;
		memcpy(c + table + 16 * nth, &v, 8);
		nth++;
	}
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

/*
 * The compressed records of a file-mode perf.data: COMPRESSED (type 81,
 * perf before 6.16: the payload is the rest of the record) or COMPRESSED2
 * (83: a u64 data_size, the payload, padding). offs: where each record is,
 * pays and sizes: where its payload is and how long. Returns how many.
 */
struct comp {
	uint64_t offs[4096], pays[4096];
	uint16_t sizes[4096];
	uint32_t type; /* of the first */
};

static size_t compressed_records(const uint8_t *b, struct comp *c)
{
	uint64_t data_off = *(uint64_t *)(b + 40), data_size = *(uint64_t *)(b + 48);
	size_t n = 0;

	c->type = 0;
	for (uint64_t p = data_off; p < data_off + data_size;) {
		uint16_t size;
		uint32_t type;

		/* records need not be aligned (a COMPRESSED record's size is any) */
		memcpy(&size, b + p + 6, sizeof(size));
		memcpy(&type, b + p, sizeof(type));
		cr_assert_geq(size, 8);
		if ((type == 81 || type == 83) && n < ARRAY_LEN(c->offs)) {
			uint64_t ds = 0;

			if (type == 83)
				memcpy(&ds, b + p + 8, sizeof(ds));
			if (!c->type)
				c->type = type;
			cr_assert_eq(type, c->type, "one kind of compressed record in a file");
			c->offs[n] = p;
			c->pays[n] = p + (type == 83 ? 16 : 8);
			c->sizes[n++] = type == 83 ? (uint16_t)ds : size - 8u;
		}
		p += size;
	}
	return n;
}

static const char *comp_name(const struct comp *c)
{
	return c->type == 83 ? "COMPRESSED2" : "COMPRESSED";
}

/*
 * Checks of a -z file (records[] are its compressed records, of either
 * kind) that hold whoever wrote it: corrupt payloads, cut records, random
 * bytes and cuts all end in an error or a read, never a crash.
 */
static void corrupt_compressed(const char *where, const uint8_t *b, size_t len,
			       const struct comp *c, size_t n)
{
	char bad[128];
	uint8_t *x = malloc(len);

	snprintf(bad, sizeof(bad), "%s/zbad.data", where);
	/* a payload's first bytes (frame or block header) inverted: corrupt zstd data */
	for (size_t k = 0; k < n; k += n / 3) {
		struct perfdata_error ek = { 0 };

		memcpy(x, b, len);
		for (size_t i = 0; i < 64 && i < c->sizes[k]; i++)
			x[c->pays[k] + i] ^= 0xff;
		spit(bad, x, len);
		expect_einval(bad, "corrupt payload");
		perfdata__read(bad, count_cb, &(struct counts){ 0 }, NULL, &ek);
		cr_assert_str_eq(ek.record, comp_name(c));
		cr_assert_str_eq(ek.what, "corrupt zstd data");
		cr_assert_eq(ek.offset, c->offs[k], "the offset of the corrupt compressed record");
	}
	/* a compressed record cut short, its size field smaller: the stream goes wrong after it */
	memcpy(x, b, len);
	for (size_t k = 0; k < n; k++) {
		uint16_t size;

		memcpy(&size, x + c->offs[k] + 6, 2);
		if (size < 200)
			continue;
		uint16_t shorter = size - 64;
		memcpy(x + c->offs[k] + 6, &shorter, 2);
		memset(x + c->offs[k] + shorter, 0, 64); /* padding: an empty record, size 0 */
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
			x[c->pays[k] + (size_t)rand() % c->sizes[k]] = (uint8_t)rand();
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
}

Test(perfdata, compressed_file_matches_perf_script)
{
	char path[128], bad[128];
	struct counts c = { 0 };
	struct perfdata_info info;
	struct perfdata_error e = { 0 };
	static struct comp cr;
	size_t len, n;

	snprintf(path, sizeof(path), "%s/z.data", dir);
	snprintf(bad, sizeof(bad), "%s/zbad.data", dir);
	perf_record("-z --call-graph dwarf,8192", path);
	cr_assert_eq(perfdata__read(path, count_cb, &c, &info, &e), 0, "%s (%s) at %lu", e.what,
		     e.record, (unsigned long)e.offset);
	cr_assert_gt(c.samples, 50);
	cr_assert_eq(c.samples, perf_script_samples(path), "same samples as perf script");
	cr_assert_eq(c.out_of_order, 0, "records come in time order");
	cr_assert(info.dwarf && info.compressed);
	/* mapped, read() and the smallest window: the same records in the same order */
	struct digest base = digest_of(path, SIZE_MAX);
	for (size_t w = 1; w < NWINDOWS; w++)
		cr_assert_eq(digest_of(path, windows[w]).h, base.h, "window %zu", windows[w]);

	uint8_t *b = slurp(path, &len);
	n = compressed_records(b, &cr);
	cr_assert_gt(n, 3, "perf -z wrote compressed records");
	corrupt_compressed(dir, b, len, &cr, n);
	/* a COMPRESSED record read as a COMPRESSED2 one: its payload is no data size */
	if (cr.type == 81) {
		uint8_t *x = malloc(len);
		struct perfdata_error e2 = { 0 };

		memcpy(x, b, len);
		x[cr.offs[0]] = 83;
		spit(bad, x, len);
		expect_einval(bad, "COMPRESSED2");
		perfdata__read(bad, count_cb, &(struct counts){ 0 }, NULL, &e2);
		cr_assert_str_eq(e2.record, "COMPRESSED2");
		cr_assert_eq(e2.offset, cr.offs[0]);
		free(x);
	}
	free(b);
}

/*
 * A zstd bomb in a -z file: a frame of 8 MiB of FINISHED_ROUND records
 * (valid records, so only the caps stop them: perf's buffer for one
 * compressed record, 516 KiB, or the ratio) written over the payloads of
 * the first compressed records (the stream continues from one to the next,
 * and the first is where perf's frame begins), then a zstd skippable frame
 * to the end of the last one it reaches.
 */
static void bomb_in(const char *path, const char *bad)
{
	static struct comp c;
	size_t len, big = (size_t)8 << 20, n, k, room = 0;
	uint8_t *b = slurp(path, &len);

	n = compressed_records(b, &c);
	uint8_t *plain = malloc(big), *frame = malloc(ZSTD_compressBound(big) + 65536);
	for (size_t i = 0; i < big; i += 8) {
		uint32_t hdr[2] = { 68, 8u << 16 };
		memcpy(plain + i, hdr, 8);
	}
	size_t flen = ZSTD_compress(frame, ZSTD_compressBound(big), plain, big, 1);
	cr_assert(!ZSTD_isError(flen));
	/* as many payloads as the bomb and a skippable frame's header need */
	for (k = 0; k < n && room < flen + 8; k++)
		room += c.sizes[k];
	cr_assert_geq(room, flen + 8, "%zu compressed records hold %zu bytes", n, room);
	uint32_t skip[2] = { 0x184D2A50, (uint32_t)(room - flen - 8) };
	memcpy(frame + flen, skip, 8);
	memset(frame + flen + 8, 0, room - flen - 8);
	for (size_t i = 0, at = 0; i < k; at += c.sizes[i], i++)
		memcpy(b + c.pays[i], frame + at, c.sizes[i]);
	spit(bad, b, len);
	expect_einval(bad, "bomb");
	struct perfdata_error e = { 0 };
	perfdata__read(bad, count_cb, &(struct counts){ 0 }, NULL, &e);
	cr_assert_not_null(strstr(e.what, "zstd bomb"), "%s", e.what);
	cr_assert(e.offset >= c.offs[0] && e.offset <= c.offs[k - 1], "in the bomb's records: %lu",
		  (unsigned long)e.offset);
	cr_assert_str_eq(e.record, comp_name(&c));
	free(plain);
	free(frame);
	free(b);
}

Test(perfdata, compressed_bomb_stops_at_perfs_buffer_size)
{
	char path[128], bad[128];

	snprintf(path, sizeof(path), "%s/z.data", dir);
	snprintf(bad, sizeof(bad), "%s/bomb.data", dir);
	perf_record("-z -g", path);
	bomb_in(path, bad);
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

/* ---- files of today's perfs, committed with their perf script ------------- */

/*
 * tests/fixtures/perfdata: files written by Debian unstable's perf 7.2
 * (COMPRESSED2 for -z) and Debian 13's perf 6.12 (COMPRESSED; task-clock
 * where there is no PMU), file and pipe mode, with that perf's own
 * `perf script` beside each (record.sh writes them). No perf is needed here.
 */
#define PD_FIXTURES FIXTURES_SRC "/perfdata"

static char fdir[64];

static void files_setup(void)
{
	strcpy(fdir, "/tmp/dlflame-pdf-XXXXXX");
	cr_assert_not_null(mkdtemp(fdir));
}

static void files_teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", fdir);
	if (system(cmd))
		cr_log_warn("cannot remove %s", fdir);
}

TestSuite(perfdata_files, .init = files_setup, .fini = files_teardown, .timeout = 120);

static const struct pd_file {
	const char *name;
	bool pipe, dwarf;
	uint32_t comp; /* the kind of its compressed records, 0 without -z */
} pd_files[] = {
	{ "sid-z-dwarf", false, true, 83 },    { "sid-z-dwarf-pipe", true, true, 83 },
	{ "sid-z-fp", false, false, 83 },      { "sid-z-fp-pipe", true, false, 83 },
	{ "sid-plain", false, false, 0 },      { "trixie-plain", false, false, 0 },
	{ "trixie-z-dwarf", false, true, 81 },
};

/* A sample as perf script shows it: thread, time, and the first frame's address. */
struct pd_sample {
	uint32_t tid;
	uint64_t time, ip;
};

struct pd_samples {
	struct pd_sample *s;
	size_t n, cap;
};

static void add_sample(struct pd_samples *v, uint32_t tid, uint64_t time, uint64_t ip)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 1024;
		v->s = realloc(v->s, v->cap * sizeof(*v->s));
		cr_assert_not_null(v->s);
	}
	v->s[v->n++] = (struct pd_sample){ tid, time, ip };
}

/* NAME.script.gz: "comm tid secs.nsecs:" lines, each followed by "\taddr sym (dso)" frames. */
static struct pd_samples perf_script_of(const char *name)
{
	struct pd_samples v = { 0 };
	char cmd[512], line[4096];
	bool want_ip = false;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "gzip -dc '%s/%s.script.gz'", PD_FIXTURES, name);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long sec, nsec, ip;
		unsigned int tid;
		char *colon;

		if (line[0] == '\n')
			continue;
		if (line[0] != ' ' && line[0] != '\t') {
			/* the comm may hold spaces: the time ends in ':', the tid is before it */
			colon = strrchr(line, ':');
			cr_assert_not_null(colon, "%s", line);
			*colon = '\0';
			char *t = strrchr(line, ' ');
			cr_assert_not_null(t);
			cr_assert_eq(sscanf(t + 1, "%llu.%9llu", &sec, &nsec), 2, "%s", line);
			while (t > line && *t == ' ')
				*t-- = '\0';
			char *id = strrchr(line, ' ');
			cr_assert_not_null(id);
			cr_assert_eq(sscanf(id + 1, "%u", &tid), 1, "%s", line);
			add_sample(&v, tid, sec * 1000000000ull + nsec, 0);
			want_ip = true;
			continue;
		}
		if (want_ip) {
			cr_assert_eq(sscanf(line, " %llx", &ip), 1, "%s", line);
			v.s[v.n - 1].ip = ip;
			want_ip = false;
		}
	}
	cr_assert_eq(pclose(f), 0, "%s", cmd);
	cr_assert_gt(v.n, 100, "%s: perf script's samples", name);
	return v;
}

static int sample_cb(void *ctx, const struct rec *r)
{
	struct pd_samples *v = ctx;

	if (r->type == REC_SAMPLE)
		add_sample(v, r->sample.tid, r->sample.time, r->sample.ip);
	return 0;
}

/*
 * The payloads of a file's compressed records decoded one after the other
 * (both kinds, file or pipe mode): how many end inside a record, which the
 * next one completes.
 */
static unsigned int payloads_ending_inside_a_record(const uint8_t *b, size_t len)
{
	bool pipe = *(const uint64_t *)(b + 8) == 16;
	uint64_t p = pipe ? 16 : *(const uint64_t *)(b + 40);
	uint64_t end = pipe ? len : p + *(const uint64_t *)(b + 48);
	size_t cap = (size_t)64 << 20, have = 0;
	uint8_t *out = malloc(cap);
	ZSTD_DStream *ds = ZSTD_createDStream();
	unsigned int inside = 0;

	cr_assert(!ZSTD_isError(ZSTD_initDStream(ds)));
	while (p < end) {
		uint32_t type;
		uint16_t size;
		uint64_t ds_len;

		memcpy(&type, b + p, 4);
		memcpy(&size, b + p + 6, 2);
		cr_assert_geq(size, 8);
		if (type == 81 || type == 83) {
			if (type == 83)
				memcpy(&ds_len, b + p + 8, 8);
			ZSTD_inBuffer in = { b + p + (type == 83 ? 16 : 8),
					     type == 83 ? ds_len : size - 8u, 0 };
			while (in.pos < in.size) {
				ZSTD_outBuffer o = { out, cap, have };
				cr_assert(!ZSTD_isError(ZSTD_decompressStream(ds, &o, &in)));
				have = o.pos;
			}
			size_t at = 0;
			while (have - at >= 8) {
				uint16_t rs;

				memcpy(&rs, out + at + 6, 2);
				cr_assert_geq(rs, 8);
				if (have - at < rs)
					break;
				at += rs;
			}
			inside += at < have;
			memmove(out, out + at, have - at);
			have -= at;
		}
		p += size;
	}
	ZSTD_freeDStream(ds);
	free(out);
	return inside;
}

Test(perfdata_files, samples_equal_perf_scripts)
{
	for (size_t i = 0; i < ARRAY_LEN(pd_files); i++) {
		const struct pd_file *pf = &pd_files[i];
		struct pd_samples want = perf_script_of(pf->name);
		char path[512];

		snprintf(path, sizeof(path), "%s/%s.data", PD_FIXTURES, pf->name);
		/* pipe mode is read with read(); file mode mapped, with read(), and the smallest window */
		for (size_t w = 0; w < (pf->pipe ? 1 : NWINDOWS); w++) {
			struct pd_samples got = { 0 };
			struct perfdata_info info;
			struct perfdata_error e = { 0 };

			perfdata__set_window(windows[w]);
			int r = perfdata__read(path, sample_cb, &got, &info, &e);
			perfdata__set_window(0);
			cr_assert_eq(r, 0, "%s: %s (%s) at %lu", pf->name, e.what, e.record,
				     (unsigned long)e.offset);
			cr_assert_eq(got.n, want.n, "%s: %zu samples, perf script %zu", pf->name,
				     got.n, want.n);
			for (size_t k = 0; k < got.n; k++) {
				cr_assert_eq(got.s[k].tid, want.s[k].tid, "%s sample %zu", pf->name,
					     k);
				cr_assert_eq(got.s[k].time, want.s[k].time, "%s sample %zu",
					     pf->name, k);
				cr_assert_eq(got.s[k].ip, want.s[k].ip,
					     "%s sample %zu: %llx, perf %llx", pf->name, k,
					     (unsigned long long)got.s[k].ip,
					     (unsigned long long)want.s[k].ip);
			}
			cr_assert_eq(info.pipe_mode, pf->pipe, "%s", pf->name);
			cr_assert_eq(info.compressed, pf->comp != 0, "%s", pf->name);
			cr_assert_eq(info.dwarf, pf->dwarf, "%s", pf->name);
			cr_assert(info.callchain, "%s", pf->name);
			cr_assert_eq(info.unknown, 0, "%s: type %u", pf->name, info.unknown_type);
			/* what these perfs record where there is no PMU: on-CPU time all the same */
			cr_assert_str_eq(info.event, "task-clock", "%s", pf->name);
			free(got.s);
		}
		free(want.s);
		if (pf->comp && pf->dwarf) {
			size_t len;
			uint8_t *b = slurp(path, &len);

			cr_assert_gt(payloads_ending_inside_a_record(b, len), 0,
				     "%s: records span compressed records", pf->name);
			free(b);
		}
	}
}

/* The bounds of the -z reader on a COMPRESSED2 file: the same as on COMPRESSED ones. */
Test(perfdata_files, compressed2_bounds)
{
	char path[512], bad[128];
	static struct comp c;
	size_t len, n;

	snprintf(path, sizeof(path), "%s/sid-z-dwarf.data", PD_FIXTURES);
	snprintf(bad, sizeof(bad), "%s/bad.data", fdir);
	uint8_t *b = slurp(path, &len), *x = malloc(len);

	n = compressed_records(b, &c);
	cr_assert_eq(c.type, 83);
	cr_assert_gt(n, 3);
	corrupt_compressed(fdir, b, len, &c, n);
	bomb_in(path, bad);
	/* data sizes past the record's end: perf 6.16's wrapped sizes, or corruption */
	uint64_t huge[] = { UINT64_MAX, (uint64_t)1 << 40, 0 };
	for (size_t i = 0; i < ARRAY_LEN(huge); i++) {
		struct perfdata_error e = { 0 };
		uint16_t size;
		uint64_t ds = huge[i];

		memcpy(x, b, len);
		memcpy(&size, x + c.offs[1] + 6, 2);
		if (!ds)
			ds = size - 15u; /* one byte past */
		memcpy(x + c.offs[1] + 8, &ds, 8);
		spit(bad, x, len);
		expect_einval(bad, "huge data_size");
		perfdata__read(bad, count_cb, &(struct counts){ 0 }, NULL, &e);
		cr_assert_str_eq(e.record, "COMPRESSED2");
		cr_assert_eq(e.offset, c.offs[1]);
		cr_assert_not_null(strstr(e.what, "larger than its record"), "%s", e.what);
	}
	/* a data size short of the payload: the stream loses bytes; an error or a read */
	for (size_t k = 0; k < n; k++) {
		uint64_t ds = c.sizes[k] / 2;

		memcpy(x, b, len);
		memcpy(x + c.offs[k] + 8, &ds, 8);
		spit(bad, x, len);
		int r = same_result(bad, "short data_size");
		cr_assert(r == 0 || r == -EINVAL, "record %zu: %d", k, r);
	}
	/* perf 6.16's wrapped size: 0 for a record of 64 KiB */
	struct perfdata_error ew = { 0 };
	memcpy(x, b, len);
	memset(x + c.offs[1] + 6, 0, 2);
	spit(bad, x, len);
	expect_einval(bad, "COMPRESSED2 of size 0");
	perfdata__read(bad, count_cb, &(struct counts){ 0 }, NULL, &ew);
	cr_assert_str_eq(ew.record, "COMPRESSED2");
	cr_assert_eq(ew.offset, c.offs[1]);
	cr_assert_not_null(strstr(ew.what, "smaller -m"), "%s", ew.what);
	/* a COMPRESSED2 record's header too short for its data size */
	memcpy(x, b, len);
	uint16_t eight = 8;
	memcpy(x + c.offs[0] + 6, &eight, 2);
	spit(bad, x, len);
	expect_einval(bad, "COMPRESSED2 of 8 bytes");
	/* the decompressed records held between two rounds are capped as for COMPRESSED */
	struct perfdata_error e = { 0 };
	perfdata__set_held_max(4096);
	int r = perfdata__read(path, count_cb, &(struct counts){ 0 }, NULL, &e);
	perfdata__set_held_max(0);
	cr_assert_eq(r, -EINVAL);
	cr_assert_not_null(strstr(e.what, "between two rounds"), "%s", e.what);
	cr_assert(!strncmp(e.record, "compressed ", 11), "%s", e.record);
	free(x);
	free(b);
}

/* A pipe-mode stream cut inside a COMPRESSED2 record, and at many other points. */
Test(perfdata_files, compressed2_pipe_cut)
{
	char path[512], bad[128];
	size_t len;

	snprintf(path, sizeof(path), "%s/sid-z-dwarf-pipe.data", PD_FIXTURES);
	snprintf(bad, sizeof(bad), "%s/cut.data", fdir);
	uint8_t *b = slurp(path, &len);
	int errors = 0, cuts = 0;

	for (uint64_t p = 16; p < len;) {
		uint32_t type;
		uint16_t size;
		struct perfdata_error e = { 0 };

		memcpy(&type, b + p, 4);
		memcpy(&size, b + p + 6, 2);
		if (type == 83) {
			spit(bad, b, p + size / 2);
			cuts++;
			int r = perfdata__read(bad, count_cb, &(struct counts){ 0 }, NULL, &e);
			cr_assert_eq(r, -EINVAL, "cut at %lu", (unsigned long)(p + size / 2));
			cr_assert_str_eq(e.what, "truncated record");
			cr_assert_str_eq(e.record, "COMPRESSED2");
			cr_assert_eq(e.offset, p);
			errors++;
		}
		p += size;
	}
	cr_assert_gt(cuts, 3);
	cr_assert_eq(errors, cuts);
	free(b);
}

/* ---- synthetic pipe-mode streams -------------------------------------------- */

struct stream {
	uint8_t *b;
	size_t len, cap;
};

static void put(struct stream *s, const void *p, size_t n)
{
	if (s->len + n > s->cap) {
		s->cap = (s->len + n) * 2;
		s->b = realloc(s->b, s->cap);
		cr_assert_not_null(s->b);
	}
	memcpy(s->b + s->len, p, n);
	s->len += n;
}

static void put_u64(struct stream *s, uint64_t v)
{
	put(s, &v, 8);
}

static void put_header(struct stream *s, uint32_t type, uint16_t size)
{
	uint32_t h[2] = { type, (uint32_t)size << 16 };

	put(s, h, 8);
}

/* The pipe header, then one task-clock event (id 1) sampling ip, tid, time, period. */
static void put_start(struct stream *s, uint64_t more_sample_type, uint64_t more_flags)
{
	struct perf_event_attr a;
	uint64_t flags;

	put_u64(s, 0x32454c4946524550ULL);
	put_u64(s, 16);
	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof(a);
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = 1000000;
	a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD |
			more_sample_type;
	put_header(s, 64, (uint16_t)(8 + sizeof(a) + 8));
	size_t at = s->len;
	put(s, &a, sizeof(a));
	memcpy(&flags, s->b + at + 40, 8);
	flags |= more_flags;
	memcpy(s->b + at + 40, &flags, 8);
	put_u64(s, 1);
}

/* HEADER_FEATURE of HEADER_COMPRESSED: method, and perf's buffer for one record's output. */
static void put_comp_feature(struct stream *s, uint32_t method, uint32_t mmap_len)
{
	uint32_t feat[6] = { 1, method, 1, 0, mmap_len, 0 };

	put_header(s, 80, 8 + 8 + sizeof(feat));
	put_u64(s, 27);
	put(s, feat, sizeof(feat));
}

static void put_sample(struct stream *s, uint64_t ip, uint32_t tid, uint64_t time)
{
	uint32_t ids[2] = { tid, tid };

	put_header(s, PERF_RECORD_SAMPLE, 40);
	put_u64(s, ip);
	put(s, ids, 8);
	put_u64(s, time);
	put_u64(s, 1000000);
}

/*
 * plain's records as perf 6.16 writes them: a zstd stream flushed after
 * every `step` bytes of records (perf: after each piece of a ring it reads,
 * which need not end where a record ends), each flush's output one
 * COMPRESSED2 record.
 */
static void put_compressed2(struct stream *s, const struct stream *plain, size_t step)
{
	ZSTD_CStream *cs = ZSTD_createCStream();
	size_t cap = ZSTD_compressBound(step) + 4096;
	uint8_t *out = malloc(cap), zero[8] = { 0 };

	cr_assert(!ZSTD_isError(ZSTD_initCStream(cs, 1)));
	for (size_t at = 0; at < plain->len; at += step) {
		ZSTD_inBuffer in = { plain->b + at, plain->len - at < step ? plain->len - at : step,
				     0 };
		ZSTD_outBuffer o = { out, cap, 0 };
		size_t left, size;

		do {
			left = ZSTD_compressStream2(cs, &o, &in, ZSTD_e_flush);
			cr_assert(!ZSTD_isError(left));
		} while (left);
		cr_assert_lt(o.pos, 65000);
		size = (16 + o.pos + 7) & ~(size_t)7;
		put_header(s, 83, (uint16_t)size);
		put_u64(s, o.pos);
		put(s, out, o.pos);
		put(s, zero, size - 16 - o.pos);
	}
	ZSTD_freeCStream(cs);
	free(out);
}

static int read_stream(const struct stream *s, struct pd_samples *got, struct perfdata_info *info,
		       struct perfdata_error *e)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/s.data", fdir);
	spit(path, s->b, s->len);
	return perfdata__read(path, sample_cb, got, info, e);
}

Test(perfdata_files, compressed2_stream_spanning_records_and_unknown_kinds)
{
	struct stream plain = { 0 }, s = { 0 };
	size_t nsamples = 3000;

	for (size_t i = 0; i < nsamples; i++) {
		put_sample(&plain, 0x400000 + i, 7, 1000 + i);
		if (i == 100) {
			/* a perf record kind past the ones known, and a kernel kind without a name */
			put_header(&plain, 200, 16);
			put_u64(&plain, 0);
			put_header(&plain, 30, 16);
			put_u64(&plain, 0);
		}
		if (i % 500 == 499)
			put_header(&plain, 68, 8);
	}
	for (size_t step = 13; step <= 20000; step = step * 11 + 1) {
		struct pd_samples got = { 0 };
		struct perfdata_info info;
		struct perfdata_error e = { 0 };

		s.len = 0;
		put_start(&s, 0, 0);
		put_comp_feature(&s, 1, 4096 * 129);
		put_header(&s, 201, 8); /* outside the compressed records too */
		put_compressed2(&s, &plain, step);
		cr_assert_eq(read_stream(&s, &got, &info, &e), 0, "%s (%s) at %lu", e.what,
			     e.record, (unsigned long)e.offset);
		cr_assert_eq(got.n, nsamples, "payloads of %zu bytes of records", step);
		for (size_t i = 0; i < got.n; i++)
			cr_assert(got.s[i].ip == 0x400000 + i && got.s[i].time == 1000 + i &&
					  got.s[i].tid == 7,
				  "sample %zu", i);
		cr_assert(info.compressed && info.pipe_mode);
		cr_assert_eq(info.unknown, 2, "the two kinds past perf's known ones");
		cr_assert_eq(info.unknown_type, 201, "the first one");
		cr_assert_gt(payloads_ending_inside_a_record(s.b, s.len), 0);
		free(got.s);
	}
	free(plain.b);
	free(s.b);
}

/* pipe mode: HEADER_FEATURE's buffer size bounds what one COMPRESSED2 record may expand to */
Test(perfdata_files, compressed2_pipe_bound_from_its_feature_record)
{
	struct stream plain = { 0 }, s = { 0 };
	struct perfdata_error e = { 0 };
	struct pd_samples got = { 0 };

	for (int i = 0; i < 1000; i++)
		put_header(&plain, 68, 8); /* 8000 bytes: a few dozen once compressed */
	put_start(&s, 0, 0);
	put_comp_feature(&s, 1, 4096);
	put_compressed2(&s, &plain, 8000);
	cr_assert_eq(read_stream(&s, &got, NULL, &e), -EINVAL);
	cr_assert_not_null(strstr(e.what, "perf's buffer"), "%s", e.what);
	cr_assert_str_eq(e.record, "COMPRESSED2");
	/* without the feature, the default bound (64 MiB) holds it */
	s.len = 0;
	put_start(&s, 0, 0);
	put_compressed2(&s, &plain, 8000);
	cr_assert_eq(read_stream(&s, &got, NULL, &e), 0, "%s", e.what);
	/* a compressed record inside compressed data is no perf output */
	struct stream inner = { 0 };
	put_header(&inner, 83, 24);
	put_u64(&inner, 8);
	put_u64(&inner, 0);
	s.len = 0;
	put_start(&s, 0, 0);
	put_compressed2(&s, &inner, 8000);
	memset(&e, 0, sizeof(e));
	cr_assert_eq(read_stream(&s, &got, NULL, &e), -EINVAL);
	cr_assert_str_eq(e.what, "a record that cannot be inside compressed data");
	cr_assert_str_eq(e.record, "compressed COMPRESSED2");
	free(inner.b);
	free(plain.b);
	free(s.b);
	free(got.s);
}

/* What the reader does not read is said by name (-EOPNOTSUPP), never called corruption. */
Test(perfdata_files, unsupported_is_named_not_corrupt)
{
	static const struct {
		uint64_t sample_type, flags;
		uint32_t method;
		const char *says;
	} cases[] = {
		{ PERF_SAMPLE_READ, 0, 1, "PERF_SAMPLE_READ" },
		{ PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_REGS_USER, 0, 1, "branch stacks" },
		{ 0, 1ULL << 38, 1, "deferred user callchains" },
		{ 0, 0, 2, "other than zstd" },
	};
	struct stream s = { 0 };
	struct pd_samples got = { 0 };

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct perfdata_error e = { 0 };

		s.len = 0;
		put_start(&s, cases[i].sample_type, cases[i].flags);
		put_comp_feature(&s, cases[i].method, 4096 * 129);
		put_sample(&s, 1, 1, 1);
		cr_assert_eq(read_stream(&s, &got, NULL, &e), -EOPNOTSUPP, "case %zu", i);
		cr_assert_not_null(strstr(e.what, cases[i].says), "%s", e.what);
	}
	/* another byte order */
	struct perfdata_error e = { 0 };
	s.len = 0;
	put_u64(&s, __builtin_bswap64(0x32454c4946524550ULL));
	put_u64(&s, __builtin_bswap64(16));
	cr_assert_eq(read_stream(&s, &got, NULL, &e), -EOPNOTSUPP);
	cr_assert_not_null(strstr(e.what, "big-endian"), "%s", e.what);
	/* a malformed record of a kind without a name: named by its number */
	s.len = 0;
	put_start(&s, 0, 0);
	put_header(&s, 30, 8);
	memset(&e, 0, sizeof(e));
	/* no sample_id trailer: an unknown kernel kind is read and left to the collector */
	cr_assert_eq(read_stream(&s, &got, NULL, &e), 0, "%s", e.what);
	put_header(&s, 30, 4);
	cr_assert_eq(read_stream(&s, &got, NULL, &e), -EINVAL);
	cr_assert_str_eq(e.record, "record type 30");
	free(s.b);
	free(got.s);
}

struct maps_seen {
	const char *path;
	unsigned int maps, with_build_id;
	uint8_t build_id[20];
	uint8_t size;
	uint64_t ino;
};

static int map_cb(void *ctx, const struct rec *r)
{
	struct maps_seen *m = ctx;

	if (r->type != REC_MMAP2 || strcmp(r->mmap2.filename, m->path))
		return 0;
	m->maps++;
	if (r->mmap2.has_build_id) {
		m->with_build_id++;
		m->size = r->mmap2.build_id_size;
		memcpy(m->build_id, r->mmap2.build_id, r->mmap2.build_id_size);
	}
	m->ino |= r->mmap2.ino;
	return 0;
}

/*
 * perf 6.12 writes mappings with device and inode, and the build-ids of the
 * files it sampled in its build-id table: the mappings of those files get
 * their build-id (that of bin/split, the file recorded), not an inode of
 * the root it ran in. perf 7.2 puts the build-id in the mapping itself.
 */
Test(perfdata_files, mappings_get_the_build_id_of_perfs_table)
{
	static const uint8_t split_id[20] = { 0xf8, 0x60, 0xd9, 0x4a, 0x37, 0xf6, 0xc3,
					      0x0b, 0x96, 0xc7, 0x74, 0xc3, 0x62, 0xde,
					      0xa5, 0x3a, 0x44, 0x20, 0xf7, 0xec };
	const char *files[] = { "trixie-plain", "sid-plain" };

	for (size_t i = 0; i < ARRAY_LEN(files); i++) {
		struct maps_seen m = { .path = "/tmp/dlflame-perfdata-fixtures/split" };
		struct perfdata_error e = { 0 };
		char path[512];

		snprintf(path, sizeof(path), "%s/%s.data", PD_FIXTURES, files[i]);
		cr_assert_eq(perfdata__read(path, map_cb, &m, NULL, &e), 0, "%s", e.what);
		cr_assert_gt(m.maps, 0, "%s", files[i]);
		cr_assert_eq(m.with_build_id, m.maps, "%s", files[i]);
		cr_assert_eq(m.size, 20);
		cr_assert_eq(memcmp(m.build_id, split_id, 20), 0, "%s", files[i]);
		cr_assert_eq(m.ino, 0, "%s: no inode of the root perf ran in", files[i]);
	}
	/* a build-id table entry cut short: malformed */
	size_t len;
	char path[512], bad[128];
	snprintf(path, sizeof(path), "%s/trixie-plain.data", PD_FIXTURES);
	snprintf(bad, sizeof(bad), "%s/bid.data", fdir);
	uint8_t *b = slurp(path, &len);
	uint64_t data_off = *(uint64_t *)(b + 40), data_size = *(uint64_t *)(b + 48);
	uint64_t table = data_off + data_size, sec_off, sec_size;
	cr_assert(b[72] & (1u << 2), "the file has a build-id table");
	/* the build-id table is the first section after the tracing data (bit 1, unset) */
	cr_assert(!(b[72] & (1u << 1)));
	memcpy(&sec_off, b + table, 8);
	memcpy(&sec_size, b + table + 8, 8);
	cr_assert_gt(sec_size, 36);
	/* an empty table: no build-ids, the file reads whole */
	uint64_t zero = 0;
	uint8_t *z = malloc(len);
	memcpy(z, b, len);
	memcpy(z + table + 8, &zero, 8);
	spit(bad, z, len);
	cr_assert_eq(same_result(bad, "empty build-id table"), 0);
	free(z);
	uint16_t big = 0xfff8;
	memcpy(b + sec_off + 6, &big, 2);
	spit(bad, b, len);
	expect_einval(bad, "build-id entry past its table");
	free(b);
}
