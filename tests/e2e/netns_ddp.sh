#!/bin/bash
# Two "hosts" for the distributed tests: a network and a UTS namespace (its
# own host name) per rank, joined by a veth pair, each rank recorded by its
# own `dlflame record`, launched the way torchrun launches a rank (RANK,
# LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
#   netns_ddp.sh DLFLAME EXAMPLES OUTDIR STEPS SLOW_RANK
# Writes OUTDIR/hostA.data (rank 0) and OUTDIR/hostB.data (rank 1) and
# their logs. Exit 77 when namespaces cannot be made here (not root, no ip).
# The namespaces are unshare(1)'s, their veth ends moved in by pid: `ip
# netns exec` remounts / and fails where / is no mount point (a chroot).
set -u
dlflame=$1 examples=$2 out=$3 steps=$4 slow=$5
command -v ip >/dev/null && command -v unshare >/dev/null || { echo "no ip or unshare" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "not root" >&2; exit 77; }
unshare --net --uts true 2>/dev/null || { echo "cannot unshare network namespaces" >&2; exit 77; }
job="WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 MASTER_PORT=29533"
rm -f "$out/go"
rank() { # HOST RANK IFACE ADDRESS: waits for its veth end, then records its rank
	unshare --net --uts /bin/sh -c "
		while [ ! -e '$out/go' ]; do sleep 0.05; done
		hostname $1 && ip link set lo up && ip addr add $4/24 dev $3 && ip link set $3 up &&
		exec env $job RANK=$2 LOCAL_RANK=0 GLOO_SOCKET_IFNAME=$3 $dlflame record --forward-exit --probe-collectives \
			-o '$out/$1.data' -- /usr/bin/python3 '$examples/ddp_train.py' $steps \
			--slow-rank $slow" >"$out/$1.log" 2>&1 &
}
rank hostA 0 va$$ 10.77.0.1
pa=$!
rank hostB 1 vb$$ 10.77.0.2
pb=$!
# until both have their namespaces (unshare has run)
own=$(readlink /proc/self/ns/net)
for _ in $(seq 100); do
	[ "$(readlink /proc/$pa/ns/net)" != "$own" ] && [ "$(readlink /proc/$pb/ns/net)" != "$own" ] &&
		break
	sleep 0.05
done
if ! ip link add va$$ type veth peer name vb$$ || ! ip link set va$$ netns $pa ||
	! ip link set vb$$ netns $pb; then
	kill $pa $pb 2>/dev/null
	ip link del va$$ 2>/dev/null
	exit 1
fi
touch "$out/go"
wait $pa
sa=$?
wait $pb
sb=$?
cat "$out/hostA.log" "$out/hostB.log" >&2
[ $sa -eq 0 ] && [ $sb -eq 0 ]
