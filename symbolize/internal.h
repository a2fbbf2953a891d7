/* SPDX-License-Identifier: MIT */
/*
 * Shared between the files of symbolize/ only: the symbolizer's state and
 * what each file offers the others. The files call each other in layers,
 * never in a circle; a file calls only files in the layers below it:
 *
 *   symbolize.c  the symbolizer's life, settings, address-space events
 *   resolve.c    naming addresses         stackwalk.c  symbolizer__unwind
 *                                         jitcaller.c  oneDNN JIT callers
 *                                         unwind.c     CFI walk, libunwind
 *   procs.c      address spaces, /proc/PID/maps
 *   modules.c    mapped files, pinning
 *   dwsym.c      symbols, DWARF (libdwfl)   kallsyms.c   kernel symbols
 *   perfmap.c    perf-map JIT symbols
 *   strpool.c    strings, line reader       elf.c        ELF files, .eh_frame_hdr
 *   roots.c      the root directory each process sees (containers)
 *   demangle.c   C++/Rust names             insn.c       calls, JIT preambles
 *
 * symbolize.c: procs, modules, kallsyms, perfmap, unwind, jitcaller, strpool
 *   (it frees what the others hang on a process or module).
 * resolve.c: procs, modules, dwsym, kallsyms, perfmap, demangle, strpool.
 * stackwalk.c: jitcaller, unwind, procs.
 * jitcaller.c: unwind, procs, perfmap, insn.   unwind.c: procs, perfmap, elf, insn.
 * procs.c: modules, strpool, roots.      modules.c: dwsym, strpool, roots.
 * dwsym.c: elf, demangle, strpool, roots. kallsyms.c, perfmap.c: strpool.
 * unwind.c also modules (module_open_file).
 * funcs.c (functions and operator schemas of a file, for probes): elf.
 * strpool.c, elf.c, demangle.c, insn.c, roots.c, sigmask.c: nothing in symbolize/.
 * sigmask.c stands in for the C library's sigprocmask and pthread_sigmask
 * while unwind.c's thread is inside libunwind (unwind_quiet).
 *
 * unwind.h is the interface of unwind.c and jitcaller.c to stackwalk.c.
 */
#ifndef DLFLAME_SYMBOLIZE_INTERNAL_H
#define DLFLAME_SYMBOLIZE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * sigmask.c: set (non-zero) while this thread is inside libunwind, whose
 * lock's SIG_SETMASK calls are then answered without a system call.
 */
extern _Thread_local int unwind_quiet;

/*
 * Strings that live as long as the pool: chunks are never moved or freed
 * before strpool__free(), so returned pointers stay valid.
 */
struct strpool_slot {
	const char *s;
	uint32_t hash;
	uint32_t len;
};

struct strpool {
	char **chunks;
	size_t nchunks, chunks_cap;
	char *cur;
	size_t cur_left;
	struct strpool_slot *slots; /* dedup table for strpool__intern */
	size_t cap, len;
};

void strpool__init(struct strpool *p);
void strpool__free(struct strpool *p);
/* Copy s[0..len) plus a NUL; NULL on -ENOMEM. */
const char *strpool__add(struct strpool *p, const char *s, size_t len);
/* Like strpool__add, but equal strings share one copy. */
const char *strpool__intern(struct strpool *p, const char *s, size_t len);

/*
 * Read a text file line by line, bounded: fn() gets each line without its
 * newline, NUL-terminated, of at most max_line bytes (longer lines are
 * skipped and counted in *skipped); reading stops after max_bytes. Only
 * regular files are read (procfs files are regular), so a FIFO or a device
 * can neither hang nor flood the caller. fn() returns 0 or a negative errno
 * that stops the read and is returned.
 */
int read_lines(const char *path, size_t max_line, uint64_t max_bytes,
	       int (*fn)(void *ctx, char *line, size_t len), void *ctx, uint64_t *skipped);

/* Symbol names longer than this are cut: the name is still useful, and a
 * hostile file cannot make one name cost unbounded memory. */
#define SYM_NAME_MAX 1024
/* Demangled names are cut here (with "..."): a 165-byte mangled name can
 * demangle to megabytes. */
#define DEMANGLED_MAX 1024
/* GNU build-ids are 20 bytes (sha1) or 16 (md5, uuid); a note may say more. */
#define BUILD_ID_MAX 64

