/* SPDX-License-Identifier: MIT */
/*
 * python/ on real interpreters: a child python with a known call chain
 * (one C re-entry: sorted calls a key function) asleep in it, read without
 * stopping it. Every CPython >= 3.11 the machine has (tests/pythons.h:
 * /usr/bin/python3.N, pyenv's builds) is a case; /usr/bin/python3 must be
 * there. Where an interpreter's headers are installed, the offsets read
 * from its _Py_DebugOffsets are compared with offsetof() from them.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sched.h>
#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "python/internal.h"
#include "python/python.h"
#include "tests/pythons.h"
#include "util/util.h"

#define SYSTEM_PYTHON "/usr/bin/python3" /* scripts/setup.sh installs it */

/* Every interpreter found, as Criterion parameters (none found: no case). */
static struct criterion_test_params all_pythons(bool ft)
{
	static struct python gil[PYTHONS_MAX], free_threaded[PYTHONS_MAX];
	struct python *ps = ft ? free_threaded : gil;
	size_t n = pythons_find(ps, PYTHONS_MAX, ft);

	return cr_make_param_array(struct python, ps, n);
}

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

	cr_assert_eq(access(python, X_OK), 0, "%s is not installed", python);
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

ParameterizedTestParameters(python, chain)
{
	return all_pythons(false);
}

ParameterizedTest(struct python *py, python, chain)
{
	cr_log_info("%s (3.%u)", py->path, py->minor);
	chain_case(py->path, py->minor);
}

/*
 * 3.13 on, a slot learned wrong is learned again. The child sleeps in
 * inner(), two C eval calls deep; each call's CFA is made its stub frame's
 * address plus K over a copy of the real stack between them. A first
 * sample teaches K + 8 (as a read that found the thread at another depth
 * once did): the next samples, as the stack is, name nothing until the
 * slot is learned again, and from then on every group. (3.11 and 3.12 keep
 * a _PyCFrame whose slot each match checks already.)
 */
static void relearn_case(const char *python, uint32_t minor)
{
	const uint64_t k = 64;
	struct child c;
	struct pyreader *r;
	struct py_snapshot *snap;
	struct py_stack_copy copy;
	struct py_group groups[2];
	uint64_t stubs[2], cfas[2], lo, hi;
	struct iovec local, remote;
	uint8_t *mem;
	size_t ns = 0;
	int first_ok = -1, unknown = 0;

	if (minor < 13) {
		cr_log_info("3.%u keeps a _PyCFrame: its slot is checked at every match", minor);
		return;
	}
	c = start(python);
	r = pyreader__new();
	snap = calloc(1, sizeof(*snap));
	cr_assert_eq(pyreader__probe(r, c.pid), 1);
	cr_assert_eq(pyreader__snapshot(r, c.pid, c.tid, snap), 0);
	for (uint32_t i = 0; i < snap->n && ns < 2; i++)
		if (snap->frames[i].stub)
			stubs[ns++] = snap->frames[i].addr;
	cr_assert_eq(ns, 2, "%zu stub frames", ns);
	cr_assert_lt(stubs[0], stubs[1], "the newest call's stub lies deeper on the C stack");
	lo = stubs[0] - 256;
	hi = stubs[1] + 256;
	mem = malloc(hi - lo);
	local = (struct iovec){ mem, hi - lo };
	remote = (struct iovec){ (void *)(uintptr_t)lo, hi - lo };
	cr_assert_eq(process_vm_readv(c.pid, &local, 1, &remote, 1, 0), (ssize_t)(hi - lo));
	copy = (struct py_stack_copy){ .sp = lo, .data = mem, .size = hi - lo };
	for (int i = 0; i < 2; i++)
		cfas[i] = stubs[i] + k + 8;
	cr_assert_eq(pyreader__match(r, c.pid, snap, &copy, cfas, NULL, 2, groups), 0);
	cr_assert_eq(groups[0].state, PY_GROUP_OK, "the first sample taught its own slot");
	for (int i = 0; i < 2; i++)
		cfas[i] = stubs[i] + k;
	for (int s = 0; s < 64; s++) {
		bool ok;

		cr_assert_eq(pyreader__match(r, c.pid, snap, &copy, cfas, NULL, 2, groups), 0);
		ok = groups[0].state == PY_GROUP_OK && groups[1].state == PY_GROUP_OK;
		if (ok && first_ok < 0)
			first_ok = s;
		if (first_ok < 0)
			unknown++;
		else
			cr_assert(ok, "sample %d, after the slot was learned again: groups %d %d",
				  s, groups[0].state, groups[1].state);
	}
	cr_assert_geq(first_ok, 0, "a slot learned 8 bytes off was never learned again");
	cr_assert_gt(unknown, 0, "the slot taught 8 bytes off named frames");
	cr_assert_leq(first_ok, 16, "learned again only after %d samples", first_ok);
	cr_assert_eq(pyreader__stats(r)->slots_unlearned, 1);
	stop(&c);
	free(mem);
	free(snap);
	pyreader__free(r);
}

