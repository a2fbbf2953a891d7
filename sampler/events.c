/* SPDX-License-Identifier: MIT */
/*
 * The perf events: their attributes, choosing the on-CPU event (cycles or
 * cpu-clock, kernel frames if allowed), opening them, and saying in words
 * why opening failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <asm/perf_regs.h>
#include <linux/bpf.h>

#include "sampler/internal.h"

/* The user registers the unwinder needs: the GPRs, IP, SP and FLAGS; no segment registers. */
#define REGS_USER_MASK                              \
	(((1ull << (PERF_REG_X86_FLAGS + 1)) - 1) | \
	 (((1ull << (PERF_REG_X86_R15 + 1)) - 1) & ~((1ull << PERF_REG_X86_R8) - 1)))

/*
 * IDENTIFIER: a sample's id comes first, so that events with a layout of
 * their own (page faults) can share the rings (struct rec_layout's alts).
 */
#define SAMPLE_TYPE                                                                               \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_CPU | \
	 PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_IDENTIFIER)

void event_layout(struct sampler *s)
{
	s->layout.sample_type = SAMPLE_TYPE;
	s->layout.sample_id_all = true;
	if (s->opts.callgraph == CALLGRAPH_DWARF) {
		s->layout.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		s->layout.sample_regs_user = REGS_USER_MASK;
	}
}

int event_open(struct perf_event_attr *attr, pid_t pid, int cpu)
{
	long fd = syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : (int)fd;
}

/* pid is the fd of a cgroup v2 directory: the event counts its processes on cpu. */
static int event_open_cgroup(struct perf_event_attr *attr, int cgfd, int cpu)
{
	long fd = syscall(SYS_perf_event_open, attr, cgfd, cpu, -1,
			  PERF_FLAG_FD_CLOEXEC | PERF_FLAG_PID_CGROUP);

	return fd < 0 ? -errno : (int)fd;
}

/*
 * perf_event_open's errors, reworded so that each errno from
 * sampler__launch has one meaning: EACCES and ENOENT are kept for the
 * command itself.
 */
int event_errno(int err)
{
	switch (err) {
	case -EACCES:
		return -EPERM;
	case -ENOENT:
	case -ENODEV:
		return -EOPNOTSUPP;
	default:
		return err;
	}
}

/* Open; if kernel sampling is not allowed, retry user space only, once, and remember that. */
int event_open_or_user_only(struct sampler *s, struct perf_event_attr *attr, pid_t pid, int cpu)
{
	int fd;

	attr->exclude_kernel = s->opts.exclude_kernel;
	fd = s->cgroup ? event_open_cgroup(attr, pid, cpu) : event_open(attr, pid, cpu);
	if ((fd == -EACCES || fd == -EPERM) && !attr->exclude_kernel) {
		attr->exclude_kernel = 1;
		fd = s->cgroup ? event_open_cgroup(attr, pid, cpu) : event_open(attr, pid, cpu);
		if (fd >= 0) {
			s->opts.exclude_kernel = true;
			s->stats.kernel_excluded = true;
		}
	}
	return fd;
}

/* Pick the event on the first CPU: cycles if there is a PMU, else cpu-clock; kernel if allowed. */
int event_probe(struct sampler *s, struct perf_event_attr *attr, pid_t pid, int cpu)
{
	static const struct {
		uint32_t type;
		uint64_t config;
		const char *name;
	} events[] = {
		{ PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "cycles" },
		{ PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, "cpu-clock" },
	};
	int fd = -EOPNOTSUPP;

	for (size_t i = 0; i < ARRAY_SIZE(events); i++) {
		attr->type = events[i].type;
		attr->config = events[i].config;
		fd = event_open_or_user_only(s, attr, pid, cpu);
		if (fd >= 0) {
			s->stats.event = events[i].name;
			return fd;
		}
		if (fd != -ENOENT && fd != -EOPNOTSUPP && fd != -ENODEV)
			break;
	}
	return event_errno(fd);
}

