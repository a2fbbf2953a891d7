/* SPDX-License-Identifier: MIT */
/*
 * Attach mode: following every thread of running processes (or the
 * threads given), with no race window, and noticing when they are gone.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sampler/internal.h"

/* fds attach leaves for the rest of dlflame (module files, perf maps, the output). */
#define FD_RESERVE 64
/* Rescans of /proc/PID/task that still find new threads before attach gives up on more. */
#define MAX_SCANS 100

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
	return event_open(attr, 0, cpu);
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
				fd = event_errno(event_open(on, tid, s->cpus[i]));
			else
				fd = event_probe(s, on, tid, s->cpus[i]);
			err = fd < 0 ? fd
				     : event_add(s, fd, s->rings[i].fd, EV_ONCPU, (uint32_t)tid);
		}
		if (!err && s->opts.offcpu) {
			fd = event_errno(event_open_or_user_only(s, sw, tid, s->cpus[i]));
			err = fd < 0 ? fd
				     : event_add(s, fd, s->rings[i].fd, EV_SWITCH, (uint32_t)tid);
		}
	}
	if (err) {
		while (s->nr_events > mark)
			event_close(&s->events[--s->nr_events]);
	}
	return err;
}

/* The value kept in s->tids for each thread seen in /proc. */
enum { TID_FOLLOWED = 1, TID_GONE, TID_MISSED };

/* Remember a thread found (pid 0: not known yet, with threads_only). */
static int add_thread(struct sampler *s, pid_t pid, pid_t tid, bool followed)
{
	if (grow_array((void **)&s->threads, &s->threads_cap, s->nr_threads + 1,
		       sizeof(*s->threads)))
		return -ENOMEM;
	s->threads[s->nr_threads++] =
		(struct sampler_thread){ .pid = pid, .tid = tid, .followed = followed };
	return 0;
}

static int attach_tid(struct sampler *s, pid_t pid, pid_t tid, struct perf_event_attr *on,
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
	if (v != TID_GONE) {
		err = add_thread(s, pid, tid, v == TID_FOLLOWED);
		if (err)
			return err;
	}
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
			err = attach_tid(s, 0, pids[i], on, sw, found_new);
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pids[i]);
		d = opendir(path);
		if (!d)
			continue; /* the process is gone; if it never had a thread, attach says so */
		while (!err && (de = readdir(d))) {
			if (parse_u64(de->d_name, 10, 1, INT_MAX, &tid))
				continue;
			err = attach_tid(s, pids[i], (pid_t)tid, on, sw, found_new);
		}
		closedir(d);
	}
	return err;
}

/* The first line of a small /proc file, without its newline, into buf. */
static bool read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = size <= INT_MAX && fgets(buf, (int)size, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

/* The process a thread belongs to, from /proc/TID/status; 0 if it is gone. */
static pid_t tgid_of(pid_t tid)
{
	char path[64], line[256];
	uint64_t v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Tgid:", 5)) {
			line[strcspn(line, "\n")] = '\0';
			if (parse_u64(line + 5 + strspn(line + 5, " \t"), 10, 1, INT_MAX, &v))
				v = 0;
			break;
		}
	}
	fclose(f);
	return (pid_t)v;
}

/*
 * Fill in what /proc says of a thread: its name; whether it is asleep and
 * where: its state from .../stat, its user PC from .../syscall ("NR args...
 * SP PC" while in a syscall), its wait channel from .../wchan. False if
 * the thread is gone.
 */
static bool read_thread(struct sampler_thread *t)
{
	char path[80], line[512], *p, *tok, *save = NULL;
	int field = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)t->pid, (int)t->tid);
	if (!read_line(path, t->comm, sizeof(t->comm)))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)t->pid, (int)t->tid);
	/* "tid (comm) S ...": the comm may hold spaces and parentheses */
	if (read_line(path, line, sizeof(line)) && (p = strrchr(line, ')')) && p[1] == ' ')
		t->blocked = p[2] == 'S' || p[2] == 'D';
	if (!t->blocked)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)t->pid, (int)t->tid);
	if (read_line(path, line, sizeof(line)) && line[0] >= '0' && line[0] <= '9') {
		for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
			if (++field == 9)
				t->pc = strtoull(tok, NULL, 16);
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", (int)t->pid, (int)t->tid);
	if (!read_line(path, t->wchan, sizeof(t->wchan)))
		t->wchan[0] = '\0';
	return true;
}

/* Once every event is open: what each thread found was doing; those gone are dropped. */
static void read_threads(struct sampler *s)
{
	size_t kept = 0;

	for (size_t i = 0; i < s->nr_threads; i++) {
		struct sampler_thread *t = &s->threads[i];

		if (!t->pid)
			t->pid = tgid_of(t->tid);
		if (t->pid && read_thread(t))
			s->threads[kept++] = *t;
	}
	s->nr_threads = kept;
}

const struct sampler_thread *sampler__threads(const struct sampler *s, size_t *n)
{
	if (!s || !s->attached || !s->nr_threads) {
		if (n)
			*n = 0;
		return NULL;
	}
	if (n)
		*n = s->nr_threads;
	return s->threads;
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
	err = rings_open(s, &owner, 0, attach_owner, -1);
	if (err)
		goto fail;

	event_attr_oncpu(s, &on);
	event_attr_switch(s, &sw);
	event_attr_sideband(s->opts.offcpu_only ? &sw : &on);
	/* threads (and processes) the followed threads create are followed through inherit */
	on.inherit = sw.inherit = !threads_only;

	/*
	 * A thread that an unfollowed thread creates while we scan is found by
	 * the next scan; one that a followed thread creates inherits its events.
	 * So when a scan finds nothing new, nothing is left out.
	 */
	s->stats.start_time = monotonic_ns();
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
	read_threads(s);
	if (!threads_only)
		probes_open(s, pids, n);
	/* the rings are emptied from now on, not from the first poll */
	err = early_start(s);
	if (err)
		goto fail;
	return 0;

fail:
	rings_close(s);
	u64map_free(&s->tids);
	u64map_free(&s->ids);
	free(s->threads);
	s->threads = NULL;
	s->nr_threads = s->threads_cap = 0;
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
