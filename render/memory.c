/* SPDX-License-Identifier: MIT */
/*
 * The memory table (report --memory), as the framework profilers' "device
 * storage" table: per process, its resident set over the recording (min,
 * average, max of the SAMPLE_RSS samples) and the memory its page faults
 * first touched (SAMPLE_FAULT weights).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "render/internal.h"

struct mem_row {
	uint32_t pid, comm;
	uint64_t n, min, max, sum, faulted;
};

static int by_max(const void *a, const void *b)
{
	const struct mem_row *x = a, *y = b;

	if (x->max != y->max)
		return x->max < y->max ? 1 : -1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static double mib(uint64_t b)
{
	return (double)b / 1048576.0;
}

int render_memory(const struct profile *p, FILE *out)
{
	size_t n = profile__nr_samples(p), nr = 0, cap = 0;
	struct mem_row *rows = NULL;
	struct u64map index;
	int err = 0;

	u64map_init(&index);
	for (size_t i = 0; i < n && !err; i++) {
		const struct pf_sample *s = profile__get_sample(p, i);
		const struct pf_thread *t;
		struct mem_row *r;
		uint64_t v;

		if ((s->kind != SAMPLE_RSS && s->kind != SAMPLE_FAULT) ||
		    s->thread >= profile__nr_threads(p))
			continue;
		t = profile__get_thread(p, s->thread);
		if (!u64map_get(&index, t->pid, &v)) {
			if (grow_array((void **)&rows, &cap, nr + 1, sizeof(*rows)) ||
			    u64map_put(&index, t->pid, nr)) {
				err = -ENOMEM;
				break;
			}
			rows[nr] = (struct mem_row){ .pid = t->pid,
						     .comm = t->comm,
						     .min = UINT64_MAX };
			v = nr++;
		}
		r = &rows[v];
		if (t->tid == t->pid)
			r->comm = t->comm;
		if (s->kind == SAMPLE_FAULT) {
			r->faulted = sat_add(r->faulted, s->weight);
			continue;
		}
		r->n++;
		r->sum = sat_add(r->sum, s->weight);
		if (s->weight < r->min)
			r->min = s->weight;
		if (s->weight > r->max)
			r->max = s->weight;
	}
	if (!err) {
		if (nr)
			qsort(rows, nr, sizeof(*rows), by_max);
		if (fprintf(out,
			    "Memory: %zu processes; resident set sampled every 0.1 s, first touches "
			    "from page-fault samples\n",
			    nr) < 0 ||
		    fprintf(out, "%8s %8s %10s %10s %10s %12s  %s\n", "PID", "SAMPLES", "MIN MiB",
			    "AVG MiB", "MAX MiB", "TOUCHED MiB", "COMMAND") < 0)
			err = render_write_error();
	}
	for (size_t i = 0; i < nr && !err; i++) {
		const struct mem_row *r = &rows[i];
		struct strbuf name = { 0 };

		err = r->comm < profile__nr_strings(p)
			      ? sb_add_folded_name(&name, profile__str(p, r->comm),
						   profile__str_len(p, r->comm))
			      : -EINVAL;
		if (!err && fprintf(out, "%8u %8llu %10.1f %10.1f %10.1f %12.1f  %.*s\n", r->pid,
				    (unsigned long long)r->n, r->n ? mib(r->min) : 0.0,
				    r->n ? mib(r->sum) / (double)r->n : 0.0, mib(r->max),
				    mib(r->faulted), (int)name.len, name.buf) < 0)
			err = render_write_error();
		sb_free(&name);
	}
	if (!err && (fflush(out) == EOF || ferror(out)))
		err = render_write_error();
	u64map_free(&index);
	free(rows);
	return err;
}
