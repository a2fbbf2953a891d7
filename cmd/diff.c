/* SPDX-License-Identifier: MIT */
/* dlflame diff: two profiles -> a differential flame graph or difffolded text. */
#include "cmd.h"
#include "import.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile.h"
#include "render/render.h"
#include "util/util.h"

#define DEFAULT_DIFF_SVG "diff.svg"

struct diff_opts {
	const char *paths[2]; /* base, new */
	const char *output;
	bool svg, folded;
	bool no_normalize;
	bool offcpu, wall, runqueue;
	const char *svg_only;
	struct svg_opts svg_opts;
	struct render_filter filter;
	const char **comms;
	size_t nr_comms;
};

static void diff_usage(FILE *f)
{
	fputs("Usage: dlflame diff BASE NEW (--svg | --folded) [-o OUT] [OPTIONS]\n\n"
	      "Compare two profiles (dlflame.data or perf.data): a flame graph with the shape\n"
	      "of NEW, red where a frame grew, blue where it shrank, or folded lines\n"
	      "`stack count_base count_new` as FlameGraph's difffolded.pl writes them. BASE's\n"
	      "counts are scaled to NEW's total first, so that runs of different lengths\n"
	      "compare.\n\n"
	      "Options:\n"
	      "      --svg             differential SVG, diff.svg unless -o\n"
	      "      --folded          difffolded text, stdout unless -o\n"
	      "  -o, --output OUT      where to write ('-' for stdout)\n"
	      "      --no-normalize    compare raw counts\n"
	      "      --offcpu          compare time blocked off-CPU\n"
	      "      --wall            compare on-CPU and off-CPU time together\n"
	      "      --runqueue        also time waiting for a CPU\n"
	      "      --min-block USEC  drop off-CPU blocks shorter than USEC microseconds\n"
	      "      --comm NAME       only threads named NAME (repeat for more)\n"
	      "      --time START,END  only seconds START to END from each profile's start\n"
	      "      --title TEXT, --subtitle TEXT, --width PX, --minwidth PX|PCT%,\n"
	      "      --countname NAME, --inverted   as for 'dlflame report --svg'\n"
	      "  -h, --help            show this help\n\n"
	      "Examples:\n"
	      "  dlflame diff before.data after.data --svg -o diff.svg\n"
	      "  dlflame diff before.data after.data --folded | flamegraph.pl > diff.svg\n",
	      f);
}