ParameterizedTestParameters(python, slot_learned_wrong_is_learned_again)
{
	return all_pythons(false);
}

ParameterizedTest(struct python *py, python, slot_learned_wrong_is_learned_again)
{
	cr_log_info("%s (3.%u)", py->path, py->minor);
	relearn_case(py->path, py->minor);
}

/*
 * Lines are remembered by code object and instruction: a frame described at
 * each of the units before inner's sleep, twice, has the same line each
 * time, and the units span inner's lines 2 to 4 (a line remembered for the
 * wrong unit would give one line throughout).
 */
static void lines_case(const char *python)
{
	struct child c = start(python);
	struct pyreader *r = pyreader__new();
	struct py_snapshot *snap = calloc(1, sizeof(*snap));
	struct py_frame_info info;
	uint32_t first[64], seen = 0;
	struct py_frame f;

	cr_assert_eq(pyreader__probe(r, c.pid), 1);
	cr_assert_eq(pyreader__snapshot(r, c.pid, c.tid, snap), 0);
	cr_assert_gt(snap->n, 0);
	f = snap->frames[0];
	cr_assert_not(f.stub);
	for (int pass = 0; pass < 2; pass++) {
		for (int k = 0; k < 64; k++) {
			f.instr = snap->frames[0].instr - 2 * (uint64_t)k;
			cr_assert_eq(pyreader__describe(r, c.pid, &f, &info), 0);
			cr_assert_str_eq(info.qualname, "inner");
			if (pass == 0) {
				first[k] = info.line;
				seen |= info.line < 32 ? 1u << info.line : 0;
			}
			cr_assert_eq(info.line, first[k], "unit -%d: line %u, then %u", k, first[k],
				     info.line);
		}
	}
	cr_assert_eq(first[0], 4);
	cr_assert(seen & 1u << 3, "the units before the sleep reach the print on line 3 (%#x)",
		  seen);
	stop(&c);
	free(snap);
	pyreader__free(r);
}

ParameterizedTestParameters(python, lines_by_instruction)
{
	return all_pythons(false);
}

ParameterizedTest(struct python *py, python, lines_by_instruction)
{
	cr_log_info("%s (3.%u)", py->path, py->minor);
	lines_case(py->path);
}

/* A field of a code object in a live process, read as the BPF program copies it. */
static void code_field(pid_t pid, uint64_t code, uint32_t off, void *out, size_t size)
{
	struct iovec l = { out, size }, r = { (void *)(uintptr_t)(code + off), size };

	cr_assert_eq(process_vm_readv(pid, &l, 1, &r, 1, 0), (ssize_t)size);
}

/*
 * Frames copied at the sample carry what named their code object then:
 * co_qualname, co_filename, co_firstlineno. A code object at the address
 * that differs in any one of them is another (the sampled one was freed,
 * a module's <module> shares the qualname object of every other) and is
 * left unnamed, on the batched path as on the one-by-one.
 */
