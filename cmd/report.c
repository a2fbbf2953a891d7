/* SPDX-License-Identifier: MIT */
/*
 * dlflame report: a profile (or a perf.data) -> folded stacks, an SVG flame
 * graph, a top table, pprof or a Chrome trace, after the filters every
 * report takes.
 */
#include "cmd.h"
#include "import.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile.h"
#include "render/render.h"
#include "util/util.h"

#define DEFAULT_INPUT "dlflame.data"
#define DEFAULT_TOP_ROWS 25

enum report_format { FMT_NONE, FMT_FOLDED, FMT_SVG, FMT_TOP, FMT_PPROF, FMT_TRACE };

/* Where each format goes without -o; NULL: standard output. */
static const char *const default_output[] = {
	[FMT_SVG] = "flame.svg",
	[FMT_PPROF] = "profile.pb.gz",
	[FMT_TRACE] = "trace.json",
};

struct report_opts {
	const char *input;
	const char *output;
	enum report_format format;
	bool offcpu, wall, runqueue;
	bool lines;
	bool min_block_set;
	const char *svg_only; /* an SVG option given, for the error message */
	const char *top_only; /* a --top option given */
	struct svg_opts svg;
	struct top_opts top;
	struct render_filter filter;
	uint32_t *pids, *tids;
	size_t nr_pids, nr_tids;
	const char **comms;
	size_t nr_comms;
};

static void report_usage(FILE *f)
{
	fputs("Usage: dlflame report [-i FILE] (--folded | --svg | --top | --pprof | --trace)\n"
	      "                      [-o OUT] [OPTIONS]\n\n"
	      "Draw a recorded profile.\n\n"
	      "Output (choose one):\n"
	      "      --folded          folded stacks (comm;...;leaf count), stdout unless -o\n"
	      "      --svg             interactive SVG flame graph, flame.svg unless -o\n"
	      "      --top             self and total per function, stdout unless -o\n"
	      "      --pprof           gzip'ed pprof profile.proto, profile.pb.gz unless -o\n"
	      "      --trace           Chrome Trace Event JSON timeline, trace.json unless -o\n"
	      "  -i, --input FILE      profile or perf.data to read ('-': a perf pipe on stdin;\n"
	      "                        default dlflame.data)\n"
	      "  -o, --output OUT      where to write ('-' for stdout)\n\n"
	      "Samples (default: on-CPU, counted):\n"
	      "      --offcpu          time blocked off-CPU (folded counts in microseconds)\n"
	      "      --wall            on-CPU and off-CPU time in one graph, off-CPU in blue\n"
	      "      --runqueue        also time runnable but waiting for a CPU, under a\n"
	      "                        [runqueue] frame\n"
	      "      --min-block USEC  drop off-CPU blocks shorter than USEC microseconds\n\n"
	      "Filters (every output):\n"
	      "      --pid PID[,PID]   only these processes\n"
	      "      --tid TID[,TID]   only these threads\n"
	      "      --comm NAME       only threads named NAME (repeat for more)\n"
	      "      --time START,END  only seconds START to END from the start (either may be\n"
	      "                        empty), e.g. --time 5, to leave out warm-up\n"
	      "      --per-thread      root each thread's stacks under a comm-PID/TID frame\n"
	      "      --reverse         leaf first: who calls the hot leaves (--svg, --folded)\n"
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
	      "Top:\n"
	      "  -n, --rows N          print N rows (default 25; 0: all)\n"
	      "      --by WHAT         function (default), module (JIT code as [jit]) or kind\n"
	      "      --sort KEY        self (default) or total\n\n"
	      "  -h, --help            show this help\n\n"
	      "Examples:\n"
	      "  dlflame report --svg\n"
	      "  dlflame report --top -n 10 --time 5,\n"
	      "  dlflame report --wall --svg --per-thread -o wall.svg\n"
	      "  dlflame report --folded | flamegraph.pl > flame.svg\n"
	      "  dlflame report --pprof && pprof -http=: profile.pb.gz\n"
	      "  dlflame report --trace      # then open trace.json in ui.perfetto.dev\n",
	      f);
}

