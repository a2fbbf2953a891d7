/* SPDX-License-Identifier: MIT */
/*
 * Symbol depth, end to end: `dlflame record` on fixtures whose names are
 * known (tests/fixtures/symbolize/symd.c, symd_tmpl.cpp) and on the oneDNN
 * MLP, then `dlflame report --folded`. Inline frames, C++ demangling,
 * binaries deleted or replaced while they run, debug files found by
 * build-id, and no symbol stretched over code it does not cover.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

static char *dir;

static void setup(void)
{
	dir = make_dir();
}

static void teardown(void)
{
	rm_dir(dir);
}

TestSuite(symbols, .init = setup, .fini = teardown, .timeout = 180);

/* Record argv (after "--") with extra env, and return the folded report. */
static char *record_folded(char *const env[], const char *const *cmd)
{
	char *data = path_in(dir, "sym.data");
	const char *argv[16] = {
		need_env("DLFLAME"), "record", "--forward-exit", "-o", data, "--"
	};
	const char *rep[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", NULL };
	struct run_result r;
	size_t n = 6;
	char *out;

	for (; *cmd && n < 15; cmd++)
		argv[n++] = *cmd;
	argv[n] = NULL;
	r = run(dir, env, NULL, argv);
	cr_assert_eq(r.status, 0, "record failed (%d): %s", r.status, r.err);
	run_free(&r);
	r = run(dir, NULL, NULL, rep);
	cr_assert_eq(r.status, 0, "report failed: %s", r.err);
	out = strdup(r.out);
	run_free(&r);
	free(data);
	return out;
}

static void copy_file(const char *from, const char *to)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 755 '%s'", from, to, to);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* An always-inlined loop inside a noinline function: the loop is a frame of its own. */
Test(symbols, inline_frames)
{
	const char *cmd[] = { need_env("FIXTURE_SYMD"), "inline", NULL };
	char *out = record_folded(NULL, cmd);
	unsigned long work, inl, total;

	work = count_frame(out, "symd_work", &total);
	inl = count_chain(out, "symd_work;symd_hot_loop_[i]");
	cr_log_info("symd_work %lu samples, %lu with symd_hot_loop inlined, of %lu", work, inl,
		    total);
	cr_assert_gt(work, 500, "symd_work has %lu of %lu samples:\n%.2000s", work, total, out);
	cr_assert_geq(inl * 100, work * 90,
		      "symd_hot_loop_[i] in %lu of %lu symd_work samples:\n%.2000s", inl, work,
		      out);
	/* the inline frame never stands without the function it was inlined into */
	cr_assert_eq(count_frame(out, "symd_hot_loop_[i]", NULL), inl);
	free(out);
}

Test(symbols, cxx_template_demangled)
{
	const char *tmpl = need_env("FIXTURE_SYMD_TMPL"); /* g++: scripts/setup.sh */
	const char *name = "symd::Accumulator<double>::burn(unsigned long)";
	char *out;
	unsigned long n, total;

	const char *cmd[] = { tmpl, NULL };
	out = record_folded(NULL, cmd);
	n = count_frame(out, name, &total);
	cr_assert_gt(n * 2, total, "%s in %lu of %lu samples:\n%.2000s", name, n, total, out);
	cr_assert_null(strstr(out, "_ZN4symd"), "a mangled name is left:\n%.2000s", out);
	free(out);
}

/* The executable unlinks itself and then burns CPU: the pinned file still names it. */
Test(symbols, deleted_executable_keeps_names)
{
	char *exe = path_in(dir, "symd-selfdel");
	const char *cmd[] = { exe, "selfdel", NULL };
	unsigned long n, total;
	struct stat st;
	char *out;

	copy_file(need_env("FIXTURE_SYMD"), exe);
	out = record_folded(NULL, cmd);
	cr_assert_neq(stat(exe, &st), 0, "the fixture did not delete itself");
	n = count_frame(out, "symd_survivor", &total);
	cr_assert_gt(n * 2, total, "symd_survivor in %lu of %lu samples:\n%.2000s", n, total, out);
	free(out);
	free(exe);
}

/* The executable's path now holds another program: names come from the file that ran. */
Test(symbols, replaced_executable_keeps_names)
{
	char *exe = path_in(dir, "symd-replace"), *other = path_in(dir, "other");
	const char *cmd[] = { exe, "replace", other, NULL };
	unsigned long n, total;
	char *out;

	copy_file(need_env("FIXTURE_SYMD"), exe);
	copy_file("/bin/true", other);
	out = record_folded(NULL, cmd);
	n = count_frame(out, "symd_survivor", &total);
	cr_assert_gt(n * 2, total, "symd_survivor in %lu of %lu samples:\n%.2000s", n, total, out);
	free(out);
	free(exe);
	free(other);
}

static void read_build_id(const char *path, char *hex, size_t size)
{
	char cmd[4096];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "readelf -n '%s' | awk '/Build ID/ { print $3 }'", path);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(hex, (int)size, f), "%s has no build-id", path);
	pclose(f);
	hex[strcspn(hex, "\n")] = '\0';
	cr_assert_geq(strlen(hex), 8, "build-id '%s'", hex);
}

