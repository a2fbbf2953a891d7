/* SPDX-License-Identifier: MIT */
/*
 * Shared by the files of collect/ only. Who calls whom (no file calls one
 * that calls it back):
 *
 *   collect.c  records in, stats out   -> offcpu.c, stack.c, frames.c, threads.c
 *   offcpu.c   context switches        -> stack.c, frames.c, threads.c
 *   stack.c    one sample's stack      -> the stack sources, frames.c
 *   stack_fp.c, stack_dwarf.c          -> frames.c; stack_dwarf.c -> python.c
 *   python.c   Python frames for eval frames -> frames.c
 *   frames.c   frames, deferred naming (leaf)
 *   threads.c  tid -> comm, thread ids (leaf)
 */
#ifndef DLFLAME_COLLECT_INTERNAL_H
#define DLFLAME_COLLECT_INTERNAL_H

#include "collect.h"
#include <pthread.h>

#include "pybpf/pybpf.h"
#include "python/python.h"
#include "util/util.h"

#define COLLECT_MAX_DEPTH 1024 /* user frames unwound per sample */
#define COLLECT_MAX_INLINE 16 /* inline levels per address */

/* ---- frames.c: a sample's frames, and naming them later ---- */

/*
 * A stack interned lately, root first: the next sample of its thread
 * shares most of it from the root, and its stack ids are reused there
 * without a hash lookup (three cache misses a frame) each.
 */
#define FRAMES_MEMOS 4
struct memo_entry {
	uint32_t frame, stack; /* a frame id and the stack id it makes */
};

struct stack_memo {
	struct memo_entry *e; /* root first */
	size_t n, cap;
	uint64_t used; /* tick of the last use: the least recent goes first */
};

/*
 * An address's placeholder frame as deferred_frame last found it: used
 * again while the symbolizer's mappings stay as they were then (gen).
 */
#define FRAMES_ADDR_SLOTS 4096
struct addr_slot {
	uint64_t ip;
	uint64_t gen; /* symbolizer__maps_gen then; 0: empty */
	uint32_t pid;
	uint32_t how; /* kernel | return_addr << 1 */
	uint32_t id;
};

/*
 * Kernel addresses and addresses in module files are named once recording
 * is over, so that reading kallsyms, symbol tables and DWARF does not
 * compete with the target: until then each distinct location is a
 * placeholder frame of its own (a frame interning never returns), and
 * `placeholders` maps it to its location.
 */
struct frames {
	struct profile *prof;
	struct symbolizer *sym;
	struct py_stacks *py; /* Python frames, when enabled; else NULL */
	uint32_t *ids; /* scratch: frame ids of one sample, leaf first */
	size_t n, cap;
	struct u64map loc_frames; /* module << 40 | offset -> placeholder frame id */
	struct u64map kernel_frames; /* kernel address -> placeholder frame id */
	struct u64map placeholders; /* placeholder frame id -> index in locs */
	struct sym_loc *locs;
	size_t nr_locs, locs_cap;
	struct stack_memo memo[FRAMES_MEMOS];
	uint64_t memo_tick;
	struct addr_slot *addrs; /* FRAMES_ADDR_SLOTS, allocated at first use; NULL: none */
	/*
	 * Where each thread's stack ends for its walks (collector__on_stack_top):
	 * tid -> the highest reach of its whole walks, TOP_PAUSED set while a
	 * walk of a copy cut there ran out, until a whole walk of an uncut one.
	 */
	struct u64map tops;
	collect_stack_top_cb top_cb;
	void *top_ctx;
};
#define TOP_PAUSED (1ull << 63)

void frames_init(struct frames *fr, struct profile *prof, struct symbolizer *sym);
void frames_exit(struct frames *fr);
/* Start a new sample's frames. */
static inline void frames_reset(struct frames *fr)
{
	fr->n = 0;
}
int frames_push_id(struct frames *fr, int64_t id);
/* An address and its inline levels (leaf first), named now or after the recording. */
int frames_push_addr(struct frames *fr, uint32_t pid, uint64_t ip, bool kernel, bool return_addr);
/* A placeholder such as [truncated]. */
int frames_push_special(struct frames *fr, const char *name);
int frames_push_named(struct frames *fr, const struct sym_frame *sf);
/* For the journal: whether frame is a placeholder, and the location it stands for. */
bool frames_journal_loc(struct frames *fr, uint32_t frame, struct pf_journal_loc *out);
/* The frames pushed, root first, as a stack of the profile (0 for none). */
int64_t frames_stack(struct frames *fr);
/* Name every placeholder; 0 or a negative errno. */
int frames_name_deferred(struct frames *fr);

/* ---- python.c: Python frames in place of eval frames ---- */

#define PY_MAX_EVALS 64 /* eval calls per stack given Python frames */
#define PY_CHANGED_FRAME "[python frames changed before read]"
#define PY_UNREAD_FRAME "[python frames not read]"
/* a frame copied at the sample (pybpf/) whose code object was freed before it was named */
#define PY_FREED_FRAME "[python code freed before named]"

