/* SPDX-License-Identifier: MIT */
/*
 * Everything named from one ELF file, through libdwfl: function symbols
 * (.symtab, else .dynsym plus MiniDebugInfo's .gnu_debugdata), separate
 * debug files found by build-id and .gnu_debuglink under the configured
 * debug directories, CFI ranges from .eh_frame_hdr, and DWARF inline scopes
 * and line tables (compressed sections are libdw's business).
 *
 * The debug-file search is ours, not dwfl_standard_find_debuginfo(): that
 * one asks debuginfod servers when DEBUGINFOD_URLS is set (Debian sets it in
 * login shells), which would put network round trips into the recording.
 * A debug file is used only when its build-id (else the debuglink CRC)
 * matches the module.
 *
 * Files are untrusted: libelf checks section extents against the file
 * size, and every offset we read ourselves (.eh_frame_hdr, .eh_frame, notes)
 * is checked against the size of the data it points into. libdwfl maps the
 * file (MAP_PRIVATE): a file truncated in place under a running recording
 * can still raise SIGBUS; a file deleted or replaced by rename cannot.
 */
#include "symbolize/internal.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "util/util.h"

/* Real files have a handful of PT_LOADs; more is a hostile file. */
#define MAX_LOADS 64
/* Bounds the temporary symbol array (32 bytes each) for a huge or hostile file. */
#define MAX_SYMS (8u << 20)
/* Inline nesting deeper than this is cut (the outer levels are kept). */
#define MAX_SCOPES 64

struct sym {
	uint64_t start;
	/*
	 * exclusive; for a zero-size symbol start + 1, or, when it may stretch,
	 * its section's end until build_ranges() cuts it at the next symbol
	 */
	uint64_t end;
	const char *name;
	uint32_t len;
	uint16_t rank; /* 0 GLOBAL, 1 WEAK, 2 LOCAL, 3 other */
	uint16_t stretch; /* zero-size, from a full .symtab: named up to the next symbol */
};

struct xrange {
	uint64_t start, end;
};

/* String tables of one ELF file, to check that a symbol name ends inside its table. */
struct strtabs {
	Elf *elf;
	bool symtab; /* the file has a .symtab: every function has a symbol */
	size_t n;
	struct {
		const char *p;
		size_t size;
	} t[8];
};

struct loader {
	Elf *elf; /* the main file, owned by libdwfl */
	struct strtabs st[3]; /* main, debug, .gnu_debugdata */
	struct xrange *xr; /* executable sections, sorted, merged */
	size_t nxr, xr_cap;
	struct sym *syms;
	size_t nsyms, syms_cap;
	struct strpool *pool;
};

static int read_loads(struct loader *ld, struct elf_image *img)
{
	GElf_Ehdr eh;
	size_t phnum, i;

	if (!gelf_getehdr(ld->elf, &eh))
		return -ENOEXEC;
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
		return -ENOEXEC;
	if (elf_getphdrnum(ld->elf, &phnum) || phnum == 0 || phnum > INT_MAX)
		return -ENOEXEC;
	img->loads = calloc(MAX_LOADS, sizeof(*img->loads));
	if (!img->loads)
		return -ENOMEM;
	for (i = 0; i < phnum && img->nloads < MAX_LOADS; i++) {
		GElf_Phdr ph;
		uint64_t end;

		if (!gelf_getphdr(ld->elf, (int)i, &ph))
			return -ENOEXEC;
		if (ph.p_type != PT_LOAD || ph.p_filesz == 0)
			continue;
		if (__builtin_add_overflow(ph.p_offset, ph.p_filesz, &end) ||
		    __builtin_add_overflow(ph.p_vaddr, ph.p_filesz, &end))
			continue;
		img->loads[img->nloads++] = (struct elf_load){
			.offset = ph.p_offset,
			.filesz = ph.p_filesz,
			.vaddr = ph.p_vaddr,
		};
	}
	return img->nloads ? 0 : -ENOEXEC;
}