/* What every event shares: the record layout, the clock, the stack-copy settings. */
static void base_attr(const struct sampler *s, struct perf_event_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->sample_type = s->layout.sample_type;
	attr->sample_id_all = 1;
	attr->exclude_hv = 1;
	attr->use_clockid = 1;
	attr->clockid = CLOCK_MONOTONIC;
	if (s->opts.callgraph == CALLGRAPH_DWARF) {
		attr->sample_regs_user = s->layout.sample_regs_user;
		attr->sample_stack_user = s->opts.stack_size;
		/* user frames come from the stack copy: the kernel need not walk them */
		attr->exclude_callchain_user = 1;
	}
}

/* On-CPU sampling; type and config are chosen by probe_event. */
void event_attr_oncpu(const struct sampler *s, struct perf_event_attr *attr)
{
	base_attr(s, attr);
	attr->freq = 1;
	attr->sample_freq = s->opts.freq;
}

/*
 * Every context switch: the sample, taken as the thread leaves the CPU,
 * holds the stack where it blocks; PERF_RECORD_SWITCH (context_switch) says
 * when it leaves, whether it was preempted, and when it comes back.
 */
void event_attr_switch(const struct sampler *s, struct perf_event_attr *attr)
{
	base_attr(s, attr);
	attr->type = PERF_TYPE_SOFTWARE;
	attr->config = PERF_COUNT_SW_CONTEXT_SWITCHES;
	attr->sample_period = 1;
	attr->context_switch = 1;
}

/* A number from a sysfs file of the uprobe PMU ("type", or "format/retprobe": "config:N"). */
static int uprobe_sysfs(const char *name, long *out)
{
	char path[128], buf[64] = "";
	const char *p;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/bus/event_source/devices/uprobe/%s", name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	p = strchr(buf, ':') ? strchr(buf, ':') + 1 : buf;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	*out = strtol(p, NULL, 10);
	return 0;
}

/*
 * A uprobe (ret: a uretprobe) on probe p through the uprobe PMU. Entries
 * carry registers and a small stack copy (the stack at the call, unwound
 * like any sample's); returns carry no stack, only the stack pointer that
 * pairs them with their entry.
 */
int event_attr_probe(const struct sampler *s, struct perf_event_attr *attr,
		     const struct sampler_probe *p, bool ret)
{
	long type, bit = 0;
	int err = uprobe_sysfs("type", &type);

	if (err)
		return err == -ENOENT ? -ENODEV : err;
	if (ret && (err = uprobe_sysfs("format/retprobe", &bit)))
		return err == -ENOENT ? -ENODEV : err;
	base_attr(s, attr);
	attr->type = (uint32_t)type;
	attr->config = ret ? 1ull << bit : 0;
	attr->config1 = (uint64_t)(uintptr_t)p->path; /* uprobe_path */
	attr->config2 = p->offset; /* probe_offset */
	attr->sample_period = 1;
	if (s->opts.callgraph == CALLGRAPH_DWARF)
		attr->sample_stack_user = ret			     ? 8
					  : s->opts.probe_stack_size ? s->opts.probe_stack_size
								     : PROBE_STACK_SIZE;
	/* where the function was called from is the user stack's business */
	attr->exclude_callchain_kernel = 1;
	return 0;
}

/*
 * pybpf/'s program for probes' entries, on each entry event (one per CPU),
 * with that CPU for its cookie. Each event of a probe is a uprobe of its
 * own, and the kernel runs a uprobe's program at every hit, on whichever
 * CPU, before it sees whether that CPU's event is the one to write the
 * sample; in no set order among the probe's events. The program copies
 * only where the cookie is the CPU it runs on: once per call, in the run
 * that goes on to write the sample, so the record always comes first. A
 * program the kernel refuses (no BPF links for perf events with a cookie
 * before Linux 5.15) leaves the probe as it is: frames are read after the
 * sample.
 */
