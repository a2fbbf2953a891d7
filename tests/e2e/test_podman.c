/* SPDX-License-Identifier: MIT */
/*
 * Trainers in real containers: rootful podman (tests/e2e/podman.sh), each
 * container with its own PID, mount, UTS and IPC namespaces, an overlay
 * root and a cgroup of the runtime's making. Recorded from the host by
 * the pid podman gives, by the container's cgroup, by a pod's cgroup, and
 * from inside the container. The root is $DLFLAME_CONTAINER_ROOT when set (a debootstrapped
 * Debian whose python3 and torch differ from the host's), else our own "/"
 * (overlaid: the container writes to a layer of its own).
 *
 * scripts/setup.sh installs podman, runc and catatonit (a pod's pause
 * process): their absence fails the test.
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
#include <unistd.h>

#include "profile/profile.h"
#include "buildids.h"
#include "run.h"

static char *dir;
static char names[8][64];
static int nnames;
static char pod[64]; /* the pod of this test run, if any */

static void setup(void)
{
	dir = make_dir();
	nnames = 0;
	pod[0] = '\0';
}

static void podman_rm(const char *name)
{
	const char *argv[] = { need_env("PODMAN_SH"), "rm", name, NULL };
	struct run_result r = run(dir, NULL, NULL, argv);

	run_free(&r);
}

static void teardown(void)
{
	for (int i = 0; i < nnames; i++)
		podman_rm(names[i]);
	if (pod[0]) {
		const char *argv[] = { need_env("PODMAN_SH"), "pod-rm", pod, NULL };
		struct run_result r = run(dir, NULL, NULL, argv);

		run_free(&r);
	}
	rm_dir(dir);
}

TestSuite(podman, .init = setup, .fini = teardown, .timeout = 900);

static void need_podman(void)
{
	const char *argv[] = { "/bin/sh", "-c", "command -v podman && command -v runc", NULL };
	struct run_result r;

	cr_assert_eq(geteuid(), 0, "the podman tests run rootful podman: run them as root");
	r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 0,
		     "podman or runc is missing: scripts/setup.sh installs them (apt-get install "
		     "podman runc)");
	run_free(&r);
}

static const char *container_root(void)
{
	const char *env = getenv("DLFLAME_CONTAINER_ROOT");
	struct stat st;

	if (env && *env) {
		cr_assert(!stat(env, &st) && S_ISDIR(st.st_mode),
			  "DLFLAME_CONTAINER_ROOT=%s is no directory", env);
		return env;
	}
	return "/";
}

/* A container name of this test run (removed at teardown). */
static const char *new_name(const char *what)
{
	cr_assert_lt(nnames, 8);
	snprintf(names[nnames], sizeof(names[0]), "dlflame-%s-%d", what, (int)getpid());
	return names[nnames++];
}

/*
 * Start cmd (NULL-terminated) in container name, detached: root overlaid,
 * src at /tmp/src, opts (NULL-terminated, may be NULL) given to podman run.
 */
static void podman_run(const char *name, const char *root, const char *src, const char *const *opts,
		       const char *const *cmd)
{
	const char *argv[40];
	size_t n = 0;
	struct run_result r;

	argv[n++] = need_env("PODMAN_SH");
	argv[n++] = "run";
	argv[n++] = name;
	argv[n++] = root;
	argv[n++] = src;
	for (; opts && *opts && n < 30; opts++)
		argv[n++] = *opts;
	argv[n++] = "--";
	for (; *cmd && n < 39; cmd++)
		argv[n++] = *cmd;
	argv[n] = NULL;
	r = run(dir, NULL, NULL, argv);
	cr_assert_eq(r.status, 0, "podman run failed: %s", r.err);
	run_free(&r);
}

/* `podman inspect -f FMT name` (free it), its trailing newline cut. */
static char *inspect(const char *name, const char *fmt)
{
	const char *argv[] = { need_env("PODMAN_SH"), "inspect", name, fmt, NULL };
	struct run_result r = run(dir, NULL, NULL, argv);
	char *s;

	cr_assert_eq(r.status, 0, "podman inspect %s: %s", name, r.err);
	s = strndup(r.out, strcspn(r.out, "\n"));
	run_free(&r);
	return s;
}