static int cmp_xrange(const void *a, const void *b)
{
	const struct xrange *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

static int read_exec_sections(struct loader *ld)
{
	Elf_Scn *scn = NULL;
	size_t i, out;

	while ((scn = elf_nextscn(ld->elf, scn))) {
		GElf_Shdr sh;
		uint64_t end;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (!(sh.sh_flags & SHF_EXECINSTR) || !(sh.sh_flags & SHF_ALLOC) || !sh.sh_size)
			continue;
		if (__builtin_add_overflow(sh.sh_addr, sh.sh_size, &end))
			continue;
		if (grow_array((void **)&ld->xr, &ld->xr_cap, ld->nxr + 1, sizeof(*ld->xr)))
			return -ENOMEM;
		ld->xr[ld->nxr++] = (struct xrange){ sh.sh_addr, end };
	}
	if (!ld->nxr)
		return 0;
	/* Merged, so that a binary search finds the one range that can hold an address. */
	qsort(ld->xr, ld->nxr, sizeof(*ld->xr), cmp_xrange);
	for (i = 1, out = 0; i < ld->nxr; i++) {
		if (ld->xr[i].start <= ld->xr[out].end) {
			if (ld->xr[i].end > ld->xr[out].end)
				ld->xr[out].end = ld->xr[i].end;
		} else {
			ld->xr[++out] = ld->xr[i];
		}
	}
	ld->nxr = out + 1;
	return 0;
}

static bool in_exec_section(const struct loader *ld, uint64_t addr)
{
	size_t lo = 0, hi = ld->nxr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ld->xr[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && addr < ld->xr[lo - 1].end;
}

static uint32_t bind_rank(unsigned char bind)
{
	switch (bind) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE:
		return 0;
	case STB_WEAK:
		return 1;
	case STB_LOCAL:
		return 2;
	default:
		return 3;
	}
}

static const struct strtabs *strtabs_of(struct loader *ld, Elf *elf)
{
	struct strtabs *st = NULL;
	Elf_Scn *scn = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(ld->st); i++) {
		if (ld->st[i].elf == elf)
			return &ld->st[i];
		if (!ld->st[i].elf && !st)
			st = &ld->st[i];
	}
	if (!st)
		return NULL;
	st->elf = elf;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			st->symtab = true;
		if (sh.sh_type != SHT_STRTAB || st->n >= ARRAY_SIZE(st->t))
			continue;
		d = elf_getdata(scn, NULL);
		if (d && d->d_buf && d->d_size) {
			st->t[st->n].p = d->d_buf;
			st->t[st->n++].size = d->d_size;
		}
	}
	return st;
}

/*
 * libdwfl checks a name's offset against its string table but not that the
 * string ends there: a table without a final NUL would let us read past it.
 */
static bool name_in_strtab(const struct strtabs *st, const char *name)
{
	if (!st)
		return false;
	for (size_t i = 0; i < st->n; i++) {
		const char *p = st->t[i].p;

		if (name >= p && name < p + st->t[i].size)
			return memchr(name, '\0', st->t[i].size - (size_t)(name - p)) != NULL;
	}
	return false;
}

/*
 * The end of the section shndx of elf, if it is executable and holds addr
 * (addresses are link-time, in the debug file as in the main file).
 */
static bool section_end(Elf *elf, GElf_Word shndx, uint64_t addr, uint64_t *end)
{
	Elf_Scn *scn = elf_getscn(elf, shndx);
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR))
		return false;
	if (__builtin_add_overflow(sh.sh_addr, sh.sh_size, end))
		return false;
	return addr >= sh.sh_addr && addr < *end;
}

/*
 * The module's symbol table as libdwfl chose it: the main file's .symtab,
 * else the debug file's, else .dynsym together with the .gnu_debugdata
 * table. Addresses are link-time vaddrs (the module is reported at bias 0).
 */
