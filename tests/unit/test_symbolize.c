/* SPDX-License-Identifier: MIT */
/*
 * symbolize/: process maps, ELF symbol lookup, kallsyms.
 *
 * Real files throughout: tests/fixtures/symbolize/symfix.c and symd.c are
 * compiled here with cc (PIE, -no-pie, stripped, with debug files) and run,
 * and their maps are read from /proc; the test binary and the C library it
 * runs on are resolved in place.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "symbolize/internal.h" /* sym_demangle */
#include "symbolize/symbolize.h"

#ifndef FIXTURES_SRC
#error "FIXTURES_SRC must name tests/fixtures"
#endif

/* pids that cannot exist (above PID_MAX_LIMIT), so /proc fallbacks find nothing */
#define FAKE_PID 0x7ffffff0u

static char tmpdir[64];

static void setup(void)
{
	strcpy(tmpdir, "/tmp/dlflame-symtest-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		cr_log_warn("could not remove %s", tmpdir);
}

TestSuite(symbolize, .init = setup, .fini = teardown, .timeout = 60);

static void tmp_path(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", tmpdir, name);
}

static void build_fixture(const char *name, const char *flags, char *out, size_t size)
{
	char cmd[1024];

	tmp_path(out, size, name);
	snprintf(cmd, sizeof(cmd), "cc -O1 %s -o '%s' '%s/symbolize/symfix.c'", flags, out,
		 FIXTURES_SRC);
	cr_assert_eq(system(cmd), 0, "cannot compile the fixture: %s", cmd);
}

static void write_file(const char *path, const void *data, size_t len);

static void write_str(const char *path, const char *text)
{
	write_file(path, text, strlen(text));
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

static void *read_file(const char *path, size_t *len)
{
	struct stat st;
	void *buf;
	FILE *f = fopen(path, "rb");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fstat(fileno(f), &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	fclose(f);
	*len = (size_t)st.st_size;
	return buf;
}

/* Feed /proc/PID/maps to the symbolizer as MMAP2 records would. */
static int feed_maps(struct symbolizer *s, pid_t pid)
{
	char path[64], line[8192];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end, off;
		char perms[5];
		uint32_t prot = 0;
		int pos = -1;
		char *name;

		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %*s %*s%n", &start, &end,
			   perms, &off, &pos) != 4 ||
		    pos < 0)
			continue;
		name = line + pos;
		name += strspn(name, " \t");
		prot |= strchr(perms, 'r') ? PROT_READ : 0;
		prot |= strchr(perms, 'w') ? PROT_WRITE : 0;
		prot |= strchr(perms, 'x') ? PROT_EXEC : 0;
		cr_assert_eq(
			symbolizer__mmap(s, (uint32_t)pid, start, end - start, off, prot, name), 0);
		n++;
	}
	fclose(f);
	return n;
}

static void expect(struct symbolizer *s, uint32_t pid, uint64_t addr, bool ret, const char *name,
		   const char *module)
{
	struct sym_frame f;

	memset(&f, 0x5a, sizeof(f));
	symbolizer__resolve(s, pid, addr, false, ret, &f);
	cr_assert_not_null(f.name);
	cr_assert_not_null(f.module);
	cr_expect_str_eq(f.name, name, "addr 0x%" PRIx64 "%s: name '%s', want '%s'", addr,
			 ret ? " (return)" : "", f.name, name);
	if (module)
		cr_expect_str_eq(f.module, module, "addr 0x%" PRIx64 ": module '%s', want '%s'",
				 addr, f.module, module);
	cr_expect_eq(f.kind, FRAME_USER);
}

static void map(struct symbolizer *s, uint32_t pid, uint64_t start, uint64_t end, uint64_t pgoff,
		const char *name)
{
	cr_assert_eq(
		symbolizer__mmap(s, pid, start, end - start, pgoff, PROT_READ | PROT_EXEC, name),
		0);
}

/* Anonymous memory, not executable (executable anonymous memory is JIT code). */
static void map_data(struct symbolizer *s, uint32_t pid, uint64_t start, uint64_t end,
		     const char *name)
{
	cr_assert_eq(symbolizer__mmap(s, pid, start, end - start, 0, PROT_READ | PROT_WRITE, name),
		     0);
}

static void expect_kernel(struct symbolizer *s, uint64_t addr, bool ret, const char *name,
			  const char *module)
{
	struct sym_frame f;

	symbolizer__resolve(s, 1, addr, true, ret, &f);
	cr_expect_str_eq(f.name, name, "kernel 0x%" PRIx64 ": name '%s', want '%s'", addr, f.name,
			 name);
	cr_expect_str_eq(f.module, module, "kernel 0x%" PRIx64 ": module '%s', want '%s'", addr,
			 f.module, module);
	cr_expect_eq(f.kind, FRAME_KERNEL);
}

/* ---- a running fixture ---- */

struct child {
	pid_t pid;
	int in_fd;
	uint64_t bias;
	struct {
		char name[32];
		uint64_t addr;
	} syms[16];
	int nsyms;
};