static void proved_case(const char *python)
{
	struct child c = start(python);
	struct pyreader *r = pyreader__new();
	struct py_snapshot *snap = calloc(1, sizeof(*snap)), *copy = calloc(1, sizeof(*copy));
	struct py_walk w;
	uint32_t frames = 0;

	cr_assert_eq(pyreader__probe(r, c.pid), 1);
	cr_assert_eq(pyreader__walk(r, c.pid, &w), 0);
	cr_assert_eq(pyreader__snapshot(r, c.pid, c.tid, snap), 0);
	snap->at_sample = true;
	for (uint32_t i = 0; i < snap->n; i++) {
		struct py_frame *f = &snap->frames[i];

		if (f->stub)
			continue;
		code_field(c.pid, f->code, w.co_qualname, &f->qualname, sizeof(f->qualname));
		code_field(c.pid, f->code, w.co_filename, &f->filename, sizeof(f->filename));
		code_field(c.pid, f->code, w.co_firstlineno, &f->firstline, sizeof(f->firstline));
		frames++;
	}
	cr_assert_eq(frames, 5);
	*copy = *snap;
	cr_assert_eq(pyreader__resolve(r, c.pid, copy), 0, "the sampled code objects, unchanged");
	{
		uint64_t reads = pyreader__stats(r)->reads;

		*copy = *snap;
		cr_assert_eq(pyreader__resolve(r, c.pid, copy), 0);
		cr_assert_eq(pyreader__stats(r)->reads, reads, "named again from what is known");
	}
	for (uint32_t i = 0; i < copy->n; i++)
		cr_assert(copy->frames[i].stub || copy->frames[i].code_ref, "frame %u unnamed", i);
	/* each field alone: the frame is not named, the others are */
	for (int field = 0; field < 3; field++) {
		for (uint32_t i = 0; i < snap->n; i++) {
			struct py_frame *f;

			if (snap->frames[i].stub)
				continue;
			*copy = *snap;
			f = &copy->frames[i];
			if (field == 0)
				f->qualname += 16;
			else if (field == 1)
				f->filename += 16;
			else
				f->firstline += 1;
			uint64_t reads = pyreader__stats(r)->reads;

			cr_assert_eq(pyreader__resolve(r, c.pid, copy), 1, "field %d of frame %u",
				     field, i);
			/*
			 * the headers in one read, then the changed frame alone: the
			 * others are known by their copied fields, not read again
			 */
			cr_assert_leq(pyreader__stats(r)->reads - reads, 2,
				      "field %d of frame %u: %" PRIu64 " reads", field, i,
				      pyreader__stats(r)->reads - reads);
			for (uint32_t j = 0; j < copy->n; j++)
				cr_assert(copy->frames[j].stub ||
						  !copy->frames[j].code_ref == (j == i),
					  "field %d of frame %u: frame %u", field, i, j);
		}
	}
	stop(&c);
	free(snap);
	free(copy);
	pyreader__free(r);
}

ParameterizedTestParameters(python, sampled_code_proved)
{
	return all_pythons(false);
}