static int read_symbols(struct loader *ld, struct elf_image *img)
{
	int n, err;

	err = read_exec_sections(ld);
	if (err || !ld->nxr)
		return err;
	n = dwfl_module_getsymtab(img->mod);
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		Elf *elf = NULL;
		Dwarf_Addr bias = 0;
		const struct strtabs *st;
		const char *name;
		unsigned char type;
		uint64_t end;
		size_t len;
		bool stretch;

		name = dwfl_module_getsym_info(img->mod, i, &sym, &addr, &shndx, &elf, &bias);
		st = elf && name ? strtabs_of(ld, elf) : NULL;
		if (!name || !*name || !name_in_strtab(st, name))
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		if (shndx == SHN_UNDEF || shndx == SHN_ABS || !in_exec_section(ld, addr))
			continue;
		/*
		 * A zero-size symbol (crtstuff's __do_global_dtors_aux, hand-written
		 * assembly) names its own address only, unless it comes from a full
		 * .symtab: there every function has a symbol, and like perf and
		 * addr2line we name the code up to the next symbol in its section.
		 * In a table of exported names only (.dynsym) the code after it may
		 * be any internal function (libdnnl's __itt_pt_write, docs/onednn-jit.md).
		 */
		stretch = !sym.st_size && st->symtab && section_end(elf, shndx, addr, &end);
		if (!stretch && __builtin_add_overflow(addr, sym.st_size ? sym.st_size : 1, &end))
			continue;
		len = strnlen(name, SYM_NAME_MAX);
		/* "memcpy@@GLIBC_2.14": the version is the linker's business, not the reader's */
		const char *at = memchr(name, '@', len);
		if (at && at > name)
			len = (size_t)(at - name);
		if (ld->nsyms >= MAX_SYMS)
			return 0;
		if (grow_array((void **)&ld->syms, &ld->syms_cap, ld->nsyms + 1, sizeof(*ld->syms)))
			return -ENOMEM;
		name = strpool__intern(ld->pool, name, len);
		if (!name)
			return -ENOMEM;
		ld->syms[ld->nsyms++] = (struct sym){
			.start = addr,
			.end = end,
			.name = name,
			.len = (uint32_t)len,
			.rank = (uint16_t)bind_rank(GELF_ST_BIND(sym.st_info)),
			.stretch = stretch,
		};
	}
	return 0;
}

/* Address order; at one address the preferred alias first. */
static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	if (x->name != y->name)
		return strcmp(x->name, y->name);
	/* same name (interned): a longer copy first so the result is stable */
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1;
	return 0;
}

/*
 * Which symbol wins where several cover an address: the one that starts
 * last (the innermost), and at equal starts the preferred alias, which
 * sorts first. syms[] is sorted by cmp_sym, so index order encodes both.
 */
static bool heap_better(const struct sym *syms, size_t a, size_t b)
{
	if (syms[a].start != syms[b].start)
		return syms[a].start > syms[b].start;
	return a < b;
}

static void heap_push(size_t *h, size_t *n, const struct sym *syms, size_t v)
{
	size_t i = (*n)++;

	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (!heap_better(syms, v, h[parent]))
			break;
		h[i] = h[parent];
		i = parent;
	}
	h[i] = v;
}

static void heap_pop(size_t *h, size_t *n, const struct sym *syms)
{
	size_t v = h[--(*n)], i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && heap_better(syms, h[c + 1], h[c]))
			c++;
		if (!heap_better(syms, h[c], v))
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = v;
}

static int emit(struct elf_image *img, size_t *cap, uint64_t start, uint64_t end, const char *name)
{
	struct elf_range *last = img->nranges ? &img->ranges[img->nranges - 1] : NULL;

	if (last && last->end == start && last->name == name) {
		last->end = end;
		return 0;
	}
	if (grow_array((void **)&img->ranges, cap, img->nranges + 1, sizeof(*img->ranges)))
		return -ENOMEM;
	img->ranges[img->nranges++] = (struct elf_range){ start, end, name };
	return 0;
}

