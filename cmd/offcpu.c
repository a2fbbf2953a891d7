/* SPDX-License-Identifier: MIT */
/*
 * dlflame offcpu: attach to running processes, record only where and how
 * long their threads block, and draw it at once.
 */
#include "cmd.h"
#include "util/util.h"
#include "options.h"
#include "session.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "render/render.h"

#define DEFAULT_SVG "offcpu.svg"

struct offcpu_opts {
	struct target_opts target;
	const char *output;
	bool folded;
};

static void offcpu_usage(FILE *f)
{
	fputs("Usage: dlflame offcpu -p PID[,PID...] | -t TID[,TID...] [-d SECONDS] [-o OUT] [--folded]\n\n"
	      "Attach to running processes, record where their threads block (sleep, locks,\n"
	      "I/O, futex waits) and for how long, and write an off-CPU flame graph whose\n"
	      "widths are blocked time. Waiting for a CPU after preemption is not blocking\n"
	      "and is left out. The targets are never stopped or signalled.\n\n"
	      "Options:\n"
	      "  -p, --pid PID[,PID...]   every thread of these processes, new ones included\n"
	      "  -t, --tid TID[,TID...]   these threads only\n"
	      "  -d, --duration SECONDS   stop after this long (default: Ctrl-C or target exit)\n"
	      "  -o, --output OUT         where to write (default offcpu.svg; with --folded\n"
	      "                           standard output; '-' for standard output)\n"
	      "      --folded             folded stacks with microsecond counts instead of SVG\n"
	      "  -g, --call-graph MODE    'dwarf[,BYTES]' (default) or 'fp', as for record\n" NO_PYTHON_USAGE
	      "  -h, --help               show this help\n\n"
	      "Examples:\n"
	      "  dlflame offcpu -p 4242 -d 10\n"
	      "  dlflame offcpu -p $(pgrep -f train.py) --folded | flamegraph.pl --color=io > off.svg\n",
	      f);
}

static int parse_args(int argc, char **argv, struct offcpu_opts *o)
{
	enum { OPT_FOLDED = 256 };
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "tid", required_argument, NULL, 't' },
		{ "duration", required_argument, NULL, 'd' },
		{ "output", required_argument, NULL, 'o' },
		{ "folded", no_argument, NULL, OPT_FOLDED },
		{ "call-graph", required_argument, NULL, 'g' },
		{ "no-python", no_argument, NULL, OPT_NO_PYTHON },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c, err;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:t:d:o:g:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
		case 't':
		case 'd':
		case 'g':
		case OPT_NO_PYTHON:
			err = target_opts__parse(&o->target, "offcpu", c, optarg);
			if (err)
				return err;
			break;
		case 'o':
			if (!*optarg)
				return usage_error("offcpu", "-o needs a file name");
			o->output = optarg;
			break;
		case OPT_FOLDED:
			o->folded = true;
			break;
		case 'h':
			offcpu_usage(stdout);
			return -1;
		case ':':
			return usage_error("offcpu", "option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("offcpu", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("offcpu",
				   "unexpected argument '%s' (to launch a command, use "
				   "'dlflame record -- COMMAND' and 'dlflame report --offcpu')",
				   argv[optind]);
	if (!o->target.nr_pids)
		return usage_error("offcpu", "name the processes to attach to with -p PID");
	return 0;
}

static int draw(struct session *ss, const struct offcpu_opts *o, struct output *out)
{
	struct render_select sel = { .kinds = { [SAMPLE_OFFCPU] = true }, .weight_ns = true };
	struct svg_opts svg = { .title = "Off-CPU Time Flame Graph", .countname = "us" };
	char subtitle[160];
	uint64_t lost = sampler__stats(ss->s)->lost;
	/* frames at different source lines of one function are drawn as one */
	struct profile *view = profile__relabel(ss->prof, false);
	int err;

	if (!view)
		return -ENOMEM;
	if (o->folded) {
		err = render_folded(view, &sel, out->f);
		profile__free(view);
		return err;
	}
	snprintf(subtitle, sizeof(subtitle), "%.2f s blocked%s%s",
		 (double)collector__stats(ss->col)->offcpu_ns / 1e9, ss->command ? " in " : "",
		 ss->command ? ss->command : "");
	if (lost)
		snprintf(subtitle, sizeof(subtitle),
			 "%.2f s blocked; %llu records lost: it undercounts",
			 (double)collector__stats(ss->col)->offcpu_ns / 1e9,
			 (unsigned long long)lost);
	svg.subtitle = subtitle;
	err = render_svg(view, &sel, &svg, out->f);
	profile__free(view);
	return err;
}

int cmd_offcpu(int argc, char **argv)
{
	struct offcpu_opts o = { .target = TARGET_OPTS_DEFAULT };
	struct sampler_opts so = { .offcpu = true, .offcpu_only = true };
	struct session ss = { 0 };
	struct output out;
	char ends[256];
	const char *name;
	int status, err, ret = EXIT_BAD;
	bool child_done;
	uint64_t t0;

	err = parse_args(argc, argv, &o);
	if (err) {
		free(o.target.pids);
		return err < 0 ? EXIT_OK : err;
	}
	if (!o.output)
		o.output = o.folded ? "-" : DEFAULT_SVG;
	name = strcmp(o.output, "-") ? o.output : "standard output";
	if (strcmp(o.output, "-") && (err = check_output_dir(o.output))) {
		free(o.target.pids);
		return error("cannot write %s: %s; choose another path with -o", o.output,
			     strerror(-err));
	}

	so.callgraph = o.target.callgraph;
	so.stack_size = o.target.stack_size;
	if (session__open(&ss, &so, o.target.no_python ? SESSION_PY_NONE : SESSION_PY_READ))
		goto out;
	ss.offcpu = true;
	t0 = monotonic_ns();
	if (session__attach(&ss, o.target.pids, o.target.nr_pids, o.target.threads_only))
		goto out;
	session__handle_signals();
	err = session__run(&ss, -1, o.target.duration_ns, &status, &child_done);
	if (err)
		error("recording stopped early: %s", strerror(-err));
	session__fill_meta(&ss, 0, ss.command);

	int oerr = output_open(&out, o.output);
	if (oerr) {
		error("cannot create %s: %s", o.output, strerror(-oerr));
		goto out;
	}
	int rerr = draw(&ss, &o, &out);
	int cerr = output_close(&out, rerr == 0);
	if (!rerr)
		rerr = cerr;
	if (rerr) {
		error("cannot write %s: %s", name, strerror(-rerr));
		goto out;
	}
	render_ends_line(collector__stats(ss.col)->offcpu_end_ns, ends, sizeof(ends));
	info("%.2f s, %.2f s blocked in %zu threads%s%s -> %s", (double)(monotonic_ns() - t0) / 1e9,
	     (double)collector__stats(ss.col)->offcpu_ns / 1e9, profile__nr_threads(ss.prof),
	     *ends ? ", " : "", ends, name);
	session__warnings(&ss);
	if (!collector__stats(ss.col)->offcpu_samples)
		warning("no blocking was recorded: the targets ran (or waited for a CPU) the whole "
			"time; see 'dlflame record -p' for on-CPU time");
	ret = err ? EXIT_BAD : EXIT_OK;
out:
	session__close(&ss);
	free(o.target.pids);
	return ret;
}
