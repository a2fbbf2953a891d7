/* SPDX-License-Identifier: MIT */
/*
 * Loading pyframes.bpf.o (embedded at build time) with libbpf, telling it
 * which processes to read, and reading its ring buffer.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "pybpf/pybpf.h"
#include "pybpf/pyframes.bpf.h" /* generated: the object's bytes */

#define PYBPF_PENDING_NAMES 4

struct pybpf {
	struct bpf_object *obj;
	struct ring_buffer *ring;
	int prog_fd, probe_fd, procs_fd, counters_fd;
	struct pybpf_stats st;
	pybpf_cb cb;
	void *ctx;
	int stop; /* what the callback returned, non-zero: stop */
	int handed;
	/* the recorder runs in a PID namespace of its own: its pid namespace's id */
	bool nested;
	uint64_t ns_dev, ns_ino;
	struct pybpf_sample sample;
	/*
	 * Names records read, each for the frames record its run writes next:
	 * another CPU's records may come in between, so a few wait.
	 */
	struct pybpf_names {
		uint64_t time;
		uint32_t tid, n; /* n 0: a free slot */
		struct {
			uint32_t frame;
			/* UTF-8; "..." where a long one was cut */
			char qual[PYBPF_QUAL_BYTES * 4 + 4], file[4 + PYBPF_FILE_BYTES * 4 + 1];
		} names[PYBPF_MAX_NAMES];
	} pending[PYBPF_PENDING_NAMES];
	uint32_t next_pending;
};

/* libbpf's words are kept, never printed: the last one says why a load failed. */
static char last_error[512];

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[sizeof(last_error)];
	size_t n;

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == ' '))
		line[--n] = '\0';
	if (n)
		memcpy(last_error, line, n + 1);
	return 0;
}

const char *pybpf__last_error(void)
{
	return last_error;
}

/*
 * One str the program copied (its first bytes, or its last when tail) as
 * UTF-8 into out, "..." where it was cut; false when it does not hold
 * together.
 */
static bool str_text(const struct pybpf_str *st, const uint8_t *data, uint32_t max, bool tail,
		     char *out)
{
	uint32_t kind = st->kind, bytes = st->bytes;
	bool cut;
	size_t len;

	if ((kind != 1 && kind != 2 && kind != 4) || bytes > max || bytes % kind ||
	    (uint64_t)st->length * kind < bytes)
		return false;
	cut = (uint64_t)st->length * kind > bytes;
	if (cut && tail)
		memcpy(out, "...", 3);
	len = py_str_utf8(data, bytes / kind, kind, out + (cut && tail ? 3 : 0));
	if (cut && !tail)
		memcpy(out + len, "...", 4);
	return true;
}

/*
 * A names record (PYBPF_H_NAMES): kept, decoded, for the frames record the
 * same run writes next. One that does not hold together is counted bad.
 */
