/* SPDX-License-Identifier: MIT */
/*
 * Chrome Trace Event JSON, for chrome://tracing and Perfetto: each thread's
 * samples in time order become nested "X" spans, one per frame, a frame's
 * span lasting while consecutive samples keep it on the stack. A sample
 * covers its own interval (see render.h); a gap longer than a sample
 * between two samples ends every span, so that the timeline does not claim
 * time nobody observed. Spans are written per thread in (start, depth)
 * order, parents before their children: viewers nest by that order when
 * two spans start together.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "render/internal.h"

struct tsample {
	uint32_t pid;
	uint32_t tid;
	uint64_t time;
	uint32_t idx;
};

struct span {
	uint64_t start; /* ns from the profile's start */
	uint64_t end;
	uint32_t frame;
	uint32_t depth;
	uint32_t kinds; /* bit per enum sample_kind */
};

#define MAX_HOSTS 1024 /* pids move by host index << 22: 1024 fit in 32 bits */

struct trace {
	const struct profile *p;
	FILE *out;
	uint64_t base;
	struct span *open;
	size_t nr_open;
	size_t cap_open;
	struct span *done;
	size_t nr_done;
	size_t cap_done;
	struct strbuf line;
	struct strbuf names; /* JSON strings of frame names, built on first use */
	size_t *name_off; /* SIZE_MAX: not built yet */
	size_t *name_len;
	uint8_t *is_op; /* per frame, once named: 1 for an operator's entry (a span of cat op) */
	const struct render_op_names *ops; /* operators' overloads, or NULL */
	bool first;
	/* the hosts met so far (a merged profile): the first keeps its pids */
	struct u64map host_index; /* host string id -> index */
	size_t nr_hosts;
};

/*
 * A thread's process id on the trace. A merged profile may hold the same
 * pid on two hosts: the second host's pids move above pid_max (2^22),
 * host index << 22, so that their tracks stay apart.
 */
static uint32_t trace_pid(struct trace *t, const struct pf_thread *th)
{
	uint64_t i;

	if (!u64map_get(&t->host_index, profile__thread_host(t->p, th), &i)) {
		i = t->nr_hosts < MAX_HOSTS ? t->nr_hosts : MAX_HOSTS - 1;
		/* out of memory: the pid as it is, tracks of two hosts may share it */
		if (u64map_put(&t->host_index, profile__thread_host(t->p, th), i))
			i = 0;
		else
			t->nr_hosts += t->nr_hosts < MAX_HOSTS;
	}
	return i ? (uint32_t)i << 22 | (th->pid & 0x3fffff) : th->pid;
}

static int ts_cmp(const void *a, const void *b)
{
	const struct tsample *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->depth < y->depth ? -1 : x->depth > y->depth;
}

static int close_spans(struct trace *t, size_t keep)
{
	int err;

	if (t->nr_open <= keep)
		return 0;
	err = grow_array((void **)&t->done, &t->cap_done, t->nr_done + t->nr_open - keep,
			 sizeof(*t->done));
	if (err)
		return err;
	while (t->nr_open > keep)
		t->done[t->nr_done++] = t->open[--t->nr_open];
	return 0;
}

static int frame_json(struct trace *t, uint32_t f, const char **s, size_t *len)
{
	if (t->name_off[f] == SIZE_MAX) {
		const struct pf_frame *fr = profile__get_frame(t->p, f);
		size_t off = t->names.len;
		int err;

		struct render_op_ref ref;
		char op[RENDER_OP_MAX + 8];

		if (fr->name >= profile__nr_strings(t->p))
			return -EINVAL;
		/* an operator's entry (not its redispatch, the same call): aten::NAME */
		t->is_op[f] = (fr->kind == FRAME_USER || fr->kind == FRAME_INLINED) &&
			      render_op_parse(profile__str(t->p, fr->name),
					      profile__str_len(t->p, fr->name), &ref) &&
			      !ref.redispatch;
		if (t->is_op[f])
			err = sb_add_json(&t->names, op,
					  render_op_name(t->ops, ref.s, ref.len, op, sizeof(op)));
		else
			err = sb_add_json(&t->names, profile__str(t->p, fr->name),
					  profile__str_len(t->p, fr->name));
		if (err)
			return err;
		t->name_off[f] = off;
		t->name_len[f] = t->names.len - off;
	}
	*s = t->names.buf + t->name_off[f];
	*len = t->name_len[f];
	return 0;
}

/* "12.345" microseconds from ns, exactly: nesting survives the unit change. */
static int add_us(struct strbuf *sb, uint64_t ns)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%llu.%03llu", (unsigned long long)(ns / 1000),
			 (unsigned long long)(ns % 1000));

	return sb_add(sb, buf, (size_t)n);
}

static int add_str(struct strbuf *sb, const char *s)
{
	return sb_add(sb, s, strlen(s));
}

