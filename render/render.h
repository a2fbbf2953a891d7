/* SPDX-License-Identifier: MIT */
/*
 * Turning a profile into outputs: FlameGraph folded text, a self-contained
 * interactive SVG flame graph (or flame chart, icicle, differential graph),
 * a top table, pprof's profile.proto and Chrome Trace Event JSON.
 *
 * Library code: returns 0 or a negative errno (write errors included: the
 * caller checks), never prints to the user.
 *
 * Sample times: an on-CPU sample at time t stands for the period that ends
 * at t; an off-CPU or runqueue sample at time t stands for [t, t + weight),
 * t being the switch-out.
 */
#ifndef DLFLAME_RENDER_H
#define DLFLAME_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profile/profile.h"
#include "util/util.h"

/* Which samples to draw and how to weigh them. */
struct render_select {
	bool kinds[SAMPLE_KIND_MAX]; /* sample kinds included; all false = on-CPU only */
	bool weight_ns; /* weigh by ns (else count samples) */
};

/*
 * Folded stacks, FlameGraph's format: `comm;root;...;leaf count\n`, one line
 * per distinct (comm, stack), lines sorted bytewise. Kernel frames get the
 * suffix `_[k]`, JIT `_[j]`, inlined `_[i]`. Names are sanitised so that they
 * can never add a frame or a line: `;` becomes `:`, control bytes (and DEL)
 * become `?`, invalid UTF-8 becomes U+FFFD. Weighed by ns, counts are
 * microseconds.
 */
int render_folded(const struct profile *p, const struct render_select *sel, FILE *out);

struct svg_opts {
	const char *title; /* default "Flame Graph" (or Icicle, Flame Chart, ...) */
	const char *subtitle; /* may be NULL */
	const char *countname; /* default "samples", or "us" when weighed by ns */
	unsigned width; /* default 1200 */
	double minwidth; /* pixels; frames narrower are pruned; default 0.1 */
	bool minwidth_pct; /* minwidth is a percentage of the total instead */
	bool inverted; /* icicle: the root at the top */
	bool flamechart; /* x is time: samples in time order per comm, not merged */
	size_t max_frames; /* cap on drawn frames, narrowest pruned first; 0: 100000 */
};

/*
 * Self-contained SVG like flamegraph.pl's: one rect+text per frame, widths
 * proportional to weight, tooltip "name (N samples, P%)", click to zoom with
 * ancestors kept, reset zoom, regex search with "Matched: X%", zoom and
 * search kept in the URL fragment. Palettes by frame kind; frames whose
 * time is mostly off-CPU are blue. Every name is XML-escaped so the file is
 * well-formed for any byte sequence.
 */
int render_svg(const struct profile *p, const struct render_select *sel,
	       const struct svg_opts *opts, FILE *out);

enum top_by {
	TOP_BY_FUNCTION,
	TOP_BY_MODULE, /* JIT frames form one module, "[jit]" */
	TOP_BY_KIND,
	/* each thread's comm is its process's label (profile filter per_process): one row each */
	TOP_BY_PROCESS,
};

struct top_opts {
	enum top_by by;
	bool by_total; /* sort by total, else by self */
	size_t rows; /* 0: all */
};

/*
 * A table of self and total weight per function (or module, or frame kind):
 * a header line, then `SELF SELF% TOTAL TOTAL% NAME` rows, sorted. Total
 * counts a function once per stack however often it recurses. Names are
 * printed as in folded output.
 */
int render_top(const struct profile *p, const struct render_select *sel,
	       const struct top_opts *opts, FILE *out);

/*
 * gzip-compressed pprof profile.proto. Sample types: samples/count and
 * cpu/nanoseconds for on-CPU samples, offcpu/nanoseconds and
 * runqueue/nanoseconds when those kinds are selected. sel->weight_ns is
 * ignored: every type is there. One Function per frame, one Location per
 * physical frame with the frames inlined into it as further Lines; labels
 * comm, pid and tid.
 */
int render_pprof(const struct profile *p, const struct render_select *sel, FILE *out);
struct render_op_names;
/*
 * The same, each sample labelled op = the innermost PyTorch operator on its
 * stack, aten::NAME[.OVERLOAD] (ops: the overloads, may be NULL), when it
 * is in one. (render_pprof labels them too, without overloads.)
 */
int render_pprof_ops(const struct profile *p, const struct render_select *sel,
		     const struct render_op_names *ops, FILE *out);

/*
 * Chrome Trace Event JSON: a track per thread (pid, tid, named by comm),
 * consecutive samples of a thread that share a frame merged into one "X"
 * span per frame, nested as the stack; ts and dur in microseconds from the
 * profile's start. The category says what the span's samples were:
 * "oncpu", "offcpu", "runqueue" or a comma list of those.
 */
