/* SPDX-License-Identifier: MIT */
/*
 * ELF files read by hand, for the unwinder: program headers, code bytes
 * through a small line cache, and the .eh_frame_hdr search table with the
 * .eh_frame it points into, copied out of the file once. Also the decoding
 * of .eh_frame_hdr and of FDEs, which dwsym.c uses on libelf's copy of the
 * same sections. A leaf: calls nothing else in symbolize/.
 *
 * Files are untrusted: every header, count, offset and length is checked
 * before use, and sums are checked for overflow.
 */
#include <dwarf.h> /* DW_EH_PE_* */
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "symbolize/internal.h"
#include "util/util.h"

#define MAX_PHDRS 256
#define MAX_SHDRS 65280
/* .eh_frame_hdr plus .eh_frame kept per file */
#define MAX_TABLES (256ull << 20)

/* ---- .eh_frame_hdr and .eh_frame ---- */

enum {
	PE_ABSPTR = 0x00,
	PE_ULEB128 = 0x01,
	PE_UDATA2 = 0x02,
	PE_UDATA4 = 0x03,
	PE_UDATA8 = 0x04,
	PE_SLEB128 = 0x09,
	PE_SDATA2 = 0x0a,
	PE_SDATA4 = 0x0b,
	PE_SDATA8 = 0x0c,
	PE_PCREL = 0x10,
	PE_DATAREL = 0x30,
	PE_OMIT = 0xff,
};

/* A bounded reader over one section's bytes; vaddr is that of p[0]. */
struct cur {
	const uint8_t *p;
	size_t size, pos;
	uint64_t vaddr;
	bool bad;
};

static uint64_t cur_uint(struct cur *c, size_t n)
{
	uint64_t v = 0;

	if (c->bad || n > c->size - c->pos) {
		c->bad = true;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)c->p[c->pos + i] << (8 * i);
	c->pos += n;
	return v;
}

static uint64_t cur_uleb(struct cur *c, bool is_signed)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (c->bad || c->pos >= c->size || shift > 63) {
			c->bad = true;
			return 0;
		}
		b = c->p[c->pos++];
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (is_signed && shift < 64 && (b & 0x40))
		v |= ~0ull << shift;
	return v;
}

static uint64_t sext(uint64_t v, unsigned bits)
{
	uint64_t m = 1ull << (bits - 1);

	return (v ^ m) - m;
}

/* One pointer in encoding enc; data_vaddr resolves DW_EH_PE_datarel. */
static uint64_t cur_ptr(struct cur *c, uint8_t enc, uint64_t data_vaddr)
{
	uint64_t at = c->vaddr + c->pos, v;

	switch (enc & 0x0f) {
	case PE_ABSPTR:
	case PE_UDATA8:
	case PE_SDATA8:
		v = cur_uint(c, 8);
		break;
	case PE_ULEB128:
		v = cur_uleb(c, false);
		break;
	case PE_SLEB128:
		v = cur_uleb(c, true);
		break;
	case PE_UDATA2:
		v = cur_uint(c, 2);
		break;
	case PE_SDATA2:
		v = sext(cur_uint(c, 2), 16);
		break;
	case PE_UDATA4:
		v = cur_uint(c, 4);
		break;
	case PE_SDATA4:
		v = sext(cur_uint(c, 4), 32);
		break;
	default:
		c->bad = true;
		return 0;
	}
	switch (enc & 0x70) {
	case 0:
		return v;
	case PE_PCREL:
		return v + at;
	case PE_DATAREL:
		return v + data_vaddr;
	default: /* textrel, funcrel, aligned, indirect: not in .eh_frame of x86-64 or arm64 */
		c->bad = true;
		return 0;
	}
}

