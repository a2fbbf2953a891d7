/* SPDX-License-Identifier: MIT */
/*
 * Process address spaces: each process is a sorted array of disjoint
 * mappings, kept the way the kernel keeps its VMAs (a new mapping replaces
 * whatever it overlaps), with /proc/PID/maps read (rate-limited) for
 * addresses that no record announced.
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

/* /proc/PID/maps: lines are at most PATH_MAX plus ~80 bytes of fields. */
#define MAPS_LINE_MAX 8192
#define MAPS_MAX_BYTES (64ull << 20)
/* Re-read /proc/PID/maps after this many misses, doubling while it finds
 * nothing new, so that garbage addresses cannot make us read it often. */
#define FALLBACK_INTERVAL 100
#define FALLBACK_INTERVAL_MAX 25600

static const char vdso_name[] = "[vdso]";

/* symbolizer__maps_gen: bumped wherever a process's mappings change */
static uint64_t maps_gen = 1;

static void maps_changed(void)
{
	__atomic_add_fetch(&maps_gen, 1, __ATOMIC_RELAXED);
}

uint64_t symbolizer__maps_gen(void)
{
	return __atomic_load_n(&maps_gen, __ATOMIC_RELAXED);
}

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
	p->root_fd = -1;
	p->interval = FALLBACK_INTERVAL;
	p->next_fallback = 1;
	if (u64map_put(&s->procs, pid, (uint64_t)(uintptr_t)p)) {
		free(p);
		return NULL;
	}
	return p;
}

/* Let go of the mappings array: freed if no other process shares it. */
static void maps_release(struct proc *p)
{
	maps_changed();
	if (p->refs && --*p->refs) {
		p->maps = NULL; /* still another's */
	} else {
		free(p->refs);
		free(p->maps);
	}
	p->refs = NULL;
	p->maps = NULL;
	p->n = p->cap = 0;
}

/* Before changing the mappings: a shared array is copied, or taken over by the last user. */
static int maps_own(struct proc *p)
{
	struct map *copy;

	maps_changed(); /* its callers change the mappings next */

	if (!p->refs)
		return 0;
	if (*p->refs == 1) {
		free(p->refs);
		p->refs = NULL;
		return 0;
	}
	copy = malloc((p->n ? p->n : 1) * sizeof(*copy));
	if (!copy)
		return -ENOMEM;
	memcpy(copy, p->maps, p->n * sizeof(*copy));
	--*p->refs;
	p->refs = NULL;
	p->maps = copy;
	p->cap = p->n ? p->n : 1;
	return 0;
}

int proc_share(struct proc *child, struct proc *parent)
{
	maps_changed();
	if (child == parent)
		return 0;
	proc_reset(child);
	if (!parent->n)
		return 0;
	if (!parent->refs) {
		parent->refs = malloc(sizeof(*parent->refs));
		if (!parent->refs)
			return -ENOMEM;
		*parent->refs = 1;
	}
	++*parent->refs;
	child->refs = parent->refs;
	child->maps = parent->maps;
	child->n = parent->n;
	child->cap = parent->n;
	return 0;
}

void proc_free(struct proc *p)
{
	if (!p)
		return;
	maps_changed();
	maps_release(p);
	free(p);
}

void proc_reset(struct proc *p)
{
	maps_changed();
	if (p->refs)
		maps_release(p);
	p->n = 0;
	p->last = 0;
	p->root_known = false; /* chroot(1) execs its command in the new root */
	p->misses = 0;
	p->next_fallback = 1;
	p->interval = FALLBACK_INTERVAL;
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
int proc_insert(struct proc *p, const struct map *m)
{
	size_t i = first_end_above(p, m->start), j = i, k, count, nn;
	struct map left, right;
	bool has_left = false, has_right = false;

	if (maps_own(p))
		return -ENOMEM;
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
	if (maps_own(p)) {
		free(pieces);
		return -ENOMEM;
	}
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

/* The root pid sees, looked up once per image (at its first file mapping). */
static int proc_root(struct symbolizer *s, uint32_t pid)
{
	struct proc *p = proc_get(s, pid);

	if (!p)
		return root_of_pid(s, pid);
	if (!p->root_known) {
		p->root_fd = root_of_pid(s, pid);
		p->root_known = true;
	}
	return p->root_fd;
}

int make_map(struct symbolizer *s, struct map *m, uint32_t pid, uint64_t start, uint64_t end,
	     uint64_t pgoff, uint32_t prot, const char *name, const struct sym_file_id *id)
{
	*m = (struct map){ .start = start, .end = end, .pgoff = pgoff, .prot = prot };
	if (!strcmp(name, vdso_name)) {
		m->type = MAP_T_VDSO;
	} else if (is_anon_name(name)) {
		m->type = MAP_T_ANON;
	} else {
		m->type = MAP_T_FILE;
		m->mod = module_for_mapping(s, pid, proc_root(s, pid), start, end, prot, name, id);
		if (!m->mod)
			return -ENOMEM;
	}
	return 0;
}

/* ---- /proc/PID/maps fallback ---- */

struct maps_ctx {
	struct symbolizer *s;
	uint32_t pid;
	/*
	 * /proc/PID/maps names files as we see them: a chrooted process's
	 * under its root's path ("/var/lib/.../rootfs/usr/bin/python3"). Cut
	 * off, they are named as the process (and its MMAP2 records) names them.
	 */
	char root[PATH_MAX];
	size_t root_len; /* 0: the same root as ours */
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
	if (mc->root_len && !strncmp(name, mc->root, mc->root_len) && name[mc->root_len] == '/')
		name += mc->root_len;
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
	if (proc_root(s, p->pid) >= 0) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%" PRIu32 "/root", p->pid);
		n = readlink(path, mc.root, sizeof(mc.root) - 1);
		/* "/" or unreadable: nothing to cut */
		if (n > 1 && mc.root[0] == '/') {
			mc.root[n] = '\0';
			mc.root_len = (size_t)n;
		}
	}
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

/*
 * The mapping of a user address, reading /proc/PID/maps (rate-limited) on a
 * miss; *pp is the process (NULL when unknown and not created).
 */
struct map *find_map(struct symbolizer *s, uint32_t pid, uint64_t addr, struct proc **pp)
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
