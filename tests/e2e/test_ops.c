/* SPDX-License-Identifier: MIT */
/*
 * report --ops and record --probe-ops on the real trainer: Debian's
 * python3-torch CNN (examples/cnn_train.py) under torch.profiler
 * (examples/cnn_torchprof.py: the same model, data and steps), recorded by
 * dlflame in the same run. torch.profiler is the oracle: its key_averages()
 * self CPU time and # of Calls per operator. One run, not two: two runs of
 * the same trainer differ by more than the tolerance (torch.profiler's own
 * aten::addmm share was 18.2, 23.6, 21.2 and 20.2% in four runs on Debian
 * 13), so the shares are held to a few points of the same execution's, the
 * calls exactly.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

#define STEPS "30"
#define MAX_OPS 256

static char *dir;

static void setup(void)
{
	dir = make_dir();
}

static void teardown(void)
{
	rm_dir(dir);
}

TestSuite(ops, .init = setup, .fini = teardown, .timeout = 1200);

struct op {
	char name[128]; /* aten::NAME, the overload dropped: torch.profiler's key */
	double self; /* us (torch.profiler) or ms (dlflame) */
	unsigned long count;
	double share; /* of all operators' self time, percent */
};

struct ops {
	struct op v[MAX_OPS];
	size_t n;
	double sum; /* self time of all operators */
};

static struct op *op_get(struct ops *o, const char *name, size_t len)
{
	char key[128];

	/* aten::add_.Tensor -> aten::add_: torch.profiler groups overloads by name */
	snprintf(key, sizeof(key), "%.*s", (int)len, name);
	key[strcspn(key, ".")] = '\0';
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->v[i].name, key))
			return &o->v[i];
	cr_assert_lt(o->n, MAX_OPS);
	memset(&o->v[o->n], 0, sizeof(o->v[0]));
	snprintf(o->v[o->n].name, sizeof(o->v[0].name), "%s", key);
	return &o->v[o->n++];
}

static int by_share(const void *a, const void *b)
{
	const struct op *x = a, *y = b;

	return x->share < y->share ? 1 : x->share > y->share ? -1 : 0;
}

static void shares(struct ops *o)
{
	double sum = 0;

	for (size_t i = 0; i < o->n; i++)
		sum += o->v[i].self;
	cr_assert_gt(sum, 0);
	for (size_t i = 0; i < o->n; i++)
		o->v[i].share = 100.0 * o->v[i].self / sum;
	o->sum = sum;
	qsort(o->v, o->n, sizeof(o->v[0]), by_share);
}

/*
 * Two standard errors, in points, of a share p (percent) of dlflame's
 * operator time: the test records at -F 999, so o->sum ms of self time are
 * about that many samples. Shares closer than this are a tie that sampling
 * cannot order.
 */
static double tie_points(const struct ops *o, double p)
{
	double n = o->sum * 0.999, q = p / 100.0;

	return n > 0 ? 200.0 * sqrt(q * (1.0 - q) / n) : 100.0;
}

/* examples/cnn_torchprof.py's lines: NAME \t SELF_US \t TOTAL_US \t CALLS, aten:: ones kept. */
static void torch_ops(const char *text, struct ops *o)
{
	for (const char *l = text; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] == '\n')) {
		size_t n = strcspn(l, "\t");
		double self;
		unsigned long calls;
		struct op *op;

		if (strncmp(l, "aten::", 6) || l[n] != '\t' ||
		    sscanf(l + n, "\t%lf\t%*f\t%lu", &self, &calls) != 2)
			continue;
		op = op_get(o, l, n);
		op->self += self;
		op->count += calls;
	}
	shares(o);
}

/* report --ops -n 0 rows: SELF ms ... [COUNT ...] aten::NAME */
static void dlflame_ops(const char *text, struct ops *o)
{
	for (const char *l = text; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] == '\n')) {
		size_t n = strcspn(l, "\n");
		const char *name = NULL;
		double self;
		unsigned long count = 0;
		struct op *op;

		for (size_t i = 0; i + 8 <= n; i++)
			if (!memcmp(l + i, "  aten::", 8))
				name = l + i + 2;
		if (!name || sscanf(l, "%lf %*f%% %*f%% %*f %*f%% %lu", &self, &count) < 1)
			continue;
		op = op_get(o, name, (size_t)(l + n - name));
		op->self += self;
		op->count += count;
	}
	shares(o);
}

static const struct op *find(const struct ops *o, const char *name)
{
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->v[i].name, name))
			return &o->v[i];
	return NULL;
}

/*
 * The same operators in the trace (spans named aten::NAME, category op) and
 * in pprof (an op label, as the real pprof lists it: go tool pprof -tags).
 */
static void check_trace_pprof(const char *data)
{
	char *json = path_in(dir, "ops.json"), *pb = path_in(dir, "ops.pb.gz"), *text;
	char *env[] = { "HOME=/tmp", "GOFLAGS=-mod=mod", NULL };
	struct run_result r;
	const char *sec;

	r = run(dir, NULL, NULL,
		(const char *[]){ need_env("DLFLAME"), "report", "-i", data, "--trace", "-o", json,
				  NULL });
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	text = read_text(json);
	cr_assert_not_null(strstr(text, "\"name\":\"aten::mm\",\"cat\":\"op,oncpu\""));
	cr_assert_not_null(strstr(text, "\"name\":\"aten::conv2d\",\"cat\":\"op,oncpu\""));
	free(text);
	r = run(dir, NULL, NULL,
		(const char *[]){ need_env("DLFLAME"), "report", "-i", data, "--pprof", "-o", pb,
				  NULL });
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	/* scripts/setup.sh installs golang-go and Debian's pprof: go tool pprof */
	r = run(dir, env, NULL,
		(const char *[]){ "/usr/bin/go", "tool", "pprof", "-tags", pb, NULL });
	cr_assert_eq(r.status, 0, "%s", r.err);
	sec = strstr(r.out, " op: ");
	cr_assert_not_null(sec, "%s", r.out);
	cr_assert_not_null(strstr(sec, "): aten::mm\n"), "%s", sec);
	cr_assert_not_null(strstr(sec, "): aten::convolution_backward\n"), "%s", sec);
	run_free(&r);
	free(json);
	free(pb);
}