static int set_format(struct report_opts *o, enum report_format f)
{
	if (o->format != FMT_NONE && o->format != f)
		return usage_error("report", "choose one of --folded, --svg, --top, --pprof and "
					     "--trace");
	o->format = f;
	return 0;
}

static int parse_minwidth(const char *arg, struct svg_opts *svg)
{
	size_t len = strlen(arg);
	char buf[64];

	if (len && arg[len - 1] == '%' && len < sizeof(buf)) {
		memcpy(buf, arg, len - 1);
		buf[len - 1] = '\0';
		svg->minwidth_pct = true;
		return parse_double(buf, 0, 100, &svg->minwidth);
	}
	svg->minwidth_pct = false;
	return parse_double(arg, 0, 10000, &svg->minwidth);
}

static int parse_args(int argc, char **argv, struct report_opts *o)
{
	enum {
		OPT_FOLDED = 256,
		OPT_SVG,
		OPT_TOP,
		OPT_PPROF,
		OPT_TRACE,
		OPT_TITLE,
		OPT_SUBTITLE,
		OPT_WIDTH,
		OPT_MINWIDTH,
		OPT_COUNTNAME,
		OPT_INVERTED,
		OPT_REVERSE,
		OPT_FLAMECHART,
		OPT_BY,
		OPT_SORT,
		OPT_OFFCPU,
		OPT_WALL,
		OPT_RUNQUEUE,
		OPT_MIN_BLOCK,
		OPT_PID,
		OPT_TID,
		OPT_COMM,
		OPT_TIME,
		OPT_PER_THREAD,
		OPT_LINES,
	};
	static const struct option longopts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "folded", no_argument, NULL, OPT_FOLDED },
		{ "svg", no_argument, NULL, OPT_SVG },
		{ "top", no_argument, NULL, OPT_TOP },
		{ "pprof", no_argument, NULL, OPT_PPROF },
		{ "trace", no_argument, NULL, OPT_TRACE },
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
		{ "lines", no_argument, NULL, OPT_LINES },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct render_filter *f = &o->filter;
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
			err = set_format(o, (enum report_format)(FMT_FOLDED + c - OPT_FOLDED));
			if (err)
				return err;
			break;
		case OPT_TITLE:
			o->svg.title = optarg;
			o->svg_only = "--title";
			break;
		case OPT_SUBTITLE:
			o->svg.subtitle = optarg;
			o->svg_only = "--subtitle";
			break;
		case OPT_WIDTH:
			if (parse_u64(optarg, 10, 100, 100000, &u))
				return usage_error("report",
						   "--width takes 100 to 100000 pixels, got '%s'",
						   optarg);
			o->svg.width = (unsigned)u;
			o->svg_only = "--width";
			break;
		case OPT_MINWIDTH:
			if (parse_minwidth(optarg, &o->svg))
				return usage_error("report",
						   "--minwidth takes pixels (0 to 10000) or a "
						   "percentage (0%% to 100%%), got '%s'",
						   optarg);
			o->svg_only = "--minwidth";
			break;
		case OPT_COUNTNAME:
			o->svg.countname = optarg;
			o->svg_only = "--countname";
			break;
		case OPT_INVERTED:
			o->svg.inverted = true;
			o->svg_only = "--inverted";
			break;
		case OPT_FLAMECHART:
			o->svg.flamechart = true;
			o->svg_only = "--flamechart";
			break;
		case OPT_REVERSE:
			f->reverse = true;
			break;
		case 'n':
			if (parse_u64(optarg, 10, 0, SIZE_MAX, &u))
				return usage_error("report", "-n takes a number of rows, got '%s'",
						   optarg);
			o->top.rows = (size_t)u;
			o->top_only = "-n";
			break;
		case OPT_BY:
			if (!strcmp(optarg, "function"))
				o->top.by = TOP_BY_FUNCTION;
			else if (!strcmp(optarg, "module"))
				o->top.by = TOP_BY_MODULE;
			else if (!strcmp(optarg, "kind"))
				o->top.by = TOP_BY_KIND;
			else
				return usage_error("report",
						   "--by takes function, module or kind, got '%s'",
						   optarg);
			o->top_only = "--by";
			break;
		case OPT_SORT:
			if (strcmp(optarg, "self") && strcmp(optarg, "total"))
				return usage_error("report", "--sort takes self or total, got '%s'",
						   optarg);
			o->top.by_total = !strcmp(optarg, "total");
			o->top_only = "--sort";
			break;
		case OPT_OFFCPU:
			o->offcpu = true;
			break;
		case OPT_WALL:
			o->wall = true;
			break;
		case OPT_RUNQUEUE:
			o->runqueue = true;
			break;
		case OPT_MIN_BLOCK:
			if (parse_u64(optarg, 10, 0, UINT64_MAX / 1000, &u))
				return usage_error("report",
						   "--min-block takes microseconds, got '%s'",
						   optarg);
			f->min_block = u * 1000;
			o->min_block_set = true;
			break;
		case OPT_PID:
		case OPT_TID:
			err = c == OPT_PID ? render_parse_ids(optarg, &o->pids, &o->nr_pids)
					   : render_parse_ids(optarg, &o->tids, &o->nr_tids);
			f->pids = o->pids;
			f->nr_pids = o->nr_pids;
			f->tids = o->tids;
			f->nr_tids = o->nr_tids;
			if (err == -ENOMEM)
				return error("out of memory");
			if (err)
				return usage_error("report",
						   "%s takes ids like 1234 or 1234,1240, got '%s'",
						   c == OPT_PID ? "--pid" : "--tid", optarg);
			break;
		case OPT_COMM: {
			const char **v = realloc(o->comms, (o->nr_comms + 1) * sizeof(*v));

			if (!v)
				return error("out of memory");
			v[o->nr_comms++] = optarg;
			o->comms = v;
			f->comms = o->comms;
			f->nr_comms = o->nr_comms;
			break;
		}
		case OPT_TIME:
			if (render_parse_time_range(optarg, &f->time_start, &f->time_end))
				return usage_error(
					"report",
					"--time takes START,END in seconds from the start, "
					"START < END (either may be empty), got '%s'",
					optarg);
			f->has_time = true;
			break;
		case OPT_PER_THREAD:
			f->per_thread = true;
			break;
		case OPT_LINES:
			o->lines = true;
			break;
		case 'h':
			report_usage(stdout);
			return -1;
		case ':':
			return usage_error("report", "option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("report", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("report", "unexpected argument '%s'", argv[optind]);
	if (o->format == FMT_NONE)
		return usage_error("report",
				   "choose an output: --folded, --svg, --top, --pprof or --trace");
	if (o->offcpu && o->wall)
		return usage_error("report", "--wall already includes --offcpu: choose one");
	if (o->min_block_set && !o->offcpu && !o->wall && !o->runqueue)
		return usage_error("report",
				   "--min-block applies to --offcpu, --wall or --runqueue");
	if (o->svg_only && o->format != FMT_SVG)
		return usage_error("report", "%s applies to --svg only", o->svg_only);
	if (o->top_only && o->format != FMT_TOP)
		return usage_error("report", "%s applies to --top only", o->top_only);
	if (f->reverse && o->format != FMT_SVG && o->format != FMT_FOLDED)
		return usage_error("report", "--reverse applies to --svg and --folded only");
	if (f->reverse && o->svg.flamechart)
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
	size_t n = profile__nr_frames(*p);
	struct profile *q;
	bool any = false;

	for (size_t i = 0; i < n && !any; i++) {
		const struct pf_frame *f = profile__get_frame(*p, (uint32_t)i);

		any = f->file || f->line;
	}
	if (!any)
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
static struct render_select selection(const struct report_opts *o, const struct profile *p)
{
	struct render_select sel = { .kinds = { [SAMPLE_ONCPU] = true } };
	bool present[SAMPLE_KIND_MAX];

	kinds_present(p, present);
	if (o->format == FMT_PPROF && !o->offcpu && !o->wall && !o->runqueue) {
		/* pprof keeps each kind in its own sample type: export them all */
		sel.kinds[SAMPLE_OFFCPU] = present[SAMPLE_OFFCPU];
		sel.kinds[SAMPLE_RUNQUEUE] = present[SAMPLE_RUNQUEUE];
		return sel;
	}
	if (o->offcpu)
		sel.kinds[SAMPLE_ONCPU] = false;
	if (o->offcpu || o->wall)
		sel.kinds[SAMPLE_OFFCPU] = true;
	if (o->runqueue)
		sel.kinds[SAMPLE_RUNQUEUE] = true;
	if ((o->offcpu || o->wall) && !present[SAMPLE_OFFCPU])
		warning("%s holds no off-CPU samples: it was recorded without context switches",
			o->input);
	if (o->runqueue && !present[SAMPLE_RUNQUEUE])
		warning("%s holds no runqueue samples", o->input);
	sel.weight_ns = sel.kinds[SAMPLE_OFFCPU] || sel.kinds[SAMPLE_RUNQUEUE];
	return sel;
}

static int render(const struct report_opts *o, const struct profile *p,
		  const struct render_select *sel, FILE *f)
{
	switch (o->format) {
	case FMT_FOLDED:
		return render_folded(p, sel, f);
	case FMT_SVG:
		return render_svg(p, sel, &o->svg, f);
	case FMT_TOP:
		return render_top(p, sel, &o->top, f);
	case FMT_PPROF:
		return render_pprof(p, sel, f);
	default:
		return render_trace(p, sel, f);
	}
}

static void free_opts(struct report_opts *o)
{
	free(o->pids);
	free(o->tids);
	free(o->comms);
}

int cmd_report(int argc, char **argv)
{
	struct report_opts o = { .input = DEFAULT_INPUT, .top.rows = DEFAULT_TOP_ROWS };
	struct render_select sel;
	struct profile *p = NULL, *view = NULL;
	struct output out;
	char subtitle[128];
	int err, cerr, ret = EXIT_BAD;

	err = parse_args(argc, argv, &o);
	if (err) {
		free_opts(&o);
		return err < 0 ? EXIT_OK : err;
	}
	if (!o.output)
		o.output = default_output[o.format];

	/* a dlflame profile or a perf.data file; load_input says what went wrong */
	if (load_input(o.input, &p)) {
		free_opts(&o);
		return EXIT_BAD;
	}
	report_health(o.input, p);
	if (o.format != FMT_PPROF) {
		err = relabel(&p, o.lines);
		if (err) {
			error("cannot relabel %s: %s", o.input, strerror(-err));
			goto out;
		}
	}
	sel = selection(&o, p);
	err = render_filter(p, &sel, &o.filter, &view);
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
	if (o.format == FMT_SVG && profile__cmeta(p)->lost && !o.svg.subtitle) {
		snprintf(subtitle, sizeof(subtitle), "%llu samples lost while recording",
			 (unsigned long long)profile__cmeta(p)->lost);
		o.svg.subtitle = subtitle;
	}
	err = render(&o, view ? view : p, &sel, out.f);
	cerr = output_close(&out, err == 0);
	if (!err)
		err = cerr;
	if (err) {
		error("cannot write %s: %s", o.output ? o.output : "standard output",
		      err == -EINVAL ? "the profile is inconsistent (a corrupt file?)"
				     : strerror(-err));
		goto out;
	}
	if (o.output && strcmp(o.output, "-"))
		info("wrote %s (%zu samples)", o.output, profile__nr_samples(view ? view : p));
	ret = EXIT_OK;
out:
	profile__free(view);
	profile__free(p);
	free_opts(&o);
	return ret;
}
