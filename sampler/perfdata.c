/* SPDX-License-Identifier: MIT */
/*
 * perf.data reader. The file layout (described in the Linux sources, in
 * tools/perf/Documentation/perf.data-file-format.txt):
 *
 *   file mode: header { magic "PERFILE2", u64 size (104), u64 attr_size,
 *              section attrs, data, event_types; u64 features[4] }, where a
 *              section is { u64 offset, u64 size }. attrs holds
 *              { perf_event_attr (attr_size bytes), section ids } per event.
 *   pipe mode: header { magic, u64 size (16) }, then records only; events are
 *              described by HEADER_ATTR records in the stream.
 *
 * Records are the kernel's (perf_event_header + body) plus perf's own kinds
 * (type >= 64). Two of those are followed by payload not counted in their
 * size (TRACING_DATA, AUXTRACE), which a reader must skip; every other kind
 * is covered by its size, so a kind this reader does not know (a later
 * perf's) is skipped and counted, never taken for corruption.
 *
 * perf record -z writes what it reads from its rings as compressed records:
 * their payloads are one zstd stream whose output is ordinary records, one
 * of which may begin in one compressed record and end in the next
 * (unzstd.h). Up to Linux 6.15 they are COMPRESSED { header, payload }, whose
 * payload is the rest of the record (so the records after one are not
 * u64-aligned); from 6.16 COMPRESSED2 { header, u64 data_size, payload,
 * zero padding to 8 bytes }, whose payload is data_size bytes. The records
 * they hold are read as if they lay where their compressed record lies:
 * errors name that offset and the kind as "compressed SAMPLE". The feature
 * HEADER_COMPRESSED (a header section in file mode, a HEADER_FEATURE record
 * in pipe mode) says the method (zstd) and perf's buffer for one record's
 * output, which bounds what one may expand to.
 *
 * Nothing in the file is trusted: every section must lie inside the file,
 * every count fits the bytes that hold it, every record is decoded with the
 * same checks as live records, and a malformed record is an error naming its
 * offset and kind, never a skip or a read past the end.
 *
 * A file-mode data section is read through a window mapped from the file
 * (MAP_PRIVATE, read-only, never past the size fstat gives just before
 * mapping), and records are decoded where they lie. Only records that a
 * FINISHED_ROUND flush keeps for a later round, or that are queued when the
 * window moves, are copied; pages behind the last flushed round are given
 * back (MADV_DONTNEED), so the resident set stays a round or two. Pipe mode
 * (and a file that cannot be mapped) is read with read().
 *
 * A file that shrinks while it is mapped would raise SIGBUS on the pages past
 * its new end. While a window is mapped, a SIGBUS handler puts a zero page
 * over a faulting page of the window (a SIGBUS anywhere else goes to the
 * previous handler, or kills as before), and the read ends with "the file
 * shrank while it was read". Zeros (or other bytes, if the file is rewritten
 * in place) in a record already checked only change its values: every length
 * the consumer uses was copied out at decoding, and the records that carry
 * strings are copied out of the window before they are decoded to deliver.
 */
#include "sampler/perfdata.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sampler/order.h"
#include "sampler/unzstd.h"
#include "util/util.h"

#define PERF_MAGIC2 0x32454c4946524550ULL /* "PERFILE2" little-endian */
#define PERF_MAGIC1 0x454c494646524550ULL /* "PERFFILE": the format before it */
#define FILE_HEADER_SIZE 104
#define PIPE_HEADER_SIZE 16
#define MAX_ATTRS 4096
#define MAX_ATTR_SIZE 4096
#define MAX_RECORD 65535 /* a record's size is a u16 */
/* bytes mapped at a time: whole on most files, bounded on 32-bit address spaces */
#define WINDOW_DEFAULT (sizeof(void *) >= 8 ? (size_t)256 << 20 : (size_t)64 << 20)
#define RELEASE_STEP ((uint64_t)2 << 20) /* give back pages behind in steps of this */
#define PIN_SPAN ((uint64_t)16 << 20) /* queued records further behind are copied out */
/* perf record -z: what one COMPRESSED record may expand to when the header does not say */
#define COMP_REC_CAP ((uint64_t)64 << 20)
#define COMP_MMAP_MAX ((uint64_t)1 << 30) /* a larger mmap_len in HEADER_COMPRESSED is corrupt */
/* decompressed records waiting for their round: more is no perf output */
#define COMP_HELD_MAX ((size_t)1 << 30)
#define HEADER_BUILD_ID 2 /* the feature bit of the build-id table */
#define HEADER_COMPRESSED 27 /* the feature bit of the compression header */
#define BUILD_IDS_MAX ((uint64_t)16 << 20) /* a larger build-id table is no perf output */
#define BUILD_ID_FIXED 36 /* a build-id entry: header, s32 pid, u8 build_id[24]; then the name */
#define MISC_BUILD_ID_SIZE (1u << 15) /* the entry's byte 32 says how long the build-id is */
/* perf_event_attr's flags word, and its bit for deferred user callchains (uapi after 6.12) */
#define ATTR_FLAGS_OFF 40
#define ATTR_DEFER_CALLCHAIN (1ULL << 38)
#define ZSTD_COMPRESSION 1 /* HEADER_COMPRESSED's type for zstd */

/* perf's own record kinds (Linux: tools/lib/perf/include/perf/event.h) */
enum {
	PD_HEADER_ATTR = 64,
	PD_HEADER_EVENT_TYPE = 65,
	PD_HEADER_TRACING_DATA = 66,
	PD_HEADER_BUILD_ID = 67, /* also the entries of the build-id table */
	PD_FINISHED_ROUND = 68,
	PD_ID_INDEX = 69,
	PD_AUXTRACE_INFO = 70,
	PD_AUXTRACE = 71,
	PD_HEADER_FEATURE = 80, /* pipe mode's header features: { header, u64 feat_id, data } */
	PD_COMPRESSED = 81,
	PD_COMPRESSED2 = 83, /* perf 6.16's -z: { header, u64 data_size, data, padding } */
	PD_LAST_KNOWN = 86, /* perf's kinds up to here (SCHEDSTAT_DOMAIN), all perf 7.2 knows */
};

struct pd_attr {
	struct perf_event_attr attr;
	struct rec_layout layout;
	enum rec_event event;
};

/* A file's build-id, from perf's build-id table, by the path mappings name it with. */
struct build_id {
	char *path;
	uint8_t size, id[20];
};

struct reader {
	int fd;
	uint64_t pos; /* bytes consumed from the stream */
	uint64_t end; /* stop before this offset (file mode with a known data size) */
	bool bounded;
	struct perfdata_error *err;
	struct perfdata_info *info;
	rec_cb cb;
	void *ctx;