ParameterizedTest(struct python *py, python, sampled_code_proved)
{
	cr_log_info("%s (3.%u)", py->path, py->minor);
	proved_case(py->path);
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

		int ret = pyreader__snapshot(r, c.pid, c.tid, snap);

		cr_assert_eq(ret, 0, "snapshot %d: %s (%u whole, %u partial before)", t,
			     strerror(-ret), whole, partial);
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

ParameterizedTestParameters(python, churn)
{
	return all_pythons(false);
}

ParameterizedTest(struct python *py, python, churn)
{
	cr_log_info("%s (3.%u)", py->path, py->minor);
	churn_case(py->path);
}

/* The system's python3 is one of the interpreters found, and one whose frames are read. */
Test(python, system_python_is_found)
{
	struct python ps[PYTHONS_MAX];
	size_t n = pythons_find(ps, PYTHONS_MAX, false);
	char real[PATH_MAX], other[PATH_MAX];
	bool found = false;

	cr_assert_not_null(realpath(SYSTEM_PYTHON, real), "%s is not installed", SYSTEM_PYTHON);
	for (size_t i = 0; i < n; i++) {
		cr_log_info("found %s (3.%u)%s%s", ps[i].path, ps[i].minor,
			    ps[i].include[0] ? ", headers in " : "", ps[i].include);
		found |= realpath(ps[i].path, other) && !strcmp(other, real);
	}
	cr_assert(found, "%s (%s) is not a CPython >= 3.11 the tests find", SYSTEM_PYTHON, real);
}

/* Not Python, gone, not a thread of it, not a code object: errors, no crash. */
Test(python, bad_targets)
{
	struct child c = start(SYSTEM_PYTHON);
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
/*
 * pyreader__self_read in a child whose seccomp filter refuses
 * process_vm_readv with EPERM, as Docker's default profile does without
 * CAP_SYS_PTRACE (filter: install it first). Its return value.
 */
static int self_read_in_child(bool filter)
{
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = { .len = sizeof(prog) / sizeof(prog[0]), .filter = prog };
	int status;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (filter && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
			       prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog)))
			_exit(100);
		_exit(-pyreader__self_read());
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 100, "no filter installed");
	return -WEXITSTATUS(status);
}

/* A filter that refuses process_vm_readv is told from a target we may not read. */
Test(python, self_read_sees_a_seccomp_filter)
{
	cr_assert_eq(self_read_in_child(false), 0);
	cr_assert_eq(self_read_in_child(true), -EPERM);
}

