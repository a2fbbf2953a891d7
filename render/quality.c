/* SPDX-License-Identifier: MIT */
/*
 * What a profile is worth: how many of its stacks are whole, and which
 * modules' frames have no names. Every report states both, so a user can
 * tell a thin graph from a thin program.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The weight of each stack the selected samples end in, and the total. */
struct stack_weights {
	const struct profile *p;
	bool kinds[SAMPLE_KIND_MAX];
	bool by_ns;
	uint64_t *w; /* per stack id */
	uint64_t total;
	uint64_t samples; /* how many were chosen */
};

static int add_weight(void *ctx, const struct pf_sample *s)
{
	struct stack_weights *sw = ctx;
	uint64_t w;

	if (s->kind >= SAMPLE_KIND_MAX || !sw->kinds[s->kind])
		return 0;
	if (s->stack >= profile__nr_stacks(sw->p))
		return -EINVAL;
	w = sw->by_ns ? s->weight : 1;
	sw->samples++;
	sw->w[s->stack] = sat_add(sw->w[s->stack], w);
	sw->total = sat_add(sw->total, w);
	return 0;
}

static int stack_weights(const struct profile *p, const struct render_select *sel,
			 struct stack_weights *sw)
{
	int err;

	memset(sw, 0, sizeof(*sw));
	sw->p = p;
	sw->by_ns = sel && sel->weight_ns;
	select_kinds(sel, sw->kinds);
	sw->w = calloc(profile__nr_stacks(p) + 1, sizeof(*sw->w));
	if (!sw->w)
		return -ENOMEM;
	err = profile__foreach_sample(p, add_weight, sw);
	if (err) {
		free(sw->w);
		sw->w = NULL;
	}
	return err;
}

int render_stack_ends(const struct profile *p, const struct render_select *sel,
		      uint64_t weight[STACK_END_MAX])
{
	struct stack_weights sw;
	size_t n = profile__nr_stacks(p);
	int err = stack_weights(p, sel, &sw);

	if (err)
		return err;
	memset(weight, 0, STACK_END_MAX * sizeof(*weight));
	for (size_t i = 0; i < n; i++)
		if (sw.w[i])
			weight[profile__stack_end(p, (uint32_t)i)] += sw.w[i];
	free(sw.w);
	return 0;
}

/* A share in percent that never rounds a part up to the whole or down to nothing. */
static double pct(uint64_t part, uint64_t total)
{
	double v = 100.0 * (double)part / (double)total;

	if (part < total && v > 99.9)
		return 99.9;
	if (part && v < 0.1)
		return 0.1;
	return v;
}

size_t render_ends_line(const uint64_t weight[STACK_END_MAX], char *buf, size_t size)
{
	uint64_t total = 0, known = 0;
	bool shown[STACK_END_MAX] = { false };
	size_t len = 0;

	if (!size)
		return 0;
	buf[0] = '\0';
	for (int e = 0; e < STACK_END_MAX; e++)
		total += weight[e];
	known = total - weight[STACK_END_UNKNOWN];
	if (!total)
		return 0;
	if (!known)
		return (size_t)snprintf(buf, size,
					"how stacks ended was not recorded (an older "
					"profile)");
	len = (size_t)snprintf(buf, size, "%.1f%% of stacks complete",
			       pct(weight[STACK_END_COMPLETE], known));
	/* the three biggest causes of the rest */
	for (int k = 0; k < 3 && len < size; k++) {
		int best = -1;

		for (int e = STACK_END_COMPLETE + 1; e < STACK_END_MAX; e++)
			if (!shown[e] && weight[e] && (best < 0 || weight[e] > weight[best]))
				best = e;
		if (best < 0)
			break;
		shown[best] = true;
		len += (size_t)snprintf(buf + len, size - len, "%s%s %.1f%%", k ? ", " : "; cut: ",
					profile__stack_end_name((enum stack_end)best),
					pct(weight[best], known));
	}
	return len < size ? len : size - 1;
}

/* "MODULE+0x..." or "[MODULE+0x...]": the names given to code that no symbol covers. */
static bool unnamed(const struct profile *p, const struct pf_frame *f)
{
	const char *name = profile__str(p, f->name), *mod = profile__str(p, f->module);
	size_t mlen = profile__str_len(p, f->module);

	if (f->kind != FRAME_USER || !mlen)
		return false;
	if (*name == '[')
		name++;
	return !strncmp(name, mod, mlen) && !strncmp(name + mlen, "+0x", 3);
}

/* Below this many samples a share says little about a module. */
#define HINT_MIN_SAMPLES 50

static int by_share(const void *a, const void *b)
{
	const struct render_symbol_hint *x = a, *y = b;

	return x->weight < y->weight ? 1 : x->weight > y->weight ? -1 : 0;
}

int render_symbol_hints(const struct profile *p, const struct render_select *sel, double min_share,
			struct render_symbol_hint *out, size_t max, size_t *n)
{
	size_t nr_stacks = profile__nr_stacks(p), nr_strings = profile__nr_strings(p);
	size_t nr_frames = profile__nr_frames(p);
	struct stack_weights sw;
	uint64_t *mod_w = NULL;
	uint32_t *stamp = NULL, *build = NULL;
	int8_t *frame_unnamed = NULL;
	int err;

	*n = 0;
	err = stack_weights(p, sel, &sw);
	if (err)
		return err;
	if (sw.samples < HINT_MIN_SAMPLES) {
		free(sw.w);
		return 0;
	}
	err = -ENOMEM;
	mod_w = calloc(nr_strings, sizeof(*mod_w));
	stamp = calloc(nr_strings, sizeof(*stamp));
	build = calloc(nr_strings, sizeof(*build));
	frame_unnamed = calloc(nr_frames + 1, sizeof(*frame_unnamed));
	if (!mod_w || !stamp || !build || !frame_unnamed)
		goto out;
	for (size_t i = 0; i < nr_frames; i++)
		frame_unnamed[i] = unnamed(p, profile__get_frame(p, (uint32_t)i));
	/* each stack's weight counts once for every module with a nameless frame in it */
	for (size_t i = 1; i < nr_stacks; i++) {
		uint32_t depth = 0;

		if (!sw.w[i])
			continue;
		for (uint32_t s = (uint32_t)i; s && depth++ < nr_stacks;) {
			const struct pf_stack *st = profile__get_stack(p, s);
			const struct pf_frame *f;

			if (st->frame >= nr_frames || st->parent >= s) {
				err = -EINVAL;
				goto out;
			}
			f = profile__get_frame(p, st->frame);
			if (frame_unnamed[st->frame] && stamp[f->module] != (uint32_t)i) {
				stamp[f->module] = (uint32_t)i;
				mod_w[f->module] += sw.w[i];
				build[f->module] = f->build_id;
			}
			s = st->parent;
		}
	}
	for (size_t m = 1; m < nr_strings; m++) {
		if (!mod_w[m] || (double)mod_w[m] < min_share * (double)sw.total)
			continue;
		if (*n < max)
			out[(*n)++] = (struct render_symbol_hint){
				.module = profile__str(p, (uint32_t)m),
				.build_id = profile__str(p, build[m]),
				.weight = mod_w[m],
				.share = (double)mod_w[m] / (double)sw.total,
				.total = sw.total,
			};
	}
	qsort(out, *n, sizeof(*out), by_share);
	err = 0;
out:
	free(sw.w);
	free(mod_w);
	free(stamp);
	free(build);
	free(frame_unnamed);
	return err;
}