	struct pd_attr *attrs;
	size_t nattrs, cap_attrs;
	struct u64map ids; /* event id -> attr index */

	/* file mode: the window [map_off, map_end) of the file is mapped at map */
	const uint8_t *map;
	size_t map_len;
	uint64_t map_off, map_end;
	uint64_t released; /* pages of the window below this were given back */
	bool guarded; /* this reader owns the SIGBUS guard */
	uint8_t *scratch; /* MAX_RECORD + 1 bytes: a non-sample record copied out to deliver */

	/*
	 * Records waiting for their round to be complete: in the window (pos
	 * their file offset; q.in_place of them), or copied. src is the event,
	 * kind the record type.
	 */
	struct order q;
	uint64_t round_max, seen_max;

	/* perf record -z: the compressed stream, read while inner is set */
	struct unzstd z;
	bool inner;
	uint64_t comp_off; /* the COMPRESSED record being read */
	uint64_t comp_cap; /* what one may expand to: perf's buffer for it */
	uint32_t comp_type; /* COMPRESSED or COMPRESSED2 */
	char name[32]; /* a kind without a name, for errors without a perfdata_error */

	/* perf's build-id table (HEADER_BUILD_ID, or such records in pipe mode), by path hash */
	struct build_id *bids;
	size_t nbids, cap_bids;
	struct u64map bid_of; /* hash of the path -> index in bids (first of that hash) */
};

/* ---- the SIGBUS guard over the mapped window ------------------------------ */

static atomic_flag guard_busy = ATOMIC_FLAG_INIT; /* one guarded reader at a time */
static struct sigaction guard_old;
static volatile uintptr_t guard_lo, guard_hi; /* the window; 0, 0 while it moves */
static volatile sig_atomic_t guard_hit;
static uintptr_t guard_page;
static size_t window_bytes; /* 0: WINDOW_DEFAULT; SIZE_MAX: never map (tests) */

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	uintptr_t a = (uintptr_t)si->si_addr;

	if (a >= guard_lo && a < guard_hi) {
		/* the file shrank under the window: read zeros there, and say so after */
		void *page = (void *)(a & ~(guard_page - 1));
		if (mmap(page, guard_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			 0) != MAP_FAILED) {
			guard_hit = 1;
			return;
		}
	}
	if (guard_old.sa_flags & SA_SIGINFO) {
		guard_old.sa_sigaction(sig, si, uctx);
		return;
	}
	if (guard_old.sa_handler != SIG_DFL && guard_old.sa_handler != SIG_IGN) {
		guard_old.sa_handler(sig);
		return;
	}
	/* not ours: the access faults again and the signal kills, as without us */
	signal(SIGBUS, SIG_DFL);
}

static bool guard_take(struct reader *r)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO };

	if (atomic_flag_test_and_set(&guard_busy))
		return false; /* another thread is reading a mapped perf.data: use read() */
	guard_page = (uintptr_t)sysconf(_SC_PAGESIZE);
	guard_lo = guard_hi = 0;
	guard_hit = 0;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &guard_old)) {
		atomic_flag_clear(&guard_busy);
		return false;
	}
	r->guarded = true;
	return true;
}

static void guard_release(struct reader *r)
{
	if (!r->guarded)
		return;
	guard_lo = guard_hi = 0;
	sigaction(SIGBUS, &guard_old, NULL);
	r->guarded = false;
	atomic_flag_clear(&guard_busy);
}

void perfdata__set_window(size_t bytes)
{
	window_bytes = bytes;
}

static size_t held_max = COMP_HELD_MAX;

void perfdata__set_held_max(size_t bytes)
{
	held_max = bytes ? bytes : COMP_HELD_MAX;
}

/* Record kinds by name, and as named when they came out of a COMPRESSED record. */
/* clang-format off */
#define K(type, name) { type, name, "compressed " name }
/* clang-format on */
static const struct kind {
	uint32_t type;
	const char *name, *compressed;
} kinds[] = {
	K(PERF_RECORD_MMAP, "MMAP"),
	K(PERF_RECORD_LOST, "LOST"),
	K(PERF_RECORD_COMM, "COMM"),
	K(PERF_RECORD_EXIT, "EXIT"),
	K(PERF_RECORD_THROTTLE, "THROTTLE"),
	K(PERF_RECORD_UNTHROTTLE, "UNTHROTTLE"),
	K(PERF_RECORD_FORK, "FORK"),
	K(PERF_RECORD_READ, "READ"),
	K(PERF_RECORD_SAMPLE, "SAMPLE"),
	K(PERF_RECORD_MMAP2, "MMAP2"),
	K(PERF_RECORD_AUX, "AUX"),
	K(PERF_RECORD_ITRACE_START, "ITRACE_START"),
	K(PERF_RECORD_LOST_SAMPLES, "LOST_SAMPLES"),
	K(PERF_RECORD_SWITCH, "SWITCH"),
	K(PERF_RECORD_SWITCH_CPU_WIDE, "SWITCH_CPU_WIDE"),
	/* the kernel's kinds after Linux 6.1's uapi header, by number */
	K(16, "NAMESPACES"),
	K(17, "KSYMBOL"),
	K(18, "BPF_EVENT"),
	K(19, "CGROUP"),
	K(20, "TEXT_POKE"),
	K(21, "AUX_OUTPUT_HW_ID"),
	K(22, "CALLCHAIN_DEFERRED"),
	K(PD_HEADER_ATTR, "HEADER_ATTR"),
	K(PD_HEADER_TRACING_DATA, "HEADER_TRACING_DATA"),
	K(PD_HEADER_BUILD_ID, "HEADER_BUILD_ID"),
	K(PD_FINISHED_ROUND, "FINISHED_ROUND"),
	K(PD_AUXTRACE, "AUXTRACE"),
	K(PD_HEADER_FEATURE, "HEADER_FEATURE"),
	K(PD_COMPRESSED, "COMPRESSED"),
	K(PD_COMPRESSED2, "COMPRESSED2"),
#undef K
};

/* A kind's name, or NULL for a kind without one here. */
static const char *kind_name(uint32_t type)
{
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		if (kinds[i].type == type)
			return kinds[i].name;
	return NULL;
}

/* The name of a record read out of a COMPRESSED record: "compressed SAMPLE". */
static const char *compressed_name(const char *record)
{
	for (size_t i = 0; record && i < ARRAY_SIZE(kinds); i++)
		if (strcmp(kinds[i].name, record) == 0)
			return kinds[i].compressed;
	return record;
}

