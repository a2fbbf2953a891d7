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
 *
 * Its container is read at the same moments: its cgroup v2 path (the "0::"
 * line of /proc/PID/cgroup) and the container id a runtime put in it.
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

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	}
	return true;
}

bool collect__container_of_cgroup(const char *path, char *out, size_t size)
{
	static const char *const prefixes[] = { "docker-", "cri-containerd-", "crio-",
						"libpod-", "containerd-",     "" };
	const char *pod = NULL, *comp = path;
	size_t pod_len = 0;

	if (!size)
		return false;
	out[0] = '\0';
	/* the innermost component that names a container wins; a pod's uid, else */
	while (comp && *comp) {
		const char *end = strchr(comp, '/');
		size_t len = end ? (size_t)(end - comp) : strlen(comp);

		for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
			size_t pl = strlen(prefixes[i]), idl;

			if (len < pl + 64 || memcmp(comp, prefixes[i], pl))
				continue;
			idl = len - pl;
			/* "<id>.scope" (systemd) or "<id>" (cgroupfs) */
			if (idl == 64 + 6 && !memcmp(comp + pl + 64, ".scope", 6))
				idl = 64;
			if (idl == 64 && is_hex(comp + pl, 64) && size > 64) {
				memcpy(out, comp + pl, 64);
				out[64] = '\0';
				pod = NULL; /* a container inside a pod: the container */
				pod_len = 0;
				break;
			}
		}
		/* kubepods-burstable-pod<uid>.slice (systemd) or pod<uid> (cgroupfs) */
		{
			const char *at = NULL;

			/* "pod" at the component's start or after a dash: not kubepods' */
			for (size_t k = 0; k + 3 <= len; k++) {
				if (!memcmp(comp + k, "pod", 3) && (k == 0 || comp[k - 1] == '-'))
					at = comp + k;
			}
			if (at && !out[0]) {
				size_t ul = len - (size_t)(at + 3 - comp);

				if (ul > 6 && !memcmp(at + 3 + ul - 6, ".slice", 6))
					ul -= 6;
				if (ul == 36) {
					pod = at + 3;
					pod_len = ul;
				}
			}
		}
		comp = end ? end + 1 : NULL;
	}
	if (out[0])
		return true;
	if (pod && size > pod_len + 4) {
		/* the systemd driver writes the uid's dashes as underscores */
		memcpy(out, "pod:", 4);
		for (size_t i = 0; i < pod_len; i++)
			out[4 + i] = pod[i] == '_' ? '-' : pod[i];
		out[4 + pod_len] = '\0';
		return true;
	}
	return false;
}

/* The "0::PATH" line of /proc/PID/cgroup (cgroup v2): PATH, or "" (free it; NULL: -ENOMEM). */
static char *read_cgroup(uint32_t pid)
{
	char path[64], line[4352];
	char *r = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	f = fopen(path, "re");
	if (f) {
		while (!r && fgets(line, sizeof(line), f)) {
			size_t n = strcspn(line, "\n");

			/* a line longer than the buffer is no path we keep */
			if (line[n] != '\n' || strncmp(line, "0::/", 4))
				continue;
			line[n] = '\0';
			r = strdup(line + 3);
			if (!r)
				break;
		}
		fclose(f);
	}
	return r ? r : strdup("");
}

/* The process's cgroup and container into pr; 0 or -ENOMEM. */
static int read_container(struct collector *c, uint32_t pid, struct pf_process *pr)
{
	char id[80];
	char *cg = read_cgroup(pid);
	int64_t s = 0, ct = 0;

	if (!cg)
		return -ENOMEM;
	/* the root cgroup, or none: no container */
	if (cg[0] && strcmp(cg, "/"))
		s = profile__string(c->prof, cg, strlen(cg));
	if (s >= 0 && cg[0] && collect__container_of_cgroup(cg, id, sizeof(id)))
		ct = profile__string(c->prof, id, strlen(id));
	free(cg);
	if (s < 0 || ct < 0)
		return s < 0 ? (int)s : (int)ct;
	pr->cgroup = (uint32_t)s;
	pr->container = (uint32_t)ct;
	return 0;
}

/* The entry of pid as it stands, or a new one with no rank. */
static struct pf_process process_of(struct collector *c, uint32_t pid, bool *had)
{
	const struct pf_process *have = profile__process(c->prof, 0, pid);

	*had = have != NULL;
	if (have)
		return *have;
	return (struct pf_process){
		.pid = pid, .rank = PF_NO_RANK, .local_rank = PF_NO_RANK, .world_size = PF_NO_RANK
	};
}

static int set_rank(struct collector *c, uint32_t pid, const struct rank_env *re)
{
	int64_t launcher = profile__string(c->prof, re->launcher, strlen(re->launcher));
	bool had;
	struct pf_process pr = process_of(c, pid, &had);

	if (launcher < 0)
		return (int)launcher;
	pr.rank = re->rank;
	pr.local_rank = re->local_rank;
	pr.world_size = re->world_size;
	pr.launcher = (uint32_t)launcher;
	return profile__set_process(c->prof, &pr);
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
	bool found = env && collect__rank_from_env(env, len, &re), had;
	struct pf_process pr;
	int err;

	free(env);
	if (found) {
		err = set_rank(c, pid, &re);
		if (err)
			return err;
	}
	pr = process_of(c, pid, &had);
	err = read_container(c, pid, &pr);
	if (err || (!had && !pr.cgroup && !pr.container))
		return err;
	return profile__set_process(c->prof, &pr);
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
