/* SPDX-License-Identifier: MIT */
/*
 * Processes in containers, recorded from the host: a PID and a mount
 * namespace of their own and another root (tests/e2e/container.sh makes
 * them as a runtime does). The root is $DLFLAME_CONTAINER_ROOT when set (a
 * debootstrapped Debian whose python3 and torch differ from the host's;
 * CI sets DLFLAME_REQUIRE_CONTAINER_ROOT=1 and then its absence fails), else
 * a root the test makes of the host's own files, in which python3.11 is a
 * copy whose build-id differs from the host's file at the same path.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "profile/profile.h"
#include "buildids.h"
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

TestSuite(containers, .init = setup, .fini = teardown, .timeout = 600);

static void need_root(void)
{
	/* namespaces and chroot: the tests run as root, as scripts/test.sh and CI do */
	cr_assert_eq(geteuid(), 0, "the container tests need root (namespaces, chroot)");
}

/* The root to run in: container.sh's ROOT argument (free it). */
static char *container_root(bool *minimal)
{
	const char *env = getenv("DLFLAME_CONTAINER_ROOT");
	const char *req = getenv("DLFLAME_REQUIRE_CONTAINER_ROOT");
	struct stat st;
	char *r;

	if (env && *env) {
		cr_assert(!stat(env, &st) && S_ISDIR(st.st_mode),
			  "DLFLAME_CONTAINER_ROOT=%s is no directory", env);
		*minimal = false;
		return strdup(env);
	}
	cr_assert(!req || strcmp(req, "1"),
		  "DLFLAME_REQUIRE_CONTAINER_ROOT=1 but DLFLAME_CONTAINER_ROOT is not set: "
		  "debootstrap a Debian root and name it there");
	*minimal = true;
	cr_assert_neq(asprintf(&r, "minimal:%s/root", dir), -1);
	return r;
}

/*
 * Start cmd in a container (stdout and stderr to DIR/NAME.out, .err), in
 * cgroup cg ("-": ours); returns container.sh's pid (unshare's).
 */
static pid_t start(const char *root, const char *src, const char *cg, const char *name,
		   const char *const *cmd)
{
	char *sh, *out = path_in(dir, name);
	size_t len = 0, cap = 4096;
	const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
	pid_t pid;

	sh = malloc(cap);
	cr_assert_not_null(sh);
	len += (size_t)snprintf(sh + len, cap - len, "exec '%s' '%s' '%s' '%s'",
				need_env("CONTAINER_SH"), root, src, cg);
	for (; *cmd; cmd++)
		len += (size_t)snprintf(sh + len, cap - len, " '%s'", *cmd);
	len += (size_t)snprintf(sh + len, cap - len, " >'%s.out' 2>'%s.err'", out, out);
	cr_assert_lt(len, cap);
	argv[2] = sh;
	pid = run_bg(dir, argv);
	free(sh);
	free(out);
	return pid;
}

/* The container's pid 1 as the host sees it, once it runs a program named comm*. */
static pid_t inner_pid(pid_t outer, const char *comm)
{
	char path[96], buf[64];

	for (int i = 0; i < 6000; i++) {
		FILE *f;
		pid_t inner = 0;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)outer, (int)outer);
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%d", &inner) != 1)
				inner = 0;
			fclose(f);
		}
		if (inner > 0) {
			snprintf(path, sizeof(path), "/proc/%d/comm", (int)inner);
			f = fopen(path, "r");
			if (f) {
				bool ok = fgets(buf, sizeof(buf), f) &&
					  !strncmp(buf, comm, strlen(comm));

				fclose(f);
				if (ok)
					return inner;
			}
		}
		cr_assert_eq(waitpid(outer, NULL, WNOHANG), 0, "the container ended early");
		usleep(10000);
	}
	cr_assert_fail("no %s in the container after 60 s", comm);
	return -1;
}

