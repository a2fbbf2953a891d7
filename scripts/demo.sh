#!/usr/bin/env bash
# Fresh machine to flame graph: install, build, profile the bundled oneDNN MLP
# trainer and draw its on-CPU flame graph into flame.svg.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ITERATIONS=${ITERATIONS:-1500}
build/cmd/dlflame record -o dlflame.data -- build/examples/mlp "$ITERATIONS"
build/cmd/dlflame report -i dlflame.data --svg -o flame.svg
echo "open $(pwd)/flame.svg in a browser"
