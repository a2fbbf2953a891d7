/* SPDX-License-Identifier: MIT */
/* A sample's frames: interned in the profile, or placeholders named once recording is over. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOC_OFFSET_BITS 40

void frames_init(struct frames *fr, struct profile *prof, struct symbolizer *sym)
{
	memset(fr, 0, sizeof(*fr));
	fr->prof = prof;
	fr->sym = sym;
	u64map_init(&fr->loc_frames);
	u64map_init(&fr->kernel_frames);
	u64map_init(&fr->placeholders);
	u64map_init(&fr->tops);
}

void frames_exit(struct frames *fr)
{
	u64map_free(&fr->loc_frames);
	u64map_free(&fr->kernel_frames);
	u64map_free(&fr->placeholders);
	u64map_free(&fr->tops);
	free(fr->ids);
	free(fr->locs);
	for (size_t i = 0; i < FRAMES_MEMOS; i++)
		free(fr->memo[i].e);
	free(fr->addrs);
}

/* The profile's id of a name the symbolizer gave (0 for none). */
static int64_t string_id(struct frames *fr, const char *str)
{
	return str ? profile__string(fr->prof, str, strlen(str)) : 0;
}

static int64_t intern_frame(struct frames *fr, const struct sym_frame *sf)
{
	int64_t name = string_id(fr, sf->name), module = string_id(fr, sf->module);
	int64_t file = string_id(fr, sf->file), build_id = string_id(fr, sf->build_id);

	if (name < 0 || module < 0 || file < 0 || build_id < 0)
		return -ENOMEM;
	struct pf_frame f = {
		.name = (uint32_t)name,
		.module = (uint32_t)module,
		.kind = sf->kind,
		.file = (uint32_t)file,
		.line = sf->file ? sf->line : 0,
		.build_id = (uint32_t)build_id,
	};
	return profile__frame_full(fr->prof, &f);
}

int frames_push_id(struct frames *fr, int64_t id)
{
	if (id < 0)
		return (int)id;
	if (grow_array((void **)&fr->ids, &fr->cap, fr->n + 1, sizeof(*fr->ids)))
		return -ENOMEM;
	fr->ids[fr->n++] = (uint32_t)id;
	return 0;
}

int frames_push_named(struct frames *fr, const struct sym_frame *sf)
{
	return frames_push_id(fr, intern_frame(fr, sf));
}

int frames_push_special(struct frames *fr, const char *name)
{
	struct sym_frame sf = { .name = name, .module = "", .kind = FRAME_SPECIAL };

	return frames_push_named(fr, &sf);
}

/*
 * The placeholder frame of an address in a module file, named in
 * frames_name_deferred; -ENOENT when the address is not in one (or its
 * offset is beyond what a key holds): name it now. A sample's outer frames
 * are the last sample's: an address found before is taken from its slot
 * (fr->addrs) while no mapping has changed since, without locating it in
 * its process's mappings and looking its location up again.
 */
static int64_t deferred_frame(struct frames *fr, uint32_t pid, uint64_t ip, bool kernel,
			      bool return_addr)
{
	struct u64map *map = &fr->loc_frames;
	uint32_t how = (uint32_t)kernel | (uint32_t)return_addr << 1;
	uint64_t gen = symbolizer__maps_gen();
	struct addr_slot *slot = NULL;
	struct sym_loc loc;
	uint64_t key, id;
	int64_t r;

	if (!fr->addrs)
		fr->addrs = calloc(FRAMES_ADDR_SLOTS, sizeof(*fr->addrs));
	if (fr->addrs) {
		slot = &fr->addrs[hash_u64(ip ^ (uint64_t)pid << 48 ^ how) % FRAMES_ADDR_SLOTS];
		if (slot->gen == gen && slot->ip == ip && slot->pid == pid && slot->how == how)
			return slot->id;
	}
	if (!symbolizer__locate(fr->sym, pid, ip, kernel, return_addr, &loc))
		return -ENOENT;
	if (loc.module == SYM_LOC_KERNEL) {
		map = &fr->kernel_frames;
		key = loc.offset;
	} else if (loc.offset >> LOC_OFFSET_BITS || loc.module >> (64 - LOC_OFFSET_BITS)) {
		return -ENOENT;
	} else {
		key = (uint64_t)loc.module << LOC_OFFSET_BITS | loc.offset;
	}
	if (!u64map_get(map, key, &id)) {
		if (grow_array((void **)&fr->locs, &fr->locs_cap, fr->nr_locs + 1,
			       sizeof(*fr->locs)))
			return -ENOMEM;
		struct pf_frame f = { .kind = FRAME_SPECIAL };
		r = profile__frame_unique(fr->prof, &f);
		if (r < 0)
			return r;
		if (u64map_put(map, key, (uint64_t)r) ||
		    u64map_put(&fr->placeholders, (uint64_t)r, fr->nr_locs))
			return -ENOMEM;
		fr->locs[fr->nr_locs++] = loc;
		id = (uint64_t)r;
	}
	/* locate may have read /proc, which changes the mappings: the number after it */
	if (slot && id <= UINT32_MAX)
		*slot = (struct addr_slot){ .ip = ip,
					    .gen = symbolizer__maps_gen(),
					    .pid = pid,
					    .how = how,
					    .id = (uint32_t)id };
	return (int64_t)id;
}

