/* SPDX-License-Identifier: MIT */
/*
 * Memory of `record` stays bounded however long the run: samples move to a
 * temporary file, so a run three times longer peaks at about the same RSS,
 * and the file still holds every sample.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