struct py_proc;
struct py_stacks {
	size_t queued; /* bytes of pybpf/'s records waiting in the queues */
	/*
	 * py_early runs on the sampler's early thread, the rest on the
	 * recording's: everything of it is used under this lock.
	 */
	pthread_mutex_t lock;
	struct pyreader *r;
	struct py_snapshot *scratch;
	struct u64map procs; /* pid -> index in procs_arr */
	struct py_proc *procs_arr;
	size_t nr_procs, procs_cap;
	struct u64map pending; /* hash of (tid, time) -> struct py_pending * */
	struct collect_python_stats *st; /* the collector's */
	/*
	 * Frames copied at the sample by pybpf/'s program (NULL: read after
	 * the sample): its records wait per thread, in the order written,
	 * until their samples are delivered.
	 */
	struct pybpf *bpf;
	/*
	 * The profile's frame of a code object (the reader's code_serial) at a
	 * line: a Python frame named once, not interned again at every sample.
	 */
	struct py_frame_slot {
		uint64_t serial;
		uint32_t line;
		uint32_t frame;
	} * frame_slots;
	/*
	 * A probe's sample came for a process whose frames the program
	 * copies: the program is on the sampling events only, so a probe's
	 * Python callers are still read after the entry, as soon as may be.
	 */
	bool probe_reads;
	/*
	 * Until then the early callback asks for samples every EARLY_SLOW_MS:
	 * a process was probed or a code object read lately (PY_SOON_NS),
	 * and more may come whose code objects live briefly (imports).
	 */
	uint64_t soon_until;
	struct u64map queues; /* tid -> index in queue_arr */
	struct py_queue *queue_arr;
	size_t nr_queues, queues_cap;
};

#define PY_RETS 16
/* A thread's records from the program, oldest first. */
struct py_queue {
	struct py_pending **items;
	size_t head, n, cap; /* items[head .. n) wait */
	uint64_t last_entry; /* the time of the thread's last probe entry sample taken */
	/*
	 * The times of the thread's latest probe returns, as the early
	 * callback saw them (ahead of delivery): a probe entry's frames read
	 * after one of them that followed the entry are not that call's.
	 */
	uint64_t rets[PY_RETS];
	unsigned nrets; /* written so far; rets[i % PY_RETS] */
};

int py_init(struct py_stacks **out, struct collect_python_stats *st);
/* Take the frames of processes found from now on from b's records (the caller keeps b). */
void py_use_bpf(struct py_stacks *py, struct pybpf *b);
void py_free(struct py_stacks *py);
/*
 * A sample just read from its ring: snapshot its thread's Python frames.
 * Not ours (a system-wide probe's): only a process already seen by its
 * own samples is read. True while some process runs a Python whose
 * frames are read.
 */
enum early_want py_early(struct py_stacks *py, const struct rec_sample *s, bool ours);
/* pid exec'd at time: what was probed of it before is void. */
void py_exec(struct py_stacks *py, uint32_t pid, uint64_t time);
/* Whether pid runs a Python whose frames are read. */
bool py_wants(struct py_stacks *py, uint32_t pid);
/*
 * Push s's unwound user frames ips[0..k) (SPs in sps, as
 * symbolizer__unwind_sps gives them), Python frames in place of each eval
 * frame; a stack whose groups could not all be shown no longer ends complete.
 */
int py_push(struct frames *fr, struct py_stacks *py, const struct rec_sample *s,
	    const uint64_t *ips, const uint64_t *sps, int k, enum stack_end *end);

/* ---- threads.c ---- */

struct threads {
	struct profile *prof;
	struct u64map comms; /* tid -> comm string id */
};

void threads_init(struct threads *t, struct profile *prof);
void threads_exit(struct threads *t);
int threads_set_comm(struct threads *t, uint32_t tid, const char *comm);
/* A new thread or process starts with its parent thread's name. */
int threads_fork(struct threads *t, uint32_t ptid, uint32_t tid);
/* The profile's thread id of (pid, tid), named after its comm or "[tid N]". */
int64_t threads_id(struct threads *t, uint32_t pid, uint32_t tid);

/* ---- stack.c and its sources ---- */

/*
 * A stack source builds the user part of a sample's stack (the kernel part
 * always comes from the kernel's callchain), leaf first, onto fr, and says
 * how it ended. It may leave the end to the builder's placeholder.
 */
struct stack_source {
	const char *name;
	/* Can it build s's user stack (does s carry what it needs)? */
	bool (*applies)(const struct rec_sample *s);
	/* 0 or a negative errno; *end is how the user part ended. */
	int (*push_user)(struct frames *fr, const struct rec_sample *s, uint32_t max_stack,
			 enum stack_end *end);
};

extern const struct stack_source stack_source_fp; /* the kernel's frame-pointer callchain */
extern const struct stack_source stack_source_dwarf; /* unwinding the copied user stack */

/*
 * The frames of one callchain context in s: kernel addresses (kernel) or
 * user ones. The first address of a context is where the thread was; the
 * rest are return addresses. *addrs counts every address of the chain,
 * *last_user the last user one (0: none).
 */
