/* SPDX-License-Identifier: MIT */
/*
 * dlflame report: a profile (or a perf.data) -> folded stacks, an SVG flame
 * graph, a top table, pprof or a Chrome trace, after the filters every
 * report takes.
 */
#include "cmd.h"
#include "quality.h"
#include "import.h"
#include "options.h"
#include "probes.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "profile/filter.h"
#include "profile/profile.h"
#include "render/render.h"
#include "symbolize/symbolize.h"
#include "util/util.h"

#define DEFAULT_INPUT "dlflame.data"
#define DEFAULT_TOP_ROWS 25
/* --trace: a file Perfetto and chrome://tracing open (bytes) */
#define DEFAULT_TRACE_BYTES 100000000ULL

enum report_format {
	FMT_NONE,
	FMT_FOLDED,
	FMT_SVG,
	FMT_TOP,
	FMT_PPROF,
	FMT_TRACE,
	FMT_CALLS,
	FMT_MEMORY,
	FMT_RANKS,
	FMT_SPEEDSCOPE,
	FMT_HINTS,
	FMT_OPS,
	FMT_MAX,
};

/* Where each format goes without -o; NULL: standard output. */
static const char *const default_output[FMT_MAX] = {
	[FMT_SVG] = "flame.svg",
	[FMT_PPROF] = "profile.pb.gz",
	[FMT_TRACE] = "trace.json",
	[FMT_SPEEDSCOPE] = "speedscope.json",
};

struct report_opts {
	const char *input;
	const char *output;
	enum report_format format;
	bool lines;
	const char *top_only; /* a --top option given */
	const char *rows_set; /* -n or --sort given: --top and --ops */
	bool by_caller; /* --calls/--ops --by caller */
	bool faults; /* --faults: where memory was first touched */
	bool max_spans_set; /* --max-spans given */
	struct trace_opts trace;
	struct trace_result traced;
	struct select_opts sel;
	struct top_opts top;
	struct render_op_names op_names; /* --ops, --trace, --pprof: operators' overloads */
};

