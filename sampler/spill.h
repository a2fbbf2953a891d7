/* SPDX-License-Identifier: MIT */
/*
 * A ring's records copied out of the kernel's ring into memory, so that the
 * kernel never waits for the thread that unwinds them: one thread writes
 * (a drain pass, early.c), another reads and releases (the recording's
 * thread, ring.c), without locks.
 *
 * The FIFO is a stream of bytes at 64-bit positions, cut into chunks of
 * SPILL_CHUNK bytes allocated when first written and freed once every
 * record in them is released. A record never straddles two chunks: where
 * the next one does not fit, the rest of the chunk is padding (a header of
 * size 0 if there is room for one), so that every record is read where it
 * lies. The chunks of all rings count against one budget: a writer that
 * would exceed it copies nothing until the readers release, and the
 * kernel's ring fills meanwhile (its losses are counted as ever).
 *
 * Internal to sampler/; library code: negative errno, never prints.
 */
#ifndef DLFLAME_SAMPLER_SPILL_H
#define DLFLAME_SAMPLER_SPILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPILL_CHUNK (1u << 20) /* holds at least 15 of the largest records (64 KiB) */
/* Chunks one FIFO may span; the budget usually ends it first. */
#define SPILL_SLOTS 4096
/* Touched chunks one FIFO keeps for its writer at most (struct spill's keep). */
#define SPILL_SPARES 64

/* Chunks allocated, of every FIFO sharing it (atomic), and how many they may be. */
struct spill_budget {
	size_t used;
	size_t max;
};

struct spill {
	struct spill_budget *budget;
	uint8_t *slots[SPILL_SLOTS]; /* chunk k at slots[k % SPILL_SLOTS] */
	/*
	 * Chunks whose pages are touched already, for the writer to take
	 * (each slot an atomic exchange): released ones the reader puts back,
	 * and ones made ahead (spill_ready). The first write to a page is a
	 * fault, and while a DDP job imported torch from a cold cache faults
	 * took the drain thread ~12 us a page: it copied 0.5 GB/s where the
	 * kernel wrote 2 GB/s, and the ring overflowed.
	 */
	uint8_t *spares[SPILL_SPARES];
	size_t keep; /* spares kept at most (at least 1; spill_ready makes up to this many) */
	uint64_t head; /* written up to here (atomic: the writer publishes, the reader loads) */
	uint64_t tail; /* released up to here (atomic: the reader stores, the writer loads) */
	uint64_t wpos; /* the writer's: written, not yet published */
};

/* Zeroed, with its budget set (and keep, if more than 1), is initialized. */
void spill_free(struct spill *f);

/*
 * Make chunks ahead, every page touched, until keep of them wait in the
 * spares, at most max now (each costs a fault a page: ring.c makes them
 * when the rings are mapped, never while they fill). Within the budget only.
 * Returns how many it made, 0 when none was wanted, -ENOMEM when the
 * budget or the memory said no. Safe beside the writer and the reader:
 * it touches the spares and the budget only.
 */
int spill_ready(struct spill *f, size_t max);

/*
 * Three quarters of the budget used (by every FIFO sharing it): the writer
 * should keep what it copies small.
 */
static inline bool spill_tight(const struct spill *f)
{
	return __atomic_load_n(&f->budget->used, __ATOMIC_RELAXED) * 4 > f->budget->max * 3;
}

/*
 * Writer: where the next record of len bytes (a multiple of 8, at most
 * 64 KiB) goes, padding the current chunk first if it does not fit; NULL
 * when it would take a chunk over the budget or past SPILL_SLOTS (nothing
 * changes then), or when out of memory. force: past the budget.
 */
uint8_t *spill_room(struct spill *f, size_t len, bool force);
/* Writer: the record of len bytes at spill_room()'s place is written. */
static inline void spill_wrote(struct spill *f, size_t len)
{
	f->wpos += len;
}
/* Writer: make what was written visible to the reader. */
static inline void spill_publish(struct spill *f)
{
	__atomic_store_n(&f->head, f->wpos, __ATOMIC_RELEASE);
}

/* Reader: how far the writer has published. */
static inline uint64_t spill_head(const struct spill *f)
{
	return __atomic_load_n(&f->head, __ATOMIC_ACQUIRE);
}
/*
 * Reader: the record at *pos (padding skipped: *at is where it starts),
 * below head. Returns 1 with *rec, *len and *at set and *pos past it, 0
 * at head, -EINVAL for a header that cannot be (the writer wrote none such).
 */
int spill_next(const struct spill *f, uint64_t head, uint64_t *pos, uint64_t *at, const void **rec,
	       size_t *len);
/* Reader: the bytes at a position spill_next returned (not yet released). */
static inline const uint8_t *spill_at(const struct spill *f, uint64_t pos)
{
	return f->slots[(pos / SPILL_CHUNK) % SPILL_SLOTS] + pos % SPILL_CHUNK;
}
/* Reader: everything before pos is done with; the chunks it filled go. */
void spill_release(struct spill *f, uint64_t pos);

#endif