static void probe_attach_bpf(struct sampler *s, struct event *e, int cpu)
{
	union bpf_attr attr;
	int fd;

	if (!s->opts.bpf || !s->opts.bpf_probes)
		return;
	memset(&attr, 0, sizeof(attr));
	attr.link_create.prog_fd = (uint32_t)s->opts.bpf_probe_fd;
	attr.link_create.target_fd = (uint32_t)e->fd;
	attr.link_create.attach_type = BPF_PERF_EVENT;
	attr.link_create.perf_event.bpf_cookie = (uint64_t)cpu;
	fd = (int)syscall(SYS_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	if (fd < 0) {
		if (!s->stats.bpf_probe_err)
			s->stats.bpf_probe_err = -errno;
		return;
	}
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	e->link = fd;
}

/*
 * Probe k's entry and return uprobes on every CPU, all or none. They are
 * opened disabled and enabled only once all are open and their ids
 * published: a probe without its return (or entry) would pair nothing, and
 * the early reader must know every probe sample it may see.
 */
static int probe_open_one(struct sampler *s, size_t k, const struct sampler_probe *p)
{
	struct perf_event_attr attr;
	size_t first = s->nr_events, nr_ids = s->nr_probe_ids;
	int err = 0, fd;
	uint64_t id;

	if (nr_ids + 2 * s->nr_rings > SAMPLER_MAX_PROBES * 2 * s->nr_rings)
		return -ENOSPC;
	for (int ret = 0; ret < 2 && !err; ret++) {
		err = event_attr_probe(s, &attr, p, ret);
		attr.disabled = 1;
		for (size_t i = 0; i < s->nr_rings && !err; i++) {
			fd = event_open(&attr, -1, s->cpus[i]);
			err = fd < 0 ? fd
				     : event_add(s, fd, s->rings[i].fd,
						 ret ? EV_PROBE_RETURN(k) : EV_PROBE_ENTRY(k), 0);
			if (!err && ioctl(fd, PERF_EVENT_IOC_ID, &id) < 0)
				err = -errno;
			if (!err && !ret)
				probe_attach_bpf(s, &s->events[s->nr_events - 1], s->cpus[i]);
			if (!err) {
				s->probe_events[nr_ids] =
					ret ? EV_PROBE_RETURN(k) : EV_PROBE_ENTRY(k);
				s->probe_ids[nr_ids++] = id;
				/* system-wide: it says nothing of whether the targets live */
				s->events[s->nr_events - 1].hup = true;
			}
		}
	}
	if (!err) {
		__atomic_store_n(&s->nr_probe_ids, nr_ids, __ATOMIC_RELEASE);
		for (size_t i = first; i < s->nr_events && !err; i++)
			if (ioctl(s->events[i].fd, PERF_EVENT_IOC_ENABLE, 0) < 0)
				err = -errno;
	}
	if (err) {
		/* ids published stay so: their events are closed and write nothing more */
		for (size_t i = first; i < s->nr_events; i++)
			event_close(&s->events[i]);
		s->nr_events = first;
	}
	return err;
}

/*
 * Entry and return uprobes of each probe, per CPU, system-wide (see
 * struct sampler's tree). One that cannot be opened (no uprobe PMU, no
 * permission) leaves the recording without probes: stats.probe_err says why.
 */
void probes_open(struct sampler *s, const pid_t *pids, size_t n)
{
	size_t first = s->nr_events;
	int err = 0;

	if (!s->opts.nr_probes && !s->opts.on_map)
		return;
	/* room for every probe there may be: the early reader reads it meanwhile */
	s->probe_ids = calloc(SAMPLER_MAX_PROBES * 2 * s->nr_rings, sizeof(*s->probe_ids));
	s->probe_events = calloc(SAMPLER_MAX_PROBES * 2 * s->nr_rings, sizeof(*s->probe_events));
	if (!s->probe_ids || !s->probe_events)
		err = -ENOMEM;
	for (size_t k = 0; k < s->opts.nr_probes && k < SAMPLER_MAX_PROBES && !err; k++)
		err = probe_open_one(s, k, &s->opts.probes[k]);
	s->nr_probes_open = s->opts.nr_probes;
	s->tree_filter = true;
	for (size_t i = 0; i < n && !err; i++)
		if (u64map_put(&s->tree, (uint64_t)pids[i], 1))
			err = -ENOMEM;
	if (!err)
		return;
	s->nr_probe_ids = 0;
	s->nr_probes_open = 0;
	/* all or none: a probe without its return (or entry) pairs nothing */
	for (size_t i = first; i < s->nr_events; i++)
		event_close(&s->events[i]);
	s->nr_events = first;
	s->stats.probe_err = err;
}

int sampler__add_probe(struct sampler *s, const struct sampler_probe *p)
{
	int err;

	if (!s || !p || !p->path)
		return -EINVAL;
	if (s->stats.probe_err)
		return s->stats.probe_err;
	if (!s->probe_ids || !s->tree_filter)
		return -EINVAL; /* before the events were opened, or without opts.on_map */
	if (s->nr_probes_open == SAMPLER_MAX_PROBES)
		return -ENOSPC;
	err = probe_open_one(s, s->nr_probes_open, p);
	if (err)
		return err;
	return (int)s->nr_probes_open++;
}

/*
 * Page faults of the user code: where memory is first touched, a sample
 * every fault_period faults. A software event whose samples carry
 * PERF_SAMPLE_PERIOD takes a sample at every fault whatever sample_period
 * says (and in frequency mode every new thread's event starts at period 1:
 * up to 400 samples a tick from a process that faults fast), so these
 * samples have a layout of their own, without it.
 */
void event_attr_fault(const struct sampler *s, struct perf_event_attr *attr)
{
	base_attr(s, attr);
	attr->sample_type &= ~(uint64_t)PERF_SAMPLE_PERIOD;
	attr->type = PERF_TYPE_SOFTWARE;
	attr->config = PERF_COUNT_SW_PAGE_FAULTS;
	attr->sample_period = s->opts.fault_period;
	attr->exclude_callchain_kernel = 1; /* the faulting user code is the leaf */
}

int event_alt(struct sampler *s, int fd, const struct perf_event_attr *attr, enum rec_event ev)
{
	struct rec_alt alt = { .sample_type = attr->sample_type,
			       .period = attr->sample_period,
			       .event = ev };
	size_t at;

	if (attr->sample_type == s->layout.sample_type)
		return 0;
	if (ioctl(fd, PERF_EVENT_IOC_ID, &alt.id) < 0)
		return -errno;
	if (grow_array((void **)&s->alts, &s->alts_cap, s->nr_alts + 1, sizeof(*s->alts)))
		return -ENOMEM;
	/* sorted by id, for rec_decode's binary search */
	for (at = s->nr_alts; at > 0 && s->alts[at - 1].id > alt.id; at--)
		s->alts[at] = s->alts[at - 1];
	s->alts[at] = alt;
	s->nr_alts++;
	s->layout.alts = s->alts;
	s->layout.nr_alts = s->nr_alts;
	return 0;
}

/* The side-band records (maps, names, threads): one event per ring asks for them. */
void event_attr_sideband(struct perf_event_attr *attr)
{
	attr->mmap = 1;
	attr->mmap2 = 1;
	attr->comm = 1;
	attr->comm_exec = 1;
	attr->task = 1;
}

/* Every event of ours, ring owner or not, has its id noted here once. */
int event_note_id(struct sampler *s, int fd, enum rec_event ev, uint32_t tid)
{
	uint64_t id;

	/*
	 * The BPF program that copies Python frames at each sample (pybpf/),
	 * on the events with stacks: on-CPU, context switches, page faults.
	 * One the kernel refuses leaves the event as it is: said in
	 * stats.bpf_err, and frames are read as before.
	 */
	if (s->opts.bpf && (ev == EV_ONCPU || ev == EV_SWITCH || ev == EV_FAULT)) {
		if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, s->opts.bpf_fd) < 0) {
			if (!s->stats.bpf_err)
				s->stats.bpf_err = -errno;
		} else {
			s->stats.bpf_attached++;
		}
	}
	if (ioctl(fd, PERF_EVENT_IOC_ID, &id) < 0)
		return -errno;
	return u64map_put(&s->ids, id, (uint64_t)ev | (uint64_t)tid << 8);
}

