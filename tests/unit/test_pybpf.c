/* SPDX-License-Identifier: MIT */
/*
 * pybpf/ on real interpreters: python3 runs tests/fixtures/py/outer.py
 * under dlflame's sampler, with the BPF program attached to its sampling
 * events. Every on-CPU sample of the main thread between the fixture's
 * "start" and "end" lies inside `outer`: each must have a record of the
 * program (same thread, same ip, taken right after it on the same clock)
 * whose chain, named after the fact from its code objects, is
 * `<module>` then `outer` at its outer end. Every CPython >= 3.11 the
 * machine has (tests/pythons.h) is a case.
 *
 * scripts/setup.sh installs clang and libbpf-dev, and the suite runs as
 * root: a build without BPF, or a kernel that refuses the program, fails.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pybpf/pybpf.h"
#include "python/python.h"
#include "sampler/sampler.h"
#include "tests/pythons.h"
#include "util/util.h"

#define SECONDS "2.5" /* of the fixture's CPU time in `outer` */
#define MIN_SAMPLES 1000 /* in the window, at 999 Hz: the fixture ran */

static struct criterion_test_params all_pythons(void)
{
	static struct python ps[PYTHONS_MAX];
	size_t n = pythons_find(ps, PYTHONS_MAX, false);

	return cr_make_param_array(struct python, ps, n);
}

struct smp {
	uint64_t time, ip;
	uint32_t tid;
};

/* A BPF record, reduced to what the test judges. */
struct brec {
	uint64_t time, ip;
	uint32_t tid;
	enum pybpf_status status;
	uint32_t n; /* frames that are not eval-call stubs */
	bool outer_chain; /* the two outermost of them are <module> and outer */
	bool matched;
};

struct run {
	pid_t pid;
	struct pyreader *r;
	struct smp *s;
	size_t ns, cap_s;
	struct brec *b;
	size_t nb, cap_b;
	struct u64map names; /* code object -> 1 <module>, 2 outer, 3 other */
	uint64_t named_fail;
	struct py_snapshot *snap; /* a record's frames, proved as collect/ proves them */
	uint64_t proved, unproved; /* records of <module>;outer whose code objects were */
};

static int on_rec(void *ctx, const struct rec *r)
{
	struct run *t = ctx;

	if (r->type != REC_SAMPLE || r->sample.event != EV_ONCPU ||
	    r->sample.pid != (uint32_t)t->pid)
		return 0;
	cr_assert_eq(grow_array((void **)&t->s, &t->cap_s, t->ns + 1, sizeof(*t->s)), 0);
	t->s[t->ns++] = (struct smp){ r->sample.time, r->sample.ip, r->sample.tid };
	return 0;
}

/* 1 <module>, 2 outer, 3 anything else, 0 not named (named now: code objects outlive this) */
static uint64_t kind_of(struct run *t, const struct py_frame *f)
{
	struct py_frame_info info;
	uint64_t k;

	if (u64map_get(&t->names, f->code, &k))
		return k;
	if (pyreader__describe(t->r, t->pid, f, &info)) {
		t->named_fail++;
		return 0;
	}
	k = !strcmp(info.qualname, "<module>") ? 1 : !strcmp(info.qualname, "outer") ? 2 : 3;
	if (!strstr(info.filename, "outer.py"))
		k = 3;
	u64map_put(&t->names, f->code, k);
	return k;
}

/* Whether pid's memory at addr can still be read (not once it has exited). */
static bool alive(pid_t pid, uint64_t addr)
{
	uint64_t v;
	struct iovec l = { &v, sizeof(v) }, r = { (void *)(uintptr_t)addr, sizeof(v) };

	return process_vm_readv(pid, &l, 1, &r, 1, 0) == sizeof(v);
}