/*
 * Demangle a C++ (Itanium ABI) or Rust name into out[0..cap), NUL-terminated.
 * Returns the length, or 0 when `name` is not mangled or not valid (out is
 * then untouched). Input longer than SYM_NAME_MAX is not demangled; output
 * longer than cap - 1 is cut and ends in "...", and the demangler stops as
 * soon as it has produced that much, so time and memory stay bounded.
 * params false drops the parameter list (and the cv-qualifiers after it).
 */
size_t sym_demangle(const char *name, bool params, char *out, size_t cap);

/* ---- elf.c: ELF files read by hand (program headers, code, unwind tables) ---- */

/*
 * .eh_frame_hdr: version 1, then eh_frame_ptr and fde_count, then the
 * binary-search table (only the datarel sdata4 pairs every linker writes are
 * accepted), at table_off from the start. p[0..size) at vaddr. False when
 * malformed.
 */
struct eh_hdr {
	uint64_t eh_frame_ptr;
	uint64_t fde_count; /* as written: check it against the table's size */
	size_t table_off;
};
bool eh_hdr_parse(const uint8_t *p, size_t size, uint64_t vaddr, struct eh_hdr *out);
/*
 * Start of the FDE covering vaddr: a binary search of table (fde_count
 * pairs, relative to hdr_vaddr), then the FDE itself in eh[0..eh_size) at
 * eh_vaddr must agree with the table and cover vaddr.
 */
bool eh_fde_lookup(const uint8_t *table, size_t fde_count, uint64_t hdr_vaddr, const uint8_t *eh,
		   size_t eh_size, uint64_t eh_vaddr, uint64_t vaddr, uint64_t *start);

#define ELF_FILE_SEGS 16
#define ELF_TEXT_LINE 64
#define ELF_TEXT_LINES 1024 /* 64 KiB a module whose code is read, allocated then */
#define ELF_FDE_HINTS 1024 /* search-table entries remembered by code address, 64 bytes a slot */

/* Lines of a file's bytes, direct mapped by file offset. */
struct elf_text {
	uint64_t tag[ELF_TEXT_LINES]; /* line number + 1; 0: empty */
	uint8_t line[ELF_TEXT_LINES][ELF_TEXT_LINE];
};

/* One PT_LOAD of an elf_file. */
struct elf_seg {
	uint64_t off, filesz, vaddr;
	uint32_t flags;
};

/* Bytes copied out of the file: [vaddr, vaddr + len). */
struct elf_buf {
	uint8_t *data;
	uint64_t vaddr, len;
};

/*
 * An ELF file as the unwinder reads it: through an fd with pread (or from
 * memory, for the vDSO), its PT_LOADs, its entry point and its
 * .eh_frame_hdr search table. fde_count 0: no CFI.
 */
struct elf_file {
	int err; /* the owner's verdict: 0 usable */
	int fd; /* -1 for an image in our memory */
	bool own_fd; /* elf_file__free closes fd */
	const uint8_t *mem; /* the vDSO: the kernel maps the same image into every process */
	uint64_t mem_size;
	struct elf_seg segs[ELF_FILE_SEGS];
	size_t nsegs;
	uint64_t lo, hi; /* extent of the PT_LOADs (vaddr) */
	uint64_t entry; /* e_entry (vaddr), 0 for none */
	struct elf_buf hdr, eh; /* .eh_frame_hdr and .eh_frame */
	uint64_t hdr_vaddr, table_vaddr, fde_count;
	/* entry + 1 last found for code in each 64-byte slot; checked at every use */
	uint32_t fde_hint[ELF_FDE_HINTS];
	/* its code read so far, ELF_TEXT_LINES lines of it; NULL until then (or without memory) */
	struct elf_text *text;
};

/* A file with fd -1 and nothing read; set fd (and own_fd), then parse. NULL: -ENOMEM. */
struct elf_file *elf_file__new(void);
/* Read the headers and unwind tables of f->fd. 0 (also for a file without CFI) or -errno. */
int elf_file__parse(struct elf_file *f);
/* Our own vDSO, parsed; NULL when there is none. */
struct elf_file *elf_file__vdso(void);
void elf_file__free(struct elf_file *f); /* accepts NULL */
/*
 * The search table's entry for the code at vaddr: the last whose start is
 * at or below it (its FDE may still end before vaddr), or -1 if none.
 */
