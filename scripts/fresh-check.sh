#!/usr/bin/env bash
# Runs one of the README's fresh-machine commands on a fresh Debian 12 (or 13,
# or unstable): a minbase root debootstrapped from this machine's own Debian
# mirror, holding
# a clean clone of HEAD and nothing the command does not install itself. A
# package that only the developer's machine happens to have then fails here
# instead of on the next reader's machine. .ci/run runs the test command
# this way.
#
#   scripts/fresh-check.sh [--suite SUITE] [test [NAME...]|demo]
#       test (default): scripts/test.sh [NAME...]; demo: scripts/demo.sh
#       SUITE: bookworm (Debian 12, default), trixie (Debian 13) or sid
#       (unstable: its Release file may be past Valid-Until, which is allowed)
#
# It needs root (debootstrap, chroot, mounts) and installs debootstrap and
# zstd on the host if they are missing. It exits with the command's status
# (3: the root could not be built: debootstrap or apt failed);
# the command's output is printed as it runs, and a closing
# 'tests: N passed, N failed, N skipped' line stays the last line.
#
# Environment:
#   FRESH_CACHE=/var/cache/dlflame-fresh  the cached minbase roots
#                     (SUITE-minbase.tar.zst) and the downloaded .debs
#                     (apt-archives-SUITE/), kept between runs
#   FRESH_BASE_DAYS=30  debootstrap again when the cached root is older
#   FRESH_REBUILD=1   debootstrap again now
#   FRESH_MIRROR=URI  the Debian mirror; default: the one serving bookworm
#                     in /etc/apt/sources.list{,.d}
#   FRESH_TMP=/var/tmp  where each run's root is unpacked
#   FRESH_KEEP=1      keep that root afterwards (chroot into it to look)
#   FRESH_TIMEOUT=60m give up on the command after this long (timeout(1))
set -euo pipefail

usage() {
  echo "usage: scripts/fresh-check.sh [--suite bookworm|trixie|sid] [test [NAME...]|demo]" >&2
  exit 2
}
suite=bookworm
if [ "${1:-}" = --suite ]; then
  [ $# -ge 2 ] || usage
  suite=$2
  shift 2
fi
case "$suite" in
  bookworm | trixie | sid) ;;
  *) usage ;;
esac
cmd=${1:-test}
case "$cmd" in
  test | demo) ;;
  *) usage ;;
esac
# test NAME...: only the meson tests of those names (scripts/test.sh NAME...)
shift || true
args="$*"
[[ $args =~ ^[A-Za-z0-9_\ -]*$ ]] || usage

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${FRESH_CACHE:-/var/cache/dlflame-fresh}
base=$cache/$suite-minbase.tar.zst
archives=$cache/apt-archives-$suite
timeout=${FRESH_TIMEOUT:-60m}

say() { echo "fresh-check: $*" >&2; }
die() {
  say "$*"
  exit 1
}
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

[ "$(id -u)" -eq 0 ] ||
  die "must run as root: debootstrap, chroot and the mounts need it; run it as root or with sudo"
command -v git >/dev/null ||
  die "no git: it clones HEAD into the fresh root; apt-get install git"
sha=$(git -C "$repo" rev-parse --verify HEAD 2>/dev/null) ||
  die "$repo is not a git checkout with a commit: the fresh root gets a clone of HEAD"

# The host's own tools, not the root's: debootstrap builds the root, zstd
# packs it for the cache.
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v zstd >/dev/null || need+=(zstd)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]} on this machine"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; } ||
    die "cannot install ${need[*]} with apt-get; install them by hand and run this again"
fi

# The host's Debian entries as "URI SUITE COMPONENTS" lines, from both the
# one-line and the deb822 formats. The fresh root gets the same bookworm,
# -updates and -security entries, so it installs what a fresh machine
# pointed at this mirror would, and no third-party repository.
host_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" {
      i = 2
      if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
      c = ""; for (j = i + 2; j <= NF; j++) c = c " " $j
      print $i, $(i + 1) c
    }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
    {
      t = u = s = c = ""; on = "yes"
      for (i = 1; i <= NF; i++) {
        if ($i ~ /^#/ || !match($i, /^[A-Za-z-]+:/)) continue
        k = tolower(substr($i, 1, RLENGTH - 1)); v = substr($i, RLENGTH + 1)
        gsub(/^[ \t]+|[ \t]+$/, "", v)
        if (k == "types") t = v; else if (k == "uris") u = v
        else if (k == "suites") s = v; else if (k == "components") c = v
        else if (k == "enabled") on = tolower(v)
      }
      if (on == "no" || (" " t " ") !~ / deb /) next
      nu = split(u, U, /[ \t]+/); ns = split(s, S, /[ \t]+/)
      for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++) print U[a], S[b], c
    }' "$f"
  done
}
# Another suite than the host's: the host's Debian 12 entries with the
# suite's names (trixie, trixie-updates, trixie-security); unstable has
# neither updates nor security.
host_suite=$(host_sources | awk '$2 !~ /-/ { print $2; exit }')
sources=$(host_sources | awk -v s="$suite" '$2 == s || $2 == s "-updates" || $2 == s "-security"')
if [ -z "$sources" ] && [ -n "$host_suite" ]; then
  sources=$(host_sources |
    awk -v h="$host_suite" -v s="$suite" '$2 == h || $2 == h "-updates" || $2 == h "-security" {
      sub("^" h, s, $2)
      if (s == "sid" && $2 != s) next
      print
    }')
