/* SPDX-License-Identifier: MIT */
/*
 * dlflame.data: a 40-byte header followed by one zlib stream.
 *
 *   header   magic[8] "DLFLAME\x01", u32 version, u32 flags (bit 0: finalized),
 *            u64 payload length, u64 compressed length, u32 crc32 of the
 *            compressed bytes (version 3 on: of header bytes 8-31, then
 *            them), u32 reserved (0). All little-endian.
 *   payload  sections: u32 tag, u32 reserved, u64 length, then `length` bytes.
 *            STRS u64 n, n x (u32 len, bytes)        string 0 is ""
 *            FRMS u64 n, n x (u32 name, module, kind, file, line, build_id)
 *            STKS u64 n, n x (u32 parent, frame)     entry 0 is the root; parent < index
 *            ENDS u64 n, n x u8 enum stack_end       n = the stacks' n (version 2 on)
 *            THRS u64 n, n x (u32 pid, tid, comm, host)   (version 4 on; before: no host)
 *            META u64 start, end, lost, freq; u32 event, command, hostname, flags
 *            JOBS i64 clock offset, u64 n, n x (u32 host, pid, rank, local rank,
 *                 world size, launcher)          (version 4 on; optional)
 *            CTRS u64 n, n x (u32 host, pid, cgroup, container)   (optional; after
 *                 JOBS, whose entries it completes: a process's container)
 *            SMPS u64 n, n x (u64 time, weight; u32 stack, thread, kind)
 *            HNTS u64 n, n x (u32 module, build_id, path, reserved 0; u64 weight,
 *                 total)   the recorder's symbol hints (optional; older files
 *                 have none and older readers skip it)
 *   Unknown tags are skipped, so a same-version writer may add sections.
 *   Version 1 files (no ENDS) still read: their stacks' ends are unknown.
 *   The writer streams the payload through deflate (samples may come from the
 *   profile's spool file) and fills in the header last.
 *
 * Reading trusts nothing: every count is checked against the bytes that hold
 * it before anything is allocated, and ids are remapped through re-interning,
 * so a file that passes builds the same profile a recorder would.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define HEADER_SIZE 40
#define FLAG_FINALIZED 1u
/*
 * dlflame's profiles compress 3-5:1 (recordings of the MLP, the CNN
 * trainer, off-CPU runs); a payload that claims more than this is a bomb.
 * The writer stores its payload uncompressed rather than exceed it.
 */
#define MAX_RATIO 100
#define MAX_PAYLOAD (8ULL << 30)

