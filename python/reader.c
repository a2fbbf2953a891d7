/* SPDX-License-Identifier: MIT */
/*
 * The Python reader: finding an interpreter in a process, reading a
 * thread's frame chain, matching it to a sample's eval calls, naming its
 * frames. Everything read from the target is untrusted: each pointer is
 * read through process_vm_readv (which fails cleanly on unmapped memory),
 * each count and length is capped, each walk bounded.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "python/internal.h"
#include "util/util.h"

#define MAX_INTERPRETERS 64
#define MAX_THREADS 4096
#define MAX_STRING 4096 /* characters of a name or file name */
#define MAX_LINETABLE (256u << 10)
#define FRAME_MAX 128 /* the fields read of a _PyInterpreterFrame, at most (layout's frame_bytes) */
#define WINDOW 8192 /* bytes of a thread's data stack read at once */
#define TSTATE_MAX 1024 /* the fields read of a PyThreadState, at most (layout's tstate_bytes) */
#define SLOT_MIN 16 /* where a C eval call's slot may lie below its CFA */
#define SLOT_MAX 4096
/*
 * 3.13 on: samples in a row whose newest eval call holds no stub frame at
 * the slot before the slot is learned again (a right one misses only in
 * the call's prologue and epilogue).
 */
#define SLOT_MISSES 8
#define CODE_HDR 256 /* bytes read of a code object's header, at most */
#define LINE_SLOTS 4096 /* lines of code units remembered */
#define PY_REGS 24 /* perf's x86-64 user registers: AX .. R15 */
#define IP_REG_TRIES 64 /* samples that teach which register holds the instruction */
#define PERF_REG_SP 7
#define PERF_REG_IP 8
#define OWNER_MAX 7 /* an owner byte above this: not a frame (3.14 has 0-4) */
#define EVAL_PARTS (1 + PY_EVAL_COLD_MAX)

/*
 * A code object as read: never changed once made. When another code
 * object takes the address of a freed one, a new entry is made, so a
 * snapshot's frames keep naming what they held when they were read.
 */
struct code_entry {
	uint64_t addr;
	uint64_t code_bytes; /* the instructions: co_code_adaptive, Py_SIZE code units */
	uint64_t qualname_p, filename_p, linetable_p; /* what the names were read from */
	int32_t firstline;
	char *qualname, *filename;
	uint8_t *linetable;
	size_t linetable_len;
	uint64_t serial; /* py_frame_info's code_serial: the reader's count of entries made */
};

struct proc {
	pid_t pid;
	int state; /* 1: a supported interpreter; 0: none found; < 0: why not */
	uint32_t version;
	struct py_layout L;
	bool free_threaded; /* a free-threaded build (not read) */
	uint64_t runtime, code_type, none;
	uint64_t str_type, bytes_type; /* 0 if not known: names are not checked for their type */
	/* names copied at samples: hash of (code, qualname, filename, firstline) -> code[] index */
	struct u64map copied;
	/* _PyEval_EvalFrameDefault: its symbol's range, then the parts put apart */
	uint64_t eval_lo[EVAL_PARTS], eval_hi[EVAL_PARTS];
	uint32_t nr_eval;
	uint64_t slot; /* a C eval call's slot lies this far below its CFA; 0 unknown */
	uint32_t slot_misses; /* 3.13 on: samples in a row the slot held no stub (SLOT_MISSES) */
	/* which sampled register holds the newest eval call's next instruction */
	uint32_t ip_hits[PY_REGS], ip_tries;
	int ip_reg; /* -1 until learned */
	struct u64map tstates; /* tid as the process sees it -> PyThreadState */
	/*
	 * In a PID namespace of its own (a container), the thread states hold
	 * the ids the process sees: our tid -> its tid, from NSpid.
	 */
	int other_ns; /* 1: another PID namespace; 0: ours; -1: not known yet */
	struct u64map nstids;
	struct u64map codes; /* code object address -> index in code[] of its latest entry */
	struct code_entry *code;
	size_t nr_code, code_cap;
};

struct file_syms {
	uint64_t key; /* dev and inode */
	struct py_syms syms;
};

struct pyreader {
	struct proc **procs;
	size_t nr_procs, procs_cap;
	struct u64map pids; /* pid -> index in procs */
	struct file_syms *files;
	size_t nr_files, files_cap;
	struct u64map file_idx; /* key -> index in files */
	struct pyreader_stats st;
	/* the last data-stack window read */
	pid_t win_pid;
	uint64_t win_lo;
	size_t win_len;
	uint8_t win[WINDOW];
	struct py_snapshot *prev; /* the walk before, while a snapshot is retried */
	uint64_t code_serial; /* entries made so far, all processes */
	/*
	 * Lines of the code units sampled lately, by code entry (serial) and
	 * unit: a line is decoded from the start of its line table, which for
	 * a module body runs to thousands of bytes (3.5% of the recorder's
	 * CPU on a CNN trainer when every sample's every frame decoded it).
	 */
	struct line_slot {
		uint64_t serial, unit;
		uint32_t line;
	} lines[LINE_SLOTS];
};

struct pyreader *pyreader__new(void)
{
	struct pyreader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->prev = malloc(sizeof(*r->prev));
	if (!r->prev) {
		free(r);
		return NULL;
	}
	u64map_init(&r->pids);
	u64map_init(&r->file_idx);
	return r;
}

static void proc_clear(struct proc *p)
{
	for (size_t i = 0; i < p->nr_code; i++) {
		free(p->code[i].qualname);
		free(p->code[i].filename);
		free(p->code[i].linetable);
	}
	free(p->code);
	u64map_free(&p->codes);
	u64map_free(&p->copied);
	u64map_free(&p->tstates);
	u64map_free(&p->nstids);
	memset(p, 0, sizeof(*p));
}

void pyreader__free(struct pyreader *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nr_procs; i++) {
		proc_clear(r->procs[i]);
		free(r->procs[i]);
	}
	free(r->procs);
	free(r->files);
	u64map_free(&r->pids);
	u64map_free(&r->file_idx);
	free(r->prev);
	free(r);
}

static struct proc *proc_get(const struct pyreader *r, pid_t pid)
{
	uint64_t v;

	return r && u64map_get(&r->pids, (uint64_t)pid, &v) ? r->procs[v] : NULL;
}

static struct proc *proc_new(struct pyreader *r, pid_t pid)
{
	struct proc *p = proc_get(r, pid);

	if (p) {
		proc_clear(p);
	} else {
		if (grow_array((void **)&r->procs, &r->procs_cap, r->nr_procs + 1,
			       sizeof(*r->procs)))
			return NULL;
		p = calloc(1, sizeof(*p));
		if (!p || u64map_put(&r->pids, (uint64_t)pid, r->nr_procs)) {
			free(p);
			return NULL;
		}
		r->procs[r->nr_procs++] = p;
	}
	p->pid = pid;
	p->ip_reg = -1;
	p->other_ns = -1;
	u64map_init(&p->tstates);
	u64map_init(&p->codes);
	u64map_init(&p->copied);
	u64map_init(&p->nstids);
	return p;
}

static int rd(struct pyreader *r, pid_t pid, uint64_t addr, void *buf, size_t n)
{
	r->st.reads++;
	r->st.bytes_read += n;
	return py_read(pid, addr, buf, n);
}

static uint64_t u64_at(const uint8_t *b, size_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static uint32_t u32_at(const uint8_t *b, size_t off)
{
	uint32_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

/* ---- finding the interpreter ---------------------------------------------- */

/* py_elf_syms of the file at path when it is inode ino (0: any); -ESTALE when it is another. */
static int syms_of(const char *path, uint64_t ino, struct py_syms *out)
{
	char self[48];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), err;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (ino && (uint64_t)st.st_ino != ino)) {
		close(fd);
		return -ESTALE; /* not the file the process mapped */
	}
	/* the file just checked, not whatever the path names by now */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	err = py_elf_syms(self, out);
	close(fd);
	return err;
}

/*
 * A module's symbols, read once per file (device and inode) for every
 * process: from the mapped file itself (map_files), else from the path as
 * the process sees it (its root: a container's files are not the host's),
 * checked to be the inode it mapped.
 */