/* err (-EINVAL: malformed; -EOPNOTSUPP: well-formed, not read here) with what, where, which. */
static int fail_as(struct reader *r, int err, const char *what, uint64_t off, const char *record)
{
	/* whatever went wrong after the file shrank under the window, that is the cause */
	if (r->guarded && guard_hit) {
		what = "the file shrank while it was read";
		err = -EINVAL;
	}
	if (r->err) {
		r->err->what = what;
		r->err->offset = off;
		r->err->record = r->inner ? compressed_name(record) : record;
	}
	return err;
}

static int fail(struct reader *r, const char *what, uint64_t off, const char *record)
{
	return fail_as(r, -EINVAL, what, off, record);
}

static int unsupported(struct reader *r, const char *what, uint64_t off, const char *record)
{
	return fail_as(r, -EOPNOTSUPP, what, off, record);
}

/* The name of a record of this type in errors: "SAMPLE", or "record type 97". */
static const char *type_name(struct reader *r, uint32_t type)
{
	const char *name = kind_name(type);
	char *buf = r->err ? r->err->name : r->name;
	size_t size = r->err ? sizeof(r->err->name) : sizeof(r->name);

	if (name)
		return name;
	snprintf(buf, size, "%srecord type %u", r->inner ? "compressed " : "", type);
	return buf;
}

bool perfdata__is_perf_file(const void *buf, size_t len)
{
	uint64_t m = len >= 8 ? get_le64(buf) : 0;

	/* the ones not read are read far enough to say so */
	return m == PERF_MAGIC2 || m == __builtin_bswap64(PERF_MAGIC2) || m == PERF_MAGIC1;
}

/* ---- reading bytes --------------------------------------------------------- */

/* Reads exactly len bytes; 0, 1 on a clean end of stream before any byte, or -errno. */
static int read_exact(struct reader *r, void *buf, size_t len, bool eof_ok)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(r->fd, (uint8_t *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return got == 0 && eof_ok ? 1 : -ENODATA;
		got += (size_t)n;
	}
	r->pos += len;
	return 0;
}

/* Skips len bytes; past the end of a bounded data section counts as truncated (-ENODATA). */
static int skip_bytes(struct reader *r, uint64_t len)
{
	uint8_t buf[65536];

	if (r->bounded && len > r->end - r->pos)
		return -ENODATA;
	if (r->map) {
		r->pos += len; /* the next record's mapping checks the file's size */
		return 0;
	}
	while (len) {
		size_t chunk = len > sizeof(buf) ? sizeof(buf) : (size_t)len;
		int e = read_exact(r, buf, chunk, false);
		if (e)
			return e;
		len -= chunk;
	}
	return 0;
}

static int pread_exact(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA;
		got += (size_t)n;
	}
	return 0;
}

/* ---- the mapped window ----------------------------------------------------- */

static const uint8_t *qrec_data(const struct reader *r, const struct order_rec *q)
{
	return q->off == ORDER_IN_PLACE ? r->map + (q->pos - r->map_off) : order_copied(&r->q, q);
}

/*
 * Copies the queued records that lie in the window before file offset
 * `below` into the queue: all of them (UINT64_MAX) before the window moves.
 */
static int unpin(struct reader *r, uint64_t below)
{
	for (size_t i = 0; r->q.in_place && i < r->q.nr; i++) {
		struct order_rec *q = &r->q.recs[i];
		int e;

		if (q->off != ORDER_IN_PLACE || q->pos >= below)
			continue;
		e = order_copy_in(&r->q, q, qrec_data(r, q));
		if (e)
			return e;
	}
	return 0;
}

static void unmap_window(struct reader *r)
{
	guard_lo = guard_hi = 0;
	if (r->map)
		munmap((void *)r->map, r->map_len);
	r->map = NULL;
	r->map_len = 0;
	r->map_off = r->map_end = 0;
}

/*
 * Maps the window that starts at the page holding off and ends at most a
 * window later, never past the data section or the file's current size.
 * A file shorter now than when its header was checked has shrunk: that is
 * an error, never a mapping past its end. 0, -EINVAL (r->err set) or -errno.
 */
static int map_window(struct reader *r, uint64_t off)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start = off & ~(page - 1), end;
	size_t window = window_bytes ? window_bytes : WINDOW_DEFAULT;
	struct stat st;
	void *m;
	int e;

	if (window < 2 * (MAX_RECORD + page))
		window = 2 * (MAX_RECORD + page); /* a window always holds a whole record */
	end = r->end - start > window ? start + window : r->end;
	e = unpin(r, UINT64_MAX);
	if (e)
		return e;
	unmap_window(r);
	if (fstat(r->fd, &st))
		return -errno;
	if ((uint64_t)st.st_size < end)
		return fail(r, "the file shrank while it was read", off, "header");
	if (end - start > SIZE_MAX)
		return -ENOMEM;
	m = mmap(NULL, (size_t)(end - start), PROT_READ, MAP_PRIVATE, r->fd, (off_t)start);
	if (m == MAP_FAILED)
		return -errno;
	madvise(m, (size_t)(end - start), MADV_SEQUENTIAL);
	r->map = m;
	r->map_len = (size_t)(end - start);
	r->map_off = r->released = start;
	r->map_end = end;
	guard_lo = (uintptr_t)m;
	guard_hi = (uintptr_t)m + r->map_len;
	return 0;
}

/* Points *p at the len bytes at file offset off, moving the window if it must. */
static int map_at(struct reader *r, uint64_t off, size_t len, const uint8_t **p)
{
	int e;

	if (off < r->map_off || off > r->map_end || len > r->map_end - off) {
		e = map_window(r, off);
		if (e)
			return e;
	}
	*p = r->map + (off - r->map_off);
	return 0;
}

/* The file offset of the first queued record in the window, off if none is before it. */
static uint64_t lowest_in_window(const struct reader *r, uint64_t off)
{
	uint64_t low = off;

	for (size_t i = 0; r->q.in_place && i < r->q.nr; i++)
		if (r->q.recs[i].off == ORDER_IN_PLACE && r->q.recs[i].pos < low)
			low = r->q.recs[i].pos;
	return low;
}

/*
 * Gives back the pages of the window behind off that no queued record lies
 * in. Records still queued from far behind (a time far ahead of the others
 * keeps a record queued to the end) are copied out first, so that the
 * resident part of the window stays a few rounds.
 */
static int release_behind(struct reader *r, uint64_t off)
{
	uint64_t page = guard_page, low = off, to;
	int e;

	if (!r->map)
		return 0;
	low = lowest_in_window(r, off);
	if (off - low > PIN_SPAN) {
		e = unpin(r, off - PIN_SPAN / 2);
		if (e)
			return e;
		low = lowest_in_window(r, off);
	}
	to = low & ~(page - 1);
	if (to < r->released || to - r->released < RELEASE_STEP)
		return 0;
	madvise((void *)(r->map + (r->released - r->map_off)), (size_t)(to - r->released),
		MADV_DONTNEED);
	r->released = to;
	return 0;
}

