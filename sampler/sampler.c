/* SPDX-License-Identifier: MIT */
/*
 * Launching a target stopped before exec, opening one sampling event per CPU
 * on it, mapping the ring buffers and draining them in time order.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <asm/perf_regs.h>
#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>

#include "sampler/order.h"
#include "sampler/sampler.h"
#include "util/util.h"

#define DEFAULT_FREQ 999
#define DEFAULT_PAGES 128
/*
 * A DWARF-mode sample carries its stack copy (32 KiB by default), so 128
 * pages would hold 16 of them: 4 MiB per CPU holds about 120, a quarter of
 * a second at 999 Hz between wakeups at a quarter full.
 */
#define DEFAULT_PAGES_DWARF 1024
#define MIN_PAGES 8
/* The user registers the unwinder needs: the GPRs, IP, SP and FLAGS; no segment registers. */
#define REGS_USER_MASK                              \
	(((1ull << (PERF_REG_X86_FLAGS + 1)) - 1) | \
	 (((1ull << (PERF_REG_X86_R15 + 1)) - 1) & ~((1ull << PERF_REG_X86_R8) - 1)))
/* fds attach leaves for the rest of dlflame (module files, perf maps, the output). */
#define FD_RESERVE 64
/* Rescans of /proc/PID/task that still find new threads before attach gives up on more. */
#define MAX_SCANS 100
/* header.size is a u16, so no record is larger than this. */
#define SCRATCH_SIZE 65536
/*
 * poll() holds back records younger than this, so that a record another
 * CPU was still writing while we read the heads can be sorted before them
 * in the next round. drain() delivers everything.
 */
#define HOLDBACK_NS 50000000ull
/* While records are being handed out, the rings are emptied this often. */
#define REINGEST_NS 2000000ull

#define SAMPLE_TYPE                                                                               \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_CPU | \
	 PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN)

struct ring {
	int fd;
	void *map;
	size_t map_size;
	const uint8_t *data;
	size_t data_size;
	uint64_t last_time; /* time given to records that carry none */
	/*
	 * Records up to here are framed: delivered, or waiting in the queue. They
	 * stay in the ring until delivered (data_tail is the oldest waiting
	 * one), so that a sample's 32 KiB stack copy is read where the kernel
	 * wrote it instead of being copied out first.
	 */
	uint64_t read_pos;
	uint64_t release; /* scratch of release() */
	bool hup;
};

/*
 * An event that writes into a ring it does not own (PERF_EVENT_IOC_SET_OUTPUT):
 * the context-switch events, and in attach mode every per-thread event.
 */
struct event {
	int fd;
	uint32_t tid; /* attach mode: the thread it was opened on; 0 in launch mode */
	bool hup; /* attach mode: its thread and every thread it begat have exited */
};

/* What a sample id stands for: enum rec_event | tid << 8 (the tid an attach event was opened on). */
#define ID_EVENT(v) ((enum rec_event)((v)&0xff))
#define ID_TID(v) ((uint32_t)((v) >> 8))

struct sampler {
	struct sampler_opts opts;
	struct sampler_stats stats;
	struct rec_layout layout;
	bool mono_clock;

	struct ring *rings;
	size_t nr_rings;
	struct pollfd *pfds;
	size_t ring_bytes;
	int *cpus; /* rings[i] is the ring of cpus[i] */

	struct event *events;
	size_t nr_events, events_cap;
	struct pollfd *epfds; /* attach mode: for sampler__targets_gone */
	struct u64map ids; /* sample id -> ID_EVENT | ID_TID */

	bool attached, threads_only;
	struct u64map tids; /* attach mode: tids we opened events on (or gave up on) */
	struct u64map inherited; /* attach mode: tids followed through inherit (a FORK was seen) */
	bool woken; /* targets_gone may have taken a ring's wakeup */
	size_t fd_budget; /* attach mode: fds the rings and events may use */

	pid_t child;
	int go_fd, err_fd;
	bool launched, started;

	uint8_t *scratch;
	/*
	 * Records waiting to be delivered: in their ring (src the ring, pos
	 * their ring position), or copied when they straddle the ring's end.
	 */
	struct order q;
};

struct sampler *sampler__new(const struct sampler_opts *opts)
{
	struct sampler *s;

	if (opts && opts->mmap_pages & (opts->mmap_pages - 1)) {
		errno = EINVAL;
		return NULL;
	}
	if (opts && (opts->callgraph > CALLGRAPH_DWARF || opts->stack_size % 8 ||
		     opts->stack_size > SAMPLER_MAX_STACK_SIZE)) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (opts)
		s->opts = *opts;
	if (!s->opts.freq)
		s->opts.freq = DEFAULT_FREQ;
	if (s->opts.offcpu_only)
		s->opts.offcpu = true;
	s->layout.sample_type = SAMPLE_TYPE;
	s->layout.sample_id_all = true;
	if (s->opts.callgraph == CALLGRAPH_DWARF) {
		if (!s->opts.stack_size)
			s->opts.stack_size = SAMPLER_DEFAULT_STACK_SIZE;
		s->layout.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		s->layout.sample_regs_user = REGS_USER_MASK;
	}
	if (!s->opts.mmap_pages)
		s->opts.mmap_pages =
			s->opts.callgraph == CALLGRAPH_DWARF ? DEFAULT_PAGES_DWARF : DEFAULT_PAGES;
	u64map_init(&s->ids);
	u64map_init(&s->tids);
	u64map_init(&s->inherited);
	s->go_fd = -1;
	s->err_fd = -1;
	s->scratch = malloc(SCRATCH_SIZE);
	if (!s->scratch) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	return s;
}