static const struct py_syms *file_syms(struct pyreader *r, pid_t pid, uint64_t key, uint64_t start,
				       uint64_t end, uint64_t ino, const char *path)
{
	char full[4200];
	uint64_t v;
	struct py_syms s;

	if (u64map_get(&r->file_idx, key, &v))
		return &r->files[v].syms;
	snprintf(full, sizeof(full), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, start,
		 end);
	if (syms_of(full, ino, &s)) {
		snprintf(full, sizeof(full), "/proc/%d/root%s", (int)pid, path);
		if (syms_of(full, ino, &s))
			memset(&s, 0, sizeof(s));
	}
	if (grow_array((void **)&r->files, &r->files_cap, r->nr_files + 1, sizeof(*r->files)) ||
	    u64map_put(&r->file_idx, key, r->nr_files))
		return NULL;
	r->files[r->nr_files] = (struct file_syms){ .key = key, .syms = s };
	return &r->files[r->nr_files++].syms;
}

/*
 * The module holding _PyRuntime among pid's mappings, and its load bias.
 * 0 and *found set, 0 with nothing found, or a negative errno.
 */
static int find_runtime(struct pyreader *r, pid_t pid, struct py_syms *found, uint64_t *bias)
{
	char path[64], line[4400];
	struct u64map seen;
	FILE *f;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	u64map_init(&seen);
	memset(found, 0, sizeof(*found));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off, ino;
		unsigned maj, min;
		char perms[8];
		int pos = 0;
		const struct py_syms *s;
		uint64_t key, dummy;
		char *file;

		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off,
			   &maj, &min, &ino, &pos) < 7 ||
		    !ino || !pos)
			continue;
		file = line + pos;
		file[strcspn(file, "\n")] = '\0';
		/* the lowest mapping of a file maps its start: the one that gives the bias */
		if (file[0] != '/' || off != 0)
			continue;
		key = hash_u64(((uint64_t)maj << 44 | (uint64_t)min << 32) ^ hash_u64(ino));
		if (u64map_get(&seen, key, &dummy))
			continue;
		if (u64map_put(&seen, key, 1)) {
			err = -ENOMEM;
			break;
		}
		s = file_syms(r, pid, key, start, end, ino, file);
		if (!s) {
			err = -ENOMEM;
			break;
		}
		if (s->runtime && s->eval) {
			*found = *s;
			*bias = s->is_exec ? 0 : start - s->load_vaddr;
			break;
		}
		/* 3.6 has the eval function but no _PyRuntime yet: an older CPython */
		if (s->eval && !found->eval)
			found->eval = s->eval;
	}
	u64map_free(&seen);
	fclose(f);
	return err;
}

/* Whether the type object at addr is named name (its tp_name, a C string). */
static bool type_named(struct pyreader *r, const struct proc *p, uint64_t addr, const char *name)
{
	char buf[16] = "";
	uint64_t s;
	size_t n = strlen(name) + 1;

	return n <= sizeof(buf) && !rd(r, p->pid, addr + p->L.ty_name, &s, sizeof(s)) &&
	       !rd(r, p->pid, s, buf, n) && !memcmp(buf, name, n);
}

/*
 * A layout read from the interpreter's own debug offsets, checked against
 * what it must describe: the runtime's size is the symbol's, PyCode_Type
 * and None's type are named "code" and "NoneType" through the type
 * object's offsets, None's type pointer lies where the object header says,
 * and the first thread state points back to its interpreter. head: the
 * first interpreter (0 before the runtime is up: those checks wait).
 */
/* Whether the layout is checked against the live process (3.13 on), not a fixed table. */
static bool L_checked(const struct proc *p)
{
	return p->L.ts_interp != PY_NO_FIELD;
}

static bool layout_holds(struct pyreader *r, struct proc *p, uint64_t runtime_size, uint64_t head)
{
	const struct py_layout *L = &p->L;
	uint64_t none_type, th, interp;

	if (L->ts_interp == PY_NO_FIELD)
		return true; /* 3.11/3.12: fixed tables */
	if (runtime_size && L->runtime_size != runtime_size)
		return false;
	if (!type_named(r, p, p->code_type, "code") ||
	    rd(r, p->pid, p->none + L->ob_type, &none_type, sizeof(none_type)) ||
	    !type_named(r, p, none_type, "NoneType"))
		return false;
	if (!head || rd(r, p->pid, head + L->is_threads_head, &th, sizeof(th)) || !th)
		return true;
	return !rd(r, p->pid, th + L->ts_interp, &interp, sizeof(interp)) && interp == head;
}

int pyreader__probe(struct pyreader *r, pid_t pid)
{
	struct py_syms s;
	struct proc *p;
	uint64_t bias = 0, dbg[PY_DEBUG_OFFSETS_WORDS], head;
	size_t nd = 0;
	uint32_t version;
	int err;

	if (!r || pid <= 0)
		return -EINVAL;
	memset(&s, 0, sizeof(s));
	r->st.probes++;
	p = proc_new(r, pid);
	if (!p)
		return -ENOMEM;
	err = find_runtime(r, pid, &s, &bias);
	if (!err && !s.runtime && s.eval)
		return p->state = -EPROTONOSUPPORT; /* CPython 3.6 */
	if (err || !s.runtime)
		return p->state = err;
	/* Py_Version is new in 3.11: a runtime without it is an older CPython */
	if (!s.version)
		return p->state = -EPROTONOSUPPORT;
	err = rd(r, pid, s.version + bias, &version, sizeof(version));
	if (err)
		return p->state = err == -EFAULT ? 0 : err;
	p->version = version;
	p->runtime = s.runtime + bias;
	p->code_type = s.code_type ? s.code_type + bias : 0;
	p->str_type = s.str_type ? s.str_type + bias : 0;
	p->bytes_type = s.bytes_type ? s.bytes_type + bias : 0;
	p->none = s.none ? s.none + bias : 0;
	p->eval_lo[0] = s.eval + bias;
	p->eval_hi[0] = p->eval_lo[0] + (s.eval_size ? s.eval_size : 1);
	p->nr_eval = 1;
	for (uint32_t i = 0; i < s.nr_cold && i < PY_EVAL_COLD_MAX; i++) {
		p->eval_lo[p->nr_eval] = s.cold_lo[i] + bias;
		p->eval_hi[p->nr_eval++] = s.cold_hi[i] + bias;
	}
	/* 3.13 on: the debug offsets (as much of them as _PyRuntime holds) */
	if ((version >> 16) >= 0x030d) {
		nd = PY_DEBUG_OFFSETS_WORDS;
		if (s.runtime_size && s.runtime_size / 8 < nd)
			nd = (size_t)(s.runtime_size / 8);
		err = rd(r, pid, p->runtime, dbg, nd * 8);
		if (err)
			return p->state = err == -EFAULT ? -EPROTONOSUPPORT : err;
	}
	err = py_layout_for(version, nd ? dbg : NULL, nd, &p->L);
	if (err == -EOPNOTSUPP)
		p->free_threaded = true;
	if (err || !p->code_type || !p->none)
		return p->state = -EPROTONOSUPPORT;
	/* readable at all? (ptrace access: another user's process fails here) */
	err = rd(r, pid, p->runtime + p->L.rt_interp_head, &head, sizeof(head));
	if (err)
		return p->state = err;
	/*
	 * 3.13 on, the checks read the type objects: before the runtime has an
	 * interpreter, the loader may not have relocated their pointers yet
	 * (a probe right after exec). Not yet, rather than never.
	 */
	if (!head && L_checked(p))
		return p->state = 0;
	if (!layout_holds(r, p, s.runtime_size, head))
		return p->state = -EPROTONOSUPPORT;
	r->st.processes++;
	return p->state = 1;
}

bool pyreader__layout(const struct pyreader *r, pid_t pid, struct py_layout *out)
{
	const struct proc *p = proc_get(r, pid);

	if (!p || p->state != 1)
		return false;
	*out = p->L;
	return true;
}