#define TAG(a, b, c, d) \
	((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
#define TAG_STRS TAG('S', 'T', 'R', 'S')
#define TAG_FRMS TAG('F', 'R', 'M', 'S')
#define TAG_STKS TAG('S', 'T', 'K', 'S')
#define TAG_THRS TAG('T', 'H', 'R', 'S')
#define TAG_META TAG('M', 'E', 'T', 'A')
#define TAG_SMPS TAG('S', 'M', 'P', 'S')
#define TAG_ENDS TAG('E', 'N', 'D', 'S')
#define TAG_JOBS TAG('J', 'O', 'B', 'S')
#define TAG_HNTS TAG('H', 'N', 'T', 'S')
#define TAG_CTRS TAG('C', 'T', 'R', 'S')

/* ---- writing ------------------------------------------------------------- */

uint8_t *wb_reserve(struct wbuf *b, size_t n)
{
	size_t need;

	if (b->err || add_overflows(b->len, n, &need) ||
	    grow_array((void **)&b->data, &b->cap, need, 1)) {
		b->err = -ENOMEM;
		return NULL;
	}
	uint8_t *p = b->data + b->len;
	b->len = need;
	return p;
}

void wb_u32(struct wbuf *b, uint32_t v)
{
	uint8_t *p = wb_reserve(b, 4);

	if (p)
		put_le32(p, v);
}

void wb_u64(struct wbuf *b, uint64_t v)
{
	uint8_t *p = wb_reserve(b, 8);

	if (p)
		put_le64(p, v);
}

void wb_bytes(struct wbuf *b, const void *s, size_t n)
{
	uint8_t *p = wb_reserve(b, n);

	if (p && n)
		memcpy(p, s, n);
}

/* Starts a section; returns the offset of its length field. */
size_t section_begin(struct wbuf *b, uint32_t tag)
{
	wb_u32(b, tag);
	wb_u32(b, 0);
	size_t at = b->len;
	wb_u64(b, 0);
	return at;
}

void section_end(struct wbuf *b, size_t at)
{
	if (!b->err)
		put_le64(b->data + at, b->len - at - 8);
}

void jobs_section(const struct profile *p, struct wbuf *b)
{
	size_t at = section_begin(b, TAG_JOBS);

	wb_u64(b, (uint64_t)p->meta.clock_offset);
	wb_u64(b, p->nr_procs);
	for (size_t i = 0; i < p->nr_procs; i++) {
		const struct pf_process *pr = &p->procs[i];

		wb_u32(b, pr->host);
		wb_u32(b, pr->pid);
		wb_u32(b, pr->rank);
		wb_u32(b, pr->local_rank);
		wb_u32(b, pr->world_size);
		wb_u32(b, pr->launcher);
	}
	section_end(b, at);
	/* the processes' containers: a section of its own, which older readers skip */
	size_t nc = 0;

	for (size_t i = 0; i < p->nr_procs; i++)
		nc += p->procs[i].cgroup || p->procs[i].container;
	if (!nc)
		return;
	at = section_begin(b, TAG_CTRS);
	wb_u64(b, nc);
	for (size_t i = 0; i < p->nr_procs; i++) {
		const struct pf_process *pr = &p->procs[i];

		if (!pr->cgroup && !pr->container)
			continue;
		wb_u32(b, pr->host);
		wb_u32(b, pr->pid);
		wb_u32(b, pr->cgroup);
		wb_u32(b, pr->container);
	}
	section_end(b, at);
}

/* Every section but the samples, which are streamed (see emit_payload). */
static int build_tables(const struct profile *p, struct wbuf *b)
{
	size_t at;

	at = section_begin(b, TAG_STRS);
	wb_u64(b, p->nr_strings);
	for (size_t i = 0; i < p->nr_strings; i++) {
		if (p->strings[i].len > UINT32_MAX)
			return -E2BIG;
		wb_u32(b, (uint32_t)p->strings[i].len);
		wb_bytes(b, p->pool + p->strings[i].off, p->strings[i].len);
	}
	section_end(b, at);

	at = section_begin(b, TAG_FRMS);
	wb_u64(b, p->nr_frames);
	for (size_t i = 0; i < p->nr_frames; i++) {
		wb_u32(b, p->frames[i].name);
		wb_u32(b, p->frames[i].module);
		wb_u32(b, p->frames[i].kind);
		wb_u32(b, p->frames[i].file);
		wb_u32(b, p->frames[i].line);
		wb_u32(b, p->frames[i].build_id);
	}
	section_end(b, at);

	at = section_begin(b, TAG_STKS);
	wb_u64(b, p->nr_stacks);
	for (size_t i = 0; i < p->nr_stacks; i++) {
		wb_u32(b, p->stacks[i].parent);
		wb_u32(b, p->stacks[i].frame);
	}
	section_end(b, at);

	at = section_begin(b, TAG_ENDS);
	wb_u64(b, p->nr_stacks);
	wb_bytes(b, p->ends, p->nr_stacks);
	section_end(b, at);

	at = section_begin(b, TAG_THRS);
	wb_u64(b, p->nr_threads);
	for (size_t i = 0; i < p->nr_threads; i++) {
		wb_u32(b, p->threads[i].pid);
		wb_u32(b, p->threads[i].tid);
		wb_u32(b, p->threads[i].comm);
		wb_u32(b, p->threads[i].host);
	}
	section_end(b, at);

	jobs_section(p, b);

	at = section_begin(b, TAG_META);
	wb_u64(b, p->meta.start_time);
	wb_u64(b, p->meta.end_time);
	wb_u64(b, p->meta.lost);
	wb_u64(b, p->meta.freq);
	wb_u32(b, p->meta.event);
	wb_u32(b, p->meta.command);
	wb_u32(b, p->meta.hostname);
	wb_u32(b, p->meta.finalized ? FLAG_FINALIZED : 0);
	section_end(b, at);

	if (p->has_hints) {
		at = section_begin(b, TAG_HNTS);
		wb_u64(b, p->nr_hints);
		for (size_t i = 0; i < p->nr_hints; i++) {
			wb_u32(b, p->hints[i].module);
			wb_u32(b, p->hints[i].build_id);
			wb_u32(b, p->hints[i].path);
			wb_u32(b, 0);
			wb_u64(b, p->hints[i].weight);
			wb_u64(b, p->hints[i].total);
		}
		section_end(b, at);
	}

	return b->err;
}

int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * The payload goes through deflate in pieces, so that writing needs memory
 * for the tables only, not for the samples (which may have been spilled).
 */
#define ZOUT_SIZE (64 * 1024)

struct zsink {
	z_stream zs;
	int fd; /* -1: only measure the compressed stream */
	uint64_t plen, zlen;
	uint32_t crc; /* of the compressed bytes */
	uint8_t out[ZOUT_SIZE];
};

static int zs_run(struct zsink *z, int flush)
{
	int zr, err;

	do {
		z->zs.next_out = z->out;
		z->zs.avail_out = ZOUT_SIZE;
		zr = deflate(&z->zs, flush);
		if (zr == Z_STREAM_ERROR)
			return -EIO;
		size_t n = ZOUT_SIZE - z->zs.avail_out;
		if (n) {
			z->crc = (uint32_t)crc32(z->crc, z->out, (uInt)n);
			z->zlen += n;
			if (z->fd >= 0 && (err = write_all(z->fd, z->out, n)))
				return err;
		}
	} while (z->zs.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
	return 0;
}

static int zs_feed(struct zsink *z, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	int err;

	z->plen += len;
	while (len) {
		uInt n = len > (1u << 30) ? 1u << 30 : (uInt)len;

		z->zs.next_in = (Bytef *)p;
		z->zs.avail_in = n;
		if ((err = zs_run(z, Z_NO_FLUSH)))
			return err;
		p += n;
		len -= n;
	}
	return 0;
}

static int emit_samples(const struct profile *p, struct zsink *z)
{
	uint64_t total = p->nr_spilled + p->nr_samples;
	uint8_t hdr[24], *buf;
	int err;

	put_le32(hdr, TAG_SMPS);
	put_le32(hdr + 4, 0);
	put_le64(hdr + 8, 8 + total * SAMPLE_SIZE);
	put_le64(hdr + 16, total);
	err = zs_feed(z, hdr, sizeof(hdr));
	if (err)
		return err;
	buf = malloc(ZOUT_SIZE / SAMPLE_SIZE * SAMPLE_SIZE);
	if (!buf)
		return -ENOMEM;
	for (uint64_t i = 0; i < p->nr_spilled && !err; i += ZOUT_SIZE / SAMPLE_SIZE) {
		size_t n = p->nr_spilled - i < ZOUT_SIZE / SAMPLE_SIZE ? p->nr_spilled - i
								       : ZOUT_SIZE / SAMPLE_SIZE;

		err = spool_read(p, i, buf, n);
		if (!err)
			err = zs_feed(z, buf, n * SAMPLE_SIZE);
	}
	for (size_t i = 0; i < p->nr_samples && !err; i += ZOUT_SIZE / SAMPLE_SIZE) {
		size_t n = p->nr_samples - i < ZOUT_SIZE / SAMPLE_SIZE ? p->nr_samples - i
								       : ZOUT_SIZE / SAMPLE_SIZE;

		for (size_t k = 0; k < n; k++)
			sample_encode(buf + k * SAMPLE_SIZE, &p->samples[i + k]);
		err = zs_feed(z, buf, n * SAMPLE_SIZE);
	}
	free(buf);
	return err;
}

/* Compresses the payload into fd (or only measures it, fd -1), at zlib level `level`. */
static int emit_payload(const struct profile *p, const struct wbuf *tables, struct zsink *z, int fd,
			int level)
{
	int err;

	memset(&z->zs, 0, sizeof(z->zs));
	z->fd = fd;
	z->plen = z->zlen = 0;
	z->crc = (uint32_t)crc32(0, NULL, 0);
	if (deflateInit(&z->zs, level) != Z_OK)
		return -ENOMEM;
	err = zs_feed(z, tables->data, tables->len);
	if (!err)
		err = emit_samples(p, z);
	if (!err)
		err = zs_run(z, Z_FINISH);
	deflateEnd(&z->zs);
	return err;
}

/*
 * Version 3 on: the checksum covers the header's version, flags and sizes
 * too (bytes 8-31), so that a flipped version or flag is caught like a
 * flipped payload byte. data_crc: the compressed bytes' CRC-32.
 */
static uint32_t header_crc(const uint8_t *hdr, uint32_t data_crc, uint64_t zlen)
{
	uint32_t h = (uint32_t)crc32(0, hdr + 8, 24);

	return (uint32_t)crc32_combine(h, data_crc, (z_off_t)zlen);
}

static bool too_compressed(const struct zsink *z)
{
	return z->plen > z->zlen * MAX_RATIO;
}

static void make_header(uint8_t *hdr, const struct profile *p, const struct zsink *z)
{
	memset(hdr, 0, HEADER_SIZE);
	memcpy(hdr, PROFILE_MAGIC, 8);
	put_le32(hdr + 8, PROFILE_VERSION);
	put_le32(hdr + 12, p->meta.finalized ? FLAG_FINALIZED : 0);
	put_le64(hdr + 16, z->plen);
	put_le64(hdr + 24, z->zlen);
	put_le32(hdr + 32, header_crc(hdr, z->crc, z->zlen));
}

int profile__write(const struct profile *p, const char *path)
{
	struct wbuf b = { 0 };
	struct zsink *z = NULL;
	uint8_t hdr[HEADER_SIZE] = { 0 };
	char *tmp = NULL;
	int fd = -1, err;

	err = build_tables(p, &b);
	if (err)
		goto out;
	err = -ENOMEM;
	z = malloc(sizeof(*z));
	if (!z)
		goto out;

	err = open_output_in_place(path, &fd);
	if (err)
		goto out;
	if (fd >= 0) {
		/*
		 * A device or FIFO cannot seek back to the header, which holds the
		 * sizes and checksum: measure first, then write. deflate is
		 * deterministic, so both passes produce the same bytes.
		 */
		uint64_t zlen;
		uint32_t crc;
		int level = 6;

		err = emit_payload(p, &b, z, -1, level);
		if (!err && too_compressed(z)) {
			level = 0;
			err = emit_payload(p, &b, z, -1, level);
		}
		if (err)
			goto close_in_place;
		make_header(hdr, p, z);
		zlen = z->zlen;
		crc = z->crc;
		err = write_all(fd, hdr, sizeof(hdr));
		if (!err)
			err = emit_payload(p, &b, z, fd, level);
		if (!err && (z->zlen != zlen || z->crc != crc))
			err = -EIO;
close_in_place:
		if (close(fd) && !err)
			err = -errno;
		fd = -1;
		goto out;
	}
	err = -ENOMEM;
	if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0) {
		tmp = NULL;
		goto out;
	}
	fd = mkstemp(tmp);
	if (fd < 0) {
		err = -errno;
		free(tmp);
		tmp = NULL;
		goto out;
	}
	/* the header is written last, when the sizes and checksum are known */
	err = write_all(fd, hdr, sizeof(hdr));
	if (!err)
		err = emit_payload(p, &b, z, fd, 6);
	if (!err && too_compressed(z)) {
		/* the reader would take it for a bomb: stored instead */
		if (ftruncate(fd, HEADER_SIZE) || lseek(fd, HEADER_SIZE, SEEK_SET) < 0)
			err = -errno;
		if (!err)
			err = emit_payload(p, &b, z, fd, 0);
	}
	if (!err) {
		make_header(hdr, p, z);
		err = pwrite_all(fd, hdr, sizeof(hdr), 0);
	}
	if (!err && fchmod(fd, 0644))
		err = -errno;
	if (!err && fsync(fd))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	fd = -1;
	if (!err && rename(tmp, path))
		err = -errno;
out:
	if (fd >= 0)
		close(fd);
	if (tmp) {
		if (err)
			unlink(tmp);
		free(tmp);
	}
	free(z);
	free(b.data);
	return err;
}

/* ---- reading ------------------------------------------------------------- */

struct rd {
	const uint8_t *data;
	size_t len;
	size_t pos;
	struct profile_read_error *err;
};

static int fail(struct profile_read_error *e, const char *what, uint64_t off, bool in_payload)
{
	if (e) {
		e->what = what;
		e->offset = off;
		e->in_payload = in_payload;
	}
	return -EINVAL;
}

struct section {
	const uint8_t *data;
	uint64_t len;
	uint64_t off; /* in payload */
};

/* Checks that a section holds a u64 count of `elem`-byte entries, exactly. */
static int section_count(const struct section *s, size_t elem, const char *what,
			 struct profile_read_error *e, uint64_t *n)
{
	if (!s->data || s->len < 8)
		return fail(e, what, s->off, true);
	*n = get_le64(s->data);
	if (elem && *n != (s->len - 8) / elem)
		return fail(e, what, s->off, true);
	if (elem && (s->len - 8) % elem)
		return fail(e, what, s->off, true);
	return 0;
}

/* The HNTS section: each string id through smap (nstr of them), each weight within its total. */
static int read_hints(const struct section *s, const uint32_t *smap, uint64_t nstr,
		      struct profile *p, struct profile_read_error *e)
{
	struct pf_hint *h;
	uint64_t n;
	int err = section_count(s, HINT_SIZE, "malformed hints section", e, &n);

	if (err)
		return err;
	h = malloc((n ? n : 1) * sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *d = s->data + 8 + i * HINT_SIZE;
		uint32_t mod = get_le32(d), bid = get_le32(d + 4), path = get_le32(d + 8);

		h[i] = (struct pf_hint){ .weight = get_le64(d + 16), .total = get_le64(d + 24) };
		if (mod >= nstr || bid >= nstr || path >= nstr || get_le32(d + 12) ||
		    h[i].weight > h[i].total) {
			free(h);
			return fail(e, "bad hint entry", s->off + 24 + i * HINT_SIZE, true);
		}
		h[i].module = smap[mod];
		h[i].build_id = smap[bid];
		h[i].path = smap[path];
	}
	err = profile__set_hints(p, h, (size_t)n);
	free(h);
	return err;
}

int decode_payload(const uint8_t *d, size_t len, uint32_t version, struct profile *p,
		   struct profile_read_error *e)
{
	struct section strs = { 0 }, frms = { 0 }, stks = { 0 }, ends = { 0 }, thrs = { 0 },
		       meta = { 0 }, smps = { 0 }, jobs = { 0 }, hnts = { 0 }, ctrs = { 0 };
	const size_t thr_size = version >= 4 ? 16 : 12;

	p->file_version = version;
	uint32_t *smap = NULL, *fmap = NULL, *kmap = NULL, *tmap = NULL;
	uint64_t n;
	size_t pos = 0;
	int err;

	while (pos < len) {
		struct section *s = NULL;
		uint32_t tag;
		uint64_t slen;

		if (len - pos < 16)
			return fail(e, "truncated section header", pos, true);
		tag = get_le32(d + pos);
		slen = get_le64(d + pos + 8);
		if (slen > len - pos - 16)
			return fail(e, "section runs past the end of the data", pos, true);
		switch (tag) {
		case TAG_STRS:
			s = &strs;
			break;
		case TAG_FRMS:
			s = &frms;
			break;
		case TAG_STKS:
			s = &stks;
			break;
		case TAG_ENDS:
			s = version >= 2 ? &ends : NULL;
			break;
		case TAG_THRS:
			s = &thrs;
			break;
		case TAG_META:
			s = &meta;
			break;
		case TAG_SMPS:
			s = &smps;
			break;
		case TAG_JOBS:
			s = version >= 4 ? &jobs : NULL;
			break;
		case TAG_HNTS:
			s = &hnts;
			break;
		case TAG_CTRS:
			s = version >= 4 ? &ctrs : NULL;
			break;
		default:
			break;
		}
		if (s) {
			if (s->data)
				return fail(e, "duplicate section", pos, true);
			s->data = d + pos + 16;
			s->len = slen;
			s->off = pos;
		}
		pos += 16 + slen;
	}

	/* strings: variable-size entries, each checked against what is left */
	err = section_count(&strs, 0, "missing or short strings section", e, &n);
	if (err)
		return err;
	if (n == 0 || n > (strs.len - 8) / 4)
		return fail(e, "bad string count", strs.off, true);
	err = -ENOMEM;
	smap = malloc(n * sizeof(*smap));
	if (!smap)
		goto out;
	{
		uint64_t at = 8;
		for (uint64_t i = 0; i < n; i++) {
			uint32_t l;
			int64_t id;

			if (strs.len - at < 4) {
				err = fail(e, "truncated strings section", strs.off + 16 + at,
					   true);
				goto out;
			}
			l = get_le32(strs.data + at);
			at += 4;
			if (l > strs.len - at) {
				err = fail(e, "string runs past its section", strs.off + 16 + at,
					   true);
				goto out;
			}
			if (i == 0 && l != 0) {
				err = fail(e, "string 0 is not empty", strs.off + 16 + at, true);
				goto out;
			}
			id = profile__string(p, (const char *)strs.data + at, l);
			if (id < 0) {
				err = (int)id;
				goto out;
			}
			smap[i] = (uint32_t)id;
			at += l;
		}
		if (at != strs.len) {
			err = fail(e, "trailing bytes in strings section", strs.off + 16 + at,
				   true);
			goto out;
		}
	}
	uint64_t nstr = n;
	/* a string id from the file, or UINT32_MAX (never a valid id) when out of range */
#define STR_ID(v) ((v) < nstr ? smap[(v)] : UINT32_MAX)

	err = section_count(&frms, FRAME_SIZE, "missing or malformed frames section", e, &n);
	if (err)
		goto out;
	err = -ENOMEM;
	fmap = malloc((n ? n : 1) * sizeof(*fmap));
	if (!fmap)
		goto out;
	uint64_t nfrm = n;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *f = frms.data + 8 + i * FRAME_SIZE;
		uint64_t at = frms.off + 24 + i * FRAME_SIZE;
		struct pf_frame fr = {
			.name = STR_ID(get_le32(f)),
			.module = STR_ID(get_le32(f + 4)),
			.kind = get_le32(f + 8),
			.file = STR_ID(get_le32(f + 12)),
			.line = get_le32(f + 16),
			.build_id = STR_ID(get_le32(f + 20)),
		};
		int64_t id;

		if (fr.kind >= FRAME_KIND_MAX) {
			err = fail(e, "bad frame kind", at, true);
			goto out;
		}
		id = profile__frame_full(p, &fr);
		if (id == -EINVAL) {
			err = fail(e, "bad frame entry", at, true);
			goto out;
		}
		if (id < 0) {
			err = (int)id;
			goto out;
		}
		fmap[i] = (uint32_t)id;
	}

	err = section_count(&stks, 8, "missing or malformed stacks section", e, &n);
	if (err)
		goto out;
	if (n == 0) {
		err = fail(e, "stacks section has no root", stks.off, true);
		goto out;
	}
	err = -ENOMEM;
	kmap = malloc(n * sizeof(*kmap));
	if (!kmap)
		goto out;
	kmap[0] = 0;
	uint64_t nstk = n;
	for (uint64_t i = 1; i < n; i++) {
		const uint8_t *s = stks.data + 8 + i * 8;
		uint32_t parent = get_le32(s), frame = get_le32(s + 4);
		int64_t id;

		/* parent < i keeps the tree acyclic: a walk to the root always ends */
		if (parent >= i || frame >= nfrm) {
			err = fail(e, "bad stack entry", stks.off + 24 + i * 8, true);
			goto out;
		}
		if (profile__stack_depth(p, kmap[parent]) >= PROFILE_MAX_DEPTH) {
			_Static_assert(PROFILE_MAX_DEPTH == 8192, "the message says 8192");
			err = fail(e, "a stack deeper than dlflame records (8192 frames)",
				   stks.off + 24 + i * 8, true);
			goto out;
		}
		id = profile__stack(p, kmap[parent], fmap[frame]);
		if (id < 0) {
			err = (int)id;
			goto out;
		}
		kmap[i] = (uint32_t)id;
	}
	if (version >= 2) {
		err = section_count(&ends, 1, "missing or malformed stack ends section", e, &n);
		if (err)
			goto out;
		if (n != nstk) {
			err = fail(e, "stack ends do not match the stacks", ends.off, true);
			goto out;
		}
		for (uint64_t i = 0; i < n; i++) {
			uint8_t end = ends.data[8 + i];

			if (end >= STACK_END_MAX) {
				err = fail(e, "bad stack end", ends.off + 24 + i, true);
				goto out;
			}
			profile__set_stack_end(p, kmap[i], end);
		}
	}

	err = section_count(&thrs, thr_size, "missing or malformed threads section", e, &n);
	if (err)
		goto out;
	err = -ENOMEM;
	tmap = malloc((n ? n : 1) * sizeof(*tmap));
	if (!tmap)
		goto out;
	uint64_t nthr = n;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *t = thrs.data + 8 + i * thr_size;
		uint32_t host = thr_size > 12 ? STR_ID(get_le32(t + 12)) : 0;
		int64_t id = profile__thread_on(p, host, get_le32(t), get_le32(t + 4),
						STR_ID(get_le32(t + 8)));
		if (id == -EINVAL) {
			err = fail(e, "bad thread entry", thrs.off + 24 + i * thr_size, true);
			goto out;
		}
		if (id < 0) {
			err = (int)id;
			goto out;
		}
		tmap[i] = (uint32_t)id;
	}

	if (!meta.data || meta.len < META_SIZE) {
		err = fail(e, "missing or short metadata section", meta.off, true);
		goto out;
	}
	p->meta.start_time = get_le64(meta.data);
	p->meta.end_time = get_le64(meta.data + 8);
	p->meta.lost = get_le64(meta.data + 16);
	p->meta.freq = get_le64(meta.data + 24);
	p->meta.event = STR_ID(get_le32(meta.data + 32));
	p->meta.command = STR_ID(get_le32(meta.data + 36));
	p->meta.hostname = STR_ID(get_le32(meta.data + 40));
	if (p->meta.event == UINT32_MAX || p->meta.command == UINT32_MAX ||
	    p->meta.hostname == UINT32_MAX) {
		err = fail(e, "bad string id in metadata", meta.off, true);
		goto out;
	}
	p->meta.finalized = get_le32(meta.data + 44) & FLAG_FINALIZED;

	/* after the metadata: a process on the profile's own host is keyed as host 0 */
	if (jobs.data) {
		if (jobs.len < 16 || (jobs.len - 16) % 24 ||
		    get_le64(jobs.data + 8) != (jobs.len - 16) / 24) {
			err = fail(e, "malformed jobs section", jobs.off, true);
			goto out;
		}
		p->meta.clock_offset = (int64_t)get_le64(jobs.data);
		for (uint64_t i = 0, nj = get_le64(jobs.data + 8); i < nj; i++) {
			const uint8_t *j = jobs.data + 16 + i * 24;
			struct pf_process pr = {
				.host = STR_ID(get_le32(j)),
				.pid = get_le32(j + 4),
				.rank = get_le32(j + 8),
				.local_rank = get_le32(j + 12),
				.world_size = get_le32(j + 16),
				.launcher = STR_ID(get_le32(j + 20)),
			};

			err = profile__set_process(p, &pr);
			if (err == -EINVAL)
				err = fail(e, "bad process entry", jobs.off + 32 + i * 24, true);
			if (err)
				goto out;
		}
	}
	if (ctrs.data) {
		if (ctrs.len < 8 || (ctrs.len - 8) % 16 ||
		    get_le64(ctrs.data) != (ctrs.len - 8) / 16) {
			err = fail(e, "malformed containers section", ctrs.off, true);
			goto out;
		}
		for (uint64_t i = 0, nc = get_le64(ctrs.data); i < nc; i++) {
			const uint8_t *c = ctrs.data + 8 + i * 16;
			uint32_t host = STR_ID(get_le32(c)), pid = get_le32(c + 4);
			const struct pf_process *have =
				host == UINT32_MAX ? NULL : profile__process(p, host, pid);
			struct pf_process pr = {
				.host = host,
				.pid = pid,
				.rank = PF_NO_RANK,
				.local_rank = PF_NO_RANK,
				.world_size = PF_NO_RANK,
			};

			if (have)
				pr = *have;
			pr.cgroup = STR_ID(get_le32(c + 8));
			pr.container = STR_ID(get_le32(c + 12));
			err = profile__set_process(p, &pr);
			if (err == -EINVAL)
				err = fail(e, "bad container entry", ctrs.off + 24 + i * 16, true);
			if (err)
				goto out;
		}
	}

	if (hnts.data) {
		err = read_hints(&hnts, smap, nstr, p, e);
		if (err)
			goto out;
	}

	err = section_count(&smps, SAMPLE_SIZE, "missing or malformed samples section", e, &n);
	if (err)
		goto out;
	err = -ENOMEM;
	if (n && grow_array((void **)&p->samples, &p->cap_samples, n, sizeof(*p->samples)))
		goto out;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *s = smps.data + 8 + i * SAMPLE_SIZE;
		struct pf_sample smp = {
			.time = get_le64(s),
			.weight = get_le64(s + 8),
		};
		uint32_t stack = get_le32(s + 16), thread = get_le32(s + 20),
			 kind = get_le32(s + 24);

		if (stack >= nstk || thread >= nthr || kind >= SAMPLE_KIND_MAX) {
			err = fail(e, "bad sample entry", smps.off + 24 + i * SAMPLE_SIZE, true);
			goto out;
		}
		smp.stack = kmap[stack];
		smp.thread = tmap[thread];
		smp.kind = kind;
		p->samples[p->nr_samples++] = smp;
	}
	err = 0;