/* ---- events ---------------------------------------------------------------- */

static void event_name(const struct perf_event_attr *a, char *buf, size_t size)
{
	if (a->type == PERF_TYPE_SOFTWARE && a->config == PERF_COUNT_SW_CPU_CLOCK)
		snprintf(buf, size, "cpu-clock");
	else if (a->type == PERF_TYPE_SOFTWARE && a->config == PERF_COUNT_SW_TASK_CLOCK)
		snprintf(buf, size, "task-clock");
	else if (a->type == PERF_TYPE_SOFTWARE && a->config == PERF_COUNT_SW_CONTEXT_SWITCHES)
		snprintf(buf, size, "context-switches");
	else if (a->type == PERF_TYPE_HARDWARE && a->config == PERF_COUNT_HW_CPU_CYCLES)
		snprintf(buf, size, "cycles");
	else
		snprintf(buf, size, "event %u:%llu", a->type, (unsigned long long)a->config);
}

/* Adds an event from `bytes` (an on-disk perf_event_attr of `size` bytes). */
static int add_attr(struct reader *r, const uint8_t *bytes, size_t size, uint64_t off)
{
	struct pd_attr *pa;

	if (r->nattrs >= MAX_ATTRS)
		return fail(r, "too many events", off, "header");
	if (grow_array((void **)&r->attrs, &r->cap_attrs, r->nattrs + 1, sizeof(*r->attrs)))
		return -ENOMEM;
	pa = &r->attrs[r->nattrs];
	memset(pa, 0, sizeof(*pa));
	memcpy(&pa->attr, bytes, size < sizeof(pa->attr) ? size : sizeof(pa->attr));
	/* layouts whose size depends on what struct rec_layout does not carry */
	if (pa->attr.sample_type & PERF_SAMPLE_READ)
		return unsupported(r,
				   "events that sample counter values (PERF_SAMPLE_READ: perf "
				   "record -s, or event groups with :S) are not supported: record "
				   "without them",
				   off, "header");
	if ((pa->attr.sample_type & PERF_SAMPLE_BRANCH_STACK) &&
	    (pa->attr.sample_type & (PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER)))
		return unsupported(r,
				   "events that sample branch stacks (perf record -b or -j) with "
				   "--call-graph dwarf are not supported: record with one of them",
				   off, "header");
	/* the user part of their stacks comes later, in records this reader does not join */
	if (size >= ATTR_FLAGS_OFF + 8 && (get_le64(bytes + ATTR_FLAGS_OFF) & ATTR_DEFER_CALLCHAIN))
		return unsupported(r,
				   "events with deferred user callchains (attr.defer_callchain, "
				   "CALLCHAIN_DEFERRED records) are not supported: record without "
				   "deferral",
				   off, "header");
	pa->layout.sample_type = pa->attr.sample_type;
	pa->layout.sample_regs_user = pa->attr.sample_regs_user;
	pa->layout.sample_id_all = pa->attr.sample_id_all;
	pa->event = pa->attr.type == PERF_TYPE_SOFTWARE &&
				    pa->attr.config == PERF_COUNT_SW_CONTEXT_SWITCHES
			    ? EV_SWITCH
			    : EV_ONCPU;
	if (r->info) {
		if (pa->attr.sample_type & PERF_SAMPLE_CALLCHAIN)
			r->info->callchain = true;
		if (pa->attr.sample_type & PERF_SAMPLE_STACK_USER)
			r->info->dwarf = true;
		if (pa->attr.context_switch)
			r->info->switch_events = true;
		if (r->nattrs == 0) {
			r->info->freq = pa->attr.freq ? pa->attr.sample_freq : 0;
			event_name(&pa->attr, r->info->event, sizeof(r->info->event));
		}
		r->info->nr_attrs = (uint32_t)r->nattrs + 1;
	}
	r->nattrs++;
	return 0;
}

static int add_id(struct reader *r, uint64_t id, size_t attr)
{
	if (id == UINT64_MAX)
		return 0;
	return u64map_put(&r->ids, id, attr);
}

/*
 * Which event a record belongs to. With one event, that one. With several,
 * perf sets PERF_SAMPLE_IDENTIFIER: the first u64 of a sample, the last of a
 * non-sample record's sample_id trailer.
 */
static int attr_of(struct reader *r, uint32_t type, const uint8_t *rec, size_t len, uint64_t off,
		   size_t *out)
{
	uint64_t id, idx;

	if (r->nattrs == 0)
		return fail(r, "record before any event description", off, type_name(r, type));
	if (r->nattrs == 1) {
		*out = 0;
		return 0;
	}
	if (!(r->attrs[0].attr.sample_type & PERF_SAMPLE_IDENTIFIER)) {
		/* events that share one layout can be told apart only by id; use the first */
		*out = 0;
		return 0;
	}
	if (type == PERF_RECORD_SAMPLE) {
		if (len < 16)
			return fail(r, "record too short", off, type_name(r, type));
		id = get_le64(rec + 8);
	} else {
		if (!r->attrs[0].attr.sample_id_all || len < 16) {
			*out = 0;
			return 0;
		}
		id = get_le64(rec + len - 8);
	}
	*out = u64map_get(&r->ids, id, &idx) ? (size_t)idx : 0;
	return 0;
}

/* ---- the time-ordered queue (order.h) ------------------------------------- */

/* PERF_RECORD_MMAP (perf writes it for the kernel and for old-style maps) as an MMAP2. */
static int decode_mmap1(const struct pd_attr *pa, const uint8_t *d, size_t len, struct rec *out)
{
	size_t fixed = 8 + 4 + 4 + 8 + 8 + 8;

	if (len < fixed + 1)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->type = REC_MMAP2;
	out->misc = (uint16_t)get_le32(d + 4); /* bytes 6-7 are the size */
	out->mmap2.pid = get_le32(d + 8);
	out->mmap2.tid = get_le32(d + 12);
	out->mmap2.addr = get_le64(d + 16);
	out->mmap2.len = get_le64(d + 24);
	out->mmap2.pgoff = get_le64(d + 32);
	out->mmap2.prot = PROT_READ | PROT_EXEC;
	if (!memchr(d + fixed, '\0', len - fixed))
		return -EINVAL;
	out->mmap2.filename = (const char *)d + fixed;
	/* the time sits in the sample_id trailer: decode a COMM-shaped copy? no: count back */
	if (pa->layout.sample_id_all && (pa->layout.sample_type & PERF_SAMPLE_TIME)) {
		size_t back = 8;
		uint64_t t = pa->layout.sample_type;
		back += (t & PERF_SAMPLE_ID ? 8 : 0) + (t & PERF_SAMPLE_STREAM_ID ? 8 : 0) +
			(t & PERF_SAMPLE_CPU ? 8 : 0) + (t & PERF_SAMPLE_IDENTIFIER ? 8 : 0);
		if (len < fixed + back)
			return -EINVAL;
		out->time = out->mmap2.time = get_le64(d + len - back);
	}
	return 0;
}