bool eh_hdr_parse(const uint8_t *p, size_t size, uint64_t vaddr, struct eh_hdr *out)
{
	struct cur c = { .p = p, .size = size, .vaddr = vaddr };
	uint8_t ptr_enc, count_enc, table_enc;

	if (cur_uint(&c, 1) != 1)
		return false;
	ptr_enc = (uint8_t)cur_uint(&c, 1);
	count_enc = (uint8_t)cur_uint(&c, 1);
	table_enc = (uint8_t)cur_uint(&c, 1);
	/* every linker writes sdata4 datarel entries; anything else is not worth a slow path */
	if (c.bad || ptr_enc == PE_OMIT || count_enc == PE_OMIT ||
	    table_enc != (PE_DATAREL | PE_SDATA4))
		return false;
	out->eh_frame_ptr = cur_ptr(&c, ptr_enc, vaddr);
	/* a count is a number, not an address: only its size applies */
	out->fde_count = cur_ptr(&c, count_enc & 0x0f, vaddr);
	out->table_off = c.pos;
	return !c.bad;
}

/* The FDE encoding of the CIE at eh[off], or -1. */
static int cie_fde_encoding(const uint8_t *eh, size_t eh_size, uint64_t eh_vaddr, size_t off)
{
	struct cur c = { .p = eh, .size = eh_size, .pos = off, .vaddr = eh_vaddr };
	uint64_t len = cur_uint(&c, 4), version, aug_len;
	const char *aug;
	size_t aug_end;
	int enc = PE_ABSPTR;

	if (len == 0xffffffffu)
		return -1; /* 64-bit DWARF .eh_frame: not produced for user code */
	if (c.bad || len > c.size - c.pos)
		return -1;
	c.size = c.pos + len;
	if (cur_uint(&c, 4) != 0)
		return -1; /* not a CIE */
	version = cur_uint(&c, 1);
	if (c.bad || (version != 1 && version != 3))
		return -1;
	aug = (const char *)c.p + c.pos;
	if (!memchr(aug, '\0', c.size - c.pos))
		return -1;
	c.pos += strlen(aug) + 1;
	if (strstr(aug, "eh"))
		cur_uint(&c, 8);
	cur_uleb(&c, false); /* code alignment */
	cur_uleb(&c, true); /* data alignment */
	if (version == 1)
		cur_uint(&c, 1);
	else
		cur_uleb(&c, false);
	if (aug[0] != 'z')
		return c.bad ? -1 : enc;
	aug_len = cur_uleb(&c, false);
	if (c.bad || aug_len > c.size - c.pos)
		return -1;
	aug_end = c.pos + aug_len;
	for (const char *a = aug + 1; *a && !c.bad; a++) {
		if (*a == 'R') {
			enc = (int)cur_uint(&c, 1);
			break;
		} else if (*a == 'P') {
			cur_ptr(&c, (uint8_t)cur_uint(&c, 1) & 0x0f, 0);
		} else if (*a == 'L') {
			cur_uint(&c, 1);
		} else if (*a != 'S' && *a != 'B') {
			break;
		}
	}
	if (c.bad || c.pos > aug_end)
		return -1;
	return enc;
}