static void close_rings(struct sampler *s)
{
	/* the events writing into the rings first, then the rings */
	for (size_t i = 0; i < s->nr_events; i++)
		close(s->events[i].fd);
	free(s->events);
	free(s->epfds);
	s->events = NULL;
	s->epfds = NULL;
	s->nr_events = s->events_cap = 0;
	for (size_t i = 0; i < s->nr_rings; i++) {
		if (s->rings[i].map)
			munmap(s->rings[i].map, s->rings[i].map_size);
		if (s->rings[i].fd >= 0)
			close(s->rings[i].fd);
	}
	free(s->rings);
	free(s->pfds);
	free(s->cpus);
	s->rings = NULL;
	s->pfds = NULL;
	s->cpus = NULL;
	s->nr_rings = 0;
	s->ring_bytes = 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The child never ran the user's command: make sure it never will. */
static void kill_child(struct sampler *s)
{
	close_fd(&s->go_fd);
	close_fd(&s->err_fd);
	if (s->child > 0) {
		kill(s->child, SIGKILL);
		while (waitpid(s->child, NULL, 0) < 0 && errno == EINTR)
			;
	}
	s->child = 0;
	s->launched = false;
}

void sampler__free(struct sampler *s)
{
	if (!s)
		return;
	if (s->launched && !s->started)
		kill_child(s);
	close_fd(&s->go_fd);
	close_fd(&s->err_fd);
	close_rings(s);
	u64map_free(&s->ids);
	u64map_free(&s->tids);
	u64map_free(&s->inherited);
	free(s->scratch);
	order_free(&s->q);
	free(s);
}

const struct sampler_stats *sampler__stats(const struct sampler *s)
{
	return s ? &s->stats : NULL;
}

/* ---- launching ---------------------------------------------------------- */

/* Would execve() run this file? Mirrors its checks without running it. */
static int check_exec(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return errno == ENOTDIR ? -ENOENT : -errno;
	if (!S_ISREG(st.st_mode))
		return -EACCES;
	if (faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) < 0)
		return -errno;
	return 0;
}

/*
 * The PATH search of execvp(): the caller's PATH (not the child's envp),
 * an empty entry meaning the current directory; EACCES wins over ENOENT
 * when some candidate exists but cannot be run.
 */
static int find_exec(const char *file)
{
	const char *path, *p, *end;
	char full[PATH_MAX];
	bool eacces = false;
	int err, n;

	if (!*file)
		return -ENOENT;
	if (strchr(file, '/'))
		return check_exec(file);
	path = getenv("PATH");
	if (!path)
		path = "/bin:/usr/bin";
	for (p = path;; p = end + 1) {
		end = strchrnul(p, ':');
		if (end == p)
			n = snprintf(full, sizeof(full), "%s", file);
		else
			n = snprintf(full, sizeof(full), "%.*s/%s", (int)(end - p), p, file);
		if (n > 0 && (size_t)n < sizeof(full)) {
			err = check_exec(full);
			if (!err)
				return 0;
			if (err == -EACCES)
				eacces = true;
		}
		if (!*end)
			break;
	}
	return eacces ? -EACCES : -ENOENT;
}

