/* SPDX-License-Identifier: MIT */
/*
 * The sampler stage owns everything between the kernel and a decoded
 * record: launching the target or attaching to running threads, the perf
 * events and their per-CPU mmap rings, draining those in time order, and
 * decoding raw records into one struct per kind; perfdata.h reads perf's
 * files into the same records. It knows nothing of symbols or profiles:
 * records go to the caller's callback, valid during the call.
 *
 * Library code: returns negative errno, never prints. The caller (cmd/)
 * turns errors into words with sampler__open_strerror().
 */
#ifndef DLFLAME_SAMPLER_H
#define DLFLAME_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- decoded records ---------------------------------------------------- */

enum rec_type {
	REC_SAMPLE = 1,
	REC_MMAP2,
	REC_COMM,
	REC_FORK,
	REC_EXIT,
	REC_LOST,
	REC_THROTTLE,
	REC_SWITCH, /* PERF_RECORD_SWITCH / SWITCH_CPU_WIDE */
	REC_OTHER, /* a record kind we do not use; skipped */
};

/* Which of dlflame's events a sample came from (from its sample id). */
enum rec_event {
	EV_ONCPU = 0, /* cpu-clock or cycles */
	EV_SWITCH = 1, /* context-switches, period 1: the stack where a thread blocks */
	EV_FAULT = 2, /* page-faults, one sample every fault_period faults */
	EV_PROBE = 3, /* probe i's entry is EV_PROBE + 2i, its return EV_PROBE + 2i + 1 */
};
#define SAMPLER_MAX_PROBES 32
#define EV_PROBE_ENTRY(i) ((enum rec_event)(EV_PROBE + 2 * (i)))
#define EV_PROBE_RETURN(i) ((enum rec_event)(EV_PROBE + 2 * (i) + 1))
#define EV_IS_PROBE(ev) ((ev) >= EV_PROBE)
#define EV_PROBE_INDEX(ev) (((ev)-EV_PROBE) / 2)
#define EV_PROBE_IS_RETURN(ev) (((ev)-EV_PROBE) & 1)

/*
 * User registers of a DWARF-mode sample, indexed by enum perf_event_x86_regs
 * (<asm/perf_regs.h>): regs[PERF_REG_X86_IP], regs[PERF_REG_X86_SP], ...
 * Only entries whose bit is set in mask are valid.
 */
#define REC_REGS_MAX 32
struct rec_regs {
	uint64_t abi; /* PERF_SAMPLE_REGS_ABI_*; 0 (NONE): no user registers (kernel thread) */
	uint64_t mask;
	uint64_t regs[REC_REGS_MAX];
};

/*
 * Callchain entries are as the kernel writes them: leaf first, with
 * PERF_CONTEXT_KERNEL / PERF_CONTEXT_USER markers (values >= PERF_CONTEXT_MAX)
 * telling which space the following addresses belong to.
 */
struct rec_sample {
	uint64_t ip;
	uint32_t pid, tid;
	uint64_t time;
	uint64_t id;
	uint32_t cpu;
	uint64_t period;
	uint64_t nr; /* callchain entries, already checked against the record size */
	const uint64_t *ips; /* points into the record; valid during the callback */
	bool user; /* misc says the sample was taken in user mode */
	enum rec_event event;
	/* DWARF mode only (PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER), else zero: */
	struct rec_regs uregs;
	const uint8_t
		*stack; /* copy of the user stack from regs[SP] up; valid during the callback */
	uint64_t stack_size; /* valid bytes (the kernel's dyn_size), checked against the record */
	uint32_t stack_off; /* where the copy's size field lies in the record; 0: no copy field */
	/*
	 * The recording fell behind by the spill budget and the sampler kept
	 * the sample without its stack copy (rec_trim's drop): not the
	 * kernel's doing. Its stack can only be cut.
	 */
	bool stack_dropped;
	/*
	 * The sampler kept the copy only up to where this thread's stack was
	 * known to end (sampler__stack_top): a walk that needs more says the
	 * thread's stack now ends higher.
	 */
	bool stack_cut;
};

struct rec_mmap2 {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t maj, min;
	uint64_t ino;
	uint32_t prot, flags;
	bool has_build_id;
	uint8_t build_id_size;
	uint8_t build_id[20];
	const char *filename; /* NUL-terminated within the record */
	uint64_t time;
};

struct rec_comm {
	uint32_t pid, tid;
	const char *comm; /* NUL-terminated within the record */
	bool exec; /* PERF_RECORD_MISC_COMM_EXEC */
	uint64_t time;
};

struct rec_fork { /* also used for EXIT */
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
};