/* The container's end: its pid 1 killed when kill, else waited for. Its exit status. */
static int finish(pid_t outer, pid_t inner, bool kill_it)
{
	int status = 0;

	if (kill_it && inner > 0)
		kill(inner,
		     SIGKILL); /* pid 1 of its namespace: only SIGKILL from outside ends it */
	cr_assert_eq(waitpid(outer, &status, 0), outer);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *folded(const char *data, const char *name, const char *opt)
{
	char *out = path_in(dir, name);
	const char *argv[] = { need_env("DLFLAME"), "report", "-i", data, "--folded", opt, NULL };
	struct run_result r = run(dir, NULL, out, argv);

	cr_assert_eq(r.status, 0, "report failed: %s", r.err);
	run_free(&r);
	return out;
}

static void judge(const char *what, const char *a, const char *b)
{
	const char *argv[] = { "/usr/bin/python3", need_env("PYSTACKS"), what, a, b, NULL };
	struct run_result r = run(dir, NULL, NULL, argv);

	cr_log_info("%s", r.out);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	run_free(&r);
}

/* A file of the container's root as the host sees it (free it). */
static char *in_root(const char *root, bool minimal, const char *path)
{
	char *r;

	/* the minimal root's python is the copy bound over the host's path: the test's own file */
	if (minimal)
		cr_assert_neq(asprintf(&r, "%s/root.python", dir), -1);
	else
		cr_assert_neq(asprintf(&r, "%s%s", root, path), -1);
	return r;
}

/* The interpreter the root's python3 runs: its path inside the root. */
static char *root_python(const char *root, bool minimal)
{
	char buf[256], *link, *r;
	ssize_t n;

	if (minimal) {
		n = readlink("/usr/bin/python3", buf, sizeof(buf) - 1);
		cr_assert_gt(n, 0);
		buf[n] = '\0';
		cr_assert_neq(asprintf(&r, "/usr/bin/%s", buf), -1);
		return r;
	}
	cr_assert_neq(asprintf(&link, "%s/usr/bin/python3", root), -1);
	n = readlink(link, buf, sizeof(buf) - 1);
	cr_assert_gt(n, 0, "%s is no link to an interpreter", link);
	buf[n] = '\0';
	free(link);
	cr_assert_neq(asprintf(&r, "/usr/bin/%s", strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf),
		      -1);
	return r;
}

/* Read the container's stdout (the fixture's JSON line). */
static char *container_out(const char *name)
{
	char *p, *txt;

	cr_assert_neq(asprintf(&p, "%s/%s.out", dir, name), -1);
	txt = read_text(p);
	free(p);
	return txt;
}

/* Where cgroup v2 is mounted (/sys/fs/cgroup, or .../unified beside v1), or fail. */
static char *cgroup2_mount(void)
{
	char line[1024], dev[256], mnt[512], type[64];
	FILE *f = fopen("/proc/mounts", "r");
	char *r = NULL;

	cr_assert_not_null(f);
	while (!r && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%255s %511s %63s", dev, mnt, type) == 3 &&
		    !strcmp(type, "cgroup2"))
			r = strdup(mnt);
	}
	fclose(f);
	cr_assert_not_null(r, "no cgroup v2 file system is mounted (/proc/mounts)");
	return r;
}

#define TEST_CTR_ID "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"

/*
 * A cgroup made for the test, named as Docker's systemd driver names a
 * container's: PARENT/docker-ID.scope. *parent: the directory to remove.
 */
static char *make_cgroup(char **parent)
{
	char *mnt = cgroup2_mount(), *cg;

	cr_assert_neq(asprintf(parent, "%s/dlflame-test-%d", mnt, (int)getpid()), -1);
	cr_assert_neq(asprintf(&cg, "%s/docker-" TEST_CTR_ID ".scope", *parent), -1);
	cr_assert(!mkdir(*parent, 0755) || errno == EEXIST, "mkdir %s: %s", *parent,
		  strerror(errno));
	cr_assert(!mkdir(cg, 0755) || errno == EEXIST, "mkdir %s: %s", cg, strerror(errno));
	free(mnt);
	return cg;
}

/* Remove the test's cgroups once their processes are gone. */
static void drop_cgroup(char *cg, char *parent)
{
	for (int i = 0; i < 500 && rmdir(cg) && errno == EBUSY; i++)
		usleep(10000);
	rmdir(parent);
	free(cg);
	free(parent);
}