/* In the forked child: wait for sampler__start, then exec. Async-signal-safe calls only. */
static void __attribute__((noreturn))
child_run(int go_fd, int err_fd, char *const argv[], char *const envp[])
{
	sigset_t none;
	ssize_t n;
	char c;
	int e;

	do
		n = read(go_fd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		_exit(127); /* the parent went away or gave up */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	execvpe(argv[0], argv, envp);
	e = errno;
	if (write(err_fd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/* The online CPUs, from the kernel's list ("0-3,6"), else 0..n-1. */
static int online_cpus(int **cpus, size_t *nr)
{
	char line[4096], *p, *end;
	size_t cap = 0, n = 0;
	int *v = NULL;
	FILE *f;

	f = fopen("/sys/devices/system/cpu/online", "re");
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
		for (p = line; *p >= '0' && *p <= '9';) {
			unsigned long a, b;

			a = strtoul(p, &end, 10);
			b = a;
			if (*end == '-')
				b = strtoul(end + 1, &end, 10);
			if (b < a || b > 65535)
				break;
			for (unsigned long c = a; c <= b; c++) {
				if (grow_array((void **)&v, &cap, n + 1, sizeof(*v))) {
					free(v);
					return -ENOMEM;
				}
				v[n++] = (int)c;
			}
			p = *end == ',' ? end + 1 : end;
		}
	}
	if (!n) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		if (ncpu < 1)
			ncpu = 1;
		free(v);
		v = calloc(ncpu, sizeof(*v));
		if (!v)
			return -ENOMEM;
		for (long c = 0; c < ncpu; c++)
			v[n++] = (int)c;
	}
	*cpus = v;
	*nr = n;
	return 0;
}

static int perf_open(struct perf_event_attr *attr, pid_t pid, int cpu)
{
	long fd = syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : (int)fd;
}

/*
 * perf_event_open's errors, reworded so that each errno from
 * sampler__launch has one meaning: EACCES and ENOENT are kept for the
 * command itself.
 */
static int open_errno(int err)
{
	switch (err) {
	case -EACCES:
		return -EPERM;
	case -ENOENT:
	case -ENODEV:
		return -EOPNOTSUPP;
	default:
		return err;
	}
}

/* Open; if kernel sampling is not allowed, retry user space only, once, and remember that. */
static int open_or_user_only(struct sampler *s, struct perf_event_attr *attr, pid_t pid, int cpu)
{
	int fd;

	attr->exclude_kernel = s->opts.exclude_kernel;
	fd = perf_open(attr, pid, cpu);
	if ((fd == -EACCES || fd == -EPERM) && !attr->exclude_kernel) {
		attr->exclude_kernel = 1;
		fd = perf_open(attr, pid, cpu);
		if (fd >= 0) {
			s->opts.exclude_kernel = true;
			s->stats.kernel_excluded = true;
		}
	}
	return fd;
}

/* Pick the event on the first CPU: cycles if there is a PMU, else cpu-clock; kernel if allowed. */
static int probe_event(struct sampler *s, struct perf_event_attr *attr, pid_t pid, int cpu)
{
	static const struct {
		uint32_t type;
		uint64_t config;
		const char *name;
	} events[] = {
		{ PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "cycles" },
		{ PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, "cpu-clock" },
	};
	int fd = -EOPNOTSUPP;

	for (size_t i = 0; i < ARRAY_SIZE(events); i++) {
		attr->type = events[i].type;
		attr->config = events[i].config;
		fd = open_or_user_only(s, attr, pid, cpu);
		if (fd >= 0) {
			s->stats.event = events[i].name;
			return fd;
		}
		if (fd != -ENOENT && fd != -EOPNOTSUPP && fd != -ENODEV)
			break;
	}
	return open_errno(fd);
}

/* What every event shares: the record layout, the clock, the stack-copy settings. */
static void base_attr(const struct sampler *s, struct perf_event_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->sample_type = s->layout.sample_type;
	attr->sample_id_all = 1;
	attr->exclude_hv = 1;
	attr->use_clockid = 1;
	attr->clockid = CLOCK_MONOTONIC;
	if (s->opts.callgraph == CALLGRAPH_DWARF) {
		attr->sample_regs_user = s->layout.sample_regs_user;
		attr->sample_stack_user = s->opts.stack_size;
		/* user frames come from the stack copy: the kernel need not walk them */
		attr->exclude_callchain_user = 1;
	}
}

/* On-CPU sampling; type and config are chosen by probe_event. */
static void oncpu_attr(const struct sampler *s, struct perf_event_attr *attr)
{
	base_attr(s, attr);
	attr->freq = 1;
	attr->sample_freq = s->opts.freq;
}

/*
 * Every context switch: the sample, taken as the thread leaves the CPU,
 * holds the stack where it blocks; PERF_RECORD_SWITCH (context_switch) says
 * when it leaves, whether it was preempted, and when it comes back.
 */
static void switch_attr(const struct sampler *s, struct perf_event_attr *attr)
{
	base_attr(s, attr);
	attr->type = PERF_TYPE_SOFTWARE;
	attr->config = PERF_COUNT_SW_CONTEXT_SWITCHES;
	attr->sample_period = 1;
	attr->context_switch = 1;
}

/* The side-band records (maps, names, threads): one event per ring asks for them. */
static void sideband_attr(struct perf_event_attr *attr)
{
	attr->mmap = 1;
	attr->mmap2 = 1;
	attr->comm = 1;
	attr->comm_exec = 1;
	attr->task = 1;
}

static int map_rings(struct sampler *s, uint32_t pages)
{
	size_t pgsz = (size_t)sysconf(_SC_PAGESIZE);

	s->ring_bytes = 0;
	for (size_t i = 0; i < s->nr_rings; i++) {
		struct ring *r = &s->rings[i];
		struct perf_event_mmap_page *pg;
		size_t off, size;

		r->map_size = (1 + (size_t)pages) * pgsz;
		r->map = mmap(NULL, r->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
		if (r->map == MAP_FAILED) {
			r->map = NULL;
			return -errno;
		}
		pg = r->map;
		off = pg->data_offset ? pg->data_offset : pgsz;
		size = pg->data_size ? pg->data_size : (size_t)pages * pgsz;
		if (off > r->map_size || size > r->map_size - off || (size & (size - 1)))
			return -EINVAL;
		r->data = (const uint8_t *)r->map + off;
		r->data_size = size;
		s->ring_bytes += size;
	}
	return 0;
}

static void unmap_rings(struct sampler *s)
{
	for (size_t i = 0; i < s->nr_rings; i++) {
		if (s->rings[i].map)
			munmap(s->rings[i].map, s->rings[i].map_size);
		s->rings[i].map = NULL;
	}
}

/* The smallest ring that still holds a few of the largest records. */
static uint32_t min_pages(const struct sampler *s)
{
	size_t pgsz = (size_t)sysconf(_SC_PAGESIZE), want = 4 * ((size_t)s->opts.stack_size + 4096);
	uint32_t pages = MIN_PAGES;

	while ((size_t)pages * pgsz < want)
		pages *= 2;
	return pages;
}

static int note_id(struct sampler *s, int fd, enum rec_event ev, uint32_t tid)
{
	uint64_t id;

	if (ioctl(fd, PERF_EVENT_IOC_ID, &id) < 0)
		return -errno;
	return u64map_put(&s->ids, id, (uint64_t)ev | (uint64_t)tid << 8);
}

typedef int (*open_owner_fn)(struct sampler *s, struct perf_event_attr *attr, pid_t pid, int cpu);

/*
 * Open the event that owns the ring of each CPU and map the rings.
 * Locked memory is limited per user for the unprivileged: on EPERM or
 * ENOMEM from mmap, try smaller rings. The events are reopened each time,
 * because the wakeup watermark is fixed at open and must stay below the
 * ring size or poll would only wake when the ring is full.
 */
static int open_rings(struct sampler *s, struct perf_event_attr *attr, pid_t pid,
		      open_owner_fn open_owner, int ev)
{
	size_t pgsz = (size_t)sysconf(_SC_PAGESIZE), nr;
	uint32_t pages = s->opts.mmap_pages, least = min_pages(s);
	int err, fd;

	err = online_cpus(&s->cpus, &nr);
	if (err)
		return err;
	s->rings = calloc(nr, sizeof(*s->rings));
	s->pfds = calloc(nr, sizeof(*s->pfds));
	if (!s->rings || !s->pfds)
		return -ENOMEM;
	for (size_t i = 0; i < nr; i++)
		s->rings[i].fd = -1;
	s->nr_rings = nr;
	if (pages < least)
		pages = least;

	attr->watermark = 1;
	for (;;) {
		attr->wakeup_watermark = (uint32_t)((size_t)pages * pgsz / 4);
		for (size_t i = 0; i < s->nr_rings; i++) {
			fd = open_owner(s, attr, pid, s->cpus[i]);
			if (fd < 0)
				return open_errno(fd);
			s->rings[i].fd = fd;
		}
		err = map_rings(s, pages);
		if (!err)
			break;
		unmap_rings(s);
		for (size_t i = 0; i < s->nr_rings; i++)
			close_fd(&s->rings[i].fd);
		if ((err != -EPERM && err != -ENOMEM) || pages <= least)
			break;
		pages /= 2;
	}
	if (err == -EPERM)
		err = -ENOMEM; /* EPERM means perf_event_paranoid to the caller */
	if (err)
		return err;
	s->opts.mmap_pages = pages;
	s->mono_clock = true;
	for (size_t i = 0; i < s->nr_rings && !err && ev >= 0; i++)
		err = note_id(s, s->rings[i].fd, (enum rec_event)ev, 0);
	return err;
}

/* fd writes into ring_fd's ring from now on; it is closed with the sampler, also on failure. */
static int add_event(struct sampler *s, int fd, int ring_fd, enum rec_event ev, uint32_t tid)
{
	if (grow_array((void **)&s->events, &s->events_cap, s->nr_events + 1, sizeof(*s->events))) {
		close(fd);
		return -ENOMEM;
	}
	s->events[s->nr_events++] = (struct event){ .fd = fd, .tid = tid };
	if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring_fd) < 0)
		return -errno;
	return note_id(s, fd, ev, tid);
}

static int launch_owner(struct sampler *s, struct perf_event_attr *attr, pid_t pid, int cpu)
{
	if (s->opts.offcpu_only) {
		s->stats.event = "context-switches";
		return open_or_user_only(s, attr, pid, cpu);
	}
	if (s->stats.event)
		return perf_open(attr, pid, cpu);
	return probe_event(s, attr, pid, cpu);
}

/*
 * Launch mode: per CPU, one inherited event on the child owns the ring (the
 * on-CPU sampler, or the context-switch event with offcpu_only) and the
 * context-switch event writes into it. All start at exec.
 */
static int open_events(struct sampler *s, pid_t pid)
{
	struct perf_event_attr attr;
	int err, fd;

	s->stats.event = NULL; /* set once probe_event has chosen the event */
	if (s->opts.offcpu_only)
		switch_attr(s, &attr);
	else
		oncpu_attr(s, &attr);
	sideband_attr(&attr);
	attr.inherit = 1;
	attr.disabled = 1;
	attr.enable_on_exec = 1;
	err = open_rings(s, &attr, pid, launch_owner, s->opts.offcpu_only ? EV_SWITCH : EV_ONCPU);
	if (!err && s->opts.offcpu && !s->opts.offcpu_only) {
		switch_attr(s, &attr);
		attr.inherit = 1;
		attr.disabled = 1;
		attr.enable_on_exec = 1;
		attr.exclude_kernel = s->opts.exclude_kernel;
		for (size_t i = 0; i < s->nr_rings && !err; i++) {
			fd = perf_open(&attr, pid, s->cpus[i]);
			err = fd < 0 ? open_errno(fd)
				     : add_event(s, fd, s->rings[i].fd, EV_SWITCH, 0);
		}
	}
	if (err)
		close_rings(s);
	return err;
}

int sampler__launch(struct sampler *s, char *const argv[], char *const envp[], pid_t *child)
{
	int go[2] = { -1, -1 }, ep[2] = { -1, -1 };
	pid_t pid;
	int err;

	if (!s || !argv || !argv[0] || !child)
		return -EINVAL;
	if (s->launched || s->started || s->attached)
		return -EBUSY;
	err = find_exec(argv[0]);
	if (err)
		return err;
	if (!envp)
		envp = environ;

	/* A socket, not a pipe: send(MSG_NOSIGNAL) cannot raise SIGPIPE if the child died. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) < 0 ||
	    pipe2(ep, O_CLOEXEC) < 0) {
		err = -errno;
		goto out_close;
	}
	pid = fork();
	if (pid < 0) {
		err = -errno;
		goto out_close;
	}
	if (pid == 0) {
		close(go[0]);
		close(ep[0]);
		child_run(go[1], ep[1], argv, envp);
	}
	close(go[1]);
	close(ep[1]);
	s->child = pid;
	s->go_fd = go[0];
	s->err_fd = ep[0];
	s->launched = true;

	err = open_events(s, pid);
	if (err) {
		kill_child(s);
		return err;
	}
	*child = pid;
	return 0;

out_close:
	for (int i = 0; i < 2; i++) {
		close_fd(&go[i]);
		close_fd(&ep[i]);
	}
	return err;
}

int sampler__start(struct sampler *s)
{
	ssize_t n;
	int e = 0;

	if (!s || !s->launched)
		return -EINVAL;
	if (s->started)
		return -EALREADY;
	do
		n = send(s->go_fd, "g", 1, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	e = n == 1 ? 0 : errno;
	close_fd(&s->go_fd);
	s->started = true;
	if (e) {
		/* The child is gone before exec: it never ran the command. */
		kill_child(s);
		return -(e == EPIPE ? ESRCH : e);
	}

	/* EOF: exec succeeded and closed the CLOEXEC pipe. An int: exec's errno. */
	do
		n = read(s->err_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close_fd(&s->err_fd);
	if (n == 0)
		return 0;
	if (n != sizeof(e) || e <= 0)
		e = n < 0 ? errno : EIO;
	while (waitpid(s->child, NULL, 0) < 0 && errno == EINTR)
		;
	s->child = 0;
	return -e;
}

/* ---- draining ----------------------------------------------------------- */

/* Frame every new complete record of ring ri into the queue; they stay in the ring. */
static int ingest(struct sampler *s, size_t ri)
{
	struct ring *r = &s->rings[ri];
	struct perf_event_mmap_page *pg = r->map;
	uint64_t head, pos = r->read_pos, next;
	const void *data;
	struct rec dec;
	size_t len;
	int err = 0, ret;

	head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	if (head - pg->data_tail > r->data_size || head - pos > head - pg->data_tail) {
		s->stats.bad_records++;
		pos = head;
		goto out;
	}
	for (;;) {
		next = pos;
		ret = ring_next(r->data, r->data_size, head, &next, s->scratch, SCRATCH_SIZE, &data,
				&len);
		if (ret == 0)
			break;
		if (ret < 0) {
			/* A broken header: the rest of this ring cannot be framed. */
			s->stats.bad_records++;
			pos = head;
			break;
		}
		if (rec_decode(&s->layout, data, len, &dec) < 0) {
			s->stats.bad_records++;
		} else {
			uint64_t time = dec.time ? dec.time : r->last_time;

			r->last_time = time;
			/* only a record that straddles the ring's end is copied */
			if (data == s->scratch)
				err = order_push_copy(&s->q, time, pos, data, (uint32_t)len,
						      (uint32_t)ri, 0);
			else
				err = order_push(&s->q, time, pos, (uint32_t)len, (uint32_t)ri, 0);
			if (err)
				break;
			s->stats.records++;
			if (dec.type == REC_SAMPLE)
				s->stats.samples++;
			else if (dec.type == REC_LOST)
				s->stats.lost += dec.lost.lost;
		}
		pos = next;
	}
out:
	r->read_pos = pos;
	return err;
}

/*
 * Give the rings back the space of every record before the oldest one of
 * the queue's recs[from..] still in them (records are framed in ring order,
 * so that is all of them but the waiting ones and what follows).
 */
static void release(struct sampler *s, size_t from)
{
	for (size_t i = 0; i < s->nr_rings; i++)
		s->rings[i].release = s->rings[i].read_pos;
	for (size_t k = from; s->q.in_place && k < s->q.nr; k++) {
		const struct order_rec *p = &s->q.recs[k];

		if (p->off == ORDER_IN_PLACE && p->pos < s->rings[p->src].release)
			s->rings[p->src].release = p->pos;
	}
	for (size_t i = 0; i < s->nr_rings; i++) {
		struct perf_event_mmap_page *pg = s->rings[i].map;

		if (pg->data_tail != s->rings[i].release)
			__atomic_store_n(&pg->data_tail, s->rings[i].release, __ATOMIC_RELEASE);
	}
}

/* Whether some ring is more than half full of framed records. */
static bool rings_filling(const struct sampler *s)
{
	for (size_t i = 0; i < s->nr_rings; i++) {
		const struct ring *r = &s->rings[i];
		const struct perf_event_mmap_page *pg = r->map;

		if (r->read_pos - pg->data_tail > r->data_size / 2)
			return true;
	}
	return false;
}

static const uint8_t *rec_data(const struct sampler *s, const struct order_rec *p)
{
	if (p->off != ORDER_IN_PLACE)
		return order_copied(&s->q, p);
	return s->rings[p->src].data + (p->pos & (s->rings[p->src].data_size - 1));
}

/*
 * Keep the queue's recs[from..] for the next round. Held-back records are
 * most of what a round buffers (each round ingests about HOLDBACK_NS / 2 of
 * records, all younger than the cut), and with 32 KiB stack copies moving
 * them every round cost more than copying them out of the rings: they stay
 * where they are, and the copies are packed only once the delivered
 * records' holes add up to a ring's worth and to what is kept.
 */
static void keep_pending(struct sampler *s, size_t from)
{
	release(s, from);
	order_keep(&s->q, from, s->ring_bytes);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Sets which event a sample came from, and in attach mode drops the second
 * copy of a record: a thread created while attaching may be followed twice,
 * by the events it inherited from its creator and by its own, opened when a
 * rescan found it. Its FORK record, written by its creator's events before
 * anything of its own, tells: from then on its own events' copies go.
 */
static bool deliverable(struct sampler *s, struct rec *r)
{
	uint64_t v = EV_ONCPU, dummy;

	if (r->id)
		u64map_get(&s->ids, r->id, &v);
	if (r->type == REC_SAMPLE)
		r->sample.event = ID_EVENT(v);
	if (!s->attached || s->threads_only)
		return true;
	if (r->type == REC_FORK)
		u64map_put(&s->inherited, r->fork.tid, 1);
	return !ID_TID(v) || !u64map_get(&s->inherited, ID_TID(v), &dummy);
}

static int round_run(struct sampler *s, bool holdback, rec_cb cb, void *ctx)
{
	uint64_t cut = UINT64_MAX, now, next_ingest;
	struct rec dec;
	size_t i, due;
	int err = 0;

	/* Taken before the heads are read: see HOLDBACK_NS. */
	if (holdback && s->mono_clock) {
		now = now_ns();
		cut = now > HOLDBACK_NS ? now - HOLDBACK_NS : 0;
	}
	for (i = 0; i < s->nr_rings && !err; i++)
		err = ingest(s, i);
	/* Held-back records must not fill a ring, nor the round buffer grow past the rings. */
	if (rings_filling(s) || order_held(&s->q) > s->ring_bytes)
		cut = UINT64_MAX;

	order_sort(&s->q);
	due = order_due(&s->q, cut);
	next_ingest = now_ns() + REINGEST_NS;
	for (i = 0; i < due && !err; i++) {
		struct order_rec p = s->q.recs[i];

		/* Already validated when it was queued; decoded again so pointers are current. */
		if (rec_decode(&s->layout, rec_data(s, &p), p.len, &dec) < 0)
			continue;
		if (deliverable(s, &dec))
			err = cb(ctx, &dec);
		/*
		 * The callback (symbolizing, unwinding) is slow next to the
		 * kernel filling the rings: empty them now and then meanwhile.
		 * What comes in now is younger than the cut (it was written after
		 * the heads were read), so it waits, unsorted at the end, for the
		 * next round. Not when everything is delivered (no cut), and not
		 * past three rings' worth of buffered records.
		 */
		if (cut != UINT64_MAX && i % 64 == 63 && order_held(&s->q) <= 2 * s->ring_bytes &&
		    now_ns() > next_ingest) {
			release(s, i + 1);
			for (size_t k = 0; k < s->nr_rings && !err; k++)
				err = ingest(s, k);
			next_ingest = now_ns() + REINGEST_NS;
		}
	}
	keep_pending(s, i);
	return err;
}

int sampler__poll(struct sampler *s, int timeout_ms, rec_cb cb, void *ctx)
{
	size_t live = 0;
	int n;

	if (!s || !cb || !s->nr_rings)
		return -EINVAL;
	for (size_t i = 0; i < s->nr_rings; i++) {
		s->pfds[i].fd = s->rings[i].hup ? -1 : s->rings[i].fd;
		s->pfds[i].events = POLLIN;
		s->pfds[i].revents = 0;
		live += !s->rings[i].hup;
	}
	/*
	 * Once the target is gone every fd reports POLLHUP at once; those are
	 * left out, so that poll sleeps until the caller notices the exit.
	 */
	if (s->woken) {
		timeout_ms = 0;
		s->woken = false;
	}
	if (live || timeout_ms >= 0) {
		n = poll(s->pfds, s->nr_rings, timeout_ms);
		if (n < 0)
			return errno == EINTR ? 0 : -errno;
	}
	for (size_t i = 0; i < s->nr_rings; i++)
		if (s->pfds[i].revents & (POLLHUP | POLLERR | POLLNVAL))
			s->rings[i].hup = true;
	return round_run(s, true, cb, ctx);
}

int sampler__drain(struct sampler *s, rec_cb cb, void *ctx)
{
	if (!s || !cb)
		return -EINVAL;
	return round_run(s, false, cb, ctx);
}

/* ---- attaching ---------------------------------------------------------- */

/*
 * Every target thread needs an fd per event per CPU: take all the soft
 * limit may give, and return how many of them the events may use. The
 * rest of dlflame still needs fds once attached (module files, the output):
 * FD_RESERVE of them stay free.
 */
static size_t raise_nofile(void)
{
	struct rlimit rl;
	size_t open_now = 0, limit;
	DIR *d;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return SIZE_MAX;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > SIZE_MAX / 2)
		return SIZE_MAX;
	limit = (size_t)rl.rlim_cur;
	d = opendir("/proc/self/fd");
	while (d && readdir(d))
		open_now++;
	if (d)
		closedir(d);
	open_now = open_now > 2 ? open_now - 2 : 0; /* "." and ".." */
	return limit > open_now + FD_RESERVE ? limit - open_now - FD_RESERVE : 0;
}

/*
 * In attach mode the ring of each CPU belongs to a dummy event on
 * dlflame's own thread: it never writes a record and never hangs up, while
 * the per-thread events writing into the ring come and go with their threads.
 */
static int attach_owner(struct sampler *s, struct perf_event_attr *attr, pid_t pid, int cpu)
{
	return perf_open(attr, 0, cpu);
}

static bool gone_or_full(int err)
{
	return err == -ESRCH || err == -EMFILE || err == -ENFILE;
}

/*
 * Open the events of one thread on every CPU, each writing into that
 * CPU's ring. On failure none of its events stay open: -ESRCH (it exited),
 * -EMFILE/-ENFILE (out of fds) or another negative errno.
 */
static int attach_thread(struct sampler *s, pid_t tid, struct perf_event_attr *on,
			 struct perf_event_attr *sw)
{
	size_t mark = s->nr_events;
	int err = 0, fd;

	for (size_t i = 0; i < s->nr_rings && !err; i++) {
		if (!s->opts.offcpu_only) {
			if (s->stats.event)
				fd = open_errno(perf_open(on, tid, s->cpus[i]));
			else
				fd = probe_event(s, on, tid, s->cpus[i]);
			err = fd < 0 ? fd
				     : add_event(s, fd, s->rings[i].fd, EV_ONCPU, (uint32_t)tid);
		}
		if (!err && s->opts.offcpu) {
			fd = open_errno(open_or_user_only(s, sw, tid, s->cpus[i]));
			err = fd < 0 ? fd
				     : add_event(s, fd, s->rings[i].fd, EV_SWITCH, (uint32_t)tid);
		}
	}
	if (err) {
		while (s->nr_events > mark)
			close(s->events[--s->nr_events].fd);
	}
	return err;
}

/* The value kept in s->tids for each thread seen in /proc. */
enum { TID_FOLLOWED = 1, TID_GONE, TID_MISSED };

static int attach_tid(struct sampler *s, pid_t tid, struct perf_event_attr *on,
		      struct perf_event_attr *sw, bool *found_new)
{
	size_t per_thread = 1 + (s->opts.offcpu && !s->opts.offcpu_only);
	uint64_t v;
	int err;

	if (u64map_get(&s->tids, (uint64_t)tid, &v))
		return 0;
	*found_new = true;
	if (s->nr_events + s->nr_rings * (per_thread + 1) > s->fd_budget)
		err = -EMFILE;
	else
		err = attach_thread(s, tid, on, sw);
	if (err && !gone_or_full(err))
		return err;
	if (!err)
		s->stats.threads_followed++;
	else if (err != -ESRCH)
		s->stats.threads_missed++;
	v = !err ? TID_FOLLOWED : err == -ESRCH ? TID_GONE : TID_MISSED;
	return u64map_put(&s->tids, (uint64_t)tid, v);
}

/* One pass over the threads of every target, opening events on those not seen yet. */
static int scan_threads(struct sampler *s, const pid_t *pids, size_t n, struct perf_event_attr *on,
			struct perf_event_attr *sw, bool *found_new)
{
	char path[64];
	struct dirent *de;
	uint64_t tid;
	DIR *d;
	int err = 0;

	*found_new = false;
	for (size_t i = 0; i < n && !err; i++) {
		if (s->threads_only) {
			err = attach_tid(s, pids[i], on, sw, found_new);
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pids[i]);
		d = opendir(path);
		if (!d)
			continue; /* the process is gone; if it never had a thread, attach says so */
		while (!err && (de = readdir(d))) {
			if (parse_u64(de->d_name, 10, 1, INT_MAX, &tid))
				continue;
			err = attach_tid(s, (pid_t)tid, on, sw, found_new);
		}
		closedir(d);
	}
	return err;
}

int sampler__attach(struct sampler *s, const pid_t *pids, size_t n, bool threads_only)
{
	struct perf_event_attr owner, on, sw;
	bool found_new = true;
	uint64_t v;
	int err;

	if (!s || !pids || !n)
		return -EINVAL;
	if (s->launched || s->attached)
		return -EBUSY;
	for (size_t i = 0; i < n; i++) {
		char path[64];

		if (pids[i] <= 0)
			return -EINVAL;
		/* every target must exist (a tid resolves here too) */
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pids[i]);
		if (access(path, F_OK))
			return -ESRCH;
	}
	s->fd_budget = raise_nofile();
	s->attached = true;
	s->threads_only = threads_only;
	s->stats.event = s->opts.offcpu_only ? "context-switches" : NULL;

	memset(&owner, 0, sizeof(owner));
	owner.size = sizeof(owner);
	owner.type = PERF_TYPE_SOFTWARE;
	owner.config = PERF_COUNT_SW_DUMMY;
	owner.exclude_kernel = 1;
	owner.exclude_hv = 1;
	owner.use_clockid = 1;
	owner.clockid = CLOCK_MONOTONIC;
	err = open_rings(s, &owner, 0, attach_owner, -1);
	if (err)
		goto fail;

	oncpu_attr(s, &on);
	switch_attr(s, &sw);
	sideband_attr(s->opts.offcpu_only ? &sw : &on);
	/* threads (and processes) the followed threads create are followed through inherit */
	on.inherit = sw.inherit = !threads_only;

	/*
	 * A thread that an unfollowed thread creates while we scan is found by
	 * the next scan; one that a followed thread creates inherits its events.
	 * So when a scan finds nothing new, nothing is left out.
	 */
	s->stats.start_time = now_ns();
	for (int scan = 0; found_new && scan < MAX_SCANS; scan++) {
		err = scan_threads(s, pids, n, &on, &sw, &found_new);
		if (err)
			goto fail;
	}
	if (!s->stats.threads_followed) {
		err = s->stats.threads_missed ? -EMFILE : -ESRCH;
		goto fail;
	}
	/* with -t, a tid that does not exist is an error, as a pid is */
	for (size_t i = 0; i < n && threads_only; i++) {
		if (u64map_get(&s->tids, (uint64_t)pids[i], &v) && v == TID_GONE) {
			err = -ESRCH;
			goto fail;
		}
	}
	return 0;

fail:
	close_rings(s);
	u64map_free(&s->tids);
	u64map_free(&s->ids);
	s->attached = false;
	s->stats.threads_followed = s->stats.threads_missed = s->stats.start_time = 0;
	return err;
}

