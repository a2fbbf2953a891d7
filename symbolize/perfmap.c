/* SPDX-License-Identifier: MIT */
/*
 * perf-map files: /tmp/perf-PID.map, one JIT symbol a line,
 * "<hex start> <hex size> <name>", written by oneDNN (ONEDNN_JIT_PROFILE=2),
 * the JVM's perf-map-agent, V8, LuaJIT and others.
 *
 * The file belongs to the target and may be anything: it is read only when
 * it is a regular file owned by the target's user or root and not writable
 * by others, with bounded bytes, line length and entry count. It grows while
 * the process runs (oneDNN writes GEMM kernels at the first GEMM call), so it
 * is re-read from where the last read stopped; what was read is kept after
 * the file or the process is gone.
 *
 * Overlaps: names are not unique and ranges may nest (Winograd kernels
 * register sub-ranges of one buffer). An address is named by the smallest
 * entry containing it; among entries of equal size, by the one read last
 * (freed code memory reused for another kernel). The winner of every range
 * is computed once per read, so a lookup is one binary search.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbolize/internal.h"

#define PERFMAP_LINE_MAX 4096
#define PERFMAP_BUF (64u << 10)
/* over all reads of one process: a file rewritten forever cannot grow us */
#define PERFMAP_MAX_BYTES (4 * PERFMAP_MAX_FILE)
#define PERFMAP_MAX_ENTRIES (1u << 18)
/* no JIT function is this large; a huge range would shadow everything */
#define PERFMAP_MAX_SYMBOL (1ull << 30)
#define STALE_SLACK_NS 2000000000ull

static const char jit_module[] = "[JIT]";

struct perfmap *perfmap__get(struct proc *p)
{
	if (!p->perfmap)
		p->perfmap = calloc(1, sizeof(*p->perfmap));
	return p->perfmap;
}

void perfmap__free(struct perfmap *pm)
{
	if (!pm)
		return;
	free(pm->ents);
	free(pm->segs);
	free(pm);
}

/* ---- parsing ---- */

