/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

Test(u64map, put_get_delete_many)
{
	struct u64map m;

	u64map_init(&m);
	for (uint64_t i = 0; i < 10000; i++)
		cr_assert_eq(u64map_put(&m, i * 7919, i), 0);
	cr_assert_eq(m.len, 10000);
	for (uint64_t i = 0; i < 10000; i += 2)
		cr_assert(u64map_del(&m, i * 7919));
	for (uint64_t i = 0; i < 10000; i++) {
		uint64_t v = 0;
		bool found = u64map_get(&m, i * 7919, &v);
		cr_assert_eq(found, i % 2 == 1, "key %lu", (unsigned long)i);
		if (found)
			cr_assert_eq(v, i);
	}
	cr_assert_eq(u64map_put(&m, UINT64_MAX, 1), -EINVAL);
	u64map_free(&m);
}

Test(parse, strict_numbers)
{
	uint64_t u = 42;
	int64_t i = 42;
	double d = 1.5;

	cr_assert_eq(parse_u64("999", 10, 1, 1000, &u), 0);
	cr_assert_eq(u, 999);
	cr_assert_eq(parse_u64("1001", 10, 1, 1000, &u), -ERANGE);
	cr_assert_eq(parse_u64("12x", 10, 1, 1000, &u), -EINVAL);
	cr_assert_eq(parse_u64("", 10, 0, 10, &u), -EINVAL);
	cr_assert_eq(parse_u64("-1", 10, 0, 10, &u), -EINVAL);
	cr_assert_eq(parse_u64(" 1", 10, 0, 10, &u), -EINVAL);
	cr_assert_eq(parse_u64("99999999999999999999999", 10, 0, UINT64_MAX, &u), -ERANGE);
	cr_assert_eq(u, 999, "output untouched on failure");
	cr_assert_eq(parse_i64("-5", -10, 10, &i), 0);
	cr_assert_eq(i, -5);
	cr_assert_eq(parse_i64("11", -10, 10, &i), -ERANGE);
	cr_assert_eq(parse_double("0.25", 0, 1, &d), 0);
	cr_assert_float_eq(d, 0.25, 1e-12);
	cr_assert_eq(parse_double("nan", 0, 1, &d), -EINVAL);
	cr_assert_eq(parse_double("1.5e", 0, 10, &d), -EINVAL);
}

Test(grow, overflow_is_refused)
{
	void *p = NULL;
	size_t cap = 0;

	cr_assert_eq(grow_array(&p, &cap, 10, 8), 0);
	cr_assert_geq(cap, 10);
	cr_assert_eq(grow_array(&p, &cap, SIZE_MAX / 2, 16), -ENOMEM);
	free(p);
}

Test(le, round_trip)
{
	uint8_t b[8];

	put_le64(b, 0x0102030405060708ULL);
	cr_assert_eq(b[0], 8);
	cr_assert_eq(b[7], 1);
	cr_assert_eq(get_le64(b), 0x0102030405060708ULL);
}

/* A process's own view of its ids: in our namespace, ours; in a new PID namespace, 1. */
Test(nspid, own_namespace_and_a_new_one)
{
	uint32_t v = 0;
	pid_t child;
	int status, pipefd[2];
	char c = 0;

	cr_assert_eq(proc_ns_tid((uint32_t)getpid(), 0, &v), 0);
	cr_assert_eq(v, (uint32_t)getpid());
	cr_assert_eq(proc_ns_tid((uint32_t)getpid(), (uint32_t)gettid(), &v), 0);
	cr_assert_eq(v, (uint32_t)gettid());
	cr_assert_eq(proc_ns_tid(UINT32_MAX - 1, 0, &v), -ENOENT);
	if (geteuid() != 0)
		return; /* a PID namespace needs CAP_SYS_ADMIN: the e2e container tests run as root */
	cr_assert_eq(pipe(pipefd), 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		pid_t inner;

		if (unshare(CLONE_NEWPID))
			_exit(2);
		inner = fork(); /* the first child of a new namespace is its pid 1 */
		if (inner == 0) {
			close(pipefd[1]);
			(void)!read(pipefd[0], &c, 1);
			_exit(0);
		}
		close(pipefd[0]);
		close(pipefd[1]); /* the grandchild waits for the test to close the last one */
		_exit(inner > 0 ? (waitpid(inner, NULL, 0) > 0 ? 0 : 3) : 4);
	}
	close(pipefd[0]);
	/* the grandchild: the only child process of child */
	for (int i = 0; i < 500; i++) {
		char path[64], buf[64] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)child, (int)child);
		f = fopen(path, "r");
		if (f) {
			if (!fgets(buf, sizeof(buf), f))
				buf[0] = '\0';
			fclose(f);
		}
		if (buf[0]) {
			uint32_t inner = (uint32_t)strtoul(buf, NULL, 10);

			cr_assert_eq(proc_ns_tid(inner, 0, &v), 0);
			cr_assert_eq(v, 1, "pid %u sees itself as %u", inner, v);
			cr_assert_eq(proc_ns_tid(inner, inner, &v), 0);
			cr_assert_eq(v, 1);
			break;
		}
		if (i == 499) {
			close(pipefd[1]);
			cr_assert_fail("no grandchild appeared");
		}
		usleep(10000);
	}
	close(pipefd[1]);
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
}

/* The kernel's priority of thread tid now (stat's 18th field: boosts included). */
static long thread_prio(pid_t tid)
{
	char path[64], buf[1024];
	const char *p;
	long prio = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* past the name, which may hold spaces */
	cr_assert_not_null(p);
	/* fields 3 to 17, then the priority */
	for (int field = 2; field < 18 && p; field++)
		p = strchr(p + 1, ' ');
	cr_assert_not_null(p);
	cr_assert_eq(sscanf(p, " %ld", &prio), 1);
	return prio;
}

static void *fifo_waiter(void *arg)
{
	pthread_mutex_t *m = arg;

	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &(struct sched_param){ 1 }))
		return (void *)1;
	pthread_mutex_lock(m);
	pthread_mutex_unlock(m);
	return NULL;
}

/*
 * A real-time thread that waits for a mutex_init_inherit mutex lifts its
 * holder to its own priority (-2: SCHED_FIFO 1) until it lets go; a plain
 * mutex leaves the holder at its own (20 at nice 0), preempted by any busy
 * trainer.
 */
Test(mutex, a_real_time_waiter_lifts_the_holder)
{
	pthread_mutex_t m;
	pthread_t t;
	void *ret = NULL;
	long before, during = 0;

	if (geteuid() != 0)
		return; /* SCHED_FIFO needs CAP_SYS_NICE: the CI and fresh roots run as root */
	cr_assert_eq(mutex_init_inherit(&m), 0);
	before = thread_prio(gettid()); /* 20 at nice 0; 30 under scripts/sanitize.sh's nice 10 */
	cr_assert_geq(before, 0, "the test runs at a normal policy, not real-time: %ld", before);
	pthread_mutex_lock(&m);
	cr_assert_eq(pthread_create(&t, NULL, fifo_waiter, &m), 0);
	for (int i = 0; i < 500 && (during = thread_prio(gettid())) == before; i++)
		usleep(10000);
	pthread_mutex_unlock(&m);
	cr_assert_eq(pthread_join(t, &ret), 0);
	cr_assert_null(ret, "SCHED_FIFO refused to root");
	cr_assert_eq(during, -2, "the holder stayed at %ld while a FIFO 1 thread waited", during);
	cr_assert_eq(thread_prio(gettid()), before);
	pthread_mutex_destroy(&m);
}
