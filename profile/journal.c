/* SPDX-License-Identifier: MIT */
/*
 * The journal: what a recording holds so far, kept at the output path while
 * it runs, so that a recorder killed with SIGKILL (the OOM killer, a job
 * scheduler) leaves a profile that `report` can read. The normal profile,
 * written when the recording finishes, replaces it.
 *
 *   header  magic[8] "DLFJRNL\x01", u32 version (2), u32 reserved
 *   batch   u32 tag "JBAT", u32 crc32 of the body, u64 body length, body
 *   body    sections as in the profile's payload (u32 tag, u32 0, u64 length):
 *           STRS u64 first, n, n x (u32 len, bytes)
 *           FRMS u64 first, n, n x frame        STKS u64 first, n, n x stack
 *           ENDS u64 first, n, n x u8           (the new stacks' ends)
 *           ENDU u64 n, n x (u32 stack, u32 end) (older stacks whose end was set since)
 *           THRS u64 first, n, n x thread       SMPS u64 first, n, n x sample
 *           LOCS u64 n, n x (u32 frame, u32 kernel, u64 offset, u32 len, path,
 *                            u32 len, build-id hex)
 *           META as in the profile (the latest)  BOOT u32 len, boot id (first batch)
 *           JOBS as in the profile (the latest)
 *           PEND u64 n, n x sample (the samples the recorder holds back for
 *                now, as they would be stored; the latest good batch's are
 *                added after the others when the journal is read)
 *   Version 2: threads have a host (as in profile version 4), JOBS.
 *
 * Each sync appends one batch with what was added since the last one. The
 * tables only grow (ids are stable), so a reader appends each batch's rows;
 * a batch cut short by the kill, or whose checksum fails, ends the journal.
 * The frames that the recorder names only at the end (a module and a file
 * offset, or a kernel address) travel as LOCS, for the reader to name from
 * the module files still on disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "internal.h"

#define JOURNAL_VERSION 2
#define JHEADER_SIZE 16
#define TAG(a, b, c, d) \
	((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
#define TAG_JBAT TAG('J', 'B', 'A', 'T')
#define TAG_STRS TAG('S', 'T', 'R', 'S')
#define TAG_FRMS TAG('F', 'R', 'M', 'S')
#define TAG_STKS TAG('S', 'T', 'K', 'S')
#define TAG_ENDS TAG('E', 'N', 'D', 'S')
#define TAG_ENDU TAG('E', 'N', 'D', 'U')
#define TAG_THRS TAG('T', 'H', 'R', 'S')
#define TAG_SMPS TAG('S', 'M', 'P', 'S')
#define TAG_LOCS TAG('L', 'O', 'C', 'S')
#define TAG_META TAG('M', 'E', 'T', 'A')
#define TAG_BOOT TAG('B', 'O', 'O', 'T')
#define TAG_JOBS TAG('J', 'O', 'B', 'S')
#define TAG_PEND TAG('P', 'E', 'N', 'D')
/* a batch larger than this is not one the writer makes: the journal ends there */
#define MAX_BATCH (1ull << 31)
#define SPOOL_CHUNK 2048

struct pf_journal {
	const struct profile *p;
	int fd;
	bool booted;
	/* rows already in the journal */
	size_t strings, frames, stacks, threads;
	uint64_t samples;
	uint8_t *ends; /* the ends as journaled, per journaled stack */
	size_t ends_cap;
	struct wbuf b, lb; /* a batch; its LOCS rows */
};

