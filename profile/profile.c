/* SPDX-License-Identifier: MIT */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Interning maps store hash(key) -> id. Two keys can share a hash, so a map
 * entry is a hint: on a mismatch the next probe key (hash + 1, ...) is tried.
 * The chain ends at the first absent probe key.
 */
#define MAX_PROBES 64

struct profile *profile__new(void)
{
	struct profile *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->spool_fd = -1;
	u64map_init(&p->string_ids);
	u64map_init(&p->frame_ids);
	u64map_init(&p->stack_ids);
	u64map_init(&p->thread_ids);
	u64map_init(&p->proc_ids);
	p->file_version = PROFILE_VERSION;
	/* string 0 is "", stack 0 is the root */
	if (profile__string(p, "", 0) != 0 || profile__stack(p, 0, 0) != 0) {
		profile__free(p);
		return NULL;
	}
	return p;
}

void profile__free(struct profile *p)
{
	if (!p)
		return;
	free(p->pool);
	free(p->strings);
	free(p->frames);
	free(p->stacks);
	free(p->depths);
	free(p->ends);
	free(p->threads);
	free(p->samples);
	free(p->locs);
	free(p->hints);
	free(p->spill_dir);
	if (p->spool_fd >= 0)
		close(p->spool_fd);
	u64map_free(&p->string_ids);
	u64map_free(&p->frame_ids);
	u64map_free(&p->stack_ids);
	u64map_free(&p->thread_ids);
	u64map_free(&p->proc_ids);
	free(p->procs);
	free(p);
}

/* Find the slot key for `h` whose id satisfies eq(), or the first free one. */
typedef bool (*eq_fn)(const struct profile *p, uint64_t id, const void *key);

static int lookup(const struct u64map *m, uint64_t h, eq_fn eq, const struct profile *p,
		  const void *key, uint64_t *id, uint64_t *free_slot)
{
	for (int i = 0; i < MAX_PROBES; i++) {
		uint64_t k = (h + i) & ~(1ULL << 63), v;

		if (!u64map_get(m, k, &v)) {
			*free_slot = k;
			return 0;
		}
		if (eq(p, v, key)) {
			*id = v;
			return 1;
		}
	}
	return -ENOSPC;
}

struct str_key {
	const char *s;
	size_t len;
};

static bool str_eq(const struct profile *p, uint64_t id, const void *key)
{
	const struct str_key *k = key;
	const struct pf_string *s = &p->strings[id];

	return s->len == k->len && memcmp(p->pool + s->off, k->s, k->len) == 0;
}

int64_t profile__string(struct profile *p, const char *s, size_t len)
{
	struct str_key key = { s, len };
	uint64_t h = hash_bytes(s, len, 1), id, slot;
	size_t need;
	int r;

	r = lookup(&p->string_ids, h, str_eq, p, &key, &id, &slot);
	if (r < 0)
		return r;
	if (r)
		return (int64_t)id;
	if (p->nr_strings >= UINT32_MAX || add_overflows(p->pool_len, len + 1, &need))
		return -ENOMEM;
	if (grow_array((void **)&p->pool, &p->pool_cap, need, 1) ||
	    grow_array((void **)&p->strings, &p->cap_strings, p->nr_strings + 1,
		       sizeof(*p->strings)))
		return -ENOMEM;
	if (len)
		memcpy(p->pool + p->pool_len, s, len);
	p->pool[p->pool_len + len] = '\0';
	p->strings[p->nr_strings] = (struct pf_string){ .off = p->pool_len, .len = len };
	if (u64map_put(&p->string_ids, slot, p->nr_strings))
		return -ENOMEM;
	p->pool_len = need;
	return (int64_t)p->nr_strings++;
}

static bool frame_eq(const struct profile *p, uint64_t id, const void *key)
{
	return memcmp(&p->frames[id], key, sizeof(struct pf_frame)) == 0;
}

int64_t profile__frame(struct profile *p, uint32_t name, uint32_t module, enum frame_kind kind)
{
	struct pf_frame f = { .name = name, .module = module, .kind = kind };

	return profile__frame_full(p, &f);
}