static void report_usage(FILE *f)
{
	fputs("Usage: dlflame report [-i FILE] (--folded | --svg | --top | --pprof | --trace |\n"
	      "                      --speedscope | --calls | --memory | --ranks)\n"
	      "                      [-o OUT] [OPTIONS]\n\n"
	      "Draw a recorded profile.\n\n"
	      "Output (choose one):\n"
	      "      --folded          folded stacks (comm;...;leaf count), stdout unless -o\n"
	      "      --svg             interactive SVG flame graph, flame.svg unless -o\n"
	      "      --top             self and total per function, stdout unless -o\n"
	      "      --pprof           gzip'ed pprof profile.proto, profile.pb.gz unless -o\n"
	      "      --trace           Chrome Trace Event JSON timeline, trace.json unless -o;\n"
	      "                        each thread keeps its longest spans, 100 MB in all\n"
	      "      --max-spans N     --trace: at most N spans per thread instead (0: every\n"
	      "                        span); --time shows a stretch in full\n"
	      "      --speedscope      speedscope JSON: a profile per thread (on-CPU, off-CPU;\n"
	      "                        --wall: both in one), samples in time order,\n"
	      "                        speedscope.json unless -o\n"
	      "      --calls           probed functions (record --probe): count, total, min,\n"
	      "                        max, average ms; --by caller splits them by caller\n"
	      "                        (the Python line, past the interpreter's own frames)\n"
	      "      --memory          per process: resident set min, average, max (MiB) and\n"
	      "                        the memory its page faults first touched\n"
	      "      --ranks           per rank of a distributed job: on-CPU, blocked and\n"
	      "                        blocked-in-communication time; names the straggler\n"
	      "      --hints           the modules whose code no symbol names, the share of the\n"
	      "                        recording's samples each touches, and how to name it\n"
	      "      --ops             framework operators (PyTorch's aten::NAME): self and\n"
	      "                        total ms, shares; with record --probe-ops, count,\n"
	      "                        average, min, max ms; --by caller splits them by the\n"
	      "                        Python line that called the outermost operator\n"
	      "  -i, --input FILE      profile or perf.data to read ('-': a perf pipe on stdin;\n"
	      "                        default dlflame.data)\n"
	      "  -o, --output OUT      where to write ('-' for stdout)\n\n"
	      "Samples (default: on-CPU, counted):\n"
	      "      --offcpu          time blocked off-CPU (folded counts in microseconds)\n"
	      "      --wall            on-CPU and off-CPU time in one graph, off-CPU in blue\n"
	      "      --faults          page faults: where memory was first touched, weighted by\n"
	      "                        the bytes touched (folded counts in kB)\n"
	      "      --runqueue        also time runnable but waiting for a CPU, under a\n"
	      "                        [runqueue] frame\n"
	      "      --min-block USEC  drop off-CPU blocks shorter than USEC microseconds\n\n"
	      "Filters (every output):\n"
	      "      --pid PID[,PID]   only these processes\n"
	      "      --tid TID[,TID]   only these threads\n"
	      "      --comm NAME       only threads named NAME (repeat for more)\n"
	      "      --time START,END  only seconds START to END from the start (either may be\n"
	      "                        empty), e.g. --time 5, to leave out warm-up\n"
	      "      --from-call FUNCTION:N\n"
	      "                        only what each process did from the start of its N-th\n"
	      "                        call of probed FUNCTION on (record --probe FUNCTION;\n"
	      "                        FILE:FUNCTION as --probe took it names it too)\n"
	      "      --per-thread      root each thread's stacks under a comm-PID/TID frame\n"
	      "      --rank N[,M]      only these ranks (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK,\n"
	      "                        SLURM_PROCID in the processes' environment)\n"
	      "      --per-rank        root each rank's stacks under a 'rank N' frame\n"
	      "      --reverse         leaf first: who calls the hot leaves (--svg, --folded)\n"
	      "      --complete        only samples whose stack was unwound whole\n"
	      "      --cut             only samples whose stack was cut short (see the\n"
	      "                        completeness line every report prints)\n"
	      "      --python          Python view: leave out the interpreter's own native\n"
	      "                        frames (python3.X, libpython) between Python frames\n"
	      "      --lines           a frame per source line: name (file:line); pprof always\n"
	      "                        has lines\n\n"
	      "SVG:\n"
	      "      --title TEXT      title (default \"Flame Graph\")\n"
	      "      --subtitle TEXT   second line under the title\n"
	      "      --width PX        width in pixels (default 1200)\n"
	      "      --minwidth PX     hide frames narrower than PX pixels (default 0.1), or\n"
	      "                        PCT% of the total\n"
	      "      --countname NAME  what counts are called (default samples, or us)\n"
	      "      --inverted        icicle graph: the root at the top\n"
	      "      --flamechart      x is time: each comm's samples in time order\n\n"
	      "Top (and --ops):\n"
	      "  -n, --rows N          print N rows (default 25; 0: all)\n"
	      "      --by WHAT         function (default), module (JIT code as [jit]), kind or\n"
	      "                        process (comm-PID and its container, if any)\n"
	      "      --sort KEY        self (default) or total\n\n"
	      "  -h, --help            show this help\n\n"
	      "Examples:\n"
	      "  dlflame report --svg\n"
	      "  dlflame report --top -n 10 --time 5,\n"
	      "  dlflame report --wall --svg --per-thread -o wall.svg\n"
	      "  dlflame report --folded | flamegraph.pl > flame.svg\n"
	      "  dlflame report --pprof && pprof -http=: profile.pb.gz\n"
	      "  dlflame report --trace      # then open trace.json in ui.perfetto.dev\n"
	      "  dlflame report --speedscope # then open speedscope.json in speedscope\n",
	      f);
}

