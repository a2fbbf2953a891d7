/* SPDX-License-Identifier: MIT */
/*
 * The rings' readers of the sampler's own, ahead of the recording's
 * thread, which unwinds and names older records and may wait for a cold
 * disk meanwhile. A drain pass (drain_pass) empties the kernel's rings
 * into each ring's spill (spill.h), stack copies cut to what the kernel
 * could copy, and gives the kernel its space back at once.
 *
 *  - the drain thread makes a pass whenever a ring is a quarter full (the
 *    kernel's wakeup) or after idle_ms without one (DRAIN_IDLE_MS). It does
 *    nothing else: no file, no callback can hold it up, so a ring
 *    overflows only once the spills are at their budget. It runs at the
 *    trainer's priority, and above it (real-time) only while records come
 *    fast: from a quarter-full wakeup (or a ring found half full) until a
 *    whole idle wait passes without one. A pass that copied records wakes
 *    the early thread (else sampler__poll) through an eventfd. It copies
 *    into chunks whose pages were touched when the rings were mapped
 *    (spill_ready): a burst's first pass faults on none.
 *  - the early thread (with an early callback only) makes a pass of its
 *    own when woken, or as often as the callback asks (EARLY_FAST_US,
 *    EARLY_SLOW_MS), then hands each sample copied since to
 *    sampler__set_early's callback, long before it is delivered in time
 *    order, and wakes sampler__poll. When a callback waits (a lock, a
 *    file), the drain thread still empties the rings. It runs above the
 *    trainer only while the callback asks for fast passes (it reads a
 *    process's Python frames after each sample: a late read finds them
 *    moved on).
 * No thread wakes on a timer faster than the records come, unless the
 * callback asks: a trainer at full speed on every CPU pays for each wakeup
 * with a preempted thread.
 *
 * One pass at a time (copy_lock). The recording's thread frames what the
 * early thread has seen (what was copied, without one), so every sample
 * reaches the callback before it is delivered.
 */
#include <asm/perf_regs.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sampler/internal.h"

/*
 * A probe's event (enum rec_event), or EV_ONCPU for any other id. Probes
 * are system-wide: their samples may be another process's, which the
 * early callback must tell apart (rec_early_cb).
 */
static uint32_t probe_event(const struct sampler *s, uint64_t id)
{
	size_t n = __atomic_load_n(&s->nr_probe_ids, __ATOMIC_ACQUIRE);

	for (size_t i = 0; i < n; i++)
		if (s->probe_ids[i] == id)
			return s->probe_events[i];
	return EV_ONCPU;
}

/*
 * The event of a sample the early callback gets: a probe's, an event's with
 * a layout of its own (page faults: fixed once the events are open, before
 * the early thread starts), else EV_ONCPU (on-CPU and context-switch samples
 * alike: both carry what the BPF program copied).
 */
static uint32_t early_event(const struct sampler *s, uint64_t id)
{
	const struct rec_alt *alt = rec_alt_of(&s->layout, id);

	return alt ? alt->event : probe_event(s, id);
}

/*
 * Whether a sample (decoded: dec) may lose its stack copy: past three
 * quarters of the spill budget, an on-CPU or context-switch sample's. A
 * probe's is kept: it is what pairs and places a call, and a few KiB a call.
 */
static bool drop_stack(const struct sampler *s, const struct ring *r, const struct rec *dec)
{
	if (!spill_tight(r->spill) || !dec->sample.stack_size)
		return false;
	return !EV_IS_PROBE(probe_event(s, dec->id));
}

void sampler__stack_top(struct sampler *s, uint32_t tid, uint64_t top)
{
	struct stack_top *t;

	if (!s->tops || !tid)
		return;
	t = &s->tops[hash_u64(tid) & (STACK_TOP_SLOTS - 1)];
	if (__atomic_load_n(&t->tid, __ATOMIC_ACQUIRE) == tid &&
	    __atomic_load_n(&t->top, __ATOMIC_ACQUIRE) == top)
		return;
	__atomic_store_n(&t->tid, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&t->top, top, __ATOMIC_RELEASE);
	if (top)
		__atomic_store_n(&t->tid, tid, __ATOMIC_RELEASE);
}