static int decode(const struct pd_attr *pa, const uint8_t *d, size_t len, struct rec *out)
{
	if (get_le32(d) == PERF_RECORD_MMAP)
		return decode_mmap1(pa, d, len, out);
	int e = rec_decode(&pa->layout, d, len, out);
	if (!e && out->type == REC_SAMPLE)
		out->sample.event = pa->event;
	return e;
}

/*
 * A mapping without a build-id whose path perf's build-id table lists gets
 * that build-id, in place of its device and inode: those name a file of the
 * machine (or container) where perf ran, the build-id the file wherever it
 * is read, as perf itself matches them.
 */
static void attach_build_id(const struct reader *r, struct rec_mmap2 *m)
{
	uint64_t idx;

	if (m->has_build_id || !r->nbids ||
	    !u64map_get(&r->bid_of, hash_bytes(m->filename, strlen(m->filename), 0), &idx))
		return;
	for (size_t i = (size_t)idx; i < r->nbids; i++) {
		const struct build_id *b = &r->bids[i];

		if (strcmp(b->path, m->filename))
			continue;
		m->has_build_id = true;
		m->build_id_size = b->size;
		memcpy(m->build_id, b->id, b->size);
		m->maj = m->min = 0;
		m->ino = 0;
		return;
	}
}

static int deliver(struct reader *r, const struct order_rec *q)
{
	const uint8_t *d = qrec_data(r, q);
	struct rec rec;
	int e;

	if (q->off == ORDER_IN_PLACE && q->kind != PERF_RECORD_SAMPLE) {
		/*
		 * the file may be rewritten under the window: hand out strings
		 * (file names, comms) from a copy, checked again, so that they
		 * stay NUL-terminated whatever happens to the file
		 */
		if (!r->scratch && !(r->scratch = malloc(MAX_RECORD + 1)))
			return -ENOMEM;
		d = memcpy(r->scratch, d, q->len);
	}
	e = decode(&r->attrs[q->src], d, q->len, &rec);
	if (e)
		return fail(r, "malformed record", q->pos, type_name(r, get_le32(d)));
	if (rec.type == REC_MMAP2 && rec.mmap2.pid == UINT32_MAX)
		return 0; /* the kernel's own maps: kernel frames are named from kallsyms */
	if (rec.type == REC_MMAP2)
		attach_build_id(r, &rec.mmap2);
	if (r->info) {
		r->info->records++;
		if (rec.type == REC_SAMPLE)
			r->info->samples++;
		if (rec.type == REC_LOST)
			r->info->lost += rec.lost.lost;
	}
	return r->cb(r->ctx, &rec);
}

/* Deliver queued records with time <= limit (all when flush_all), in time order. */
static int flush(struct reader *r, uint64_t limit, bool flush_all)
{
	size_t n, due;
	int e;

	if (!r->q.nr)
		return 0;
	order_sort(&r->q);
	due = order_due(&r->q, flush_all ? UINT64_MAX : limit);
	for (n = 0; n < due; n++) {
		const struct order_rec *q = &r->q.recs[n];

		e = deliver(r, q);
		if (!e && r->guarded && guard_hit)
			e = fail(r, "the file shrank while it was read", q->pos,
				 type_name(r, q->kind));
		if (e)
			return e;
	}
	/*
	 * keep the rest: those in the window stay there (release_behind bounds
	 * how far back they hold it), the copies are packed once most of the
	 * buffer is delivered, so that memory stays bounded by a round or two
	 */
	order_keep(&r->q, n, 0);
	return 0;
}

/* Queues the record d (in the window when in_map: then it is not copied). */
static int enqueue(struct reader *r, const uint8_t *d, size_t len, uint64_t off, bool in_map)
{
	uint32_t type = get_le32(d);
	struct rec rec;
	size_t attr = 0;
	int e;

	e = attr_of(r, type, d, len, off, &attr);
	if (e)
		return e;
	/* decode now so that a corrupt record is reported where it is, and to learn its time */
	if (decode(&r->attrs[attr], d, len, &rec))
		return fail(r, "malformed record", off, type_name(r, type));
	if (r->inner && order_held(&r->q) > held_max)
		return fail(r,
			    "more than 1 GiB of decompressed records between two rounds "
			    "(a zstd bomb?)",
			    off, type_name(r, type));
	if (in_map)
		e = order_push(&r->q, rec.time, off, (uint32_t)len, (uint32_t)attr, type);
	else
		e = order_push_copy(&r->q, rec.time, off, d, (uint32_t)len, (uint32_t)attr, type);
	if (e)
		return e;
	if (rec.time > r->seen_max)
		r->seen_max = rec.time;
	return 0;
}

/* ---- records --------------------------------------------------------------- */

/*
 * perf record -z's feature HEADER_COMPRESSED { u32 version, type, level,
 * ratio, mmap_len } (len bytes at feat, at file offset off): the method
 * must be zstd, and mmap_len (the buffer perf decompresses each compressed
 * record into) bounds what one may expand to.
 */
static int read_compression(struct reader *r, const uint8_t *feat, size_t len, uint64_t off,
			    const char *record)
{
	uint64_t mmap_len;

	if (len < 20)
		return fail(r, "compression header too short", off, record);
	if (get_le32(feat + 4) != ZSTD_COMPRESSION)
		return unsupported(r, "compressed with a method other than zstd", off + 4, record);
	mmap_len = get_le32(feat + 16);
	if (mmap_len < 4096 || mmap_len > COMP_MMAP_MAX)
		return fail(r, "bad buffer size in the compression header", off + 16, record);
	/* the bound is set before the first compressed record, as perf writes them */
	if (!r->z.buf)
		r->comp_cap = mmap_len;
	return 0;
}

