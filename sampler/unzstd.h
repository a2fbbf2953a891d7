/* SPDX-License-Identifier: MIT */
/*
 * The records inside perf.data's compressed records (perf record -z:
 * PERF_RECORD_COMPRESSED up to Linux 6.15, COMPRESSED2 since, which differ
 * only in where the payload ends). perf compresses what it reads from its
 * rings as one zstd stream: each compressed record's payload continues the
 * stream of the one before (perf flushes, and never ends the frame, after
 * each payload), and its output is a run of ordinary records in which one
 * record may begin in one payload's output and end in the next one's.
 *
 * This decoder takes the payloads in file order and hands back whole
 * records, each 8-byte aligned in its own buffer (valid until the next
 * call). Memory is a fixed buffer (UNZSTD_BUF) and zstd's window, whatever
 * the payloads expand to. Nothing is trusted: a payload may expand to at
 * most rec_cap bytes (perf reads each one into a buffer of its mmap size:
 * more is not perf's output), the whole stream to at most UNZSTD_MAX_RATIO
 * times its compressed bytes, and a record's size must hold its header.
 *
 * Internal to sampler/; library code: never prints. An error is -EINVAL with
 * `what` (static text) and `at` (the file offset of the payload's record the
 * failing record began in) set, or -ENOMEM.
 */
#ifndef DLFLAME_SAMPLER_UNZSTD_H
#define DLFLAME_SAMPLER_UNZSTD_H

#include <stddef.h>
#include <stdint.h>

/* output buffer: a record (at most 64 KiB) always fits after the one before */
#define UNZSTD_BUF ((size_t)256 << 10)
/*
 * the whole stream's expansion: perf -z at level 1 measured up to 1100x
 * (4100x for one payload) on a loop's 64 KiB DWARF stack copies
 */
#define UNZSTD_MAX_RATIO 8192

struct unzstd {
	void *ds; /* ZSTD_DStream */
	uint8_t *buf; /* UNZSTD_BUF bytes: output not yet handed out is [head, len) */
	size_t head, len;
	const uint8_t *in; /* the current payload */
	size_t in_len, in_pos;
	int pending; /* the last call filled the buffer: zstd may hold more output */
	uint64_t rec_cap; /* bytes one payload may expand to */
	uint64_t rec_out; /* bytes the current payload expanded to so far */
	uint64_t total_in, total_out;
	/* where output bytes came from: before cur_begin, tail_off; from there, cur_off */
	size_t cur_begin;
	uint64_t cur_off, tail_off;
	/* the last error */
	const char *what;
	uint64_t at;
	uint32_t kind; /* the type of the record at fault, UINT32_MAX if none was read */
};

/* rec_cap: bytes one payload may expand to (0: UNZSTD_BUF). 0 or -ENOMEM. */
int unzstd_init(struct unzstd *z, uint64_t rec_cap);
void unzstd_free(struct unzstd *z);

/*
 * The next payload, which lies at file offset `off` (of its compressed
 * record), len bytes at p; p must stay valid until unzstd_next returns 0
 * for it. Bytes of the previous payloads' output that do not make a whole
 * record yet are kept.
 */
void unzstd_feed(struct unzstd *z, const uint8_t *p, size_t len, uint64_t off);

/*
 * 1: *rec holds the next whole record (its size at bytes 6-7 is *len), which
 * began in the output of the payload at file offset *at. 0: the payload is
 * used up (the next one may complete a record begun here). -EINVAL (what,
 * at, kind set) or -ENOMEM.
 */
int unzstd_next(struct unzstd *z, const uint8_t **rec, size_t *len, uint64_t *at);

/* At the end of the data: 0, or -EINVAL when a record begun was never completed. */
int unzstd_end(struct unzstd *z);

#endif