/* Bytes of a sample's stack copy to keep: up to its thread's stack end, if known and above SP. */
static uint64_t stack_keep(const struct sampler *s, const struct rec_sample *smp)
{
	const struct stack_top *t;
	uint64_t top, sp;
	uint32_t tid;

	if (!s->tops || !smp->stack_size || !(smp->uregs.mask & (1ull << PERF_REG_X86_SP)))
		return UINT64_MAX;
	t = &s->tops[hash_u64(smp->tid) & (STACK_TOP_SLOTS - 1)];
	tid = __atomic_load_n(&t->tid, __ATOMIC_ACQUIRE);
	top = __atomic_load_n(&t->top, __ATOMIC_ACQUIRE);
	/* a slot written meanwhile (tid 0 first) is not taken */
	if (tid != smp->tid || __atomic_load_n(&t->tid, __ATOMIC_ACQUIRE) != tid)
		return UINT64_MAX;
	sp = smp->uregs.regs[PERF_REG_X86_SP];
	if (!top || sp >= top || top - sp > UINT64_MAX - SAMPLER_TOP_MARGIN)
		return UINT64_MAX;
	return top - sp + SAMPLER_TOP_MARGIN;
}

/* Copy ring r's new records into its spill; false when the spill budget stopped it. */
static bool copy_out(struct sampler *s, struct ring *r, uint8_t *scratch, bool final, bool *copied)
{
	struct perf_event_mmap_page *pg = r->map;
	uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE), tail = pg->data_tail;
	bool all = true;

	*copied |= head != tail;

	for (;;) {
		uint64_t next = tail, keep = UINT64_MAX;
		const void *data;
		uint8_t *dst;
		size_t len, n;
		bool drop = false, sample;
		struct rec dec;
		int ret = ring_next(r->data, r->data_size, head, &next, scratch, SCRATCH_SIZE,
				    &data, &len);

		if (ret == 0)
			break;
		if (ret < 0) {
			/* a broken header: the rest of this ring cannot be framed */
			__atomic_add_fetch(&s->early_bad, 1, __ATOMIC_RELAXED);
			tail = head;
			break;
		}
		sample = !rec_decode(&s->layout, data, len, &dec) && dec.type == REC_SAMPLE;
		/*
		 * The recording's thread far behind: the sample is kept, its
		 * stack copy not, before the budget ends and the kernel loses
		 * whole records. Its room is its own length then, not len. Not
		 * in the last pass: that one may go past the budget anyway.
		 */
		if (sample) {
			drop = !final && drop_stack(s, r, &dec);
			keep = drop ? UINT64_MAX : stack_keep(s, &dec.sample);
		}
		dst = spill_room(r->spill,
				 drop ? rec_trim_decoded(&dec, data, len, NULL, true, keep) : len,
				 final);
		if (!dst) {
			all = false;
			break;
		}
		n = rec_trim_decoded(sample ? &dec : NULL, data, len, dst, drop, keep);
		spill_wrote(r->spill, n);
		if (drop)
			__atomic_add_fetch(&s->stacks_dropped, 1, __ATOMIC_RELAXED);
		if (sample && !drop &&
		    rec_stack_kept(dec.sample.stack_size, keep) < dec.sample.stack_size) {
			__atomic_add_fetch(&s->stacks_cut, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&s->stack_bytes_cut,
					   dec.sample.stack_size -
						   rec_stack_kept(dec.sample.stack_size, keep),
					   __ATOMIC_RELAXED);
		}
		tail = next;
	}
	/* the kernel may write there again */
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
	spill_publish(r->spill);
	return all;
}

bool drain_pass(struct sampler *s, uint8_t *scratch, bool final, bool *copied)
{
	uint64_t start = monotonic_ns();
	bool all = true, any = false;

	for (size_t i = 0; i < s->nr_rings; i++)
		all &= copy_out(s, &s->rings[i], scratch, final, &any);
	if (all)
		__atomic_store_n(&s->copied_at, start, __ATOMIC_RELEASE);
	if (copied)
		*copied = any;
	return all;
}

/*
 * Above the trainer's threads (real-time prio, else nice -10) or at their
 * priority: *high says which the calling thread is at, and changes with it.
 */
