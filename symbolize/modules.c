/* SPDX-License-Identifier: MIT */
/*
 * Modules: mapped files, shared by all processes, keyed by path (a path
 * whose file is replaced becomes a new module), read once at the first
 * address that needs them. The file of an executable mapping is pinned
 * (kept open) so that it can be read after it is deleted or replaced,
 * under a cap on open files that closes the least recently used.
 */
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

static const char deleted_suffix[] = " (deleted)";

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

static struct module *module_new(struct symbolizer *s, const char *path, int root_fd, uint64_t key,
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
	m->root_fd = root_fd;
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

/*
 * The newest module for path (" (deleted)" ignored) seen from root_fd;
 * created if there is none.
 */
static struct module *module_get_in(struct symbolizer *s, const char *path, int root_fd)
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
			if (!strcmp(m->path, p) && m->root_fd == root_fd)
				goto out;
		}
	}
	m = module_new(s, p, root_fd, key, (struct module *)(uintptr_t)head);
out:
	free(p);
	return m;
}

struct module *module_get(struct symbolizer *s, const char *path)
{
	return module_get_in(s, path, -1);
}

/* A second module for the path of m, for a file that replaced m's. */
static struct module *module_replace(struct symbolizer *s, struct module *m, int root_fd)
{
	uint64_t key = path_key(m->path), head = 0;

