/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * Runs at each sample of dlflame's sampling events (PERF_EVENT_IOC_SET_BPF)
 * in the sampled thread's context: copies its CPython frame chain (frame
 * address, code object, last instruction, whether it marks an eval call's
 * start) into a ring buffer, with the thread, the time and the sampled ip
 * to join the record to the sample; the same at each entry of a probed
 * function (pyframes_probe). Only processes the loader configured
 * are read; every offset comes from their configuration (python/'s layout
 * of that process), none is written here. Reads of the process's memory
 * that would fault are not done (bpf_probe_read_user fails): the record
 * then says where its walk stopped. Returns 1: the sample is still written.
 */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#include "pybpf/wire.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct pybpf_conf);
} procs SEC(".maps");

/* (pid << 32 | tid) -> its PyThreadState, checked on each use */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} tstates SEC(".maps");

/* code objects whose names were copied (struct pybpf_seen -> 1) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct pybpf_seen);
	__type(value, __u8);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* the loader may set another size */
} records SEC(".maps");

struct scratch {
	struct pybpf_head h;
	struct pybpf_frame f[PYBPF_MAX_FRAMES];
	__u8 fb[PYBPF_FRAME_BUF + 8];
	__u32 name_at[PYBPF_MAX_NAMES]; /* frames of code objects not seen, innermost first */
	__u32 nn;
	struct pybpf_seen key;
	/* the record of their names, written before the frames' (PYBPF_H_NAMES) */
	struct pybpf_head nh;
	struct pybpf_name names[PYBPF_MAX_NAMES];
};

/*
 * Where a record is built: slot 0 for the samples' program, which nothing
 * of its own interrupts on its CPU (the kernel runs one at a time there);
 * slots 1.. for the probes' program, which runs preemptible (another
 * thread's probe may run it on the same CPU meanwhile) and interruptible
 * (a sample may run the samples' program on top of it). Each run of the
 * probes' program claims a free slot of its CPU (probe_busy).
 */
#define PROBE_SLOTS 4

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 + PROBE_SLOTS);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROBE_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} probe_busy SEC(".maps");

/* the recorder's PID namespace (struct pybpf_self), set by the loader */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pybpf_self);
} self SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PYBPF_C_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);

	if (c)
		(*c)++;
}

static int rd(void *dst, __u32 size, __u64 addr)
{
	return bpf_probe_read_user(dst, size, (const void *)addr);
}

/* A word of the frame buffer at a configured offset; 0 when it lies outside. */
static __u64 fb_u64(const struct scratch *s, __u32 off)
{
	if (off > PYBPF_FRAME_BUF - 8)
		return 0;
	return *(const __u64 *)(s->fb + off);
}

static __u32 fb_u32(const struct scratch *s, __u32 off)
{
	if (off > PYBPF_FRAME_BUF - 4)
		return 0;
	return *(const __u32 *)(s->fb + off);
}

static __u8 fb_u8(const struct scratch *s, __u32 off)
{
	if (off > PYBPF_FRAME_BUF - 1)
		return 0;
	return s->fb[off];
}

struct find_ctx {
	const struct pybpf_conf *c;
	__u64 th, found, ntid;
	int err;
};

/* One thread state of the list: is it the sampled thread's? */
static long find_step(__u32 i, struct find_ctx *x)
{
	__u64 v = 0, next = 0;

	if (!x->th)
		return 1;
	if (rd(&v, sizeof(v), x->th + x->c->ts_native_tid) ||
	    rd(&next, sizeof(next), x->th + x->c->ts_next)) {
		x->err = PYBPF_FAULT;
		return 1;
	}
	if (v == x->ntid) {
		x->found = x->th;
		return 1;
	}
	x->th = next == x->th ? 0 : next;
	return 0;
}

/* The thread state whose native thread id is ntid: every interpreter's list, bounded. */
static __u64 find_tstate(const struct pybpf_conf *c, __u64 ntid, int *err)
{
	struct find_ctx x = { .c = c, .ntid = ntid };
	__u64 interp = 0, next = 0;

	count(PYBPF_C_TSTATE_WALKS);
	if (rd(&interp, sizeof(interp), c->runtime + c->rt_interp_head))
		goto fault;
	for (int i = 0; i < PYBPF_MAX_INTERPS && interp; i++) {
		if (rd(&x.th, sizeof(x.th), interp + c->is_threads_head))
			goto fault;
		bpf_loop(PYBPF_MAX_THREADS, find_step, &x, 0);
		if (x.found || x.err) {
			*err = x.err;
			return x.found;
		}
		if (rd(&next, sizeof(next), interp + c->is_next))
			goto fault;
		interp = next == interp ? 0 : next;
	}
	*err = PYBPF_NO_TSTATE;
	return 0;
fault:
	*err = PYBPF_FAULT;
	return 0;
}

