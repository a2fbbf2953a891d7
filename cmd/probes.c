/* SPDX-License-Identifier: MIT */
/*
 * record --probe [MODULE:]FUNCTION: which files and offsets to put uprobes
 * on. MODULE is a path, or a library's name looked up in the system's
 * library directories (libdnnl, libdnnl.so, libdnnl.so.2); without it, the
 * command's executable and the libraries it needs (DT_NEEDED, recursively;
 * attached, also what the process has mapped) are searched, and every one
 * that defines FUNCTION gets a probe. When none does, the libraries a
 * dlopen() by name could load are: those of the library directories and
 * LD_LIBRARY_PATH. A uprobe on a file is armed by the kernel whenever the
 * file is mapped, so these count every call. A library mapped during the
 * recording that defines FUNCTION and is none of these (loaded by path from
 * elsewhere) gets its probe when its mapping is read (probes_on_map),
 * milliseconds later: calls made before that are not counted.
 */
#include "probes.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "render/render.h"
#include "symbolize/symbolize.h"
#include "util/util.h"

static const char *const lib_dirs[] = { "/lib/x86_64-linux-gnu",
					"/usr/lib/x86_64-linux-gnu",
					"/usr/local/lib",
					"/lib64",
					"/usr/lib64",
					"/usr/lib",
					"/lib" };

/* Files searched without a MODULE, at most. */
#define SEARCH_MAX 256

static bool is_file(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode);
}

char *probes_find_library(const char *name)
{
	char path[PATH_MAX];
	size_t len = strlen(name);

	for (size_t d = 0; d < sizeof(lib_dirs) / sizeof(lib_dirs[0]); d++) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", lib_dirs[d], name) <
			    sizeof(path) &&
		    is_file(path))
			return realpath(path, NULL);
	}
	for (size_t d = 0; d < sizeof(lib_dirs) / sizeof(lib_dirs[0]); d++) {
		DIR *dir = opendir(lib_dirs[d]);
		struct dirent *de;
		char *best = NULL;

		if (!dir)
			continue;
		while ((de = readdir(dir))) {
			if (strncmp(de->d_name, name, len) ||
			    (de->d_name[len] != '.' && de->d_name[len] != '-'))
				continue;
			/* the shortest such name: libdnnl.so before libdnnl.so.2.6 */
			if ((size_t)snprintf(path, sizeof(path), "%s/%s", lib_dirs[d],
					     de->d_name) >= sizeof(path) ||
			    !is_file(path))
				continue;
			if (!best || strlen(path) < strlen(best)) {
				free(best);
				best = strdup(path);
			}
		}
		closedir(dir);
		if (best) {
			char *real = realpath(best, NULL);

			free(best);
			return real;
		}
	}
	return NULL;
}

/* An executable as execvp() would find it. */
static char *find_exe(const char *file)
{
	const char *path = getenv("PATH"), *p, *end;
	char full[PATH_MAX];

	if (strchr(file, '/'))
		return realpath(file, NULL);
	for (p = path ? path : "/bin:/usr/bin";; p = end + 1) {
		end = strchrnul(p, ':');
		if ((size_t)snprintf(full, sizeof(full), "%.*s/%s", (int)(end - p),
				     end == p ? "." : p, file) < sizeof(full) &&
		    !access(full, X_OK) && is_file(full))
			return realpath(full, NULL);
		if (!*end)
			return NULL;
	}
}

/* Whether program (a command's first word) is a Python interpreter, or a script run by one. */
static bool is_python(const char *program)
{
	char line[256] = "", *exe = find_exe(program);
	const char *base;
	FILE *f;

	if (!exe)
		return false;
	base = strrchr(exe, '/');
	if (!strncmp(base ? base + 1 : exe, "python", 6)) {
		free(exe);
		return true;
	}
	/* a script whose #! line names one: torchrun, a launcher */
	f = fopen(exe, "re");
	free(exe);
	if (!f)
		return false;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	return !strncmp(line, "#!", 2) && strstr(line, "python");
}

/* MPI's and Slurm's launchers: the program they start on each rank follows their options. */
static bool is_launcher(const char *program)
{
	static const char *const names[] = { "mpirun", "mpiexec", "orterun", "prterun", "srun" };
	const char *base = strrchr(program, '/');

	base = base ? base + 1 : program;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(base, names[i]))
			return true;
	return false;
}

