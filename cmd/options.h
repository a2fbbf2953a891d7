/* SPDX-License-Identifier: MIT */
/*
 * Options that more than one command takes, parsed in one place so that
 * their limits and messages agree: the sample selection, filter and SVG
 * options of report and diff, and the targets, duration and stack walking
 * of record and offcpu. Each command keeps its own option table and lists
 * in it only the shared options it accepts; cmd names the command in usage
 * errors. The parsers return 0, EXIT_USAGE or EXIT_BAD (out of memory),
 * having printed the message.
 */
#ifndef DLFLAME_OPTIONS_H
#define DLFLAME_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile/filter.h"
#include "render/render.h"
#include "sampler/sampler.h"

/* getopt_long codes of the shared long options; a command's own start at OPT_CMD_BASE. */
enum {
	OPT_OFFCPU = 256,
	OPT_WALL,
	OPT_RUNQUEUE,
	OPT_MIN_BLOCK,
	OPT_PID,
	OPT_TID,
	OPT_COMM,
	OPT_TIME,
	OPT_PER_THREAD,
	OPT_REVERSE,
	OPT_COMPLETE,
	OPT_CUT,
	OPT_PYTHON,
	OPT_FROM_CALL,
	OPT_PER_RANK,
	OPT_RANK,
	OPT_TITLE,
	OPT_SUBTITLE,
	OPT_WIDTH,
	OPT_MINWIDTH,
	OPT_COUNTNAME,
	OPT_INVERTED,
	OPT_FLAMECHART,
	OPT_CMD_BASE,
};

struct select_opts {
	bool offcpu, wall, runqueue;
	bool min_block_set;
	const char *svg_only; /* an SVG option given, for the error message */
	struct svg_opts svg;
	struct profile_filter filter; /* points into pids, tids and comms */
	uint32_t *pids, *tids, *ranks;
	size_t nr_pids, nr_tids, nr_ranks;
	const char **comms;
	size_t nr_comms;
	char *from_call; /* --from-call's FUNCTION */
};

/* c is one of the codes above; getopt_long returns only those in the command's table. */
static inline bool select_opts__owns(int c)
{
	return c >= OPT_OFFCPU && c < OPT_CMD_BASE;
}

int select_opts__parse(struct select_opts *o, const char *cmd, int c, const char *arg);
/* After the command's own checks: the combinations no command accepts. */
int select_opts__check(const struct select_opts *o, const char *cmd, bool svg);
/* The sample kinds and weighing --offcpu, --wall and --runqueue ask for. */
struct render_select select_opts__select(const struct select_opts *o);
void select_opts__free(struct select_opts *o);

/* --python-frames: auto (the default: bpf where its program loads), read or bpf */
enum python_frames { PY_FRAMES_AUTO = 0, PY_FRAMES_READ, PY_FRAMES_BPF };

/* -p/-t, -d and -g. */
struct target_opts {
	pid_t *pids; /* -p or -t */
	size_t nr_pids;
	bool threads_only; /* -t */
	uint64_t duration_ns;
	enum callgraph_mode callgraph;
	uint32_t stack_size;
	bool no_python; /* --no-python */
	enum python_frames python_frames; /* --python-frames */
};

/* target_opts__parse's code for --no-python (getopt_long's val) */
#define OPT_NO_PYTHON 0x1000
/* one line of usage for it */
#define NO_PYTHON_USAGE \
	"      --no-python          do not read Python frames (read by default with dwarf)\n"
/* --python-frames=bpf|read, and its usage */
#define OPT_PYTHON_FRAMES 0x1001
#define PYTHON_FRAMES_USAGE                                                                 \
	"      --python-frames=HOW  'bpf': copied at the sample by a BPF program (root,\n"  \
	"                           or CAP_BPF and CAP_PERFMON); 'read': read just after\n" \
	"                           each sample; 'auto' (default): bpf where its program\n" \
	"                           loads, else read, said at the end\n"

/* clang-format off */
#define TARGET_OPTS_DEFAULT \
	{ .callgraph = CALLGRAPH_DWARF, .stack_size = SAMPLER_DEFAULT_STACK_SIZE }
/* clang-format on */

int target_opts__parse(struct target_opts *o, const char *cmd, int c, const char *arg);

/* 0 or -EINVAL (-ENOMEM); the outputs are untouched on failure. */
int parse_call_graph(const char *arg, enum callgraph_mode *mode, uint32_t *stack_size);
int parse_pid_list(const char *arg, pid_t **pids, size_t *nr);
/*
 * --time: "START,END" in seconds from the profile's start (either may be
 * empty, "START" alone runs to the end) -> [start, end) in ns. 0 or -EINVAL.
 */
int parse_time_range(const char *arg, uint64_t *start, uint64_t *end);
/* --pid, --tid: "1,2,3" -> a malloc'ed array appended to *ids. 0, -EINVAL or -ENOMEM. */
int parse_id_list(const char *arg, uint32_t **ids, size_t *nr);

#endif