int64_t profile__frame_full(struct profile *p, const struct pf_frame *in)
{
	struct pf_frame f = *in;
	uint64_t h, id, slot;
	int r;

	if (f.name >= p->nr_strings || f.module >= p->nr_strings || f.kind >= FRAME_KIND_MAX ||
	    f.file >= p->nr_strings || f.build_id >= p->nr_strings)
		return -EINVAL;
	h = hash_bytes(&f, sizeof(f), 2);
	r = lookup(&p->frame_ids, h, frame_eq, p, &f, &id, &slot);
	if (r < 0)
		return r;
	if (r)
		return (int64_t)id;
	if (p->nr_frames >= UINT32_MAX ||
	    grow_array((void **)&p->frames, &p->cap_frames, p->nr_frames + 1, sizeof(f)))
		return -ENOMEM;
	p->frames[p->nr_frames] = f;
	if (u64map_put(&p->frame_ids, slot, p->nr_frames))
		return -ENOMEM;
	return (int64_t)p->nr_frames++;
}

int64_t profile__frame_unique(struct profile *p, const struct pf_frame *f)
{
	if (f->name >= p->nr_strings || f->module >= p->nr_strings || f->kind >= FRAME_KIND_MAX ||
	    f->file >= p->nr_strings || f->build_id >= p->nr_strings)
		return -EINVAL;
	if (p->nr_frames >= UINT32_MAX ||
	    grow_array((void **)&p->frames, &p->cap_frames, p->nr_frames + 1, sizeof(*f)))
		return -ENOMEM;
	p->frames[p->nr_frames] = *f;
	return (int64_t)p->nr_frames++;
}

int64_t profile__frame_str(struct profile *p, const char *name, const char *module,
			   enum frame_kind kind)
{
	int64_t n = profile__string(p, name, strlen(name));
	int64_t m = module ? profile__string(p, module, strlen(module)) : 0;

	if (n < 0)
		return n;
	if (m < 0)
		return m;
	return profile__frame(p, (uint32_t)n, (uint32_t)m, kind);
}

static bool stack_eq(const struct profile *p, uint64_t id, const void *key)
{
	const struct pf_stack *k = key;

	return p->stacks[id].parent == k->parent && p->stacks[id].frame == k->frame;
}

bool profile__stack_is(const struct profile *p, uint32_t id, uint32_t parent, uint32_t frame)
{
	return id && id < p->nr_stacks && p->stacks[id].parent == parent &&
	       p->stacks[id].frame == frame;
}

int64_t profile__stack(struct profile *p, uint32_t parent, uint32_t frame)
{
	struct pf_stack st = { .parent = parent, .frame = frame };
	uint64_t h, id, slot;
	int r;

	/* the very first call creates the root (stack 0) */
	if (p->nr_stacks == 0) {
		if (grow_array((void **)&p->stacks, &p->cap_stacks, 1, sizeof(st)) ||
		    grow_array((void **)&p->depths, &p->cap_depths, 1, sizeof(*p->depths)) ||
		    grow_array((void **)&p->ends, &p->cap_ends, 1, sizeof(*p->ends)))
			return -ENOMEM;
		p->stacks[0] = (struct pf_stack){ 0, 0 };
		p->depths[0] = 0;
		p->ends[0] = STACK_END_UNKNOWN;
		p->nr_stacks = 1;
		return 0;
	}
	if (parent >= p->nr_stacks || frame >= p->nr_frames)
		return -EINVAL;
	h = hash_bytes(&st, sizeof(st), 3);
	r = lookup(&p->stack_ids, h, stack_eq, p, &st, &id, &slot);
	if (r < 0)
		return r;
	if (r)
		return (int64_t)id;
	if (p->nr_stacks >= UINT32_MAX ||
	    grow_array((void **)&p->stacks, &p->cap_stacks, p->nr_stacks + 1, sizeof(st)) ||
	    grow_array((void **)&p->depths, &p->cap_depths, p->nr_stacks + 1, sizeof(*p->depths)) ||
	    grow_array((void **)&p->ends, &p->cap_ends, p->nr_stacks + 1, sizeof(*p->ends)))
		return -ENOMEM;
	p->stacks[p->nr_stacks] = st;
	p->depths[p->nr_stacks] = p->depths[parent] + 1;
	p->ends[p->nr_stacks] = STACK_END_UNKNOWN;
	if (u64map_put(&p->stack_ids, slot, p->nr_stacks))
		return -ENOMEM;
	return (int64_t)p->nr_stacks++;
}

static bool thread_eq(const struct profile *p, uint64_t id, const void *key)
{
	return memcmp(&p->threads[id], key, sizeof(struct pf_thread)) == 0;
}

int64_t profile__thread(struct profile *p, uint32_t pid, uint32_t tid, uint32_t comm)
{
	return profile__thread_on(p, 0, pid, tid, comm);
}