bool probes_runs_python(char *const *cmd, const pid_t *pids, size_t n)
{
	char path[PATH_MAX];
	const char *base;
	ssize_t len;

	if (!cmd) {
		for (size_t i = 0; i < n; i++) {
			char link[64];

			snprintf(link, sizeof(link), "/proc/%d/exe", (int)pids[i]);
			len = readlink(link, path, sizeof(path) - 1);
			if (len <= 0)
				return false;
			path[len] = '\0';
			base = strrchr(path, '/');
			if (strncmp(base ? base + 1 : path, "python", 6))
				return false;
		}
		return n > 0;
	}
	if (!cmd[0])
		return false;
	if (is_python(cmd[0]))
		return true;
	/* mpirun -np 2 python3 train.py: a word after the launcher's that is Python */
	if (is_launcher(cmd[0]))
		for (size_t i = 1; cmd[i]; i++)
			if (cmd[i][0] != '-' && is_python(cmd[i]))
				return true;
	return false;
}

struct search {
	char *files[SEARCH_MAX];
	size_t n;
};

static int add_file(struct search *s, char *path)
{
	if (!path)
		return 0;
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->files[i], path)) {
			free(path);
			return 0;
		}
	if (s->n == SEARCH_MAX) {
		free(path);
		return 0;
	}
	s->files[s->n++] = path;
	return 0;
}

static int add_needed(void *ctx, const char *lib)
{
	return add_file(ctx, probes_find_library(lib));
}

/* One more probe in the set: FUNCTION func at file offset off of path. */
static int set_add(struct probe_set *ps, const char *spec, const char *path, const char *func,
		   uint64_t off, bool named)
{
	struct stat st;

	if (ps->n == SAMPLER_MAX_PROBES)
		return -ENOSPC;
	ps->paths[ps->n] = strdup(path);
	ps->funcs[ps->n] = strdup(func);
	if (!ps->paths[ps->n] || !ps->funcs[ps->n]) {
		free(ps->paths[ps->n]);
		free(ps->funcs[ps->n]);
		return -ENOMEM;
	}
	ps->probes[ps->n] = (struct sampler_probe){ .path = ps->paths[ps->n], .offset = off };
	ps->specs[ps->n] = spec;
	ps->named[ps->n] = named;
	ps->dev[ps->n] = ps->ino[ps->n] = 0;
	if (!stat(path, &st)) {
		ps->dev[ps->n] = (uint64_t)st.st_dev;
		ps->ino[ps->n] = (uint64_t)st.st_ino;
	}
	ps->n++;
	return 0;
}

/* Take the last probe added back out. */
static void set_drop_last(struct probe_set *ps)
{
	ps->n--;
	free(ps->paths[ps->n]);
	free(ps->funcs[ps->n]);
	ps->paths[ps->n] = ps->funcs[ps->n] = NULL;
}

/* The executable files an attached process has mapped, from /proc/PID/maps. */
static void add_mapped(struct search *s, pid_t pid)
{
	char path[64], line[PATH_MAX + 256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char perms[8] = "";
		const char *file = strchr(line, '/');

		if (sscanf(line, "%*s %7s", perms) != 1 || perms[2] != 'x' || !file)
			continue;
		line[strcspn(line, "\n")] = '\0';
		add_file(s, realpath(file, NULL));
	}
	fclose(f);
}

/*
 * Each shared library (a name with ".so") of dir that defines func gets a
 * probe; the count found is added to *found. Files are told apart by inode
 * (seen), as the directories hold many links to one file.
 */
static int scan_dir(struct probe_set *ps, const char *spec, const char *func, const char *dir,
		    struct u64map *seen, size_t *found)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[PATH_MAX];
	int err = 0;

	if (!d)
		return 0;
	while (!err && (de = readdir(d))) {
		struct stat st;
		uint64_t off, key, one;

		if (!strstr(de->d_name, ".so") ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
			    sizeof(path) ||
		    stat(path, &st) || !S_ISREG(st.st_mode))
			continue;
		key = hash_u64((uint64_t)st.st_dev * 0x9e3779b97f4a7c15ull ^ (uint64_t)st.st_ino);
		if (key == UINT64_MAX || u64map_get(seen, key, &one))
			continue;
		if (u64map_put(seen, key, 1)) {
			err = -ENOMEM;
			break;
		}
		if (symbolizer__function_offset(path, func, &off, NULL))
			continue;
		{
			char *real = realpath(path, NULL);

			err = real ? set_add(ps, spec, real, func, off, false) : -errno;
			free(real);
		}
		if (!err)
			(*found)++;
	}
	closedir(d);
	return err;
}

