/* SPDX-License-Identifier: MIT */
/*
 * Per-process address spaces built from MMAP2/COMM/FORK/EXIT records (and
 * /proc/PID/maps as a fallback), and naming of addresses: ELF symbols,
 * separate debug files, DWARF inline scopes and lines through libdwfl, C++
 * and Rust demangling, CFI ranges for code without symbols, for user space;
 * /proc/kallsyms for the kernel; perf-map JIT symbols; and DWARF unwinding
 * of copied user stacks, JIT callers included.
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
/*
 * The same, read by a thread of its own while the caller goes on (the
 * kernel formats /proc/kallsyms slowly: about 60 ms). Naming a kernel
 * address waits for it. 0 or -ENOMEM; symbolizer__kallsyms_result() waits
 * and returns what symbolizer__load_kallsyms would have.
 */
int symbolizer__load_kallsyms_async(struct symbolizer *s, const char *path);
int symbolizer__kallsyms_result(struct symbolizer *s);

/*
 * Where separate debug files are looked for: a colon-separated list of
 * absolute directories, each searched as DIR/.build-id/xx/rest.debug and
 * DIR/<directory of the file>/<debuglink name> (the file's own directory and
 * its .debug/ subdirectory are always searched for the debuglink name).
 * The default is "/usr/lib/debug", or $DLFLAME_DEBUG_DIRS when set at
 * symbolizer__new(). Applies to modules loaded afterwards. 0, -EINVAL for
 * a relative directory, -ENOMEM.
 */
int symbolizer__set_debug_dirs(struct symbolizer *s, const char *dirs);

/*
 * Demangled C++ names keep their parameter list ("ns::f(int)") unless
 * params is false ("ns::f"). Call before resolving: names already handed
 * out keep the form they were made in.
 */
void symbolizer__set_demangle_params(struct symbolizer *s, bool params);

/* Inline frames and source lines from DWARF; on by default. */
void symbolizer__set_inline(struct symbolizer *s, bool on);

/*
 * How many module files the symbolizer keeps open (pinned fds plus
 * libdwfl's handles); default 128. Over the cap the least recently used
 * module closes its files: its symbol table and the addresses already
 * resolved stay, but new addresses in it get no inline frames, source lines
 * or CFI-range names, and a module not yet loaded is read from its path
 * (so a deleted binary among them loses its names). Counted in
 * stats.modules_unpinned. A module with unwind tables keeps its file (the
 * unwinder reads through the pinned fd). An open module holds up to three
 * fds: the pin, libdwfl's copy and a separate debug file.
 */
void symbolizer__set_open_max(struct symbolizer *s, size_t max);

/* Address-space events, in time order. */
int symbolizer__mmap(struct symbolizer *s, uint32_t pid, uint64_t addr, uint64_t len,
		     uint64_t pgoff, uint32_t prot, const char *filename);

/* What an MMAP2 record says about the mapped file; zero fields are unknown. */
struct sym_file_id {
	uint32_t maj, min;
	uint64_t ino;
	uint8_t build_id_size; /* PERF_RECORD_MISC_MMAP_BUILD_ID */
	uint8_t build_id[20];
};

/*
 * symbolizer__mmap with the record's file identity (id may be NULL). The
 * file of an executable mapping is opened at once (through
 * /proc/PID/map_files while the process lives, else /proc/PID/root/PATH,
 * else PATH) and kept open, so that it still symbolizes after it is deleted
 * or replaced; a path whose file changed (another build-id, else another
 * inode) becomes a new module.
 */
int symbolizer__mmap_id(struct symbolizer *s, uint32_t pid, uint64_t addr, uint64_t len,
			uint64_t pgoff, uint32_t prot, const char *filename,
			const struct sym_file_id *id);
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
	/*
	 * Function name (demangled); "module+0xSTART" for code that no symbol
	 * covers, named after the start of its CFI range (FDE), so that the
	 * samples of one function share a frame; "[module+0xoff]" for an address
	 * that not even CFI covers.
	 */
	const char *name;
	const char *module; /* basename of the module, "[kernel.kallsyms]", or "" */
	const char *file; /* source file from DWARF, or NULL */
	unsigned line; /* its line, 0 when file is NULL */
	const char *build_id; /* lower-case hex build-id of the module, or NULL */
	enum frame_kind kind;
	char buf[128];
};