struct walk_ctx {
	const struct pybpf_conf *c;
	struct scratch *s;
	__u64 frame;
	__u32 n;
	__u32 status;
};

/* One frame: read it, keep it (unless it is one that is never shown), step out. */
static long walk_step(__u32 i, struct walk_ctx *w)
{
	const struct pybpf_conf *c = w->c;
	struct scratch *s = w->s;
	struct pybpf_frame *f;
	__u32 size = c->frame_bytes, n = w->n;
	__u64 code;
	__u8 owner;
	int stub;

	if (!w->frame)
		return 1;
	if (n >= PYBPF_MAX_FRAMES) {
		w->status = PYBPF_CUT;
		return 1;
	}
	if (size > PYBPF_FRAME_BUF || size == 0 || rd(s->fb, size, w->frame)) {
		w->status = PYBPF_FAULT;
		return 1;
	}
	owner = c->fr_owner == PYBPF_NO_FIELD ? 0 : fb_u8(s, c->fr_owner);
	if (owner > c->owner_max) {
		w->status = PYBPF_BAD_FRAME;
		return 1;
	}
	code = fb_u64(s, c->fr_code) & ~c->tag_mask;
	stub = c->stub_owner != PYBPF_NO_FIELD && owner == c->stub_owner &&
	       (!c->stub_runs_none || code == c->none);
	f = &s->f[n];
	f->addr = w->frame;
	f->code = code;
	f->instr = fb_u64(s, c->fr_instr);
	f->flags =
		(stub ? PYBPF_F_STUB : 0) |
		(c->fr_is_entry != PYBPF_NO_FIELD && fb_u8(s, c->fr_is_entry) ? PYBPF_F_ENTRY : 0);
	w->frame = fb_u64(s, c->fr_previous);
	f->qualname = 0;
	f->filename = 0;
	f->firstline = 0;
	/*
	 * What names the code object, into the frame buffer (the frame's
	 * fields are taken). One bound on size itself: clang 19 folds
	 * "size && size <= N" into one test of size - 1, which the verifier
	 * cannot carry over to size (the loader never sets 0).
	 */
	size = c->co_bytes;
	if (!stub && code && size <= PYBPF_FRAME_BUF && !rd(s->fb, size, code + c->co_from)) {
		f->qualname = fb_u64(s, c->co_qualname);
		f->filename = fb_u64(s, c->co_filename);
		f->firstline = fb_u32(s, c->co_firstlineno);
	}
	if (w->frame == f->addr) {
		w->status = PYBPF_BAD_FRAME;
		return 1;
	}
	/*
	 * Not kept: another frame the interpreter owns (no code to show), and
	 * 3.14's frame whose executable is still NULL (being set up).
	 */
	if (!stub &&
	    ((c->stub_owner != PYBPF_NO_FIELD && owner >= c->stub_owner) || (c->tag_mask && !code)))
		return 0;
	/* a code object not seen before: its names are copied after the walk */
	if (c->names_ok && f->qualname && s->nn < PYBPF_MAX_NAMES) {
		s->key.code = f->code;
		s->key.qualname = f->qualname;
		s->key.filename = f->filename;
		s->key.firstline = f->firstline;
		if (!bpf_map_lookup_elem(&seen, &s->key)) {
			s->name_at[s->nn & (PYBPF_MAX_NAMES - 1)] = n;
			s->nn++;
		}
	}
	w->n = n + 1;
	return 0;
}

/*
 * The str at addr into dst (at most max bytes: its first ones, or its last
 * when tail), when it is a compact str; 0, or -1 (out untouched but zero).
 */
static __always_inline int copy_str(const struct pybpf_conf *c, struct scratch *s, __u64 addr,
				    __u8 *dst, __u32 max, int tail, struct pybpf_str *out)
{
	__u32 state, kind, ascii, bytes, hdr = c->uni_ascii_size;
	__u64 len, total, from;

	out->length = out->kind = out->bytes = 0;
	if (!addr || hdr > PYBPF_FRAME_BUF || hdr == 0 || rd(s->fb, hdr, addr))
		return -1;
	if (c->str_type && fb_u64(s, c->ob_type) != c->str_type)
		return -1;
	len = fb_u64(s, c->uni_length);
	state = fb_u32(s, c->uni_state);
	kind = state >> (c->str_kind_shift & 31) & 7;
	ascii = state >> (c->str_ascii_bit & 31) & 1;
	if (!(state >> (c->str_compact_bit & 31) & 1) || (kind != 1 && kind != 2 && kind != 4) ||
	    (ascii && kind != 1) || len > (1u << 16))
		return -1;
	total = len * kind;
	bytes = total > max ? max : (__u32)total;
	from = addr + (ascii ? c->uni_ascii_size : c->uni_compact_size) +
	       (tail ? total - bytes : 0);
	if (bytes > max || rd(dst, bytes, from))
		return -1;
	out->length = (__u32)len;
	out->kind = kind;
	out->bytes = bytes;
	return 0;
}

