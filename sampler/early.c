/* SPDX-License-Identifier: MIT */
/*
 * The early reader: a thread of the sampler's own that sees each sample
 * as soon as the kernel has written it, for sampler__set_early's callback,
 * while the main thread may be busy unwinding and naming older records.
 * It only peeks: each ring keeps its records until the main thread has
 * delivered them, and the main thread never gives the kernel back a part
 * of a ring the early reader has not seen yet (rings_release).
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

static void *early_main(void *arg)
{
	struct sampler *s = arg;
	size_t n = s->nr_rings;
	struct pollfd *pfds = calloc(n + 1, sizeof(*pfds));
	uint8_t *scratch = malloc(SCRATCH_SIZE);
	bool fast = false;

	if (!pfds || !scratch)
		goto out;
	/*
	 * Ahead of the recording's own thread, which unwinds and names: a read
	 * that waits for it finds a Python stack that has moved on. Real-time
	 * priority (it sleeps in ppoll and works microseconds at a time), else
	 * a higher nice level; only root may have either. Its timer wakes it
	 * when asked, not up to 50 us later.
	 */
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO,
				  &(struct sched_param){ .sched_priority = 1 }))
		setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -10);
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	for (size_t i = 0; i < n; i++)
		pfds[i] = (struct pollfd){ .fd = s->rings[i].fd, .events = POLLIN };
	pfds[n] = (struct pollfd){ .fd = s->early_stop, .events = POLLIN };
	for (;;) {
		struct timespec wait = { .tv_nsec = fast ? EARLY_FAST_US * 1000L
							 : EARLY_SLOW_MS * 1000000L };

		if (ppoll(pfds, n + 1, &wait, NULL) < 0 && errno != EINTR)
			break;
		if (pfds[n].revents)
			break;
		for (size_t i = 0; i < n; i++) {
			struct ring *r = &s->rings[i];
			struct perf_event_mmap_page *pg = r->map;
			uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
			uint64_t pos = __atomic_load_n(&r->early_pos, __ATOMIC_RELAXED), next;
			const void *data;
			struct rec dec;
			size_t len;

			/* a gone target's ring says POLLHUP for ever: read it, then stop asking */
			if (pfds[i].revents & (POLLHUP | POLLERR | POLLNVAL))
				pfds[i].fd = -1;
			if (head - pos > r->data_size)
				pos = head; /* cannot be: lost track, start afresh */
			for (;;) {
				next = pos;
				if (ring_next(r->data, r->data_size, head, &next, scratch,
					      SCRATCH_SIZE, &data, &len) <= 0)
					break;
				if (rec_decode(&s->layout, data, len, &dec) == 0 &&
				    dec.type == REC_SAMPLE) {
					dec.sample.event = probe_event(s, dec.id);
					/* a return's stack is not kept */
					if (!EV_IS_PROBE(dec.sample.event) ||
					    !EV_PROBE_IS_RETURN(dec.sample.event))
						fast = s->early(s->early_ctx, &dec);
				}
				pos = next;
			}
			__atomic_store_n(&r->early_pos, pos, __ATOMIC_RELEASE);
		}
	}
out:
	free(pfds);
	free(scratch);
	return NULL;
}

int early_start(struct sampler *s)
{
	int err;

	if (!s->early || s->early_running || !s->nr_rings)
		return 0;
	s->early_stop = eventfd(0, EFD_CLOEXEC);
	if (s->early_stop < 0)
		return -errno;
	for (size_t i = 0; i < s->nr_rings; i++)
		s->rings[i].early_pos = s->rings[i].read_pos;
	err = pthread_create(&s->early_thread, NULL, early_main, s);
	if (err) {
		close(s->early_stop);
		s->early_stop = -1;
		return -err;
	}
	s->early_running = true;
	return 0;
}

void early_stop(struct sampler *s)
{
	uint64_t one = 1;

	if (!s->early_running)
		return;
	if (write(s->early_stop, &one, sizeof(one)) != sizeof(one))
		abort(); /* an eventfd write cannot fail here; a thread left running would */
	pthread_join(s->early_thread, NULL);
	close(s->early_stop);
	s->early_stop = -1;
	s->early_running = false;
}
