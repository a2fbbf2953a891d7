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
#include <unistd.h>

#include <linux/perf_event.h>

static size_t keep_of(const struct spill *f)
{
	return f->keep < 1 ? 1 : f->keep > SPILL_SPARES ? SPILL_SPARES : f->keep;
}

/* Into the first empty one of the keep spare slots; false when they are all taken. */
static bool spare_put(struct spill *f, uint8_t *chunk)
{
	for (size_t i = 0, n = keep_of(f); i < n; i++) {
		uint8_t *none = NULL;

		if (__atomic_compare_exchange_n(&f->spares[i], &none, chunk, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

static void chunk_put(struct spill *f, uint8_t *chunk)
{
	/* released chunks are kept for the writer: the steady state allocates nothing */
	if (!spare_put(f, chunk)) {
		free(chunk);
		__atomic_sub_fetch(&f->budget->used, 1, __ATOMIC_RELAXED);
	}
}

/* A chunk of the budget's, not yet touched; NULL past the budget (unless force) or out of memory. */
static uint8_t *chunk_new(struct spill *f, bool force)
{
	uint8_t *chunk;

	if (__atomic_add_fetch(&f->budget->used, 1, __ATOMIC_RELAXED) > f->budget->max && !force) {
		__atomic_sub_fetch(&f->budget->used, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	chunk = malloc(SPILL_CHUNK);
	if (!chunk)
		__atomic_sub_fetch(&f->budget->used, 1, __ATOMIC_RELAXED);
	return chunk;
}

static uint8_t *chunk_get(struct spill *f, bool force)
{
	for (size_t i = 0, n = keep_of(f); i < n; i++) {
		uint8_t *chunk;

		if (__atomic_load_n(&f->spares[i], __ATOMIC_RELAXED) &&
		    (chunk = __atomic_exchange_n(&f->spares[i], NULL, __ATOMIC_ACQ_REL)))
			return chunk;
	}
	return chunk_new(f, force);
}

int spill_ready(struct spill *f, size_t max)
{
	size_t waiting = 0, made = 0, n = keep_of(f);
	long sz = sysconf(_SC_PAGESIZE);
	size_t page = sz > 0 ? (size_t)sz : 4096;

	for (size_t i = 0; i < n; i++)
		waiting += __atomic_load_n(&f->spares[i], __ATOMIC_RELAXED) != NULL;
	while (waiting + made < n && made < max) {
		uint8_t *chunk = chunk_new(f, false);

		if (!chunk)
			return -ENOMEM;
		/*
		 * A write to every page: the kernel backs each one now, not
		 * under the writer (volatile: no malloc and memset made calloc)
		 */
		for (size_t at = 0; at < SPILL_CHUNK; at += page)
			((volatile uint8_t *)chunk)[at] = 0;
		if (!spare_put(f, chunk)) {
			/* the reader filled the slots meanwhile */
			chunk_put(f, chunk);
			break;
		}
		made++;
	}
	return (int)made;
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
	for (size_t i = 0; i < SPILL_SPARES; i++) {
		if (f->spares[i]) {
			free(f->spares[i]);
			__atomic_sub_fetch(&f->budget->used, 1, __ATOMIC_RELAXED);
		}
		f->spares[i] = NULL;
	}
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
