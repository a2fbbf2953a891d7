#!/bin/bash
# A container as runtimes make one, for the container tests: the command runs
# as pid 1 of a PID namespace of its own, in a mount namespace of its own
# (private propagation: nothing mounted here reaches the host), chrooted into
# a root with its own /proc and /tmp.
#   container.sh ROOT SRC CGROUP cmd...
# ROOT: a directory holding a system (a debootstrapped root), or "minimal:DIR":
# DIR is made a root of the host's own /usr, /etc and libraries bound read-only,
# except its python3.11, which is a copy (DIR.python) whose build-id differs from
# the host's (so the container's file and the host's under one path are not the
# same file).
# SRC is bound at /tmp/src. CGROUP: a cgroup v2 directory to run in, or "-".
# The command's environment is only PATH, HOME and what `env` arguments give.
set -eu
root=$1 src=$2 cg=$3
shift 3
if [ "$cg" != - ]; then echo $$ >"$cg/cgroup.procs"; fi
# Private propagation needs / to be a mount point. Inside a chroot (CI's
# fresh roots) it is not, and unshare refuses; such a chroot already runs
# in a private mount namespace of its own (fresh-check.sh makes one), so
# nothing mounted here reaches the host either way.
prop=private
unshare --mount --propagation private true 2>/dev/null || prop=unchanged
exec unshare --pid --fork --mount --propagation "$prop" -- bash -c '
set -eu
root=$1 src=$2; shift 2
case $root in
minimal:*)
	dir=${root#minimal:}
	mkdir -p "$dir"/{usr,etc,proc,tmp,dev}
	for d in usr etc; do mount --rbind -o ro /$d "$dir/$d"; done
	# merged /usr: /bin, /lib, /lib64 are links into it on Debian 12
	for d in bin sbin lib lib64; do
		[ -e /$d ] || continue
		if [ -L /$d ]; then ln -sfn "$(readlink /$d)" "$dir/$d"
		else mkdir -p "$dir/$d" && mount --rbind -o ro /$d "$dir/$d"; fi
	done
	mount --rbind /dev "$dir/dev"
	# the one file that differs: python3.11 with its build-id changed (its
	# last byte), made once (DIR.python), before any recording starts
	py=$(readlink -f /usr/bin/python3)
	if [ ! -e "$dir.python" ]; then
		cp "$py" "$dir.python.tmp"
		python3 - "$dir.python.tmp" <<PY
import re, subprocess, sys
p = sys.argv[1]
out = subprocess.run(["readelf", "-n", p], capture_output=True, text=True, check=True).stdout
bid = bytes.fromhex(re.search(r"Build ID: ([0-9a-f]+)", out).group(1))
data = bytearray(open(p, "rb").read())
at = data.find(bid)
assert at >= 0 and data.find(bid, at + 1) < 0
data[at + len(bid) - 1] ^= 0xff
open(p, "wb").write(data)
PY
		mv "$dir.python.tmp" "$dir.python"
	fi
	mount --bind "$dir.python" "$dir$py"
	root=$dir
	;;
esac
mount -t proc proc "$root/proc"
mount -t tmpfs tmp "$root/tmp"
mkdir -p "$root/tmp/src"
mount --bind "$src" "$root/tmp/src"
exec chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/ "$@"
' x "$root" "$src" "$@"