static void need_torch(void)
{
	/* scripts/setup.sh installs python3-torch: its absence is a failure, not a skip */
	cr_assert_eq(system("/usr/bin/python3 -c 'import torch' 2>/dev/null"), 0,
		     "python3-torch is not installed (scripts/setup.sh installs it)");
}

/*
 * The trainer under torch.profiler, recorded at once by dlflame record
 * --probe-ops: the five operators with the most self time are the same,
 * each one's share of all operators' self time within 5 points of
 * torch.profiler's, and the probed operators' calls equal its # of Calls.
 */
Test(ops, cnn_beside_torch_profiler)
{
	char *ref_script, *data = path_in(dir, "ops.data");
	struct ops *tp = calloc(1, sizeof(*tp)), *dl = calloc(1, sizeof(*dl));
	static const char *const counted[] = {
		"aten::conv2d",
		"aten::convolution_backward",
		"aten::addmm",
		"aten::linear",
		"aten::mm",
		"aten::relu",
		"aten::threshold_backward",
		"aten::max_pool2d",
		"aten::max_pool2d_with_indices_backward",
		"aten::cross_entropy_loss",
	};
	struct run_result r;

	need_torch();
	ref_script = path_in(need_env("EXAMPLES"), "cnn_torchprof.py");
	/* the trainer's stdout (torch.profiler's table) passes through record's */
	r = run(dir, NULL, NULL,
		(const char *[]){ need_env("DLFLAME"), "record", "--probe-ops", "--no-faults", "-F",
				  "999", "-o", data, "--", "/usr/bin/python3", ref_script, STEPS,
				  "--threads", "1", NULL });
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_log_info("%s", r.err);
	torch_ops(r.out, tp);
	run_free(&r);
	r = run(dir, NULL, NULL,
		(const char *[]){ need_env("DLFLAME"), "report", "-i", data, "--ops", "-n", "0",
				  NULL });
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_log_info("%s", r.out);
	cr_assert(strstr(r.out, "probed operators, counted and timed by probes"), "%s", r.out);
	dlflame_ops(r.out, dl);
	for (size_t i = 0; i < 8 && i < tp->n; i++) {
		const struct op *d = find(dl, tp->v[i].name);

		cr_log_info("%-45s torch.profiler %5.1f%% %6lu calls, dlflame %5.1f%% %6lu calls",
			    tp->v[i].name, tp->v[i].share, tp->v[i].count, d ? d->share : 0.0,
			    d ? d->count : 0);
	}
	cr_assert_geq(tp->n, 5);
	cr_assert_geq(dl->n, 5);
	for (size_t i = 0; i < 5; i++) {
		const struct op *d = find(dl, tp->v[i].name);
		bool top5 = false;

		for (size_t k = 0; k < 5; k++)
			top5 |= !strcmp(dl->v[k].name, tp->v[i].name);
		/*
		 * Outside dlflame's top five only in a tie with its fifth
		 * (once 6.5% against threshold_backward's 6.6%, torch.profiler
		 * 6.6% and 6.3%: the two swapped places).
		 */
		cr_expect(
			top5 || (d && d->share >= dl->v[4].share - tie_points(dl, dl->v[4].share)),
			"%s is in torch.profiler's top five (%.1f%%), not in dlflame's (%.1f%%, "
			"its fifth %.1f%%, a tie within %.1f points)",
			tp->v[i].name, tp->v[i].share, d ? d->share : 0.0, dl->v[4].share,
			tie_points(dl, dl->v[4].share));
		cr_expect(d && fabs(d->share - tp->v[i].share) <= 5.0,
			  "%s: %.1f%% of the operators' self time, torch.profiler %.1f%%",
			  tp->v[i].name, d ? d->share : 0.0, tp->v[i].share);
	}
	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++) {
		const struct op *t = find(tp, counted[i]), *d = find(dl, counted[i]);

		cr_assert_not_null(t, "torch.profiler has no %s", counted[i]);
		cr_expect(d && d->count == t->count, "%s: %lu calls probed, torch.profiler %lu",
			  counted[i], d ? d->count : 0, t->count);
	}
	run_free(&r);
	/* warm-up left out: from the 11th conv2d call on, 10 fewer of them */
	r = run(dir, NULL, NULL,
		(const char *[]){ need_env("DLFLAME"), "report", "-i", data, "--ops", "-n", "0",
				  "--from-call", "aten::conv2d:11", NULL });
	cr_assert_eq(r.status, 0, "%s", r.err);
	{
		struct ops *from = calloc(1, sizeof(*from));
		const struct op *t = find(tp, "aten::conv2d"), *d;

		dlflame_ops(r.out, from);
		d = find(from, "aten::conv2d");
		cr_expect(d && t && d->count + 10 == t->count,
			  "--from-call aten::conv2d:11: %lu calls", d ? d->count : 0);
		free(from);
	}
	run_free(&r);
	check_trace_pprof(data);
	free(ref_script);
	free(data);
	free(tp);
	free(dl);
}
