/* SPDX-License-Identifier: MIT */
/*
 * Shared between the files of symbolize/ only: the string pool, the ELF
 * symbol image and the kallsyms table.
 */
#ifndef DLFLAME_SYMBOLIZE_INTERNAL_H
#define DLFLAME_SYMBOLIZE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

struct elf_image {
	struct elf_load *loads;
	size_t nloads;
	struct elf_range *ranges;
	size_t nranges;
	size_t nsyms; /* function symbols accepted, for tests and stats */
};

/* 0, or a negative errno when the file cannot be opened or is not a usable ELF file. */
int elf_image__load(struct elf_image *img, const char *path, struct strpool *pool);
void elf_image__free(struct elf_image *img);
/* Map a file offset to the ELF virtual address through the PT_LOAD headers. */
bool elf_image__vaddr(const struct elf_image *img, uint64_t file_off, uint64_t *vaddr);
/* The symbol covering vaddr, or NULL. */
const char *elf_image__lookup(const struct elf_image *img, uint64_t vaddr);

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

/* ---- the symbolizer's state, shared by symbolize.c, unwind.c and perfmap.c ---- */

#include "symbolize/symbolize.h"
#include "util/util.h"

struct perfmap;

enum module_state { MOD_NEW, MOD_LOADED, MOD_FAILED };

struct module {
	char *path;
	void *unwind; /* owned by unwind.c: the module's cached unwind tables */
	const char *basename; /* interned */
	struct module *next; /* same hash bucket */
	enum module_state state;
	struct elf_image img;
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

struct proc {
	struct map *maps;
	struct perfmap *perfmap; /* owned by perfmap.c: JIT symbols read for this pid */
	size_t n, cap;
	size_t last; /* index of the last hit: consecutive frames share mappings */
	uint64_t misses;
	uint64_t next_fallback; /* miss count that triggers the next /proc read */
	uint64_t interval;
	uint32_t pid;
};

struct symbolizer {
	struct u64map procs; /* pid -> struct proc * */
	struct u64map modules; /* hash(path) -> struct module * (bucket head) */
	struct module **mods;
	size_t nmods, mods_cap;
	struct strpool pool;
	struct kallsyms ksyms;
	struct symbolizer_stats stats;
};

struct module *module_get(struct symbolizer *s, const char *path);
/* Loads the module's symbols once; its state says whether that worked. */
void module_load(struct symbolizer *s, struct module *m);
struct proc *proc_find(const struct symbolizer *s, uint32_t pid);
struct proc *proc_get(struct symbolizer *s, uint32_t pid);
/* The mapping containing addr, or NULL. */
struct map *proc_lookup(struct proc *p, uint64_t addr);

#endif
