#!/bin/bash
# Two "hosts" for the distributed tests: a network namespace and a UTS
# namespace (its own host name) per rank, joined by a veth pair, each rank
# recorded by its own `dlflame record`, launched the way torchrun launches
# a rank (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
#   netns_ddp.sh DLFLAME EXAMPLES OUTDIR STEPS SLOW_RANK
# Writes OUTDIR/hostA.data (rank 0) and OUTDIR/hostB.data (rank 1) and
# their logs. Exit 77 when namespaces cannot be made here (not root, no ip).
set -u
dlflame=$1 examples=$2 out=$3 steps=$4 slow=$5
command -v ip >/dev/null && command -v unshare >/dev/null || { echo "no ip or unshare" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "not root" >&2; exit 77; }
a=dlfA$$ b=dlfB$$
ip netns add $a || exit 77
ip netns add $b || { ip netns del $a; exit 77; }
trap 'ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null' EXIT
ip link add va$$ type veth peer name vb$$ &&
	ip link set va$$ netns $a && ip link set vb$$ netns $b &&
	ip -n $a addr add 10.77.0.1/24 dev va$$ && ip -n $b addr add 10.77.0.2/24 dev vb$$ &&
	ip -n $a link set va$$ up && ip -n $b link set vb$$ up &&
	ip -n $a link set lo up && ip -n $b link set lo up || exit 1
job="WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 MASTER_PORT=29533"
rank() { # NS HOST RANK IFACE
	ip netns exec $1 unshare --uts sh -c "hostname $2 && exec env $job RANK=$3 LOCAL_RANK=0 \
		GLOO_SOCKET_IFNAME=$4 $dlflame record -o $out/$2.data -- /usr/bin/python3 \
		$examples/ddp_train.py $steps --slow-rank $slow" >"$out/$2.log" 2>&1
}
rank $a hostA 0 va$$ &
pa=$!
rank $b hostB 1 vb$$
sb=$?
wait $pa
sa=$?
cat "$out/hostA.log" "$out/hostB.log" >&2
[ $sa -eq 0 ] && [ $sb -eq 0 ]
