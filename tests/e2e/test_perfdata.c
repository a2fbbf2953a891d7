/* SPDX-License-Identifier: MIT */
/*
 * `dlflame report -i perf.data` against the real perf (Debian's linux-perf):
 * the same samples and the same stacks as `perf script` on the same file,
 * also for files written with perf record -z (compressed records).
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

static char *dir;

static void setup(void)
{
	cr_assert(!system("command -v perf >/dev/null"),
		  "perf is not installed: scripts/setup.sh installs linux-perf");
	dir = make_dir();
}

static void teardown(void)
{
	if (dir)
		rm_dir(dir);
}

TestSuite(perfdata, .init = setup, .fini = teardown, .timeout = 180);

__attribute__((format(printf, 1, 2))) static void sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static unsigned long sum_counts(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[8192];
	unsigned long n = 0;

	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof(line), f)) {
		char *sp = strrchr(line, ' ');
		cr_assert_not_null(sp, "folded line without a count: %s", line);
		n += strtoul(sp + 1, NULL, 10);
	}
	fclose(f);
	return n;
}

static unsigned long perf_samples(const char *data)
{
	char cmd[512];
	unsigned long n = 0;

	snprintf(cmd, sizeof(cmd), "perf script -i '%s' -F tid -G 2>/dev/null | wc -l", data);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%lu", &n), 1);
	pclose(f);
	return n;
}

/*
 * dlflame's and perf's folded stacks of `data`, cut to the frames perf shows
 * in `module` (the fixture's functions, whatever they are: once, the names
 * were a fixed list, and a sample in the fixture's thread_ns or, at exit,
 * its __do_global_dtors_aux, kept by perf's side only, failed the diff),
 * are identical.
 */
static void compare_with_perf(const char *data, const char *module)
{
	const char *dl = need_env("DLFLAME"), *collapse = need_env("PERF_COLLAPSE");

	/*
	 * --no-demangle: perf 6.12 runs C names through a demangler and shows
	 * the fixture's a, b and c as "signed char", "bool" and "char"
	 */
	sh("cd '%s' && perf script --no-demangle -i '%s' -F comm,tid,ip,sym,dso 2>/dev/null | "
	   "python3 '%s' %s > perf.folded",
	   dir, data, collapse, module);
	sh("cd '%s' && '%s' report -i '%s' --folded > dl.all 2>dl.err", dir, dl, data);
	sh("cd '%s' && python3 '%s' --keep-from perf.folded < dl.all > dl.folded", dir, collapse);
	char *all = path_in(dir, "dl.all");
	cr_assert_eq(sum_counts(all), perf_samples(data),
		     "the same number of samples as perf script");
	free(all);
	sh("cd '%s' && diff -u perf.folded dl.folded >&2", dir);
}

Test(perfdata, fp_file_gives_perf_scripts_stacks)
{
	char *data = path_in(dir, "fp.data");

	sh("perf record -q -g -F 999 -o '%s' -- '%s' 60 >/dev/null 2>&1", data,
	   need_env("FIXTURE_SPLIT"));
	compare_with_perf(data, "/split");
	free(data);
}

Test(perfdata, pipe_mode_on_stdin)
{
	char *data = path_in(dir, "pipe.data");
	char *out = path_in(dir, "pipe.folded");

	sh("perf record -q -g -F 999 -o - -- '%s' 40 2>/dev/null > '%s'", need_env("FIXTURE_SPLIT"),
	   data);
	sh("'%s' report -i - --folded < '%s' > '%s'", need_env("DLFLAME"), data, out);
	cr_assert_eq(sum_counts(out), perf_samples(data));
	free(data);
	free(out);
}