static int set_format(struct report_opts *o, enum report_format f)
{
	if (o->format != FMT_NONE && o->format != f)
		return usage_error("report",
				   "choose one of --folded, --svg, --top, --pprof, --trace, "
				   "--speedscope, --calls, --memory, --ranks, --hints and --ops");
	o->format = f;
	return 0;
}

static int parse_args(int argc, char **argv, struct report_opts *o)
{
	enum {
		OPT_FOLDED = OPT_CMD_BASE,
		OPT_SVG,
		OPT_TOP,
		OPT_PPROF,
		OPT_TRACE,
		OPT_CALLS,
		OPT_MEMORY,
		OPT_RANKS,
		OPT_SPEEDSCOPE,
		OPT_HINTS,
		OPT_OPS,
		OPT_FAULTS,
		OPT_BY,
		OPT_SORT,
		OPT_LINES,
		OPT_MAX_SPANS,
	};
	static const struct option longopts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "folded", no_argument, NULL, OPT_FOLDED },
		{ "svg", no_argument, NULL, OPT_SVG },
		{ "top", no_argument, NULL, OPT_TOP },
		{ "pprof", no_argument, NULL, OPT_PPROF },
		{ "trace", no_argument, NULL, OPT_TRACE },
		{ "calls", no_argument, NULL, OPT_CALLS },
		{ "memory", no_argument, NULL, OPT_MEMORY },
		{ "ranks", no_argument, NULL, OPT_RANKS },
		{ "speedscope", no_argument, NULL, OPT_SPEEDSCOPE },
		{ "hints", no_argument, NULL, OPT_HINTS },
		{ "ops", no_argument, NULL, OPT_OPS },
		{ "rank", required_argument, NULL, OPT_RANK },
		{ "per-rank", no_argument, NULL, OPT_PER_RANK },
		{ "faults", no_argument, NULL, OPT_FAULTS },
		{ "title", required_argument, NULL, OPT_TITLE },
		{ "subtitle", required_argument, NULL, OPT_SUBTITLE },
		{ "width", required_argument, NULL, OPT_WIDTH },
		{ "minwidth", required_argument, NULL, OPT_MINWIDTH },
		{ "countname", required_argument, NULL, OPT_COUNTNAME },
		{ "inverted", no_argument, NULL, OPT_INVERTED },
		{ "reverse", no_argument, NULL, OPT_REVERSE },
		{ "flamechart", no_argument, NULL, OPT_FLAMECHART },
		{ "rows", required_argument, NULL, 'n' },
		{ "by", required_argument, NULL, OPT_BY },
		{ "sort", required_argument, NULL, OPT_SORT },
		{ "offcpu", no_argument, NULL, OPT_OFFCPU },
		{ "wall", no_argument, NULL, OPT_WALL },
		{ "runqueue", no_argument, NULL, OPT_RUNQUEUE },
		{ "min-block", required_argument, NULL, OPT_MIN_BLOCK },
		{ "pid", required_argument, NULL, OPT_PID },
		{ "tid", required_argument, NULL, OPT_TID },
		{ "comm", required_argument, NULL, OPT_COMM },
		{ "time", required_argument, NULL, OPT_TIME },
		{ "per-thread", no_argument, NULL, OPT_PER_THREAD },
		{ "complete", no_argument, NULL, OPT_COMPLETE },
		{ "python", no_argument, NULL, OPT_PYTHON },
		{ "from-call", required_argument, NULL, OPT_FROM_CALL },
		{ "cut", no_argument, NULL, OPT_CUT },
		{ "lines", no_argument, NULL, OPT_LINES },
		{ "max-spans", required_argument, NULL, OPT_MAX_SPANS },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const struct profile_filter *f = &o->sel.filter;
	uint64_t u;
	int c, err;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":i:o:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			o->input = optarg;
			break;
		case 'o':
			if (!*optarg)
				return usage_error("report", "-o needs a file name");
			o->output = optarg;
			break;
		case OPT_FOLDED:
		case OPT_SVG:
		case OPT_TOP:
		case OPT_PPROF:
		case OPT_TRACE:
		case OPT_CALLS:
		case OPT_MEMORY:
		case OPT_RANKS:
		case OPT_SPEEDSCOPE:
		case OPT_HINTS:
		case OPT_OPS:
			err = set_format(o, (enum report_format)(FMT_FOLDED + c - OPT_FOLDED));
			if (err)
				return err;
			break;
		case 'n':
			if (parse_u64(optarg, 10, 0, SIZE_MAX, &u))
				return usage_error("report", "-n takes a number of rows, got '%s'",
						   optarg);
			o->top.rows = (size_t)u;
			o->rows_set = "-n";
			break;
		case OPT_BY:
			if (!strcmp(optarg, "function"))
				o->top.by = TOP_BY_FUNCTION;
			else if (!strcmp(optarg, "module"))
				o->top.by = TOP_BY_MODULE;
			else if (!strcmp(optarg, "kind"))
				o->top.by = TOP_BY_KIND;
			else if (!strcmp(optarg, "process"))
				o->top.by = TOP_BY_PROCESS;
			else if (!strcmp(optarg, "caller"))
				o->by_caller = true;
			else
				return usage_error(
					"report",
					"--by takes function, module, kind, process or caller, got '%s'",
					optarg);
			if (!o->by_caller)
				o->top_only = "--by";
			break;
		case OPT_SORT:
			if (strcmp(optarg, "self") && strcmp(optarg, "total"))
				return usage_error("report", "--sort takes self or total, got '%s'",
						   optarg);
			o->top.by_total = !strcmp(optarg, "total");
			o->rows_set = "--sort";
			break;
		case OPT_LINES:
			o->lines = true;
			break;
		case OPT_MAX_SPANS:
			if (parse_u64(optarg, 10, 0, UINT64_MAX, &u))
				return usage_error("report",
						   "--max-spans takes a number of spans per thread "
						   "(0: no bound), got '%s'",
						   optarg);
			o->trace.max_spans = u;
			o->max_spans_set = true;
			break;
		case OPT_FAULTS:
			o->faults = true;
			break;
		case 'h':
			report_usage(stdout);
			return -1;
		case ':':
			return usage_error("report", "option '%s' needs a value", argv[optind - 1]);
		default:
			if (!select_opts__owns(c))
				return usage_error("report", "unknown option '%s'",
						   argv[optind - 1]);
			err = select_opts__parse(&o->sel, "report", c, optarg);
			if (err)
				return err;
			break;
		}
	}
	if (optind < argc)
		return usage_error("report", "unexpected argument '%s'", argv[optind]);
	if (o->format == FMT_NONE)
		return usage_error("report",
				   "choose an output: --folded, --svg, --top, --pprof, --trace, "
				   "--speedscope, --calls, --memory, --ranks, --hints or --ops");
	if (o->by_caller && o->format != FMT_CALLS && o->format != FMT_OPS)
		return usage_error("report", "--by caller applies to --calls and --ops only");
	if (o->faults && (o->sel.offcpu || o->sel.wall || o->sel.runqueue ||
			  o->format == FMT_CALLS || o->format == FMT_OPS))
		return usage_error("report", "--faults draws page faults only: not with --offcpu, "
					     "--wall, --runqueue, --calls or --ops");
	err = select_opts__check(&o->sel, "report", o->format == FMT_SVG);
	if (err)
		return err;
	if (o->max_spans_set && o->format != FMT_TRACE)
		return usage_error("report", "--max-spans applies to --trace only");
	if (!o->max_spans_set)
		o->trace.max_bytes = DEFAULT_TRACE_BYTES;
	if (o->top_only && o->format != FMT_TOP)
		return usage_error("report", "%s applies to --top only", o->top_only);
	if (o->rows_set && o->format != FMT_TOP && o->format != FMT_OPS)
		return usage_error("report", "%s applies to --top and --ops only", o->rows_set);
	if (f->reverse && o->format != FMT_SVG && o->format != FMT_FOLDED)
		return usage_error("report", "--reverse applies to --svg and --folded only");
	if (f->reverse && o->sel.svg.flamechart)
		return usage_error("report", "--reverse and --flamechart do not go together");
	return 0;
}

