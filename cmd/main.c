/* SPDX-License-Identifier: MIT */
#include "cmd.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int cmd_help(int argc, char **argv);

static const struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "record", cmd_record,
	  "run a command (or attach) and record its stacks into dlflame.data" },
	{ "report", cmd_report,
	  "draw dlflame.data or a perf.data: SVG, folded, top, pprof, trace" },
	{ "offcpu", cmd_offcpu, "attach to a process and draw where its threads block" },
	{ "diff", cmd_diff, "compare two profiles: a differential flame graph" },
	{ "merge", cmd_merge, "join profiles of one job's hosts into one (ranks kept)" },
	{ "help", cmd_help, "show this help" },
};

static void usage(FILE *f)
{
	fputs("Usage: dlflame COMMAND [OPTIONS]\n\n"
	      "A sampling profiler for deep-learning training processes: whole stacks,\n"
	      "symbolized at record time, drawn as flame graphs.\n\nCommands:\n",
	      f);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fputs("\nExamples:\n"
	      "  dlflame record -- ./mlp 200     profile a training run\n"
	      "  dlflame report --svg            dlflame.data -> flame.svg\n"
	      "  dlflame report --folded         folded stacks for flamegraph.pl, inferno, speedscope\n"
	      "\nRun 'dlflame COMMAND --help' for the options of a command.\n",
	      f);
}

static int cmd_help(int argc, char **argv)
{
	usage(stdout);
	return EXIT_OK;
}

/* A closed pipe or a full disk on stdout is an error, not a short output and exit 0. */
static int check_stdout(int status)
{
	if (fflush(stdout) || ferror(stdout)) {
		int e = errno;
		if (status == EXIT_OK)
			status =
				error("cannot write to standard output: %s", strerror(e ? e : EIO));
	}
	return status;
}

int main(int argc, char **argv)
{
	const char *name;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	name = argv[1];
	if (!strcmp(name, "--help") || !strcmp(name, "-h"))
		return check_stdout(cmd_help(argc - 1, argv + 1));
	if (!strcmp(name, "--version") || !strcmp(name, "-V")) {
		printf("dlflame %s\n", DLFLAME_VERSION);
		return check_stdout(EXIT_OK);
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(name, commands[i].name))
			return check_stdout(commands[i].fn(argc - 1, argv + 1));
	}
	fprintf(stderr, "dlflame: '%s' is not a dlflame command.\n", name);
	usage(stderr);
	return EXIT_USAGE;
}
