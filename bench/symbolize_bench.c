/* SPDX-License-Identifier: MIT */
/*
 * Symbolize 100k distinct addresses spread over libdnnl's code, as a
 * recording of the oneDNN MLP would, and check every name against
 * libdnnl's own .dynsym: a name that is a symbol must be one whose range
 * covers the address. Exits 0 when that holds and the 100k took < 1 s,
 * 1 otherwise (a library that cannot be read included).
 *
 *   symbolize_bench [LIBRARY] [COUNT]
 *   symbolize_bench --linked-by BINARY [COUNT]
 *
 * --linked-by takes the libdnnl that the dynamic linker gives BINARY (the
 * MLP; meson's test does this): libdnnl.so.2.6 on Debian 12, 3.7 on 13.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "symbolize/internal.h"
#include "symbolize/symbolize.h"

#define FAKE_PID 0x7ffffff0u
#define BASE 0x7f0000000000ull

struct fsym {
	uint64_t start, size;
	const char *name; /* demangled like the symbolizer does */
};

static struct fsym *syms;
static size_t nsyms;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void add_sym(uint64_t start, uint64_t size, const char *name)
{
	char buf[DEMANGLED_MAX];
	size_t n = sym_demangle(name, true, buf, sizeof(buf));

	syms = realloc(syms, (nsyms + 1) * sizeof(*syms));
	syms[nsyms++] = (struct fsym){ start, size, strdup(n ? buf : name) };
}

/* Map the PT_LOADs like ld.so does, read the code ranges and the FUNC .dynsym symbols. */
static int load(struct symbolizer *s, const char *path, uint64_t **ranges, size_t *nranges)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf_Scn *scn = NULL;
	size_t phnum;
	Elf *elf;

	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_getphdrnum(elf, &phnum))
		return -ENOEXEC;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		uint64_t start, end;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		start = (BASE + ph.p_vaddr) & ~0xfffull;
		end = (BASE + ph.p_vaddr + ph.p_memsz + 0xfff) & ~0xfffull;
		symbolizer__mmap(s, FAKE_PID, start, end - start, ph.p_offset & ~0xfffull,
				 PROT_READ | ((ph.p_flags & PF_X) ? PROT_EXEC : 0), path);
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if ((sh.sh_flags & SHF_EXECINSTR) && sh.sh_size) {
			*ranges = realloc(*ranges, (*nranges + 2) * sizeof(**ranges));
			(*ranges)[(*nranges)++] = sh.sh_addr;
			(*ranges)[(*nranges)++] = sh.sh_addr + sh.sh_size;
		}
		if (sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 1; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
			    GELF_ST_TYPE(sym.st_info) != STT_FUNC)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (name && *name)
				add_sym(sym.st_value, sym.st_size, name);
		}
	}
	elf_end(elf);
	close(fd);
	return 0;
}

/* Does some symbol called `name` cover vaddr? -1 when no symbol has that name. */
static int covers(const char *name, uint64_t vaddr)
{
	int found = -1;

	for (size_t i = 0; i < nsyms; i++) {
		if (strcmp(syms[i].name, name))
			continue;
		found = 0;
		if (vaddr >= syms[i].start && vaddr - syms[i].start < syms[i].size)
			return 1;
	}
	return found;
}

/* The file behind BINARY's libdnnl.so.N, from ldd (malloc'd), or NULL. */
static char *linked_dnnl(const char *binary)
{
	char *cmd, line[4096], *found = NULL;
	FILE *f;

	if (asprintf(&cmd, "ldd '%s' 2>/dev/null", binary) < 0)
		return NULL;
	f = popen(cmd, "r");
	free(cmd);
	if (!f)
		return NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		char *name = line + strspn(line, " \t"), *path;

		if (strncmp(name, "libdnnl.so.", 11) || !(path = strstr(name, "=> ")))
			continue;
		path += 3;
		path[strcspn(path, " \t\n(")] = '\0';
		found = realpath(path, NULL);
	}
	pclose(f);
	return found;
}

