/* SPDX-License-Identifier: MIT */
/*
 * Naming addresses: kernel addresses from kallsyms, file addresses from
 * their module's symbols, DWARF and CFI ranges (cached per module and
 * address), JIT code from the perf map.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/internal.h"
#include "util/util.h"

static const char unknown_name[] = "[unknown]";
static const char vdso_name[] = "[vdso]";
static const char kernel_name[] = "[kernel]";
static const char kernel_module[] = "[kernel.kallsyms]";

/* Addresses cached per module; past this, lookups are computed each time. */
#define ADDR_CACHE_MAX (1u << 20)
/* Inline levels of one address kept in the cache. */
#define LEVELS_MAX 32

/* ---- naming ---- */

static void set_frame(struct sym_frame *out, const char *name, const char *module,
		      enum frame_kind kind)
{
	out->name = name;
	out->module = module;
	out->kind = kind;
	out->file = NULL;
	out->line = 0;
	out->build_id = NULL;
}

/* "[base+0xoff]" in out->buf; a long basename is cut so the offset always shows. */
static void format_offset(struct sym_frame *out, const char *base, uint64_t off)
{
	char suffix[24];
	size_t blen = strlen(base), room;
	int slen;

	slen = snprintf(suffix, sizeof(suffix), "+0x%" PRIx64 "]", off);
	room = sizeof(out->buf) - 2 - (size_t)slen;
	if (blen > room)
		blen = room;
	out->buf[0] = '[';
	memcpy(out->buf + 1, base, blen);
	memcpy(out->buf + 1 + blen, suffix, (size_t)slen + 1);
	out->name = out->buf;
}

static void resolve_kernel(struct symbolizer *s, uint64_t addr, struct sym_frame *out)
{
	const char *name, *module;

	kallsyms_wait(s);
	if (kallsyms__lookup(&s->ksyms, addr, &name, &module))
		set_frame(out, name, module, FRAME_KERNEL);
	else
		set_frame(out, kernel_name, kernel_module, FRAME_KERNEL);
}

/* The demangled form of an interned symbol name, itself when it is not mangled. */
static const char *demangled(struct symbolizer *s, const char *name)
{
	char buf[DEMANGLED_MAX];
	uint64_t v;
	const char *d;
	size_t len;

	if (!name || name[0] != '_')
		return name;
	if (u64map_get(&s->demangled, (uint64_t)(uintptr_t)name, &v))
		return (const char *)(uintptr_t)v;
	len = sym_demangle(name, !s->cfg.no_params, buf, sizeof(buf));
	d = len ? strpool__intern(&s->pool, buf, len) : name;
	if (!d)
		return name;
	/* a failed insert only costs a second demangling later */
	u64map_put(&s->demangled, (uint64_t)(uintptr_t)name, (uint64_t)(uintptr_t)d);
	return d;
}

/* "base+0xSTART": code that no symbol covers, named after its CFI range. */
static const char *fde_name(struct symbolizer *s, const struct module *mod, uint64_t start)
{
	char buf[SYM_NAME_MAX + 24];
	int n = snprintf(buf, sizeof(buf), "%.*s+0x%" PRIx64, SYM_NAME_MAX, mod->basename, start);

	return n > 0 ? strpool__intern(&s->pool, buf, (size_t)n) : NULL;
}

/*
 * The levels of one address in a module, innermost first, the last one the
 * function (kind FRAME_USER). Returns the count; 0 when nothing names the
 * address, so that the caller names it by its offset.
 */
static size_t module_levels(struct symbolizer *s, struct module *mod, uint64_t vaddr,
			    struct cached_frame *lv)
{
	struct src_frame src[LEVELS_MAX];
	const char *name = demangled(s, elf_image__lookup(&mod->img, vaddr));
	size_t nsrc = 0, n = 0;
	uint64_t start;

	if (!s->cfg.no_inline)
		nsrc = elf_image__src(&mod->img, vaddr, src, LEVELS_MAX, &s->pool);
	for (size_t i = 0; i + 1 < nsrc; i++) {
		/* an inlined level without a name says nothing: leave it out */
		if (!src[i].inlined || !src[i].name)
			continue;
		lv[n++] = (struct cached_frame){ .name = src[i].name,
						 .file = src[i].file,
						 .line = src[i].line,
						 .kind = FRAME_INLINED };
	}
	if (!name && nsrc)
		name = src[nsrc - 1].name;
	if (!name && elf_image__fde(&mod->img, vaddr, &start))
		name = fde_name(s, mod, start);
	if (!name)
		return 0;
	lv[n++] = (struct cached_frame){ .name = name,
					 .file = nsrc ? src[nsrc - 1].file : NULL,
					 .line = nsrc ? src[nsrc - 1].line : 0,
					 .kind = FRAME_USER,
					 .last = 1 };
	return n;
}

/* Cache the levels of vaddr; returns the index of the first, or -1 when not cached. */
static int64_t cache_levels(struct module *mod, uint64_t vaddr, const struct cached_frame *lv,
			    size_t n)
{
	size_t first = mod->nframes;

	if (mod->cache.len >= ADDR_CACHE_MAX || vaddr == UINT64_MAX ||
	    grow_array((void **)&mod->frames, &mod->frames_cap, first + n, sizeof(*mod->frames)))
		return -1;
	memcpy(mod->frames + first, lv, n * sizeof(*lv));
	if (u64map_put(&mod->cache, vaddr, first))
		return -1; /* the frames stay unused; the next lookup recomputes */
	mod->nframes += n;
	return (int64_t)first;
}