int pyreader__walk(const struct pyreader *r, pid_t pid, struct py_walk *out)
{
	const struct proc *p = proc_get(r, pid);
	const struct py_layout *L;

	if (!p || p->state != 1 || !out)
		return -ENODEV;
	L = &p->L;
	*out = (struct py_walk){
		.version = p->version,
		.runtime = p->runtime,
		.none = p->none,
		.tag_mask = L->tag_mask,
		.rt_interp_head = L->rt_interp_head,
		.is_next = L->is_next,
		.is_threads_head = L->is_threads_head,
		.ts_next = L->ts_next,
		.ts_native_tid = L->ts_native_tid,
		.ts_cframe = L->ts_cframe,
		.cf_current = L->cf_current,
		.ts_current_frame = L->ts_current_frame,
		.fr_code = L->fr_code,
		.fr_previous = L->fr_previous,
		.fr_instr = L->fr_instr,
		.fr_is_entry = L->fr_is_entry,
		.fr_owner = L->fr_owner,
		.frame_bytes = L->frame_bytes,
		.stub_owner = L->stub_owner,
		/* as snapshot_once: 3.13 on (a thread state with interp), it runs None */
		.stub_runs_none = L->ts_interp != PY_NO_FIELD,
		.owner_max = L->stub_owner == PY_NO_FIELD ? 3 : OWNER_MAX,
		.co_qualname = L->co_qualname,
		.co_filename = L->co_filename,
		.co_firstlineno = L->co_firstlineno,
		.str_type = p->str_type,
		.ob_type = L->ob_type,
		.uni_length = L->uni_length,
		.uni_state = L->uni_state,
		.uni_ascii_size = L->uni_ascii_size,
		.uni_compact_size = L->uni_compact_size,
		.str_kind_shift = PY_STR_KIND_SHIFT,
		.str_compact_bit = PY_STR_COMPACT_BIT,
		.str_ascii_bit = PY_STR_ASCII_BIT,
	};
	return 0;
}

bool pyreader__free_threaded(const struct pyreader *r, pid_t pid)
{
	const struct proc *p = proc_get(r, pid);

	return p && p->free_threaded;
}

uint32_t pyreader__version(const struct pyreader *r, pid_t pid)
{
	const struct proc *p = proc_get(r, pid);

	return p ? p->version : 0;
}

void pyreader__forget(struct pyreader *r, pid_t pid)
{
	struct proc *p = proc_get(r, pid);

	if (p) {
		proc_clear(p);
		p->pid = pid;
		p->ip_reg = -1;
		p->other_ns = -1;
		u64map_init(&p->tstates);
		u64map_init(&p->codes);
		u64map_init(&p->copied);
		u64map_init(&p->nstids);
	}
}

static bool in_eval(const struct proc *p, uint64_t ip)
{
	for (uint32_t i = 0; i < p->nr_eval; i++)
		if (ip >= p->eval_lo[i] && ip < p->eval_hi[i])
			return true;
	return false;
}

bool pyreader__is_eval(const struct pyreader *r, pid_t pid, uint64_t ip)
{
	const struct proc *p = proc_get(r, pid);

	return p && p->state == 1 && in_eval(p, ip);
}

/* ---- threads and frames ---------------------------------------------------- */

/* Walk every interpreter's threads, remembering each tid's thread state. */
static int scan_threads(struct pyreader *r, struct proc *p)
{
	const struct py_layout *L = &p->L;
	uint64_t interp, th, next;
	uint8_t ts[TSTATE_MAX];
	int err;

	err = rd(r, p->pid, p->runtime + L->rt_interp_head, &interp, sizeof(interp));
	for (int i = 0; !err && interp && i < MAX_INTERPRETERS; i++) {
		err = rd(r, p->pid, interp + L->is_threads_head, &th, sizeof(th));
		for (int j = 0; !err && th && j < MAX_THREADS; j++) {
			err = rd(r, p->pid, th, ts, L->tstate_bytes);
			if (err)
				break;
			if (u64map_put(&p->tstates, u64_at(ts, L->ts_native_tid), th))
				return -ENOMEM;
			next = u64_at(ts, L->ts_next);
			th = next == th ? 0 : next;
		}
		if (!err)
			err = rd(r, p->pid, interp + L->is_next, &next, sizeof(next));
		interp = !err && next != interp ? next : 0;
	}
	return err;
}

/* Whether pid lives in another PID namespace than ours. */
static bool in_other_ns(struct proc *p)
{
	char path[64];
	struct stat mine, its;

	if (p->other_ns < 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)p->pid);
		/* unknown (no access to the link, no namespaces): NSpid decides, per thread */
		if (stat("/proc/self/ns/pid", &mine) || stat(path, &its))
			p->other_ns = 1;
		else
			p->other_ns = mine.st_dev != its.st_dev || mine.st_ino != its.st_ino;
	}
	return p->other_ns;
}

/*
 * The id thread tid has in its process's PID namespace: what the thread
 * states hold. Read once per thread (a tid is not reused within one
 * process while its thread runs); tid itself when it cannot be read.
 */
static uint64_t native_tid(struct proc *p, pid_t tid)
{
	uint64_t v;
	uint32_t ns;

	if (!in_other_ns(p))
		return (uint64_t)tid;
	if (u64map_get(&p->nstids, (uint64_t)tid, &v))
		return v;
	if (proc_ns_tid((uint32_t)p->pid, (uint32_t)tid, &ns))
		return (uint64_t)tid;
	u64map_put(&p->nstids, (uint64_t)tid, ns); /* no room: read again next time */
	return ns;
}

/* tid's thread state, its first tstate_bytes read into ts; 0 if it has none. */
static uint64_t find_tstate(struct pyreader *r, struct proc *p, pid_t tid, uint8_t *ts)
{
	uint64_t th, ntid = native_tid(p, tid);

	for (int pass = 0; pass < 2; pass++) {
		if (pass && scan_threads(r, p) < 0)
			return 0;
		if (!u64map_get(&p->tstates, ntid, &th))
			continue;
		if (!rd(r, p->pid, th, ts, p->L.tstate_bytes) &&
		    u64_at(ts, p->L.ts_native_tid) == ntid)
			return th;
		u64map_del(&p->tstates, ntid);
	}
	return 0;
}

/*
 * The first len bytes of the frame at addr: from the window last read when it
 * lies there, else from a new window ending at it (a thread's frames grow
 * up its data stack: older ones lie below), else from the frame alone.
 */
static int read_frame(struct pyreader *r, pid_t pid, uint64_t addr, uint8_t *out, size_t len)
{
	uint64_t lo;

	if (r->win_pid == pid && addr >= r->win_lo && addr - r->win_lo <= r->win_len &&
	    r->win_len - (addr - r->win_lo) >= len) {
		memcpy(out, r->win + (addr - r->win_lo), len);
		return 0;
	}
	/* the frame's 4 KiB page and the pages below it, WINDOW bytes at most */
	lo = addr & ~(uint64_t)0xfff;
	lo = lo >= WINDOW - 4096 ? lo - (WINDOW - 4096) : 0;
	if (addr + len - lo > WINDOW)
		lo = addr + len - WINDOW;
	if (lo && lo < addr && !rd(r, pid, lo, r->win, (size_t)(addr + len - lo))) {
		r->win_pid = pid;
		r->win_lo = lo;
		r->win_len = (size_t)(addr + len - lo);
		memcpy(out, r->win + (addr - lo), len);
		return 0;
	}
	r->win_pid = 0;
	return rd(r, pid, addr, out, len);
}

/* The thread's innermost frame now (and its _PyCFrame, 3.11/3.12). */
static int current_frame(struct pyreader *r, const struct proc *p, uint64_t th, uint64_t *cframe,
			 uint64_t *frame)
{
	const struct py_layout *L = &p->L;
	int err;

	if (L->ts_cframe == PY_NO_FIELD) {
		*cframe = 0;
		return rd(r, p->pid, th + L->ts_current_frame, frame, sizeof(*frame));
	}
	err = rd(r, p->pid, th + L->ts_cframe, cframe, sizeof(*cframe));
	return err ? err : rd(r, p->pid, *cframe + L->cf_current, frame, sizeof(*frame));
}

static int snapshot_once(struct pyreader *r, struct proc *p, pid_t tid, struct py_snapshot *out);
static int resolve_codes(struct pyreader *r, struct proc *p, struct py_snapshot *snap,
			 bool keep_named);

/*
 * How many frames, counted from the outermost, two walks of one thread
 * read alike (address, code, instruction, kind). Neither may have been cut.
 */
static uint32_t common_outer(const struct py_snapshot *a, const struct py_snapshot *b)
{
	uint32_t n = 0;

	if (a->cut || b->cut || a->tstate != b->tstate)
		return 0;
	while (n < a->n && n < b->n) {
		const struct py_frame *x = &a->frames[a->n - 1 - n], *y = &b->frames[b->n - 1 - n];

		if (x->addr != y->addr || x->code != y->code || x->instr != y->instr ||
		    x->entry != y->entry || x->stub != y->stub)
			break;
		n++;
	}
	return n;
}