static int handle_header_attr(struct reader *r, const uint8_t *d, size_t len, uint64_t off)
{
	const uint8_t *body = d + 8;
	size_t blen = len - 8;
	uint32_t asize;
	int e;

	if (blen < 8)
		return fail(r, "record too short", off, "HEADER_ATTR");
	asize = get_le32(body + 4);
	if (asize < PERF_ATTR_SIZE_VER0 || asize > blen || (blen - asize) % 8)
		return fail(r, "bad attribute size", off, "HEADER_ATTR");
	e = add_attr(r, body, asize, off);
	for (size_t i = asize; !e && i < blen; i += 8)
		e = add_id(r, get_le64(body + i), r->nattrs - 1);
	return e;
}

static int handle_record(struct reader *r, const uint8_t *rec, uint16_t size, uint64_t off,
			 bool in_map);

/* The decoder's error: in the compressed record, or in a record out of it. */
static int zstd_fail(struct reader *r)
{
	bool whole = r->z.kind == UINT32_MAX;
	int e;

	r->inner = !whole;
	e = fail(r, r->z.what, r->z.at, whole ? kind_name(r->comp_type) : type_name(r, r->z.kind));
	r->inner = false;
	r->z.what = NULL;
	return e;
}

/*
 * A compressed record (perf record -z) at off, of this type: its payload
 * (len bytes at p) continues the zstd stream, and the whole records it
 * completes are handled as if they lay here, copied (their bytes are in
 * the decoder's buffer). A record begun here may end in the next one.
 */
static int read_compressed(struct reader *r, uint32_t type, const uint8_t *p, size_t len,
			   uint64_t off)
{
	const uint8_t *rec;
	size_t rlen;
	uint64_t at;
	int e;

	if (!r->z.buf) {
		e = unzstd_init(&r->z, r->comp_cap ? r->comp_cap : COMP_REC_CAP);
		if (e)
			return e;
		if (r->info)
			r->info->compressed = true;
	}
	unzstd_feed(&r->z, p, len, off);
	r->inner = true;
	r->comp_off = off;
	r->comp_type = type;
	while ((e = unzstd_next(&r->z, &rec, &rlen, &at)) == 1) {
		e = handle_record(r, rec, (uint16_t)rlen, at, false);
		if (e)
			break;
	}
	r->inner = false;
	return e == -EINVAL && r->z.what ? zstd_fail(r) : e;
}

#define COMPRESSED2_WRAPPED                                                                      \
	"compressed data larger than its record (perf record -z from Linux 6.16 on writes this " \
	"when a buffer compresses to more than 64 KiB: record with a smaller -m, or without -z)"

/*
 * A COMPRESSED2 record: { header, u64 data_size, payload of data_size bytes,
 * zero padding to the next multiple of 8 }. A data_size past the record's
 * end is what perf record -z of Linux 6.16 writes when one push compresses
 * to more than a record holds (its u16 size wraps; perf cannot read those
 * files either): said as such.
 */
static int read_compressed2(struct reader *r, const uint8_t *rec, uint16_t size, uint64_t off)
{
	uint64_t data_size;

	if (size < 16)
		return fail(r, "record too short", off, "COMPRESSED2");
	data_size = get_le64(rec + 8);
	if (data_size > size - 16u)
		return fail(r, COMPRESSED2_WRAPPED, off, "COMPRESSED2");
	return read_compressed(r, PD_COMPRESSED2, rec + 16, (size_t)data_size, off);
}

/*
 * One entry of perf's build-id table (len bytes at d, at off): { header,
 * s32 pid, u8 build_id[20], u8 size, u8 pad[3], NUL-terminated path }. The
 * size byte counts when misc says so, else the build-id is 20 bytes. An
 * entry of a path already listed changes nothing (the first one holds).
 */
static int add_build_id(struct reader *r, const uint8_t *d, size_t len, uint64_t off)
{
	const char *path = (const char *)d + BUILD_ID_FIXED;
	size_t plen, size = 20;
	uint64_t key, idx;
	struct build_id *b;

	if (len < BUILD_ID_FIXED + 1 || !memchr(path, '\0', len - BUILD_ID_FIXED))
		return fail(r, "malformed build-id entry", off, "HEADER_BUILD_ID");
	if (get_le32(d + 4) & MISC_BUILD_ID_SIZE) {
		size = d[32];
		if (size > 20)
			return fail(r, "build-id longer than 20 bytes", off, "HEADER_BUILD_ID");
	}
	plen = strlen(path);
	if (!size || !plen)
		return 0;
	key = hash_bytes(path, plen, 0);
	if (u64map_get(&r->bid_of, key, &idx)) {
		for (size_t i = (size_t)idx; i < r->nbids; i++)
			if (!strcmp(r->bids[i].path, path))
				return 0;
	}
	if (grow_array((void **)&r->bids, &r->cap_bids, r->nbids + 1, sizeof(*r->bids)))
		return -ENOMEM;
	b = &r->bids[r->nbids];
	b->path = strdup(path);
	if (!b->path)
		return -ENOMEM;
	b->size = (uint8_t)size;
	memcpy(b->id, d + 12, size);
	if (!u64map_get(&r->bid_of, key, &idx) && u64map_put(&r->bid_of, key, r->nbids)) {
		free(b->path);
		return -ENOMEM;
	}
	r->nbids++;
	return 0;
}

/*
 * A HEADER_FEATURE record (pipe mode's header sections): only the
 * compression header is read, for the bound it sets on the records after.
 */
static int read_feature(struct reader *r, const uint8_t *rec, uint16_t size, uint64_t off)
{
	if (size < 16)
		return fail(r, "record too short", off, "HEADER_FEATURE");
	if (get_le64(rec + 8) != HEADER_COMPRESSED)
		return 0;
	return read_compression(r, rec + 16, size - 16u, off + 16, "HEADER_FEATURE");
}

/* perf's own kinds that carry nothing drawn: skipped; kinds after its last known one, counted. */
static int skip_user_record(struct reader *r, uint32_t type)
{
	if (type <= PD_LAST_KNOWN || !r->info)
		return 0;
	if (!r->info->unknown++)
		r->info->unknown_type = type;
	return 0;
}

/*
 * One record (in the window when in_map), at file offset off; a record out
 * of a compressed record when r->inner, at the offset of the one it began in.
 */
