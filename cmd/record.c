/* SPDX-License-Identifier: MIT */
/* dlflame record: launch a command, sample it, symbolize, write dlflame.data. */
#include "cmd.h"
#include "pipeline.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define DEFAULT_FREQ 999
#define DEFAULT_OUTPUT "dlflame.data"

struct record_opts {
	uint64_t freq;
	const char *output;
	bool forward_exit;
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void record_usage(FILE *f)
{
	fputs("Usage: dlflame record [OPTIONS] -- COMMAND [ARGS...]\n\n"
	      "Run COMMAND, sample its on-CPU stacks (every thread and child process),\n"
	      "symbolize them and write a self-contained profile.\n\n"
	      "Options:\n"
	      "  -F, --freq HZ        samples per second per CPU (default 999)\n"
	      "  -o, --output FILE    profile to write (default dlflame.data)\n"
	      "      --forward-exit   exit with COMMAND's exit status (128+N if killed by signal N)\n"
	      "  -h, --help           show this help\n\n"
	      "Ctrl-C (or SIGTERM/SIGHUP) stops the recording; the profile is still written.\n\n"
	      "Examples:\n"
	      "  dlflame record -- ./mlp 200\n"
	      "  OMP_NUM_THREADS=2 dlflame record -F 499 -o mlp.data -- ./mlp 500\n",
	      f);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t max_sample_rate(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "r");
	unsigned long long v = 100000;

	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 100000;
		fclose(f);
	}
	return v;
}