int64_t profile__thread_on(struct profile *p, uint32_t host, uint32_t pid, uint32_t tid,
			   uint32_t comm)
{
	struct pf_thread t = { .pid = pid, .tid = tid, .comm = comm, .host = host };
	uint64_t h, id, slot;
	int r;

	if (comm >= p->nr_strings || host >= p->nr_strings)
		return -EINVAL;
	h = hash_bytes(&t, sizeof(t), 4);
	r = lookup(&p->thread_ids, h, thread_eq, p, &t, &id, &slot);
	if (r < 0)
		return r;
	if (r)
		return (int64_t)id;
	if (p->nr_threads >= UINT32_MAX ||
	    grow_array((void **)&p->threads, &p->cap_threads, p->nr_threads + 1, sizeof(t)))
		return -ENOMEM;
	p->threads[p->nr_threads] = t;
	if (u64map_put(&p->thread_ids, slot, p->nr_threads))
		return -ENOMEM;
	return (int64_t)p->nr_threads++;
}

uint32_t profile__thread_host(const struct profile *p, const struct pf_thread *t)
{
	return t->host ? t->host : p->meta.hostname;
}

/* The host's key: 0 for the profile's own, however it is named. */
static uint64_t proc_key(const struct profile *p, uint32_t host, uint32_t pid)
{
	if (host == p->meta.hostname)
		host = 0;
	return (uint64_t)host << 32 | pid;
}

int profile__set_process(struct profile *p, const struct pf_process *proc)
{
	uint64_t key, at;

	if (proc->host >= p->nr_strings || proc->launcher >= p->nr_strings ||
	    proc->cgroup >= p->nr_strings || proc->container >= p->nr_strings)
		return -EINVAL;
	key = proc_key(p, proc->host, proc->pid);
	if (u64map_get(&p->proc_ids, key, &at)) {
		p->procs[at] = *proc;
		return 0;
	}
	if (grow_array((void **)&p->procs, &p->cap_procs, p->nr_procs + 1, sizeof(*proc)) ||
	    u64map_put(&p->proc_ids, key, p->nr_procs))
		return -ENOMEM;
	p->procs[p->nr_procs++] = *proc;
	return 0;
}

size_t profile__nr_processes(const struct profile *p)
{
	return p->nr_procs;
}

const struct pf_process *profile__get_process(const struct profile *p, size_t i)
{
	return &p->procs[i];
}

const struct pf_process *profile__process(const struct profile *p, uint32_t host, uint32_t pid)
{
	uint64_t at;

	if (!p->nr_procs || !u64map_get(&p->proc_ids, proc_key(p, host, pid), &at))
		return NULL;
	return &p->procs[at];
}

const char *profile__container_label(const struct profile *p, const struct pf_process *pr)
{
	if (!pr)
		return NULL;
	if (pr->container)
		return profile__str(p, pr->container);
	if (pr->cgroup)
		return profile__str(p, pr->cgroup);
	return NULL;
}

const struct pf_process *profile__thread_process(const struct profile *p, const struct pf_thread *t)
{
	return profile__process(p, t->host, t->pid);
}

uint32_t profile__file_version(const struct profile *p)
{
	return p->file_version;
}

int profile__set_spill(struct profile *p, size_t threshold, const char *dir)
{
	char *d = NULL;

	if (dir && !(d = strdup(dir)))
		return -ENOMEM;
	free(p->spill_dir);
	p->spill_dir = d;
	p->spill_at = threshold;
	return 0;
}

uint64_t profile__nr_spilled(const struct profile *p)
{
	return p->nr_spilled;
}

/* An unlinked file, so that no exit path, not even a crash, leaves it behind. */
static int spool_open(struct profile *p)
{
	const char *dirs[] = { p->spill_dir, getenv("TMPDIR"), "/tmp" };
	int err = -ENOENT;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char *tmpl = NULL;
		int fd;

		if (!dirs[i] || !*dirs[i])
			continue;
		fd = open(dirs[i], O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			p->spool_fd = fd;
			return 0;
		}
		err = -errno;
		/* file systems without O_TMPFILE */
		if (asprintf(&tmpl, "%s/.dlflame-spool.XXXXXX", dirs[i]) < 0)
			return -ENOMEM;
		fd = mkostemp(tmpl, O_CLOEXEC);
		if (fd >= 0) {
			unlink(tmpl);
			free(tmpl);
			p->spool_fd = fd;
			return 0;
		}
		err = -errno;
		free(tmpl);
	}
	return err;
}

#define SPOOL_CHUNK 1024 /* samples per read or write */