int frames_push_addr(struct frames *fr, uint32_t pid, uint64_t ip, bool kernel, bool return_addr)
{
	struct sym_frame sf[COLLECT_MAX_INLINE];
	int64_t id = deferred_frame(fr, pid, ip, kernel, return_addr);
	size_t k;

	if (id != -ENOENT)
		return frames_push_id(fr, id);
	k = symbolizer__resolve_inline(fr->sym, pid, ip, kernel, return_addr, sf,
				       COLLECT_MAX_INLINE);
	for (size_t i = 0; i < k; i++) {
		int err = frames_push_named(fr, &sf[i]);
		if (err)
			return err;
	}
	return 0;
}

/* How many of the pushed frames, from the root, memo m holds. */
static size_t memo_common(const struct frames *fr, const struct stack_memo *m)
{
	size_t j = 0, n = fr->n < m->n ? fr->n : m->n;

	while (j < n && m->e[j].frame == fr->ids[fr->n - 1 - j])
		j++;
	return j;
}

int64_t frames_stack(struct frames *fr)
{
	struct stack_memo *m = &fr->memo[0];
	size_t common = 0, j = 0;
	int64_t stack = 0;

	/* the memo sharing the most from the root, else the least recently used */
	for (size_t i = 0; i < FRAMES_MEMOS; i++) {
		struct stack_memo *c = &fr->memo[i];
		size_t k = memo_common(fr, c);

		if (k > common || (!common && c->used < m->used)) {
			m = c;
			common = k;
		}
	}
	m->used = ++fr->memo_tick;
	/* without room the memo is left short (m->cap): the rest interned as without one */
	(void)grow_array((void **)&m->e, &m->cap, fr->n, sizeof(*m->e));
	/* each entry is checked against the profile: a rebuilt table is never trusted */
	for (; j < common; j++) {
		uint32_t s = m->e[j].stack;

		if (!profile__stack_is(fr->prof, s, (uint32_t)stack, m->e[j].frame))
			break;
		stack = s;
	}
	for (; j < fr->n; j++) {
		uint32_t frame = fr->ids[fr->n - 1 - j];

		stack = profile__stack(fr->prof, (uint32_t)stack, frame);
		if (stack < 0) {
			m->n = 0;
			return stack;
		}
		if (j < m->cap) {
			m->e[j].frame = frame;
			m->e[j].stack = (uint32_t)stack;
		}
	}
	m->n = fr->n <= m->cap ? fr->n : 0;
	return stack;
}

/* profile_expand_fn: a placeholder becomes its frames, root-first; the rest stay. */
static int name_one(void *ctx, uint32_t frame, uint32_t *out, size_t max)
{
	struct frames *fr = ctx;
	struct sym_frame sf[COLLECT_MAX_INLINE];
	uint64_t loc;
	size_t k;

	if (!u64map_get(&fr->placeholders, frame, &loc) || loc >= fr->nr_locs) {
		out[0] = frame;
		return 1;
	}
	k = symbolizer__resolve_loc(fr->sym, &fr->locs[loc], sf,
				    max < COLLECT_MAX_INLINE ? max : COLLECT_MAX_INLINE);
	for (size_t i = 0; i < k; i++) {
		int64_t id = intern_frame(fr, &sf[i]);

		if (id < 0)
			return (int)id;
		out[k - 1 - i] = (uint32_t)id;
	}
	return (int)k;
}

int frames_name_deferred(struct frames *fr)
{
	int err;

	if (!fr->nr_locs)
		return 0;
	err = profile__expand_frames(fr->prof, name_one, fr);
	fr->nr_locs = 0;
	/* the placeholders are named: no slot may give one out again */
	free(fr->addrs);
	fr->addrs = NULL;
	u64map_free(&fr->loc_frames);
	u64map_init(&fr->loc_frames);
	u64map_free(&fr->kernel_frames);
	u64map_init(&fr->kernel_frames);
	u64map_free(&fr->placeholders);
	u64map_init(&fr->placeholders);
	return err;
}