struct names_ctx {
	const struct pybpf_conf *c;
	struct scratch *s;
	__u32 pid;
	__u32 k; /* names copied */
};

/* The names of the i-th frame not seen into names[k]. */
static long name_step(__u32 i, struct names_ctx *x)
{
	const struct pybpf_conf *c = x->c;
	struct scratch *s = x->s;
	struct pybpf_name *nm;
	struct pybpf_frame *f;
	__u32 idx;

	if (i >= s->nn || i >= PYBPF_MAX_NAMES || x->k >= PYBPF_MAX_NAMES)
		return 1;
	idx = s->name_at[i & (PYBPF_MAX_NAMES - 1)];
	if (idx >= PYBPF_MAX_FRAMES)
		return 0;
	f = &s->f[idx];
	nm = &s->names[x->k & (PYBPF_MAX_NAMES - 1)];
	if (copy_str(c, s, f->qualname, nm->qual, PYBPF_QUAL_BYTES, 0, &nm->q) ||
	    copy_str(c, s, f->filename, nm->file, PYBPF_FILE_BYTES, 1, &nm->f))
		return 0;
	nm->frame = idx;
	nm->pad = 0;
	x->k++;
	return 0;
}

/*
 * The code object of names[i] is seen: its names were written, and the
 * frames' record after them, so the reader has them.
 */
static long seen_step(__u32 i, struct names_ctx *x)
{
	struct scratch *s = x->s;
	struct pybpf_frame *f;
	__u32 idx;
	__u8 one = 1;

	if (i >= x->k || i >= PYBPF_MAX_NAMES)
		return 1;
	idx = s->names[i & (PYBPF_MAX_NAMES - 1)].frame;
	if (idx >= PYBPF_MAX_FRAMES)
		return 0;
	f = &s->f[idx];
	s->key.code = f->code;
	s->key.qualname = f->qualname;
	s->key.filename = f->filename;
	s->key.firstline = f->firstline;
	s->key.pid = x->pid;
	bpf_map_update_elem(&seen, &s->key, &one, BPF_ANY);
	return 0;
}

/* A free slot of this CPU's for the probes' program, claimed: its index, or -1. */
static __always_inline int claim(void)
{
	for (__u32 i = 0; i < PROBE_SLOTS; i++) {
		__u32 *busy = bpf_map_lookup_elem(&probe_busy, &i);

		if (busy && __sync_val_compare_and_swap(busy, 0, 1) == 0)
			return (int)i;
	}
	return -1;
}

static __always_inline void release(int slot)
{
	__u32 i = (__u32)slot, *busy = bpf_map_lookup_elem(&probe_busy, &i);

	if (busy)
		__sync_lock_test_and_set(busy, 0);
}

