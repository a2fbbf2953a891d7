/* SPDX-License-Identifier: MIT */
/*
 * End-to-end tests of the dlflame CLI: real recordings of fixtures with
 * known behaviour and of the oneDNN MLP, and every kind of bad input.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

TestSuite(record, .init = setup, .fini = teardown, .timeout = 180);
TestSuite(report, .init = setup, .fini = teardown, .timeout = 60);

/* Records the split fixture; its functions' CPU-time shares (%) into truth, if not NULL. */
static char *record_split_truth(const char *name, double truth[3])
{
	char *data = path_in(dir, name);
	const char *argv[] = { need_env("DLFLAME"),	  "record", "-o", data, "--",
			       need_env("FIXTURE_SPLIT"), NULL };
	struct run_result r = run(dir, NULL, NULL, argv);
	unsigned long long ns[3];
	const char *line = strstr(r.err, "split: ");

	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	cr_assert_not_null(strstr(r.err, " samples, "), "summary line: %s", r.err);
	cr_assert_not_null(strstr(r.err, data), "summary names the output: %s", r.err);
	cr_assert_not_null(strstr(r.err, "next: dlflame report"), "%s", r.err);
	cr_assert_null(strstr(r.err, "\r"), "a status line on a pipe: %s", r.err);
	cr_assert(line && sscanf(line, "split: alpha %llu bravo %llu charlie %llu", &ns[0], &ns[1],
				 &ns[2]) == 3,
		  "no CPU times from the fixture: %s", r.err);
	for (int k = 0; truth && k < 3; k++)
		truth[k] = 100.0 * (double)ns[k] / (double)(ns[0] + ns[1] + ns[2]);
	run_free(&r);
	return data;
}

static char *record_split(const char *name)
{
	return record_split_truth(name, NULL);
}

