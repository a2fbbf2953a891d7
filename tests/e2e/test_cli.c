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

/* What `script` (a pseudo-terminal of 24 x 100) saw record write with TERM=term. */
static char *record_on_a_pty(const char *term)
{
	char *data = path_in(dir, "tty.data"), *log = path_in(dir, "tty.log");
	char cmd[1024], env_term[64];
	char *env[] = { env_term, NULL };
	const char *argv[] = { "/usr/bin/script", "-qec", cmd, log, NULL };
	struct run_result r;
	char *out;

	/* script(1) gives the command a pseudo-terminal; its output goes to log */
	snprintf(env_term, sizeof(env_term), "TERM=%s", term);
	snprintf(cmd, sizeof(cmd),
		 "stty rows 24 cols 100; '%s' record -o '%s' -- '%s' 150 >/dev/null",
		 need_env("DLFLAME"), data, need_env("FIXTURE_SPLIT"));
	r = run(dir, env, "/dev/null", argv);
	cr_assert_eq(r.status, 0, "script: %d %s", r.status, r.err);
	run_free(&r);
	out = read_text(log);
	free(log);
	free(data);
	return out;
}

/*
 * On a terminal, record keeps the bottom line for its status: a scroll
 * region over the 23 lines above, the status redrawn on line 24 with the
 * cursor saved and restored around it, and the whole screen given back
 * before the summary. On a pipe there is none (record_split's runs), nor on
 * a terminal that cannot keep it (TERM=dumb). The screen itself: the tmux
 * test below.
 */
Test(record, status_line_on_a_terminal_only)
{
	char *out = record_on_a_pty("xterm");
	const char *draw, *back, *summary;

	cr_assert_not_null(strstr(out, "\0337\033[1;23r\0338"), "no scroll region: %s", out);
	draw = strstr(out, "\0337\033[24;1H\033[0m\033[2Kdlflame: recording ");
	cr_assert_not_null(draw, "no status line: %s", out);
	cr_assert_not_null(strstr(out, " s blocked, 0 lost, "), "%s", out);
	cr_assert_not_null(strstr(out, "% complete\0338"), "%s", out);
	cr_assert_null(strstr(out, "\r\033[K"), "the old status line: %s", out);
	/* given back, then the summary */
	back = strstr(out, "\0337\033[r\033[24;1H\033[2K\0338");
	summary = strstr(out, "% of stacks complete");
	cr_assert(back && summary && draw < back && back < summary, "%s", out);
	cr_assert_null(strstr(back + 1, "\033[1;23r"), "no region after: %s", out);
	free(out);

	out = record_on_a_pty("dumb");
	cr_assert_null(strstr(out, "\033"), "escapes for a dumb terminal: %s", out);
	cr_assert_null(strstr(out, "dlflame: recording"), "a status for a dumb terminal: %s", out);
	cr_assert_not_null(strstr(out, "% of stacks complete"), "%s", out);
	free(out);
}

/* The tmux server of the test running, killed by its teardown even after a failure. */
static char tmux_socket[512];

/* (after it, the suite's teardown removes the directory) */
static void tmux_kill(void)
{
	if (*tmux_socket) {
		const char *argv[] = { "/usr/bin/tmux", "-S", tmux_socket, "kill-server", NULL };
		struct run_result r = run(NULL, NULL, NULL, argv);

		run_free(&r);
		*tmux_socket = '\0';
	}
}

static struct run_result tmux(const char *a, const char *b, const char *c)
{
	const char *argv[] = { "/usr/bin/tmux", "-S", tmux_socket, a, b, c, NULL };
	struct run_result r = run(dir, NULL, NULL, argv);

	cr_assert_eq(r.status, 0, "tmux %s %s: %s", a, b ? b : "", r.err);
	return r;
}

/* The pane's lines, from its history (all) or the screen: n of them in lines. */
static char *screen(bool all, char **lines, size_t max, size_t *n)
{
	struct run_result r = tmux("capture-pane", "-p", all ? "-S-" : NULL);

	*n = 0;
	/* by hand, not strtok: an empty row is a line too */
	for (char *l = r.out; l && *n < max;) {
		char *nl = strchr(l, '\n');

		if (!nl && !*l)
			break;
		lines[(*n)++] = l;
		if (nl)
			*nl = '\0';
		l = nl ? nl + 1 : NULL;
	}
	free(r.err);
	return r.out;
}