/* The host's pid of the container's pid 1, once it runs comm (as podman says). */
static pid_t host_pid(const char *name, const char *comm)
{
	for (int i = 0; i < 3000; i++) {
		char *s = inspect(name, "{{.State.Pid}} {{.State.Running}}"), path[64], buf[64];
		int pid = 0;
		FILE *f;

		cr_assert_null(strstr(s, "false"), "container %s is not running: %s", name, s);
		pid = atoi(s);
		free(s);
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		f = pid > 0 ? fopen(path, "r") : NULL;
		if (f) {
			bool ok = fgets(buf, sizeof(buf), f) && !strncmp(buf, comm, strlen(comm));

			fclose(f);
			if (ok)
				return pid;
		}
		usleep(20000);
	}
	cr_assert_fail("container %s runs no %s after 60 s", name, comm);
	return -1;
}

static struct run_result dlflame(const char *const *args)
{
	const char *argv[24];
	size_t n = 0;

	argv[n++] = need_env("DLFLAME");
	for (; *args && n < 23; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	return run(dir, NULL, NULL, argv);
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

/*
 * The share of thread tid's samples (per --per-thread folded) holding a
 * Python frame, once it runs python3 (a process that `podman exec` starts
 * is the runtime's own code, runc init, until it execs the command) and
 * past the interpreter's start-up (Py_InitializeFromConfig: C code that
 * runs before any Python frame exists; *init counts those samples).
 */
static char no_python[512]; /* the heaviest stack python_share counted without Python frames */

static double python_share(const char *folded_path, pid_t tid, unsigned long *total,
			   unsigned long *init)
{
	char *txt = read_text(folded_path), *line, *save = NULL, prefix[64];
	unsigned long with = 0, heaviest = 0;

	*total = *init = 0;
	no_python[0] = '\0';
	snprintf(prefix, sizeof(prefix), "python3-%d/%d ", (int)tid, (int)tid);
	for (line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' '), *first_end = strchr(line, ';');
		unsigned long n;

		if (!sp || !first_end)
			continue;
		*first_end = '\0';
		if (strncmp(line, prefix, strlen(prefix))) /* the first frame names the thread */
			continue;
		*first_end = ';';
		n = strtoul(sp + 1, NULL, 10);
		*sp = '\0';
		if (strstr(first_end, ";Py_InitializeFromConfig;")) {
			*init += n;
			continue;
		}
		*total += n;
		/* "function (file.py)", or an import's "(<frozen importlib._bootstrap>)" */
		if (strstr(first_end, ".py)") || strstr(first_end, " (<frozen "))
			with += n;
		else if (n > heaviest) {
			heaviest = n;
			snprintf(no_python, sizeof(no_python), "%s %lu", line, n);
		}
	}
	free(txt);
	return *total ? 100.0 * (double)with / (double)*total : 0;
}

/* The "Python frames in N%" of a recording's stderr. */
static double python_figure(const char *err)
{
	const char *at = strstr(err, "Python frames in ");
	double share = 0;

	cr_assert_not_null(at, "no Python figure: %s", err);
	cr_assert_eq(sscanf(at, "Python frames in %lf%%", &share), 1);
	return share;
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

/* The cgroup v2 directory of a process, from its 0:: line, as a path (free it). */
static char *cgroup_of(pid_t pid)
{
	char path[64], line[1024], *mnt = cgroup2_mount(), *r = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	while (!r && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = '\0';
		cr_assert_neq(asprintf(&r, "%s%s", mnt, line + 3), -1);
	}
	fclose(f);
	free(mnt);
	cr_assert_not_null(r, "%s has no cgroup v2 line", path);
	return r;
}

/*
 * The labels a report gives the process pid of container id (podman's
 * full id): "python3-PID [ID12]" in --top --by process, "python3-PID/PID
 * [ID12];" in --per-thread.
 */
static void assert_labelled(const char *data, const char *folded_pt, pid_t pid, const char *id)
{
	const char *top[] = { "report", "-i", data, "--top", "--by", "process", NULL };
	struct run_result r = dlflame(top);
	char label[96], *txt;

	cr_assert_eq(strlen(id), 64, "podman's id %s is not 64 hex digits", id);
	snprintf(label, sizeof(label), "python3-%d [%.12s]", (int)pid, id);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, label), "--top --by process: no %s in\n%s", label, r.out);
	run_free(&r);
	snprintf(label, sizeof(label), "python3-%d/%d [%.12s];", (int)pid, (int)pid, id);
	txt = read_text(folded_pt);
	cr_assert_not_null(strstr(txt, label), "--per-thread: no %s", label);
	free(txt);
}