static int on_bpf(void *ctx, const struct pybpf_sample *s)
{
	struct run *t = ctx;
	struct brec b = { s->time, s->ip, (uint32_t)s->tid, s->status, 0, false, false };
	uint64_t kinds[2] = { 0, 0 };

	for (uint32_t i = s->n; i-- > 0;) {
		if (s->frames[i].stub)
			continue;
		if (b.n < 2)
			kinds[b.n] = kind_of(t, &s->frames[i]);
		b.n++;
	}
	b.outer_chain = b.n >= 2 && kinds[0] == 1 && kinds[1] == 2;
	/*
	 * outer.py frees no code object: each one the program copied is still
	 * the one it names (co_qualname, co_filename, co_firstlineno alike)
	 */
	if (b.outer_chain && s->status == PYBPF_OK && s->n <= PY_MAX_FRAMES) {
		*t->snap = (struct py_snapshot){ .n = s->n, .at_sample = true };
		memcpy(t->snap->frames, s->frames, s->n * sizeof(s->frames[0]));
		int ret = pyreader__resolve(t->r, t->pid, t->snap);

		/* (-ENODEV: a record before the test probed the process; one named after it exited) */
		if (ret > 0 && alive(t->pid, s->frames[0].code))
			t->unproved++;
		else if (ret == 0)
			t->proved++;
	}
	cr_assert_eq(grow_array((void **)&t->b, &t->cap_b, t->nb + 1, sizeof(*t->b)), 0);
	t->b[t->nb++] = b;
	return 0;
}

/* Read a line from fd (non-blocking) into buf at *len; true when one is complete. */
static bool line_from(int fd, char *buf, size_t size, size_t *len)
{
	char c;

	while (*len + 1 < size && read(fd, &c, 1) == 1) {
		if (c == '\n') {
			buf[*len] = '\0';
			return true;
		}
		buf[(*len)++] = c;
	}
	return false;
}

