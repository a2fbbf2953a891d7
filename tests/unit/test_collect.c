/* SPDX-License-Identifier: MIT */
/*
 * collect/: synthetic record sequences through the collector, as the
 * sampler or the perf.data reader would deliver them. The off-CPU rules
 * (switch out and in, preemption, exit while blocked, blocked before an
 * attach, still blocked at the end, fork and exec) and the stack sources
 * (frame pointers on canned callchains, DWARF on this thread's own stack).
 * Kernel addresses are named from a small kallsyms file of the test's own.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <asm/perf_regs.h>
#include <linux/perf_event.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collect/collect.h"
#include "collect/internal.h"
#include "tests/unit/capture.h"

#define K_SCHEDULE 0xffffffff81000100ull
#define K_NANOSLEEP 0xffffffff81000200ull
#define K_FUTEX 0xffffffff81000300ull
#define PID 4000u

static struct profile *prof;
static struct symbolizer *sym;
static struct collector *col;
static char kallsyms[] = "/tmp/dlflame-kallsyms-XXXXXX";

static void setup(void)
{
	int fd = mkstemp(kallsyms);
	FILE *f;

	cr_assert_geq(fd, 0);
	f = fdopen(fd, "w");
	fprintf(f, "ffffffff81000000 T _stext\n"
		   "ffffffff81000100 T schedule\n"
		   "ffffffff81000200 T do_nanosleep\n"
		   "ffffffff81000300 T futex_wait\n"
		   "ffffffff81000400 T _etext\n");
	fclose(f);
	prof = profile__new();
	sym = symbolizer__new();
	cr_assert(prof && sym);
	cr_assert_eq(symbolizer__load_kallsyms(sym, kallsyms), 0);
	col = collector__new(prof, sym);
	cr_assert_not_null(col);
}

static void teardown(void)
{
	collector__free(col);
	symbolizer__free(sym);
	profile__free(prof);
	unlink(kallsyms);
}

TestSuite(offcpu, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(sources, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(collect, .init = setup, .fini = teardown, .timeout = 30);

static void feed(const struct rec *r)
{
	cr_assert_eq(collector__record(col, r), 0);
}

static void comm(uint32_t tid, const char *name, bool exec)
{
	struct rec r = { .type = REC_COMM,
			 .comm = { .pid = PID, .tid = tid, .comm = name, .exec = exec } };

	feed(&r);
}

/* A context-switch sample: where tid leaves the CPU, two kernel frames deep. */
static void switch_sample(uint32_t tid, uint64_t t, uint64_t leaf)
{
	/* schedule's is a return address: inside it, after a call */
	const uint64_t ips[] = { PERF_CONTEXT_KERNEL, leaf, K_SCHEDULE + 0x20 };
	struct rec r = { .type = REC_SAMPLE, .time = t };

	r.sample = (struct rec_sample){ .pid = PID,
					.tid = tid,
					.time = t,
					.period = 1,
					.nr = 3,
					.ips = ips,
					.event = EV_SWITCH };
	feed(&r);
}

static void sw(uint32_t tid, uint64_t t, bool out, bool preempt)
{
	struct rec r = { .type = REC_SWITCH, .time = t };

	r.sw = (struct rec_switch){
		.pid = PID, .tid = tid, .time = t, .out = out, .preempt = preempt
	};
	feed(&r);
}

static void task(enum rec_type type, uint32_t tid, uint32_t ptid, uint64_t t)
{
	struct rec r = { .type = type, .time = t };

	r.fork = (struct rec_fork){ .pid = PID, .ppid = PID, .tid = tid, .ptid = ptid, .time = t };
	feed(&r);
}

/* The frames of a stack, root first, joined by ';'. */
static void stack_str(uint32_t stack, char *buf, size_t size)
{
	uint32_t chain[1100];
	size_t n = 0, len = 0;

	for (; stack && n < 1100; stack = profile__get_stack(prof, stack)->parent)
		chain[n++] = stack;
	buf[0] = '\0';
	while (n-- > 0 && len < size) {
		const struct pf_frame *f =
			profile__get_frame(prof, profile__get_stack(prof, chain[n])->frame);

		len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ";" : "",
					profile__str(prof, f->name));
	}
}

/* The only sample of kind `kind`: its weight, stack and thread's comm. */
static const struct pf_sample *only(enum sample_kind kind, char *stack, size_t size)
{
	const struct pf_sample *found = NULL;

	for (size_t i = 0; i < profile__nr_samples(prof); i++) {
		const struct pf_sample *s = profile__get_sample(prof, i);

		if (s->kind != kind)
			continue;
		cr_assert_null(found, "more than one sample of kind %d", kind);
		found = s;
	}
	cr_assert_not_null(found, "no sample of kind %d", kind);
	stack_str(found->stack, stack, size);
	return found;
}

static size_t count(enum sample_kind kind)
{
	size_t n = 0;

	for (size_t i = 0; i < profile__nr_samples(prof); i++)
		n += profile__get_sample(prof, i)->kind == kind;
	return n;
}

