/* SPDX-License-Identifier: MIT */
/* dlflame report: a profile -> folded stacks or an SVG flame graph. */
#include "cmd.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile.h"
#include "render/render.h"
#include "util/util.h"

#define DEFAULT_INPUT "dlflame.data"
#define DEFAULT_SVG "flame.svg"

enum report_format { FMT_NONE, FMT_FOLDED, FMT_SVG };

struct report_opts {
	const char *input;
	const char *output;
	enum report_format format;
	struct svg_opts svg;
};

static void report_usage(FILE *f)
{
	fputs("Usage: dlflame report [-i FILE] (--folded | --svg) [-o OUT] [OPTIONS]\n\n"
	      "Draw a recorded profile.\n\n"
	      "Options:\n"
	      "  -i, --input FILE     profile to read (default dlflame.data)\n"
	      "      --folded         folded stacks (comm;root;...;leaf count), stdout unless -o\n"
	      "      --svg            interactive SVG flame graph, flame.svg unless -o\n"
	      "  -o, --output OUT     where to write ('-' for stdout)\n"
	      "      --title TEXT     SVG title (default \"Flame Graph\")\n"
	      "      --width PX       SVG width in pixels (default 1200)\n"
	      "      --minwidth PX    hide frames narrower than PX pixels (default 0.1)\n"
	      "  -h, --help           show this help\n\n"
	      "Examples:\n"
	      "  dlflame report --svg\n"
	      "  dlflame report --folded | flamegraph.pl > flame.svg\n",
	      f);
}

static int parse_args(int argc, char **argv, struct report_opts *o)
{
	enum { OPT_FOLDED = 256, OPT_SVG, OPT_TITLE, OPT_WIDTH, OPT_MINWIDTH };
	static const struct option longopts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "folded", no_argument, NULL, OPT_FOLDED },
		{ "svg", no_argument, NULL, OPT_SVG },
		{ "title", required_argument, NULL, OPT_TITLE },
		{ "width", required_argument, NULL, OPT_WIDTH },
		{ "minwidth", required_argument, NULL, OPT_MINWIDTH },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t u;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":i:o:h", longopts, NULL)) != -1) {
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
		case OPT_SVG: {
			enum report_format f = c == OPT_SVG ? FMT_SVG : FMT_FOLDED;
			if (o->format != FMT_NONE && o->format != f)
				return usage_error("report", "choose one of --folded and --svg");
			o->format = f;
			break;
		}
		case OPT_TITLE:
			o->svg.title = optarg;
			break;
		case OPT_WIDTH:
			if (parse_u64(optarg, 10, 100, 100000, &u))
				return usage_error("report", "--width takes 100 to 100000 pixels, got '%s'",
						   optarg);
			o->svg.width = (unsigned)u;
			break;
		case OPT_MINWIDTH:
			if (parse_double(optarg, 0, 10000, &o->svg.minwidth))
				return usage_error("report", "--minwidth takes pixels (0 to 10000), got '%s'",
						   optarg);
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
		return usage_error("report", "choose an output: --folded or --svg");
	return 0;
}

/* One line naming the file and what is wrong with it. */
static int read_error(const char *path, int err, const struct profile_read_error *e)
{
	if (err == -EINVAL && e->what)
		return error("cannot read %s: %s (at %s offset %llu); it is not a complete dlflame "
			     "profile: record it again",
			     path, e->what, e->in_payload ? "decompressed" : "byte",
			     (unsigned long long)e->offset);
	if (err == -ENOENT)
		return error("cannot read %s: no such file; record one with 'dlflame record -- "
			     "COMMAND' or name it with -i",
			     path);
	return error("cannot read %s: %s", path, strerror(-err));
}

static void report_health(const char *path, const struct profile *p)
{
	const struct pf_meta *m = profile__cmeta(p);

	if (!m->finalized)
		warning("%s was not finalized (the recorder was killed); showing what it holds", path);
	if (m->lost)
		warning("%llu samples were lost while recording (ring buffer overflow); the graph "
			"undercounts",
			(unsigned long long)m->lost);
	if (profile__nr_samples(p) == 0)
		warning("%s holds no samples", path);
}

int cmd_report(int argc, char **argv)
{
	struct report_opts o = { .input = DEFAULT_INPUT };
	struct profile_read_error e = { 0 };
	struct render_select sel = { .kinds = { [SAMPLE_ONCPU] = true } };
	struct profile *p = NULL;
	struct output out;
	char subtitle[128];
	int err, ret = EXIT_BAD;

	err = parse_args(argc, argv, &o);
	if (err)
		return err < 0 ? EXIT_OK : err;
	if (o.format == FMT_SVG && !o.output)
		o.output = DEFAULT_SVG;

	err = profile__read(o.input, &p, &e);
	if (err)
		return read_error(o.input, err, &e);
	report_health(o.input, p);

	err = output_open(&out, o.output);
	if (err) {
		error("cannot create %s: %s", o.output, strerror(-err));
		goto out;
	}
	if (o.format == FMT_FOLDED) {
		err = render_folded(p, &sel, out.f);
	} else {
		if (profile__cmeta(p)->lost && !o.svg.subtitle) {
			snprintf(subtitle, sizeof(subtitle), "%llu samples lost while recording",
				 (unsigned long long)profile__cmeta(p)->lost);
			o.svg.subtitle = subtitle;
		}
		err = render_svg(p, &sel, &o.svg, out.f);
	}
	int cerr = output_close(&out, err == 0);
	if (!err)
		err = cerr;
	if (err) {
		error("cannot write %s: %s", o.output ? o.output : "standard output", strerror(-err));
		goto out;
	}
	if (o.format == FMT_SVG && strcmp(o.output, "-"))
		info("wrote %s (%zu samples)", o.output, profile__nr_samples(p));
	ret = EXIT_OK;
out:
	profile__free(p);
	return ret;
}