/* fd writes into ring_fd's ring from now on; it is closed with the sampler, also on failure. */
int event_add(struct sampler *s, int fd, int ring_fd, enum rec_event ev, uint32_t tid)
{
	if (grow_array((void **)&s->events, &s->events_cap, s->nr_events + 1, sizeof(*s->events))) {
		close(fd);
		return -ENOMEM;
	}
	s->events[s->nr_events++] = (struct event){ .fd = fd, .link = -1, .tid = tid };
	if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring_fd) < 0)
		return -errno;
	return event_note_id(s, fd, ev, tid);
}

/*
 * Releasing a uprobe's event unregisters the uprobe, which waits for RCU
 * grace periods, one event after another across the system: about 80 ms
 * each, and --probe-ops's 108 events kept the recording from ending for
 * 9 s after the trainer had (from several threads at once, no faster). A
 * child forked here holds the events' files until this process has
 * dropped its own references; its exit then pays for the release, while
 * this process goes on and ends. It keeps no standard stream open (no
 * reader of dlflame's output waits for it) and calls only what is safe
 * after fork. The probes stay armed that long, writing to rings nobody
 * reads. 0, or -1 when there is no such child and the caller closes
 * them itself.
 */
static int release_elsewhere(int *wfd)
{
	int p[2];
	pid_t c;
	char b;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	c = fork();
	if (c < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (c == 0) {
		close(STDIN_FILENO);
		close(STDOUT_FILENO);
		close(STDERR_FILENO);
		close(p[1]);
		while (read(p[0], &b, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	*wfd = p[1];
	return 0;
}

void event_close(struct event *e)
{
	if (e->link >= 0)
		close(e->link);
	close(e->fd);
	e->link = e->fd = -1;
}

void events_close(struct sampler *s)
{
	int wfd = -1;

	if (s->nr_probe_ids && s->nr_events)
		release_elsewhere(&wfd);
	for (size_t i = 0; i < s->nr_events; i++)
		event_close(&s->events[i]);
	if (wfd >= 0)
		close(wfd); /* the child ends, and with it the events */
	free(s->events);
	free(s->epfds);
	s->events = NULL;
	s->epfds = NULL;
	s->nr_events = s->events_cap = 0;
}

/* ---- messages ----------------------------------------------------------- */

static const char *read_sysctl(const char *path, char *val, size_t size)
{
	FILE *f = fopen(path, "re");
	size_t n;

	snprintf(val, size, "unknown");
	if (!f)
		return val;
	if (fgets(val, (int)size, f)) {
		n = strcspn(val, "\n");
		val[n] = '\0';
	} else {
		snprintf(val, size, "unknown");
	}
	fclose(f);
	return val;
}

/*
 * Why this process may not profile, when the kernel said EPERM: what is
 * missing, read from the process itself. A seccomp filter (a container
 * runtime's default profile) refuses perf_event_open whatever is asked;
 * perf_event_paranoid 2 still lets anyone count its own user space, so an
 * event that asks for nothing more tells the two apart. Capabilities count
 * only in the initial user namespace.
 */
struct perm {
	bool seccomp; /* a seccomp filter, and even the least event was refused */
	bool perfmon; /* CAP_PERFMON or CAP_SYS_ADMIN, in the initial user namespace */
	bool userns; /* in a user namespace other than the initial one */
	char paranoid[32];
};

static unsigned long long status_field(const char *name, int base, bool *found)
{
	char line[256];
	size_t len = strlen(name);
	unsigned long long v = 0;
	FILE *f = fopen("/proc/self/status", "re");

	*found = false;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, name, len) && line[len] == ':') {
			char *end;

			errno = 0;
			v = strtoull(line + len + 1, &end, base);
			*found = !errno && end != line + len + 1;
			break;
		}
	}
	fclose(f);
	return *found ? v : 0;
}

static void perm_read(struct perm *pm)
{
	struct perf_event_attr attr = { 0 };
	unsigned long long caps, mode;
	char map[128];
	bool found;
	FILE *f;
	long fd;

	memset(pm, 0, sizeof(*pm));
	read_sysctl("/proc/sys/kernel/perf_event_paranoid", pm->paranoid, sizeof(pm->paranoid));
	f = fopen("/proc/self/uid_map", "re");
	if (f) {
		unsigned long a, b, c;

		/* the initial namespace maps all of 0..2^32-2 to itself */
		if (fgets(map, sizeof(map), f) &&
		    (sscanf(map, "%lu %lu %lu", &a, &b, &c) != 3 || a || b || c != 4294967295UL))
			pm->userns = true;
		fclose(f);
	}
	caps = status_field("CapEff", 16, &found);
	pm->perfmon = found && !pm->userns && (caps >> 38 & 1 || caps >> 21 & 1);
	mode = status_field("Seccomp", 10, &found);
	if (!found || mode == 0)
		return;
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_DUMMY;
	attr.disabled = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd >= 0) {
		close((int)fd);
		return;
	}
	/* paranoid 3 (a distribution's patch) refuses it too, but not to CAP_PERFMON */
	pm->seccomp = (errno == EPERM || errno == EACCES || errno == ENOSYS) &&
		      (strcmp(pm->paranoid, "3") || pm->perfmon);
}

