/* SPDX-License-Identifier: MIT */
/*
 * The ranks table (report --ranks): per rank of a distributed job, its
 * on-CPU time, its blocked time, the part of that spent blocked inside the
 * communication library, and the stack where it waited there most. In a
 * data-parallel job every rank meets the others in each all-reduce, so a
 * straggler is the rank that waits least while the others wait for it.
 * Only the training threads' waits count (a process's main thread, and
 * threads that run Python): gloo's and NCCL's worker threads block in the
 * library between collectives whatever the other ranks do. Waits during
 * the job's set-up (rendezvous, the TCPStore, building the process group,
 * MPI_Init) are a column of their own and never decide the straggler: the
 * rank that starts first waits there for the others, however fast it
 * trains, and those waits (seconds) drown the training-time ones.
 *
 * With the collectives probed (record --probe-collectives: gloo's
 * ProcessGroupGloo::enqueue, where a training thread hands a collective
 * over, and AsyncWork::execute, where gloo's worker runs it until every
 * rank has joined), each rank's training-time collectives are counted and
 * timed, the n-th of each rank is the same collective, and the rank whose
 * hand-over came last is the one the others waited for. The straggler is
 * then judged from those calls, not from sampled blocked time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "render/internal.h"

/* A probed collective call of a rank: when it began, how long it took, whether in set-up. */
struct coll_call {
	uint64_t time, dur;
	bool setup;
};

struct coll_calls {
	struct coll_call *v;
	size_t n, cap;
};

struct rank_row {
	uint32_t rank, host, world;
	uint32_t pid, nr_pids; /* the first process seen, and how many */
	uint64_t oncpu, blocked, comm, setup; /* ns; comm: training time only */
	struct u64map waits; /* stack -> ns blocked in communication */
	/* record --probe-collectives: hand-overs (enqueue) and runs (execute) */
	struct coll_calls enq, run;
	/* training-time runs: how many, ns in them, their median; times arrived last */
	size_t nr_train, nr_setup, nr_last;
	uint64_t in_coll, median;
	uint64_t *arrive; /* the training-time hand-overs' times, in order */
	size_t nr_arrive;
	/* its first and last training-time wait in communication (sampled) */
	uint64_t comm_first, comm_last;
	/*
	 * ns between its first and last training-time hand-over (probed), else
	 * its first and last training-time wait: on a CPU, waiting for one
	 */
	uint64_t train_oncpu, train_runq;
};

static bool has_ci(const char *s, const char *needle)
{
	size_t n = strlen(needle);

	for (; *s; s++)
		if (!strncasecmp(s, needle, n))
			return true;
	return false;
}

/*
 * A frame of a communication library: PyTorch's c10d and gloo, NCCL, MPI
 * (by function name or module), or the Python of torch.distributed.
 */
/*
 * A Python frame's source file: its file, or, in a profile relabelled for
 * output ("qualname (file.py)" names, profile__relabel), its module.
 */
static const char *py_file(const struct profile *p, const struct pf_frame *fr)
{
	return profile__str(p, fr->file ? fr->file : fr->module);
}

bool render__comm_frame(const struct profile *p, const struct pf_frame *fr)
{
	const char *name = profile__str(p, fr->name), *module = profile__str(p, fr->module);
	const char *base = strrchr(module, '/');

	base = base ? base + 1 : module;
	if (strstr(name, "c10d::") || strstr(name, "gloo::") || has_ci(name, "nccl") ||
	    !strncmp(name, "MPI_", 4) || !strncmp(name, "PMPI_", 5) || !strncmp(name, "ompi_", 5) ||
	    !strncmp(name, "MPID", 4))
		return true;
	if (!strncmp(base, "libmpi", 6) || !strncmp(base, "libnccl", 7) ||
	    !strncmp(base, "libgloo", 7))
		return true;
	return fr->kind == FRAME_PYTHON && strstr(py_file(p, fr), "torch/distributed/");
}

