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
 *
 * Bounded (render_trace_bounded): a long recording's spans do not all fit
 * a file a viewer opens, so each track keeps its longest spans, those in
 * the duration buckets from the top down that fit its share, and every
 * shorter span is left out: its time stays covered by its parent (never
 * shorter), which counts it in "args":{"hidden":N}, and the track's name
 * says below which duration spans are hidden. Spans are made twice (or
 * three times): once to weigh each track, once for the histogram of a
 * track that must be cut, once to write; memory stays that of the spans
 * written.
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
	uint64_t hidden; /* shorter spans left out under this one */
	uint32_t frame;
	uint32_t depth;
	uint32_t kinds; /* bit per enum sample_kind */
};

/*
 * Span durations in buckets: exact below 128 ns, then 64 per power of
 * two (within 1.6%). A bucket's spans are kept or left out together.
 */
#define NR_BUCKETS (58 * 64 + 128)
/* what "args":{"hidden":N} adds to a kept span, but N's digits */
#define HIDDEN_ARGS (sizeof(",\"args\":{\"hidden\":}") - 1)
/*
 * Outermost spans left out in a row become one span of this name, from
 * the first one's start to the last one's end, that counts them.
 */
#define SUMMARY_FRAME UINT32_MAX
#define SUMMARY_NAME "\"[shorter spans]\""
#define SUMMARY_CAT "hidden"
/* what a summary span writes, but its numbers' digits */
#define SUMMARY_FIXED                                                                           \
	(2 +                                                                                    \
	 sizeof("{\"name\":,\"cat\":\"\",\"ph\":\"X\",\"ts\":.,\"dur\":.,\"pid\":,\"tid\":}") - \
	 1 + sizeof(SUMMARY_NAME) - 1 + sizeof(SUMMARY_CAT) - 1 + HIDDEN_ARGS)

static uint32_t bucket_of(uint64_t ns)
{
	int e;

	if (ns < 128)
		return (uint32_t)ns;
	e = 63 - __builtin_clzll(ns); /* >= 7 */
	return (uint32_t)(128 + (e - 7) * 64 + ((ns >> (e - 6)) & 63));
}

/* The shortest duration of bucket b. */
static uint64_t bucket_floor(uint32_t b)
{
	uint32_t e;

	if (b < 128)
		return b;
	e = (b - 128) / 64 + 7;
	return (64ULL + (b - 128) % 64) << (e - 6);
}

