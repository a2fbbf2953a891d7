/* SPDX-License-Identifier: MIT */
/*
 * The perf.data reader against files written by the real `perf record`
 * (Debian's linux-perf is the oracle): same sample counts as `perf script`,
 * every truncation and corruption reported, never a crash.
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

#include "sampler/perfdata.h"

static char dir[64];

static void setup(void)
{
	strcpy(dir, "/tmp/dlflame-pd-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	if (system("command -v perf >/dev/null"))
		cr_skip_test("perf is not installed (scripts/setup.sh installs linux-perf)");
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
