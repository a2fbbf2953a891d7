/* SPDX-License-Identifier: MIT */
/* record --probe: the files and offsets a [MODULE:]FUNCTION names. */
#ifndef DLFLAME_PROBES_H
#define DLFLAME_PROBES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sampler/sampler.h"
#include "symbolize/symbolize.h"
#include "util/util.h"

struct probe_set {
	struct sampler_probe probes[SAMPLER_MAX_PROBES];
	char *paths[SAMPLER_MAX_PROBES], *funcs[SAMPLER_MAX_PROBES];
	/* the --probe each came from, and whether it named its module */
	const char *specs[SAMPLER_MAX_PROBES];
	bool named[SAMPLER_MAX_PROBES];
	uint64_t dev[SAMPLER_MAX_PROBES], ino[SAMPLER_MAX_PROBES]; /* its file; 0 unknown */
	size_t n;
	/*
	 * The probes added during the recording (probes_on_map): from index
	 * first_late on, each with the process that loaded its library, when
	 * the library was mapped and when its probe was armed (CLOCK_MONOTONIC).
	 */
	size_t first_late;
	uint32_t late_pid[SAMPLER_MAX_PROBES];
	uint64_t mapped_ns[SAMPLER_MAX_PROBES], armed_ns[SAMPLER_MAX_PROBES];
	/* FUNCTIONs without a MODULE (their --probe), looked for in every library mapped */
	const char *anywhere[SAMPLER_MAX_PROBES], *anywhere_specs[SAMPLER_MAX_PROBES];
	size_t nr_anywhere;
	struct sampler *sampler; /* set before the events are opened */
	struct u64map seen; /* files looked at during the recording: hash of dev and inode */
	/* libraries that define one but could not be probed: how many, the first's path and why */
	size_t late_failed;
	char *late_failed_path;
	int late_err;
};

/*
 * Add the probes spec names (exe: the command to launch or the attached
 * process's executable, to search without a MODULE; pid: the attached
 * process, whose mapped files are searched too, or 0). EXIT_OK, or prints why not and returns
 * the exit code (a function found nowhere: 2, with names like it).
 */
int probes_resolve(struct probe_set *ps, const char *spec, const char *exe, pid_t pid);
void probes_free(struct probe_set *ps);
/*
 * record --probe-ops: entry and return probes on PyTorch's operator entries
 * (at::_ops::STRUCT::call in libtorch_cpu, by symbol) of the operators of
 * list ("conv2d,addmm,add.Tensor"), or of a default set of layer, loss and
 * optimizer operators when list is NULL. EXIT_OK or the exit code, having
 * said why.
 */
int probes_resolve_ops(struct probe_set *ps, const char *list);
/*
 * record --probe-collectives: entry and return probes on gloo's collectives
 * in libtorch_cpu (where a training thread hands one over, and where gloo's
 * worker runs it), and with an MPI process group (Debian 13's and unstable's
 * PyTorch), its hand-over and the MPI collectives its worker calls:
 * report --ranks counts and times them per rank. EXIT_OK
 * or the exit code, having said why. quiet (the default's): nothing said,
 * and -1 unless both were found and added.
 */
int probes_resolve_collectives(struct probe_set *ps, bool quiet);
/*
 * Whether command cmd (else every one of pids) runs Python: an interpreter,
 * a script whose #! names one, or an MPI or Slurm launcher (mpirun, srun)
 * starting one.
 */
bool probes_runs_python(char *const *cmd, const pid_t *pids, size_t n);
/* The longest operator name --probe-ops takes. */
#define PROBE_OP_NAME_MAX 128
/*
 * A library by name: exact in a library directory, else NAME.* or NAME-*;
 * its real path (free it), or NULL if none.
 */
char *probes_find_library(const char *name);
/*
 * The sampler's on_map (sampler_opts.on_map, ctx the probe set): a library
 * a recorded process maps that defines a FUNCTION given without MODULE gets
 * its probe now. Set ps->sampler first.
 */
void probes_on_map(void *ctx, const struct rec *r);
/* After the recording: one line per library probed during it, and what could not be. */
void probes_report_late(const struct probe_set *ps);
/*
 * After the recording: one warning for each --probe MODULE:FUNCTION whose
 * module no recorded process mapped (its function never ran there).
 */
void probes_warn_unmapped(const struct probe_set *ps, const struct symbolizer *sym);

#endif
