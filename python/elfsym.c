/* SPDX-License-Identifier: MIT */
/*
 * The few symbols that make a module an interpreter, from its .dynsym:
 * _PyRuntime (the runtime state), Py_Version, PyCode_Type, _Py_NoneStruct
 * and _PyEval_EvalFrameDefault. Found by name in whatever file holds
 * them (python3.X itself, libpython, an embedding program), never by path.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "python/internal.h"

static void take(struct py_syms *s, const char *name, const GElf_Sym *sym)
{
	if (!strcmp(name, "_PyRuntime"))
		s->runtime = sym->st_value;
	else if (!strcmp(name, "Py_Version"))
		s->version = sym->st_value;
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

int py_elf_syms(const char *path, uint64_t ino, struct py_syms *out)
{
	Elf_Scn *scn = NULL;
	struct stat st;
	GElf_Ehdr eh;
	size_t nph;
	Elf *elf = NULL;
	int fd, err = 0;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (ino && (uint64_t)st.st_ino != ino)) {
		err = -ESTALE; /* not the file the process mapped */
		goto out;
	}
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

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
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
			/* every name wanted starts with P or _P */
			if (name && (name[0] == 'P' || (name[0] == '_' && name[1] == 'P')))
				take(out, name, &sym);
		}
	}
	out->elf_ok = true;
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return err;
}