int profile__journal_open(const struct profile *p, const char *path, struct pf_journal **out)
{
	struct pf_journal *j;
	uint8_t hdr[JHEADER_SIZE] = { 0 };
	char *tmp = NULL;
	struct stat st;
	int err;

	*out = NULL;
	/* a device or FIFO output (-o /dev/stdout) gets the profile at the end only */
	if (!lstat(path, &st) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		return -ENOTSUP;
	j = calloc(1, sizeof(*j));
	if (!j || asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0) {
		free(j);
		return -ENOMEM;
	}
	j->p = p;
	j->fd = mkstemp(tmp);
	if (j->fd < 0) {
		err = -errno;
		goto fail;
	}
	memcpy(hdr, PROFILE_JOURNAL_MAGIC, 8);
	put_le32(hdr + 8, JOURNAL_VERSION);
	err = write_all(j->fd, hdr, sizeof(hdr));
	if (!err && fchmod(j->fd, 0644))
		err = -errno;
	/* in place of whatever was there (a symlink is replaced, not followed) */
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		goto fail;
	free(tmp);
	*out = j;
	return 0;
fail:
	if (j->fd >= 0) {
		close(j->fd);
		unlink(tmp);
	}
	free(tmp);
	free(j);
	return err;
}

void profile__journal_close(struct pf_journal *j)
{
	if (!j)
		return;
	if (j->fd >= 0)
		close(j->fd);
	free(j->ends);
	free(j->b.data);
	free(j->lb.data);
	free(j);
}

static void put_str(struct wbuf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	wb_u32(b, (uint32_t)n);
	wb_bytes(b, s, n);
}

static void boot_section(struct wbuf *b)
{
	char id[64] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	size_t at;

	if (f) {
		if (!fgets(id, sizeof(id), f))
			id[0] = '\0';
		fclose(f);
	}
	id[strcspn(id, "\n")] = '\0';
	at = section_begin(b, TAG_BOOT);
	put_str(b, id);
	section_end(b, at);
}

static int samples_section(struct pf_journal *j)
{
	const struct profile *p = j->p;
	uint64_t total = p->nr_spilled + p->nr_samples, first = j->samples;
	uint8_t *d;
	size_t at;
	int err;

	at = section_begin(&j->b, TAG_SMPS);
	wb_u64(&j->b, first);
	wb_u64(&j->b, total - first);
	/* spilled since the last sync: from the spool */
	for (uint64_t i = first; i < p->nr_spilled; i += SPOOL_CHUNK) {
		size_t n =
			p->nr_spilled - i < SPOOL_CHUNK ? (size_t)(p->nr_spilled - i) : SPOOL_CHUNK;

		d = wb_reserve(&j->b, n * SAMPLE_SIZE);
		if (!d)
			return -ENOMEM;
		err = spool_read(p, i, d, n);
		if (err)
			return err;
	}
	for (uint64_t i = first > p->nr_spilled ? first - p->nr_spilled : 0; i < p->nr_samples;
	     i++) {
		d = wb_reserve(&j->b, SAMPLE_SIZE);
		if (!d)
			return -ENOMEM;
		sample_encode(d, &p->samples[i]);
	}
	section_end(&j->b, at);
	return j->b.err;
}

int profile__journal_sync(struct pf_journal *j, profile_loc_fn fn, void *ctx,
			  const struct pf_sample *pending, size_t nr_pending)
{
	const struct profile *p;
	uint8_t head[16];
	size_t at, nlocs = 0, count_at;
	bool changed;
	int err;

	if (!j || j->fd < 0)
		return -EBADF;
	p = j->p;
	j->b.len = 0;
	j->b.err = 0;
	if (!j->booted)
		boot_section(&j->b);

	at = section_begin(&j->b, TAG_STRS);
	wb_u64(&j->b, j->strings);
	wb_u64(&j->b, p->nr_strings - j->strings);
	for (size_t i = j->strings; i < p->nr_strings; i++) {
		wb_u32(&j->b, (uint32_t)p->strings[i].len);
		wb_bytes(&j->b, p->pool + p->strings[i].off, p->strings[i].len);
	}
	section_end(&j->b, at);

	/*
	 * The frames named only at the end are alike (placeholders): each gets
	 * its own line here, so that reading them back keeps them apart and at
	 * the same ids. Their locations go to the LOCS section.
	 */
	j->lb.len = 0;
	j->lb.err = 0;
	at = section_begin(&j->b, TAG_FRMS);
	wb_u64(&j->b, j->frames);
	wb_u64(&j->b, p->nr_frames - j->frames);
	for (size_t i = j->frames; i < p->nr_frames; i++) {
		const struct pf_frame *f = &p->frames[i];
		struct pf_journal_loc loc = { 0 };
		bool placeholder = fn && fn(ctx, (uint32_t)i, &loc);

		wb_u32(&j->b, f->name);
		wb_u32(&j->b, f->module);
		wb_u32(&j->b, f->kind);
		wb_u32(&j->b, f->file);
		wb_u32(&j->b, placeholder ? (uint32_t)i + 1 : f->line);
		wb_u32(&j->b, f->build_id);
		if (!placeholder)
			continue;
		wb_u32(&j->lb, (uint32_t)i);
		wb_u32(&j->lb, loc.kernel);
		wb_u64(&j->lb, loc.offset);
		put_str(&j->lb, loc.path);
		put_str(&j->lb, loc.build_id);
		nlocs++;
	}
	section_end(&j->b, at);

	at = section_begin(&j->b, TAG_LOCS);
	wb_u64(&j->b, nlocs);
	wb_bytes(&j->b, j->lb.data, j->lb.len);
	if (j->lb.err)
		j->b.err = j->lb.err;
	section_end(&j->b, at);

	at = section_begin(&j->b, TAG_STKS);
	wb_u64(&j->b, j->stacks);
	wb_u64(&j->b, p->nr_stacks - j->stacks);
	for (size_t i = j->stacks; i < p->nr_stacks; i++) {
		wb_u32(&j->b, p->stacks[i].parent);
		wb_u32(&j->b, p->stacks[i].frame);
	}
	section_end(&j->b, at);

	at = section_begin(&j->b, TAG_ENDS);
	wb_u64(&j->b, j->stacks);
	wb_u64(&j->b, p->nr_stacks - j->stacks);
	wb_bytes(&j->b, p->ends + j->stacks, p->nr_stacks - j->stacks);
	section_end(&j->b, at);

	/* an end is set once, maybe after its stack was journaled */
	at = section_begin(&j->b, TAG_ENDU);
	count_at = j->b.len;
	wb_u64(&j->b, 0);
	nlocs = 0;
	/* most syncs change no old stack's end: one compare of the whole array first */
	changed = j->stacks && memcmp(j->ends, p->ends, j->stacks);
	for (size_t i = 0; changed && i < j->stacks; i++) {
		if (j->ends[i] == p->ends[i])
			continue;
		wb_u32(&j->b, (uint32_t)i);
		wb_u32(&j->b, p->ends[i]);
		nlocs++;
	}
	if (!j->b.err)
		put_le64(j->b.data + count_at, nlocs);
	section_end(&j->b, at);

	at = section_begin(&j->b, TAG_THRS);
	wb_u64(&j->b, j->threads);
	wb_u64(&j->b, p->nr_threads - j->threads);
	for (size_t i = j->threads; i < p->nr_threads; i++) {
		wb_u32(&j->b, p->threads[i].pid);
		wb_u32(&j->b, p->threads[i].tid);
		wb_u32(&j->b, p->threads[i].comm);
		wb_u32(&j->b, p->threads[i].host);
	}
	section_end(&j->b, at);
	jobs_section(p, &j->b);

	at = section_begin(&j->b, TAG_META);
	wb_u64(&j->b, p->meta.start_time);
	wb_u64(&j->b, p->meta.end_time);
	wb_u64(&j->b, p->meta.lost);
	wb_u64(&j->b, p->meta.freq);
	wb_u32(&j->b, p->meta.event);
	wb_u32(&j->b, p->meta.command);
	wb_u32(&j->b, p->meta.hostname);
	wb_u32(&j->b, 0); /* never finalized: the profile that replaces the journal is */
	section_end(&j->b, at);

	err = samples_section(j);
	if (err)
		return err;
	at = section_begin(&j->b, TAG_PEND);
	wb_u64(&j->b, nr_pending);
	for (size_t i = 0; i < nr_pending; i++) {
		uint8_t *d = wb_reserve(&j->b, SAMPLE_SIZE);

		if (!d)
			return -ENOMEM;
		sample_encode(d, &pending[i]);
	}
	section_end(&j->b, at);
	if (j->b.err)
		return j->b.err;
	put_le32(head, TAG_JBAT);
	put_le32(head + 4, (uint32_t)crc32(0, j->b.data, (uInt)j->b.len));
	put_le64(head + 8, j->b.len);
	err = write_all(j->fd, head, sizeof(head));
	if (!err)
		err = write_all(j->fd, j->b.data, j->b.len);
	if (err)
		return err;
	/* what is written now counts as journaled */
	if (grow_array((void **)&j->ends, &j->ends_cap, p->nr_stacks ? p->nr_stacks : 1, 1))
		return -ENOMEM;
	memcpy(j->ends, p->ends, p->nr_stacks);
	j->booted = true;
	j->strings = p->nr_strings;
	j->frames = p->nr_frames;
	j->stacks = p->nr_stacks;
	j->threads = p->nr_threads;
	j->samples = p->nr_spilled + p->nr_samples;
	return 0;
}

/* ---- reading ----------------------------------------------------------------- */

/* One table's rows, as they accumulate over the batches. */
struct rows {
	struct wbuf b;
	uint64_t n;
};

struct jread {
	struct rows strs, frms, stks, thrs, smps;
	uint8_t *ends;
	size_t ends_cap;
	struct wbuf locs; /* LOCS rows, as written */
	uint64_t nlocs;
	uint8_t meta[META_SIZE];
	bool have_meta;
	const uint8_t *jobs; /* the latest good batch's JOBS body (in the journal's buffer) */
	uint64_t jobs_len;
	const uint8_t *pend; /* the latest good batch's PEND rows (in the journal's buffer) */
	uint64_t npend;
	char boot[64];
};

struct cursor {
	const uint8_t *d;
	uint64_t len, at;
};

static bool take(struct cursor *c, uint64_t n, const uint8_t **out)
{
	if (c->len - c->at < n)
		return false;
	*out = c->d + c->at;
	c->at += n;
	return true;
}

static bool take_u64(struct cursor *c, uint64_t *v)
{
	const uint8_t *d;

	if (!take(c, 8, &d))
		return false;
	*v = get_le64(d);
	return true;
}

/* A delta section's rows of fixed size `elem` (0: strings), if it continues the table. */
static bool rows_add(struct rows *r, struct cursor *c, size_t elem)
{
	uint64_t first, n;
	const uint8_t *d;

	if (!take_u64(c, &first) || !take_u64(c, &n) || first != r->n)
		return false;
	if (elem) {
		if (n > (c->len - c->at) / elem || !take(c, n * elem, &d))
			return false;
		wb_bytes(&r->b, d, n * elem);
	} else {
		uint64_t start = c->at;

		for (uint64_t i = 0; i < n; i++) {
			const uint8_t *l;

			if (!take(c, 4, &l) || !take(c, get_le32(l), &d))
				return false;
		}
		wb_bytes(&r->b, c->d + start, c->at - start);
	}
	if (c->at != c->len || r->b.err)
		return false;
	r->n += n;
	return true;
}

/* The ends of this batch's new stacks, [first, jr->stks.n). */
static bool ends_add(struct jread *jr, struct cursor *c, uint64_t first_new)
{
	uint64_t first, n;
	const uint8_t *d;

	if (!take_u64(c, &first) || !take_u64(c, &n) || first != first_new ||
	    n != jr->stks.n - first_new || c->len - c->at != n || !take(c, n, &d))
		return false;
	if (grow_array((void **)&jr->ends, &jr->ends_cap, first + n ? first + n : 1, 1))
		return false;
	memcpy(jr->ends + first, d, n);
	return true;
}

static bool endu_apply(struct jread *jr, struct cursor *c, uint64_t nstacks)
{
	uint64_t n;
	const uint8_t *d;

	if (!take_u64(c, &n) || n > (c->len - c->at) / 8)
		return false;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t id, end;

		if (!take(c, 8, &d))
			return false;
		id = get_le32(d);
		end = get_le32(d + 4);
		if (id >= nstacks || end >= STACK_END_MAX)
			return false;
		jr->ends[id] = (uint8_t)end;
	}
	return c->at == c->len;
}