/* Sweep the sorted symbols once, keeping the candidates that cover `cur` in a heap. */
static int build_ranges(struct loader *ld, struct elf_image *img)
{
	const struct sym *syms = ld->syms;
	size_t n = ld->nsyms, i = 0, hn = 0, cap = 0;
	uint64_t cur = 0, cover = 0;
	size_t *heap;
	int err = 0;

	if (!n)
		return 0;
	qsort(ld->syms, n, sizeof(*ld->syms), cmp_sym);
	/*
	 * A stretched zero-size symbol ends where the next symbol starts, and
	 * inside a sized symbol (an alias at its address, a label within it) at
	 * that symbol's end: never over the gap after a sized function.
	 */
	for (size_t j = 0, g; j < n; j = g) {
		for (g = j; g < n && ld->syms[g].start == ld->syms[j].start; g++)
			if (!ld->syms[g].stretch && ld->syms[g].end > cover)
				cover = ld->syms[g].end;
		for (size_t k = j; k < g; k++)
			if (ld->syms[k].stretch && cover > ld->syms[k].start &&
			    cover < ld->syms[k].end)
				ld->syms[k].end = cover;
	}
	for (size_t j = n, next = n; j-- > 0;) {
		/* next: the first symbol that starts after syms[j], or n */
		if (j + 1 < n && ld->syms[j + 1].start > ld->syms[j].start)
			next = j + 1;
		if (ld->syms[j].stretch && next < n && ld->syms[next].start < ld->syms[j].end)
			ld->syms[j].end = ld->syms[next].start;
	}
	heap = malloc(n * sizeof(*heap));
	if (!heap)
		return -ENOMEM;
	while (i < n || hn) {
		uint64_t next;

		if (!hn)
			cur = syms[i].start;
		while (i < n && syms[i].start == cur)
			heap_push(heap, &hn, syms, i++);
		while (hn && syms[heap[0]].end <= cur)
			heap_pop(heap, &hn, syms);
		if (!hn)
			continue;
		next = syms[heap[0]].end;
		if (i < n && syms[i].start < next)
			next = syms[i].start;
		err = emit(img, &cap, cur, next, syms[heap[0]].name);
		if (err)
			break;
		cur = next;
	}
	free(heap);
	img->nsyms = n;
	return err;
}

/* ---- separate debug files ---- */

static bool same_build_id(Elf *elf, const uint8_t *id, size_t len)
{
	const void *p;
	ssize_t n = dwelf_elf_gnu_build_id(elf, &p);

	return n > 0 && (size_t)n == len && !memcmp(p, id, len);
}

static bool crc_matches(int fd, uint32_t want)
{
	unsigned char buf[64 << 10];
	uLong crc = crc32(0, Z_NULL, 0);
	off_t off = 0;

	for (;;) {
		ssize_t r = pread(fd, buf, sizeof(buf), off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return false;
		if (r == 0)
			break;
		crc = crc32(crc, buf, (uInt)r);
		off += r;
	}
	return (uint32_t)crc == want;
}

/*
 * Open path as the debug file of img: a regular file, not the main file
 * itself, whose build-id matches (or, when the module has none, whose CRC
 * matches the debuglink's). The fd, or -1.
 */
static int try_debug_file(const struct elf_image *img, int root_fd, const char *path,
			  const struct stat *main_st, bool by_crc, uint32_t crc)
{
	struct stat st;
	Elf *elf;
	bool ok;
	int fd = fsroot_open(root_fd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (main_st && st.st_dev == main_st->st_dev && st.st_ino == main_st->st_ino))
		goto fail;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		goto fail;
	if (img->build_id_size)
		ok = same_build_id(elf, img->build_id, img->build_id_size);
	else
		ok = by_crc && crc_matches(fd, crc);
	elf_end(elf);
	if (ok)
		return fd;
fail:
	close(fd);
	return -1;
}

static int debug_found(int fd, const char *path, char **debuginfo_file_name)
{
	free(*debuginfo_file_name);
	*debuginfo_file_name = strdup(path);
	return fd;
}

/*
 * The debug file of img seen from root_fd (-1: ours), or -1. Build-id
 * first (DIR/.build-id/xx/rest.debug), then the debuglink name next to the
 * file, in its .debug/ subdirectory and under each DIR as DIR/<dir of the
 * file>/.
 */
static int find_debug_in(const struct elf_image *img, int root_fd, const char *file_name,
			 const char *debuglink, GElf_Word crc, char **debuginfo_file_name)
{
	char path[PATH_MAX], dir[PATH_MAX];
	struct stat main_st, *mst = NULL;
	const char *slash;
	int fd;

	if (img->build_id_size) {
		for (char **d = img->cfg->debug_dirs; *d; d++) {
			int n = snprintf(path, sizeof(path), "%s/.build-id/%02x/", *d,
					 img->build_id[0]);

			for (size_t i = 1;
			     i < img->build_id_size && n > 0 && (size_t)n < sizeof(path); i++)
				n += snprintf(path + n, sizeof(path) - (size_t)n, "%02x",
					      img->build_id[i]);
			if (n <= 0 || (size_t)n + 7 > sizeof(path))
				continue;
			strcpy(path + n, ".debug");
			fd = try_debug_file(img, root_fd, path, NULL, false, 0);
			if (fd >= 0)
				return debug_found(fd, path, debuginfo_file_name);
		}
	}
	if (!debuglink || !*debuglink || strchr(debuglink, '/') || !file_name ||
	    file_name[0] != '/')
		return -1;
	/* next to the file and under each DIR: only in the file's own root */
	if (root_fd != img->root_fd)
		return -1;
	slash = strrchr(file_name, '/');
	if ((size_t)(slash - file_name) >= sizeof(dir))
		return -1;
	memcpy(dir, file_name, (size_t)(slash - file_name));
	dir[slash - file_name] = '\0';
	if (!fsroot_stat(root_fd, file_name, &main_st))
		mst = &main_st;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, debuglink) < sizeof(path)) {
		fd = try_debug_file(img, root_fd, path, mst, true, crc);
		if (fd >= 0)
			return debug_found(fd, path, debuginfo_file_name);
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/.debug/%s", dir, debuglink) < sizeof(path)) {
		fd = try_debug_file(img, root_fd, path, mst, true, crc);
		if (fd >= 0)
			return debug_found(fd, path, debuginfo_file_name);
	}
	for (char **d = img->cfg->debug_dirs; *d; d++) {
		if ((size_t)snprintf(path, sizeof(path), "%s%s/%s", *d, dir, debuglink) >=
		    sizeof(path))
			continue;
		fd = try_debug_file(img, root_fd, path, mst, true, crc);
		if (fd >= 0)
			return debug_found(fd, path, debuginfo_file_name);
	}
	return -1;
}

