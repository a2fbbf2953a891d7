/* SPDX-License-Identifier: MIT */
/* Running dlflame and fixtures from tests: exit status, stdout, stderr. */
#ifndef DLFLAME_TEST_RUN_H
#define DLFLAME_TEST_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct run_result {
	int status; /* exit code, or 128 + signal */
	char *out; /* NUL-terminated stdout */
	size_t out_len;
	char *err; /* NUL-terminated stderr */
};

/*
 * Run argv (argv[0] a path) with extra "NAME=value" entries in env (NULL-terminated,
 * may be NULL), stdout to `stdout_path` if not NULL (else captured), in cwd `dir`
 * (NULL: inherited). Aborts the test on spawn failure.
 */
struct run_result run(const char *dir, char *const env[], const char *stdout_path,
		      const char *const argv[]);
/* Start without waiting; returns the pid. Output goes to files in dir. */
pid_t run_bg(const char *dir, const char *const argv[]);
void run_free(struct run_result *r);
/* $NAME or abort the test with a message that names it. */
const char *need_env(const char *name);
/*
 * $MLP, the bundled oneDNN trainer, or fail the test: scripts/setup.sh
 * installs oneDNN, so a missing MLP is a broken set-up, not a reason to skip.
 */
const char *need_mlp(void);
/*
 * The file behind the library `stem` ("libdnnl.so") that the dynamic linker
 * gives `binary` (its DT_NEEDED name, through ldd), with symlinks resolved
 * (free it): libdnnl.so.2.6 on Debian 12, libdnnl.so.3.7 on Debian 13.
 * Fails the test when binary does not link it.
 */
char *linked_library(const char *binary, const char *stem);
/* A fresh temporary directory (removed by rm_dir). */
char *make_dir(void);
void rm_dir(char *dir);
char *path_in(const char *dir, const char *name);
/* A whole file, NUL-terminated (free it); aborts the test if it cannot be read. */
char *read_text(const char *path);
/* Count non-overlapping occurrences of needle in hay. */
size_t count_str(const char *hay, const char *needle);

/*
 * Folded output: the sum of the counts of lines holding `frame` as a whole
 * frame (and in *total, if not NULL, of all lines); of lines holding `chain`
 * ("a;b", caller first) as whole frames.
 */
unsigned long count_frame(const char *folded, const char *frame, unsigned long *total);
unsigned long count_chain(const char *folded, const char *chain);

/*
 * How a recording at the defaults took a container's Python frames (its
 * stderr): copied at the sample by BPF, for every Python process, when the
 * tests run in the initial PID namespace; read just after each sample when
 * they run in a namespace of their own (a fresh root: the kernel's helper
 * cannot give the recorder's ids of a deeper namespace's threads).
 */
void assert_container_frames(const char *err);

/* The N of "N% of stacks complete" in a report's stderr; -1 if it is not there. */
double complete_share(const char *err);
/*
 * `dlflame report -i data --folded` with the options in sel (NULL-terminated,
 * may be NULL): its completeness line agrees with --complete and --cut, no
 * stack counted complete holds a placeholder frame, and (cut_has_placeholder)
 * every cut one does. Returns the stated share.
 */
double assert_ends_agree(const char *data, const char *const *sel, bool cut_has_placeholder);

#endif