static int on_names(struct pybpf *b, const struct pybpf_head *h, size_t size)
{
	const struct pybpf_name *nm = (const struct pybpf_name *)(h + 1);
	/* a free slot, else the one written longest ago (its frames record never came) */
	struct pybpf_names *p = NULL;

	for (uint32_t i = 0; i < PYBPF_PENDING_NAMES && !p; i++)
		if (!b->pending[i].n)
			p = &b->pending[i];
	if (!p)
		p = &b->pending[b->next_pending++ % PYBPF_PENDING_NAMES];

	p->n = 0;
	if (!h->n || h->n > PYBPF_MAX_NAMES || size != sizeof(*h) + h->n * sizeof(*nm)) {
		b->st.bad++;
		return 0;
	}
	for (uint32_t k = 0; k < h->n; k++) {
		if (nm[k].frame >= PYBPF_MAX_FRAMES ||
		    !str_text(&nm[k].q, nm[k].qual, PYBPF_QUAL_BYTES, false, p->names[k].qual) ||
		    !str_text(&nm[k].f, nm[k].file, PYBPF_FILE_BYTES, true, p->names[k].file)) {
			b->st.bad++;
			return 0;
		}
		p->names[k].frame = nm[k].frame;
	}
	p->time = h->time;
	p->tid = h->tid;
	p->n = h->n;
	return 0;
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct pybpf *b = ctx;
	const struct pybpf_head *h = data;
	const struct pybpf_frame *f;
	struct pybpf_sample *s = &b->sample;

	if (b->stop)
		return b->stop;
	if (size >= sizeof(*h) && (h->flags & PYBPF_H_NAMES))
		return on_names(b, h, size);
	if (size < sizeof(*h) || h->n > PYBPF_MAX_FRAMES ||
	    size != sizeof(*h) + h->n * sizeof(*f) || h->status > PYBPF_NO_NS) {
		b->st.bad++;
		return 0;
	}
	f = (const struct pybpf_frame *)(h + 1);
	s->time = h->time;
	s->ip = h->ip;
	s->usp = h->usp;
	s->tstate = h->tstate;
	s->cframe = h->cframe;
	s->pid = (pid_t)h->pid;
	s->tid = (pid_t)h->tid;
	s->status = (enum pybpf_status)h->status;
	s->probe = h->flags & PYBPF_H_PROBE;
	s->n = h->n;
	for (uint32_t i = 0; i < h->n; i++)
		s->frames[i] = (struct py_frame){
			.addr = f[i].addr,
			.code = f[i].code,
			.instr = f[i].instr,
			.qualname = f[i].qualname,
			.filename = f[i].filename,
			.firstline = (int32_t)f[i].firstline,
			.entry = f[i].flags & PYBPF_F_ENTRY,
			.stub = f[i].flags & PYBPF_F_STUB,
		};
	/* code objects' names, copied by the same run just before */
	for (uint32_t i = 0; i < PYBPF_PENDING_NAMES; i++) {
		struct pybpf_names *p = &b->pending[i];

		if (!p->n || p->tid != h->tid || p->time != h->time)
			continue;
		for (uint32_t k = 0; k < p->n; k++) {
			if (p->names[k].frame >= h->n)
				continue;
			s->frames[p->names[k].frame].copied_qualname = p->names[k].qual;
			s->frames[p->names[k].frame].copied_filename = p->names[k].file;
		}
		/* the callback reads them before the slot is written again (ahead of 3 more) */
		p->n = 0;
	}
	b->st.received++;
	b->st.by_status[s->status]++;
	b->handed++;
	b->stop = b->cb(b->ctx, s);
	return b->stop;
}

/*
 * Open the embedded object into b->obj and load it, the probes' program
 * too when with_probe; 0, or a negative errno with b->obj left to close.
 */
static int load(struct pybpf *b, size_t ring_bytes, bool with_probe)
{
	struct bpf_program *prog, *probe;
	struct bpf_map *map;
	int err;
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "pyframes");

	b->obj = bpf_object__open_mem(pyframes_bpf_o, pyframes_bpf_o_len, &opts);
	if (!b->obj)
		return -errno;
	map = bpf_object__find_map_by_name(b->obj, "records");
	prog = bpf_object__find_program_by_name(b->obj, "pyframes");
	probe = bpf_object__find_program_by_name(b->obj, "pyframes_probe");
	if (!map || !prog || !probe)
		return -ENOENT;
	if ((ring_bytes && (err = bpf_map__set_max_entries(map, (uint32_t)ring_bytes))) ||
	    (!with_probe && (err = bpf_program__set_autoload(probe, false))) ||
	    (err = bpf_object__load(b->obj)))
		return err;
	b->prog_fd = bpf_program__fd(prog);
	b->probe_fd = with_probe ? bpf_program__fd(probe) : -EOPNOTSUPP;
	return 0;
}

int pybpf__open(struct pybpf **out, size_t ring_bytes)
{
	struct pybpf *b;
	struct bpf_map *map;
	int err;

	if (!out || (ring_bytes && (ring_bytes < 4096 || (ring_bytes & (ring_bytes - 1)))))
		return -EINVAL;
	libbpf_set_print(quiet);
	last_error[0] = '\0';
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	err = load(b, ring_bytes, true);
	if (err) {
		/*
		 * A kernel that refuses the probes' program (a uprobe's type,
		 * its cookie helper) still gets the samples' one: probes'
		 * frames are then read after their sample, as without BPF.
		 */
		bpf_object__close(b->obj);
		b->obj = NULL;
		err = load(b, ring_bytes, false);
		if (err)
			goto fail;
	}
	map = bpf_object__find_map_by_name(b->obj, "records");
	b->procs_fd = bpf_object__find_map_fd_by_name(b->obj, "procs");
	b->counters_fd = bpf_object__find_map_fd_by_name(b->obj, "counters");
	if (b->prog_fd < 0 || b->procs_fd < 0 || b->counters_fd < 0) {
		err = -ENOENT;
		goto fail;
	}
	/* the recorder's PID namespace: the program gives ids as seen from there */
	{
		struct pybpf_self me = { 0 };
		struct stat self_st;
		uint32_t zero = 0;
		int self_fd = bpf_object__find_map_fd_by_name(b->obj, "self");

		if (self_fd < 0) {
			err = -ENOENT;
			goto fail;
		}
		/*
		 * In the initial namespace the kernel's own ids are the
		 * recorder's: no translation, which would refuse every thread
		 * of a container (the helper translates into the thread's own
		 * namespace only). Nested, only threads of its namespace are
		 * seen as it sees them.
		 */
		if (stat("/proc/self/ns/pid", &self_st)) {
			err = -errno;
			goto fail;
		}
		b->nested = self_st.st_ino != PYBPF_PID_NS_INIT_INO;
		if (b->nested) {
			me.ns_dev = b->ns_dev = self_st.st_dev;
			me.ns_ino = b->ns_ino = self_st.st_ino;
		}
		if (bpf_map_update_elem(self_fd, &zero, &me, BPF_ANY)) {
			err = -errno;
			goto fail;
		}
	}
	b->ring = ring_buffer__new(bpf_map__fd(map), on_record, b, NULL);
	if (!b->ring) {
		err = -errno;
		goto fail;
	}
	*out = b;
	return 0;
fail:
	pybpf__free(b);
	return err < 0 ? err : -EINVAL;
}