/* The library directories and LD_LIBRARY_PATH's: what dlopen() by name searches. */
static int scan_lib_dirs(struct probe_set *ps, const char *spec, const char *func, size_t *found)
{
	const char *env = getenv("LD_LIBRARY_PATH"), *p, *end;
	struct u64map seen;
	char dir[PATH_MAX];
	int err = 0;

	u64map_init(&seen);
	for (p = env; p && *p && !err; p = *end ? end + 1 : end) {
		end = strchrnul(p, ':');
		if (end > p && (size_t)(end - p) < sizeof(dir)) {
			snprintf(dir, sizeof(dir), "%.*s", (int)(end - p), p);
			err = scan_dir(ps, spec, func, dir, &seen, found);
		}
	}
	for (size_t d = 0; d < sizeof(lib_dirs) / sizeof(lib_dirs[0]) && !err; d++)
		err = scan_dir(ps, spec, func, lib_dirs[d], &seen, found);
	u64map_free(&seen);
	return err;
}

int probes_resolve(struct probe_set *ps, const char *spec, const char *exe, pid_t pid)
{
	struct search s = { 0 };
	struct sym_near near = { 0 }, any_near = { 0 };
	const char *colon = strrchr(spec, ':'), *func = colon ? colon + 1 : spec;
	size_t found = 0;
	int ret = EXIT_OK;

	if (!*func || (colon && colon == spec))
		return usage_error("record", "--probe takes [MODULE:]FUNCTION, got '%s'", spec);
	if (colon) {
		char *module = strndup(spec, (size_t)(colon - spec));

		if (!module)
			return error("out of memory");
		add_file(&s, strchr(module, '/') ? realpath(module, NULL)
						 : probes_find_library(module));
		if (!s.n) {
			error("--probe %s: no library or file '%s' (give a path, or a library's "
			      "name as in /usr/lib/x86_64-linux-gnu)",
			      spec, module);
			ret = EXIT_USAGE;
			free(module);
			return ret;
		}
		free(module);
	} else {
		if (!exe)
			return usage_error("record",
					   "--probe %s: give the module as MODULE:%s when "
					   "attaching",
					   spec, spec);
		add_file(&s, find_exe(exe));
		/* the executable, then what it needs, breadth first */
		for (size_t i = 0; i < s.n; i++)
			symbolizer__needed(s.files[i], add_needed, &s);
		if (pid > 0)
			add_mapped(&s, pid);
		if (ps->nr_anywhere < SAMPLER_MAX_PROBES) {
			ps->anywhere[ps->nr_anywhere] = func;
			ps->anywhere_specs[ps->nr_anywhere++] = spec;
		}
	}
	for (size_t i = 0; i < s.n && ret == EXIT_OK; i++) {
		uint64_t off;
		int err = symbolizer__function_offset(s.files[i], func, &off, &near);

		if (err == -ENOENT) {
			for (size_t k = 0; k < near.n && any_near.n < SYM_NEAR_MAX; k++)
				memcpy(any_near.names[any_near.n++], near.names[k],
				       sizeof(near.names[k]));
			continue;
		}
		if (err)
			continue; /* not an ELF file, unreadable: nothing to probe there */
		err = set_add(ps, spec, s.files[i], func, off, colon != NULL);
		if (err == -ENOSPC) {
			ret = usage_error("record", "at most %d probes", SAMPLER_MAX_PROBES);
			break;
		}
		if (err) {
			ret = error("out of memory");
			break;
		}
		found++;
	}
	if (ret == EXIT_OK && !found && !colon) {
		int err = scan_lib_dirs(ps, spec, func, &found);

		if (err == -ENOSPC)
			ret = usage_error("record", "at most %d probes", SAMPLER_MAX_PROBES);
		else if (err)
			ret = error("out of memory");
	}
	if (ret == EXIT_OK && !found) {
		char like[4 * 132] = "";

		for (size_t k = 0; k < any_near.n; k++)
			snprintf(like + strlen(like), sizeof(like) - strlen(like), "%s%s",
				 k ? ", " : "", any_near.names[k]);
		error("--probe %s: no function %s in %s%s%s%s", spec, func,
		      colon ? s.files[0]
			    : "the command, the libraries it needs, nor those of the library "
			      "directories and LD_LIBRARY_PATH",
		      *like ? " (names like it: " : "", like, *like ? ")" : "");
		ret = EXIT_USAGE;
	}
	for (size_t i = 0; i < s.n; i++)
		free(s.files[i]);
	return ret;
}

