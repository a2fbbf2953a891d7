/* SPDX-License-Identifier: MIT */
/* What record and every report say about a profile's worth. */
#include "quality.h"
#include "cmd.h"

#include <stdio.h>
#include <string.h>

/* A module's share of nameless frames above which a hint says how to name them. */
#define HINT_SHARE 0.05
#define MAX_HINTS 8

int quality_ends_line(const struct profile *p, const struct render_select *sel, char *buf,
		      size_t size)
{
	uint64_t w[STACK_END_MAX];
	int err = render_stack_ends(p, sel, w);

	if (size)
		buf[0] = '\0';
	if (err)
		return err;
	render_ends_line(w, buf, size);
	return 0;
}

/*
 * glibc's modules come with libc6; for the rest, dpkg names the package and
 * Debian's debug archive has its -dbgsym twin.
 */
static const char *debug_package(const char *module)
{
	static const char *const libc[] = {
		"libc.so.6",	   "ld-linux-x86-64.so.2", "libm.so.6",
		"libpthread.so.0", "libdl.so.2",	   "librt.so.1"
	};

	for (size_t i = 0; i < sizeof(libc) / sizeof(*libc); i++)
		if (!strcmp(module, libc[i]))
			return "libc6-dbg";
	return NULL;
}

void quality_symbol_hints(const struct profile *p, const struct render_select *sel)
{
	struct render_symbol_hint h[MAX_HINTS];
	size_t n = 0;

	if (render_symbol_hints(p, sel, HINT_SHARE, h, MAX_HINTS, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		const char *pkg = debug_package(h[i].module);
		char build[64] = "";

		if (*h[i].build_id)
			snprintf(build, sizeof(build), " (build-id %.40s)", h[i].build_id);
		if (pkg)
			info("hint: %.1f%% of samples have frames in %s%s that no symbol names; "
			     "install %s to name them",
			     100.0 * h[i].share, h[i].module, build, pkg);
		else
			info("hint: %.1f%% of samples have frames in %s%s that no symbol names; its "
			     "debug file would name them (Debian: the -dbgsym package of the one "
			     "`dpkg -S %s` names)",
			     100.0 * h[i].share, h[i].module, build, h[i].module);
	}
}