struct rec_lost {
	uint64_t id, lost;
	uint64_t time;
};

struct rec_switch {
	uint32_t pid, tid; /* the thread switching (from the sample_id trailer) */
	bool out; /* PERF_RECORD_MISC_SWITCH_OUT: it leaves the CPU */
	bool preempt; /* PERF_RECORD_MISC_SWITCH_OUT_PREEMPT: it was runnable (preempted) */
	uint32_t cpu;
	uint64_t time;
};

struct rec {
	enum rec_type type;
	uint16_t misc;
	uint64_t time; /* 0 if the record carries none */
	uint64_t id; /* id of the event that wrote it (PERF_SAMPLE_ID/IDENTIFIER), 0 if none */
	uint32_t tid; /* the thread running when it was written (PERF_SAMPLE_TID), 0 if none */
	union {
		struct rec_sample sample;
		struct rec_mmap2 mmap2;
		struct rec_comm comm;
		struct rec_fork fork; /* REC_FORK and REC_EXIT */
		struct rec_lost lost;
		struct rec_switch sw;
	};
};

/*
 * How records of one event are laid out: which PERF_SAMPLE_* bits are set
 * and whether non-sample records carry a sample_id trailer.
 */
struct rec_layout {
	uint64_t sample_type;
	uint64_t sample_regs_user; /* mask, when PERF_SAMPLE_REGS_USER is set */
	bool sample_id_all;
	/*
	 * Samples of events with a layout of their own in the same rings, by
	 * id, sorted (with PERF_SAMPLE_IDENTIFIER in every sample_type, a
	 * sample's id comes first). They differ from sample_type in sample
	 * fields only, never in the sample_id trailer of other records.
	 */
	const struct rec_alt *alts;
	size_t nr_alts;
};

/* A sample layout of its own: samples whose id is id have sample_type. */
struct rec_alt {
	uint64_t id;
	uint64_t sample_type;
	uint64_t period; /* what a sample stands for when PERF_SAMPLE_PERIOD is not in it */
	uint32_t event; /* its event (enum rec_event): the early reader tells samples apart by it */
};

/* The layout of its own of samples whose id is id (layout->alts, sorted by id), or NULL. */
const struct rec_alt *rec_alt_of(const struct rec_layout *layout, uint64_t id);

/*
 * Decode one record of `len` bytes (the header included, len must equal
 * header.size). Every field is bounds-checked against len. Returns 0,
 * or -EINVAL for a malformed record (the caller reports and skips it).
 */
int rec_decode(const struct rec_layout *layout, const void *data, size_t len, struct rec *out);
/*
 * Copy the record data[0..len) to dst (room for len bytes), a sample's user
 * stack copy cut to the bytes the kernel could copy (dyn_size, rounded up to
 * 8; a copy of none loses its dyn_size field too): it decodes as before, in
 * fewer bytes. With drop, a sample's copy goes entirely and the copy says so
 * (REC_MISC_STACK_DROPPED: rec_sample.stack_dropped). With keep below the
 * bytes the kernel copied, only keep of them stay (rounded up to 8) and the
 * copy says so (REC_MISC_STACK_CUT: rec_sample.stack_cut). Any other
 * record, or one that does not decode, is copied as it is. Returns the
 * copy's length; with dst NULL, only that.
 */
size_t rec_trim(const struct rec_layout *layout, const void *data, size_t len, void *dst, bool drop,
		uint64_t keep);
/*
 * The bytes rec_trim keeps of a copy of dyn bytes given keep: keep rounded
 * up to a word when that is fewer than dyn, else dyn.
 */
static inline uint64_t rec_stack_kept(uint64_t dyn, uint64_t keep)
{
	return keep < UINT64_MAX - 7 && ((keep + 7) & ~7ull) < dyn ? (keep + 7) & ~7ull : dyn;
}
/* The same for a record r that rec_decode made of these bytes; NULL: one that did not decode. */
size_t rec_trim_decoded(const struct rec *r, const void *data, size_t len, void *dst, bool drop,
			uint64_t keep);
/*
 * header.misc of a sample whose stack copy the sampler dropped: a bit the
 * kernel defines for no record (its cpumode is bits 0-2, its flags bits
 * 12-15).
 */
#define REC_MISC_STACK_DROPPED (1u << 11)
/* ... and of one whose copy it cut above where the thread's stack ends (sampler__stack_top) */
#define REC_MISC_STACK_CUT (1u << 10)

