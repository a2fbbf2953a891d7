/* SPDX-License-Identifier: MIT */
/*
 * The time-ordering queue shared by live recording and the perf.data
 * reader (order.h).
 */
#include "sampler/order.h"

#include <stdlib.h>

void order_free(struct order *q)
{
	free(q->recs);
	free(q->buf);
	memset(q, 0, sizeof(*q));
}

static int cmp_time(const void *a, const void *b)
{
	const struct order_rec *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void order_sort(struct order *q)
{
	if (q->nr > 1)
		qsort(q->recs, q->nr, sizeof(*q->recs), cmp_time);
}

size_t order_due(const struct order *q, uint64_t limit)
{
	size_t lo = 0, hi = q->nr;

	if (limit == UINT64_MAX)
		return q->nr;
	/* the first record later than limit */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (q->recs[mid].time <= limit)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void order_keep(struct order *q, size_t from, size_t pack_at)
{
	size_t n, live = 0, in_place = 0, cap = 0, at = 0;
	uint8_t *nbuf = NULL;

	if (from > q->nr)
		from = q->nr;
	n = q->nr - from;
	if (!n) {
		q->nr = q->in_place = q->buf_len = q->buf_dead = 0;
		return;
	}
	for (size_t i = from; i < q->nr; i++) {
		if (q->recs[i].off == ORDER_IN_PLACE)
			in_place++;
		else
			live += order_aligned(q->recs[i].len);
	}
	/* out of memory for the packed copy: it stays unpacked, which is only bigger */
	if (q->buf_len - live >= pack_at && q->buf_len - live >= live &&
	    (!live || !grow_array((void **)&nbuf, &cap, live, 1))) {
		for (size_t i = from; i < q->nr; i++) {
			struct order_rec *r = &q->recs[i];

			if (r->off == ORDER_IN_PLACE)
				continue;
			memcpy(nbuf + at, q->buf + r->off, r->len);
			r->off = at;
			at += order_aligned(r->len);
		}
		free(q->buf);
		q->buf = nbuf;
		q->buf_cap = cap;
		q->buf_len = at;
	}
	memmove(q->recs, q->recs + from, n * sizeof(*q->recs));
	q->nr = n;
	q->in_place = in_place;
	q->buf_dead = q->buf_len - live;
}
