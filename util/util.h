/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every module may use: a u64 -> u64 open-addressing map,
 * a hash function, strict number parsing, overflow-checked arithmetic.
 * Nothing here prints or keeps global state.
 */
#ifndef DLFLAME_UTIL_H
#define DLFLAME_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* 64-bit FNV-1a followed by a final mix; good enough for interning tables. */
uint64_t hash_bytes(const void *data, size_t len, uint64_t seed);
uint64_t hash_u64(uint64_t x);

/*
 * u64 -> u64 map with open addressing. Key UINT64_MAX is reserved (empty slot).
 * Returns 0 or -ENOMEM / -EINVAL.
 */
struct u64map {
	uint64_t *keys;
	uint64_t *vals;
	size_t cap; /* power of two, or 0 */
	size_t len;
};

void u64map_init(struct u64map *m);
void u64map_free(struct u64map *m);
int u64map_put(struct u64map *m, uint64_t key, uint64_t val);
bool u64map_get(const struct u64map *m, uint64_t key, uint64_t *val);
bool u64map_del(struct u64map *m, uint64_t key);

/*
 * Grow *ptr (an array of elem-sized items with *cap slots) so that it holds
 * at least want items. Doubles capacity; checks for overflow. 0 or -ENOMEM.
 */
int grow_array(void **ptr, size_t *cap, size_t want, size_t elem);

/*
 * Strict parsing: the whole string must be a number in [min, max], no sign
 * for unsigned, no trailing junk, no empty string. 0 or -EINVAL / -ERANGE;
 * *out is untouched on failure.
 */
int parse_u64(const char *s, int base, uint64_t min, uint64_t max, uint64_t *out);
int parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int parse_double(const char *s, double min, double max, double *out);

/* CLOCK_MONOTONIC in ns: the clock perf stamps records with. */
uint64_t monotonic_ns(void);

/*
 * A mutex with priority inheritance where the system has it, else a plain
 * one: a real-time reader (the drain or early thread) that waits for it
 * lifts whoever holds it, at the trainer's priority and maybe preempted by
 * the trainer, to its own priority until it lets go. 0 or a positive errno,
 * as pthread_mutex_init.
 */
int mutex_init_inherit(pthread_mutex_t *m);

/*
 * The id thread tid of process pid has in its own PID namespace: the last
 * entry of the NSpid line of /proc/PID/task/TID/status (tid 0: of
 * /proc/PID/status, the process's pid there). A process outside any PID
 * namespace of its own sees the id we do. 0 and *out, -ENODATA when the
 * kernel has no NSpid line, or a negative errno (-ENOENT: gone).
 */
int proc_ns_tid(uint32_t pid, uint32_t tid, uint32_t *out);

/*
 * When process pid started, in CLOCK_REALTIME ns (a file's mtime compares
 * with it): field 22 of /proc/PID/stat (clock ticks after boot), moved by
 * how long ago that was. The kernel keeps it in ticks, so the process
 * started at most a tick after *out. 0, or a negative errno (-ENOENT: gone;
 * -EBADMSG: a line not parsed).
 */
int proc_start_realtime(uint32_t pid, uint64_t *out);

/*
 * Outputs are written to a temporary file and renamed over their path, so a
 * reader never sees half a file. That is wrong for what exists and is not a
 * file: renaming over /dev/null would replace the device, and a FIFO's reader
 * would never see the data. For those (character or block device, FIFO,
 * socket) *fd is an open O_WRONLY descriptor to write in place; for a
 * regular file, a symlink (replaced, not followed) or nothing, *fd is -1.
 * A directory is -EISDIR. 0 or a negative errno.
 */
int open_output_in_place(const char *path, int *fd);

/* a + b and a * b that report overflow (true) instead of wrapping. */
/* a + b, or UINT64_MAX when that overflows: weights that add up never wrap. */
static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline bool add_overflows(size_t a, size_t b, size_t *res)
{
	return __builtin_add_overflow(a, b, res);
}

static inline bool mul_overflows(size_t a, size_t b, size_t *res)
{
	return __builtin_mul_overflow(a, b, res);
}

/*
 * The length of the x86-64 instruction at b (len bytes available), 0 if it
 * is not one gcc emits (util/x86.c); *target: a direct jump's target
 * relative to the instruction's end, *jump whether it is one.
 */
size_t x86_insn_len(const uint8_t *b, size_t len, int64_t *target, bool *jump);

/* Little-endian stores/loads for file formats (no alignment needed). */
static inline void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

#endif
