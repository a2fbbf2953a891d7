/* SPDX-License-Identifier: MIT */
/* Reading the target's memory without stopping it: process_vm_readv. */
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include "python/internal.h"

#define MAX_IOV 256

int py_readv(pid_t pid, const uint64_t *addrs, size_t n, size_t len, uint8_t *buf)
{
	struct iovec local[MAX_IOV], remote[MAX_IOV];
	ssize_t got;

	if (n > MAX_IOV)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!addrs[i] || addrs[i] + len < addrs[i])
			return -EFAULT;
		local[i] = (struct iovec){ .iov_base = buf + i * len, .iov_len = len };
		remote[i] =
			(struct iovec){ .iov_base = (void *)(uintptr_t)addrs[i], .iov_len = len };
	}
	if (!n)
		return 0;
	got = process_vm_readv(pid, local, n, remote, n, 0);
	if (got < 0)
		return errno == ESRCH || errno == EPERM ? -errno : -EFAULT;
	return (size_t)got == n * len ? 0 : -EFAULT;
}

int py_read(pid_t pid, uint64_t addr, void *buf, size_t n)
{
	struct iovec local = { .iov_base = buf, .iov_len = n };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = n };
	ssize_t got;

	if (!n)
		return 0;
	if (!addr || addr + n < addr)
		return -EFAULT;
	got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (got < 0)
		return errno == ESRCH || errno == EPERM ? -errno : -EFAULT;
	return (size_t)got == n ? 0 : -EFAULT;
}

int pyreader__self_read(void)
{
	static const uint64_t probe = 0x5eedULL;
	uint64_t got = 0;
	struct iovec local = { .iov_base = &got, .iov_len = sizeof(got) };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)&probe, .iov_len = sizeof(probe) };

	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof(got))
		return -errno;
	return got == probe ? 0 : -EFAULT;
}