static void report_health(const char *path, const struct profile *p)
{
	const struct pf_meta *m = profile__cmeta(p);

	if (!m->finalized)
		warning("%s was not finalized (the recorder was killed); showing what it holds",
			path);
	if (m->lost)
		warning("%llu samples were lost while recording (ring buffer overflow); the graph "
			"undercounts",
			(unsigned long long)m->lost);
	if (profile__nr_samples(p) == 0)
		warning("%s holds no samples", path);
}

/*
 * The recording keeps a frame per source line; reports draw a frame per
 * function (or per line with --lines). pprof keeps the lines itself.
 */
static int relabel(struct profile **p, bool lines)
{
	struct profile *q;

	if (!profile__has_lines(*p))
		return 0;
	q = profile__relabel(*p, lines);
	if (!q)
		return -ENOMEM;
	profile__free(*p);
	*p = q;
	return 0;
}

static void kinds_present(const struct profile *p, bool present[SAMPLE_KIND_MAX])
{
	size_t n = profile__nr_samples(p);

	memset(present, 0, SAMPLE_KIND_MAX * sizeof(*present));
	for (size_t i = 0; i < n; i++) {
		uint32_t k = profile__get_sample(p, i)->kind;

		if (k < SAMPLE_KIND_MAX)
			present[k] = true;
	}
}

