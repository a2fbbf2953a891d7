/* SPDX-License-Identifier: MIT */
/*
 * The ELF readers of symbolize/: the input is an ELF file. elf.c parses
 * its program headers and .eh_frame_hdr, from memory (as the vDSO) and
 * through an fd (as a mapped module), and finds FDEs and code bytes;
 * dwsym.c loads it through libdwfl (symbols, ranges, build-id, CFI ranges)
 * and reads DWARF scopes and lines. No debug file is looked for (no
 * debug directories), so nothing outside the input is read.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symbolize/internal.h"
#include "tests/fuzz/fuzz.h"

#define MAX_PROBES 16

static volatile uint64_t sink;

/* Addresses worth asking about: the segments' edges and the first FDEs of the table. */
static size_t probes(struct elf_file *f, uint64_t *out)
{
	size_t n = 0;

	for (size_t i = 0; i < f->nsegs && n + 2 <= MAX_PROBES / 2; i++) {
		out[n++] = f->segs[i].vaddr;
		out[n++] = f->segs[i].vaddr + f->segs[i].filesz / 2;
	}
	for (uint64_t i = 0; i < f->fde_count && n < MAX_PROBES; i++) {
		uint8_t e[4];

		if (elf_file__read(f, f->table_vaddr + i * 8, e, 4))
			break;
		out[n++] = f->hdr_vaddr + (uint64_t)(int64_t)(int32_t)get_le32(e);
	}
	return n;
}

static void elf_file_probe(struct elf_file *f, uint64_t *sum)
{
	uint64_t at[MAX_PROBES], start;
	uint8_t code[16];
	size_t n;

	if (elf_file__parse(f))
		return;
	n = probes(f, at);
	for (size_t i = 0; i < n; i++) {
		if (f->hdr.data && f->eh.data && f->table_vaddr - f->hdr.vaddr <= f->hdr.len &&
		    eh_fde_lookup(f->hdr.data + (f->table_vaddr - f->hdr.vaddr), f->fde_count,
				  f->hdr_vaddr, f->eh.data, f->eh.len, f->eh.vaddr, at[i], &start))
			*sum += start;
		if (!elf_file__read(f, at[i], code, sizeof(code)))
			*sum += code[0] + code[15];
	}
}

static void elf_image_probe(int fd, uint64_t *sum)
{
	struct src_frame src[8];
	struct elf_image img;
	struct strpool pool;
	uint64_t start;

	strpool__init(&pool);
	if (!elf_image__load(&img, fd, "fuzz.elf", -1, NULL, &pool)) {
		for (size_t i = 0; i < img.nranges && i < MAX_PROBES; i++) {
			uint64_t a = img.ranges[i].start;
			const char *name = elf_image__lookup(&img, a);
			size_t k = elf_image__src(&img, a, src, 8, &pool);

			*sum += name ? strlen(name) : 0;
			for (size_t j = 0; j < k; j++)
				*sum += src[j].line + (src[j].name ? strlen(src[j].name) : 0) +
					(src[j].file ? strlen(src[j].file) : 0);
			if (elf_image__fde(&img, a, &start))
				*sum += start;
		}
		for (size_t i = 0; i < img.nloads; i++) {
			uint64_t v;

			if (elf_image__vaddr(&img, img.loads[i].offset, &v))
				*sum += v;
		}
		*sum += img.build_id_size;
		elf_image__free(&img);
	}
	strpool__free(&pool);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t id[BUILD_ID_MAX];
	struct elf_file *f;
	uint64_t sum = 0;
	int fd;

	/* from memory, as the vDSO is read */
	f = elf_file__new();
	if (!f)
		return 0;
	f->mem = data;
	f->mem_size = size;
	elf_file_probe(f, &sum);
	elf_file__free(f);

	fd = memfd_create("fuzz.elf", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		/* through an fd, as a module's pinned file is read */
		f = elf_file__new();
		if (f) {
			f->fd = fd;
			elf_file_probe(f, &sum);
			elf_file__free(f);
		}
		sum += elf_fd_build_id(fd, id, sizeof(id));
		elf_image_probe(fd, &sum);
	}
	close(fd);
	sink = sum;
	return 0;
}