static int handle_record(struct reader *r, const uint8_t *rec, uint16_t size, uint64_t off,
			 bool in_map)
{
	uint32_t type = get_le32(rec);
	int e = 0;

	if (type < 64)
		return enqueue(r, rec, size, off, in_map);
	switch (type) {
	case PD_HEADER_ATTR:
		return handle_header_attr(r, rec, size, off);
	case PD_HEADER_FEATURE:
		return read_feature(r, rec, size, off);
	case PD_HEADER_BUILD_ID:
		/* pipe mode (perf inject -b): the build-ids of the files mapped after it */
		return add_build_id(r, rec, size, off);
	case PD_FINISHED_ROUND:
		/* everything up to the previous round's latest time is now complete */
		e = flush(r, r->round_max, false);
		r->round_max = r->seen_max;
		if (!e)
			e = release_behind(r, r->inner ? r->comp_off : r->pos);
		return e;
	case PD_HEADER_TRACING_DATA:
	case PD_AUXTRACE:
	case PD_COMPRESSED:
	case PD_COMPRESSED2:
		/* these are followed by bytes of the file, or are the compressed stream */
		if (r->inner)
			return fail(r, "a record that cannot be inside compressed data", off,
				    type_name(r, type));
		break;
	default:
		return skip_user_record(r, type);
	}
	switch (type) {
	case PD_HEADER_TRACING_DATA:
		if (size < 12)
			return fail(r, "record too short", off, type_name(r, type));
		/* followed by that many bytes, padded to 8 */
		e = skip_bytes(r, ((uint64_t)get_le32(rec + 8) + 7) & ~7ULL);
		if (e == -ENODATA)
			return fail(r, "truncated tracing data", off, type_name(r, type));
		return e;
	case PD_AUXTRACE:
		if (size < 16)
			return fail(r, "record too short", off, type_name(r, type));
		e = skip_bytes(r, get_le64(rec + 8));
		if (e == -ENODATA)
			return fail(r, "truncated aux data", off, type_name(r, type));
		return e;
	case PD_COMPRESSED2:
		return read_compressed2(r, rec, size, off);
	default:
		return read_compressed(r, PD_COMPRESSED, rec + 8, size - 8u, off);
	}
}

static int read_records(struct reader *r)
{
	uint8_t buf[MAX_RECORD + 1] __attribute__((aligned(8)));

	for (;;) {
		uint64_t off = r->pos;
		const uint8_t *rec = buf;
		bool in_map = false;
		uint32_t type;
		uint16_t size;
		int e;

		if (r->guarded && guard_hit)
			return fail(r, "the file shrank while it was read", off, "header");
		if (r->bounded && off >= r->end)
			break;
		if (r->bounded && r->end - off < 8)
			return fail(r, "truncated record header", off, "header");
		if (r->map) {
			e = map_at(r, off, 8, &rec);
		} else {
			e = read_exact(r, buf, 8, true);
			if (e == 1)
				break; /* clean end of stream */
			if (e == -ENODATA)
				return fail(r, "truncated record header", off, "header");
		}
		if (e)
			return e;
		type = get_le32(rec);
		size = (uint16_t)(get_le32(rec + 4) >> 16);
		if (type == PD_COMPRESSED2 && size < 8)
			return fail(r, COMPRESSED2_WRAPPED, off, "COMPRESSED2"); /* wrapped to 0 */
		if (size < 8)
			return fail(r, "record size smaller than its header", off,
				    type_name(r, type));
		if (r->bounded && size > r->end - off)
			return fail(r, "record runs past the end of the data section", off,
				    type_name(r, type));
		if (r->map) {
			/* decoded in place, unless misaligned (records are u64-aligned in perf's files) */
			e = map_at(r, off, size, &rec);
			if (e)
				return e;
			if ((uintptr_t)rec % 8) {
				memcpy(buf, rec, size);
				rec = buf;
			} else {
				in_map = true;
			}
			r->pos += size;
		} else {
			e = read_exact(r, buf + 8, size - 8u, false);
			if (e == -ENODATA)
				return fail(r, "truncated record", off, type_name(r, type));
			if (e)
				return e;
		}

		e = handle_record(r, rec, size, off, in_map);
		if (e)
			return e;
	}
	if (r->z.buf && unzstd_end(&r->z))
		return zstd_fail(r);
	return flush(r, 0, true);
}

/*
 * The data section of a file-mode perf.data through a mapped window when
 * the file can be mapped, else with read() from the data offset.
 */
static int read_file_records(struct reader *r)
{
	int e;

	if (window_bytes != SIZE_MAX && r->pos < r->end && guard_take(r)) {
		e = map_window(r, r->pos);
		if (e == -EINVAL)
			return e;
		if (e)
			unmap_window(r); /* no address space for it (32-bit, ulimit -v): read() */
	}
	return read_records(r);
}

/* ---- file and pipe headers ------------------------------------------------- */

/*
 * Feature sections follow the data, one { u64 offset, size } per feature
 * bit set, in bit order. Finds feature bit's section: 1 (*off, *size set,
 * inside the file), 0 when the file has none, or -EINVAL.
 */
static int feature_section(struct reader *r, const uint8_t *h, uint64_t table, uint64_t file_size,
			   unsigned int bit, uint64_t *off, uint64_t *size)
{
	const uint8_t *bits = h + 72;
	unsigned int nth = 0;
	uint8_t sec[16];
	uint64_t at;

	if (!(bits[bit / 8] & (1u << (bit % 8))))
		return 0;
	for (unsigned int b = 0; b < bit; b++)
		nth += (bits[b / 8] >> (b % 8)) & 1;
	at = table + nth * 16;
	if (at > file_size || file_size - at < 16 || pread_exact(r->fd, sec, 16, at))
		return fail(r, "feature sections outside the file (truncated file?)", at, "header");
	*off = get_le64(sec);
	*size = get_le64(sec + 8);
	if (*off > file_size || *size > file_size - *off)
		return fail(r, "feature section outside the file (truncated file?)", at, "header");
	return 1;
}

/* The compression header (read_compression), and the build-id table (add_build_id). */
static int read_features(struct reader *r, const uint8_t *h, uint64_t table, uint64_t file_size)
{
	uint8_t feat[20], *ids;
	uint64_t off, size;
	int e;

	e = feature_section(r, h, table, file_size, HEADER_COMPRESSED, &off, &size);
	if (e == 1 && (size < 20 || pread_exact(r->fd, feat, 20, off)))
		return fail(r, "compression header outside the file", off, "header");
	if (e == 1)
		e = read_compression(r, feat, 20, off, "header");
	if (e)
		return e;
	e = feature_section(r, h, table, file_size, HEADER_BUILD_ID, &off, &size);
	if (e <= 0)
		return e;
	if (!size)
		return 0;
	if (size > BUILD_IDS_MAX)
		return fail(r, "build-id table larger than 16 MiB", off, "HEADER_BUILD_ID");
	ids = malloc(size);
	if (!ids)
		return -ENOMEM;
	e = pread_exact(r->fd, ids, size, off);
	for (uint64_t at = 0; !e && at < size;) {
		uint16_t len;

		if (size - at < 8) {
			e = fail(r, "malformed build-id entry", off + at, "HEADER_BUILD_ID");
			break;
		}
		len = (uint16_t)(get_le32(ids + at + 4) >> 16);
		if (len < 8 || len > size - at) {
			e = fail(r, "malformed build-id entry", off + at, "HEADER_BUILD_ID");
			break;
		}
		e = add_build_id(r, ids + at, len, off + at);
		at += len;
	}
	free(ids);
	return e == -ENODATA ? fail(r, "build-id table outside the file", off, "header") : e;
}

