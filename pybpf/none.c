/* SPDX-License-Identifier: MIT */
/*
 * pybpf/ in a build without clang or libbpf: nothing can be loaded, and
 * every caller keeps reading frames after the sample (python/).
 */
#include <errno.h>

#include "pybpf/pybpf.h"

int pybpf__open(struct pybpf **out, size_t ring_bytes)
{
	(void)out;
	(void)ring_bytes;
	return -EOPNOTSUPP;
}

void pybpf__free(struct pybpf *b)
{
	(void)b;
}

const char *pybpf__last_error(void)
{
	return "dlflame was built without BPF (clang and libbpf-dev were absent)";
}

int pybpf__prog_fd(const struct pybpf *b)
{
	(void)b;
	return -EOPNOTSUPP;
}

int pybpf__probe_prog_fd(const struct pybpf *b)
{
	(void)b;
	return -EOPNOTSUPP;
}

int pybpf__poll_fd(const struct pybpf *b)
{
	(void)b;
	return -EOPNOTSUPP;
}

int pybpf__add(struct pybpf *b, pid_t pid, const struct py_walk *w)
{
	(void)b;
	(void)pid;
	(void)w;
	return -EOPNOTSUPP;
}

int pybpf__remove(struct pybpf *b, pid_t pid)
{
	(void)b;
	(void)pid;
	return -EOPNOTSUPP;
}

int pybpf__poll(struct pybpf *b, int timeout_ms, pybpf_cb cb, void *ctx)
{
	(void)b;
	(void)timeout_ms;
	(void)cb;
	(void)ctx;
	return -EOPNOTSUPP;
}

int pybpf__stats(struct pybpf *b, struct pybpf_stats *out)
{
	(void)b;
	(void)out;
	return -EOPNOTSUPP;
}