/* The frames of the current thread at ip and sp (user mode) into the ring; 1 always. */
static __always_inline int copy_frames(__u64 ip, __u64 sp, __u32 flags)
{
	__u64 id = bpf_get_current_pid_tgid(), ntid, th = 0, key, *cached, v = 0, frame = 0,
	      cframe = 0;
	__u32 pid, zero = 0, size;
	const struct pybpf_self *me = bpf_map_lookup_elem(&self, &zero);
	const struct pybpf_conf *c;
	struct walk_ctx w = { 0 };
	struct names_ctx names = { 0 };
	struct scratch *s;
	int err = 0, slot = -1;

	/* the ids the recorder sees (and its samples carry), in its own namespace */
	if (me && me->ns_ino) {
		struct bpf_pidns_info own = { 0 };

		if (bpf_get_ns_current_pid_tgid(me->ns_dev, me->ns_ino, &own, sizeof(own)))
			return 1; /* a thread outside the recorder's namespace */
		id = (__u64)own.tgid << 32 | own.pid;
	}
	pid = id >> 32;
	c = bpf_map_lookup_elem(&procs, &pid);
	if (!c)
		return 1;
	if (flags & PYBPF_H_PROBE) {
		__u32 k;

		slot = claim();
		if (slot < 0) {
			count(PYBPF_C_BUSY);
			return 1;
		}
		k = (__u32)slot + 1;
		s = bpf_map_lookup_elem(&scratch, &k);
	} else {
		s = bpf_map_lookup_elem(&scratch, &zero);
	}
	if (!s) {
		if (slot >= 0)
			release(slot);
		return 1;
	}
	count(PYBPF_C_SAMPLES);
	s->h.time = bpf_ktime_get_ns();
	s->h.ip = ip;
	/* user mode (the low half): the registers are the thread's own */
	s->h.usp = ip < 0x800000000000ull ? sp : 0;
	s->h.pid = pid;
	s->h.tid = (__u32)id;
	s->h.n = 0;
	s->h.tstate = 0;
	s->h.cframe = 0;
	s->h.status = PYBPF_OK;
	s->h.flags = flags;
	s->h.pad = 0;
	s->nn = 0;
	s->key.pid = pid;
	ntid = (__u32)id;
	if (c->ns_ino) {
		struct bpf_pidns_info ns = { 0 };

		if (bpf_get_ns_current_pid_tgid(c->ns_dev, c->ns_ino, &ns, sizeof(ns))) {
			s->h.status = PYBPF_NO_NS;
			goto out;
		}
		ntid = ns.pid;
	}
	key = id;
	cached = bpf_map_lookup_elem(&tstates, &key);
	if (cached && !rd(&v, sizeof(v), *cached + c->ts_native_tid) && v == ntid)
		th = *cached;
	if (!th) {
		th = find_tstate(c, ntid, &err);
		if (!th) {
			s->h.status = err;
			goto out;
		}
		bpf_map_update_elem(&tstates, &key, &th, BPF_ANY);
	}
	s->h.tstate = th;
	if (c->ts_cframe != PYBPF_NO_FIELD) {
		if (rd(&cframe, sizeof(cframe), th + c->ts_cframe) ||
		    rd(&frame, sizeof(frame), cframe + c->cf_current)) {
			s->h.status = PYBPF_FAULT;
			goto out;
		}
		s->h.cframe = cframe;
	} else if (rd(&frame, sizeof(frame), th + c->ts_current_frame)) {
		s->h.status = PYBPF_FAULT;
		goto out;
	}
	w.c = c;
	w.s = s;
	w.frame = frame;
	bpf_loop(PYBPF_MAX_FRAMES + 1, walk_step, &w, 0);
	s->h.n = w.n;
	s->h.status = w.status;
	/* names only for a chain the reader keeps (one walked to its end, or cut) */
	if (s->nn && (w.status == PYBPF_OK || w.status == PYBPF_CUT)) {
		__u32 k;

		names.c = c;
		names.s = s;
		names.pid = pid;
		bpf_loop(PYBPF_MAX_NAMES, name_step, &names, 0);
		k = names.k;
		if (k && k <= PYBPF_MAX_NAMES) {
			s->nh = s->h;
			s->nh.n = k;
			s->nh.flags = flags | PYBPF_H_NAMES;
			if (bpf_ringbuf_output(
				    &records, &s->nh,
				    sizeof(struct pybpf_head) + k * sizeof(struct pybpf_name), 0)) {
				count(PYBPF_C_DROPPED);
				names.k = 0;
			}
		}
	}
out:
	size = s->h.n;
	if (size > PYBPF_MAX_FRAMES)
		size = PYBPF_MAX_FRAMES;
	size = sizeof(struct pybpf_head) + size * sizeof(struct pybpf_frame);
	if (bpf_ringbuf_output(&records, s, size, 0)) {
		count(PYBPF_C_DROPPED);
	} else {
		count(PYBPF_C_RECORDS);
		/* both records written: those code objects' names are the reader's now */
		if (names.k)
			bpf_loop(PYBPF_MAX_NAMES, seen_step, &names, 0);
	}
	if (slot >= 0)
		release(slot);
	return 1;
}

/* At each sample of the on-CPU, context-switch and page-fault events. */
SEC("perf_event")
int pyframes(struct bpf_perf_event_data *ctx)
{
	return copy_frames(ctx->regs.rip, ctx->regs.rsp, 0);
}

/*
 * At each entry of a probed function (a uprobe's perf event): the thread
 * stands at the breakpoint, in user mode, and its sample holds the same ip.
 * A uprobe's event is written only when its program returns non-zero.
 * Every event of the probe (one per CPU) runs it at every hit: only the
 * one of this CPU (the cookie the loader gave it), which writes the
 * sample right after, copies the frames.
 */
SEC("uprobe")
int pyframes_probe(struct pt_regs *ctx)
{
	if (bpf_get_attach_cookie(ctx) != bpf_get_smp_processor_id())
		return 1;
	return copy_frames(ctx->rip, ctx->rsp, PYBPF_H_PROBE);
}
