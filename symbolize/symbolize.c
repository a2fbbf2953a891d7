/* SPDX-License-Identifier: MIT */
/*
 * Process address spaces and the naming of addresses.
 *
 * Each process is a sorted array of disjoint mappings, kept the way the
 * kernel keeps its VMAs: a new mapping replaces whatever it overlaps.
 * Modules (mapped files) are shared by all processes, keyed by path, read
 * once at the first address that needs them, and kept for the life of the
 * symbolizer together with every string handed out.
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

/* /proc/PID/maps: lines are at most PATH_MAX plus ~80 bytes of fields. */
#define MAPS_LINE_MAX 8192
#define MAPS_MAX_BYTES (64ull << 20)
/* Re-read /proc/PID/maps after this many misses, doubling while it finds
 * nothing new, so that garbage addresses cannot make us read it often. */
#define FALLBACK_INTERVAL 100
#define FALLBACK_INTERVAL_MAX 25600

static const char unknown_name[] = "[unknown]";

static int kallsyms_wait(struct symbolizer *s);
static const char vdso_name[] = "[vdso]";
static const char kernel_name[] = "[kernel]";
static const char kernel_module[] = "[kernel.kallsyms]";
static const char deleted_suffix[] = " (deleted)";

/* ---- modules ---- */

/* Default cap on modules holding files open; see symbolizer__set_open_max. */
#define OPEN_MAX_DEFAULT 128
/* Addresses cached per module; past this, lookups are computed each time. */
#define ADDR_CACHE_MAX (1u << 20)
/* Inline levels of one address kept in the cache. */
#define LEVELS_MAX 32

static uint64_t path_key(const char *path)
{
	uint64_t h = hash_bytes(path, strlen(path), 0);

	return h == UINT64_MAX ? 0 : h;
}

/* Length of path without a trailing " (deleted)". */
static size_t undeleted_len(const char *path, bool *deleted)
{
	size_t len = strlen(path), sl = sizeof(deleted_suffix) - 1;

	*deleted = len > sl && !strcmp(path + len - sl, deleted_suffix);
	return *deleted ? len - sl : len;
}

static struct module *module_new(struct symbolizer *s, const char *path, uint64_t key,
				 struct module *head)
{
	struct module *m;
	const char *base;

	if (grow_array((void **)&s->mods, &s->mods_cap, s->nmods + 1, sizeof(*s->mods)))
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->fd = -1;
	u64map_init(&m->cache);
	m->path = strdup(path);
	if (!m->path)
		goto err;
	base = strrchr(path, '/');
	base = base && base[1] ? base + 1 : path;
	m->basename = strpool__intern(&s->pool, base, strlen(base));
	if (!m->basename)
		goto err;
	m->next = head;
	if (u64map_put(&s->modules, key, (uint64_t)(uintptr_t)m))
		goto err;
	m->index = (uint32_t)s->nmods;
	s->mods[s->nmods++] = m;
	return m;
err:
	free(m->path);
	free(m);
	return NULL;
}

/* The newest module for path (" (deleted)" ignored); created if there is none. */
struct module *module_get(struct symbolizer *s, const char *path)
{
	uint64_t head = 0, key;
	struct module *m;
	bool deleted;
	size_t len = undeleted_len(path, &deleted);
	char *p = strndup(path, len);

	if (!p)
		return NULL;
	key = path_key(p);
	if (u64map_get(&s->modules, key, &head)) {
		for (m = (struct module *)(uintptr_t)head; m; m = m->next) {
			if (!strcmp(m->path, p))
				goto out;
		}
	}
	m = module_new(s, p, key, (struct module *)(uintptr_t)head);
out:
	free(p);
	return m;
}

/* A second module for the path of m, for a file that replaced m's. */
static struct module *module_replace(struct symbolizer *s, struct module *m)
{
	uint64_t key = path_key(m->path), head = 0;

	u64map_get(&s->modules, key, &head);
	s->stats.modules_replaced++;
	return module_new(s, m->path, key, (struct module *)(uintptr_t)head);
}

static bool module_is_open(const struct module *m)
{
	return m->fd >= 0 || m->img.dwfl;
}

static void module_close(struct symbolizer *s, struct module *m)
{
	if (!module_is_open(m))
		return;
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	elf_image__close(&m->img);
	s->nopen--;
}