/* The one-line text for a refused perf_event_open, or false when seccomp is not the cause. */
static bool seccomp_text(const struct perm *pm, char *buf, size_t size)
{
	if (!pm->seccomp)
		return false;
	snprintf(buf, size,
		 "cannot open perf events: this process's seccomp filter refuses perf_event_open "
		 "(a container runtime's default profile does; kernel.perf_event_paranoid = %s, "
		 "CAP_PERFMON %s); run the container with `--security-opt seccomp=unconfined` or a "
		 "profile that allows perf_event_open (podman's and Docker's allow it with "
		 "`--cap-add SYS_ADMIN`), or record it from the host: `dlflame record -p HOSTPID`",
		 pm->paranoid, pm->perfmon ? "present" : "absent");
	return true;
}

/* What a refusal lacks when no seccomp filter is the cause: CAP_PERFMON and the sysctl. */
static const char *caps_text(const struct perm *pm)
{
	if (pm->perfmon)
		return "";
	return pm->userns ? ", and this process's capabilities are a user namespace's, "
			    "which perf_event_open does not count"
			  : ", and this process has neither CAP_PERFMON nor CAP_SYS_ADMIN";
}

const char *sampler__open_strerror(int err, char *buf, size_t size)
{
	char val[32], val2[32], ebuf[128];
	struct rlimit rl;
	int e = err < 0 && err != INT_MIN ? -err : err;

	if (!buf || !size)
		return "sampler error";
	switch (e) {
	case EPERM: {
		struct perm pm;

		perm_read(&pm);
		if (seccomp_text(&pm, buf, size))
			break;
		snprintf(
			buf, size,
			"cannot open perf events: permission denied (kernel.perf_event_paranoid = %s%s%s); "
			"run as root (or with CAP_PERFMON), or allow it with `sysctl kernel.perf_event_paranoid=1` "
			"(on the host: a container shares the host's)",
			pm.paranoid,
			strcmp(pm.paranoid, "3") ? ""
						 : ", which forbids all unprivileged profiling",
			caps_text(&pm));
		break;
	}
	case EACCES:
		snprintf(
			buf, size,
			"cannot run the command: permission denied (it is not an executable file, or a directory on its path is not searchable); "
			"check it with `ls -l` and make it executable with `chmod +x`");
		break;
	case ENOENT:
		snprintf(
			buf, size,
			"command not found: no such file, and no executable of that name in any directory of PATH; "
			"check the spelling or give the full path");
		break;
	case ENODEV:
	case EOPNOTSUPP:
		snprintf(
			buf, size,
			"cannot open perf events: the sampling events (cycles, cpu-clock) are not supported by this kernel or machine; "
			"check that the kernel has CONFIG_PERF_EVENTS and that `perf stat -e cpu-clock true` works");
		break;
	case EMFILE:
	case ENFILE:
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
			snprintf(val, sizeof(val), "%llu", (unsigned long long)rl.rlim_cur);
		else
			snprintf(val, sizeof(val), "unknown");
		snprintf(
			buf, size,
			"cannot open perf events: too many open files (one event per CPU is needed; the limit is %s); "
			"raise it with `ulimit -n`",
			val);
		break;
	case ENOMEM:
		if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
			snprintf(val, sizeof(val), "%llu KiB",
				 (unsigned long long)rl.rlim_cur / 1024);
		else
			snprintf(val, sizeof(val), "unlimited");
		read_sysctl("/proc/sys/kernel/perf_event_mlock_kb", val2, sizeof(val2));
		snprintf(
			buf, size,
			"cannot map the perf ring buffers: locked-memory limit too low (RLIMIT_MEMLOCK %s, kernel.perf_event_mlock_kb = %s) or out of memory; "
			"raise `ulimit -l` or `sysctl kernel.perf_event_mlock_kb`, use fewer mmap pages, or run as root",
			val, val2);
		break;
	case ENOSYS:
		snprintf(
			buf, size,
			"perf_event_open is not available: the kernel lacks CONFIG_PERF_EVENTS or a seccomp policy (container) blocks it; "
			"run on the host, or allow perf_event_open in the container's seccomp profile");
		break;
	case EINVAL:
		read_sysctl("/proc/sys/kernel/perf_event_max_sample_rate", val, sizeof(val));
		snprintf(
			buf, size,
			"cannot open perf events: invalid settings (the sampling frequency may exceed kernel.perf_event_max_sample_rate = %s); "
			"lower the frequency or raise that sysctl",
			val);
		break;
	case ESRCH:
		snprintf(
			buf, size,
			"cannot open perf events: the target process exited before it could be profiled");
		break;
	default:
		snprintf(buf, size, "cannot profile the target: %s",
			 strerror_r(e, ebuf, sizeof(ebuf)));
		break;
	}
	return buf;
}