Test(record, split_fixture_shares_match_the_truth)
{
	double truth[3];
	char *data = record_split_truth("split.data", truth);
	const char *argv[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", NULL };
	struct run_result r = run(dir, NULL, NULL, argv);
	unsigned long total;
	static const char *const parts[] = { "alpha", "bravo", "charlie" };

	cr_assert_eq(r.status, 0, "%s", r.err);
	count_frame(r.out, "main", &total);
	cr_assert_gt(total, 800, "about 999 Hz x 1.7 s of samples expected, got %lu", total);
	/* the truth: the CPU time each function took (about 20/30/50) */
	for (size_t i = 0; i < 3; i++) {
		unsigned long n = count_frame(r.out, parts[i], NULL);
		double share = 100.0 * n / total;
		cr_assert(fabs(share - truth[i]) <= 3.0,
			  "%s: %.1f%% of %lu samples, truth (its CPU time) %.1f%%", parts[i], share,
			  total, truth[i]);
	}
	/* frame pointers give the whole chain: every alpha sample sits on main */
	for (size_t i = 0; i < 3; i++) {
		char chain[64];
		snprintf(chain, sizeof(chain), "main;%s", parts[i]);
		cr_assert_eq(count_frame(r.out, parts[i], NULL), count_chain(r.out, chain),
			     "every %s sample sits on main", parts[i]);
	}
	cr_assert_gt(count_str(r.out, "split;"), 0, "lines are rooted at the comm");
	cr_assert_not_null(strstr(r.out, ";main;alpha "), "%s", r.out);
	run_free(&r);
	free(data);
}

Test(record, split_svg_is_well_formed_xml)
{
	char *data = record_split("split.data");
	char *svg = path_in(dir, "f.svg");
	const char *argv[] = {
		need_env("DLFLAME"), "report", "-i", data, "--svg", "-o", svg, NULL
	};
	struct run_result r = run(dir, NULL, NULL, argv);
	char cmd[512];

	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(cmd, sizeof(cmd), "xmllint --noout '%s'", svg);
	cr_assert_eq(system(cmd), 0, "xmllint rejects %s", svg);
	snprintf(cmd, sizeof(cmd), "grep -q '<title>alpha (' '%s'", svg);
	cr_assert_eq(system(cmd), 0, "the SVG has a frame for alpha");
	run_free(&r);
	free(data);
	free(svg);
}

Test(record, default_paths_in_the_working_directory)
{
	const char *rec[] = { need_env("DLFLAME"),	 "record", "--",
			      need_env("FIXTURE_SPLIT"), "30",	   NULL };
	const char *rep[] = { need_env("DLFLAME"), "report", "--svg", NULL };
	struct run_result r = run(dir, NULL, NULL, rec);
	struct stat st;

	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	r = run(dir, NULL, NULL, rep);
	cr_assert_eq(r.status, 0, "%s", r.err);
	char *svg = path_in(dir, "flame.svg");
	cr_assert_eq(stat(svg, &st), 0, "report --svg writes flame.svg");
	cr_assert_gt(st.st_size, 1000);
	run_free(&r);
	free(svg);
}

/*
 * On a terminal, record redraws one status line while it runs, then the
 * summary takes its place; on a pipe there is none (record_split's runs).
 */
Test(record, status_line_on_a_terminal_only)
{
	char *data = path_in(dir, "tty.data"), *log = path_in(dir, "tty.log");
	char cmd[1024];
	const char *argv[] = { "/usr/bin/script", "-qec", cmd, log, NULL };
	struct run_result r;
	char *out;
	FILE *f;
	long n;

	/* script(1) gives the command a pseudo-terminal; its output goes to log */
	snprintf(cmd, sizeof(cmd), "'%s' record -o '%s' -- '%s' 150 >/dev/null",
		 need_env("DLFLAME"), data, need_env("FIXTURE_SPLIT"));
	r = run(dir, NULL, "/dev/null", argv);
	cr_assert_eq(r.status, 0, "script: %d %s", r.status, r.err);
	run_free(&r);
	f = fopen(log, "r");
	cr_assert_not_null(f);
	out = calloc(1, 1 << 20);
	n = (long)fread(out, 1, (1 << 20) - 1, f);
	fclose(f);
	cr_assert_gt(n, 0);
	cr_assert_geq(count_str(out, "\rdlflame: recording "), 1, "no status line: %s", out);
	cr_assert_not_null(strstr(out, " s blocked, 0 lost, "), "%s", out);
	cr_assert_not_null(strstr(out, "% complete\033[K"), "%s", out);
	/* cleared before the summary */
	cr_assert_not_null(strstr(out, "\r\033[Kdlflame: "), "%s", out);
	cr_assert_not_null(strstr(out, "% of stacks complete"), "%s", out);
	free(out);
	free(log);
	free(data);
}

Test(record, mlp_with_two_openmp_threads_samples_both)
{
	const char *mlp = need_mlp();
	char *data = path_in(dir, "mlp.data");
	char *env[] = { "OMP_NUM_THREADS=2", NULL };
	const char *argv[] = { need_env("DLFLAME"), "record", "-o", data, "--", mlp, "600", NULL };
	struct run_result r = run(dir, env, NULL, argv);
	struct profile *p = NULL;
	struct profile_read_error e = { 0 };

	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(profile__read(data, &p, &e), 0);
	/* samples per thread of the mlp process */
	size_t nthreads = profile__nr_threads(p);
	unsigned long *per = calloc(nthreads, sizeof(*per));
	for (size_t i = 0; i < profile__nr_samples(p); i++)
		per[profile__get_sample(p, i)->thread]++;
	unsigned busy = 0;
	for (size_t t = 0; t < nthreads; t++) {
		const struct pf_thread *th = profile__get_thread(p, t);
		if (!strcmp(profile__str(p, th->comm), "mlp") && per[t] >= 20)
			busy++;
	}
	cr_assert_geq(busy, 2, "both OpenMP threads have samples (%zu threads)", nthreads);
	cr_assert(profile__cmeta(p)->finalized);
	free(per);
	profile__free(p);
	run_free(&r);
	free(data);
}

static void stop_with(int sig, bool whole_group)
{
	char *data = path_in(dir, "stopped.data");
	const char *argv[] = { need_env("DLFLAME"),	  "record", "-o", data, "--",
			       need_env("FIXTURE_SPLIT"), "100000", NULL };
	pid_t pid = fork();
	int st;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		setpgid(0, 0); /* its own process group, like a shell job */
		int fd = open("/dev/null", 1);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	setpgid(pid, pid);
	usleep(1500 * 1000);
	cr_assert_eq(kill(whole_group ? -pid : pid, sig), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "dlflame exits 0 after signal %d", sig);

	struct profile *p = NULL;
	struct profile_read_error e = { 0 };
	cr_assert_eq(profile__read(data, &p, &e), 0, "the profile is complete: %s", e.what);
	cr_assert_gt(profile__nr_samples(p), 500, "about 1.5 s of samples kept");
	cr_assert(profile__cmeta(p)->finalized);
	profile__free(p);
	free(data);
}

Test(record, ctrl_c_finalizes_the_file)
{
	stop_with(SIGINT, true);
}

Test(record, sigterm_finalizes_the_file_and_stops_the_target)
{
	stop_with(SIGTERM, false);
}

Test(record, forward_exit_returns_the_target_status)
{
	char *data = path_in(dir, "x.data");
	const char *argv[] = { need_env("DLFLAME"), "record", "--forward-exit", "-o", data, "--",
			       "/bin/sh",	    "-c",     "exit 3",		NULL };
	struct run_result r = run(dir, NULL, NULL, argv);

	cr_assert_eq(r.status, 3, "%s", r.err);
	run_free(&r);
	free(data);
}

Test(record, missing_command_is_one_clear_error)
{
	const char *argv[] = { need_env("DLFLAME"), "record", "--", "/nonexistent/trainer", NULL };
	struct run_result r = run(dir, NULL, NULL, argv);

	cr_assert_eq(r.status, 1);
	cr_assert_not_null(strstr(r.err, "/nonexistent/trainer"), "%s", r.err);
	cr_assert_eq(count_str(r.err, "\n"), 1, "one line: %s", r.err);
	run_free(&r);
}

static void expect_usage_error(const char *const argv[])
{
	struct run_result r = run(dir, NULL, NULL, argv);

	cr_assert_eq(r.status, 2, "%s %s: status %d, %s", argv[1], argv[2] ?: "", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "dlflame"), "%s", r.err);
	run_free(&r);
}

