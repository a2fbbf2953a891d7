/* SPDX-License-Identifier: MIT */
/*
 * The rings' readers of the sampler's own, ahead of the recording's
 * thread, which unwinds and names older records and may wait for a cold
 * disk meanwhile. A drain pass (drain_pass) empties the kernel's rings
 * into each ring's spill (spill.h), stack copies cut to what the kernel
 * could copy, and gives the kernel its space back at once.
 *
 *  - the reader thread sleeps until the kernel wakes a ring: at every
 *    sample when there is an early callback (the events' wakeup_events,
 *    events.c), else at the rings' watermark. Then it makes a pass and
 *    hands each sample copied since to sampler__set_early's callback, long
 *    before it is delivered in time order. While the callback says it
 *    wants no samples at once (no Python process), it naps EARLY_SLOW_MS
 *    before each pass, so that a busy target's samples come a batch at a
 *    time; a ring is a quarter full only after far longer. With probes
 *    watched as libraries are mapped (opts.on_map), it also looks every
 *    EARLY_SLOW_MS: a mapping is not a sample and wakes nobody.
 *  - the standby thread guards against losses: neither a callback (a lock,
 *    a file) nor a busy machine must hold the reader up until a ring
 *    overflows, and the reader runs at the target's priority (but while it
 *    reads Python frames: reader_priority). It runs
 *    real-time where allowed (as root), and only looks: every
 *    EARLY_SLOW_MS while records come (WATCH_IDLE_MS once none came since),
 *    it reads each ring's head and tail, microseconds of work. A ring found
 *    half full (about to be lost: the reader, woken at a quarter at most,
 *    has not come to it) it drains itself, until every ring is under an
 *    eighth.
 *
 * One pass at a time (copy_lock). The recording's thread frames what the
 * reader has handed to the callback (what was copied, without one), so
 * every sample reaches the callback before it is delivered; the reader
 * wakes it (kick_fd) when the spills hold a quarter of their budget.
 */
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

bool drain_pass(struct sampler *s, uint8_t *scratch, bool final, unsigned *fill)
{
	uint64_t start = monotonic_ns(), bad = 0;
	bool all = true;

	*fill = 0;
	for (size_t i = 0; i < s->nr_rings; i++)
		all &= ring_copy_out(&s->rings[i], &s->layout, scratch, final, fill, &bad);
	if (bad)
		__atomic_add_fetch(&s->early_bad, bad, __ATOMIC_RELAXED);
	if (all)
		__atomic_store_n(&s->copied_at, start, __ATOMIC_RELEASE);
	return all;
}

/* Once no record came since the last look, the standby thread looks this often. */
#define WATCH_IDLE_MS 50

/* A reader thread's own. */
struct reader {
	struct sampler *s;
	uint8_t *scratch;
};

/* The kernel's struct sched_attr (sched_setattr(2)), its first version's fields. */
struct slice_attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};

/*
 * A short time slice, at the same policy and nice value: on kernels that
 * schedule by earliest eligible virtual deadline (6.6 on; a slice of one's
 * own from 6.12) a thread woken with a short slice has an earlier deadline
 * and gets the CPU sooner, without a larger share of it. The reader works
 * microseconds per wakeup, and a Python frame chain read late has moved.
 * Elsewhere the request changes nothing.
 */
static void short_slice(void)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);
	struct slice_attr a = { .size = sizeof(a), .policy = SCHED_OTHER, .runtime = 100000 };

	errno = 0;
	a.nice = getpriority(PRIO_PROCESS, (id_t)tid);
	if (!errno)
		syscall(SYS_sched_setattr, tid, &a, 0);
}

/* Wake the recording's thread when the spills hold a quarter of their budget. */
static void kick(struct sampler *s)
{
	uint64_t one = 1;

	if (__atomic_load_n(&s->budget.used, __ATOMIC_RELAXED) * 4 < s->budget.max ||
	    __atomic_exchange_n(&s->kicked, true, __ATOMIC_ACQ_REL))
		return;
	if (write(s->kick_fd, &one, sizeof(one)) != sizeof(one))
		__atomic_store_n(&s->kicked, false, __ATOMIC_RELEASE);
}

