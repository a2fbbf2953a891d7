/* SPDX-License-Identifier: MIT */
/*
 * What the files of the sampler share; not part of its API (sampler.h).
 *
 *   sampler.c  the coordinator: options, lifetime, draining rounds in time order
 *   launch.c   launching the target stopped before exec, and its events
 *   attach.c   attaching to running processes and threads, and the threads found
 *   early.c    the drain thread (rings -> spills) and the early thread
 *   ring.c     the per-CPU mmap rings: opening, mapping, framing records in place
 *   events.c   perf event attributes, probing, opening; error messages
 *   spill.c    the FIFOs records are copied into out of the rings
 *   order.c    the time-ordering queue (also the perf.data reader's)
 *   decode.c   decoding records
 *
 * Calls go down that list, never up: sampler.c calls the others; launch.c
 * and attach.c call ring.c and events.c; early.c calls ring.c (ring_next),
 * spill.c and decode.c; ring.c calls events.c, spill.c and order.c.
 */
#ifndef DLFLAME_SAMPLER_INTERNAL_H
#define DLFLAME_SAMPLER_INTERNAL_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include "sampler/order.h"
#include "sampler/spill.h"

#include "sampler/sampler.h"
#include "util/util.h"

/* header.size is a u16, so no record is larger than this. */
#define SCRATCH_SIZE 65536

struct ring {
	int fd;
	void *map;
	size_t map_size;
	const uint8_t *data;
	size_t data_size;
	uint64_t last_time; /* time given to records that carry none */
	/*
	 * The drain thread (early.c) copies the kernel's records out of the
	 * ring into spill as soon as they are written (stack copies cut to
	 * what the kernel could copy) and gives the kernel its space back at
	 * once: the kernel never waits for the recording's thread, which only
	 * the spill budget keeps from falling further behind. Records up to
	 * read_pos are framed: delivered, or waiting in the queue where they
	 * lie in spill, which keeps them until delivered (its tail is the
	 * oldest waiting one).
	 */
	struct spill *spill;
	uint64_t early_pos; /* the early thread has seen its records up to here (atomic) */
	uint64_t read_pos;
	uint64_t release; /* scratch of rings_release() */
	bool hup;
};

/*
 * An event that writes into a ring it does not own (PERF_EVENT_IOC_SET_OUTPUT):
 * the context-switch events, and in attach mode every per-thread event.
 */
struct event {
	int fd;
	int link; /* a BPF link holding a program on it (pybpf/'s, on a probe's entry), or -1 */
	uint32_t tid; /* attach mode: the thread it was opened on; 0 in launch mode */
	bool hup; /* attach mode: its thread and every thread it begat have exited (or it is a
		     system-wide probe, which tells nothing of that) */
};

/* What a sample id stands for: enum rec_event | tid << 8 (the tid an attach event was opened on). */
#define ID_EVENT(v) ((enum rec_event)((v)&0xff))
#define ID_TID(v) ((uint32_t)((v) >> 8))

/* One thread's stack end (sampler__stack_top). */
struct stack_top {
	uint32_t tid; /* 0: empty */
	uint64_t top;
};
#define STACK_TOP_SLOTS 4096 /* power of two */

struct sampler {
	struct sampler_opts opts;
	struct sampler_stats stats;
	struct rec_layout layout;
	struct rec_alt *alts; /* layout.alts: set before the rings are read, then fixed */
	size_t nr_alts, alts_cap;
	bool mono_clock;

	/*
	 * Probes are system-wide uprobes (inherited ones would make the
	 * kernel read their path from each new thread's memory: clone fails
	 * with EFAULT). Their samples are kept for the launched process tree
	 * only (tree: its pids, from FORK records); probe_ids lets the early
	 * reader skip them. Probes are added while it runs (sampler__add_probe):
	 * the array has room for SAMPLER_MAX_PROBES from the start and never
	 * moves, and nr_probe_ids is stored (release) after the ids it counts.
	 */
	uint64_t *probe_ids;
	uint32_t *probe_events; /* each probe id's enum rec_event, beside it */
	size_t nr_probe_ids, nr_probes_open;
	struct u64map tree;
	bool tree_filter;

	struct ring *rings;
	size_t nr_rings;
	struct pollfd *pfds;
	size_t ring_bytes;
	int *cpus; /* rings[i] is the ring of cpus[i] */

	struct event *events;
	size_t nr_events, events_cap;
	struct pollfd *epfds; /* attach mode: for sampler__targets_gone */
	struct u64map ids; /* sample id -> ID_EVENT | ID_TID */

	bool attached, threads_only;
	struct u64map tids; /* attach mode: tids we opened events on (or gave up on) */
	rec_early_cb early; /* sampler__set_early */
	void *early_ctx;
	/* early.c: the drain thread, and the early thread when there is an early callback */
	pthread_t drain_thread, early_thread;
	bool drain_running, early_running;
	int early_stop; /* eventfd that stops both */
	/*
	 * eventfds: the drain thread wakes the early thread (early_kick)
	 * after a pass that copied records, and the early thread (else the
	 * drain thread) wakes sampler__poll (work_kick). No thread but a
	 * fast early one wakes on a timer faster than idle_ms.
	 */
	int early_kick, work_kick; /* eventfd_kick, eventfd_take */
	unsigned idle_ms;
	pthread_mutex_t copy_lock; /* one drain pass at a time */
	/*
	 * Every record the kernel wrote before copied_at is in the spills
	 * (atomic: the start of the last pass that copied every ring), and the
	 * early thread has seen those written before early_seen (atomic).
	 * Records a pass found malformed (atomic), for stats.bad_records.
	 */
	uint64_t copied_at, early_seen;
	uint64_t early_bad;
	uint64_t stacks_dropped; /* by drain passes (atomic): stats.stacks_dropped */
	uint64_t stacks_cut,
		stack_bytes_cut; /* the same (atomic): stats.stacks_cut, stack_bytes_cut */
	/*
	 * Where threads' stacks end (sampler__stack_top), by tid, direct
	 * mapped; NULL: none kept. A slot is written as tid 0, top, tid; the
	 * drain takes a top only between two reads of the same tid.
	 */
	struct stack_top *tops;
	struct spill_budget budget; /* of every ring's spill */
	struct u64map origin; /* attach mode: tid -> the tid whose events it is followed by */
	bool woken; /* targets_gone may have taken a ring's wakeup */
	size_t fd_budget; /* attach mode: fds the rings and events may use */
	struct sampler_thread *threads; /* attach mode: the threads found (sampler__threads) */
	size_t nr_threads, threads_cap;