/* Start the fixture at path (with arg, if any) on pipes; its stdout, to read. */
static FILE *start_child(const char *path, const char *arg, struct child *c)
{
	int in[2], out[2];
	FILE *f;

	memset(c, 0, sizeof(*c));
	cr_assert_eq(pipe(in), 0);
	cr_assert_eq(pipe(out), 0);
	c->pid = fork();
	cr_assert_geq(c->pid, 0);
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(path, path, arg, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->in_fd = in[1];
	f = fdopen(out[0], "r");
	cr_assert_not_null(f);
	return f;
}

static void spawn(const char *path, struct child *c)
{
	FILE *f = start_child(path, NULL, c);
	char line[256];

	while (fgets(line, sizeof(line), f)) {
		char name[32];
		void *p;

		if (!strcmp(line, "end\n"))
			break;
		cr_assert_eq(sscanf(line, "%31s %p", name, &p), 2, "fixture said '%s'", line);
		if (!strcmp(name, "bias")) {
			c->bias = (uint64_t)(uintptr_t)p;
			continue;
		}
		cr_assert_lt(c->nsyms, 16);
		strcpy(c->syms[c->nsyms].name, name);
		c->syms[c->nsyms++].addr = (uint64_t)(uintptr_t)p;
	}
	fclose(f);
	cr_assert_gt(c->nsyms, 0, "the fixture printed nothing");
}

static uint64_t child_sym(const struct child *c, const char *name)
{
	for (int i = 0; i < c->nsyms; i++) {
		if (!strcmp(c->syms[i].name, name))
			return c->syms[i].addr;
	}
	cr_assert_fail("fixture did not print %s", name);
	return 0;
}

static void reap(struct child *c)
{
	int status;

	close(c->in_fd);
	cr_assert_eq(waitpid(c->pid, &status, 0), c->pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* "[base+0xVADDR]" for a runtime address of the fixture */
static const char *offset_name(char *buf, size_t size, const char *base, const struct child *c,
			       uint64_t addr)
{
	snprintf(buf, size, "[%s+0x%" PRIx64 "]", base, addr - c->bias);
	return buf;
}

static void check_fixture(struct symbolizer *s, const struct child *c, const char *base,
			  bool stripped)
{
	uint32_t pid = (uint32_t)c->pid;
	uint64_t f = child_sym(c, "symfix_f"), g = child_sym(c, "symfix_g");
	uint64_t zero = child_sym(c, "symfix_zero"), gap = child_sym(c, "symfix_gap");
	uint64_t outer = child_sym(c, "symfix_outer");
	uint64_t sized = child_sym(c, "symfix_sized"), mid = child_sym(c, "symfix_mid");
	char buf[128];

	cr_assert_eq(g, f + 8, "fixture layout changed");
	expect(s, pid, child_sym(c, "symfix_c_func"), false, "symfix_c_func", base);
	expect(s, pid, child_sym(c, "symfix_c_func") + 2, false, "symfix_c_func", base);
	expect(s, pid, f, false, "symfix_f", base);
	expect(s, pid, f + 7, false, "symfix_f", base);
	/* the end of f is the start of g, unless it is a return address */
	expect(s, pid, f + 8, false, "symfix_g", base);
	expect(s, pid, f + 8, true, "symfix_f", base);
	expect(s, pid, g + 2, true, "symfix_g", base);
	/*
	 * a zero-size symbol: from .symtab, where every function has a symbol,
	 * it names the code up to the next symbol (as perf and addr2line do);
	 * from .dynsym, where internal code has none, its own address only
	 */
	cr_assert_eq(gap, zero + 5, "fixture layout changed");
	expect(s, pid, zero, false, "symfix_zero", base);
	expect(s, pid, zero + 1, false,
	       stripped ? offset_name(buf, sizeof(buf), base, c, zero + 1) : "symfix_zero", base);
	expect(s, pid, zero + 4, false,
	       stripped ? offset_name(buf, sizeof(buf), base, c, zero + 4) : "symfix_zero", base);
	if (!stripped)
		expect(s, pid, zero + 5, true, "symfix_zero", base);
	/* inside a sized symbol it stretches to that symbol's end, never over the padding after */
	cr_assert_eq(mid, sized + 1, "fixture layout changed");
	expect(s, pid, mid, false, "symfix_mid", base);
	expect(s, pid, mid + 1, false, stripped ? "symfix_sized" : "symfix_mid", base);
	expect(s, pid, sized + 3, false, offset_name(buf, sizeof(buf), base, c, sized + 3), base);
	expect(s, pid, sized + 6, false, offset_name(buf, sizeof(buf), base, c, sized + 6), base);
	/* a symbol is never stretched over the gap after it */
	expect(s, pid, gap, false, "symfix_gap", base);
	expect(s, pid, gap + 1, true, "symfix_gap", base);
	expect(s, pid, gap + 1, false, offset_name(buf, sizeof(buf), base, c, gap + 1), base);
	expect(s, pid, gap + 8, false, offset_name(buf, sizeof(buf), base, c, gap + 8), base);
	/* aliases: GLOBAL over WEAK over LOCAL even when longer, then the shortest, then bytewise */
	expect(s, pid, child_sym(c, "symfix_alias_global"), false, "symfix_alias_global", base);
	expect(s, pid, child_sym(c, "symfix_aa") + 1, false, "symfix_aa", base);
	/* a nested symbol wins inside its own range only (locals are gone when stripped) */
	expect(s, pid, outer + 1, false, "symfix_outer", base);
	expect(s, pid, outer + 2, false, stripped ? "symfix_outer" : "symfix_inner", base);
	expect(s, pid, outer + 3, false, stripped ? "symfix_outer" : "symfix_inner", base);
	expect(s, pid, outer + 4, false, "symfix_outer", base);
	expect(s, pid, outer + 6, false, "symfix_outer", base);
	/* a function symbol outside any executable section names nothing */
	expect(s, pid, child_sym(c, "symfix_datafunc") + 4, false,
	       offset_name(buf, sizeof(buf), base, c, child_sym(c, "symfix_datafunc") + 4), base);
	/* non-file mappings */
	expect(s, pid, child_sym(c, "stack"), false, "[unknown]", "");
	expect(s, pid, 0x10, false, "[unknown]", "");
}

static void run_fixture(const char *name, const char *flags, bool stripped, bool feed)
{
	struct symbolizer *s = symbolizer__new();
	char path[256];
	struct child c;

	cr_assert_not_null(s);
	build_fixture(name, flags, path, sizeof(path));
	spawn(path, &c);
	if (feed)
		cr_assert_gt(feed_maps(s, c.pid), 0);
	check_fixture(s, &c, name, stripped);
	cr_expect_eq(symbolizer__stats(s)->modules_loaded, 1);
	cr_expect_eq(symbolizer__stats(s)->modules_failed, 0);
	/* fed: one read for the unmapped 0x10; not fed: one read at the first address */
	cr_expect_eq(symbolizer__stats(s)->proc_maps_fallbacks, 1, "fallbacks: %" PRIu64,
		     symbolizer__stats(s)->proc_maps_fallbacks);
	reap(&c);
	symbolizer__free(s);
}

Test(symbolize, fixture_pie)
{
	run_fixture("symfix-pie", "-pie -fPIE", false, true);
}

Test(symbolize, fixture_no_pie)
{
	run_fixture("symfix-nopie", "-no-pie -fno-pie", false, true);
}

Test(symbolize, fixture_stripped_dynsym_only)
{
	run_fixture("symfix-stripped", "-rdynamic -s", true, true);
}

/* Without MMAP records the symbolizer reads /proc/PID/maps itself, once. */
Test(symbolize, proc_maps_fallback)
{
	run_fixture("symfix-fallback", "", false, false);
}

/* /proc fills only the gaps: mappings from records stay, even where they split a /proc entry. */
Test(symbolize, proc_maps_fallback_keeps_records)
{
	struct symbolizer *s = symbolizer__new();
	char path[256], buf[128];
	struct child c;
	uint64_t f, text;
	uint32_t pid;

	build_fixture("symfix-merge", "-pie -fPIE", path, sizeof(path));
	spawn(path, &c);
	pid = (uint32_t)c.pid;
	f = child_sym(&c, "symfix_f");
	text = f & ~0xfffull;
	cr_assert_eq(text - c.bias, 0x1000, "fixture layout changed");
	map(s, pid, text - 0x800, text + 0x100, 0, "/nonexistent/x.so");

	expect(s, pid, text + 0x50, false, "[x.so+0x850]", "x.so");
	cr_expect_eq(symbolizer__stats(s)->proc_maps_fallbacks, 0);
	/* a miss: /proc is read, and the rest of the text mapping gets a shifted pgoff */
	expect(s, pid, f, false, "symfix_f", "symfix-merge");
	cr_expect_eq(symbolizer__stats(s)->proc_maps_fallbacks, 1);
	expect(s, pid, child_sym(&c, "symfix_c_func"), false, "symfix_c_func", "symfix-merge");
	expect(s, pid, text - 0x900, false,
	       offset_name(buf, sizeof(buf), "symfix-merge", &c, text - 0x900), "symfix-merge");
	expect(s, pid, text + 0xff, false, "[x.so+0x8ff]", "x.so");
	expect(s, pid, text - 0x800, false, "[x.so+0x0]", "x.so");
	expect(s, pid, child_sym(&c, "stack"), false, "[unknown]", "");
	cr_expect_eq(symbolizer__stats(s)->proc_maps_fallbacks, 1);
	reap(&c);
	symbolizer__free(s);
}

Test(symbolize, proc_maps_fallback_is_rate_limited)
{
	struct symbolizer *s = symbolizer__new();
	struct sym_frame f;

	for (int i = 0; i < 1000; i++)
		symbolizer__resolve(s, FAKE_PID, 0x1000 + (uint64_t)i, false, false, &f);
	cr_expect_str_eq(f.name, "[unknown]");
	cr_expect_eq(f.module[0], '\0');
	cr_expect_geq(symbolizer__stats(s)->proc_maps_fallbacks, 1);
	cr_expect_leq(symbolizer__stats(s)->proc_maps_fallbacks, 10);
	symbolizer__free(s);
}

Test(symbolize, vdso)
{
	struct symbolizer *s = symbolizer__new();
	char line[4096];
	uint64_t start = 0, end;
	FILE *f;

	feed_maps(s, getpid());
	f = fopen("/proc/self/maps", "r");
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "[vdso]"))
			sscanf(line, "%" SCNx64 "-%" SCNx64, &start, &end);
	}
	fclose(f);
	if (!start)
		cr_skip_test("no [vdso] mapping");
	expect(s, (uint32_t)getpid(), start + 16, false, "[vdso]", "[vdso]");
	symbolizer__free(s);
}

/* ---- the test process itself: its own binary and libc ---- */

__attribute__((noinline, noclone, used)) int symtest_target(int x);
__attribute__((noinline, noclone, used)) int symtest_target(int x)
{
	volatile int y = x;

	return y * 7 + 3;
}

static uint64_t libc_sym(const char *name)
{
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *p;

	cr_assert_not_null(h, "libc.so.6 is not loaded: %s", dlerror());
	p = dlsym(h, name);
	cr_assert_not_null(p);
	dlclose(h);
	return (uint64_t)(uintptr_t)p;
}

Test(symbolize, self_and_libc)
{
	struct symbolizer *s = symbolizer__new();
	uint32_t pid = (uint32_t)getpid();
	uint64_t target = (uint64_t)(uintptr_t)symtest_target;

	cr_assert_eq(symtest_target(1), 10);
	cr_assert_gt(feed_maps(s, getpid()), 0);
	expect(s, pid, target, false, "symtest_target", "test_symbolize");
	expect(s, pid, target + 1, true, "symtest_target", "test_symbolize");
	expect(s, pid, libc_sym("malloc"), false, "malloc", "libc.so.6");
	expect(s, pid, libc_sym("malloc") + 5, true, "malloc", "libc.so.6");
	expect(s, pid, libc_sym("printf"), false, "printf", "libc.so.6");
	cr_expect_eq(symbolizer__stats(s)->proc_maps_fallbacks, 0);
	cr_expect_eq(symbolizer__stats(s)->modules_loaded, 2);
	symbolizer__free(s);
}

Test(symbolize, resolve_is_fast)
{
	struct symbolizer *s = symbolizer__new();
	uint32_t pid = (uint32_t)getpid();
	uint64_t addrs[4] = { (uint64_t)(uintptr_t)symtest_target, libc_sym("malloc"),
			      libc_sym("printf"), libc_sym("memcpy") };
	struct timespec t0, t1;
	struct sym_frame f;
	double secs;

	feed_maps(s, getpid());
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 1000000; i++)
		symbolizer__resolve(s, pid, addrs[i & 3] + 1, false, true, &f);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_log_info("1M resolves: %.3f s", secs);
	cr_expect_lt(secs, 5.0, "1M resolves took %.3f s", secs);
	symbolizer__free(s);
}

/* ---- maps bookkeeping, observed through names of files that do not exist ---- */