static bool locs_add(struct jread *jr, struct cursor *c)
{
	uint64_t n, start;
	const uint8_t *d;

	if (!take_u64(c, &n))
		return false;
	start = c->at;
	for (uint64_t i = 0; i < n; i++) {
		if (!take(c, 16, &d))
			return false;
		for (int s = 0; s < 2; s++)
			if (!take(c, 4, &d) || !take(c, get_le32(d), &d))
				return false;
	}
	if (c->at != c->len)
		return false;
	wb_bytes(&jr->locs, c->d + start, c->at - start);
	jr->nlocs += n;
	return !jr->locs.err;
}

/*
 * Apply one batch body. Sections are applied in the order the writer puts
 * them; false (nothing of the batch kept) when any is malformed.
 */
static bool batch_apply(struct jread *jr, const uint8_t *d, uint64_t len)
{
	struct jread save = *jr;
	struct cursor all = { d, len, 0 };
	uint64_t stacks_before = jr->stks.n, jobs_len = 0, npend = 0;
	const uint8_t *jobs = NULL, *pend = NULL;
	bool have_pend = false;

	while (all.at < len) {
		const uint8_t *h, *body;
		uint64_t slen;
		struct cursor c;
		bool ok = true;

		if (!take(&all, 16, &h))
			goto bad;
		slen = get_le64(h + 8);
		if (!take(&all, slen, &body))
			goto bad;
		c = (struct cursor){ body, slen, 0 };
		switch (get_le32(h)) {
		case TAG_STRS:
			ok = rows_add(&jr->strs, &c, 0);
			break;
		case TAG_FRMS:
			ok = rows_add(&jr->frms, &c, FRAME_SIZE);
			break;
		case TAG_LOCS:
			ok = locs_add(jr, &c);
			break;
		case TAG_STKS:
			ok = rows_add(&jr->stks, &c, 8);
			break;
		case TAG_ENDS:
			/* after the stacks section: these are its new rows' ends */
			ok = ends_add(jr, &c, stacks_before);
			break;
		case TAG_ENDU:
			ok = endu_apply(jr, &c, stacks_before);
			break;
		case TAG_THRS:
			ok = rows_add(&jr->thrs, &c, 16);
			break;
		case TAG_JOBS:
			/* kept once the whole batch is: its string ids are this batch's */
			jobs = body;
			jobs_len = slen;
			break;
		case TAG_SMPS:
			ok = rows_add(&jr->smps, &c, SAMPLE_SIZE);
			break;
		case TAG_PEND:
			/* whole rows only; their stacks are checked when the profile is read */
			ok = take_u64(&c, &npend) && npend <= (c.len - c.at) / SAMPLE_SIZE &&
			     c.len - c.at == npend * SAMPLE_SIZE &&
			     take(&c, npend * SAMPLE_SIZE, &pend);
			have_pend = ok;
			break;
		case TAG_META:
			ok = slen == META_SIZE;
			if (ok) {
				memcpy(jr->meta, body, META_SIZE);
				jr->have_meta = true;
			}
			break;
		case TAG_BOOT:
			ok = take(&c, 4, &h) && get_le32(h) < sizeof(jr->boot) &&
			     take(&c, get_le32(h), &body);
			if (ok) {
				memcpy(jr->boot, body, get_le32(h));
				jr->boot[get_le32(h)] = '\0';
			}
			break;
		default:
			break; /* a newer writer's section */
		}
		if (!ok)
			goto bad;
	}
	/* every stack has its end */
	if (jr->stks.n && (!jr->ends || jr->ends_cap < jr->stks.n))
		goto bad;
	if (jobs) {
		jr->jobs = jobs;
		jr->jobs_len = jobs_len;
	}
	/* a batch without the section (an older writer) leaves none pending */
	jr->pend = have_pend ? pend : NULL;
	jr->npend = have_pend ? npend : 0;
	return true;
bad:
	/* rows appended by this batch are dropped: the tables end where the last good batch did */
	jr->strs.b.len = save.strs.b.len;
	jr->strs.n = save.strs.n;
	jr->frms.b.len = save.frms.b.len;
	jr->frms.n = save.frms.n;
	jr->stks.b.len = save.stks.b.len;
	jr->stks.n = save.stks.n;
	jr->thrs.b.len = save.thrs.b.len;
	jr->thrs.n = save.thrs.n;
	jr->smps.b.len = save.smps.b.len;
	jr->smps.n = save.smps.n;
	jr->locs.len = save.locs.len;
	jr->nlocs = save.nlocs;
	return false;
}