int push_callchain(struct frames *fr, const struct rec_sample *s, bool kernel, size_t *addrs,
		   uint64_t *last_user);

struct stack_builder {
	struct frames *fr;
	uint32_t max_stack; /* kernel.perf_event_max_stack: a chain this long was cut */
	uint64_t truncated;
};

/* s's stack in the profile, with how it ended; the id or a negative errno. */
int64_t build_stack(struct stack_builder *b, const struct rec_sample *s, enum stack_end *end);
/* A stack of one placeholder frame, for blocks whose real stack is not known. */
int64_t special_stack(struct frames *fr, const char *name);

/* ---- offcpu.c ---- */

/* Off-CPU state of one thread, between its switch-out and its switch-in. */
struct offcpu_thread {
	uint64_t out_time; /* when it left the CPU (valid while out) */
	uint32_t stack; /* where it blocked: the stack of its last context-switch sample */
	uint32_t thread; /* profile thread id */
	bool has_stack; /* a context-switch sample came since it last switched in */
	bool out; /* off the CPU now */
	bool preempt; /* ... because it was preempted (runnable, waiting for a CPU) */
	bool seen; /* a record of it arrived (or it was created while recording) */
	bool dead; /* it exited: later records of this tid are ignored */
	/* attach mode: what /proc said of it when the recording began */
	bool attached; /* it existed then */
	bool blocked_at_start; /* sleeping (S or D) */
	bool has_before_stack;
	uint32_t before_stack; /* BLOCKED_BEFORE_FRAME, its user PC and kernel wait channel */
};

struct offcpu {
	struct profile *prof;
	struct frames *fr;
	struct threads *th;
	struct stack_builder *sb;
	struct collect_stats *st;
	uint64_t start_time; /* attach: when the events were opened; 0 at launch */
	struct u64map idx; /* tid -> index in ot[] */
	struct offcpu_thread *ot;
	size_t nr_ot, ot_cap;
};

void offcpu_init(struct offcpu *o);
void offcpu_exit(struct offcpu *o);
/* A running thread was seen: it was not blocked before the attach. */
int offcpu_running(struct offcpu *o, uint32_t tid);
int offcpu_switch_sample(struct offcpu *o, const struct rec_sample *s);
int offcpu_switch(struct offcpu *o, const struct rec_switch *sw);
/* A thread created (exited false) or gone (exited true) while recording. */
int offcpu_task(struct offcpu *o, uint32_t tid, bool exited);
int offcpu_attached(struct offcpu *o, uint32_t pid, uint32_t tid, bool blocked, uint64_t pc,
		    const char *wchan);
/* Charge what is still open at end_time. */
int offcpu_finish(struct offcpu *o, uint64_t end_time);

/* ---- collect.c ---- */

/* calls.c: probed calls, paired entry to return. */
struct calls {
	struct profile *prof;
	struct stack_builder *sb;
	struct threads *th;
	struct collect_stats *st;
	struct u64map threads; /* tid -> struct call_stack * */
	/* pid -> where its uretprobe trampoline is ([uprobes]), 0 while not known */
	struct u64map tramps;
	uint8_t *copy; /* a sample's stack copy with its probed calls' return addresses put back */
	size_t copy_cap;
};
void calls_init(struct calls *cl);
void calls_exit(struct calls *cl);
int calls_entry(struct calls *cl, const struct rec_sample *s, uint32_t probe);
int calls_return(struct calls *cl, const struct rec_sample *s, uint32_t probe);
/*
 * A return probe puts its trampoline where its call's return address was:
 * a stack copy taken inside a probed call holds the trampoline there, and
 * no unwinder gets past it. When s's copy does, *out is s with a copy of
 * its own in which the return addresses the calls' entries saw are put
 * back, and true is returned (valid until the next call); else false.
 */
bool calls_put_back(struct calls *cl, const struct rec_sample *s, struct rec_sample *out);
void calls_thread_exit(struct calls *cl, uint32_t tid);
void calls_finish(struct calls *cl);

/* A sample kept to be unwound again (see collect.c): its copies of the record's arrays. */
struct deferred {
	struct rec_sample s;
	uint64_t *ips;
	uint8_t *stack;
	/* for the journal: the sample as it was unwound the first time it was asked for */
	struct pf_sample as_now;
	bool unwound;
};

struct collector {
	struct profile *prof;
	struct symbolizer *sym;
	struct frames fr;
	struct threads th;
	struct stack_builder sb;
	struct offcpu off;
	struct calls calls;
	struct deferred *deferred;
	size_t nr_deferred;
	size_t deferred_bytes; /* their copies of stacks and callchains */
	struct pf_sample *pending; /* the deferred ones' as_now, for the journal */
	struct collect_stats st;
	bool ranks; /* read ranks from processes' environments */
};

/* ranks.c: a process's rank from its environment; a forked one's from its parent */
int ranks_read(struct collector *c, uint32_t pid);
int ranks_fork(struct collector *c, uint32_t pid, uint32_t ppid);

#endif