/* The sample kinds and weighing the options ask for. */
/* The samples a report draws: those of the kinds selected (none selected: on-CPU). */
static size_t drawn_samples(const struct profile *p, const struct render_select *sel)
{
	bool any = false;
	size_t n = 0;

	for (int k = 0; k < SAMPLE_KIND_MAX; k++)
		any |= sel->kinds[k];
	for (size_t i = 0; i < profile__nr_samples(p); i++) {
		uint32_t kind = profile__get_sample(p, i)->kind;

		n += any ? sel->kinds[kind] : kind == SAMPLE_ONCPU;
	}
	return n;
}

static struct render_select selection(const struct report_opts *o, const struct profile *p)
{
	const struct select_opts *so = &o->sel;
	struct render_select sel = { .kinds = { [SAMPLE_ONCPU] = true } };
	bool present[SAMPLE_KIND_MAX];

	kinds_present(p, present);
	if (o->faults) {
		if (!present[SAMPLE_FAULT])
			warning("%s holds no page faults: it was recorded with --no-faults, by attaching, "
				"or before dlflame sampled them",
				o->input);
		/* weighted: folded counts in kB touched */
		return (struct render_select){ .kinds = { [SAMPLE_FAULT] = true },
					       .weight_ns = true };
	}
	if (o->format == FMT_MEMORY) {
		if (!present[SAMPLE_RSS])
			warning("%s holds no resident-set samples (recorded by an older dlflame, or "
				"imported from perf.data)",
				o->input);
		return (struct render_select){
			.kinds = { [SAMPLE_RSS] = true, [SAMPLE_FAULT] = true }
		};
	}
	if (o->format == FMT_RANKS) {
		if (!present[SAMPLE_OFFCPU])
			warning("%s holds no off-CPU samples: the ranks' waiting is not known",
				o->input);
		return (struct render_select){
			.kinds = { [SAMPLE_ONCPU] = true, [SAMPLE_OFFCPU] = true },
			.weight_ns = true
		};
	}
	if (o->format == FMT_CALLS) {
		if (!present[SAMPLE_CALL])
			warning("%s holds no calls: record with --probe FUNCTION", o->input);
		return (struct render_select){ .kinds = { [SAMPLE_CALL] = true } };
	}
	if (o->format == FMT_PPROF && !so->offcpu && !so->wall && !so->runqueue) {
		/* pprof keeps each kind in its own sample type: export them all */
		sel.kinds[SAMPLE_OFFCPU] = present[SAMPLE_OFFCPU];
		sel.kinds[SAMPLE_RUNQUEUE] = present[SAMPLE_RUNQUEUE];
		return sel;
	}
	if (o->format == FMT_SPEEDSCOPE && !so->offcpu && !so->wall) {
		/* speedscope: off-CPU profiles beside the on-CPU ones when there are any */
		sel = select_opts__select(so);
		sel.kinds[SAMPLE_OFFCPU] = present[SAMPLE_OFFCPU];
		sel.weight_ns = true;
		return sel;
	}
	if ((so->offcpu || so->wall) && !present[SAMPLE_OFFCPU])
		warning("%s holds no off-CPU samples: it was recorded without context switches",
			o->input);
	if (so->runqueue && !present[SAMPLE_RUNQUEUE])
		warning("%s holds no runqueue samples", o->input);
	return select_opts__select(so);
}