Test(symbolize, mmap_overlap_splits_like_the_kernel)
{
	struct symbolizer *s = symbolizer__new();
	const uint32_t p = FAKE_PID;

	map(s, p, 0x10000, 0x50000, 0, "/nonexistent/a.so");
	expect(s, p, 0x10000, false, "[a.so+0x0]", "a.so");
	expect(s, p, 0x4ffff, false, "[a.so+0x3ffff]", "a.so");
	expect(s, p, 0x50000, false, "[unknown]", "");
	expect(s, p, 0xffff, false, "[unknown]", "");

	/* punch a hole: a keeps both sides, the right side with a shifted pgoff */
	map(s, p, 0x20000, 0x30000, 0x100000, "/nonexistent/b.so");
	expect(s, p, 0x1ffff, false, "[a.so+0xffff]", "a.so");
	expect(s, p, 0x20000, false, "[b.so+0x100000]", "b.so");
	expect(s, p, 0x2ffff, false, "[b.so+0x10ffff]", "b.so");
	expect(s, p, 0x30000, false, "[a.so+0x20000]", "a.so");
	expect(s, p, 0x4ffff, false, "[a.so+0x3ffff]", "a.so");

	/* over three mappings at once: b disappears, a is trimmed on both sides */
	map_data(s, p, 0x18000, 0x38000, "//anon");
	expect(s, p, 0x17fff, false, "[a.so+0x7fff]", "a.so");
	expect(s, p, 0x18000, false, "[unknown]", "");
	expect(s, p, 0x25000, false, "[unknown]", "");
	expect(s, p, 0x37fff, false, "[unknown]", "");
	expect(s, p, 0x38000, false, "[a.so+0x28000]", "a.so");

	/* exact replacement, then adjacency */
	map(s, p, 0x10000, 0x18000, 0x5000, "/nonexistent/d.so");
	expect(s, p, 0x10000, false, "[d.so+0x5000]", "d.so");
	expect(s, p, 0x17fff, false, "[d.so+0xcfff]", "d.so");
	map(s, p, 0x8000, 0x10000, 0, "/nonexistent/e.so");
	expect(s, p, 0xffff, false, "[e.so+0x7fff]", "e.so");
	expect(s, p, 0x10000, false, "[d.so+0x5000]", "d.so");

	/* one mapping over everything */
	map_data(s, p, 0, 0x100000, "[heap]");
	expect(s, p, 0x10000, false, "[unknown]", "");
	expect(s, p, 0x40000, false, "[unknown]", "");

	/* names without a file behind them */
	map_data(s, p, 0x300000, 0x301000, "/dev/zero (deleted)");
	map_data(s, p, 0x301000, 0x302000, "/SYSV00000000 (deleted)");
	map_data(s, p, 0x302000, 0x303000, "[anon:jit]");
	map_data(s, p, 0x303000, 0x304000, "");
	map(s, p, 0x304000, 0x305000, 0, "[vdso]");
	for (uint64_t a = 0x300000; a < 0x304000; a += 0x1000)
		expect(s, p, a + 8, false, "[unknown]", "");
	expect(s, p, 0x304008, false, "[vdso]", "[vdso]");

	/* degenerate input */
	cr_expect_eq(symbolizer__mmap(s, p, 0x1000, 0, 0, PROT_EXEC, "/x"), 0);
	cr_expect_eq(symbolizer__mmap(s, p, UINT64_MAX - 10, 100, 0, PROT_EXEC, "/x"), -EINVAL);
	cr_expect_eq(symbolizer__mmap(s, p, 0x200000, 0x1000, 0, PROT_READ, NULL), 0);
	expect(s, p, 0x200000, false, "[unknown]", "");

	/* a failed module is cached: one failure per path, not per lookup */
	cr_expect_eq(symbolizer__stats(s)->modules_failed, 4);
	cr_expect_eq(symbolizer__stats(s)->modules_loaded, 0);
	symbolizer__free(s);
}

/* Random mmaps against a page-by-page model of the address space. */
Test(symbolize, mmap_random_against_model)
{
	enum { PAGES = 64, PAGE = 0x1000, ROUNDS = 400 };
	struct symbolizer *s = symbolizer__new();
	int model_mod[PAGES];
	uint64_t model_off[PAGES];
	unsigned int seed = 12345;

	for (int i = 0; i < PAGES; i++)
		model_mod[i] = -1;
	for (int r = 0; r < ROUNDS; r++) {
		int a = rand_r(&seed) % PAGES, len = 1 + rand_r(&seed) % 12,
		    mod = rand_r(&seed) % 6;
		uint64_t pgoff = (uint64_t)(rand_r(&seed) % 100) * PAGE;
		char name[64];

		if (a + len > PAGES)
			len = PAGES - a;
		snprintf(name, sizeof(name), mod == 5 ? "//anon" : "/nonexistent/m%d.so", mod);
		if (mod == 5)
			map_data(s, FAKE_PID, (uint64_t)a * PAGE, (uint64_t)(a + len) * PAGE, name);
		else
			map(s, FAKE_PID, (uint64_t)a * PAGE, (uint64_t)(a + len) * PAGE, pgoff,
			    name);
		for (int i = a; i < a + len; i++) {
			model_mod[i] = mod;
			model_off[i] = pgoff + (uint64_t)(i - a) * PAGE;
		}
		for (int i = 0; i < PAGES; i++) {
			char want[64], wmod[32];

			if (model_mod[i] < 0 || model_mod[i] == 5) {
				strcpy(want, "[unknown]");
				wmod[0] = '\0';
			} else {
				snprintf(wmod, sizeof(wmod), "m%d.so", model_mod[i]);
				snprintf(want, sizeof(want), "[%s+0x%" PRIx64 "]", wmod,
					 model_off[i] + 0x10);
			}
			expect(s, FAKE_PID, (uint64_t)i * PAGE + 0x10, false, want, wmod);
		}
	}
	symbolizer__free(s);
}

Test(symbolize, fork_exec_exit)
{
	struct symbolizer *s = symbolizer__new();
	const uint32_t parent = FAKE_PID, child = FAKE_PID + 1;

	map(s, parent, 0x10000, 0x20000, 0, "/nonexistent/a.so");
	cr_assert_eq(symbolizer__fork(s, child, parent), 0);
	expect(s, child, 0x10010, false, "[a.so+0x10]", "a.so");

	/* the copy is independent of the parent */
	map(s, parent, 0x10000, 0x20000, 0, "/nonexistent/b.so");
	expect(s, parent, 0x10010, false, "[b.so+0x10]", "b.so");
	expect(s, child, 0x10010, false, "[a.so+0x10]", "a.so");

	/* a new thread (pid == ppid) changes nothing */
	cr_assert_eq(symbolizer__fork(s, parent, parent), 0);
	expect(s, parent, 0x10010, false, "[b.so+0x10]", "b.so");

	/* comm without exec changes nothing; exec drops the old image */
	cr_assert_eq(symbolizer__comm(s, child, child, false), 0);
	expect(s, child, 0x10010, false, "[a.so+0x10]", "a.so");
	cr_assert_eq(symbolizer__comm(s, child, child, true), 0);
	expect(s, child, 0x10010, false, "[unknown]", "");
	map(s, child, 0x10000, 0x20000, 0, "/nonexistent/c.so");
	expect(s, child, 0x10010, false, "[c.so+0x10]", "c.so");

	/* a thread exiting keeps the process; the leader exiting forgets it */
	cr_assert_eq(symbolizer__exit(s, parent, parent + 7), 0);
	expect(s, parent, 0x10010, false, "[b.so+0x10]", "b.so");
	cr_assert_eq(symbolizer__exit(s, parent, parent), 0);
	expect(s, parent, 0x10010, false, "[unknown]", "");
	expect(s, child, 0x10010, false, "[c.so+0x10]", "c.so");

	/* a fork from an unknown parent starts empty; events for unknown pids are harmless */
	cr_assert_eq(symbolizer__fork(s, child, parent), 0);
	expect(s, child, 0x10010, false, "[unknown]", "");
	cr_assert_eq(symbolizer__exit(s, 12345678, 12345678), 0);
	cr_assert_eq(symbolizer__comm(s, 12345678, 12345678, true), 0);
	symbolizer__free(s);
}

/*
 * A fork storm: thousands of live children of a process with thousands of
 * mappings share its array until one changes, so memory does not grow with
 * children x mappings (it used to: a copy per fork).
 */