static bool tick_line(const char *l)
{
	unsigned n;
	int end = 0;

	return sscanf(l, "tick %6u of the trainer, whole%n", &n, &end) == 1 &&
	       end == (int)strlen(l) && strlen(l) == 33;
}

/* Whether a row holds any of the status line ("... 0 lost, 100.0% complete"). */
static bool has_status(const char *l)
{
	return strstr(l, "dlflame: recording") || strstr(l, "% complete");
}

/* The status line's seconds, or -1 if the line is not the status. */
static double status_secs(const char *l)
{
	double s;

	return sscanf(l, "dlflame: recording %lf s, ", &s) == 1 ? s : -1;
}

/*
 * A real terminal (tmux, 100 x 20): a trainer printing a numbered line
 * every 3 ms while recorded. Every line it printed is on the screen or in
 * the history whole and in order, the status is on the bottom line and
 * moves on; after Ctrl-C the whole screen scrolls again (the next output
 * reaches the bottom line) and no status is left.
 */
Test(record, status_line_keeps_its_own_line_in_tmux, .fini = tmux_kill)
{
	char *conf = path_in(dir, "tmux.conf"), *data = path_in(dir, "tmux.data"), cmd[2048];
	size_t n, max = 1 << 20;
	char **lines = malloc(max * sizeof(*lines)), *text;
	double first = -1, later = -1;
	FILE *f;

	snprintf(tmux_socket, sizeof(tmux_socket), "%s/tmux.sock", dir);
	f = fopen(conf, "w");
	cr_assert_not_null(f);
	fputs("set -g history-limit 200000\n", f);
	fclose(f);
	/* the pane's shell survives Ctrl-C (trap), so that what follows shows the screen */
	snprintf(cmd, sizeof(cmd),
		 "TERM=screen; export TERM; trap : INT; '%s' record -o '%s' -- '%s' 0 3000; "
		 "seq 1 50; printf END; sleep 600",
		 need_env("DLFLAME"), data, need_env("FIXTURE_TICKER"));
	{
		const char *argv[] = { "/usr/bin/tmux",
				       "-S",
				       tmux_socket,
				       "-f",
				       conf,
				       "new-session",
				       "-d",
				       "-x",
				       "100",
				       "-y",
				       "20",
				       "/bin/sh",
				       "-c",
				       cmd,
				       NULL };
		struct run_result r = run(dir, NULL, NULL, argv);

		cr_assert_eq(r.status, 0, "tmux (scripts/setup.sh installs it): %s", r.err);
		run_free(&r);
	}
	/* the status, drawn and redrawn a second later, with the trainer's lines scrolling above */
	for (int i = 0; i < 600 && later < first + 1.0; i++) {
		usleep(100 * 1000);
		text = screen(false, lines, max, &n);
		cr_assert_eq(n, 20, "20 rows: %zu", n);
		if (status_secs(lines[19]) >= 0 && tick_line(lines[17])) {
			if (first < 0)
				first = status_secs(lines[19]);
			else
				later = status_secs(lines[19]);
			/* the other rows are the trainer's, whole (or the cursor's, empty) */
			for (size_t k = 0; k < 19; k++)
				cr_assert(tick_line(lines[k]) || !*lines[k], "row %zu: '%s'", k + 1,
					  lines[k]);
		}
		free(text);
	}
	cr_assert_geq(later, first + 1.0, "the status line moves on: %.1f s, then %.1f s", first,
		      later);

	free(tmux("send-keys", "C-c", NULL).out);
	for (int i = 0; i < 600; i++) {
		usleep(100 * 1000);
		text = screen(false, lines, max, &n);
		if (n == 20 && !strcmp(lines[19], "END"))
			break;
		free(text);
		text = NULL;
	}
	cr_assert_not_null(text, "the output after the recording does not reach the bottom line");
	for (size_t k = 0; k < n; k++)
		cr_assert_not(has_status(lines[k]), "a status left: '%s'", lines[k]);
	cr_assert_str_eq(lines[18], "50", "the whole screen scrolls");
	free(text);

	/* everything the trainer printed, whole and in order */
	text = screen(true, lines, max, &n);
	{
		unsigned next = 1;

		for (size_t k = 0; k < n; k++) {
			unsigned t;

			cr_assert_not(has_status(lines[k]), "'%s'", lines[k]);
			if (strncmp(lines[k], "tick ", 5))
				continue;
			cr_assert(tick_line(lines[k]), "a line cut or mixed: '%s'", lines[k]);
			sscanf(lines[k], "tick %u", &t);
			cr_assert_eq(t, next, "line %u missing or out of order: '%s'", next,
				     lines[k]);
			next++;
		}
		cr_log_info("%u lines of the trainer, all whole", next - 1);
		cr_assert_gt(next, 100, "the trainer printed for a while");
	}
	free(text);
	free(lines);
	free(conf);
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

/* The lines of text holding needle. */
static size_t lines_with(const char *text, const char *needle)
{
	size_t n = 0;

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *end = strchr(l, '\n'), *hit = strstr(l, needle);

		n += hit && (!end || hit < end);
	}
	return n;
}

