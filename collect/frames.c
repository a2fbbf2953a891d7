/* SPDX-License-Identifier: MIT */
/* A sample's frames: interned in the profile, or placeholders named once recording is over. */
#include "internal.h"

#include <errno.h>
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
}

void frames_exit(struct frames *fr)
{
	u64map_free(&fr->loc_frames);
	u64map_free(&fr->kernel_frames);
	u64map_free(&fr->placeholders);
	free(fr->ids);
	free(fr->locs);
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
 * offset is beyond what a key holds): name it now.
 */
static int64_t deferred_frame(struct frames *fr, uint32_t pid, uint64_t ip, bool kernel,
			      bool return_addr)
{
	struct u64map *map = &fr->loc_frames;
	struct sym_loc loc;
	uint64_t key, id;
	int64_t r;

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
	if (u64map_get(map, key, &id))
		return (int64_t)id;
	if (grow_array((void **)&fr->locs, &fr->locs_cap, fr->nr_locs + 1, sizeof(*fr->locs)))
		return -ENOMEM;
	struct pf_frame f = { .kind = FRAME_SPECIAL };
	r = profile__frame_unique(fr->prof, &f);
	if (r < 0)
		return r;
	if (u64map_put(map, key, (uint64_t)r) ||
	    u64map_put(&fr->placeholders, (uint64_t)r, fr->nr_locs))
		return -ENOMEM;
	fr->locs[fr->nr_locs++] = loc;
	return r;
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

int64_t frames_stack(struct frames *fr)
{
	int64_t stack = 0;

	for (size_t i = fr->n; i-- > 0;) {
		stack = profile__stack(fr->prof, (uint32_t)stack, fr->ids[i]);
		if (stack < 0)
			return stack;
	}
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
	u64map_free(&fr->loc_frames);
	u64map_init(&fr->loc_frames);
	u64map_free(&fr->kernel_frames);
	u64map_init(&fr->kernel_frames);
	u64map_free(&fr->placeholders);
	u64map_init(&fr->placeholders);
	return err;
}