static void put_section(struct wbuf *b, uint32_t tag, const struct rows *r, bool counted)
{
	size_t at = section_begin(b, tag);

	if (counted)
		wb_u64(b, r->n);
	wb_bytes(b, r->b.data, r->b.len);
	section_end(b, at);
}

static void jread_free(struct jread *jr)
{
	free(jr->strs.b.data);
	free(jr->frms.b.data);
	free(jr->stks.b.data);
	free(jr->thrs.b.data);
	free(jr->smps.b.data);
	free(jr->locs.data);
	free(jr->ends);
}

/* The locations of the frames still to be named, as strings of p. */
static int read_locs(struct profile *p, const struct jread *jr)
{
	struct cursor c = { jr->locs.data, jr->locs.len, 0 };

	if (jr->nlocs && !(p->locs = calloc(jr->nlocs, sizeof(*p->locs))))
		return -ENOMEM;
	for (uint64_t i = 0; i < jr->nlocs; i++) {
		const uint8_t *d, *s[2];
		uint32_t len[2];
		int64_t id[2];
		struct pf_loc *l = &p->locs[p->nr_locs];

		if (!take(&c, 16, &d))
			return -EINVAL;
		l->frame = get_le32(d);
		l->kernel = get_le32(d + 4) != 0;
		l->offset = get_le64(d + 8);
		for (int k = 0; k < 2; k++) {
			const uint8_t *h;

			if (!take(&c, 4, &h) || !take(&c, get_le32(h), &s[k]))
				return -EINVAL;
			len[k] = get_le32(h);
			id[k] = profile__string(p, (const char *)s[k], len[k]);
			if (id[k] < 0)
				return (int)id[k];
		}
		/* the placeholder itself, at its id (see profile__journal_sync) */
		if (l->frame >= p->nr_frames || p->frames[l->frame].kind != FRAME_SPECIAL ||
		    p->frames[l->frame].line != l->frame + 1)
			continue;
		l->path = (uint32_t)id[0];
		l->build_id = (uint32_t)id[1];
		p->nr_locs++;
	}
	return 0;
}