Test(python, no_access_is_eperm)
{
	struct child c = start(SYSTEM_PYTHON);
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

/*
 * Debian 3.14.10's _Py_DebugOffsets as its python3.14 holds it (the first
 * 81 words, read from the file's .PyRuntime section).
 */
static const uint64_t dbg314[] = {
	0x7970677562656478,
	0x30e0af0,
	0x0,
	0x4d4c8,
	0x310,
	0x328,
	0x37248,
	0x1c70,
	0x1c68,
	0x1cb0,
	0x1cc0,
	0x1cf0,
	0x1e08,
	0x1df8,
	0x1e00,
	0x10,
	0x1e68,
	0x0,
	0x1e78,
	0x1e70,
	0x1f38,
	0x0,
	0x340,
	0x0,
	0x8,
	0x10,
	0x48,
	0x98,
	0xa0,
	0xe8,
	0x20,
	0x58,
	0x8,
	0x0,
	0x38,
	0x50,
	0x4a,
	0x40,
	0x0,
	0xd8,
	0x70,
	0x78,
	0x80,
	0x88,
	0x44,
	0x34,
	0x60,
	0x68,
	0xd0,
	0x0,
	0x10,
	0x8,
	0x1a0,
	0x18,
	0x58,
	0xa8,
	0x28,
	0x20,
	0x10,
	0x28,
	0x18,
	0x10,
	0xc8,
	0x18,
	0x28,
	0x20,
	0x30,
	0x20,
	0x28,
	0x18,
	0x10,
	0x20,
	0x10,
	0x18,
	0x28,
	0x10,
	0x20,
	0x40,
	0x20,
	0x10,
	0x28,
};

/* Versions: 3.11 and 3.12 from tables, 3.13 on only from a debug block that holds up. */
Test(python, layouts)
{
	struct py_layout l;
	uint64_t dbg[PY_DEBUG_OFFSETS_WORDS] = { 0 };
	size_t n = sizeof(dbg314) / sizeof(dbg314[0]);

	cr_assert_eq(py_layout_for(0x030b02f0, NULL, 0, &l), 0);
	cr_assert_eq(l.co_code_adaptive, 184);
	cr_assert_eq(py_layout_for(0x030c01f0, NULL, 0, &l), 0);
	cr_assert_eq(l.fr_owner, 70);
	cr_assert_eq(py_layout_for(0x030a0df0, NULL, 0, &l), -EPROTONOSUPPORT, "3.10 is not read");
	cr_assert_eq(py_layout_for(0x020712f0, NULL, 0, &l), -EPROTONOSUPPORT);
	cr_assert_eq(py_layout_for(0x030d00f0, NULL, 0, &l), -EBADMSG,
		     "3.13 needs its debug offsets");
	memcpy(dbg, dbg314, sizeof(dbg314));
	cr_assert_eq(py_layout_for(0x030e0af0, dbg, n, &l), 0);
	cr_assert_eq(l.fr_owner, 74);
	cr_assert_eq(l.ts_native_tid, 160);
	cr_assert_eq(l.co_code_adaptive, 208);
	cr_assert_eq(l.tag_mask, 3, "3.14's executable is a tagged _PyStackRef");
	cr_assert_eq(l.frame_bytes, 75);
	cr_assert_eq(l.runtime_size, 0x4d4c8);
	cr_assert_eq(l.uni_compact_size, 56);
	/* a later version with the same block: read, no code change */
	dbg[1] = 0x030f00a0;
	cr_assert_eq(py_layout_for(0x030f00a0, dbg, n, &l), 0);
	/* the version in the block must be the interpreter's */
	cr_assert_eq(py_layout_for(0x030e0af0, dbg, n, &l), -EBADMSG);
	dbg[1] = 0x030e0af0;
	/* free-threaded: said as such, never read */
	dbg[2] = 1;
	cr_assert_eq(py_layout_for(0x030e0af0, dbg, n, &l), -EOPNOTSUPP);
	dbg[2] = 0;
	/* an offset past its struct's stated size (the frame is 0x58 bytes) */
	dbg[36] = 0x58;
	cr_assert_eq(py_layout_for(0x030e0af0, dbg, n, &l), -EBADMSG);
	dbg[36] = 0x4a;
	dbg[31] = 1u << 30; /* a size no struct has */
	cr_assert_eq(py_layout_for(0x030e0af0, dbg, n, &l), -EBADMSG);
	dbg[31] = 0x58;
	/* a block cut short, a wrong cookie */
	cr_assert_eq(py_layout_for(0x030e0af0, dbg, 40, &l), -EBADMSG);
	dbg[0] ^= 1;
	cr_assert_eq(py_layout_for(0x030e0af0, dbg, n, &l), -EBADMSG);
	/* 3.13's block lies elsewhere: 3.14's words read as 3.13's do not hold up */
	dbg[0] ^= 1;
	dbg[1] = 0x030d00f0;
	cr_assert_neq(py_layout_for(0x030d00f0, dbg, n, &l), 0);
}

/* Instruction lengths as gcc emits them, and direct jumps' targets. */
Test(python, insn_lengths)
{
	static const struct {
		uint8_t b[16];
		size_t len;
		bool jump;
		int64_t target;
	} cases[] = {
		{ { 0xe9, 0x10, 0x00, 0x00, 0x00 }, 5, true, 16 },
		{ { 0x0f, 0x85, 0xf0, 0xff, 0xff, 0xff }, 6, true, -16 },
		{ { 0x74, 0x05 }, 2, true, 5 },
		{ { 0xe8, 0, 0, 0, 0 }, 5, false, 0 },
		{ { 0x48, 0x8b, 0x44, 0x24, 0x08 }, 5, false, 0 }, /* mov 0x8(%rsp),%rax */
		{ { 0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8 }, 10, false, 0 }, /* movabs */
		{ { 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00 }, 6, false, 0 }, /* nopw */
		{ { 0xc7, 0x05, 1, 2, 3, 4, 5, 6, 7, 8 }, 10, false, 0 }, /* movl $,rip */
		{ { 0xf6, 0x40, 0x10, 0x01 }, 4, false, 0 }, /* testb $1,0x10(%rax) */
		{ { 0xc5, 0xf9, 0x6f, 0x07 }, 4, false, 0 }, /* vmovdqa (%rdi),%xmm0 */
		{ { 0x62, 0xf1, 0x7c, 0x48, 0x10, 0x07 }, 6, false, 0 }, /* vmovups zmm */
		{ { 0x06 }, 0, false, 0 }, /* not valid in 64-bit mode */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t t;
		bool j;

		cr_assert_eq(x86_insn_len(cases[i].b, sizeof(cases[i].b), &t, &j), cases[i].len,
			     "case %zu", i);
		if (cases[i].len) {
			cr_assert_eq(j, cases[i].jump, "case %zu", i);
			cr_assert_eq(t, cases[i].target, "case %zu", i);
		}
	}
}

static size_t put32(uint8_t *b, size_t at, uint32_t v)
{
	memcpy(b + at, &v, 4);
	return at + 4;
}

/*
 * A made-up unit: a hot part at 0x1000 that jumps into the middle of a
 * range at 0x2000 (a part put apart), tail-calls the function at 0x3000
 * (its start) and jumps within itself; .eh_frame with one CIE and three
 * FDEs (pcrel sdata4), .eh_frame_hdr's sorted table.
 */
Test(python, cold_parts_from_jumps)
{
	enum { HDR = 0x5000, EH = 0x6000 };
	uint8_t code[64], eh[256] = { 0 }, hdr[64] = { 0 };
	static const uint64_t fde_lo[] = { 0x1000, 0x2000, 0x3000 },
			      fde_len[] = { 64, 0x100, 0x100 };
	uint32_t fde_at[3];
	uint64_t lo[4], hi[4];
	struct py_ehframe ef;
	size_t at = 0, c = 0;

	/* jmp 0x2010; jmp 0x3000; je +1; ret; int3 ...; the rest nops */
	memset(code, 0x90, sizeof(code));
	code[c++] = 0xe9;
	c = put32(code, c, (uint32_t)(0x2010 - (0x1000 + 5)));
	code[c++] = 0xe9;
	c = put32(code, c, (uint32_t)(0x3000 - (0x1000 + 10)));
	code[c++] = 0x74;
	code[c++] = 0x01;
	code[c++] = 0xc3;
	/* the CIE: version 1, "zR", code 1, data -8, ra 16, augmentation: pcrel|sdata4 */
	at = put32(eh, at, 14);
	at = put32(eh, at, 0);
	memcpy(eh + at, "\x01zR\0\x01\x78\x10\x01\x1b\0", 10);
	at += 10;
	for (int i = 0; i < 3; i++) {
		fde_at[i] = (uint32_t)at;
		at = put32(eh, at, 16);
		at = put32(eh, at, (uint32_t)(at)); /* back to the CIE */
		at = put32(eh, at, (uint32_t)(fde_lo[i] - (EH + at))); /* pcrel */
		at = put32(eh, at, (uint32_t)fde_len[i]);
		eh[at++] = 0; /* augmentation data length */
		at += 3; /* DW_CFA_nop padding */
	}
	memcpy(hdr, "\x01\x1b\x03\x3b", 4);
	put32(hdr, 4, (uint32_t)(EH - (HDR + 4)));
	put32(hdr, 8, 3);
	for (int i = 0; i < 3; i++) {
		put32(hdr, 12 + 8 * i, (uint32_t)(fde_lo[i] - HDR));
		put32(hdr, 16 + 8 * i, (uint32_t)(EH + fde_at[i] - HDR));
	}
	ef = (struct py_ehframe){ .hdr = hdr,
				  .eh = eh,
				  .hdr_size = 36,
				  .eh_size = at,
				  .hdr_vaddr = HDR,
				  .eh_vaddr = EH };
	cr_assert_eq(py_cold_parts(code, sizeof(code), 0x1000, &ef, lo, hi, 4), 1);
	cr_assert_eq(lo[0], 0x2000);
	cr_assert_eq(hi[0], 0x2100);
	/* code that does not decode to its end names nothing */
	code[sizeof(code) - 1] = 0xe9;
	cr_assert_eq(py_cold_parts(code, sizeof(code), 0x1000, &ef, lo, hi, 4), -ENOEXEC);
	code[sizeof(code) - 1] = 0x90;
	/* bytes of tables that lie, cut anywhere: no part, no crash */
	for (size_t cut = 0; cut < at; cut++) {
		ef.eh_size = cut;
		cr_assert_leq(py_cold_parts(code, sizeof(code), 0x1000, &ef, lo, hi, 4), 1);
	}
	ef.eh_size = at;
	srand(7);
	for (int t = 0; t < 2000; t++) {
		uint8_t junk[64];

		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (uint8_t)rand();
		if (t & 1)
			memcpy(eh + 4 + (size_t)rand() % (at - 8), junk, 4);
		else
			memcpy(hdr + 4 + (size_t)rand() % 28, junk, 4);
		py_cold_parts(junk, sizeof(junk), 0x1000, &ef, lo, hi, 4);
		py_cold_parts(code, sizeof(code), 0x1000, &ef, lo, hi, 4);
	}
}

/* The ELF file that holds an interpreter's eval function: itself or its libpython. */
static bool eval_file(const struct python *py, char *out, size_t size, struct py_syms *s, int parts)
{
	char lib[300];

	snprintf(out, size, "%s", py->path);
	if (!py_elf_syms_from(out, s, parts) && s->eval)
		return true;
	snprintf(lib, sizeof(lib), "%s", py->path);
	*strrchr(lib, '/') = '\0';
	snprintf(out, size, "%s/../lib/libpython3.%u.so.1.0", lib, py->minor);
	return !py_elf_syms_from(out, s, parts) && s->eval;
}

/*
 * Each interpreter's eval function decodes to its end; where its file
 * keeps a .symtab (pyenv's builds), every part apart found from its jumps
 * is one the symbols name (_PyEval_EvalFrameDefault.cold): no other
 * function is taken for it. A hot part too small to hold the loop
 * (Debian's 3.14: 1,184 bytes) has its loop found apart.
 */
ParameterizedTestParameters(python, eval_parts)
{
	return all_pythons(false);
}

ParameterizedTest(struct python *py, python, eval_parts)
{
	struct py_syms code, sym;
	char file[600];

	cr_assert(eval_file(py, file, sizeof(file), &code, PY_PARTS_JUMPS), "%s: no eval function",
		  py->path);
	cr_assert(eval_file(py, file, sizeof(file), &sym, PY_PARTS_SYMTAB));
	cr_log_info("%s: eval %#lx, %lu bytes; %u parts apart found from its jumps, %u named", file,
		    (unsigned long)code.eval, (unsigned long)code.eval_size, code.nr_cold,
		    sym.nr_cold);
	cr_assert(code.eval_decoded, "%s: the eval function did not decode to its end", file);
	for (uint32_t i = 0; i < code.nr_cold; i++) {
		bool named = false;

		cr_assert(code.cold_hi[i] <= code.eval ||
			  code.cold_lo[i] >= code.eval + code.eval_size);
		for (uint32_t j = 0; j < sym.nr_cold; j++)
			named |= sym.cold_lo[j] >= code.cold_lo[i] &&
				 sym.cold_hi[j] <= code.cold_hi[i];
		cr_log_info("  %#lx-%#lx%s", (unsigned long)code.cold_lo[i],
			    (unsigned long)code.cold_hi[i], named ? ", named .cold" : "");
		cr_assert(named || !sym.nr_cold, "%s: %#lx is no part the symbols name", file,
			  (unsigned long)code.cold_lo[i]);
	}
	if (code.eval_size < 8192)
		cr_assert_gt(code.nr_cold, 0, "%s: a %lu-byte eval function and no part apart",
			     file, (unsigned long)code.eval_size);
}

/* A file of headers' offsets: the value of name, or -1. */
static long header_value(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, name, n) && l[n] == ' ')
			return atol(l + n + 1);
	return -1;
}

