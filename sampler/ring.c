/* SPDX-License-Identifier: MIT */
/*
 * Reading one record from a perf mmap ring. The kernel writes records at
 * data_head, 8-byte aligned and never larger than 64 KiB (header.size is a
 * u16); we consume from data_tail. A record may straddle the end of the
 * data area: then it is reassembled in `scratch`.
 */
#include <errno.h>
#include <string.h>

#include <linux/perf_event.h>

#include "sampler/sampler.h"

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