bool sampler__follows(const struct sampler *s, pid_t tid)
{
	uint64_t v;

	return s && s->attached && u64map_get(&s->tids, (uint64_t)tid, &v) && v == TID_FOLLOWED;
}

bool sampler__targets_gone(struct sampler *s)
{
	size_t live = 0;

	if (!s || !s->attached)
		return false;
	if (!s->epfds) {
		s->epfds = calloc(s->nr_events ? s->nr_events : 1, sizeof(*s->epfds));
		if (!s->epfds)
			return false;
	}
	for (size_t i = 0; i < s->nr_events; i++) {
		s->epfds[i].fd = s->events[i].hup ? -1 : s->events[i].fd;
		s->epfds[i].events = 0; /* POLLHUP is reported whatever is asked */
		s->epfds[i].revents = 0;
	}
	if (poll(s->epfds, s->nr_events, 0) < 0)
		return false;
	/*
	 * Polling an event that writes into a ring consumes the ring's wakeup:
	 * the next sampler__poll must not sleep through data already there.
	 */
	s->woken = true;
	for (size_t i = 0; i < s->nr_events; i++) {
		if (s->epfds[i].revents & (POLLHUP | POLLERR | POLLNVAL))
			s->events[i].hup = true;
		live += !s->events[i].hup;
	}
	return live == 0;
}

