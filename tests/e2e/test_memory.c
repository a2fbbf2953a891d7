/* SPDX-License-Identifier: MIT */
/*
 * Memory of `record` stays bounded however long the run: samples move to a
 * temporary file, so a run three times longer peaks at about the same RSS,
 * and the file still holds every sample.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "profile/profile.h"
#include "run.h"

static char *dir;

static void setup(void)
{
	dir = make_dir();
}

static void teardown(void)
{
	rm_dir(dir);
}

TestSuite(memory, .init = setup, .fini = teardown, .timeout = 300);

struct rec {
	unsigned long samples; /* as the summary line says */
	long rss_kb; /* peak, as /usr/bin/time measures it */
};

/*
 * fp call graphs at 20 kHz: many samples per second of fixture, few lost,
 * so the sample count, not the run time, decides how much memory they take.
 */
static struct rec record(const char *rounds)
{
	char *data = path_in(dir, "m.data"), *rss = path_in(dir, "rss.txt");
	char *env[] = { "DLFLAME_SPILL_SAMPLES=1000", NULL };
	const char *argv[] = { "/usr/bin/time",
			       "-f",
			       "%M",
			       "-o",
			       rss,
			       need_env("DLFLAME"),
			       "record",
			       "-F",
			       "20000",
			       "--call-graph",
			       "fp",
			       "--no-offcpu",
			       "-o",
			       data,
			       "--",
			       need_env("FIXTURE_SPLIT"),
			       rounds,
			       NULL };
	struct run_result r = run(dir, env, NULL, argv);
	struct profile_read_error e = { 0 };
	struct profile *p = NULL;
	struct rec out = { 0 };
	const char *line;
	FILE *f;

	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	line = strstr(r.err, "dlflame: ");
	cr_assert(line && sscanf(line, "dlflame: %*f s, %lu samples", &out.samples) == 1,
		  "no summary line: %s", r.err);
	cr_assert_eq(profile__read(data, &p, &e), 0, "%s", e.what ? e.what : "read failed");
	size_t oncpu = 0;
	for (size_t i = 0; i < profile__nr_samples(p); i++)
		oncpu += profile__get_sample(p, i)->kind == SAMPLE_ONCPU;
	cr_assert_eq(oncpu, out.samples, "the file holds %zu of the %lu samples recorded", oncpu,
		     out.samples);
	cr_assert_gt(out.samples, 10 * 1000, "too few samples to spill several times: %s", r.err);
	f = fopen(rss, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%ld", &out.rss_kb), 1, "no RSS from /usr/bin/time");
	fclose(f);
	profile__free(p);
	run_free(&r);
	free(data);
	free(rss);
	return out;
}

Test(memory, long_recording_keeps_every_sample_in_bounded_memory)
{
	struct rec a = record("200"), b = record("600");
	/* what the extra samples would take in memory, at 32 bytes each */
	unsigned long extra = b.samples > a.samples ? (b.samples - a.samples) * 32 : 0;
	long growth;

	/*
	 * A busy machine makes the kernel lower perf_event_max_sample_rate, and
	 * the longer run may then add too few samples to tell: run longer still.
	 */
	if (extra <= 3ul << 20) {
		b = record("1800");
		extra = b.samples > a.samples ? (b.samples - a.samples) * 32 : 0;
	}
	growth = b.rss_kb - a.rss_kb;

	cr_log_info("%lu samples: %ld kB; %lu samples: %ld kB", a.samples, a.rss_kb, b.samples,
		    b.rss_kb);
	cr_assert_gt(extra, 3ul << 20, "the longer run must add megabytes of samples (%lu, %lu)",
		     a.samples, b.samples);
	cr_assert_lt(growth * 1024, (long)(extra / 2),
		     "peak RSS grew from %ld kB (%lu samples) to %ld kB (%lu samples)", a.rss_kb,
		     a.samples, b.rss_kb, b.samples);
}

/* ---- hostile inputs: bounded by what they hold, not by its square ---------- */

struct cost {
	int status;
	long rss_kb;
	double cpu_s; /* user + system */
	char *err;
};

/* `dlflame report -i in OUTPUT -o out` under /usr/bin/time. */
static struct cost report_cost(const char *in, const char *output)
{
	char *stats = path_in(dir, "cost.txt"), *out = path_in(dir, "out");
	const char *argv[] = { "/usr/bin/time",
			       "-f",
			       "%M %U %S",
			       "-o",
			       stats,
			       need_env("DLFLAME"),
			       "report",
			       "-i",
			       in,
			       output,
			       "-o",
			       out,
			       NULL };
	struct run_result r = run(dir, NULL, NULL, argv);
	struct cost c = { .status = r.status };
	double user, sys;
	FILE *f = fopen(stats, "r");

