/* SPDX-License-Identifier: MIT */
/* The profile's tables, shared by profile.c and file.c only. */
#ifndef DLFLAME_PROFILE_INTERNAL_H
#define DLFLAME_PROFILE_INTERNAL_H

#include "profile.h"
#include "util/util.h"

struct pf_string {
	uint64_t off; /* into pool */
	uint64_t len; /* without the terminating NUL */
};

struct profile {
	char *pool; /* strings, each NUL-terminated */
	size_t pool_len, pool_cap;

	struct pf_string *strings;
	size_t nr_strings, cap_strings;
	struct pf_frame *frames;
	size_t nr_frames, cap_frames;
	struct pf_stack *stacks;
	uint32_t *depths;
	uint8_t *ends; /* enum stack_end per stack */
	size_t nr_stacks, cap_stacks, cap_depths, cap_ends;
	struct pf_thread *threads;
	size_t nr_threads, cap_threads;
	struct pf_sample *samples; /* the samples after the spilled ones */
	size_t nr_samples, cap_samples;

	/* samples move to an unlinked file when spill_at are held in memory and one more comes */
	size_t spill_at; /* 0: never spill */
	char *spill_dir;
	int spool_fd; /* -1 until the first spill */
	uint64_t nr_spilled;

	/* interning: hash of the key -> id; collisions chained by probing on key hash */
	struct u64map string_ids, frame_ids, stack_ids, thread_ids;

	struct pf_meta meta;
	uint32_t file_version;

	struct pf_process *procs;
	size_t nr_procs, cap_procs;
	struct u64map proc_ids; /* host << 32 | pid -> index */

	/* read from a journal: frames the recorder had not named yet, and the boot they ran in */
	struct pf_loc *locs;
	size_t nr_locs;
	uint32_t boot_id; /* string id, 0 unknown */

	/* the recorder's symbol hints (HNTS section); has_hints: stored, maybe none */
	struct pf_hint *hints;
	size_t nr_hints;
	bool has_hints;
};

/* Growing byte buffers for the writers; err is set once and sticks. */
struct wbuf {
	uint8_t *data;
	size_t len, cap;
	int err;
};
uint8_t *wb_reserve(struct wbuf *b, size_t n);
void wb_u32(struct wbuf *b, uint32_t v);
void wb_u64(struct wbuf *b, uint64_t v);
void wb_bytes(struct wbuf *b, const void *s, size_t n);
/* Starts a payload section (u32 tag, u32 0, u64 length); returns where its length goes. */
size_t section_begin(struct wbuf *b, uint32_t tag);
void section_end(struct wbuf *b, size_t at);
int write_all(int fd, const void *buf, size_t len);
/* The JOBS section: the clock offset and the processes' ranks. */
void jobs_section(const struct profile *p, struct wbuf *b);

#define META_SIZE (4 * 8 + 4 * 4)
#define FRAME_SIZE (6 * 4)
#define HINT_SIZE (4 * 4 + 2 * 8)

/* A profile's payload (its sections, uncompressed) into p. */
int decode_payload(const uint8_t *d, size_t len, uint32_t version, struct profile *p,
		   struct profile_read_error *e);
/* journal.c: a journal file (PROFILE_JOURNAL_MAGIC) as a profile; *torn: batches cut off. */
int journal_read(const uint8_t *buf, size_t len, struct profile **out, struct profile_read_error *e,
		 uint64_t *torn);

/* A sample as stored in the file and in the spool: u64 time, weight; u32 stack, thread, kind. */
#define SAMPLE_SIZE (2 * 8 + 3 * 4)

static inline void sample_encode(uint8_t *d, const struct pf_sample *s)
{
	put_le64(d, s->time);
	put_le64(d + 8, s->weight);
	put_le32(d + 16, s->stack);
	put_le32(d + 20, s->thread);
	put_le32(d + 24, s->kind);
}

static inline void sample_decode(const uint8_t *d, struct pf_sample *s)
{
	s->time = get_le64(d);
	s->weight = get_le64(d + 8);
	s->stack = get_le32(d + 16);
	s->thread = get_le32(d + 20);
	s->kind = get_le32(d + 24);
}

/* Reads spilled samples [first, first + n) as encoded records into buf. */
int spool_read(const struct profile *p, uint64_t first, uint8_t *buf, size_t n);

#endif
