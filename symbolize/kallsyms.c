/* SPDX-License-Identifier: MIT */
/*
 * Kernel text symbols from a kallsyms file: "ADDR TYPE NAME[\t[MODULE]]".
 *
 * kallsyms has no sizes, so a symbol names the addresses up to the next
 * symbol, but never more than KSYM_MAX_EXTENT past its start: otherwise the
 * last symbol before a hole (the end of the core kernel, the gap before the
 * module area) would name everything in the hole.
 */
#include "symbolize/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "util/util.h"

#define KALLSYMS_LINE_MAX 1024
#define KALLSYMS_MAX_BYTES (256ull << 20)
#define KALLSYMS_MAX_SYMS (8u << 20)
#define KSYM_MAX_EXTENT (1ull << 20)

static const char kernel_module[] = "[kernel.kallsyms]";

struct kparse {
	struct ksym *syms;
	size_t n, cap;
	struct strpool *pool;
	uint64_t parsed;
	bool any_nonzero;
	uint8_t *ranks; /* parallel to syms while loading */
	size_t ranks_cap;
};

/* At one address: T before W/w before t, markers last. */
static uint8_t type_rank(char type)
{
	switch (type) {
	case 'T':
		return 0;
	case 'W':
	case 'w':
		return 1;
	default:
		return 2;
	}
}

/* Markers that end a text area: the addresses after them are not code. */
static bool is_end_marker(const char *name)
{
	return !strcmp(name, "_etext") || !strcmp(name, "_einittext");
}

static int parse_line(void *ctx, char *line, size_t len)
{
	struct kparse *kp = ctx;
	char *save = NULL, *addr_s, *type_s, *name, *mod, *extra;
	const char *iname = NULL, *imod = kernel_module;
	uint64_t addr;
	size_t mlen;

	(void)len;
	addr_s = strtok_r(line, " \t", &save);
	type_s = strtok_r(NULL, " \t", &save);
	name = strtok_r(NULL, " \t", &save);
	mod = strtok_r(NULL, " \t", &save);
	extra = strtok_r(NULL, " \t", &save);
	if (!addr_s || !type_s || !name || extra || type_s[1] != '\0')
		return 0;
	if (parse_u64(addr_s, 16, 0, UINT64_MAX, &addr))
		return 0;
	kp->parsed++;
	if (addr)
		kp->any_nonzero = true;
	if (!strchr("tTwW", type_s[0]))
		return 0;
	if (mod) {
		mlen = strlen(mod);
		if (mlen < 3 || mod[0] != '[' || mod[mlen - 1] != ']')
			return 0;
		imod = strpool__intern(kp->pool, mod, mlen);
		if (!imod)
			return -ENOMEM;
	}
	if (kp->n >= KALLSYMS_MAX_SYMS)
		return 0;
	if (!is_end_marker(name)) {
		iname = strpool__add(kp->pool, name, strnlen(name, SYM_NAME_MAX));
		if (!iname)
			return -ENOMEM;
	}
	if (grow_array((void **)&kp->syms, &kp->cap, kp->n + 1, sizeof(*kp->syms)) ||
	    grow_array((void **)&kp->ranks, &kp->ranks_cap, kp->n + 1, sizeof(*kp->ranks)))
		return -ENOMEM;
	kp->ranks[kp->n] = iname ? type_rank(type_s[0]) : 3;
	kp->syms[kp->n++] = (struct ksym){ .addr = addr, .name = iname, .module = imod };
	return 0;
}

struct ranked {
	struct ksym sym;
	uint8_t rank;
};

static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	size_t lx, ly;
	int c;

	if (x->sym.addr != y->sym.addr)
		return x->sym.addr < y->sym.addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (!x->sym.name || !y->sym.name)
		return !x->sym.name - !y->sym.name;
	lx = strlen(x->sym.name);
	ly = strlen(y->sym.name);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	c = strcmp(x->sym.name, y->sym.name);
	if (c)
		return c;
	return strcmp(x->sym.module, y->sym.module);
}