	cr_assert_not_null(f);
	/* a failing command makes time(1) write "Command exited with non-zero status N" first */
	char line[256];
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%ld %lf %lf", &c.rss_kb, &user, &sys) == 3)
			break;
	fclose(f);
	cr_assert_gt(c.rss_kb, 0, "no figures from /usr/bin/time");
	c.cpu_s = user + sys;
	c.err = strdup(r.err);
	run_free(&r);
	unlink(out);
	free(stats);
	free(out);
	return c;
}

/* A growing buffer of perf.data bytes. */
struct pbuf {
	uint8_t *b;
	size_t len, cap;
};

static void put(struct pbuf *p, const void *d, size_t n)
{
	if (p->len + n > p->cap) {
		p->cap = (p->len + n) * 2;
		p->b = realloc(p->b, p->cap);
		cr_assert_not_null(p->b);
	}
	memcpy(p->b + p->len, d, n);
	p->len += n;
}

static void put_u64(struct pbuf *p, uint64_t v)
{
	put(p, &v, 8);
}

static void put_hdr(struct pbuf *p, uint32_t type, uint16_t misc, uint16_t size)
{
	struct perf_event_header h = { .type = type, .misc = misc, .size = size };

	put(p, &h, sizeof(h));
}

/*
 * A perf.data file: one cpu-clock event (ip, tid, time, period, callchain;
 * no sample_id_all), a process with `maps` executable mappings, `forks`
 * live children of it (no exits) and a sample in each hundredth child.
 */
static char *fork_storm_file(uint32_t maps, uint32_t forks)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = 1000000,
		.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			       PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN,
	};
	struct pbuf d = { 0 }, f = { 0 };
	const uint32_t parent = 100;
	uint64_t t = 1000;
	char *path = path_in(dir, "storm.data");
	FILE *fp;

	for (uint32_t i = 0; i < maps; i++) {
		static const char name[24] = "/nonexistent/lib.so";
		uint64_t start = 0x10000000ull + i * 0x2000ull;

		put_hdr(&d, PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER,
			8 + 8 + 8 * 3 + 4 * 2 + 8 * 2 + 4 * 2 + 24);
		uint32_t ids[2] = { parent, parent };
		put(&d, ids, 8);
		put_u64(&d, start);
		put_u64(&d, 0x1000);
		put_u64(&d, 0);
		uint32_t majmin[2] = { 8, 1 };
		put(&d, majmin, 8);
		put_u64(&d, 1000 + i); /* ino */
		put_u64(&d, 0);
		uint32_t prot[2] = { PROT_READ | PROT_EXEC, MAP_PRIVATE };
		put(&d, prot, 8);
		put(&d, name, sizeof(name));
	}
	for (uint32_t k = 0; k < forks; k++) {
		uint32_t ids[4] = { 1000 + k, parent, 1000 + k, parent };

		put_hdr(&d, PERF_RECORD_FORK, 0, 8 + 16 + 8);
		put(&d, ids, 16);
		put_u64(&d, t++);
	}
	for (uint32_t k = 0; k < forks; k += 100) {
		uint32_t ids[2] = { 1000 + k, 1000 + k };

		put_hdr(&d, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER,
			8 + 8 + 8 + 8 + 8 + 8 + 2 * 8);
		put_u64(&d, 0x10000010);
		put(&d, ids, 8);
		put_u64(&d, t++);
		put_u64(&d, 1000000);
		put_u64(&d, 2);
		put_u64(&d, 0x10000010);
		put_u64(&d, 0x10002020);
	}
	/* header: magic, size, attr_size; attrs, data, event_types sections; features */
	put(&f, "PERFILE2", 8);
	put_u64(&f, 104);
	put_u64(&f, sizeof(attr) + 16);
	put_u64(&f, 104);
	put_u64(&f, sizeof(attr) + 16);
	put_u64(&f, 104 + sizeof(attr) + 16);
	put_u64(&f, d.len);
	put_u64(&f, 0);
	put_u64(&f, 0);
	for (int i = 0; i < 4; i++)
		put_u64(&f, 0);
	put(&f, &attr, sizeof(attr));
	put_u64(&f, 0); /* no id list */
	put_u64(&f, 0);
	put(&f, d.b, d.len);
	fp = fopen(path, "w");
	cr_assert_not_null(fp);
	cr_assert_eq(fwrite(f.b, 1, f.len, fp), f.len);
	fclose(fp);
	free(d.b);
	free(f.b);
	return path;
}