/*
 * Ring-buffer reading, separated from mmap so that it can be tested on a
 * plain buffer. `base` is the data area (size a power of two), head and
 * tail are the kernel's data_head (loaded with acquire by the caller) and
 * the reader's data_tail. Copies the record starting at *tail into `scratch`
 * when it wraps the end of the buffer, otherwise points into the buffer.
 * Returns 1 with *rec and *len set and *tail advanced, 0 when tail == head,
 * -EINVAL on a corrupt header (size 0, or running past head).
 */
int ring_next(const uint8_t *base, size_t size, uint64_t head, uint64_t *tail, uint8_t *scratch,
	      size_t scratch_size, const void **rec, size_t *len);

/* ---- opening events and draining --------------------------------------- */

enum callgraph_mode {
	CALLGRAPH_FP = 0, /* kernel callchain (frame pointers in user space) */
	CALLGRAPH_DWARF, /* kernel callchain for kernel frames + user regs and stack copy */
};

/* Samples per second when opts.freq is 0; record's -F default too. */
#define SAMPLER_DEFAULT_FREQ 999

/*
 * Bytes of user stack copied per DWARF-mode sample when opts.stack_size is 0.
 * The one place that sets the default (record's --call-graph dwarf too).
 */
#define SAMPLER_DEFAULT_STACK_SIZE 32768
#define SAMPLER_MAX_STACK_SIZE 65528 /* the kernel's limit: a record's size is a u16 */
/*
 * Page faults per page-fault sample (record's default): 256 KiB of first
 * touches. A two-rank DDP job faults about 141,000 times: 2,200 samples.
 */
#define SAMPLER_FAULT_PERIOD 64

struct sampler_opts {
	uint64_t freq; /* samples per second; 0: SAMPLER_DEFAULT_FREQ */
	uint32_t mmap_pages; /* data pages per ring buffer, power of two; 0 = default */
	enum callgraph_mode callgraph;
	uint32_t
		stack_size; /* DWARF: user stack bytes per sample, multiple of 8, <= 65528; 0: default */
	bool exclude_kernel; /* set by the sampler itself if paranoid forbids kernel */
	bool offcpu; /* also open context-switches (period 1, callchains) + context_switch */
	bool offcpu_only; /* with offcpu: no on-CPU sampling event at all */
	/*
	 * Entry and return uprobes (the uprobe PMU) on a function of a file:
	 * its path and the file offset where it starts. Launch mode; each
	 * entry sample has registers and a small stack copy (DWARF mode).
	 */
	const struct sampler_probe *probes;
	size_t nr_probes;
	/* DWARF: the stack bytes copied at each probe entry, multiple of 8; 0: 8 KiB */
	uint32_t probe_stack_size;
	/*
	 * MiB of records the sampler may hold for the recording's thread when
	 * it falls behind (SAMPLER_MIN_BUFFER_MB at least); 0: 1 GiB or an
	 * eighth of the memory. Past three quarters, samples' stack copies are
	 * dropped (stats.stacks_dropped); past all of it, the kernel loses
	 * records.
	 */
	uint32_t buffer_mb;
	/*
	 * Called with each MMAP2 record of the recorded processes as soon as
	 * it is read from its ring, before records are put in time order (so
	 * tens of milliseconds earlier than its delivery), on the thread that
	 * polls: it may call sampler__add_probe, to probe a library loaded
	 * during the recording. NULL: none. Probes' samples are kept for the
	 * recorded processes only once either probes or this is set.
	 */
	void (*on_map)(void *ctx, const struct rec *r);
	void *on_map_ctx;
	/* page faults with stacks (launch mode): a sample every fault_period faults; 0: none */
	uint64_t fault_period;
	/*
	 * A BPF program (pybpf/'s) to run at each on-CPU and context-switch
	 * sample (PERF_EVENT_IOC_SET_BPF on those events): bpf_fd is its fd.
	 */
	bool bpf;
	int bpf_fd;
	/*
	 * Its twin for probes' entries (a uprobe's program type): linked to
	 * each entry uprobe's event, with that event's CPU as cookie, when
	 * bpf_probes is.
	 */
	bool bpf_probes;
	int bpf_probe_fd;
};

struct sampler_probe {
	const char *path;
	uint64_t offset;
};