/*
 * Name `addr` in process `pid`. `kernel` says the address came from the
 * kernel part of a callchain. `return_addr` says it is a return address
 * (every non-leaf frame): it is then looked up at addr - 1 so that a call at
 * the very end of a function is attributed to that function.
 * Never fails for a well-formed call: unknown addresses get an honest name
 * ("[unknown]" when no mapping contains them, "module+0xSTART" after the CFI
 * range that contains them when no symbol covers them, "[module+0xoff]" when
 * nothing does). A symbol of size zero names only its own address; a symbol
 * never names an address beyond its size. This is the function itself: see
 * symbolizer__resolve_inline for inline levels. Results are cached per
 * module and address for the life of the symbolizer.
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
 * Naming later. A user address in a file mapping is located as (module,
 * file offset), which names the same code for the life of the symbolizer
 * whatever the process maps or unmaps afterwards, and a kernel address as
 * itself (SYM_LOC_KERNEL); symbolizer__resolve_loc then names it as
 * symbolizer__resolve_inline would have (inline levels first). So a
 * recorder can leave the costly part, reading kallsyms, symbol tables and
 * DWARF, until the target is done. symbolizer__locate returns false for
 * anything else (JIT and perf-map code, vdso, unknown): name those now.
 * kernel and return_addr as for symbolizer__resolve.
 */
#define SYM_LOC_KERNEL UINT32_MAX
struct sym_loc {
	uint32_t module;
	uint64_t offset;
};
bool symbolizer__locate(struct symbolizer *s, uint32_t pid, uint64_t addr, bool kernel,
			bool return_addr, struct sym_loc *loc);
/*
 * A number that changes whenever any process's mappings may have (a
 * mapping added or cut, /proc read, fork, exec, exit), in every
 * symbolizer: while it stays the same, symbolizer__locate answers a
 * question it answered true to as before.
 */
uint64_t symbolizer__maps_gen(void);
size_t symbolizer__resolve_loc(struct symbolizer *s, const struct sym_loc *loc,
			       struct sym_frame *out, size_t max);

/*
 * The file and build-id (hex, NULL if unknown) a sym_loc's module names, so
 * that a location can be kept outside this symbolizer (the journal).
 */
bool symbolizer__module_identity(const struct symbolizer *s, uint32_t index, const char **path,
				 const char **build_id_hex);
/*
 * A module for the file at path, for locations kept outside a recording's
 * symbolizer: its index (the sym_loc's module), -ESTALE when the file's
 * build-id is not build_id_hex (it was replaced), or a negative errno.
 */
int symbolizer__module_of_file(struct symbolizer *s, const char *path, const char *build_id_hex);

/* ---- functions of a file, for probes ---------------------------------------- */

#define SYM_NEAR_MAX 4
/* Names like the one asked for, when it is not there. */
struct sym_near {
	size_t n;
	char names[SYM_NEAR_MAX][128];
};
/*
 * Where function `name` starts in the ELF file at path, as a file offset
 * (.symtab, else .dynsym). -ENOENT when it has none (near, if not NULL:
 * names like it), -ENOEXEC when it is no ELF file, or a negative errno.
 */
int symbolizer__function_offset(const char *path, const char *name, uint64_t *offset,
				struct sym_near *near);
/*
 * Whether a recorded process mapped the file at path during the recording
 * (or, attached, had it mapped when the recording began): a module of that
 * path, or of the same file under another name (device and inode).
 */
bool symbolizer__file_mapped(const struct symbolizer *s, const char *path);
/*
 * Framework operators' schemas in the ELF file at path (PyTorch's
 * libtorch_cpu registers each as "[aten::]NAME[.OVERLOAD](ARGS) -> RETURNS",
 * a string of its .rodata): fn gets each NAME[.OVERLOAD] (not
 * NUL-terminated), possibly more than once; its non-zero return stops the
 * scan and is returned. -ESTALE when build_id_hex (may be NULL) is not the
 * file's, -ENOENT without .rodata, -ENOEXEC, or a negative errno.
 */
typedef int (*symbolizer_schema_fn)(void *ctx, const char *name, size_t len);
int symbolizer__op_schemas(const char *path, const char *build_id_hex, symbolizer_schema_fn fn,
			   void *ctx);
/*
 * Each function of the ELF file at path whose symbol (mangled, as the
 * file holds it) starts with prefix: fn gets its name and file offset (a
 * name may come twice, from .symtab and .dynsym); its non-zero return
 * stops the walk and is returned. 0, -ENOEXEC or a negative errno.
 */
typedef int (*symbolizer_func_fn)(void *ctx, const char *name, uint64_t offset);
int symbolizer__functions_prefixed(const char *path, const char *prefix, symbolizer_func_fn fn,
				   void *ctx);
/* Each DT_NEEDED library name of the ELF file at path; fn's non-zero return stops it. */
typedef int (*symbolizer_needed_fn)(void *ctx, const char *lib);
int symbolizer__needed(const char *path, symbolizer_needed_fn fn, void *ctx);

/*
 * Read the current mappings of a live process from /proc/PID/maps (attach
 * mode: what existed before the recording started). 0 or negative errno.
 */
int symbolizer__load_proc_maps(struct symbolizer *s, uint32_t pid);