/*
 * Name addr in a file mapping: up to max frames, leaf first. When the chain
 * is longer than max, the innermost levels are dropped, so the function
 * itself is always there.
 */
static size_t resolve_off(struct symbolizer *s, struct module *mod, uint64_t off,
			  struct sym_frame *out, size_t max)
{
	uint64_t vaddr, idx;
	struct cached_frame tmp[LEVELS_MAX];
	const struct cached_frame *lv;
	size_t n, skip;
	int64_t at;

	mod->lru = ++s->tick;
	if (mod->state == MOD_NEW)
		module_load(s, mod);
	set_frame(&out[0], NULL, mod->basename, FRAME_USER);
	out[0].build_id = mod->build_id_hex;
	if (mod->state != MOD_LOADED || !elf_image__vaddr(&mod->img, off, &vaddr)) {
		format_offset(&out[0], mod->basename, off);
		return 1;
	}
	if (u64map_get(&mod->cache, vaddr, &idx)) {
		lv = mod->frames + idx;
		for (n = 1; !lv[n - 1].last; n++)
			;
	} else {
		n = module_levels(s, mod, vaddr, tmp);
		if (!n) {
			format_offset(&out[0], mod->basename, vaddr);
			return 1;
		}
		at = cache_levels(mod, vaddr, tmp, n);
		lv = at < 0 ? tmp : mod->frames + at;
	}
	skip = n > max ? n - max : 0;
	for (size_t i = skip; i < n; i++) {
		struct sym_frame *f = &out[i - skip];

		set_frame(f, lv[i].name, mod->basename, (enum frame_kind)lv[i].kind);
		f->file = lv[i].file;
		f->line = lv[i].file ? lv[i].line : 0;
		f->build_id = mod->build_id_hex;
	}
	return n - skip;
}

static size_t resolve_file(struct symbolizer *s, const struct map *m, uint64_t addr,
			   struct sym_frame *out, size_t max)
{
	return resolve_off(s, m->mod, addr - m->start + m->pgoff, out, max);
}

void symbolizer__resolve(struct symbolizer *s, uint32_t pid, uint64_t addr, bool kernel,
			 bool return_addr, struct sym_frame *out)
{
	struct proc *p;
	struct map *m;

	if (!out)
		return;
	set_frame(out, unknown_name, "", kernel ? FRAME_KERNEL : FRAME_USER);
	if (!s)
		return;
	/* a return address points after the call; the call itself is at addr - 1 */
	if (return_addr && addr)
		addr--;
	if (kernel) {
		resolve_kernel(s, addr, out);
		return;
	}

	m = find_map(s, pid, addr, &p);
	/* unwind/perfmap: code outside files (JIT) is named from the pid's perf map */
	if ((!m || m->type == MAP_T_ANON) && perfmap__resolve(s, p, m, addr, out))
		return;
	if (!m)
		return;
	switch (m->type) {
	case MAP_T_FILE:
		resolve_file(s, m, addr, out, 1);
		break;
	case MAP_T_VDSO:
		set_frame(out, vdso_name, vdso_name, FRAME_USER);
		break;
	default:
		break;
	}
}

size_t symbolizer__resolve_inline(struct symbolizer *s, uint32_t pid, uint64_t addr, bool kernel,
				  bool return_addr, struct sym_frame *out, size_t max)
{
	uint64_t a = return_addr && addr ? addr - 1 : addr;
	struct proc *p;
	struct map *m;

	if (!out || !max)
		return 0;
	/*
	 * Files are the only source of inline levels; everything else, and a
	 * miss (which may read /proc), is symbolizer__resolve's.
	 */
	if (s && !kernel && (p = proc_find(s, pid))) {
		m = proc_lookup(p, a);
		if (m && m->type == MAP_T_FILE)
			return resolve_file(s, m, a, out, max);
	}
	symbolizer__resolve(s, pid, addr, kernel, return_addr, &out[0]);
	return 1;
}

bool symbolizer__locate(struct symbolizer *s, uint32_t pid, uint64_t addr, bool kernel,
			bool return_addr, struct sym_loc *loc)
{
	uint64_t a = return_addr && addr ? addr - 1 : addr;
	struct proc *p;
	struct map *m;

	if (!s || !loc)
		return false;
	if (kernel) {
		loc->module = SYM_LOC_KERNEL;
		loc->offset = a;
		return true;
	}
	/* a miss reads /proc/PID/maps, as naming it now would */
	m = find_map(s, pid, a, &p);
	if (!m || m->type != MAP_T_FILE || !m->mod)
		return false;
	loc->module = m->mod->index;
	loc->offset = a - m->start + m->pgoff;
	return true;
}

size_t symbolizer__resolve_loc(struct symbolizer *s, const struct sym_loc *loc,
			       struct sym_frame *out, size_t max)
{
	if (!out || !max)
		return 0;
	if (s && loc && loc->module == SYM_LOC_KERNEL) {
		resolve_kernel(s, loc->offset, out);
		return 1;
	}
	if (!s || !loc || loc->module >= s->nmods) {
		set_frame(out, unknown_name, "", FRAME_USER);
		return 1;
	}
	return resolve_off(s, s->mods[loc->module], loc->offset, out, max);
}