Test(perfdata, corrupt_file_is_one_line_naming_the_offset)
{
	char *data = path_in(dir, "c.data");
	const char *argv[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", NULL };

	sh("perf record -q -g -F 999 -o '%s' -- '%s' 10 >/dev/null 2>&1", data,
	   need_env("FIXTURE_SPLIT"));
	/* the first record's size field: 0xffff runs past the data section */
	sh("python3 -c \"import struct,sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); "
	   "o=struct.unpack_from('<Q',b,40)[0]; b[o+6]=0xff; b[o+7]=0xff; open(p,'wb').write(b)\" '%s'",
	   data);
	struct run_result r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 1, "exit 1, not a crash: %d, %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "offset"), "%s", r.err);
	cr_assert_eq(count_str(r.err, "\n"), 1, "one line: %s", r.err);
	run_free(&r);
	free(data);
}

Test(perfdata, dwarf_file_of_a_no_frame_pointer_chain_has_whole_stacks)
{
	const char *chain = need_env("FIXTURE_CHAIN");
	char *data = path_in(dir, "dw.data");
	char *out = path_in(dir, "dw.folded");

	sh("perf record -q --call-graph dwarf -F 999 -o '%s' -- '%s' >/dev/null 2>&1", data, chain);
	sh("'%s' report -i '%s' --folded > '%s'", need_env("DLFLAME"), data, out);
	char *text = read_text(out);
	unsigned long hot = count_frame(text, "hot", NULL),
		      whole = count_chain(text, "main;a;b;c;hot");

	free(text);
	cr_assert_gt(hot, 100, "samples in hot: %lu", hot);
	cr_assert_eq(whole, hot, "every hot sample has main;a;b;c;hot (%lu of %lu)", whole, hot);
	/* the importer says how stacks ended, as record does: here all of them whole */
	cr_assert_geq(assert_ends_agree(data, NULL, true), 99.0);
	free(data);
	free(out);
}

/*
 * 2 KiB copies are too small for oneDNN's GEMM frame: the import counts
 * those stacks cut, and says why. (perf's default 8 KiB ones came out
 * 87-93% complete once grafts from known stacks complete the rest.)
 */
Test(perfdata, dwarf_file_of_the_mlp_states_how_stacks_ended)
{
	const char *mlp = need_mlp();
	char *data = path_in(dir, "mlp.data");
	const char *argv[] = { need_env("DLFLAME"), "report", "-i", data, "--top", NULL };
	struct run_result r;
	double share;

	sh("OMP_NUM_THREADS=1 perf record -q --call-graph dwarf,2048 -F 999 -o '%s' -- '%s' 300 "
	   ">/dev/null 2>&1",
	   data, mlp);
	share = assert_ends_agree(data, NULL, true);
	cr_assert_lt(share, 90.0, "2 KiB copies: %.1f%% complete", share);
	r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "of stacks complete; cut: "), "%s", r.out);
	cr_assert(strstr(r.out, "stack copy exhausted ") ||
			  strstr(r.out, "JIT caller not recovered "),
		  "%s", r.out);
	run_free(&r);
	free(data);
}

