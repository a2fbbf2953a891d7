/* SPDX-License-Identifier: MIT */
/*
 * The few symbols that make a module an interpreter, from its .dynsym:
 * _PyRuntime (the runtime state), Py_Version, PyCode_Type, _Py_NoneStruct
 * and _PyEval_EvalFrameDefault. Found by name in whatever file holds
 * them (python3.X itself, libpython, an embedding program), never by path.
 * And the parts of _PyEval_EvalFrameDefault the compiler moved apart: its
 * `.cold` symbol where the file keeps a .symtab, else found from the jumps
 * out of its hot part (evalparts.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <string.h>
#include <unistd.h>

#include "python/internal.h"

static void take(struct py_syms *s, const char *name, const GElf_Sym *sym)
{
	if (!strcmp(name, "_PyRuntime")) {
		s->runtime = sym->st_value;
		s->runtime_size = sym->st_size;
	} else if (!strncmp(name, "_PyEval_EvalFrameDefault.cold", 29) && sym->st_size &&
		   GELF_ST_TYPE(sym->st_info) == STT_FUNC && s->nr_cold < PY_EVAL_COLD_MAX) {
		s->cold_lo[s->nr_cold] = sym->st_value;
		s->cold_hi[s->nr_cold++] = sym->st_value + sym->st_size;
	} else if (!strcmp(name, "Py_Version"))
		s->version = sym->st_value;
	else if (!strcmp(name, "PyUnicode_Type"))
		s->str_type = sym->st_value;
	else if (!strcmp(name, "PyBytes_Type"))
		s->bytes_type = sym->st_value;
	else if (!strcmp(name, "PyCode_Type"))
		s->code_type = sym->st_value;
	else if (!strcmp(name, "_Py_NoneStruct"))
		s->none = sym->st_value;
	else if (!strcmp(name, "_PyEval_EvalFrameDefault") &&
		 GELF_ST_TYPE(sym->st_info) == STT_FUNC) {
		s->eval = sym->st_value;
		s->eval_size = sym->st_size;
	}
}

/* The bytes of the section holding [vaddr, vaddr + len), or NULL. */
static const uint8_t *bytes_at(Elf *elf, uint64_t vaddr, uint64_t len)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || vaddr < sh.sh_addr ||
		    vaddr - sh.sh_addr > sh.sh_size || sh.sh_size - (vaddr - sh.sh_addr) < len)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size != sh.sh_size)
			return NULL;
		return (const uint8_t *)d->d_buf + (vaddr - sh.sh_addr);
	}
	return NULL;
}

/* A section's bytes by name, or NULL. */
static const uint8_t *section(Elf *elf, size_t shstrndx, const char *want, uint64_t *vaddr,
			      size_t *size)
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
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size != sh.sh_size)
			return NULL;
		*vaddr = sh.sh_addr;
		*size = sh.sh_size;
		return d->d_buf;
	}
	return NULL;
}

/*
 * The eval function's parts apart, from the jumps out of its hot part,
 * added to those .symtab named (a part entered only through the dispatch
 * table of computed gotos has a name but no direct jump).
 */
static void find_cold(Elf *elf, struct py_syms *out)
{
	uint64_t lo[PY_EVAL_COLD_MAX], hi[PY_EVAL_COLD_MAX];
	struct py_ehframe ef = { 0 };
	const uint8_t *code;
	size_t shstrndx;
	int n;

	if (!out->eval || !out->eval_size || out->eval_size > (1u << 24) ||
	    elf_getshdrstrndx(elf, &shstrndx))
		return;
	code = bytes_at(elf, out->eval, out->eval_size);
	ef.hdr = section(elf, shstrndx, ".eh_frame_hdr", &ef.hdr_vaddr, &ef.hdr_size);
	ef.eh = section(elf, shstrndx, ".eh_frame", &ef.eh_vaddr, &ef.eh_size);
	if (!code || !ef.hdr || !ef.eh)
		return;
	n = py_cold_parts(code, (size_t)out->eval_size, out->eval, &ef, lo, hi, PY_EVAL_COLD_MAX);
	out->eval_decoded = n >= 0;
	for (int i = 0; i < n; i++) {
		bool known = false;

		for (uint32_t j = 0; j < out->nr_cold; j++)
			known |= lo[i] < out->cold_hi[j] && out->cold_lo[j] < hi[i];
		if (!known && out->nr_cold < PY_EVAL_COLD_MAX) {
			out->cold_lo[out->nr_cold] = lo[i];
			out->cold_hi[out->nr_cold++] = hi[i];
		}
	}
}

int py_elf_syms(const char *path, struct py_syms *out)
{
	return py_elf_syms_from(path, out, PY_PARTS_SYMTAB | PY_PARTS_JUMPS);
}

int py_elf_syms_from(const char *path, struct py_syms *out, int parts)
{
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	size_t nph;
	Elf *elf;
	int fd, err = 0;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    elf_getphdrnum(elf, &nph)) {
		err = -ENOEXEC;
		goto out;
	}
	out->is_exec = eh.e_type == ET_EXEC;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
			out->load_vaddr = ph.p_vaddr & ~(uint64_t)0xfff;
			break;
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || !sh.sh_entsize ||
		    (sh.sh_type != SHT_DYNSYM &&
		     (sh.sh_type != SHT_SYMTAB || !(parts & PY_PARTS_SYMTAB))))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		for (size_t k = 0; k < sh.sh_size / sh.sh_entsize; k++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)k, &sym) || !sym.st_value ||
			    sym.st_shndx == SHN_UNDEF)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			/* every name wanted starts with P or _P; .symtab: only the eval's parts */
			if (!name || !(name[0] == 'P' || (name[0] == '_' && name[1] == 'P')))
				continue;
			if (sh.sh_type == SHT_DYNSYM)
				take(out, name, &sym);
			else if (!strncmp(name, "_PyEval_EvalFrameDefault.", 25))
				take(out, name, &sym);
		}
	}
	if (parts & PY_PARTS_JUMPS)
		find_cold(elf, out);
	out->elf_ok = true;
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return err;
}