static int add_schema(void *ctx, const char *name, size_t len)
{
	int err = render_op_names_add(ctx, name, len);

	return err == -EINVAL ? 0 : err;
}

/*
 * The overloads of the operators the profile's frames enter: read from
 * the schemas of the libraries that define them, when those files are
 * here and the same build (else the operators keep their C++ names,
 * aten::add_Tensor for aten::add.Tensor, and a warning says why).
 */
static void load_op_names(const char *input, const struct profile *p, struct render_op_names *names)
{
	struct u64map done;
	size_t nstr = profile__nr_strings(p);

	u64map_init(&done);
	for (size_t i = 0; i < profile__nr_frames(p); i++) {
		const struct pf_frame *fr = profile__get_frame(p, (uint32_t)i);
		struct render_op_ref ref;
		uint64_t one;
		struct stat st;
		char *path;
		int err;

		if (fr->name >= nstr || !fr->module || fr->module >= nstr ||
		    u64map_get(&done, fr->module, &one) ||
		    !render_op_parse(profile__str(p, fr->name), profile__str_len(p, fr->name),
				     &ref))
			continue;
		if (u64map_put(&done, fr->module, 1))
			break;
		/* a profile names modules by their file's name: the library directories' */
		path = strchr(profile__str(p, fr->module), '/')
			       ? strdup(profile__str(p, fr->module))
			       : probes_find_library(profile__str(p, fr->module));
		/* named by the profile: only a regular file is opened (a FIFO would block) */
		err = !path		? -ENOENT
		      : stat(path, &st) ? -errno
		      : !S_ISREG(st.st_mode)
			      ? -EINVAL
			      : symbolizer__op_schemas(path,
						       fr->build_id && fr->build_id < nstr
							       ? profile__str(p, fr->build_id)
							       : NULL,
						       add_schema, names);
		free(path);
		if (err)
			warning("%s: operator overloads not known (%s: %s): operators keep their "
				"C++ names, aten::add_Tensor for aten::add.Tensor",
				input, profile__str(p, fr->module),
				err == -ESTALE ? "another build than the recorded one"
					       : strerror(-err));
	}
	u64map_free(&done);
}

static int render(struct report_opts *o, const struct profile *p, const struct render_select *sel,
		  FILE *f)
{
	switch (o->format) {
	case FMT_FOLDED:
		return render_folded(p, sel, f);
	case FMT_SVG:
		return render_svg(p, sel, &o->sel.svg, f);
	case FMT_TOP:
		return render_top(p, sel, &o->top, f);
	case FMT_PPROF:
		return render_pprof_ops(p, sel, &o->op_names, f);
	case FMT_CALLS:
		return render_calls(p, sel, o->by_caller, f);
	case FMT_MEMORY:
		return render_memory(p, f);
	case FMT_RANKS:
		return render_ranks(p, f);
	case FMT_SPEEDSCOPE: {
		struct speedscope_opts so = { .wall = o->sel.wall, .lines = o->lines };

		return render_speedscope(p, sel, &so, f);
	}
	case FMT_OPS: {
		struct ops_opts oo = { .names = &o->op_names,
				       .by_caller = o->by_caller,
				       .by_root =
					       o->sel.filter.per_rank || o->sel.filter.per_thread,
				       .by_total = o->top.by_total,
				       .rows = o->top.rows };

		return render_ops(p, sel, &oo, f);
	}
	default:
		o->trace.ops = &o->op_names;
		return render_trace_bounded(p, sel, &o->trace, &o->traced, f);
	}
}