#undef STR_ID
out:
	free(smap);
	free(fmap);
	free(kmap);
	free(tmap);
	return err;
}

int profile__read_mem(const uint8_t *buf, size_t len, struct profile **out,
		      struct profile_read_error *e)
{
	struct profile *p = NULL;
	uint64_t plen, zlen;
	uint32_t version;
	uint8_t *payload = NULL;
	z_stream zs = { 0 };
	int err;

	if (len == 0)
		return fail(e, "empty file", 0, false);
	if (len >= 8 && !memcmp(buf, PROFILE_JOURNAL_MAGIC, 8)) {
		uint64_t torn;

		return journal_read(buf, len, out, e, &torn);
	}
	if (len < 8 || memcmp(buf, PROFILE_MAGIC, 7) != 0)
		return fail(e, "not a dlflame profile (bad magic)", 0, false);
	if (buf[7] != PROFILE_MAGIC[7] || len < HEADER_SIZE) {
		if (len < HEADER_SIZE)
			return fail(e, "truncated header", len, false);
		return fail(e, "unsupported profile format (magic version)", 7, false);
	}
	version = get_le32(buf + 8);
	if (version < 1 || version > PROFILE_VERSION)
		return fail(e, "unsupported profile version", 8, false);
	if (get_le32(buf + 12) & ~FLAG_FINALIZED)
		return fail(e, "unknown header flags", 12, false);
	if (get_le32(buf + 36) != 0)
		return fail(e, "reserved header field is not zero", 36, false);
	plen = get_le64(buf + 16);
	zlen = get_le64(buf + 24);
	if (zlen > len - HEADER_SIZE)
		return fail(e, "truncated (compressed data shorter than the header says)", len,
			    false);
	if (zlen < len - HEADER_SIZE)
		return fail(e, "trailing bytes after the compressed data", HEADER_SIZE + zlen,
			    false);
	if (plen > MAX_PAYLOAD)
		return fail(e, "payload larger than any profile dlflame writes (8 GiB)", 16, false);
	_Static_assert(MAX_RATIO == 100, "the message says 100:1");
	if (plen > zlen * MAX_RATIO + 64)
		return fail(
			e,
			"payload would expand more than 100:1, which no profile dlflame writes does",
			16, false);
	/* after the sizes: a size no profile has is said as such, not as a bad checksum */
	if ((version >= 3 ? header_crc(buf, (uint32_t)crc32(0, buf + HEADER_SIZE, zlen), zlen)
			  : (uint32_t)crc32(0, buf + HEADER_SIZE, zlen)) != get_le32(buf + 32))
		return fail(e, "checksum mismatch (file corrupt)", 32, false);

