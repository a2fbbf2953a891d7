/* SPDX-License-Identifier: MIT */
/*
 * A recording, as `record` and `offcpu` run it: the sampler's records go to
 * the collector, which builds the profile. This is cmd/: the functions
 * print their own errors and return an exit code, except session__run.
 */
#include "session.h"
#include "cmd.h"
#include "status.h"
#include "pybpf/pybpf.h"
#include "python/python.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* oneDNN writes /tmp/perf-PID.map only when one of these says so (docs/onednn-jit.md). */
static const char *const jit_env[] = { "ONEDNN_JIT_PROFILE", "DNNL_JIT_PROFILE" };

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
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

/*
 * The launched command's environment: ours, plus the oneDNN perf-map
 * switches unless the user set either. NULL when out of memory.
 */
char **session__child_env(void)
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

/* CLOCK_REALTIME - CLOCK_MONOTONIC now (ns): what places this host's sample times in a merge. */
static int64_t clock_offset(void)
{
	struct timespec m, r;

	if (clock_gettime(CLOCK_MONOTONIC, &m) || clock_gettime(CLOCK_REALTIME, &r))
		return 0;
	return ((int64_t)r.tv_sec - m.tv_sec) * 1000000000 + (r.tv_nsec - m.tv_nsec);
}

/* The collector's word on where a thread's stack ends, to the sampler that cuts copies there. */
static void stack_top(void *ctx, uint32_t tid, uint64_t top)
{
	sampler__stack_top(ctx, tid, top);
}

int session__open(struct session *ss, const struct sampler_opts *so, enum session_python python)
{
	struct sampler_opts bo;
	int err;

	memset(ss, 0, sizeof(*ss));
	ss->prof = profile__new();
	ss->sym = symbolizer__new();
	if (!ss->prof || !ss->sym)
		return error("out of memory");
	ss->col = collector__new(ss->prof, ss->sym);
	if (!ss->col)
		return error("out of memory");
	if (so->callgraph != CALLGRAPH_DWARF)
		python = SESSION_PY_NONE;
	if (python == SESSION_PY_BPF || python == SESSION_PY_AUTO) {
		err = pybpf__open(&ss->bpf, 0);
		if (err) {
			/* what to do first: libbpf's own words may be long, and are cut */
			snprintf(ss->bpf_why, sizeof(ss->bpf_why),
				 "cannot load the BPF program that copies Python frames at the "
				 "sample%s (%s%s%.160s)",
				 err == -EPERM ? ": it needs root, or CAP_BPF and CAP_PERFMON" : "",
				 strerror(-err), *pybpf__last_error() ? ": " : "",
				 pybpf__last_error());
			if (python == SESSION_PY_BPF)
				warning("--python-frames=bpf: %s; they are read after each sample "
					"instead",
					ss->bpf_why);
			ss->bpf = NULL;
		} else {
			bo = *so;
			bo.bpf = true;
			bo.bpf_fd = pybpf__prog_fd(ss->bpf);
			bo.bpf_probe_fd = pybpf__probe_prog_fd(ss->bpf);
			bo.bpf_probes = bo.bpf_probe_fd >= 0;
			so = &bo;
		}
		ss->bpf_auto = python == SESSION_PY_AUTO;
	}
	ss->s = sampler__new(so);
	if (!ss->s)
		return error("out of memory");
	/* copies kept only up to where each thread's stack ends, as its walks learn */
	if (so->callgraph == CALLGRAPH_DWARF)
		collector__on_stack_top(ss->col, stack_top, ss->s);
	collector__enable_ranks(ss->col);
	profile__meta(ss->prof)->clock_offset = clock_offset();
	if (python) {
		if (collector__enable_python(ss->col))
			return error("out of memory");
		sampler__set_early(ss->s, collector__early, ss->col);
		ss->python = true;
		if (ss->bpf)
			collector__python_bpf(ss->col, ss->bpf);
	}
	return EXIT_OK;
}

