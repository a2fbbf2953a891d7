/* SPDX-License-Identifier: MIT */
/*
 * record --probe [MODULE:]FUNCTION: which files and offsets to put uprobes
 * on. MODULE is a path, or a library's name looked up in the system's
 * library directories (libdnnl, libdnnl.so, libdnnl.so.2); without it, the
 * command's executable and the libraries it needs (DT_NEEDED, recursively)
 * are searched, and every one that defines FUNCTION gets a probe.
 */
#include "probes.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "symbolize/symbolize.h"

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

/* A library by name: exact in a library directory, else NAME.* or NAME-*; NULL if none. */
static char *find_library(const char *name)
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
	return add_file(ctx, find_library(lib));
}

int probes_resolve(struct probe_set *ps, const char *spec, const char *exe)
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
		add_file(&s, strchr(module, '/') ? realpath(module, NULL) : find_library(module));
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
		if (ps->n == SAMPLER_MAX_PROBES) {
			ret = usage_error("record", "at most %d probes", SAMPLER_MAX_PROBES);
			break;
		}
		ps->paths[ps->n] = strdup(s.files[i]);
		ps->funcs[ps->n] = strdup(func);
		if (!ps->paths[ps->n] || !ps->funcs[ps->n]) {
			ret = error("out of memory");
			break;
		}
		ps->probes[ps->n] =
			(struct sampler_probe){ .path = ps->paths[ps->n], .offset = off };
		ps->specs[ps->n] = spec;
		ps->named[ps->n] = colon != NULL;
		ps->n++;
		found++;
	}
	if (ret == EXIT_OK && !found) {
		char like[4 * 132] = "";

		for (size_t k = 0; k < any_near.n; k++)
			snprintf(like + strlen(like), sizeof(like) - strlen(like), "%s%s",
				 k ? ", " : "", any_near.names[k]);
		error("--probe %s: no function %s in %s%s%s%s", spec, func,
		      colon ? s.files[0] : "the command or the libraries it needs",
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