int render_trace(const struct profile *p, const struct render_select *sel, FILE *out);
struct render_op_names;
/*
 * The same, PyTorch's operator entries (at::_ops::STRUCT::call) named as
 * report --ops names them, aten::NAME[.OVERLOAD] (ops: the overloads, may
 * be NULL), their spans' categories starting "op,".
 */
int render_trace_ops(const struct profile *p, const struct render_select *sel,
		     const struct render_op_names *ops, FILE *out);
/*
 * The same, bounded for long recordings: each track (a thread's samples,
 * its calls) keeps its longest spans, at most max_spans of them, or, with
 * max_spans 0, what fits max_bytes for the whole file split evenly among
 * the tracks (what a track does not need goes to the others). Shorter
 * spans are left out: the span they were under says how many in
 * "args":{"hidden":N}, the track's name says under which duration spans
 * are hidden, otherData says the bound ("span_bound") and "hidden_spans"
 * (only when something was left out: else the output is render_trace's).
 * o NULL or both 0: render_trace. res (may be NULL) says what was cut.
 */
struct trace_opts {
	uint64_t max_spans;
	uint64_t max_bytes;
	const struct render_op_names *ops; /* operators' overloads for op spans, or NULL */
};
struct trace_result {
	uint64_t spans; /* written */
	uint64_t hidden; /* left out */
	uint64_t min_ns; /* the longest of the cut tracks' thresholds */
	size_t tracks_cut;
};
int render_trace_bounded(const struct profile *p, const struct render_select *sel,
			 const struct trace_opts *o, struct trace_result *res, FILE *out);
/*
 * speedscope's JSON file format: a shared frames table (name with the kind
 * suffix of folded output; file: the source file, else the module; line
 * with opts->lines) and one "sampled" profile per thread (host, pid, tid)
 * and view, named after the thread's comm as the profile holds it (a
 * filtered view's --per-thread label) and the view: " (on-CPU)", with
 * off-CPU and runqueue samples " (off-CPU)", or with opts->wall both in
 * " (wall)", blocked time under an "[off-CPU]" leaf; page faults
 * " (page faults)" in bytes. Samples in time order (an on-CPU sample at
 * its period's start), consecutive samples of one stack merged, weights
 * in ns. activeProfileIndex: the thread with the most on-CPU (or wall)
 * time. sel->weight_ns is ignored.
 */
struct speedscope_opts {
	bool wall;
	bool lines;
};
int render_speedscope(const struct profile *p, const struct render_select *sel,
		      const struct speedscope_opts *opts, FILE *out);

/*
 * The probed functions' calls (SAMPLE_CALL samples): COUNT, TOTAL, MIN,
 * MAX, AVG in ms and the share of the recording's wall time, by function
 * or (by_caller) by function and calling frame, largest total first.
 */
int render_calls(const struct profile *p, const struct render_select *sel, bool by_caller,
		 FILE *out);
/*
 * Framework operators (report --ops). PyTorch's dispatcher enters each
 * operator through `at::_ops::STRUCT::call` (and `::redispatch`), STRUCT
 * the operator's name and overload joined by '_'. render_op_parse: whether
 * a frame's name (demangled; its parameters, " (file:line)" or
 * " [clone ...]" may follow) is one, and its STRUCT.
 */
#define RENDER_OP_MAX 200 /* longest STRUCT taken */
struct render_op_ref {
	const char *s; /* STRUCT, into the name */
	size_t len;
	bool redispatch; /* ::redispatch, else ::call */
};
bool render_op_parse(const char *name, size_t len, struct render_op_ref *ref);

/*
 * Which STRUCTs are NAME.OVERLOAD: the schema names ("add.Tensor",
 * "relu") of the library that defines them, added one by one. Without an
 * entry a STRUCT is shown whole (aten::STRUCT): only the schema tells
 * add_Tensor (add.Tensor) from _cast_Byte (an operator of its own).
 */
struct render_op_names {
	struct u64map index; /* hash of the STRUCT -> offset of its schema name in text */
	char *text;
	size_t len, cap;
};
void render_op_names_init(struct render_op_names *n);
void render_op_names_free(struct render_op_names *n);
/* 0; -EINVAL for a name that is no NAME[.OVERLOAD] of at most RENDER_OP_MAX bytes; -ENOMEM. */
int render_op_names_add(struct render_op_names *n, const char *schema, size_t len);
/* "aten::NAME.OVERLOAD" (or "aten::STRUCT") into buf; its length (cut to size - 1). */
size_t render_op_name(const struct render_op_names *n, const char *s, size_t len, char *buf,
		      size_t size);