Test(report, usage_errors_exit_2)
{
	const char *d = need_env("DLFLAME");

	expect_usage_error((const char *[]){ d, "report", NULL });
	expect_usage_error((const char *[]){ d, "report", "--svg", "--folded", NULL });
	expect_usage_error((const char *[]){ d, "report", "--svg", "--width", "12x", NULL });
	expect_usage_error((const char *[]){ d, "report", "--bogus", NULL });
	expect_usage_error((const char *[]){ d, "report", "--svg", "stray", NULL });
	expect_usage_error((const char *[]){ d, "record", NULL });
	expect_usage_error((const char *[]){ d, "record", "-F", "0", "--", "true", NULL });
	expect_usage_error((const char *[]){ d, "record", "-F", "99999999", "--", "true", NULL });
	expect_usage_error((const char *[]){ d, "frobnicate", NULL });
	expect_usage_error((const char *[]){ d, NULL });
}

static void expect_bad_file(const char *path, const char *why)
{
	const char *argv[] = { need_env("DLFLAME"), "report", "-i", path, "--folded", NULL };
	struct run_result r = run(dir, NULL, NULL, argv);

	cr_assert_eq(r.status, 1, "%s: status %d", why, r.status);
	cr_assert_not_null(strstr(r.err, path), "%s: message names the file: %s", why, r.err);
	cr_assert_eq(count_str(r.err, "\n"), 1, "%s: one line: %s", why, r.err);
	cr_assert_eq(r.out_len, 0, "%s: nothing on stdout", why);
	run_free(&r);
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

Test(report, bad_files_exit_1_with_one_line)
{
	char *empty = path_in(dir, "empty.data");
	char *random = path_in(dir, "random.data");
	char *cut = path_in(dir, "cut.data");
	uint8_t junk[8192];

	write_file(empty, "", 0);
	expect_bad_file(empty, "empty");
	srand(7);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rand();
	write_file(random, junk, sizeof(junk));
	expect_bad_file(random, "random bytes");
	expect_bad_file("/nonexistent/dlflame.data", "missing");
	expect_bad_file(dir, "a directory");

	/* a real profile, truncated at several offsets */
	struct profile *p = profile__new();
	int64_t f = profile__frame_str(p, "main", "app", FRAME_USER);
	int64_t s = profile__stack(p, 0, f);
	int64_t t = profile__thread(p, 1, 1, profile__string(p, "app", 3));
	for (int i = 0; i < 100; i++) {
		struct pf_sample smp = { .time = i, .weight = 1, .stack = s, .thread = t };
		profile__add_sample(p, &smp);
	}
	char *good = path_in(dir, "good.data");
	cr_assert_eq(profile__write(p, good), 0);
	FILE *g = fopen(good, "rb");
	uint8_t buf[65536];
	size_t len = fread(buf, 1, sizeof(buf), g);
	fclose(g);
	size_t offsets[] = { 1, 7, 8, 20, 39, 40, 41, len / 2, len - 1 };
	for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		write_file(cut, buf, offsets[i]);
		expect_bad_file(cut, "truncated");
	}
	profile__free(p);
	free(empty);
	free(random);
	free(cut);
	free(good);
}