/*
 * Make room for one more open module: close the least recently used one
 * (never `keep`, never one whose unwind tables read its pinned fd). False
 * when nothing can be closed.
 */
static bool module_make_room(struct symbolizer *s, const struct module *keep)
{
	struct module *lru = NULL;

	if (s->nopen < s->open_max)
		return true;
	for (size_t i = 0; i < s->nmods; i++) {
		struct module *m = s->mods[i];

		/* unwind.c's tables borrow the pinned fd: such a module stays open */
		if (m != keep && module_is_open(m) && !m->unwind && (!lru || m->lru < lru->lru))
			lru = m;
	}
	if (!lru)
		return false;
	module_close(s, lru);
	s->stats.modules_unpinned++;
	return true;
}

static void set_build_id(struct symbolizer *s, struct module *m, const uint8_t *id, size_t n)
{
	char hex[2 * BUILD_ID_MAX + 1];

	if (!n || n > BUILD_ID_MAX)
		return;
	memcpy(m->build_id, id, n);
	m->build_id_size = (uint8_t)n;
	for (size_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	m->build_id_hex = strpool__intern(&s->pool, hex, 2 * n);
}

/* What one file is: its build-id and inode; zero when unknown. */
struct file_ident {
	uint8_t build_id[BUILD_ID_MAX];
	size_t build_id_size;
	uint64_t dev, ino;
};

static void ident_of_fd(int fd, struct file_ident *fi)
{
	struct stat st;

	memset(fi, 0, sizeof(*fi));
	if (!fstat(fd, &st)) {
		fi->dev = st.st_dev;
		fi->ino = st.st_ino;
	}
	fi->build_id_size = elf_fd_build_id(fd, fi->build_id, sizeof(fi->build_id));
}

enum ident_match { IDENT_UNKNOWN, IDENT_SAME, IDENT_DIFFERENT };

/* Build-ids decide when both are known, else inode numbers. */
static enum ident_match ident_match(const struct module *m, const struct file_ident *fi)
{
	if (m->build_id_size && fi->build_id_size)
		return m->build_id_size == fi->build_id_size &&
				       !memcmp(m->build_id, fi->build_id, fi->build_id_size)
			       ? IDENT_SAME
			       : IDENT_DIFFERENT;
	if (m->ino && fi->ino)
		return m->ino == fi->ino ? IDENT_SAME : IDENT_DIFFERENT;
	return IDENT_UNKNOWN;
}

static void module_set_ident(struct symbolizer *s, struct module *m, const struct file_ident *fi)
{
	if (!m->build_id_size)
		set_build_id(s, m, fi->build_id, fi->build_id_size);
	if (!m->ino) {
		m->dev = fi->dev;
		m->ino = fi->ino;
	}
}

/* Pin fd (already open) to m. Closes fd when m has a file or the cap allows none. */
static void module_pin(struct symbolizer *s, struct module *m, int fd)
{
	if (m->fd >= 0 || m->img.dwfl || m->state != MOD_NEW || !module_make_room(s, m)) {
		if (m->fd < 0 && !m->img.dwfl && m->state == MOD_NEW)
			s->stats.modules_unpinned++;
		close(fd);
		return;
	}
	m->fd = fd;
	s->nopen++;
	s->stats.modules_pinned++;
}

static bool is_regular_fd(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISREG(st.st_mode);
}

static int open_regular(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd >= 0 && !is_regular_fd(fd)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * Open the file behind a mapping: /proc/PID/map_files/START-END is the
 * mapped inode itself, deleted or not, while the process lives. The paths
 * are only tried while they can still be the mapped file: not when the
 * kernel said " (deleted)", not when the record's inode says otherwise.
 */
static int open_mapped(uint32_t pid, uint64_t start, uint64_t end, const char *name,
		       const struct sym_file_id *id)
{
	char path[PATH_MAX + 64];
	struct stat st;
	bool deleted;
	size_t len = undeleted_len(name, &deleted);
	int fd;

	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/map_files/%" PRIx64 "-%" PRIx64, pid, start,
		 end);
	fd = open_regular(path);
	if (fd >= 0)
		return fd;
	if (deleted || name[0] != '/' || len > PATH_MAX)
		return -1;
	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/root%.*s", pid, (int)len, name);
	fd = open_regular(path);
	if (fd < 0)
		fd = open_regular(name);
	if (fd >= 0 && id && id->ino && (fstat(fd, &st) || (uint64_t)st.st_ino != id->ino)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * The module for a new mapping of `name`. An executable mapping pins its
 * file; a file other than the one the path's module has (by build-id, else
 * by inode; the record's word first, then the opened file's) starts a new
 * module.
 */
static struct module *module_for_mapping(struct symbolizer *s, uint32_t pid, uint64_t start,
					 uint64_t end, uint32_t prot, const char *name,
					 const struct sym_file_id *id)
{
	struct module *m = module_get(s, name);
	struct file_ident want = { 0 }, fi;
	int fd;

	if (!m || !(prot & PROT_EXEC))
		return m;
	if (id) {
		if (id->build_id_size && id->build_id_size <= sizeof(id->build_id)) {
			memcpy(want.build_id, id->build_id, id->build_id_size);
			want.build_id_size = id->build_id_size;
		}
		want.ino = id->ino;
	}
	/* the record alone can say "same file", sparing an open per mapping */
	if ((want.build_id_size || want.ino) && ident_match(m, &want) == IDENT_SAME &&
	    (module_is_open(m) || m->state != MOD_NEW))
		return m;
	fd = open_mapped(pid, start, end, name, id);
	if (fd >= 0) {
		ident_of_fd(fd, &fi);
		if (want.build_id_size && (fi.build_id_size != want.build_id_size ||
					   memcmp(fi.build_id, want.build_id, fi.build_id_size))) {
			/* the path holds another file than the one mapped */
			close(fd);
			fd = -1;
		} else {
			memcpy(want.build_id, fi.build_id, fi.build_id_size);
			want.build_id_size = fi.build_id_size;
			want.dev = fi.dev;
			want.ino = fi.ino;
		}
	}
	if (ident_match(m, &want) == IDENT_DIFFERENT) {
		m = module_replace(s, m);
		if (!m) {
			if (fd >= 0)
				close(fd);
			return NULL;
		}
	}
	module_set_ident(s, m, &want);
	if (fd >= 0)
		module_pin(s, m, fd);
	return m;
}

void module_load(struct symbolizer *s, struct module *m)
{
	bool was_open = module_is_open(m);
	int fd = m->fd, err;

	/* loading opens the file: keep the number of open modules under the cap */
	if (!was_open && !module_make_room(s, m))
		s->stats.modules_unpinned++;
	if (fd < 0) {
		fd = open_regular(m->path);
		if (fd >= 0) {
			struct file_ident fi;

			ident_of_fd(fd, &fi);
			/* a module that knows its file refuses another one */
			if ((m->build_id_size && fi.build_id_size &&
			     (fi.build_id_size != m->build_id_size ||
			      memcmp(fi.build_id, m->build_id, fi.build_id_size))) ||
			    (!m->build_id_size && m->ino && fi.ino != m->ino)) {
				close(fd);
				fd = -1;
			} else if (!m->ino) {
				m->dev = fi.dev;
				m->ino = fi.ino;
			}
		}
	}
	err = fd < 0 ? -ENOENT : elf_image__load(&m->img, fd, m->path, &s->cfg, &s->pool);
	if (fd >= 0 && fd != m->fd)
		close(fd);
	if (err) {
		m->state = MOD_FAILED;
		s->stats.modules_failed++;
		if (m->fd >= 0)
			module_close(s, m);
		return;
	}
	m->state = MOD_LOADED;
	s->stats.modules_loaded++;
	if (m->img.has_debug_file)
		s->stats.debug_files++;
	if (!m->build_id_size)
		set_build_id(s, m, m->img.build_id, m->img.build_id_size);
	if (!was_open)
		s->nopen++;
}

static void module_free(struct module *m)
{
	unwind__module_free(m); /* unwind/perfmap: the module's unwind tables */
	if (m->fd >= 0)
		close(m->fd);
	elf_image__free(&m->img);
	u64map_free(&m->cache);
	free(m->frames);
	free(m->path);
	free(m);
}

/* ---- processes and mappings ---- */

struct proc *proc_find(const struct symbolizer *s, uint32_t pid)
{
	uint64_t v;

	if (!u64map_get(&s->procs, pid, &v))
		return NULL;
	return (struct proc *)(uintptr_t)v;
}

struct proc *proc_get(struct symbolizer *s, uint32_t pid)
{
	struct proc *p = proc_find(s, pid);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->interval = FALLBACK_INTERVAL;
	p->next_fallback = 1;
	if (u64map_put(&s->procs, pid, (uint64_t)(uintptr_t)p)) {
		free(p);
		return NULL;
	}
	return p;
}

static void proc_free(struct proc *p)
{
	if (!p)
		return;
	perfmap__free(p->perfmap); /* JIT symbols */
	unwind__proc_free(p->unw);
	jitcaller__proc_free(p->jit);
	free(p->maps);
	free(p);
}

/* First mapping whose end is above addr (mappings are disjoint, so ends are sorted too). */
static size_t first_end_above(const struct proc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct map *proc_lookup(struct proc *p, uint64_t addr)
{
	size_t i;

	if (p->last < p->n && p->maps[p->last].start <= addr && addr < p->maps[p->last].end)
		return &p->maps[p->last];
	i = first_end_above(p, addr);
	if (i == p->n || p->maps[i].start > addr)
		return NULL;
	p->last = i;
	return &p->maps[i];
}

/* Insert m, cutting away the parts of older mappings it overlaps. */
static int proc_insert(struct proc *p, const struct map *m)
{
	size_t i = first_end_above(p, m->start), j = i, k, count, nn;
	struct map left, right;
	bool has_left = false, has_right = false;

	while (j < p->n && p->maps[j].start < m->end)
		j++;
	if (i < j && p->maps[i].start < m->start) {
		left = p->maps[i];
		left.end = m->start;
		has_left = true;
	}
	if (i < j && p->maps[j - 1].end > m->end) {
		right = p->maps[j - 1];
		right.pgoff += m->end - right.start;
		right.start = m->end;
		has_right = true;
	}
	count = 1 + has_left + has_right;
	nn = p->n - (j - i) + count;
	if (grow_array((void **)&p->maps, &p->cap, nn, sizeof(*p->maps)))
		return -ENOMEM;
	memmove(p->maps + i + count, p->maps + j, (p->n - j) * sizeof(*p->maps));
	k = i;
	if (has_left)
		p->maps[k++] = left;
	p->maps[k++] = *m;
	if (has_right)
		p->maps[k++] = right;
	p->n = nn;
	p->last = has_left ? i + 1 : i;
	return 0;
}

static int cmp_map(const void *a, const void *b)
{
	const struct map *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

/*
 * Add the parts of add[] that no mapping covers yet, in one linear pass:
 * the mappings we have came from records and are more exact for the time
 * of the samples than a later look at /proc. Returns how many were added.
 */
static int proc_merge(struct proc *p, struct map *add, size_t nadd)
{
	struct map *pieces = NULL, *merged;
	size_t npieces = 0, pcap = 0, i, j = 0, k = 0, out = 0;
	uint64_t floor = 0;

	qsort(add, nadd, sizeof(*add), cmp_map);
	for (i = 0; i < nadd; i++) {
		uint64_t cur = add[i].start > floor ? add[i].start : floor;

		while (cur < add[i].end) {
			uint64_t next = add[i].end;

			while (j < p->n && p->maps[j].end <= cur)
				j++;
			if (j < p->n && p->maps[j].start <= cur) {
				cur = p->maps[j].end;
				continue;
			}
			if (j < p->n && p->maps[j].start < next)
				next = p->maps[j].start;
			if (grow_array((void **)&pieces, &pcap, npieces + 1, sizeof(*pieces))) {
				free(pieces);
				return -ENOMEM;
			}
			pieces[npieces] = add[i];
			pieces[npieces].start = cur;
			pieces[npieces].end = next;
			pieces[npieces].pgoff = add[i].pgoff + (cur - add[i].start);
			npieces++;
			cur = next;
		}
		if (add[i].end > floor)
			floor = add[i].end;
	}
	if (!npieces)
		return 0;
	merged = malloc((p->n + npieces) * sizeof(*merged));
	if (!merged) {
		free(pieces);
		return -ENOMEM;
	}
	for (i = 0; i < p->n || k < npieces;) {
		if (k == npieces || (i < p->n && p->maps[i].start < pieces[k].start))
			merged[out++] = p->maps[i++];
		else
			merged[out++] = pieces[k++];
	}
	free(p->maps);
	free(pieces);
	p->maps = merged;
	p->n = p->cap = out;
	p->last = 0;
	return (int)(npieces > INT32_MAX ? INT32_MAX : npieces);
}

static bool is_anon_name(const char *name)
{
	/*
	 * "[heap]", "[stack]", "[anon:x]", "//anon", "": no file behind them;
	 * shared anonymous memory shows as "/dev/zero (deleted)", SysV shm as
	 * "/SYSV<key> (deleted)".
	 */
	return name[0] != '/' || !strcmp(name, "//anon") || !strncmp(name, "/dev/zero", 9) ||
	       !strncmp(name, "/SYSV", 5);
}

static int make_map(struct symbolizer *s, struct map *m, uint32_t pid, uint64_t start, uint64_t end,
		    uint64_t pgoff, uint32_t prot, const char *name, const struct sym_file_id *id)
{
	*m = (struct map){ .start = start, .end = end, .pgoff = pgoff, .prot = prot };
	if (!strcmp(name, vdso_name)) {
		m->type = MAP_T_VDSO;
	} else if (is_anon_name(name)) {
		m->type = MAP_T_ANON;
	} else {
		m->type = MAP_T_FILE;
		m->mod = module_for_mapping(s, pid, start, end, prot, name, id);
		if (!m->mod)
			return -ENOMEM;
	}
	return 0;
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
			proc_free((struct proc *)(uintptr_t)s->procs.vals[i]);
	}
	u64map_free(&s->procs);
	for (size_t i = 0; i < s->nmods; i++)
		module_free(s->mods[i]);
	free(s->mods);
	u64map_free(&s->modules);
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

int symbolizer__load_kallsyms(struct symbolizer *s, const char *path)
{
	struct kallsyms k;
	int err;

	if (!s || !path)
		return -EINVAL;
	kallsyms_wait(s);
	err = kallsyms__load(&k, path, &s->pool);
	if (err)
		return err;
	/* names of the old table live in the pool, so frames already handed out stay valid */
	kallsyms__free(&s->ksyms);
	s->ksyms = k;
	return 0;
}

static void *kallsyms_thread(void *arg)
{
	struct symbolizer *s = arg;

	s->kerr = kallsyms__load(&s->kload, s->kpath, &s->kpool);
	return NULL;
}

int symbolizer__load_kallsyms_async(struct symbolizer *s, const char *path)
{
	int err;

	if (!s || !path)
		return -EINVAL;
	kallsyms_wait(s);
	free(s->kpath);
	s->kpath = strdup(path);
	if (!s->kpath)
		return -ENOMEM;
	err = pthread_create(&s->kthread, NULL, kallsyms_thread, s);
	if (err) {
		/* no thread: read it now */
		s->kerr = symbolizer__load_kallsyms(s, path);
		return 0;
	}
	s->kloading = true;
	return 0;
}

/* Join the kallsyms reader, if any, and take its table; the result of the last load. */
static int kallsyms_wait(struct symbolizer *s)
{
	if (!s->kloading)
		return s->kerr;
	pthread_join(s->kthread, NULL);
	s->kloading = false;
	if (!s->kerr) {
		/* its names live in kpool, freed with the symbolizer */
		kallsyms__free(&s->ksyms);
		s->ksyms = s->kload;
		memset(&s->kload, 0, sizeof(s->kload));
	}
	return s->kerr;
}

int symbolizer__kallsyms_result(struct symbolizer *s)
{
	return s ? kallsyms_wait(s) : -EINVAL;
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
		p->n = 0;
		p->last = 0;
		p->misses = 0;
		p->next_fallback = 1;
		p->interval = FALLBACK_INTERVAL;
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
	child->n = 0;
	child->last = 0;
	parent = proc_find(s, ppid);
	if (!parent || !parent->n)
		return 0;
	if (grow_array((void **)&child->maps, &child->cap, parent->n, sizeof(*child->maps)))
		return -ENOMEM;
	memcpy(child->maps, parent->maps, parent->n * sizeof(*parent->maps));
	child->n = parent->n;
	return 0;
}

int symbolizer__exit(struct symbolizer *s, uint32_t pid, uint32_t tid)
{
	if (!s)
		return -EINVAL;
	if (tid != pid)
		return 0;
	proc_free(proc_find(s, pid));
	u64map_del(&s->procs, pid);
	return 0;
}

/* ---- /proc/PID/maps fallback ---- */

struct maps_ctx {
	struct symbolizer *s;
	uint32_t pid;
	struct map *maps;
	size_t n, cap;
};

static int parse_maps_line(void *ctx, char *line, size_t len)
{
	struct maps_ctx *mc = ctx;
	struct sym_file_id id = { 0 };
	uint64_t start, end, off;
	char perms[5];
	uint32_t prot = 0;
	struct map m;
	int n = -1, err;
	const char *name;

	(void)len;
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %*s %" SCNu64 "%n", &start, &end,
		   perms, &off, &id.ino, &n) != 5 ||
	    n < 0 || start >= end)
		return 0;
	name = line + n;
	while (*name == ' ' || *name == '\t')
		name++;
	if (strchr(perms, 'r'))
		prot |= PROT_READ;
	if (strchr(perms, 'w'))
		prot |= PROT_WRITE;
	if (strchr(perms, 'x'))
		prot |= PROT_EXEC;
	err = make_map(mc->s, &m, mc->pid, start, end, off, prot, name, &id);
	if (err)
		return err;
	if (grow_array((void **)&mc->maps, &mc->cap, mc->n + 1, sizeof(*mc->maps)))
		return -ENOMEM;
	mc->maps[mc->n++] = m;
	return 0;
}

static void proc_maps_fallback(struct symbolizer *s, struct proc *p)
{
	struct maps_ctx mc = { .s = s, .pid = p->pid };
	char path[32];
	int added;

	s->stats.proc_maps_fallbacks++;
	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/maps", p->pid);
	/* a failed or partial read still merges what was read; nothing else to do */
	read_lines(path, MAPS_LINE_MAX, MAPS_MAX_BYTES, parse_maps_line, &mc, NULL);
	added = mc.n ? proc_merge(p, mc.maps, mc.n) : 0;
	free(mc.maps);
	if (added > 0)
		p->interval = FALLBACK_INTERVAL;
	else if (p->interval < FALLBACK_INTERVAL_MAX)
		p->interval *= 2;
	p->next_fallback = p->misses + p->interval;
}

/* ---- naming ---- */

static void set_frame(struct sym_frame *out, const char *name, const char *module,
		      enum frame_kind kind)
{
	out->name = name;
	out->module = module;
	out->kind = kind;
	out->file = NULL;
	out->line = 0;
	out->build_id = NULL;
}

/* "[base+0xoff]" in out->buf; a long basename is cut so the offset always shows. */
static void format_offset(struct sym_frame *out, const char *base, uint64_t off)
{
	char suffix[24];
	size_t blen = strlen(base), room;
	int slen;

	slen = snprintf(suffix, sizeof(suffix), "+0x%" PRIx64 "]", off);
	room = sizeof(out->buf) - 2 - (size_t)slen;
	if (blen > room)
		blen = room;
	out->buf[0] = '[';
	memcpy(out->buf + 1, base, blen);
	memcpy(out->buf + 1 + blen, suffix, (size_t)slen + 1);
	out->name = out->buf;
}

static void resolve_kernel(struct symbolizer *s, uint64_t addr, struct sym_frame *out)
{
	const char *name, *module;

	kallsyms_wait(s);
	if (kallsyms__lookup(&s->ksyms, addr, &name, &module))
		set_frame(out, name, module, FRAME_KERNEL);
	else
		set_frame(out, kernel_name, kernel_module, FRAME_KERNEL);
}

/* The demangled form of an interned symbol name, itself when it is not mangled. */
static const char *demangled(struct symbolizer *s, const char *name)
{
	char buf[DEMANGLED_MAX];
	uint64_t v;
	const char *d;
	size_t len;

	if (!name || name[0] != '_')
		return name;
	if (u64map_get(&s->demangled, (uint64_t)(uintptr_t)name, &v))
		return (const char *)(uintptr_t)v;
	len = sym_demangle(name, !s->cfg.no_params, buf, sizeof(buf));
	d = len ? strpool__intern(&s->pool, buf, len) : name;
	if (!d)
		return name;
	/* a failed insert only costs a second demangling later */
	u64map_put(&s->demangled, (uint64_t)(uintptr_t)name, (uint64_t)(uintptr_t)d);
	return d;
}

/* "base+0xSTART": code that no symbol covers, named after its CFI range. */
static const char *fde_name(struct symbolizer *s, const struct module *mod, uint64_t start)
{
	char buf[SYM_NAME_MAX + 24];
	int n = snprintf(buf, sizeof(buf), "%.*s+0x%" PRIx64, SYM_NAME_MAX, mod->basename, start);

	return n > 0 ? strpool__intern(&s->pool, buf, (size_t)n) : NULL;
}

/*
 * The levels of one address in a module, innermost first, the last one the
 * function (kind FRAME_USER). Returns the count; 0 when nothing names the
 * address, so that the caller names it by its offset.
 */
static size_t module_levels(struct symbolizer *s, struct module *mod, uint64_t vaddr,
			    struct cached_frame *lv)
{
	struct src_frame src[LEVELS_MAX];
	const char *name = demangled(s, elf_image__lookup(&mod->img, vaddr));
	size_t nsrc = 0, n = 0;
	uint64_t start;

	if (!s->cfg.no_inline)
		nsrc = elf_image__src(&mod->img, vaddr, src, LEVELS_MAX, &s->pool);
	for (size_t i = 0; i + 1 < nsrc; i++) {
		/* an inlined level without a name says nothing: leave it out */
		if (!src[i].inlined || !src[i].name)
			continue;
		lv[n++] = (struct cached_frame){ .name = src[i].name,
						 .file = src[i].file,
						 .line = src[i].line,
						 .kind = FRAME_INLINED };
	}
	if (!name && nsrc)
		name = src[nsrc - 1].name;
	if (!name && elf_image__fde(&mod->img, vaddr, &start))
		name = fde_name(s, mod, start);
	if (!name)
		return 0;
	lv[n++] = (struct cached_frame){ .name = name,
					 .file = nsrc ? src[nsrc - 1].file : NULL,
					 .line = nsrc ? src[nsrc - 1].line : 0,
					 .kind = FRAME_USER,
					 .last = 1 };
	return n;
}

/* Cache the levels of vaddr; returns the index of the first, or -1 when not cached. */
static int64_t cache_levels(struct module *mod, uint64_t vaddr, const struct cached_frame *lv,
			    size_t n)
{
	size_t first = mod->nframes;

	if (mod->cache.len >= ADDR_CACHE_MAX || vaddr == UINT64_MAX ||
	    grow_array((void **)&mod->frames, &mod->frames_cap, first + n, sizeof(*mod->frames)))
		return -1;
	memcpy(mod->frames + first, lv, n * sizeof(*lv));
	if (u64map_put(&mod->cache, vaddr, first))
		return -1; /* the frames stay unused; the next lookup recomputes */
	mod->nframes += n;
	return (int64_t)first;
}

/*
 * Name addr in a file mapping: up to max frames, leaf first. When the chain
 * is longer than max, the innermost levels are dropped, so the function
 * itself is always there.
 */
static size_t resolve_off(struct symbolizer *s, struct module *mod, uint64_t off,
			  struct sym_frame *out, size_t max)
{
	uint64_t vaddr, idx;
	struct cached_frame tmp[LEVELS_MAX];
	const struct cached_frame *lv;
	size_t n, skip;
	int64_t at;

	mod->lru = ++s->tick;
	if (mod->state == MOD_NEW)
		module_load(s, mod);
	set_frame(&out[0], NULL, mod->basename, FRAME_USER);
	out[0].build_id = mod->build_id_hex;
	if (mod->state != MOD_LOADED || !elf_image__vaddr(&mod->img, off, &vaddr)) {
		format_offset(&out[0], mod->basename, off);
		return 1;
	}
	if (u64map_get(&mod->cache, vaddr, &idx)) {
		lv = mod->frames + idx;
		for (n = 1; !lv[n - 1].last; n++)
			;
	} else {
		n = module_levels(s, mod, vaddr, tmp);
		if (!n) {
			format_offset(&out[0], mod->basename, vaddr);
			return 1;
		}
		at = cache_levels(mod, vaddr, tmp, n);
		lv = at < 0 ? tmp : mod->frames + at;
	}
	skip = n > max ? n - max : 0;
	for (size_t i = skip; i < n; i++) {
		struct sym_frame *f = &out[i - skip];

		set_frame(f, lv[i].name, mod->basename, (enum frame_kind)lv[i].kind);
		f->file = lv[i].file;
		f->line = lv[i].file ? lv[i].line : 0;
		f->build_id = mod->build_id_hex;
	}
	return n - skip;
}

static size_t resolve_file(struct symbolizer *s, const struct map *m, uint64_t addr,
			   struct sym_frame *out, size_t max)
{
	return resolve_off(s, m->mod, addr - m->start + m->pgoff, out, max);
}

/*
 * The mapping of a user address, reading /proc/PID/maps (rate-limited) on a
 * miss; *pp is the process (NULL when unknown and not created).
 */
static struct map *find_map(struct symbolizer *s, uint32_t pid, uint64_t addr, struct proc **pp)
{
	struct proc *p = proc_find(s, pid);
	struct map *m = NULL;

	if (p)
		m = proc_lookup(p, addr);
	/* user addresses never have the top bit set; no point reading /proc for them */
	if (!m && !(addr >> 63)) {
		if (!p)
			p = proc_get(s, pid);
		if (p && ++p->misses >= p->next_fallback) {
			proc_maps_fallback(s, p);
			m = proc_lookup(p, addr);
		}
	}
	*pp = p;
	return m;
}

void symbolizer__resolve(struct symbolizer *s, uint32_t pid, uint64_t addr, bool kernel,
			 bool return_addr, struct sym_frame *out)
{
	struct proc *p;
	struct map *m;

	if (!out)
		return;
	set_frame(out, unknown_name, "", kernel ? FRAME_KERNEL : FRAME_USER);
	if (!s)
		return;
	/* a return address points after the call; the call itself is at addr - 1 */
	if (return_addr && addr)
		addr--;
	if (kernel) {
		resolve_kernel(s, addr, out);
		return;
	}

	m = find_map(s, pid, addr, &p);
	/* unwind/perfmap: code outside files (JIT) is named from the pid's perf map */
	if ((!m || m->type == MAP_T_ANON) && perfmap__resolve(s, p, m, addr, out))
		return;
	if (!m)
		return;
	switch (m->type) {
	case MAP_T_FILE:
		resolve_file(s, m, addr, out, 1);
		break;
	case MAP_T_VDSO:
		set_frame(out, vdso_name, vdso_name, FRAME_USER);
		break;
	default:
		break;
	}
}

size_t symbolizer__resolve_inline(struct symbolizer *s, uint32_t pid, uint64_t addr, bool kernel,
				  bool return_addr, struct sym_frame *out, size_t max)
{
	uint64_t a = return_addr && addr ? addr - 1 : addr;
	struct proc *p;
	struct map *m;

	if (!out || !max)
		return 0;
	/*
	 * Files are the only source of inline levels; everything else, and a
	 * miss (which may read /proc), is symbolizer__resolve's.
	 */
	if (s && !kernel && (p = proc_find(s, pid))) {
		m = proc_lookup(p, a);
		if (m && m->type == MAP_T_FILE)
			return resolve_file(s, m, a, out, max);
	}
	symbolizer__resolve(s, pid, addr, kernel, return_addr, &out[0]);
	return 1;
}

bool symbolizer__locate(struct symbolizer *s, uint32_t pid, uint64_t addr, bool kernel,
			bool return_addr, struct sym_loc *loc)
{
	uint64_t a = return_addr && addr ? addr - 1 : addr;
	struct proc *p;
	struct map *m;

	if (!s || !loc)
		return false;
	if (kernel) {
		loc->module = SYM_LOC_KERNEL;
		loc->offset = a;
		return true;
	}
	/* a miss reads /proc/PID/maps, as naming it now would */
	m = find_map(s, pid, a, &p);
	if (!m || m->type != MAP_T_FILE || !m->mod)
		return false;
	loc->module = m->mod->index;
	loc->offset = a - m->start + m->pgoff;
	return true;
}

size_t symbolizer__resolve_loc(struct symbolizer *s, const struct sym_loc *loc,
			       struct sym_frame *out, size_t max)
{
	if (!out || !max)
		return 0;
	if (s && loc && loc->module == SYM_LOC_KERNEL) {
		resolve_kernel(s, loc->offset, out);
		return 1;
	}
	if (!s || !loc || loc->module >= s->nmods) {
		set_frame(out, unknown_name, "", FRAME_USER);
		return 1;
	}
	return resolve_off(s, s->mods[loc->module], loc->offset, out, max);
}

const struct symbolizer_stats *symbolizer__stats(const struct symbolizer *s)
{
	return &s->stats;
}

int symbolizer__load_proc_maps(struct symbolizer *s, uint32_t pid)
{
	char path[32];
	struct proc *p;

	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/maps", pid);
	if (access(path, R_OK))
		return -errno;
	p = proc_get(s, pid);
	if (!p)
		return -ENOMEM;
	proc_maps_fallback(s, p);
	return 0;
}
