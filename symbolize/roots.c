/* SPDX-License-Identifier: MIT */
/*
 * The root directory each process sees. A process in a container (a
 * chroot, a mount namespace of its own) has files of its own under the
 * paths its mappings name: its /usr/lib/libpython3.13.so is not ours,
 * nor its /usr/lib/debug or /tmp. Its root is held open (an O_PATH
 * descriptor of /proc/PID/root, one per distinct directory, kept for the
 * life of the symbolizer) and its files are opened beneath it with
 * RESOLVE_IN_ROOT, so that an absolute symlink in the container resolves
 * in the container, even after the process is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "symbolize/internal.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

int fsroot_open(int root_fd, const char *path, int flags)
{
	struct open_how how = { 0 };
	long fd;

	if (root_fd < 0) {
		fd = open(path, flags);
		return fd < 0 ? -errno : (int)fd;
	}
	how.flags = (uint64_t)(unsigned)flags;
	/* the container's "/" is root_fd; no /proc/self-style links out of it */
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
	fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

int fsroot_stat(int root_fd, const char *path, struct stat *st)
{
	int fd, err = 0;

	if (root_fd < 0)
		return stat(path, st) ? -errno : 0;
	fd = fsroot_open(root_fd, path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return fd;
	if (fstat(fd, st))
		err = -errno;
	close(fd);
	return err;
}

int root_of_pid(struct symbolizer *s, uint32_t pid)
{
	char path[48];
	struct stat st;
	int fd;

	if (!s->self_root_known) {
		if (stat("/", &st))
			return -1;
		s->self_root_dev = st.st_dev;
		s->self_root_ino = st.st_ino;
		s->self_root_known = true;
	}
	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/root", pid);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1; /* gone, or not ours to look into: its paths as ours */
	if (fstat(fd, &st) || (st.st_dev == s->self_root_dev && st.st_ino == s->self_root_ino)) {
		close(fd);
		return -1;
	}
	for (size_t i = 0; i < s->nroots; i++) {
		if (s->roots[i].dev == st.st_dev && s->roots[i].ino == st.st_ino) {
			close(fd);
			return s->roots[i].fd;
		}
	}
	if (grow_array((void **)&s->roots, &s->roots_cap, s->nroots + 1, sizeof(*s->roots))) {
		close(fd);
		return -1;
	}
	s->roots[s->nroots++] = (struct fsroot){ .fd = fd, .dev = st.st_dev, .ino = st.st_ino };
	return fd;
}

void roots_free(struct symbolizer *s)
{
	for (size_t i = 0; i < s->nroots; i++)
		close(s->roots[i].fd);
	free(s->roots);
	s->roots = NULL;
	s->nroots = s->roots_cap = 0;
}