/* The root made (a minimal root's copy of python) before anything is recorded. */
static void prepare(const char *root)
{
	const char *argv[] = { need_env("CONTAINER_SH"), root, dir, "-", "true", NULL };
	struct run_result r = run(dir, NULL, NULL, argv);

	cr_assert_eq(r.status, 0, "container.sh failed: %s", r.err);
	run_free(&r);
}

static void python_in_container(bool launch)
{
	bool minimal;
	char *root = container_root(&minimal), *data = path_in(dir, "py.data");
	char *py = root_python(root, minimal), *pyfile, *want, *f, *json, *jpath;
	const char *base;
	pid_t outer, inner = 0;
	struct run_result r;
	char *cg_parent = NULL, *cg = NULL;

	need_root();
	prepare(root);
	if (!launch)
		cg = make_cgroup(&cg_parent);
	if (launch) {
		const char *argv[] = { need_env("DLFLAME"),
				       "record",
				       "-o",
				       data,
				       "--",
				       need_env("CONTAINER_SH"),
				       root,
				       need_env("PY_FIXTURES"),
				       "-",
				       "python3",
				       "/tmp/src/split.py",
				       "8",
				       NULL };

		r = run(dir, NULL, NULL, argv);
		cr_log_info("%s", r.err);
		cr_assert_eq(r.status, 0, "record failed: %s", r.err);
		json = strdup(r.out);
	} else {
		/* long enough for 200 samples on a busy machine */
		const char *cmd[] = { "python3", "/tmp/src/split.py", "24", NULL };
		char pid[16];
		const char *argv[] = {
			need_env("DLFLAME"), "record", "-p", pid, "-d", "20", "-o", data, NULL
		};

		outer = start(root, need_env("PY_FIXTURES"), cg, "split", cmd);
		inner = inner_pid(outer, "python3");
		usleep(1000000); /* past the imports, into its loop */
		snprintf(pid, sizeof(pid), "%d", (int)inner);
		r = run(dir, NULL, NULL, argv);
		cr_log_info("%s", r.err);
		cr_assert_eq(r.status, 0, "record failed: %s", r.err);
		cr_assert_eq(finish(outer, inner, false), 0, "the fixture failed");
		json = container_out("split");
	}
	{
		const char *at = strstr(r.err, "Python frames in ");
		double share = 0;

		cr_assert_not_null(at, "no Python figure: %s", r.err);
		cr_assert_eq(sscanf(at, "Python frames in %lf%%", &share), 1);
		cr_assert_geq(share, 90.0,
			      "Python frames in %.1f%% of eval calls; the recorder said: %s", share,
			      r.err);
	}
	assert_container_frames(r.err);
	run_free(&r);
	jpath = path_in(dir, "split.json");
	{
		FILE *jf = fopen(jpath, "w");

		cr_assert_not_null(jf);
		fputs(json, jf);
		fclose(jf);
	}
	f = folded(data, "split.folded", NULL);
	if (launch) {
		/*
		 * Launched, the interpreter's start is recorded too: on a busy machine
		 * its imports outweigh the timed loop, which the shares judge.
		 */
		const char *argv[] = {
			"/usr/bin/python3", need_env("PYSTACKS"), "has", f, "main (split.py)",
			"key_b (split.py)", "spin_c (split.py)",  NULL
		};

		r = run(dir, NULL, NULL, argv);
		cr_assert_eq(r.status, 0, "%s", r.out);
		run_free(&r);
	} else {
		/* its container, as the runtime's cgroup names it: in every label */
		const char *top[] = { need_env("DLFLAME"), "report", "-i", data, "--top", "--by",
				      "process",	   NULL };
		char *pt = folded(data, "thread.folded", "--per-thread"), *txt;
		char label[64];

		judge("split", f, jpath);
		snprintf(label, sizeof(label), "python3-%d [%.12s]", (int)inner, TEST_CTR_ID);
		r = run(dir, NULL, NULL, top);
		cr_assert_eq(r.status, 0, "%s", r.err);
		cr_assert_not_null(strstr(r.out, label), "--top --by process: no %s in\n%s", label,
				   r.out);
		run_free(&r);
		snprintf(label, sizeof(label), "python3-%d/%d [%.12s];", (int)inner, (int)inner,
			 TEST_CTR_ID);
		txt = read_text(pt);
		cr_assert_not_null(strstr(txt, label), "--per-thread: no %s", label);
		free(txt);
		free(pt);
		drop_cgroup(cg, cg_parent);
	}
	/* the interpreter's frames come from the container's file, never the host's */
	pyfile = in_root(root, minimal, py);
	want = build_id(dir, pyfile);
	base = strrchr(py, '/') + 1;
	cr_assert_gt(frames_of(data, base, want), 0, "no frame of %s", base);
	free(root);
	free(data);
	free(py);
	free(pyfile);
	free(want);
	free(f);
	free(json);
	free(jpath);
}

