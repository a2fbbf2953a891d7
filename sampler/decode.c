/* SPDX-License-Identifier: MIT */
/*
 * Decoding raw perf records into struct rec. The input is untrusted (a
 * corrupt ring, a hostile perf.data): every offset is checked against the
 * record length before it is read, and strings must end inside the record.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <linux/perf_event.h>

#include "sampler/sampler.h"

/* A bounded read cursor over [p, p + end). */
struct cur {
	const uint8_t *p;
	size_t off, end;
};

static bool take(struct cur *c, size_t n, const uint8_t **at)
{
	if (c->off > c->end || n > c->end - c->off)
		return false;
	*at = c->p + c->off;
	c->off += n;
	return true;
}

static bool get_u64(struct cur *c, uint64_t *v)
{
	const uint8_t *at;

	if (!take(c, sizeof(*v), &at))
		return false;
	memcpy(v, at, sizeof(*v));
	return true;
}

/* Two u32 in one u64 slot: {pid, tid}, {cpu, res}, {maj, min}, {prot, flags}. */
static bool get_u32x2(struct cur *c, uint32_t *a, uint32_t *b)
{
	const uint8_t *at;

	if (!take(c, 2 * sizeof(uint32_t), &at))
		return false;
	memcpy(a, at, sizeof(*a));
	if (b)
		memcpy(b, at + 4, sizeof(*b));
	return true;
}

/* A NUL-terminated string filling [c->off, c->end): the NUL must be inside. */
static bool get_str(struct cur *c, const char **s)
{
	const uint8_t *start = c->p + c->off;

	if (c->off >= c->end || !memchr(start, '\0', c->end - c->off))
		return false;
	*s = (const char *)start;
	c->off = c->end;
	return true;
}

static size_t sample_id_size(uint64_t st)
{
	static const uint64_t bits[] = { PERF_SAMPLE_TID, PERF_SAMPLE_TIME,
					 PERF_SAMPLE_ID,  PERF_SAMPLE_STREAM_ID,
					 PERF_SAMPLE_CPU, PERF_SAMPLE_IDENTIFIER };
	size_t n = 0;

	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
		if (st & bits[i])
			n += sizeof(uint64_t);
	return n;
}

struct sample_id {
	uint64_t time, id;
	uint32_t pid, tid, cpu;
	bool has_time, has_id;
};

/* The sample_id trailer of a non-sample record, in its fixed field order. */
static bool parse_sample_id(uint64_t st, struct cur c, struct sample_id *sid)
{
	uint64_t skip;

	if ((st & PERF_SAMPLE_TID) && !get_u32x2(&c, &sid->pid, &sid->tid))
		return false;
	if (st & PERF_SAMPLE_TIME) {
		if (!get_u64(&c, &sid->time))
			return false;
		sid->has_time = true;
	}
	if (st & PERF_SAMPLE_ID) {
		if (!get_u64(&c, &sid->id))
			return false;
		sid->has_id = true;
	}
	if ((st & PERF_SAMPLE_STREAM_ID) && !get_u64(&c, &skip))
		return false;
	if ((st & PERF_SAMPLE_CPU) && !get_u32x2(&c, &sid->cpu, NULL))
		return false;
	if (st & PERF_SAMPLE_IDENTIFIER) {
		if (!get_u64(&c, &sid->id))
			return false;
		sid->has_id = true;
	}
	return true;
}

/*
 * PERF_SAMPLE_REGS_USER: the ABI, then one u64 per bit set in the mask, in
 * bit order (none at all when the ABI is NONE: a kernel thread). Bits past
 * REC_REGS_MAX (the XMM registers) are read and dropped.
 */
static int decode_regs(uint64_t mask, struct cur *c, struct rec_regs *out)
{
	uint64_t n = (uint64_t)__builtin_popcountll(mask), v;

	if (!get_u64(c, &out->abi))
		return -EINVAL;
	if (out->abi == PERF_SAMPLE_REGS_ABI_NONE)
		return 0;
	if (out->abi != PERF_SAMPLE_REGS_ABI_32 && out->abi != PERF_SAMPLE_REGS_ABI_64)
		return -EINVAL;
	if (n > (c->end - c->off) / sizeof(uint64_t))
		return -EINVAL;
	for (unsigned bit = 0; bit < 64; bit++) {
		if (!(mask & (1ull << bit)))
			continue;
		if (!get_u64(c, &v))
			return -EINVAL;
		if (bit < REC_REGS_MAX)
			out->regs[bit] = v;
	}
	out->mask = mask & ((1ull << REC_REGS_MAX) - 1);
	return 0;
}