void pybpf__free(struct pybpf *b)
{
	if (!b)
		return;
	ring_buffer__free(b->ring);
	bpf_object__close(b->obj);
	free(b);
}

int pybpf__prog_fd(const struct pybpf *b)
{
	return b ? b->prog_fd : -EINVAL;
}

int pybpf__probe_prog_fd(const struct pybpf *b)
{
	return b ? b->probe_fd : -EINVAL;
}

int pybpf__poll_fd(const struct pybpf *b)
{
	return b ? ring_buffer__epoll_fd(b->ring) : -EINVAL;
}

static uint32_t field(uint32_t v)
{
	return v == PY_WALK_NO_FIELD ? PYBPF_NO_FIELD : v;
}

int pybpf__add(struct pybpf *b, pid_t pid, const struct py_walk *w)
{
	struct pybpf_conf c = { 0 };
	char path[64];
	struct stat st;
	uint32_t key = (uint32_t)pid;

	if (!b || !w || pid <= 0)
		return -EINVAL;
	if (!w->frame_bytes || w->frame_bytes > PYBPF_FRAME_BUF)
		return -EINVAL;
	/* every field of a frame must lie in the bytes read of it */
	if (w->fr_code > w->frame_bytes - 8 || w->fr_previous > w->frame_bytes - 8 ||
	    w->fr_instr > w->frame_bytes - 8 ||
	    (w->fr_owner != PY_WALK_NO_FIELD && w->fr_owner >= w->frame_bytes) ||
	    (w->fr_is_entry != PY_WALK_NO_FIELD && w->fr_is_entry >= w->frame_bytes))
		return -EINVAL;
	c.runtime = w->runtime;
	c.none = w->none;
	c.tag_mask = w->tag_mask;
	/* the thread states hold the thread ids its own PID namespace gives */
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	if (stat(path, &st))
		return errno == ENOENT ? -ESRCH : -errno;
	/*
	 * The kernel's helper gives a thread's ids in its own namespace only:
	 * a recorder nested in a PID namespace cannot tell, in the program,
	 * which of its processes a thread of a namespace below its own is.
	 * Such a process's frames are read after the sample.
	 */
	if (b->nested && (st.st_dev != b->ns_dev || st.st_ino != b->ns_ino))
		return -EXDEV;
	c.ns_dev = st.st_dev;
	c.ns_ino = st.st_ino;
	c.rt_interp_head = w->rt_interp_head;
	c.is_next = w->is_next;
	c.is_threads_head = w->is_threads_head;
	c.ts_next = w->ts_next;
	c.ts_native_tid = w->ts_native_tid;
	c.ts_cframe = field(w->ts_cframe);
	c.cf_current = field(w->cf_current);
	c.ts_current_frame = field(w->ts_current_frame);
	if (c.ts_cframe == PYBPF_NO_FIELD && c.ts_current_frame == PYBPF_NO_FIELD)
		return -EINVAL;
	c.fr_code = w->fr_code;
	c.fr_previous = w->fr_previous;
	c.fr_instr = w->fr_instr;
	c.fr_is_entry = field(w->fr_is_entry);
	c.fr_owner = field(w->fr_owner);
	c.frame_bytes = w->frame_bytes;
	c.stub_owner = field(w->stub_owner);
	c.stub_runs_none = w->stub_runs_none;
	c.owner_max = w->owner_max;
	/* what names a code object: one read, from the first of its three fields */
	c.co_from = w->co_qualname;
	if (w->co_filename < c.co_from)
		c.co_from = w->co_filename;
	if (w->co_firstlineno < c.co_from)
		c.co_from = w->co_firstlineno;
	c.co_qualname = w->co_qualname - c.co_from;
	c.co_filename = w->co_filename - c.co_from;
	c.co_firstlineno = w->co_firstlineno - c.co_from;
	/* offsets the interpreter gave: all three in one buffer, each checked before the sum */
	if (c.co_qualname > PYBPF_FRAME_BUF - 8 || c.co_filename > PYBPF_FRAME_BUF - 8 ||
	    c.co_firstlineno > PYBPF_FRAME_BUF - 4)
		return -EINVAL;
	c.co_bytes = c.co_qualname + 8;
	if (c.co_filename + 8 > c.co_bytes)
		c.co_bytes = c.co_filename + 8;
	if (c.co_firstlineno + 4 > c.co_bytes)
		c.co_bytes = c.co_firstlineno + 4;
	/* names copied at the sample: the offsets of a str's header, checked as the frame's */
	if (w->uni_ascii_size >= 16 && w->uni_ascii_size <= PYBPF_FRAME_BUF &&
	    w->uni_compact_size <= (1u << 12) && w->uni_length <= w->uni_ascii_size - 8 &&
	    w->uni_state <= w->uni_ascii_size - 4 && w->ob_type <= w->uni_ascii_size - 8 &&
	    w->str_kind_shift < 30 && w->str_compact_bit < 32 && w->str_ascii_bit < 32) {
		c.names_ok = 1;
		c.str_type = w->str_type;
		c.ob_type = w->ob_type;
		c.uni_length = w->uni_length;
		c.uni_state = w->uni_state;
		c.uni_ascii_size = w->uni_ascii_size;
		c.uni_compact_size = w->uni_compact_size;
		c.str_kind_shift = w->str_kind_shift;
		c.str_compact_bit = w->str_compact_bit;
		c.str_ascii_bit = w->str_ascii_bit;
	}
	if (bpf_map_update_elem(b->procs_fd, &key, &c, BPF_ANY))
		return -errno;
	return 0;
}

