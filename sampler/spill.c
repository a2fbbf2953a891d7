/* SPDX-License-Identifier: MIT */
/*
 * The FIFOs that records are copied into out of the kernel's rings
 * (spill.h): one writer, one reader, no locks. The writer publishes head
 * (release) after it wrote a chunk's pointer and the records; the reader
 * frees whole chunks below the records it still needs and only then
 * publishes tail (release), which the writer loads before reusing a slot.
 */
#include "sampler/spill.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <linux/perf_event.h>

static void chunk_put(struct spill *f, uint8_t *chunk)
{
	uint8_t *none = NULL;

	/* one released chunk is kept for the writer: the steady state allocates nothing */
	if (!__atomic_compare_exchange_n(&f->spare, &none, chunk, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED)) {
		free(chunk);
		__atomic_sub_fetch(&f->budget->used, 1, __ATOMIC_RELAXED);
	}
}

static uint8_t *chunk_get(struct spill *f, bool force)
{
	uint8_t *chunk = __atomic_exchange_n(&f->spare, NULL, __ATOMIC_ACQ_REL);

	if (chunk)
		return chunk;
	if (__atomic_add_fetch(&f->budget->used, 1, __ATOMIC_RELAXED) > f->budget->max && !force) {
		__atomic_sub_fetch(&f->budget->used, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	chunk = malloc(SPILL_CHUNK);
	if (!chunk)
		__atomic_sub_fetch(&f->budget->used, 1, __ATOMIC_RELAXED);
	return chunk;
}

void spill_free(struct spill *f)
{
	for (size_t i = 0; i < SPILL_SLOTS; i++) {
		if (f->slots[i]) {
			free(f->slots[i]);
			__atomic_sub_fetch(&f->budget->used, 1, __ATOMIC_RELAXED);
		}
		f->slots[i] = NULL;
	}
	if (f->spare) {
		free(f->spare);
		__atomic_sub_fetch(&f->budget->used, 1, __ATOMIC_RELAXED);
	}
	f->spare = NULL;
}

uint8_t *spill_room(struct spill *f, size_t len, bool force)
{
	uint64_t pos = f->wpos, left = SPILL_CHUNK - pos % SPILL_CHUNK, k, tail;
	uint8_t **slot;

	if (!len || len % 8 || len > SPILL_CHUNK)
		return NULL;
	if (len > left)
		pos += left; /* the next chunk; this one's rest is padding */
	k = pos / SPILL_CHUNK;
	tail = __atomic_load_n(&f->tail, __ATOMIC_ACQUIRE);
	/* the slot's chunk before this one, k - SPILL_SLOTS, must be released entirely */
	if ((k + 1) * SPILL_CHUNK - tail > (uint64_t)SPILL_SLOTS * SPILL_CHUNK)
		return NULL;
	slot = &f->slots[k % SPILL_SLOTS];
	if (!*slot && !(*slot = chunk_get(f, force)))
		return NULL;
	if (pos != f->wpos) {
		/* records are multiples of 8 bytes: the rest of a chunk has room for a header */
		memset(f->slots[(f->wpos / SPILL_CHUNK) % SPILL_SLOTS] + f->wpos % SPILL_CHUNK, 0,
		       sizeof(struct perf_event_header));
		f->wpos = pos;
	}
	return *slot + pos % SPILL_CHUNK;
}

int spill_next(const struct spill *f, uint64_t head, uint64_t *pos, uint64_t *at, const void **rec,
	       size_t *len)
{
	uint64_t p = *pos;
	struct perf_event_header h;

	for (;;) {
		uint64_t left = SPILL_CHUNK - p % SPILL_CHUNK;

		if (p == head)
			return 0;
		if (head - p > (uint64_t)SPILL_SLOTS * SPILL_CHUNK || left < sizeof(h))
			return -EINVAL;
		memcpy(&h, spill_at(f, p), sizeof(h));
		if (h.size == 0) {
			p += left; /* padding: the record went to the next chunk */
			continue;
		}
		if (h.size < sizeof(h) || h.size % 8 || h.size > left || h.size > head - p)
			return -EINVAL;
		*at = p;
		*rec = spill_at(f, p);
		*len = h.size;
		*pos = p + h.size;
		return 1;
	}
}

void spill_release(struct spill *f, uint64_t pos)
{
	uint64_t tail = f->tail;

	if (pos <= tail)
		return;
	/* chunks wholly below pos: the writer has moved past them */
	for (uint64_t k = tail / SPILL_CHUNK; (k + 1) * SPILL_CHUNK <= pos; k++) {
		uint8_t **slot = &f->slots[k % SPILL_SLOTS];

		if (*slot)
			chunk_put(f, *slot);
		*slot = NULL;
	}
	__atomic_store_n(&f->tail, pos, __ATOMIC_RELEASE);
}