/* A pure-Python program as pid 1 of a container, attached from the host. */
Test(containers, python_attach)
{
	python_in_container(false);
}

/* The same launched: dlflame record -- container.sh ... python3 (unshare, chroot, exec). */
Test(containers, python_launch)
{
	python_in_container(true);
}

/* The share of samples of thread tid that hold a Python frame ("(FILE.py)"), per --per-thread folded. */
static double python_share(const char *folded_path, pid_t tid, unsigned long *total)
{
	char *txt = read_text(folded_path), *line, *save = NULL, prefix[64];
	unsigned long with = 0;

	*total = 0;
	snprintf(prefix, sizeof(prefix), "-%d/%d", (int)tid, (int)tid);
	for (line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' '), *first_end = strchr(line, ';');
		unsigned long n;

		if (!sp || !first_end)
			continue;
		*first_end = '\0';
		if (!strstr(line, prefix)) /* the first frame names the thread */
			continue;
		*first_end = ';';
		n = strtoul(sp + 1, NULL, 10);
		*total += n;
		*sp = '\0';
		/* a Python frame: "function (file.py)" */
		if (strstr(first_end, ".py)"))
			with += n;
	}
	free(txt);
	return *total ? 100.0 * (double)with / (double)*total : 0;
}

/*
 * The PyTorch CNN as pid 1 of a container, attached from the host, as the
 * README says to attach (ONEDNN_JIT_PROFILE=2): Python frames on the main
 * thread, JIT kernels named from the perf map oneDNN wrote in the
 * container's /tmp under its own pid, libtorch named from the container's file.
 */
Test(containers, cnn_attach, .timeout = 1200)
{
	bool minimal;
	char *root = container_root(&minimal), *data = path_in(dir, "cnn.data");
	const char *cmd[] = { "ONEDNN_JIT_PROFILE=2", "python3", "/tmp/src/cnn_train.py", "100000",
			      NULL };
	char pid[16], *f, *pt, *txt;
	const char *argv[] = {
		need_env("DLFLAME"), "record", "-p", pid, "-d", "20", "-o", data, NULL
	};
	struct run_result r;
	unsigned long main_total;
	double share;
	pid_t outer, inner;
	int waited = 0;

	need_root();
	prepare(root);
	/* cmd runs under env(1) in the container: its first word sets the variable */
	outer = start(root, need_env("EXAMPLES"), "-", "cnn", cmd);
	inner = inner_pid(outer, "python3");
	/* training: oneDNN has made its first kernel and written its map, as pid 1 */
	for (;; waited++) {
		char mp[96];

		snprintf(mp, sizeof(mp), "/proc/%d/root/tmp/perf-1.map", (int)inner);
		if (!access(mp, R_OK))
			break;
		cr_assert_lt(waited, 1200, "no /tmp/perf-1.map in the container after 10 minutes");
		cr_assert_eq(waitpid(outer, NULL, WNOHANG), 0, "the trainer ended early");
		usleep(500000);
	}
	usleep(2000000);
	snprintf(pid, sizeof(pid), "%d", (int)inner);
	r = run(dir, NULL, NULL, argv);
	cr_log_info("%s", r.err);
	finish(outer, inner, true);
	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	assert_container_frames(r.err);
	run_free(&r);
	f = folded(data, "cnn.folded", NULL);
	txt = read_text(f);
	cr_assert_null(strstr(txt, ";[JIT]"), "an unnamed JIT frame: the perf map was not read");
	cr_assert_not_null(strstr(txt, "_[j]"), "no JIT kernel named");
	cr_assert(strstr(txt, "at::") != NULL, "no libtorch function named");
	free(txt);
	pt = folded(data, "cnn-thread.folded", "--per-thread");
	share = python_share(pt, inner, &main_total);
	cr_log_info("main thread: %lu samples, %.1f%% with Python frames", main_total, share);
	cr_assert_gt(main_total, 50, "only %lu samples of the main thread", main_total);
	cr_assert_geq(share, 90.0, "Python frames in %.1f%% of the main thread's samples", share);
	free(root);
	free(data);
	free(f);
	free(pt);
}

