/* SPDX-License-Identifier: MIT */
/*
 * The time-ordering queue of the sampler's live rings and of the perf.data
 * reader: records arrive out of time order (one ring per CPU; perf flushes
 * rounds of several CPUs), are held back until nothing older can still
 * come, and are delivered sorted by time, ties in arrival order.
 *
 * Zero-copy: a record is queued where it lies (a kernel ring, a mapped
 * window of the file) and only its place is kept; the caller knows how to
 * find it from (src, pos). Only records that cannot stay there (wrapping
 * the ring's end, read with read(), or about to be unmapped) are copied
 * into the queue's buffer, 8-byte aligned, so that they decode in place.
 *
 * Internal to sampler/; library code: negative errno, never prints.
 */
#ifndef DLFLAME_SAMPLER_ORDER_H
#define DLFLAME_SAMPLER_ORDER_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/util.h"

/* order_rec.off of a record that lies in its source, not in the buffer */
#define ORDER_IN_PLACE SIZE_MAX

struct order_rec {
	uint64_t time;
	uint64_t seq; /* arrival order: ties keep it */
	uint64_t pos; /* where it lies in its source: ring position, file offset */
	size_t off; /* in the buffer, 8-byte aligned; ORDER_IN_PLACE: at pos in its source */
	uint32_t len;
	uint32_t src; /* the caller's: which ring, which event */
	uint32_t kind; /* the caller's: the record's type */
};

struct order {
	struct order_rec *recs; /* sorted up to where order_sort left them, then arrivals */
	size_t nr, cap;
	size_t in_place; /* records of recs[] that lie in their source */
	uint8_t *buf; /* copied records */
	size_t buf_len, buf_cap;
	size_t buf_dead; /* bytes below buf_len of records no longer queued */
	uint64_t seq;
};

/* Zeroed is initialized. */
void order_free(struct order *q);

static inline size_t order_aligned(size_t len)
{
	return (len + 7) & ~(size_t)7;
}

static inline struct order_rec *order_add(struct order *q, uint64_t time, uint64_t pos,
					  uint32_t len, uint32_t src, uint32_t kind)
{
	struct order_rec *r;

	if (grow_array((void **)&q->recs, &q->cap, q->nr + 1, sizeof(*q->recs)))
		return NULL;
	r = &q->recs[q->nr++];
	*r = (struct order_rec){ .time = time,
				 .seq = q->seq++,
				 .pos = pos,
				 .off = ORDER_IN_PLACE,
				 .len = len,
				 .src = src,
				 .kind = kind };
	q->in_place++;
	return r;
}

/* Copy r's len bytes (data) into the buffer: it no longer lies in its source. */
static inline int order_copy_in(struct order *q, struct order_rec *r, const void *data)
{
	size_t need;

	if (r->off != ORDER_IN_PLACE)
		return 0;
	if (add_overflows(q->buf_len, order_aligned(r->len), &need) ||
	    grow_array((void **)&q->buf, &q->buf_cap, need, 1))
		return -ENOMEM;
	memcpy(q->buf + q->buf_len, data, r->len);
	r->off = q->buf_len;
	q->buf_len = need;
	q->in_place--;
	return 0;
}

/* Queue a record that stays where it lies (src, pos) until it is delivered. */
static inline int order_push(struct order *q, uint64_t time, uint64_t pos, uint32_t len,
			     uint32_t src, uint32_t kind)
{
	return order_add(q, time, pos, len, src, kind) ? 0 : -ENOMEM;
}

/* Queue a copy of the record `data`. */
static inline int order_push_copy(struct order *q, uint64_t time, uint64_t pos, const void *data,
				  uint32_t len, uint32_t src, uint32_t kind)
{
	struct order_rec *r = order_add(q, time, pos, len, src, kind);

	return r ? order_copy_in(q, r, data) : -ENOMEM;
}

/* A copied record's bytes (r->off != ORDER_IN_PLACE). */
static inline const uint8_t *order_copied(const struct order *q, const struct order_rec *r)
{
	return q->buf + r->off;
}

/* Bytes of copied records still queued. */
static inline size_t order_held(const struct order *q)
{
	return q->buf_len - q->buf_dead;
}

/* Sort every queued record by time, ties in arrival order. */
void order_sort(struct order *q);

/*
 * The hold-back: after order_sort, how many records from the front are
 * due, their time at or before limit (UINT64_MAX: all of them). The rest
 * wait for a later round, when what is older than them has come in.
 */
size_t order_due(const struct order *q, uint64_t limit);

/*
 * Forget recs[0..from) (delivered) and keep the rest, in order, for the
 * next round. Kept copies stay where they are in the buffer, which is
 * packed (into a fresh one) only once the copies of forgotten records add
 * up to at least pack_at bytes and to what is kept.
 */
void order_keep(struct order *q, size_t from, size_t pack_at);

#endif
