/* SPDX-License-Identifier: MIT */
#include "run.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pybpf/pybpf.h"

extern char **environ;

static char *slurp_fd(int fd, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	ssize_t r;

	lseek(fd, 0, SEEK_SET);
	while ((r = read(fd, b + n, cap - n - 1)) > 0) {
		n += (size_t)r;
		if (cap - n < 2) {
			cap *= 2;
			b = realloc(b, cap);
		}
	}
	b[n] = '\0';
	if (len)
		*len = n;
	return b;
}

char *read_text(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *text;

	cr_assert_geq(fd, 0, "cannot open %s", path);
	text = slurp_fd(fd, NULL);
	close(fd);
	return text;
}

static int tmpfd(void)
{
	char path[] = "/tmp/dlflame-run-XXXXXX";
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	unlink(path);
	return fd;
}

struct run_result run(const char *dir, char *const env[], const char *stdout_path,
		      const char *const argv[])
{
	struct run_result r = { 0 };
	int ofd = stdout_path ? open(stdout_path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : tmpfd();
	int efd = tmpfd();
	int st;
	pid_t pid;

	cr_assert_geq(ofd, 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* a test killed by its timeout takes its recorder (and trainer) with it */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(ofd, 1);
		dup2(efd, 2);
		if (dir && chdir(dir))
			_exit(126);
		for (char *const *e = env; e && *e; e++)
			putenv(*e);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	r.out = stdout_path ? strdup("") : slurp_fd(ofd, &r.out_len);
	r.err = slurp_fd(efd, NULL);
	close(ofd);
	close(efd);
	return r;
}

pid_t run_bg(const char *dir, const char *const argv[])
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(fd, 1);
		dup2(fd, 2);
		if (dir && chdir(dir))
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

void run_free(struct run_result *r)
{
	free(r->out);
	free(r->err);
}

const char *need_env(const char *name)
{
	const char *v = getenv(name);

	cr_assert(v && *v, "environment variable %s is not set (run through meson test)", name);
	return v;
}

const char *need_mlp(void)
{
	const char *v = getenv("MLP");

	cr_assert(v && *v,
		  "examples/mlp was not built: scripts/setup.sh installs libdnnl-dev, and meson "
		  "builds the MLP whenever it finds oneDNN (see meson's log for why it did not)");
	return v;
}

char *linked_library(const char *binary, const char *stem)
{
	char *cmd, line[4096], *found = NULL;
	size_t len = strlen(stem);
	FILE *f;

	cr_assert_geq(asprintf(&cmd, "ldd '%s' 2>/dev/null", binary), 0);
	f = popen(cmd, "r");
	cr_assert_not_null(f, "cannot run ldd on %s", binary);
	while (!found && fgets(line, sizeof(line), f)) {
		char *name = line + strspn(line, " \t"), *arrow, *path, *end;

		if (strncmp(name, stem, len) || (name[len] != '.' && name[len] != ' '))
			continue;
		arrow = strstr(name, "=> ");
		if (!arrow)
			continue;
		path = arrow + 3;
		end = path + strcspn(path, " \t\n(");
		*end = '\0';
		found = realpath(path, NULL);
	}
	pclose(f);
	free(cmd);
	cr_assert_not_null(found, "%s is not linked against %s.* (ldd found no such library)",
			   binary, stem);
	return found;
}

char *make_dir(void)
{
	char *d = strdup("/tmp/dlflame-e2e-XXXXXX");

	cr_assert_not_null(mkdtemp(d));
	return d;
}

void rm_dir(char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		cr_log_warn("could not remove %s", dir);
	free(dir);
}

char *path_in(const char *dir, const char *name)
{
	char *p;

	cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

size_t count_str(const char *hay, const char *needle)
{
	size_t n = 0, l = strlen(needle);

	for (const char *p = strstr(hay, needle); p; p = strstr(p + l, needle))
		n++;
	return n;
}

/* Sum of the counts of folded lines that hold `frame` as a whole frame. */
unsigned long count_frame(const char *folded, const char *frame, unsigned long *total)
{
	unsigned long n = 0, all = 0;
	char *copy = strdup(folded), *save = NULL;
	size_t fl = strlen(frame);

	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' '), *fsave = NULL;
		unsigned long c;

		cr_assert_not_null(sp, "folded line without a count: %s", line);
		c = strtoul(sp + 1, NULL, 10);
		*sp = '\0';
		all += c;
		for (char *f = strtok_r(line, ";", &fsave); f; f = strtok_r(NULL, ";", &fsave)) {
			if (strlen(f) == fl && !memcmp(f, frame, fl)) {
				n += c;
				break;
			}
		}
	}
	free(copy);
	if (total)
		*total = all;
	return n;
}

/* Sum of the counts of lines holding `chain` ("a;b", caller first) as whole frames. */
unsigned long count_chain(const char *folded, const char *chain)
{
	unsigned long n = 0;
	size_t cl = strlen(chain);

	for (const char *line = folded; *line;) {
		const char *eol = strchr(line, '\n');
		size_t ll = eol ? (size_t)(eol - line) : strlen(line);
		const char *sp = memrchr(line, ' ', ll);

		for (const char *p = line; sp && p + cl <= sp; p++) {
			if ((p == line || p[-1] == ';') && !memcmp(p, chain, cl) &&
			    (p[cl] == ';' || p[cl] == ' ')) {
				n += strtoul(sp + 1, NULL, 10);
				break;
			}
		}
		line += ll + (eol ? 1 : 0);
	}
	return n;
}

double complete_share(const char *err)
{
	const char *at = strstr(err, "% of stacks complete");
	const char *start;

	if (!at)
		return -1;
	for (start = at;
	     start > err && (start[-1] == '.' || (start[-1] >= '0' && start[-1] <= '9')); start--)
		;
	return strtod(start, NULL);
}

/* The placeholder frames a cut stack ends in; a complete one holds none. */
static const char *const placeholders[] = {
	"[truncated]",
	"[JIT caller not recovered]",
	"[stack not sampled]",
	"[blocked before recording]",
};

static unsigned long with_placeholder(const char *folded, unsigned long *total)
{
	unsigned long n = 0;

	*total = 0;
	for (size_t i = 0; i < sizeof(placeholders) / sizeof(*placeholders); i++)
		n += count_frame(folded, placeholders[i], total);
	return n;
}

double assert_ends_agree(const char *data, const char *const *sel, bool cut_has_placeholder)
{
	const char *argv[16] = { need_env("DLFLAME"), "report", "-i", data, "--folded" };
	unsigned long complete, cut, bad, total;
	struct run_result all, only;
	double share;
	size_t n = 5;

	for (; sel && *sel && n < 13; sel++)
		argv[n++] = *sel;
	all = run(NULL, NULL, NULL, argv);
	cr_assert_eq(all.status, 0, "report failed: %s", all.err);
	share = complete_share(all.err);
	cr_assert_geq(share, 0, "no completeness line: %s", all.err);
	cr_assert_eq(count_str(all.err, "of stacks complete"), 1, "one line: %s", all.err);
	with_placeholder(all.out, &total);

	argv[n] = "--complete";
	only = run(NULL, NULL, NULL, argv);
	cr_assert_eq(only.status, 0, "report --complete failed: %s", only.err);
	bad = with_placeholder(only.out, &complete);
	cr_assert_eq(bad, 0, "%lu samples counted complete hold a placeholder frame", bad);
	run_free(&only);

	argv[n] = "--cut";
	only = run(NULL, NULL, NULL, argv);
	cr_assert_eq(only.status, 0, "report --cut failed: %s", only.err);
	bad = with_placeholder(only.out, &cut);
	if (cut_has_placeholder)
		cr_assert_eq(bad, cut, "%lu of %lu cut samples show no placeholder", cut - bad,
			     cut);
	run_free(&only);

	/* the figure is the share of the stacks drawn (to its rounding) */
	cr_assert_eq(complete + cut, total, "complete %lu + cut %lu != %lu", complete, cut, total);
	cr_assert(total && share > 100.0 * (double)complete / (double)total - 0.1 &&
			  share < 100.0 * (double)complete / (double)total + 0.1,
		  "%.1f%% stated, %lu of %lu complete", share, complete, total);
	run_free(&all);
	return share;
}

/* Whether this process runs below the initial PID namespace (as pybpf/ tells). */
static bool pid_nested(void)
{
	struct stat st;

	cr_assert_eq(stat("/proc/self/ns/pid", &st), 0);
	return st.st_ino != PYBPF_PID_NS_INIT_INO;
}

void assert_container_frames(const char *err)
{
	const char *at = strstr(err, "copied at the sample by BPF (");
	unsigned long bpf = 0, all = 0;

	if (pid_nested()) {
		cr_assert_not_null(strstr(err, " ms after the sample on average"),
				   "frames not read after the sample: %s", err);
		return;
	}
	cr_assert_not_null(at, "frames not copied at the sample: %s", err);
	cr_assert_eq(sscanf(at, "copied at the sample by BPF (%lu of %lu Python", &bpf, &all), 2,
		     "%s", err);
	cr_assert(bpf > 0 && bpf == all, "%lu of %lu Python processes by BPF: %s", bpf, all, err);
}
