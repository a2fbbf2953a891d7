/* SPDX-License-Identifier: MIT */
/*
 * Demangling through libiberty's callback interface, bounded.
 *
 * cplus_demangle_v3_callback() allocates nothing on the heap (its tables
 * are on the stack, sized by the input) and hands the output over in small
 * pieces. Substitutions can make the output exponential in the input, so
 * the callback counts what it gets and, once the cap is reached, leaves the
 * demangler with longjmp: nothing is left allocated, and the time spent is
 * bounded by the input cap and the output cap instead of the output size.
 */
#include "symbolize/internal.h"

#include <setjmp.h>
#include <string.h>

#ifdef HAVE_LIBIBERTY
#include <libiberty/demangle.h>

struct dm_out {
	char *buf;
	size_t cap, len;
	bool cut;
	jmp_buf stop;
};

static void dm_append(const char *s, size_t n, void *opaque)
{
	struct dm_out *o = opaque;
	size_t room = o->cap - 1 - o->len;

	if (n > room) {
		memcpy(o->buf + o->len, s, room);
		o->len += room;
		o->cut = true;
		longjmp(o->stop, 1);
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

static bool is_mangled(const char *name)
{
	/* Itanium C++ (_Z, and _GLOBAL__sub_I_ wrappers around it), Rust v0 (_R) */
	return (name[0] == '_' && (name[1] == 'Z' || name[1] == 'R')) ||
	       !strncmp(name, "_GLOBAL_", 8);
}

size_t sym_demangle(const char *name, bool params, char *out, size_t cap)
{
	int opts = DMGL_ANSI | (params ? DMGL_PARAMS : 0);
	/* o escapes to the callback, so it lives in memory across the longjmp */
	struct dm_out o = { .cap = cap };
	volatile int ok = 0;
	size_t len;

	if (!name || !out || cap < 8 || !is_mangled(name))
		return 0;
	len = strnlen(name, SYM_NAME_MAX + 1);
	if (len > SYM_NAME_MAX)
		return 0;
	/* a scratch copy, so that a failed demangling leaves out untouched */
	char tmp[DEMANGLED_MAX];

	o.buf = tmp;
	if (o.cap > sizeof(tmp))
		o.cap = sizeof(tmp);
	if (setjmp(o.stop) == 0) {
		if (name[1] == 'R')
			ok = rust_demangle_callback(name, opts | DMGL_RUST, dm_append, &o);
		else
			ok = cplus_demangle_v3_callback(name, opts, dm_append, &o);
	} else {
		ok = 1; /* cut at the cap */
	}
	if (!ok || !o.len)
		return 0;
	if (o.cut) {
		size_t keep = o.len > 3 ? o.len - 3 : 0;

		memcpy(o.buf + keep, "...", 3);
		o.len = keep + 3;
	}
	o.buf[o.len] = '\0';
	memcpy(out, o.buf, o.len + 1);
	return o.len;
}

#else /* !HAVE_LIBIBERTY: names stay mangled */

size_t sym_demangle(const char *name, bool params, char *out, size_t cap)
{
	return 0;
}

#endif