int main(int argc, char **argv)
{
	const char *path;
	char *found = NULL;
	size_t count;

	if (argc > 2 && !strcmp(argv[1], "--linked-by")) {
		path = found = linked_dnnl(argv[2]);
		if (!path) {
			fprintf(stderr, "symbolize_bench: %s links no libdnnl.so.N (ldd)\n",
				argv[2]);
			return 1;
		}
		argv += 2;
		argc -= 2;
	} else {
		path = argc > 1 ? argv[1] : NULL;
		if (!path) {
			fprintf(stderr,
				"usage: symbolize_bench LIBRARY|--linked-by BINARY [COUNT]\n");
			return 2;
		}
		argv++;
		argc--;
	}
	count = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
	struct symbolizer *s = symbolizer__new();
	uint64_t *ranges = NULL, total = 0, *addrs;
	size_t nranges = 0, by_sym = 0, by_cfi = 0, raw = 0, bad = 0, inl = 0;
	struct sym_frame f[16];
	double t0, t_load, t_run, t_cached;
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	char cfi_prefix[256];

	if (!s || access(path, R_OK)) {
		fprintf(stderr, "symbolize_bench: %s: not readable\n", path);
		return 1;
	}
	if (load(s, path, &ranges, &nranges) || !nranges || !count) {
		fprintf(stderr, "symbolize_bench: %s: cannot read\n", path);
		return 1;
	}
	for (size_t i = 0; i < nranges; i += 2)
		total += ranges[i + 1] - ranges[i];
	/* count distinct addresses, evenly spread over the code, odd offsets too */
	addrs = malloc(count * sizeof(*addrs));
	for (size_t k = 0; k < count; k++) {
		uint64_t at = total / count * k + (k * 7919) % (total / count ? total / count : 1);

		for (size_t i = 0; i < nranges; i += 2) {
			if (at < ranges[i + 1] - ranges[i]) {
				addrs[k] = ranges[i] + at;
				break;
			}
			at -= ranges[i + 1] - ranges[i];
		}
	}
	snprintf(cfi_prefix, sizeof(cfi_prefix), "%s+0x", base);

	t0 = now();
	symbolizer__resolve_inline(s, FAKE_PID, BASE + addrs[0], false, false, f, 16);
	t_load = now() - t0;
	t0 = now();
	for (size_t k = 0; k < count; k++)
		symbolizer__resolve_inline(s, FAKE_PID, BASE + addrs[k], false, false, f, 16);
	t_run = now() - t0;
	t0 = now();
	for (size_t k = 0; k < count; k++) {
		size_t n = symbolizer__resolve_inline(s, FAKE_PID, BASE + addrs[k], false, false, f,
						      16);
		const char *name = f[n - 1].name;

		inl += n > 1;
		if (name[0] == '[') {
			raw++;
		} else if (!strncmp(name, cfi_prefix, strlen(cfi_prefix))) {
			by_cfi++;
		} else {
			by_sym++;
			/* a .dynsym name must cover the address; other names come from elsewhere */
			if (covers(name, addrs[k]) == 0) {
				if (bad++ < 5)
					fprintf(stderr,
						"0x%" PRIx64 " named %s, which does not cover it\n",
						addrs[k], name);
			}
		}
	}
	t_cached = now() - t0;
	printf("%s: %zu FUNC symbols, %" PRIu64 " bytes of code\n", path, nsyms, total);
	printf("load %.1f ms; %zu distinct addresses %.3f s (%.2f us each); again, cached %.3f s\n",
	       t_load * 1e3, count, t_run, t_run * 1e6 / (double)count, t_cached);
	printf("named by symbol %zu, by CFI range %zu, by offset %zu, with inline levels %zu; "
	       "symbols not covering their address: %zu\n",
	       by_sym, by_cfi, raw, inl, bad);
	symbolizer__free(s);
	free(addrs);
	free(ranges);
	free(found);
	return bad || t_run >= 1.0 ? 1 : 0;
}