struct sampler_stats {
	uint64_t records;
	uint64_t samples;
	uint64_t lost; /* from PERF_RECORD_LOST */
	/*
	 * The same by the event the LOST record names (the one that wrote
	 * next into the full ring: which stream was losing, roughly), and
	 * those whose id is no event of ours.
	 */
	uint64_t lost_by_event[2], lost_other;
	int probe_err; /* probes were asked for and could not be opened: why (negative errno) */
	uint64_t bad_records; /* malformed records skipped */
	bool kernel_excluded; /* kernel frames were not allowed and were dropped */
	const char *event; /* "cpu-clock" or "cycles" */
	uint64_t threads_followed; /* attach mode: threads with events open */
	uint64_t threads_missed; /* attach mode: threads that could not be followed (fd limit) */
	uint64_t start_time; /* attach mode: CLOCK_MONOTONIC ns before the first event opened */
	uint64_t bpf_attached; /* events opts.bpf_fd was attached to */
	/*
	 * Samples kept without their stack copies: the recording's thread was
	 * so far behind that the spills were three quarters of their budget
	 * (records are lost only past all of it).
	 */
	uint64_t stacks_dropped;
	/* Samples whose stack copy was cut where their thread's stack ends (sampler__stack_top) */
	uint64_t stacks_cut, stack_bytes_cut;
	/*
	 * Rounds that held back less than usual: the records waiting to be
	 * sorted had grown past the rings' size (a burst, a slow callback).
	 */
	uint64_t short_rounds;
	int bpf_err; /* the first refusal to attach it (negative errno), 0 if none */
	/* the same for bpf_probe_fd on probes' entry events: their frames are then read */
	int bpf_probe_err;
};

struct sampler;

/*
 * How far behind the records handed out are the ones copied from the
 * rings: the spills' share of their budget, in eighths (0 to 8). Past six,
 * samples lose their stack copies; at eight, records are lost.
 */
unsigned sampler__backlog(const struct sampler *s);

#define SAMPLER_MIN_BUFFER_MB 8

/*
 * Launch mode: fork argv[0] (searched in PATH) with `envp` as its
 * environment, stopped before exec until sampler__start(). Events are
 * opened on the child with inherit and enable_on_exec, one per CPU, so that
 * every thread and child process it creates is followed and dlflame itself
 * is never sampled. Returns 0 and sets *child, or a negative errno
 * (-ENOENT if the command is not found: that is checked before forking).
 */
struct sampler *sampler__new(const struct sampler_opts *opts);
/*
 * Accepts NULL. A child that was launched but never started (it has not run
 * the user's command yet) is killed and reaped; a started one is left alone.
 */
void sampler__free(struct sampler *s);
int sampler__launch(struct sampler *s, char *const argv[], char *const envp[], pid_t *child);
/*
 * One more probe once the events are open (from opts.on_map): entry and
 * return uprobes like opts.probes', armed on every CPU at once. Its index
 * (its samples' event is EV_PROBE_ENTRY(index) or EV_PROBE_RETURN(index)),
 * -ENOSPC past SAMPLER_MAX_PROBES in all, stats.probe_err when the probes
 * could not be opened at all, or another negative errno (nothing opened).
 */
int sampler__add_probe(struct sampler *s, const struct sampler_probe *p);
/* Let the launched child exec. */
int sampler__start(struct sampler *s);

/*
 * Attach mode: follow every thread of each pid in pids (or, with
 * threads_only, exactly the tids given), including threads created during
 * the recording, with no race window: threads are enumerated from
 * /proc/PID/task until a rescan finds none new, and events use inherit so
 * that threads a followed thread creates are followed too. The target is
 * never stopped or signalled. Raises the soft RLIMIT_NOFILE as needed; what
 * still cannot be followed is counted in stats.threads_missed. Events are
 * enabled when it returns. -ESRCH if a pid does not exist.
 */
int sampler__attach(struct sampler *s, const pid_t *pids, size_t n, bool threads_only);
/*
 * Attach mode: a thread sampler__attach found, as /proc showed it right
 * after the events were opened. None of these reads stops the thread.
 */
#define SAMPLER_COMM_LEN 64
#define SAMPLER_WCHAN_LEN 128
struct sampler_thread {
	pid_t pid, tid;
	bool followed; /* its events are open (false: out of fds, counted in threads_missed) */
	bool blocked; /* asleep: state S or D in /proc/PID/task/TID/stat */
	uint64_t pc; /* blocked in a syscall: its user PC, from .../syscall; else 0 */
	char comm[SAMPLER_COMM_LEN]; /* its name, from .../comm */
	char wchan[SAMPLER_WCHAN_LEN]; /* blocked: what it waits on, from .../wchan; else "" */
};
/*
 * Attach mode: the threads sampler__attach found that still existed when
 * it read them, in the order found, and sets *n; NULL and 0 without an
 * attach. Valid until sampler__free.
 */
