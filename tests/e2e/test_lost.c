/* SPDX-License-Identifier: MIT */
/*
 * Nothing lost at the default settings: DWARF stacks (32 KiB copies) of
 * every on-CPU sample and every context switch, on the oneDNN MLP with two
 * OpenMP threads, Debian's PyTorch CNN trainer and a two-rank
 * DistributedDataParallel job (gloo, one process per rank as torchrun
 * starts them) whose first `import torch` finds torch's files out of the
 * page cache. The summary line and the profile both say 0 lost.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile/profile.h"
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

TestSuite(lost, .init = setup, .fini = teardown, .timeout = 600);

/*
 * On Debian 13's PyTorch 2.6 the two-rank gloo job lost records while its
 * Python frames were read after each sample (a fresh Debian 13 root,
 * session 8: 13,254 lost; a dev root with a cold cache: 132,652 and
 * 167,048): the reader's wake-ups preempted the ranks, each preemption a
 * context-switch sample with a stack copy. With the frames taken at the
 * sample (the default as root) the reader looks every 10 ms, and nothing
 * may be lost on any torch: this was a skip until then.
 */

static void no_loss(char *const env[], const char *const *cmd)
{
	char *data = path_in(dir, "l.data");
	const char *argv[32] = {
		need_env("DLFLAME"), "record", "--forward-exit", "-o", data, "--"
	};
	struct profile_read_error e = { 0 };
	struct profile *p = NULL;
	struct run_result r;
	unsigned long samples = 0, lost = 1;
	const char *line;
	size_t n = 6;

	for (size_t i = 0; cmd[i] && n < 31; i++)
		argv[n++] = cmd[i];
	argv[n] = NULL;
	r = run(dir, env, NULL, argv);
	cr_assert_eq(r.status, 0, "%s", r.err);
	line = strstr(r.err, "dlflame: ");
	while (line && sscanf(line, "dlflame: %*f s, %lu samples, %*f s blocked, %lu lost",
			      &samples, &lost) != 2)
		line = strstr(line + 1, "dlflame: ");
	cr_assert_not_null(line, "no summary line: %s", r.err);
	cr_assert_gt(samples, 1000, "%s", r.err);
	cr_assert_eq(lost, 0, "%s", r.err);
	/* nor kept without its stack for want of room (record --buffer) */
	cr_assert_null(strstr(r.err, "kept without their stacks"), "%s", r.err);
	cr_assert_eq(profile__read(data, &p, &e), 0, "%s", e.what ? e.what : "read failed");
	cr_assert_eq(profile__cmeta(p)->lost, 0);
	profile__free(p);
	run_free(&r);
	free(data);
}

/* Also warms the page cache with torch's files: ddp_two_ranks drops them again. */
static void need_torch(void)
{
	const char *probe[] = { "/usr/bin/python3", "-c", "import torch", NULL };
	struct run_result r = run(dir, NULL, NULL, probe);

	cr_assert_eq(r.status, 0,
		     "python3 cannot import torch: scripts/setup.sh installs python3-torch\n%s",
		     r.err);
	run_free(&r);
}

Test(lost, mlp_two_threads)
{
	char *env[] = { "OMP_NUM_THREADS=2", NULL };
	const char *mlp = need_mlp();
	const char *cmd[] = { mlp, "1500", NULL };

	no_loss(env, cmd);
}

Test(lost, cnn_trainer)
{
	char *script;

	need_torch();
	script = path_in(need_env("EXAMPLES"), "cnn_train.py");
	const char *cmd[] = { "/usr/bin/python3", script, "60", NULL };
	no_loss(NULL, cmd);
	free(script);
}

/* Bytes of the file fd (size bytes) in the page cache now; mapping it reads nothing. */
static size_t resident(int fd, size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (size + page - 1) / page, in = 0;
	unsigned char *vec;
	void *map;

	if (!size)
		return 0;
	map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	vec = malloc(n);
	if (map != MAP_FAILED && vec && !mincore(map, size, vec))
		for (size_t i = 0; i < n; i++)
			in += vec[i] & 1;
	if (map != MAP_FAILED)
		munmap(map, size);
	free(vec);
	return in * page;
}

/*
 * The page cache as a trainer's first `import torch` finds it on a fresh
 * machine: every file that a process which imported torch and
 * torch.distributed maps is dropped from it (posix_fadvise: those files
 * only, not the whole cache of a shared machine). The trainer then reads
 * them from disk, and dlflame the unwinding tables of the libraries among
 * them. Pages that another process maps stay: the log says how much.
 */
static void cold_torch(void)
{
	const char *lister[] = { "/usr/bin/python3", "-c",
				 "import torch, torch.distributed\n"
				 "for l in open('/proc/self/maps'):\n"
				 "    f = l.split()\n"
				 "    if len(f) > 5 and f[5].startswith('/'): print(f[5])",
				 NULL };
	struct run_result r = run(dir, NULL, NULL, lister);
	size_t files = 0, total = 0, before = 0, after = 0;
	const char *prev = "";

	cr_assert_eq(r.status, 0, "%s", r.err);
	for (char *line = strtok(r.out, "\n"); line; prev = line, line = strtok(NULL, "\n")) {
		struct stat st;
		int fd;

		/* a file's segments are listed one after the other */
		if (!strcmp(line, prev) || (fd = open(line, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		if (!fstat(fd, &st) && S_ISREG(st.st_mode)) {
			files++;
			total += (size_t)st.st_size;
			before += resident(fd, (size_t)st.st_size);
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			after += resident(fd, (size_t)st.st_size);
		}
		close(fd);
	}
	cr_assert_gt(files, 10, "torch maps more files than that: %s", r.out);
	cr_log_info("torch's %zu mapped files: %zu MiB, %zu MiB of it cached, %zu MiB still", files,
		    total >> 20, before >> 20, after >> 20);
	run_free(&r);
}

/*
 * Before the rings were emptied by a thread of their own, this lost 79 to
 * 8,760 records a run (after drop_caches: 10 to 8,818). While the early
 * thread looked at the rings every 100 us, PyTorch 2.6's job lost 30,000 to
 * 150,000 on a quiet machine: each look could preempt a rank, and its
 * context-switch sample made 14 of every 15 samples (DESIGN.md, sampler).
 */
Test(lost, ddp_two_ranks_cold_cache)
{
	char *script;

	need_torch();
	cold_torch();
	script = path_in(need_env("EXAMPLES"), "ddp_train.py");
	const char *cmd[] = { "/usr/bin/python3", script, "40", "--world", "2",
			      "--slow-rank",	  "1",	  NULL };
	no_loss(NULL, cmd);
	free(script);
}