/*
 * Without --forward-exit a failed command still leaves a profile, and
 * exit 0, as before; one warning says it failed, so a trainer that died at
 * once is not taken for a short run.
 */
Test(record, failed_command_is_said)
{
	char *data = path_in(dir, "x.data");
	const char *argv[] = { need_env("DLFLAME"), "record", "-o",	data, "--",
			       "/bin/sh",	    "-c",     "exit 3", NULL };
	struct run_result r = run(dir, NULL, NULL, argv);

	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(lines_with(r.err, "/bin/sh exited with status 3"), 1, "%s", r.err);
	cr_assert(!access(data, R_OK), "the profile is written");
	run_free(&r);
	free(data);
}

/* Every "hint:" line in text at most 120 columns wide. */
static void assert_short_hints(const char *text)
{
	for (const char *l = strstr(text, "dlflame: hint:"); l;
	     l = strstr(l + 1, "dlflame: hint:")) {
		const char *end = strchr(l, '\n');

		cr_assert_leq(end ? (size_t)(end - l) : strlen(l), 120, "a long hint: %s", text);
	}
}

/*
 * Two stripped copies of a fixture, neither with symbols: record says so in
 * one line naming both with their shares, each report says it once more,
 * and `report --hints` has the whole list, stored with the profile.
 */
Test(record, symbol_hints_once_per_command)
{
	char *a = path_in(dir, "split_a"), *b = path_in(dir, "split_b"), cmd[2048];
	char *data = path_in(dir, "stripped.data");
	const char *rec[] = { need_env("DLFLAME"),
			      "record",
			      "-o",
			      data,
			      "--",
			      "/bin/sh",
			      "-c",
			      "./split_a 30 & ./split_b 30; wait",
			      NULL };
	const char *fmts[][3] = {
		{ "--folded" }, { "--top" }, { "--svg", "-o", "s.svg" }, { "--ranks" }
	};
	struct run_result r;

	snprintf(cmd, sizeof(cmd), "strip -o '%s' '%s' && strip -o '%s' '%s'", a,
		 need_env("FIXTURE_SPLIT"), b, need_env("FIXTURE_SPLIT"));
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	r = run(dir, NULL, NULL, rec);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(lines_with(r.err, "hint:"), 1, "one hint line: %s", r.err);
	/* (libc.so.6 first without libc6-dbg) */
	cr_assert_eq(lines_with(r.err, "dlflame: hint: no symbols for "), 1, "%s", r.err);
	cr_assert_eq(lines_with(r.err, "split_a "), 1, "%s", r.err);
	cr_assert_eq(lines_with(r.err, "split_b "), 1, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "--hints"), "%s", r.err);
	assert_short_hints(r.err);
	run_free(&r);
	for (size_t i = 0; i < sizeof(fmts) / sizeof(*fmts); i++) {
		const char *rep[] = { need_env("DLFLAME"), "report",   "-i",	   data,
				      fmts[i][0],	   fmts[i][1], fmts[i][2], NULL };

		r = run(dir, NULL, NULL, rep);
		cr_assert_leq(lines_with(r.err, "hint:"), 1, "%s: %s", fmts[i][0], r.err);
		if (strcmp(fmts[i][0], "--ranks")) /* no ranks here: an error, no table */
			cr_assert(lines_with(r.err, "hint: no symbols for ") == 1 &&
					  lines_with(r.err, "split_a ") == 1,
				  "%s: %s", fmts[i][0], r.err);
		assert_short_hints(r.err);
		run_free(&r);
	}
	r = run(dir, NULL, NULL,
		(const char *[]){ need_env("DLFLAME"), "report", "-i", data, "--hints", NULL });
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(lines_with(r.err, "hint:"), 0, "the list replaces the line: %s", r.err);
	/* each with its build-id and the file recorded, and how to name its code */
	snprintf(cmd, sizeof(cmd), "split_a (build-id ");
	cr_assert_eq(lines_with(r.out, cmd), 1, "%s", r.out);
	cr_assert_eq(lines_with(r.out, "split_b (build-id "), 1, "%s", r.out);
	cr_assert_not_null(strstr(r.out, a), "the path recorded: %s", r.out);
	cr_assert_not_null(strstr(r.out, b), "the path recorded: %s", r.out);
	cr_assert_geq(lines_with(r.out, "dpkg -S"), 2, "%s", r.out);
	run_free(&r);
	free(a);
	free(b);
	free(data);
}