static int put_event(struct trace *t)
{
	int err = put_buf(t->out, t->first ? "\n" : ",\n", t->first ? 1 : 2);

	t->first = false;
	if (!err)
		err = put_buf(t->out, t->line.buf, t->line.len);
	t->line.len = 0;
	return err;
}

/* One "X" event: frame s->frame from s->start to s->end, category cat. */
static int put_x(struct trace *t, const struct span *s, const char *cat, uint32_t pid, uint32_t tid)
{
	const char *name;
	char ids[48];
	size_t len;
	int err;

	err = frame_json(t, s->frame, &name, &len);
	if (!err)
		err = add_str(&t->line, "{\"name\":");
	if (!err)
		err = sb_add(&t->line, name, len);
	if (!err)
		err = add_str(&t->line, ",\"cat\":\"");
	if (!err)
		err = add_str(&t->line, cat);
	if (!err)
		err = add_str(&t->line, "\",\"ph\":\"X\",\"ts\":");
	if (!err)
		err = add_us(&t->line, s->start);
	if (!err)
		err = add_str(&t->line, ",\"dur\":");
	if (!err)
		err = add_us(&t->line, s->end - s->start);
	snprintf(ids, sizeof(ids), ",\"pid\":%u,\"tid\":%u}", pid, tid);
	if (!err)
		err = add_str(&t->line, ids);
	return err ? err : put_event(t);
}

/* A frame's span, its category the kinds of the samples it stands for. */
static int put_span(struct trace *t, const struct span *s, uint32_t pid, uint32_t tid)
{
	static const char *const cats[8] = {
		"",	    "oncpu",	      "offcpu",		 "oncpu,offcpu",
		"runqueue", "oncpu,runqueue", "offcpu,runqueue", "oncpu,offcpu,runqueue",
	};

	static const char *const op_cats[8] = {
		"op",
		"op,oncpu",
		"op,offcpu",
		"op,oncpu,offcpu",
		"op,runqueue",
		"op,oncpu,runqueue",
		"op,offcpu,runqueue",
		"op,oncpu,offcpu,runqueue",
	};
	const char *name;
	size_t len;
	int err = frame_json(t, s->frame, &name, &len); /* names it, says whether an operator */

	if (err)
		return err;
	return put_x(t, s, (t->is_op[s->frame] ? op_cats : cats)[s->kinds & 7], pid, tid);
}

/* A track's name: comm, then suffix (may be ""). */
static int put_name(struct trace *t, const char *what, uint32_t pid, uint32_t tid, uint32_t comm,
		    const char *suffix)
{
	struct strbuf name = { 0 };
	char head[96];
	int err;

	snprintf(head, sizeof(head), "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%u,\"tid\":%u,", what,
		 pid, tid);
	err = add_str(&t->line, head);
	if (!err)
		err = add_str(&t->line, "\"args\":{\"name\":");
	if (!err)
		err = sb_add(&name, profile__str(t->p, comm), profile__str_len(t->p, comm));
	if (!err)
		err = add_str(&name, suffix);
	if (!err)
		err = sb_add_json(&t->line, name.buf, name.len);
	sb_free(&name);
	if (!err)
		err = add_str(&t->line, "}}");
	return err ? err : put_event(t);
}

/* The interval a sample stands for, in ns from the profile's start. */
static void sample_span(const struct trace *t, const struct pf_sample *s, uint64_t *start,
			uint64_t *end)
{
	uint64_t at = s->time > t->base ? s->time - t->base : 0;

	if (s->kind == SAMPLE_ONCPU) {
		*end = at;
		*start = at > s->weight ? at - s->weight : 0;
	} else {
		*start = at;
		*end = sat_add(at, s->weight);
	}
}

/* Samples [first, end) of v, all of one thread, in time order. */
static int thread_spans(struct trace *t, const struct tsample *v, size_t first, size_t end,
			uint32_t **frames, size_t *cap)
{
	uint64_t last_end = 0;
	int err;

	t->nr_open = 0;
	t->nr_done = 0;
	for (size_t i = first; i < end; i++) {
		const struct pf_sample *s = profile__get_sample(t->p, v[i].idx);
		int64_t depth = profile__stack_frames(t->p, s->stack, frames, cap);
		uint64_t start, stop;
		size_t common = 0;

		if (depth < 0)
			return (int)depth;
		sample_span(t, s, &start, &stop);
		if (t->nr_open && start > last_end && start - last_end > stop - start)
			err = close_spans(t, 0); /* nobody saw the thread in between */
		else
			err = 0;
		if (err)
			return err;
		/* overlapping samples (timer jitter) must not overlap as spans */
		if (t->nr_open && start < last_end)
			start = last_end;
		if (stop < start)
			stop = start;
		while (common < t->nr_open && common < (size_t)depth &&
		       t->open[common].frame == (*frames)[common])
			common++;
		if (t->nr_open > common) {
			for (size_t d = common; d < t->nr_open; d++)
				t->open[d].end = last_end;
			err = close_spans(t, common);
			if (err)
				return err;
		}
		err = grow_array((void **)&t->open, &t->cap_open, (size_t)depth + 1,
				 sizeof(*t->open));
		if (err)
			return err;
		for (size_t d = common; d < (size_t)depth; d++)
			t->open[d] = (struct span){ .start = start,
						    .frame = (*frames)[d],
						    .depth = (uint32_t)d };
		t->nr_open = (size_t)depth;
		for (size_t d = 0; d < t->nr_open; d++) {
			t->open[d].end = stop;
			t->open[d].kinds |= 1u << s->kind;
		}
		last_end = stop;
	}
	err = close_spans(t, 0);
	if (!err)
		qsort(t->done, t->nr_done, sizeof(*t->done), span_cmp);
	return err;
}

