/* SPDX-License-Identifier: MIT */
/* dlflame diff: two profiles -> a differential flame graph or difffolded text. */
#include "cmd.h"
#include "import.h"
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "profile/filter.h"
#include "profile/profile.h"
#include "render/render.h"
#include "util/util.h"

#define DEFAULT_DIFF_SVG "diff.svg"

struct diff_opts {
	const char *paths[2]; /* base, new */
	const char *output;
	bool svg, folded;
	bool no_normalize;
	struct select_opts sel;
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
	      "      --rank N[,M]      only these ranks of a distributed job\n"
	      "      --per-rank        root each rank's stacks under a 'rank N' frame\n"
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
		OPT_SVG = OPT_CMD_BASE,
		OPT_FOLDED,
		OPT_NO_NORMALIZE,
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
		{ "rank", required_argument, NULL, OPT_RANK },
		{ "per-rank", no_argument, NULL, OPT_PER_RANK },
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
	size_t nr_paths = 0;
	int c, err;

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
		case 'h':
			diff_usage(stdout);
			return -1;
		case ':':
			return usage_error("diff", "option '%s' needs a value", argv[optind - 1]);
		default:
			if (!select_opts__owns(c))
				return usage_error("diff", "unknown option '%s'", argv[optind - 1]);
			err = select_opts__parse(&o->sel, "diff", c, optarg);
			if (err)
				return err;
			break;
		}
	}
	if (nr_paths < 2)
		return usage_error("diff", "name two profiles: BASE and NEW");
	if (o->svg == o->folded)
		return usage_error("diff", "choose one output: --svg or --folded");
	/* unlike report, diff has always let --min-block 0 through on its own */
	o->sel.min_block_set = o->sel.filter.min_block != 0;
	return select_opts__check(&o->sel, "diff", o->svg);
}

/* A profile or perf.data, its per-line frames folded into one per function. */
static int read_profile(const char *path, struct profile **p)
{
	struct profile *q;

	if (load_input(path, p))
		return EXIT_BAD;
	if (!profile__has_lines(*p))
		return 0; /* nothing to fold: spare the copy */
	q = profile__relabel(*p, false);
	profile__free(*p);
	*p = q;
	return q ? 0 : error("cannot read %s: %s", path, strerror(ENOMEM));
}

int cmd_diff(int argc, char **argv)
{
	struct diff_opts o = { 0 };
	struct render_select sel;
	struct profile *p[2] = { NULL, NULL }, *view[2] = { NULL, NULL };
	struct output out;
	int err, cerr, ret = EXIT_BAD;

	err = parse_args(argc, argv, &o);
	if (err) {
		select_opts__free(&o.sel);
		return err < 0 ? EXIT_OK : err;
	}
	if (!o.output && o.svg)
		o.output = DEFAULT_DIFF_SVG;
	sel = select_opts__select(&o.sel);

	for (int i = 0; i < 2; i++) {
		if (read_profile(o.paths[i], &p[i]))
			goto out;
		if (!profile__cmeta(p[i])->finalized)
			warning("%s was not finalized (the recorder was killed)", o.paths[i]);
		if (profile__cmeta(p[i])->lost)
			warning("%s: %llu samples were lost while recording", o.paths[i],
				(unsigned long long)profile__cmeta(p[i])->lost);
		err = profile__filter(p[i], sel.kinds, &o.sel.filter, &view[i]);
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
				      !o.no_normalize, &o.sel.svg, out.f);
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
	select_opts__free(&o.sel);
	return ret;
}