static int parse_args(int argc, char **argv, struct record_opts *o, int *cmd_index)
{
	static const struct option longopts[] = {
		{ "freq", required_argument, NULL, 'F' },
		{ "output", required_argument, NULL, 'o' },
		{ "forward-exit", no_argument, NULL, 'x' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t max_rate = max_sample_rate();
	int c;

	optind = 1;
	opterr = 0;
	/* '+': stop at the first non-option, which starts the command */
	while ((c = getopt_long(argc, argv, "+:F:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'F':
			if (parse_u64(optarg, 10, 1, max_rate, &o->freq))
				return usage_error("record",
						   "-F takes a frequency from 1 to %llu Hz "
						   "(kernel.perf_event_max_sample_rate), got '%s'",
						   (unsigned long long)max_rate, optarg);
			break;
		case 'o':
			if (!*optarg)
				return usage_error("record", "-o needs a file name");
			o->output = optarg;
			break;
		case 'x':
			o->forward_exit = true;
			break;
		case 'h':
			record_usage(stdout);
			return -1;
		case ':':
			return usage_error("record", "option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("record", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("record", "no command to record (put it after --)");
	*cmd_index = optind;
	return 0;
}

/* Fail before launching anything if the profile could not be written. */
static int check_output_dir(const char *path)
{
	char *copy = strdup(path);
	const char *dir;
	int ok;

	if (!copy)
		return -ENOMEM;
	dir = dirname(copy);
	ok = access(dir, W_OK | X_OK) == 0 ? 0 : -errno;
	free(copy);
	return ok;
}

static char *join_args(char **argv)
{
	size_t len = 1;
	char *s;

	for (char **a = argv; *a; a++)
		len += strlen(*a) + 1;
	s = malloc(len);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (char **a = argv; *a; a++) {
		if (a != argv)
			strcat(s, " ");
		strcat(s, *a);
	}
	return s;
}

static void install_handlers(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	/* no SA_RESTART: poll() must return so that the loop sees the signal */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

static void fill_meta(struct profile *prof, const struct pipeline *pl, const struct sampler *s,
		      const struct record_opts *o, char **cmd)
{
	struct pf_meta *m = profile__meta(prof);
	char host[256] = "";
	char *command = join_args(cmd);
	const char *event = sampler__stats(s)->event;
	int64_t id;

	m->start_time = pl->first_time;
	m->end_time = pl->last_time;
	m->lost = sampler__stats(s)->lost;
	m->freq = o->freq;
	id = profile__string(prof, event ? event : "", event ? strlen(event) : 0);
	m->event = id > 0 ? (uint32_t)id : 0;
	if (command) {
		id = profile__string(prof, command, strlen(command));
		m->command = id > 0 ? (uint32_t)id : 0;
		free(command);
	}
	gethostname(host, sizeof(host) - 1);
	id = profile__string(prof, host, strlen(host));
	m->hostname = id > 0 ? (uint32_t)id : 0;
	m->finalized = true;
}

static void describe_exit(int status, const char *cmd)
{
	if (WIFSIGNALED(status))
		warning("%s was killed by signal %d (%s); the recording up to then is kept", cmd,
			WTERMSIG(status), strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		warning("%s exited with status 127 (it may have failed to start)", cmd);
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return EXIT_BAD;
}

int cmd_record(int argc, char **argv)
{
	struct record_opts o = { .freq = DEFAULT_FREQ, .output = DEFAULT_OUTPUT };
	struct sampler_opts so = { 0 };
	struct sampler *s = NULL;
	struct symbolizer *sym = NULL;
	struct profile *prof = NULL;
	struct pipeline pl;
	char msg[512];
	char **cmd;
	pid_t child = -1;
	int status = 0, cmd_index = 0, err, ret = EXIT_BAD;
	bool child_done = false, pipeline_ready = false;
	uint64_t t0, deadline = 0;
	int signalled = 0;

	err = parse_args(argc, argv, &o, &cmd_index);
	if (err)
		return err < 0 ? EXIT_OK : err;
	cmd = argv + cmd_index;

	err = check_output_dir(o.output);
	if (err)
		return error("cannot write %s: %s; choose another path with -o", o.output,
			     strerror(-err));

	prof = profile__new();
	sym = symbolizer__new();
	if (!prof || !sym) {
		error("out of memory");
		goto out;
	}
	err = symbolizer__load_kallsyms(sym, "/proc/kallsyms");
	if (err == -EPERM)
		warning("kernel symbols are hidden (kernel.kptr_restrict); kernel frames will be "
			"named [kernel]; run as root or 'sysctl kernel.kptr_restrict=0'");
	else if (err)
		warning("cannot read /proc/kallsyms (%s); kernel frames will be named [kernel]",
			strerror(-err));
	pipeline__init(&pl, prof, sym);
	pipeline_ready = true;

	so.freq = o.freq;
	s = sampler__new(&so);
	if (!s) {
		error("out of memory");
		goto out;
	}
	err = sampler__launch(s, cmd, environ, &child);
	if (err) {
		error("cannot record '%s': %s", cmd[0], sampler__open_strerror(err, msg, sizeof(msg)));
		goto out;
	}
	if (sampler__stats(s)->kernel_excluded)
		warning("kernel frames are not recorded: kernel.perf_event_paranoid forbids kernel "
			"sampling for this user; run as root or 'sysctl kernel.perf_event_paranoid=1'");
	install_handlers();
	t0 = now_ns();
	err = sampler__start(s);
	if (err) {
		error("cannot start '%s': %s", cmd[0], sampler__open_strerror(err, msg, sizeof(msg)));
		goto out;
	}

	for (;;) {
		if (stop_signal && !signalled) {
			signalled = stop_signal;
			/* Ctrl-C reached the whole process group; give the target a moment */
			if (signalled != SIGINT)
				kill(child, SIGTERM);
			deadline = now_ns() + 3000000000ULL;
		} else if (signalled && stop_signal != signalled) {
			break; /* a second, different signal: stop now */
		}
		err = sampler__poll(s, 100, pipeline__record, &pl);
		if (err)
			break;
		pid_t r = waitpid(child, &status, WNOHANG);
		if (r == child) {
			child_done = true;
			break;
		}
		if (signalled && now_ns() > deadline) {
			if (signalled == SIGINT) {
				/* the target ignored Ctrl-C; ask it to terminate as perf does */
				kill(child, SIGTERM);
				signalled = SIGTERM;
				deadline = now_ns() + 2000000000ULL;
				continue;
			}
			break;
		}
	}
	if (!err)
		err = sampler__drain(s, pipeline__record, &pl);
	if (err) {
		/* keep what was recorded: write it, then report the failure */
		error("recording stopped early: %s", strerror(-err));
	}
	if (!child_done && waitpid(child, &status, WNOHANG) == child)
		child_done = true;
	if (child_done)
		describe_exit(status, cmd[0]);
	else
		warning("%s (pid %d) is still running; it is no longer recorded", cmd[0], child);

	fill_meta(prof, &pl, s, &o, cmd);
	if (!profile__meta(prof)->start_time)
		profile__meta(prof)->start_time = profile__meta(prof)->end_time;
	int werr = profile__write(prof, o.output);
	if (werr) {
		error("cannot write %s: %s", o.output, strerror(-werr));
		goto out;
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	const struct sampler_stats *st = sampler__stats(s);
	info("%.2f s, %llu samples, %llu lost, %zu threads -> %s; next: dlflame report%s%s --svg",
	     secs, (unsigned long long)pl.samples, (unsigned long long)st->lost,
	     profile__nr_threads(prof), o.output, strcmp(o.output, DEFAULT_OUTPUT) ? " -i " : "",
	     strcmp(o.output, DEFAULT_OUTPUT) ? o.output : "");
	if (st->lost)
		warning("%llu samples were lost (ring buffer overflow); lower -F to lose fewer",
			(unsigned long long)st->lost);
	if (st->bad_records)
		warning("%llu malformed kernel records were skipped",
			(unsigned long long)st->bad_records);
	if (pl.samples == 0)
		warning("no samples were recorded: %s ran for too short a time or slept", cmd[0]);
	if (err)
		ret = EXIT_BAD;
	else if (o.forward_exit && child_done)
		ret = exit_code_of(status);
	else
		ret = EXIT_OK;
out:
	sampler__free(s);
	if (pipeline_ready)
		pipeline__exit(&pl);
	symbolizer__free(sym);
	profile__free(prof);
	return ret;
}