int64_t elf_file__fde_index(struct elf_file *f, uint64_t vaddr);
int elf_file__read_segs(struct elf_file *f, uint64_t vaddr, void *dst, size_t len);

static inline bool elf_buf__read(const struct elf_buf *b, uint64_t vaddr, void *dst, size_t len)
{
	if (!b->data || vaddr < b->vaddr || vaddr - b->vaddr > b->len ||
	    len > b->len - (vaddr - b->vaddr))
		return false;
	memcpy(dst, b->data + (vaddr - b->vaddr), len);
	return true;
}

/*
 * len bytes at an ELF virtual address of f; past the end of the file reads
 * as zeros, as in a mapping. 0 or -1. Inline: the unwinder's memory reads
 * mostly hit the unwind tables.
 */
static inline int elf_file__read(struct elf_file *f, uint64_t vaddr, void *dst, size_t len)
{
	if (elf_buf__read(&f->hdr, vaddr, dst, len) || elf_buf__read(&f->eh, vaddr, dst, len))
		return 0;
	return elf_file__read_segs(f, vaddr, dst, len);
}

/* What the symbolizer's users can tune; read by every module load. */
struct sym_config {
	char **debug_dirs; /* NULL-terminated absolute paths */
	bool no_params; /* demangle without the parameter list */
	bool no_inline; /* do not read DWARF inline scopes or lines */
};

/* One PT_LOAD: file bytes [offset, offset + filesz) appear at vaddr. */
struct elf_load {
	uint64_t offset;
	uint64_t filesz;
	uint64_t vaddr;
};

/*
 * Disjoint, sorted address ranges, each naming exactly one symbol. Built
 * from the symbol tables so that overlaps, aliases and zero-size symbols are
 * settled once at load time and a lookup is one binary search.
 */
struct elf_range {
	uint64_t start;
	uint64_t end; /* exclusive */
	const char *name;
};

struct Dwfl;
struct Dwfl_Module;
struct Dwarf;

/*
 * Everything read from one ELF file (and its separate debug file) through
 * libdwfl. The tables (loads, ranges, build-id) stay until elf_image__free;
 * the libdwfl handle, which holds the files open and is needed for CFI-range
 * names and DWARF, can be dropped earlier with elf_image__close.
 */
struct elf_image {
	struct elf_load *loads;
	size_t nloads;
	struct elf_range *ranges;
	size_t nranges;
	size_t nsyms; /* function symbols accepted, for tests and stats */
	uint8_t build_id[BUILD_ID_MAX];
	uint8_t build_id_size;
	bool has_debug_file; /* symbols or DWARF came from a separate file */
	int root_fd; /* where path and the debug directories are looked up (roots.c); -1: ours */

	struct Dwfl *dwfl; /* NULL once closed */
	struct Dwfl_Module *mod;
	const struct sym_config *cfg;
	/* .eh_frame_hdr binary-search table and .eh_frame, inside dwfl's mapping */
	const uint8_t *hdr;
	size_t hdr_size;
	uint64_t hdr_vaddr;
	const uint8_t *table; /* fde_count pairs of sdata4, datarel */
	size_t fde_count;
	const uint8_t *eh;
	size_t eh_size;
	uint64_t eh_vaddr;
	/* DWARF, read at the first address that needs it */
	bool dwarf_tried;
	struct Dwarf *dwarf;
};

/*
 * Open the file (a dup of fd when fd >= 0, else path) and read its symbols.
 * path names the file for the .gnu_debuglink search. 0, or a negative errno
 * when the file cannot be opened or is not a usable ELF file.
 */
int elf_image__load(struct elf_image *img, int fd, const char *path, int root_fd,
		    const struct sym_config *cfg, struct strpool *pool);
void elf_image__close(struct elf_image *img); /* drop the libdwfl handle */
void elf_image__free(struct elf_image *img);
/* Map a file offset to the ELF virtual address through the PT_LOAD headers. */
bool elf_image__vaddr(const struct elf_image *img, uint64_t file_off, uint64_t *vaddr);
/* The symbol covering vaddr, or NULL. */
const char *elf_image__lookup(const struct elf_image *img, uint64_t vaddr);
/* Start of the FDE (CFI range) containing vaddr, from .eh_frame_hdr. */
bool elf_image__fde(const struct elf_image *img, uint64_t vaddr, uint64_t *start);