static void reader_priority(bool *high, bool want, int prio)
{
	pid_t tid;

	if (*high == want)
		return;
	*high = want;
	tid = (pid_t)syscall(SYS_gettid);
	if (want) {
		if (pthread_setschedparam(pthread_self(), SCHED_FIFO,
					  &(struct sched_param){ .sched_priority = prio }))
			setpriority(PRIO_PROCESS, (id_t)tid, -10);
		return;
	}
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &(struct sched_param){ 0 });
	setpriority(PRIO_PROCESS, (id_t)tid, 0);
}

static bool locked_pass(struct sampler *s, uint8_t *scratch, bool *copied)
{
	bool all;

	pthread_mutex_lock(&s->copy_lock);
	all = drain_pass(s, scratch, false, copied);
	pthread_mutex_unlock(&s->copy_lock);
	return all;
}

static void *drain_main(void *arg)
{
	struct sampler *s = arg;
	size_t n = s->nr_rings;
	struct pollfd *pfds = calloc(n + 1, sizeof(*pfds));
	uint8_t *scratch = malloc(SCRATCH_SIZE);
	bool left = false, high = false;
	unsigned fill;

	if (!pfds || !scratch)
		goto out;
	/* its timer wakes it when asked, not up to 50 us later */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	prctl(PR_SET_NAME, "dlflame-drain", 0, 0, 0); /* for top -H and bench/overhead.sh */
	for (size_t i = 0; i < n; i++)
		pfds[i] = (struct pollfd){ .fd = s->rings[i].fd, .events = POLLIN };
	pfds[n] = (struct pollfd){ .fd = s->early_stop, .events = POLLIN };
	for (;;) {
		struct timespec wait = { .tv_nsec = left ? EARLY_FAST_US * 1000L
							 : (long)s->idle_ms * 1000000L };
		bool copied = false, full_wait = !left, idle;
		int ready = ppoll(pfds, n + 1, &wait, NULL);

		if (ready < 0 && errno != EINTR)
			break;
		if (pfds[n].revents)
			break;
		/* a gone target's ring says POLLHUP for ever: read it, then stop asking */
		for (size_t i = 0; i < n; i++)
			if (pfds[i].revents & (POLLHUP | POLLERR | POLLNVAL))
				pfds[i].fd = -1;
		/*
		 * Real-time while records come fast (above the early thread
		 * too: a ring must never wait for a callback): from a pass a
		 * ring's quarter-full wakeup began, or that found one half
		 * full, until a whole idle wait passes with every ring under a
		 * quarter. Going real-time only once awake left the wakeup
		 * itself behind the trainer's threads: on a two-rank DDP job
		 * importing torch from a cold cache, a ring's last three
		 * quarters filled meanwhile (182 context-switch samples lost,
		 * 1 run in 7). Any wakeup counts, whatever the fill now (the
		 * early thread may have copied some since): a pass begun under
		 * a quarter at the trainer's priority was preempted for 13 ms
		 * while a burst filled the ring from an eighth to overflowing
		 * (the same job, its disk reads throttled to 8 MB/s).
		 */
		fill = rings_fill(s);
		/* a whole idle wait passed without a wakeup (not the short one after a left ring) */
		idle = ready == 0 && full_wait;
		reader_priority(&high, fill >= 4 || ready > 0 || (high && !(idle && fill < 2)), 2);
		/* a ring left behind (the budget) is looked at again soon: it may be released */
		left = !locked_pass(s, scratch, &copied);
		/* what was copied goes on to the early thread, else to sampler__poll */
		if (copied)
			eventfd_kick(s->early_running ? s->early_kick : s->work_kick);
	}
out:
	free(pfds);
	free(scratch);
	return NULL;
}

/*
 * The early callback for each sample copied since the last pass; *handed:
 * whether the pass went past any record (sampler__poll has work then).
 */
static enum early_want early_pass(struct sampler *s, enum early_want want, bool *handed)
{
	/* loaded first: what was copied by then is below the heads loaded next */
	uint64_t copied_at = __atomic_load_n(&s->copied_at, __ATOMIC_ACQUIRE);