int cmd_report(int argc, char **argv)
{
	struct report_opts o = { .input = DEFAULT_INPUT, .top.rows = DEFAULT_TOP_ROWS };

	render_op_names_init(&o.op_names);
	struct render_select sel;
	struct profile *p = NULL, *view = NULL;
	struct quality_hints hints = { 0 };
	struct output out;
	char subtitle[512], ends[256];
	int err, cerr, ret = EXIT_BAD;

	err = parse_args(argc, argv, &o);
	if (err) {
		select_opts__free(&o.sel);
		return err < 0 ? EXIT_OK : err;
	}
	if (!o.output)
		o.output = default_output[o.format];

	/* a dlflame profile or a perf.data file; load_input says what went wrong */
	if (load_input(o.input, &p)) {
		select_opts__free(&o.sel);
		return EXIT_BAD;
	}
	report_health(o.input, p);
	/* before relabelling, which keeps only the frames: what the recording stored */
	err = quality_hints_load(p, &hints);
	if (err) {
		error("cannot read %s: %s", o.input,
		      err == -EINVAL ? "the profile is inconsistent (a corrupt file?)"
				     : strerror(-err));
		goto out;
	}
	if (o.format == FMT_HINTS) {
		err = output_open(&out, o.output);
		if (err) {
			error("cannot create %s: %s", o.output, strerror(-err));
			goto out;
		}
		err = quality_hints_list(&hints, out.f);
		cerr = output_close(&out, err == 0);
		err = err ? err : cerr;
		if (err) {
			error("cannot write %s: %s", o.output ? o.output : "standard output",
			      strerror(-err));
			goto out;
		}
		ret = EXIT_OK;
		goto out;
	}
	/* a probed function's caller is the nearest frame not of the interpreter: a Python line */
	if (o.format == FMT_CALLS && o.by_caller)
		o.sel.filter.python = true;
	/* one row per process: each thread named after its process (and container) */
	if (o.format == FMT_TOP && o.top.by == TOP_BY_PROCESS)
		o.sel.filter.per_process = true;
	/* a profile per thread, named as --per-thread and --per-rank name it */
	if (o.format == FMT_SPEEDSCOPE)
		o.sel.filter.per_thread = o.sel.filter.per_rank = true;
	if (o.format == FMT_OPS || o.format == FMT_TRACE || o.format == FMT_PPROF)
		load_op_names(o.input, p, &o.op_names);
	/* pprof and speedscope keep source files and lines in frames of their own */
	if (o.format != FMT_PPROF && o.format != FMT_SPEEDSCOPE) {
		/* --ops --by caller names the Python line */
		err = relabel(&p, o.lines || (o.format == FMT_OPS && o.by_caller));
		if (err) {
			error("cannot relabel %s: %s", o.input, strerror(-err));
			goto out;
		}
	}
	sel = selection(&o, p);
	{
		/* --ops: the probed operators' calls go through the same filters */
		bool kinds[SAMPLE_KIND_MAX];

		memcpy(kinds, sel.kinds, sizeof(kinds));
		if (o.format == FMT_OPS)
			kinds[SAMPLE_CALL] = true;
		err = profile__filter(p, kinds, &o.sel.filter, &view);
	}
	if (err == -ENOENT) {
		error("--from-call: %s has no calls of %s (record it with --probe %s)", o.input,
		      o.sel.filter.from_call, o.sel.filter.from_call);
		ret = EXIT_USAGE;
		goto out;
	}
	if (err) {
		error("cannot filter %s: %s", o.input, strerror(-err));
		goto out;
	}
	if (view && profile__nr_samples(view) == 0 && profile__nr_samples(p))
		warning("no samples of %s match the filters", o.input);

	err = output_open(&out, o.output);
	if (err) {
		error("cannot create %s: %s", o.output, strerror(-err));
		goto out;
	}
	err = quality_ends_line(view ? view : p, &sel, ends, sizeof(ends));
	if (err) {
		output_close(&out, false);
		error("cannot read %s: %s", o.input,
		      err == -EINVAL ? "the profile is inconsistent (a corrupt file?)"
				     : strerror(-err));
		goto out;
	}
	if (o.format == FMT_SVG) {
		/* the user's subtitle first; then what the graph is worth */
		int n = 0;

		if (o.sel.svg.subtitle)
			n = snprintf(subtitle, sizeof(subtitle), "%s", o.sel.svg.subtitle);
		if (profile__cmeta(p)->lost && n < (int)sizeof(subtitle))
			n += snprintf(subtitle + n, sizeof(subtitle) - (size_t)n,
				      "%s%llu samples lost while recording", n ? "; " : "",
				      (unsigned long long)profile__cmeta(p)->lost);
		if (*ends && n < (int)sizeof(subtitle))
			n += snprintf(subtitle + n, sizeof(subtitle) - (size_t)n, "%s%s",
				      n ? "; " : "", ends);
		if (n)
			o.sel.svg.subtitle = subtitle;
	}
	err = render(&o, view ? view : p, &sel, out.f);
	cerr = output_close(&out, err == 0);
	if (err == -ENOENT && o.format == FMT_RANKS) {
		error("%s holds no ranks: no recorded process had RANK, OMPI_COMM_WORLD_RANK, "
		      "PMI_RANK or SLURM_PROCID in its environment (record the launcher, or "
		      "attach to the ranks)",
		      o.input);
		goto out;
	}
	if (!err)
		err = cerr;
	if (err) {
		error("cannot write %s: %s", o.output ? o.output : "standard output",
		      err == -EINVAL ? "the profile is inconsistent (a corrupt file?)"
				     : strerror(-err));
		goto out;
	}
	if (o.output && strcmp(o.output, "-"))
		info("wrote %s (%zu samples)", o.output, drawn_samples(view ? view : p, &sel));
	if (o.format == FMT_TRACE && o.traced.tracks_cut) {
		char bound[64];

		if (o.trace.max_spans)
			snprintf(bound, sizeof(bound), "%llu spans a thread",
				 (unsigned long long)o.trace.max_spans);
		else
			snprintf(bound, sizeof(bound), "%llu MB in all",
				 (unsigned long long)(o.trace.max_bytes / 1000000));
		info("the trace keeps each thread's longest spans (%s): %llu shorter spans (under "
		     "%.3g ms in %zu track%s) are hidden, counted in the span above them; --time "
		     "START,END shows a stretch in full, --max-spans N changes the bound",
		     bound, (unsigned long long)o.traced.hidden, (double)o.traced.min_ns / 1e6,
		     o.traced.tracks_cut, o.traced.tracks_cut == 1 ? "" : "s");
	}
	/* --top has it in its header */
	if (*ends && o.format != FMT_TOP && o.format != FMT_CALLS && o.format != FMT_MEMORY &&
	    o.format != FMT_RANKS && o.format != FMT_OPS)
		info("%s", ends);
	/* once, where frames are shown */
	if (o.format != FMT_MEMORY)
		quality_hint_line(&hints, strcmp(o.input, DEFAULT_INPUT) && strcmp(o.input, "-")
						  ? o.input
						  : NULL);
	ret = EXIT_OK;
out:
	quality_hints_free(&hints);
	profile__free(view);
	profile__free(p);
	select_opts__free(&o.sel);
	render_op_names_free(&o.op_names);
	return ret;
}
