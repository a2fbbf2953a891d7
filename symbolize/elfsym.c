/* SPDX-License-Identifier: MIT */
/*
 * Function symbols of one ELF file (.symtab and .dynsym) through libelf,
 * turned into disjoint address ranges.
 *
 * The file is untrusted: every offset and size that libelf hands back is
 * checked against the file size before its data is read, and the file is
 * read with ELF_C_READ (pread on demand, no mapping), so a file truncated
 * while we read it gives an error, not SIGBUS.
 */
#include "symbolize/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

/* Real files have a handful of PT_LOADs; more is a hostile file. */
#define MAX_LOADS 64
/* Bounds the temporary symbol array (32 bytes each) for a huge or hostile file. */
#define MAX_SYMS (8u << 20)

struct sym {
	uint64_t start;
	uint64_t end; /* exclusive; start + 1 for a zero-size symbol */
	const char *name;
	uint32_t len;
	uint32_t rank; /* 0 GLOBAL, 1 WEAK, 2 LOCAL, 3 other */
};

struct xrange {
	uint64_t start, end;
};

struct loader {
	Elf *elf;
	uint64_t file_size;
	struct xrange *xr; /* executable sections, sorted, merged */
	size_t nxr, xr_cap;
	struct sym *syms;
	size_t nsyms, syms_cap;
	struct strpool *pool;
};

static bool in_file(const struct loader *ld, uint64_t off, uint64_t size)
{
	return off <= ld->file_size && size <= ld->file_size - off;
}

static int read_loads(struct loader *ld, struct elf_image *img)
{
	GElf_Ehdr eh;
	size_t phnum, i;
	uint64_t bytes;

	if (!gelf_getehdr(ld->elf, &eh))
		return -ENOEXEC;
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
		return -ENOEXEC;
	if (elf_getphdrnum(ld->elf, &phnum) || phnum == 0 || phnum > INT_MAX)
		return -ENOEXEC;
	if (eh.e_phentsize != gelf_fsize(ld->elf, ELF_T_PHDR, 1, EV_CURRENT))
		return -ENOEXEC;
	if (__builtin_mul_overflow((uint64_t)phnum, (uint64_t)eh.e_phentsize, &bytes) ||
	    !in_file(ld, eh.e_phoff, bytes))
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

static bool strtab_ok(struct loader *ld, size_t link, size_t shnum)
{
	Elf_Scn *scn;
	GElf_Shdr sh;

	if (link == 0 || link >= shnum)
		return false;
	scn = elf_getscn(ld->elf, link);
	if (!scn || !gelf_getshdr(scn, &sh))
		return false;
	return sh.sh_type == SHT_STRTAB && in_file(ld, sh.sh_offset, sh.sh_size);
}

static int read_symtab(struct loader *ld, Elf_Scn *scn, const GElf_Shdr *sh, size_t shnum)
{
	size_t entsize = gelf_fsize(ld->elf, ELF_T_SYM, 1, EV_CURRENT);
	Elf_Data *data;
	size_t n, i;

	/* A bad symbol table is skipped; the other one may still be good. */
	if (!entsize || sh->sh_entsize != entsize || !in_file(ld, sh->sh_offset, sh->sh_size))
		return 0;
	if (!strtab_ok(ld, sh->sh_link, shnum))
		return 0;
	data = elf_getdata(scn, NULL);
	if (!data || !data->d_buf)
		return 0;
	n = sh->sh_size / entsize;
	if (n > INT_MAX)
		n = INT_MAX;

	for (i = 1; i < n; i++) {
		GElf_Sym sym;
		const char *name;
		unsigned char type;
		uint64_t end;
		size_t len;

		if (!gelf_getsym(data, (int)i, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		if (sym.st_shndx == SHN_UNDEF || !in_exec_section(ld, sym.st_value))
			continue;
		/* a zero-size symbol names its own address only */
		if (__builtin_add_overflow(sym.st_value, sym.st_size ? sym.st_size : 1, &end))
			continue;
		name = elf_strptr(ld->elf, sh->sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		len = strnlen(name, SYM_NAME_MAX);
		if (ld->nsyms >= MAX_SYMS)
			return 0;
		if (grow_array((void **)&ld->syms, &ld->syms_cap, ld->nsyms + 1, sizeof(*ld->syms)))
			return -ENOMEM;
		name = strpool__intern(ld->pool, name, len);
		if (!name)
			return -ENOMEM;
		ld->syms[ld->nsyms++] = (struct sym){
			.start = sym.st_value,
			.end = end,
			.name = name,
			.len = (uint32_t)len,
			.rank = bind_rank(GELF_ST_BIND(sym.st_info)),
		};
	}
	return 0;
}

static int read_symbols(struct loader *ld)
{
	Elf_Scn *scn = NULL;
	size_t shnum;
	int err;

	if (elf_getshdrnum(ld->elf, &shnum))
		return 0;
	err = read_exec_sections(ld);
	if (err || !ld->nxr)
		return err;
	while ((scn = elf_nextscn(ld->elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)
			continue;
		err = read_symtab(ld, scn, &sh, shnum);
		if (err)
			return err;
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
	uint64_t cur = 0;
	size_t *heap;
	int err = 0;

	if (!n)
		return 0;
	qsort(ld->syms, n, sizeof(*ld->syms), cmp_sym);
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

int elf_image__load(struct elf_image *img, const char *path, struct strpool *pool)
{
	struct loader ld = { .pool = pool };
	struct stat st;
	int fd, err;

	memset(img, 0, sizeof(*img));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto out_close;
	}
	err = -EINVAL;
	if (!S_ISREG(st.st_mode))
		goto out_close;
	ld.file_size = (uint64_t)st.st_size;

	err = -ENOEXEC;
	ld.elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!ld.elf)
		goto out_close;
	if (elf_kind(ld.elf) != ELF_K_ELF)
		goto out_end;
	err = read_loads(&ld, img);
	if (err)
		goto out_end;
	err = read_symbols(&ld);
	if (err)
		goto out_end;
	err = build_ranges(&ld, img);
out_end:
	elf_end(ld.elf);
out_close:
	close(fd);
	free(ld.syms);
	free(ld.xr);
	if (err)
		elf_image__free(img);
	return err;
}

void elf_image__free(struct elf_image *img)
{
	if (!img)
		return;
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
