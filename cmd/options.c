/* SPDX-License-Identifier: MIT */
/* The options report/diff and record/offcpu share (options.h). */
#include "options.h"
#include "cmd.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define MAX_DURATION 31536000.0 /* -d: a year */

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

int select_opts__parse(struct select_opts *o, const char *cmd, int c, const char *arg)
{
	struct profile_filter *f = &o->filter;
	uint64_t u;
	int err;

	switch (c) {
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
		if (parse_u64(arg, 10, 0, UINT64_MAX / 1000, &u))
			return usage_error(cmd, "--min-block takes microseconds, got '%s'", arg);
		f->min_block = u * 1000;
		o->min_block_set = true;
		break;
	case OPT_PID:
	case OPT_TID:
		err = c == OPT_PID ? parse_id_list(arg, &o->pids, &o->nr_pids)
				   : parse_id_list(arg, &o->tids, &o->nr_tids);
		f->pids = o->pids;
		f->nr_pids = o->nr_pids;
		f->tids = o->tids;
		f->nr_tids = o->nr_tids;
		if (err == -ENOMEM)
			return error("out of memory");
		if (err)
			return usage_error(cmd, "%s takes ids like 1234 or 1234,1240, got '%s'",
					   c == OPT_PID ? "--pid" : "--tid", arg);
		break;
	case OPT_COMM: {
		const char **v = realloc(o->comms, (o->nr_comms + 1) * sizeof(*v));

		if (!v)
			return error("out of memory");
		v[o->nr_comms++] = arg;
		o->comms = v;
		f->comms = o->comms;
		f->nr_comms = o->nr_comms;
		break;
	}
	case OPT_TIME:
		if (parse_time_range(arg, &f->time_start, &f->time_end))
			return usage_error(cmd,
					   "--time takes START,END in seconds from the start, "
					   "START < END (either may be empty), got '%s'",
					   arg);
		f->has_time = true;
		break;
	case OPT_PER_THREAD:
		f->per_thread = true;
		break;
	case OPT_PER_RANK:
		f->per_rank = true;
		break;
	case OPT_RANK:
		err = parse_id_list(arg, &o->ranks, &o->nr_ranks);
		f->ranks = o->ranks;
		f->nr_ranks = o->nr_ranks;
		if (err == -ENOMEM)
			return error("out of memory");
		if (err)
			return usage_error(cmd, "--rank takes ranks like 0 or 0,3, got '%s'", arg);
		break;
	case OPT_REVERSE:
		f->reverse = true;
		break;
	case OPT_COMPLETE:
	case OPT_CUT:
		if (c == OPT_COMPLETE ? f->cut_only : f->complete_only)
			return usage_error(cmd, "--complete and --cut do not go together");
		f->complete_only = c == OPT_COMPLETE;
		f->cut_only = c == OPT_CUT;
		break;
	case OPT_PYTHON:
		f->python = true;
		break;
	case OPT_FROM_CALL: {
		const char *colon = strrchr(arg, ':');

		if (!colon || colon == arg ||
		    parse_u64(colon + 1, 10, 1, UINT64_MAX, &f->from_call_n))
			return usage_error(
				cmd,
				"--from-call takes FUNCTION:N (N from 1: the N-th call's "
				"start), got '%s'",
				arg);
		free(o->from_call);
		o->from_call = strndup(arg, (size_t)(colon - arg));
		if (!o->from_call)
			return error("out of memory");
		f->from_call = o->from_call;
		break;
	}
	case OPT_TITLE:
		o->svg.title = arg;
		o->svg_only = "--title";
		break;
	case OPT_SUBTITLE:
		o->svg.subtitle = arg;
		o->svg_only = "--subtitle";
		break;
	case OPT_WIDTH:
		if (parse_u64(arg, 10, 100, 100000, &u))
			return usage_error(cmd, "--width takes 100 to 100000 pixels, got '%s'",
					   arg);
		o->svg.width = (unsigned)u;
		o->svg_only = "--width";
		break;
	case OPT_MINWIDTH:
		if (parse_minwidth(arg, &o->svg))
			return usage_error(cmd,
					   "--minwidth takes pixels (0 to 10000) or a "
					   "percentage (0%% to 100%%), got '%s'",
					   arg);
		o->svg_only = "--minwidth";
		break;
	case OPT_COUNTNAME:
		o->svg.countname = arg;
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
	default:
		return usage_error(cmd, "unknown option code %d", c);
	}
	return 0;
}

int select_opts__check(const struct select_opts *o, const char *cmd, bool svg)
{
	if (o->offcpu && o->wall)
		return usage_error(cmd, "--wall already includes --offcpu: choose one");
	if (o->min_block_set && !o->offcpu && !o->wall && !o->runqueue)
		return usage_error(cmd, "--min-block applies to --offcpu, --wall or --runqueue");
	if (o->svg_only && !svg)
		return usage_error(cmd, "%s applies to --svg only", o->svg_only);
	return 0;
}

struct render_select select_opts__select(const struct select_opts *o)
{
	struct render_select sel = { .kinds = { [SAMPLE_ONCPU] = !o->offcpu } };

	sel.kinds[SAMPLE_OFFCPU] = o->offcpu || o->wall;
	sel.kinds[SAMPLE_RUNQUEUE] = o->runqueue;
	sel.weight_ns = sel.kinds[SAMPLE_OFFCPU] || sel.kinds[SAMPLE_RUNQUEUE];
	return sel;
}

void select_opts__free(struct select_opts *o)
{
	free(o->pids);
	free(o->tids);
	free(o->ranks);
	free(o->comms);
	free(o->from_call);
}

