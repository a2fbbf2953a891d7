/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <time.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EMPTY_KEY UINT64_MAX

uint64_t hash_bytes(const void *data, size_t len, uint64_t seed)
{
	const uint8_t *p = data;
	uint64_t h = 0xcbf29ce484222325ULL ^ seed;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return hash_u64(h);
}

uint64_t hash_u64(uint64_t x)
{
	/* splitmix64 finalizer */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

void u64map_init(struct u64map *m)
{
	memset(m, 0, sizeof(*m));
}

void u64map_free(struct u64map *m)
{
	if (!m)
		return;
	free(m->keys);
	free(m->vals);
	u64map_init(m);
}

static size_t slot_of(const struct u64map *m, uint64_t key)
{
	size_t mask = m->cap - 1;
	size_t i = hash_u64(key) & mask;

	while (m->keys[i] != EMPTY_KEY && m->keys[i] != key)
		i = (i + 1) & mask;
	return i;
}

static int rehash(struct u64map *m, size_t cap)
{
	struct u64map n = { .cap = cap };

	n.keys = malloc(cap * sizeof(*n.keys));
	n.vals = malloc(cap * sizeof(*n.vals));
	if (!n.keys || !n.vals) {
		free(n.keys);
		free(n.vals);
		return -ENOMEM;
	}
	memset(n.keys, 0xff, cap * sizeof(*n.keys));
	for (size_t i = 0; i < m->cap; i++) {
		if (m->keys[i] == EMPTY_KEY)
			continue;
		size_t s = slot_of(&n, m->keys[i]);
		n.keys[s] = m->keys[i];
		n.vals[s] = m->vals[i];
		n.len++;
	}
	free(m->keys);
	free(m->vals);
	*m = n;
	return 0;
}

int u64map_put(struct u64map *m, uint64_t key, uint64_t val)
{
	if (key == EMPTY_KEY)
		return -EINVAL;
	/* keep load factor below 1/2 */
	if ((m->len + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		if (cap < m->cap)
			return -ENOMEM;
		int err = rehash(m, cap);
		if (err)
			return err;
	}
	size_t s = slot_of(m, key);
	if (m->keys[s] == EMPTY_KEY) {
		m->keys[s] = key;
		m->len++;
	}
	m->vals[s] = val;
	return 0;
}

bool u64map_get(const struct u64map *m, uint64_t key, uint64_t *val)
{
	if (!m->cap || key == EMPTY_KEY)
		return false;
	size_t s = slot_of(m, key);
	if (m->keys[s] == EMPTY_KEY)
		return false;
	if (val)
		*val = m->vals[s];
	return true;
}

bool u64map_del(struct u64map *m, uint64_t key)
{
	if (!m->cap || key == EMPTY_KEY)
		return false;
	size_t mask = m->cap - 1;
	size_t i = slot_of(m, key);
	if (m->keys[i] == EMPTY_KEY)
		return false;
	/* backward-shift deletion keeps probe chains intact without tombstones */
	size_t j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (m->keys[j] == EMPTY_KEY)
			break;
		size_t home = hash_u64(m->keys[j]) & mask;
		/* move j into hole i unless home lies cyclically in (i, j] */
		bool in_range = i <= j ? (i < home && home <= j) : (i < home || home <= j);
		if (in_range)
			continue;
		m->keys[i] = m->keys[j];
		m->vals[i] = m->vals[j];
		i = j;
	}
	m->keys[i] = EMPTY_KEY;
	m->len--;
	return true;
}

int grow_array(void **ptr, size_t *cap, size_t want, size_t elem)
{
	size_t ncap, bytes;
	void *p;

	if (want <= *cap)
		return 0;
	ncap = *cap ? *cap : 16;
	while (ncap < want) {
		if (mul_overflows(ncap, 2, &ncap))
			return -ENOMEM;
	}
	if (mul_overflows(ncap, elem, &bytes))
		return -ENOMEM;
	p = realloc(*ptr, bytes);
	if (!p)
		return -ENOMEM;
	*ptr = p;
	*cap = ncap;
	return 0;
}

int parse_u64(const char *s, int base, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ' || *s == '\t')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno || *end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s || *s == ' ' || *s == '\t')
		return -EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno || *end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (!s || !*s || *s == ' ' || *s == '\t')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno || *end || isnan(v))
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int open_output_in_place(const char *path, int *fd)
{
	struct stat st;

	*fd = -1;
	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))
		return 0;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	/* O_NONBLOCK: a FIFO without a reader fails with ENXIO instead of hanging */
	*fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (*fd < 0)
		return -errno;
	fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
	return 0;
}

uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int mutex_init_inherit(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int err = pthread_mutexattr_init(&a);

	if (err)
		return pthread_mutex_init(m, NULL);
	err = pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
	if (!err)
		err = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return err ? pthread_mutex_init(m, NULL) : 0;
}

int proc_start_realtime(uint32_t pid, uint64_t *out)
{
	char path[64], buf[1024];
	struct timespec boot, real;
	uint64_t ticks = 0, boot_ns, real_ns, start_ns;
	long hz = sysconf(_SC_CLK_TCK);
	char *p, *end;
	ssize_t got;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	do
		got = read(fd, buf, sizeof(buf) - 1);
	while (got < 0 && errno == EINTR);
	close(fd);
	if (got < 0)
		return -errno;
	buf[got] = '\0';
	/* the command name may hold spaces and parentheses: fields count from the last ')' */
	p = strrchr(buf, ')');
	if (!p || hz <= 0)
		return -EBADMSG;
	p++;
	for (field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EBADMSG;
	}
	p++;
	end = strchr(p, ' ');
	if (end)
		*end = '\0';
	if (parse_u64(p, 10, 0, UINT64_MAX / 1000000000ull, &ticks))
		return -EBADMSG;
	start_ns = ticks * 1000000000ull / (uint64_t)hz;
	/* the wall clock read between two boot-clock reads, close together (not preempted) */
	for (int tries = 0;; tries++) {
		struct timespec boot2;
		uint64_t b1, b2;

		if (clock_gettime(CLOCK_BOOTTIME, &boot) || clock_gettime(CLOCK_REALTIME, &real) ||
		    clock_gettime(CLOCK_BOOTTIME, &boot2))
			return -errno;
		b1 = (uint64_t)boot.tv_sec * 1000000000ull + (uint64_t)boot.tv_nsec;
		b2 = (uint64_t)boot2.tv_sec * 1000000000ull + (uint64_t)boot2.tv_nsec;
		if (b2 - b1 < 100000 || tries == 3)
			break;
	}
	boot_ns = (uint64_t)boot.tv_sec * 1000000000ull + (uint64_t)boot.tv_nsec;
	real_ns = (uint64_t)real.tv_sec * 1000000000ull + (uint64_t)real.tv_nsec;
	if (start_ns > boot_ns || boot_ns - start_ns > real_ns)
		return -EBADMSG;
	*out = real_ns - (boot_ns - start_ns);
	return 0;
}

int proc_ns_tid(uint32_t pid, uint32_t tid, uint32_t *out)
{
	char path[64], buf[4096];
	const char *line, *p;
	uint64_t last = 0;
	bool any = false;
	ssize_t n, got = 0;
	int fd;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%" PRIu32 "/task/%" PRIu32 "/status", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%" PRIu32 "/status", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* NSpid comes early (line 13 or so): the first 4 KiB hold it */
	while (got < (ssize_t)sizeof(buf) - 1 &&
	       (n = read(fd, buf + got, sizeof(buf) - 1 - (size_t)got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = -errno;

			close(fd);
			return err;
		}
		got += n;
	}
	close(fd);
	buf[got] = '\0';
	line = strstr(buf, "\nNSpid:");
	if (!line)
		return -ENODATA;
	p = line + 7;
	for (;;) {
		uint64_t v = 0;
		int digits = 0;

		while (*p == ' ' || *p == '\t')
			p++;
		while (*p >= '0' && *p <= '9' && digits < 11) {
			v = v * 10 + (uint64_t)(*p++ - '0');
			digits++;
		}
		if (!digits)
			break;
		if (v > UINT32_MAX)
			return -ERANGE;
		last = v;
		any = true;
	}
	/* a line cut by the buffer's end has no newline: its last number may be cut too */
	if (!any || *p != '\n')
		return -ENODATA;
	*out = (uint32_t)last;
	return 0;
}
