/* SPDX-License-Identifier: MIT */
/*
 * The CPython interpreters this machine has, for the Python tests: every
 * /usr/bin/python3.N and every pyenv build's bin/python3.N with N >= 11
 * (free-threaded builds, python3.Nt, apart). Never a fixed path: each one
 * found is a test case, and a version that is not installed is no case.
 */
#ifndef DLFLAME_TESTS_PYTHONS_H
#define DLFLAME_TESTS_PYTHONS_H

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PYTHONS_MAX 32

struct python {
	char path[256];
	unsigned minor;
	bool free_threaded; /* python3.Nt */
	char include[256]; /* its headers with internal/ (python3.N-dev), "" if none */
};

/* Whether name is python3.N (or python3.Nt), N >= 11; its N. */
static inline bool python_name(const char *name, unsigned *minor, bool *ft)
{
	char *end;
	unsigned long n;

	if (strncmp(name, "python3.", 8) || name[8] < '0' || name[8] > '9')
		return false;
	n = strtoul(name + 8, &end, 10);
	*ft = end[0] == 't' && !end[1];
	if ((*end && !*ft) || n < 11 || n > 99)
		return false;
	*minor = (unsigned)n;
	return true;
}

static inline void python_add(struct python *out, size_t *n, size_t max, const char *dir,
			      const char *name, const char *include_root)
{
	struct python p = { 0 };
	char real[PATH_MAX], other[PATH_MAX], inc[300];

	if (*n >= max || !python_name(name, &p.minor, &p.free_threaded) ||
	    snprintf(p.path, sizeof(p.path), "%s/%s", dir, name) >= (int)sizeof(p.path) ||
	    access(p.path, X_OK) || !realpath(p.path, real))
		return;
	for (size_t i = 0; i < *n; i++)
		if (realpath(out[i].path, other) && !strcmp(other, real))
			return;
	snprintf(inc, sizeof(inc), "%s/python3.%u%s/internal/pycore_runtime.h", include_root,
		 p.minor, p.free_threaded ? "t" : "");
	if (!access(inc, R_OK))
		snprintf(p.include, sizeof(p.include), "%s/python3.%u%s", include_root, p.minor,
			 p.free_threaded ? "t" : "");
	out[(*n)++] = p;
}

static inline void python_scan(struct python *out, size_t *n, size_t max, const char *dir,
			       const char *include_root)
{
	struct dirent **ents;
	int k = scandir(dir, &ents, NULL, alphasort);

	for (int i = 0; i < k; i++) {
		python_add(out, n, max, dir, ents[i]->d_name, include_root);
		free(ents[i]);
	}
	if (k >= 0)
		free(ents);
}

/* The interpreters found, free-threaded ones only if ft; how many. */
static inline size_t pythons_find(struct python *out, size_t max, bool ft)
{
	struct python all[PYTHONS_MAX];
	struct dirent **ents;
	size_t n = 0, m = 0;
	int k;

	python_scan(all, &n, PYTHONS_MAX, "/usr/bin", "/usr/include");
	k = scandir("/root/.pyenv/versions", &ents, NULL, alphasort);
	for (int i = 0; i < k; i++) {
		char bin[300], inc[300];

		if (ents[i]->d_name[0] != '.') {
			snprintf(bin, sizeof(bin), "/root/.pyenv/versions/%s/bin", ents[i]->d_name);
			snprintf(inc, sizeof(inc), "/root/.pyenv/versions/%s/include",
				 ents[i]->d_name);
			python_scan(all, &n, PYTHONS_MAX, bin, inc);
		}
		free(ents[i]);
	}
	if (k >= 0)
		free(ents);
	for (size_t i = 0; i < n && m < max; i++)
		if (all[i].free_threaded == ft)
			out[m++] = all[i];
	return m;
}

/* The CPython versions before 3.11 pyenv has (their frames are not read). */
static inline size_t pythons_old(struct python *out, size_t max)
{
	struct dirent **ents;
	size_t m = 0;
	int k = scandir("/root/.pyenv/versions", &ents, NULL, alphasort);

	for (int i = 0; i < k; i++) {
		unsigned major, minor;
		struct python p = { 0 };

		if (m < max && sscanf(ents[i]->d_name, "%u.%u", &major, &minor) == 2 &&
		    major == 3 && minor < 11 &&
		    snprintf(p.path, sizeof(p.path), "/root/.pyenv/versions/%s/bin/python3.%u",
			     ents[i]->d_name, minor) < (int)sizeof(p.path) &&
		    !access(p.path, X_OK)) {
			p.minor = minor;
			out[m++] = p;
		}
		free(ents[i]);
	}
	if (k >= 0)
		free(ents);
	return m;
}

#endif