/*
 * PERF_SAMPLE_STACK_USER: u64 size, size bytes copied from the user SP up,
 * then (only when size > 0) u64 dyn_size, the bytes the kernel could
 * actually copy. Only those are valid.
 */
static int decode_stack(struct cur *c, struct rec_sample *s)
{
	uint64_t size, dyn;
	const uint8_t *at;

	s->stack_off = (uint32_t)c->off;
	if (!get_u64(c, &size))
		return -EINVAL;
	if (!size)
		return 0;
	if (size > c->end - c->off || !take(c, size, &at) || !get_u64(c, &dyn) || dyn > size)
		return -EINVAL;
	s->stack = dyn ? at : NULL;
	s->stack_size = dyn;
	return 0;
}

const struct rec_alt *rec_alt_of(const struct rec_layout *l, uint64_t id)
{
	size_t lo = 0, hi = l ? l->nr_alts : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->alts[mid].id == id)
			return &l->alts[mid];
		if (l->alts[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The layout of its own of a sample whose id is first, or NULL. */
static const struct rec_alt *alt_of(const struct rec_layout *l, const struct cur *c)
{
	uint64_t id;

	if (!(l->sample_type & PERF_SAMPLE_IDENTIFIER) || !l->nr_alts ||
	    c->end - c->off < sizeof(id))
		return NULL;
	memcpy(&id, c->p + c->off, sizeof(id));
	return rec_alt_of(l, id);
}

static int decode_sample(const struct rec_layout *l, uint16_t misc, struct cur *c, struct rec *r)
{
	struct rec_sample *s = &r->sample;
	const struct rec_alt *alt = alt_of(l, c);
	uint64_t st = alt ? alt->sample_type : l->sample_type;
	const uint8_t *at;
	uint64_t skip;

	if (st & PERF_SAMPLE_IDENTIFIER && !get_u64(c, &s->id))
		return -EINVAL;
	if (st & PERF_SAMPLE_IP && !get_u64(c, &s->ip))
		return -EINVAL;
	if (st & PERF_SAMPLE_TID && !get_u32x2(c, &s->pid, &s->tid))
		return -EINVAL;
	if (st & PERF_SAMPLE_TIME && !get_u64(c, &s->time))
		return -EINVAL;
	if (st & PERF_SAMPLE_ADDR && !get_u64(c, &skip))
		return -EINVAL;
	if (st & PERF_SAMPLE_ID && !get_u64(c, &s->id))
		return -EINVAL;
	if (st & PERF_SAMPLE_STREAM_ID && !get_u64(c, &skip))
		return -EINVAL;
	if (st & PERF_SAMPLE_CPU && !get_u32x2(c, &s->cpu, NULL))
		return -EINVAL;
	if (st & PERF_SAMPLE_PERIOD && !get_u64(c, &s->period))
		return -EINVAL;
	if (!(st & PERF_SAMPLE_PERIOD) && alt)
		s->period = alt->period;
	/* The size of read_format depends on attr.read_format, which the layout does not carry. */
	if (st & PERF_SAMPLE_READ)
		return -EINVAL;
	if (st & PERF_SAMPLE_CALLCHAIN) {
		if (!get_u64(c, &s->nr))
			return -EINVAL;
		if (s->nr > (c->end - c->off) / sizeof(uint64_t) ||
		    !take(c, s->nr * sizeof(uint64_t), &at))
			return -EINVAL;
		/* Consumers index ips[] directly: it must be naturally aligned. */
		if ((uintptr_t)at % _Alignof(uint64_t))
			return -EINVAL;
		s->ips = (const uint64_t *)(const void *)at;
	}
	if (st & (PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER)) {
		uint32_t raw;

		/* RAW is a u32 size and that many bytes (padded by the kernel to 8 with the size). */
		if (st & PERF_SAMPLE_RAW) {
			if (!take(c, sizeof(raw), &at))
				return -EINVAL;
			memcpy(&raw, at, sizeof(raw));
			if (!take(c, raw, &at))
				return -EINVAL;
		}
		/* Its size depends on attr.branch_sample_type, which the layout does not carry. */
		if (st & PERF_SAMPLE_BRANCH_STACK)
			return -EINVAL;
	}
	if (st & PERF_SAMPLE_REGS_USER && decode_regs(l->sample_regs_user, c, &s->uregs))
		return -EINVAL;
	if (st & PERF_SAMPLE_STACK_USER && decode_stack(c, s))
		return -EINVAL;
	/* Fields after these (weight, data source, ...) are not decoded. */
	s->user = (misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_USER;
	s->stack_dropped = (misc & REC_MISC_STACK_DROPPED) && !s->stack_size;
	s->stack_cut = (misc & REC_MISC_STACK_CUT) && s->stack_size;
	r->time = (st & PERF_SAMPLE_TIME) ? s->time : 0;
	return 0;
}

static int decode_mmap2(uint16_t misc, struct cur *c, struct rec *r)
{
	struct rec_mmap2 *m = &r->mmap2;
	const uint8_t *u;

	if (!get_u32x2(c, &m->pid, &m->tid) || !get_u64(c, &m->addr) || !get_u64(c, &m->len) ||
	    !get_u64(c, &m->pgoff) || !take(c, 24, &u) || !get_u32x2(c, &m->prot, &m->flags) ||
	    !get_str(c, &m->filename))
		return -EINVAL;
	if (misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
		m->has_build_id = true;
		m->build_id_size = u[0];
		if (m->build_id_size > sizeof(m->build_id))
			return -EINVAL;
		memcpy(m->build_id, u + 4, m->build_id_size);
	} else {
		memcpy(&m->maj, u, 4);
		memcpy(&m->min, u + 4, 4);
		memcpy(&m->ino, u + 8, 8);
	}
	return 0;
}

int rec_decode(const struct rec_layout *layout, const void *data, size_t len, struct rec *out)
{
	struct perf_event_header h;
	struct sample_id sid = { 0 };
	struct cur c = { .p = data, .off = sizeof(h), .end = len };
	uint64_t st, body_time = 0;
	uint32_t u32a, u32b;
	struct rec r;
	int err = 0;

	if (!layout || !data || !out || len < sizeof(h))
		return -EINVAL;
	memcpy(&h, data, sizeof(h));
	if (h.size != len)
		return -EINVAL;
	st = layout->sample_type;

	memset(&r, 0, sizeof(r));
	r.misc = h.misc;

	/*
	 * Kernel-generated records other than SAMPLE end with the sample_id
	 * trailer; types from PERF_RECORD_USER_TYPE_START (64) on are perf.data
	 * synthesized records and have none.
	 */
	if (h.type != PERF_RECORD_SAMPLE && h.type < 64 && layout->sample_id_all) {
		size_t tsz = sample_id_size(st);
		struct cur t;

		if (tsz > len - sizeof(h))
			return -EINVAL;
		c.end = len - tsz;
		t = (struct cur){ .p = data, .off = c.end, .end = len };
		if (!parse_sample_id(st, t, &sid))
			return -EINVAL;
	}

	switch (h.type) {
	case PERF_RECORD_SAMPLE:
		r.type = REC_SAMPLE;
		err = decode_sample(layout, h.misc, &c, &r);
		break;
	case PERF_RECORD_MMAP2:
		r.type = REC_MMAP2;
		err = decode_mmap2(h.misc, &c, &r);
		break;
	case PERF_RECORD_COMM:
		r.type = REC_COMM;
		if (!get_u32x2(&c, &r.comm.pid, &r.comm.tid) || !get_str(&c, &r.comm.comm))
			err = -EINVAL;
		r.comm.exec = h.misc & PERF_RECORD_MISC_COMM_EXEC;
		break;
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		r.type = h.type == PERF_RECORD_FORK ? REC_FORK : REC_EXIT;
		if (!get_u32x2(&c, &r.fork.pid, &r.fork.ppid) ||
		    !get_u32x2(&c, &r.fork.tid, &r.fork.ptid) || !get_u64(&c, &body_time))
			err = -EINVAL;
		break;
	case PERF_RECORD_LOST:
		r.type = REC_LOST;
		if (!get_u64(&c, &r.lost.id) || !get_u64(&c, &r.lost.lost))
			err = -EINVAL;
		break;
	case PERF_RECORD_LOST_SAMPLES:
		r.type = REC_LOST;
		if (!get_u64(&c, &r.lost.lost))
			err = -EINVAL;
		r.lost.id = sid.id;
		break;
	case PERF_RECORD_SWITCH_CPU_WIDE:
		/* the next (out) or previous (in) task; we follow the one in the trailer */
		if (!get_u32x2(&c, &u32a, &u32b))
			err = -EINVAL;
		/* fall through */
	case PERF_RECORD_SWITCH:
		r.type = REC_SWITCH;
		r.sw.pid = sid.pid;
		r.sw.tid = sid.tid;
		r.sw.cpu = sid.cpu;
		r.sw.out = h.misc & PERF_RECORD_MISC_SWITCH_OUT;
		r.sw.preempt = r.sw.out && (h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT);
		break;
	case PERF_RECORD_THROTTLE:
	case PERF_RECORD_UNTHROTTLE:
		r.type = REC_THROTTLE;
		if (!get_u64(&c, &body_time))
			err = -EINVAL;
		break;
	default:
		r.type = REC_OTHER;
		break;
	}
	if (err)
		return err;

	if (h.type != PERF_RECORD_SAMPLE) {
		r.time = sid.has_time ? sid.time : body_time;
		r.id = sid.id;
		r.tid = sid.tid;
	} else {
		r.id = r.sample.id;
		r.tid = r.sample.tid;
	}
	switch (r.type) {
	case REC_MMAP2:
		r.mmap2.time = r.time;
		break;
	case REC_COMM:
		r.comm.time = r.time;
		break;
	case REC_FORK:
	case REC_EXIT:
		r.fork.time = r.time;
		break;
	case REC_LOST:
		r.lost.time = r.time;
		break;
	case REC_SWITCH:
		r.sw.time = r.time;
		break;
	default:
		break;
	}
	*out = r;
	return 0;
}

size_t rec_trim(const struct rec_layout *layout, const void *data, size_t len, void *dst, bool drop,
		uint64_t keep_max)
{
	struct rec r;

	if (rec_decode(layout, data, len, &r))
		return rec_trim_decoded(NULL, data, len, dst, drop, keep_max);
	return rec_trim_decoded(&r, data, len, dst, drop, keep_max);
}

size_t rec_trim_decoded(const struct rec *rd, const void *data, size_t len, void *dst, bool drop,
			uint64_t keep_max)
{
	const uint8_t *p = data;
	uint8_t *d = dst;
	uint64_t size, keep, dyn;
	size_t off, rest, n;
	struct rec r;
	uint16_t hsize, misc;
	bool cut;

	if (!rd || rd->type != REC_SAMPLE || !rd->sample.stack_off)
		goto as_is;
	r = *rd;
	/* a copy of nothing is not dropped: the kernel had nothing to copy */
	drop = drop && r.sample.stack_size;
	off = r.sample.stack_off;
	memcpy(&size, p + off, sizeof(size));
	dyn = drop ? 0 : r.sample.stack_size;
	cut = rec_stack_kept(dyn, keep_max) < dyn;
	dyn = rec_stack_kept(dyn, keep_max);
	keep = (dyn + 7) & ~7ull;
	/* nothing to cut (a size the kernel never gives, not a multiple of 8: kept as it is) */
	if (!size || keep >= size)
		goto as_is;
	/* decoded: off + 8 + size + 8 (the dyn_size field) lie within len */
	rest = len - (off + 8 + size + 8);
	n = off + sizeof(keep) + (dyn ? keep + sizeof(dyn) : 0) + rest;
	if (!d)
		return n;
	memcpy(d, p, off);
	n = off + sizeof(keep);
	if (dyn) {
		memcpy(d + off, &keep, sizeof(keep));
		memcpy(d + n, p + off + 8, dyn);
		memset(d + n + dyn, 0, keep - dyn);
		n += keep;
		memcpy(d + n, &dyn, sizeof(dyn));
		n += sizeof(dyn);
	} else {
		memset(d + off, 0, sizeof(uint64_t)); /* size 0: no bytes, no dyn_size */
	}
	memcpy(d + n, p + len - rest, rest);
	n += rest;
	hsize = (uint16_t)n;
	memcpy(d + offsetof(struct perf_event_header, size), &hsize, sizeof(hsize));
	if (drop || cut) {
		memcpy(&misc, d + offsetof(struct perf_event_header, misc), sizeof(misc));
		misc |= drop ? REC_MISC_STACK_DROPPED : REC_MISC_STACK_CUT;
		memcpy(d + offsetof(struct perf_event_header, misc), &misc, sizeof(misc));
	}
	return n;
as_is:
	if (d)
		memcpy(d, data, len);
	return len;
}