	u64map_get(&s->modules, key, &head);
	s->stats.modules_replaced++;
	return module_new(s, m->path, root_fd, key, (struct module *)(uintptr_t)head);
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

/*
 * Build-ids decide when both are known, else inode numbers (and devices,
 * when both are known: a container's file may have our file's inode
 * number on another file system).
 */
static enum ident_match ident_match(const struct module *m, const struct file_ident *fi)
{
	if (m->build_id_size && fi->build_id_size)
		return m->build_id_size == fi->build_id_size &&
				       !memcmp(m->build_id, fi->build_id, fi->build_id_size)
			       ? IDENT_SAME
			       : IDENT_DIFFERENT;
	if (m->ino && fi->ino)
		return m->ino == fi->ino && (!m->dev || !fi->dev || m->dev == fi->dev)
			       ? IDENT_SAME
			       : IDENT_DIFFERENT;
	return IDENT_UNKNOWN;
}

/*
 * Among the modules of m's path (any root), the newest one that is the
 * file fi says, or NULL: one file mapped by the host and by a container
 * under one path (the same build) is one module.
 */
static struct module *module_same(struct symbolizer *s, const struct module *m,
				  const struct file_ident *fi)
{
	uint64_t head = 0;

	if (!fi->build_id_size)
		return NULL; /* inode numbers of two roots prove nothing */
	if (!u64map_get(&s->modules, path_key(m->path), &head))
		return NULL;
	for (struct module *o = (struct module *)(uintptr_t)head; o; o = o->next) {
		if (!strcmp(o->path, m->path) && ident_match(o, fi) == IDENT_SAME)
			return o;
	}
	return NULL;
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
static int open_mapped(uint32_t pid, int root_fd, uint64_t start, uint64_t end, const char *name,
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
	if (root_fd >= 0) {
		/* a container's: its path in its root, never ours */
		fd = fsroot_open(root_fd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (fd >= 0 && !is_regular_fd(fd)) {
			close(fd);
			fd = -1;
		}
	} else {
		snprintf(path, sizeof(path), "/proc/%" PRIu32 "/root%.*s", pid, (int)len, name);
		fd = open_regular(path);
		if (fd < 0)
			fd = open_regular(name);
	}
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
struct module *module_for_mapping(struct symbolizer *s, uint32_t pid, int root_fd, uint64_t start,
				  uint64_t end, uint32_t prot, const char *name,
				  const struct sym_file_id *id)
{
	struct module *m = module_get_in(s, name, root_fd), *same;
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
	fd = open_mapped(pid, root_fd, start, end, name, id);
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
	if (ident_match(m, &want) != IDENT_SAME && (same = module_same(s, m, &want))) {
		if (fd >= 0)
			module_pin(s, same, fd);
		return same;
	}
	if (ident_match(m, &want) == IDENT_DIFFERENT) {
		m = module_replace(s, m, root_fd);
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

/* Whether fd is the file m knows (build-id, else inode); unknown identity: only in m's own root. */
static bool module_file_is(const struct module *m, int fd, bool own_root)
{
	struct file_ident fi;

	ident_of_fd(fd, &fi);
	if (m->build_id_size && fi.build_id_size)
		return fi.build_id_size == m->build_id_size &&
		       !memcmp(fi.build_id, m->build_id, fi.build_id_size);
	if (m->ino)
		return fi.ino == m->ino && (!m->dev || m->dev == fi.dev);
	return own_root;
}

int module_open_file(const struct module *m)
{
	int fd = fsroot_open(m->root_fd, m->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd >= 0 && (!is_regular_fd(fd) || !module_file_is(m, fd, true))) {
		close(fd);
		fd = -1;
	}
	/*
	 * /proc/PID/maps names a container's files as we see them (from our
	 * root), its records as it does: the path may be ours. Only the file
	 * the module knows is taken.
	 */
	if (fd < 0 && m->root_fd >= 0) {
		fd = open_regular(m->path);
		if (fd >= 0 && !module_file_is(m, fd, false)) {
			close(fd);
			fd = -1;
		}
	}
	return fd < 0 ? -1 : fd;
}

void module_load(struct symbolizer *s, struct module *m)
{
	bool was_open = module_is_open(m);
	int fd = m->fd, err;

	/* loading opens the file: keep the number of open modules under the cap */
	if (!was_open && !module_make_room(s, m))
		s->stats.modules_unpinned++;
	if (fd < 0) {
		fd = module_open_file(m);
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
	err = fd < 0 ? -ENOENT
		     : elf_image__load(&m->img, fd, m->path, m->root_fd, &s->cfg, &s->pool);
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

void module_free(struct module *m)
{
	if (m->fd >= 0)
		close(m->fd);
	elf_image__free(&m->img);
	u64map_free(&m->cache);
	free(m->frames);
	free(m->path);
	free(m);
}

int symbolizer__module_of_file(struct symbolizer *s, const char *path, const char *build_id_hex)
{
	struct file_ident fi;
	struct module *m;
	int fd;

	if (!s || !path || !*path)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ident_of_fd(fd, &fi);
	if (build_id_hex && *build_id_hex) {
		char hex[2 * BUILD_ID_MAX + 1];

		for (size_t i = 0; i < fi.build_id_size; i++)
			snprintf(hex + 2 * i, 3, "%02x", fi.build_id[i]);
		hex[2 * fi.build_id_size] = '\0';
		if (strcmp(hex, build_id_hex)) {
			close(fd);
			return -ESTALE; /* the file was replaced since the recording */
		}
	}
	m = module_get(s, path);
	if (!m) {
		close(fd);
		return -ENOMEM;
	}
	if (ident_match(m, &fi) == IDENT_DIFFERENT) {
		m = module_replace(s, m, -1);
		if (!m) {
			close(fd);
			return -ENOMEM;
		}
	}
	module_set_ident(s, m, &fi);
	module_pin(s, m, fd);
	return (int)m->index;
}

bool symbolizer__module_identity(const struct symbolizer *s, uint32_t index, const char **path,
				 const char **build_id_hex)
{
	if (!s || index >= s->nmods)
		return false;
	*path = s->mods[index]->path;
	*build_id_hex = s->mods[index]->build_id_hex;
	return true;
}

bool symbolizer__file_mapped(const struct symbolizer *s, const char *path)
{
	struct stat st;
	bool have_st;

	if (!s || !path)
		return false;
	have_st = !stat(path, &st);
	for (size_t i = 0; i < s->nmods; i++) {
		const struct module *m = s->mods[i];

		if (!strcmp(m->path, path))
			return true;
		/* the same file under another name (a hard link, another mount of it) */
		if (have_st && m->ino && m->ino == (uint64_t)st.st_ino &&
		    (!m->dev || m->dev == (uint64_t)st.st_dev))
			return true;
	}
	return false;
}
