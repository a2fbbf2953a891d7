#!/usr/bin/env bash
# Installs everything dlflame needs on Debian 12 and builds it into ./build.
# The one install list: scripts/demo.sh, scripts/test.sh and .ci/run all call this.
# Debian 13 and unstable have the same package names. Exits 3 when apt cannot
# install the packages, 1 when dlflame does not build (its errors on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  gcc pkg-config meson ninja-build python3     # build
  libelf-dev libdw-dev libunwind-dev zlib1g-dev # dlflame
  libiberty-dev                                 # dlflame: C++ demangling
  libzstd-dev                                   # dlflame: perf.data of perf record -z
  clang libbpf-dev                              # dlflame: --python-frames=bpf (pybpf/'s program)
  libdnnl-dev                                   # examples/mlp, the oneDNN trainer
  libcriterion-dev libxml2-utils linux-perf     # tests: unit framework, XML check, the peer
  g++ binutils                                  # tests: C++ fixtures, objcopy/strip/readelf
  chromium golang-go golang-github-google-pprof-dev time # tests: browser, real pprof, bench
  python3-torch                                 # tests and bench: the real PyTorch trainer
  python3-dev                                   # tests: CPython's headers, to check the offsets read
  iproute2                                      # tests: two hosts in network namespaces
  tmux                                          # tests: the status line on a real terminal
  podman runc catatonit                         # tests: trainers in real containers and a pod
  openmpi-bin                                   # tests: mpirun, where PyTorch has MPI (Debian 13 on)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# the browser test's node and npm, before meson looks for node; a machine
# with Node.js from elsewhere (npm bundled) keeps it
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  # exit 3: the packages could not be had (the archive, not dlflame)
  $sudo apt-get update -qq || { echo "setup: apt-get update failed" >&2; exit 3; }
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { echo "setup: apt-get install ${missing[*]} failed" >&2; exit 3; }
fi

# Quiet when it works; a failed configure or build shows its errors on
# stderr and exits non-zero.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
built() {
  if ! "$@" >"$log" 2>&1; then
    grep -E -A4 'error|ERROR|Error' "$log" | head -n 60 >&2 || tail -n 40 "$log" >&2
    echo "setup: '$*' failed (above); fix it and run scripts/setup.sh again" >&2
    exit 1
  fi
}
if [ -d build ]; then
  built meson setup --reconfigure build
else
  built meson setup build
fi
built ninja -C build

# --- output tests (render/): the browser test's node packages and the real pprof ---
(cd tests/browser && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
if [ ! -x build/tools/pprof ]; then
  # offline, from Debian's Go sources of pprof
  mkdir -p build/tools
  GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$PWD/build/tools/go-cache" \
    go build -o build/tools/pprof github.com/google/pprof
fi
# --- end of output tests ---
echo "setup: built build/cmd/dlflame" >&2