/*
 * The chain is read frame by frame while the thread runs: a read that
 * began in one state of the chain and ended in another could join frames
 * that never were on one stack (a frame popped, its slot taken by a
 * sibling). The thread's innermost frame is read again after the walk: if
 * it moved, the walk is done again, a few times at most.
 *
 * A thread deep in fast-changing code (imports) may move during every
 * walk. Its older frames wait, unchanged, for the calls they made: the
 * outer frames two walks read alike are kept as a partial snapshot, whose
 * innermost group (cut anywhere) pyreader__match never shows.
 */
int pyreader__snapshot(struct pyreader *r, pid_t pid, pid_t tid, struct py_snapshot *out)
{
	struct proc *p = proc_get(r, pid);
	uint64_t cframe, frame;
	uint32_t keep = 0;
	bool walked = false;
	int err = -EFAULT;

	if (!r || !out)
		return -EINVAL;
	if (!p || p->state != 1)
		return -ENODEV;
	for (int attempt = 0; attempt < 3; attempt++) {
		if (attempt)
			r->st.snapshot_retries++;
		err = snapshot_once(r, p, tid, out);
		if (err == -EFAULT)
			continue; /* a pointer read mid-change: try again */
		if (err)
			break;
		err = current_frame(r, p, out->tstate, &cframe, &frame);
		if (err)
			break;
		if (cframe == out->cframe && frame == (out->n ? out->frames[0].addr : 0)) {
			err = resolve_codes(r, p, out, false);
			if (!err)
				return 0;
			if (err != -EFAULT)
				break;
			continue;
		}
		err = -EFAULT;
		if (walked)
			keep = common_outer(r->prev, out);
		memcpy(r->prev, out,
		       offsetof(struct py_snapshot, frames) + out->n * sizeof(out->frames[0]));
		walked = true;
	}
	if (err == -EFAULT && keep) {
		/* r->prev holds the last walk; its outer `keep` frames are the ones to show */
		memmove(out->frames, r->prev->frames + (r->prev->n - keep),
			keep * sizeof(out->frames[0]));
		out->tstate = r->prev->tstate;
		out->cframe = 0;
		out->n = keep;
		out->cut = false;
		out->partial = true;
		err = resolve_codes(r, p, out, false);
		if (!err) {
			r->st.snapshot_partial++;
			return 0;
		}
	}
	if (err != -ENOENT)
		r->st.snapshot_failures++;
	return err == -ESRCH || err == -ENOENT || err == -ENOMEM ? err : -EFAULT;
}

static int snapshot_once(struct pyreader *r, struct proc *p, pid_t tid, struct py_snapshot *out)
{
	pid_t pid = p->pid;
	uint8_t ts[TSTATE_MAX], fb[FRAME_MAX];
	uint32_t steps = 0;
	uint64_t th, frame, cframe = 0;
	const struct py_layout *L = &p->L;
	int err;

	out->n = 0;
	out->cut = out->partial = out->at_sample = false;
	out->tstate = out->cframe = 0;
	r->win_pid = 0; /* what the window holds is from an earlier read */
	th = find_tstate(r, p, tid, ts);
	if (!th) {
		if (rd(r, pid, p->runtime, &frame, sizeof(frame)) == -ESRCH)
			return -ESRCH;
		return -ENOENT;
	}
	out->tstate = th;
	if (L->ts_cframe != PY_NO_FIELD) {
		cframe = u64_at(ts, L->ts_cframe);
		err = rd(r, pid, cframe + L->cf_current, &frame, sizeof(frame));
		if (err)
			goto fail;
		out->cframe = cframe;
	} else {
		frame = u64_at(ts, L->ts_current_frame);
	}
	r->st.snapshots++;
	while (frame) {
		struct py_frame *f;
		uint8_t owner;

		if (out->n == PY_MAX_FRAMES) {
			out->cut = true;
			break;
		}
		err = read_frame(r, pid, frame, fb, L->frame_bytes);
		if (err)
			goto fail;
		f = &out->frames[out->n];
		/* read now, not copied at a sample: nothing to prove later */
		*f = (struct py_frame){ .addr = frame };
		/* 3.14: a _PyStackRef, whose low bits are flags */
		f->code = u64_at(fb, L->fr_code) & ~L->tag_mask;
		f->instr = u64_at(fb, L->fr_instr);
		f->entry = L->fr_is_entry != PY_NO_FIELD && fb[L->fr_is_entry];
		owner = fb[L->fr_owner];
		if (owner > OWNER_MAX || (L->stub_owner == PY_NO_FIELD && owner > 3)) {
			err = -EFAULT; /* not a frame (any more) */
			goto fail;
		}
		/* an eval call's entry frame; 3.13 on, it runs None */
		f->stub = L->stub_owner != PY_NO_FIELD && owner == L->stub_owner &&
			  (L->ts_interp == PY_NO_FIELD || f->code == p->none);
		frame = u64_at(fb, L->fr_previous);
		if (++steps > 2 * PY_MAX_FRAMES) {
			err = -EFAULT;
			goto fail;
		}
		/*
		 * Not shown: another frame the interpreter owns (no code object to
		 * show), and 3.14's frame whose executable is still NULL (being set
		 * up: CPython's own remote reader skips it too).
		 */
		if (!f->stub && ((L->stub_owner != PY_NO_FIELD && owner >= L->stub_owner) ||
				 (L->tag_mask && !f->code)))
			goto next;
		out->n++;
next:
		/* a chain that loops is being rewritten under us */
		for (uint32_t k = 0; frame && k < out->n; k++)
			if (out->frames[k].addr == frame) {
				err = -EFAULT;
				goto fail;
			}
	}
	return 0;
fail:
	return err == -ESRCH || err == -ENOMEM ? err : -EFAULT;
}

/* ---- matching a snapshot to a sample's eval calls -------------------------- */

struct span {
	uint32_t first, n;
	uint64_t stub; /* 3.12+: the stub frame that ends it (its eval call's entry), else 0 */
};

/* The snapshot's groups, innermost first; returns how many. */
static size_t split(const struct py_snapshot *snap, struct span *g, size_t max)
{
	size_t n = 0;
	uint32_t start = 0;

	for (uint32_t i = 0; i < snap->n && n < max; i++) {
		const struct py_frame *f = &snap->frames[i];

		if (f->stub) {
			g[n++] = (struct span){ .first = start, .n = i - start, .stub = f->addr };
			start = i + 1;
		} else if (f->entry) {
			g[n++] = (struct span){ .first = start, .n = i + 1 - start };
			start = i + 1;
		}
	}
	if (start < snap->n && n < max)
		g[n++] = (struct span){ .first = start, .n = snap->n - start };
	return n;
}

/* The word at addr of the copy; false outside it. */
static bool copy_word(const struct py_stack_copy *c, uint64_t addr, uint64_t *v)
{
	if (addr < c->sp || addr - c->sp > c->size || c->size - (addr - c->sp) < 8)
		return false;
	memcpy(v, c->data + (addr - c->sp), 8);
	return true;
}

static bool copy_byte(const struct py_stack_copy *c, uint64_t addr, uint8_t *v)
{
	if (addr < c->sp || addr - c->sp >= c->size)
		return false;
	*v = c->data[addr - c->sp];
	return true;
}

/* 3.11/3.12: is slot K below the CFAs a chain of _PyCFrames in the copy? */
static bool cframe_slot_fits(const struct proc *p, const struct py_stack_copy *c,
			     const struct py_snapshot *snap, const uint64_t *cfas, size_t n,
			     uint64_t k)
{
	uint64_t prev, cur;

	if (cfas[0] < k)
		return false;
	if (n >= 2) {
		for (size_t i = 0; i + 1 < n; i++)
			if (cfas[i + 1] >= k && copy_word(c, cfas[i] - k + p->L.cf_previous, &prev))
				return prev == cfas[i + 1] - k;
		return false;
	}
	/* one eval call: it must be the one the thread was in when read */
	return snap->cframe == cfas[0] - k && snap->n &&
	       copy_word(c, cfas[0] - k + p->L.cf_current, &cur) && cur == snap->frames[0].addr;
}