void probes_free(struct probe_set *ps)
{
	for (size_t i = 0; i < ps->n; i++) {
		free(ps->paths[i]);
		free(ps->funcs[i]);
	}
	ps->n = 0;
	u64map_free(&ps->seen);
	free(ps->late_failed_path);
	ps->late_failed_path = NULL;
}

/* Whether func is probed in the file (dev, ino) already. */
static bool probed(const struct probe_set *ps, const char *func, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < ps->n; i++)
		if (ps->ino[i] == ino && ps->dev[i] == dev && !strcmp(ps->funcs[i], func))
			return true;
	return false;
}

void probes_on_map(void *ctx, const struct rec *r)
{
	struct probe_set *ps = ctx;
	const struct rec_mmap2 *m = &r->mmap2;
	char path[PATH_MAX + 64];
	struct stat st;
	uint64_t key, one;

	/* no probes at all (no uprobe PMU, no permission): record has said so once */
	if (!ps->nr_anywhere || sampler__stats(ps->sampler)->probe_err || !(m->prot & PROT_EXEC) ||
	    m->filename[0] != '/' || !m->ino)
		return;
	key = hash_u64(((uint64_t)m->maj << 32 | m->min) * 0x9e3779b97f4a7c15ull ^ m->ino);
	if (key == UINT64_MAX || u64map_get(&ps->seen, key, &one))
		return;
	if (u64map_put(&ps->seen, key, 1))
		return; /* out of memory: looked at again at its next mapping */
	/* the mapped file by its path here, else in the process's root (a container) */
	snprintf(path, sizeof(path), "%s", m->filename);
	if (stat(path, &st) || (uint64_t)st.st_ino != m->ino) {
		snprintf(path, sizeof(path), "/proc/%u/root%s", m->pid, m->filename);
		if (stat(path, &st) || (uint64_t)st.st_ino != m->ino)
			return; /* replaced or gone since: nothing to put a probe on */
	}
	for (size_t k = 0; k < ps->nr_anywhere; k++) {
		const char *func = ps->anywhere[k];
		uint64_t off;
		int idx, err;

		if (probed(ps, func, (uint64_t)st.st_dev, (uint64_t)st.st_ino) ||
		    symbolizer__function_offset(path, func, &off, NULL))
			continue;
		if (!ps->first_late)
			ps->first_late = ps->n;
		err = set_add(ps, ps->anywhere_specs[k], path, func, off, false);
		idx = err ? err : sampler__add_probe(ps->sampler, &ps->probes[ps->n - 1]);
		if (idx >= 0 && (size_t)idx != ps->n - 1)
			idx = -EPROTO; /* the sampler's numbering and ours must agree */
		if (idx < 0) {
			if (!err)
				set_drop_last(ps);
			if (!ps->late_failed++) {
				ps->late_failed_path = strdup(m->filename);
				ps->late_err = idx;
			}
			continue;
		}
		ps->late_pid[idx] = m->pid;
		ps->mapped_ns[idx] = r->time;
		ps->armed_ns[idx] = monotonic_ns();
	}
}

void probes_report_late(const struct probe_set *ps)
{
	char why[64];

	for (size_t i = ps->first_late; ps->first_late && i < ps->n; i++)
		info("--probe %s: also probed in %s, which process %u loaded during the recording, "
		     "from %.1f ms after it was mapped (its calls before then are not counted)",
		     ps->specs[i], ps->paths[i], ps->late_pid[i],
		     ps->armed_ns[i] > ps->mapped_ns[i]
			     ? (double)(ps->armed_ns[i] - ps->mapped_ns[i]) / 1e6
			     : 0.0);
	if (!ps->late_failed)
		return;
	if (ps->late_err == -ENOSPC)
		snprintf(why, sizeof(why), "more than %d probes in all", SAMPLER_MAX_PROBES);
	else
		snprintf(why, sizeof(why), "%s", strerror(-ps->late_err));
	warning("%zu libraries loaded during the recording define a probed function but could "
		"not be probed (the first: %s: %s); their calls are not counted; name them as "
		"--probe MODULE:FUNCTION to probe them from the start",
		ps->late_failed, ps->late_failed_path ? ps->late_failed_path : "?", why);
}

