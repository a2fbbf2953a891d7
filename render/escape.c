/* SPDX-License-Identifier: MIT */
/*
 * Names come from binaries, perf-maps and /proc: any byte sequence. Both
 * outputs map every input to text that cannot change their structure: in
 * folded text no name can add a frame or a line, in the SVG no name can
 * leave its text node or make the XML ill-formed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "render/internal.h"

#define UNNAMED "[unnamed]"
#define REPLACEMENT 0xfffdu

void sb_free(struct strbuf *sb)
{
	if (!sb)
		return;
	free(sb->buf);
	memset(sb, 0, sizeof(*sb));
}

int sb_add(struct strbuf *sb, const void *data, size_t len)
{
	size_t want;

	if (add_overflows(sb->len, len, &want))
		return -ENOMEM;
	if (want > sb->cap) {
		size_t cap = sb->cap ? sb->cap : 256;
		char *p;

		while (cap < want) {
			if (mul_overflows(cap, 2, &cap))
				return -ENOMEM;
		}
		p = realloc(sb->buf, cap);
		if (!p)
			return -ENOMEM;
		sb->buf = p;
		sb->cap = cap;
	}
	if (len)
		memcpy(sb->buf + sb->len, data, len);
	sb->len = want;
	return 0;
}

size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t c = s[0], lo = 0x80, hi = 0xbf;
	size_t need, i;
	uint32_t v;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	/* Unicode 15, table 3-7: well-formed byte sequences */
	if (c >= 0xc2 && c <= 0xdf) {
		need = 1;
		v = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 2;
		v = c & 0x0f;
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		else if (c == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 3;
		v = c & 0x07;
		if (c == 0xf0)
			lo = 0x90; /* overlong */
		else if (c == 0xf4)
			hi = 0x8f; /* > U+10FFFF */
	} else {
		*cp = UTF8_BAD;
		return 1;
	}
	for (i = 1; i <= need; i++) {
		if (i >= n || s[i] < lo || s[i] > hi) {
			*cp = UTF8_BAD;
			return i;
		}
		v = v << 6 | (s[i] & 0x3f);
		lo = 0x80;
		hi = 0xbf;
	}
	*cp = v;
	return need + 1;
}

static size_t utf8_encode(uint32_t cp, char *o)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * C1 controls (U+0080..U+009F) are replaced too: U+009B is CSI to some
 * terminals, and these names end up in terminals and tooltips.
 */
static bool is_control(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

static uint32_t folded_char(uint32_t cp)
{
	if (cp == UTF8_BAD)
		return REPLACEMENT;
	if (cp == ';')
		return ':';
	if (is_control(cp))
		return '?';
	return cp;
}

/* XML 1.0 Char excludes controls but \t \n \r, surrogates, U+FFFE, U+FFFF. */
static uint32_t xml_char(uint32_t cp)
{
	if (cp == UTF8_BAD || cp == 0xfffe || cp == 0xffff)
		return REPLACEMENT;
	if (is_control(cp))
		return '?';
	return cp;
}

/*
 * snprintf-like: returns the length of the whole sanitised name; writes as
 * much of it as fits in size - 1 bytes, never splitting a UTF-8 sequence,
 * and NUL-terminates whenever size > 0.
 */
size_t render_folded_name(const char *name, size_t len, char *buf, size_t size)
{
	const uint8_t *s = (const uint8_t *)name;
	size_t total = 0, i = 0;
	bool full = false;

	if (!len) {
		name = UNNAMED;
		s = (const uint8_t *)name;
		len = strlen(UNNAMED);
	}
	if (size)
		buf[0] = '\0';
	while (i < len) {
		char o[4];
		uint32_t cp;
		size_t n;

		i += utf8_decode(s + i, len - i, &cp);
		n = utf8_encode(folded_char(cp), o);
		if (!full && size && total + n < size) {
			memcpy(buf + total, o, n);
			buf[total + n] = '\0';
		} else {
			full = true;
		}
		total += n;
	}
	return total;
}

int sb_add_folded_name(struct strbuf *sb, const char *name, size_t len)
{
	const uint8_t *s = (const uint8_t *)name;
	size_t i = 0, run = 0;
	int err;

	if (!len)
		return sb_add(sb, UNNAMED, strlen(UNNAMED));
	while (i < len) {
		char o[4];
		uint32_t cp;
		size_t n;

		/* copy runs of plain ASCII at once: the common case */
		if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != ';') {
			i++;
			run++;
			continue;
		}
		if (run) {
			err = sb_add(sb, s + i - run, run);
			if (err)
				return err;
			run = 0;
		}
		n = utf8_decode(s + i, len - i, &cp);
		err = sb_add(sb, o, utf8_encode(folded_char(cp), o));
		if (err)
			return err;
		i += n;
	}
	return run ? sb_add(sb, s + i - run, run) : 0;
}