/* 3.13: does slot K below the first CFA hold a C-stack stub frame? */
static bool stub_at(const struct proc *p, const struct py_stack_copy *c, uint64_t addr)
{
	uint64_t exe;
	uint8_t owner;

	return copy_byte(c, addr + p->L.fr_owner, &owner) && owner == p->L.stub_owner &&
	       copy_word(c, addr + p->L.fr_code, &exe) && (exe & ~p->L.tag_mask) == p->none;
}

static void learn_slot(struct proc *p, const struct py_snapshot *snap,
		       const struct py_stack_copy *c, const uint64_t *cfas, size_t n)
{
	if (p->L.ts_cframe != PY_NO_FIELD) {
		for (uint64_t k = SLOT_MIN; k <= SLOT_MAX; k += 8)
			if (cframe_slot_fits(p, c, snap, cfas, n, k)) {
				p->slot = k;
				return;
			}
		return;
	}
	/* the newest stub of the snapshot is the newest eval call's, if it still runs */
	for (uint32_t i = 0; i < snap->n; i++) {
		uint64_t s = snap->frames[i].addr;

		if (!snap->frames[i].stub)
			continue;
		if (cfas[0] > s && cfas[0] - s >= SLOT_MIN && cfas[0] - s <= SLOT_MAX &&
		    stub_at(p, c, s))
			p->slot = cfas[0] - s;
		return;
	}
}

/*
 * Whether the newest call's innermost frame f ran the code it holds now
 * at the sample: the eval loop keeps its next instruction in a register
 * (which one is learned per process, from samples whose anchors agree),
 * and that register must point into f's code. A frame whose slot a sibling
 * call took between the sample and the read (same depth, same address)
 * fails here. *instr: the instruction at the sample, or 0 if not known.
 */
static bool leaf_agrees(struct pyreader *r, struct proc *p, const struct py_stack_copy *c,
			const struct py_frame *f, uint64_t *instr)
{
	const struct code_entry *e;
	uint64_t base, end, v;
	uint32_t best = 0;

	*instr = 0;
	if (!c->regs || f->stub || !f->code_ref || f->code_ref > p->nr_code)
		return true;
	e = &p->code[f->code_ref - 1];
	/* named from names copied at a sample: its code's size is not known */
	if (!e->code_bytes)
		return true;
	base = f->code + p->L.co_code_adaptive;
	end = base + e->code_bytes;
	if (p->ip_reg < 0) {
		if (p->ip_tries >= IP_REG_TRIES)
			return true; /* no register holds it: nothing to check against */
		for (int i = 0; i < PY_REGS; i++)
			if (i != PERF_REG_SP && i != PERF_REG_IP && (c->regs_mask >> i & 1) &&
			    c->regs[i] >= base && c->regs[i] <= end)
				p->ip_hits[i]++;
		if (++p->ip_tries == IP_REG_TRIES) {
			for (int i = 1; i < PY_REGS; i++)
				if (p->ip_hits[i] > p->ip_hits[best])
					best = (uint32_t)i;
			if (p->ip_hits[best] >= IP_REG_TRIES * 9 / 10)
				p->ip_reg = (int)best;
		}
		return true;
	}
	if (!(c->regs_mask >> p->ip_reg & 1))
		return true;
	v = c->regs[p->ip_reg];
	r->st.leaf_checks++;
	if (v < base || v > end) {
		r->st.leaf_mismatches++;
		return false;
	}
	/* it points past the instruction being run */
	*instr = v >= base + 2 ? v - 2 : v;
	return true;
}

size_t pyreader__find_evals(struct pyreader *r, pid_t pid, const uint64_t *pcs,
			    const uint64_t *cfas, size_t k, const struct py_stack_copy *copy,
			    bool *is_eval, bool *by_slot)
{
	struct proc *p = proc_get(r, pid);
	uint64_t older = 0, prev = 0;
	size_t n = 0;

	for (size_t i = 0; by_slot && i < k; i++)
		by_slot[i] = false;
	if (!p || p->state != 1 || !pcs || !cfas || !is_eval) {
		for (size_t i = 0; is_eval && i < k; i++)
			is_eval[i] = false;
		return 0;
	}
	for (size_t i = 0; i < k; i++)
		n += is_eval[i] = cfas[i] && in_eval(p, pcs[i]);
	if (!p->slot || !copy)
		return n;
	/* outermost first: each eval call's record links to the next older one's */
	for (size_t i = k; i-- > 0;) {
		uint64_t slot = cfas[i] - p->slot;

		if (!cfas[i] || cfas[i] < p->slot) {
			continue;
		} else if (is_eval[i]) {
			older = cfas[i];
			continue;
		}
		if (p->L.ts_cframe != PY_NO_FIELD) {
			uint64_t cur;

			/*
			 * Other C frames keep tstate->cframe too (for its use_tracing):
			 * a _PyCFrame of its own also holds its call's frame.
			 */
			if (!older || !copy_word(copy, slot + p->L.cf_previous, &prev) ||
			    prev != older - p->slot ||
			    !copy_word(copy, slot + p->L.cf_current, &cur) || !cur || cur % 8)
				continue;
		} else if (!stub_at(p, copy, slot)) {
			continue;
		}
		is_eval[i] = true;
		if (by_slot)
			by_slot[i] = true;
		older = cfas[i];
		n++;
		r->st.cold_evals++;
	}
	if (p->L.ts_cframe == PY_NO_FIELD)
		return n;
	/*
	 * A frame that is no eval call can hold, at the same depth, what a
	 * returned eval call left there: a stale _PyCFrame that still links to
	 * the older call. A real one is also linked to from the next newer
	 * call's: newest first, each call's record must be the one its newer
	 * call points to.
	 */
	for (size_t i = 0, have = 0; i < k; i++) {
		uint64_t expect = prev;

		if (!is_eval[i] || !cfas[i] || cfas[i] < p->slot)
			continue;
		if (have && !in_eval(p, pcs[i]) && expect != cfas[i] - p->slot) {
			is_eval[i] = false;
			if (by_slot)
				by_slot[i] = false;
			n--;
			r->st.cold_evals--;
			continue;
		}
		have = copy_word(copy, cfas[i] - p->slot + p->L.cf_previous, &prev);
	}
	return n;
}

#define ANCHOR_ABSENT (-3)
#define ANCHOR_UNREADABLE (-2)
#define ANCHOR_NONE (-1)

/*
 * The snapshot group an eval call with this CFA had at the sample:
 * 3.11/3.12: the group whose innermost frame is the one its _PyCFrame held;
 * 3.13: the group its stub frame ends (and, unless it is the newest, whose
 * innermost frame the next newer call's stub points to: checked by the
 * caller's consistent shift). ANCHOR_ABSENT when the snapshot has no such
 * group, ANCHOR_NONE when the group's next one is not the one its stub was
 * called from, ANCHOR_UNREADABLE when the copy does not hold its slot.
 */
static long anchor_group(const struct proc *p, const struct py_snapshot *snap,
			 const struct py_stack_copy *c, const struct span *g, size_t ng,
			 uint64_t cfa)
{
	uint64_t slot = cfa - p->slot, anchor;
	const struct py_frame *last = snap->n ? &snap->frames[snap->n - 1] : NULL;
	/* a chain cut short ends in a group without its outer frames: no call's */
	size_t closed = last && !last->stub && !last->entry && ng ? ng - 1 : ng;

	if (cfa < p->slot)
		return ANCHOR_UNREADABLE;
	if (p->L.ts_cframe != PY_NO_FIELD) {
		if (!copy_word(c, slot + p->L.cf_current, &anchor))
			return ANCHOR_UNREADABLE;
		for (size_t j = 0; j < closed; j++)
			if (g[j].n && snap->frames[g[j].first].addr == anchor)
				return (long)j;
		return ANCHOR_ABSENT;
	}
	if (!stub_at(p, c, slot))
		return ANCHOR_UNREADABLE;
	for (size_t j = 0; j < closed; j++) {
		if (g[j].stub != slot)
			continue;
		/* the frame it was called from, which the stub points to, leads the next group */
		if (j + 1 < ng && g[j + 1].n && copy_word(c, slot + p->L.fr_previous, &anchor) &&
		    anchor != snap->frames[g[j + 1].first].addr)
			return ANCHOR_NONE;
		return (long)j;
	}
	return ANCHOR_ABSENT;
}