/* Sort, then keep one symbol per address: the preferred alias. */
static int finish(struct kparse *kp, struct kallsyms *out)
{
	struct ranked *r;
	size_t i, n = 0;

	r = malloc(kp->n * sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (i = 0; i < kp->n; i++)
		r[i] = (struct ranked){ kp->syms[i], kp->ranks[i] };
	qsort(r, kp->n, sizeof(*r), cmp_ranked);
	for (i = 0; i < kp->n; i++) {
		if (n && kp->syms[n - 1].addr == r[i].sym.addr)
			continue;
		kp->syms[n++] = r[i].sym;
	}
	free(r);
	out->syms = kp->syms;
	out->n = n;
	kp->syms = NULL;
	return 0;
}

int kallsyms__load(struct kallsyms *k, const char *path, struct strpool *pool)
{
	struct kparse kp = { .pool = pool };
	uint64_t skipped = 0;
	int err;

	memset(k, 0, sizeof(*k));
	err = read_lines(path, KALLSYMS_LINE_MAX, KALLSYMS_MAX_BYTES, parse_line, &kp, &skipped);
	if (err)
		goto out;
	err = -EPERM;
	if (kp.parsed && !kp.any_nonzero)
		goto out;
	err = -ENODATA;
	if (!kp.n)
		goto out;
	err = finish(&kp, k);
out:
	free(kp.syms);
	free(kp.ranks);
	return err;
}

void kallsyms__free(struct kallsyms *k)
{
	if (!k)
		return;
	free(k->syms);
	memset(k, 0, sizeof(*k));
}

bool kallsyms__lookup(const struct kallsyms *k, uint64_t addr, const char **name,
		      const char **module)
{
	size_t lo = 0, hi = k->n;
	const struct ksym *s;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	s = &k->syms[lo - 1];
	if (!s->name || addr - s->addr >= KSYM_MAX_EXTENT)
		return false;
	*name = s->name;
	*module = s->module;
	return true;
}

/* ---- the symbolizer's kernel table, read by a thread of its own ---- */

int symbolizer__load_kallsyms(struct symbolizer *s, const char *path)
{
	struct kallsyms k;
	int err;

	if (!s || !path)
		return -EINVAL;
	kallsyms_wait(s);
	err = kallsyms__load(&k, path, &s->pool);
	if (err)
		return err;
	/* names of the old table live in the pool, so frames already handed out stay valid */
	kallsyms__free(&s->ksyms);
	s->ksyms = k;
	return 0;
}

static void *kallsyms_thread(void *arg)
{
	struct symbolizer *s = arg;

	prctl(PR_SET_NAME, "dlflame-ksyms", 0, 0, 0); /* for top -H and bench/overhead.sh */
	s->kerr = kallsyms__load(&s->kload, s->kpath, &s->kpool);
	return NULL;
}

int symbolizer__load_kallsyms_async(struct symbolizer *s, const char *path)
{
	int err;

	if (!s || !path)
		return -EINVAL;
	kallsyms_wait(s);
	free(s->kpath);
	s->kpath = strdup(path);
	if (!s->kpath)
		return -ENOMEM;
	err = pthread_create(&s->kthread, NULL, kallsyms_thread, s);
	if (err) {
		/* no thread: read it now */
		s->kerr = symbolizer__load_kallsyms(s, path);
		return 0;
	}
	s->kloading = true;
	return 0;
}

/* Join the kallsyms reader, if any, and take its table; the result of the last load. */
int kallsyms_wait(struct symbolizer *s)
{
	if (!s->kloading)
		return s->kerr;
	pthread_join(s->kthread, NULL);
	s->kloading = false;
	if (!s->kerr) {
		/* its names live in kpool, freed with the symbolizer */
		kallsyms__free(&s->ksyms);
		s->ksyms = s->kload;
		memset(&s->kload, 0, sizeof(s->kload));
	}
	return s->kerr;
}

int symbolizer__kallsyms_result(struct symbolizer *s)
{
	return s ? kallsyms_wait(s) : -EINVAL;
}