bool frames_journal_loc(struct frames *fr, uint32_t frame, struct pf_journal_loc *out)
{
	uint64_t i;
	const struct sym_loc *l;

	if (!u64map_get(&fr->placeholders, frame, &i) || i >= fr->nr_locs)
		return false;
	l = &fr->locs[i];
	*out = (struct pf_journal_loc){ .offset = l->offset };
	if (l->module == SYM_LOC_KERNEL) {
		out->kernel = true;
		out->path = "";
		return true;
	}
	return symbolizer__module_identity(fr->sym, l->module, &out->path, &out->build_id);
}

/* ---- a journal read back: its unnamed frames named from the files on disk ---- */

struct recover {
	struct frames fr; /* for intern_frame */
	struct u64map locs; /* frame id -> index in the profile's locs */
	struct u64map mods; /* path string id -> module index + 1, or 0: not loadable */
	bool kernel; /* kernel addresses of this boot: kallsyms names them */
	struct collect_recover_stats *st;
};

static int recover_one(void *ctx, uint32_t frame, uint32_t *out, size_t max)
{
	struct recover *rc = ctx;
	struct sym_frame sf[COLLECT_MAX_INLINE];
	const struct pf_loc *l;
	struct sym_loc loc;
	uint64_t i, mod;
	size_t k;

	if (!u64map_get(&rc->locs, frame, &i)) {
		out[0] = frame;
		return 1;
	}
	l = profile__get_loc(rc->fr.prof, i);
	if (l->kernel) {
		loc = (struct sym_loc){ .module = SYM_LOC_KERNEL, .offset = l->offset };
		if (!rc->kernel) {
			struct sym_frame kf = { .name = "[kernel]",
						.module = "[kernel.kallsyms]",
						.kind = FRAME_KERNEL };
			int64_t id = intern_frame(&rc->fr, &kf);

			if (id < 0)
				return (int)id;
			out[0] = (uint32_t)id;
			return 1;
		}
	} else {
		if (!u64map_get(&rc->mods, l->path, &mod)) {
			int idx = symbolizer__module_of_file(
				rc->fr.sym, profile__str(rc->fr.prof, l->path),
				l->build_id ? profile__str(rc->fr.prof, l->build_id) : NULL);

			mod = idx >= 0 ? (uint64_t)idx + 1 : 0;
			if (idx < 0)
				rc->st->modules_missing++;
			if (u64map_put(&rc->mods, l->path, mod))
				return -ENOMEM;
		}
		if (!mod) {
			/* the file is gone or was replaced: its name and the offset */
			const char *path = profile__str(rc->fr.prof, l->path),
				   *base = strrchr(path, '/');
			char name[320];
			struct sym_frame uf = { .name = name,
						.module = base ? base + 1 : path,
						.kind = FRAME_USER };
			int64_t id;

			snprintf(name, sizeof(name), "[%s+0x%llx]", uf.module,
				 (unsigned long long)l->offset);
			id = intern_frame(&rc->fr, &uf);
			if (id < 0)
				return (int)id;
			rc->st->frames_unnamed++;
			out[0] = (uint32_t)id;
			return 1;
		}
		loc = (struct sym_loc){ .module = (uint32_t)(mod - 1), .offset = l->offset };
	}
	k = symbolizer__resolve_loc(rc->fr.sym, &loc, sf,
				    max < COLLECT_MAX_INLINE ? max : COLLECT_MAX_INLINE);
	for (size_t n = 0; n < k; n++) {
		int64_t id = intern_frame(&rc->fr, &sf[n]);

		if (id < 0)
			return (int)id;
		out[k - 1 - n] = (uint32_t)id;
	}
	rc->st->frames_named++;
	return (int)k;
}

int collector__name_recovered(struct profile *p, struct symbolizer *sym, bool same_boot,
			      struct collect_recover_stats *st)
{
	struct recover rc = { .kernel = same_boot, .st = st };
	int err = 0;

	memset(st, 0, sizeof(*st));
	if (!profile__nr_locs(p))
		return 0;
	frames_init(&rc.fr, p, sym);
	u64map_init(&rc.locs);
	u64map_init(&rc.mods);
	for (size_t i = 0; i < profile__nr_locs(p) && !err; i++)
		err = u64map_put(&rc.locs, profile__get_loc(p, i)->frame, i) ? -ENOMEM : 0;
	if (!err)
		err = profile__expand_frames(p, recover_one, &rc);
	u64map_free(&rc.locs);
	u64map_free(&rc.mods);
	frames_exit(&rc.fr);
	return err;
}
