/* SPDX-License-Identifier: MIT */
/*
 * A process's rank in a distributed job, from the variables its launcher
 * put in its environment: torchrun and torch.distributed (RANK,
 * LOCAL_RANK, WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK, _LOCAL_RANK,
 * _SIZE), MPICH and Intel MPI's Hydra (PMI_RANK, MPI_LOCALRANKID,
 * PMI_SIZE) and Slurm (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS). When a
 * process has several (torchrun under srun), the first of that list says:
 * it is the one the training code's process group uses.
 *
 * Read from /proc/PID/environ, which holds the environment the process was
 * started with (exec), when the recorder first sees it; a forked process
 * keeps its parent's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct launcher {
	const char *name;
	const char *rank, *local_rank, *world_size;
};

static const struct launcher launchers[] = {
	{ "torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE" },
	{ "Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
	  "OMPI_COMM_WORLD_SIZE" },
	{ "MPICH/Intel MPI", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE" },
	{ "Slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS" },
};

/* An environment's biggest: more is not a launcher's process (Linux's ARG_MAX is 2 MiB). */
#define ENV_MAX (4u << 20)

/*
 * The value of variable `name` in a NUL-separated block, as a decimal
 * number below PF_NO_RANK; PF_NO_RANK when absent or not such a number.
 */
static uint32_t env_number(const char *env, size_t len, const char *name)
{
	size_t nlen = strlen(name);

	for (size_t at = 0; at < len;) {
		const char *v = env + at, *end = memchr(v, '\0', len - at);
		size_t vlen = end ? (size_t)(end - v) : len - at;

		at += vlen + 1;
		if (vlen <= nlen || v[nlen] != '=' || memcmp(v, name, nlen))
			continue;
		uint64_t n = 0;
		size_t digits = vlen - nlen - 1;

		if (!digits || digits > 10)
			return PF_NO_RANK;
		for (size_t i = nlen + 1; i < vlen; i++) {
			if (v[i] < '0' || v[i] > '9')
				return PF_NO_RANK;
			n = n * 10 + (uint64_t)(v[i] - '0');
		}
		return n < PF_NO_RANK ? (uint32_t)n : PF_NO_RANK;
	}
	return PF_NO_RANK;
}

bool collect__rank_from_env(const char *env, size_t len, struct rank_env *out)
{
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		const struct launcher *l = &launchers[i];
		uint32_t rank = env_number(env, len, l->rank);

		if (rank == PF_NO_RANK)
			continue;
		out->rank = rank;
		out->local_rank = env_number(env, len, l->local_rank);
		out->world_size = env_number(env, len, l->world_size);
		/* a rank outside the job's size is not one */
		if (out->world_size != PF_NO_RANK && rank >= out->world_size)
			continue;
		out->launcher = l->name;
		return true;
	}
	return false;
}

/* /proc/PID/environ whole (at most ENV_MAX), or NULL. */
static char *read_environ(uint32_t pid, size_t *len)
{
	char path[40], *buf = NULL;
	size_t cap = 0, n = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *b;

			if (cap >= ENV_MAX)
				break;
			cap = cap ? cap * 2 : 16384;
			b = realloc(buf, cap);
			if (!b)
				break;
			buf = b;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	*len = n;
	return buf;
}

static int set_rank(struct collector *c, uint32_t pid, const struct rank_env *re)
{
	int64_t launcher = profile__string(c->prof, re->launcher, strlen(re->launcher));

	if (launcher < 0)
		return (int)launcher;
	return profile__set_process(c->prof, &(struct pf_process){
						     .pid = pid,
						     .rank = re->rank,
						     .local_rank = re->local_rank,
						     .world_size = re->world_size,
						     .launcher = (uint32_t)launcher,
					     });
}

int collector__rank_from_envp(struct collector *c, uint32_t pid, char *const envp[])
{
	struct rank_env re;
	char *block = NULL;
	size_t len = 0, cap = 0;
	bool found;

	for (size_t i = 0; envp && envp[i]; i++) {
		size_t n = strlen(envp[i]) + 1;

		if (grow_array((void **)&block, &cap, len + n, 1)) {
			free(block);
			return -ENOMEM;
		}
		memcpy(block + len, envp[i], n);
		len += n;
	}
	found = block && collect__rank_from_env(block, len, &re);
	free(block);
	return found ? set_rank(c, pid, &re) : 0;
}

int ranks_read(struct collector *c, uint32_t pid)
{
	struct rank_env re;
	size_t len = 0;
	char *env = read_environ(pid, &len);
	bool found = env && collect__rank_from_env(env, len, &re);

	free(env);
	if (!found)
		return 0;
	return set_rank(c, pid, &re);
}

int ranks_fork(struct collector *c, uint32_t pid, uint32_t ppid)
{
	const struct pf_process *parent = profile__process(c->prof, 0, ppid);
	struct pf_process child;

	if (!parent || pid == ppid)
		return 0;
	child = *parent;
	child.pid = pid;
	return profile__set_process(c->prof, &child);
}
