/* SPDX-License-Identifier: MIT */
/*
 * Cgroup mode: every process of a cgroup v2 directory (a container, a
 * pod) and of the cgroups below it, those started during the recording
 * included. One event per CPU filtered by the cgroup (PERF_FLAG_PID_CGROUP:
 * the pid argument is the directory's fd); the kernel applies the filter to
 * side-band records too, so the MMAP2, COMM, FORK and EXIT records of the
 * cgroup's processes arrive with their samples.
 */
#include <errno.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/magic.h>

#include "sampler/internal.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

int sampler__cgroup_check(int fd)
{
	struct statfs st;

	if (fstatfs(fd, &st))
		return -errno;
	return st.f_type == CGROUP2_SUPER_MAGIC ? 0 : -ENOTDIR;
}

static int cgroup_owner(struct sampler *s, struct perf_event_attr *attr, pid_t cgfd, int cpu)
{
	if (s->opts.offcpu_only) {
		s->stats.event = "context-switches";
		return event_open_or_user_only(s, attr, cgfd, cpu);
	}
	if (s->stats.event)
		return event_open_or_user_only(s, attr, cgfd, cpu);
	return event_probe(s, attr, cgfd, cpu);
}

/* attr on every CPU for the cgroup, writing into that CPU's ring. */
static int open_on_cpus(struct sampler *s, struct perf_event_attr *attr, int cgfd,
			enum rec_event ev)
{
	int err = 0, fd;

	for (size_t i = 0; i < s->nr_rings && !err; i++) {
		fd = event_open_or_user_only(s, attr, cgfd, s->cpus[i]);
		err = fd < 0 ? event_errno(fd) : event_add(s, fd, s->rings[i].fd, ev, 0);
		if (!err)
			err = event_alt(s, fd, attr, ev);
	}
	return err;
}

int sampler__cgroup(struct sampler *s, int cgfd)
{
	struct perf_event_attr attr;
	int err;

	if (!s || cgfd < 0)
		return -EINVAL;
	if (s->launched || s->attached || s->cgroup)
		return -EBUSY;
	err = sampler__cgroup_check(cgfd);
	if (err)
		return err;
	s->cgroup = true; /* event_open_or_user_only passes PERF_FLAG_PID_CGROUP */
	s->stats.event = NULL;
	if (s->opts.offcpu_only)
		event_attr_switch(s, &attr);
	else
		event_attr_oncpu(s, &attr);
	event_attr_sideband(&attr);
	s->stats.start_time = monotonic_ns();
	err = rings_open(s, &attr, cgfd, cgroup_owner, s->opts.offcpu_only ? EV_SWITCH : EV_ONCPU);
	if (!err && s->opts.offcpu && !s->opts.offcpu_only) {
		event_attr_switch(s, &attr);
		err = open_on_cpus(s, &attr, cgfd, EV_SWITCH);
	}
	if (!err && s->opts.fault_period && !s->opts.offcpu_only) {
		event_attr_fault(s, &attr);
		err = open_on_cpus(s, &attr, cgfd, EV_FAULT);
	}
	if (!err)
		err = early_start(s);
	if (err) {
		rings_close(s);
		s->cgroup = false;
	}
	return err;
}
