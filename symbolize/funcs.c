/* SPDX-License-Identifier: MIT */
/*
 * Functions of an ELF file by name, for probes: where a function starts as
 * a file offset (what the uprobe PMU takes), names like it when it is not
 * there, and the libraries the file needs (DT_NEEDED).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdio.h>
#include <unistd.h>

#include "symbolize/internal.h"
#include "symbolize/symbolize.h"

/* Symbol tables larger than this are not a file we probe. */
#define FUNCS_MAX_SYMS (1u << 24)

struct func_file {
	int fd;
	Elf *elf;
};

static int elf_file_open(const char *path, struct func_file *f)
{
	GElf_Ehdr eh;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0)
		return -errno;
	f->elf = elf_begin(f->fd, ELF_C_READ, NULL);
	if (!f->elf || elf_kind(f->elf) != ELF_K_ELF || !gelf_getehdr(f->elf, &eh)) {
		if (f->elf)
			elf_end(f->elf);
		close(f->fd);
		return -ENOEXEC;
	}
	return 0;
}

static void elf_file_close(struct func_file *f)
{
	elf_end(f->elf);
	close(f->fd);
}

/* The file offset of vaddr, from the PT_LOAD segment that maps it. */
static bool vaddr_to_offset(Elf *elf, uint64_t vaddr, uint64_t *off)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return false;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			return true;
		}
	}
	return false;
}

typedef bool (*sym_fn)(void *ctx, const char *name, const GElf_Sym *sym);

/* Each defined function symbol of .symtab, then of .dynsym; fn returns true to stop. */
static void each_function(Elf *elf, sym_fn fn, void *ctx)
{
	static const Elf64_Word kinds[] = { SHT_SYMTAB, SHT_DYNSYM };

	for (size_t k = 0; k < 2; k++) {
		Elf_Scn *scn = NULL;

		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			Elf_Data *data;
			size_t count;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != kinds[k] || !sh.sh_entsize)
				continue;
			data = elf_getdata(scn, NULL);
			count = sh.sh_size / sh.sh_entsize;
			if (!data || count > FUNCS_MAX_SYMS)
				continue;
			for (size_t i = 0; i < count; i++) {
				GElf_Sym sym;
				const char *name;

				if (!gelf_getsym(data, (int)i, &sym) ||
				    GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
				    sym.st_shndx == SHN_UNDEF || !sym.st_value)
					continue;
				name = elf_strptr(elf, sh.sh_link, sym.st_name);
				if (name && fn(ctx, name, &sym))
					return;
			}
		}
	}
}

struct find_ctx {
	const char *want;
	bool want_near; /* names like it are asked for */
	uint64_t vaddr;
	bool found;
	/* names like it, when it is not there */
	char *near[SYM_NEAR_MAX];
	size_t nnear;
};

/* Edit distance of a and b, if both are short; else a large number. */
static size_t distance(const char *a, size_t al, const char *b, size_t bl)
{
	size_t row[65], prev, tmp;

	if (al > 64 || bl > 64)
		return SIZE_MAX;
	for (size_t j = 0; j <= bl; j++)
		row[j] = j;
	for (size_t i = 1; i <= al; i++) {
		prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= bl; j++) {
			tmp = row[j];
			row[j] =
				tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1])
					? prev
					: 1 + (prev < row[j]
						       ? (prev < row[j - 1] ? prev : row[j - 1])
						       : (row[j] < row[j - 1] ? row[j]
									      : row[j - 1]));
			prev = tmp;
		}
	}
	return row[bl];
}

/*
 * A name "like" want: one or two edits away, or it contains want, or want
 * contains it, ignoring case.
 */
static bool alike(const char *name, const char *want)
{
	size_t nl = strlen(name), wl = strlen(want);

	if (distance(name, nl, want, wl) <= (wl > 6 ? 2 : 1))
		return true;
	if (nl < 4 || wl < 4)
		return false;
	for (size_t i = 0; i + wl <= nl; i++)
		if (!strncasecmp(name + i, want, wl))
			return true;
	for (size_t i = 0; i + nl <= wl; i++)
		if (!strncasecmp(want + i, name, nl))
			return true;
	return false;
}

static bool find_one(void *ctx, const char *name, const GElf_Sym *sym)
{
	struct find_ctx *c = ctx;

	if (!strcmp(name, c->want)) {
		c->vaddr = sym->st_value;
		c->found = true;
		return true;
	}
	if (c->want_near && c->nnear < SYM_NEAR_MAX && alike(name, c->want)) {
		for (size_t i = 0; i < c->nnear; i++)
			if (!strcmp(c->near[i], name))
				return false;
		c->near[c->nnear] = strdup(name);
		if (c->near[c->nnear])
			c->nnear++;
	}
	return false;
}

int symbolizer__function_offset(const char *path, const char *name, uint64_t *offset,
				struct sym_near *near)
{
	struct find_ctx c = { .want = name, .want_near = near != NULL };
	struct func_file f;
	int err;