/*
 * libdwfl's find_debuginfo callback. A container's file is looked for in
 * its own root first, then by build-id in ours (a file of that build-id is
 * the right one wherever it lies); the debuglink name (whose only check
 * is a CRC) only beside the file itself.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink, GElf_Word crc,
			  char **debuginfo_file_name)
{
	const struct elf_image *img = *userdata;
	int fd;

	if (!img || !img->cfg || !img->cfg->debug_dirs)
		return -1;
	fd = find_debug_in(img, img->root_fd, file_name, debuglink, crc, debuginfo_file_name);
	if (fd < 0 && img->root_fd >= 0 && img->build_id_size)
		fd = find_debug_in(img, -1, file_name, debuglink, crc, debuginfo_file_name);
	return fd;
}

/* The main file is handed to dwfl_report_elf; nothing is ever looked up by name. */
static int find_no_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       char **file_name, Elf **elfp)
{
	return -1;
}

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = find_no_elf,
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

/* ---- CFI ranges from .eh_frame_hdr and .eh_frame (decoded by elf.c) ---- */

static const uint8_t *section_bytes(Elf *elf, const char *want, size_t shstrndx, size_t *size,
				    uint64_t *vaddr)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, want))
			continue;
		d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf || !d->d_size)
			return NULL;
		*size = d->d_size;
		*vaddr = sh.sh_addr;
		return d->d_buf;
	}
	return NULL;
}

/* Find the binary-search table; without one, frames are named by exact address. */
static void read_eh_frame_hdr(struct elf_image *img, Elf *elf)
{
	struct eh_hdr h;
	size_t shstrndx;
	GElf_Ehdr eh;

	/* the readers below are little-endian, like every target we sample */
	if (!gelf_getehdr(elf, &eh) || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    elf_getshdrstrndx(elf, &shstrndx))
		return;
	img->hdr = section_bytes(elf, ".eh_frame_hdr", shstrndx, &img->hdr_size, &img->hdr_vaddr);
	img->eh = section_bytes(elf, ".eh_frame", shstrndx, &img->eh_size, &img->eh_vaddr);
	if (!img->hdr || !img->eh || !eh_hdr_parse(img->hdr, img->hdr_size, img->hdr_vaddr, &h) ||
	    h.fde_count > (img->hdr_size - h.table_off) / 8)
		goto none;
	img->table = img->hdr + h.table_off;
	img->fde_count = (size_t)h.fde_count;
	return;
none:
	img->hdr = img->eh = img->table = NULL;
	img->fde_count = 0;
}

bool elf_image__fde(const struct elf_image *img, uint64_t vaddr, uint64_t *start)
{
	return img->table && eh_fde_lookup(img->table, img->fde_count, img->hdr_vaddr, img->eh,
					   img->eh_size, img->eh_vaddr, vaddr, start);
}