struct ops_opts {
	const struct render_op_names *names; /* may be NULL: STRUCTs shown whole */
	bool by_caller; /* a row per operator and Python caller of the outermost operator */
	bool by_root; /* a row per operator and comm: "rank N" or "comm-PID/TID" (--per-rank, --per-thread) */
	bool by_total; /* sort by total, else by self */
	size_t rows; /* 0: all */
};

/*
 * The operator table: per operator SELF (samples whose innermost operator
 * it is), TOTAL (samples with it on the stack, once however deep), in ms
 * of the kinds sel chooses (on-CPU, off-CPU, both), their shares of all
 * those samples and SELF's of the samples in some operator (OPS%, as
 * torch.profiler's Self CPU %); with calls of probed operator entries
 * (record --probe-ops), COUNT, AVG, MIN, MAX. A header says how much time
 * was in no operator.
 */
int render_ops(const struct profile *p, const struct render_select *sel, const struct ops_opts *o,
	       FILE *out);

/* Per process: resident set min, average, max (MiB) and the memory its page faults touched. */
int render_memory(const struct profile *p, FILE *out);
/*
 * Per rank of a distributed job (the processes' ranks): on-CPU, blocked and
 * blocked-in-communication seconds, where it waited most, and which rank is
 * the straggler. -ENOENT when no sample is of a process with a rank.
 */
int render_ranks(const struct profile *p, FILE *out);
/*
 * The functions record --probe-collectives probes, as the symbolizer names
 * them: where a training thread hands a gloo collective over, and where
 * gloo's worker runs it (until every rank has joined); the same with an
 * MPI process group: its hand-over, and the MPI collectives its worker
 * calls (each MPI_ function also named PMPI_, the same address).
 */
#define RENDER_COLL_ENQUEUE "c10d::ProcessGroupGloo::enqueue"
#define RENDER_COLL_RUN "c10d::ProcessGroupGloo::AsyncWork::execute"
#define RENDER_COLL_MPI_ENQUEUE "c10d::ProcessGroupMPI::enqueue"
#define RENDER_COLL_MPI_RUNS \
	"MPI_Allreduce", "MPI_Bcast", "MPI_Barrier", "MPI_Allgather", "MPI_Reduce"
/* Whether a frame is of a communication library (c10d, gloo, NCCL, MPI, torch.distributed). */
bool render__comm_frame(const struct profile *p, const struct pf_frame *fr);

/*
 * Differential outputs of two profiles. Folded: FlameGraph's difffolded
 * format, `stack count_base count_new`. SVG: the shape of new, red where a
 * frame grew, blue where it shrank. With normalize, base weights are scaled
 * to new's total first.
 */
int render_diff_folded(const struct profile *base, const struct profile *cur,
		       const struct render_select *sel, bool normalize, FILE *out);
int render_diff_svg(const struct profile *base, const struct profile *cur,
		    const struct render_select *sel, bool normalize, const struct svg_opts *opts,
		    FILE *out);

/*
 * How the stacks of the samples chosen by sel ended: their weight (as sel
 * weighs) per enum stack_end. 0, -ENOMEM, or -EINVAL for a broken profile.
 */
int render_stack_ends(const struct profile *p, const struct render_select *sel,
		      uint64_t weight[STACK_END_MAX]);
/*
 * Those weights in one line, "99.2% of stacks complete; cut: stack copy
 * exhausted 0.6%, unwind error 0.2%" (the three biggest causes), or a note
 * that an older profile did not record them; empty for no weight. Returns
 * the length written (truncated to size - 1).
 */
size_t render_ends_line(const uint64_t weight[STACK_END_MAX], char *buf, size_t size);

/* A module whose code has no symbols for a share of the samples. */
struct render_symbol_hint {
	const char *module; /* its basename, as the profile holds it */
	const char *build_id; /* lower-case hex, or "" */
	uint64_t weight; /* of the chosen samples with a nameless frame in it */
	double share; /* of all chosen samples' weight, 0..1 */
	uint64_t total; /* all chosen samples' weight */
};

/*
 * The modules (at most max, biggest share first) whose nameless frames
 * ("module+0x...": no symbol covers them) are in at least min_share of the
 * chosen samples' weight; none when fewer than 50 samples are chosen.
 * 0, -ENOMEM or -EINVAL.
 */
int render_symbol_hints(const struct profile *p, const struct render_select *sel, double min_share,
			struct render_symbol_hint *out, size_t max, size_t *n);

/* Exposed for tests: sanitize a frame name for folded output into buf. */
size_t render_folded_name(const char *name, size_t len, char *buf, size_t size);
/* Exposed for tests: write `s` XML-escaped (text or attribute) to out. */
int render_xml_escape(const char *s, size_t len, FILE *out);
/* Exposed for tests: write `s` as a JSON string, quotes included. */
int render_json_string(const char *s, size_t len, FILE *out);

#endif