/*
 * A profile without stored hints (an older dlflame's, a journal, a perf.data):
 * reports find them themselves, and say them once too. Two of glibc's
 * modules (libc.so.6, libm.so.6) come with one debug package: it is named
 * once, for the first.
 */
Test(report, symbol_hints_of_a_profile_without_them)
{
	static const char *const mods[] = { "liba.so", "libb.so.2", "libc.so.6", "libm.so.6" };
	struct profile *p = profile__new();
	char *data = path_in(dir, "nohints.data");
	const struct pf_hint *h;
	size_t n;
	int64_t comm = profile__string(p, "trainer", 7);
	int64_t thread = profile__thread(p, 1, 1, (uint32_t)comm);
	struct run_result r;

	/* 100 samples: liba.so's code in 40, libb.so.2's in 30, libc's in 20, libm's in 10 */
	for (int i = 0; i < 100; i++) {
		int m = i < 40 ? 0 : i < 70 ? 1 : i < 90 ? 2 : 3;
		char name[64];
		int64_t f, s;

		snprintf(name, sizeof(name), "%s+0x%x", mods[m], 0x100 + i % 3);
		f = profile__frame_str(p, "main", "trainer", FRAME_USER);
		s = profile__stack(p, 0, (uint32_t)f);
		f = profile__frame_str(p, name, mods[m], FRAME_USER);
		s = profile__stack(p, (uint32_t)s, (uint32_t)f);
		cr_assert_gt(s, 0);
		cr_assert_eq(profile__add_sample(p, &(struct pf_sample){ .time = 1000 + i,
									 .weight = 1000,
									 .stack = (uint32_t)s,
									 .thread = (uint32_t)thread,
									 .kind = SAMPLE_ONCPU }),
			     0);
	}
	profile__meta(p)->finalized = true;
	cr_assert_not(profile__hints(p, &h, &n));
	cr_assert_eq(profile__write(p, data), 0);
	profile__free(p);

	r = run(dir, NULL, NULL,
		(const char *[]){ need_env("DLFLAME"), "report", "-i", data, "--folded", NULL });
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(lines_with(r.err, "hint:"), 1, "%s", r.err);
	cr_assert_not_null(strstr(r.err,
				  "hint: no symbols for liba.so 40%, libb.so.2 30%, libc.so.6 20%, "
				  "libm.so.6 10% of samples; see report "),
			   "biggest first, each with its share: %s", r.err);
	assert_short_hints(r.err);
	run_free(&r);
	r = run(dir, NULL, NULL,
		(const char *[]){ need_env("DLFLAME"), "report", "-i", data, "--hints", NULL });
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "  40.0%  liba.so\n"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "  10.0%  libm.so.6\n"), "%s", r.out);
	cr_assert_eq(lines_with(r.out, "install libc6-dbg"), 1, "%s", r.out);
	cr_assert_eq(lines_with(r.out, "libc6-dbg"), 1, "named once: %s", r.out);
	cr_assert_not_null(strstr(r.out, "  10.0%  libm.so.6\n         the package named above "
					 "for libc.so.6 names them too\n"),
			   "%s", r.out);
	cr_assert_eq(lines_with(r.out, "dpkg -S"), 2, "%s", r.out);
	run_free(&r);
	free(data);
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