int pyreader__match(struct pyreader *r, pid_t pid, const struct py_snapshot *snap,
		    const struct py_stack_copy *copy, const uint64_t *cfas, const bool *guessed,
		    size_t n, struct py_group *groups)
{
	struct proc *p = proc_get(r, pid);
	struct span g[PY_MAX_FRAMES + 1];
	struct py_stack_copy c;
	/* each call's place among the eval calls kept, innermost first */
	uint32_t rank[PY_MAX_FRAMES + 1];
	long anchor[PY_MAX_FRAMES + 1];
	size_t ng, kept = 0, last_k = 0;
	long last_j = -1;
	bool trusted = true;
	bool whole = snap && snap->at_sample && !snap->partial && !snap->cut;

	if (!r || !snap || !copy || (!cfas && n) || (!groups && n) || snap->n > PY_MAX_FRAMES ||
	    n > PY_MAX_FRAMES + 1)
		return -EINVAL;
	if (!p || p->state != 1)
		return -ENODEV;
	for (size_t k = 0; k < n; k++)
		groups[k] = (struct py_group){ .state = PY_GROUP_UNKNOWN };
	if (!n)
		return 0;
	ng = split(snap, g, PY_MAX_FRAMES + 1);
	/* a slot that no longer fits is learned again */
	if (p->slot && p->L.ts_cframe != PY_NO_FIELD && n >= 2 &&
	    !cframe_slot_fits(p, copy, snap, cfas, n, p->slot))
		p->slot = 0;
	/*
	 * 3.13 on, nothing else checks a slot once learned: one learned from
	 * a read that found the thread at another depth (a stub left in the
	 * copy by an earlier call) named no frame for the rest of the run
	 * (CI's Debian 13 root once: Python frames in 0.0% of eval calls; a
	 * slot learned 16 bytes off does that to every run). The newest call
	 * (not one guessed by its slot) must hold its stub there.
	 */
	if (p->slot && p->L.ts_cframe == PY_NO_FIELD && n && !(guessed && guessed[0])) {
		if (cfas[0] >= p->slot && stub_at(p, copy, cfas[0] - p->slot)) {
			p->slot_misses = 0;
		} else if (++p->slot_misses >= SLOT_MISSES) {
			p->slot = 0;
			p->slot_misses = 0;
			r->st.slots_unlearned++;
		}
	}
	if (!p->slot && !snap->partial)
		learn_slot(p, snap, copy, cfas, n);
	/*
	 * A chain copied at the sample holds the entry record of every call
	 * newer than one whose record it holds (all of them when it is whole).
	 * A call not in it there ran no Python frame at the sample: one found
	 * by its slot alone (no eval code at its return address) read a stale
	 * record that a returned call left in memory its frame never wrote; the
	 * newest call may be in its prologue or epilogue, its record not yet
	 * or no longer linked. Either is shown as the native frame it is.
	 */
	c = *copy;
	for (size_t k = n, held = 0; k-- > 0;) {
		anchor[k] =
			p->slot ? anchor_group(p, snap, copy, g, ng, cfas[k]) : ANCHOR_UNREADABLE;
		/* (3.11/3.12 records point into the heap: only a whole chain proves there) */
		if (anchor[k] >= 0 && p->L.ts_cframe == PY_NO_FIELD)
			held = 1;
		if (anchor[k] == ANCHOR_ABSENT && snap->at_sample && !snap->partial &&
		    (whole || held) && ((guessed && guessed[k]) || k == 0)) {
			groups[k].state = PY_GROUP_NOT_EVAL;
			r->st.not_evals++;
			if (k == 0)
				c.regs = NULL; /* no eval call's registers */
		}
	}
	/* the same when the next call's record, held, ends the innermost group */
	if (n > 1 && anchor[0] == ANCHOR_UNREADABLE && anchor[1] == 0 && snap->at_sample &&
	    !snap->partial && p->L.ts_cframe == PY_NO_FIELD &&
	    groups[0].state != PY_GROUP_NOT_EVAL) {
		groups[0].state = PY_GROUP_NOT_EVAL;
		r->st.not_evals++;
		c.regs = NULL;
	}
	for (size_t k = 0; k < n; k++)
		if (groups[k].state != PY_GROUP_NOT_EVAL)
			rank[k] = (uint32_t)kept++;
	copy = &c;
	if (!p->slot)
		goto place;
	/*
	 * Each call's anchor names the group it had at the sample. Old calls
	 * change least: they are matched first, outermost inward, and each
	 * newer call must sit exactly as many groups further in as it does in
	 * the sample (the thread may have gone deeper since: more groups now,
	 * on top). Once a call does not match, every newer one was made again
	 * after the sample and is not shown. A group that runs now (the
	 * innermost) is trusted only for the newest call: for an older one, its
	 * frame at the same address may be a sibling call's.
	 */
	for (size_t k = n; k-- > 0;) {
		long j;

		if (groups[k].state == PY_GROUP_NOT_EVAL)
			continue;
		j = anchor[k];
		if (j == ANCHOR_UNREADABLE)
			continue;
		/*
		 * A chain copied at the sample but cut short holds the newest
		 * calls' groups only: the oldest calls, whose records it does
		 * not reach, are not read, and say nothing of the newer ones.
		 */
		if (j == ANCHOR_ABSENT && snap->at_sample && snap->cut && trusted && last_j < 0) {
			r->st.beyond_cut++;
			continue;
		}
		if (j < 0 || !trusted || (j == 0 && (rank[k] != 0 || snap->partial)) ||
		    (last_j >= 0 && j != last_j - (long)(rank[last_k] - rank[k]))) {
			if (!trusted)
				r->st.changed_after++;
			else if (j < 0)
				r->st.changed_none++;
			else if (j == 0)
				r->st.changed_running++;
			else
				r->st.changed_shift++;
			groups[k].state = PY_GROUP_CHANGED;
			trusted = false;
			continue;
		}
		last_j = j;
		last_k = k;
		groups[k] = (struct py_group){ .first = g[j].first, .n = g[j].n };
		/*
		 * The newest call's innermost frame, checked against the sampled
		 * registers (a chain copied at the sample needs no check: the
		 * register only gives its instruction then, when it agrees).
		 */
		if (rank[k] == 0 && g[j].n &&
		    !leaf_agrees(r, p, copy, &snap->frames[g[j].first], &groups[k].instr) &&
		    !snap->at_sample) {
			groups[k].state = PY_GROUP_CHANGED;
			r->st.changed_leaf++;
		}
	}
place:
	/*
	 * A chain copied at the sample is the one each eval call had: the k-th
	 * group, innermost first, is the k-th eval call's when the counts agree
	 * and no anchor that could be read says otherwise. (Never for a chain
	 * cut or kept in part, nor one read after the sample.)
	 */
	if (whole && ng == kept) {
		bool agree = true;

		for (size_t k = 0; k < n; k++)
			if (groups[k].state == PY_GROUP_CHANGED ||
			    (groups[k].state == PY_GROUP_OK && groups[k].first != g[rank[k]].first))
				agree = false;
		for (size_t k = 0; agree && k < n; k++)
			if (groups[k].state == PY_GROUP_UNKNOWN) {
				groups[k] = (struct py_group){ .first = g[rank[k]].first,
							       .n = g[rank[k]].n };
				r->st.placed++;
			}
	}
	return 0;
}

/* ---- naming ---------------------------------------------------------------- */

static void utf8_put(char *out, size_t *len, uint32_t c)
{
	if (c < 0x80) {
		out[(*len)++] = (char)c;
	} else if (c < 0x800) {
		out[(*len)++] = (char)(0xc0 | c >> 6);
		out[(*len)++] = (char)(0x80 | (c & 0x3f));
	} else if (c < 0x10000) {
		out[(*len)++] = (char)(0xe0 | c >> 12);
		out[(*len)++] = (char)(0x80 | (c >> 6 & 0x3f));
		out[(*len)++] = (char)(0x80 | (c & 0x3f));
	} else {
		out[(*len)++] = (char)(0xf0 | (c >> 18 & 0x07));
		out[(*len)++] = (char)(0x80 | (c >> 12 & 0x3f));
		out[(*len)++] = (char)(0x80 | (c >> 6 & 0x3f));
		out[(*len)++] = (char)(0x80 | (c & 0x3f));
	}
}

