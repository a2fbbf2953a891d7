/* SPDX-License-Identifier: MIT */
/*
 * pybpf/: a thread's CPython frames taken in the kernel at the sample.
 *
 * A BPF program (pyframes.bpf.c, built with clang when the build has it
 * and libbpf) is attached to the sampling perf events
 * (PERF_EVENT_IOC_SET_BPF, by the sampler: sampler_opts.bpf_fd). At each
 * sample of a process it was told about, it walks that process's
 * interpreter from _PyRuntime to the sampled thread's PyThreadState and
 * copies the thread's frame chain (frame address, code object, last
 * instruction, eval-call markers; at most PYBPF_MAX_FRAMES) into a ring
 * buffer, with the thread, the time (CLOCK_MONOTONIC, the samples' clock)
 * and the sampled ip, so that each record joins its sample. The sample is
 * still written. The program knows no CPython layout: each process's
 * offsets are python/'s (pyreader__walk), passed in a map.
 *
 * Nothing needs to be read after the sample: the frames are the ones the
 * thread had when it was interrupted. Names come later, from the code
 * objects (pyreader__describe reads and caches them).
 *
 * Library code: returns negative errno, never prints.
 */
#ifndef DLFLAME_PYBPF_H
#define DLFLAME_PYBPF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The initial PID namespace's inode number: the kernel gives the initial
 * namespaces fixed ones (PROC_PID_INIT_INO, include/linux/proc_ns.h, since
 * Linux 3.8). A PID namespace's own /proc shows no trace of the levels
 * above it (its NSpid lines hold one id), so this is how a recorder in a
 * container, or in a CI root of its own, knows it is nested.
 */
#define PYBPF_PID_NS_INIT_INO 0xEFFFFFFCu

#include "pybpf/wire.h"
#include "python/python.h"

struct pybpf;

/*
 * Load the program and its maps; ring_bytes: the ring buffer's size (a
 * power of two, at least a page; 0: 4 MiB). 0 and *out, or -EOPNOTSUPP
 * when dlflame was built without BPF (clang and libbpf-dev absent at build
 * time), -EPERM when the kernel refuses it (no CAP_BPF and CAP_PERFMON),
 * or another negative errno from the kernel (pybpf__last_error() has the
 * loader's last words then: the verifier's, say).
 */
int pybpf__open(struct pybpf **out, size_t ring_bytes);
void pybpf__free(struct pybpf *b); /* accepts NULL */
/* The last message libbpf gave while loading ("" if none). */
const char *pybpf__last_error(void);

/* The program's fd, for PERF_EVENT_IOC_SET_BPF on each sampling event. */
int pybpf__prog_fd(const struct pybpf *b);
/*
 * The same program for probes' entries (a uprobe's type), to link to each
 * entry uprobe's event with its CPU as cookie (BPF_LINK_CREATE);
 * -EOPNOTSUPP when the kernel refused it (the samples' program was loaded
 * without it).
 */
int pybpf__probe_prog_fd(const struct pybpf *b);
/* An fd that polls readable when records wait (epoll). */
int pybpf__poll_fd(const struct pybpf *b);

/*
 * Read pid's frames from now on, with its interpreter's layout (from
 * pyreader__walk after pyreader__probe found it). 0 or a negative errno
 * (-EINVAL for a layout the program cannot use: a frame read too large;
 * -EXDEV for a process in a PID namespace below the recorder's own, when
 * that is not the initial one).
 */
int pybpf__add(struct pybpf *b, pid_t pid, const struct py_walk *w);
/* Stop reading pid (it exited or exec'd). */
int pybpf__remove(struct pybpf *b, pid_t pid);

/* One sample's frames, as the program copied them. */
struct pybpf_sample {
	uint64_t time; /* CLOCK_MONOTONIC ns, taken in the program right after the sample's */
	uint64_t ip; /* the sampled instruction */
	uint64_t usp; /* the user stack pointer, when the sample interrupted user code; else 0 */
	uint64_t tstate; /* the thread's PyThreadState (0: none found) */
	uint64_t cframe; /* 3.11/3.12: tstate->cframe at the sample, else 0 */
	pid_t pid, tid;
	enum pybpf_status status; /* how the walk ended */
	bool probe; /* taken at a probe's entry, whose sample follows it; else at a sample */
	/*
	 * The chain, innermost first, as pyreader__snapshot gives it (stub
	 * frames included, code_ref 0: pyreader__describe names them).
	 */
	uint32_t n;
	struct py_frame frames[PYBPF_MAX_FRAMES];
};

/*
 * Hand every record waiting (waiting up to timeout_ms for the first; with
 * 0, no system call: the ring's pages are read) to cb, in the order
 * written; a non-zero return from cb stops and is returned. The sample is
 * valid during the call. Returns how many were handed, or a negative
 * errno. A malformed record is counted and skipped.
 */
typedef int (*pybpf_cb)(void *ctx, const struct pybpf_sample *s);
int pybpf__poll(struct pybpf *b, int timeout_ms, pybpf_cb cb, void *ctx);

struct pybpf_stats {
	uint64_t samples; /* samples of configured processes the program saw */
	uint64_t records; /* records it wrote */
	uint64_t dropped; /* records the ring buffer had no room for */
	uint64_t tstate_walks; /* thread lists walked (a thread state not cached) */
	uint64_t busy; /* probes' entries without a record: every slot of their CPU was taken */
	uint64_t received, bad; /* records handed by pybpf__poll; malformed ones skipped */
	uint64_t by_status[PYBPF_NO_NS + 1]; /* of those handed, how each walk ended */
	/*
	 * The program's runs and the time they took, as the kernel counts
	 * them while kernel.bpf_stats_enabled is 1 (0 otherwise): time spent
	 * on the sampled thread's CPU, at each sample.
	 */
	uint64_t runs, run_ns;
};
/* 0 and *out (the program's counters summed over CPUs), or a negative errno. */
int pybpf__stats(struct pybpf *b, struct pybpf_stats *out);

#endif