/* ---- DWARF: inline scopes and lines ---- */

static const char *die_name(struct elf_image *img, Dwarf_Die *die, struct strpool *pool)
{
	Dwarf_Attribute attr;
	const char *name = NULL;
	char buf[DEMANGLED_MAX];
	size_t len;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
		name = dwarf_formstring(&attr);
	if (name && (len = sym_demangle(name, !img->cfg || !img->cfg->no_params, buf, sizeof(buf))))
		return strpool__intern(pool, buf, len);
	if (dwarf_attr_integrate(die, DW_AT_name, &attr))
		name = dwarf_formstring(&attr);
	if (!name || !*name)
		return NULL;
	return strpool__intern(pool, name, strnlen(name, SYM_NAME_MAX));
}

static const char *intern_file(const char *file, struct strpool *pool)
{
	return file && *file ? strpool__intern(pool, file, strnlen(file, SYM_NAME_MAX)) : NULL;
}

size_t elf_image__src(struct elf_image *img, uint64_t vaddr, struct src_frame *out, size_t max,
		      struct strpool *pool)
{
	Dwarf_Die *cudie, *scopes = NULL;
	Dwarf_Addr bias = 0;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0, k = 0;
	const char *file = NULL;
	unsigned line = 0;
	Dwarf_Line *dl;
	int n, lineno;

	if (!img->dwfl || !max)
		return 0;
	if (!img->dwarf_tried) {
		img->dwarf_tried = true;
		img->dwarf = dwfl_module_getdwarf(img->mod, &bias);
	}
	if (!img->dwarf)
		return 0;
	cudie = dwfl_module_addrdie(img->mod, vaddr, &bias);
	if (!cudie)
		return 0;
	vaddr -= bias;
	dl = dwarf_getsrc_die(cudie, vaddr);
	if (dl && !dwarf_lineno(dl, &lineno) && lineno > 0) {
		file = intern_file(dwarf_linesrc(dl, NULL, NULL), pool);
		line = (unsigned)lineno;
	}
	n = dwarf_getscopes(cudie, vaddr, &scopes);
	for (int i = 0, steps = 0; i < n && k < max && steps < MAX_SCOPES * 4; i++, steps++) {
		Dwarf_Die *d = &scopes[i];
		int tag = dwarf_tag(d);
		Dwarf_Attribute attr;
		Dwarf_Word cf = 0, cl = 0;
		Dwarf_Die *outer = NULL;
		int m;

		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
			continue;
		out[k++] = (struct src_frame){
			.name = die_name(img, d, pool),
			.file = file,
			.line = line,
			.inlined = tag == DW_TAG_inlined_subroutine,
		};
		if (tag == DW_TAG_subprogram)
			break;
		/* the next level out is where this one was inlined */
		file = NULL;
		line = 0;
		if (dwarf_attr(d, DW_AT_call_line, &attr) && !dwarf_formudata(&attr, &cl))
			line = cl > UINT_MAX ? 0 : (unsigned)cl;
		if (dwarf_attr(d, DW_AT_call_file, &attr) && !dwarf_formudata(&attr, &cf) &&
		    (files || !dwarf_getsrcfiles(cudie, &files, &nfiles)) && cf < nfiles)
			file = intern_file(dwarf_filesrc(files, (size_t)cf, NULL, NULL), pool);
		/*
		 * dwarf_getscopes() continues past an inlined call with the scopes
		 * of its abstract definition; the function it was inlined into is
		 * among the concrete scopes that contain this DIE.
		 */
		m = dwarf_getscopes_die(d, &outer);
		if (m <= 0)
			break;
		free(scopes);
		scopes = outer;
		n = m;
		i = 0; /* scopes[0] is d itself */
	}
	free(scopes);
	/* a chain cut by max or MAX_SCOPES still ends in the function itself */
	if (k && out[k - 1].inlined && k == max)
		out[k - 1].inlined = false;
	return k;
}

/* ---- the image ---- */

