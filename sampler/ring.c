/* SPDX-License-Identifier: MIT */
/*
 * The per-CPU mmap rings: opening the event that owns each and mapping it,
 * reading records (ring_next: for early.c's drain passes, which copy them
 * into each ring's spill), framing them where they lie in the spill, and
 * giving their space back once they are delivered.
 *
 * The kernel writes records at data_head, 8-byte aligned and never larger
 * than 64 KiB (header.size is a u16); a drain pass consumes from
 * data_tail. A record may straddle the end of the data area: then
 * ring_next reassembles it in `scratch`.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sampler/internal.h"

#define MIN_PAGES 8

/* Copy n bytes starting at ring offset off, wrapping at size. */
static void ring_copy(const uint8_t *base, size_t size, size_t off, void *dst, size_t n)
{
	size_t first = size - off < n ? size - off : n;

	memcpy(dst, base + off, first);
	memcpy((uint8_t *)dst + first, base, n - first);
}

int ring_next(const uint8_t *base, size_t size, uint64_t head, uint64_t *tail, uint8_t *scratch,
	      size_t scratch_size, const void **rec, size_t *len)
{
	struct perf_event_header h;
	uint64_t avail;
	size_t off;

	if (!base || !tail || !rec || !len || size == 0 || (size & (size - 1)))
		return -EINVAL;
	if (*tail == head)
		return 0;
	avail = head - *tail;
	/* The kernel never overwrites unread data: more than size pending is a bad head or tail. */
	if (avail < sizeof(h) || avail > size)
		return -EINVAL;

	off = *tail & (size - 1);
	ring_copy(base, size, off, &h, sizeof(h));
	if (h.size < sizeof(h) || h.size > avail || h.size > size || h.size % sizeof(uint64_t))
		return -EINVAL;
	if (h.size > scratch_size)
		return -EINVAL;

	if (off + h.size <= size) {
		*rec = base + off;
	} else {
		if (!scratch)
			return -EINVAL;
		ring_copy(base, size, off, scratch, h.size);
		*rec = scratch;
	}
	*len = h.size;
	*tail += h.size;
	return 1;
}

/* The online CPUs, from the kernel's list ("0-3,6"), else 0..n-1. */
static int online_cpus(int **cpus, size_t *nr)
{
	char line[4096], *p, *end;
	size_t cap = 0, n = 0;
	int *v = NULL;
	FILE *f;

	f = fopen("/sys/devices/system/cpu/online", "re");
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
		for (p = line; *p >= '0' && *p <= '9';) {
			unsigned long a, b;

			a = strtoul(p, &end, 10);
			b = a;
			if (*end == '-')
				b = strtoul(end + 1, &end, 10);
			if (b < a || b > 65535)
				break;
			for (unsigned long c = a; c <= b; c++) {
				if (grow_array((void **)&v, &cap, n + 1, sizeof(*v))) {
					free(v);
					return -ENOMEM;
				}
				v[n++] = (int)c;
			}
			p = *end == ',' ? end + 1 : end;
		}
	}
	if (!n) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		if (ncpu < 1)
			ncpu = 1;
		free(v);
		v = calloc(ncpu, sizeof(*v));
		if (!v)
			return -ENOMEM;
		for (long c = 0; c < ncpu; c++)
			v[n++] = (int)c;
	}
	*cpus = v;
	*nr = n;
	return 0;
}