/* One level of a DWARF scope chain: an inlined call or the function itself. */
struct src_frame {
	const char *name; /* interned, demangled; NULL if DWARF has none */
	const char *file; /* interned; NULL when there is no line information */
	unsigned line;
	bool inlined;
};

/*
 * The inline chain at vaddr from DWARF, innermost first: inlined levels,
 * then the containing function (inlined false). Each level's file:line is
 * where execution is in that function. Returns the number of levels (0
 * without DWARF for vaddr). Names and files are interned in pool.
 */
size_t elf_image__src(struct elf_image *img, uint64_t vaddr, struct src_frame *out, size_t max,
		      struct strpool *pool);

/* Read the GNU build-id note of an open file. Its size, or 0 when it has none. */
size_t elf_fd_build_id(int fd, uint8_t *out, size_t cap);

struct ksym {
	uint64_t addr;
	const char *name; /* NULL: an end marker such as _etext, names nothing */
	const char *module; /* "[kernel.kallsyms]" or "[modname]" */
};

struct kallsyms {
	struct ksym *syms;
	size_t n;
};

/* 0, -EPERM when all addresses are zero, -ENODATA when there are no text symbols. */
int kallsyms__load(struct kallsyms *k, const char *path, struct strpool *pool);
void kallsyms__free(struct kallsyms *k);
/* The text symbol naming addr, or false. */
bool kallsyms__lookup(const struct kallsyms *k, uint64_t addr, const char **name,
		      const char **module);

/* ---- the symbolizer's state ---- */

#include <pthread.h>

#include "symbolize/symbolize.h"
#include "util/util.h"

struct perfmap;

enum module_state { MOD_NEW, MOD_LOADED, MOD_FAILED };

/* One resolved level of an address, cached per module (see resolve.c). */
struct cached_frame {
	const char *name;
	const char *file;
	uint32_t line;
	uint8_t kind; /* enum frame_kind */
	uint8_t last; /* the outermost level of its address */
};

/*
 * A mapped file. One per (path, identity): a path whose file is replaced
 * during the recording (another build-id, or another inode when there is no
 * build-id) gets a new module, and module_get() returns the newest.
 */
struct module {
	char *path; /* as mapped, " (deleted)" cut off */
	/*
	 * The root the path is seen from: an fd of symbolizer.roots (a
	 * container's), or -1 for ours. Its files, debug files included,
	 * are opened beneath it.
	 */
	int root_fd;
	uint32_t index; /* in symbolizer.mods: what a sym_loc names it by */
	void *unwind; /* owned by unwind.c: the module's cached unwind tables */
	const char *basename; /* interned */
	struct module *next; /* same hash bucket, newer first */
	enum module_state state;
	struct elf_image img;
	/*
	 * The file pinned at its first executable mapping, so that it can be
	 * read after it is deleted or replaced: read it with pread, never close
	 * it. -1 when it could not be opened or the pin cap was reached.
	 */
	int fd;
	uint8_t build_id[BUILD_ID_MAX];
	uint8_t build_id_size; /* 0: unknown */
	const char *build_id_hex; /* interned, NULL when unknown */
	uint64_t dev, ino; /* identity of a file without build-id; 0 unknown */
	uint64_t lru; /* symbolizer tick of the last use */
	struct u64map cache; /* vaddr -> index into frames (first level) */
	struct cached_frame *frames;
	size_t nframes, frames_cap;
};

enum map_type { MAP_T_FILE, MAP_T_ANON, MAP_T_VDSO };

struct map {
	uint64_t start;
	uint64_t end; /* exclusive */
	uint64_t pgoff;
	struct module *mod; /* MAP_T_FILE only */
	uint32_t prot;
	uint32_t type;
};

struct unwind_proc;
struct jit_proc;

struct proc {
	/*
	 * Sorted, disjoint. After a fork the child shares its parent's array
	 * (refs counts the processes that do, NULL while it is private) until
	 * either changes it: a fork storm costs no copy per child.
	 */
	struct map *maps;
	size_t *refs;
	struct perfmap *perfmap; /* owned by perfmap.c: JIT symbols read for this pid */
	struct unwind_proc *unw; /* owned by unwind.c: unwinding state of this pid */
	struct jit_proc *jit; /* owned by jitcaller.c: what its JIT frames taught */
	size_t n, cap;
	size_t last; /* index of the last hit: consecutive frames share mappings */
	int root_fd; /* the root it sees (roots.c), -1: ours */
	bool root_known; /* root_fd was looked up for its current image */
	uint64_t misses;
	uint64_t next_fallback; /* miss count that triggers the next /proc read */
	uint64_t interval;
	uint32_t pid;
};