/* Writes n encoded samples from buf as spilled samples [first, first + n). */
static int spool_write(struct profile *p, uint64_t first, const uint8_t *buf, size_t n)
{
	size_t len = n * SAMPLE_SIZE, done = 0;
	uint64_t off = first * SAMPLE_SIZE;

	while (done < len) {
		ssize_t w = pwrite(p->spool_fd, buf + done, len - done, (off_t)(off + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		done += (size_t)w;
	}
	return 0;
}

static int spill(struct profile *p)
{
	uint8_t *buf;
	int err = 0;

	if (p->spool_fd < 0 && (err = spool_open(p)))
		return err;
	buf = malloc(SPOOL_CHUNK * SAMPLE_SIZE);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < p->nr_samples && !err;) {
		size_t n = p->nr_samples - i < SPOOL_CHUNK ? p->nr_samples - i : SPOOL_CHUNK;

		for (size_t k = 0; k < n; k++)
			sample_encode(buf + k * SAMPLE_SIZE, &p->samples[i + k]);
		err = spool_write(p, p->nr_spilled + i, buf, n);
		i += n;
	}
	free(buf);
	if (err)
		return err;
	/* the array keeps its capacity: it is refilled up to the same threshold */
	p->nr_spilled += p->nr_samples;
	p->nr_samples = 0;
	return 0;
}

int spool_read(const struct profile *p, uint64_t first, uint8_t *buf, size_t n)
{
	size_t len = n * SAMPLE_SIZE, done = 0;
	uint64_t off = first * SAMPLE_SIZE;

	while (done < len) {
		ssize_t r = pread(p->spool_fd, buf + done, len - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		done += (size_t)r;
	}
	return 0;
}

int profile__add_sample(struct profile *p, const struct pf_sample *s)
{
	int err;

	if (s->stack >= p->nr_stacks || s->thread >= p->nr_threads || s->kind >= SAMPLE_KIND_MAX)
		return -EINVAL;
	if (p->spill_at && p->nr_samples >= p->spill_at && (err = spill(p)))
		return err;
	if (grow_array((void **)&p->samples, &p->cap_samples, p->nr_samples + 1, sizeof(*s)))
		return -ENOMEM;
	p->samples[p->nr_samples++] = *s;
	return 0;
}

size_t profile__nr_strings(const struct profile *p)
{
	return p->nr_strings;
}

size_t profile__nr_frames(const struct profile *p)
{
	return p->nr_frames;
}

size_t profile__nr_stacks(const struct profile *p)
{
	return p->nr_stacks;
}

size_t profile__nr_threads(const struct profile *p)
{
	return p->nr_threads;
}

size_t profile__nr_samples(const struct profile *p)
{
	return (size_t)p->nr_spilled + p->nr_samples;
}

const char *profile__str(const struct profile *p, uint32_t id)
{
	return p->pool + p->strings[id].off;
}

size_t profile__str_len(const struct profile *p, uint32_t id)
{
	return p->strings[id].len;
}

const struct pf_frame *profile__get_frame(const struct profile *p, uint32_t id)
{
	return &p->frames[id];
}

const struct pf_stack *profile__get_stack(const struct profile *p, uint32_t id)
{
	return &p->stacks[id];
}

const struct pf_thread *profile__get_thread(const struct profile *p, uint32_t id)
{
	return &p->threads[id];
}

const struct pf_sample *profile__get_sample(const struct profile *p, size_t i)
{
	return &p->samples[i - p->nr_spilled];
}

size_t profile__nr_locs(const struct profile *p)
{
	return p->nr_locs;
}

const struct pf_loc *profile__get_loc(const struct profile *p, size_t i)
{
	return i < p->nr_locs ? &p->locs[i] : NULL;
}

uint32_t profile__boot_id(const struct profile *p)
{
	return p->boot_id;
}

int profile__set_hints(struct profile *p, const struct pf_hint *h, size_t n)
{
	struct pf_hint *v = NULL;

	for (size_t i = 0; i < n; i++)
		if (h[i].module >= p->nr_strings || h[i].build_id >= p->nr_strings ||
		    h[i].path >= p->nr_strings || h[i].weight > h[i].total)
			return -EINVAL;
	if (n) {
		v = malloc(n * sizeof(*v));
		if (!v)
			return -ENOMEM;
		memcpy(v, h, n * sizeof(*v));
	}
	free(p->hints);
	p->hints = v;
	p->nr_hints = n;
	p->has_hints = true;
	return 0;
}

bool profile__hints(const struct profile *p, const struct pf_hint **h, size_t *n)
{
	*h = p->hints;
	*n = p->nr_hints;
	return p->has_hints;
}

uint32_t profile__stack_depth(const struct profile *p, uint32_t id)
{
	return p->depths[id];
}

int64_t profile__stack_frames(const struct profile *p, uint32_t stack, uint32_t **frames,
			      size_t *cap)
{
	size_t n = 0;

	if (stack >= p->nr_stacks)
		return -EINVAL;
	while (stack) {
		const struct pf_stack *st = &p->stacks[stack];

		/* interning creates parents first; anything else could loop */
		if (st->parent >= stack || st->frame >= p->nr_frames)
			return -EINVAL;
		if (grow_array((void **)frames, cap, n + 1, sizeof(**frames)))
			return -ENOMEM;
		(*frames)[n++] = st->frame;
		stack = st->parent;
	}
	for (size_t i = 0; i < n / 2; i++) {
		uint32_t tmp = (*frames)[i];

		(*frames)[i] = (*frames)[n - 1 - i];
		(*frames)[n - 1 - i] = tmp;
	}
	return (int64_t)n;
}

int profile__set_stack_end(struct profile *p, uint32_t stack, enum stack_end end)
{
	if (stack >= p->nr_stacks || (unsigned)end >= STACK_END_MAX)
		return -EINVAL;
	if (p->ends[stack] == STACK_END_UNKNOWN)
		p->ends[stack] = (uint8_t)end;
	return 0;
}

enum stack_end profile__stack_end(const struct profile *p, uint32_t id)
{
	return (enum stack_end)p->ends[id];
}

const char *profile__stack_end_name(enum stack_end end)
{
	static const char *const names[STACK_END_MAX] = {
		[STACK_END_UNKNOWN] = "not recorded",
		[STACK_END_COMPLETE] = "complete",
		[STACK_END_COPY] = "stack copy exhausted",
		[STACK_END_ERROR] = "unwind error",
		[STACK_END_DEPTH] = "depth limit",
		[STACK_END_JIT] = "JIT caller not recovered",
		[STACK_END_NO_USER] = "user stack not sampled",
		[STACK_END_NOT_SAMPLED] = "stack not sampled",
		[STACK_END_FP] = "frame pointers ended",
		[STACK_END_PY_CHANGED] = "Python frames changed before read",
		[STACK_END_PY_UNREAD] = "Python frames not read",
		[STACK_END_NOT_ENTRY] = "stopped short of a thread entry",
		[STACK_END_JIT_GUESSED] = "JIT preamble not read",
		[STACK_END_DROPPED] = "stack not kept (recorder behind)",
	};

	return (unsigned)end < STACK_END_MAX ? names[end] : "?";
}

struct pf_meta *profile__meta(struct profile *p)
{
	return &p->meta;
}

const struct pf_meta *profile__cmeta(const struct profile *p)
{
	return &p->meta;
}

bool profile__has_lines(const struct profile *p)
{
	for (size_t i = 0; i < p->nr_frames; i++)
		if (p->frames[i].file || p->frames[i].line)
			return true;
	return false;
}

/* Maps ids of `src` to ids of `dst`, interning lazily. */
struct relabel {
	const struct profile *src;
	struct profile *dst;
	int64_t *strs, *frames, *stacks, *threads;
	uint8_t *chunk; /* spilled samples read back */
	bool lines;
};

static int rl_sample(struct relabel *r, const struct pf_sample *in)
{
	struct pf_sample s = *in;

	s.stack = (uint32_t)r->stacks[s.stack];
	s.thread = (uint32_t)r->threads[s.thread];
	return profile__add_sample(r->dst, &s);
}

static int64_t rl_str(struct relabel *r, uint32_t id)
{
	if (r->strs[id] < 0)
		r->strs[id] = profile__string(r->dst, profile__str(r->src, id),
					      profile__str_len(r->src, id));
	return r->strs[id];
}

static int64_t rl_frame(struct relabel *r, uint32_t id)
{
	const struct pf_frame *f = &r->src->frames[id];
	struct pf_frame g = { .kind = f->kind };
	int64_t name, module, build_id;

	if (r->frames[id] >= 0)
		return r->frames[id];
	if (f->kind == FRAME_PYTHON && f->file) {
		/* qualname (file.py), or qualname (file.py:line) */
		const char *file = profile__str(r->src, f->file), *slash = strrchr(file, '/');
		char *label = NULL;
		int n = r->lines && f->line
				? asprintf(&label, "%s (%s:%u)", profile__str(r->src, f->name),
					   slash ? slash + 1 : file, f->line)
				: asprintf(&label, "%s (%s)", profile__str(r->src, f->name),
					   slash ? slash + 1 : file);
		if (n < 0)
			return -ENOMEM;
		name = profile__string(r->dst, label, (size_t)n);
		free(label);
	} else if (r->lines && f->file && f->line) {
		const char *file = profile__str(r->src, f->file), *slash = strrchr(file, '/');
		char *label = NULL;
		int n = asprintf(&label, "%s (%s:%u)", profile__str(r->src, f->name),
				 slash ? slash + 1 : file, f->line);
		if (n < 0)
			return -ENOMEM;
		name = profile__string(r->dst, label, (size_t)n);
		free(label);
	} else {
		name = rl_str(r, f->name);
	}
	module = rl_str(r, f->module);
	build_id = rl_str(r, f->build_id);
	if (name < 0 || module < 0 || build_id < 0)
		return -ENOMEM;
	g.name = (uint32_t)name;
	g.module = (uint32_t)module;
	g.build_id = (uint32_t)build_id;
	r->frames[id] = profile__frame_full(r->dst, &g);
	return r->frames[id];
}

struct profile *profile__relabel(const struct profile *p, bool with_lines)
{
	struct relabel r = { .src = p, .lines = with_lines };
	struct profile *q = profile__new(), *ret = NULL;

	if (!q)
		return NULL;
	r.dst = q;
	r.strs = malloc(p->nr_strings * sizeof(int64_t));
	r.frames = malloc((p->nr_frames + 1) * sizeof(int64_t));
	r.stacks = malloc(p->nr_stacks * sizeof(int64_t));
	r.threads = malloc((p->nr_threads + 1) * sizeof(int64_t));
	if (!r.strs || !r.frames || !r.stacks || !r.threads)
		goto out;
	memset(r.strs, 0xff, p->nr_strings * sizeof(int64_t));
	memset(r.frames, 0xff, (p->nr_frames + 1) * sizeof(int64_t));
	memset(r.stacks, 0xff, p->nr_stacks * sizeof(int64_t));
	r.strs[0] = 0;
	r.stacks[0] = 0;
	/* a stack's parent always has a smaller id, so one pass in id order maps every stack */
	for (size_t i = 1; i < p->nr_stacks; i++) {
		int64_t fr = rl_frame(&r, p->stacks[i].frame);
		if (fr < 0)
			goto out;
		r.stacks[i] =
			profile__stack(q, (uint32_t)r.stacks[p->stacks[i].parent], (uint32_t)fr);
		if (r.stacks[i] < 0)
			goto out;
		profile__set_stack_end(q, (uint32_t)r.stacks[i], p->ends[i]);
	}
	for (size_t i = 0; i < p->nr_threads; i++) {
		const struct pf_thread *t = &p->threads[i];
		int64_t comm = rl_str(&r, t->comm), host = rl_str(&r, t->host);
		if (comm < 0 || host < 0)
			goto out;
		r.threads[i] =
			profile__thread_on(q, (uint32_t)host, t->pid, t->tid, (uint32_t)comm);
		if (r.threads[i] < 0)
			goto out;
	}
	for (uint64_t i = 0; i < p->nr_spilled; i += SPOOL_CHUNK) {
		size_t n = p->nr_spilled - i < SPOOL_CHUNK ? p->nr_spilled - i : SPOOL_CHUNK;

		if (!r.chunk && !(r.chunk = malloc(SPOOL_CHUNK * SAMPLE_SIZE)))
			goto out;
		if (spool_read(p, i, r.chunk, n))
			goto out;
		for (size_t k = 0; k < n; k++) {
			struct pf_sample s;

			sample_decode(r.chunk + k * SAMPLE_SIZE, &s);
			if (rl_sample(&r, &s))
				goto out;
		}
	}
	for (size_t i = 0; i < p->nr_samples; i++)
		if (rl_sample(&r, &p->samples[i]))
			goto out;
	q->meta = p->meta;
	int64_t ev = rl_str(&r, p->meta.event), cmd = rl_str(&r, p->meta.command),
		host = rl_str(&r, p->meta.hostname);
	if (ev < 0 || cmd < 0 || host < 0)
		goto out;
	q->meta.event = (uint32_t)ev;
	q->meta.command = (uint32_t)cmd;
	q->meta.hostname = (uint32_t)host;
	for (size_t i = 0; i < p->nr_procs; i++) {
		struct pf_process pr = p->procs[i];
		int64_t h = rl_str(&r, pr.host), l = rl_str(&r, pr.launcher),
			cg = rl_str(&r, pr.cgroup), ct = rl_str(&r, pr.container);

		if (h < 0 || l < 0 || cg < 0 || ct < 0)
			goto out;
		pr.host = (uint32_t)h;
		pr.launcher = (uint32_t)l;
		pr.cgroup = (uint32_t)cg;
		pr.container = (uint32_t)ct;
		if (profile__set_process(q, &pr))
			goto out;
	}
	ret = q;
	q = NULL;
out:
	free(r.strs);
	free(r.frames);
	free(r.stacks);
	free(r.threads);
	free(r.chunk);
	profile__free(q);
	return ret;
}

int profile__foreach_sample(const struct profile *p, profile_sample_fn fn, void *ctx)
{
	uint8_t *buf = NULL;
	int err = 0;

	for (uint64_t i = 0; i < p->nr_spilled && !err; i += SPOOL_CHUNK) {
		size_t n = p->nr_spilled - i < SPOOL_CHUNK ? p->nr_spilled - i : SPOOL_CHUNK;

		if (!buf && !(buf = malloc(SPOOL_CHUNK * SAMPLE_SIZE)))
			return -ENOMEM;
		err = spool_read(p, i, buf, n);
		for (size_t k = 0; k < n && !err; k++) {
			struct pf_sample s;

			sample_decode(buf + k * SAMPLE_SIZE, &s);
			err = fn(ctx, &s);
		}
	}
	free(buf);
	for (size_t i = 0; i < p->nr_samples && !err; i++)
		err = fn(ctx, &p->samples[i]);
	return err;
}

/* ---- replacing frames by chains ---- */

#define EXPAND_MAX 256 /* frames one frame may become */

struct expand {
	uint32_t *off, *len; /* per old frame: its chain in chain[], len 0 until made */
	uint32_t *chain;
	size_t nchain, cap_chain;
	int64_t *newid; /* old frame id (chains may name new ones) -> id after compaction */
	uint32_t *smap; /* old stack id -> new stack id */
};

static int ex_chain(struct profile *p, struct expand *x, uint32_t frame, profile_expand_fn fn,
		    void *ctx)
{
	uint32_t out[EXPAND_MAX];
	int n;

	if (x->len[frame])
		return 0;
	n = fn(ctx, frame, out, EXPAND_MAX);
	if (n < 0)
		return n;
	if (n < 1 || n > EXPAND_MAX)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (out[i] >= p->nr_frames)
			return -EINVAL;
	if (grow_array((void **)&x->chain, &x->cap_chain, x->nchain + (size_t)n, sizeof(*x->chain)))
		return -ENOMEM;
	memcpy(x->chain + x->nchain, out, (size_t)n * sizeof(*out));
	x->off[frame] = (uint32_t)x->nchain;
	x->len[frame] = (uint32_t)n;
	x->nchain += (size_t)n;
	return 0;
}

/* Every sample, spilled or in memory, to its stack's new id. */
static int ex_samples(struct profile *p, const uint32_t *smap)
{
	uint8_t *buf = NULL;
	int err = 0;

	for (uint64_t i = 0; i < p->nr_spilled && !err; i += SPOOL_CHUNK) {
		size_t n = p->nr_spilled - i < SPOOL_CHUNK ? p->nr_spilled - i : SPOOL_CHUNK;

		if (!buf && !(buf = malloc(SPOOL_CHUNK * SAMPLE_SIZE)))
			return -ENOMEM;
		err = spool_read(p, i, buf, n);
		for (size_t k = 0; k < n && !err; k++) {
			struct pf_sample s;

			sample_decode(buf + k * SAMPLE_SIZE, &s);
			s.stack = smap[s.stack];
			sample_encode(buf + k * SAMPLE_SIZE, &s);
		}
		if (!err)
			err = spool_write(p, i, buf, n);
	}
	free(buf);
	for (size_t i = 0; i < p->nr_samples; i++)
		p->samples[i].stack = smap[p->samples[i].stack];
	return err;
}

/* The frame and stack tables, set aside while new ones are built. */
struct tables {
	struct pf_frame *frames;
	size_t nr_frames, cap_frames;
	struct pf_stack *stacks;
	uint32_t *depths;
	uint8_t *ends;
	size_t nr_stacks, cap_stacks, cap_depths, cap_ends;
	struct u64map frame_ids, stack_ids;
};

static void tables_take(struct tables *t, struct profile *p)
{
	*t = (struct tables){ .frames = p->frames,
			      .nr_frames = p->nr_frames,
			      .cap_frames = p->cap_frames,
			      .stacks = p->stacks,
			      .depths = p->depths,
			      .ends = p->ends,
			      .nr_stacks = p->nr_stacks,
			      .cap_stacks = p->cap_stacks,
			      .cap_depths = p->cap_depths,
			      .cap_ends = p->cap_ends,
			      .frame_ids = p->frame_ids,
			      .stack_ids = p->stack_ids };
	p->frames = NULL;
	p->stacks = NULL;
	p->depths = NULL;
	p->ends = NULL;
	p->nr_frames = p->cap_frames = p->nr_stacks = p->cap_stacks = p->cap_depths = 0;
	p->cap_ends = 0;
	u64map_init(&p->frame_ids);
	u64map_init(&p->stack_ids);
}

static void tables_free(struct tables *t)
{
	free(t->frames);
	free(t->stacks);
	free(t->depths);
	free(t->ends);
	u64map_free(&t->frame_ids);
	u64map_free(&t->stack_ids);
}

/* p gets t back; what p had is freed. */
static void tables_restore(struct profile *p, struct tables *t)
{
	struct tables cur;

	tables_take(&cur, p);
	tables_free(&cur);
	p->frames = t->frames;
	p->nr_frames = t->nr_frames;
	p->cap_frames = t->cap_frames;
	p->stacks = t->stacks;
	p->depths = t->depths;
	p->ends = t->ends;
	p->nr_stacks = t->nr_stacks;
	p->cap_stacks = t->cap_stacks;
	p->cap_depths = t->cap_depths;
	p->cap_ends = t->cap_ends;
	u64map_free(&p->frame_ids);
	u64map_free(&p->stack_ids);
	p->frame_ids = t->frame_ids;
	p->stack_ids = t->stack_ids;
}

/* New frame and stack tables from the chains, into p (its old ones are in old). */
static int ex_build(struct profile *p, struct expand *x, const struct tables *old, size_t ns)
{
	for (size_t i = 0; i < old->nr_frames; i++) {
		if (x->newid[i] < 0)
			continue;
		x->newid[i] = profile__frame_full(p, &old->frames[i]);
		if (x->newid[i] < 0)
			return (int)x->newid[i];
	}
	if (profile__stack(p, 0, 0) != 0)
		return -ENOMEM;
	/* parents have smaller ids, so one pass in id order maps each */
	for (size_t i = 1; i < ns; i++) {
		uint32_t f = old->stacks[i].frame;
		int64_t at = x->smap[old->stacks[i].parent];
		bool cut = false;

		for (uint32_t k = 0; k < x->len[f]; k++) {
			/* inline levels past the deepest a profile holds are left out */
			if (p->depths[at] >= PROFILE_MAX_DEPTH) {
				cut = true;
				break;
			}
			at = profile__stack(p, (uint32_t)at,
					    (uint32_t)x->newid[x->chain[x->off[f] + k]]);
			if (at < 0)
				return (int)at;
		}
		x->smap[i] = (uint32_t)at;
		profile__set_stack_end(p, (uint32_t)at, cut ? STACK_END_DEPTH : old->ends[i]);
	}
	return 0;
}

int profile__expand_frames(struct profile *p, profile_expand_fn fn, void *ctx)
{
	struct expand x = { 0 };
	struct tables old;
	size_t nf = p->nr_frames, ns = p->nr_stacks;
	int err = -ENOMEM;

	if (!fn)
		return -EINVAL;
	x.off = calloc(nf + 1, sizeof(*x.off));
	x.len = calloc(nf + 1, sizeof(*x.len));
	x.smap = calloc(ns + 1, sizeof(*x.smap));
	if (!x.off || !x.len || !x.smap)
		goto out;
	/* the chains of the frames in use, while every old id still means what it did */
	for (size_t i = 1; i < ns; i++)
		if ((err = ex_chain(p, &x, p->stacks[i].frame, fn, ctx)))
			goto out;
	/* the frames some chain uses are kept, in their old order */
	x.newid = malloc((p->nr_frames + 1) * sizeof(*x.newid));
	if (!x.newid) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < p->nr_frames; i++)
		x.newid[i] = -1;
	for (size_t i = 0; i < x.nchain; i++)
		x.newid[x.chain[i]] = 0;

	tables_take(&old, p);
	err = ex_build(p, &x, &old, ns);
	if (err) {
		tables_restore(p, &old); /* the profile is as it was */
		goto out;
	}
	tables_free(&old);
	/* past this point an I/O error leaves samples of both numberings */
	err = ex_samples(p, x.smap);
out:
	free(x.off);
	free(x.len);
	free(x.chain);
	free(x.newid);
	free(x.smap);
	return err;
}
