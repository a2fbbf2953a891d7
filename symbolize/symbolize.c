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

#define STRPOOL_CHUNK (64u << 10)

static const char unknown_name[] = "[unknown]";
static const char vdso_name[] = "[vdso]";
static const char kernel_name[] = "[kernel]";
static const char kernel_module[] = "[kernel.kallsyms]";
static const char deleted_suffix[] = " (deleted)";

/* ---- string pool ---- */

void strpool__init(struct strpool *p)
{
	memset(p, 0, sizeof(*p));
}

void strpool__free(struct strpool *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nchunks; i++)
		free(p->chunks[i]);
	free(p->chunks);
	free(p->slots);
	strpool__init(p);
}

static char *strpool_alloc(struct strpool *p, size_t size)
{
	size_t csize = size > STRPOOL_CHUNK / 4 ? size : STRPOOL_CHUNK;
	char *c;

	if (size <= p->cur_left) {
		c = p->cur;
		p->cur += size;
		p->cur_left -= size;
		return c;
	}
	if (grow_array((void **)&p->chunks, &p->chunks_cap, p->nchunks + 1, sizeof(*p->chunks)))
		return NULL;
	c = malloc(csize);
	if (!c)
		return NULL;
	p->chunks[p->nchunks++] = c;
	/* a big string gets a chunk of its own; the current chunk stays in use */
	if (csize == STRPOOL_CHUNK) {
		p->cur = c + size;
		p->cur_left = csize - size;
	}
	return c;
}

const char *strpool__add(struct strpool *p, const char *s, size_t len)
{
	char *c;

	if (len >= UINT32_MAX)
		return NULL;
	c = strpool_alloc(p, len + 1);
	if (!c)
		return NULL;
	memcpy(c, s, len);
	c[len] = '\0';
	return c;
}

static size_t strpool_slot(const struct strpool *p, uint32_t h, const char *s, size_t len)
{
	size_t mask = p->cap - 1, i = h & mask;

	while (p->slots[i].s) {
		if (p->slots[i].hash == h && p->slots[i].len == len &&
		    !memcmp(p->slots[i].s, s, len))
			break;
		i = (i + 1) & mask;
	}
	return i;
}

static int strpool_rehash(struct strpool *p)
{
	struct strpool old = *p;
	size_t cap = p->cap ? p->cap * 2 : 1024;

	if (cap < p->cap)
		return -ENOMEM;
	p->slots = calloc(cap, sizeof(*p->slots));
	if (!p->slots) {
		p->slots = old.slots;
		return -ENOMEM;
	}
	p->cap = cap;
	for (size_t i = 0; i < old.cap; i++) {
		const struct strpool_slot *o = &old.slots[i];

		if (o->s)
			p->slots[strpool_slot(p, o->hash, o->s, o->len)] = *o;
	}
	free(old.slots);
	return 0;
}

const char *strpool__intern(struct strpool *p, const char *s, size_t len)
{
	uint32_t h = (uint32_t)hash_bytes(s, len, 0);
	const char *c;
	size_t i;

	if (len >= UINT32_MAX)
		return NULL;
	if ((p->len + 1) * 2 > p->cap && strpool_rehash(p))
		return NULL;
	i = strpool_slot(p, h, s, len);
	if (p->slots[i].s)
		return p->slots[i].s;
	c = strpool__add(p, s, len);
	if (!c)
		return NULL;
	p->slots[i] = (struct strpool_slot){ .s = c, .hash = h, .len = (uint32_t)len };
	p->len++;
	return c;
}

/* ---- bounded line reader ---- */

int read_lines(const char *path, size_t max_line, uint64_t max_bytes,
	       int (*fn)(void *ctx, char *line, size_t len), void *ctx, uint64_t *skipped)
{
	size_t bufsize = max_line + 1, have = 0;
	uint64_t total = 0;
	bool overlong = false;
	struct stat st;
	char *buf;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto out_close;
	}
	err = -EINVAL;
	if (!S_ISREG(st.st_mode))
		goto out_close;
	err = -ENOMEM;
	buf = malloc(bufsize);
	if (!buf)
		goto out_close;
	err = 0;
	while (total < max_bytes) {
		size_t want = bufsize - have, pos = 0;
		char *nl;
		ssize_t r;

		if (want > max_bytes - total)
			want = max_bytes - total;
		r = read(fd, buf + have, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			break;
		}
		if (r == 0) {
			/* a last line without its newline */
			if (have && !overlong) {
				buf[have] = '\0';
				err = fn(ctx, buf, have);
			}
			break;
		}
		total += (uint64_t)r;
		have += (size_t)r;
		while ((nl = memchr(buf + pos, '\n', have - pos))) {
			size_t len = (size_t)(nl - (buf + pos));

			if (overlong) {
				overlong = false;
			} else {
				*nl = '\0';
				err = fn(ctx, buf + pos, len);
				if (err)
					goto out_free;
			}
			pos += len + 1;
		}
		memmove(buf, buf + pos, have - pos);
		have -= pos;
		if (have == bufsize) {
			/* longer than any line we accept: drop it up to its newline */
			if (!overlong && skipped)
				(*skipped)++;
			overlong = true;
			have = 0;
		}
	}
out_free:
	free(buf);
out_close:
	close(fd);
	return err;
}

/* ---- modules ---- */

static uint64_t path_key(const char *path)
{
	uint64_t h = hash_bytes(path, strlen(path), 0);

	return h == UINT64_MAX ? 0 : h;
}

struct module *module_get(struct symbolizer *s, const char *path)
{
	uint64_t key = path_key(path), head = 0;
	struct module *m;
	const char *base;
	size_t blen;