/* A root directory other than ours that some process sees (roots.c). */
struct fsroot {
	int fd; /* O_PATH */
	uint64_t dev, ino;
};

struct symbolizer {
	struct u64map procs; /* pid -> struct proc * */
	struct fsroot *roots;
	size_t nroots, roots_cap;
	uint64_t self_root_dev, self_root_ino;
	bool self_root_known;
	struct u64map modules; /* hash(path) -> struct module * (bucket head) */
	struct module **mods;
	size_t nmods, mods_cap;
	struct strpool pool;
	struct kallsyms ksyms;
	/*
	 * kallsyms being read by another thread (symbolizer__load_kallsyms_async)
	 * into kload, its names into kpool: nothing else touches them until
	 * kallsyms_wait() has joined it.
	 */
	bool kloading;
	pthread_t kthread;
	char *kpath;
	struct kallsyms kload;
	struct strpool kpool;
	int kerr;
	struct symbolizer_stats stats;
	struct sym_config cfg;
	struct u64map demangled; /* interned mangled name -> interned demangled name */
	size_t nopen; /* modules holding files open (pinned fd or libdwfl) */
	size_t open_max;
	uint64_t tick;
};

/* ---- modules.c ---- */

/* The newest module for path (created, unpinned, when there is none). */
struct module *module_get(struct symbolizer *s, const char *path);
/*
 * The module for a new mapping of name. An executable mapping pins its
 * file; a file other than the one the path's module has (by build-id, else
 * by inode) starts a new module. NULL on -ENOMEM.
 */
struct module *module_for_mapping(struct symbolizer *s, uint32_t pid, int root_fd, uint64_t start,
				  uint64_t end, uint32_t prot, const char *name,
				  const struct sym_file_id *id);
/*
 * m's file opened again (it was not pinned, or was closed over the cap):
 * its path beneath its root, else (a container's module named from
 * /proc/PID/maps, which names files as we see them) the path as ours, each
 * taken only when it is the file m knows. An fd or -1.
 */
int module_open_file(const struct module *m);
/* Loads the module's symbols once; its state says whether that worked. */
void module_load(struct symbolizer *s, struct module *m);
/* Closes and frees m; its unwind tables (unwind__module_free) go first. */
void module_free(struct module *m);

/* ---- roots.c ---- */

/*
 * Open path beneath the directory root_fd as if it were "/" (openat2's
 * RESOLVE_IN_ROOT); root_fd -1: plain open. The fd or a negative errno.
 */
int fsroot_open(int root_fd, const char *path, int flags);
struct stat;
int fsroot_stat(int root_fd, const char *path, struct stat *st);
/*
 * The root pid sees, as an fd the symbolizer holds (shared by every process
 * with that root), or -1 when it is ours, or the process cannot be looked
 * into (gone, not permitted).
 */
int root_of_pid(struct symbolizer *s, uint32_t pid);
void roots_free(struct symbolizer *s);

/* ---- procs.c ---- */

struct proc *proc_find(const struct symbolizer *s, uint32_t pid);
struct proc *proc_get(struct symbolizer *s, uint32_t pid);
/* Frees p and its mappings; what others hung on it is theirs to free first. */
void proc_free(struct proc *p);
/* A new image (exec): no mappings, misses counted afresh. */
void proc_reset(struct proc *p);
/* A fork: child (reset first) sees parent's mappings, shared until either changes them. */
int proc_share(struct proc *child, struct proc *parent);
/* The mapping containing addr, or NULL. */
struct map *proc_lookup(struct proc *p, uint64_t addr);
/* Insert m, cutting away the parts of older mappings it overlaps. */
int proc_insert(struct proc *p, const struct map *m);
/* A mapping of [start, end) of name: anonymous, the vDSO or a module's file. */
int make_map(struct symbolizer *s, struct map *m, uint32_t pid, uint64_t start, uint64_t end,
	     uint64_t pgoff, uint32_t prot, const char *name, const struct sym_file_id *id);