Test(symbolize, fork_storm_shares_mappings)
{
	struct symbolizer *s = symbolizer__new();
	const uint32_t parent = FAKE_PID, first = FAKE_PID + 1, nkids = 4000, nmaps = 3000;
	struct rusage before, after;

	for (uint32_t i = 0; i < nmaps; i++)
		cr_assert_eq(symbolizer__mmap(s, parent, 0x100000 + i * 0x2000ull, 0x1000, 0,
					      PROT_READ | PROT_EXEC, "/nonexistent/a.so"),
			     0);
	getrusage(RUSAGE_SELF, &before);
	for (uint32_t k = 0; k < nkids; k++)
		cr_assert_eq(symbolizer__fork(s, first + k, parent), 0);
	getrusage(RUSAGE_SELF, &after);
	/* a copy each would be 4000 x 3000 x 40 bytes, 480 MB */
	cr_assert_lt(after.ru_maxrss - before.ru_maxrss, 40 * 1024, "%ld KiB more after the forks",
		     after.ru_maxrss - before.ru_maxrss);
	expect(s, first + 17, 0x100010, false, "[a.so+0x10]", "a.so");

	/* a child's change is its own; the parent's is its own; grandchildren share too */
	map(s, first, 0x100000, 0x101000, 0, "/nonexistent/b.so");
	expect(s, first, 0x100010, false, "[b.so+0x10]", "b.so");
	expect(s, parent, 0x100010, false, "[a.so+0x10]", "a.so");
	expect(s, first + 1, 0x100010, false, "[a.so+0x10]", "a.so");
	cr_assert_eq(symbolizer__fork(s, first + nkids, first), 0);
	expect(s, first + nkids, 0x100010, false, "[b.so+0x10]", "b.so");
	map(s, parent, 0x102000, 0x103000, 0, "/nonexistent/c.so");
	expect(s, parent, 0x102010, false, "[c.so+0x10]", "c.so");
	expect(s, first + 2, 0x102010, false, "[a.so+0x10]", "a.so");

	/* the parent exits, an exec resets a child: the others keep the mappings */
	cr_assert_eq(symbolizer__exit(s, parent, parent), 0);
	cr_assert_eq(symbolizer__comm(s, first + 3, first + 3, true), 0);
	expect(s, first + 3, 0x100010, false, "[unknown]", "");
	expect(s, first + 4, 0x100010, false, "[a.so+0x10]", "a.so");
	/* a child forked again under a reused pid starts from its new parent */
	cr_assert_eq(symbolizer__fork(s, first + 5, first), 0);
	expect(s, first + 5, 0x100010, false, "[b.so+0x10]", "b.so");
	for (uint32_t k = 0; k < nkids; k += 2)
		cr_assert_eq(symbolizer__exit(s, first + k, first + k), 0);
	expect(s, first + 7, 0x100010, false, "[a.so+0x10]", "a.so");
	symbolizer__free(s);
}

Test(symbolize, null_and_long_names)
{
	struct symbolizer *s = symbolizer__new();
	char name[600];
	struct sym_frame f;

	symbolizer__free(NULL);
	symbolizer__resolve(NULL, 1, 0x1000, false, false, &f);
	cr_expect_str_eq(f.name, "[unknown]");
	symbolizer__resolve(s, 1, 0x1000, false, false, NULL);

	/* a basename longer than the buffer is cut, the offset still shows */
	strcpy(name, "/nonexistent/");
	memset(name + 13, 'x', 400);
	strcpy(name + 413, " (deleted)");
	map(s, FAKE_PID, 0x10000, 0x20000, 0xabc000, name);
	symbolizer__resolve(s, FAKE_PID, 0x10001, false, false, &f);
	cr_expect_lt(strlen(f.name), sizeof(f.buf));
	cr_expect_eq(f.name[0], '[');
	cr_expect(strstr(f.name, "xxx+0xabc001]") != NULL, "got %s", f.name);
	/* " (deleted)" is not part of the module's name */
	cr_expect_eq(strlen(f.module), 400);
	symbolizer__free(s);
}

/* ---- untrusted ELF files ---- */

/* Map a file the way ld.so would: its PT_LOADs at base + p_vaddr. */
static void map_like_loader(struct symbolizer *s, uint32_t pid, const char *path, const void *image,
			    uint64_t base)
{
	const Elf64_Ehdr *eh = image;

	for (int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const void *)((const char *)image + eh->e_phoff +
						      (size_t)i * eh->e_phentsize);
		uint64_t start = (base + ph->p_vaddr) & ~0xfffull;
		uint64_t end = (base + ph->p_vaddr + ph->p_memsz + 0xfff) & ~0xfffull;
		uint32_t prot = PROT_READ | ((ph->p_flags & PF_X) ? PROT_EXEC : 0);

		if (ph->p_type != PT_LOAD)
			continue;
		cr_assert_eq(symbolizer__mmap(s, pid, start, end - start, ph->p_offset & ~0xfffull,
					      prot, path),
			     0);
	}
}

/* The fixture as a byte image, with the vaddr of symfix_f from its .symtab. */
static char *fixture_image(char *path, size_t size, size_t *len, uint64_t *f_vaddr)
{
	char *img;
	const Elf64_Ehdr *eh;

	build_fixture("symfix", "-pie -fPIE", path, size);
	img = read_file(path, len);
	eh = (const void *)img;
	cr_assert_eq(memcmp(eh->e_ident, ELFMAG, SELFMAG), 0);
	cr_assert_eq(eh->e_ident[EI_CLASS], ELFCLASS64);
	*f_vaddr = 0;
	for (int i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *sh = (const void *)(img + eh->e_shoff + (size_t)i * sizeof(*sh));
		const Elf64_Shdr *str;

		if (sh->sh_type != SHT_SYMTAB)
			continue;
		str = (const void *)(img + eh->e_shoff + (size_t)sh->sh_link * sizeof(*sh));
		for (size_t j = 0; j < sh->sh_size / sizeof(Elf64_Sym); j++) {
			const Elf64_Sym *sym =
				(const void *)(img + sh->sh_offset + j * sizeof(*sym));

			if (!strcmp(img + str->sh_offset + sym->st_name, "symfix_f"))
				*f_vaddr = sym->st_value;
		}
	}
	cr_assert_neq(*f_vaddr, 0);
	return img;
}

static Elf64_Shdr *find_section(char *img, uint32_t type)
{
	Elf64_Ehdr *eh = (void *)img;

	for (int i = 0; i < eh->e_shnum; i++) {
		Elf64_Shdr *sh = (void *)(img + eh->e_shoff + (size_t)i * sizeof(*sh));

		if (sh->sh_type == type)
			return sh;
	}
	cr_assert_fail("no section of type %u", type);
	return NULL;
}

/* Resolve addresses all over the mapped image; names must be sane, never a crash. */
static void probe(struct symbolizer *s, uint32_t pid, uint64_t base, size_t len)
{
	struct sym_frame f;

	for (uint64_t off = 0; off < len + 0x2000; off += 0x1f3) {
		symbolizer__resolve(s, pid, base + off, false, off & 1, &f);
		cr_assert_not_null(f.name);
		cr_assert_not_null(f.module);
		cr_assert_lt(strlen(f.name), 2000);
	}
}

Test(symbolize, garbage_file)
{
	struct symbolizer *s = symbolizer__new();
	char path[256], buf[8192];
	unsigned int seed = 7;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)rand_r(&seed);
	tmp_path(path, sizeof(path), "garbage.so");
	write_file(path, buf, sizeof(buf));
	map(s, FAKE_PID, 0x7f0000000000, 0x7f0000002000, 0x1000, path);
	expect(s, FAKE_PID, 0x7f0000000010, false, "[garbage.so+0x1010]", "garbage.so");

	/* ELF magic followed by garbage */
	memcpy(buf, ELFMAG "\2\1\1", 7);
	tmp_path(path, sizeof(path), "magic.so");
	write_file(path, buf, sizeof(buf));
	map(s, FAKE_PID, 0x7f1000000000, 0x7f1000002000, 0, path);
	expect(s, FAKE_PID, 0x7f1000000020, false, "[magic.so+0x20]", "magic.so");

	/* not a regular file: a directory and a FIFO must neither load nor hang */
	map(s, FAKE_PID, 0x7f2000000000, 0x7f2000001000, 0, tmpdir);
	tmp_path(path, sizeof(path), "fifo");
	cr_assert_eq(mkfifo(path, 0600), 0);
	map(s, FAKE_PID, 0x7f3000000000, 0x7f3000001000, 0, path);
	expect(s, FAKE_PID, 0x7f3000000001, false, "[fifo+0x1]", "fifo");
	probe(s, FAKE_PID, 0x7f2000000000, 0x1000);
	cr_expect_eq(symbolizer__stats(s)->modules_failed, 4);
	symbolizer__free(s);
}

Test(symbolize, truncated_elf)
{
	char path[256], tpath[256];
	size_t len;
	uint64_t fv;
	char *img = fixture_image(path, sizeof(path), &len, &fv);
	const uint64_t base = 0x555555554000;
	size_t sizes[] = {
		0,   1,	   4,	 16,   52,	63,	 64,	     65,	100,
		200, 1000, 4096, 4097, len / 4, len / 2, len - 4096, len - 100, len - 1
	};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct symbolizer *s = symbolizer__new();
		char want[64];
		struct sym_frame f;

		tmp_path(tpath, sizeof(tpath), "trunc.so");
		write_file(tpath, img, sizes[i]);
		map_like_loader(s, FAKE_PID, tpath, img, base);
		symbolizer__resolve(s, FAKE_PID, base + fv, false, false, &f);
		/* once the program headers are whole, the offset is the ELF vaddr */
		snprintf(want, sizeof(want), "[trunc.so+0x%" PRIx64 "]", fv);
		if (sizes[i] > 4096)
			cr_expect_str_eq(f.name, want, "size %zu", sizes[i]);
		else
			cr_expect_eq(strncmp(f.name, "[trunc.so+0x", 12), 0, "size %zu: %s",
				     sizes[i], f.name);
		cr_expect_str_eq(f.module, "trunc.so");
		probe(s, FAKE_PID, base, len);
		symbolizer__free(s);
	}
	free(img);
}