	err = -ENOMEM;
	payload = malloc(plen ? plen : 1);
	p = profile__new();
	if (!payload || !p)
		goto out;
	if (inflateInit(&zs) != Z_OK)
		goto out;
	zs.next_in = (Bytef *)buf + HEADER_SIZE;
	zs.next_out = payload;
	/* zlib counts in uInt; feed and drain in pieces for large files */
	{
		uint64_t in_left = zlen, out_left = plen;
		int zr = Z_OK;

		while (zr == Z_OK) {
			uInt in_chunk = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
			uInt out_chunk = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;

			zs.avail_in = in_chunk;
			zs.avail_out = out_chunk;
			zr = inflate(&zs, Z_NO_FLUSH);
			in_left -= in_chunk - zs.avail_in;
			out_left -= out_chunk - zs.avail_out;
			if (zr == Z_OK && zs.avail_out == out_chunk && zs.avail_in == in_chunk)
				break; /* no progress */
			if (zr == Z_BUF_ERROR)
				break;
		}
		inflateEnd(&zs);
		if (zr != Z_STREAM_END || out_left || in_left) {
			err = fail(e, "compressed data is corrupt or does not match its size",
				   HEADER_SIZE + (zlen - in_left), false);
			goto out;
		}
	}
	err = decode_payload(payload, plen, version, p, e);
	if (err)
		goto out;
	if (p->meta.finalized != !!(get_le32(buf + 12) & FLAG_FINALIZED)) {
		err = fail(e, "header and metadata disagree on finalization", 12, false);
		goto out;
	}
	*out = p;
	p = NULL;
out:
	profile__free(p);
	free(payload);
	return err;
}

int profile__read(const char *path, struct profile **out, struct profile_read_error *e)
{
	struct stat st;
	uint8_t *buf = NULL;
	size_t got = 0;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EINVAL;
		fail(e, "not a regular file", 0, false);
		goto out;
	}
	if ((uint64_t)st.st_size > MAX_PAYLOAD) {
		err = -EFBIG;
		goto out;
	}
	err = -ENOMEM;
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf)
		goto out;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	err = profile__read_mem(buf, got, out, e);
out:
	free(buf);
	close(fd);
	return err;
}
