/* SPDX-License-Identifier: MIT */
/* What record and every report say about a profile's worth. */
#include "quality.h"
#include "cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Modules with nameless frames in this share of the samples are stored, and --hints lists them. */
#define HINT_STORE_SHARE 0.01
/* The one summary line names those from this share on. */
#define HINT_SHARE 0.05
/* The summary line's length, "dlflame: " included: it must stay one line of a terminal. */
#define HINT_LINE_MAX 120
/* A module name longer than this is cut in the summary line (--hints has it whole). */
#define HINT_NAME_MAX 40

int quality_ends_line(const struct profile *p, const struct render_select *sel, char *buf,
		      size_t size)
{
	uint64_t w[STACK_END_MAX];
	int err = render_stack_ends(p, sel, w);

	if (size)
		buf[0] = '\0';
	if (err)
		return err;
	render_ends_line(w, buf, size);
	return 0;
}

/*
 * glibc's modules come with libc6; for the rest, dpkg names the package and
 * Debian's debug archive has its -dbgsym twin.
 */
static const char *debug_package(const char *module)
{
	static const char *const libc[] = {
		"libc.so.6",	   "ld-linux-x86-64.so.2", "libm.so.6",
		"libpthread.so.0", "libdl.so.2",	   "librt.so.1"
	};

	for (size_t i = 0; i < sizeof(libc) / sizeof(*libc); i++)
		if (!strcmp(module, libc[i]))
			return "libc6-dbg";
	return NULL;
}

/*
 * The samples hints weigh: on-CPU ones, counted; a recording of blocked
 * time only (dlflame offcpu, --no-... imports) by its blocked time.
 */
static int hint_selection(const struct profile *p, struct render_select *sel)
{
	uint64_t w[STACK_END_MAX], total = 0;
	int err;

	*sel = (struct render_select){ .kinds = { [SAMPLE_ONCPU] = true } };
	err = render_stack_ends(p, sel, w);
	for (int e = 0; !err && e < STACK_END_MAX; e++)
		total += w[e];
	if (!err && !total)
		*sel = (struct render_select){ .kinds = { [SAMPLE_OFFCPU] = true },
					       .weight_ns = true };
	return err;
}

/* The file a module name (and build-id) was mapped from, as the symbolizer kept it; NULL: none. */
static const char *module_path(const struct symbolizer *sym, const char *module,
			       const char *build_id)
{
	const char *path, *bid, *fallback = NULL;

	for (uint32_t i = 0; sym && symbolizer__module_identity(sym, i, &path, &bid); i++) {
		const char *base = strrchr(path, '/');

		base = base ? base + 1 : path;
		if (strcmp(base, module))
			continue;
		if (*build_id && bid && !strcmp(bid, build_id))
			return path;
		fallback = fallback ? fallback : path;
	}
	return fallback;
}

static int intern(struct profile *p, const char *s, uint32_t *id)
{
	int64_t v = profile__string(p, s ? s : "", s ? strlen(s) : 0);

	if (v < 0)
		return (int)v;
	*id = (uint32_t)v;
	return 0;
}

int quality_store_hints(struct profile *p, const struct symbolizer *sym)
{
	struct render_symbol_hint h[QUALITY_MAX_HINTS];
	struct pf_hint ph[QUALITY_MAX_HINTS];
	struct render_select sel;
	size_t n = 0;
	int err = hint_selection(p, &sel);

	if (!err)
		err = render_symbol_hints(p, &sel, HINT_STORE_SHARE, h, QUALITY_MAX_HINTS, &n);
	/*
	 * The names point into the profile's string pool, which interning may
	 * move: every id is found before any string is added.
	 */
	for (size_t i = 0; !err && i < n; i++) {
		ph[i] = (struct pf_hint){ .weight = h[i].weight, .total = h[i].total };
		err = intern(p, h[i].module, &ph[i].module);
		if (!err)
			err = intern(p, h[i].build_id, &ph[i].build_id);
	}
	for (size_t i = 0; !err && i < n; i++)
		err = intern(p,
			     module_path(sym, profile__str(p, ph[i].module),
					 profile__str(p, ph[i].build_id)),
			     &ph[i].path);
	if (!err)
		err = profile__set_hints(p, ph, n);
	return err;
}

void quality_hints_free(struct quality_hints *h)
{
	for (size_t i = 0; i < h->n; i++) {
		free(h->v[i].module);
		free(h->v[i].build_id);
		free(h->v[i].path);
	}
	memset(h, 0, sizeof(*h));
}

static int add_hint(struct quality_hints *h, const char *module, const char *build_id,
		    const char *path, uint64_t weight, uint64_t total)
{
	struct quality_hint *q = &h->v[h->n];

	if (h->n == QUALITY_MAX_HINTS || !total)
		return 0;
	*q = (struct quality_hint){ .module = strdup(module),
				    .build_id = strdup(build_id ? build_id : ""),
				    .path = strdup(path ? path : ""),
				    .weight = weight,
				    .total = total };
	h->n++;
	return q->module && q->build_id && q->path ? 0 : -ENOMEM;
}