Test(offcpu, switch_out_then_in_charges_the_stack_it_left_with)
{
	const struct collect_stats *st = collector__stats(col);
	const struct pf_sample *s;
	char stack[512];

	comm(11, "worker", false);
	switch_sample(11, 1000, K_NANOSLEEP);
	sw(11, 1000, true, false);
	sw(11, 5000, false, false);
	cr_assert_eq(collector__finish(col, 9000), 0);
	s = only(SAMPLE_OFFCPU, stack, sizeof(stack));
	cr_assert_eq(s->weight, 4000);
	cr_assert_eq(s->time, 1000);
	cr_assert_str_eq(stack, "schedule;do_nanosleep");
	cr_assert_str_eq(profile__str(prof, profile__get_thread(prof, s->thread)->comm), "worker");
	/* a kernel-only chain is whole */
	cr_assert_eq(profile__stack_end(prof, s->stack), STACK_END_COMPLETE);
	cr_assert_eq(st->offcpu_samples, 1);
	cr_assert_eq(st->offcpu_ns, 4000);
	cr_assert_eq(st->offcpu_end_ns[STACK_END_COMPLETE], 4000);
	cr_assert_eq(st->runq_ns, 0);
}

Test(offcpu, preemption_is_runqueue_time_not_blocking)
{
	const struct pf_sample *s;
	char stack[512];

	switch_sample(11, 1000, K_FUTEX);
	sw(11, 1000, true, true);
	sw(11, 1700, false, false);
	cr_assert_eq(collector__finish(col, 9000), 0);
	s = only(SAMPLE_RUNQUEUE, stack, sizeof(stack));
	cr_assert_eq(s->weight, 700);
	cr_assert_eq(count(SAMPLE_OFFCPU), 0);
	cr_assert_eq(collector__stats(col)->runq_ns, 700);
	cr_assert_eq(collector__stats(col)->offcpu_ns, 0);
}

Test(offcpu, a_thread_that_exits_while_blocked_is_not_charged_past_it)
{
	switch_sample(11, 1000, K_NANOSLEEP);
	sw(11, 1000, true, false);
	task(REC_EXIT, 11, 11, 3000);
	/* late records of the dead tid (from another CPU's ring) change nothing */
	sw(11, 3500, true, false);
	sw(11, 4000, false, false);
	cr_assert_eq(collector__finish(col, 9000), 0);
	cr_assert_eq(count(SAMPLE_OFFCPU), 0);
}

Test(offcpu, still_blocked_at_the_end_is_charged_up_to_it)
{
	const struct pf_sample *s;
	char stack[512];

	switch_sample(11, 1000, K_FUTEX);
	sw(11, 1000, true, false);
	cr_assert_eq(collector__finish(col, 9000), 0);
	s = only(SAMPLE_OFFCPU, stack, sizeof(stack));
	cr_assert_eq(s->weight, 8000);
	cr_assert_str_eq(stack, "schedule;futex_wait");
}

Test(offcpu, a_switch_out_without_its_sample_has_no_stack)
{
	const struct pf_sample *s;
	char stack[512];

	sw(11, 1000, true, false);
	sw(11, 3000, false, false);
	cr_assert_eq(collector__finish(col, 9000), 0);
	s = only(SAMPLE_OFFCPU, stack, sizeof(stack));
	cr_assert_str_eq(stack, NO_STACK_FRAME);
	cr_assert_eq(profile__stack_end(prof, s->stack), STACK_END_NOT_SAMPLED);
}

Test(offcpu, blocked_before_the_attach_is_charged_from_its_start)
{
	const struct pf_sample *s;
	char stack[512];

	collector__set_start(col, 500);
	/* its first record is a switch-in: it was asleep when the events were opened */
	sw(12, 2000, false, false);
	/* one that ran first, then switched in again, was not */
	switch_sample(13, 600, K_NANOSLEEP);
	sw(13, 600, true, false);
	sw(13, 900, false, false);
	cr_assert_eq(collector__finish(col, 9000), 0);
	cr_assert_eq(count(SAMPLE_OFFCPU), 2);
	for (size_t i = 0; i < profile__nr_samples(prof); i++) {
		s = profile__get_sample(prof, i);
		stack_str(s->stack, stack, sizeof(stack));
		if (profile__get_thread(prof, s->thread)->tid == 12) {
			cr_assert_eq(s->time, 500);
			cr_assert_eq(s->weight, 1500);
			cr_assert_str_eq(stack, BLOCKED_BEFORE_FRAME);
		} else {
			cr_assert_eq(s->weight, 300);
		}
	}
}

