/* SPDX-License-Identifier: MIT */
/* Shared by the files of render/ only. */
#ifndef DLFLAME_RENDER_INTERNAL_H
#define DLFLAME_RENDER_INTERNAL_H

#include <errno.h>

#include <stddef.h>
#include <stdint.h>

#include "profile/filter.h"
#include "render/render.h"
#include "util/util.h"

/* A growable byte buffer; not NUL-terminated unless sb_add_nul() is used. */
struct strbuf {
	char *buf;
	size_t len;
	size_t cap;
};

void sb_free(struct strbuf *sb);
int sb_add(struct strbuf *sb, const void *data, size_t len);

/* Code point that utf8_decode() reports for an ill-formed sequence. */
#define UTF8_BAD UINT32_MAX

/*
 * Decode one code point from s (n > 0 bytes). Returns the bytes consumed
 * (>= 1). Ill-formed input (overlongs, surrogates, > U+10FFFF, truncation)
 * yields UTF8_BAD and consumes the maximal ill-formed subpart, as Unicode
 * recommends, so each bad sequence becomes exactly one U+FFFD.
 */
size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* Append name sanitised for folded output (see render_folded_name). */
int sb_add_folded_name(struct strbuf *sb, const char *name, size_t len);

/*
 * Append name as well-formed UTF-8 that XML 1.0 accepts as character data,
 * but not yet entity-escaped: controls become '?', invalid UTF-8 and the
 * non-characters U+FFFE/U+FFFF become U+FFFD. An empty name becomes
 * "[unnamed]". Returns the number of code points appended, or -ENOMEM.
 */
int64_t sb_add_xml_clean(struct strbuf *sb, const char *name, size_t len);

/* Selected samples summed per (comm string id, stack id). */
struct agg_entry {
	uint32_t comm;
	uint32_t stack;
	uint64_t weight;
	uint64_t off; /* the part of weight from off-CPU and runqueue samples */
};

struct agg {
	struct agg_entry *v;
	size_t len;
	size_t cap;
	uint64_t total; /* saturating sum of all weights */
};

/*
 * Sum the samples chosen by sel (NULL = on-CPU, counted). Validates every id
 * the samples reference; -EINVAL for a profile that breaks its invariants.
 */
int agg_samples(const struct profile *p, const struct render_select *sel, struct agg *out);
/* The same over samples [first, end) only. */
int agg_samples_range(const struct profile *p, const struct render_select *sel, size_t first,
		      size_t end, struct agg *out);
void agg_free(struct agg *a);

/* The kinds sel chooses, with its default (on-CPU only) applied. */
void select_kinds(const struct render_select *sel, bool kinds[SAMPLE_KIND_MAX]);

/* Weight as printed: microseconds (rounded) when weighing by ns. */
static inline uint64_t print_count(uint64_t w, bool by_ns)
{
	return by_ns ? w / 1000 + (w % 1000 >= 500) : w;
}

/*
 * Display names of frames as folded output prints them (sanitised, with
 * the kind suffix), built on first use.
 */
struct frame_names {
	struct strbuf text;
	size_t *off; /* SIZE_MAX: not built yet */
	size_t *len;
};

int frame_names_init(struct frame_names *nc, const struct profile *p);
void frame_names_free(struct frame_names *nc);
int frame_name(const struct profile *p, struct frame_names *nc, uint32_t f, const char **s,
	       size_t *len);

/* One folded line: text (without the count) and weight. */
struct folded_line {
	const char *s; /* into the caller's strbuf, set once it stops moving */
	size_t off;
	size_t len;
	uint64_t weight;
};

/*
 * The folded lines of agg, texts in *keys, sorted bytewise by text, lines
 * that print alike merged. *lines is malloc'ed.
 */
int folded_lines(const struct profile *p, const struct agg *agg, struct strbuf *keys,
		 struct folded_line **lines, size_t *nr);

/* Append s as a JSON string with its quotes, XML-clean and escaped. */
int sb_add_json(struct strbuf *sb, const char *s, size_t len);

/*
 * The SVG of agg cur over p; with base (an aggregate over the same
 * profile's ids), a differential graph.
 */
int svg_render(const struct profile *p, const struct render_select *sel, const struct agg *cur,
	       const struct agg *base, bool normalize, const struct svg_opts *opts, FILE *out);

/* profile__time_base() (profile/filter.h), by the name trace.c calls it. */
static inline uint64_t profile_time_base(const struct profile *p)
{
	return profile__time_base(p);
}

/* Write a whole buffer; 0 or the write error. */
static inline int put_buf(FILE *out, const void *buf, size_t len)
{
	return len && fwrite(buf, 1, len, out) != len ? (errno > 0 ? -errno : -EIO) : 0;
}

/*
 * The error of a failed stdio write: stdio leaves the cause (ENOSPC, EPIPE,
 * ...) in errno at the failing call, and the user needs that cause.
 */
static inline int render_write_error(void)
{
	return errno > 0 ? -errno : -EIO;
}

#endif
