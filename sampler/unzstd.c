/* SPDX-License-Identifier: MIT */
/*
 * The records of perf record -z's compressed stream (unzstd.h), through one
 * fixed buffer: zstd writes after the bytes not handed out yet, records are
 * handed out where they lie, and the unfinished tail is moved to the front
 * when the space after it gets short of a whole record.
 */
#include "sampler/unzstd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "util/util.h"

#define MAX_RECORD 65535 /* a record's size is a u16 */

_Static_assert(UNZSTD_BUF >= 2 * (MAX_RECORD + 1), "a record fits after an unfinished one");

int unzstd_init(struct unzstd *z, uint64_t rec_cap)
{
	memset(z, 0, sizeof(*z));
	z->rec_cap = rec_cap ? rec_cap : UNZSTD_BUF;
	z->kind = UINT32_MAX;
	z->buf = malloc(UNZSTD_BUF);
	z->ds = ZSTD_createDStream();
	if (!z->buf || !z->ds || ZSTD_isError(ZSTD_initDStream(z->ds))) {
		unzstd_free(z);
		return -ENOMEM;
	}
	return 0;
}

void unzstd_free(struct unzstd *z)
{
	if (z->ds)
		ZSTD_freeDStream(z->ds);
	free(z->buf);
	memset(z, 0, sizeof(*z));
}

/* The file offset of the payload whose output holds buf[i]. */
static uint64_t origin(const struct unzstd *z, size_t i)
{
	return i < z->cur_begin ? z->tail_off : z->cur_off;
}

static int bad(struct unzstd *z, const char *what, uint64_t at, uint32_t kind)
{
	z->what = what;
	z->at = at;
	z->kind = kind;
	return -EINVAL;
}

void unzstd_feed(struct unzstd *z, const uint8_t *p, size_t len, uint64_t off)
{
	/* the kept tail began where its first byte came from */
	z->tail_off = z->head < z->len ? origin(z, z->head) : off;
	z->cur_begin = z->len;
	z->cur_off = off;
	z->in = p;
	z->in_len = len;
	z->in_pos = 0;
	z->rec_out = 0;
	z->total_in += len;
}

/* Moves the bytes not handed out to the front of the buffer. */
static void compact(struct unzstd *z)
{
	size_t keep = z->len - z->head;

	memmove(z->buf, z->buf + z->head, keep);
	z->cur_begin = z->cur_begin > z->head ? z->cur_begin - z->head : 0;
	z->len = keep;
	z->head = 0;
}

/* Decompresses what fits into the buffer: 0 or -EINVAL. */
static int inflate(struct unzstd *z)
{
	ZSTD_inBuffer in = { z->in, z->in_len, z->in_pos };
	ZSTD_outBuffer out = { z->buf, UNZSTD_BUF, z->len };
	size_t ret, made;

	ret = ZSTD_decompressStream(z->ds, &out, &in);
	if (ZSTD_isError(ret))
		return bad(z, "corrupt zstd data", z->cur_off, UINT32_MAX);
	made = out.pos - z->len;
	if (!made && z->in_pos < z->in_len && in.pos == z->in_pos && out.pos < out.size)
		return bad(z, "zstd data that decodes to nothing", z->cur_off, UINT32_MAX);
	z->in_pos = in.pos;
	z->len = out.pos;
	z->pending = out.pos == out.size;
	z->rec_out += made;
	z->total_out += made;
	if (z->rec_out > z->rec_cap)
		return bad(z,
			   "a compressed record expands past perf's buffer for it "
			   "(a zstd bomb?)",
			   z->cur_off, UINT32_MAX);
	if (z->total_out / UNZSTD_MAX_RATIO > z->total_in)
		return bad(z,
			   "compressed data expands more than 8192 times its size "
			   "(a zstd bomb?)",
			   z->cur_off, UINT32_MAX);
	return 0;
}

int unzstd_next(struct unzstd *z, const uint8_t **rec, size_t *len, uint64_t *at)
{
	for (;;) {
		size_t avail = z->len - z->head;
		int e;

		if (avail >= 8) {
			const uint8_t *h = z->buf + z->head;
			size_t size = get_le32(h + 4) >> 16;

			if (size < 8)
				return bad(z, "record size smaller than its header",
					   origin(z, z->head), get_le32(h));
			if (avail >= size) {
				/* records are u64-aligned in perf's output: only a corrupt one moves */
				if (z->head % 8)
					compact(z);
				*rec = z->buf + z->head;
				*len = size;
				*at = origin(z, z->head);
				z->head += size;
				return 1;
			}
		}
		if (z->in_pos == z->in_len && !z->pending)
			return 0;
		if (UNZSTD_BUF - z->len <= MAX_RECORD)
			compact(z);
		e = inflate(z);
		if (e)
			return e;
	}
}

int unzstd_end(struct unzstd *z)
{
	size_t avail = z->len - z->head;

	if (!avail)
		return 0;
	return bad(z, "compressed data ends inside a record", origin(z, z->head),
		   avail >= 4 ? get_le32(z->buf + z->head) : UINT32_MAX);
}