void probes_warn_unmapped(const struct probe_set *ps, const struct symbolizer *sym)
{
	for (size_t i = 0; i < ps->n; i++)
		if (ps->named[i] && !symbolizer__file_mapped(sym, ps->paths[i]))
			warning("--probe %s: no recorded process loaded %s, so %s never ran there "
				"and report --calls has no row for it; check which libraries the "
				"command loads (ldd, or /proc/PID/maps while it runs) and name one "
				"of them",
				ps->specs[i], ps->paths[i], ps->funcs[i]);
}

/* ---- record --probe-ops ---------------------------------------------------- */

/*
 * Without a list: the operators of the layers, losses and optimizers most
 * trainers are made of, forward and backward (those the library defines).
 */
static const char *const default_ops[] = {
	"conv2d",
	"convolution_backward",
	"linear",
	"addmm",
	"mm",
	"bmm",
	"matmul",
	"relu",
	"threshold_backward",
	"gelu",
	"gelu_backward",
	"max_pool2d",
	"max_pool2d_with_indices_backward",
	"avg_pool2d",
	"avg_pool2d_backward",
	"batch_norm",
	"native_batch_norm_backward",
	"layer_norm",
	"native_layer_norm_backward",
	"dropout",
	"embedding",
	"embedding_dense_backward",
	"softmax.int",
	"_softmax_backward_data",
	"cross_entropy_loss",
	"nll_loss_backward",
	"_log_softmax_backward_data",
};

/* The library that holds PyTorch's operator entries. */
#define OPS_LIBRARY "libtorch_cpu.so"
#define OPS_MANGLED "_ZN2at4_ops"

struct op_want {
	char name[PROBE_OP_NAME_MAX]; /* as given, without "aten::" */
	char mangled[PROBE_OP_NAME_MAX + 32]; /* _ZN2at4_ops<len><STRUCT>4callE */
	uint64_t off;
	bool found;
};

struct ops_find {
	struct op_want *w;
	size_t n;
};

static int op_found(void *ctx, const char *name, uint64_t off)
{
	struct ops_find *f = ctx;

	for (size_t i = 0; i < f->n; i++)
		if (!f->w[i].found && !strncmp(name, f->w[i].mangled, strlen(f->w[i].mangled))) {
			f->w[i].off = off;
			f->w[i].found = true;
		}
	return 0;
}

/* "aten::add.Tensor" or "add.Tensor" -> its entry's mangled prefix; false for a bad name. */
static bool op_mangled(const char *op, size_t len, struct op_want *w)
{
	char st[PROBE_OP_NAME_MAX];
	size_t dots = 0;

	if (len > 6 && !strncmp(op, "aten::", 6)) {
		op += 6;
		len -= 6;
	}
	if (!len || len >= sizeof(st))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = op[i];

		if (c == '.' && i && i + 1 < len && !dots++)
			st[i] = '_';
		else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '_')
			st[i] = c;
		else
			return false;
	}
	snprintf(w->name, sizeof(w->name), "%.*s", (int)len, op);
	snprintf(w->mangled, sizeof(w->mangled), OPS_MANGLED "%zu%.*s4callE", len, (int)len, st);
	return true;
}