/*
 * 8,000 live children of a process with 3,000 mappings: every child used to
 * get a copy of them (2.5 GB, 7 s for such a file); they share it now.
 */
Test(memory, fork_storm_in_bounded_memory)
{
	char *data = fork_storm_file(3000, 8000), *folded = path_in(dir, "storm.folded");
	struct cost c = report_cost(data, "--folded");
	const char *argv[] = { need_env("DLFLAME"), "report", "-i",   data,
			       "--folded",	    "-o",     folded, NULL };
	struct run_result r;
	unsigned long total = 0;
	char *text;

	cr_log_info("fork storm: %ld kB, %.2f s", c.rss_kb, c.cpu_s);
	cr_assert_eq(c.status, 0, "%s", c.err);
	cr_assert_leq(c.rss_kb, 200 * 1024, "%ld kB", c.rss_kb);
	cr_assert_leq(c.cpu_s, 1.0, "%.2f s of CPU", c.cpu_s);
	/* and the samples are all there, in the children's inherited mapping */
	r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 0, "%s", r.err);
	text = read_text(folded);
	cr_assert_eq(count_frame(text, "[lib.so+0x10]", &total), 80, "%s", text);
	cr_assert_eq(total, 80);
	free(text);
	run_free(&r);
	free(c.err);
	free(folded);
	free(data);
}

/* A profile of one chain of `depth` frames named `name`, a sample at every level; its path. */
static char *chain_profile(const char *name, uint32_t depth)
{
	char *data = path_in(dir, "deep.data");
	struct profile *p = profile__new();
	int64_t id = profile__string(p, name, strlen(name)),
		t = profile__thread(p, 1, 1, (uint32_t)id);
	int64_t fr = profile__frame(p, (uint32_t)id, 0, FRAME_USER), st = 0;

	for (uint32_t i = 0; i < depth; i++) {
		st = profile__stack(p, (uint32_t)st, (uint32_t)fr);
		cr_assert_geq(st, 0);
		cr_assert_eq(profile__add_sample(p, &(struct pf_sample){ .time = i,
									 .weight = 1,
									 .stack = (uint32_t)st,
									 .thread = (uint32_t)t }),
			     0);
	}
	cr_assert_eq(profile__write(p, data), 0);
	profile__free(p);
	return data;
}

/*
 * One 40,000-frame chain with a sample at every level (a 200 KB file): every
 * output used to build depth x samples in memory (1.6 GB, 20 s). Deeper than
 * the recorder writes, it is refused at once, with one line saying so.
 */
Test(memory, deep_chain_is_refused_in_bounded_memory)
{
	static const char *const outputs[] = { "--folded", "--svg", "--top", "--pprof", "--trace" };
	char *data = chain_profile("frame", 40000);

	for (size_t i = 0; i < sizeof(outputs) / sizeof(outputs[0]); i++) {
		struct cost c = report_cost(data, outputs[i]);

		cr_log_info("%s: %ld kB, %.2f s", outputs[i], c.rss_kb, c.cpu_s);
		cr_assert_neq(c.status, 0, "%s: read a 40,000-frame stack", outputs[i]);
		cr_assert_eq(count_str(c.err, "\n"), 1, "%s: one line: %s", outputs[i], c.err);
		cr_assert_not_null(strstr(c.err, "deeper than dlflame records"), "%s", c.err);
		cr_assert_leq(c.rss_kb, 100 * 1024, "%s: %ld kB", outputs[i], c.rss_kb);
		cr_assert_leq(c.cpu_s, 1.0, "%s: %.2f s of CPU", outputs[i], c.cpu_s);
		free(c.err);
	}
	free(data);
}

/*
 * A deep chain dlflame does read: 2,500 frames of a 48-byte name with a
 * sample at every level. Its folded output is 150 MB (the square of the
 * depth); it is written as it is made, so no output holds it in memory.
 */
Test(memory, deep_chain_outputs_stream)
{
	static const char *const outputs[] = { "--folded", "--svg", "--top", "--pprof", "--trace" };
	char *data = chain_profile("a_rather_long_templated_function_name_of_48_byte", 2500);

	for (size_t i = 0; i < sizeof(outputs) / sizeof(outputs[0]); i++) {
		struct cost c = report_cost(data, outputs[i]);

		cr_log_info("%s: %ld kB, %.2f s", outputs[i], c.rss_kb, c.cpu_s);
		cr_assert_eq(c.status, 0, "%s: %s", outputs[i], c.err);
		cr_assert_leq(c.rss_kb, 100 * 1024, "%s: %ld kB", outputs[i], c.rss_kb);
		free(c.err);
	}
	free(data);
}
