/* SPDX-License-Identifier: MIT */
/* Threads as the profile knows them: (pid, tid, comm). */
#include "internal.h"

#include <stdio.h>
#include <string.h>

void threads_init(struct threads *t, struct profile *prof)
{
	t->prof = prof;
	u64map_init(&t->comms);
}

void threads_exit(struct threads *t)
{
	u64map_free(&t->comms);
}

int threads_set_comm(struct threads *t, uint32_t tid, const char *comm)
{
	int64_t id = profile__string(t->prof, comm, strnlen(comm, 64));

	if (id < 0)
		return (int)id;
	return u64map_put(&t->comms, tid, (uint64_t)id);
}

int threads_fork(struct threads *t, uint32_t ptid, uint32_t tid)
{
	uint64_t comm;

	if (u64map_get(&t->comms, ptid, &comm))
		return u64map_put(&t->comms, tid, comm);
	return 0;
}

int64_t threads_id(struct threads *t, uint32_t pid, uint32_t tid)
{
	uint64_t comm;

	if (!u64map_get(&t->comms, tid, &comm)) {
		/* a thread we saw no COMM or FORK for: name it after its tid */
		char buf[32];
		int n = snprintf(buf, sizeof(buf), "[tid %u]", tid);
		int64_t id = profile__string(t->prof, buf, (size_t)n);
		if (id < 0)
			return id;
		comm = (uint64_t)id;
	}
	return profile__thread(t->prof, pid, tid, (uint32_t)comm);
}