fi
mirror=${FRESH_MIRROR:-$(awk -v s="$suite" '$2 == s { print $1; exit }' <<<"$sources")}
[ -n "$mirror" ] ||
  die "no Debian entry in /etc/apt/sources.list{,.d}: debootstrap needs a Debian mirror; set FRESH_MIRROR=URI"
[ -n "$sources" ] || sources="$mirror $suite main"

mkdir -p "$cache" "$archives/partial"
work=$(mktemp -d "${FRESH_TMP:-/var/tmp}/dlflame-fresh.XXXXXX")
root=$work/root

# The mounts live in a mount namespace of their own that dies with the
# command (see run_in_root), so nothing under $work is mounted here and
# rm -rf cannot walk into /proc or /dev. Refuse anyway if something is.
cleanup() {
  [ -n "${work:-}" ] && [ -d "$work" ] || return 0
  if [ "${FRESH_KEEP:-0}" = 1 ]; then
    say "kept the root in $root (FRESH_KEEP=1): chroot $root bash; rm -rf $work when done"
  elif awk -v w="$work/" 'index($2, w) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    say "something is still mounted under $work; not removing it (umount -R it, then rm -rf $work)"
  else
    rm -rf --one-file-system "$work" || say "could not remove all of $work"
  fi
}
# On INT or TERM, kill unshare: --kill-child then takes the whole PID
# namespace down with it (its own processes ignore the INT a background
# job gets, and unshare blocks INT and TERM while it waits).
# shellcheck disable=SC2317 # called from the traps
stop() {
  [ ! -s "$work/unshare.pid" ] || kill -KILL "$(cat "$work/unshare.pid")" 2>/dev/null || true
  # and let the pipeline finish before cleanup removes what it writes to
  [ -z "${runner:-}" ] || wait "$runner" 2>/dev/null || true
  exit "$1"
}
trap cleanup EXIT
trap 'stop 130' INT
trap 'stop 143' TERM

start=$SECONDS

# --- the cached minbase root ---
# debootstrap takes minutes and its result only changes with Debian's
# point releases: build it once, keep it as a tarball, and unpack a pristine
# copy every run. ca-certificates is the one addition, so apt and npm can
# trust the host's TLS-intercepting CA before setup.sh runs.
# One run at a time: the cached root and the shared .deb cache (whose apt
# lock another run's namespace would hold) are the cache's. The lock is
# held until this script exits.
exec 9>"$cache/lock"
if ! flock -n 9; then
  say "another fresh-check runs; waiting for it"
  flock 9