/*
 * The interpreter the container runs for python3: its basename in *base
 * (free both) and, returned, the file that holds it as the host sees it.
 * In our own root ("/") it is a copy of ours whose build-id differs in
 * its last byte, bound over our path in the container (-v *bind), so
 * that the container's file and ours under one path are not the same.
 */
static char *container_python(const char *root, char **base, char *bind, size_t bind_size)
{
	char link[4096], *real, *copy, *id;
	const char *slash;

	if (strcmp(root, "/")) {
		char target[4096];
		ssize_t n;

		snprintf(link, sizeof(link), "%s/usr/bin/python3", root);
		n = readlink(link, target, sizeof(target) - 1);
		cr_assert_gt(n, 0, "%s is no link to an interpreter", link);
		target[n] = '\0';
		slash = strrchr(target, '/');
		*base = strdup(slash ? slash + 1 : target);
		cr_assert_neq(asprintf(&real, "%s/usr/bin/%s", root, *base), -1);
		bind[0] = '\0';
		return real;
	}
	real = realpath("/usr/bin/python3", NULL);
	cr_assert_not_null(real);
	*base = strdup(strrchr(real, '/') + 1);
	copy = path_in(dir, "python");
	id = build_id(dir, real);
	{
		char *bytes;
		size_t len, idlen = strlen(id) / 2, hits = 0, at = 0;
		unsigned char want[64];
		FILE *f = fopen(real, "rb");

		cr_assert_not_null(f);
		cr_assert_leq(idlen, sizeof(want));
		for (size_t i = 0; i < idlen; i++)
			cr_assert_eq(sscanf(id + 2 * i, "%2hhx", &want[i]), 1);
		cr_assert_eq(fseek(f, 0, SEEK_END), 0);
		len = (size_t)ftell(f);
		rewind(f);
		bytes = malloc(len);
		cr_assert_not_null(bytes);
		cr_assert_eq(fread(bytes, 1, len, f), len);
		fclose(f);
		for (size_t i = 0; i + idlen <= len; i++) {
			if (!memcmp(bytes + i, want, idlen)) {
				hits++;
				at = i;
			}
		}
		cr_assert_eq(hits, 1, "%s holds its build-id %zu times", real, hits);
		bytes[at + idlen - 1] ^= 0xff;
		f = fopen(copy, "wb");
		cr_assert_not_null(f);
		cr_assert_eq(fwrite(bytes, 1, len, f), len);
		cr_assert_eq(fclose(f), 0);
		cr_assert_eq(chmod(copy, 0755), 0);
		free(bytes);
	}
	snprintf(bind, bind_size, "%s:%s:ro", copy, real);
	free(id);
	free(real);
	return copy;
}

/*
 * A pure-Python program as the container's pid 1, attached from the host by
 * the pid podman gives: its frames, its shares, its container by podman's
 * id, its interpreter's frames from the container's file.
 */