/*
 * A frame of the job's set-up or tear-down rather than of a training-time
 * collective: the rendezvous and its store, the process group's
 * construction (which connects every pair of ranks), MPI's and NCCL's
 * initialisation, and their Python entry points in torch.distributed.
 */
static bool setup_frame(const struct profile *p, const struct pf_frame *fr)
{
	static const char *const native[] = {
		"TCPStore::TCPStore",
		"TCPStore::waitForWorkers",
		"TCPStoreMasterDaemon",
		"ProcessGroupGloo::ProcessGroupGloo",
		"ProcessGroupNCCL::ProcessGroupNCCL",
		"ProcessGroupMPI::createProcessGroupMPI",
		"gloo::rendezvous::",
		"connectFullMesh",
		"ncclCommInitRank",
		"ncclCommInitAll",
		"ncclCommDestroy",
		"MPI_Init",
		"PMPI_Init",
		"MPI_Finalize",
		"PMPI_Finalize",
		/*
		 * DDP's constructor checks the parameters' shapes across the
		 * ranks: the one native frame of its first collective, there
		 * when its Python frames were not read
		 */
		"c10d::verify_params_across_processes",
	};
	static const char *const python[] = {
		"init_process_group",
		"_create_c10d_store",
		"_store_based_barrier",
		"_new_process_group_helper",
		"new_group",
		"destroy_process_group",
		"rendezvous",
		"_env_rendezvous_handler",
		"_tcp_rendezvous_handler",
		"_file_rendezvous_handler",
	};
	const char *name = profile__str(p, fr->name);

	if (fr->kind == FRAME_PYTHON) {
		const char *file = py_file(p, fr), *label = strstr(name, " (");
		/* the function's own name: after the qualname's last dot, before a label */
		size_t len = label ? (size_t)(label - name) : strlen(name), start = len;

		while (start && name[start - 1] != '.')
			start--;
		name += start;
		len -= start;
		/* DDP's constructor broadcasts the parameters: set-up too */
		if (strstr(file, "torch/nn/parallel/distributed.py"))
			return len == 8 && !strncmp(name, "__init__", 8);
		if (!strstr(file, "torch/distributed/"))
			return false;
		if (strstr(file, "/rendezvous"))
			return true;
		for (size_t i = 0; i < sizeof(python) / sizeof(python[0]); i++)
			if (strlen(python[i]) == len && !strncmp(name, python[i], len))
				return true;
		return false;
	}
	for (size_t i = 0; i < sizeof(native) / sizeof(native[0]); i++)
		if (strstr(name, native[i]))
			return true;
	return false;
}

/*
 * The innermost communication frame of a stack (its depth from the root),
 * or -1; *setup tells whether a set-up frame (above) holds it; with main_only, only in a thread that runs the training code: the
 * process's main thread (main) or one with Python frames. The library's
 * own worker threads wait for work to arrive, not for the other ranks.
 */
static int64_t comm_depth(const struct profile *p, uint32_t stack, bool main, uint32_t **path,
			  size_t *cap, bool *setup)
{
	int64_t depth = profile__stack_frames(p, stack, path, cap), at = -1;

	*setup = false;
	if (depth < 0)
		return depth;
	for (int64_t d = depth - 1; d >= 0 && at < 0; d--)
		if (render__comm_frame(p, profile__get_frame(p, (*path)[d])))
			at = d;
	for (int64_t d = 0; d < at && !main; d++)
		main = profile__get_frame(p, (*path)[d])->kind == FRAME_PYTHON;
	for (int64_t d = 0; d < depth && at >= 0 && !*setup; d++)
		*setup = setup_frame(p, profile__get_frame(p, (*path)[d]));
	return main ? at : -1;
}

static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

/* ---- probed collectives (record --probe-collectives) ---------------------- */

enum coll_kind { COLL_NONE, COLL_ENQUEUE, COLL_RUN };