/* No .symtab in the binary, its debug file in a private build-id directory. */
Test(symbols, stripped_binary_debug_file_by_build_id)
{
	char *exe = path_in(dir, "symd-stripped"), *root = path_in(dir, "debug");
	char hex[256], cmd[8192], env_dirs[4096];
	const char *argv[] = { exe, "plain", NULL };
	char *env[] = { env_dirs, NULL };
	unsigned long n, total;
	char *out;

	copy_file(need_env("FIXTURE_SYMD"), exe);
	read_build_id(exe, hex, sizeof(hex));
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s/.build-id/%.2s' && objcopy --only-keep-debug '%s' "
		 "'%s/.build-id/%.2s/%s.debug' && strip --strip-all '%s'",
		 root, hex, exe, root, hex, hex + 2, exe);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "readelf -S '%s' | grep -q symtab", exe);
	cr_assert_neq(system(cmd), 0, "strip left a .symtab");

	/* without the debug directory the function is nameless: the test can fail */
	snprintf(env_dirs, sizeof(env_dirs), "DLFLAME_DEBUG_DIRS=/nonexistent");
	out = record_folded(env, argv);
	cr_assert_eq(count_frame(out, "symd_debug_burn", NULL), 0, "%.2000s", out);
	cr_assert_not_null(strstr(out, "symd-stripped+0x"), "a CFI-range name:\n%.2000s", out);
	free(out);

	snprintf(env_dirs, sizeof(env_dirs), "DLFLAME_DEBUG_DIRS=%s", root);
	out = record_folded(env, argv);
	n = count_frame(out, "symd_debug_burn", &total);
	cr_assert_gt(n * 2, total, "symd_debug_burn in %lu of %lu samples:\n%.2000s", n, total,
		     out);
	free(out);
	free(exe);
	free(root);
}

/*
 * Names of libdnnl's .dynsym symbols that cover no address: zero size, or
 * no type. A frame named after one of them stretched it over code it does
 * not cover (perf's `__itt_pt_write+0x2042`).
 */
static size_t sizeless_symbols(const char *path, char ***out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf_Scn *scn = NULL;
	size_t n = 0;
	Elf *elf;

	*out = NULL;
	if (fd < 0)
		return 0;
	cr_assert_neq(elf_version(EV_CURRENT), EV_NONE);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	cr_assert_not_null(elf);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 1; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			if (sym.st_size && GELF_ST_TYPE(sym.st_info) != STT_NOTYPE)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			*out = realloc(*out, (n + 1) * sizeof(**out));
			(*out)[n++] = strdup(name);
		}
	}
	elf_end(elf);
	close(fd);
	return n;
}

/* The address ranges [lo[i], hi[i]) of the sections named names[0] and names[1] (0, 0 if none). */
static void section_ranges(Elf *elf, size_t shstr, const char *const names[2], uint64_t lo[2],
			   uint64_t hi[2])
{
	Elf_Scn *scn = NULL;

	lo[0] = lo[1] = hi[0] = hi[1] = 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstr, sh.sh_name)))
			continue;
		for (int i = 0; i < 2; i++)
			if (!strcmp(name, names[i])) {
				lo[i] = sh.sh_addr;
				hi[i] = sh.sh_addr + sh.sh_size;
			}
	}
}

/* The C runtime's functions .init_array and .fini_array name: at most max, into at[]. */
#define CRT_FUNCS 64
static size_t crt_functions(Elf *elf, size_t shstr, uint64_t *at, size_t max)
{
	static const char *const arrays[2] = { ".init_array", ".fini_array" };
	uint64_t lo[2], hi[2];
	Elf_Scn *scn = NULL;
	size_t n = 0;

	section_ranges(elf, shstr, arrays, lo, hi);
	/* a shared library's entries are relocations: R_X86_64_RELATIVE, the address in the addend */
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize && n < max; i++) {
			GElf_Rela r;

			if (!gelf_getrela(d, (int)i, &r) ||
			    GELF_R_TYPE(r.r_info) != R_X86_64_RELATIVE)
				continue;
			for (int k = 0; k < 2; k++)
				if (n < max && r.r_offset >= lo[k] && r.r_offset < hi[k])
					at[n++] = (uint64_t)r.r_addend;
		}
	}
	return n;
}

/* Whether no CFI covers any byte from a to b (either order), at most 4 KiB apart. */
static bool no_cfi_between(Dwarf_CFI *cfi, uint64_t a, uint64_t b)
{
	uint64_t from = a < b ? a : b, to = a < b ? b : a;

	if (!cfi || to - from > 4096)
		return false;
	for (uint64_t x = from; x <= to; x++) {
		Dwarf_Frame *f;

		if (!dwarf_cfi_addrframe(cfi, x, &f)) {
			free(f);
			return false;
		}
	}
	return true;
}