/*
 * The mapping of a user address, reading /proc/PID/maps (rate-limited) on a
 * miss; *pp is the process (NULL when unknown and not created).
 */
struct map *find_map(struct symbolizer *s, uint32_t pid, uint64_t addr, struct proc **pp);

/* ---- kallsyms.c (the symbolizer's table) ---- */

/* Join the kallsyms reader, if any, and take its table; the result of the last load. */
int kallsyms_wait(struct symbolizer *s);

/* ---- unwind/perfmap ---- */

#include <sys/types.h>

/* The JIT symbols of one process's perf map, hung on proc->perfmap. */
struct perfmap_entry {
	uint64_t start;
	uint64_t end; /* exclusive */
	const char *name; /* interned in the symbolizer's pool */
	uint64_t seq; /* position over all reads: the later line wins a tie */
	uint64_t code; /* where the line says the code starts (start may be cut by overlaps) */
};

struct perfmap {
	struct perfmap_entry *ents; /* every entry read, sorted by start */
	size_t nents, ents_cap;
	struct perfmap_entry *segs; /* disjoint and sorted: who names each range */
	size_t nsegs;
	uint64_t dev, ino, off; /* the file read last, and how far (whole lines) */
	/*
	 * The bytes before off as read then: when they differ, the file was
	 * written again from its start (fopen "w"), not appended to, and is
	 * read again from 0.
	 */
	uint8_t tail[32];
	uint8_t tail_len;
	/* what CLOCK_REALTIME read when the process started (its file's mtime is later) */
	uint64_t started;
	bool started_read; /* started was looked up (0: unknown, not checked) */
	bool stale; /* the file read last was an earlier process's, skipped up to off */
	uint64_t bytes; /* read so far over all files, capped */
	uint64_t seq;
	uint64_t next_read_ns; /* re-reads are rate-limited */
	uint32_t nspid; /* the pid the process sees (names its file); 0 not read yet */
	bool tried;
	bool rejected; /* an unsafe file: never read again for this pid */
	bool skip_line; /* the last read stopped inside an overlong line */
};

/* The pid's JIT state, created at first use; NULL on -ENOMEM. */
struct perfmap *perfmap__get(struct proc *p);
/* Accepts NULL. */
void perfmap__free(struct perfmap *pm);
/*
 * Read a perf-map file (or, when it is the file read last time and has grown,
 * what was appended) into pm. The file must be a regular file (a symlink,
 * FIFO or device is refused without being opened for reading data), owned by
 * uid or root, not writable by others and at most PERFMAP_MAX_FILE bytes;
 * otherwise -EPERM and st->rejected_files counts it. Malformed lines are
 * counted and skipped. 0 or a negative errno (-ENOENT: no file).
 */
#define PERFMAP_MAX_FILE (64ull << 20)
int perfmap__read(struct perfmap *pm, const char *path, uid_t uid, struct strpool *pool,
		  struct perfmap_stats *st);
/*
 * perfmap__read for a process that started at not_before (CLOCK_REALTIME
 * ns; 0: unknown): a file last modified before then was written by an
 * earlier process that had the pid (pids are reused, and each container's
 * PID namespace counts from 1 again) and names none of this one's code.
 * Its entries are not read, st->stale_files counts it, and -ESTALE; what
 * this process appends to it later, or writes over it, is read then.
 */
int perfmap__read_since(struct perfmap *pm, const char *path, uid_t uid, uint64_t not_before,
			struct strpool *pool, struct perfmap_stats *st);
/* The entry naming addr, without reading: the innermost (smallest) entry
 * containing it, and among entries of equal size the one read last. */
const struct perfmap_entry *perfmap__find(const struct perfmap *pm, uint64_t addr);
/* Like perfmap__find, but (re)reads /proc/PID/root/tmp/perf-NSPID.map first
 * when nothing covers addr, at most once per PERFMAP_REREAD_MS (NSPID: the
 * pid in the process's own PID namespace, from NSpid). Only what it grew by
 * is read. (At 50 ms, a sample in a kernel made since the last read and
 * unwound within 50 ms of it had no preamble: 2.3% of one MLP run's stacks
 * at two threads were cut as "JIT preamble not read".) */