Test(offcpu, attached_sleeper_without_records_is_charged_throughout)
{
	const struct pf_sample *s;
	char stack[512];

	collector__set_start(col, 500);
	cr_assert_eq(collector__set_comm(col, 30, "sleeper"), 0);
	cr_assert_eq(collector__attached_thread(col, PID, 30, true, 0, "do_nanosleep"), 0);
	/* awake at the attach and silent since: not blocked */
	cr_assert_eq(collector__attached_thread(col, PID, 31, false, 0, "0"), 0);
	cr_assert_eq(collector__finish(col, 9500), 0);
	s = only(SAMPLE_OFFCPU, stack, sizeof(stack));
	cr_assert_eq(s->weight, 9000);
	cr_assert_str_eq(stack, BLOCKED_BEFORE_FRAME ";do_nanosleep");
	cr_assert_str_eq(profile__str(prof, profile__get_thread(prof, s->thread)->comm), "sleeper");
	cr_assert_eq(profile__stack_end(prof, s->stack), STACK_END_NOT_SAMPLED);
}

Test(offcpu, threads_created_while_recording_were_not_blocked_before)
{
	collector__set_start(col, 500);
	comm(11, "loader", false);
	task(REC_FORK, 41, 11, 1000);
	/* the new thread's first record is a switch-in: it just started, nothing to charge */
	sw(41, 2000, false, false);
	switch_sample(41, 3000, K_FUTEX);
	sw(41, 3000, true, false);
	sw(41, 3500, false, false);
	cr_assert_eq(collector__finish(col, 9000), 0);
	cr_assert_eq(count(SAMPLE_OFFCPU), 1);
	for (size_t i = 0; i < profile__nr_samples(prof); i++) {
		const struct pf_sample *s = profile__get_sample(prof, i);

		cr_assert_eq(s->weight, 500);
		/* it inherited its creator's name */
		cr_assert_str_eq(profile__str(prof, profile__get_thread(prof, s->thread)->comm),
				 "loader");
	}
}

Test(offcpu, unmatched_switch_ins_at_launch_are_counted)
{
	switch_sample(11, 1000, K_FUTEX);
	sw(11, 1000, true, false);
	sw(11, 2000, false, false);
	sw(11, 3000, false, false); /* its switch-out was lost */
	cr_assert_eq(collector__finish(col, 9000), 0);
	cr_assert_eq(collector__stats(col)->switch_unmatched, 1);
	cr_assert_eq(count(SAMPLE_OFFCPU), 1);
}

Test(collect, exec_renames_and_times_are_kept)
{
	const uint64_t ips[] = { PERF_CONTEXT_KERNEL, K_SCHEDULE };
	struct rec r = { .type = REC_SAMPLE, .time = 7000 };
	const struct collect_stats *st = collector__stats(col);
	const struct pf_sample *s;
	char stack[512];

	comm(11, "sh", false);
	comm(11, "python3", true);
	r.sample = (struct rec_sample){ .pid = PID,
					.tid = 11,
					.time = 7000,
					.period = 1001,
					.nr = 2,
					.ips = ips,
					.event = EV_ONCPU };
	feed(&r);
	r = (struct rec){ .type = REC_LOST, .lost = { .lost = 3 } };
	feed(&r);
	cr_assert_eq(collector__finish(col, 9000), 0);
	s = only(SAMPLE_ONCPU, stack, sizeof(stack));
	cr_assert_eq(s->weight, 1001);
	cr_assert_str_eq(stack, "schedule");
	cr_assert_str_eq(profile__str(prof, profile__get_thread(prof, s->thread)->comm), "python3");
	cr_assert_eq(st->samples, 1);
	cr_assert_eq(st->lost, 3);
	cr_assert_eq(st->first_time, 7000);
	cr_assert_eq(st->last_time, 9000);
	cr_assert_eq(st->oncpu_ends[STACK_END_COMPLETE], 1);
}

Test(collect, a_record_that_cannot_be_used_is_counted_not_fatal)
{
	struct rec r = { .type = REC_MMAP2 };

	/* a mapping past the end of the address space, as a corrupt perf.data may hold */
	r.mmap2 = (struct rec_mmap2){ .pid = PID,
				      .tid = PID,
				      .addr = UINT64_MAX - 10,
				      .len = 4096,
				      .prot = 5,
				      .filename = "/nonexistent/lib.so" };
	feed(&r);
	cr_assert_eq(collector__stats(col)->dropped[COLLECT_DROP_MAP], 1);
	cr_assert_lt(collector__stats(col)->drop_err[COLLECT_DROP_MAP], 0);
	cr_assert_eq(collector__finish(col, 9000), 0);
}

/* ---- stack sources ---- */

extern char _start[];

__attribute__((noipa)) static uint64_t fp_leaf(void)
{
	return (uint64_t)(uintptr_t)__builtin_return_address(0);
}

__attribute__((noipa)) static uint64_t fp_mid(void)
{
	uint64_t r = fp_leaf();

	__asm__ volatile("" ::: "memory");
	return r;
}