int probes_resolve_ops(struct probe_set *ps, const char *list)
{
	struct op_want w[SAMPLER_MAX_PROBES];
	struct ops_find f = { .w = w };
	size_t n_default = sizeof(default_ops) / sizeof(default_ops[0]), found = 0;
	char *lib = probes_find_library(OPS_LIBRARY);
	int err, ret = EXIT_OK;

	memset(w, 0, sizeof(w));

	if (list) {
		for (const char *p = list; *p;) {
			size_t len = strcspn(p, ",");

			if (f.n == SAMPLER_MAX_PROBES) {
				free(lib);
				return usage_error("record", "--probe-ops: at most %d operators",
						   SAMPLER_MAX_PROBES);
			}
			if (!op_mangled(p, len, &w[f.n])) {
				free(lib);
				return usage_error(
					"record",
					"--probe-ops takes operators as torch names them "
					"(conv2d,addmm,add.Tensor), got '%.*s'",
					(int)len, p);
			}
			f.n++;
			p += len + (p[len] == ',');
		}
		if (!f.n) {
			free(lib);
			return usage_error("record", "--probe-ops: an empty list of operators");
		}
	} else {
		for (size_t i = 0; i < n_default; i++)
			op_mangled(default_ops[i], strlen(default_ops[i]), &w[f.n++]);
	}
	if (!lib) {
		error("--probe-ops: no %s in the library directories (/usr/lib/x86_64-linux-gnu, "
		      "...): is PyTorch installed? (Debian: python3-torch)",
		      OPS_LIBRARY);
		return EXIT_USAGE;
	}
	err = symbolizer__functions_prefixed(lib, OPS_MANGLED, op_found, &f);
	if (err) {
		error("--probe-ops: cannot read %s: %s", lib, strerror(-err));
		free(lib);
		return EXIT_BAD;
	}
	for (size_t i = 0; i < f.n && ret == EXIT_OK; i++) {
		if (!w[i].found) {
			if (!list)
				continue; /* a default this version does not have */
			error("--probe-ops: %s defines no operator %s (at::_ops::...::call); names "
			      "are torch's, as torch.profiler shows them without aten::",
			      lib, w[i].name);
			ret = EXIT_USAGE;
			break;
		}
		/* libtorch is dlopen'ed by torch's Python module: not loaded is no mistake here */
		err = set_add(ps, "--probe-ops", lib, w[i].name, w[i].off, false);
		if (err == -ENOSPC)
			ret = usage_error("record", "at most %d probes (--probe and --probe-ops)",
					  SAMPLER_MAX_PROBES);
		else if (err)
			ret = error("out of memory");
		found++;
	}
	if (ret == EXIT_OK && !found) {
		error("--probe-ops: %s defines none of the operators", lib);
		ret = EXIT_USAGE;
	}
	free(lib);
	return ret;
}

/* ---- record --probe-collectives ------------------------------------------- */

/*
 * gloo's collectives as c10d runs them, by mangled prefix (the argument
 * types differ between PyTorch versions): where a training thread hands
 * one over, and where gloo's worker runs it until every rank has joined.
 * render/ranks.c knows them by their demangled names.
 */
static const char *const coll_mangled[] = {
	"_ZN4c10d16ProcessGroupGloo7enqueueE",
	"_ZN4c10d16ProcessGroupGloo9AsyncWork7executeE",
};
#define NR_COLL (sizeof(coll_mangled) / sizeof(coll_mangled[0]))

struct coll_find {
	uint64_t off[NR_COLL];
	char *name[NR_COLL];
};

static int coll_found(void *ctx, const char *name, uint64_t off)
{
	struct coll_find *f = ctx;

	for (size_t i = 0; i < NR_COLL; i++)
		if (!f->name[i] && !strncmp(name, coll_mangled[i], strlen(coll_mangled[i]))) {
			f->name[i] = strdup(name);
			if (!f->name[i])
				return -ENOMEM;
			f->off[i] = off;
		}
	return 0;
}

/*
 * With an MPI process group too (Debian 13's and unstable's PyTorch link Open MPI):
 * where a training thread hands a collective over to its worker
 * (ProcessGroupMPI::enqueue), and the blocking collectives the worker
 * calls in the MPI library PyTorch links, each until every rank has
 * joined: the names render/ranks.c counts them by (render.h).
 */
#define MPI_ENQUEUE "_ZN4c10d15ProcessGroupMPI7enqueueE"
static const char *const mpi_colls[] = { RENDER_COLL_MPI_RUNS };
#define NR_MPI (sizeof(mpi_colls) / sizeof(mpi_colls[0]))

struct mpi_find {
	char *enqueue;
	uint64_t enqueue_off;
	char *needed; /* the MPI library libtorch needs (DT_NEEDED), as named there */
};

static int mpi_enqueue_found(void *ctx, const char *name, uint64_t off)
{
	struct mpi_find *f = ctx;

	if (f->enqueue)
		return 0;
	f->enqueue = strdup(name);
	f->enqueue_off = off;
	return f->enqueue ? 0 : -ENOMEM;
}

