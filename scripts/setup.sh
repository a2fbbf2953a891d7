#!/usr/bin/env bash
# Installs everything dlflame needs on Debian 12 and builds it into ./build.
# The one install list: scripts/demo.sh, scripts/test.sh and .ci/run all call this.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  gcc pkg-config meson ninja-build python3     # build
  libelf-dev libdw-dev libunwind-dev zlib1g-dev # dlflame
  libiberty-dev                                 # dlflame: C++ demangling
  libdnnl-dev                                   # examples/mlp, the oneDNN trainer
  libcriterion-dev libxml2-utils linux-perf     # tests: unit framework, XML check, the peer
  g++ binutils                                  # tests: C++ fixtures, objcopy/strip/readelf
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ -d build ]; then
  meson setup --reconfigure build >/dev/null
else
  meson setup build >/dev/null
fi
ninja -C build >/dev/null
echo "setup: built build/cmd/dlflame" >&2