int quality_hints_load(const struct profile *p, struct quality_hints *out)
{
	struct render_symbol_hint h[QUALITY_MAX_HINTS];
	const struct pf_hint *ph;
	struct render_select sel;
	size_t n = 0;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (profile__hints(p, &ph, &n)) {
		for (size_t i = 0; !err && i < n; i++)
			err = add_hint(out, profile__str(p, ph[i].module),
				       profile__str(p, ph[i].build_id), profile__str(p, ph[i].path),
				       ph[i].weight, ph[i].total);
	} else {
		/* an older file, a journal, a perf.data, a merge: as the recorder would have */
		err = hint_selection(p, &sel);
		if (!err)
			err = render_symbol_hints(p, &sel, HINT_STORE_SHARE, h, QUALITY_MAX_HINTS,
						  &n);
		for (size_t i = 0; !err && i < n; i++)
			err = add_hint(out, h[i].module, h[i].build_id, NULL, h[i].weight,
				       h[i].total);
	}
	if (err)
		quality_hints_free(out);
	return err;
}

static double share(const struct quality_hint *q)
{
	return 100.0 * (double)q->weight / (double)q->total;
}

/* "NAME" or its first HINT_NAME_MAX - 2 bytes and "..". */
static const char *short_name(const char *s, char *buf, size_t size)
{
	if (strlen(s) <= HINT_NAME_MAX)
		return s;
	snprintf(buf, size, "%.*s..", HINT_NAME_MAX - 2, s);
	return buf;
}

/* The summary of the first k of shown modules, pointing at where; its length. */
static size_t hint_text(const struct quality_hints *h, size_t k, size_t shown, const char *where,
			char *buf, size_t size)
{
	char name[HINT_NAME_MAX + 1];
	size_t len = 0;

	if (shown == 1)
		return (size_t)snprintf(buf, size, "%s (%.0f%% of samples); see %s",
					short_name(h->v[0].module, name, sizeof(name)),
					share(&h->v[0]), where);
	for (size_t i = 0; i < k && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s %.0f%%", i ? ", " : "",
					short_name(h->v[i].module, name, sizeof(name)),
					share(&h->v[i]));
	if (len < size)
		len += (size_t)snprintf(buf + len, size - len, " of samples");
	if (k < shown && len < size)
		len += (size_t)snprintf(buf + len, size - len, " and %zu more", shown - k);
	if (len < size)
		len += (size_t)snprintf(buf + len, size - len, "; see %s", where);
	return len;
}

void quality_hint_line(const struct quality_hints *h, const char *input)
{
	static const char prefix[] = "dlflame: hint: no symbols for ";
	char text[1024], where[2][320] = { "report --hints", "report --hints" };
	size_t shown = 0;

	for (size_t i = 0; i < h->n; i++)
		shown += share(&h->v[i]) >= 100.0 * HINT_SHARE;
	if (!shown)
		return;
	if (shown == 1 && debug_package(h->v[0].module)) {
		info("hint: %.0f%% of samples have frames in %s that no symbol names; install %s "
		     "to name them",
		     share(&h->v[0]), h->v[0].module, debug_package(h->v[0].module));
		return;
	}
	if (input)
		snprintf(where[0], sizeof(where[0]), "report -i %s --hints", input);
	/* as many modules as one line holds, biggest share first; the input's name if it fits too */
	for (size_t k = shown; k > 0; k--)
		for (int w = 0; w < 2; w++)
			if (strlen(prefix) + hint_text(h, k, shown, where[w], text, sizeof(text)) <=
			    HINT_LINE_MAX) {
				info("hint: no symbols for %s", text);
				return;
			}
	/* a first module with a long name */
	hint_text(h, 1, shown, where[1], text, sizeof(text));
	info("hint: no symbols for %s", text);
}

/* An earlier listed module with the debug package of module i, which names it; NULL: none. */
static const char *named_before(const struct quality_hints *h, size_t i)
{
	const char *pkg = debug_package(h->v[i].module);

	for (size_t j = 0; pkg && j < i; j++)
		if (debug_package(h->v[j].module) && !strcmp(debug_package(h->v[j].module), pkg))
			return h->v[j].module;
	return NULL;
}

int quality_hints_list(const struct quality_hints *h, FILE *out)
{
	fprintf(out,
		"Code no symbol names, by module: the share of the recording's samples with a "
		"frame in it (%.0f%% or more)\n",
		100.0 * HINT_STORE_SHARE);
	if (!h->n)
		fprintf(out, "  none\n");
	for (size_t i = 0; i < h->n; i++) {
		const struct quality_hint *q = &h->v[i];
		const char *pkg = debug_package(q->module);
		const char *file = *q->path ? q->path : q->module;

		fprintf(out, "%6.1f%%  %s", share(q), q->module);
		if (*q->build_id)
			fprintf(out, " (build-id %s)", q->build_id);
		if (*q->path)
			fprintf(out, " %s", q->path);
		if (pkg && !named_before(h, i))
			fprintf(out, "\n         install %s to name them\n", pkg);
		else if (pkg)
			fprintf(out, "\n         the package named above for %s names them too\n",
				named_before(h, i));
		else
			fprintf(out,
				"\n         its debug file would name them (Debian: the -dbgsym "
				"package of the one `dpkg -S %s` names)\n",
				file);
	}
	return ferror(out) ? -EIO : 0;
}
