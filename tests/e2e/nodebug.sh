#!/bin/sh
# Runs a test as on a machine without debug packages (no libc6-dbg): an
# empty tmpfs over /usr/lib/debug, in a private mount namespace that ends
# with the test. Needs root; skips (77) without it.
set -eu
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
	echo "nodebug: not root (or no unshare): cannot hide /usr/lib/debug" >&2
	exit 77
fi
unset DLFLAME_DEBUG_DIRS
export DLFLAME_TEST_NODEBUG=1
# The tmpfs must not leak out of the namespace: its mounts are made private.
# unshare's own way (--propagation private) fails in a chroot, where / is
# not a mount point; there the chroot's namespace must be private already.
exec unshare -m --propagation unchanged sh -c '
	if ! mount --make-rprivate / 2>/dev/null && grep -q " shared:" /proc/self/mountinfo; then
		echo "nodebug: cannot make this namespace private to hide /usr/lib/debug" >&2
		exit 77
	fi
	if [ -d /usr/lib/debug ]; then mount -t tmpfs -o size=1m,mode=755 nodebug /usr/lib/debug; fi &&
	exec "$@"' nodebug "$@"