const char *sampler__attach_strerror(int err, char *buf, size_t size)
{
	char val[32], val2[32];
	struct rlimit rl;
	int e = err < 0 && err != INT_MIN ? -err : err;

	if (!buf || !size)
		return "sampler error";
	switch (e) {
	case ESRCH:
		snprintf(
			buf, size,
			"no such process or thread (it may have exited); check the ID with `ps -eLf`");
		break;
	case EPERM:
	case EACCES: {
		struct perm pm;

		perm_read(&pm);
		if (seccomp_text(&pm, buf, size))
			break;
		read_sysctl("/proc/sys/kernel/perf_event_paranoid", val, sizeof(val));
		read_sysctl("/proc/sys/kernel/yama/ptrace_scope", val2, sizeof(val2));
		snprintf(
			buf, size,
			"permission denied (kernel.perf_event_paranoid = %s, kernel.yama.ptrace_scope = %s; "
			"only processes you may ptrace can be profiled); run as the target's user with "
			"`sysctl kernel.perf_event_paranoid=1`, or as root (or with CAP_PERFMON and CAP_SYS_PTRACE)",
			val, val2);
		break;
	}
	case EMFILE:
	case ENFILE:
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY)
			snprintf(val, sizeof(val), "%llu", (unsigned long long)rl.rlim_max);
		else
			snprintf(val, sizeof(val), "unknown");
		snprintf(
			buf, size,
			"too many open files: not one thread could be followed (each needs one fd per event per CPU; the hard limit is %s); "
			"raise it (`ulimit -Hn`, LimitNOFILE=) or close other programs' files",
			val);
		break;
	default:
		return sampler__open_strerror(err, buf, size);
	}
	return buf;
}