/* One on-CPU sample of this process with a callchain of user addresses. */
static uint32_t fp_sample(const uint64_t *user, size_t n, enum stack_end *end)
{
	uint64_t ips[256] = { PERF_CONTEXT_USER };
	struct rec r = { .type = REC_SAMPLE, .time = 100 };

	cr_assert_lt(n, 255);
	memcpy(ips + 1, user, n * sizeof(*user));
	r.sample = (struct rec_sample){ .pid = (uint32_t)getpid(),
					.tid = (uint32_t)getpid(),
					.time = 100,
					.period = 1,
					.nr = n + 1,
					.ips = ips,
					.user = true,
					.event = EV_ONCPU };
	feed(&r);
	cr_assert_eq(collector__finish(col, 200), 0);
	cr_assert_eq(profile__nr_samples(prof), 1);
	*end = profile__stack_end(prof, profile__get_sample(prof, 0)->stack);
	return profile__get_sample(prof, 0)->stack;
}

Test(sources, frame_pointer_chain_whole_only_at_a_thread_start)
{
	uint64_t ra = fp_mid(); /* a return address in fp_mid, after its call */
	const uint64_t user[] = { (uint64_t)(uintptr_t)&fp_leaf, ra,
				  (uint64_t)(uintptr_t)_start + 8 };
	enum stack_end end;
	char stack[512];

	cr_assert_eq(symbolizer__load_proc_maps(sym, (uint32_t)getpid()), 0);
	stack_str(fp_sample(user, 3, &end), stack, sizeof(stack));
	cr_assert_str_eq(stack, "_start;fp_mid;fp_leaf");
	cr_assert_eq(end, STACK_END_COMPLETE, "ended %d", end);
}

Test(sources, frame_pointer_chain_that_stops_short_is_cut)
{
	uint64_t ra = fp_mid();
	const uint64_t user[] = { (uint64_t)(uintptr_t)&fp_leaf, ra };
	enum stack_end end;
	char stack[512];

	cr_assert_eq(symbolizer__load_proc_maps(sym, (uint32_t)getpid()), 0);
	stack_str(fp_sample(user, 2, &end), stack, sizeof(stack));
	/* perf's look: no placeholder; the end says it */
	cr_assert_str_eq(stack, "fp_mid;fp_leaf");
	cr_assert_eq(end, STACK_END_FP, "ended %d", end);
}

Test(sources, frame_pointer_chain_at_the_kernel_limit_is_cut)
{
	uint64_t user[200];
	enum stack_end end;
	char stack[512];

	cr_assert_eq(symbolizer__load_proc_maps(sym, (uint32_t)getpid()), 0);
	for (size_t i = 0; i < 200; i++)
		user[i] = (uint64_t)(uintptr_t)&fp_leaf;
	stack_str(fp_sample(user, 200, &end), stack, sizeof(stack));
	cr_assert_eq(end, STACK_END_DEPTH);
	cr_assert_eq(strncmp(stack, "[truncated];", 12), 0, "%s", stack);
}

/* ---- DWARF: this thread's own stack ---- */

__attribute__((noipa)) static size_t cl_b(struct sample *smp)
{
	capture_regs(smp);
	__asm__ volatile("" ::: "memory");
	return smp->size + 1;
}