static bool name_is(const char *name, const char *fn)
{
	size_t n = strlen(fn);

	return !strncmp(name, fn, n) && (name[n] == '(' || name[n] == '\0');
}

/* Which probed collective function a call's stack ends in (its leaf). */
static enum coll_kind coll_kind(const struct profile *p, uint32_t stack)
{
	static const char *const mpi_runs[] = { RENDER_COLL_MPI_RUNS };
	const struct pf_stack *st = profile__get_stack(p, stack);
	const char *name;

	if (!st || st->frame >= profile__nr_frames(p))
		return COLL_NONE;
	name = profile__str(p, profile__get_frame(p, st->frame)->name);
	if (name_is(name, RENDER_COLL_ENQUEUE) || name_is(name, RENDER_COLL_MPI_ENQUEUE))
		return COLL_ENQUEUE;
	if (name_is(name, RENDER_COLL_RUN))
		return COLL_RUN;
	if (!strncmp(name, "PMPI_", 5))
		name++; /* PMPI_Allreduce is MPI_Allreduce */
	for (size_t i = 0; i < sizeof(mpi_runs) / sizeof(mpi_runs[0]); i++)
		if (name_is(name, mpi_runs[i]))
			return COLL_RUN;
	return COLL_NONE;
}

/* Whether a set-up frame is on the stack: 1, 0, or a negative errno. */
static int stack_setup(const struct profile *p, uint32_t stack, uint32_t **path, size_t *cap)
{
	int64_t depth = profile__stack_frames(p, stack, path, cap);

	if (depth < 0)
		return (int)depth;
	for (int64_t d = 0; d < depth; d++)
		if (setup_frame(p, profile__get_frame(p, (*path)[d])))
			return 1;
	return 0;
}

static int coll_add(struct coll_calls *c, uint64_t time, uint64_t dur, bool setup)
{
	if (grow_array((void **)&c->v, &c->cap, c->n + 1, sizeof(*c->v)))
		return -ENOMEM;
	c->v[c->n++] = (struct coll_call){ .time = time, .dur = dur, .setup = setup };
	return 0;
}

static int by_time(const void *a, const void *b)
{
	const struct coll_call *x = a, *y = b;

	return x->time < y->time ? -1 : x->time > y->time;
}