Test(report, full_stdout_is_an_error)
{
	char *data = path_in(dir, "good.data");
	struct profile *p = profile__new();
	int64_t f = profile__frame_str(p, "main", "app", FRAME_USER);
	int64_t s = profile__stack(p, 0, f);
	int64_t t = profile__thread(p, 1, 1, profile__string(p, "app", 3));
	struct pf_sample smp = { .time = 1, .weight = 1, .stack = s, .thread = t };
	profile__add_sample(p, &smp);
	cr_assert_eq(profile__write(p, data), 0);

	const char *argv[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", NULL };
	struct run_result r = run(dir, NULL, "/dev/full", argv);
	cr_assert_eq(r.status, 1, "writing to a full disk fails: %s", r.err);
	cr_assert_not_null(strstr(r.err, "No space"), "%s", r.err);
	run_free(&r);

	const char *svg[] = { need_env("DLFLAME"), "report", "-i", data, "--svg", "-o",
			      "/dev/full/x.svg",   NULL };
	r = run(dir, NULL, NULL, svg);
	cr_assert_eq(r.status, 1, "%s", r.err);
	run_free(&r);
	profile__free(p);
	free(data);
}

static void expect_char_device(const char *path)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0);
	cr_assert(S_ISCHR(st.st_mode), "%s is still a character device", path);
}

Test(report, devices_and_fifos_are_written_in_place_not_replaced)
{
	char *data = path_in(dir, "good.data");
	char *fifo = path_in(dir, "out.fifo");
	char *got = path_in(dir, "got.svg");
	struct profile *p = profile__new();
	int64_t f = profile__frame_str(p, "main", "app", FRAME_USER);
	int64_t s = profile__stack(p, 0, f);
	int64_t t = profile__thread(p, 1, 1, profile__string(p, "app", 3));
	struct pf_sample smp = { .time = 1, .weight = 1, .stack = s, .thread = t };
	profile__add_sample(p, &smp);
	profile__meta(p)->finalized = true;
	cr_assert_eq(profile__write(p, data), 0);

	/* the recorder's own writer: /dev/null stays /dev/null */
	cr_assert_eq(profile__write(p, "/dev/null"), 0);
	expect_char_device("/dev/null");

	const char *folded[] = { need_env("DLFLAME"), "report", "-i",	     data,
				 "--folded",	      "-o",	"/dev/null", NULL };
	struct run_result r = run(dir, NULL, NULL, folded);
	cr_assert_eq(r.status, 0, "%s", r.err);
	expect_char_device("/dev/null");
	run_free(&r);

	cr_assert_eq(mkfifo(fifo, 0600), 0);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "cat '%s' > '%s' &", fifo, got);
	cr_assert_eq(system(cmd), 0);
	usleep(200 * 1000);
	const char *svg[] = {
		need_env("DLFLAME"), "report", "-i", data, "--svg", "-o", fifo, NULL
	};
	r = run(dir, NULL, NULL, svg);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	struct stat st;
	cr_assert_eq(lstat(fifo, &st), 0);
	cr_assert(S_ISFIFO(st.st_mode), "the FIFO is still a FIFO");
	for (int i = 0; i < 50 && (stat(got, &st) || st.st_size == 0); i++)
		usleep(100 * 1000);
	cr_assert_gt(st.st_size, 500, "the FIFO's reader got the SVG");

	const char *todir[] = {
		need_env("DLFLAME"), "report", "-i", data, "--svg", "-o", dir, NULL
	};
	r = run(dir, NULL, NULL, todir);
	cr_assert_eq(r.status, 1, "a directory is not an output: %s", r.err);
	run_free(&r);
	profile__free(p);
	free(data);
	free(fifo);
	free(got);
}

Test(record, output_to_dev_null_keeps_the_device)
{
	const char *argv[] = { need_env("DLFLAME"),	  "record", "-o", "/dev/null", "--",
			       need_env("FIXTURE_SPLIT"), "5",	    NULL };
	struct run_result r = run(dir, NULL, NULL, argv);

	cr_assert_eq(r.status, 0, "%s", r.err);
	expect_char_device("/dev/null");
	run_free(&r);
}
