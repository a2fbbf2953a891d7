/* SPDX-License-Identifier: MIT */
/*
 * The sampler's coordinator: options and lifetime, and the draining rounds
 * that take the records out of the rings (ring.c), order them by time
 * (order.c) and hand them out. Launching, attaching and the events
 * themselves are in launch.c, attach.c and events.c.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/internal.h"

#define DEFAULT_PAGES 128
/*
 * A DWARF-mode sample carries its stack copy (32 KiB by default), so 128
 * pages would hold 16 of them: 32 MiB per CPU holds about 1,000, a second
 * of on-CPU samples and context switches together at 999 Hz each. (4 MiB
 * lost thousands of records on a two-rank DDP job and on the CNN trainer
 * while the machine was busy. 16 MiB lost 559 to 6,785 context-switch
 * samples in 5 of 7 runs of Debian 13's test_lost after its CNN test: the
 * DDP job's start wrote 40 MiB in 40 ms, 1.5-2.5 GB/s, and a ring went from
 * a quarter to three quarters full within one 4.7 ms pass of the drain
 * thread, real-time by then. Rings of many CPUs share a budget.)
 */
#define DEFAULT_PAGES_DWARF 8192
/*
 * poll() holds back records younger than this, so that a record another
 * CPU was still writing while we read the heads can be sorted before them
 * in the next round. drain() delivers everything.
 */
#define HOLDBACK_NS 50000000ull
/*
 * When the held-back records grow too large, only this much is held back
 * from the last whole copy of the rings: every record older than that is
 * in a spill by then. Delivering everything instead sorts a record that
 * one ring had and another ring's older record, not yet copied, in the
 * wrong order: a thread switched in twice (once under ASan, 694 us apart).
 */
#define SHORT_HOLDBACK_NS 5000000ull
/* While records are being handed out, the rings are emptied this often. */
#define REINGEST_NS 2000000ull
/*
 * What the rings' spills may hold in all: how far the recording's thread may
 * fall behind the kernel (a cold page cache, a busy machine) before records
 * are lost. At most an eighth of the memory. Stack copies are cut to what
 * the kernel could copy there, about 12 KiB of 32 on a DDP job, which wrote
 * some 30,000 records a second while it imported torch.
 */
#define SPILL_BUDGET (1ull << 30)

/* SPILL_BUDGET in chunks, or an eighth of the memory, whichever is less; 64 MiB at least. */
static size_t spill_budget(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t bytes = SPILL_BUDGET;

	if (pages > 0 && psz > 0 && (uint64_t)pages * (uint64_t)psz / 8 < bytes)
		bytes = (uint64_t)pages * (uint64_t)psz / 8;
	if (bytes < 64 * (uint64_t)SPILL_CHUNK)
		bytes = 64 * (uint64_t)SPILL_CHUNK;
	return (size_t)(bytes / SPILL_CHUNK);
}

struct sampler *sampler__new(const struct sampler_opts *opts)
{
	struct sampler *s;

