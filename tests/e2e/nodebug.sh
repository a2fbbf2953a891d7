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
# unshare -m makes every mount private (its default), so the tmpfs stays in
# here; a machine with no /usr/lib/debug has nothing to hide.
exec unshare -m sh -c '
	if [ -d /usr/lib/debug ]; then mount -t tmpfs -o size=1m,mode=755 nodebug /usr/lib/debug; fi &&
	exec "$@"' nodebug "$@"