static int by_u64(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

/*
 * Each rank's training-time collectives (count, time in them, median) and
 * how often it arrived last; the number of collectives all ranks joined,
 * 0 when none was probed. gloo runs a process group's collectives in the
 * order they are handed over, the same on every rank: the n-th hand-over
 * (and the n-th run) of each rank is one collective. It is set-up when any
 * rank's stack says so (one rank's Python frames may not have been read).
 */
static int coll_summarise(struct rank_row *rows, size_t nr, size_t *matched)
{
	size_t common = SIZE_MAX;
	bool *setup;

	*matched = 0;
	for (size_t i = 0; i < nr; i++) {
		/* no qsort of an empty (NULL) array */
		if (rows[i].enq.n)
			qsort(rows[i].enq.v, rows[i].enq.n, sizeof(*rows[i].enq.v), by_time);
		if (rows[i].run.n)
			qsort(rows[i].run.v, rows[i].run.n, sizeof(*rows[i].run.v), by_time);
		if (rows[i].enq.n < common)
			common = rows[i].enq.n;
	}
	if (common == SIZE_MAX)
		return 0;
	setup = calloc(common + 1, sizeof(*setup));
	if (!setup)
		return -ENOMEM;
	for (size_t k = 0; k < common; k++)
		for (size_t i = 0; i < nr; i++)
			setup[k] |= rows[i].enq.v[k].setup;
	for (size_t i = 0; i < nr; i++) {
		struct rank_row *r = &rows[i];
		/* without hand-overs to match (none probed), every run is counted */
		size_t n = 0, runs = common ? (r->run.n < common ? r->run.n : common) : r->run.n;
		uint64_t *durs = malloc((r->run.n + 1) * sizeof(*durs));

		r->arrive = malloc((common + 1) * sizeof(*r->arrive));
		if (!durs || !r->arrive) {
			free(durs);
			free(setup);
			return -ENOMEM;
		}
		for (size_t k = 0; k < runs; k++) {
			if (common && setup[k]) {
				r->nr_setup++;
				continue;
			}
			durs[n++] = r->run.v[k].dur;
			r->in_coll = sat_add(r->in_coll, r->run.v[k].dur);
		}
		qsort(durs, n, sizeof(*durs), by_u64);
		r->nr_train = n;
		r->median = n ? durs[n / 2] : 0;
		free(durs);
		for (size_t k = 0; k < common; k++)
			if (!setup[k])
				r->arrive[r->nr_arrive++] = r->enq.v[k].time;
	}
	free(setup);
	common = rows[0].nr_arrive; /* the training-time collectives all ranks joined */
	if (nr < 2 || !common)
		return 0;
	for (size_t k = 0; k < common; k++) {
		size_t last = 0;

		for (size_t i = 1; i < nr; i++)
			if (rows[i].arrive[k] > rows[last].arrive[k])
				last = i;
		rows[last].nr_last++;
	}
	*matched = common;
	return 0;
}

static int row_by_rank(const void *key, const void *elem)
{
	uint32_t k = *(const uint32_t *)key, r = ((const struct rank_row *)elem)->rank;

	return k < r ? -1 : k > r;
}

/*
 * Each rank's time on a CPU and waiting for one (preempted, runnable)
 * during its training: between its first and last training-time hand-over
 * where collectives were probed, else between its first and last sampled
 * wait in communication. rows sorted by rank.
 */
static void train_cpu(const struct profile *p, struct rank_row *rows, size_t nr)
{
	size_t n = profile__nr_samples(p);

	for (size_t i = 0; i < n; i++) {
		const struct pf_sample *s = profile__get_sample(p, i);
		const struct pf_process *pr;
		struct rank_row *r;
		uint64_t from, to;

		if ((s->kind != SAMPLE_ONCPU && s->kind != SAMPLE_RUNQUEUE) ||
		    s->thread >= profile__nr_threads(p))
			continue;
		pr = profile__thread_process(p, profile__get_thread(p, s->thread));
		if (!pr || pr->rank == PF_NO_RANK)
			continue;
		r = bsearch(&pr->rank, rows, nr, sizeof(*rows), row_by_rank);
		if (!r)
			continue;
		from = r->nr_arrive >= 2 ? r->arrive[0] : r->comm_first;
		to = r->nr_arrive >= 2 ? r->arrive[r->nr_arrive - 1] : r->comm_last;
		if (from >= to || s->time < from || s->time > to)
			continue;
		if (s->kind == SAMPLE_ONCPU)
			r->train_oncpu = sat_add(r->train_oncpu, s->weight);
		else
			r->train_runq = sat_add(r->train_runq, s->weight);
	}
}

/*
 * Whether rank top, which the others waited for cost seconds more than it
 * did, was late for want of a CPU rather than for more work: during
 * training it waited (runnable, preempted) at least half of cost longer
 * than the others on average, and more than twice what it ran longer
 * than they did. The machine's CPUs were short (more runnable threads
 * than CPUs, the profiler's own among them), and which rank loses that
 * race is chance; a rank with more work of its own runs longer. *rq and
 * *cpu: its excess, seconds.
 */
static bool cpu_short(const struct rank_row *rows, size_t nr, size_t top, double cost, double *rq,
		      double *cpu)
{
	double q = 0, c = 0;

	for (size_t i = 0; i < nr; i++)
		if (i != top) {
			q += secs(rows[i].train_runq) / (double)(nr - 1);
			c += secs(rows[i].train_oncpu) / (double)(nr - 1);
		}
	*rq = secs(rows[top].train_runq) - q;
	*cpu = secs(rows[top].train_oncpu) - c;
	return nr > 1 && *rq >= cost / 2 && *rq > 2 * *cpu;
}

/*
 * The collectives' lines, then the straggler judged from them: the rank
 * that arrived last at most of the collectives, while the others spent
 * clearly longer in them (twice, and 10 ms). 1 when said, 0 when there
 * is nothing probed to judge from, or a negative errno.
 */
static int coll_print(const struct profile *p, const struct rank_row *rows, size_t nr,
		      size_t matched, FILE *out)
{
	size_t top = 0, any = 0, spread_at = 0;
	uint64_t spread = 0, span, t0 = profile__cmeta(p)->start_time;
	double others = 0;

	for (size_t i = 0; i < nr; i++)
		any += rows[i].run.n + rows[i].enq.n;
	if (!any)
		return 0;
	if (fprintf(out,
		    "Collectives (probed): per rank, the training-time collectives it joined, "
		    "the time its worker (gloo's or MPI's) spent in them (waiting for the other ranks "
		    "included), and how often it was the last to hand one over\n") < 0)
		return render_write_error();
	for (size_t i = 0; i < nr; i++) {
		const struct rank_row *r = &rows[i];

		if (fprintf(out,
			    "rank %u: %zu collectives in training (%zu in set-up), %.3f s in "
			    "them, median %.1f ms; arrived last at %zu of %zu\n",
			    r->rank, r->nr_train, r->nr_setup, secs(r->in_coll),
			    (double)r->median / 1e6, r->nr_last, matched) < 0)
			return render_write_error();
		if (r->nr_last > rows[top].nr_last)
			top = i;
	}
	for (size_t k = 0; k < matched; k++) {
		uint64_t lo = UINT64_MAX, hi = 0;

		for (size_t i = 0; i < nr; i++) {
			uint64_t t = rows[i].arrive[k];

			lo = t < lo ? t : lo;
			hi = t > hi ? t : hi;
		}
		if (hi - lo > spread) {
			spread = hi - lo;
			spread_at = k;
		}
	}
	if (matched && spread) {
		size_t last = 0;

		for (size_t i = 1; i < nr; i++)
			if (rows[i].arrive[spread_at] > rows[last].arrive[spread_at])
				last = i;
		if (fprintf(out,
			    "latest hand-over: collective %zu (%.3f s into the recording): rank "
			    "%u came %.1f ms after the first\n",
			    spread_at + 1,
			    secs(rows[last].arrive[spread_at] > t0
					 ? rows[last].arrive[spread_at] - t0
					 : 0),
			    rows[last].rank, (double)spread / 1e6) < 0)
			return render_write_error();
	}
	if (nr < 2 || !matched)
		return 0; /* the sampled rule judges */
	/*
	 * The last to hand over should be the one that spent least in the
	 * collectives. When not (seen on PyTorch 2.6's one-host job: the
	 * waiting rank's hand-overs came last), the hand-over times do not
	 * tell arrivals there: the sampled rule judges, and says so.
	 */
	for (size_t i = 0; i < nr; i++)
		if (i != top && rows[i].in_coll < rows[top].in_coll) {
			if (fprintf(out,
				    "collectives: the last to hand over (rank %u) is not the one "
				    "that waited least in them: judged from sampled waits\n",
				    rows[top].rank) < 0)
				return render_write_error();
			return 0;
		}
	for (size_t i = 0; i < nr; i++)
		if (i != top)
			others += secs(rows[i].in_coll) / (double)(nr - 1);
	/*
	 * A rank late by noise (a scheduler's whim, the launcher sharing its
	 * CPU) is no straggler: the others' extra time in the collectives
	 * must be twice its own, 10 ms, and 5% of the training's span.
	 */
	span = 0;
	for (size_t i = 0; i < nr; i++) {
		uint64_t d = rows[i].arrive[matched - 1] - rows[i].arrive[0];

		span = d > span ? d : span;
	}
	if (2 * rows[top].nr_last > matched && others >= 2 * secs(rows[top].in_coll) &&
	    others - secs(rows[top].in_coll) >= 0.01 &&
	    others - secs(rows[top].in_coll) >= 0.05 * secs(span)) {
		double rq, cpu, cost = others - secs(rows[top].in_coll);

		if (cpu_short(rows, nr, top, cost, &rq, &cpu)) {
			if (fprintf(out,
				    "straggler: none: rank %u arrived last at %zu of %zu collectives "
				    "and the others spent %.3f s more in them, but it waited %.3f s "
				    "longer than they did for a CPU and ran %.3f s more: the CPUs "
				    "were short, not its work slower\n",
				    rows[top].rank, rows[top].nr_last, matched, cost, rq, cpu) < 0)
				return render_write_error();
			return 1;
		}
		if (fprintf(out,
			    "straggler: rank %u: it arrived last at %zu of %zu collectives; the "
			    "other ranks spent %.3f s in them on average, it %.3f s: they wait for "
			    "it\n",
			    rows[top].rank, rows[top].nr_last, matched, others,
			    secs(rows[top].in_coll)) < 0)
			return render_write_error();
	} else if (fprintf(out,
			   "straggler: none: the ranks spent alike in the collectives (rank %u "
			   "arrived last at %zu of %zu, spent %.3f s in them; the others %.3f s "
			   "on average)\n",
			   rows[top].rank, rows[top].nr_last, matched, secs(rows[top].in_coll),
			   others) < 0) {
		return render_write_error();
	}
	return 1;
}

static int by_rank(const void *a, const void *b)
{
	const struct rank_row *x = a, *y = b;

	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* "c10d::Reducer::finalize_backward() < backward (_tensor.py:488)": where, and its Python caller. */
static int describe(const struct profile *p, uint32_t stack, uint32_t **path, size_t *cap,
		    struct strbuf *sb)
{
	bool setup;
	int64_t d = comm_depth(p, stack, true, path, cap, &setup);
	const struct pf_frame *fr;

	if (d < 0)
		return d == -1 ? 0 : (int)d;
	fr = profile__get_frame(p, (*path)[d]);
	if (sb_add_folded_name(sb, profile__str(p, fr->name), profile__str_len(p, fr->name)))
		return -ENOMEM;
	for (int64_t k = d - 1; k >= 0; k--) {
		const struct pf_frame *py = profile__get_frame(p, (*path)[k]);
		const char *file, *slash;

		if (py->kind != FRAME_PYTHON || render__comm_frame(p, py))
			continue;
		file = profile__str(p, py->file);
		slash = strrchr(file, '/');
		if (sb_add(sb, " < ", 3) || sb_add_folded_name(sb, profile__str(p, py->name),
							       profile__str_len(p, py->name)))
			return -ENOMEM;
		if (*file) {
			char loc[300];
			int n = snprintf(loc, sizeof(loc), " (%s:%u)", slash ? slash + 1 : file,
					 py->line);

			sb_add(sb, loc, n < (int)sizeof(loc) ? (size_t)n : sizeof(loc) - 1);
		}
		break;
	}
	return 0;
}

static int print_rows(const struct profile *p, struct rank_row *rows, size_t nr, FILE *out)
{
	uint32_t *path = NULL;
	size_t cap = 0, slow = 0, matched = 0;
	double others = 0, rq, cpu;
	int err = 0;

	if (fprintf(out,
		    "Ranks: %zu; IN COMM: the training threads' time blocked in c10d, gloo, "
		    "NCCL or MPI, waiting for the other ranks; SET-UP: the same during "
		    "rendezvous and process-group set-up (TCPStore, init_process_group, "
		    "MPI_Init), left out of the straggler\n",
		    nr) < 0 ||
	    fprintf(out, "%5s %-16s %8s %10s %10s %10s %10s  %s\n", "RANK", "HOST", "PID",
		    "ON-CPU s", "BLOCKED s", "IN COMM s", "SET-UP s", "WAITED MOST IN") < 0)
		return render_write_error();
	for (size_t i = 0; i < nr && !err; i++) {
		struct rank_row *r = &rows[i];
		struct strbuf where = { 0 };
		uint64_t best = 0, best_stack = 0;
		char pid[24];

		for (size_t k = 0; k < r->waits.cap; k++)
			if (r->waits.keys[k] != UINT64_MAX && r->waits.vals[k] > best) {
				best = r->waits.vals[k];
				best_stack = r->waits.keys[k];
			}
		if (best)
			err = describe(p, (uint32_t)best_stack, &path, &cap, &where);
		snprintf(pid, sizeof(pid), r->nr_pids > 1 ? "%u+%u" : "%u", r->pid, r->nr_pids - 1);
		if (!err && fprintf(out, "%5u %-16s %8s %10.3f %10.3f %10.3f %10.3f  %.*s\n",
				    r->rank, profile__str(p, r->host), pid, secs(r->oncpu),
				    secs(r->blocked), secs(r->comm), secs(r->setup), (int)where.len,
				    where.len ? where.buf : "-") < 0)
			err = render_write_error();
		sb_free(&where);
		if (r->comm < rows[slow].comm)
			slow = i;
	}
	free(path);
	if (err)
		return err;
	err = coll_summarise(rows, nr, &matched);
	if (!err)
		train_cpu(p, rows, nr);
	if (!err)
		err = coll_print(p, rows, nr, matched, out);
	if (err < 0)
		return err;
	if (err > 0)
		return fflush(out) == EOF || ferror(out) ? render_write_error() : 0;
	for (size_t i = 0; i < nr; i++)
		if (i != slow)
			others += secs(rows[i].comm) / (double)(nr - 1);
	/* the least waiting rank, if the others wait clearly longer (twice, and 10 ms) */
	if (nr < 2)
		err = fprintf(out, "straggler: one rank only, nothing to compare\n");
	else if (others >= 2 * secs(rows[slow].comm) && others - secs(rows[slow].comm) >= 0.01 &&
		 cpu_short(rows, nr, slow, others - secs(rows[slow].comm), &rq, &cpu))
		err = fprintf(
			out,
			"straggler: none: rank %u waited least in communication (%.3f s, the "
			"others %.3f s on average), but it waited %.3f s longer than they did "
			"for a CPU and ran %.3f s more: the CPUs were short, not its work "
			"slower\n",
			rows[slow].rank, secs(rows[slow].comm), others, rq, cpu);
	else if (others >= 2 * secs(rows[slow].comm) && others - secs(rows[slow].comm) >= 0.01)
		err = fprintf(out,
			      "straggler: rank %u: it waited %.3f s in communication, the other "
			      "ranks %.3f s on average: they wait for it\n",
			      rows[slow].rank, secs(rows[slow].comm), others);
	else
		err = fprintf(out,
			      "straggler: none: the ranks waited alike in communication "
			      "(least %.3f s, rank %u; the others %.3f s on average)\n",
			      secs(rows[slow].comm), rows[slow].rank, others);
	if (err < 0 || fflush(out) == EOF || ferror(out))
		return render_write_error();
	return 0;
}

int render_ranks(const struct profile *p, FILE *out)
{
	size_t n = profile__nr_samples(p), nr = 0, cap = 0, pcap = 0;
	struct rank_row *rows = NULL;
	struct u64map index, seen; /* rank -> row; host << 32 | pid -> 1 */
	struct u64map depths; /* stack << 1 | main -> (comm_depth + 1) << 1 | setup */
	uint32_t *path = NULL;
	int err = 0;

	u64map_init(&index);
	u64map_init(&seen);
	u64map_init(&depths);
	for (size_t i = 0; i < n && !err; i++) {
		const struct pf_sample *s = profile__get_sample(p, i);
		const struct pf_process *pr;
		const struct pf_thread *t;
		struct rank_row *r;
		uint64_t v, key;
		int64_t d;
		bool setup;

		if ((s->kind != SAMPLE_ONCPU && s->kind != SAMPLE_OFFCPU &&
		     s->kind != SAMPLE_CALL) ||
		    s->thread >= profile__nr_threads(p) || s->stack >= profile__nr_stacks(p))
			continue;
		t = profile__get_thread(p, s->thread);
		pr = profile__thread_process(p, t);
		if (!pr || pr->rank == PF_NO_RANK)
			continue;
		if (!u64map_get(&index, pr->rank, &v)) {
			if (grow_array((void **)&rows, &cap, nr + 1, sizeof(*rows)) ||
			    u64map_put(&index, pr->rank, nr)) {
				err = -ENOMEM;
				break;
			}
			rows[nr] = (struct rank_row){ .rank = pr->rank,
						      .host = profile__thread_host(p, t),
						      .world = pr->world_size,
						      .pid = t->pid };
			u64map_init(&rows[nr].waits);
			v = nr++;
		}
		r = &rows[v];
		key = (uint64_t)profile__thread_host(p, t) << 32 | t->pid;
		if (!u64map_get(&seen, key, &v)) {
			if (u64map_put(&seen, key, 1)) {
				err = -ENOMEM;
				break;
			}
			r->nr_pids++;
		}
		if (s->kind == SAMPLE_ONCPU) {
			r->oncpu = sat_add(r->oncpu, s->weight);
			continue;
		}
		if (s->kind == SAMPLE_CALL) {
			enum coll_kind k = s->stack ? coll_kind(p, s->stack) : COLL_NONE;
			int su = 0;

			if (k == COLL_ENQUEUE)
				su = stack_setup(p, s->stack, &path, &pcap);
			if (su < 0)
				err = su;
			else if (k != COLL_NONE)
				err = coll_add(k == COLL_RUN ? &r->run : &r->enq, s->time,
					       s->weight, su > 0);
			continue;
		}
		r->blocked = sat_add(r->blocked, s->weight);
		/* blocks repeat their stacks: each (stack, main thread or not) is looked at once */
		key = (uint64_t)s->stack << 1 | (t->tid == t->pid);
		if (u64map_get(&depths, key, &v)) {
			d = (int64_t)(v >> 1) - 1;
			setup = v & 1;
		} else {
			d = comm_depth(p, s->stack, t->tid == t->pid, &path, &pcap, &setup);
			if (d < -1) {
				err = (int)d;
				break;
			}
			if (u64map_put(&depths, key, (uint64_t)(d + 1) << 1 | setup)) {
				err = -ENOMEM;
				break;
			}
		}
		if (d < 0)
			continue;
		if (setup) {
			r->setup = sat_add(r->setup, s->weight);
			continue;
		}
		r->comm = sat_add(r->comm, s->weight);
		if (!r->comm_first || s->time < r->comm_first)
			r->comm_first = s->time;
		if (s->time > r->comm_last)
			r->comm_last = s->time;
		v = 0;
		u64map_get(&r->waits, s->stack, &v);
		if (u64map_put(&r->waits, s->stack, sat_add(v, s->weight)))
			err = -ENOMEM;
	}
	free(path);
	if (!err && !nr)
		err = -ENOENT;
	if (!err) {
		qsort(rows, nr, sizeof(*rows), by_rank);
		err = print_rows(p, rows, nr, out);
	}
	for (size_t i = 0; i < nr; i++) {
		u64map_free(&rows[i].waits);
		free(rows[i].enq.v);
		free(rows[i].run.v);
		free(rows[i].arrive);
	}
	u64map_free(&index);
	u64map_free(&seen);
	u64map_free(&depths);
	free(rows);
	return err;
}
