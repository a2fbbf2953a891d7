/* SPDX-License-Identifier: MIT */
/*
 * libunwind's lock without its signal masking, while this thread steps.
 *
 * Debian's libunwind (1.6, 1.8) is built without a per-thread cache, so
 * unwind.c's address spaces use the global one, behind a lock that
 * libunwind takes with every signal blocked: sigprocmask(SIG_SETMASK, full)
 * before, sigprocmask(SIG_SETMASK, saved) after, two system calls a step
 * and four more on a cache miss. That keeps a signal handler that itself
 * unwinds from deadlocking on the lock; dlflame unwinds in no handler. On
 * the CNN trainer these calls were 505,000 of a 10 s recording (perf trace),
 * 0.22 µs each here: about a sixth of the recording thread's CPU.
 *
 * The executable's definitions come first in the dynamic lookup, so
 * libunwind's calls land here. While unwind_quiet is set (unwind.c sets it
 * around libunwind's calls, on the thread that unwinds), a SIG_SETMASK is
 * answered with the mask the thread had, without the system call; every
 * other call, any other thread and any other "how" (a handler's
 * SIG_UNBLOCK) goes to the C library's function. If a libunwind masks by
 * other means, nothing here runs and nothing changes.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "symbolize/internal.h"

_Thread_local int unwind_quiet;

typedef int (*mask_fn)(int, const sigset_t *, sigset_t *);

static _Thread_local sigset_t held;
static _Thread_local bool have_held;

static mask_fn next_fn(const char *name)
{
	/* dlsym's result is an object pointer; POSIX has it convert to a function's */
	void *p = dlsym(RTLD_NEXT, name);
	mask_fn f;

	_Static_assert(sizeof(p) == sizeof(f), "function and object pointers differ");
	__builtin_memcpy(&f, &p, sizeof(f));
	return f;
}

static int forward(const char *name, mask_fn *cache, int how, const sigset_t *set, sigset_t *old)
{
	mask_fn f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);

	if (!f) {
		f = next_fn(name);
		if (!f)
			return ENOSYS;
		__atomic_store_n(cache, f, __ATOMIC_RELEASE);
	}
	return f(how, set, old);
}

static mask_fn next_pthread_sigmask, next_sigprocmask;

/* The mask answered while quiet: the thread's own, read once. */
static bool quiet_setmask(int how, sigset_t *old)
{
	if (!unwind_quiet || how != SIG_SETMASK)
		return false;
	if (!have_held) {
		if (forward("pthread_sigmask", &next_pthread_sigmask, SIG_BLOCK, NULL, &held))
			return false;
		have_held = true;
	}
	if (old)
		*old = held;
	return true;
}

int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	if (quiet_setmask(how, old))
		return 0;
	return forward("pthread_sigmask", &next_pthread_sigmask, how, set, old);
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	int err;

	if (quiet_setmask(how, old))
		return 0;
	err = forward("sigprocmask", &next_sigprocmask, how, set, old);
	/* sigprocmask's own convention: -1 and errno (the forward's ENOSYS) */
	if (err > 0) {
		errno = err;
		return -1;
	}
	return err;
}