/* 1 to 16 hex digits, an optional 0x; *p is left after them. */
static bool parse_hex(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (;; s++, n++) {
		unsigned d;

		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (*s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (*s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			break;
		if (n == 16)
			return false;
		v = v << 4 | d;
	}
	if (!n)
		return false;
	*p = s;
	*out = v;
	return true;
}

static bool skip_blanks(const char **p)
{
	const char *s = *p;

	while (*s == ' ' || *s == '\t')
		s++;
	if (s == *p)
		return false;
	*p = s;
	return true;
}

/* A line without its newline; false when it is malformed. */
static bool parse_line(const char *line, size_t len, uint64_t *start, uint64_t *end,
		       const char **name, size_t *name_len)
{
	const char *p = line;
	uint64_t size;

	if (memchr(line, '\0', len))
		return false;
	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (!parse_hex(&p, start) || !skip_blanks(&p) || !parse_hex(&p, &size) || !skip_blanks(&p))
		return false;
	if (p >= line + len)
		return false;
	if (!size || size > PERFMAP_MAX_SYMBOL || __builtin_add_overflow(*start, size, end))
		return false;
	*name = p;
	*name_len = (size_t)(line + len - p);
	if (*name_len > SYM_NAME_MAX)
		*name_len = SYM_NAME_MAX;
	return true;
}

struct read_ctx {
	struct perfmap *pm;
	struct strpool *pool;
	struct perfmap_stats *st;
	size_t added;
};

static int add_line(struct read_ctx *rc, const char *line, size_t len)
{
	struct perfmap *pm = rc->pm;
	uint64_t start, end;
	const char *name;
	size_t nlen;

	if (!len)
		return 0;
	/* entries past the cap are not kept: counted with the malformed ones */
	if (!parse_line(line, len, &start, &end, &name, &nlen) ||
	    pm->nents >= PERFMAP_MAX_ENTRIES) {
		rc->st->malformed_lines++;
		return 0;
	}
	if (grow_array((void **)&pm->ents, &pm->ents_cap, pm->nents + 1, sizeof(*pm->ents)))
		return -ENOMEM;
	name = strpool__intern(rc->pool, name, nlen);
	if (!name)
		return -ENOMEM;
	pm->ents[pm->nents++] = (struct perfmap_entry){
		.start = start, .end = end, .code = start, .name = name, .seq = pm->seq++
	};
	rc->st->entries++;
	rc->added++;
	return 0;
}

/* ---- the winner of every range ---- */

static int cmp_start(const void *a, const void *b)
{
	const struct perfmap_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* true if a names an address that both cover, rather than b */
static bool beats(const struct perfmap_entry *a, const struct perfmap_entry *b)
{
	uint64_t sa = a->end - a->start, sb = b->end - b->start;

	if (sa != sb)
		return sa < sb;
	return a->seq > b->seq;
}

static void heap_push(const struct perfmap_entry **h, size_t *n, const struct perfmap_entry *e)
{
	size_t i = (*n)++;

	while (i && beats(e, h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = e;
}

static void heap_pop(const struct perfmap_entry **h, size_t *n)
{
	const struct perfmap_entry *last = h[--(*n)];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && beats(h[c + 1], h[c]))
			c++;
		if (!beats(h[c], last))
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = last;
}

/*
 * Sweep the boundaries left to right with the entries that cover the current
 * point in a heap ordered by beats(); entries that ended are dropped when
 * they reach the top.
 */
static int rebuild(struct perfmap *pm)
{
	size_t n = pm->nents, npts = 0, nheap = 0, nsegs = 0, j = 0;
	const struct perfmap_entry **heap = NULL;
	struct perfmap_entry *segs = NULL;
	uint64_t *pts = NULL;
	int err = -ENOMEM;

	qsort(pm->ents, n, sizeof(*pm->ents), cmp_start);
	pts = malloc(2 * n * sizeof(*pts));
	heap = malloc(n * sizeof(*heap));
	segs = malloc(2 * n * sizeof(*segs));
	if (!pts || !heap || !segs)
		goto out;
	for (size_t i = 0; i < n; i++) {
		pts[2 * i] = pm->ents[i].start;
		pts[2 * i + 1] = pm->ents[i].end;
	}
	qsort(pts, 2 * n, sizeof(*pts), cmp_u64);
	for (size_t i = 0; i < 2 * n; i++) {
		if (!npts || pts[npts - 1] != pts[i])
			pts[npts++] = pts[i];
	}
	for (size_t k = 0; k + 1 < npts; k++) {
		uint64_t x = pts[k];
		const struct perfmap_entry *top;

		while (j < n && pm->ents[j].start <= x)
			heap_push(heap, &nheap, &pm->ents[j++]);
		while (nheap && heap[0]->end <= x)
			heap_pop(heap, &nheap);
		if (!nheap)
			continue;
		top = heap[0];
		if (nsegs && segs[nsegs - 1].end == x && segs[nsegs - 1].seq == top->seq) {
			segs[nsegs - 1].end = pts[k + 1];
			continue;
		}
		segs[nsegs] = *top;
		segs[nsegs].start = x;
		segs[nsegs].end = pts[k + 1];
		nsegs++;
	}
	free(pm->segs);
	pm->segs = segs;
	pm->nsegs = nsegs;
	segs = NULL;
	err = 0;
out:
	free(segs);
	free(heap);
	free(pts);
	return err;
}

const struct perfmap_entry *perfmap__find(const struct perfmap *pm, uint64_t addr)
{
	size_t lo = 0, hi;

	if (!pm)
		return NULL;
	hi = pm->nsegs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pm->segs[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == pm->nsegs || pm->segs[lo].start > addr)
		return NULL;
	return &pm->segs[lo];
}

/* ---- reading ---- */

static bool file_ok(const struct stat *st, uid_t uid)
{
	return S_ISREG(st->st_mode) && (st->st_uid == uid || st->st_uid == 0) &&
	       !(st->st_mode & S_IWOTH) && (uint64_t)st->st_size <= PERFMAP_MAX_FILE;
}

/* Read [start, limit) of fd; whole lines only. Returns the offset after the last one. */
static int read_from(struct read_ctx *rc, int fd, uint64_t start, uint64_t limit, uint64_t *done)
{
	char *buf = malloc(PERFMAP_BUF);
	uint64_t pos = start, line_off = start;
	size_t have = 0;
	bool overlong = rc->pm->skip_line;
	int err = 0;

	*done = start;
	if (!buf)
		return -ENOMEM;
	while (pos < limit) {
		size_t want = PERFMAP_BUF - have, at = 0;
		ssize_t r;
		char *nl;

		if (want > limit - pos)
			want = (size_t)(limit - pos);
		r = pread(fd, buf + have, want, (off_t)pos);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			break;
		}
		if (r == 0)
			break;
		pos += (uint64_t)r;
		have += (size_t)r;
		while ((nl = memchr(buf + at, '\n', have - at))) {
			size_t len = (size_t)(nl - (buf + at));

			if (overlong)
				overlong = false;
			else
				err = add_line(rc, buf + at, len);
			if (err)
				goto out;
			at += len + 1;
			line_off += len + 1;
		}
		if (have - at > PERFMAP_LINE_MAX) {
			/* longer than any line we accept: drop it up to its newline */
			if (!overlong)
				rc->st->malformed_lines++;
			overlong = true;
			line_off += have - at;
			at = have;
		}
		memmove(buf, buf + at, have - at);
		have -= at;
	}
out:
	free(buf);
	/* a last line without its newline may still be being written: read it next time */
	*done = line_off;
	rc->pm->skip_line = overlong;
	return err;
}

/* Whether the bytes before pm->off are still the ones read: the file was only appended to. */
static bool same_tail(const struct perfmap *pm, int fd)
{
	uint8_t buf[sizeof(pm->tail)];
	ssize_t got;

	/* no tail kept (a read cut short: the file shrank meanwhile): only offset 0 is known */
	if (!pm->tail_len)
		return pm->off == 0;
	if (pm->tail_len > sizeof(buf) || pm->off < pm->tail_len)
		return false;
	do
		got = pread(fd, buf, pm->tail_len, (off_t)(pm->off - pm->tail_len));
	while (got < 0 && errno == EINTR);
	return got == (ssize_t)pm->tail_len && !memcmp(buf, pm->tail, pm->tail_len);
}

/* Remember the bytes before pm->off (see same_tail). */
static void keep_tail(struct perfmap *pm, int fd)
{
	size_t len = pm->off < sizeof(pm->tail) ? (size_t)pm->off : sizeof(pm->tail);
	ssize_t got;

	do
		got = pread(fd, pm->tail, len, (off_t)(pm->off - len));
	while (got < 0 && errno == EINTR);
	pm->tail_len = got == (ssize_t)len ? (uint8_t)len : 0;
}

int perfmap__read(struct perfmap *pm, const char *path, uid_t uid, struct strpool *pool,
		  struct perfmap_stats *st)
{
	return perfmap__read_since(pm, path, uid, 0, pool, st);
}

int perfmap__read_since(struct perfmap *pm, const char *path, uid_t uid, uint64_t not_before,
			struct strpool *pool, struct perfmap_stats *st)
{
	struct read_ctx rc = { .pm = pm, .pool = pool, .st = st };
	struct stat lst, fst;
	uint64_t start = 0, limit, done = 0, mtime, before = pm ? pm->off : 0;
	int fd, err;

	if (!pm || !path || !pool || !st)
		return -EINVAL;
	if (lstat(path, &lst))
		return -errno;
	/* checked before opening: opening a FIFO or a device has effects */
	if (!file_ok(&lst, uid))
		goto reject;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		if (errno == ELOOP)
			goto reject; /* replaced by a symlink since lstat */
		return -errno;
	}
	if (fstat(fd, &fst) || fst.st_dev != lst.st_dev || fst.st_ino != lst.st_ino ||
	    !file_ok(&fst, uid)) {
		close(fd);
		goto reject;
	}
	mtime = (uint64_t)fst.st_mtim.tv_sec * 1000000000ull + (uint64_t)fst.st_mtim.tv_nsec;
	if (not_before && fst.st_mtim.tv_sec >= 0 && mtime < not_before) {
		/* another process's: what is there now is never read, what comes after it is */
		pm->dev = (uint64_t)fst.st_dev;
		pm->ino = (uint64_t)fst.st_ino;
		pm->off = (uint64_t)fst.st_size;
		pm->skip_line = false;
		keep_tail(pm, fd);
		close(fd);
		pm->stale = true;
		st->stale_files++;
		return -ESTALE;
	}
	/*
	 * A stale file now newer and no longer: written over with the same
	 * bytes. Newer and longer with the same tail is taken for an append
	 * (CPython's); written over with the same first bytes and more, its
	 * first kernels would go unnamed: never named wrong.
	 */
	if (pm->dev == (uint64_t)fst.st_dev && pm->ino == (uint64_t)fst.st_ino &&
	    pm->off <= (uint64_t)fst.st_size && same_tail(pm, fd) &&
	    !(pm->stale && pm->off == (uint64_t)fst.st_size))
		start = pm->off;
	else
		pm->skip_line = false;
	pm->stale = false;
	limit = (uint64_t)fst.st_size;
	if (pm->bytes >= PERFMAP_MAX_BYTES)
		limit = start;
	else if (limit - start > PERFMAP_MAX_BYTES - pm->bytes)
		limit = start + (PERFMAP_MAX_BYTES - pm->bytes);
	err = read_from(&rc, fd, start, limit, &done);
	pm->dev = (uint64_t)fst.st_dev;
	pm->ino = (uint64_t)fst.st_ino;
	pm->off = done;
	/* nothing read, from where the last read stopped: the bytes before it are the same */
	if (done != start || start != before)
		keep_tail(pm, fd);
	close(fd);
	pm->bytes += done - start;
	st->reads++;
	if (rc.added) {
		int e = rebuild(pm);

		if (!err)
			err = e;
	}
	return err;
reject:
	pm->rejected = true;
	st->rejected_files++;
	return -EPERM;
}

const struct perfmap_entry *perfmap__lookup(struct symbolizer *s, struct proc *p, uint64_t addr)
{
	struct perfmap *pm = perfmap__get(p);
	const struct perfmap_entry *e;
	char path[96], dir[32];
	struct stat st;
	uint64_t now;

	if (!pm)
		return NULL;
	e = perfmap__find(pm, addr);
	if (e || pm->rejected)
		return e;
	now = monotonic_ns();
	if (pm->tried && now < pm->next_read_ns)
		return NULL;
	pm->tried = true;
	pm->next_read_ns = now + PERFMAP_REREAD_MS * 1000000ull;
	/* the target's owner; through its root, so that a container's /tmp is the one read */
	snprintf(dir, sizeof(dir), "/proc/%" PRIu32, p->pid);
	if (stat(dir, &st))
		return NULL;
	/* named by the pid the process sees: in a PID namespace of its own, not ours */
	if (!pm->nspid && proc_ns_tid(p->pid, 0, &pm->nspid))
		pm->nspid = p->pid;
	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/root/tmp/perf-%" PRIu32 ".map", p->pid,
		 pm->nspid);
	/*
	 * A file older than the process is an earlier process's with this pid
	 * (a DDP rank's pid, in a PID namespace run again: its JIT frames went
	 * unnamed, their callers guessed). The start is read once. The check
	 * allows STALE_SLACK_NS: an mtime comes from the coarse clock (a tick
	 * before the write), some file systems keep whole seconds, and the wall
	 * clock may have been stepped since the process started.
	 */
	if (!pm->started_read) {
		pm->started_read = true;
		if (proc_start_realtime(p->pid, &pm->started) || pm->started < STALE_SLACK_NS)
			pm->started = 0;
		else
			pm->started -= STALE_SLACK_NS;
	}
	/* a failed read keeps what earlier reads found; the stats count rejections */
	perfmap__read_since(pm, path, st.st_uid, pm->started, &s->pool, &s->stats.perfmap);
	return perfmap__find(pm, addr);
}

bool perfmap__resolve(struct symbolizer *s, struct proc *p, const struct map *m, uint64_t addr,
		      struct sym_frame *out)
{
	const struct perfmap_entry *e;

	if (!s || !p || !out)
		return false;
	if (m && (m->type != MAP_T_ANON || !(m->prot & PROT_EXEC)))
		return false;
	e = perfmap__lookup(s, p, addr);
	if (!e && !m)
		return false;
	out->name = e ? e->name : jit_module;
	out->module = jit_module;
	out->kind = FRAME_JIT;
	return true;
}
