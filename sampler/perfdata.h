/* SPDX-License-Identifier: MIT */
/*
 * Reading files written by `perf record`, in file mode and pipe mode, into
 * the same decoded records the live sampler produces, so that one collector
 * turns either into a profile.
 *
 * Library code: negative errno, never prints. A malformed file is -EINVAL
 * with a perfdata_error naming the byte offset and the record kind; a
 * well-formed file that holds something this reader does not read (an event
 * layout, a compression method, a byte order) is -EOPNOTSUPP with the same
 * perfdata_error naming it. Records of kinds it does not know are skipped
 * and counted (perfdata_info), never taken for corruption.
 */
#ifndef DLFLAME_PERFDATA_H
#define DLFLAME_PERFDATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sampler/sampler.h"

struct perfdata_error {
	const char *what; /* static text */
	uint64_t offset; /* byte offset in the file (or stream) */
	const char *record; /* record kind being read, e.g. "SAMPLE", or "header" */
	char name[32]; /* record points here for a kind without a name: "record type 97" */
};

struct perfdata_info {
	bool pipe_mode;
	bool finalized; /* false: the header says perf did not finish writing */
	uint32_t nr_attrs;
	bool callchain; /* some event samples callchains */
	bool dwarf; /* some event copies user stacks (--call-graph dwarf) */
	bool switch_events; /* PERF_RECORD_SWITCH records are present */
	uint64_t freq; /* sampling frequency of the first event, 0 in period mode */
	char event[64]; /* name of the first sampling event, e.g. "cpu-clock" */
	uint64_t records, samples, lost;
	/* perf's own records of kinds this reader does not know (a later perf's), skipped */
	uint64_t unknown;
	uint32_t unknown_type; /* the first such kind */
	bool compressed; /* perf record -z: COMPRESSED or COMPRESSED2 records were read */
};

/*
 * True when buf starts with perf.data's magic ("PERFILE2", in either byte
 * order, or "PERFFILE" of perf's first format): perfdata__read says what
 * it is, if it does not read it.
 */
bool perfdata__is_perf_file(const void *buf, size_t len);

/*
 * Read the whole file (path "-" reads a pipe-mode stream from stdin) and
 * hand each record to cb in time order (records are buffered between
 * perf's FINISHED_ROUND markers and sorted, as perf does). cb's non-zero
 * return stops the read and is returned. info may be NULL.
 */
int perfdata__read(const char *path, rec_cb cb, void *ctx, struct perfdata_info *info,
		   struct perfdata_error *err);

/*
 * File mode maps the data section through a window of this many bytes
 * (0: the default, 256 MB on 64-bit; at least two records' worth), and
 * SIZE_MAX reads it with read() like pipe mode. For tests: not thread-safe.
 */
void perfdata__set_window(size_t bytes);
/*
 * perf record -z: decompressed records held between two FINISHED_ROUND
 * markers beyond this many bytes are an error (0: the default, 1 GiB;
 * perf's own rounds hold a few MiB). For tests: not thread-safe.
 */
void perfdata__set_held_max(size_t bytes);

#endif