/* A str object as UTF-8 (malloc'ed), or NULL. */
static char *read_str(struct pyreader *r, const struct proc *p, uint64_t addr)
{
	const struct py_layout *L = &p->L;
	uint8_t hdr[80], *raw;
	uint64_t length;
	uint32_t state, kind;
	bool ascii, compact;
	size_t hdr_len, n;
	char *out;

	if (L->uni_compact_size > sizeof(hdr) || rd(r, p->pid, addr, hdr, L->uni_ascii_size))
		return NULL;
	/* a str: what the code object's offsets point to must be one */
	if (p->str_type && u64_at(hdr, L->ob_type) != p->str_type)
		return NULL;
	length = u64_at(hdr, L->uni_length);
	state = u32_at(hdr, L->uni_state);
	kind = state >> PY_STR_KIND_SHIFT & 7;
	compact = state >> PY_STR_COMPACT_BIT & 1;
	ascii = state >> PY_STR_ASCII_BIT & 1;
	if (!compact || length > MAX_STRING || (kind != 1 && kind != 2 && kind != 4) ||
	    (ascii && kind != 1))
		return NULL;
	hdr_len = ascii ? L->uni_ascii_size : L->uni_compact_size;
	n = (size_t)length * kind;
	raw = malloc(n ? n : 1);
	out = malloc((size_t)length * 4 + 1);
	if (!raw || !out || rd(r, p->pid, addr + hdr_len, raw, n)) {
		free(raw);
		free(out);
		return NULL;
	}
	py_str_utf8(raw, (size_t)length, kind, out);
	free(raw);
	return out;
}

size_t py_str_utf8(const uint8_t *raw, size_t chars, unsigned kind, char *out)
{
	size_t len = 0;

	for (size_t i = 0; i < chars; i++) {
		uint32_t c = kind == 1	 ? raw[i]
			     : kind == 2 ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8)
					 : u32_at(raw, 4 * i);

		if (c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
			c = 0xfffd;
		utf8_put(out, &len, c);
	}
	out[len] = '\0';
	return len;
}

/* A bytes object's contents (malloc'ed, at most max bytes), or NULL. */
static uint8_t *read_bytes(struct pyreader *r, const struct proc *p, uint64_t addr, size_t max,
			   size_t *len)
{
	uint64_t size, type;
	uint8_t *buf;

	if (rd(r, p->pid, addr + p->L.bytes_size, &size, sizeof(size)) || size > max)
		return NULL;
	if (p->bytes_type &&
	    (rd(r, p->pid, addr + p->L.ob_type, &type, sizeof(type)) || type != p->bytes_type))
		return NULL;
	buf = malloc(size ? size : 1);
	if (buf && rd(r, p->pid, addr + p->L.bytes_data, buf, (size_t)size)) {
		free(buf);
		return NULL;
	}
	*len = (size_t)size;
	return buf;
}

/* Where a code object's header holds what names it. */
static void code_fields(const struct proc *p, const uint8_t *hdr, struct code_entry *e)
{
	const struct py_layout *L = &p->L;

	/* PyVarObject's ob_size, right after ob_type: code units of 2 bytes */
	e->code_bytes =
		u64_at(hdr, L->ob_type + 8) < (1u << 24) ? u64_at(hdr, L->ob_type + 8) * 2 : 0;
	e->qualname_p = u64_at(hdr, L->co_qualname);
	e->filename_p = u64_at(hdr, L->co_filename);
	e->linetable_p = u64_at(hdr, L->co_linetable);
	memcpy(&e->firstline, hdr + L->co_firstlineno, sizeof(e->firstline));
}

static size_t code_hdr_len(const struct proc *p)
{
	size_t need = p->L.co_linetable + 8;

	if (need < p->L.co_firstlineno + 4)
		need = p->L.co_firstlineno + 4;
	if (need < p->L.ob_type + 16)
		need = p->L.ob_type + 16;
	if (need < p->L.co_qualname + 8)
		need = p->L.co_qualname + 8;
	return need;
}

/*
 * The entry for the code object at addr whose header is hdr: the latest
 * one if the header still says the same, else a new one, named now (the
 * object may be freed once its frame is gone). Its index + 1, or a
 * negative errno.
 */
static int64_t code_entry_for(struct pyreader *r, struct proc *p, uint64_t addr, const uint8_t *hdr)
{
	struct code_entry e = { .addr = addr }, *old;
	uint64_t v;

	if (u64_at(hdr, p->L.ob_type) != p->code_type)
		return -EFAULT;
	code_fields(p, hdr, &e);
	if (u64map_get(&p->codes, addr, &v)) {
		old = &p->code[v];
		if (old->qualname_p == e.qualname_p && old->filename_p == e.filename_p &&
		    old->linetable_p == e.linetable_p && old->firstline == e.firstline &&
		    old->code_bytes == e.code_bytes) {
			r->st.code_cache_hits++;
			return (int64_t)v + 1;
		}
	}
	r->st.code_reads++;
	e.qualname = read_str(r, p, e.qualname_p);
	e.filename = read_str(r, p, e.filename_p);
	e.linetable = read_bytes(r, p, e.linetable_p, MAX_LINETABLE, &e.linetable_len);
	if (e.qualname && !strcmp(e.qualname, "<module>"))
		r->st.module_reads++;
	if (!e.qualname || !e.filename ||
	    grow_array((void **)&p->code, &p->code_cap, p->nr_code + 1, sizeof(*p->code)) ||
	    u64map_put(&p->codes, addr, p->nr_code)) {
		free(e.qualname);
		free(e.filename);
		free(e.linetable);
		return e.qualname && e.filename ? -ENOMEM : -EFAULT;
	}
	e.serial = ++r->code_serial;
	p->code[p->nr_code] = e;
	return (int64_t)++p->nr_code;
}

/*
 * Whether the code object whose header is hdr is another than the one a
 * frame copied at the sample ran: a code object freed since, its address
 * taken by a new one, names another function or module.
 */
static bool not_the_sampled(const struct proc *p, const uint8_t *hdr, const struct py_frame *f)
{
	int32_t firstline;

	if (!f->qualname)
		return false;
	memcpy(&firstline, hdr + p->L.co_firstlineno, sizeof(firstline));
	return u64_at(hdr, p->L.co_qualname) != f->qualname ||
	       u64_at(hdr, p->L.co_filename) != f->filename || firstline != f->firstline;
}

/* A frame resolve_codes leaves alone: a stub, or one named already when asked to keep it. */
static bool skipped(const struct py_frame *f, bool keep_named)
{
	return f->stub || (keep_named && f->code_ref);
}

/*
 * Check and name every code object of a snapshot: their headers in one
 * read, strings only for code objects not seen before. -EFAULT when a
 * frame's code pointer is not a code object (the chain was changing).
 * With keep_named, frames already named (code_ref set) are left as they are.
 */
static int resolve_codes(struct pyreader *r, struct proc *p, struct py_snapshot *snap,
			 bool keep_named)
{
	uint64_t addrs[PY_MAX_FRAMES];
	int64_t refs[PY_MAX_FRAMES];
	size_t n = 0, len = code_hdr_len(p);
	uint8_t *hdrs;
	int err = 0;

	if (len > CODE_HDR)
		return -EFAULT;
	for (uint32_t i = 0; i < snap->n; i++) {
		size_t k = 0;

		if (skipped(&snap->frames[i], keep_named))
			continue;
		while (k < n && addrs[k] != snap->frames[i].code)
			k++;
		if (k == n)
			addrs[n++] = snap->frames[i].code;
	}
	if (!n)
		return 0;
	hdrs = malloc(n * CODE_HDR + 1);
	if (!hdrs)
		return -ENOMEM;
	r->st.reads++;
	r->st.bytes_read += n * len;
	err = py_readv(p->pid, addrs, n, CODE_HDR, hdrs);
	/* a header near the end of a mapping: read just what is needed, one by one */
	if (err == -EFAULT) {
		err = 0;
		for (size_t k = 0; !err && k < n; k++)
			err = rd(r, p->pid, addrs[k], hdrs + k * CODE_HDR, len);
	}
	for (size_t k = 0; !err && k < n; k++) {
		refs[k] = code_entry_for(r, p, addrs[k], hdrs + k * CODE_HDR);
		if (refs[k] < 0)
			err = (int)refs[k];
	}
	for (uint32_t i = 0; !err && i < snap->n; i++) {
		size_t k = 0;

		if (skipped(&snap->frames[i], keep_named))
			continue;
		while (addrs[k] != snap->frames[i].code)
			k++;
		/* one frame's code object is not the sampled one: named one by one */
		if (not_the_sampled(p, hdrs + k * CODE_HDR, &snap->frames[i]))
			err = -ESTALE;
		else
			snap->frames[i].code_ref = (uint32_t)refs[k];
	}
	free(hdrs);
	return err;
}

