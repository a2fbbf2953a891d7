#!/bin/bash
# A real container for the podman tests: rootful podman, no image, the root
# an overlay of ROOT (`--rootfs ROOT:O`: the container writes to its own
# upper layer, ROOT is not changed), its own PID, mount, UTS and IPC
# namespaces, its own cgroup.
#   podman.sh run NAME ROOT SRC [podman run options...] -- cmd...
#     starts it in the background (`podman run -d`), SRC bound read-only at
#     /tmp/src; prints nothing on success
#   podman.sh fg NAME ROOT SRC [podman run options...] -- cmd...
#     runs it in the foreground, removed when it ends; its exit status
#   podman.sh exec NAME cmd...   a process started in the running container
#   podman.sh inspect NAME FORMAT   podman inspect -f FORMAT NAME
#   podman.sh wait NAME          its exit code once it stops
#   podman.sh rm NAME            kill and remove it
#   podman.sh pod-create POD     a pod, as Kubernetes makes one: its infra
#     (pause) container, whose network, IPC and UTS namespaces the pod's
#     containers share, and a cgroup that holds theirs; `run NAME ... --pod
#     POD -- cmd` starts a container in it
#   podman.sh pod-rm POD         kill and remove it with its containers
# The runtime is runc: crun 1.8 (Debian 12) refuses a host whose cgroup v1
# controllers sit beside a cgroup v2 hierarchy ("cgroups in hybrid mode not
# supported"), runc puts the container in both. The limits are set below
# podman's own (it lowers its RLIMIT_NPROC before starting the runtime, and
# raising a limit needs CAP_SYS_RESOURCE, which a CI sandbox may lack).
set -eu
# podman 5 warns on every command of a host with cgroup v1 controllers; the
# tests read the container's stderr
export PODMAN_IGNORE_CGROUPSV1_WARNING=1
podman=(podman --runtime runc --cgroup-manager cgroupfs)
what=$1
shift
case $what in
run | fg)
	name=$1 root=$2 src=$3
	shift 3
	opts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	[ $# -gt 0 ] || { echo "podman.sh: no -- before the command" >&2; exit 2; }
	shift
	# a pod's container has the pod's network
	net=(--network none)
	for o in "${opts[@]}"; do
		[ "$o" != --pod ] || net=()
	done
	common=(--name "$name" "${net[@]}" --ulimit nofile=1024:1024
		--ulimit nproc=1024:1024 -v "$src:/tmp/src:ro" "${opts[@]}"
		--rootfs "$root:O")
	if [ "$what" = run ]; then
		"${podman[@]}" rm -f "$name" >/dev/null 2>&1 || true
		exec "${podman[@]}" run -d "${common[@]}" "$@" >/dev/null
	fi
	exec "${podman[@]}" run --rm "${common[@]}" "$@"
	;;
exec)
	name=$1
	shift
	exec "${podman[@]}" exec "$name" "$@"
	;;
inspect)
	exec "${podman[@]}" inspect -f "$2" "$1"
	;;
wait)
	exec "${podman[@]}" wait "$1"
	;;
rm)
	exec "${podman[@]}" rm -f -t 0 "$1" >/dev/null
	;;
pod-create)
	# the infra container takes its limits from containers.conf (pod create
	# has no --ulimit in podman 4.3); catatonit is its pause process
	command -v catatonit >/dev/null || {
		echo "podman.sh: catatonit is missing: scripts/setup.sh installs it (apt-get install catatonit)" >&2
		exit 1
	}
	conf=$(mktemp)
	printf '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n' >"$conf"
	"${podman[@]}" pod rm -f "$1" >/dev/null 2>&1 || true
	st=0
	CONTAINERS_CONF=$conf "${podman[@]}" pod create --name "$1" --network none >/dev/null || st=$?
	rm -f "$conf"
	exit $st
	;;
pod-rm)
	exec "${podman[@]}" pod rm -f "$1" >/dev/null
	;;
*)
	echo "podman.sh: run|fg|exec|inspect|wait|rm|pod-create|pod-rm" >&2
	exit 2
	;;
esac