/*
 * 3.13 on: the offsets read from a running interpreter's _Py_DebugOffsets,
 * and the facts derived (the compact unicode header, the entry frame's
 * owner), equal offsetof()/sizeof() from its own headers, where installed.
 */
ParameterizedTestParameters(python, offsets_match_headers)
{
	static struct python ps[PYTHONS_MAX];
	size_t n = pythons_find(ps, PYTHONS_MAX, false), m = 0;

	for (size_t i = 0; i < n; i++)
		if (ps[i].minor >= 13 && ps[i].include[0])
			ps[m++] = ps[i];
	return cr_make_param_array(struct python, ps, m);
}

ParameterizedTest(struct python *py, python, offsets_match_headers)
{
	char dir[] = "/tmp/dlflame-offsets-XXXXXX", cmd[2048], text[4096] = "";
	struct child c;
	struct pyreader *r = pyreader__new();
	struct py_layout l;
	FILE *f;
	size_t len;
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
#define F(x) { #x, offsetof(struct py_layout, x) }
		F(rt_interp_head), F(is_next),		F(is_threads_head), F(ts_next),
		F(ts_interp),	   F(ts_current_frame), F(ts_native_tid),   F(fr_code),
		F(fr_previous),	   F(fr_instr),		F(fr_owner),	    F(co_firstlineno),
		F(co_filename),	   F(co_qualname),	F(co_linetable),    F(co_code_adaptive),
		F(ob_type),	   F(ty_name),		F(bytes_size),	    F(bytes_data),
		F(uni_length),	   F(uni_state),	F(uni_ascii_size),  F(uni_compact_size),
		F(stub_owner),
#undef F
	};

	cr_log_info("%s (3.%u), headers %s", py->path, py->minor, py->include);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "cc -I'%s' -o '%s/offsets' '%s/py/offsets.c' && '%s/offsets'",
		 py->include, dir, FIXTURES_SRC, dir);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	len = fread(text, 1, sizeof(text) - 1, f);
	text[len] = '\0';
	cr_assert_eq(pclose(f), 0, "%s failed: %s", cmd, text);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
	c = start(py->path);
	cr_assert_eq(pyreader__probe(r, c.pid), 1);
	cr_assert(pyreader__layout(r, c.pid, &l));
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		uint32_t v;
		long want = header_value(text, fields[i].name);

		memcpy(&v, (char *)&l + fields[i].off, sizeof(v));
		cr_assert_geq(want, 0, "the headers' helper gave no %s:\n%s", fields[i].name, text);
		cr_assert_eq((long)v, want, "%s: read %u, the headers say %ld", fields[i].name, v,
			     want);
	}
	cr_assert_eq((long)l.runtime_size, header_value(text, "runtime_size"));
	stop(&c);
	pyreader__free(r);
}

/* A free-threaded build (python3.Nt), where the machine has one: said so, never read. */
ParameterizedTestParameters(python, free_threaded_not_read)
{
	return all_pythons(true);
}

ParameterizedTest(struct python *py, python, free_threaded_not_read)
{
	struct child c = start(py->path);
	struct pyreader *r = pyreader__new();

	cr_log_info("%s (3.%ut)", py->path, py->minor);
	cr_assert_eq(pyreader__probe(r, c.pid), -EPROTONOSUPPORT);
	cr_assert(pyreader__free_threaded(r, c.pid));
	cr_assert_eq(pyreader__version(r, c.pid) >> 16, 0x0300 | py->minor);
	stop(&c);
	pyreader__free(r);
}