static int map_rings(struct sampler *s, uint32_t pages)
{
	size_t pgsz = (size_t)sysconf(_SC_PAGESIZE);

	s->ring_bytes = 0;
	for (size_t i = 0; i < s->nr_rings; i++) {
		struct ring *r = &s->rings[i];
		struct perf_event_mmap_page *pg;
		size_t off, size;

		r->map_size = (1 + (size_t)pages) * pgsz;
		r->map = mmap(NULL, r->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
		if (r->map == MAP_FAILED) {
			r->map = NULL;
			return -errno;
		}
		pg = r->map;
		off = pg->data_offset ? pg->data_offset : pgsz;
		size = pg->data_size ? pg->data_size : (size_t)pages * pgsz;
		if (off > r->map_size || size > r->map_size - off || (size & (size - 1)))
			return -EINVAL;
		r->data = (const uint8_t *)r->map + off;
		r->data_size = size;
		s->ring_bytes += size;
		r->spill = calloc(1, sizeof(*r->spill));
		if (!r->spill)
			return -ENOMEM;
		r->spill->budget = &s->budget;
		/*
		 * A ring's worth of chunks, their pages touched, ready for a
		 * burst (within an eighth of the budget for all rings), made
		 * now: in launch mode before the target runs. Made by the drain
		 * thread instead, while the rings were quiet, they took 40 ms of
		 * a CPU from a 2-thread trainer's first second; made again
		 * after each quiet pass, they kept the drain thread from the
		 * rings up to 30 ms in the middle of a burst, which lost more
		 * than they saved. Released chunks come back to the spares.
		 */
		r->spill->keep = size / SPILL_CHUNK;
		if (r->spill->keep > s->budget.max / 8 / s->nr_rings)
			r->spill->keep = s->budget.max / 8 / s->nr_rings;
		spill_ready(r->spill, r->spill->keep); /* short of memory: fewer, or none */
	}
	return 0;
}

static void unmap_rings(struct sampler *s)
{
	for (size_t i = 0; i < s->nr_rings; i++) {
		if (s->rings[i].map)
			munmap(s->rings[i].map, s->rings[i].map_size);
		s->rings[i].map = NULL;
		if (s->rings[i].spill)
			spill_free(s->rings[i].spill);
		free(s->rings[i].spill);
		s->rings[i].spill = NULL;
	}
}

/* The smallest ring that still holds a few of the largest records. */
static uint32_t min_pages(const struct sampler *s)
{
	size_t pgsz = (size_t)sysconf(_SC_PAGESIZE), want = 4 * ((size_t)s->opts.stack_size + 4096);
	uint32_t pages = MIN_PAGES;

	while ((size_t)pages * pgsz < want)
		pages *= 2;
	return pages;
}

void count_lost(struct sampler *s, const struct rec_lost *l)
{
	uint64_t v;

	s->stats.lost += l->lost;
	if (u64map_get(&s->ids, l->id, &v) && (v & 0xff) < 2)
		s->stats.lost_by_event[v & 0xff] += l->lost;
	else
		s->stats.lost_other += l->lost;
}

/* Locked memory for the rings of all CPUs together, at most (see rings_open). */
#define RINGS_BUDGET (256ull << 20)

/*
 * Open the event that owns the ring of each CPU and map the rings.
 * Locked memory is limited per user for the unprivileged: on EPERM or
 * ENOMEM from mmap, try smaller rings. The events are reopened each time,
 * because the wakeup watermark is fixed at open and must stay below the
 * ring size or poll would only wake when the ring is full.
 */
int rings_open(struct sampler *s, struct perf_event_attr *attr, pid_t pid, open_owner_fn open_owner,
	       int ev)
{
	size_t pgsz = (size_t)sysconf(_SC_PAGESIZE), nr;
	uint32_t pages = s->opts.mmap_pages, least = min_pages(s);
	int err, fd;

	err = online_cpus(&s->cpus, &nr);
	if (err)
		return err;
	s->rings = calloc(nr, sizeof(*s->rings));
	s->pfds = calloc(nr, sizeof(*s->pfds));
	if (!s->rings || !s->pfds)
		return -ENOMEM;
	for (size_t i = 0; i < nr; i++)
		s->rings[i].fd = -1;
	s->nr_rings = nr;
	/* many CPUs share a budget: rings of RINGS_BUDGET in all, but never under least */
	while (pages > least && (uint64_t)pages * pgsz * nr > RINGS_BUDGET)
		pages /= 2;
	if (pages < least)
		pages = least;

	attr->watermark = 1;
	for (;;) {
		attr->wakeup_watermark = (uint32_t)((size_t)pages * pgsz / 4);
		for (size_t i = 0; i < s->nr_rings; i++) {
			fd = open_owner(s, attr, pid, s->cpus[i]);
			if (fd < 0)
				return event_errno(fd);
			s->rings[i].fd = fd;
		}
		err = map_rings(s, pages);
		if (!err)
			break;
		unmap_rings(s);
		for (size_t i = 0; i < s->nr_rings; i++)
			close_fd(&s->rings[i].fd);
		if ((err != -EPERM && err != -ENOMEM) || pages <= least)
			break;
		pages /= 2;
	}
	if (err == -EPERM)
		err = -ENOMEM; /* EPERM means perf_event_paranoid to the caller */
	if (err)
		return err;
	s->opts.mmap_pages = pages;
	s->mono_clock = true;
	for (size_t i = 0; i < s->nr_rings && !err && ev >= 0; i++)
		err = event_note_id(s, s->rings[i].fd, (enum rec_event)ev, 0);
	return err;
}

void rings_close(struct sampler *s)
{
	/* the events writing into the rings first, then the rings */
	events_close(s);
	unmap_rings(s);
	for (size_t i = 0; i < s->nr_rings; i++) {
		if (s->rings[i].fd >= 0)
			close(s->rings[i].fd);
	}
	free(s->rings);
	free(s->pfds);
	free(s->cpus);
	s->rings = NULL;
	s->pfds = NULL;
	s->cpus = NULL;
	s->nr_rings = 0;
	s->ring_bytes = 0;
}

/* ---- framing records ------------------------------------------------------ */

uint64_t ring_readable(const struct sampler *s, const struct ring *r)
{
	return s->early_running ? __atomic_load_n(&r->early_pos, __ATOMIC_ACQUIRE)
				: spill_head(r->spill);
}

uint64_t rings_copied_at(const struct sampler *s)
{
	return __atomic_load_n(s->early_running ? &s->early_seen : &s->copied_at, __ATOMIC_ACQUIRE);
}

/* Frame every record of ring ri copied into its spill (and seen early); they stay there. */
int ring_ingest(struct sampler *s, size_t ri)
{
	struct ring *r = &s->rings[ri];
	uint64_t head = ring_readable(s, r), pos = r->read_pos, next, at;
	const void *data;
	struct rec dec;
	size_t len;
	int err = 0, ret;

	for (;;) {
		next = pos;
		ret = spill_next(r->spill, head, &next, &at, &data, &len);
		if (ret == 0)
			break;
		if (ret < 0) {
			/* cannot be (a drain pass wrote it): the rest cannot be framed */
			s->stats.bad_records++;
			pos = head;
			break;
		}
		if (rec_decode(&s->layout, data, len, &dec) < 0) {
			s->stats.bad_records++;
		} else {
			uint64_t time = dec.time ? dec.time : r->last_time;

			r->last_time = time;
			err = order_push(&s->q, time, at, (uint32_t)len, (uint32_t)ri, 0);
			if (err)
				break;
			s->stats.records++;
			if (dec.type == REC_SAMPLE)
				s->stats.samples++;
			else if (dec.type == REC_LOST)
				count_lost(s, &dec.lost);
			else if (dec.type == REC_MMAP2 && s->opts.on_map)
				s->opts.on_map(s->opts.on_map_ctx, &dec); /* may add a probe */
		}
		pos = next;
	}
	r->read_pos = pos;
	return err;
}

/*
 * Give the spills back the space of every record before the oldest one of
 * the queue's recs[from..] still in them (records are framed in spill
 * order, so that is all of them but the waiting ones and what follows).
 */
void rings_release(struct sampler *s, size_t from)
{
	for (size_t i = 0; i < s->nr_rings; i++)
		s->rings[i].release = s->rings[i].read_pos;
	for (size_t k = from; s->q.in_place && k < s->q.nr; k++) {
		const struct order_rec *p = &s->q.recs[k];

		if (p->off == ORDER_IN_PLACE && p->pos < s->rings[p->src].release)
			s->rings[p->src].release = p->pos;
	}
	for (size_t i = 0; i < s->nr_rings; i++)
		spill_release(s->rings[i].spill, s->rings[i].release);
}

unsigned rings_fill(const struct sampler *s)
{
	unsigned most = 0;

	for (size_t i = 0; i < s->nr_rings; i++) {
		const struct perf_event_mmap_page *pg = s->rings[i].map;
		uint64_t size = s->rings[i].data_size,
			 used = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE) -
				__atomic_load_n(&pg->data_tail, __ATOMIC_RELAXED);
		unsigned e = !size ? 0 : used >= size ? 8 : (unsigned)(used * 8 / size);

		if (e > most)
			most = e;
	}
	return most;
}

/* Whether some ring has framed records waiting of more than half its kernel ring's size. */
bool rings_filling(const struct sampler *s)
{
	for (size_t i = 0; i < s->nr_rings; i++) {
		const struct ring *r = &s->rings[i];

		if (r->read_pos - r->spill->tail > r->data_size / 2)
			return true;
	}
	return false;
}
