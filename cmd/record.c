/* SPDX-License-Identifier: MIT */
/*
 * dlflame record: launch a command or attach to running processes, sample
 * on-CPU stacks and context switches, symbolize, write dlflame.data.
 */
#include "cmd.h"
#include "options.h"
#include "pipeline.h"
#include "quality.h"

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

#define DEFAULT_OUTPUT "dlflame.data"
/* samples held in memory (32 bytes each) before they move to a temporary file */
#define DEFAULT_SPILL_SAMPLES (256 * 1024)

/* oneDNN writes /tmp/perf-PID.map only when one of these says so (notes/onednn-jit.md). */
static const char *const jit_env[] = { "ONEDNN_JIT_PROFILE", "DNNL_JIT_PROFILE" };

struct record_opts {
	uint64_t freq;
	const char *output;
	bool forward_exit;
	bool no_offcpu;
	struct target_opts target;
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void record_usage(FILE *f)
{
	fputs("Usage: dlflame record [OPTIONS] -- COMMAND [ARGS...]\n"
	      "       dlflame record [OPTIONS] -p PID[,PID...] | -t TID[,TID...] [-d SECONDS]\n\n"
	      "Run COMMAND, or attach to running processes, sample their on-CPU stacks and\n"
	      "the stacks where their threads block (every thread and child process),\n"
	      "symbolize them and write a self-contained profile.\n\n"
	      "Options:\n"
	      "  -F, --freq HZ            samples per second per CPU (default 999)\n"
	      "  -g, --call-graph MODE    how user stacks are walked: 'dwarf[,BYTES]' copies\n"
	      "                           BYTES of stack per sample and unwinds it with the\n"
	      "                           binaries' CFI (default dwarf,32768; BYTES a multiple\n"
	      "                           of 8 up to 65528); 'fp' follows frame pointers\n"
	      "      --no-offcpu          do not record context switches (no blocked time)\n"
	      "  -p, --pid PID[,PID...]   attach to these processes, every thread of each,\n"
	      "                           including threads created while recording\n"
	      "  -t, --tid TID[,TID...]   attach to these threads only\n"
	      "  -d, --duration SECONDS   stop after this long (default: until Ctrl-C or the\n"
	      "                           targets exit)\n"
	      "  -o, --output FILE        profile to write (default dlflame.data)\n"
	      "      --forward-exit       exit with COMMAND's exit status (128+N if killed by signal N)\n"
	      "  -h, --help               show this help\n\n"
	      "A launched COMMAND gets ONEDNN_JIT_PROFILE=2 and DNNL_JIT_PROFILE=2 in its\n"
	      "environment (unless either is set) so that oneDNN's JIT kernels are named.\n"
	      "Ctrl-C (or SIGTERM/SIGHUP) stops the recording; the profile is still written.\n"
	      "An attached process is never stopped or signalled.\n\n"
	      "Examples:\n"
	      "  dlflame record -- ./mlp 200\n"
	      "  OMP_NUM_THREADS=2 dlflame record -F 499 -o mlp.data -- ./mlp 500\n"
	      "  dlflame record -g fp -- ./a.out\n"
	      "  dlflame record -p 4242 -d 30\n",
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
	enum { OPT_FORWARD_EXIT = 256, OPT_NO_OFFCPU };
	static const struct option longopts[] = {
		{ "freq", required_argument, NULL, 'F' },
		{ "call-graph", required_argument, NULL, 'g' },
		{ "no-offcpu", no_argument, NULL, OPT_NO_OFFCPU },
		{ "pid", required_argument, NULL, 'p' },
		{ "tid", required_argument, NULL, 't' },
		{ "duration", required_argument, NULL, 'd' },
		{ "output", required_argument, NULL, 'o' },
		{ "forward-exit", no_argument, NULL, OPT_FORWARD_EXIT },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t max_rate = max_sample_rate();
	int c, err;

	optind = 1;
	opterr = 0;
	/* '+': stop at the first non-option, which starts the command */
	while ((c = getopt_long(argc, argv, "+:F:g:p:t:d:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'F':
			if (parse_u64(optarg, 10, 1, max_rate, &o->freq))
				return usage_error("record",
						   "-F takes a frequency from 1 to %llu Hz "
						   "(kernel.perf_event_max_sample_rate), got '%s'",
						   (unsigned long long)max_rate, optarg);
			break;
		case OPT_NO_OFFCPU:
			o->no_offcpu = true;
			break;
		case 'g':
		case 'p':
		case 't':
		case 'd':
			err = target_opts__parse(&o->target, "record", c, optarg);
			if (err)
				return err;
			break;
		case 'o':
			if (!*optarg)
				return usage_error("record", "-o needs a file name");
			o->output = optarg;
			break;
		case OPT_FORWARD_EXIT:
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
	if (o->target.nr_pids && optind < argc)
		return usage_error("record", "give either a command or -p/-t, not both ('%s')",
				   argv[optind]);
	if (!o->target.nr_pids && optind >= argc)
		return usage_error(
			"record",
			"no command to record (put it after --) and no -p PID to attach to");
	if (o->target.nr_pids && o->forward_exit)
		return usage_error("record", "--forward-exit needs a launched command");
	*cmd_index = optind;
	return 0;
}

/* Fail before launching anything if the profile could not be written. */
int check_output_dir(const char *path)
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

/*
 * The launched command's environment: ours, plus the oneDNN perf-map
 * switches unless the user set either. NULL when out of memory.
 */
static char **child_env(void)
{
	size_t n = 0;
	char **env;
	bool user_set = false;

	for (size_t i = 0; i < ARRAY_SIZE(jit_env); i++)
		user_set |= getenv(jit_env[i]) != NULL;
	while (environ[n])
		n++;
	env = calloc(n + ARRAY_SIZE(jit_env) + 1, sizeof(*env));
	if (!env)
		return NULL;
	memcpy(env, environ, n * sizeof(*env));
	if (!user_set) {
		env[n++] = "ONEDNN_JIT_PROFILE=2";
		env[n++] = "DNNL_JIT_PROFILE=2";
	}
	return env;
}

void session__handle_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	/* no SA_RESTART: poll() must return so that the loop sees the signal */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* ---- the recording session, shared with `dlflame offcpu` ---------------- */

int session__open(struct session *ss, const struct sampler_opts *so)
{
	memset(ss, 0, sizeof(*ss));
	ss->prof = profile__new();
	ss->sym = symbolizer__new();
	if (!ss->prof || !ss->sym)
		return error("out of memory");
	pipeline__init(&ss->pl, ss->prof, ss->sym);
	ss->pipeline_ready = true;
	ss->s = sampler__new(so);
	if (!ss->s)
		return error("out of memory");
	return EXIT_OK;
}

void session__close(struct session *ss)
{
	sampler__free(ss->s);
	if (ss->pipeline_ready)
		pipeline__exit(&ss->pl);
	symbolizer__free(ss->sym);
	profile__free(ss->prof);
	free(ss->command);
	memset(ss, 0, sizeof(*ss));
}

/* The process a thread belongs to, from /proc/TID/status; 0 if it is gone. */
static pid_t tgid_of(pid_t tid)
{
	char path[64], line[256];
	FILE *f;
	long v = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %ld", &v) == 1)
			break;
	fclose(f);
	return (pid_t)v;
}

/*
 * A thread that existed before the recording, as the attach found it: its
 * name, and whether it is asleep and where.
 */
static void note_thread(struct session *ss, const struct sampler_thread *t)
{
	pipeline__set_comm(&ss->pl, (uint32_t)t->tid, t->comm);
	/* a thread not followed (out of fds) must not be charged as blocked */
	if (ss->offcpu && t->followed && t->blocked)
		pipeline__attached_thread(&ss->pl, (uint32_t)t->pid, (uint32_t)t->tid, true, t->pc,
					  t->wchan);
}

/* "/proc/PID/cmdline" with spaces for NULs, for the profile's command. */
static char *proc_cmdline(pid_t pid)
{
	char path[64], buf[4096];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	while (n && buf[n - 1] == '\0')
		n--;
	if (!n)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	return strdup(buf);
}

/* Attached, not launched: oneDNN's JIT kernels stay nameless unless it was started so. */
static void check_jit_profile(pid_t pid)
{
	char path[64], *buf = NULL, line[4096];
	bool dnnl = false, set = false;
	size_t cap = 0, n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (!dnnl && fgets(line, sizeof(line), f))
		dnnl = strstr(line, "libdnnl.so") || strstr(line, "libmkldnn.so");
	fclose(f);
	if (!dnnl)
		return;
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	n = getdelim(&buf, &cap, '\0', f);
	for (; n != (size_t)-1 && !set; n = getdelim(&buf, &cap, '\0', f))
		for (size_t i = 0; i < ARRAY_SIZE(jit_env); i++)
			set |= !strncmp(buf, jit_env[i], strlen(jit_env[i])) &&
			       buf[strlen(jit_env[i])] == '=';
	free(buf);
	fclose(f);
	if (!set)
		warning("process %d uses oneDNN but was started without ONEDNN_JIT_PROFILE=2: its "
			"JIT kernels will be nameless; start it with ONEDNN_JIT_PROFILE=2 to name them",
			(int)pid);
}

/* What the kernel calls the attach errors, in one line with the remedy. */
static void attach_error(int err, const pid_t *pids, size_t n, bool threads_only)
{
	char msg[512], list[64] = "";
	int len = 0;

	for (size_t i = 0; i < n && len < (int)sizeof(list) - 16; i++)
		len += snprintf(list + len, sizeof(list) - (size_t)len, "%s%d", i ? "," : "",
				(int)pids[i]);
	error("cannot attach to %s %s: %s", threads_only ? "thread" : "process", list,
	      sampler__attach_strerror(err, msg, sizeof(msg)));
}

int session__attach(struct session *ss, const pid_t *pids, size_t n, bool threads_only)
{
	const struct sampler_thread *threads;
	const struct sampler_stats *st;
	size_t nr_threads;
	int err;

	err = sampler__attach(ss->s, pids, n, threads_only);
	if (err) {
		attach_error(err, pids, n, threads_only);
		return EXIT_BAD;
	}
	st = sampler__stats(ss->s);
	ss->pl.start_time = st->start_time;
	ss->attached = true;
	ss->command = proc_cmdline(threads_only ? tgid_of(pids[0]) : pids[0]);

	/* what was mapped and named before the first record */
	for (size_t i = 0; i < n; i++) {
		pid_t pid = threads_only ? tgid_of(pids[i]) : pids[i];

		if (!pid)
			continue;
		err = symbolizer__load_proc_maps(ss->sym, (uint32_t)pid);
		if (err && err != -ENOENT && err != -ESRCH)
			warning("cannot read /proc/%d/maps (%s); code mapped before the attach will "
				"be [unknown]",
				(int)pid, strerror(-err));
		if (i == 0)
			check_jit_profile(pid);
	}
	threads = sampler__threads(ss->s, &nr_threads);
	for (size_t i = 0; i < nr_threads; i++)
		note_thread(ss, &threads[i]);
	if (st->kernel_excluded)
		warning("kernel frames are not recorded: kernel.perf_event_paranoid forbids kernel "
			"sampling for this user%s; run as root or 'sysctl kernel.perf_event_paranoid=1'",
			ss->offcpu ? ", and without it blocked threads have no stacks" : "");
	if (st->threads_missed)
		warning("%llu of %llu threads are not followed: out of file descriptors (each "
			"thread needs one per event per CPU); raise the hard limit (`ulimit -Hn`, "
			"LimitNOFILE=) and record again",
			(unsigned long long)st->threads_missed,
			(unsigned long long)(st->threads_missed + st->threads_followed));
	return EXIT_OK;
}

/*
 * While recording on a terminal, one status line redrawn a few times a
 * second, as py-spy and top do; nothing of it when stderr is a file or a
 * pipe, so logs hold only the summary.
 */
#define STATUS_EVERY_NS 250000000ULL

static void status_line(struct session *ss, uint64_t start)
{
	char ends[256] = "", blocked[48] = "";
	const uint64_t *w = ss->pl.samples ? ss->pl.oncpu_ends : ss->pl.offcpu_end_ns;
	uint64_t total = 0;

	for (int e = 0; e < STACK_END_MAX; e++)
		total += w[e];
	if (total)
		snprintf(ends, sizeof(ends), ", %.1f%% complete",
			 100.0 * (double)w[STACK_END_COMPLETE] / (double)total);
	if (ss->offcpu)
		snprintf(blocked, sizeof(blocked), ", %.2f s blocked",
			 (double)ss->pl.offcpu_ns / 1e9);
	fprintf(stderr, "\rdlflame: recording %.1f s, %llu samples%s, %llu lost%s\033[K",
		(double)(now_ns() - start) / 1e9, (unsigned long long)ss->pl.samples, blocked,
		(unsigned long long)sampler__stats(ss->s)->lost, ends);
	fflush(stderr);
}

/*
 * Record until the child exits (launch), the targets exit (attach), the
 * duration runs out or a signal comes; then drain and charge the threads
 * still blocked. Returns 0 or the negative errno that stopped the recording.
 */
int session__run(struct session *ss, pid_t child, uint64_t duration_ns, int *status,
		 bool *child_done)
{
	/* attached: the duration counts from when the events were opened */
	uint64_t start = ss->pl.start_time ? ss->pl.start_time : now_ns();
	uint64_t deadline = 0, end_at = duration_ns ? start + duration_ns : 0;
	uint64_t status_at = isatty(STDERR_FILENO) ? now_ns() + STATUS_EVERY_NS : 0;
	int signalled = 0, err, ferr, kerr;

	*child_done = false;
	for (;;) {
		if (status_at && now_ns() >= status_at) {
			status_line(ss, start);
			status_at = now_ns() + STATUS_EVERY_NS;
		}
		if (stop_signal && !signalled) {
			signalled = stop_signal;
			if (child <= 0)
				break; /* attached: stop now, never touch the target */
			/* Ctrl-C reached the whole process group; give the target a moment */
			if (signalled != SIGINT)
				kill(child, SIGTERM);
			deadline = now_ns() + 3000000000ULL;
		} else if (signalled && stop_signal != signalled) {
			break; /* a second, different signal: stop now */
		}
		err = sampler__poll(ss->s, 100, pipeline__record, &ss->pl);
		if (err)
			break;
		if (end_at && now_ns() >= end_at)
			break;
		if (child > 0 && waitpid(child, status, WNOHANG) == child) {
			*child_done = true;
			break;
		}
		if (child <= 0 && sampler__targets_gone(ss->s)) {
			ss->targets_gone = true;
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
	ss->end_time = now_ns();
	if (status_at)
		fputs("\r\033[K", stderr); /* the summary takes the status line's place */
	/*
	 * Kernel frames are named only now (see pipeline.h): kallsyms is read
	 * while the last records are delivered, not while the target runs.
	 */
	kerr = symbolizer__load_kallsyms_async(ss->sym, "/proc/kallsyms");
	if (!err)
		err = sampler__drain(ss->s, pipeline__record, &ss->pl);
	/* also after an error: what was recorded is kept, so it is charged and named */
	ferr = pipeline__finish(&ss->pl, ss->end_time);
	if (!kerr)
		kerr = symbolizer__kallsyms_result(ss->sym);
	if (kerr == -EPERM)
		warning("kernel symbols are hidden (kernel.kptr_restrict); kernel frames are "
			"named [kernel]; run as root or 'sysctl kernel.kptr_restrict=0'");
	else if (kerr)
		warning("cannot read /proc/kallsyms (%s); kernel frames are named [kernel]",
			strerror(-kerr));
	return err ? err : ferr;
}

void session__fill_meta(struct session *ss, uint64_t freq, const char *command)
{
	struct pf_meta *m = profile__meta(ss->prof);
	const char *event = sampler__stats(ss->s)->event;
	char host[256] = "";
	int64_t id;

	m->start_time = ss->pl.first_time;
	if (ss->pl.start_time && (ss->pl.start_time < m->start_time || !m->start_time))
		m->start_time = ss->pl.start_time;
	m->end_time = ss->pl.last_time;
	if (!m->start_time)
		m->start_time = m->end_time;
	m->lost = sampler__stats(ss->s)->lost;
	m->freq = freq;
	id = profile__string(ss->prof, event ? event : "", event ? strlen(event) : 0);
	m->event = id > 0 ? (uint32_t)id : 0;
	if (command) {
		id = profile__string(ss->prof, command, strlen(command));
		m->command = id > 0 ? (uint32_t)id : 0;
	}
	gethostname(host, sizeof(host) - 1);
	id = profile__string(ss->prof, host, strlen(host));
	m->hostname = id > 0 ? (uint32_t)id : 0;
	m->finalized = true;
}

/* Warnings every recording may end with, after its summary line. */
void session__warnings(struct session *ss)
{
	const struct sampler_stats *st = sampler__stats(ss->s);

	if (st->lost)
		warning("%llu records were lost (ring buffer overflow); lower -F%s to lose fewer",
			(unsigned long long)st->lost,
			ss->pl.offcpu_samples ? " or use --call-graph fp" : "");
	if (st->bad_records)
		warning("%llu malformed kernel records were skipped",
			(unsigned long long)st->bad_records);
	if (ss->targets_gone)
		info("the target exited; the recording ends there");
}

/* ---- record ------------------------------------------------------------- */

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

/*
 * A long recording keeps its samples in an unlinked file next to the output,
 * not in memory. DLFLAME_SPILL_SAMPLES (0 never spills) lets tests spill early.
 */
static int set_spill(struct profile *prof, const char *output)
{
	const char *env = getenv("DLFLAME_SPILL_SAMPLES");
	uint64_t at = DEFAULT_SPILL_SAMPLES;
	char *copy = strdup(output);
	int err;

	if (!copy)
		return error("out of memory");
	if (env && parse_u64(env, 10, 0, SIZE_MAX, &at)) {
		warning("ignoring DLFLAME_SPILL_SAMPLES=%s: not a number of samples", env);
		at = DEFAULT_SPILL_SAMPLES;
	}
	err = profile__set_spill(prof, (size_t)at, dirname(copy));
	free(copy);
	if (err)
		return error("out of memory");
	return 0;
}

int cmd_record(int argc, char **argv)
{
	struct record_opts o = { .freq = SAMPLER_DEFAULT_FREQ,
				 .output = DEFAULT_OUTPUT,
				 .target = TARGET_OPTS_DEFAULT };
	struct sampler_opts so = { 0 };
	struct session ss = { 0 };
	const struct sampler_stats *st;
	char msg[512], offcpu[64] = "", ends[256], **env = NULL, **cmd = NULL;
	const struct render_select hint_sel = { .kinds = { [SAMPLE_ONCPU] = true } };
	char *command = NULL;
	pid_t child = -1;
	int status = 0, cmd_index = 0, err, ret = EXIT_BAD;
	bool child_done = false;
	uint64_t t0;

	err = parse_args(argc, argv, &o, &cmd_index);
	if (err) {
		free(o.target.pids);
		return err < 0 ? EXIT_OK : err;
	}
	if (!o.target.nr_pids)
		cmd = argv + cmd_index;

	err = check_output_dir(o.output);
	if (err) {
		free(o.target.pids);
		return error("cannot write %s: %s; choose another path with -o", o.output,
			     strerror(-err));
	}

	so.freq = o.freq;
	so.callgraph = o.target.callgraph;
	so.stack_size = o.target.stack_size;
	so.offcpu = !o.no_offcpu;
	if (session__open(&ss, &so) || set_spill(ss.prof, o.output))
		goto out;
	ss.offcpu = so.offcpu;

	t0 = now_ns();
	if (o.target.nr_pids) {
		if (session__attach(&ss, o.target.pids, o.target.nr_pids, o.target.threads_only))
			goto out;
		session__handle_signals();
	} else {
		env = child_env();
		if (!env) {
			error("out of memory");
			goto out;
		}
		err = sampler__launch(ss.s, cmd, env, &child);
		if (err) {
			error("cannot record '%s': %s", cmd[0],
			      sampler__open_strerror(err, msg, sizeof(msg)));
			goto out;
		}
		if (sampler__stats(ss.s)->kernel_excluded)
			warning("kernel frames are not recorded: kernel.perf_event_paranoid forbids "
				"kernel sampling for this user%s; run as root or "
				"'sysctl kernel.perf_event_paranoid=1'",
				ss.offcpu ? ", and without it blocked threads have no stacks" : "");
		session__handle_signals();
		t0 = now_ns();
		err = sampler__start(ss.s);
		if (err) {
			error("cannot start '%s': %s", cmd[0],
			      sampler__open_strerror(err, msg, sizeof(msg)));
			goto out;
		}
	}

	err = session__run(&ss, child, o.target.duration_ns, &status, &child_done);
	if (err) {
		/* keep what was recorded: write it, then report the failure */
		error("recording stopped early: %s", strerror(-err));
	}
	if (cmd) {
		if (!child_done && waitpid(child, &status, WNOHANG) == child)
			child_done = true;
		if (child_done)
			describe_exit(status, cmd[0]);
		else
			warning("%s (pid %d) is still running; it is no longer recorded", cmd[0],
				child);
	}

	command = cmd ? join_args(cmd) : NULL;
	session__fill_meta(&ss, o.freq, cmd ? command : ss.command);
	int werr = profile__write(ss.prof, o.output);
	if (werr) {
		error("cannot write %s: %s", o.output, strerror(-werr));
		goto out;
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	st = sampler__stats(ss.s);
	if (ss.offcpu)
		snprintf(offcpu, sizeof(offcpu), ", %.2f s blocked", (double)ss.pl.offcpu_ns / 1e9);
	render_ends_line(ss.pl.samples ? ss.pl.oncpu_ends : ss.pl.offcpu_end_ns, ends,
			 sizeof(ends));
	info("%.2f s, %llu samples%s, %llu lost, %s%s%zu threads -> %s; next: dlflame report%s%s "
	     "--svg",
	     secs, (unsigned long long)ss.pl.samples, offcpu, (unsigned long long)st->lost, ends,
	     *ends ? ", " : "", profile__nr_threads(ss.prof), o.output,
	     strcmp(o.output, DEFAULT_OUTPUT) ? " -i " : "",
	     strcmp(o.output, DEFAULT_OUTPUT) ? o.output : "");
	session__warnings(&ss);
	quality_symbol_hints(ss.prof, &hint_sel);
	if (ss.pl.samples == 0 && !ss.pl.offcpu_samples)
		warning("no samples were recorded: %s ran for too short a time",
			cmd ? cmd[0] : "the target");
	if (err)
		ret = EXIT_BAD;
	else if (o.forward_exit && child_done)
		ret = exit_code_of(status);
	else
		ret = EXIT_OK;
out:
	session__close(&ss);
	free(command);
	free(env);
	free(o.target.pids);
	return ret;
}