Test(podman, python_attach)
{
	const char *name = new_name("py"), *root = container_root();
	const char *cmd[] = { "python3", "/tmp/src/split.py", "24", NULL };
	char *data = path_in(dir, "py.data"), *id, *f, *pt, pid[16], bind[8300];
	char *pyfile, *pybase, *want;
	const char *opts[] = { "-v", bind, NULL };
	const char *rec[] = { "record", "-p", pid, "-d", "15", "-o", data, NULL };
	struct run_result r;
	unsigned long n, init;
	double share;
	pid_t p;

	need_podman();
	pyfile = container_python(root, &pybase, bind, sizeof(bind));
	podman_run(name, root, need_env("PY_FIXTURES"), bind[0] ? opts : NULL, cmd);
	p = host_pid(name, "python3");
	id = inspect(name, "{{.Id}}");
	usleep(1000000); /* past the imports, into its loop */
	snprintf(pid, sizeof(pid), "%d", (int)p);
	r = dlflame(rec);
	cr_log_info("%s", r.err);
	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	share = python_figure(r.err);
	cr_assert_geq(share, 90.0, "Python frames in %.1f%% of eval calls; the recorder said: %s",
		      share, r.err);
	assert_container_frames(r.err);
	run_free(&r);
	f = folded(data, "py.folded", NULL);
	pt = folded(data, "py-thread.folded", "--per-thread");
	share = python_share(pt, p, &n, &init);
	cr_log_info("pid %d: %lu samples, %.1f%% with Python frames", (int)p, n, share);
	cr_assert_gt(n, 100, "only %lu samples", n);
	cr_assert_geq(share, 90.0, "Python frames in %.1f%% of the samples; heaviest without: %s",
		      share, no_python);
	{
		char *txt = read_text(f);

		cr_assert_not_null(strstr(txt, "main (split.py);"), "no main (split.py)");
		cr_assert_not_null(strstr(txt, "spin_c (split.py)"), "no spin_c (split.py)");
		free(txt);
	}
	assert_labelled(data, pt, p, id);
	want = build_id(dir, pyfile);
	cr_assert_gt(frames_of(data, pybase, want), 0, "no frame of %s", pybase);
	free(want);
	free(pyfile);
	free(pybase);
	free(data);
	free(id);
	free(f);
	free(pt);
}

/*
 * The PyTorch CNN in a container started with ONEDNN_JIT_PROFILE=2, as the
 * docs say: oneDNN writes /tmp/perf-1.map in the container's overlay root,
 * under its own pid; attached from the host, JIT kernels named from it,
 * libtorch named from the container's files, Python frames on the main thread.
 */
Test(podman, cnn_attach, .timeout = 1200)
{
	const char *name = new_name("cnn"), *root = container_root();
	const char *opts[] = { "-e", "ONEDNN_JIT_PROFILE=2", NULL };
	const char *cmd[] = { "python3", "/tmp/src/cnn_train.py", "100000", NULL };
	char *data = path_in(dir, "cnn.data"), *f, *pt, *txt, pid[16], summary[2048];
	const char *rec[] = { "record", "-p", pid, "-d", "20", "-o", data, NULL };
	struct run_result r;
	unsigned long n, init;
	double share;
	pid_t p;

	need_podman();
	podman_run(name, root, need_env("EXAMPLES"), opts, cmd);
	p = host_pid(name, "python3");
	for (int waited = 0;; waited++) {
		char mp[96];

		snprintf(mp, sizeof(mp), "/proc/%d/root/tmp/perf-1.map", (int)p);
		if (!access(mp, R_OK))
			break;
		cr_assert_lt(waited, 1200, "no /tmp/perf-1.map in the container after 10 minutes");
		usleep(500000);
	}
	usleep(2000000);
	snprintf(pid, sizeof(pid), "%d", (int)p);
	r = dlflame(rec);
	cr_log_info("%s", r.err);
	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	assert_container_frames(r.err);
	snprintf(summary, sizeof(summary), "%s", r.err);
	run_free(&r);
	f = folded(data, "cnn.folded", NULL);
	txt = read_text(f);
	cr_assert_null(strstr(txt, ";[JIT]"), "an unnamed JIT frame: the perf map was not read");
	cr_assert_not_null(strstr(txt, "_[j]"), "no JIT kernel named");
	cr_assert_not_null(strstr(txt, "at::"), "no libtorch function named");
	free(txt);
	pt = folded(data, "cnn-thread.folded", "--per-thread");
	share = python_share(pt, p, &n, &init);
	cr_log_info("main thread: %lu samples, %.1f%% with Python frames", n, share);
	cr_assert_gt(n, 50, "only %lu samples of the main thread", n);
	/* what the recording said, and the heaviest stack without Python frames */
	cr_assert_geq(share, 90.0,
		      "Python frames in %.1f%% of the main thread's samples; recorded: %s; "
		      "heaviest without: %s",
		      share, summary, no_python);
	free(data);
	free(f);
	free(pt);
}