/* Calls: by thread, then start, the longer (the caller) first when they start together. */
static const struct profile *call_order_p;

static int call_cmp(const void *a, const void *b)
{
	const struct tsample *x = a, *y = b;
	uint64_t dx = profile__get_sample(call_order_p, x->idx)->weight;
	uint64_t dy = profile__get_sample(call_order_p, y->idx)->weight;

	if (x->pid != y->pid || x->tid != y->tid || x->time != y->time)
		return ts_cmp(a, b);
	return dx != dy ? (dx < dy ? 1 : -1) : (x->idx < y->idx ? -1 : x->idx > y->idx);
}

/* " rank N", and " @host" in a profile of several hosts: a process's track name. */
static const char *process_suffix(struct trace *t, const struct pf_thread *th, char *buf,
				  size_t len)
{
	const struct pf_process *pr = profile__thread_process(t->p, th);
	int n = 0;

	buf[0] = '\0';
	if (pr && pr->rank != PF_NO_RANK)
		n = snprintf(buf, len, " rank %u", pr->rank);
	if (t->nr_hosts > 1 && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " @%s",
			 profile__str(t->p, profile__thread_host(t->p, th)));
	return buf;
}

/* A thread's calls go on a track of their own beside its samples': tid + this. */
#define CALL_TRACK 0x40000000u

/*
 * Every probed call (SAMPLE_CALL) as one span named after the function, on
 * its thread's calls track: calls nest by time as they nested on the stack.
 */
static int call_spans(struct trace *t, struct tsample *v, size_t nr)
{
	int err = 0;

	call_order_p = t->p;
	qsort(v, nr, sizeof(*v), call_cmp);
	for (size_t i = 0; i < nr && !err; i++) {
		const struct pf_sample *s = profile__get_sample(t->p, v[i].idx);
		const struct pf_thread *th = profile__get_thread(t->p, s->thread);
		const struct pf_stack *st = profile__get_stack(t->p, s->stack);
		struct span sp = { .frame = st->frame, .kinds = 0 };
		uint64_t at = s->time > t->base ? s->time - t->base : 0;

		if (!i || v[i].pid != v[i - 1].pid || v[i].tid != v[i - 1].tid)
			err = put_name(t, "thread_name", v[i].pid, th->tid + CALL_TRACK, th->comm,
				       " calls");
		sp.start = at;
		sp.end = sat_add(at, s->weight);
		if (!err)
			err = put_x(t, &sp, "call", v[i].pid, th->tid + CALL_TRACK);
	}
	return err;
}

int render_trace(const struct profile *p, const struct render_select *sel, FILE *out)
{
	return render_trace_ops(p, sel, NULL, out);
}

