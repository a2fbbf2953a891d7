/* SPDX-License-Identifier: MIT */
/*
 * python/ on real interpreters: a child python with a known call chain
 * (one C re-entry: sorted calls a key function) asleep in it, read without
 * stopping it. Debian's python3.11 always; pyenv's 3.12 and 3.13 where they
 * exist (skipped with the reason where they do not).
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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

/* The CPU the next child runs on, -1 for any. */
static int child_cpu = -1;

static struct child start_script(const char *python, const char *code)
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
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* no spinning child left by a failed test */
		if (child_cpu >= 0) {
			cpu_set_t set;

			CPU_ZERO(&set);
			CPU_SET(child_cpu, &set);
			sched_setaffinity(0, sizeof(set), &set);
		}
		dup2(fds[1], 1);
		close(fds[0]);
		execl(python, python, "-c", code, (char *)NULL);
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

static struct child start(const char *python)
{
	return start_script(python, script);
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

/*
 * A thread whose innermost frames change all the time, under a deep chain
 * that does not: walks that never see the same head twice keep the outer
 * frames both read alike (a partial snapshot). Every snapshot, whole or
 * partial, must be a chain the program has, read from the outermost frame.
 */
static const char churn_script[] = "import threading\n"
				   "def rec(n):\n"
				   "    return rec(n - 1) + 1 if n else 0\n"
				   "def churn():\n"
				   "    print(threading.get_native_id(), flush=True)\n"
				   "    x = 0\n"
				   "    while True:\n"
				   "        x += rec(x % 31) + 1\n"
				   "def level(n):\n"
				   "    level(n - 1) if n else churn()\n"
				   "level(100)\n";

static void churn_case(const char *python)
{
	struct child c;
	struct pyreader *r = pyreader__new();
	struct py_snapshot *snap = calloc(1, sizeof(*snap));
	struct py_frame_info info;
	uint32_t partial = 0, whole = 0;
	cpu_set_t set;

	/* the child runs while it is read: each on a CPU of its own */
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		cr_skip_test("needs 2 CPUs: the child must run while it is read");
	child_cpu = 1;
	c = start_script(python, churn_script);
	child_cpu = -1;
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	cr_assert_eq(sched_setaffinity(0, sizeof(set), &set), 0);
	cr_assert_eq(pyreader__probe(r, c.pid), 1);
	/* 300 snapshots, more while none was partial (a busy machine may hold the child still) */
	for (int t = 0; t < 300 || (!partial && t < 30000); t++) {
		uint32_t depth = 0; /* frames named, from the outermost */

		cr_assert_eq(pyreader__snapshot(r, c.pid, c.tid, snap), 0);
		partial += snap->partial;
		whole += !snap->partial;
		for (uint32_t i = snap->n; i-- > 0;) {
			const char *want = depth == 0	  ? "<module>"
					   : depth <= 101 ? "level"
					   : depth == 102 ? "churn"
							  : "rec";

			if (snap->frames[i].stub)
				continue;
			cr_assert_eq(pyreader__describe(r, c.pid, &snap->frames[i], &info), 0);
			cr_assert_str_eq(info.qualname, want, "frame %u from the outermost: %s",
					 depth, info.qualname);
			depth++;
		}
		cr_assert_leq(depth, 103 + 31);
		/* a whole one reaches the loop; a partial one may end anywhere above <module> */
		cr_assert_geq(depth, snap->partial ? 1 : 103, "%u frames", depth);
		if (t % 100 == 99)
			usleep(1000);
	}
	cr_assert_eq(pyreader__stats(r)->snapshot_partial, partial);
	cr_assert_gt(partial, 0, "no partial snapshot in %u", whole);
	stop(&c);
	free(snap);
	pyreader__free(r);
}

Test(python, churn_311)
{
	churn_case("/usr/bin/python3.11");
}

Test(python, churn_312)
{
	churn_case("/root/.pyenv/versions/3.12.1/bin/python3.12");
}

Test(python, churn_313)
{
	churn_case("/root/.pyenv/versions/3.13.0/bin/python3.13");
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