	if (opts && opts->mmap_pages & (opts->mmap_pages - 1)) {
		errno = EINVAL;
		return NULL;
	}
	if (opts && (opts->callgraph > CALLGRAPH_DWARF || opts->stack_size % 8 ||
		     opts->stack_size > SAMPLER_MAX_STACK_SIZE)) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (opts)
		s->opts = *opts;
	if (!s->opts.freq)
		s->opts.freq = SAMPLER_DEFAULT_FREQ;
	if (s->opts.offcpu_only)
		s->opts.offcpu = true;
	if (s->opts.callgraph == CALLGRAPH_DWARF && !s->opts.stack_size)
		s->opts.stack_size = SAMPLER_DEFAULT_STACK_SIZE;
	event_layout(s);
	s->budget.max = spill_budget();
	if (s->opts.buffer_mb)
		s->budget.max = (size_t)((uint64_t)(s->opts.buffer_mb < SAMPLER_MIN_BUFFER_MB
							    ? SAMPLER_MIN_BUFFER_MB
							    : s->opts.buffer_mb)
					 << 20) /
				SPILL_CHUNK;
	if (!s->opts.mmap_pages)
		s->opts.mmap_pages =
			s->opts.callgraph == CALLGRAPH_DWARF ? DEFAULT_PAGES_DWARF : DEFAULT_PAGES;
	u64map_init(&s->ids);
	u64map_init(&s->tids);
	u64map_init(&s->origin);
	u64map_init(&s->tree);
	s->go_fd = -1;
	s->err_fd = -1;
	s->early_stop = -1;
	s->early_kick = -1;
	s->work_kick = -1;
	s->scratch = malloc(SCRATCH_SIZE);
	if (s->opts.callgraph == CALLGRAPH_DWARF)
		s->tops = calloc(STACK_TOP_SLOTS, sizeof(*s->tops));
	if (!s->scratch || (s->opts.callgraph == CALLGRAPH_DWARF && !s->tops)) {
		free(s->scratch);
		free(s->tops);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	/*
	 * Priority inheritance: the drain thread, real-time, must not wait
	 * for a pass that a preempted thread at the trainer's priority holds
	 * (the early thread's, 3.3 ms once, while a two-rank DDP job importing
	 * torch from a cold cache filled a ring: 1,448 records lost).
	 */
	mutex_init_inherit(&s->copy_lock);
	return s;
}

void sampler__free(struct sampler *s)
{
	if (!s)
		return;
	early_stop(s);
	if (s->launched && !s->started)
		launch_kill(s);
	close_fd(&s->go_fd);
	close_fd(&s->err_fd);
	rings_close(s);
	u64map_free(&s->ids);
	u64map_free(&s->tids);
	u64map_free(&s->origin);
	u64map_free(&s->tree);
	free(s->probe_ids);
	free(s->probe_events);
	free(s->alts);
	free(s->scratch);
	free(s->tops);
	free(s->threads);
	order_free(&s->q);
	pthread_mutex_destroy(&s->copy_lock);
	free(s);
}

unsigned sampler__backlog(const struct sampler *s)
{
	size_t used = __atomic_load_n(&s->budget.used, __ATOMIC_RELAXED);

	if (!s->budget.max)
		return 0;
	return used >= s->budget.max ? 8 : (unsigned)(used * 8 / s->budget.max);
}

const struct sampler_stats *sampler__stats(const struct sampler *s)
{
	return s ? &s->stats : NULL;
}

/* ---- draining ----------------------------------------------------------- */

/*
 * Keep the queue's recs[from..] for the next round. Held-back records are
 * most of what a round buffers (each round ingests about HOLDBACK_NS / 2 of
 * records, all younger than the cut), and with 32 KiB stack copies moving
 * them every round cost more than copying them out of the rings: they stay
 * where they are, and the copies are packed only once the delivered
 * records' holes add up to a ring's worth and to what is kept.
 */
static void keep_pending(struct sampler *s, size_t from)
{
	rings_release(s, from);
	order_keep(&s->q, from, s->ring_bytes);
}

/*
 * Sets which event a sample came from, and in attach mode drops the second
 * copy of a record. A thread created while attaching may be followed twice:
 * by the events it inherited from its creator and by its own, opened when a
 * rescan found it. Nothing tells which it has: /proc does not, nor does its
 * FORK record, written after the child did or did not inherit (its creator
 * may be attached in between). Each event knows the thread it was first
 * opened on (ID_TID, inherited along), its origin: the first origin that
 * writes a record of a thread keeps it, the other's copies go, until the
 * thread exits (its tid may come back).
 */
static bool deliverable(struct sampler *s, struct rec *r)
{
	uint64_t v = EV_ONCPU, kept;

	if (r->id)
		u64map_get(&s->ids, r->id, &v);
	if (r->type == REC_SAMPLE)
		r->sample.event = ID_EVENT(v);
	if (s->tree_filter) {
		uint64_t one;

		if (r->type == REC_FORK)
			u64map_put(&s->tree, r->fork.pid, 1);
		/* system-wide probes: another process's calls are not ours */
		if (r->type == REC_SAMPLE && EV_IS_PROBE(r->sample.event) &&
		    !u64map_get(&s->tree, r->sample.pid, &one))
			return false;
	}
	if (!s->attached || s->threads_only || !ID_TID(v) || !r->tid || r->type == REC_LOST ||
	    r->type == REC_THROTTLE)
		return true;
	if (!u64map_get(&s->origin, r->tid, &kept)) {
		/* a second EXIT, from the origin that lost: nothing to keep after it */
		if (r->type != REC_EXIT)
			u64map_put(&s->origin, r->tid, ID_TID(v));
		return true;
	}
	if (kept != ID_TID(v))
		return false;
	if (r->type == REC_EXIT)
		u64map_del(&s->origin, r->tid);
	return true;
}

static int round_run(struct sampler *s, bool holdback, rec_cb cb, void *ctx)
{
	uint64_t cut = UINT64_MAX, now = 0, next_ingest;
	struct rec dec;
	size_t i, due;
	int err = 0;

	/*
	 * Taken before the heads are read: see HOLDBACK_NS. What the kernel
	 * wrote after the last whole drain pass began may still be in a ring.
	 */
	if (holdback && s->mono_clock) {
		uint64_t seen = rings_copied_at(s);

		now = monotonic_ns();
		if (s->drain_running && seen < now)
			now = seen;
		cut = now > HOLDBACK_NS ? now - HOLDBACK_NS : 0;
	}
	s->stats.bad_records += __atomic_exchange_n(&s->early_bad, 0, __ATOMIC_RELAXED);
	s->stats.stacks_dropped += __atomic_exchange_n(&s->stacks_dropped, 0, __ATOMIC_RELAXED);
	s->stats.stacks_cut += __atomic_exchange_n(&s->stacks_cut, 0, __ATOMIC_RELAXED);
	s->stats.stack_bytes_cut += __atomic_exchange_n(&s->stack_bytes_cut, 0, __ATOMIC_RELAXED);
	for (i = 0; i < s->nr_rings && !err; i++)
		err = ring_ingest(s, i);
	/*
	 * Held-back records must not fill a ring, nor the round buffer grow
	 * past the rings: then only what every ring was surely copied past
	 * waits (a clock is needed to tell; without one, nothing does).
	 */
	if (cut != UINT64_MAX && (rings_filling(s) || order_held(&s->q) > s->ring_bytes)) {
		s->stats.short_rounds++;
		cut = now > SHORT_HOLDBACK_NS ? now - SHORT_HOLDBACK_NS : 0;
	}

	order_sort(&s->q);
	due = order_due(&s->q, cut);
	next_ingest = monotonic_ns() + REINGEST_NS;
	for (i = 0; i < due && !err; i++) {
		struct order_rec p = s->q.recs[i];

		/* Already validated when it was queued; decoded again so pointers are current. */
		if (rec_decode(&s->layout, ring_rec_data(s, &p), p.len, &dec) < 0)
			continue;
		if (deliverable(s, &dec))
			err = cb(ctx, &dec);
		/*
		 * The callback (symbolizing, unwinding) is slow next to the
		 * kernel filling the rings: empty them now and then meanwhile.
		 * What comes in now is younger than the cut (it was written after
		 * the heads were read), so it waits, unsorted at the end, for the
		 * next round. Not when everything is delivered (no cut), and not
		 * past three rings' worth of buffered records.
		 */
		if (cut != UINT64_MAX && i % 64 == 63 && order_held(&s->q) <= 2 * s->ring_bytes &&
		    monotonic_ns() > next_ingest) {
			rings_release(s, i + 1);
			for (size_t k = 0; k < s->nr_rings && !err; k++)
				err = ring_ingest(s, k);
			next_ingest = monotonic_ns() + REINGEST_NS;
		}
	}
	keep_pending(s, i);
	return err;
}

/* Whether the rings' spills hold records this thread has not framed yet. */
static bool spills_pending(const struct sampler *s)
{
	for (size_t i = 0; i < s->nr_rings; i++)
		if (ring_readable(s, &s->rings[i]) != s->rings[i].read_pos)
			return true;
	return false;
}

int sampler__poll(struct sampler *s, int timeout_ms, rec_cb cb, void *ctx)
{
	size_t live = 0;
	int n;

	if (!s || !cb || !s->nr_rings)
		return -EINVAL;
	if (!s->drain_running) {
		int err = early_start(s);

		if (err)
			return err;
	}
	for (size_t i = 0; i < s->nr_rings; i++) {
		s->pfds[i].fd = s->rings[i].hup ? -1 : s->rings[i].fd;
		s->pfds[i].events = POLLIN;
		s->pfds[i].revents = 0;
		live += !s->rings[i].hup;
	}
	/*
	 * Once the target is gone every fd reports POLLHUP at once; those are
	 * left out, so that poll sleeps until the caller notices the exit.
	 */
	if (s->woken) {
		timeout_ms = 0;
		s->woken = false;
	}
	if (s->drain_running) {
		/*
		 * The drain thread empties the rings as records come; this thread
		 * only needs to deliver them in time order. It waits up to
		 * timeout_ms for new records in the spills: the early thread
		 * (else the drain thread) wakes it once it has passed them on.
		 */
		uint64_t until =
			monotonic_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000;
		struct pollfd kick = { .fd = s->work_kick, .events = POLLIN };

		while (!spills_pending(s)) {
			uint64_t t = monotonic_ns(),
				 left = t < until ? (until - t) / 1000000 + 1 : 0;

			if (!left)
				break;
			n = poll(&kick, 1, (int)left);
			if (n < 0) {
				if (errno != EINTR)
					return -errno;
				break;
			}
			if (n > 0)
				eventfd_take(s->work_kick);
		}
	} else if (live || timeout_ms >= 0) {
		n = poll(s->pfds, s->nr_rings, timeout_ms);
		if (n < 0)
			return errno == EINTR ? 0 : -errno;
	}
	for (size_t i = 0; i < s->nr_rings; i++)
		if (s->pfds[i].revents & (POLLHUP | POLLERR | POLLNVAL))
			s->rings[i].hup = true;
	return round_run(s, true, cb, ctx);
}

void sampler__set_early(struct sampler *s, rec_early_cb cb, void *ctx)
{
	if (s) {
		s->early = cb;
		s->early_ctx = ctx;
	}
}

int sampler__drain(struct sampler *s, rec_cb cb, void *ctx)
{
	if (!s || !cb)
		return -EINVAL;
	early_stop(s); /* what is left is delivered now: no more early reads */
	if (s->nr_rings)
		drain_pass(s, s->scratch, true, NULL);
	return round_run(s, false, cb, ctx);
}
