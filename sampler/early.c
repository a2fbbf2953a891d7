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
 *  - the standby thread (with an early callback only) sleeps until a
 *    callback has held the reader up for STANDBY_AFTER_NS (a lock, a
 *    file), then empties the rings at their wakeups until the reader is
 *    back. No callback can make a ring overflow.
 *
 * Neither runs above the target's priority, unless a pass finds a ring
 * more than half full (records about to be lost): then that thread runs
 * real-time (as root; else at nice -10 where allowed) until a pass finds
 * every ring under an eighth.
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
#include <sys/timerfd.h>
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

/* A reader thread's own: whether it runs above the target now. */
struct reader {
	struct sampler *s;
	uint8_t *scratch;
	bool boosted;
};

/*
 * Records about to be lost (a ring over half full): run above the target
 * until the rings are nearly empty again (under an eighth).
 */
static void reader_priority(struct reader *rd, unsigned fill)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);

	if (!rd->boosted && fill >= 4) {
		if (pthread_setschedparam(pthread_self(), SCHED_FIFO,
					  &(struct sched_param){ .sched_priority = 1 }))
			setpriority(PRIO_PROCESS, (id_t)tid, -10);
		rd->boosted = true;
		__atomic_add_fetch(&rd->s->boosts, 1, __ATOMIC_RELAXED);
	} else if (rd->boosted && fill < 1) {
		pthread_setschedparam(pthread_self(), SCHED_OTHER,
				      &(struct sched_param){ .sched_priority = 0 });
		setpriority(PRIO_PROCESS, (id_t)tid, 0);
		rd->boosted = false;
	}
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

static bool locked_pass(struct reader *rd)
{
	struct sampler *s = rd->s;
	unsigned fill;
	bool all;

	pthread_mutex_lock(&s->copy_lock);
	all = drain_pass(s, rd->scratch, false, &fill);
	pthread_mutex_unlock(&s->copy_lock);
	reader_priority(rd, fill);
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

static void standby_arm(struct sampler *s, bool on)
{
	struct itimerspec t = { .it_value.tv_nsec = on ? STANDBY_AFTER_NS : 0 };

	__atomic_store_n(&s->in_early, on, __ATOMIC_RELEASE);
	timerfd_settime(s->standby_timer, 0, &t, NULL);
}

/* The early callback for each sample copied since the last pass. */
static bool early_pass(struct sampler *s, bool fast)
{
	/* loaded first: what was copied by then is below the heads loaded next */
	uint64_t copied_at = __atomic_load_n(&s->copied_at, __ATOMIC_ACQUIRE);
	bool armed = false;

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
			if (!armed) {
				standby_arm(s, true);
				armed = true;
			}
			fast = s->early(s->early_ctx, &dec);
		}
		__atomic_store_n(&r->early_pos, pos, __ATOMIC_RELEASE);
	}
	if (armed)
		standby_arm(s, false);
	__atomic_store_n(&s->early_seen, copied_at, __ATOMIC_RELEASE);
	return fast;
}

static void *reader_main(void *arg)
{
	struct reader rd = { .s = arg, .scratch = malloc(SCRATCH_SIZE) };
	struct sampler *s = rd.s;
	struct pollfd *pfds = ring_pollfds(s);
	bool fast = false, left = false;

	if (!pfds || !rd.scratch)
		goto out;
	prctl(PR_SET_NAME, "dlflame-read", 0, 0, 0); /* for top -H and bench/overhead.sh */
	for (;;) {
		/* a ring left behind (the spill budget) is looked at again soon: it may be released */
		int timeout = left ? 1 : s->opts.on_map ? EARLY_SLOW_MS : -1;

		if (!wait_rings(s, pfds, timeout))
			break;
		/* wakeups come at every sample: with no one waiting for them, take a batch */
		if (s->early && !fast && !left && !nap(s, EARLY_SLOW_MS))
			break;
		left = !locked_pass(&rd);
		if (s->early)
			fast = early_pass(s, fast);
	}
out:
	free(pfds);
	free(rd.scratch);
	return NULL;
}

/* Empty the rings while a callback holds the reader up. */
static void *standby_main(void *arg)
{
	struct reader rd = { .s = arg, .scratch = malloc(SCRATCH_SIZE) };
	struct sampler *s = rd.s;
	struct pollfd *pfds = ring_pollfds(s);
	struct pollfd wait[2] = { { .fd = s->early_stop, .events = POLLIN },
				  { .fd = s->standby_timer, .events = POLLIN } };
	uint64_t expired;

	if (!pfds || !rd.scratch)
		goto out;
	prctl(PR_SET_NAME, "dlflame-drain", 0, 0, 0);
	for (;;) {
		if (poll(wait, 2, -1) < 0 && errno != EINTR)
			break;
		if (wait[0].revents)
			break;
		if (!wait[1].revents || read(s->standby_timer, &expired, sizeof(expired)) < 0)
			continue;
		while (__atomic_load_n(&s->in_early, __ATOMIC_ACQUIRE)) {
			if (!wait_rings(s, pfds, EARLY_SLOW_MS))
				goto out;
			locked_pass(&rd);
		}
		reader_priority(&rd, 0);
	}
out:
	free(pfds);
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
	if (s->early)
		s->standby_timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->early_stop < 0 || s->kick_fd < 0 || (s->early && s->standby_timer < 0)) {
		err = -errno;
		goto fail;
	}
	if (s->early) {
		for (size_t i = 0; i < s->nr_rings; i++)
			s->rings[i].early_pos = s->rings[i].read_pos;
		s->early_running = true;
		err = -pthread_create(&s->standby_thread, NULL, standby_main, s);
		if (err)
			goto fail;
		s->standby_running = true;
	}
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
	close_fd(&s->standby_timer);
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
