/* SPDX-License-Identifier: MIT */
/*
 * The perf.data reader against files written by the real `perf record`
 * (Debian's linux-perf is the oracle): same sample counts as `perf script`,
 * every truncation and corruption reported, never a crash.
 */
#include <criterion/criterion.h>
#include <errno.h>
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

static void expect_einval(const char *path, const char *why)
{
	struct counts c = { 0 };
	struct perfdata_error e = { 0 };
	int r = perfdata__read(path, count_cb, &c, NULL, &e);

	cr_assert_eq(r, -EINVAL, "%s: got %d", why, r);
	cr_assert_not_null(e.what, "%s", why);
	cr_assert_not_null(e.record, "%s", why);
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
		int r = perfdata__read(bad, count_cb, &cc, NULL, &e);
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