/* --cgroup on what is no cgroup: one line, exit 2. */
Test(containers, cgroup_not_a_cgroup)
{
	const char *argv[] = { need_env("DLFLAME"), "record", "--cgroup", dir, "-d", "1", NULL };
	struct run_result r = run(dir, NULL, NULL, argv);

	cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	cr_assert_eq(count_str(r.err, "\n"), 1, "not one line: %s", r.err);
	cr_assert_not_null(strstr(r.err, "not a cgroup v2 directory"), "%s", r.err);
	run_free(&r);
}

/*
 * A whole container by its cgroup: the process there when the recording
 * began, and one started in it while recording, each with its Python
 * frames and its container label.
 */
Test(containers, cgroup_whole)
{
	bool minimal;
	char *root = container_root(&minimal), *data = path_in(dir, "cg.data"), *parent, *cg;
	const char *first[] = { "python3", "/tmp/src/split.py", "24", NULL };
	const char *later[] = { "python3", "/tmp/src/split.py", "6", NULL };
	char *argv[] = { (char *)need_env("DLFLAME"),
			 "record",
			 "--cgroup",
			 NULL,
			 "-d",
			 "16",
			 "-o",
			 data,
			 NULL };
	pid_t rec, outer1, inner1, outer2, inner2;
	int status;
	char *pt, *txt, *errpath, label[64];

	need_root();
	prepare(root);
	cg = make_cgroup(&parent);
	argv[3] = cg;
	outer1 = start(root, need_env("PY_FIXTURES"), cg, "first", first);
	inner1 = inner_pid(outer1, "python3");
	rec = fork();
	cr_assert_geq(rec, 0);
	if (rec == 0) {
		int fd = open(path_in(dir, "rec.err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	usleep(3000000); /* the recording runs: this one starts after it began */
	outer2 = start(root, need_env("PY_FIXTURES"), cg, "later", later);
	inner2 = inner_pid(outer2, "python3");
	cr_assert_eq(waitpid(rec, &status, 0), rec);
	errpath = path_in(dir, "rec.err");
	txt = read_text(errpath);
	free(errpath);
	cr_log_info("%s", txt);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "record failed: %s", txt);
	assert_container_frames(txt);
	free(txt);
	finish(outer2, inner2, false);
	finish(outer1, inner1, true);
	drop_cgroup(cg, parent);
	pt = folded(data, "cg-thread.folded", "--per-thread");
	txt = read_text(pt);
	for (int i = 0; i < 2; i++) {
		pid_t p = i ? inner2 : inner1;
		unsigned long n;
		double share = python_share(pt, p, &n);

		snprintf(label, sizeof(label), "python3-%d/%d [%.12s];", (int)p, (int)p,
			 TEST_CTR_ID);
		cr_assert_not_null(strstr(txt, label), "no %s: the %s process is missing", label,
				   i ? "later" : "first");
		cr_log_info("%s process %d: %lu samples, %.1f%% with Python frames",
			    i ? "later" : "first", (int)p, n, share);
		cr_assert_geq(share, 90.0, "%s process: Python frames in %.1f%% of its samples",
			      i ? "later" : "first", share);
	}
	free(txt);
	free(root);
	free(data);
	free(pt);
}
