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

struct symbolizer_stats {
	uint64_t modules_loaded;
	uint64_t modules_failed; /* files that could not be opened or parsed */
	uint64_t proc_maps_fallbacks;
};
const struct symbolizer_stats *symbolizer__stats(const struct symbolizer *s);

#endif