static int parse_args(int argc, char **argv, struct diff_opts *o)
{
	enum {
		OPT_SVG = 256,
		OPT_FOLDED,
		OPT_NO_NORMALIZE,
		OPT_OFFCPU,
		OPT_WALL,
		OPT_RUNQUEUE,
		OPT_MIN_BLOCK,
		OPT_COMM,
		OPT_TIME,
		OPT_TITLE,
		OPT_SUBTITLE,
		OPT_WIDTH,
		OPT_MINWIDTH,
		OPT_COUNTNAME,
		OPT_INVERTED,
	};
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "svg", no_argument, NULL, OPT_SVG },
		{ "folded", no_argument, NULL, OPT_FOLDED },
		{ "no-normalize", no_argument, NULL, OPT_NO_NORMALIZE },
		{ "offcpu", no_argument, NULL, OPT_OFFCPU },
		{ "wall", no_argument, NULL, OPT_WALL },
		{ "runqueue", no_argument, NULL, OPT_RUNQUEUE },
		{ "min-block", required_argument, NULL, OPT_MIN_BLOCK },
		{ "comm", required_argument, NULL, OPT_COMM },
		{ "time", required_argument, NULL, OPT_TIME },
		{ "title", required_argument, NULL, OPT_TITLE },
		{ "subtitle", required_argument, NULL, OPT_SUBTITLE },
		{ "width", required_argument, NULL, OPT_WIDTH },
		{ "minwidth", required_argument, NULL, OPT_MINWIDTH },
		{ "countname", required_argument, NULL, OPT_COUNTNAME },
		{ "inverted", no_argument, NULL, OPT_INVERTED },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct render_filter *f = &o->filter;
	size_t nr_paths = 0;
	uint64_t u;
	int c;

	optind = 1;
	opterr = 0;
	/* "-": BASE and NEW may come before, between or after the options */
	while ((c = getopt_long(argc, argv, "-:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 1:
			if (nr_paths == 2)
				return usage_error("diff", "unexpected argument '%s'", optarg);
			o->paths[nr_paths++] = optarg;
			break;
		case 'o':
			if (!*optarg)
				return usage_error("diff", "-o needs a file name");
			o->output = optarg;
			break;
		case OPT_SVG:
			o->svg = true;
			break;
		case OPT_FOLDED:
			o->folded = true;
			break;
		case OPT_NO_NORMALIZE:
			o->no_normalize = true;
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
				return usage_error(
					"diff", "--min-block takes microseconds, got '%s'", optarg);
			f->min_block = u * 1000;
			break;
		case OPT_COMM: {
			const char **v = realloc(o->comms, (o->nr_comms + 1) * sizeof(*v));

			if (!v)
				return error("out of memory");
			v[o->nr_comms++] = optarg;
			o->comms = v;
			f->comms = v;
			f->nr_comms = o->nr_comms;
			break;
		}
		case OPT_TIME:
			if (render_parse_time_range(optarg, &f->time_start, &f->time_end))
				return usage_error(
					"diff",
					"--time takes START,END in seconds from the start, "
					"START < END (either may be empty), got '%s'",
					optarg);
			f->has_time = true;
			break;
		case OPT_TITLE:
			o->svg_opts.title = optarg;
			o->svg_only = "--title";
			break;
		case OPT_SUBTITLE:
			o->svg_opts.subtitle = optarg;
			o->svg_only = "--subtitle";
			break;
		case OPT_WIDTH:
			if (parse_u64(optarg, 10, 100, 100000, &u))
				return usage_error("diff",
						   "--width takes 100 to 100000 pixels, got '%s'",
						   optarg);
			o->svg_opts.width = (unsigned)u;
			o->svg_only = "--width";
			break;
		case OPT_MINWIDTH: {
			size_t len = strlen(optarg);
			char buf[64];
			int err;

			o->svg_opts.minwidth_pct = len && optarg[len - 1] == '%';
			if (o->svg_opts.minwidth_pct && len < sizeof(buf)) {
				memcpy(buf, optarg, len - 1);
				buf[len - 1] = '\0';
				err = parse_double(buf, 0, 100, &o->svg_opts.minwidth);
			} else {
				err = o->svg_opts.minwidth_pct
					      ? -EINVAL
					      : parse_double(optarg, 0, 10000,
							     &o->svg_opts.minwidth);
			}
			if (err)
				return usage_error("diff",
						   "--minwidth takes pixels (0 to 10000) or a "
						   "percentage (0%% to 100%%), got '%s'",
						   optarg);
			o->svg_only = "--minwidth";
			break;
		}
		case OPT_COUNTNAME:
			o->svg_opts.countname = optarg;
			o->svg_only = "--countname";
			break;
		case OPT_INVERTED:
			o->svg_opts.inverted = true;
			o->svg_only = "--inverted";
			break;
		case 'h':
			diff_usage(stdout);
			return -1;
		case ':':
			return usage_error("diff", "option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("diff", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (nr_paths < 2)
		return usage_error("diff", "name two profiles: BASE and NEW");
	if (o->svg == o->folded)
		return usage_error("diff", "choose one output: --svg or --folded");
	if (o->offcpu && o->wall)
		return usage_error("diff", "--wall already includes --offcpu: choose one");
	if (f->min_block && !o->offcpu && !o->wall && !o->runqueue)
		return usage_error("diff", "--min-block applies to --offcpu, --wall or --runqueue");
	if (o->svg_only && !o->svg)
		return usage_error("diff", "%s applies to --svg only", o->svg_only);
	return 0;
}

/* A profile or perf.data, its per-line frames folded into one per function. */
static int read_profile(const char *path, struct profile **p)
{
	struct profile *q;

	if (load_input(path, p))
		return EXIT_BAD;
	q = profile__relabel(*p, false);
	profile__free(*p);
	*p = q;
	return q ? 0 : error("cannot read %s: %s", path, strerror(ENOMEM));
}

int cmd_diff(int argc, char **argv)
{
	struct diff_opts o = { 0 };
	struct render_select sel = { .kinds = { [SAMPLE_ONCPU] = true } };
	struct profile *p[2] = { NULL, NULL }, *view[2] = { NULL, NULL };
	struct output out;
	int err, cerr, ret = EXIT_BAD;

	err = parse_args(argc, argv, &o);
	if (err) {
		free(o.comms);
		return err < 0 ? EXIT_OK : err;
	}
	if (!o.output && o.svg)
		o.output = DEFAULT_DIFF_SVG;
	if (o.offcpu)
		sel.kinds[SAMPLE_ONCPU] = false;
	sel.kinds[SAMPLE_OFFCPU] = o.offcpu || o.wall;
	sel.kinds[SAMPLE_RUNQUEUE] = o.runqueue;
	sel.weight_ns = o.offcpu || o.wall || o.runqueue;

	for (int i = 0; i < 2; i++) {
		if (read_profile(o.paths[i], &p[i]))
			goto out;
		if (!profile__cmeta(p[i])->finalized)
			warning("%s was not finalized (the recorder was killed)", o.paths[i]);
		if (profile__cmeta(p[i])->lost)
			warning("%s: %llu samples were lost while recording", o.paths[i],
				(unsigned long long)profile__cmeta(p[i])->lost);
		err = render_filter(p[i], &sel, &o.filter, &view[i]);
		if (err) {
			error("cannot filter %s: %s", o.paths[i], strerror(-err));
			goto out;
		}
	}
	err = output_open(&out, o.output);
	if (err) {
		error("cannot create %s: %s", o.output, strerror(-err));
		goto out;
	}
	if (o.svg)
		err = render_diff_svg(view[0] ? view[0] : p[0], view[1] ? view[1] : p[1], &sel,
				      !o.no_normalize, &o.svg_opts, out.f);
	else
		err = render_diff_folded(view[0] ? view[0] : p[0], view[1] ? view[1] : p[1], &sel,
					 !o.no_normalize, out.f);
	cerr = output_close(&out, err == 0);
	if (!err)
		err = cerr;
	if (err) {
		error("cannot write %s: %s", o.output ? o.output : "standard output",
		      err == -EINVAL ? "a profile is inconsistent (a corrupt file?)"
				     : strerror(-err));
		goto out;
	}
	if (o.output && strcmp(o.output, "-"))
		info("wrote %s", o.output);
	ret = EXIT_OK;
out:
	for (int i = 0; i < 2; i++) {
		profile__free(view[i]);
		profile__free(p[i]);
	}
	free(o.comms);
	return ret;
}
