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

#include <linux/perf_event.h>

#include "sampler/sampler.h"
#include "util/util.h"

#define DEFAULT_FREQ 999
#define DEFAULT_PAGES 128
#define MIN_PAGES 8
/* header.size is a u16, so no record is larger than this. */
#define SCRATCH_SIZE 65536
/*
 * poll() holds back records younger than this, so that a record another
 * CPU was still writing while we read the heads can be sorted before them
 * in the next round. drain() delivers everything.
 */
#define HOLDBACK_NS 50000000ull

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
	bool hup;
};

/* A record copied out of a ring, waiting in the round buffer. */
struct pending {
	uint64_t time, seq;
	size_t off, len;
};

struct sampler {
	struct sampler_opts opts;
	struct sampler_stats stats;
	struct rec_layout layout;
	bool mono_clock;

	struct ring *rings;
	size_t nr_rings;
	struct pollfd *pfds;
	size_t ring_bytes;

	pid_t child;
	int go_fd, err_fd;
	bool launched, started;

	uint8_t *scratch;
	uint8_t *buf;
	size_t buf_len, buf_cap;
	struct pending *pend;
	size_t nr_pend, pend_cap;
	uint64_t seq;
};

struct sampler *sampler__new(const struct sampler_opts *opts)
{
	struct sampler *s;