int64_t sb_add_xml_clean(struct strbuf *sb, const char *name, size_t len)
{
	const uint8_t *s = (const uint8_t *)name;
	int64_t cps = 0;
	size_t i = 0;
	int err;

	if (!len) {
		s = (const uint8_t *)UNNAMED;
		len = strlen(UNNAMED);
	}
	while (i < len) {
		char o[4];
		uint32_t cp;

		i += utf8_decode(s + i, len - i, &cp);
		err = sb_add(sb, o, utf8_encode(xml_char(cp), o));
		if (err)
			return err;
		cps++;
	}
	return cps;
}

static const char *xml_entity(uint8_t c)
{
	switch (c) {
	case '&':
		return "&amp;";
	case '<':
		return "&lt;";
	case '>':
		return "&gt;";
	case '"':
		return "&quot;";
	case '\'':
		return "&#39;";
	default:
		return NULL;
	}
}

int render_xml_escape(const char *str, size_t len, FILE *out)
{
	const uint8_t *s = (const uint8_t *)str;
	size_t i = 0, run = 0;

	while (i < len) {
		const char *ent;
		char o[4];
		uint32_t cp;
		size_t n;

		ent = s[i] < 0x80 ? xml_entity(s[i]) : NULL;
		if (!ent && s[i] >= 0x20 && s[i] < 0x7f) {
			i++;
			run++;
			continue;
		}
		if (run && fwrite(s + i - run, 1, run, out) != run)
			return render_write_error();
		run = 0;
		if (ent) {
			if (fputs(ent, out) == EOF)
				return render_write_error();
			i++;
			continue;
		}
		/* here s[i] is a control byte or starts a multi-byte sequence */
		i += utf8_decode(s + i, len - i, &cp);
		n = utf8_encode(xml_char(cp), o);
		if (fwrite(o, 1, n, out) != n)
			return render_write_error();
	}
	if (run && fwrite(s + i - run, 1, run, out) != run)
		return render_write_error();
	return ferror(out) ? render_write_error() : 0;
}

int sb_add_json(struct strbuf *sb, const char *name, size_t len)
{
	const uint8_t *s = (const uint8_t *)name;
	size_t i = 0;
	int err;

	if (!len) {
		s = (const uint8_t *)UNNAMED;
		len = strlen(UNNAMED);
	}
	err = sb_add(sb, "\"", 1);
	while (!err && i < len) {
		char o[8];
		uint32_t cp;
		size_t n;

		i += utf8_decode(s + i, len - i, &cp);
		cp = xml_char(cp);
		switch (cp) {
		case '"':
			err = sb_add(sb, "\\\"", 2);
			continue;
		case '\\':
			err = sb_add(sb, "\\\\", 2);
			continue;
		/* harmless in JSON, but not where JSON ends up inside HTML or JS */
		case '<':
		case '>':
		case '&':
		case 0x2028:
		case 0x2029:
			n = (size_t)snprintf(o, sizeof(o), "\\u%04x", (unsigned)cp);
			err = sb_add(sb, o, n);
			continue;
		default:
			err = sb_add(sb, o, utf8_encode(cp, o));
		}
	}
	return err ? err : sb_add(sb, "\"", 1);
}

int render_json_string(const char *s, size_t len, FILE *out)
{
	struct strbuf sb = { 0 };
	int err = sb_add_json(&sb, s, len);

	if (!err)
		err = put_buf(out, sb.buf, sb.len);
	if (!err && ferror(out))
		err = render_write_error();
	sb_free(&sb);
	return err;
}