/* ---- messages ----------------------------------------------------------- */

static const char *read_sysctl(const char *path, char *val, size_t size)
{
	FILE *f = fopen(path, "re");
	size_t n;

	snprintf(val, size, "unknown");
	if (!f)
		return val;
	if (fgets(val, (int)size, f)) {
		n = strcspn(val, "\n");
		val[n] = '\0';
	} else {
		snprintf(val, size, "unknown");
	}
	fclose(f);
	return val;
}

const char *sampler__open_strerror(int err, char *buf, size_t size)
{
	char val[32], val2[32], ebuf[128];
	struct rlimit rl;
	int e = err < 0 && err != INT_MIN ? -err : err;

	if (!buf || !size)
		return "sampler error";
	switch (e) {
	case EPERM:
		read_sysctl("/proc/sys/kernel/perf_event_paranoid", val, sizeof(val));
		snprintf(
			buf, size,
			"cannot open perf events: permission denied (kernel.perf_event_paranoid = %s%s); "
			"run as root (or with CAP_PERFMON), or allow it with `sysctl kernel.perf_event_paranoid=1`; "
			"inside a container, a seccomp profile may also block perf_event_open",
			val, strcmp(val, "3") ? "" : ", which forbids all unprivileged profiling");
		break;
	case EACCES:
		snprintf(
			buf, size,
			"cannot run the command: permission denied (it is not an executable file, or a directory on its path is not searchable); "
			"check it with `ls -l` and make it executable with `chmod +x`");
		break;
	case ENOENT:
		snprintf(
			buf, size,
			"command not found: no such file, and no executable of that name in any directory of PATH; "
			"check the spelling or give the full path");
		break;
	case ENODEV:
	case EOPNOTSUPP:
		snprintf(
			buf, size,
			"cannot open perf events: the sampling events (cycles, cpu-clock) are not supported by this kernel or machine; "
			"check that the kernel has CONFIG_PERF_EVENTS and that `perf stat -e cpu-clock true` works");
		break;
	case EMFILE:
	case ENFILE:
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
			snprintf(val, sizeof(val), "%llu", (unsigned long long)rl.rlim_cur);
		else
			snprintf(val, sizeof(val), "unknown");
		snprintf(
			buf, size,
			"cannot open perf events: too many open files (one event per CPU is needed; the limit is %s); "
			"raise it with `ulimit -n`",
			val);
		break;
	case ENOMEM:
		if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
			snprintf(val, sizeof(val), "%llu KiB",
				 (unsigned long long)rl.rlim_cur / 1024);
		else
			snprintf(val, sizeof(val), "unlimited");
		read_sysctl("/proc/sys/kernel/perf_event_mlock_kb", val2, sizeof(val2));
		snprintf(
			buf, size,
			"cannot map the perf ring buffers: locked-memory limit too low (RLIMIT_MEMLOCK %s, kernel.perf_event_mlock_kb = %s) or out of memory; "
			"raise `ulimit -l` or `sysctl kernel.perf_event_mlock_kb`, use fewer mmap pages, or run as root",
			val, val2);
		break;
	case ENOSYS:
		snprintf(
			buf, size,
			"perf_event_open is not available: the kernel lacks CONFIG_PERF_EVENTS or a seccomp policy (container) blocks it; "
			"run on the host, or allow perf_event_open in the container's seccomp profile");
		break;
	case EINVAL:
		read_sysctl("/proc/sys/kernel/perf_event_max_sample_rate", val, sizeof(val));
		snprintf(
			buf, size,
			"cannot open perf events: invalid settings (the sampling frequency may exceed kernel.perf_event_max_sample_rate = %s); "
			"lower the frequency or raise that sysctl",
			val);
		break;
	case ESRCH:
		snprintf(
			buf, size,
			"cannot open perf events: the target process exited before it could be profiled");
		break;
	default:
		snprintf(buf, size, "cannot profile the target: %s",
			 strerror_r(e, ebuf, sizeof(ebuf)));
		break;
	}
	return buf;
}