enum span_mode {
	SPANS_ALL, /* every span to done */
	SPANS_COUNT, /* only counted: count, bytes and (with hist_*) the histogram */
	SPANS_KEEP, /* spans of buckets >= keep_from to done, the others counted as hidden */
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
	/* the track being made: where its spans go */
	enum span_mode mode;
	uint32_t keep_from; /* SPANS_KEEP: the shortest bucket kept */
	uint32_t pid, tid; /* as written: for a span's size */
	uint64_t count, bytes; /* SPANS_COUNT: the track's spans and their size */
	uint64_t max_end; /* SPANS_COUNT: the latest end */
	uint64_t *hist_count, *hist_bytes; /* SPANS_COUNT: per bucket, or NULL */
	uint64_t *hist_roots; /* SPANS_COUNT: the outermost spans per bucket */
	uint64_t hidden; /* SPANS_KEEP: spans left out */
	bool summaries; /* SPANS_KEEP: outermost spans left out become summary spans */
	struct span summary; /* the one being made (summary.hidden > 0) */
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

static int span_bytes(struct trace *t, const struct span *s, uint64_t *bytes);

static int flush_summary(struct trace *t)
{
	int err;

	if (!t->summary.hidden)
		return 0;
	err = grow_array((void **)&t->done, &t->cap_done, t->nr_done + 1, sizeof(*t->done));
	if (!err)
		t->done[t->nr_done++] = t->summary;
	t->summary.hidden = 0;
	return err;
}

/* A span is over: kept, counted or left out, as the track's mode says. */
static int span_done(struct trace *t, const struct span *s)
{
	uint64_t bytes;
	uint32_t b;
	int err;

	switch (t->mode) {
	case SPANS_COUNT:
		err = span_bytes(t, s, &bytes);
		if (err)
			return err;
		t->count++;
		t->max_end = s->end > t->max_end ? s->end : t->max_end;
		t->bytes = sat_add(t->bytes, bytes);
		if (t->hist_count) {
			b = bucket_of(s->end - s->start);
			t->hist_count[b]++;
			t->hist_bytes[b] = sat_add(t->hist_bytes[b], bytes);
			if (!s->depth && t->summaries)
				t->hist_roots[b]++;
		}
		return 0;
	case SPANS_KEEP:
		if (bucket_of(s->end - s->start) < t->keep_from) {
			t->hidden += 1;
			/* its parent, closed after it, stands for it */
			if (s->depth && t->nr_open >= s->depth) {
				t->open[s->depth - 1].hidden += s->hidden + 1;
			} else if (!s->depth && t->summaries) {
				/* outermost spans close in time order */
				if (!t->summary.hidden)
					t->summary = (struct span){ .start = s->start,
								    .frame = SUMMARY_FRAME };
				t->summary.end = s->end;
				t->summary.hidden += s->hidden + 1;
			}
			return 0;
		}
		if (!s->depth) {
			err = flush_summary(t);
			if (err)
				return err;
		}
		break;
	case SPANS_ALL:
		break;
	}
	err = grow_array((void **)&t->done, &t->cap_done, t->nr_done + 1, sizeof(*t->done));
	if (!err)
		t->done[t->nr_done++] = *s;
	return err;
}

static int close_spans(struct trace *t, size_t keep)
{
	int err = 0;

	/* innermost first: a left-out span's parent is still open */
	while (!err && t->nr_open > keep) {
		t->nr_open--;
		err = span_done(t, &t->open[t->nr_open]);
	}
	return err;
}

static int frame_json(struct trace *t, uint32_t f, const char **s, size_t *len)
{
	if (f == SUMMARY_FRAME) {
		*s = SUMMARY_NAME;
		*len = strlen(SUMMARY_NAME);
		return 0;
	}
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
	snprintf(ids, sizeof(ids), ",\"pid\":%u,\"tid\":%u", pid, tid);
	if (!err)
		err = add_str(&t->line, ids);
	if (!err && s->hidden) {
		snprintf(ids, sizeof(ids), ",\"args\":{\"hidden\":%llu}",
			 (unsigned long long)s->hidden);
		err = add_str(&t->line, ids);
	}
	if (!err)
		err = add_str(&t->line, "}");
	return err ? err : put_event(t);
}

static unsigned digits(uint64_t v)
{
	unsigned n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

static const char *const span_cats[8] = {
	"",	    "oncpu",	      "offcpu",		 "oncpu,offcpu",
	"runqueue", "oncpu,runqueue", "offcpu,runqueue", "oncpu,offcpu,runqueue",
};
/* the same for an operator's entry span */
static const char *const op_cats[8] = {
	"op",	       "op,oncpu",	    "op,offcpu",	  "op,oncpu,offcpu",
	"op,runqueue", "op,oncpu,runqueue", "op,offcpu,runqueue", "op,oncpu,offcpu,runqueue",
};

/* A span's category; its frame already named (frame_json). */
static const char *span_cat(const struct trace *t, const struct span *s)
{
	if (s->frame == SUMMARY_FRAME)
		return SUMMARY_CAT;
	return (t->is_op[s->frame] ? op_cats : span_cats)[s->kinds & 7];
}

/*
 * The bytes put_span (or put_x with cat "call") writes for s on the
 * current track, "args" aside, with the ",\n" before it.
 */
static int span_bytes(struct trace *t, const struct span *s, uint64_t *bytes)
{
	const char *name;
	size_t len;
	int err = frame_json(t, s->frame, &name, &len);

	if (err)
		return err;
	*bytes =
		2 +
		sizeof("{\"name\":,\"cat\":\"\",\"ph\":\"X\",\"ts\":,\"dur\":,\"pid\":,\"tid\":}") -
		1 + len +
		strlen(!s->kinds		   ? "call"
		       : s->frame == SUMMARY_FRAME ? span_cats[s->kinds & 7]
						   : span_cat(t, s)) +
		digits(s->start / 1000) + 4 + digits((s->end - s->start) / 1000) + 4 +
		digits(t->pid) + digits(t->tid);
	return 0;
}

/* A frame's span, its category the kinds of the samples it stands for. */
static int put_span(struct trace *t, const struct span *s, uint32_t pid, uint32_t tid)
{
	const char *name;
	size_t len;
	int err = frame_json(t, s->frame, &name, &len); /* names it, says whether an operator */

	if (err)
		return err;
	return put_x(t, s, span_cat(t, s), pid, tid);
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
	if (!err && t->mode == SPANS_KEEP)
		err = flush_summary(t);
	if (!err && t->mode != SPANS_COUNT && t->nr_done)
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
 * The calls [first, end) of one thread, v sorted by call_cmp; they stay in
 * that order (the caller first when two start together).
 */
static int call_track(struct trace *t, const struct tsample *v, size_t first, size_t end)
{
	int err = 0;

	for (size_t i = first; i < end && !err; i++) {
		const struct pf_sample *s = profile__get_sample(t->p, v[i].idx);
		const struct pf_stack *st = profile__get_stack(t->p, s->stack);
		uint64_t at = s->time > t->base ? s->time - t->base : 0;
		struct span sp = { .frame = st->frame, .start = at, .end = sat_add(at, s->weight) };

		err = span_done(t, &sp);
	}
	return err;
}

/* A track: one thread's samples, or its calls. */
struct track {
	size_t first, end; /* in the samples' or the calls' array */
	bool calls;
	uint32_t pid, tid; /* as written */
	uint64_t count, bytes; /* all its spans */
	uint64_t max_end; /* the latest end of one */
	uint64_t share; /* spans (max_spans) or bytes it may write */
	uint32_t keep_from; /* the shortest bucket written; 0: all */
};

static int make_spans(struct trace *t, const struct track *tr, const struct tsample *v,
		      const struct tsample *calls, uint32_t **frames, size_t *cap)
{
	t->pid = tr->pid;
	t->tid = tr->tid;
	t->summaries = !tr->calls;
	t->summary.hidden = 0;
	t->nr_open = 0;
	t->nr_done = 0;
	return tr->calls ? call_track(t, calls, tr->first, tr->end)
			 : thread_spans(t, v, tr->first, tr->end, frames, cap);
}

static const struct track *share_order_tracks;

static int by_bytes(const void *a, const void *b)
{
	const struct track *x = &share_order_tracks[*(const size_t *)a];
	const struct track *y = &share_order_tracks[*(const size_t *)b];

	return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

/*
 * Each track's share of the bound: max_spans spans each, or the bytes
 * left after the other events split evenly, a track that needs less
 * leaving the rest to the others.
 */
static int share_out(struct track *tr, size_t n, const struct trace_opts *o, uint64_t reserve)
{
	uint64_t left = o->max_bytes > reserve ? o->max_bytes - reserve : 0;
	size_t *order;

	if (o->max_spans) {
		for (size_t i = 0; i < n; i++)
			tr[i].share = o->max_spans;
		return 0;
	}
	order = malloc((n ? n : 1) * sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	share_order_tracks = tr;
	qsort(order, n, sizeof(*order), by_bytes);
	for (size_t k = 0; k < n; k++) {
		struct track *x = &tr[order[k]];
		uint64_t fair = left / (n - k);

		x->share = x->bytes < fair ? x->bytes : fair;
		left -= x->share;
	}
	free(order);
	return 0;
}

/* The shortest bucket whose spans, with every longer one, fit the track's share. */
static uint32_t keep_from(const struct trace *t, const struct track *tr, bool by_count)
{
	/* the most a kept span's "args" and a summary span add: no number is longer */
	uint64_t args = HIDDEN_ARGS + digits(tr->count);
	uint64_t summary = SUMMARY_FIXED + 2 * (digits(tr->max_end / 1000) + 3) + digits(tr->pid) +
			   digits(tr->tid) + args;
	/* the summary spans: at most one more than the outermost spans kept */
	uint64_t used = by_count ? 1 : summary;
	uint32_t from = NR_BUCKETS;

	for (uint32_t b = NR_BUCKETS; b-- > 0;) {
		uint64_t cost =
			by_count ? sat_add(t->hist_count[b], t->hist_roots[b])
				 : sat_add(sat_add(t->hist_bytes[b], t->hist_count[b] * args),
					   t->hist_roots[b] * summary);

		if (sat_add(used, cost) > tr->share)
			break;
		used += cost;
		from = b;
	}
	return from;
}

/* " (spans under 1.02 ms hidden)": what a cut track's name says. */
static void hidden_suffix(const struct track *tr, char *buf, size_t len)
{
	uint64_t ns = bucket_floor(tr->keep_from < NR_BUCKETS ? tr->keep_from : NR_BUCKETS - 1);
	const char *what = tr->calls ? "calls" : "spans";

	if (tr->keep_from >= NR_BUCKETS)
		snprintf(buf, len, " (%s hidden: more than the bound)", what);
	else if (ns >= 1000000000)
		snprintf(buf, len, " (%s under %.3g s hidden)", what, (double)ns / 1e9);
	else if (ns >= 1000000)
		snprintf(buf, len, " (%s under %.3g ms hidden)", what, (double)ns / 1e6);
	else if (ns >= 1000)
		snprintf(buf, len, " (%s under %.3g us hidden)", what, (double)ns / 1e3);
	else
		snprintf(buf, len, " (%s under %llu ns hidden)", what, (unsigned long long)ns);
}

int render_trace(const struct profile *p, const struct render_select *sel, FILE *out)
{
	return render_trace_bounded(p, sel, NULL, NULL, out);
}

int render_trace_ops(const struct profile *p, const struct render_select *sel,
		     const struct render_op_names *ops, FILE *out)
{
	struct trace_opts o = { .ops = ops };

	return render_trace_bounded(p, sel, &o, NULL, out);
}

int render_trace_bounded(const struct profile *p, const struct render_select *sel,
			 const struct trace_opts *o, struct trace_result *res, FILE *out)
{
	const struct pf_meta *m = profile__cmeta(p);
	size_t n = profile__nr_samples(p), nr = 0, nr_frames = profile__nr_frames(p);
	struct trace t = { .p = p,
			   .out = out,
			   .base = profile_time_base(p),
			   .first = true,
			   .ops = o ? o->ops : NULL };
	bool bounded = o && (o->max_spans || o->max_bytes);
	bool kinds[SAMPLE_KIND_MAX];
	struct tsample *v = NULL, *calls = NULL;
	uint32_t *rss = NULL; /* the resident-set samples, for each process's RSS counter */
	size_t ncalls = 0, nrss = 0, ntracks = 0, cap_tracks = 0;
	struct track *tracks = NULL;
	struct trace_result r = { 0 };
	uint32_t *frames = NULL;
	size_t frames_cap = 0;
	uint64_t reserve;
	char tail[256], suffix[128], cut[96];
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
	if (m->command >= profile__nr_strings(p))
		goto out;
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
			if (th->comm >= profile__nr_strings(p))
				goto out;
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
	call_order_p = p;
	qsort(calls, ncalls, sizeof(*calls), call_cmp);

	/* the tracks: each thread's samples, then each thread's calls */
	reserve = 4096 + 6 * (uint64_t)profile__str_len(p, m->command) + 100 * (uint64_t)nrss;
	for (int pass = 0; pass < 2; pass++) {
		const struct tsample *a = pass ? calls : v;
		size_t na = pass ? ncalls : nr;

		for (size_t i = 0, j; i < na; i = j) {
			const struct pf_thread *th;

			for (j = i + 1; j < na && a[j].pid == a[i].pid && a[j].tid == a[i].tid; j++)
				;
			err = grow_array((void **)&tracks, &cap_tracks, ntracks + 1,
					 sizeof(*tracks));
			if (err)
				goto out;
			tracks[ntracks++] = (struct track){
				.first = i,
				.end = j,
				.calls = pass,
				.pid = a[i].pid,
				.tid = pass ? a[i].tid + CALL_TRACK : a[i].tid,
			};
			th = profile__get_thread(p, profile__get_sample(p, a[j - 1].idx)->thread);
			reserve += 2 * (400 + 6 * (uint64_t)profile__str_len(p, th->comm));
		}
	}
	if (bounded) {
		/* weigh every track, then find where each one that does not fit is cut */
		err = -ENOMEM;
		t.hist_count = malloc(NR_BUCKETS * sizeof(*t.hist_count));
		t.hist_bytes = malloc(NR_BUCKETS * sizeof(*t.hist_bytes));
		t.hist_roots = malloc(NR_BUCKETS * sizeof(*t.hist_roots));
		if (!t.hist_count || !t.hist_bytes || !t.hist_roots)
			goto out;
		t.mode = SPANS_COUNT;
		for (size_t k = 0; k < ntracks; k++) {
			uint64_t *hc = t.hist_count, *hb = t.hist_bytes;

			t.count = t.bytes = t.max_end = 0;
			t.hist_count = t.hist_bytes = NULL;
			err = make_spans(&t, &tracks[k], v, calls, &frames, &frames_cap);
			t.hist_count = hc;
			t.hist_bytes = hb;
			if (err)
				goto out;
			tracks[k].count = t.count;
			tracks[k].bytes = t.bytes;
			tracks[k].max_end = t.max_end;
		}
		err = share_out(tracks, ntracks, o, reserve);
		for (size_t k = 0; k < ntracks && !err; k++) {
			struct track *tr = &tracks[k];

			if (o->max_spans ? tr->count <= tr->share : tr->bytes <= tr->share)
				continue;
			memset(t.hist_count, 0, NR_BUCKETS * sizeof(*t.hist_count));
			memset(t.hist_bytes, 0, NR_BUCKETS * sizeof(*t.hist_bytes));
			memset(t.hist_roots, 0, NR_BUCKETS * sizeof(*t.hist_roots));
			err = make_spans(&t, tr, v, calls, &frames, &frames_cap);
			if (!err)
				tr->keep_from = keep_from(&t, tr, o->max_spans);
		}
		if (err)
			goto out;
	}

	err = put_buf(out, "{\"traceEvents\":[", 16);
	for (size_t k = 0; !err && k < ntracks; k++) {
		const struct track *tr = &tracks[k];
		const struct tsample *a = tr->calls ? calls : v;
		const struct pf_thread *th;

		/* a renamed thread keeps its track; the track shows its last name */
		th = profile__get_thread(p, profile__get_sample(p, a[tr->end - 1].idx)->thread);
		cut[0] = '\0';
		if (tr->keep_from)
			hidden_suffix(tr, cut, sizeof(cut));
		if (!tr->calls && th->pid == th->tid)
			err = put_name(&t, "process_name", tr->pid, tr->pid, th->comm,
				       process_suffix(&t, th, suffix, sizeof(suffix)));
		snprintf(suffix, sizeof(suffix), "%s%s", tr->calls ? " calls" : "", cut);
		if (!err)
			err = put_name(&t, "thread_name", tr->pid, tr->tid, th->comm, suffix);
		t.mode = tr->keep_from ? SPANS_KEEP : SPANS_ALL;
		t.keep_from = tr->keep_from;
		t.hidden = 0;
		if (!err)
			err = make_spans(&t, tr, v, calls, &frames, &frames_cap);
		for (size_t i = 0; !err && i < t.nr_done; i++)
			err = tr->calls ? put_x(&t, &t.done[i], "call", tr->pid, tr->tid)
					: put_span(&t, &t.done[i], tr->pid, tr->tid);
		r.spans += t.nr_done;
		r.hidden += t.hidden;
		if (tr->keep_from) {
			uint64_t floor = bucket_floor(tr->keep_from < NR_BUCKETS ? tr->keep_from
										 : NR_BUCKETS - 1);

			r.tracks_cut++;
			r.min_ns = floor > r.min_ns ? floor : r.min_ns;
		}
	}
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
		 "\"lost_samples\":%llu,",
		 (unsigned long long)m->lost);
	if (!err)
		err = put_buf(out, tail, strlen(tail));
	/* stated where something was left out: else the trace is whole */
	if (!err && r.tracks_cut) {
		if (o->max_spans)
			snprintf(tail, sizeof(tail), "\"span_bound\":\"%llu spans per track\",",
				 (unsigned long long)o->max_spans);
		else
			snprintf(tail, sizeof(tail), "\"span_bound\":\"%llu bytes\",",
				 (unsigned long long)o->max_bytes);
		err = put_buf(out, tail, strlen(tail));
		snprintf(tail, sizeof(tail), "\"hidden_spans\":%llu,",
			 (unsigned long long)r.hidden);
		if (!err)
			err = put_buf(out, tail, strlen(tail));
	}
	if (!err)
		err = put_buf(out, "\"command\":", 10);
	if (!err) {
		t.line.len = 0;
		err = sb_add_json(&t.line, profile__str(p, m->command),
				  profile__str_len(p, m->command));
	}
	if (!err)
		err = put_buf(out, t.line.buf, t.line.len);
	if (!err)
		err = put_buf(out, "}}\n", 3);
	if (!err && (fflush(out) == EOF || ferror(out)))
		err = render_write_error();
	if (!err && res)
		*res = r;
out:
	u64map_free(&t.host_index);
	free(v);
	free(calls);
	free(rss);
	free(tracks);
	free(frames);
	free(t.open);
	free(t.done);
	free(t.name_off);
	free(t.name_len);
	free(t.is_op);
	free(t.hist_count);
	free(t.hist_bytes);
	free(t.hist_roots);
	sb_free(&t.line);
	sb_free(&t.names);
	return err;
}