int elf_image__load(struct elf_image *img, int fd, const char *path, int root_fd,
		    const struct sym_config *cfg, struct strpool *pool)
{
	struct loader ld = { .pool = pool };
	const unsigned char *bits;
	const char *base;
	GElf_Addr bias = 0, bid_vaddr;
	struct stat st;
	void **ud;
	int dfd, n, err;

	memset(img, 0, sizeof(*img));
	img->cfg = cfg;
	img->root_fd = root_fd;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	if (fd >= 0) {
		dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (dfd < 0)
			return -errno;
	} else {
		dfd = fsroot_open(root_fd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (dfd < 0)
			return dfd;
	}
	if (fstat(dfd, &st)) {
		err = -errno;
		goto out_close;
	}
	err = -EINVAL;
	if (!S_ISREG(st.st_mode))
		goto out_close;
	err = -ENOMEM;
	img->dwfl = dwfl_begin(&dwfl_callbacks);
	if (!img->dwfl)
		goto out_close;
	dwfl_report_begin(img->dwfl);
	base = strrchr(path, '/');
	/* bias 0: every address libdwfl hands back is a link-time vaddr */
	img->mod = dwfl_report_elf(img->dwfl, base ? base + 1 : path, path, dfd, 0, true);
	dwfl_report_end(img->dwfl, NULL, NULL);
	err = -ENOEXEC;
	if (!img->mod)
		goto out_close; /* dfd is consumed only on success */
	dfd = -1;
	ld.elf = dwfl_module_getelf(img->mod, &bias);
	if (!ld.elf || bias != 0 || elf_kind(ld.elf) != ELF_K_ELF)
		goto out_end;
	if (!dwfl_module_info(img->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL))
		goto out_end;
	*ud = img;
	n = dwfl_module_build_id(img->mod, &bits, &bid_vaddr);
	if (n > 0 && n <= BUILD_ID_MAX) {
		memcpy(img->build_id, bits, (size_t)n);
		img->build_id_size = (uint8_t)n;
	}
	err = read_loads(&ld, img);
	if (err)
		goto out_end;
	err = read_symbols(&ld, img);
	if (err)
		goto out_end;
	err = build_ranges(&ld, img);
	if (err)
		goto out_end;
	read_eh_frame_hdr(img, ld.elf);
	{
		const char *debugfile = NULL;

		dwfl_module_info(img->mod, NULL, NULL, NULL, NULL, NULL, NULL, &debugfile);
		img->has_debug_file = debugfile != NULL;
	}
	if (cfg && cfg->no_inline)
		img->dwarf_tried = true;
out_end:
	free(ld.syms);
	free(ld.xr);
	if (err)
		elf_image__free(img);
	return err;
out_close:
	if (dfd >= 0)
		close(dfd);
	if (img->dwfl)
		dwfl_end(img->dwfl);
	img->dwfl = NULL;
	return err;
}

void elf_image__close(struct elf_image *img)
{
	if (!img || !img->dwfl)
		return;
	dwfl_end(img->dwfl);
	img->dwfl = NULL;
	img->mod = NULL;
	img->hdr = img->eh = img->table = NULL;
	img->fde_count = 0;
	img->dwarf = NULL;
	img->dwarf_tried = true;
}

void elf_image__free(struct elf_image *img)
{
	if (!img)
		return;
	elf_image__close(img);
	free(img->loads);
	free(img->ranges);
	memset(img, 0, sizeof(*img));
}

bool elf_image__vaddr(const struct elf_image *img, uint64_t file_off, uint64_t *vaddr)
{
	for (size_t i = 0; i < img->nloads; i++) {
		const struct elf_load *l = &img->loads[i];

		if (file_off >= l->offset && file_off - l->offset < l->filesz) {
			*vaddr = file_off - l->offset + l->vaddr;
			return true;
		}
	}
	return false;
}

const char *elf_image__lookup(const struct elf_image *img, uint64_t vaddr)
{
	size_t lo = 0, hi = img->nranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (img->ranges[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || vaddr >= img->ranges[lo - 1].end)
		return NULL;
	return img->ranges[lo - 1].name;
}

size_t elf_fd_build_id(int fd, uint8_t *out, size_t cap)
{
	const void *p;
	ssize_t n;
	Elf *elf;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return 0;
	/* ELF_C_READ: pread on demand, nothing mapped, only the notes are read */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return 0;
	n = elf_kind(elf) == ELF_K_ELF ? dwelf_elf_gnu_build_id(elf, &p) : -1;
	if (n > 0 && (size_t)n <= cap)
		memcpy(out, p, (size_t)n);
	else
		n = 0;
	elf_end(elf);
	return (size_t)n;
}