const struct sampler_thread *sampler__threads(const struct sampler *s, size_t *n);
/*
 * Cgroup mode: every process in the cgroup v2 directory cgfd (an open fd of
 * it) and below, those that start later included: per-CPU events filtered
 * by the cgroup (PERF_FLAG_PID_CGROUP), side-band records of its processes
 * only. The processes already there have no MMAP2 records: the caller reads
 * their /proc maps. Events are enabled when it returns. -ENOTDIR when cgfd
 * is not a cgroup v2 directory (sampler__cgroup_check says so beforehand).
 */
int sampler__cgroup(struct sampler *s, int cgfd);
int sampler__cgroup_check(int fd);
/* Attach mode: true once every attached process has exited. */
bool sampler__targets_gone(struct sampler *s);
/* Attach mode: sampler__attach opened events on this thread (not: missed, gone, or created later). */
bool sampler__follows(const struct sampler *s, pid_t tid);

/*
 * Wait up to timeout_ms for data, then drain every ring buffer, sort the
 * records of this round by time and hand each to cb. A non-zero return
 * from cb stops the round and is returned. Returns 0 or a negative errno.
 * EINTR from poll is not an error (returns 0).
 */
typedef int (*rec_cb)(void *ctx, const struct rec *r);
int sampler__poll(struct sampler *s, int timeout_ms, rec_cb cb, void *ctx);
/* Drain whatever is left, without waiting. */
int sampler__drain(struct sampler *s, rec_cb cb, void *ctx);

/*
 * A callback for each sample as soon as the kernel has written it, long
 * before the hold-back that orders records by time delivers it (what the
 * sample points into is valid during the call): for what must be read
 * from the target while it is still as the sample saw it. It is called
 * from a thread of the sampler's own, started by the first sampler__poll
 * and stopped by sampler__drain or sampler__free: cb must not race with
 * the record callback. In attach mode a record may come twice here (see
 * deliverable()). Set it before the first poll. cb returns how soon it
 * wants the next samples: EARLY_FAST, the rings are looked at every
 * EARLY_FAST_US microseconds; EARLY_SOON, every EARLY_SLOW_MS milliseconds
 * (what it reads is there for a while, not for long: code objects of
 * modules being imported); EARLY_IDLE, as the drain thread copies records
 * (DRAIN_IDLE_MS below). Until the first call, EARLY_FAST. (The
 * rings are emptied by another thread of the sampler's, which no callback
 * holds up.) Samples carry their event: a probe's entry or return (whose
 * stack is not kept) may be any process's, system-wide, not only the
 * recorded ones'.
 */
#define EARLY_FAST_US 100
#define EARLY_SLOW_MS 10
/*
 * Without a fast early callback the sampler's threads wait for the rings'
 * wakeup (a quarter full) and look at them at least every DRAIN_IDLE_MS
 * (EARLY_SLOW_MS with sampler_opts.on_map: a probe for a library just
 * mapped is added that soon).
 */
#define DRAIN_IDLE_MS 100
enum early_want { EARLY_IDLE, EARLY_SOON, EARLY_FAST };
typedef enum early_want (*rec_early_cb)(void *ctx, const struct rec *r);
void sampler__set_early(struct sampler *s, rec_early_cb cb, void *ctx);

const struct sampler_stats *sampler__stats(const struct sampler *s);

/*
 * Where thread tid's stack ends for its walks: the highest address the
 * walk of a whole stack of it needed (its outermost frame's SP, which stays
 * put for the thread's life). The kernel copies stack_size bytes at each
 * sample, mostly the environment and other threads' memory above the
 * stack's end; the sampler keeps a sample's copy only up to top plus
 * SAMPLER_TOP_MARGIN when its SP is below top (stats.stacks_cut), and says
 * so (rec_sample.stack_cut). Raising it takes effect at once; 0 forgets
 * it (a walk of a cut copy ran out: the thread's stack ends higher now).
 * Any thread may call it, while the sampler's threads copy.
 */
void sampler__stack_top(struct sampler *s, uint32_t tid, uint64_t top);
#define SAMPLER_TOP_MARGIN 512

/*
 * Explain an error from sampler__new/launch in one line for the user:
 * what failed, why, and what to do (mentions the current
 * kernel.perf_event_paranoid value, RLIMIT_MEMLOCK, etc). Writes into buf.
 */
const char *sampler__open_strerror(int err, char *buf, size_t size);
/*
 * The same for errors from sampler__attach: ESRCH (no such process or
 * thread), EPERM (perf_event_paranoid, or not allowed to trace the target:
 * another user's process, kernel.yama.ptrace_scope), EMFILE (no thread
 * could be followed within the open-file limit); others as above.
 */
const char *sampler__attach_strerror(int err, char *buf, size_t size);

#endif