static int mpi_needed(void *ctx, const char *lib)
{
	struct mpi_find *f = ctx;

	if (f->needed || strncmp(lib, "libmpi.so", 9))
		return 0;
	f->needed = strdup(lib);
	return f->needed ? 0 : -ENOMEM;
}

/*
 * The MPI probes, when lib (libtorch) has an MPI process group and the MPI
 * library it needs is here: 0 with them added (or none to add), or a
 * negative errno (-ENOSPC: no room for them all; then none is added).
 */
static int add_mpi_collectives(struct probe_set *ps, const char *lib)
{
	struct mpi_find f = { 0 };
	uint64_t off[NR_MPI];
	char *mpi = NULL;
	size_t mark = ps->n;
	int err = symbolizer__functions_prefixed(lib, MPI_ENQUEUE, mpi_enqueue_found, &f);

	if (!err && f.enqueue)
		err = symbolizer__needed(lib, mpi_needed, &f);
	if (!err && f.enqueue && f.needed && (mpi = probes_find_library(f.needed))) {
		for (size_t i = 0; i < NR_MPI && !err; i++)
			err = symbolizer__function_offset(mpi, mpi_colls[i], &off[i], NULL);
		if (!err && ps->n + 1 + NR_MPI > SAMPLER_MAX_PROBES)
			err = -ENOSPC;
		if (!err)
			err = set_add(ps, "--probe-collectives", lib, f.enqueue, f.enqueue_off,
				      false);
		for (size_t i = 0; i < NR_MPI && !err; i++)
			err = set_add(ps, "--probe-collectives", mpi, mpi_colls[i], off[i], false);
	}
	if (err == -ENOENT)
		err = 0; /* an MPI library without one of them: no MPI probes */
	if (err)
		while (ps->n > mark)
			set_drop_last(ps);
	free(mpi);
	free(f.enqueue);
	free(f.needed);
	return err;
}

int probes_resolve_collectives(struct probe_set *ps, bool quiet)
{
	struct coll_find f = { 0 };
	char *lib = probes_find_library(OPS_LIBRARY);
	int err = lib ? symbolizer__functions_prefixed(lib, "_ZN4c10d16ProcessGroupGloo",
						       coll_found, &f)
		      : -ENOENT;
	size_t missing = NR_COLL;
	int ret = EXIT_OK;

	for (size_t i = NR_COLL; i-- > 0;)
		if (!f.name[i])
			missing = i;
	/* the default's: both, with room for both, or nothing added and nothing said */
	if (quiet && (err || missing < NR_COLL || ps->n + NR_COLL > SAMPLER_MAX_PROBES))
		ret = -1;
	else if (!lib) {
		error("--probe-collectives: no %s in the library directories "
		      "(/usr/lib/x86_64-linux-gnu, ...): is PyTorch installed? (Debian: python3-torch)",
		      OPS_LIBRARY);
		ret = EXIT_USAGE;
	} else if (err) {
		error("--probe-collectives: cannot read %s: %s", lib, strerror(-err));
		ret = EXIT_BAD;
	} else if (missing < NR_COLL) {
		error("--probe-collectives: %s has no %s...: a PyTorch built without gloo?", lib,
		      coll_mangled[missing]);
		ret = EXIT_USAGE;
	}
	for (size_t i = 0; i < NR_COLL && ret == EXIT_OK; i++) {
		/* libtorch is dlopen'ed by torch's Python module: not loaded is no mistake here */
		err = set_add(ps, "--probe-collectives", lib, f.name[i], f.off[i], false);
		if (err == -ENOSPC)
			ret = usage_error("record",
					  "at most %d probes (--probe, --probe-ops and "
					  "--probe-collectives)",
					  SAMPLER_MAX_PROBES);
		else if (err)
			ret = error("out of memory");
	}
	if (ret == EXIT_OK) {
		err = add_mpi_collectives(ps, lib);
		if (err == -ENOSPC && !quiet)
			ret = usage_error("record",
					  "at most %d probes (--probe, --probe-ops and "
					  "--probe-collectives)",
					  SAMPLER_MAX_PROBES);
		else if (err && err != -ENOSPC && !quiet)
			ret = error("--probe-collectives: cannot read %s's MPI library: %s", lib,
				    strerror(-err));
	}
	for (size_t i = 0; i < NR_COLL; i++)
		free(f.name[i]);
	free(lib);
	return ret;
}
