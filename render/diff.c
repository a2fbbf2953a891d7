/* SPDX-License-Identifier: MIT */
/*
 * Differential outputs. Folded lines are matched by their text, so the two
 * profiles need share nothing. The SVG needs the two call trees matched
 * node by node: both profiles are copied into one, whose interning gives
 * equal paths equal stack ids, and the base's weight is attributed to the
 * new profile's tree (svg.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "render/internal.h"

struct dline {
	const char *s;
	size_t off;
	size_t len;
};

static int dline_cmp(const void *a, const void *b)
{
	const struct dline *x = a, *y = b;
	int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);

	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

static int text_cmp(const struct folded_line *x, const struct folded_line *y)
{
	int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);

	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* base weight in new's units: rounded, exact for any 64-bit values */
static uint64_t scaled(uint64_t w, uint64_t num, uint64_t den)
{
	unsigned __int128 v;

	if (!den || num == den)
		return w;
	v = ((unsigned __int128)w * num + den / 2) / den;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

int render_diff_folded(const struct profile *base, const struct profile *cur,
		       const struct render_select *sel, bool normalize, FILE *out)
{
	bool by_ns = sel && sel->weight_ns;
	struct strbuf kb = { 0 }, kn = { 0 }, text = { 0 };
	struct folded_line *lb = NULL, *ln = NULL;
	struct dline *lines = NULL;
	size_t nb = 0, nn = 0, n = 0, i = 0, j = 0;
	struct agg ab = { 0 }, an = { 0 };
	int err;

	err = agg_samples(base, sel, &ab);
	if (!err)
		err = agg_samples(cur, sel, &an);
	if (!err)
		err = folded_lines(base, &ab, &kb, &lb, &nb);
	if (!err)
		err = folded_lines(cur, &an, &kn, &ln, &nn);
	if (err)
		goto out;
	err = -ENOMEM;
	lines = malloc((nb + nn + 1) * sizeof(*lines));
	if (!lines)
		goto out;
	while (i < nb || j < nn) {
		int c = i == nb ? 1 : j == nn ? -1 : text_cmp(&lb[i], &ln[j]);
		const struct folded_line *l = c <= 0 ? &lb[i] : &ln[j];
		uint64_t wb = c <= 0 ? lb[i].weight : 0, wn = c >= 0 ? ln[j].weight : 0;
		uint64_t cb, cn;
		char num[48];
		int len;

		if (normalize)
			wb = scaled(wb, an.total, ab.total);
		cb = print_count(wb, by_ns);
		cn = print_count(wn, by_ns);
		i += c <= 0;
		j += c >= 0;
		if (!cb && !cn)
			continue;
		len = snprintf(num, sizeof(num), " %llu %llu\n", (unsigned long long)cb,
			       (unsigned long long)cn);
		lines[n].off = text.len;
		err = sb_add(&text, l->s, l->len);
		if (!err)
			err = sb_add(&text, num, (size_t)len);
		if (err)
			goto out;
		lines[n].len = text.len - lines[n].off;
		n++;
	}
	for (size_t k = 0; k < n; k++)
		lines[k].s = text.buf + lines[k].off;
	qsort(lines, n, sizeof(*lines), dline_cmp);
	err = 0;
	for (size_t k = 0; !err && k < n; k++)
		err = put_buf(out, lines[k].s, lines[k].len);
	if (!err && (fflush(out) == EOF || ferror(out)))
		err = render_write_error();
out:
	agg_free(&ab);
	agg_free(&an);
	sb_free(&kb);
	sb_free(&kn);
	sb_free(&text);
	free(lb);
	free(ln);
	free(lines);
	return err;
}

int render_diff_svg(const struct profile *base, const struct profile *cur,
		    const struct render_select *sel, bool normalize, const struct svg_opts *opts,
		    FILE *out)
{
	struct agg ab = { 0 }, an = { 0 };
	bool kinds[SAMPLE_KIND_MAX];
	struct profile *both;
	size_t n_cur;
	int err;

	if (opts && opts->flamechart)
		return -EINVAL;
	both = profile__new();
	if (!both)
		return -ENOMEM;
	select_kinds(sel, kinds);
	err = profile__copy(both, cur, kinds, NULL, false);
	n_cur = profile__nr_samples(both);
	if (!err)
		err = profile__copy(both, base, kinds, NULL, false);
	if (!err)
		err = agg_samples_range(both, sel, 0, n_cur, &an);
	if (!err)
		err = agg_samples_range(both, sel, n_cur, profile__nr_samples(both), &ab);
	if (!err)
		err = svg_render(both, sel, &an, &ab, normalize, opts, out);
	agg_free(&ab);
	agg_free(&an);
	profile__free(both);
	return err;
}