/*
 * A frame copied at the sample named from what is known, without reading
 * the process: a code object named before at the same address whose
 * co_qualname, co_filename and co_firstlineno the copy holds alike is the
 * same function. Its entry (index + 1), else 0.
 */
static uint32_t known_as_copied(const struct proc *p, const struct py_frame *f)
{
	const struct code_entry *e;
	uint64_t v;

	if (!f->qualname || !u64map_get(&p->codes, f->code, &v) || v >= p->nr_code)
		return 0;
	e = &p->code[v];
	if (e->qualname_p != f->qualname || e->filename_p != f->filename ||
	    e->firstline != f->firstline)
		return 0;
	return (uint32_t)v + 1;
}

/* The copied-names map's key of f's four fields (u64map reserves UINT64_MAX: one bit less). */
static uint64_t copied_key(const struct py_frame *f)
{
	uint64_t w[4] = { f->code, f->qualname, f->filename, (uint32_t)f->firstline };

	return hash_bytes(w, sizeof(w), 0) >> 1;
}

/*
 * The entry of names copied at a sample for f's code object: f's own
 * copy, kept, or an earlier copy with the same code object, co_qualname,
 * co_filename and co_firstlineno (the proof a named code object is the
 * same one). No line table: the line is not known. Its index + 1, 0 when
 * there is none, or a negative errno.
 */
static int64_t copied_entry(struct pyreader *r, struct proc *p, const struct py_frame *f)
{
	uint64_t key = copied_key(f), v;
	struct code_entry e = { .addr = f->code,
				.qualname_p = f->qualname,
				.filename_p = f->filename,
				.firstline = f->firstline };

	if (!f->qualname)
		return 0;
	if (u64map_get(&p->copied, key, &v) && v < p->nr_code) {
		const struct code_entry *o = &p->code[v];

		if (o->addr == f->code && o->qualname_p == f->qualname &&
		    o->filename_p == f->filename && o->firstline == f->firstline)
			return (int64_t)v + 1;
	}
	if (!f->copied_qualname || !f->copied_filename)
		return 0;
	e.qualname = strdup(f->copied_qualname);
	e.filename = strdup(f->copied_filename);
	if (!e.qualname || !e.filename ||
	    grow_array((void **)&p->code, &p->code_cap, p->nr_code + 1, sizeof(*p->code)) ||
	    u64map_put(&p->copied, key, p->nr_code)) {
		free(e.qualname);
		free(e.filename);
		return -ENOMEM;
	}
	e.serial = ++r->code_serial;
	p->code[p->nr_code] = e;
	return (int64_t)++p->nr_code;
}

int pyreader__resolve(struct pyreader *r, pid_t pid, struct py_snapshot *snap)
{
	struct proc *p = proc_get(r, pid);

	if (!r || !snap || snap->n > PY_MAX_FRAMES)
		return -EINVAL;
	uint8_t hdr[CODE_HDR];
	int64_t ref;
	int unnamed = 0;
	uint32_t unknown = 0;

	if (!p || p->state != 1)
		return -ENODEV;
	if (!snap->n)
		return 0;
	/* names copied at this sample (code objects first seen) are kept for when they are freed */
	for (uint32_t i = 0; i < snap->n; i++)
		if (snap->frames[i].copied_qualname && copied_entry(r, p, &snap->frames[i]) < 0)
			return -ENOMEM;
	/*
	 * Frames known by their copied fields need no read: a snapshot of an
	 * import holds one freed module body among sixty frames named before
	 * (read again whole, those were 87% of the recorder's reads).
	 */
	for (uint32_t i = 0; i < snap->n; i++) {
		struct py_frame *f = &snap->frames[i];

		f->code_ref = f->stub ? 0 : known_as_copied(p, f);
		if (f->code_ref)
			r->st.code_cache_hits++;
		else if (!f->stub)
			unknown++;
	}
	/* the others' headers in one read; failing that, one by one */
	if (!unknown || !resolve_codes(r, p, snap, true))
		return 0;
	for (uint32_t i = 0; i < snap->n; i++) {
		struct py_frame *f = &snap->frames[i];

		/* named already (above, or by resolve_codes before the frame that failed it) */
		if (skipped(f, true))
			continue;
		ref = code_hdr_len(p) <= sizeof(hdr) && !rd(r, pid, f->code, hdr, code_hdr_len(p))
			      ? code_entry_for(r, p, f->code, hdr)
			      : -EFAULT;
		/* another code object at the address: the one sampled was freed */
		if (ref > 0 && not_the_sampled(p, hdr, f))
			ref = -ESTALE;
		if (ref <= 0) {
			int64_t c = copied_entry(r, p, f);

			if (c > 0)
				r->st.named_from_copy++;
			ref = c ? c : ref;
		}
		if (ref > 0)
			f->code_ref = (uint32_t)ref;
		else
			unnamed++;
	}
	return unnamed;
}

static bool varint(const uint8_t *t, size_t len, size_t *i, uint32_t *out)
{
	uint32_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*i >= len || shift > 28)
			return false;
		b = t[(*i)++];
		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	*out = v;
	return true;
}

/*
 * The line of code unit `unit` from a locations table (3.11-3.14, as
 * CPython's Objects/locations.md lays it out), starting at firstline.
 * 0 when the table does not cover it.
 */
static uint32_t line_of(const uint8_t *t, size_t len, int32_t firstline, uint64_t unit)
{
	int64_t line = firstline;
	uint64_t addr = 0;
	size_t i = 0;

	while (i < len) {
		uint8_t b = t[i++];
		unsigned code = b >> 3 & 15, units = (b & 7) + 1;
		uint32_t v;
		bool no_line = false;

		if (!(b & 0x80))
			return 0; /* not the start of an entry: a table we do not understand */
		if (code == 15) {
			no_line = true;
		} else if (code == 14 || code == 13) {
			if (!varint(t, len, &i, &v))
				return 0;
			line += v & 1 ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
			for (int k = 0; code == 14 && k < 3; k++)
				if (!varint(t, len, &i, &v))
					return 0;
		} else if (code >= 10) {
			line += code - 10;
			i += 2;
		} else {
			i += 1;
		}
		if (unit < addr + units)
			return no_line || line <= 0 || line > UINT32_MAX ? 0 : (uint32_t)line;
		addr += units;
	}
	return 0;
}

int pyreader__describe(struct pyreader *r, pid_t pid, const struct py_frame *f,
		       struct py_frame_info *out)
{
	struct proc *p = proc_get(r, pid);
	const struct code_entry *e;
	uint8_t hdr[CODE_HDR];
	uint64_t base;
	int64_t ref = f ? f->code_ref : 0;

	if (!r || !f || !out)
		return -EINVAL;
	if (!p || p->state != 1)
		return -ENODEV;
	if (f->stub)
		return -EFAULT;
	/* a frame the snapshot did not name: its code object as it is now */
	if (!ref || (size_t)ref > p->nr_code || p->code[ref - 1].addr != f->code) {
		if (code_hdr_len(p) > sizeof(hdr) || rd(r, pid, f->code, hdr, code_hdr_len(p)))
			return -EFAULT;
		ref = code_entry_for(r, p, f->code, hdr);
		if (ref < 0)
			return (int)ref;
	}
	e = &p->code[ref - 1];
	out->qualname = e->qualname;
	out->filename = e->filename;
	out->firstline = e->firstline > 0 ? (uint32_t)e->firstline : 0;
	out->code_serial = e->serial;
	base = f->code + p->L.co_code_adaptive;
	out->line = 0;
	if (f->instr >= base && e->linetable) {
		uint64_t unit = (f->instr - base) / 2;
		struct line_slot *ls = &r->lines[hash_u64(e->serial ^ unit << 32) % LINE_SLOTS];

		if (ls->serial != e->serial || ls->unit != unit) {
			ls->serial = e->serial;
			ls->unit = unit;
			ls->line = line_of(e->linetable, e->linetable_len, e->firstline, unit);
		}
		out->line = ls->line;
	}
	return 0;
}

const struct pyreader_stats *pyreader__stats(const struct pyreader *r)
{
	return r ? &r->st : NULL;
}
