/* SPDX-License-Identifier: MIT */
/*
 * One kernel ring: mapping it over the fd of the event that owns it,
 * reading its records (ring_next) and copying them out into the ring's
 * spill (ring_copy_out, early.c's drain passes), which gives the kernel its
 * space back at once. Which events own the rings is events.c's; what is
 * done with the copies, early.c's and sampler.c's.
 *
 * The kernel writes records at data_head, 8-byte aligned and never larger
 * than 64 KiB (header.size is a u16); ring_copy_out consumes from
 * data_tail. A record may straddle the end of the data area: then
 * ring_next reassembles it in `scratch`.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sampler/internal.h"

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

int ring_map(struct ring *r, uint32_t pages, struct spill_budget *budget)
{
	size_t pgsz = (size_t)sysconf(_SC_PAGESIZE), off, size;
	struct perf_event_mmap_page *pg;

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
	r->spill = calloc(1, sizeof(*r->spill));
	if (!r->spill)
		return -ENOMEM;
	r->spill->budget = budget;
	return 0;
}

void ring_unmap(struct ring *r)
{
	if (r->map)
		munmap(r->map, r->map_size);
	r->map = NULL;
	if (r->spill)
		spill_free(r->spill);
	free(r->spill);
	r->spill = NULL;
}

bool ring_copy_out(struct ring *r, const struct rec_layout *layout, uint8_t *scratch, bool final,
		   unsigned *fill, uint64_t *bad)
{
	struct perf_event_mmap_page *pg = r->map;
	uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE), tail = pg->data_tail;
	unsigned eighths = (unsigned)((head - tail) * 8 / r->data_size);
	bool all = true;

	if (eighths > *fill)
		*fill = eighths;
	for (;;) {
		uint64_t next = tail;
		const void *data;
		uint8_t *dst;
		size_t len;
		int ret = ring_next(r->data, r->data_size, head, &next, scratch, SCRATCH_SIZE,
				    &data, &len);

		if (ret == 0)
			break;
		if (ret < 0) {
			/* a broken header: the rest of this ring cannot be framed */
			(*bad)++;
			tail = head;
			break;
		}
		dst = spill_room(r->spill, len, final);
		if (!dst) {
			all = false;
			break;
		}
		spill_wrote(r->spill, rec_trim(layout, data, len, dst));
		tail = next;
	}
	/* the kernel may write there again */
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
	spill_publish(r->spill);
	return all;
}
