/* SPDX-License-Identifier: MIT */
/*
 * Launch mode: the target is forked stopped before exec, its events are
 * opened on it (inherited, enabled at exec), and sampler__start lets it
 * run the user's command.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/perf_event.h>

#include "sampler/internal.h"

void launch_kill(struct sampler *s)
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

static int launch_owner(struct sampler *s, struct perf_event_attr *attr, pid_t pid, int cpu)
{
	if (s->opts.offcpu_only) {
		s->stats.event = "context-switches";
		return event_open_or_user_only(s, attr, pid, cpu);
	}
	if (s->stats.event)
		return event_open(attr, pid, cpu);
	return event_probe(s, attr, pid, cpu);
}

/* attr on the child on every CPU, inherited, from exec, writing into that CPU's ring. */
static int open_on_cpus(struct sampler *s, struct perf_event_attr *attr, pid_t pid,
			enum rec_event ev)
{
	int err = 0, fd;

	attr->inherit = 1;
	attr->disabled = 1;
	attr->enable_on_exec = 1;
	attr->exclude_kernel = s->opts.exclude_kernel;
	for (size_t i = 0; i < s->nr_rings && !err; i++) {
		fd = event_open(attr, pid, s->cpus[i]);
		err = fd < 0 ? event_errno(fd) : event_add(s, fd, s->rings[i].fd, ev, 0);
		if (!err)
			err = event_alt(s, fd, attr, ev);
	}
	return err;
}

/*
 * Launch mode: per CPU, one inherited event on the child owns the ring (the
 * on-CPU sampler, or the context-switch event with offcpu_only) and the
 * context-switch event writes into it. All start at exec.
 */
static int open_events(struct sampler *s, pid_t pid)
{
	struct perf_event_attr attr;
	int err;

	s->stats.event = NULL; /* set once probe_event has chosen the event */
	if (s->opts.offcpu_only)
		event_attr_switch(s, &attr);
	else
		event_attr_oncpu(s, &attr);
	event_attr_sideband(&attr);
	attr.inherit = 1;
	attr.disabled = 1;
	attr.enable_on_exec = 1;
	err = rings_open(s, &attr, pid, launch_owner, s->opts.offcpu_only ? EV_SWITCH : EV_ONCPU);
	if (!err && s->opts.offcpu && !s->opts.offcpu_only) {
		event_attr_switch(s, &attr);
		err = open_on_cpus(s, &attr, pid, EV_SWITCH);
	}
	if (!err && s->opts.fault_period && !s->opts.offcpu_only) {
		event_attr_fault(s, &attr);
		err = open_on_cpus(s, &attr, pid, EV_FAULT);
	}
	if (!err)
		probes_open(s, &pid, 1);
	if (err)
		rings_close(s);
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
		launch_kill(s);
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
	/* the rings are emptied from the target's first instruction: a burst at its start fills them */
	e = s->drain_running ? 0 : early_start(s);
	if (e) {
		launch_kill(s);
		return e;
	}
	do
		n = send(s->go_fd, "g", 1, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	e = n == 1 ? 0 : errno;
	close_fd(&s->go_fd);
	s->started = true;
	if (e) {
		/* The child is gone before exec: it never ran the command. */
		launch_kill(s);
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
