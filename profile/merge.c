/* SPDX-License-Identifier: MIT */
/*
 * Merging profiles of one job recorded on several hosts (dlflame merge).
 * Frames are named already, so nothing needs the other hosts' files; each
 * thread and process keeps its host's name, and each profile's sample
 * times move onto the first one's clock through the wall-clock offsets
 * the recorders noted (CLOCK_REALTIME - CLOCK_MONOTONIC).
 */
#include "filter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static const char *host_name(const struct profile *p, uint32_t host)
{
	return profile__str(p, host ? host : profile__cmeta(p)->hostname);
}

int profile__merge_clash(const struct profile *a, const struct profile *b,
			 struct profile_clash *clash)
{
	size_t na = profile__nr_threads(a), nb = profile__nr_threads(b);
	struct u64map pids; /* pid -> 1 + a thread of a with it */
	int err = 0;

	memset(clash, 0, sizeof(*clash));
	u64map_init(&pids);
	for (size_t i = 0; i < na && !err; i++)
		err = u64map_put(&pids, profile__get_thread(a, (uint32_t)i)->pid, i + 1);
	for (size_t i = 0; i < nb && !err; i++) {
		const struct pf_thread *t = profile__get_thread(b, (uint32_t)i), *u;
		uint64_t at;

		if (!u64map_get(&pids, t->pid, &at))
			continue;
		u = profile__get_thread(a, (uint32_t)(at - 1));
		if (strcmp(host_name(a, u->host), host_name(b, t->host)))
			continue;
		clash->process = true;
		clash->pid = t->pid;
		clash->host = host_name(b, t->host);
		err = -EEXIST;
	}
	u64map_free(&pids);
	/* ranks: b's by rank, then a's looked up (a rank may stand in many processes of one) */
	u64map_init(&pids);
	for (size_t k = 0; !err && k < profile__nr_processes(b); k++) {
		const struct pf_process *y = profile__get_process(b, k);

		if (y->rank != PF_NO_RANK)
			err = u64map_put(&pids, y->rank, k);
	}
	for (size_t i = 0; !err && i < profile__nr_processes(a); i++) {
		const struct pf_process *x = profile__get_process(a, i);
		uint64_t k;

		if (x->rank == PF_NO_RANK || !u64map_get(&pids, x->rank, &k))
			continue;
		clash->rank = x->rank;
		clash->host = host_name(a, x->host);
		clash->other_host = host_name(b, profile__get_process(b, (size_t)k)->host);
		err = -EEXIST;
	}
	u64map_free(&pids);
	return err;
}

/* "a + b": the commands of the profiles merged, each once. */
static int join_commands(struct profile *dst, const struct profile *src)
{
	struct pf_meta *m = profile__meta(dst);
	const char *have = profile__str(dst, m->command);
	const char *add = profile__str(src, profile__cmeta(src)->command);
	size_t hl = strlen(have), al = strlen(add);
	char *both;
	int64_t id;

	if (!al || (hl && strstr(have, add)))
		return 0;
	both = malloc(hl + al + 4);
	if (!both)
		return -ENOMEM;
	memcpy(both, have, hl);
	memcpy(both + hl, " + ", hl ? 3 : 0);
	memcpy(both + hl + (hl ? 3 : 0), add, al);
	id = profile__string(dst, both, hl + (hl ? 3 : 0) + al);
	free(both);
	if (id < 0)
		return (int)id;
	m->command = (uint32_t)id;
	return 0;
}

int profile__merge(struct profile *dst, const struct profile *src, bool first)
{
	const struct pf_meta *sm = profile__cmeta(src);
	struct pf_meta *dm = profile__meta(dst);
	struct profile_filter f = { .name_hosts = true };
	bool kinds[SAMPLE_KIND_MAX];
	uint64_t start, end;
	int64_t ev;
	int err;

	for (int k = 0; k < SAMPLE_KIND_MAX; k++)
		kinds[k] = true;
	if (first) {
		ev = profile__string(dst, profile__str(src, sm->event),
				     profile__str_len(src, sm->event));
		if (ev < 0)
			return (int)ev;
		dm->event = (uint32_t)ev;
		dm->freq = sm->freq;
		dm->clock_offset = sm->clock_offset;
		dm->hostname = 0; /* every thread names its host */
		dm->finalized = true;
		dm->start_time = UINT64_MAX;
	} else if (sm->clock_offset && dm->clock_offset) {
		f.time_shift = sm->clock_offset - dm->clock_offset;
	}
	if (dm->freq != sm->freq)
		dm->freq = 0;
	err = profile__copy(dst, src, kinds, &f, false);
	if (!err)
		err = join_commands(dst, src);
	if (err)
		return err;
	start = profile__time_base(src);
	end = sm->end_time > start ? sm->end_time : start;
	if (f.time_shift < 0) {
		start = (uint64_t)-f.time_shift > start ? 0 : start - (uint64_t)-f.time_shift;
		end = (uint64_t)-f.time_shift > end ? 0 : end - (uint64_t)-f.time_shift;
	} else {
		start = sat_add(start, (uint64_t)f.time_shift);
		end = sat_add(end, (uint64_t)f.time_shift);
	}
	if (start < dm->start_time)
		dm->start_time = start;
	if (end > dm->end_time)
		dm->end_time = end;
	dm->lost = sat_add(dm->lost, sm->lost);
	dm->finalized &= sm->finalized;
	return 0;
}