	for (size_t i = 0; i < s->nr_rings; i++) {
		struct ring *r = &s->rings[i];
		uint64_t head = spill_head(r->spill), pos = r->early_pos, at;
		const void *data;
		struct rec dec;
		size_t len;

		while (spill_next(r->spill, head, &pos, &at, &data, &len) > 0) {
			if (rec_decode(&s->layout, data, len, &dec) || dec.type != REC_SAMPLE)
				continue;
			dec.sample.event = early_event(s, dec.id);
			/* returns too: a read after one is not of the call that returned */
			want = s->early(s->early_ctx, &dec);
		}
		*handed |= pos != r->early_pos;
		__atomic_store_n(&r->early_pos, pos, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&s->early_seen, copied_at, __ATOMIC_RELEASE);
	return want;
}

static void *early_main(void *arg)
{
	struct sampler *s = arg;
	struct pollfd pfds[2] = { { .fd = s->early_stop, .events = POLLIN },
				  { .fd = s->early_kick, .events = POLLIN } };
	uint8_t *scratch = malloc(SCRATCH_SIZE);
	enum early_want want = EARLY_FAST; /* the first samples (a program just started) at once */
	bool high = false;

	if (!scratch)
		return NULL;
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	prctl(PR_SET_NAME, "dlflame-early", 0, 0, 0);
	for (;;) {
		bool handed = false;
		/*
		 * The rings looked at every EARLY_FAST_US or EARLY_SLOW_MS, as
		 * the callback asks; else it sleeps until the drain thread has
		 * copied records (the rings' watermark, or its idle wait).
		 */
		struct timespec wait = { .tv_nsec = want == EARLY_FAST ? EARLY_FAST_US * 1000L
						    : want == EARLY_SOON
							    ? EARLY_SLOW_MS * 1000000L
							    : (long)s->idle_ms * 1000000L };

		if (ppoll(pfds, 2, &wait, NULL) < 0 && errno != EINTR)
			break;
		if (pfds[0].revents)
			break;
		if (pfds[1].revents)
			eventfd_take(s->early_kick);
		locked_pass(s, scratch, NULL);
		want = early_pass(s, want, &handed);
		if (handed)
			eventfd_kick(s->work_kick);
		/*
		 * Ahead of the trainer while the callback reads frames after
		 * each sample: a read that waits finds a Python stack that has
		 * moved on. Else at its priority.
		 */
		reader_priority(&high, want == EARLY_FAST, 1);
	}
	free(scratch);
	return NULL;
}

int early_start(struct sampler *s)
{
	int err;

	if (s->drain_running || !s->nr_rings)
		return 0;
	s->early_stop = eventfd(0, EFD_CLOEXEC);
	if (s->early_stop < 0)
		return -errno;
	s->early_kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->work_kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->early_kick < 0 || s->work_kick < 0) {
		err = -errno;
		goto fail;
	}
	/* a probe added for a library just mapped must come soon: see sampler_opts.on_map */
	s->idle_ms = s->opts.on_map ? EARLY_SLOW_MS : DRAIN_IDLE_MS;
	if (s->early) {
		for (size_t i = 0; i < s->nr_rings; i++)
			s->rings[i].early_pos = s->rings[i].read_pos;
		err = -pthread_create(&s->early_thread, NULL, early_main, s);
		if (err)
			goto fail;
		s->early_running = true;
	}
	err = -pthread_create(&s->drain_thread, NULL, drain_main, s);
	if (err)
		goto fail;
	s->drain_running = true;
	return 0;
fail:
	early_stop(s);
	return err;
}

void early_stop(struct sampler *s)
{
	uint64_t one = 1;

	if (s->early_stop < 0)
		return;
	if (write(s->early_stop, &one, sizeof(one)) != sizeof(one))
		abort(); /* an eventfd write cannot fail here; a thread left running would */
	if (s->drain_running)
		pthread_join(s->drain_thread, NULL);
	if (s->early_running)
		pthread_join(s->early_thread, NULL);
	close(s->early_stop);
	s->early_stop = -1;
	if (s->early_kick >= 0)
		close(s->early_kick);
	if (s->work_kick >= 0)
		close(s->work_kick);
	s->early_kick = s->work_kick = -1;
	s->drain_running = s->early_running = false;
}