bool eh_fde_lookup(const uint8_t *table, size_t fde_count, uint64_t hdr_vaddr, const uint8_t *eh,
		   size_t eh_size, uint64_t eh_vaddr, uint64_t vaddr, uint64_t *start)
{
	size_t lo = 0, hi = fde_count, off;
	uint64_t loc, fde_vaddr, len, cie_ptr, begin, range;
	struct cur c;
	int enc;

	if (!table)
		return false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		loc = hdr_vaddr + sext(get_le32(table + mid * 8), 32);
		if (loc <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	loc = hdr_vaddr + sext(get_le32(table + (lo - 1) * 8), 32);
	fde_vaddr = hdr_vaddr + sext(get_le32(table + (lo - 1) * 8 + 4), 32);
	if (fde_vaddr < eh_vaddr || fde_vaddr - eh_vaddr >= eh_size)
		return false;
	off = (size_t)(fde_vaddr - eh_vaddr);
	c = (struct cur){ .p = eh, .size = eh_size, .pos = off, .vaddr = eh_vaddr };
	len = cur_uint(&c, 4);
	if (c.bad || len == 0 || len == 0xffffffffu || len > c.size - c.pos)
		return false;
	c.size = c.pos + len;
	cie_ptr = cur_uint(&c, 4);
	/* the CIE pointer counts back from its own field */
	if (c.bad || cie_ptr == 0 || cie_ptr > off + 4)
		return false;
	enc = cie_fde_encoding(eh, eh_size, eh_vaddr, off + 4 - cie_ptr);
	if (enc < 0)
		return false;
	begin = cur_ptr(&c, (uint8_t)enc, 0);
	range = cur_ptr(&c, (uint8_t)enc & 0x0f, 0);
	/* the table and the FDE must agree, and the FDE must cover the address */
	if (c.bad || begin != loc || vaddr - begin >= range)
		return false;
	*start = begin;
	return true;
}

/* ---- files ---- */

/* Bytes of the file at off; fewer at its end. */
static ssize_t src_pread(const struct elf_file *f, uint64_t off, void *dst, size_t len)
{
	size_t done = 0;

	if (f->mem) {
		if (off >= f->mem_size)
			return 0;
		if (len > f->mem_size - off)
			len = (size_t)(f->mem_size - off);
		memcpy(dst, f->mem + off, len);
		return (ssize_t)len;
	}
	if (off > INT64_MAX - len)
		return -1;
	while (done < len) {
		ssize_t r = pread(f->fd, (uint8_t *)dst + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

static int src_exact(const struct elf_file *f, uint64_t off, void *dst, size_t len)
{
	return src_pread(f, off, dst, len) == (ssize_t)len ? 0 : -1;
}

/*
 * File bytes through a cache of lines: code is read a few bytes at a time
 * (the return-address check reads the 8 bytes before each return address
 * it meets, libunwind the code at an IP), and a pread each was 8% of the
 * recorder's unwinding time with 64 lines a module.
 */
static int read_cached(struct elf_file *f, uint64_t off, uint8_t *dst, size_t len)
{
	if (f->mem) {
		ssize_t n = src_pread(f, off, dst, len);

		if (n < 0)
			return -1;
		memset(dst + n, 0, len - (size_t)n);
		return 0;
	}
	if (!f->text)
		f->text = calloc(1, sizeof(*f->text));
	while (len) {
		uint64_t line = off / ELF_TEXT_LINE;
		size_t slot = (size_t)(line % ELF_TEXT_LINES), at = (size_t)(off % ELF_TEXT_LINE);
		size_t n = ELF_TEXT_LINE - at < len ? ELF_TEXT_LINE - at : len;
		uint8_t buf[ELF_TEXT_LINE], *l = f->text ? f->text->line[slot] : buf;

		if (!f->text || f->text->tag[slot] != line + 1) {
			ssize_t r = src_pread(f, line * ELF_TEXT_LINE, l, ELF_TEXT_LINE);

			if (r < 0)
				return -1;
			/* past the end of the file reads as zeros, as in a mapping */
			memset(l + r, 0, ELF_TEXT_LINE - (size_t)r);
			if (f->text)
				f->text->tag[slot] = line + 1;
		}
		memcpy(dst, l + at, n);
		dst += n;
		off += n;
		len -= n;
	}
	return 0;
}

static const struct elf_seg *load_of(const struct elf_file *f, uint64_t vaddr)
{
	for (size_t i = 0; i < f->nsegs; i++) {
		const struct elf_seg *l = &f->segs[i];

		if (vaddr >= l->vaddr && vaddr - l->vaddr < l->filesz)
			return l;
	}
	return NULL;
}

int elf_file__read_segs(struct elf_file *f, uint64_t vaddr, void *dst, size_t len)
{
	const struct elf_seg *l = load_of(f, vaddr);

	if (!l)
		return -1;
	return read_cached(f, l->off + (vaddr - l->vaddr), dst, len);
}

/* Copy [vaddr, vaddr + len) out of the file, widened to whole words. */
static int load_buf(struct elf_file *f, struct elf_buf *b, uint64_t vaddr, uint64_t len)
{
	const struct elf_seg *l = load_of(f, vaddr);
	uint64_t start = vaddr & ~7ull, end;
	ssize_t r;

	if (!l || !len || len > MAX_TABLES)
		return -EINVAL;
	if (len > l->filesz - (vaddr - l->vaddr))
		len = l->filesz - (vaddr - l->vaddr);
	if (start < l->vaddr)
		start = vaddr;
	/* a segment ending in the last word of the address space would wrap end */
	if (vaddr + len > UINT64_MAX - 7)
		return -EINVAL;
	end = (vaddr + len + 7) & ~7ull;
	b->data = malloc(end - start);
	if (!b->data)
		return -ENOMEM;
	r = src_pread(f, l->off + (start - l->vaddr), b->data, end - start);
	if (r < (ssize_t)(vaddr + len - start)) {
		free(b->data);
		b->data = NULL;
		return -EIO;
	}
	memset(b->data + r, 0, (size_t)(end - start) - (size_t)r);
	b->vaddr = start;
	b->len = end - start;
	return 0;
}

/* Address and size of the section called name, from the section headers. */
static bool find_section(struct elf_file *f, const Elf64_Ehdr *eh, const char *name, uint64_t *addr,
			 uint64_t *size)
{
	size_t nlen = strlen(name) + 1;
	Elf64_Shdr strtab, sh;
	char buf[32];

	if (!eh->e_shoff || eh->e_shentsize != sizeof(Elf64_Shdr) || !eh->e_shnum ||
	    eh->e_shnum > MAX_SHDRS || eh->e_shstrndx >= eh->e_shnum || nlen > sizeof(buf))
		return false;
	if (src_exact(f, eh->e_shoff + (uint64_t)eh->e_shstrndx * sizeof(sh), &strtab,
		      sizeof(strtab)))
		return false;
	for (unsigned i = 1; i < eh->e_shnum; i++) {
		if (src_exact(f, eh->e_shoff + (uint64_t)i * sizeof(sh), &sh, sizeof(sh)))
			return false;
		if (sh.sh_name >= strtab.sh_size || strtab.sh_size - sh.sh_name < nlen ||
		    src_exact(f, strtab.sh_offset + sh.sh_name, buf, nlen))
			continue;
		if (!memcmp(buf, name, nlen) && sh.sh_type != SHT_NOBITS) {
			*addr = sh.sh_addr;
			*size = sh.sh_size;
			return true;
		}
	}
	return false;
}

int elf_file__parse(struct elf_file *f)
{
	uint64_t hdr_vaddr = 0, hdr_size = 0, eh_vaddr, eh_size, sec_addr, sec_size, fde_count;
	bool has_hdr = false;
	uint8_t h[4 + 8 + 8];
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	struct eh_hdr hh;
	size_t at;
	int err;

	if (src_exact(f, 0, &eh, sizeof(eh)) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_machine != EM_X86_64 || eh.e_phentsize != sizeof(ph) || !eh.e_phnum ||
	    eh.e_phnum > MAX_PHDRS)
		return -ENOEXEC;
	f->lo = UINT64_MAX;
	f->entry = eh.e_entry;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		uint64_t end;

		if (src_exact(f, eh.e_phoff + (uint64_t)i * sizeof(ph), &ph, sizeof(ph)))
			return -ENOEXEC;
		if (ph.p_type == PT_GNU_EH_FRAME) {
			hdr_vaddr = ph.p_vaddr;
			hdr_size = ph.p_filesz;
			has_hdr = true;
		}
		if (ph.p_type != PT_LOAD || f->nsegs == ELF_FILE_SEGS || !ph.p_memsz ||
		    __builtin_add_overflow(ph.p_vaddr, ph.p_memsz, &end) ||
		    ph.p_filesz > ph.p_memsz)
			continue;
		f->segs[f->nsegs++] = (struct elf_seg){ .off = ph.p_offset,
							.filesz = ph.p_filesz,
							.vaddr = ph.p_vaddr,
							.flags = ph.p_flags };
		if (ph.p_vaddr < f->lo)
			f->lo = ph.p_vaddr;
		if (end > f->hi)
			f->hi = end;
	}
	if (!f->nsegs)
		return -ENOEXEC;
	if (!has_hdr || hdr_size < 4)
		return 0; /* no CFI: unwinding stops in this module */

	/* the table must be the binary-search table libunwind reads: datarel sdata4 pairs */
	if (elf_file__read(f, hdr_vaddr, h, sizeof(h)) || (h[1] & DW_EH_PE_indirect) ||
	    !eh_hdr_parse(h, sizeof(h), hdr_vaddr, &hh))
		return 0;
	eh_vaddr = hh.eh_frame_ptr;
	fde_count = hh.fde_count;
	at = hh.table_off;
	f->hdr_vaddr = hdr_vaddr;
	f->table_vaddr = hdr_vaddr + at;
	if (find_section(f, &eh, ".eh_frame", &sec_addr, &sec_size) && sec_addr == eh_vaddr) {
		eh_size = sec_size;
	} else {
		const struct elf_seg *l = load_of(f, eh_vaddr);

		if (!l)
			return 0;
		eh_size = l->filesz - (eh_vaddr - l->vaddr);
	}
	err = load_buf(f, &f->hdr, hdr_vaddr, hdr_size);
	if (!err)
		err = load_buf(f, &f->eh, eh_vaddr, eh_size);
	if (err) {
		free(f->hdr.data);
		free(f->eh.data);
		f->hdr.data = f->eh.data = NULL;
		return err == -ENOMEM ? err : 0;
	}
	/* a count the table cannot hold is cut to what it holds */
	if (f->table_vaddr < f->hdr.vaddr || f->table_vaddr - f->hdr.vaddr > f->hdr.len)
		return 0;
	if (fde_count > (f->hdr.len - (f->table_vaddr - f->hdr.vaddr)) / 8)
		fde_count = (f->hdr.len - (f->table_vaddr - f->hdr.vaddr)) / 8;
	f->fde_count = fde_count;
	return 0;
}

/* The start of search-table entry i (a link-time address), false if unreadable. */
static bool fde_entry_start(struct elf_file *f, uint64_t i, uint64_t *start)
{
	uint8_t e[4];

	if (elf_file__read(f, f->table_vaddr + i * 8, e, sizeof(e)))
		return false;
	*start = f->hdr_vaddr + sext(get_le32(e), 32);
	return true;
}

/* Whether entry i is the last whose start is at or below vaddr. */
static bool fde_entry_is(struct elf_file *f, uint64_t i, uint64_t vaddr)
{
	uint64_t start, next;

	return i < f->fde_count && fde_entry_start(f, i, &start) && start <= vaddr &&
	       (i + 1 == f->fde_count || (fde_entry_start(f, i + 1, &next) && next > vaddr));
}

/*
 * A binary search of an 11 MB table (libtorch's) misses the cache at
 * every probe; the unwinder asks again and again about the same hot code.
 * Each 64-byte slot of code remembers the entry last found for it, and a
 * remembered entry is used only after it is checked to be the one a
 * search would find.
 */
int64_t elf_file__fde_index(struct elf_file *f, uint64_t vaddr)
{
	uint32_t *hint = &f->fde_hint[(vaddr >> 6) % ELF_FDE_HINTS];
	uint32_t h = __atomic_load_n(hint, __ATOMIC_RELAXED);
	uint64_t lo = 0, hi = f->fde_count, start;

	if (h && fde_entry_is(f, h - 1, vaddr))
		return h - 1;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (!fde_entry_start(f, mid, &start))
			return -1;
		if (start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return -1;
	if (lo <= UINT32_MAX - 1)
		__atomic_store_n(hint, (uint32_t)lo, __ATOMIC_RELAXED);
	return (int64_t)lo - 1;
}

void elf_file__free(struct elf_file *f)
{
	if (!f)
		return;
	if (f->own_fd)
		close(f->fd);
	free(f->hdr.data);
	free(f->eh.data);
	free(f->text);
	free(f);
}

struct elf_file *elf_file__new(void)
{
	struct elf_file *f = calloc(1, sizeof(*f));

	if (f)
		f->fd = -1;
	return f;
}

/* Our own vDSO: the kernel maps the same image into every process. */
struct elf_file *elf_file__vdso(void)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
	struct elf_file *f;
	uint64_t size = 0;

	if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_phentsize != sizeof(Elf64_Phdr))
		return NULL;
	for (unsigned i = 0; i < eh->e_phnum && i < MAX_PHDRS; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)((const uint8_t *)eh + eh->e_phoff) + i;

		if (ph->p_type == PT_LOAD && ph->p_offset + ph->p_filesz > size)
			size = ph->p_offset + ph->p_filesz;
	}
	f = elf_file__new();
	if (!f)
		return NULL;
	f->mem = (const uint8_t *)eh;
	f->mem_size = size;
	f->err = size ? elf_file__parse(f) : -ENOEXEC;
	return f;
}
