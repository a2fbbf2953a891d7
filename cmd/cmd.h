/* SPDX-License-Identifier: MIT */
/* What the subcommands share: messages, exit codes, output files. */
#ifndef DLFLAME_CMD_H
#define DLFLAME_CMD_H

#include <stdbool.h>
#include <stdio.h>

enum {
	EXIT_OK = 0,
	EXIT_BAD = 1, /* runtime error */
	EXIT_USAGE = 2, /* bad command line */
};

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_offcpu(int argc, char **argv);
int cmd_merge(int argc, char **argv);

/* "dlflame: " + message + "\n" on stderr. error() returns EXIT_BAD. */
__attribute__((format(printf, 1, 2))) int error(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void warning(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void info(const char *fmt, ...);
/* Usage error: message, then "Try 'dlflame CMD --help'.", returns EXIT_USAGE. */
__attribute__((format(printf, 2, 3))) int usage_error(const char *cmd, const char *fmt, ...);

/*
 * An output file written to a temporary name in its directory and renamed
 * into place on success, or stdout. output_close() checks every write
 * (fflush, ferror, fsync, fclose) and returns 0 or a negative errno; on
 * failure the temporary file is removed and an existing file is untouched.
 */
struct output {
	FILE *f;
	char *path; /* NULL for stdout */
	char *tmp;
	bool in_place; /* a device or FIFO, written directly (see open_output_in_place) */
};

int output_open(struct output *o, const char *path); /* path NULL or "-": stdout */
int output_close(struct output *o, bool ok);

#endif