Test(perfdata, truncated_file_is_an_error_not_a_crash)
{
	char *data = path_in(dir, "t.data");
	const char *argv[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", NULL };

	sh("perf record -q --call-graph dwarf,8192 -F 999 -o '%s' -- '%s' 10 >/dev/null 2>&1", data,
	   need_env("FIXTURE_SPLIT"));
	/* the header still claims the whole data section; the file ends halfway through it */
	sh("python3 -c \"import struct,sys; p=sys.argv[1]; b=open(p,'rb').read(); "
	   "o,n=struct.unpack_from('<QQ',b,40); open(p,'wb').write(b[:o+n//2])\" '%s'",
	   data);
	struct run_result r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 1, "exit 1, not a crash: %d, %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "truncated"), "%s", r.err);
	cr_assert_eq(count_str(r.err, "\n"), 1, "one line: %s", r.err);
	run_free(&r);
	free(data);
}

/* ---- perf record -z ------------------------------------------------------- */

/*
 * The file offset of the middle compressed record of a file-mode perf.data
 * (python3): COMPRESSED (type 81) before perf 6.16, COMPRESSED2 (83) since.
 * *type: which.
 */
static unsigned long middle_compressed_of(const char *data, unsigned int *type)
{
	char cmd[1024];
	unsigned long off = 0;
	unsigned int t = 0;

	snprintf(
		cmd, sizeof(cmd),
		"python3 -c \"import struct,sys; b=open(sys.argv[1],'rb').read(); "
		"o,n=struct.unpack_from('<QQ',b,40); p=o; c=[]\n"
		"while p<o+n:\n t,s=struct.unpack_from('<I2xH',b,p); c+=[p] if t in (81,83) else []; "
		"p+=s\n"
		"print(c[len(c)//2], b[c[len(c)//2]])\" '%s'",
		data);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%lu %u", &off, &t), 2, "%s has compressed records", data);
	pclose(f);
	if (type)
		*type = t;
	return off;
}

static unsigned long middle_compressed(const char *data)
{
	return middle_compressed_of(data, NULL);
}

/* perf's oracle is perf script on the same -z file: it decompresses as it reads. */
Test(perfdata, compressed_fp_file_gives_perf_scripts_stacks)
{
	char *data = path_in(dir, "zfp.data");

	sh("perf record -q -z -g -F 999 -o '%s' -- '%s' 60 >/dev/null 2>&1", data,
	   need_env("FIXTURE_SPLIT"));
	cr_assert_neq(middle_compressed(data), 0);
	compare_with_perf(data, "/split");
	free(data);
}

Test(perfdata, compressed_dwarf_file_gives_perf_scripts_stacks)
{
	const char *chain = need_env("FIXTURE_CHAIN");
	char *data = path_in(dir, "zdw.data");
	char *all = path_in(dir, "dl.all");

	sh("perf record -q -z --call-graph dwarf -F 999 -o '%s' -- '%s' >/dev/null 2>&1", data,
	   chain);
	cr_assert_neq(middle_compressed(data), 0);
	/* DWARF copies compress hundreds of times: records span COMPRESSED records */
	compare_with_perf(data, "/chain");
	char *text = read_text(all);
	unsigned long hot = count_frame(text, "hot", NULL),
		      whole = count_chain(text, "main;a;b;c;hot");

	free(text);
	cr_assert_gt(hot, 100, "samples in hot: %lu", hot);
	cr_assert_eq(whole, hot, "every hot sample has main;a;b;c;hot (%lu of %lu)", whole, hot);
	free(all);
	free(data);
}

Test(perfdata, compressed_pipe_mode_on_stdin)
{
	char *data = path_in(dir, "zpipe.data");
	char *out = path_in(dir, "zpipe.folded");

	sh("perf record -q -z -g -F 999 -o - -- '%s' 40 2>/dev/null > '%s'",
	   need_env("FIXTURE_SPLIT"), data);
	sh("'%s' report -i - --folded < '%s' > '%s'", need_env("DLFLAME"), data, out);
	cr_assert_gt(sum_counts(out), 0);
	cr_assert_eq(sum_counts(out), perf_samples(data));
	free(data);
	free(out);
}

/* Inverted bytes at the start of a payload (the zstd block header): one line naming it. */
Test(perfdata, compressed_corrupt_frame_is_one_line_naming_the_offset)
{
	char *data = path_in(dir, "zc.data");
	const char *argv[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", NULL };
	char where[128];
	unsigned int type;

	sh("perf record -q -z --call-graph dwarf -F 999 -o '%s' -- '%s' 20 >/dev/null 2>&1", data,
	   need_env("FIXTURE_SPLIT"));
	unsigned long off = middle_compressed_of(data, &type);
	/* the payload: after the header, and COMPRESSED2's data size */
	unsigned long pay = off + (type == 83 ? 16 : 8);
	sh("python3 -c \"import sys; p=sys.argv[1]; o=int(sys.argv[2]); b=bytearray(open(p,'rb').read()); "
	   "b[o:o+32]=bytes(x^0xff for x in b[o:o+32]); open(p,'wb').write(b)\" '%s' %lu",
	   data, pay);
	struct run_result r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 1, "exit 1, not a crash: %d, %s", r.status, r.err);
	snprintf(where, sizeof(where), "%s record at byte offset %lu",
		 type == 83 ? "COMPRESSED2" : "COMPRESSED", off);
	cr_assert_not_null(strstr(r.err, where), "%s: %s", where, r.err);
	cr_assert_not_null(strstr(r.err, "corrupt zstd data"), "%s", r.err);
	cr_assert_eq(count_str(r.err, "\n"), 1, "one line: %s", r.err);
	run_free(&r);
	free(data);
}

Test(perfdata, compressed_truncated_file_is_an_error_not_a_crash)
{
	char *data = path_in(dir, "zt.data");
	char *pipe = path_in(dir, "ztp.data");
	const char *argv[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", NULL };
	const char *pargv[] = { need_env("DLFLAME"), "report", "-i", pipe, "--folded", NULL };

	sh("perf record -q -z --call-graph dwarf -F 999 -o '%s' -- '%s' 20 >/dev/null 2>&1", data,
	   need_env("FIXTURE_SPLIT"));
	/* cut inside the middle COMPRESSED record; the header still claims the whole data */
	unsigned long off = middle_compressed(data);
	sh("truncate -s %lu '%s'", off + 100, data);
	struct run_result r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 1, "exit 1, not a crash: %d, %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "truncated"), "%s", r.err);
	cr_assert_eq(count_str(r.err, "\n"), 1, "one line: %s", r.err);
	run_free(&r);
	/*
	 * A pipe-mode stream cut there, halfway into the middle COMPRESSED
	 * record (a fixed 100 bytes in fell past a small one, into the next
	 * record's header, in a fresh Debian 13 root): the record is short.
	 */
	sh("perf record -q -z --call-graph dwarf -F 999 -o - -- '%s' 20 2>/dev/null > '%s'",
	   need_env("FIXTURE_SPLIT"), pipe);
	sh("python3 -c \"import struct,sys; p=sys.argv[1]; b=open(p,'rb').read(); q=16; c=[]\n"
	   "while q<len(b):\n t,s=struct.unpack_from('<I2xH',b,q); c+=[(q,s)] if t in (81,83) else []; "
	   "q+=s+((struct.unpack_from('<I',b,q+8)[0]+7)&~7 if t==66 else 0)\n"
	   "q,s=c[len(c)//2]; open(p,'wb').write(b[:q+s//2])\" '%s'",
	   pipe);
	r = run(dir, NULL, NULL, pargv);
	cr_assert_eq(r.status, 1, "exit 1, not a crash: %d, %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "truncated record (COMPRESSED"), "%s", r.err);
	cr_assert_eq(count_str(r.err, "\n"), 1, "one line: %s", r.err);
	run_free(&r);
	free(pipe);
	free(data);
}

/* ---- files of today's perfs, committed with their perf script ------------- */

/*
 * tests/fixtures/perfdata (record.sh): written by Debian unstable's perf
 * 7.2 (COMPRESSED2 for -z) and Debian 13's 6.12, with that perf's own
 * `perf script` beside each. No perf is needed to read them: the fixtures
 * they sampled are committed too (bin/), and put back at the path the files
 * name. Their C library is the recording root's, not this machine's: stacks
 * are compared from main down, the fixture's own frames.
 */
#define FIXTURE_BINS "/tmp/dlflame-perfdata-fixtures"

static void files_setup(void)
{
	const char *src = need_env("PERFDATA_FIXTURES");

	dir = make_dir();
	/* a copy renamed into place: concurrent runs see a whole file or the one before */
	sh("mkdir -p " FIXTURE_BINS " && for f in chain split; do cmp -s '%s/bin/'$f " FIXTURE_BINS
	   "/$f || { cp '%s/bin/'$f " FIXTURE_BINS "/.$f.$$ && mv -f " FIXTURE_BINS
	   "/.$f.$$ " FIXTURE_BINS "/$f; } || exit 1; done",
	   src, src);
}

TestSuite(perfdata_files, .init = files_setup, .fini = teardown, .timeout = 180);

/* perf script's samples in NAME.script.gz: one line each that is not a frame. */
static unsigned long script_samples(const char *name)
{
	char cmd[1024];
	unsigned long n = 0;

	snprintf(cmd, sizeof(cmd), "gzip -dc '%s/%s.script.gz' | grep -c '^[^[:space:]]'",
		 need_env("PERFDATA_FIXTURES"), name);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%lu", &n), 1);
	pclose(f);
	cr_assert_gt(n, 100, "%s: perf script's samples", name);
	return n;
}

/*
 * dlflame report of NAME.data (on stdin when pipe) against its perf script:
 * as many samples, every one on-CPU, and the same stacks of the fixture's
 * frames (keep: from main down).
 */
static void same_as_perf_script(const char *name, bool pipe, const char *module, const char *keep)
{
	const char *src = need_env("PERFDATA_FIXTURES"), *dl = need_env("DLFLAME"),
		   *collapse = need_env("PERF_COLLAPSE");
	char *all = path_in(dir, "dl.all");

	if (pipe)
		sh("cd '%s' && '%s' report -i - --folded < '%s/%s.data' > dl.all 2>dl.err", dir, dl,
		   src, name);
	else
		sh("cd '%s' && '%s' report -i '%s/%s.data' --folded > dl.all 2>dl.err", dir, dl,
		   src, name);
	cr_assert_eq(sum_counts(all), script_samples(name), "%s: every sample, on-CPU", name);
	sh("cd '%s' && python3 '%s' --keep %s < dl.all > dl.folded", dir, collapse, keep);
	sh("cd '%s' && gzip -dc '%s/%s.script.gz' | python3 '%s' %s | python3 '%s' --keep %s > "
	   "perf.folded",
	   dir, src, name, collapse, module, collapse, keep);
	sh("cd '%s' && diff -u perf.folded dl.folded >&2", dir);
	/* the fixture's frames are named: the stacks are not all cut at the first one */
	char *folded = path_in(dir, "dl.folded");
	char *text = read_text(folded);
	cr_assert_not_null(strstr(text, ";main;"), "%s: %s", name, text);
	free(text);
	free(folded);
	free(all);
}

#define CHAIN_FRAMES "main,chain_a,chain_b,chain_c,hot"
#define SPLIT_FRAMES "main,alpha,bravo,charlie"

Test(perfdata_files, perf72_compressed2_dwarf_file)
{
	same_as_perf_script("sid-z-dwarf", false, "/chain", CHAIN_FRAMES);
}

Test(perfdata_files, perf72_compressed2_dwarf_pipe_on_stdin)
{
	same_as_perf_script("sid-z-dwarf-pipe", true, "/chain", CHAIN_FRAMES);
}

Test(perfdata_files, perf72_compressed2_fp_file)
{
	same_as_perf_script("sid-z-fp", false, "/split", SPLIT_FRAMES);
}

Test(perfdata_files, perf72_compressed2_fp_pipe_on_stdin)
{
	same_as_perf_script("sid-z-fp-pipe", true, "/split", SPLIT_FRAMES);
}

Test(perfdata_files, perf72_plain_file)
{
	same_as_perf_script("sid-plain", false, "/split", SPLIT_FRAMES);
}

/* perf 6.12 records task-clock without a PMU: on-CPU samples all the same */
Test(perfdata_files, perf612_task_clock_file)
{
	same_as_perf_script("trixie-plain", false, "/split", SPLIT_FRAMES);
}

/*
 * perf 6.12 -z writes no build-id table, and its mappings name the inode
 * of the root it ran in: the copied fixture is not that file, and its
 * frames stay unnamed (as they must: nothing says it is the same file).
 * Every sample is read, on-CPU.
 */
Test(perfdata_files, perf612_compressed_file_without_build_ids)
{
	const char *src = need_env("PERFDATA_FIXTURES");
	char *all = path_in(dir, "dl.all");

	sh("cd '%s' && '%s' report -i '%s/trixie-z-dwarf.data' --folded > dl.all 2>dl.err", dir,
	   need_env("DLFLAME"), src);
	cr_assert_eq(sum_counts(all), script_samples("trixie-z-dwarf"));
	free(all);
}

/*
 * A whole file dlflame does not read (here another byte order) is said as
 * such, in one line, not called corrupt; records of a kind it does not know
 * (a later perf's) are skipped with a warning that names their type.
 */
Test(perfdata_files, unsupported_is_said_and_unknown_kinds_skipped)
{
	const char *src = need_env("PERFDATA_FIXTURES");
	char *be = path_in(dir, "be.data"), *later = path_in(dir, "later.data");
	const char *argv[] = { need_env("DLFLAME"), "report", "-i", be, "--folded", NULL };
	const char *argv2[] = { need_env("DLFLAME"), "report", "-i", later, "--folded", NULL };

	sh("python3 -c \"import sys; b=bytearray(open(sys.argv[1],'rb').read()); "
	   "b[0:16]=b[0:8][::-1]+b[8:16][::-1]; open(sys.argv[2],'wb').write(b)\" "
	   "'%s/sid-z-fp-pipe.data' '%s'",
	   src, be);
	struct run_result r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 1, "%d: %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "big-endian"), "%s", r.err);
	cr_assert_not_null(strstr(r.err, "not what dlflame reads"), "%s", r.err);
	cr_assert_null(strstr(r.err, "is corrupt"), "%s", r.err);
	cr_assert_eq(count_str(r.err, "\n"), 1, "one line: %s", r.err);
	run_free(&r);
	/* a pipe-mode stream with two records of type 200 after perf's own */
	sh("cp '%s/sid-z-fp-pipe.data' '%s' && printf '\\310\\0\\0\\0\\0\\0\\10\\0' >> '%s' && "
	   "printf '\\310\\0\\0\\0\\0\\0\\10\\0' >> '%s'",
	   src, later, later, later);
	r = run(dir, NULL, NULL, argv2);
	cr_assert_eq(r.status, 0, "%d: %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err,
				  "2 records of kinds dlflame does not know (the first: type "
				  "200"),
			   "%s", r.err);
	run_free(&r);
	char *out = path_in(dir, "later.folded");
	sh("'%s' report -i '%s' --folded > '%s' 2>/dev/null", need_env("DLFLAME"), later, out);
	cr_assert_eq(sum_counts(out), script_samples("sid-z-fp-pipe"), "every sample read");
	free(out);
	free(be);
	free(later);
}
