/* SPDX-License-Identifier: MIT */
/*
 * A recording, as `record` and `offcpu` run it: sampler -> collector ->
 * profile. The functions print their own errors (this is cmd/) and return
 * an exit code, except session__run.
 */
#ifndef DLFLAME_SESSION_H
#define DLFLAME_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "collect/collect.h"
#include "profile/profile.h"
#include "sampler/sampler.h"
#include "symbolize/symbolize.h"

struct pybpf;

struct session {
	struct sampler *s;
	struct symbolizer *sym;
	struct profile *prof;
	struct collector *col;
	bool attached, offcpu;
	bool python; /* Python frames are read */
	struct pybpf *bpf; /* copied at the sample by pybpf/'s program; NULL: read after */
	/* auto: why the program was not used (said at the end, with Python processes) */
	char bpf_why[512];
	bool bpf_auto;
	bool watch_maps; /* the sampler's on_map adds probes: read the rings every 10 ms */
	bool targets_gone; /* attach: the recording ended because they exited */
	uint64_t start_time; /* attach: when the events were opened; 0 at launch */
	uint64_t end_time; /* CLOCK_MONOTONIC ns when the recording stopped */
	char *command; /* attach: the first target's command line, or NULL */
	/* the journal at the output path, synced about once a second; NULL: none */
	struct pf_journal *journal;
	uint64_t freq; /* for the metadata the journal carries */
	const char *command_line;
};

/*
 * python: how Python frames are had (with DWARF stacks only: each group of
 * frames is anchored on the stack copy): read just after each sample, or
 * copied at the sample by pybpf/'s program (where it cannot be loaded or
 * attached: said in one warning, and read as before), or auto: copied where
 * the program loads, else read, said in one line at the end when a Python
 * process was recorded.
 */
enum session_python { SESSION_PY_NONE = 0, SESSION_PY_READ, SESSION_PY_BPF, SESSION_PY_AUTO };
int session__open(struct session *ss, const struct sampler_opts *so, enum session_python python);
void session__close(struct session *ss); /* also after a failed open */
int session__attach(struct session *ss, const pid_t *pids, size_t n, bool threads_only);
/*
 * Record every process of the cgroup v2 directory cgfd (path names it in
 * messages), those started later too, until -d or a signal.
 */
int session__cgroup(struct session *ss, int cgfd, const char *path);
/* SIGINT, SIGTERM and SIGHUP stop session__run (the profile is still written). */
void session__handle_signals(void);
/* 0 or the negative errno that stopped the recording (what was recorded is kept). */
int session__run(struct session *ss, pid_t child, uint64_t duration_ns, int *status,
		 bool *child_done);
void session__fill_meta(struct session *ss, uint64_t freq, const char *command);
/*
 * Keep what is recorded at path while the recording runs (see the journal
 * in profile.h), so that a recorder killed with SIGKILL leaves a profile.
 * Call before session__run; freq and command as for session__fill_meta.
 * A path that is not a regular file's (a device, a FIFO) gets none.
 */
void session__journal(struct session *ss, const char *path, uint64_t freq, const char *command);
/* Warnings every recording may end with, after its summary line. */
void session__warnings(struct session *ss);
/* perf_event_paranoid kept kernel frames out: what that costs, and the remedy. */
void warn_kernel_excluded(bool offcpu);
/* One warning per kind of record the collector could not use. */
void warn_dropped(const struct collect_stats *cs);

/*
 * A launched command's environment: ours, plus the oneDNN perf-map switches
 * unless the user set either. NULL when out of memory; free() the array only.
 */
char **session__child_env(void);

/* 0 or a negative errno: whether a file could be created at path. */
int check_output_dir(const char *path);

#endif