fi
if [ "${FRESH_REBUILD:-0}" = 1 ] || [ ! -s "$base" ] ||
  [ -n "$(find "$base" -mtime "+${FRESH_BASE_DAYS:-30}" 2>/dev/null)" ]; then
  say "debootstrap $suite (minbase) from $mirror into $base"
  t=$SECONDS
  boot=$work/debootstrap
  # in a mount namespace too: debootstrap mounts /proc and /sys in the
  # target, and an interrupted one would leave them mounted here
  if ! unshare --mount --propagation private -- \
    debootstrap --variant=minbase --include=ca-certificates "$suite" "$boot" "$mirror" \
    >"$work/debootstrap.log" 2>&1; then
    tail -n 20 "$work/debootstrap.log" >&2
    say "debootstrap of $suite from $mirror failed (above; FRESH_KEEP=1 keeps its log in $boot/debootstrap): is the mirror reachable? set FRESH_MIRROR to another"
    exit 3
  fi
  # the .debs of the base itself: not part of a fresh machine
  rm -f "$boot"/var/cache/apt/archives/*.deb
  tar -C "$boot" --numeric-owner --xattrs --xattrs-include='*' -cf - . |
    zstd -q -T0 -o "$base.new"
  mv -f "$base.new" "$base"
  rm -rf --one-file-system "$boot"
  say "cached the minbase root in $(mmss $((SECONDS - t)))"
fi

t=$SECONDS
mkdir "$root"
zstd -q -dc "$base" | tar -C "$root" --numeric-owner --xattrs --xattrs-include='*' -xpf -

# The host's Debian entries replace debootstrap's single line; no
# Signed-By: the root trusts Debian's keys through debian-archive-keyring.
awk '{ c = ""; for (i = 3; i <= NF; i++) c = c " " $i; print "deb", $1, $2 c }' \
  <<<"$sources" >"$root/etc/apt/sources.list"
# unstable's Release file is often past its Valid-Until date
[ "$suite" != sid ] ||
  echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99dlflame-valid-until"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

# Trust what the host trusts: its local CAs go through the root's own
# update-ca-certificates (for apt and everything using OpenSSL's store);
# node keeps its built-in list, so NODE_EXTRA_CA_CERTS points npm at a copy
# of the host's bundle.
for crt in /usr/local/share/ca-certificates/*; do
  [ -e "$crt" ] && cp -rL "$crt" "$root/usr/local/share/ca-certificates/"
done
cp -L "${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}" "$root/etc/ssl/host-ca-certificates.crt"

# A clean clone: only what is committed, no build/, no node_modules.
dirty=""
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] ||
  dirty=" (uncommitted changes are not part of it)"
git clone -q --no-hardlinks --no-checkout "$repo" "$root/root/dlflame"
git -C "$root/root/dlflame" -c advice.detachedHead=false checkout -q "$sha"
say "fresh root in $root with a clone of HEAD ${sha:0:12}$dirty, ready in $(mmss $((SECONDS - t)))"

# --- the command ---
# unshare gives it a mount namespace (the mounts vanish with it, even on
# kill -9) and a PID namespace whose init is the inner shell: when that
# exits, every process left behind (a stray chromium, a daemon a package
# started) is killed with it, and --kill-child does the same if unshare is
# killed. /proc is the namespace's own, /sys and /dev the host's (perf
# needs both), /dev/shm a fresh tmpfs (chromium), and the host's .deb
# cache sits at the root's /var/cache/apt/archives: packages are still
# installed by setup.sh, just not downloaded twice.
env=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  LANG=C.UTF-8 TERM=dumb NODE_EXTRA_CA_CERTS=/etc/ssl/host-ca-certificates.crt)
for v in CI http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -z "${!v:-}" ] || env+=("$v=${!v}")
done
run_in_root() {
  # shellcheck disable=SC2016 # the inner script expands its own arguments
  timeout --foreground -s KILL "$timeout" \
    bash -c 'echo $$ >"$1"; shift; exec "$@"' record-pid "$work/unshare.pid" \
    unshare --mount --propagation private --pid --fork --kill-child -- \
    bash -euo pipefail -c '
      root=$1 archives=$2 cmd=$3 args=$4; shift 4
      # the root a mount point, as the / of a machine is: a container
      # runtime (runc) changes the propagation of / and fails on a directory
      mount --bind "$root" "$root"
      mount -t proc proc "$root/proc"
      mount --rbind /sys "$root/sys"
      mount --rbind /dev "$root/dev"
      mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
      mount --bind "$archives" "$root/var/cache/apt/archives"
      # its one routine warning (the bundle is not one certificate) is noise
      out=$(chroot "$root" /usr/bin/env -i "$@" /usr/sbin/update-ca-certificates 2>&1) ||
        { echo "$out" >&2; exit 1; }
      chroot "$root" /usr/bin/env -i "$@" /bin/bash -c "cd /root/dlflame && exec scripts/$cmd.sh $args" </dev/null
    ' fresh-root "$root" "$archives" "$cmd" "$args" "${env[@]}" 2>&3
}

# The closing 'tests: ...' line is held back and printed after this
# script's own last words, so it stays the last line CI reads. A shell
# loop, not mawk: mawk reads its input in blocks, which held setup.sh's
# progress back for minutes.
hold_summary() {
  local line
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ $line =~ ^tests:\ [0-9]+\ passed,\ [0-9]+\ failed ]]; then
      printf '%s\n' "$line" >"$work/summary"
    else
      printf '%s\n' "$line"
    fi
  done
}
say "running scripts/$cmd.sh in the fresh $suite root"
t=$SECONDS
# In the background so that a signal runs stop() at once: bash runs a
# trap only after the foreground command it waits for has ended. Should
# stop() kill unshare, bash's 'Killed' report (with the whole inner
# script) goes to /dev/null; the command's own stderr goes on through fd 3
# (run_in_root).
{
  status=0
  { run_in_root; } 3>&2 2>/dev/null || status=$?
  rm -f "$work/unshare.pid"
  echo "$status" >"$work/status"
} 2>&1 | hold_summary &
runner=$!
wait "$runner" || true
status=$(cat "$work/status" 2>/dev/null || echo 1)
took=$((SECONDS - t))
summary=$(cat "$work/summary" 2>/dev/null || true)

cleanup
trap - EXIT
how="exited $status"
[ "$status" -ne 137 ] || how="was killed (FRESH_TIMEOUT=$timeout reached?)"
say "scripts/$cmd.sh $how after $(mmss "$took"), $(mmss $((SECONDS - start))) in all"
[ -z "$summary" ] || echo "$summary"
exit "$status"