static int jfail(struct profile_read_error *e, const char *what, uint64_t off)
{
	if (e) {
		e->what = what;
		e->offset = off;
		e->in_payload = false;
	}
	return -EINVAL;
}

int journal_read(const uint8_t *buf, size_t len, struct profile **out, struct profile_read_error *e,
		 uint64_t *batches_dropped)
{
	struct jread jr = { 0 };
	struct wbuf pay = { 0 };
	struct profile *p = NULL;
	uint64_t at = JHEADER_SIZE;
	size_t sec;
	int err;

	*batches_dropped = 0;
	if (len < JHEADER_SIZE || get_le32(buf + 8) != JOURNAL_VERSION)
		return jfail(e, "a journal of another version of dlflame", 8);
	while (len - at >= 16) {
		uint64_t blen = get_le64(buf + at + 8);

		if (get_le32(buf + at) != TAG_JBAT || blen > MAX_BATCH || blen > len - at - 16 ||
		    crc32(0, buf + at + 16, (uInt)blen) != get_le32(buf + at + 4) ||
		    !batch_apply(&jr, buf + at + 16, blen))
			break;
		at += 16 + blen;
	}
	/* the kill's cut: a batch begun and not finished (one at most, normally) */
	if (at < len)
		*batches_dropped = 1;
	if (!jr.have_meta || !jr.strs.n) {
		jread_free(&jr);
		return jfail(e, "the recording was killed before it kept anything", at);
	}
	/* the profile payload the batches add up to, read as a profile's */
	put_section(&pay, TAG_STRS, &jr.strs, true);
	put_section(&pay, TAG_FRMS, &jr.frms, true);
	put_section(&pay, TAG_STKS, &jr.stks, true);
	sec = section_begin(&pay, TAG_ENDS);
	wb_u64(&pay, jr.stks.n);
	wb_bytes(&pay, jr.ends, jr.stks.n);
	section_end(&pay, sec);
	put_section(&pay, TAG_THRS, &jr.thrs, true);
	sec = section_begin(&pay, TAG_META);
	wb_bytes(&pay, jr.meta, META_SIZE);
	section_end(&pay, sec);
	/* the samples held back when the recorder was killed go after the others */
	sec = section_begin(&pay, TAG_SMPS);
	wb_u64(&pay, jr.smps.n + jr.npend);
	wb_bytes(&pay, jr.smps.b.data, jr.smps.b.len);
	if (jr.npend)
		wb_bytes(&pay, jr.pend, jr.npend * SAMPLE_SIZE);
	section_end(&pay, sec);
	if (jr.jobs) {
		sec = section_begin(&pay, TAG_JOBS);
		wb_bytes(&pay, jr.jobs, jr.jobs_len);
		section_end(&pay, sec);
	}
	err = pay.err;
	if (!err && !(p = profile__new()))
		err = -ENOMEM;
	if (!err)
		err = decode_payload(pay.data, pay.len, PROFILE_VERSION, p, e);
	if (!err)
		err = read_locs(p, &jr);
	if (!err && jr.boot[0]) {
		int64_t id = profile__string(p, jr.boot, strlen(jr.boot));

		if (id < 0)
			err = (int)id;
		else
			p->boot_id = (uint32_t)id;
	}
	free(pay.data);
	jread_free(&jr);
	if (err) {
		profile__free(p);
		return err;
	}
	*out = p;
	return 0;
}