static void expect_patched(const char *img, size_t len, uint64_t fv, const char *want_name)
{
	struct symbolizer *s = symbolizer__new();
	const uint64_t base = 0x555555554000;
	char path[256], want[64];

	tmp_path(path, sizeof(path), "patched.so");
	write_file(path, img, len);
	map_like_loader(s, FAKE_PID, path, img, base);
	if (!want_name) {
		snprintf(want, sizeof(want), "[patched.so+0x%" PRIx64 "]", fv);
		want_name = want;
	}
	expect(s, FAKE_PID, base + fv, false, want_name, "patched.so");
	probe(s, FAKE_PID, base, len);
	symbolizer__free(s);
}

Test(symbolize, hostile_elf_headers)
{
	char path[256];
	size_t len;
	uint64_t fv;
	char *orig = fixture_image(path, sizeof(path), &len, &fv);
	char *img = malloc(len);
	Elf64_Ehdr *eh = (void *)img;
	Elf64_Shdr *sh;

	/* unmodified: the real name */
	memcpy(img, orig, len);
	expect_patched(img, len, fv, "symfix_f");

	/* symbol table larger than the file */
	memcpy(img, orig, len);
	find_section(img, SHT_SYMTAB)->sh_size = 1ull << 40;
	expect_patched(img, len, fv, NULL);

	/* symbol table offset past the end */
	memcpy(img, orig, len);
	find_section(img, SHT_SYMTAB)->sh_offset = UINT64_MAX - 8;
	expect_patched(img, len, fv, NULL);

	/* wrong entry size: libdwfl reads entries of the ELF class's size, which are right */
	memcpy(img, orig, len);
	find_section(img, SHT_SYMTAB)->sh_entsize = 7;
	expect_patched(img, len, fv, "symfix_f");

	/* string table link out of range, and pointing at a non-string section */
	memcpy(img, orig, len);
	find_section(img, SHT_SYMTAB)->sh_link = 9999;
	expect_patched(img, len, fv, NULL);
	memcpy(img, orig, len);
	find_section(img, SHT_SYMTAB)->sh_link = 0;
	expect_patched(img, len, fv, NULL);

	/* every name offset out of the string table */
	memcpy(img, orig, len);
	sh = find_section(img, SHT_SYMTAB);
	for (size_t j = 0; j < sh->sh_size / sizeof(Elf64_Sym); j++)
		((Elf64_Sym *)(img + sh->sh_offset))[j].st_name = 0xfffffff0u;
	expect_patched(img, len, fv, NULL);

	/* a string table whose last string has no NUL */
	memcpy(img, orig, len);
	sh = find_section(img, SHT_SYMTAB);
	{
		Elf64_Shdr *str = (void *)(img + eh->e_shoff + sh->sh_link * sizeof(*str));

		memset(img + str->sh_offset, 'A', str->sh_size);
	}
	expect_patched(img, len, fv, NULL);

	/* symbols with absurd sizes must not overflow */
	memcpy(img, orig, len);
	sh = find_section(img, SHT_SYMTAB);
	for (size_t j = 0; j < sh->sh_size / sizeof(Elf64_Sym); j++) {
		Elf64_Sym *sym = (Elf64_Sym *)(img + sh->sh_offset) + j;

		sym->st_size = UINT64_MAX - j;
	}
	{
		struct symbolizer *s = symbolizer__new();

		tmp_path(path, sizeof(path), "bigsize.so");
		write_file(path, img, len);
		map_like_loader(s, FAKE_PID, path, img, 0x555555554000);
		probe(s, FAKE_PID, 0x555555554000, len);
		symbolizer__free(s);
	}

	/* section header table past the end, and extended numbering with a huge count */
	memcpy(img, orig, len);
	eh->e_shoff = len + 100;
	expect_patched(img, len, fv, NULL);
	memcpy(img, orig, len);
	eh->e_shnum = 0;
	((Elf64_Shdr *)(img + eh->e_shoff))->sh_size = 0xffffffffu;
	expect_patched(img, len, fv, NULL);

	/* program headers unusable: the module fails, the file offset is used */
	memcpy(img, orig, len);
	eh->e_phoff = len + 100;
	{
		struct symbolizer *s = symbolizer__new();
		char want[64];

		tmp_path(path, sizeof(path), "nophdr.so");
		write_file(path, img, len);
		map_like_loader(s, FAKE_PID, path, orig, 0x555555554000);
		/* the fixture's text segment is mapped with pgoff == p_vaddr & ~0xfff */
		snprintf(want, sizeof(want), "[nophdr.so+0x%" PRIx64 "]", fv);
		expect(s, FAKE_PID, 0x555555554000 + fv, false, want, "nophdr.so");
		cr_expect_eq(symbolizer__stats(s)->modules_failed, 1);
		symbolizer__free(s);
	}
	free(img);
	free(orig);
}

/* Random byte flips in the headers and tables: no crash, no hang, sane names. */
Test(symbolize, elf_bit_flips, .timeout = 120)
{
	char path[256], fpath[256];
	size_t len;
	uint64_t fv;
	char *orig = fixture_image(path, sizeof(path), &len, &fv);
	char *img = malloc(len);
	const Elf64_Ehdr *eh = (const void *)orig;
	unsigned int seed = 99;

	tmp_path(fpath, sizeof(fpath), "flip.so");
	for (int round = 0; round < 300; round++) {
		struct symbolizer *s = symbolizer__new();
		int flips = 1 + rand_r(&seed) % 8;

		memcpy(img, orig, len);
		for (int k = 0; k < flips; k++) {
			size_t at;

			switch (rand_r(&seed) % 3) {
			case 0: /* ELF and program headers */
				at = (size_t)rand_r(&seed) % 0x300;
				break;
			case 1: /* section headers */
				at = eh->e_shoff + (size_t)rand_r(&seed) % (len - eh->e_shoff);
				break;
			default:
				at = (size_t)rand_r(&seed) % len;
				break;
			}
			img[at] ^= (char)(1 << (rand_r(&seed) % 8));
			if (rand_r(&seed) % 4 == 0)
				img[at] = (char)0xff;
		}
		write_file(fpath, img, len);
		map_like_loader(s, FAKE_PID, fpath, orig, 0x555555554000);
		probe(s, FAKE_PID, 0x555555554000, len);
		symbolizer__free(s);
	}
	free(img);
	free(orig);
}

/* ---- kallsyms ---- */

static const char synthetic_kallsyms[] = "ffffffff81000000 T _stext\n"
					 "ffffffff81000000 T startup_64\n"
					 "ffffffff81000000 t aaaa\n"
					 "ffffffff81000100 t local_fn\n"
					 "ffffffff81000180 D some_data\n"
					 "this is not a line\n"
					 "ffffffff81000200\n"
					 "zzzzzzzzzzzzzzzz T bad_hex\n"
					 "ffffffff81000300 TT two_char_type\n"
					 "\n"
					 "ffffffff81000400 W weak_fn\n"
					 "ffffffff81000500 T with_extra x y\n"
					 "ffffffff81000600 T _etext\n"
					 "ffffffffc0000000 t mod_fn\t[mymod]\n"
					 "ffffffffc0000040 t mod_bad\tmymod\n";

Test(symbolize, kallsyms_synthetic)
{
	struct symbolizer *s = symbolizer__new();
	char path[256], *text, *p;
	size_t n = sizeof(synthetic_kallsyms) - 1;

	/* plus an overlong line (which would name +0x700) and a last line without newline */
	text = malloc(n + 5000);
	memcpy(text, synthetic_kallsyms, n);
	p = text + n;
	p += sprintf(p, "ffffffff81000700 T long_");
	memset(p, 'a', 3000);
	p += 3000;
	p += sprintf(p, "\nffffffffc0000100 T mod_fn2\t[mymod]");
	tmp_path(path, sizeof(path), "kallsyms");
	write_file(path, text, (size_t)(p - text));
	free(text);

	/* before loading: honest placeholders */
	expect_kernel(s, 0xffffffff81000000, false, "[kernel]", "[kernel.kallsyms]");
	cr_assert_eq(symbolizer__load_kallsyms(s, path), 0);

	expect_kernel(s, 0xffffffff81000000, false, "_stext", "[kernel.kallsyms]");
	expect_kernel(s, 0xffffffff81000050, false, "_stext", "[kernel.kallsyms]");
	expect_kernel(s, 0xffffffff81000100, false, "local_fn", "[kernel.kallsyms]");
	expect_kernel(s, 0xffffffff81000180, false, "local_fn", "[kernel.kallsyms]");
	expect_kernel(s, 0xffffffff810003ff, false, "local_fn", "[kernel.kallsyms]");
	expect_kernel(s, 0xffffffff81000400, false, "weak_fn", "[kernel.kallsyms]");
	expect_kernel(s, 0xffffffff81000400, true, "local_fn", "[kernel.kallsyms]");
	expect_kernel(s, 0xffffffff81000550, false, "weak_fn", "[kernel.kallsyms]");
	expect_kernel(s, 0xffffffff81000600, false, "[kernel]", "[kernel.kallsyms]");
	expect_kernel(s, 0xffffffff81000700, false, "[kernel]", "[kernel.kallsyms]");
	expect_kernel(s, 0xffffffff80000000, false, "[kernel]", "[kernel.kallsyms]");
	expect_kernel(s, 0x1000, false, "[kernel]", "[kernel.kallsyms]");
	expect_kernel(s, 0xffffffffc0000010, false, "mod_fn", "[mymod]");
	expect_kernel(s, 0xffffffffc0000040, false, "mod_fn", "[mymod]");
	expect_kernel(s, 0xffffffffc0000100, false, "mod_fn2", "[mymod]");
	expect_kernel(s, 0xffffffffc0000100 + (1 << 20) - 1, false, "mod_fn2", "[mymod]");
	expect_kernel(s, 0xffffffffc0000100 + (1 << 20), false, "[kernel]", "[kernel.kallsyms]");

	/* a failed reload keeps the table that was loaded */
	tmp_path(path, sizeof(path), "kallsyms-zero");
	write_str(path, "0000000000000000 T _stext\n0000000000000000 T schedule\n"
			"0000000000000000 t x\t[m]\n");
	cr_expect_eq(symbolizer__load_kallsyms(s, path), -EPERM);
	expect_kernel(s, 0xffffffffc0000010, false, "mod_fn", "[mymod]");
	symbolizer__free(s);
}