/*
 * While a process runs: read its perf map if it grew, and the first bytes
 * of each JIT kernel it names since the last call (their preambles, for
 * unwinding; see docs/onednn-jit.md), while the process is there to be
 * read. Unwinding runs behind the samples; a recorder calls this often.
 * 0, or -ESRCH for a pid it does not know.
 */
int symbolizer__jit_refresh(struct symbolizer *s, uint32_t pid);

/* ---- DWARF unwinding of copied user stacks ------------------------------ */

/* Why an unwind stopped. */
enum unwind_end {
	/*
	 * reached a thread's entry: the outermost frame's CFI marks its return
	 * address undefined (_start, clone3), or it is the ELF entry of the
	 * executable or its interpreter
	 */
	UNWIND_END_ROOT = 0,
	UNWIND_END_COPY, /* the next frame lies beyond the stack copy */
	UNWIND_END_ERROR, /* an unwind error, no CFI, or an implausible frame */
	UNWIND_END_DEPTH, /* no room for more frames (max) */
	UNWIND_END_JIT_NO_CALLER, /* stopped in JIT code whose caller was not recovered */
	/* CFI found no caller (a zero return address) at a frame that is no thread's entry */
	UNWIND_END_NOT_ENTRY,
	/* reached an entry through JIT code whose preamble could not be read: a guess */
	UNWIND_END_JIT_GUESSED,
};

/*
 * Unwind a user stack from the registers and stack copy of one sample
 * (indexes as enum perf_event_x86_regs; regs_mask says which are valid).
 * Writes up to max instruction addresses to ips, leaf first (ips[0] is the
 * sampled IP; the rest are return addresses), and the reason it stopped to
 * *end. Unwind tables come from each module's .eh_frame_hdr/.eh_frame (and
 * .debug_frame), cached per module; JIT frames (perf-map ranges or
 * anonymous executable mappings) get their caller recovered as described
 * in docs/onednn-jit.md. Never reads outside the copy. Returns the
 * number of addresses (>= 0) or a negative errno.
 */
int symbolizer__unwind(struct symbolizer *s, uint32_t pid, const uint64_t *regs, uint64_t regs_mask,
		       const uint8_t *stack, size_t stack_size, uint64_t *ips, size_t max,
		       enum unwind_end *end);

/*
 * The same, and also each frame's stack pointer to sps (max entries): the
 * sampled SP for frame 0, for frame i > 0 the caller's SP once frame i - 1
 * returned, which is frame i - 1's CFA. Frames of a JIT caller grafted from
 * an earlier stack of the thread carry that stack's values.
 */
int symbolizer__unwind_sps(struct symbolizer *s, uint32_t pid, const uint64_t *regs,
			   uint64_t regs_mask, const uint8_t *stack, size_t stack_size,
			   uint64_t *ips, uint64_t *sps, size_t max, enum unwind_end *end);

/*
 * The same for a copy that may have been cut where the thread's stack was
 * known to end (cut; sampler__stack_top): a walk that runs off its end then
 * ends there (UNWIND_END_COPY), with nothing inferred beyond it. *reach:
 * for a walk that reached the thread's entry within the copy, the end of
 * the highest word of the copy it read (where this thread's stack ends for
 * its walks); else 0.
 */
int symbolizer__unwind_copy(struct symbolizer *s, uint32_t pid, const uint64_t *regs,
			    uint64_t regs_mask, const uint8_t *stack, size_t stack_size, bool cut,
			    uint64_t *ips, uint64_t *sps, size_t max, enum unwind_end *end,
			    uint64_t *reach);

/*
 * Whether the return address ra is in the outermost frame of a thread: the
 * CFI that covers ra - 1 marks the return address undefined, as glibc's
 * _start and clone3 do. A frame-pointer chain that ends there is whole.
 */
bool symbolizer__outermost(struct symbolizer *s, uint32_t pid, uint64_t ra);

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
	uint64_t stale_files; /* written before its process started: another's with the pid */
};

struct symbolizer_stats {
	uint64_t modules_loaded;
	uint64_t modules_failed; /* files that could not be opened or parsed */
	uint64_t modules_pinned; /* files opened at their first executable mapping */
	uint64_t modules_unpinned; /* not pinned or closed early: over the open-file cap */
	uint64_t modules_replaced; /* a path that was mapped again with another file */
	uint64_t debug_files; /* modules named from a separate debug file */
	uint64_t proc_maps_fallbacks;
	struct perfmap_stats perfmap;
	uint64_t unwinds, unwind_errors;
	uint64_t jit_callers_recovered, jit_callers_missed;
	/* JIT kernels whose preamble was decoded from their code / could not be read */
	uint64_t jit_preambles_read, jit_preambles_unread;
	uint64_t outer_grafts; /* walks past the copy's end completed from known stacks */
	/* libunwind's lookups of a procedure's CFI, and those answered from what it found before */
	uint64_t proc_infos, proc_infos_remembered;
};
const struct symbolizer_stats *symbolizer__stats(const struct symbolizer *s);

#endif