	if (near)
		near->n = 0;
	if (!path || !name || !*name || !offset)
		return -EINVAL;
	err = elf_file_open(path, &f);
	if (err)
		return err;
	each_function(f.elf, find_one, &c);
	if (c.found && !vaddr_to_offset(f.elf, c.vaddr, offset))
		err = -ERANGE;
	else if (!c.found)
		err = -ENOENT;
	elf_file_close(&f);
	for (size_t i = 0; i < c.nnear; i++) {
		if (near && !c.found) {
			size_t len = strlen(c.near[i]);

			if (len >= sizeof(near->names[0]))
				len = sizeof(near->names[0]) - 1;
			memcpy(near->names[near->n], c.near[i], len);
			near->names[near->n++][len] = '\0';
		}
		free(c.near[i]);
	}
	return err;
}

int symbolizer__needed(const char *path, symbolizer_needed_fn fn, void *ctx)
{
	struct func_file f;
	Elf_Scn *scn = NULL;
	int err;

	err = elf_file_open(path, &f);
	if (err)
		return err;
	while ((scn = elf_nextscn(f.elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize && i < 4096; i++) {
			GElf_Dyn dyn;
			const char *lib;

			if (!gelf_getdyn(data, (int)i, &dyn) || dyn.d_tag == DT_NULL)
				break;
			if (dyn.d_tag != DT_NEEDED)
				continue;
			lib = elf_strptr(f.elf, sh.sh_link, dyn.d_un.d_val);
			if (lib && (err = fn(ctx, lib)))
				goto out;
		}
	}
	err = 0;
out:
	elf_file_close(&f);
	return err;
}

/* ---- operator schemas ------------------------------------------------------ */

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

/*
 * The length of "NAME[.OVERLOAD]" if s (n bytes, no NUL in them) is an
 * operator schema, `[aten::]NAME[.OVERLOAD](ARGS) -> RETURNS`, else 0;
 * *skip the bytes of the "aten::" before it.
 */
static size_t schema_name(const char *s, size_t n, size_t *skip)
{
	size_t i = 0, start, dots = 0;

	*skip = 0;
	if (n > 6 && !memcmp(s, "aten::", 6))
		i = *skip = 6;
	start = i;
	if (i >= n || !(ident_char(s[i]) && (s[i] < '0' || s[i] > '9')))
		return 0;
	for (; i < n && s[i] != '('; i++) {
		if (s[i] == '.' && i > start && i + 1 < n && ident_char(s[i + 1]) && !dots++)
			continue;
		if (!ident_char(s[i]))
			return 0;
	}
	if (i >= n || i - start > 200 || s[i - 1] == '.' || !memmem(s + i, n - i, ") -> ", 5))
		return 0;
	return i - start;
}

int symbolizer__op_schemas(const char *path, const char *build_id_hex, symbolizer_schema_fn fn,
			   void *ctx)
{
	struct func_file f;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	int err;

	err = elf_file_open(path, &f);
	if (err)
		return err;
	if (build_id_hex && *build_id_hex) {
		uint8_t id[64];
		char hex[2 * sizeof(id) + 1];
		size_t n = elf_fd_build_id(f.fd, id, sizeof(id));

		for (size_t i = 0; i < n; i++)
			snprintf(hex + 2 * i, 3, "%02x", id[i]);
		hex[2 * n] = '\0';
		if (!n || strcmp(hex, build_id_hex)) {
			err = -ESTALE;
			goto out;
		}
	}
	err = -ENOENT;
	if (elf_getshdrstrndx(f.elf, &shstrndx))
		goto out;
	while ((scn = elf_nextscn(f.elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		const char *name, *s, *end;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		name = elf_strptr(f.elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".rodata"))
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf)
			continue;
		err = 0;
		s = data->d_buf;
		end = s + data->d_size;
		while (s < end && !err) {
			const char *nul = memchr(s, '\0', (size_t)(end - s));
			size_t n = nul ? (size_t)(nul - s) : (size_t)(end - s), skip, len;

			len = n >= 8 ? schema_name(s, n, &skip) : 0;
			if (len)
				err = fn(ctx, s + skip, len);
			s += n + 1;
		}
		break;
	}
out:
	elf_file_close(&f);
	return err;
}

struct prefix_ctx {
	Elf *elf;
	const char *prefix;
	size_t len;
	symbolizer_func_fn fn;
	void *ctx;
	int err;
};

static bool each_prefixed(void *ctx, const char *name, const GElf_Sym *sym)
{
	struct prefix_ctx *c = ctx;
	uint64_t off;

	if (strncmp(name, c->prefix, c->len) || !vaddr_to_offset(c->elf, sym->st_value, &off))
		return false;
	c->err = c->fn(c->ctx, name, off);
	return c->err != 0;
}

int symbolizer__functions_prefixed(const char *path, const char *prefix, symbolizer_func_fn fn,
				   void *ctx)
{
	struct prefix_ctx c = { .prefix = prefix, .len = strlen(prefix), .fn = fn, .ctx = ctx };
	struct func_file f;
	int err;

	if (!path || !prefix || !*prefix)
		return -EINVAL;
	err = elf_file_open(path, &f);
	if (err)
		return err;
	c.elf = f.elf;
	each_function(f.elf, each_prefixed, &c);
	elf_file_close(&f);
	return c.err;
}