Test(symbolize, kallsyms_errors)
{
	struct symbolizer *s = symbolizer__new();
	char path[256];

	tmp_path(path, sizeof(path), "kallsyms-zero");
	write_str(path, "0000000000000000 T _stext\n0000000000000000 T schedule\n");
	cr_expect_eq(symbolizer__load_kallsyms(s, path), -EPERM);
	expect_kernel(s, 0xffffffff81000000, false, "[kernel]", "[kernel.kallsyms]");

	tmp_path(path, sizeof(path), "kallsyms-empty");
	write_str(path, "");
	cr_expect_eq(symbolizer__load_kallsyms(s, path), -ENODATA);
	tmp_path(path, sizeof(path), "kallsyms-data");
	write_str(path, "ffffffff81000000 D data\nnonsense\n");
	cr_expect_eq(symbolizer__load_kallsyms(s, path), -ENODATA);
	tmp_path(path, sizeof(path), "missing");
	cr_expect_eq(symbolizer__load_kallsyms(s, path), -ENOENT);
	cr_expect_eq(symbolizer__load_kallsyms(s, tmpdir), -EINVAL);
	tmp_path(path, sizeof(path), "fifo");
	cr_assert_eq(mkfifo(path, 0600), 0);
	cr_expect_eq(symbolizer__load_kallsyms(s, path), -EINVAL);
	cr_expect_eq(symbolizer__load_kallsyms(NULL, path), -EINVAL);
	symbolizer__free(s);
}

Test(symbolize, kallsyms_real)
{
	struct symbolizer *s = symbolizer__new();
	char line[1024];
	uint64_t sched = 0;
	FILE *f = fopen("/proc/kallsyms", "r");
	int err;

	if (!f)
		cr_skip_test("no /proc/kallsyms");
	while (fgets(line, sizeof(line), f)) {
		char type, name[512];
		uint64_t a;

		if (sscanf(line, "%" SCNx64 " %c %511s", &a, &type, name) == 3 &&
		    !strcmp(name, "schedule") && (type == 'T' || type == 't'))
			sched = a;
	}
	fclose(f);
	err = symbolizer__load_kallsyms(s, "/proc/kallsyms");
	if (!sched) {
		cr_expect_eq(err, -EPERM);
		cr_skip_test("kernel addresses are hidden (kptr_restrict)");
	}
	cr_assert_eq(err, 0, "load_kallsyms: %s", strerror(-err));
	expect_kernel(s, sched, false, "schedule", "[kernel.kallsyms]");
	expect_kernel(s, sched + 4, true, "schedule", "[kernel.kallsyms]");
	symbolizer__free(s);
}

/* ---- symbol depth: demangling, debug files, CFI ranges, inline frames, pinning ---- */