/* A process of cgroup cg running comm, other than not (0: any), within 60 s; its pid. */
static pid_t in_cgroup(const char *cg, const char *comm, pid_t not )
{
	char *path = NULL;

	cr_assert_neq(asprintf(&path, "%s/cgroup.procs", cg), -1);
	for (int i = 0; i < 3000; i++) {
		FILE *f = fopen(path, "r");

		cr_assert_not_null(f, "%s: %s", path, strerror(errno));
		for (int p; fscanf(f, "%d", &p) == 1;) {
			char cpath[64], buf[32] = "";
			FILE *c;
			bool ok;

			if (p == not )
				continue;
			snprintf(cpath, sizeof(cpath), "/proc/%d/comm", p);
			c = fopen(cpath, "r");
			ok = c && fgets(buf, sizeof(buf), c) && !strncmp(buf, comm, strlen(comm));
			if (c)
				fclose(c);
			if (ok) {
				fclose(f);
				free(path);
				return p;
			}
		}
		fclose(f);
		usleep(20000);
	}
	cr_assert_fail("no %s in %s after 60 s", comm, path);
	return -1;
}

/*
 * A whole container by the cgroup podman made for it: a process there when
 * the recording began, and one the container starts while recording (as a
 * launcher starts its workers), each with its Python frames and podman's
 * id. The second is started from inside: `podman exec` would do as well on
 * a machine, but in a chroot (CI's fresh roots) runc's exec lands in the
 * mount namespace's root, outside the container's.
 */
