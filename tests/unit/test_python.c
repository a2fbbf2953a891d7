/* SPDX-License-Identifier: MIT */
/*
 * python/ on real interpreters: a child python with a known call chain
 * (one C re-entry: sorted calls a key function) asleep in it, read without
 * stopping it. Debian's python3.11 always; pyenv's 3.12 and 3.13 where they
 * exist (skipped with the reason where they do not).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "python/internal.h"
#include "python/python.h"

/* inner's time.sleep is on line 4; the lambda is called by sorted, from C */
static const char script[] = "import threading, time\n"
			     "def inner():\n"
			     "    print(threading.get_native_id(), flush=True)\n"
			     "    time.sleep(60)\n"
			     "def middle():\n"
			     "    sorted([1], key=lambda x: inner())\n"
			     "def outer():\n"
			     "    middle()\n"
			     "outer()\n";

struct child {
	pid_t pid, tid;
};

static struct child start(const char *python)
{
	int fds[2];
	struct child c = { 0 };
	char line[64] = "";
	FILE *f;

	if (access(python, X_OK))
		cr_skip_test("%s is not installed (pyenv's builds are on the team's machines only)",
			     python);
	cr_assert_eq(pipe(fds), 0);
	c.pid = fork();
	cr_assert_geq(c.pid, 0);
	if (c.pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl(python, python, "-c", script, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	cr_assert_not_null(fgets(line, sizeof(line), f), "the child did not start");
	fclose(f);
	c.tid = atoi(line);
	cr_assert_gt(c.tid, 0);
	usleep(100000); /* from print to sleep */
	return c;
}

static void stop(struct child *c)
{
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
}

static void chain_case(const char *python, uint32_t minor)
{
	static const char *const want[] = { "inner", "middle.<locals>.<lambda>", "middle", "outer",
					    "<module>" };
	struct child c = start(python);
	struct pyreader *r = pyreader__new();
	struct py_snapshot *snap = calloc(1, sizeof(*snap));
	struct py_frame_info info;
	uint32_t named = 0, marks = 0;

	cr_assert_eq(pyreader__probe(r, c.pid), 1);
	cr_assert_eq(pyreader__version(r, c.pid) >> 16, 0x0300 | minor);
	cr_assert_eq(pyreader__snapshot(r, c.pid, c.tid, snap), 0);
	for (uint32_t i = 0; i < snap->n; i++) {
		if (snap->frames[i].stub || snap->frames[i].entry)
			marks++;
		if (snap->frames[i].stub)
			continue;
		cr_assert_eq(pyreader__describe(r, c.pid, &snap->frames[i], &info), 0);
		cr_assert_lt(named, 5, "more frames than the program has: %s", info.qualname);
		cr_assert_str_eq(info.qualname, want[named]);
		cr_assert_str_eq(info.filename, "<string>");
		if (named == 0)
			cr_assert_eq(info.line, 4, "inner is asleep on line 4, not %u", info.line);
		named++;
	}
	cr_assert_eq(named, 5);
	/* two C eval calls: the lambda's (entered from sorted) and <module>'s */
	cr_assert_eq(marks, 2, "%u eval-call marks", marks);
	/* the same thread read again: nothing moved */
	cr_assert_eq(pyreader__snapshot(r, c.pid, c.tid, snap), 0);
	cr_assert_eq(snap->n, named + (minor >= 12 ? 2 : 0));
	cr_assert_gt(pyreader__stats(r)->code_cache_hits, 0);
	stop(&c);
	cr_assert_eq(pyreader__snapshot(r, c.pid, c.tid, snap), -ESRCH);
	free(snap);
	pyreader__free(r);
}

Test(python, chain_311)
{
	chain_case("/usr/bin/python3.11", 11);
}

Test(python, chain_312)
{
	chain_case("/root/.pyenv/versions/3.12.1/bin/python3.12", 12);
}

Test(python, chain_313)
{
	chain_case("/root/.pyenv/versions/3.13.0/bin/python3.13", 13);
}

/* Not Python, gone, not a thread of it, not a code object: errors, no crash. */
Test(python, bad_targets)
{
	struct child c = start("/usr/bin/python3.11");
	struct pyreader *r = pyreader__new();
	struct py_snapshot *snap = calloc(1, sizeof(*snap));
	struct py_frame f = { .code = 0x1000 };
	struct py_frame_info info;
	pid_t sleeper = fork();

	if (sleeper == 0) {
		execl("/bin/sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	usleep(50000);
	cr_assert_eq(pyreader__probe(r, sleeper), 0, "/bin/sleep has no interpreter");
	cr_assert_eq(pyreader__snapshot(r, sleeper, sleeper, snap), -ENODEV);
	kill(sleeper, SIGKILL);
	waitpid(sleeper, NULL, 0);
	cr_assert_eq(pyreader__probe(r, sleeper), -ESRCH);
	cr_assert_eq(pyreader__probe(r, c.pid), 1);
	/* a tid of another process */
	cr_assert_eq(pyreader__snapshot(r, c.pid, getpid(), snap), -ENOENT);
	/* unmapped, and mapped but no code object (the interpreter's own runtime state) */
	cr_assert_eq(pyreader__describe(r, c.pid, &f, &info), -EFAULT);
	stop(&c);
	free(snap);
	pyreader__free(r);
}

/* Another user's process: no access, said as such. */
Test(python, no_access_is_eperm)
{
	struct child c = start("/usr/bin/python3.11");
	pid_t k;
	int status;

	if (getuid() != 0) {
		stop(&c);
		cr_skip_test("needs root to run a reader as another user");
	}
	k = fork();
	cr_assert_geq(k, 0);
	if (k == 0) {
		struct pyreader *r;
		int ret;

		if (setgid(65534) || setuid(65534))
			_exit(2);
		r = pyreader__new();
		ret = pyreader__probe(r, c.pid);
		_exit(ret == -EPERM || ret == -EACCES ? 0 : 1);
	}
	waitpid(k, &status, 0);
	stop(&c);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "probe as nobody was not EPERM");
}

/* Versions: 3.11 and 3.12 from tables, 3.13 only from a debug block that holds up. */
Test(python, layouts)
{
	struct py_layout l;
	uint64_t dbg[PY_DEBUG_OFFSETS_WORDS] = { 0 };

	cr_assert(py_layout_for(0x030b02f0, NULL, 0, &l));
	cr_assert_eq(l.co_code_adaptive, 184);
	cr_assert(py_layout_for(0x030c01f0, NULL, 0, &l));
	cr_assert_eq(l.fr_owner, 70);
	cr_assert_not(py_layout_for(0x030a0df0, NULL, 0, &l), "3.10 is not read");
	cr_assert_not(py_layout_for(0x030e00a0, NULL, 0, &l), "3.14 is not read");
	cr_assert_not(py_layout_for(0x030d00f0, NULL, 0, &l), "3.13 needs its debug offsets");
	memcpy(dbg, "xdebugpy", 8);
	dbg[1] = 0x030d00f0;
	dbg[23] = 1u << 20; /* an offset no struct has */
	cr_assert_not(py_layout_for(0x030d00f0, dbg, PY_DEBUG_OFFSETS_WORDS, &l));
}
