/* SPDX-License-Identifier: MIT */
/*
 * The symbolizer: its life, its settings and the address-space events
 * that drive it. Everything else is in the files internal.h lists.
 *
 * Not thread-safe: one symbolizer is driven by one thread.
 */
#include "symbolize/symbolize.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/internal.h"
#include "util/util.h"

/* Default cap on modules holding files open; see symbolizer__set_open_max. */
#define OPEN_MAX_DEFAULT 128

/* A process is gone: its mappings, JIT symbols and unwinding state. */
static void proc_drop(struct proc *p)
{
	if (!p)
		return;
	perfmap__free(p->perfmap);
	unwind__proc_free(p->unw);
	jitcaller__proc_free(p->jit);
	proc_free(p);
}

static int set_debug_dirs(struct sym_config *cfg, const char *dirs)
{
	char **v, *copy, *save = NULL;
	size_t n = 1;

	for (const char *p = dirs; *p; p++)
		n += *p == ':';
	v = calloc(n + 1, sizeof(*v));
	copy = strdup(dirs);
	if (!v || !copy)
		goto nomem;
	n = 0;
	for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		size_t len = strlen(d);

		if (d[0] != '/') {
			free(copy);
			for (size_t i = 0; i < n; i++)
				free(v[i]);
			free(v);
			return -EINVAL;
		}
		while (len > 1 && d[len - 1] == '/')
			len--;
		v[n] = strndup(d, len);
		if (!v[n++])
			goto nomem;
	}
	free(copy);
	if (cfg->debug_dirs) {
		for (char **d = cfg->debug_dirs; *d; d++)
			free(*d);
		free(cfg->debug_dirs);
	}
	cfg->debug_dirs = v;
	return 0;
nomem:
	if (v) {
		for (size_t i = 0; v[i]; i++)
			free(v[i]);
	}
	free(v);
	free(copy);
	return -ENOMEM;
}

int symbolizer__set_debug_dirs(struct symbolizer *s, const char *dirs)
{
	if (!s || !dirs)
		return -EINVAL;
	return set_debug_dirs(&s->cfg, dirs);
}

void symbolizer__set_demangle_params(struct symbolizer *s, bool params)
{
	if (!s || s->cfg.no_params == !params)
		return;
	s->cfg.no_params = !params;
	/* the cache holds names in the other form */
	u64map_free(&s->demangled);
	u64map_init(&s->demangled);
}

void symbolizer__set_inline(struct symbolizer *s, bool on)
{
	if (s)
		s->cfg.no_inline = !on;
}

void symbolizer__set_open_max(struct symbolizer *s, size_t max)
{
	if (s)
		s->open_max = max ? max : 1;
}

struct symbolizer *symbolizer__new(void)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	const char *dirs = getenv("DLFLAME_DEBUG_DIRS");

	u64map_init(&s->procs);
	u64map_init(&s->modules);
	u64map_init(&s->demangled);
	strpool__init(&s->pool);
	strpool__init(&s->kpool);
	s->open_max = OPEN_MAX_DEFAULT;
	/* an unusable $DLFLAME_DEBUG_DIRS falls back to the default */
	if ((!dirs || !*dirs || set_debug_dirs(&s->cfg, dirs)) &&
	    set_debug_dirs(&s->cfg, "/usr/lib/debug")) {
		symbolizer__free(s);
		return NULL;
	}
	return s;
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->procs.cap; i++) {
		if (s->procs.keys[i] != UINT64_MAX)
			proc_drop((struct proc *)(uintptr_t)s->procs.vals[i]);
	}
	u64map_free(&s->procs);
	for (size_t i = 0; i < s->nmods; i++) {
		unwind__module_free(s->mods[i]);
		module_free(s->mods[i]);
	}
	free(s->mods);
	u64map_free(&s->modules);
	roots_free(s);
	u64map_free(&s->demangled);
	if (s->cfg.debug_dirs) {
		for (char **d = s->cfg.debug_dirs; *d; d++)
			free(*d);
		free(s->cfg.debug_dirs);
	}
	kallsyms_wait(s);
	kallsyms__free(&s->ksyms);
	kallsyms__free(&s->kload);
	strpool__free(&s->pool);
	strpool__free(&s->kpool);
	free(s->kpath);
	free(s);
}

int symbolizer__mmap(struct symbolizer *s, uint32_t pid, uint64_t addr, uint64_t len,
		     uint64_t pgoff, uint32_t prot, const char *filename)
{
	return symbolizer__mmap_id(s, pid, addr, len, pgoff, prot, filename, NULL);
}

int symbolizer__mmap_id(struct symbolizer *s, uint32_t pid, uint64_t addr, uint64_t len,
			uint64_t pgoff, uint32_t prot, const char *filename,
			const struct sym_file_id *id)
{
	struct proc *p;
	struct map m;
	uint64_t end;
	int err;

	if (!s)
		return -EINVAL;
	if (!len)
		return 0;
	if (__builtin_add_overflow(addr, len, &end))
		return -EINVAL;
	err = make_map(s, &m, pid, addr, end, pgoff, prot, filename ? filename : "", id);
	if (err)
		return err;
	p = proc_get(s, pid);
	if (!p)
		return -ENOMEM;
	return proc_insert(p, &m);
}

int symbolizer__comm(struct symbolizer *s, uint32_t pid, uint32_t tid, bool exec)
{
	struct proc *p;

	if (!s)
		return -EINVAL;
	if (!exec)
		return 0;
	p = proc_find(s, pid);
	if (p) {
		/* a new image: the old one's JIT names and unwinding state no longer apply */
		perfmap__free(p->perfmap);
		p->perfmap = NULL;
		unwind__proc_free(p->unw);
		p->unw = NULL;
		jitcaller__proc_free(p->jit);
		p->jit = NULL;
		proc_reset(p);
	}
	return 0;
}

int symbolizer__fork(struct symbolizer *s, uint32_t pid, uint32_t ppid)
{
	struct proc *parent, *child;

	if (!s)
		return -EINVAL;
	if (pid == ppid)
		return 0; /* a new thread shares its process's mappings */
	child = proc_get(s, pid);
	if (!child)
		return -ENOMEM;
	parent = proc_find(s, ppid);
	if (!parent) {
		proc_reset(child);
		return 0;
	}
	return proc_share(child, parent);
}

int symbolizer__exit(struct symbolizer *s, uint32_t pid, uint32_t tid)
{
	if (!s)
		return -EINVAL;
	if (tid != pid)
		return 0;
	proc_drop(proc_find(s, pid));
	u64map_del(&s->procs, pid);
	return 0;
}

const struct symbolizer_stats *symbolizer__stats(const struct symbolizer *s)
{
	return &s->stats;
}

int symbolizer__jit_refresh(struct symbolizer *s, uint32_t pid)
{
	struct proc *p = s ? proc_find(s, pid) : NULL;

	if (!p)
		return -ESRCH;
	/* no kernel starts at 0: the map is read again if it grew (at most every PERFMAP_REREAD_MS) */
	perfmap__lookup(s, p, 0);
	jitcaller__refresh(s, p);
	return 0;
}
