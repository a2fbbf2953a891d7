/* SPDX-License-Identifier: MIT */
/*
 * The symbolizer's string pool (every name it hands out lives here until
 * the symbolizer is freed) and the bounded line reader used for /proc and
 * kallsyms files. A leaf: calls nothing else in symbolize/.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/internal.h"
#include "util/util.h"

#define STRPOOL_CHUNK (64u << 10)

/* ---- string pool ---- */

void strpool__init(struct strpool *p)
{
	memset(p, 0, sizeof(*p));
}

void strpool__free(struct strpool *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nchunks; i++)
		free(p->chunks[i]);
	free(p->chunks);
	free(p->slots);
	strpool__init(p);
}

static char *strpool_alloc(struct strpool *p, size_t size)
{
	size_t csize = size > STRPOOL_CHUNK / 4 ? size : STRPOOL_CHUNK;
	char *c;

	if (size <= p->cur_left) {
		c = p->cur;
		p->cur += size;
		p->cur_left -= size;
		return c;
	}
	if (grow_array((void **)&p->chunks, &p->chunks_cap, p->nchunks + 1, sizeof(*p->chunks)))
		return NULL;
	c = malloc(csize);
	if (!c)
		return NULL;
	p->chunks[p->nchunks++] = c;
	/* a big string gets a chunk of its own; the current chunk stays in use */
	if (csize == STRPOOL_CHUNK) {
		p->cur = c + size;
		p->cur_left = csize - size;
	}
	return c;
}

const char *strpool__add(struct strpool *p, const char *s, size_t len)
{
	char *c;

	if (len >= UINT32_MAX)
		return NULL;
	c = strpool_alloc(p, len + 1);
	if (!c)
		return NULL;
	memcpy(c, s, len);
	c[len] = '\0';
	return c;
}

static size_t strpool_slot(const struct strpool *p, uint32_t h, const char *s, size_t len)
{
	size_t mask = p->cap - 1, i = h & mask;

	while (p->slots[i].s) {
		if (p->slots[i].hash == h && p->slots[i].len == len &&
		    !memcmp(p->slots[i].s, s, len))
			break;
		i = (i + 1) & mask;
	}
	return i;
}

static int strpool_rehash(struct strpool *p)
{
	struct strpool old = *p;
	size_t cap = p->cap ? p->cap * 2 : 1024;

	if (cap < p->cap)
		return -ENOMEM;
	p->slots = calloc(cap, sizeof(*p->slots));
	if (!p->slots) {
		p->slots = old.slots;
		return -ENOMEM;
	}
	p->cap = cap;
	for (size_t i = 0; i < old.cap; i++) {
		const struct strpool_slot *o = &old.slots[i];

		if (o->s)
			p->slots[strpool_slot(p, o->hash, o->s, o->len)] = *o;
	}
	free(old.slots);
	return 0;
}

const char *strpool__intern(struct strpool *p, const char *s, size_t len)
{
	uint32_t h = (uint32_t)hash_bytes(s, len, 0);
	const char *c;
	size_t i;

	if (len >= UINT32_MAX)
		return NULL;
	if ((p->len + 1) * 2 > p->cap && strpool_rehash(p))
		return NULL;
	i = strpool_slot(p, h, s, len);
	if (p->slots[i].s)
		return p->slots[i].s;
	c = strpool__add(p, s, len);
	if (!c)
		return NULL;
	p->slots[i] = (struct strpool_slot){ .s = c, .hash = h, .len = (uint32_t)len };
	p->len++;
	return c;
}

/* ---- bounded line reader ---- */

int read_lines(const char *path, size_t max_line, uint64_t max_bytes,
	       int (*fn)(void *ctx, char *line, size_t len), void *ctx, uint64_t *skipped)
{
	size_t bufsize = max_line + 1, have = 0;
	uint64_t total = 0;
	bool overlong = false;
	struct stat st;
	char *buf;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto out_close;
	}
	err = -EINVAL;
	if (!S_ISREG(st.st_mode))
		goto out_close;
	err = -ENOMEM;
	buf = malloc(bufsize);
	if (!buf)
		goto out_close;
	err = 0;
	while (total < max_bytes) {
		size_t want = bufsize - have, pos = 0;
		char *nl;
		ssize_t r;

		if (want > max_bytes - total)
			want = max_bytes - total;
		r = read(fd, buf + have, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			break;
		}
		if (r == 0) {
			/* a last line without its newline */
			if (have && !overlong) {
				buf[have] = '\0';
				err = fn(ctx, buf, have);
			}
			break;
		}
		total += (uint64_t)r;
		have += (size_t)r;
		while ((nl = memchr(buf + pos, '\n', have - pos))) {
			size_t len = (size_t)(nl - (buf + pos));

			if (overlong) {
				overlong = false;
			} else {
				*nl = '\0';
				err = fn(ctx, buf + pos, len);
				if (err)
					goto out_free;
			}
			pos += len + 1;
		}
		memmove(buf, buf + pos, have - pos);
		have -= pos;
		if (have == bufsize) {
			/* longer than any line we accept: drop it up to its newline */
			if (!overlong && skipped)
				(*skipped)++;
			overlong = true;
			have = 0;
		}
	}
out_free:
	free(buf);
out_close:
	close(fd);
	return err;
}
