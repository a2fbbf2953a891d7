/* SPDX-License-Identifier: MIT */
/*
 * Turning a profile into outputs: FlameGraph folded text and a
 * self-contained interactive SVG flame graph.
 *
 * Library code: returns 0 or a negative errno (write errors included: the
 * caller checks), never prints to the user.
 */
#ifndef DLFLAME_RENDER_H
#define DLFLAME_RENDER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "profile/profile.h"

/* Which samples to draw and how to weigh them. */
struct render_select {
	bool kinds[SAMPLE_KIND_MAX]; /* sample kinds included; all false = on-CPU only */
	bool weight_ns;              /* weigh by ns (else count samples) */
};

/*
 * Folded stacks, FlameGraph's format: `comm;root;...;leaf count\n`, one line
 * per distinct (comm, stack), lines sorted bytewise. Kernel frames get the
 * suffix `_[k]`, JIT `_[j]`, inlined `_[i]`. Names are sanitised so that they
 * can never add a frame or a line: `;` becomes `:`, control bytes (and DEL)
 * become `?`, invalid UTF-8 becomes U+FFFD.
 */
int render_folded(const struct profile *p, const struct render_select *sel, FILE *out);

struct svg_opts {
	const char *title;     /* default "Flame Graph" */
	const char *subtitle;  /* may be NULL */
	const char *countname; /* default "samples" */
	unsigned width;        /* default 1200 */
	double minwidth;       /* pixels; frames narrower are pruned; default 0.1 */
};

/*
 * Self-contained SVG like flamegraph.pl's: one rect+text per frame, widths
 * proportional to weight, tooltip "name (N samples, P%)", click to zoom with
 * ancestors kept, reset zoom, regex search with "Matched: X%". Every name
 * is XML-escaped so the file is well-formed for any byte sequence.
 */
int render_svg(const struct profile *p, const struct render_select *sel,
	       const struct svg_opts *opts, FILE *out);

/* Exposed for tests: sanitize a frame name for folded output into buf. */
size_t render_folded_name(const char *name, size_t len, char *buf, size_t size);
/* Exposed for tests: write `s` XML-escaped (text or attribute) to out. */
int render_xml_escape(const char *s, size_t len, FILE *out);

#endif
