/* SPDX-License-Identifier: MIT */
/*
 * Per-process address spaces built from MMAP2/COMM/FORK/EXIT records (and
 * /proc/PID/maps as a fallback), and naming of addresses: ELF .symtab and
 * .dynsym through libelf for user space, /proc/kallsyms for the kernel.
 *
 * Library code: returns negative errno, never prints.
 */
#ifndef DLFLAME_SYMBOLIZE_H
#define DLFLAME_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile/profile.h" /* enum frame_kind only */

struct symbolizer;

struct symbolizer *symbolizer__new(void);
void symbolizer__free(struct symbolizer *s); /* accepts NULL */

/*
 * Load kernel symbols from a kallsyms file (normally "/proc/kallsyms").
 * Returns 0, or -EPERM when every address reads as zero (kptr_restrict),
 * or another negative errno. Kernel frames are then named "[kernel]".
 */
int symbolizer__load_kallsyms(struct symbolizer *s, const char *path);

/* Address-space events, in time order. */
int symbolizer__mmap(struct symbolizer *s, uint32_t pid, uint64_t addr, uint64_t len,
		     uint64_t pgoff, uint32_t prot, const char *filename);
/* exec == true: the process replaced its image; its old mappings are dropped. */
int symbolizer__comm(struct symbolizer *s, uint32_t pid, uint32_t tid, bool exec);
/* A new process (pid != ppid) starts with a copy of its parent's mappings. */
int symbolizer__fork(struct symbolizer *s, uint32_t pid, uint32_t ppid);
/* The process is gone (tid == pid): forget it. */
int symbolizer__exit(struct symbolizer *s, uint32_t pid, uint32_t tid);

/*
 * What one address resolved to. `name` and `module` stay valid for the
 * life of the symbolizer (they are interned by it) or until the next
 * call with the same `out` when they point into out->buf.
 */
struct sym_frame {
	const char *name;   /* function name, or "[module+0xoff]" when unknown */
	const char *module; /* basename of the module, "[kernel.kallsyms]", or "" */
	enum frame_kind kind;
	char buf[128];
};

/*
 * Name `addr` in process `pid`. `kernel` says the address came from the
 * kernel part of a callchain. `return_addr` says it is a return address
 * (every non-leaf frame): it is then looked up at addr - 1 so that a call at
 * the very end of a function is attributed to that function.
 * Never fails for a well-formed call: unknown addresses get an honest name
 * ("[unknown]" when no mapping contains them, "[module+0xoff]" when the
 * module has no symbol covering them). A symbol of size zero names only
 * its own address; a symbol never names an address beyond its size.
 */
void symbolizer__resolve(struct symbolizer *s, uint32_t pid, uint64_t addr, bool kernel,
			 bool return_addr, struct sym_frame *out);

/*
 * Like symbolizer__resolve, but an address inside inlined code yields one
 * frame per inline level: out[0] is the innermost inlined function, out[n-1]
 * the function it was inlined into (the same leaf-first order as a
 * callchain). Inlined levels have kind FRAME_INLINED. Returns n (1..max).
 */
size_t symbolizer__resolve_inline(struct symbolizer *s, uint32_t pid, uint64_t addr, bool kernel,
				  bool return_addr, struct sym_frame *out, size_t max);

/*
 * Read the current mappings of a live process from /proc/PID/maps (attach
 * mode: what existed before the recording started). 0 or negative errno.
 */
int symbolizer__load_proc_maps(struct symbolizer *s, uint32_t pid);

/* ---- DWARF unwinding of copied user stacks ------------------------------ */

/* Why an unwind stopped. */
enum unwind_end {
	UNWIND_END_ROOT = 0,      /* reached the outermost frame (_start, thread start) */
	UNWIND_END_TRUNCATED,     /* stack copy exhausted, unwind error or depth limit */
	UNWIND_END_JIT_NO_CALLER, /* stopped in JIT code whose caller was not recovered */
};

/*
 * Unwind a user stack from the registers and stack copy of one sample
 * (indexes as enum perf_event_x86_regs; regs_mask says which are valid).
 * Writes up to max instruction addresses to ips, leaf first (ips[0] is the
 * sampled IP; the rest are return addresses), and the reason it stopped to
 * *end. Unwind tables come from each module's .eh_frame_hdr/.eh_frame (and
 * .debug_frame), cached per module; JIT frames (perf-map ranges or
 * anonymous executable mappings) get their caller recovered as described
 * in shared/notes/onednn-jit.md. Never reads outside the copy. Returns the
 * number of addresses (>= 0) or a negative errno.
 */
int symbolizer__unwind(struct symbolizer *s, uint32_t pid, const uint64_t *regs,
		       uint64_t regs_mask, const uint8_t *stack, size_t stack_size, uint64_t *ips,
		       size_t max, enum unwind_end *end);

/*
 * JIT symbols: perf-map files (/tmp/perf-PID.map, read through
 * /proc/PID/root while the process lives). The symbolizer reads a process's
 * map the first time it resolves an address in an anonymous executable
 * mapping and again (rate-limited) when an address is not covered, and
 * keeps what it read after the file or the process is gone. Files that are
 * not regular, not owned by the target's user or root, writable by others,
 * or larger than a cap are ignored and counted. Frames named from it have
 * kind FRAME_JIT.
 */
struct perfmap_stats {
	uint64_t reads;
	uint64_t entries;
	uint64_t malformed_lines;
	uint64_t rejected_files; /* unsafe owner/mode/type/size */
};

struct symbolizer_stats {
	uint64_t modules_loaded;
	uint64_t modules_failed; /* files that could not be opened or parsed */
	uint64_t proc_maps_fallbacks;
	struct perfmap_stats perfmap;
	uint64_t unwinds, unwind_errors;
	uint64_t jit_callers_recovered, jit_callers_missed;
};
const struct symbolizer_stats *symbolizer__stats(const struct symbolizer *s);

#endif