static void bpf_case(const char *python)
{
	struct pybpf *b = NULL;
	struct sampler *s;
	struct sampler_opts o = { .callgraph = CALLGRAPH_FP };
	struct run t = { 0 };
	int in[2], out[2], saved_in, saved_out, err, status;
	char *argv[] = { (char *)python, FIXTURES_SRC "/py/outer.py", SECONDS, NULL };
	extern char **environ;
	char line[64];
	size_t len = 0;
	int stage = 0; /* 0 tid, 1 start, 2 end, 3 done */
	uint64_t t0 = 0, t1 = 0, deadline, tid = 0,
		 half_period = 1000000000ull / SAMPLER_DEFAULT_FREQ / 2;
	struct pybpf_stats st;

	err = pybpf__open(&b, 0);
	cr_assert_eq(
		err, 0,
		"pybpf__open: %s (%s); scripts/setup.sh installs clang and libbpf-dev, and this must run as root",
		strerror(-err), pybpf__last_error());
	o.bpf = true;
	o.bpf_fd = pybpf__prog_fd(b);
	s = sampler__new(&o);
	cr_assert_not_null(s);
	t.r = pyreader__new();
	cr_assert_not_null(t.r);
	t.snap = calloc(1, sizeof(*t.snap));
	cr_assert_not_null(t.snap);
	u64map_init(&t.names);
	cr_assert_eq(pipe(in), 0);
	cr_assert_eq(pipe(out), 0);
	/* the child's stdin and stdout are the pipes: launch forks with ours */
	saved_in = dup(0);
	saved_out = dup(1);
	dup2(in[0], 0);
	dup2(out[1], 1);
	err = sampler__launch(s, argv, environ, &t.pid);
	dup2(saved_in, 0);
	dup2(saved_out, 1);
	close(in[0]);
	close(out[1]);
	cr_assert_eq(err, 0, "launch %s: %s", python, strerror(-err));
	cr_assert_gt(sampler__stats(s)->bpf_attached, 0, "SET_BPF: %s",
		     strerror(-sampler__stats(s)->bpf_err));
	cr_assert_eq(sampler__stats(s)->bpf_err, 0, "SET_BPF: %s",
		     strerror(-sampler__stats(s)->bpf_err));
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	cr_assert_eq(sampler__start(s), 0);
	deadline = monotonic_ns() + 60000000000ull;
	while (stage < 3 && monotonic_ns() < deadline) {
		cr_assert_geq(sampler__poll(s, 5, on_rec, &t), 0);
		cr_assert_geq(pybpf__poll(b, 0, on_bpf, &t), 0);
		if (!line_from(out[0], line, sizeof(line), &len))
			continue;
		len = 0;
		if (stage == 0) {
			struct py_walk w;

			cr_assert_eq(parse_u64(line, 10, 1, UINT32_MAX, &tid), 0, "tid line: %s",
				     line);
			cr_assert_eq(pyreader__probe(t.r, t.pid), 1, "%s: no interpreter found",
				     python);
			cr_assert_eq(pyreader__walk(t.r, t.pid, &w), 0);
			err = pybpf__add(b, t.pid, &w);
			cr_assert_eq(err, 0, "pybpf__add: %s", strerror(-err));
			cr_assert_eq(write(in[1], "go\n", 3), 3);
		} else if (stage == 1) {
			cr_assert_str_eq(line, "start");
			t0 = monotonic_ns();
		} else {
			cr_assert_str_eq(line, "end");
			t1 = monotonic_ns();
		}
		stage++;
	}
	cr_assert_eq(stage, 3, "%s did not finish in time", python);
	cr_assert_eq(write(in[1], "\n", 1), 1);
	close(in[1]);
	cr_assert_eq(waitpid(t.pid, &status, 0), t.pid);
	cr_assert_eq(sampler__drain(s, on_rec, &t), 0);
	while (pybpf__poll(b, 0, on_bpf, &t) > 0)
		;
	cr_assert_eq(pybpf__stats(b, &st), 0);

	if (getenv("PYBPF_DEBUG"))
		for (size_t i = 0; i < 5 && i < t.ns && i < t.nb; i++)
			cr_log_info(
				"sample tid %u time %lu ip %lx; record tid %u time %lu ip %lx st %d n %u",
				t.s[t.ns / 2 + i].tid, (unsigned long)t.s[t.ns / 2 + i].time,
				(unsigned long)t.s[t.ns / 2 + i].ip, t.b[t.nb / 2 + i].tid,
				(unsigned long)t.b[t.nb / 2 + i].time,
				(unsigned long)t.b[t.nb / 2 + i].ip, t.b[t.nb / 2 + i].status,
				t.b[t.nb / 2 + i].n);
	/* join: each window sample of the main thread to its record */
	size_t window = 0, joined = 0, outer = 0, ok = 0;
	uint64_t dt_max = 0;
	int64_t dt_sum = 0; /* record's time - sample's: its sign says which came first */

	for (size_t i = 0; i < t.ns; i++) {
		const struct smp *x = &t.s[i];
		struct brec *best = NULL;

		if (x->tid != tid || x->time < t0 || x->time > t1)
			continue;
		window++;
		for (size_t k = 0; k < t.nb; k++) {
			struct brec *y = &t.b[k];
			uint64_t d = y->time > x->time ? y->time - x->time : x->time - y->time;

			if (y->matched || y->tid != x->tid || y->ip != x->ip || d > half_period)
				continue;
			if (!best || d < (best->time > x->time ? best->time - x->time
							       : x->time - best->time))
				best = y;
		}
		if (!best)
			continue;
		best->matched = true;
		joined++;
		ok += best->status == PYBPF_OK;
		outer += best->outer_chain;
		uint64_t d = best->time > x->time ? best->time - x->time : x->time - best->time;
		dt_sum += (int64_t)(best->time - x->time);
		if (d > dt_max)
			dt_max = d;
	}
	cr_log_info("%s: %zu samples in outer's window, %zu with a record (%.2f%%), chain "
		    "<module>;outer in %.2f%%, walks complete %.2f%%; record's time - sample's "
		    "%.1f us on average, |at most| %.1f us; program: %lu samples, %lu records, "
		    "%lu dropped, %lu thread-list walks; %lu code objects not named",
		    python, window, joined, 100.0 * joined / (window ? window : 1),
		    100.0 * outer / (window ? window : 1), 100.0 * ok / (joined ? joined : 1),
		    joined ? (double)dt_sum / 1000.0 / (double)joined : 0.0, dt_max / 1000.0,
		    (unsigned long)st.samples, (unsigned long)st.records, (unsigned long)st.dropped,
		    (unsigned long)st.tstate_walks, (unsigned long)t.named_fail);
	cr_assert_geq(window, MIN_SAMPLES, "%s: only %zu samples in outer's window", python,
		      window);
	cr_assert_geq(joined * 1000, window * 995, "%s: %zu of %zu samples have a record", python,
		      joined, window);
	cr_assert_geq(outer * 1000, window * 995,
		      "%s: <module>;outer in %zu of %zu samples' records", python, outer, window);
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(st.bad, 0);
	cr_assert_geq(t.proved, MIN_SAMPLES / 2, "%s: %lu records proved", python,
		      (unsigned long)t.proved);
	cr_assert_eq(t.unproved, 0, "%s: %lu records of <module>;outer whose code objects differ",
		     python, (unsigned long)t.unproved);
	free(t.snap);
	free(t.s);
	free(t.b);
	u64map_free(&t.names);
	pyreader__free(t.r);
	sampler__free(s);
	pybpf__free(b);
	close(out[0]);
}