	if (u64map_get(&s->modules, key, &head)) {
		for (m = (struct module *)(uintptr_t)head; m; m = m->next) {
			if (!strcmp(m->path, path))
				return m;
		}
	}
	if (grow_array((void **)&s->mods, &s->mods_cap, s->nmods + 1, sizeof(*s->mods)))
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->path = strdup(path);
	if (!m->path)
		goto err;
	base = strrchr(path, '/');
	base = base && base[1] ? base + 1 : path;
	blen = strlen(base);
	if (blen > sizeof(deleted_suffix) - 1 &&
	    !strcmp(base + blen - (sizeof(deleted_suffix) - 1), deleted_suffix))
		blen -= sizeof(deleted_suffix) - 1;
	m->basename = strpool__intern(&s->pool, base, blen);
	if (!m->basename)
		goto err;
	m->next = (struct module *)(uintptr_t)head;
	if (u64map_put(&s->modules, key, (uint64_t)(uintptr_t)m))
		goto err;
	s->mods[s->nmods++] = m;
	return m;
err:
	free(m->path);
	free(m);
	return NULL;
}

void module_load(struct symbolizer *s, struct module *m)
{
	if (elf_image__load(&m->img, m->path, &s->pool)) {
		m->state = MOD_FAILED;
		s->stats.modules_failed++;
	} else {
		m->state = MOD_LOADED;
		s->stats.modules_loaded++;
	}
}

static void module_free(struct module *m)
{
	elf_image__free(&m->img);
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

static int make_map(struct symbolizer *s, struct map *m, uint64_t start, uint64_t end,
		    uint64_t pgoff, uint32_t prot, const char *name)
{
	*m = (struct map){ .start = start, .end = end, .pgoff = pgoff, .prot = prot };
	if (!strcmp(name, vdso_name)) {
		m->type = MAP_T_VDSO;
	} else if (is_anon_name(name)) {
		m->type = MAP_T_ANON;
	} else {
		m->type = MAP_T_FILE;
		m->mod = module_get(s, name);
		if (!m->mod)
			return -ENOMEM;
	}
	return 0;
}

struct symbolizer *symbolizer__new(void)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	u64map_init(&s->procs);
	u64map_init(&s->modules);
	strpool__init(&s->pool);
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
	kallsyms__free(&s->ksyms);
	strpool__free(&s->pool);
	free(s);
}

int symbolizer__load_kallsyms(struct symbolizer *s, const char *path)
{
	struct kallsyms k;
	int err;

	if (!s || !path)
		return -EINVAL;
	err = kallsyms__load(&k, path, &s->pool);
	if (err)
		return err;
	/* names of the old table live in the pool, so frames already handed out stay valid */
	kallsyms__free(&s->ksyms);
	s->ksyms = k;
	return 0;
}

int symbolizer__mmap(struct symbolizer *s, uint32_t pid, uint64_t addr, uint64_t len,
		     uint64_t pgoff, uint32_t prot, const char *filename)
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
	err = make_map(s, &m, addr, end, pgoff, prot, filename ? filename : "");
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
	struct map *maps;
	size_t n, cap;
};

static int parse_maps_line(void *ctx, char *line, size_t len)
{
	struct maps_ctx *mc = ctx;
	uint64_t start, end, off;
	char perms[5];
	uint32_t prot = 0;
	struct map m;
	int n = -1, err;
	const char *name;

	(void)len;
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %*s %*s%n", &start, &end, perms,
		   &off, &n) != 4 ||
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
	err = make_map(mc->s, &m, start, end, off, prot, name);
	if (err)
		return err;
	if (grow_array((void **)&mc->maps, &mc->cap, mc->n + 1, sizeof(*mc->maps)))
		return -ENOMEM;
	mc->maps[mc->n++] = m;
	return 0;
}

static void proc_maps_fallback(struct symbolizer *s, struct proc *p)
{
	struct maps_ctx mc = { .s = s };
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

	if (kallsyms__lookup(&s->ksyms, addr, &name, &module))
		set_frame(out, name, module, FRAME_KERNEL);
	else
		set_frame(out, kernel_name, kernel_module, FRAME_KERNEL);
}

static void resolve_file(struct symbolizer *s, const struct map *m, uint64_t addr,
			 struct sym_frame *out)
{
	struct module *mod = m->mod;
	uint64_t off = addr - m->start + m->pgoff, vaddr;
	const char *name;

	if (mod->state == MOD_NEW)
		module_load(s, mod);
	set_frame(out, NULL, mod->basename, FRAME_USER);
	if (mod->state == MOD_LOADED && elf_image__vaddr(&mod->img, off, &vaddr)) {
		name = elf_image__lookup(&mod->img, vaddr);
		if (name) {
			out->name = name;
			return;
		}
		off = vaddr;
	}
	format_offset(out, mod->basename, off);
}

void symbolizer__resolve(struct symbolizer *s, uint32_t pid, uint64_t addr, bool kernel,
			 bool return_addr, struct sym_frame *out)
{
	struct proc *p;
	struct map *m = NULL;

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

	p = proc_find(s, pid);
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
	if (!m)
		return;
	switch (m->type) {
	case MAP_T_FILE:
		resolve_file(s, m, addr, out);
		break;
	case MAP_T_VDSO:
		set_frame(out, vdso_name, vdso_name, FRAME_USER);
		break;
	default:
		break;
	}
}

const struct symbolizer_stats *symbolizer__stats(const struct symbolizer *s)
{
	return &s->stats;
}

size_t symbolizer__resolve_inline(struct symbolizer *s, uint32_t pid, uint64_t addr, bool kernel,
				  bool return_addr, struct sym_frame *out, size_t max)
{
	if (!max)
		return 0;
	/* no inline information is read yet: one frame per address */
	symbolizer__resolve(s, pid, addr, kernel, return_addr, &out[0]);
	return 1;
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