static int read_file_header(struct reader *r, const uint8_t *h, uint64_t file_size)
{
	/* attr_size is sizeof(struct perf_file_attr): the attr plus its ids section */
	uint64_t entry = get_le64(h + 16), attr_size;
	uint64_t attrs_off = get_le64(h + 24), attrs_size = get_le64(h + 32);
	uint64_t data_off = get_le64(h + 40), data_size = get_le64(h + 48);
	uint8_t *buf = NULL;
	int e = 0;

	if (entry < PERF_ATTR_SIZE_VER0 + 16 || entry > MAX_ATTR_SIZE)
		return fail(r, "bad attribute size", 16, "header");
	attr_size = entry - 16;
	if (attrs_off > file_size || attrs_size > file_size - attrs_off || attrs_size % entry)
		return fail(r, "attribute section outside the file", 24, "header");
	if (attrs_size / entry > MAX_ATTRS)
		return fail(r, "too many events", 32, "header");
	if (data_off > file_size || data_size > file_size - data_off)
		return fail(r, "data section outside the file (truncated file?)", 40, "header");
	buf = malloc(attrs_size ? attrs_size : 1);
	if (!buf)
		return -ENOMEM;
	e = pread_exact(r->fd, buf, attrs_size, attrs_off);
	for (uint64_t i = 0; !e && i < attrs_size / entry; i++) {
		const uint8_t *a = buf + i * entry;
		uint64_t ids_off = get_le64(a + attr_size), ids_size = get_le64(a + attr_size + 8);
		uint64_t aoff = attrs_off + i * entry;

		e = add_attr(r, a, attr_size, aoff);
		if (e)
			break;
		if (ids_off > file_size || ids_size > file_size - ids_off || ids_size % 8) {
			e = fail(r, "event id list outside the file", aoff + attr_size, "header");
			break;
		}
		for (uint64_t k = 0; !e && k < ids_size / 8; k++) {
			uint8_t idb[8];
			e = pread_exact(r->fd, idb, 8, ids_off + k * 8);
			if (!e)
				e = add_id(r, get_le64(idb), r->nattrs - 1);
		}
	}
	free(buf);
	if (e == -ENODATA)
		e = fail(r, "truncated header sections", attrs_off, "header");
	if (e)
		return e;
	if (r->nattrs == 0)
		return fail(r, "no events described", 24, "header");
	if (data_size) {
		e = read_features(r, h, data_off + data_size, file_size);
		if (e)
			return e;
	}
	if (lseek(r->fd, (off_t)data_off, SEEK_SET) < 0)
		return -errno;
	r->pos = data_off;
	if (data_size) {
		r->bounded = true;
		r->end = data_off + data_size;
	} else {
		/* perf writes the data size last: a killed perf leaves 0; read to the end */
		r->bounded = true;
		r->end = file_size;
		if (r->info)
			r->info->finalized = false;
	}
	return 0;
}

int perfdata__read(const char *path, rec_cb cb, void *ctx, struct perfdata_info *info,
		   struct perfdata_error *err)
{
	struct reader r = { .fd = -1, .err = err, .info = info, .cb = cb, .ctx = ctx };
	uint8_t h[FILE_HEADER_SIZE];
	struct stat st;
	int e;

	if (info) {
		memset(info, 0, sizeof(*info));
		info->finalized = true;
	}
	u64map_init(&r.ids);
	u64map_init(&r.bid_of);
	if (strcmp(path, "-") == 0) {
		r.fd = dup(STDIN_FILENO);
	} else {
		r.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (r.fd >= 0 && fstat(r.fd, &st) == 0 && !S_ISREG(st.st_mode) &&
		    !S_ISFIFO(st.st_mode)) {
			e = fail(&r, "not a regular file", 0, "header");
			goto out;
		}
		if (r.fd >= 0)
			fcntl(r.fd, F_SETFL, fcntl(r.fd, F_GETFL) & ~O_NONBLOCK);
	}
	if (r.fd < 0)
		return -errno;
	if (fstat(r.fd, &st)) {
		e = -errno;
		goto out;
	}
	e = read_exact(&r, h, PIPE_HEADER_SIZE, true);
	if (e == 1 || e == -ENODATA) {
		e = fail(&r, e == 1 ? "empty file" : "truncated header", 0, "header");
		goto out;
	}
	if (e)
		goto out;
	if (get_le64(h) == __builtin_bswap64(PERF_MAGIC2)) {
		e = unsupported(
			&r, "big-endian perf.data (written on another machine) is not supported", 0,
			"header");
		goto out;
	}
	if (get_le64(h) == PERF_MAGIC1) {
		e = unsupported(&r,
				"perf.data in perf's first, long replaced format (magic PERFFILE; "
				"today's perf writes PERFILE2)",
				0, "header");
		goto out;
	}
	if (get_le64(h) != PERF_MAGIC2) {
		e = fail(&r, "not a perf.data file (bad magic)", 0, "header");
		goto out;
	}
	if (get_le64(h + 8) == PIPE_HEADER_SIZE) {
		if (info)
			info->pipe_mode = true;
		e = read_records(&r);
		goto out;
	}
	if (get_le64(h + 8) != FILE_HEADER_SIZE) {
		e = unsupported(&r, "a file header size other than perf's (104 bytes)", 8,
				"header");
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		e = fail(&r, "a file-mode perf.data must be a regular file", 0, "header");
		goto out;
	}
	e = read_exact(&r, h + PIPE_HEADER_SIZE, FILE_HEADER_SIZE - PIPE_HEADER_SIZE, false);
	if (e == -ENODATA || e == 1) {
		e = fail(&r, "truncated header", (uint64_t)st.st_size, "header");
		goto out;
	}
	if (!e)
		e = read_file_header(&r, h, (uint64_t)st.st_size);
	if (!e)
		e = read_file_records(&r);
out:
	unmap_window(&r);
	guard_release(&r);
	if (r.fd >= 0)
		close(r.fd);
	free(r.attrs);
	order_free(&r.q);
	free(r.scratch);
	unzstd_free(&r.z);
	u64map_free(&r.ids);
	for (size_t i = 0; i < r.nbids; i++)
		free(r.bids[i].path);
	free(r.bids);
	u64map_free(&r.bid_of);
	return e;
}