Test(podman, cgroup_whole)
{
	const char *name = new_name("cg"), *root = container_root();
	char *ctl = path_in(dir, "ctl"), vol[4096];
	const char *opts[] = { "-v", vol, NULL };
	const char *cmd[] = { "/bin/sh", "-c",
			      "python3 /tmp/src/split.py 24 & "
			      "while [ ! -e /ctl/go ]; do sleep 0.1; done; "
			      "python3 /tmp/src/split.py 10; wait",
			      NULL };
	char *data = path_in(dir, "cg.data"), *id, *cg, *pt, *errpath, *txt, *go;
	char *argv[] = { (char *)need_env("DLFLAME"),
			 "record",
			 "--cgroup",
			 NULL,
			 "-d",
			 "16",
			 "-o",
			 data,
			 NULL };
	pid_t first, rec, later;
	int status;
	FILE *f;

	need_podman();
	cr_assert_eq(mkdir(ctl, 0755), 0);
	snprintf(vol, sizeof(vol), "%s:/ctl:ro", ctl);
	podman_run(name, root, need_env("PY_FIXTURES"), opts, cmd);
	id = inspect(name, "{{.Id}}");
	cg = cgroup_of(host_pid(name, "sh"));
	cr_log_info("the container's cgroup: %s", cg);
	cr_assert_not_null(strstr(cg, id), "podman's cgroup %s does not name its id %s", cg, id);
	first = in_cgroup(cg, "python3", 0);
	argv[3] = cg;
	rec = fork();
	cr_assert_geq(rec, 0);
	if (rec == 0) {
		int fd = open(path_in(dir, "rec.err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	usleep(3000000); /* the recording runs: this one starts after it began */
	go = path_in(ctl, "go");
	f = fopen(go, "w");
	cr_assert_not_null(f);
	fclose(f);
	later = in_cgroup(cg, "python3", first);
	cr_assert_eq(waitpid(rec, &status, 0), rec);
	errpath = path_in(dir, "rec.err");
	txt = read_text(errpath);
	free(errpath);
	cr_log_info("%s", txt);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "record failed: %s", txt);
	assert_container_frames(txt);
	free(txt);
	pt = folded(data, "cg-thread.folded", "--per-thread");
	for (int i = 0; i < 2; i++) {
		pid_t p = i ? later : first;
		unsigned long n, init;
		double share = python_share(pt, p, &n, &init);

		cr_log_info("%s process %d: %lu samples past its start-up (%lu in it), %.1f%% with "
			    "Python frames",
			    i ? "later" : "first", (int)p, n, init, share);
		assert_labelled(data, pt, p, id);
		cr_assert_gt(n, 20, "%s process: only %lu samples", i ? "later" : "first", n);
		cr_assert_geq(share, 90.0, "%s process: Python frames in %.1f%% of its samples",
			      i ? "later" : "first", share);
	}
	free(ctl);
	free(go);
	free(data);
	free(id);
	free(cg);
	free(pt);
}

/*
 * A pod, as a Kubernetes node runs one: podman's pod (its infra container
 * holding the network, IPC and UTS namespaces, one cgroup over its
 * containers' own) with two containers, each a Python process in its own
 * PID namespace. `record --cgroup` on the pod's cgroup: both processes,
 * each with its Python frames and labelled with its own container's id.
 * (Kubernetes itself cannot run here; a pod's cgroup under kubepods.slice
 * is the same shape: docs/containers.md.)
 */
Test(podman, pod_whole)
{
	const char *a = new_name("pa"), *b = new_name("pb"), *root = container_root();
	const char *opts[] = { "--pod", pod, NULL };
	const char *cmd[] = { "python3", "/tmp/src/split.py", "20", NULL };
	char *data = path_in(dir, "pod.data"), *pt, *cg[2], *id[2], *podcg;
	const char *rec[] = { "record", "--cgroup", NULL, "-d", "6", "-o", data, NULL };
	struct run_result r;
	pid_t p[2];

	need_podman();
	snprintf(pod, sizeof(pod), "dlflame-pod-%d", (int)getpid());
	{
		const char *argv[] = { need_env("PODMAN_SH"), "pod-create", pod, NULL };

		r = run(dir, NULL, NULL, argv);
		cr_assert_eq(r.status, 0, "podman pod create failed: %s", r.err);
		run_free(&r);
	}
	podman_run(a, root, need_env("PY_FIXTURES"), opts, cmd);
	podman_run(b, root, need_env("PY_FIXTURES"), opts, cmd);
	for (int i = 0; i < 2; i++) {
		p[i] = host_pid(i ? b : a, "python3");
		id[i] = inspect(i ? b : a, "{{.Id}}");
		cg[i] = cgroup_of(p[i]);
		cr_log_info("container %d: pid %d, cgroup %s", i, (int)p[i], cg[i]);
		cr_assert_not_null(strstr(cg[i], id[i]), "cgroup %s does not name the container %s",
				   cg[i], id[i]);
	}
	/* the pod's cgroup: the directory over both containers' */
	podcg = strdup(cg[0]);
	cr_assert_not_null(podcg);
	*strrchr(podcg, '/') = '\0';
	cr_assert_eq(strncmp(cg[1], podcg, strlen(podcg)), 0, "%s is not in the pod's %s", cg[1],
		     podcg);
	cr_assert_eq(cg[1][strlen(podcg)], '/');
	usleep(1000000); /* past the imports, into its loop */
	rec[2] = podcg;
	r = dlflame(rec);
	cr_log_info("%s", r.err);
	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	assert_container_frames(r.err);
	run_free(&r);
	pt = folded(data, "pod-thread.folded", "--per-thread");
	for (int i = 0; i < 2; i++) {
		unsigned long n, init;
		double share = python_share(pt, p[i], &n, &init);

		cr_log_info("container %d, pid %d: %lu samples, %.1f%% with Python frames", i,
			    (int)p[i], n, share);
		cr_assert_gt(n, 100, "container %d: only %lu samples", i, n);
		cr_assert_geq(share, 90.0,
			      "container %d: Python frames in %.1f%% of its samples; heaviest "
			      "without: %s",
			      i, share, no_python);
		assert_labelled(data, pt, p[i], id[i]);
		free(id[i]);
		free(cg[i]);
	}
	free(podcg);
	free(pt);
	free(data);
}

/* Record the container's pid 1 (running a C program) from the host for 4 s: the folded stacks. */
static char *attach_folded(const char *name, const char *what)
{
	char pid[16], *data, *f, file[64];
	const char *rec[] = { "record", "-p", pid, "-d", "4", "-o", NULL, NULL };
	struct run_result r;

	snprintf(file, sizeof(file), "%s.data", what);
	data = path_in(dir, file);
	rec[6] = data;
	snprintf(pid, sizeof(pid), "%d", (int)host_pid(name, "split"));
	r = dlflame(rec);
	cr_log_info("%s", r.err);
	cr_assert_eq(r.status, 0, "record failed: %s", r.err);
	run_free(&r);
	podman_rm(name);
	snprintf(file, sizeof(file), "%s.folded", what);
	f = folded(data, file, NULL);
	free(data);
	return f;
}

/*
 * A stripped program whose debug file only the container has, in its own
 * /usr/lib/debug/.build-id: named from it, as the container would name it.
 * The same container without that directory names none of its functions
 * (nothing of the host's names them: the test can fail).
 */
Test(podman, debug_file_in_container)
{
	const char *root = "/"; /* the host's own files, but for the debug directory */
	char *bin = path_in(dir, "bin"), *dbg = path_in(dir, "dbg"), *exe, *txt, *f;
	char hex[256], cmd[8192], vol[4096];
	const char *plain[] = { NULL };
	const char *with[] = { "-v", vol, NULL };
	const char *run_split[] = { "/tmp/src/split", "100000", NULL };
	const char *names_of[] = { "alpha", "bravo", "charlie" };
	unsigned long total, n;
	FILE *p;

	need_podman();
	exe = path_in(bin, "split");
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s' '%s' && cp '%s' '%s'", bin, dbg,
		 need_env("FIXTURE_SPLIT"), exe);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' | awk '/Build ID/ { print $3 }'", exe);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	cr_assert_not_null(fgets(hex, sizeof(hex), p), "%s has no build-id", exe);
	pclose(p);
	hex[strcspn(hex, "\n")] = '\0';
	cr_assert_geq(strlen(hex), 8, "build-id '%s'", hex);
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s/%.2s' && objcopy --only-keep-debug '%s' '%s/%.2s/%s.debug' && "
		 "strip --strip-all '%s' && ! readelf -S '%s' | grep -q symtab",
		 dbg, hex, exe, dbg, hex, hex + 2, exe, exe);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(vol, sizeof(vol), "%s:/usr/lib/debug/.build-id:ro", dbg);

	podman_run(new_name("nodbg"), root, bin, plain, run_split);
	f = attach_folded(names[nnames - 1], "nodbg");
	txt = read_text(f);
	for (size_t i = 0; i < 3; i++)
		cr_assert_eq(count_frame(txt, names_of[i], NULL), 0,
			     "%s named without the container's debug file:\n%.2000s", names_of[i],
			     txt);
	free(txt);
	free(f);

	podman_run(new_name("dbg"), root, bin, with, run_split);
	f = attach_folded(names[nnames - 1], "dbg");
	txt = read_text(f);
	n = 0;
	for (size_t i = 0; i < 3; i++) {
		unsigned long k = count_frame(txt, names_of[i], &total);

		cr_log_info("%s: %lu of %lu samples", names_of[i], k, total);
		cr_assert_gt(k, 0, "no %s: the container's debug file was not read:\n%.2000s",
			     names_of[i], txt);
		n += k;
	}
	cr_assert_gt(n * 10, total * 9, "alpha, bravo, charlie in %lu of %lu samples", n, total);
	free(txt);
	free(f);
	free(exe);
	free(bin);
	free(dbg);
}