const char *sampler__attach_strerror(int err, char *buf, size_t size)
{
	char val[32], val2[32];
	struct rlimit rl;
	int e = err < 0 && err != INT_MIN ? -err : err;

	if (!buf || !size)
		return "sampler error";
	switch (e) {
	case ESRCH:
		snprintf(
			buf, size,
			"no such process or thread (it may have exited); check the ID with `ps -eLf`");
		break;
	case EPERM:
	case EACCES:
		read_sysctl("/proc/sys/kernel/perf_event_paranoid", val, sizeof(val));
		read_sysctl("/proc/sys/kernel/yama/ptrace_scope", val2, sizeof(val2));
		snprintf(
			buf, size,
			"permission denied (kernel.perf_event_paranoid = %s, kernel.yama.ptrace_scope = %s; "
			"only processes you may ptrace can be profiled); run as the target's user with "
			"`sysctl kernel.perf_event_paranoid=1`, or as root (or with CAP_PERFMON and CAP_SYS_PTRACE)",
			val, val2);
		break;
	case EMFILE:
	case ENFILE:
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY)
			snprintf(val, sizeof(val), "%llu", (unsigned long long)rl.rlim_max);
		else
			snprintf(val, sizeof(val), "unknown");
		snprintf(
			buf, size,
			"too many open files: not one thread could be followed (each needs one fd per event per CPU; the hard limit is %s); "
			"raise it (`ulimit -Hn`, LimitNOFILE=) or close other programs' files",
			val);
		break;
	default:
		return sampler__open_strerror(err, buf, size);
	}
	return buf;
}