/*
 * Once the events are open: a program the kernel would not attach to them
 * gives no records, and frames are read after the sample instead.
 */
static void check_bpf(struct session *ss)
{
	const struct sampler_stats *st = sampler__stats(ss->s);

	if (!ss->bpf || (st->bpf_attached && !st->bpf_err))
		return;
	snprintf(ss->bpf_why, sizeof(ss->bpf_why),
		 "the kernel did not attach the BPF program that copies Python frames at the "
		 "sample to the sampling events (%s)",
		 strerror(st->bpf_err ? -st->bpf_err : ENODEV));
	if (!ss->bpf_auto)
		warning("--python-frames=bpf: %s; they are read after each sample instead",
			ss->bpf_why);
	collector__python_bpf(ss->col, NULL);
}

void session__close(struct session *ss)
{
	/* the file stays: the profile replaced it, or it is what a failed write leaves */
	profile__journal_close(ss->journal);
	sampler__free(ss->s);
	collector__free(ss->col);
	pybpf__free(ss->bpf);
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
	collector__set_comm(ss->col, (uint32_t)t->tid, t->comm);
	if (t->pid == t->tid && collector__read_rank(ss->col, (uint32_t)t->pid))
		warning("out of memory reading process %d's rank", (int)t->pid);
	/* a thread not followed (out of fds) must not be charged as blocked */
	if (ss->offcpu && t->followed && t->blocked)
		collector__attached_thread(ss->col, (uint32_t)t->pid, (uint32_t)t->tid, true, t->pc,
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

void warn_kernel_excluded(bool offcpu)
{
	warning("kernel frames are not recorded: kernel.perf_event_paranoid forbids kernel "
		"sampling to a process without CAP_PERFMON%s; run as root on the host (in a "
		"container, add the capability: `--cap-add SYS_ADMIN`) or "
		"'sysctl kernel.perf_event_paranoid=1' on the host",
		offcpu ? ", and without it blocked threads have no stacks" : "");
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
	ss->start_time = st->start_time;
	collector__set_start(ss->col, st->start_time);
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
		warn_kernel_excluded(ss->offcpu);
	if (st->threads_missed)
		warning("%llu of %llu threads are not followed: out of file descriptors (each "
			"thread needs one per event per CPU); raise the hard limit (`ulimit -Hn`, "
			"LimitNOFILE=) and record again",
			(unsigned long long)st->threads_missed,
			(unsigned long long)(st->threads_missed + st->threads_followed));
	return EXIT_OK;
}

/* Each process of a cgroup and of the cgroups below it (depth-limited), once. */
static void cgroup_procs(struct session *ss, int dirfd, int depth, bool *warned_jit)
{
	char line[32];
	FILE *f;
	DIR *d;
	int fd;

	fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
	f = fd >= 0 ? fdopen(fd, "re") : NULL;
	if (!f && fd >= 0)
		close(fd);
	while (f && fgets(line, sizeof(line), f)) {
		uint64_t pid;
		char path[64];
		DIR *tasks;
		struct dirent *e;

		line[strcspn(line, "\n")] = '\0';
		if (parse_u64(line, 10, 1, INT32_MAX, &pid))
			continue;
		/* what it mapped before the recording, its rank and container, its threads' names */
		symbolizer__load_proc_maps(ss->sym, (uint32_t)pid);
		if (collector__read_rank(ss->col, (uint32_t)pid))
			warning("out of memory reading process %d's rank", (int)pid);
		if (!*warned_jit) {
			check_jit_profile((pid_t)pid);
			*warned_jit = true;
		}
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		tasks = opendir(path);
		while (tasks && (e = readdir(tasks))) {
			char cpath[96], comm[64] = "";
			FILE *cf;
			uint64_t tid;

			if (parse_u64(e->d_name, 10, 1, INT32_MAX, &tid))
				continue;
			snprintf(cpath, sizeof(cpath), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
			cf = fopen(cpath, "re");
			if (cf && fgets(comm, sizeof(comm), cf)) {
				comm[strcspn(comm, "\n")] = '\0';
				collector__set_comm(ss->col, (uint32_t)tid, comm);
			}
			if (cf)
				fclose(cf);
		}
		if (tasks)
			closedir(tasks);
	}
	if (f)
		fclose(f);
	if (depth >= 16)
		return;
	d = fdopendir(dup(dirfd));
	while (d) {
		struct dirent *e = readdir(d);
		int sub;

		if (!e)
			break;
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sub >= 0) {
			cgroup_procs(ss, sub, depth + 1, warned_jit);
			close(sub);
		}
	}
	if (d)
		closedir(d);
}

int session__cgroup(struct session *ss, int cgfd, const char *path)
{
	const struct sampler_stats *st;
	char msg[512];
	bool warned_jit = false;
	int err;

	err = sampler__cgroup(ss->s, cgfd);
	if (err) {
		error("cannot record cgroup %s: %s", path,
		      sampler__attach_strerror(err, msg, sizeof(msg)));
		return EXIT_BAD;
	}
	st = sampler__stats(ss->s);
	ss->start_time = st->start_time;
	collector__set_start(ss->col, st->start_time);
	ss->attached = true;
	if (asprintf(&ss->command, "cgroup %s", path) < 0)
		ss->command = NULL;
	/* the processes there now; those that start later come with their records */
	cgroup_procs(ss, cgfd, 0, &warned_jit);
	if (st->kernel_excluded)
		warn_kernel_excluded(ss->offcpu);
	return EXIT_OK;
}

/*
 * While recording on a terminal, a status line of its own at the bottom,
 * redrawn a few times a second (cmd/status.c); nothing of it when stderr is
 * a file or a pipe or the terminal cannot keep it, so logs hold only the
 * summary.
 */
#define STATUS_EVERY_NS 250000000ULL

static void status_line(struct session *ss, uint64_t start)
{
	char line[512], ends[256] = "", blocked[48] = "";
	const struct collect_stats *cs = collector__stats(ss->col);
	const uint64_t *w = cs->samples ? cs->oncpu_ends : cs->offcpu_end_ns;
	uint64_t total = 0;

	for (int e = 0; e < STACK_END_MAX; e++)
		total += w[e];
	if (total)
		snprintf(ends, sizeof(ends), ", %.1f%% complete",
			 100.0 * (double)w[STACK_END_COMPLETE] / (double)total);
	if (ss->offcpu)
		snprintf(blocked, sizeof(blocked), ", %.2f s blocked", (double)cs->offcpu_ns / 1e9);
	snprintf(line, sizeof(line), "dlflame: recording %.1f s, %llu samples%s, %llu lost%s",
		 (double)(monotonic_ns() - start) / 1e9, (unsigned long long)cs->samples, blocked,
		 (unsigned long long)sampler__stats(ss->s)->lost, ends);
	status_draw(line);
}

/*
 * Record until the child exits (launch), the targets exit (attach), the
 * duration runs out or a signal comes; then drain and charge the threads
 * still blocked. Returns 0 or the negative errno that stopped the recording.
 */
void session__journal(struct session *ss, const char *path, uint64_t freq, const char *command)
{
	int err = profile__journal_open(ss->prof, path, &ss->journal);

	ss->freq = freq;
	ss->command_line = command;
	if (err && err != -ENOTSUP)
		warning("cannot keep the recording at %s while it runs (%s): a recorder killed now "
			"would leave nothing",
			path, strerror(-err));
}

/* Each recorded process's resident set is read this often (launch and attach). */
#define RSS_EVERY_NS 100000000ull

/*
 * The resident set of every process that has a thread in the profile, from
 * /proc/PID/statm, as a SAMPLE_RSS sample on a thread of it (its leader's
 * when there is one): report --memory and the trace's RSS track.
 */
static void sample_rss(struct session *ss, uint64_t now)
{
	size_t n = profile__nr_threads(ss->prof);
	long page = sysconf(_SC_PAGESIZE);
	struct u64map seen;

	u64map_init(&seen);
	for (size_t i = 0; i < n; i++) {
		const struct pf_thread *t = profile__get_thread(ss->prof, (uint32_t)i);
		uint64_t v;

		/* the leader's entry wins; any other thread does when there is none */
		if (!u64map_get(&seen, t->pid, &v) || t->tid == t->pid)
			u64map_put(&seen, t->pid, i);
	}
	for (size_t k = 0; k < seen.cap; k++) {
		unsigned long size = 0, resident = 0;
		char path[64];
		FILE *f;

		if (seen.keys[k] == UINT64_MAX)
			continue;
		snprintf(path, sizeof(path), "/proc/%llu/statm", (unsigned long long)seen.keys[k]);
		f = fopen(path, "re");
		if (!f)
			continue; /* gone */
		if (fscanf(f, "%lu %lu", &size, &resident) == 2 && resident)
			profile__add_sample(
				ss->prof,
				&(struct pf_sample){ .time = now,
						     .weight = (uint64_t)resident * (uint64_t)page,
						     .stack = 0,
						     .thread = (uint32_t)seen.vals[k],
						     .kind = SAMPLE_RSS });
		fclose(f);
	}
	u64map_free(&seen);
}

/*
 * The JIT kernels each recorded process has named in its perf map, read
 * while it runs (symbolizer__jit_refresh): unwinding runs behind the
 * samples, and a kernel's code cannot be read once its process has exited.
 */
static void jit_refresh(struct session *ss)
{
	size_t n = profile__nr_threads(ss->prof);
	struct u64map seen;

	u64map_init(&seen);
	for (size_t i = 0; i < n; i++) {
		const struct pf_thread *t = profile__get_thread(ss->prof, (uint32_t)i);
		uint64_t v;

		if (u64map_get(&seen, t->pid, &v))
			continue;
		u64map_put(&seen, t->pid, 1);
		symbolizer__jit_refresh(ss->sym, t->pid);
	}
	u64map_free(&seen);
}

/*
 * Samples delivered up to about this long before a SIGKILL are kept. A sync
 * appends what is new (0.1-0.4 ms for a trainer at 1 kHz, measured), five
 * times a second.
 */
#define JOURNAL_EVERY_NS 200000000ull

/* What was recorded so far, to the journal; after an error, no more journal. */
static void journal_sync(struct session *ss)
{
	const struct pf_sample *pending;
	size_t nr_pending;
	int err;

	if (!ss->journal)
		return;
	session__fill_meta(ss, ss->freq, ss->command_line ? ss->command_line : ss->command);
	err = collector__pending(ss->col, &pending, &nr_pending);
	if (!err)
		err = profile__journal_sync(ss->journal, collector__journal_loc, ss->col, pending,
					    nr_pending);
	if (err) {
		warning("cannot keep the recording on disk while it runs (%s); it is written when "
			"it ends",
			strerror(-err));
		profile__journal_close(ss->journal);
		ss->journal = NULL;
	}
}

int session__run(struct session *ss, pid_t child, uint64_t duration_ns, int *status,
		 bool *child_done)
{
	/* attached: the duration counts from when the events were opened */
	uint64_t start = ss->start_time ? ss->start_time : monotonic_ns();
	uint64_t deadline = 0, end_at = duration_ns ? start + duration_ns : 0;
	uint64_t status_at = 0;
	uint64_t journal_at = monotonic_ns() + JOURNAL_EVERY_NS, rss_at = monotonic_ns();
	int signalled = 0, err, ferr, kerr;

	*child_done = false;
	check_bpf(ss);
	/*
	 * The sampler's threads copy the rings into spills; this thread hands
	 * the records on, at the trainer's priority while it keeps up. Once
	 * the spills hold a quarter of their budget (samples lose their stack
	 * copies past three quarters), as root a higher share (nice -10), until
	 * they are down to an eighth.
	 */
	bool high = false;
	unsigned backlog;

	if (status_open()) {
		status_line(ss, start);
		status_at = monotonic_ns() + STATUS_EVERY_NS;
	}
	for (;;) {
		if (status_at && monotonic_ns() >= status_at) {
			status_line(ss, start);
			status_at = monotonic_ns() + STATUS_EVERY_NS;
		}
		if (monotonic_ns() >= rss_at) {
			sample_rss(ss, monotonic_ns());
			jit_refresh(ss);
			rss_at = monotonic_ns() + RSS_EVERY_NS;
		}
		if (ss->journal && monotonic_ns() >= journal_at) {
			journal_sync(ss);
			journal_at = monotonic_ns() + JOURNAL_EVERY_NS;
		}
		if (stop_signal && !signalled) {
			signalled = stop_signal;
			if (child <= 0)
				break; /* attached: stop now, never touch the target */
			/* Ctrl-C reached the whole process group; give the target a moment */
			if (signalled != SIGINT)
				kill(child, SIGTERM);
			deadline = monotonic_ns() + 3000000000ULL;
		} else if (signalled && stop_signal != signalled) {
			break; /* a second, different signal: stop now */
		}
		/*
		 * The sampler's own threads empty the rings (and read Python
		 * frames) and wake this thread when they have passed records on.
		 * A library mapped now may need its probe (watch_maps): its
		 * mapping is read within 10 ms then.
		 */
		err = sampler__poll(ss->s, ss->watch_maps ? 10 : 100, collector__record, ss->col);
		if (err)
			break;
		backlog = sampler__backlog(ss->s);
		if (high != (high ? backlog >= 1 : backlog >= 2)) {
			high = !high;
			setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), high ? -10 : 0);
		}
		if (end_at && monotonic_ns() >= end_at)
			break;
		if (child > 0 && waitpid(child, status, WNOHANG) == child) {
			*child_done = true;
			break;
		}
		if (child <= 0 && sampler__targets_gone(ss->s)) {
			ss->targets_gone = true;
			break;
		}
		if (signalled && monotonic_ns() > deadline) {
			if (signalled == SIGINT) {
				/* the target ignored Ctrl-C; ask it to terminate as perf does */
				kill(child, SIGTERM);
				signalled = SIGTERM;
				deadline = monotonic_ns() + 2000000000ULL;
				continue;
			}
			break;
		}
	}
	ss->end_time = monotonic_ns();
	/* every way out of the loop comes here: the terminal is whole again */
	status_close();
	/*
	 * Kernel frames are named only now (see collect/collect.h): kallsyms is read
	 * while the last records are delivered, not while the target runs.
	 */
	kerr = symbolizer__load_kallsyms_async(ss->sym, "/proc/kallsyms");
	if (!err)
		err = sampler__drain(ss->s, collector__record, ss->col);
	/* also after an error: what was recorded is kept, so it is charged and named */
	ferr = collector__finish(ss->col, ss->end_time);
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
	const struct collect_stats *cs = collector__stats(ss->col);
	struct pf_meta *m = profile__meta(ss->prof);
	const char *event = sampler__stats(ss->s)->event;
	char host[256] = "";
	int64_t id;

	m->start_time = cs->first_time;
	if (ss->start_time && (ss->start_time < m->start_time || !m->start_time))
		m->start_time = ss->start_time;
	m->end_time = cs->last_time;
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

void warn_dropped(const struct collect_stats *cs)
{
	static const char *const what[COLLECT_DROP_MAX] = {
		[COLLECT_DROP_SAMPLE] = "samples",
		[COLLECT_DROP_SWITCH] = "context switches",
		[COLLECT_DROP_MAP] = "mappings (addresses in them may be [unknown])",
		[COLLECT_DROP_TASK] = "thread events (comm, fork, exit)",
	};

	for (int k = 0; k < COLLECT_DROP_MAX; k++)
		if (cs->dropped[k])
			warning("%llu %s could not be recorded (the first: %s); the rest of the "
				"recording is whole",
				(unsigned long long)cs->dropped[k], what[k],
				strerror(-cs->drop_err[k]));
}

/* What reading Python frames gave, and why a Python process had none. */
static void warn_python(const struct collect_python_stats *py)
{
	uint64_t groups = py->groups_ok + py->groups_changed + py->groups_unread;
	char version[32] = "Python";

	if (py->failed_version)
		snprintf(version, sizeof(version), "Python %u.%u", py->failed_version >> 24,
			 py->failed_version >> 16 & 0xff);
	if (py->failed_pid && py->failed_err == -EPROTONOSUPPORT && !py->failed_version)
		warning("process %u runs a CPython older than 3.11: Python frames are read for "
			"CPython 3.11 to 3.14 and later versions whose debug offsets hold up; its "
			"stacks have native frames only",
			py->failed_pid);
	else if (py->failed_pid && py->failed_err == -EPROTONOSUPPORT && py->failed_free_threaded)
		warning("process %u runs a free-threaded build of %s: its frames are not read "
			"(Python frames are read for builds with the GIL only); its stacks have "
			"native frames only",
			py->failed_pid, version);
	else if (py->failed_pid && py->failed_err == -EPROTONOSUPPORT &&
		 (py->failed_version >> 16 & 0xff) >= 13)
		warning("process %u runs %s, whose _Py_DebugOffsets do not describe the fields "
			"dlflame reads (or do not hold up when checked): Python frames are read for "
			"CPython 3.11 to 3.14 and later versions whose debug offsets hold up; its "
			"stacks have native frames only",
			py->failed_pid, version);
	else if (py->failed_pid && py->failed_err == -EPROTONOSUPPORT)
		warning("process %u runs %s: Python frames are read for CPython 3.11 to 3.14 and "
			"later versions whose debug offsets hold up; its stacks have native frames "
			"only",
			py->failed_pid, version);
	else if (py->failed_pid && (py->failed_err == -EPERM || py->failed_err == -EACCES) &&
		 pyreader__self_read() == -EPERM)
		warning("cannot read the memory of process %u (%s): this process's seccomp filter "
			"refuses process_vm_readv even on itself (Docker's default profile does "
			"without CAP_SYS_PTRACE); run the container with `--cap-add SYS_PTRACE`, or "
			"record it from the host; its stacks have native frames only",
			py->failed_pid, version);
	else if (py->failed_pid && (py->failed_err == -EPERM || py->failed_err == -EACCES))
		warning("cannot read the memory of process %u (%s): %s; run dlflame as its user "
			"or as root (and with kernel.yama.ptrace_scope 0 or 1 for a non-child); its "
			"stacks have native frames only",
			py->failed_pid, version, strerror(-py->failed_err));
	else if (py->failed_pid)
		warning("cannot read the Python frames of process %u (%s): %s; its stacks have "
			"native frames only",
			py->failed_pid, version, strerror(-py->failed_err));
	if (py->failed_processes > 1)
		warning("%llu processes in all have no Python frames for that reason or another",
			(unsigned long long)py->failed_processes);
	if (groups && py->bpf_processes)
		info("Python frames in %.1f%% of %llu eval calls, copied at the sample by BPF "
		     "(%llu of %llu Python processes); changed before read %.1f%%, not read %.1f%%; "
		     "%llu records of %llu joined their samples, %llu walks stopped short; %llu "
		     "samples without a record, %llu before the program read their process",
		     100.0 * (double)py->groups_ok / (double)groups, (unsigned long long)groups,
		     (unsigned long long)py->bpf_processes, (unsigned long long)py->processes,
		     100.0 * (double)py->groups_changed / (double)groups,
		     100.0 * (double)py->groups_unread / (double)groups,
		     (unsigned long long)py->bpf_joined, (unsigned long long)py->bpf_records,
		     (unsigned long long)py->bpf_failed, (unsigned long long)py->bpf_missing,
		     (unsigned long long)py->bpf_before);
	else if (groups)
		info("Python frames in %.1f%% of %llu eval calls; changed before read %.1f%%, "
		     "not read %.1f%%; read %.2f ms after the sample on average (at most %.1f ms)",
		     100.0 * (double)py->groups_ok / (double)groups, (unsigned long long)groups,
		     100.0 * (double)py->groups_changed / (double)groups,
		     100.0 * (double)py->groups_unread / (double)groups,
		     py->snapshots + py->snapshot_failures
			     ? (double)py->delay_sum_ns / 1e6 /
				       (double)(py->snapshots + py->snapshot_failures)
			     : 0.0,
		     (double)py->delay_max_ns / 1e6);
}

/* Warnings every recording may end with, after its summary line. */
void session__warnings(struct session *ss)
{
	const struct collect_stats *cs = collector__stats(ss->col);
	const struct sampler_stats *st = sampler__stats(ss->s);

	if (st->lost)
		warning("%llu records were lost (ring buffer overflow): %llu while on-CPU samples "
			"were written, %llu while context-switch samples were, %llu other; lower "
			"-F%s to lose fewer",
			(unsigned long long)st->lost,
			(unsigned long long)st->lost_by_event[EV_ONCPU],
			(unsigned long long)st->lost_by_event[EV_SWITCH],
			(unsigned long long)st->lost_other,
			cs->offcpu_samples ? " or use --call-graph fp" : "");
	if (st->stacks_dropped)
		warning("%llu samples were kept without their stacks: the recording fell so far "
			"behind that its buffers were three quarters full (records are lost past "
			"them); lower -F%s to keep every stack",
			(unsigned long long)st->stacks_dropped,
			cs->offcpu_samples ? " or use --call-graph fp" : "");
	if (cs->call_entries)
		info("%llu probed calls; %llu never returned (thread exit, longjmp, still running "
		     "at the end), %llu probe records paired nothing; see report --calls",
		     (unsigned long long)cs->calls, (unsigned long long)cs->calls_unfinished,
		     (unsigned long long)cs->calls_unpaired);
	if (st->bad_records)
		warning("%llu malformed kernel records were skipped",
			(unsigned long long)st->bad_records);
	if (ss->targets_gone)
		info("the target exited; the recording ends there");
	warn_dropped(cs);
	warn_python(&cs->py);
	if (ss->bpf_auto && *ss->bpf_why && cs->py.processes)
		info("Python frames were read just after each sample, not copied at it: %s",
		     ss->bpf_why);
	if (ss->bpf) {
		struct pybpf_stats bs;

		if (pybpf__stats(ss->bpf, &bs))
			bs = (struct pybpf_stats){ 0 };
		/* records the program could not write: their samples show frames not read */
		if (bs.dropped)
			warning("--python-frames=bpf: %llu of %llu records of Python frames found "
				"the BPF ring buffer full; their samples show [python frames not read]",
				(unsigned long long)bs.dropped,
				(unsigned long long)(bs.dropped + bs.records));
		/* probes the kernel would not link it to: their callers were read after the entry */
		if (st->bpf_probe_err)
			info("the kernel did not link the BPF program that copies Python frames to the "
			     "probes (%s): their Python callers were read after each entry",
			     strerror(-st->bpf_probe_err));
		/* probes' entries it left: their frames were read after the sample */
		if (bs.busy)
			info("%llu probed calls' Python frames were read after their sample: every "
			     "one of the BPF program's slots on their CPU was taken",
			     (unsigned long long)bs.busy);
		/* what the program cost the trainer's CPUs, where the kernel counted it */
		if (bs.runs)
			info("the BPF program that copies Python frames ran %llu times, %.1f us "
			     "each, %.3f s in all, on the trainer's CPUs (kernel.bpf_stats_enabled)",
			     (unsigned long long)bs.runs, (double)bs.run_ns / 1e3 / (double)bs.runs,
			     (double)bs.run_ns / 1e9);
	}
}