#define PERFMAP_REREAD_MS 5
const struct perfmap_entry *perfmap__lookup(struct symbolizer *s, struct proc *p, uint64_t addr);
/*
 * symbolizer__resolve's hook for code outside files: names addr, which lies
 * in m (NULL: in no known mapping), from the perf map with kind FRAME_JIT
 * and module "[JIT]". An anonymous executable mapping that the map does
 * not cover is named "[JIT]". False when addr is left to the caller.
 */
bool perfmap__resolve(struct symbolizer *s, struct proc *p, const struct map *m, uint64_t addr,
		      struct sym_frame *out);

/* unwind.c: frees a process's unwinding state / a module's unwind tables. */
void unwind__proc_free(struct unwind_proc *u);
void unwind__module_free(struct module *m);
/* jitcaller.c: frees what a process's JIT frames taught. */
void jitcaller__proc_free(struct jit_proc *j);
/* jitcaller.c: read the preambles of the kernels the perf map has named since the last time. */
void jitcaller__refresh(struct symbolizer *s, struct proc *p);

/*
 * insn.c: does the code before a return address end in a call? code[0..len)
 * are the bytes just before it (code[len - 1] is the last byte of the call).
 * The indirect form accepts only `call r/m64` (FF /2) through a register or
 * a register-based memory operand, the way JIT kernels are called; a RIP-
 * relative operand is a call through the GOT, i.e. to a known function.
 */
bool insn_is_indirect_call(const uint8_t *code, size_t len);
bool insn_is_call(const uint8_t *code, size_t len); /* also E8 rel32 and FF 15 */

/*
 * insn.c: what the first instructions of a piece of JIT code do to the
 * stack, decoded from its bytes (oneDNN's jit_generator::preamble() and
 * whatever follows it, for each kernel as generated): the registers it
 * pushes, in order, a copy of rsp into rbp, rsp moved by immediates. After
 * the decoded steps, the code is the kernel's body.
 */
#define PREAMBLE_MAX_PUSHES 16
#define PREAMBLE_MAX_STEPS 40
#define PREAMBLE_MAX_DEPTH (1u << 20)
#define PREAMBLE_CODE 256 /* bytes read from the start of a kernel */
struct preamble {
	uint8_t npush;
	uint8_t push
		[PREAMBLE_MAX_PUSHES]; /* x86 register numbers (rax 0 ... r15 15), in push order */
	int8_t fp_at; /* rbp = rsp after this many pushes (and not written since); -1: no */
	uint32_t fp_depth; /* bytes below the entry SP that rbp points to then */
	uint32_t depth_now; /* bytes below the entry SP where rsp is after the decoded steps */
	uint8_t nsteps;
	uint16_t len; /* bytes decoded */
	uint16_t end[PREAMBLE_MAX_STEPS]; /* code offset after each step */
	uint32_t depth[PREAMBLE_MAX_STEPS]; /* rsp below the entry SP after each step */
	uint8_t npushed[PREAMBLE_MAX_STEPS]; /* pushes done after each step */
	/*
	 * Where the code keeps its rsp once it moved rsp by an amount not in
	 * the code (oneDNN's f32 GEMM on its buffer or heap workspace):
	 * [rsp + sp_slot] holds rsp as it was sp_depth bytes below the entry
	 * SP. -1: no such slot was decoded.
	 */
	int32_t sp_slot;
	uint32_t sp_depth;
};
/* Decode code[0..len); 0 (a preamble of no steps when the first instruction is no prologue's), -1 for NULL. */
int insn_preamble(const uint8_t *code, size_t len, struct preamble *p);
/*
 * Where rsp is at code offset off, if off is 0 or the end of a decoded
 * step: how far below the entry SP, and how many pushes are done.
 */
bool preamble_at(const struct preamble *p, uint64_t off, uint32_t *depth, uint8_t *npush);
/*
 * Is code[0..len) (the code at a sampled IP) the rest of an epilogue: pop
 * r64 and vzeroupper up to a ret? The registers it pops, in order, into
 * regs[0..max); their number, or -1.
 */
int insn_epilogue(const uint8_t *code, size_t len, uint8_t *regs, size_t max);
#define EPILOGUE_CODE 32 /* bytes read at a sampled IP */
/* jitcaller.c keeps a copy of each kernel's code up to this size, for reading after its process exits */
#define JIT_TEXT_MAX (1u << 20)

#endif