Test(symbolize, demangle)
{
	char out[DEMANGLED_MAX];

	cr_expect_gt(sym_demangle("_ZN2ns3AccIdE4burnEd", true, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "ns::Acc<double>::burn(double)");
	cr_expect_gt(sym_demangle("_ZN2ns3AccIdE4burnEd", false, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "ns::Acc<double>::burn");
	cr_expect_gt(sym_demangle("_ZNK3foo3barEv", false, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "foo::bar");
	/* not mangled, or not valid: 0 and the output untouched */
	strcpy(out, "untouched");
	cr_expect_eq(sym_demangle("main", true, out, sizeof(out)), 0);
	cr_expect_eq(sym_demangle("_Zzz", true, out, sizeof(out)), 0);
	cr_expect_eq(sym_demangle("_Z", true, out, sizeof(out)), 0);
	cr_expect_eq(sym_demangle("", true, out, sizeof(out)), 0);
	cr_expect_eq(sym_demangle(NULL, true, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "untouched");
}

/*
 * f(P<P<...<int, int>...>>): each level refers to the one below twice
 * through a substitution, so 30 levels (217 bytes mangled) demangle to
 * 18 GB, two minutes uncapped. The cap must stop it at once.
 */
Test(symbolize, demangle_exponential_name_is_capped, .timeout = 10)
{
	char name[1024], out[DEMANGLED_MAX], small[64];
	struct timespec t0, t1;
	size_t n = 0, len;
	double secs;
	const int depth = 30;

	n += (size_t)snprintf(name + n, sizeof(name) - n, "_Z1f1P");
	for (int i = 0; i < depth; i++)
		n += (size_t)snprintf(name + n, sizeof(name) - n, "IS_");
	n += (size_t)snprintf(name + n, sizeof(name) - n, "IiiE");
	for (int i = 0; i < depth; i++)
		n += (size_t)snprintf(name + n, sizeof(name) - n, "S%c_E",
				      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[i]);
	cr_assert_lt(n, 230);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	len = sym_demangle(name, true, out, sizeof(out));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_expect_eq(len, sizeof(out) - 1, "demangled to %zu bytes", len);
	cr_expect_eq(strlen(out), len);
	cr_expect_eq(strncmp(out, "f(P<P<P<", 8), 0, "%.40s", out);
	cr_expect_str_eq(out + len - 3, "...");
	cr_expect_lt(secs, 0.05, "took %.3f s", secs);
	/* a small buffer caps the same way */
	cr_expect_eq(sym_demangle(name, true, small, sizeof(small)), sizeof(small) - 1);
	cr_expect_str_eq(small + sizeof(small) - 4, "...");
	/* input longer than SYM_NAME_MAX is not demangled at all */
	{
		char *big = malloc(SYM_NAME_MAX + 100);

		strcpy(big, "_ZN2ns");
		memset(big + 6, 'a', SYM_NAME_MAX + 50);
		big[SYM_NAME_MAX + 56] = '\0';
		cr_expect_eq(sym_demangle(big, true, out, sizeof(out)), 0);
		free(big);
	}
}

static void build_symd(const char *name, const char *flags, char *out, size_t size)
{
	char cmd[1024];

	tmp_path(out, size, name);
	snprintf(cmd, sizeof(cmd), "cc -O2 -g %s -o '%s' '%s/symbolize/symd.c'", flags, out,
		 FIXTURES_SRC);
	cr_assert_eq(system(cmd), 0, "cannot compile the fixture: %s", cmd);
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* The link-time address of a symbol, from nm (before stripping). */
static uint64_t nm_addr(const char *path, const char *sym)
{
	char cmd[1024], line[256];
	uint64_t v = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "nm '%s' | awk '$3 == \"%s\" { print $1 }'", path, sym);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	if (fgets(line, sizeof(line), f))
		v = strtoull(line, NULL, 16);
	pclose(f);
	cr_assert_neq(v, 0, "%s has no %s", path, sym);
	return v;
}

/* Spawn symd in "addrs" mode and feed its maps; the runtime address of symd_work. */
static uint64_t spawn_symd(struct symbolizer *s, const char *path, struct child *c)
{
	FILE *f = start_child(path, "addrs", c);
	char line[256];
	void *p = NULL;

	cr_assert_not_null(fgets(line, sizeof(line), f));
	cr_assert_eq(sscanf(line, "symd_work %p", &p), 1, "fixture said '%s'", line);
	fclose(f);
	if (s)
		cr_assert_gt(feed_maps(s, c->pid), 0);
	return (uint64_t)(uintptr_t)p;
}

/* Some address in symd_work is in the inlined loop: two levels, innermost first. */
static void expect_inline(struct symbolizer *s, uint32_t pid, uint64_t work, bool want)
{
	struct sym_frame f[4];
	bool seen = false;
	uint64_t a;

	for (a = work; a < work + 0x100; a++) {
		size_t n = symbolizer__resolve_inline(s, pid, a, false, false, f, 4);

		cr_assert_geq(n, 1);
		if (strcmp(f[n - 1].name, "symd_work"))
			break; /* past its end */
		cr_assert_eq(f[n - 1].kind, FRAME_USER);
		if (n < 2)
			continue;
		cr_assert_eq(n, 2);
		cr_assert_str_eq(f[0].name, "symd_hot_loop");
		cr_assert_eq(f[0].kind, FRAME_INLINED);
		cr_assert_not_null(f[0].file);
		cr_assert(strstr(f[0].file, "symd.c"), "file %s", f[0].file);
		cr_assert_gt(f[0].line, 20);
		/* the function's own line is the call site of the inlined loop */
		cr_assert_not_null(f[1].file);
		cr_assert_gt(f[1].line, f[0].line, "call line %u, loop line %u", f[1].line,
			     f[0].line);
		cr_assert_str_eq(f[0].module, f[1].module);
		/* max 1: the function itself, never the inlined level */
		cr_assert_eq(symbolizer__resolve_inline(s, pid, a, false, false, f, 1), 1);
		cr_assert_str_eq(f[0].name, "symd_work");
		seen = true;
	}
	cr_assert_gt(a, work + 16, "symd_work is not named at 0x%" PRIx64, a);
	cr_assert_eq(seen, want, "inline levels %s", seen ? "found" : "not found");
}

Test(symbolize, inline_frames_and_lines)
{
	struct symbolizer *s = symbolizer__new();
	char path[256];
	struct child c;
	uint64_t work;

	build_symd("symd-inline", "", path, sizeof(path));
	work = spawn_symd(s, path, &c);
	expect_inline(s, (uint32_t)c.pid, work, true);
	reap(&c);
	symbolizer__free(s);

	/* switched off: one frame per address */
	s = symbolizer__new();
	symbolizer__set_inline(s, false);
	work = spawn_symd(s, path, &c);
	expect_inline(s, (uint32_t)c.pid, work, false);
	reap(&c);
	symbolizer__free(s);
}

/* No symbol: the frame is named after the start of its CFI range, one name per function. */
Test(symbolize, cfi_range_names)
{
	struct symbolizer *s = symbolizer__new();
	char path[256], want[128];
	struct sym_frame f;
	struct child c;
	uint64_t work, vwork;

	build_symd("symd-fde", "", path, sizeof(path));
	vwork = nm_addr(path, "symd_work");
	sh("strip --strip-all '%s'", path);
	work = spawn_symd(s, path, &c);
	snprintf(want, sizeof(want), "symd-fde+0x%" PRIx64, vwork);
	expect(s, (uint32_t)c.pid, work, false, want, "symd-fde");
	expect(s, (uint32_t)c.pid, work + 9, false, want, "symd-fde");
	expect(s, (uint32_t)c.pid, work + 17, true, want, "symd-fde");
	/* and the name is stable: a second lookup (cached) gives the same string */
	symbolizer__resolve(s, (uint32_t)c.pid, work + 3, false, false, &f);
	cr_expect_str_eq(f.name, want);
	cr_expect_not_null(f.build_id, "the module's build-id");
	reap(&c);
	symbolizer__free(s);
}

/* A stripped binary, its debug file in DIR/.build-id/xx/rest.debug. */
Test(symbolize, debug_file_by_build_id)
{
	struct symbolizer *s;
	char path[256], root[256], hex[128], line[512];
	struct child c;
	uint64_t work;
	FILE *f;

	build_symd("symd-bid", "-Wl,--build-id=sha1", path, sizeof(path));
	snprintf(line, sizeof(line), "readelf -n '%s' | awk '/Build ID/ { print $3 }'", path);
	f = popen(line, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(hex, sizeof(hex), f));
	pclose(f);
	hex[strcspn(hex, "\n")] = '\0';
	tmp_path(root, sizeof(root), "dbgroot");
	sh("mkdir -p '%s/.build-id/%.2s' && objcopy --only-keep-debug '%s' "
	   "'%s/.build-id/%.2s/%s.debug' && strip --strip-all '%s'",
	   root, hex, path, root, hex, hex + 2, path);

	/* the default directories do not have it */
	s = symbolizer__new();
	work = spawn_symd(s, path, &c);
	{
		struct sym_frame fr;

		symbolizer__resolve(s, (uint32_t)c.pid, work, false, false, &fr);
		cr_expect_str_neq(fr.name, "symd_work");
		cr_expect_str_eq(fr.build_id, hex);
	}
	reap(&c);
	symbolizer__free(s);

	s = symbolizer__new();
	cr_assert_eq(symbolizer__set_debug_dirs(s, "relative/dir"), -EINVAL);
	cr_assert_eq(symbolizer__set_debug_dirs(s, root), 0);
	work = spawn_symd(s, path, &c);
	expect(s, (uint32_t)c.pid, work, false, "symd_work", "symd-bid");
	/* DWARF comes from the debug file too */
	expect_inline(s, (uint32_t)c.pid, work, true);
	cr_expect_eq(symbolizer__stats(s)->debug_files, 1);
	reap(&c);
	symbolizer__free(s);
}

/* No build-id: .gnu_debuglink, next to the file, in .debug/, and under DIR/<dir>; CRC checked. */
Test(symbolize, debug_file_by_debuglink)
{
	struct symbolizer *s;
	char path[256], sub[256], root[256];
	struct child c;
	uint64_t work;

	build_symd("symd-link", "-Wl,--build-id=none", path, sizeof(path));
	tmp_path(sub, sizeof(sub), ".debug");
	sh("mkdir -p '%s' && objcopy --only-keep-debug '%s' '%s/symd-link.debug' && "
	   "strip --strip-all '%s' && objcopy --add-gnu-debuglink='%s/symd-link.debug' '%s'",
	   sub, path, sub, path, sub, path);

	/* in the .debug/ subdirectory of the file's directory */
	s = symbolizer__new();
	cr_assert_eq(symbolizer__set_debug_dirs(s, "/nonexistent"), 0);
	work = spawn_symd(s, path, &c);
	expect(s, (uint32_t)c.pid, work, false, "symd_work", "symd-link");
	reap(&c);
	symbolizer__free(s);

	/* under a debug directory, as DIR/<directory of the file>/name */
	tmp_path(root, sizeof(root), "dbgroot");
	sh("mkdir -p '%s%s' && mv '%s/symd-link.debug' '%s%s/'", root, tmpdir, sub, root, tmpdir);
	s = symbolizer__new();
	cr_assert_eq(symbolizer__set_debug_dirs(s, root), 0);
	work = spawn_symd(s, path, &c);
	expect(s, (uint32_t)c.pid, work, false, "symd_work", "symd-link");
	reap(&c);
	symbolizer__free(s);

	/* a debug file whose CRC does not match is not used */
	sh("printf x >> '%s%s/symd-link.debug'", root, tmpdir);
	s = symbolizer__new();
	cr_assert_eq(symbolizer__set_debug_dirs(s, root), 0);
	work = spawn_symd(s, path, &c);
	{
		struct sym_frame fr;

		symbolizer__resolve(s, (uint32_t)c.pid, work, false, false, &fr);
		cr_expect_str_neq(fr.name, "symd_work");
		cr_expect_eq(strncmp(fr.name, "symd-link+0x", 12), 0, "%s", fr.name);
	}
	cr_expect_eq(symbolizer__stats(s)->debug_files, 0);
	reap(&c);
	symbolizer__free(s);
}

/* Pinned at the mapping: the file is deleted and its path reused, names stay. */
Test(symbolize, pinned_file_survives_deletion)
{
	struct symbolizer *s = symbolizer__new();
	char path[256];
	struct child c;

	build_fixture("symfix-pinned", "-pie -fPIE", path, sizeof(path));
	spawn(path, &c);
	cr_assert_gt(feed_maps(s, c.pid), 0);
	cr_expect_geq(symbolizer__stats(s)->modules_pinned, 1);
	cr_assert_eq(unlink(path), 0);
	write_str(path, "not an ELF file any more");
	expect(s, (uint32_t)c.pid, child_sym(&c, "symfix_f"), false, "symfix_f", "symfix-pinned");
	expect(s, (uint32_t)c.pid, child_sym(&c, "symfix_c_func"), false, "symfix_c_func",
	       "symfix-pinned");
	reap(&c);
	symbolizer__free(s);
}

/* A mapping announced after the deletion (" (deleted)") is opened through map_files. */
Test(symbolize, deleted_path_through_map_files)
{
	struct symbolizer *s = symbolizer__new();
	char path[256], name[300], line[8192], mf[128];
	uint32_t pid;
	struct child c;
	FILE *f;
	int fd;

	build_fixture("symfix-gone", "-pie -fPIE", path, sizeof(path));
	spawn(path, &c);
	pid = (uint32_t)c.pid;
	cr_assert_eq(unlink(path), 0);
	snprintf(name, sizeof(name), "%s (deleted)", path);
	snprintf(line, sizeof(line), "/proc/%d/maps", (int)c.pid);
	f = fopen(line, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end, off;
		char perms[5];

		if (!strstr(line, " (deleted)") ||
		    sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64, &start, &end, perms,
			   &off) != 4)
			continue;
		snprintf(mf, sizeof(mf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)c.pid,
			 start, end);
		fd = open(mf, O_RDONLY);
		if (fd < 0) {
			fclose(f);
			reap(&c);
			symbolizer__free(s);
			cr_skip_test("map_files needs CAP_SYS_ADMIN: %s", strerror(errno));
		}
		close(fd);
		cr_assert_eq(symbolizer__mmap(
				     s, pid, start, end - start, off,
				     strchr(perms, 'x') ? PROT_READ | PROT_EXEC : PROT_READ, name),
			     0);
	}
	fclose(f);
	expect(s, pid, child_sym(&c, "symfix_f"), false, "symfix_f", "symfix-gone");
	reap(&c);
	symbolizer__free(s);
}

/* Over the cap of open files, the least recently used module lets go of its file. */
Test(symbolize, pin_cap)
{
	struct symbolizer *s = symbolizer__new();
	char a[256], b[256], want[128];
	struct child ca, cb;

	symbolizer__set_open_max(s, 1);
	build_fixture("symfix-a", "-pie -fPIE", a, sizeof(a));
	build_fixture("symfix-b", "-pie -fPIE", b, sizeof(b));
	spawn(a, &ca);
	spawn(b, &cb);
	cr_assert_gt(feed_maps(s, ca.pid), 0);
	cr_assert_gt(feed_maps(s, cb.pid), 0);
	cr_expect_gt(symbolizer__stats(s)->modules_unpinned, 0);
	/* a lost its pin and then its file: its names are gone, honestly */
	cr_assert_eq(unlink(a), 0);
	expect(s, (uint32_t)ca.pid, child_sym(&ca, "symfix_f"), false,
	       offset_name(want, sizeof(want), "symfix-a", &ca, child_sym(&ca, "symfix_f")),
	       "symfix-a");
	/* b's file is still there: read from its path */
	expect(s, (uint32_t)cb.pid, child_sym(&cb, "symfix_f"), false, "symfix_f", "symfix-b");
	expect(s, (uint32_t)cb.pid, child_sym(&cb, "symfix_g"), false, "symfix_g", "symfix-b");
	/* b holds a copy of a's stdin pipe: b goes first */
	reap(&cb);
	reap(&ca);
	symbolizer__free(s);
}

/*
 * The path is replaced by another program between two mappings: the first
 * process keeps the old file's names, the second gets the new file's.
 */
Test(symbolize, replaced_file_is_a_new_module)
{
	struct symbolizer *s = symbolizer__new();
	char path[256], other[256];
	struct child c;
	uint64_t vwork;
	size_t len;
	char *img;

	build_fixture("symfix-repl", "-pie -fPIE", path, sizeof(path));
	build_symd("symd-new", "", other, sizeof(other));
	vwork = nm_addr(other, "symd_work");
	spawn(path, &c);
	cr_assert_gt(feed_maps(s, c.pid), 0);
	cr_assert_eq(rename(other, path), 0);
	img = read_file(path, &len);
	map_like_loader(s, FAKE_PID, path, img, 0x555555554000);
	expect(s, FAKE_PID, 0x555555554000 + vwork, false, "symd_work", "symfix-repl");
	expect(s, (uint32_t)c.pid, child_sym(&c, "symfix_f"), false, "symfix_f", "symfix-repl");
	cr_expect_eq(symbolizer__stats(s)->modules_replaced, 1);
	/* the record's build-id alone is enough to tell the files apart */
	{
		struct sym_file_id id = { .build_id_size = 20 };

		memset(id.build_id, 0xab, sizeof(id.build_id));
		cr_assert_eq(symbolizer__mmap_id(s, FAKE_PID + 1, 0x10000, 0x1000, 0,
						 PROT_READ | PROT_EXEC, path, &id),
			     0);
		cr_expect_eq(symbolizer__stats(s)->modules_replaced, 2);
	}
	free(img);
	reap(&c);
	symbolizer__free(s);
}

/*
 * Naming later: an address located while its process lives names the same
 * frames (inline levels included) after the process has exited and its
 * pid was reused for something else.
 */
Test(symbolize, located_addresses_name_the_same_after_exit)
{
	/* s only locates while the process lives; s2 names at once, for comparison */
	struct symbolizer *s = symbolizer__new(), *s2 = symbolizer__new();
	struct sym_frame now[4], later[4];
	struct sym_loc loc[0x100];
	size_t nnow[0x100];
	char *fn_now[0x100], *leaf_now[0x100];
	char path[256];
	struct child c;
	uint64_t work;
	uint32_t pid;
	size_t located = 0, inlined = 0;

	build_symd("symd-inline", "", path, sizeof(path));
	work = spawn_symd(s, path, &c);
	pid = (uint32_t)c.pid;
	cr_assert_gt(feed_maps(s2, c.pid), 0);
	for (size_t i = 0; i < 0x100; i++)
		cr_assert(symbolizer__locate(s, pid, work + i, false, false, &loc[i]));
	/* locating reads no symbols */
	cr_assert_eq(symbolizer__stats(s)->modules_loaded, 0);
	for (size_t i = 0; i < 0x100; i++) {
		nnow[i] = symbolizer__resolve_inline(s2, pid, work + i, false, false, now, 4);
		fn_now[i] = strdup(now[nnow[i] - 1].name);
		leaf_now[i] = strdup(now[0].name);
	}
	/* a return address is located at the call, one byte before */
	struct sym_loc ra;
	cr_assert(symbolizer__locate(s, pid, work + 1, false, true, &ra));
	cr_assert_eq(ra.module, loc[0].module);
	cr_assert_eq(ra.offset, loc[0].offset);
	/* not in a file: unmapped, anonymous code */
	cr_assert_not(symbolizer__locate(s, pid, 0x7ffffffff000ull, false, false, &ra));
	cr_assert_not(symbolizer__locate(s, pid, 4096, false, false, &ra));
	cr_assert_eq(
		symbolizer__mmap(s, pid, 0x10000000, 0x1000, 0, PROT_READ | PROT_EXEC, "//anon"),
		0);
	cr_assert_not(symbolizer__locate(s, pid, 0x10000010, false, false, &ra));
	cr_assert_not(symbolizer__locate(s, pid + 1000000, work, false, false, &ra),
		      "no such process");
	reap(&c);

	/* the process is gone and its pid maps something else where symd_work was */
	cr_assert_eq(symbolizer__exit(s, pid, pid), 0);
	cr_assert_eq(symbolizer__mmap(s, pid, work & ~0xfffull, 0x10000, 0, PROT_READ | PROT_EXEC,
				      "//anon"),
		     0);
	for (size_t i = 0; i < 0x100; i++) {
		size_t n = symbolizer__resolve_loc(s, &loc[i], later, 4);

		cr_assert_eq(n, nnow[i], "address +%#zx: %zu levels, %zu before", i, n, nnow[i]);
		cr_assert_str_eq(later[n - 1].name, fn_now[i], "address +%#zx", i);
		cr_assert_str_eq(later[0].name, leaf_now[i], "address +%#zx", i);
		located++;
		inlined += n > 1 && !strcmp(later[0].name, "symd_hot_loop");
		free(fn_now[i]);
		free(leaf_now[i]);
	}
	cr_assert_eq(located, 0x100);
	cr_assert_gt(inlined, 0, "some address is in the inlined loop");
	cr_assert_gt(symbolizer__stats(s)->modules_loaded, 0);
	/* a location of no module */
	struct sym_loc bad = { .module = 1u << 30 };
	cr_assert_eq(symbolizer__resolve_loc(s, &bad, later, 4), 1);
	cr_assert_str_eq(later[0].name, "[unknown]");
	symbolizer__free(s);
	symbolizer__free(s2);
}

/* kallsyms read by a thread of its own; kernel addresses located now and named after it. */
Test(symbolize, kallsyms_async_and_kernel_locations)
{
	struct symbolizer *s = symbolizer__new();
	struct sym_loc loc, ret;
	struct sym_frame f;
	char path[256];

	tmp_path(path, sizeof(path), "kallsyms");
	write_file(path, synthetic_kallsyms, sizeof(synthetic_kallsyms) - 1);
	/* located before the table exists: a kernel location is the address itself */
	cr_assert(symbolizer__locate(s, 1, 0xffffffff81000180, true, false, &loc));
	cr_assert_eq(loc.module, SYM_LOC_KERNEL);
	cr_assert(symbolizer__locate(s, 1, 0xffffffff81000400, true, true, &ret));
	cr_assert_eq(ret.offset, 0xffffffff810003ff, "a return address is named at the call");

	cr_assert_eq(symbolizer__load_kallsyms_async(s, path), 0);
	cr_assert_eq(symbolizer__resolve_loc(s, &loc, &f, 1), 1);
	cr_assert_str_eq(f.name, "local_fn");
	cr_assert_eq(f.kind, FRAME_KERNEL);
	cr_assert_eq(symbolizer__resolve_loc(s, &ret, &f, 1), 1);
	cr_assert_str_eq(f.name, "local_fn");
	cr_assert_eq(symbolizer__kallsyms_result(s), 0);

	/* a failed load reports its error and keeps the table */
	tmp_path(path, sizeof(path), "kallsyms-zero");
	write_str(path, "0000000000000000 T _stext\n0000000000000000 T schedule\n");
	cr_assert_eq(symbolizer__load_kallsyms_async(s, path), 0);
	cr_assert_eq(symbolizer__kallsyms_result(s), -EPERM);
	expect_kernel(s, 0xffffffff81000180, false, "local_fn", "[kernel.kallsyms]");
	/* a load still running when the symbolizer goes */
	cr_assert_eq(symbolizer__load_kallsyms_async(s, "/proc/kallsyms"), 0);
	symbolizer__free(s);
}