/*
 * The [MODULE+0xOFF] leaves of the folded output that are not the C
 * runtime's: its code has no CFI and, in a stripped library, no symbol, so
 * a raw address is the only honest name there. That is crti/crtn's, in
 * .init and .fini (libdnnl's _fini, sampled once in __run_exit_handlers
 * under ASan), and crtstuff's in .text (frame_dummy, register_tm_clones,
 * __do_global_dtors_aux: sampled once while libdnnl was loaded, in a fresh
 * Debian 12 root): a CFI-less stretch around a function that .init_array or
 * .fini_array names. Each other one is appended to bad (size bytes).
 */
static unsigned long raw_leaves_outside_crt(const char *folded, const char *lib, const char *prefix,
					    char *bad, size_t size)
{
	uint64_t crt[CRT_FUNCS];
	size_t ncrt;
	Dwarf_CFI *cfi;
	static const char *const crti[2] = { ".init", ".fini" };
	uint64_t lo[2], hi[2];
	size_t pl = strlen(prefix), shstr, used = strlen(bad);
	unsigned long n = 0;
	int fd = open(lib, O_RDONLY | O_CLOEXEC);
	Elf *elf;

	cr_assert_geq(fd, 0, "%s: %s", lib, strerror(errno));
	cr_assert_neq(elf_version(EV_CURRENT), EV_NONE);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	cr_assert_not_null(elf);
	cr_assert_eq(elf_getshdrstrndx(elf, &shstr), 0);
	section_ranges(elf, shstr, crti, lo, hi);
	ncrt = crt_functions(elf, shstr, crt, CRT_FUNCS);
	cr_assert_gt(ncrt, 0, "%s: no function in .init_array or .fini_array", lib);
	cfi = dwarf_getcfi_elf(elf);
	cr_assert_not_null(cfi, "%s: no .eh_frame", lib);
	for (const char *line = folded; *line;) {
		const char *eol = strchr(line, '\n');
		size_t ll = eol ? (size_t)(eol - line) : strlen(line);
		const char *sp = memrchr(line, ' ', ll);
		const char *leaf = sp ? memrchr(line, ';', (size_t)(sp - line)) : NULL;
		const char *plus;

		leaf = leaf ? leaf + 1 : line;
		if (sp && (size_t)(sp - leaf) >= pl && !memcmp(leaf, prefix, pl)) {
			uint64_t off = 0;
			bool crtstuff = false;

			plus = memchr(leaf, '+', (size_t)(sp - leaf));
			if (plus)
				off = strtoull(plus + 1, NULL, 16);
			for (size_t k = 0; plus && k < ncrt && !crtstuff; k++)
				crtstuff = no_cfi_between(cfi, off, crt[k]);
			if (!plus || (!crtstuff && !((off >= lo[0] && off < hi[0]) ||
						     (off >= lo[1] && off < hi[1])))) {
				n += strtoul(sp + 1, NULL, 10);
				if (used + ll + 2 < size) {
					memcpy(bad + used, line, ll);
					used += ll;
					bad[used++] = '\n';
					bad[used] = '\0';
				}
			}
		}
		line += ll + (eol ? 1 : 0);
	}
	dwarf_cfi_end(cfi);
	elf_end(elf);
	close(fd);
	return n;
}

Test(symbols, mlp_never_stretches_a_symbol, .timeout = 300)
{
	const char *mlp = need_mlp();
	char *lib = linked_library(mlp, "libdnnl.so"), *range;
	char *env[] = { "OMP_NUM_THREADS=1", NULL };
	char **names, *out;
	size_t n;

	n = sizeless_symbols(lib, &names);
	if (!n)
		cr_skip_test("%s has no sizeless symbols to check", lib);
	const char *cmd[] = { mlp, "300", NULL };
	out = record_folded(env, cmd);
	for (size_t i = 0; i < n; i++) {
		cr_expect_eq(count_frame(out, names[i], NULL), 0, "a frame is named %s", names[i]);
		free(names[i]);
	}
	free(names);
	/* internal libdnnl code is named after its CFI range instead */
	cr_assert_gt(asprintf(&range, ";%s+0x", strrchr(lib, '/') + 1), 0);
	cr_expect_not_null(strstr(out, range), "no CFI-range frame (%s) in libdnnl", range + 1);
	free(range);
	/*
	 * A sampled IP is inside some function, so inside its CFI range, or in
	 * the C runtime's code, which has none (raw_leaves_outside_crt). (Caller frames can be
	 * stale words from a frame-pointer walk through code without frame
	 * pointers, padding included, so only leaves are checked.)
	 */
	{
		char bad[3000] = "";

		cr_expect_eq(raw_leaves_outside_crt(out, lib, "[libdnnl.so", bad, sizeof(bad)), 0,
			     "a sampled libdnnl address outside any CFI range:\n%s", bad);
	}
	free(lib);
	free(out);
}