__attribute__((noipa)) static size_t cl_a(struct sample *smp)
{
	size_t r = cl_b(smp);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

/* A sample of smp's registers and its copy's first size bytes, as the sampler hands it out. */
static void feed_copy(const struct sample *smp, uint32_t tid, size_t size, bool dropped, bool cut)
{
	struct rec r = { .type = REC_SAMPLE, .time = 100 };

	r.sample = (struct rec_sample){
		.pid = (uint32_t)getpid(),
		.tid = tid,
		.time = 100,
		.period = 1,
		.ip = smp->regs[PERF_REG_X86_IP],
		.user = true,
		.event = EV_ONCPU,
		.uregs = { .abi = PERF_SAMPLE_REGS_ABI_64, .mask = regs_mask },
		.stack = smp->stack,
		.stack_size = size < smp->size ? size : smp->size,
		.stack_dropped = dropped,
		.stack_cut = cut,
	};
	memcpy(r.sample.uregs.regs, smp->regs, sizeof(smp->regs));
	feed(&r);
}

static uint32_t dwarf_sample_dropped(size_t copy, bool dropped, enum stack_end *end)
{
	struct sample *smp = sample_new();
	uint32_t stack;

	find_stack_top();
	cl_a(smp);
	cr_assert_eq(symbolizer__load_proc_maps(sym, (uint32_t)getpid()), 0);
	feed_copy(smp, (uint32_t)getpid(), copy, dropped, false);
	sample_free(smp);
	cr_assert_eq(collector__finish(col, 200), 0);
	cr_assert_eq(profile__nr_samples(prof), 1);
	stack = profile__get_sample(prof, 0)->stack;
	*end = profile__stack_end(prof, stack);
	return stack;
}

static uint32_t dwarf_sample(size_t copy, enum stack_end *end)
{
	return dwarf_sample_dropped(copy, false, end);
}

Test(sources, dwarf_unwinds_the_copied_stack_to_the_root)
{
	enum stack_end end;
	char stack[2048];

	stack_str(dwarf_sample(SIZE_MAX, &end), stack, sizeof(stack));
	cr_log_info("%s", stack);
	cr_assert_eq(end, STACK_END_COMPLETE, "ended %d: %s", end, stack);
	cr_assert_not_null(strstr(stack, ";cl_a;cl_b"), "%s", stack);
	cr_assert_eq(strncmp(stack, "_start;", 7), 0, "%s", stack);
	cr_assert_eq(collector__stats(col)->oncpu_ends[STACK_END_COMPLETE], 1);
}

Test(sources, dwarf_with_a_short_copy_is_cut_for_want_of_copy)
{
	enum stack_end end;
	char stack[2048];

	stack_str(dwarf_sample(64, &end), stack, sizeof(stack));
	cr_assert_eq(end, STACK_END_COPY, "ended %d: %s", end, stack);
	cr_assert_eq(strncmp(stack, "[truncated];", 12), 0, "%s", stack);
	cr_assert_eq(collector__stats(col)->truncated, 1);
}

Test(sources, dwarf_without_a_copy_keeps_the_ip_and_says_so)
{
	enum stack_end end;
	char stack[2048];

	stack_str(dwarf_sample(0, &end), stack, sizeof(stack));
	cr_assert_eq(end, STACK_END_NO_USER, "ended %d: %s", end, stack);
	cr_assert_str_eq(stack, "[truncated];cl_b");
}

/* The sampler kept the sample and not its copy (the recording far behind): cut, and why. */
Test(sources, dwarf_with_its_copy_dropped_keeps_the_ip_and_says_why)
{
	enum stack_end end;
	char stack[2048];

	stack_str(dwarf_sample_dropped(0, true, &end), stack, sizeof(stack));
	cr_assert_eq(end, STACK_END_DROPPED, "ended %d: %s", end, stack);
	cr_assert_str_eq(stack, "[truncated];cl_b");
	cr_assert_str_eq(profile__stack_end_name(end), "stack not kept (recorder behind)");
}

/*
 * Where a thread's stack ends, as its walks tell the sampler: the reach of
 * a whole walk, once (not again for the same); 0 when a walk of a cut copy
 * runs out, once; then only a whole walk of an uncut copy says it again.
 */
struct tops_heard {
	uint32_t tid[16];
	uint64_t top[16];
	unsigned n;
};

static void hear_top(void *ctx, uint32_t tid, uint64_t top)
{
	struct tops_heard *h = ctx;

	cr_assert_lt(h->n, 16);
	h->tid[h->n] = tid;
	h->top[h->n++] = top;
}

Test(sources, dwarf_walks_tell_where_the_threads_stack_ends)
{
	struct sample *smp = sample_new();
	struct tops_heard h = { .n = 0 };
	uint32_t tid = (uint32_t)getpid();
	uint64_t sp, top;

	find_stack_top();
	cl_a(smp);
	sp = smp->regs[PERF_REG_X86_SP];
	cr_assert_eq(symbolizer__load_proc_maps(sym, (uint32_t)getpid()), 0);
	collector__on_stack_top(col, hear_top, &h);
	feed_copy(smp, tid, smp->size, false, false);
	cr_assert_eq(h.n, 1, "a whole walk tells where the stack ends");
	cr_assert_eq(h.tid[0], tid);
	top = h.top[0];
	cr_assert(top > sp && top <= sp + smp->size, "top %#" PRIx64 ", sp %#" PRIx64, top, sp);
	feed_copy(smp, tid, smp->size, false, false);
	cr_assert_eq(h.n, 1, "told again");
	/* another thread's walks are its own */
	feed_copy(smp, tid + 1, smp->size, false, false);
	cr_assert_eq(h.n, 2);
	cr_assert_eq(h.tid[1], tid + 1);
	/* a copy cut where the stack was thought to end, whose walk runs out */
	feed_copy(smp, tid, 64, false, true);
	cr_assert_eq(h.n, 3);
	cr_assert_eq(h.tid[2], tid);
	cr_assert_eq(h.top[2], 0, "a walk of a cut copy ran out: whole copies again");
	feed_copy(smp, tid, 64, false, true);
	cr_assert_eq(h.n, 3, "told again");
	/* a cut copy copied before the word: its whole walk does not undo it */
	feed_copy(smp, tid, top - sp, false, true);
	cr_assert_eq(h.n, 3);
	/* a short uncut copy runs out as copies do: nothing to tell */
	feed_copy(smp, tid, 64, false, false);
	cr_assert_eq(h.n, 3);
	feed_copy(smp, tid, smp->size, false, false);
	cr_assert_eq(h.n, 4, "a whole walk of an uncut copy tells it again");
	cr_assert_eq(h.top[3], top);
	sample_free(smp);
}

/* ---- ranks from launchers' environments ---- */

static bool env_rank(const char *env, size_t len, struct rank_env *re)
{
	memset(re, 0xaa, sizeof(*re));
	return collect__rank_from_env(env, len, re);
}

#define ENV(s) s, sizeof(s) - 1

Test(rank_env, every_launcher)
{
	static const struct {
		const char *env;
		size_t len;
		uint32_t rank, local, world;
		const char *launcher;
	} cases[] = {
		{ ENV("PATH=/bin\0RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8\0"), 3, 1, 8, "torchrun" },
		{ ENV("OMPI_COMM_WORLD_SIZE=6\0OMPI_COMM_WORLD_RANK=5\0OMPI_COMM_WORLD_LOCAL_RANK=1\0"),
		  5, 1, 6, "Open MPI" },
		{ ENV("PMI_RANK=2\0PMI_SIZE=4\0MPI_LOCALRANKID=0\0"), 2, 0, 4, "MPICH/Intel MPI" },
		{ ENV("SLURM_PROCID=7\0SLURM_LOCALID=3\0SLURM_NTASKS=16\0"), 7, 3, 16, "Slurm" },
		/* torchrun under srun: the process group's own variables say */
		{ ENV("SLURM_PROCID=0\0SLURM_NTASKS=2\0RANK=5\0WORLD_SIZE=8\0"), 5, PF_NO_RANK, 8,
		  "torchrun" },
		/* the last variable without its NUL, and no size or local rank */
		{ ENV("HOME=/root\0RANK=4"), 4, PF_NO_RANK, PF_NO_RANK, "torchrun" },
		/* a RANK that is not one falls to the next launcher's */
		{ ENV("RANK=abc\0PMI_RANK=1\0PMI_SIZE=2\0"), 1, PF_NO_RANK, 2, "MPICH/Intel MPI" },
		{ ENV("RANK=5\0WORLD_SIZE=4\0SLURM_PROCID=1\0"), 1, PF_NO_RANK, PF_NO_RANK,
		  "Slurm" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rank_env re;

		cr_assert(env_rank(cases[i].env, cases[i].len, &re), "case %zu", i);
		cr_expect_eq(re.rank, cases[i].rank, "case %zu: rank %u", i, re.rank);
		cr_expect_eq(re.local_rank, cases[i].local, "case %zu: local %u", i, re.local_rank);
		cr_expect_eq(re.world_size, cases[i].world, "case %zu: world %u", i, re.world_size);
		cr_expect_str_eq(re.launcher, cases[i].launcher, "case %zu", i);
	}
}

Test(rank_env, not_a_rank)
{
	static const struct {
		const char *env;
		size_t len;
	} cases[] = {
		{ ENV("") },
		{ ENV("PATH=/bin\0HOME=/root\0") },
		{ ENV("XRANK=1\0MY_RANK=2\0RANKS=3\0RANK\0") },
		{ ENV("RANK=\0") },
		{ ENV("RANK=-1\0") },
		{ ENV("RANK=1x\0") },
		{ ENV("RANK=99999999999\0") },
		{ ENV("RANK=4294967295\0") },
		{ ENV("RANK=2\0WORLD_SIZE=2\0") },
		{ ENV("OMPI_COMM_WORLD_LOCAL_RANK=1\0SLURM_LOCALID=0\0") },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rank_env re;

		cr_expect_not(env_rank(cases[i].env, cases[i].len, &re), "case %zu: rank %u", i,
			      re.rank);
	}
}

/* A live process's own environment, read at exec by the collector: this test's child. */
Test(rank_env, read_at_exec)
{
	struct profile *p = profile__new();
	struct symbolizer *s = symbolizer__new();
	struct collector *c = collector__new(p, s);
	int pipefd[2];
	pid_t pid;
	char ch;

	cr_assert(p && s && c);
	cr_assert_eq(pipe(pipefd), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char *const argv[] = { "/bin/sh", "-c", "read x", NULL };
		char *const envp[] = { "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", NULL };

		dup2(pipefd[0], 0);
		close(pipefd[1]);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	close(pipefd[0]);
	/* wait until the child has exec'd: its comm changes */
	for (int i = 0; i < 500; i++) {
		char path[64], comm[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f) && !strncmp(comm, "sh", 2)) {
			fclose(f);
			break;
		}
		if (f)
			fclose(f);
		usleep(10000);
	}
	collector__enable_ranks(c);
	cr_assert_eq(collector__record(c, &(struct rec){ .type = REC_COMM,
							 .comm = { .pid = (uint32_t)pid,
								   .tid = (uint32_t)pid,
								   .exec = true,
								   .comm = "sh" } }),
		     0);
	/* a worker it forks keeps its rank */
	cr_assert_eq(collector__record(c, &(struct rec){ .type = REC_FORK,
							 .fork = { .pid = (uint32_t)pid + 100000,
								   .tid = (uint32_t)pid + 100000,
								   .ppid = (uint32_t)pid,
								   .ptid = (uint32_t)pid } }),
		     0);
	ch = '\n';
	cr_assert_eq(write(pipefd[1], &ch, 1), 1);
	close(pipefd[1]);
	waitpid(pid, NULL, 0);
	const struct pf_process *pr = profile__process(p, 0, (uint32_t)pid);
	cr_assert_not_null(pr);
	cr_expect_eq(pr->rank, 3);
	cr_expect_eq(pr->world_size, 4);
	cr_expect_str_eq(profile__str(p, pr->launcher), "Open MPI");
	pr = profile__process(p, 0, (uint32_t)pid + 100000);
	cr_assert_not_null(pr);
	cr_expect_eq(pr->rank, 3);
	collector__free(c);
	symbolizer__free(s);
	profile__free(p);
}

/* A launched command's rank from the environment dlflame gives it: no /proc read needed. */
Test(rank_env, launched_from_envp)
{
	struct profile *p = profile__new();
	struct symbolizer *s = symbolizer__new();
	struct collector *c = collector__new(p, s);
	char *const envp[] = { "PATH=/bin", "LOCAL_RANK=1", "RANK=3", "WORLD_SIZE=4", NULL };
	char *const none[] = { "PATH=/bin", NULL };
	const struct pf_process *pr;

	cr_assert(p && s && c);
	cr_assert_eq(collector__rank_from_envp(c, 4242, envp), 0);
	cr_assert_eq(collector__rank_from_envp(c, 4243, none), 0);
	pr = profile__process(p, 0, 4242);
	cr_assert_not_null(pr);
	cr_expect_eq(pr->rank, 3);
	cr_expect_eq(pr->local_rank, 1);
	cr_expect_eq(pr->world_size, 4);
	cr_assert_null(profile__process(p, 0, 4243));
	collector__free(c);
	symbolizer__free(s);
	profile__free(p);
}

/* The container a cgroup path names, as Docker, containerd, CRI-O, Podman and Kubernetes write them. */
Test(containers, cgroup_paths)
{
	const char *id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char out[80], path[512];
	/* before and after the id */
	static const char *const forms[][2] = {
		{ "/system.slice/docker-", ".scope" },
		{ "/docker/", "" },
		{ "/kubepods.slice/kubepods-burstable.slice/"
		  "kubepods-burstable-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice/"
		  "cri-containerd-",
		  ".scope" },
		{ "/kubepods/besteffort/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901/", "" },
		{ "/machine.slice/libpod-", ".scope/container" },
		{ "/system.slice/crio-", ".scope" },
	};

	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		snprintf(path, sizeof(path), "%s%s%s", forms[i][0], id, forms[i][1]);
		cr_assert(collect__container_of_cgroup(path, out, sizeof(out)), "%s", path);
		cr_assert_str_eq(out, id, "%s", path);
	}
	/* a pod without a container of its own in the path: the pod, dashes restored */
	cr_assert(collect__container_of_cgroup("/kubepods.slice/kubepods-besteffort.slice/"
					       "kubepods-besteffort-pod1b2c3d4e_5f60_7182_93a4_"
					       "b5c6d7e8f901.slice",
					       out, sizeof(out)));
	cr_assert_str_eq(out, "pod:1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
	/* no container: a user's session, the root, a short or non-hex id */
	cr_assert_not(collect__container_of_cgroup("/user.slice/user-0.slice/session-1.scope", out,
						   sizeof(out)));
	cr_assert_not(collect__container_of_cgroup("/", out, sizeof(out)));
	cr_assert_not(collect__container_of_cgroup("/docker-0123.scope", out, sizeof(out)));
	snprintf(path, sizeof(path), "/docker-%.63sg.scope", id);
	cr_assert_not(collect__container_of_cgroup(path, out, sizeof(out)));
	cr_assert_eq(out[0], '\0');
}

/* Two profiles with the same frames, interned in the same order (their ids are equal). */
static void same_frames(struct profile *a, struct profile *b, uint32_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char name[32];
		int64_t x, y;

		snprintf(name, sizeof(name), "f%zu", i);
		x = profile__frame_str(a, name, "m", FRAME_USER);
		y = profile__frame_str(b, name, "m", FRAME_USER);
		cr_assert_geq(x, 0);
		cr_assert_eq(x, y);
		ids[i] = (uint32_t)x;
	}
}

/*
 * frames_stack reuses the stack ids of a recent stack from the root
 * (collect/internal.h, struct stack_memo): the ids are those interning
 * every frame gives, for stacks of several threads taking turns, sharing
 * long roots and differing at their leaves, and after the profile under it
 * is another (a table rebuilt: every memo entry is checked, none trusted).
 */
Test(frames, memo_gives_the_ids_interning_gives)
{
	struct profile *a = profile__new(), *b = profile__new();
	uint32_t ids[64], base[6][80], st[80];
	struct frames fr;
	unsigned seed = 1;

	cr_assert(a && b);
	same_frames(a, b, ids, 64);
	frames_init(&fr, a, NULL);
	for (int t = 0; t < 6; t++)
		for (int i = 0; i < 80; i++)
			base[t][i] = (uint32_t)(rand_r(&seed) % 64);
	for (int iter = 0; iter < 20000; iter++) {
		int t = rand_r(&seed) % 6, depth = 1 + rand_r(&seed) % 80;
		int keep = depth - rand_r(&seed) % 6;
		int64_t x, y = 0;

		if (iter == 10000) {
			/* the same frames under new profiles: what the memo holds is stale */
			profile__free(a);
			profile__free(b);
			a = profile__new();
			b = profile__new();
			cr_assert(a && b);
			same_frames(a, b, ids, 64);
			/* a few stacks first, so that stale ids are in range */
			for (int k = 0; k < 40; k++)
				cr_assert_geq(profile__stack(a, (uint32_t)k, ids[k % 64]), 0);
			for (int k = 0; k < 40; k++)
				cr_assert_geq(profile__stack(b, (uint32_t)k, ids[k % 64]), 0);
			fr.prof = a;
		}
		for (int i = 0; i < depth; i++)
			st[i] = i < keep ? base[t][i] : (uint32_t)(rand_r(&seed) % 64);
		frames_reset(&fr);
		for (int i = depth; i-- > 0;)
			cr_assert_eq(frames_push_id(&fr, ids[st[i]]), 0);
		x = frames_stack(&fr);
		for (int i = 0; i < depth; i++)
			y = profile__stack(b, (uint32_t)y, ids[st[i]]);
		cr_assert_eq(x, y, "iteration %d: %" PRId64 " against %" PRId64, iter, x, y);
	}
	cr_assert_eq(profile__nr_stacks(a), profile__nr_stacks(b), "no stack interned twice");
	frames_exit(&fr);
	profile__free(a);
	profile__free(b);
}

/* The placeholder frame one address gets now, and the file and offset it stands for. */
static uint32_t addr_frame(struct frames *fr, uint32_t pid, uint64_t ip, struct pf_journal_loc *loc)
{
	frames_reset(fr);
	cr_assert_eq(frames_push_addr(fr, pid, ip, false, false), 0);
	cr_assert_eq(fr->n, 1);
	cr_assert(frames_journal_loc(fr, fr->ids[0], loc),
		  "address %#" PRIx64 " of %" PRIu32 " is a placeholder", ip, pid);
	return fr->ids[0];
}

/*
 * An address's placeholder is taken from its slot only while no mapping
 * changed: another file mapped over it, a fork and an exec each name it
 * anew, and a process gone leaves it unknown.
 */
Test(frames, addr_slots_follow_the_mappings)
{
	struct profile *p = profile__new();
	struct symbolizer *s = symbolizer__new();
	const uint32_t pid = (uint32_t)getpid(), child = 3999998;
	const uint64_t at = 0x10000000, ip = at + 0x1234;
	struct pf_journal_loc l1, l2, l3;
	char self[4096] = "";
	Dl_info libc;
	struct frames fr;
	uint32_t a, b;

	cr_assert(p && s);
	cr_assert(dladdr((void *)&printf, &libc) && libc.dli_fname);
	cr_assert_gt(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
	frames_init(&fr, p, s);
	cr_assert_eq(symbolizer__mmap(s, pid, at, 0x100000, 0x2000, PROT_READ | PROT_EXEC,
				      libc.dli_fname),
		     0);
	/* frame 0 taken first, as in a recording (u64map keys are never 0) */
	cr_assert_eq(frames_push_special(&fr, "[first]"), 0);
	a = addr_frame(&fr, pid, ip, &l1);
	cr_assert_str_eq(l1.path, libc.dli_fname);
	cr_assert_eq(l1.offset, 0x3234);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(addr_frame(&fr, pid, ip, &l2), a, "the same address, the same frame");
	/* another file over the same range */
	cr_assert_eq(symbolizer__mmap(s, pid, at, 0x100000, 0, PROT_READ | PROT_EXEC, self), 0);
	b = addr_frame(&fr, pid, ip, &l2);
	cr_assert_neq(b, a, "the slot gave the frame of the file mapped before");
	cr_assert_str_eq(l2.path, self);
	cr_assert_eq(l2.offset, 0x1234);
	/* a fork shares its parent's mappings: the child's own slot */
	cr_assert_eq(symbolizer__fork(s, child, pid), 0);
	cr_assert_eq(addr_frame(&fr, child, ip, &l3), b);
	/* the parent execs and maps libc there again: its location, not the slot's */
	cr_assert_eq(symbolizer__comm(s, pid, pid, true), 0);
	cr_assert_eq(symbolizer__mmap(s, pid, at, 0x100000, 0x2000, PROT_READ | PROT_EXEC,
				      libc.dli_fname),
		     0);
	cr_assert_eq(addr_frame(&fr, pid, ip, &l3), a, "one location, one frame");
	cr_assert_eq(addr_frame(&fr, child, ip, &l3), b);
	/* gone: no mapping, so the address is named now, not a placeholder of before */
	cr_assert_eq(symbolizer__exit(s, child, child), 0);
	frames_reset(&fr);
	cr_assert_eq(frames_push_addr(&fr, child, ip, false, false), 0);
	for (size_t i = 0; i < fr.n; i++)
		cr_assert(fr.ids[i] != a && fr.ids[i] != b,
			  "a gone process's address kept its frame");
	frames_exit(&fr);
	symbolizer__free(s);
	profile__free(p);
}