	if (opts && opts->mmap_pages & (opts->mmap_pages - 1)) {
		errno = EINVAL;
		return NULL;
	}
	if (opts && opts->callgraph != CALLGRAPH_FP) {
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
	if (!s->opts.mmap_pages)
		s->opts.mmap_pages = DEFAULT_PAGES;
	s->layout.sample_type = SAMPLE_TYPE;
	s->layout.sample_id_all = true;
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
	for (size_t i = 0; i < s->nr_rings; i++) {
		if (s->rings[i].map)
			munmap(s->rings[i].map, s->rings[i].map_size);
		if (s->rings[i].fd >= 0)
			close(s->rings[i].fd);
	}
	free(s->rings);
	free(s->pfds);
	s->rings = NULL;
	s->pfds = NULL;
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
	free(s->scratch);
	free(s->buf);
	free(s->pend);
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
		if (fd >= 0) {
			s->stats.event = events[i].name;
			return fd;
		}
		if (fd != -ENOENT && fd != -EOPNOTSUPP && fd != -ENODEV)
			break;
	}
	return open_errno(fd);
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

static int open_events(struct sampler *s, pid_t pid)
{
	struct perf_event_attr attr;
	size_t pgsz = (size_t)sysconf(_SC_PAGESIZE);
	uint32_t pages = s->opts.mmap_pages;
	int *cpus = NULL;
	size_t nr = 0;
	int err, fd;

	s->stats.event = NULL; /* set once probe_event has chosen the event */
	err = online_cpus(&cpus, &nr);
	if (err)
		return err;
	err = -ENOMEM;
	s->rings = calloc(nr, sizeof(*s->rings));
	s->pfds = calloc(nr, sizeof(*s->pfds));
	if (!s->rings || !s->pfds)
		goto out;
	for (size_t i = 0; i < nr; i++)
		s->rings[i].fd = -1;
	s->nr_rings = nr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.freq = 1;
	attr.sample_freq = s->opts.freq;
	attr.sample_type = s->layout.sample_type;
	attr.sample_id_all = 1;
	attr.mmap = 1;
	attr.mmap2 = 1;
	attr.comm = 1;
	attr.comm_exec = 1;
	attr.task = 1;
	attr.inherit = 1;
	attr.disabled = 1;
	attr.enable_on_exec = 1;
	attr.exclude_hv = 1;
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	attr.watermark = 1;

	/*
	 * Locked memory is limited per user for the unprivileged: on EPERM or
	 * ENOMEM from mmap, try smaller rings. The events are reopened each
	 * time, because the wakeup watermark is fixed at open and must stay
	 * below the ring size or poll would only wake when the ring is full.
	 */
	for (;;) {
		attr.wakeup_watermark = (uint32_t)((size_t)pages * pgsz / 4);
		for (size_t i = 0; i < nr; i++) {
			if (s->stats.event)
				fd = perf_open(&attr, pid, cpus[i]);
			else
				fd = probe_event(s, &attr, pid, cpus[i]);
			if (fd < 0) {
				err = open_errno(fd);
				goto out;
			}
			s->rings[i].fd = fd;
		}
		err = map_rings(s, pages);
		if (!err)
			break;
		unmap_rings(s);
		for (size_t i = 0; i < nr; i++)
			close_fd(&s->rings[i].fd);
		if ((err != -EPERM && err != -ENOMEM) || pages <= MIN_PAGES)
			break;
		pages /= 2;
	}
	s->mono_clock = true;
	if (err == -EPERM)
		err = -ENOMEM; /* EPERM means perf_event_paranoid to the caller */
	if (!err)
		s->opts.mmap_pages = pages;
out:
	if (err)
		close_rings(s);
	free(cpus);
	return err;
}

int sampler__launch(struct sampler *s, char *const argv[], char *const envp[], pid_t *child)
{
	int go[2] = { -1, -1 }, ep[2] = { -1, -1 };
	pid_t pid;
	int err;

	if (!s || !argv || !argv[0] || !child)
		return -EINVAL;
	if (s->launched || s->started)
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

static int stash(struct sampler *s, struct ring *r, const void *data, size_t len,
		 const struct rec *dec)
{
	struct pending *p;

	if (grow_array((void **)&s->pend, &s->pend_cap, s->nr_pend + 1, sizeof(*s->pend)))
		return -ENOMEM;
	p = &s->pend[s->nr_pend++];
	p->time = dec->time ? dec->time : r->last_time;
	r->last_time = p->time;
	p->seq = s->seq++;
	p->off = s->buf_len;
	p->len = len;
	memcpy(s->buf + s->buf_len, data, len);
	s->buf_len += len;

	s->stats.records++;
	if (dec->type == REC_SAMPLE)
		s->stats.samples++;
	else if (dec->type == REC_LOST)
		s->stats.lost += dec->lost.lost;
	return 0;
}

/* Copy every complete record of one ring into the round buffer and release the space. */
static int ingest(struct sampler *s, struct ring *r)
{
	struct perf_event_mmap_page *pg = r->map;
	uint64_t head, tail, next;
	const void *data;
	struct rec dec;
	size_t len;
	int err = 0, ret;

	head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	tail = pg->data_tail;
	if (head - tail > r->data_size) {
		s->stats.bad_records++;
		tail = head;
		goto out;
	}
	/* Records are 8-byte multiples, so this keeps every copy aligned. */
	if (grow_array((void **)&s->buf, &s->buf_cap, s->buf_len + (head - tail), 1)) {
		err = -ENOMEM;
		goto out;
	}
	for (;;) {
		next = tail;
		ret = ring_next(r->data, r->data_size, head, &next, s->scratch, SCRATCH_SIZE, &data,
				&len);
		if (ret == 0)
			break;
		if (ret < 0) {
			/* A broken header: the rest of this ring cannot be framed. */
			s->stats.bad_records++;
			tail = head;
			break;
		}
		if (rec_decode(&s->layout, data, len, &dec) < 0) {
			s->stats.bad_records++;
		} else {
			err = stash(s, r, data, len, &dec);
			if (err)
				break;
		}
		tail = next;
	}
out:
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
	return err;
}

static int cmp_time(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_off(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Keep pend[from..] for the next round, packed at the front of the buffer. */
static void keep_pending(struct sampler *s, size_t from)
{
	size_t n = s->nr_pend - from, at = 0;

	memmove(s->pend, s->pend + from, n * sizeof(*s->pend));
	/* In offset order every record moves down or stays, so memmove in place is safe. */
	qsort(s->pend, n, sizeof(*s->pend), cmp_off);
	for (size_t i = 0; i < n; i++) {
		memmove(s->buf + at, s->buf + s->pend[i].off, s->pend[i].len);
		s->pend[i].off = at;
		at += s->pend[i].len;
	}
	s->nr_pend = n;
	s->buf_len = at;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int round_run(struct sampler *s, bool holdback, rec_cb cb, void *ctx)
{
	uint64_t cut = UINT64_MAX, now;
	struct rec dec;
	size_t i;
	int err = 0;

	/* Taken before the heads are read: see HOLDBACK_NS. */
	if (holdback && s->mono_clock) {
		now = now_ns();
		cut = now > HOLDBACK_NS ? now - HOLDBACK_NS : 0;
	}
	for (i = 0; i < s->nr_rings && !err; i++)
		err = ingest(s, &s->rings[i]);
	/* Held-back records plus one round never exceed twice the rings. */
	if (s->buf_len > s->ring_bytes)
		cut = UINT64_MAX;

	qsort(s->pend, s->nr_pend, sizeof(*s->pend), cmp_time);
	for (i = 0; i < s->nr_pend && !err; i++) {
		const struct pending *p = &s->pend[i];

		if (p->time > cut)
			break;
		/* Already validated when it was copied; decoded again so pointers are current. */
		if (rec_decode(&s->layout, s->buf + p->off, p->len, &dec) < 0)
			continue;
		err = cb(ctx, &dec);
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