int render_trace_ops(const struct profile *p, const struct render_select *sel,
		     const struct render_op_names *ops, FILE *out)
{
	const struct pf_meta *m = profile__cmeta(p);
	size_t n = profile__nr_samples(p), nr = 0, nr_frames = profile__nr_frames(p);
	struct trace t = {
		.p = p, .out = out, .base = profile_time_base(p), .first = true, .ops = ops
	};
	bool kinds[SAMPLE_KIND_MAX];
	struct tsample *v = NULL, *calls = NULL;
	uint32_t *rss = NULL; /* the resident-set samples, for each process's RSS counter */
	size_t ncalls = 0, nrss = 0;
	uint32_t *frames = NULL;
	size_t frames_cap = 0;
	char tail[160], suffix[128];
	int err = -ENOMEM;

	u64map_init(&t.host_index);
	select_kinds(sel, kinds);
	kinds[SAMPLE_CALL] = false;
	v = malloc((n ? n : 1) * sizeof(*v));
	calls = malloc((n ? n : 1) * sizeof(*calls));
	rss = malloc((n ? n : 1) * sizeof(*rss));
	t.name_off = malloc((nr_frames ? nr_frames : 1) * sizeof(*t.name_off));
	t.name_len = malloc((nr_frames ? nr_frames : 1) * sizeof(*t.name_len));
	t.is_op = calloc(nr_frames ? nr_frames : 1, 1);
	if (!v || !calls || !rss || !t.name_off || !t.name_len || !t.is_op)
		goto out;
	memset(t.name_off, 0xff, nr_frames * sizeof(*t.name_off));
	err = -EINVAL;
	/* probed calls are drawn whatever kinds are selected: they are spans of their own */
	for (size_t i = 0; i < n; i++) {
		const struct pf_sample *s = profile__get_sample(p, i);
		const struct pf_thread *th;

		if (s->kind == SAMPLE_RSS) {
			if (s->thread >= profile__nr_threads(p))
				goto out;
			rss[nrss++] = (uint32_t)i;
			continue;
		}
		if (s->kind == SAMPLE_CALL) {
			if (s->thread >= profile__nr_threads(p) || !s->stack ||
			    s->stack >= profile__nr_stacks(p) || i >= UINT32_MAX)
				goto out;
			th = profile__get_thread(p, s->thread);
			calls[ncalls++] = (struct tsample){ trace_pid(&t, th), th->tid, s->time,
							    (uint32_t)i };
			continue;
		}
		if (s->kind >= SAMPLE_KIND_MAX || !kinds[s->kind])
			continue;
		if (s->thread >= profile__nr_threads(p) || s->stack >= profile__nr_stacks(p) ||
		    i >= UINT32_MAX)
			goto out;
		th = profile__get_thread(p, s->thread);
		if (th->comm >= profile__nr_strings(p))
			goto out;
		v[nr++] = (struct tsample){ trace_pid(&t, th), th->tid, s->time, (uint32_t)i };
	}
	qsort(v, nr, sizeof(*v), ts_cmp);

	err = put_buf(out, "{\"traceEvents\":[", 16);
	for (size_t i = 0, j; !err && i < nr; i = j) {
		const struct pf_thread *th;

		for (j = i + 1; j < nr && v[j].pid == v[i].pid && v[j].tid == v[i].tid; j++)
			;
		/* a renamed thread keeps its track; the track shows its last name */
		th = profile__get_thread(p, profile__get_sample(p, v[j - 1].idx)->thread);
		if (th->pid == th->tid)
			err = put_name(&t, "process_name", v[i].pid, v[i].pid, th->comm,
				       process_suffix(&t, th, suffix, sizeof(suffix)));
		if (!err)
			err = put_name(&t, "thread_name", v[i].pid, th->tid, th->comm, "");
		if (!err)
			err = thread_spans(&t, v, i, j, &frames, &frames_cap);
		for (size_t k = 0; !err && k < t.nr_done; k++)
			err = put_span(&t, &t.done[k], v[i].pid, v[i].tid);
	}
	if (!err)
		err = call_spans(&t, calls, ncalls);
	for (size_t i = 0; i < nrss && !err; i++) {
		const struct pf_sample *s = profile__get_sample(p, rss[i]);
		char ev[160];

		t.line.len = 0;
		snprintf(ev, sizeof(ev), "{\"name\":\"RSS\",\"ph\":\"C\",\"ts\":");
		err = add_str(&t.line, ev);
		if (!err)
			err = add_us(&t.line, s->time > t.base ? s->time - t.base : 0);
		snprintf(ev, sizeof(ev), ",\"pid\":%u,\"args\":{\"MiB\":%.1f}}",
			 trace_pid(&t, profile__get_thread(p, s->thread)),
			 (double)s->weight / 1048576.0);
		if (!err)
			err = add_str(&t.line, ev);
		if (!err)
			err = put_event(&t);
	}
	snprintf(tail, sizeof(tail),
		 "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"dlflame\","
		 "\"lost_samples\":%llu,\"command\":",
		 (unsigned long long)m->lost);
	if (!err)
		err = put_buf(out, tail, strlen(tail));
	if (!err) {
		t.line.len = 0;
		err = m->command < profile__nr_strings(p)
			      ? sb_add_json(&t.line, profile__str(p, m->command),
					    profile__str_len(p, m->command))
			      : -EINVAL;
	}
	if (!err)
		err = put_buf(out, t.line.buf, t.line.len);
	if (!err)
		err = put_buf(out, "}}\n", 3);
	if (!err && (fflush(out) == EOF || ferror(out)))
		err = render_write_error();
out:
	u64map_free(&t.host_index);
	free(v);
	free(calls);
	free(rss);
	free(frames);
	free(t.open);
	free(t.done);
	free(t.name_off);
	free(t.name_len);
	free(t.is_op);
	sb_free(&t.line);
	sb_free(&t.names);
	return err;
}