/* *fill: how full the fullest ring was, in eighths. */
static bool locked_pass(struct reader *rd, unsigned *fill)
{
	struct sampler *s = rd->s;
	bool all;

	pthread_mutex_lock(&s->copy_lock);
	all = drain_pass(s, rd->scratch, false, fill);
	pthread_mutex_unlock(&s->copy_lock);
	kick(s);
	return all;
}

/* The rings' fds (live ones: a gone target's ring says POLLHUP for ever) and stop, last. */
static struct pollfd *ring_pollfds(const struct sampler *s)
{
	struct pollfd *pfds = calloc(s->nr_rings + 1, sizeof(*pfds));

	if (!pfds)
		return NULL;
	for (size_t i = 0; i < s->nr_rings; i++)
		pfds[i] = (struct pollfd){ .fd = s->rings[i].fd, .events = POLLIN };
	pfds[s->nr_rings] = (struct pollfd){ .fd = s->early_stop, .events = POLLIN };
	return pfds;
}

/* Wait for a ring's wakeup, up to timeout_ms (-1: none); false once stopped or broken. */
static bool wait_rings(const struct sampler *s, struct pollfd *pfds, int timeout_ms)
{
	size_t n = s->nr_rings;

	if (poll(pfds, n + 1, timeout_ms) < 0 && errno != EINTR)
		return false;
	if (pfds[n].revents)
		return false;
	for (size_t i = 0; i < n; i++)
		if (pfds[i].revents & (POLLHUP | POLLERR | POLLNVAL))
			pfds[i].fd = -1;
	return true;
}

/* Sleep ms unless stopped meanwhile; false once stopped. */
static bool nap(const struct sampler *s, int ms)
{
	struct pollfd stop = { .fd = s->early_stop, .events = POLLIN };

	return poll(&stop, 1, ms) >= 0 ? !stop.revents : errno == EINTR;
}

/* The early callback for each sample copied since the last pass. */
static bool early_pass(struct sampler *s, bool fast)
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
			dec.sample.event = probe_event(s, dec.id);
			/* a return's stack is not kept */
			if (EV_IS_PROBE(dec.sample.event) && EV_PROBE_IS_RETURN(dec.sample.event))
				continue;
			fast = s->early(s->early_ctx, &dec);
		}
		__atomic_store_n(&r->early_pos, pos, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&s->early_seen, copied_at, __ATOMIC_RELEASE);
	return fast;
}

/*
 * While the callback wants samples at once (a Python process's frames are
 * read after each sample), the reader runs real-time where allowed: a
 * chain read a millisecond late has moved, and where the frames at one
 * address now belong to another function (one caller's call ended, the
 * next began at the same depth) nothing in the stack copy tells the two
 * apart. At the trainer's priority the read came 1.3 ms after the sample
 * on average (0.13 ms real-time) and a probed call of dozer() was counted
 * as napper()'s (e2e python::probe_entries_have_python_frames). It wakes
 * once per sample, for microseconds: no timer. Otherwise, the trainer's
 * priority with a short slice.
 */
static void reader_priority(bool fast)
{
	if (fast) {
		pthread_setschedparam(pthread_self(), SCHED_FIFO,
				      &(struct sched_param){ .sched_priority = 1 });
		return;
	}
	pthread_setschedparam(pthread_self(), SCHED_OTHER,
			      &(struct sched_param){ .sched_priority = 0 });
	short_slice();
}

static void *reader_main(void *arg)
{
	struct reader rd = { .s = arg, .scratch = malloc(SCRATCH_SIZE) };
	struct sampler *s = rd.s;
	struct pollfd *pfds = ring_pollfds(s);
	bool fast = false, left = false, was_fast = false;

	if (!pfds || !rd.scratch)
		goto out;
	prctl(PR_SET_NAME, "dlflame-read", 0, 0, 0); /* for top -H and bench/overhead.sh */
	short_slice();
	for (;;) {
		/* a ring left behind (the spill budget) is looked at again soon: it may be released */
		int timeout = left ? 1 : s->opts.on_map ? EARLY_SLOW_MS : -1;

		if (!wait_rings(s, pfds, timeout))
			break;
		/* wakeups come at every sample: with no one waiting for them, take a batch */
		if (s->early && !fast && !left && !nap(s, EARLY_SLOW_MS))
			break;
		left = !locked_pass(&rd, &(unsigned){ 0 });
		if (s->early)
			fast = early_pass(s, fast);
		if (fast != was_fast)
			reader_priority(fast);
		was_fast = fast;
	}
out:
	free(pfds);
	free(rd.scratch);
	return NULL;
}