int pybpf__remove(struct pybpf *b, pid_t pid)
{
	uint32_t key = (uint32_t)pid;

	if (!b)
		return -EINVAL;
	if (bpf_map_delete_elem(b->procs_fd, &key))
		return -errno;
	return 0;
}

int pybpf__poll(struct pybpf *b, int timeout_ms, pybpf_cb cb, void *ctx)
{
	int err;

	if (!b || !cb)
		return -EINVAL;
	b->cb = cb;
	b->ctx = ctx;
	b->stop = 0;
	b->handed = 0;
	/*
	 * Without a wait, the ring's pages are read directly: polling with a
	 * zero timeout is an epoll_wait for each sample, which the recorder
	 * and its early thread paid 9,000 times a second each.
	 */
	err = timeout_ms ? ring_buffer__poll(b->ring, timeout_ms) : ring_buffer__consume(b->ring);
	if (b->stop)
		return b->stop;
	if (err < 0 && err != -EINTR)
		return err;
	return b->handed;
}

int pybpf__stats(struct pybpf *b, struct pybpf_stats *out)
{
	int ncpu = libbpf_num_possible_cpus();
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	uint64_t *v;

	if (!b || !out)
		return -EINVAL;
	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return -ENOMEM;
	*out = b->st;
	for (uint32_t k = 0; k < PYBPF_C_COUNT; k++) {
		uint64_t sum = 0;

		if (bpf_map_lookup_elem(b->counters_fd, &k, v)) {
			int err = -errno;

			free(v);
			return err;
		}
		for (int c = 0; c < ncpu; c++)
			sum += v[c];
		if (k == PYBPF_C_SAMPLES)
			out->samples = sum;
		else if (k == PYBPF_C_RECORDS)
			out->records = sum;
		else if (k == PYBPF_C_DROPPED)
			out->dropped = sum;
		else if (k == PYBPF_C_TSTATE_WALKS)
			out->tstate_walks = sum;
		else if (k == PYBPF_C_BUSY)
			out->busy = sum;
	}
	free(v);
	/* the kernel's count of the programs' runs and time (kernel.bpf_stats_enabled) */
	for (int k = 0; k < 2; k++) {
		int fd = k ? b->probe_fd : b->prog_fd;

		memset(&info, 0, sizeof(info));
		len = sizeof(info);
		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		out->runs += info.run_cnt;
		out->run_ns += info.run_time_ns;
	}
	return 0;
}