	pid_t child;
	int go_fd, err_fd;
	bool launched, started;
	bool cgroup; /* cgroup mode: events are opened with PERF_FLAG_PID_CGROUP */

	uint8_t *scratch;
	/*
	 * Records waiting to be delivered: in their ring (src the ring, pos
	 * their ring position), or copied when they straddle the ring's end.
	 */
	struct order q;
};

static inline void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- events.c ------------------------------------------------------------ */

/* The record layout every event of s shares, from s->opts. */
void event_layout(struct sampler *s);
/* perf_event_open with close-on-exec: an fd or a negative errno. */
int event_open(struct perf_event_attr *attr, pid_t pid, int cpu);
int event_errno(int err);
int event_open_or_user_only(struct sampler *s, struct perf_event_attr *attr, pid_t pid, int cpu);
int event_probe(struct sampler *s, struct perf_event_attr *attr, pid_t pid, int cpu);
void event_attr_oncpu(const struct sampler *s, struct perf_event_attr *attr);
void event_attr_fault(const struct sampler *s, struct perf_event_attr *attr);
/* fd's samples have attr's layout: noted in s->layout's alts when it is not s's own. */
int event_alt(struct sampler *s, int fd, const struct perf_event_attr *attr, enum rec_event ev);
/* A probe entry's stack copy: the stack at the call, for its callers. */
#define PROBE_STACK_SIZE 8192
int event_attr_probe(const struct sampler *s, struct perf_event_attr *attr,
		     const struct sampler_probe *p, bool ret);
/*
 * The probes' entry and return uprobes, per CPU, system-wide; their samples
 * kept for pids and their descendants only. On failure, none (stats.probe_err).
 */
void probes_open(struct sampler *s, const pid_t *pids, size_t n);
void event_attr_switch(const struct sampler *s, struct perf_event_attr *attr);
void event_attr_sideband(struct perf_event_attr *attr);
int event_note_id(struct sampler *s, int fd, enum rec_event ev, uint32_t tid);
int event_add(struct sampler *s, int fd, int ring_fd, enum rec_event ev, uint32_t tid);
/* Close every event of s->events[] (they write into the rings: before the rings). */
void events_close(struct sampler *s);
/* Close e's fd, and its BPF link if it has one. */
void event_close(struct event *e);

/* ---- ring.c -------------------------------------------------------------- */

/* Opens the event that owns the ring of one CPU (launch mode and attach mode differ). */
typedef int (*open_owner_fn)(struct sampler *s, struct perf_event_attr *attr, pid_t pid, int cpu);
int rings_open(struct sampler *s, struct perf_event_attr *attr, pid_t pid, open_owner_fn open_owner,
	       int ev);
/* Close every event, then unmap and close the rings. */
void rings_close(struct sampler *s);
/* A PERF_RECORD_LOST, counted in the stats in all and by event. */
void count_lost(struct sampler *s, const struct rec_lost *l);
int ring_ingest(struct sampler *s, size_t ri);
void rings_release(struct sampler *s, size_t from);
bool rings_filling(const struct sampler *s);
/* The fullest kernel ring's fill, in eighths of its size (0 to 8). */
unsigned rings_fill(const struct sampler *s);

/* Where the recording's thread may frame ring r's spill up to (what the early thread saw). */
uint64_t ring_readable(const struct sampler *s, const struct ring *r);
/* Every record written before this time (CLOCK_MONOTONIC) can be framed. */
uint64_t rings_copied_at(const struct sampler *s);

/* ---- early.c ------------------------------------------------------------- */

/* The threads that empty the rings into spill, and see each sample early. */
int early_start(struct sampler *s);
void early_stop(struct sampler *s);
/*
 * One pass of the drain thread over every ring, on whichever thread: the
 * caller's once it is stopped (final: past the spill budget). False when
 * the budget left records in a ring.
 */
bool drain_pass(struct sampler *s, uint8_t *scratch, bool final, bool *copied);

/* Wake the thread polling eventfd fd; a full counter has a wakeup pending already. */
static inline void eventfd_kick(int fd)
{
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
		/* EAGAIN only: the counter is full, the wakeup is pending */
	}
}

/* Take the wakeups sent to nonblocking eventfd fd so far (none: EAGAIN, nothing taken). */
static inline void eventfd_take(int fd)
{
	uint64_t n;

	if (fd >= 0 && read(fd, &n, sizeof(n)) < 0) {
		/* EAGAIN: none pending */
	}
}
/* The bytes of a queued record, in its ring's spill or copied. */
static inline const uint8_t *ring_rec_data(const struct sampler *s, const struct order_rec *p)
{
	if (p->off != ORDER_IN_PLACE)
		return order_copied(&s->q, p);
	return spill_at(s->rings[p->src].spill, p->pos);
}

/* ---- launch.c ------------------------------------------------------------ */

/* The child never ran the user's command: make sure it never will. */
void launch_kill(struct sampler *s);

#endif