/* "fp", "dwarf" or "dwarf,BYTES". */
int parse_call_graph(const char *arg, enum callgraph_mode *mode, uint32_t *stack_size)
{
	uint64_t v;

	if (!strcmp(arg, "fp")) {
		*mode = CALLGRAPH_FP;
		return 0;
	}
	if (!strcmp(arg, "dwarf")) {
		*mode = CALLGRAPH_DWARF;
		*stack_size = SAMPLER_DEFAULT_STACK_SIZE;
		return 0;
	}
	if (strncmp(arg, "dwarf,", 6) || parse_u64(arg + 6, 10, 8, SAMPLER_MAX_STACK_SIZE, &v) ||
	    v % 8)
		return -EINVAL;
	*mode = CALLGRAPH_DWARF;
	*stack_size = (uint32_t)v;
	return 0;
}

/* "1,2,3": appended to *pids. */
int parse_pid_list(const char *arg, pid_t **pids, size_t *nr)
{
	size_t cap = *nr;
	char *copy = strdup(arg), *save = NULL, *tok;
	uint64_t v;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	if (!*arg || arg[strlen(arg) - 1] == ',' || strstr(arg, ",,"))
		err = -EINVAL;
	for (tok = strtok_r(copy, ",", &save); tok && !err; tok = strtok_r(NULL, ",", &save)) {
		if (parse_u64(tok, 10, 1, 0x7fffffff, &v))
			err = -EINVAL;
		else if (grow_array((void **)pids, &cap, *nr + 1, sizeof(**pids)))
			err = -ENOMEM;
		else
			(*pids)[(*nr)++] = (pid_t)v;
	}
	free(copy);
	return err;
}

/* One side of "START,END": seconds (0 to a year) -> ns. */
static int parse_seconds(const char *s, size_t len, uint64_t *ns)
{
	char buf[64];
	double v;

	if (!len || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	/* a year is more than any recording; keeps the product in range */
	if (parse_double(buf, 0, 366.0 * 86400, &v))
		return -EINVAL;
	*ns = (uint64_t)llround(v * 1e9);
	return 0;
}

int parse_time_range(const char *s, uint64_t *start, uint64_t *end)
{
	const char *comma = strchr(s, ',');
	uint64_t a = 0, b = UINT64_MAX;

	if (!*s)
		return -EINVAL;
	if (!comma)
		comma = s + strlen(s);
	if (comma > s && parse_seconds(s, (size_t)(comma - s), &a))
		return -EINVAL;
	if (*comma && comma[1] && parse_seconds(comma + 1, strlen(comma + 1), &b))
		return -EINVAL;
	if (*comma && !comma[1] && comma == s)
		return -EINVAL; /* "," alone */
	if (a >= b)
		return -EINVAL;
	*start = a;
	*end = b;
	return 0;
}

int parse_id_list(const char *s, uint32_t **ids, size_t *nr)
{
	size_t cap = *nr, n = *nr;
	uint32_t *v = *ids;
	const char *p = s;

	if (!*s)
		return -EINVAL;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char buf[16];
		uint64_t id;

		if (!len || len >= sizeof(buf))
			return -EINVAL;
		memcpy(buf, p, len);
		buf[len] = '\0';
		if (parse_u64(buf, 10, 0, UINT32_MAX, &id))
			return -EINVAL;
		if (grow_array((void **)&v, &cap, n + 1, sizeof(*v)))
			return -ENOMEM;
		*ids = v;
		v[n++] = (uint32_t)id;
		*nr = n;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

int target_opts__parse(struct target_opts *o, const char *cmd, int c, const char *arg)
{
	double secs;
	int err;

	switch (c) {
	case 'p':
	case 't':
		if (o->nr_pids && o->threads_only != (c == 't'))
			return usage_error(cmd, "-p and -t cannot be combined");
		o->threads_only = c == 't';
		err = parse_pid_list(arg, &o->pids, &o->nr_pids);
		if (err == -ENOMEM)
			return error("out of memory");
		if (err)
			return usage_error(cmd,
					   "-%c takes a comma-separated list of %s IDs, got '%s'",
					   c, c == 'p' ? "process" : "thread", arg);
		break;
	case 'd':
		if (parse_double(arg, 0.001, MAX_DURATION, &secs))
			return usage_error(
				cmd, "-d takes a duration in seconds (0.001 to %.0f), got '%s'",
				MAX_DURATION, arg);
		o->duration_ns = (uint64_t)(secs * 1e9);
		break;
	case 'g':
		if (parse_call_graph(arg, &o->callgraph, &o->stack_size))
			return usage_error(cmd,
					   "--call-graph takes 'fp', 'dwarf' or 'dwarf,BYTES' "
					   "(BYTES a multiple of 8 from 8 to %u), got '%s'",
					   SAMPLER_MAX_STACK_SIZE, arg);
		break;
	case OPT_NO_PYTHON:
		o->no_python = true;
		break;
	case OPT_PYTHON_FRAMES:
		if (!strcmp(arg, "bpf"))
			o->python_frames = PY_FRAMES_BPF;
		else if (!strcmp(arg, "read"))
			o->python_frames = PY_FRAMES_READ;
		else if (!strcmp(arg, "auto"))
			o->python_frames = PY_FRAMES_AUTO;
		else
			return usage_error(
				cmd, "--python-frames takes 'auto', 'bpf' or 'read', got '%s'",
				arg);
		break;
	default:
		return usage_error(cmd, "unknown option code %d", c);
	}
	return 0;
}