ParameterizedTestParameters(pybpf, outer_in_every_sample)
{
	return all_pythons();
}

ParameterizedTest(struct python *py, pybpf, outer_in_every_sample, .timeout = 120)
{
	bpf_case(py->path);
}

/* /usr/bin/python3 is always a case (tests/pythons.h finds it). */
Test(pybpf, system_python_is_a_case)
{
	struct python ps[PYTHONS_MAX];
	size_t n = pythons_find(ps, PYTHONS_MAX, false);
	bool found = false;
	char real[PATH_MAX], other[PATH_MAX];

	cr_assert_not_null(realpath("/usr/bin/python3", real));
	for (size_t i = 0; i < n; i++)
		found |= realpath(ps[i].path, other) && !strcmp(real, other);
	cr_assert(found);
}

/* A layout the program cannot use is refused before it reaches the kernel. */
Test(pybpf, bad_layout_refused)
{
	struct pybpf *b = NULL;
	struct py_walk w = { .frame_bytes = 4096, .fr_code = 0, .fr_previous = 8, .fr_instr = 56 };
	int err = pybpf__open(&b, 0);

	cr_assert_eq(err, 0, "pybpf__open: %s (%s)", strerror(-err), pybpf__last_error());
	cr_assert_eq(pybpf__add(b, getpid(), &w), -EINVAL);
	w.frame_bytes = 72;
	w.fr_instr = 72;
	cr_assert_eq(pybpf__add(b, getpid(), &w), -EINVAL);
	/*
	 * A frame it takes, with a thread state; then what names a code object
	 * spread wider than one read, or past the end of the offsets' range
	 */
	w = (struct py_walk){ .frame_bytes = 72,
			      .fr_code = 0,
			      .fr_previous = 8,
			      .fr_instr = 56,
			      .fr_is_entry = PY_WALK_NO_FIELD,
			      .fr_owner = PY_WALK_NO_FIELD,
			      .ts_cframe = PY_WALK_NO_FIELD,
			      .cf_current = PY_WALK_NO_FIELD,
			      .ts_current_frame = 16,
			      .stub_owner = PY_WALK_NO_FIELD,
			      .co_firstlineno = 68,
			      .co_filename = 112,
			      .co_qualname = 128 };
	cr_assert_eq(pybpf__add(b, getpid(), &w), 0);
	cr_assert_eq(pybpf__remove(b, getpid()), 0);
	w.co_qualname = 68 + PYBPF_FRAME_BUF;
	cr_assert_eq(pybpf__add(b, getpid(), &w), -EINVAL);
	/* one whose end wraps: read from 0, co_qualname + 8 past UINT32_MAX */
	w.co_firstlineno = 0;
	w.co_qualname = UINT32_MAX - 2;
	cr_assert_eq(pybpf__add(b, getpid(), &w), -EINVAL);
	pybpf__free(b);
}
