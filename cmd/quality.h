/* SPDX-License-Identifier: MIT */
/*
 * Every report and every recording state how many stacks were unwound
 * whole, and point at the debug files that would name nameless frames.
 */
#ifndef DLFLAME_QUALITY_H
#define DLFLAME_QUALITY_H

#include <stddef.h>

#include "profile/profile.h"
#include "render/render.h"

/* The completeness line of the chosen samples into buf ("" for none). 0 or a negative errno. */
int quality_ends_line(const struct profile *p, const struct render_select *sel, char *buf,
		      size_t size);
/* One "hint:" line on stderr per module without symbols for 5% or more of the chosen samples. */
void quality_symbol_hints(const struct profile *p, const struct render_select *sel);

#endif