/* How full the fullest ring is, in eighths; *moved: whether a head moved since *heads. */
static unsigned rings_fill(const struct sampler *s, uint64_t *heads, bool *moved)
{
	unsigned fill = 0;

	*moved = false;
	for (size_t i = 0; i < s->nr_rings; i++) {
		const struct ring *r = &s->rings[i];
		const struct perf_event_mmap_page *pg = r->map;
		uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE),
			 tail = __atomic_load_n(&pg->data_tail, __ATOMIC_ACQUIRE);
		unsigned eighths = (unsigned)((head - tail) * 8 / r->data_size);

		*moved |= head != heads[i];
		heads[i] = head;
		if (eighths > fill)
			fill = eighths;
	}
	return fill;
}

/* Drain a ring the reader has not come to before it overflows (see the top). */
static void *standby_main(void *arg)
{
	struct reader rd = { .s = arg, .scratch = malloc(SCRATCH_SIZE) };
	struct sampler *s = rd.s;
	uint64_t *heads = calloc(s->nr_rings, sizeof(*heads));
	bool moved = true;
	unsigned fill;

	if (!heads || !rd.scratch)
		goto out;
	prctl(PR_SET_NAME, "dlflame-drain", 0, 0, 0); /* for top -H and bench/overhead.sh */
	/* it wakes for microseconds; where real-time is not allowed, it still looks */
	pthread_setschedparam(pthread_self(), SCHED_FIFO,
			      &(struct sched_param){ .sched_priority = 1 });
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	while (nap(s, moved ? EARLY_SLOW_MS : WATCH_IDLE_MS)) {
		if (rings_fill(s, heads, &moved) < 4)
			continue;
		__atomic_add_fetch(&s->standby_passes, 1, __ATOMIC_RELAXED);
		do
			locked_pass(&rd, &fill);
		while (fill >= 1 && nap(s, 1));
	}
out:
	free(heads);
	free(rd.scratch);
	return NULL;
}

int early_start(struct sampler *s)
{
	int err;

	if (s->drain_running || !s->nr_rings)
		return 0;
	s->early_stop = eventfd(0, EFD_CLOEXEC);
	s->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->early_stop < 0 || s->kick_fd < 0) {
		err = -errno;
		goto fail;
	}
	if (s->early) {
		for (size_t i = 0; i < s->nr_rings; i++)
			s->rings[i].early_pos = s->rings[i].read_pos;
		s->early_running = true;
	}
	err = -pthread_create(&s->standby_thread, NULL, standby_main, s);
	if (err)
		goto fail;
	s->standby_running = true;
	err = -pthread_create(&s->drain_thread, NULL, reader_main, s);
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

	if (s->early_stop >= 0) {
		if (write(s->early_stop, &one, sizeof(one)) != sizeof(one))
			abort(); /* an eventfd write cannot fail here; a thread left running would */
		if (s->drain_running)
			pthread_join(s->drain_thread, NULL);
		if (s->standby_running)
			pthread_join(s->standby_thread, NULL);
	}
	close_fd(&s->early_stop);
	close_fd(&s->kick_fd);
	s->drain_running = s->early_running = s->standby_running = false;
}

bool early_kicked(struct sampler *s)
{
	uint64_t v;

	if (!__atomic_load_n(&s->kicked, __ATOMIC_ACQUIRE))
		return false;
	if (read(s->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return false;
	__atomic_store_n(&s->kicked, false, __ATOMIC_RELEASE);
	return true;
}

uint64_t early_readable(const struct sampler *s, const struct ring *r)
{
	return s->early_running ? __atomic_load_n(&r->early_pos, __ATOMIC_ACQUIRE)
				: spill_head(r->spill);
}

uint64_t early_copied_at(const struct sampler *s)
{
	return __atomic_load_n(s->early_running ? &s->early_seen : &s->copied_at, __ATOMIC_ACQUIRE);
}