/* kernel.perf_event_paranoid (the host's, which a container shares). */
static int paranoid(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	int v = 0;

	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%d", &v), 1);
	fclose(f);
	return v;
}

/*
 * `dlflame record -- python3 ...` run inside the container, dlflame among
 * its processes (bound in at its own path; the root is ours, so are its
 * libraries). Under the runtime's default seccomp profile perf_event_open
 * is refused: one line that names the filter, exit 1. Without the filter
 * it records, with the pids the container sees.
 */
Test(podman, record_inside)
{
	const char *root = "/";
	char *out = path_in(dir, "out"), vol[4096], bind[4096], *build, *slash, *data, *pt;
	const char *cmd[] = { need_env("DLFLAME"), "record", "-o", "/out/in.data", "--", "python3",
			      "/tmp/src/split.py", "8",	     NULL };
	struct run_result r;
	unsigned long n, init;
	double share;
	int tid = -1;

	need_podman();
	cr_assert_eq(mkdir(out, 0755), 0);
	build = strdup(need_env("DLFLAME"));
	slash = strrchr(build, '/');
	cr_assert_not_null(slash);
	*slash = '\0';
	snprintf(bind, sizeof(bind), "%s:%s:ro", build, build);
	snprintf(vol, sizeof(vol), "%s:/out", out);
	for (int unconfined = 0; unconfined < 2; unconfined++) {
		const char *argv[40];
		size_t k = 0;

		argv[k++] = need_env("PODMAN_SH");
		argv[k++] = "fg";
		argv[k++] = new_name(unconfined ? "in-open" : "in-default");
		argv[k++] = root;
		argv[k++] = need_env("PY_FIXTURES");
		argv[k++] = "-v";
		argv[k++] = bind;
		argv[k++] = "-v";
		argv[k++] = vol;
		if (unconfined) {
			argv[k++] = "--security-opt";
			argv[k++] = "seccomp=unconfined";
		}
		argv[k++] = "--";
		for (size_t i = 0; cmd[i]; i++)
			argv[k++] = cmd[i];
		argv[k] = NULL;
		r = run(dir, NULL, NULL, argv);
		cr_log_info("%s seccomp profile: exit %d\n%s", unconfined ? "no" : "the default",
			    r.status, r.err);
		if (!unconfined) {
			cr_assert_eq(r.status, 1, "exit %d under the default profile: %s", r.status,
				     r.err);
			cr_assert_eq(count_str(r.err, "\n"), 1, "not one line: %s", r.err);
			cr_assert_not_null(strstr(r.err, "seccomp filter refuses perf_event_open"),
					   "the line does not name the seccomp filter: %s", r.err);
		} else {
			const char *at = strstr(r.out, "\"tid\": ");

			cr_assert_eq(r.status, 0, "record failed without the filter: %s", r.err);
			/* root in the container, but without CAP_PERFMON: said so when it matters */
			if (paranoid() >= 2)
				cr_assert(strstr(r.err, "kernel frames are not recorded") &&
						  strstr(r.err, "without CAP_PERFMON"),
					  "no word of the kernel frames left out: %s", r.err);
			share = python_figure(r.err);
			cr_assert_geq(
				share, 90.0,
				"Python frames in %.1f%% of eval calls; the recorder said: %s",
				share, r.err);
			cr_assert_not_null(at, "no JSON line from split.py: %s", r.out);
			tid = atoi(at + 7);
		}
		run_free(&r);
	}
	/* the profile's pids are the container's: the fixture's own thread id */
	data = path_in(out, "in.data");
	pt = folded(data, "in-thread.folded", "--per-thread");
	share = python_share(pt, tid, &n, &init);
	cr_log_info(
		"python3 as pid %d in the container: %lu samples past its start-up, %.1f%% with "
		"Python frames",
		tid, n, share);
	cr_assert_gt(n, 100, "only %lu samples of python3-%d/%d", n, tid, tid);
	cr_assert_geq(share, 90.0, "Python frames in %.1f%% of the samples; heaviest without: %s",
		      share, no_python);
	free(out);
	free(build);
	free(data);
	free(pt);
}
