#!/usr/bin/env bash
# Seeds for the fuzz targets, made from real files into OUTDIR/TARGET/:
# dlflame's own profiles (and their payloads, the form past the checksum),
# perf.data files of perf record in its modes, records cut out of those with
# their layouts, real stack samples of unwind.elf, kallsyms lines, perf maps
# and ELF files. They go into the committed corpus only through libFuzzer's
# -merge=1 (what adds coverage), with the small ones preferred:
#   tests/fuzz/seeds.sh /tmp/seeds
#   build-fuzz/tests/fuzz/fuzz-TARGET -merge=1 tests/fuzz/corpus/TARGET /tmp/seeds/TARGET
# Needs ./build (scripts/setup.sh), perf, and perf_event_paranoid <= 2.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: tests/fuzz/seeds.sh OUTDIR}
b=build
fx=$b/tests/fixtures
for t in profile report perfdata decode perfmap kallsyms elf unwind; do mkdir -p "$out/$t"; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# dlflame.data: the golden profiles and short recordings of the fixtures
cp tests/golden/fixed-v1.data "$tmp/fixed-v1.data"
$b/tests/golden/mkprofile fixed "$tmp/fixed.data"
$b/tests/golden/mkprofile hostile "$tmp/hostile.data"
$b/cmd/dlflame record -F 200 -o "$tmp/chain-fp.data" -- $fx/chain 0.2 >/dev/null 2>&1
$b/cmd/dlflame record -F 200 -g dwarf -o "$tmp/chain-dwarf.data" -- $fx/chain 0.2 >/dev/null 2>&1
$b/cmd/dlflame record -F 100 -o "$tmp/offcpu.data" -- $fx/offcpu_block >/dev/null 2>&1
$b/cmd/dlflame record -F 200 -g dwarf -o "$tmp/symd.data" -- $fx/symd >/dev/null 2>&1
# two ranks on two hosts, merged: hosts per thread, the JOBS section
RANK=0 WORLD_SIZE=2 $b/cmd/dlflame record -F 200 -o "$tmp/rank0.data" -- $fx/chain 0.1 >/dev/null 2>&1
RANK=1 WORLD_SIZE=2 $b/cmd/dlflame record -F 200 -o "$tmp/rank1.data" -- $fx/chain 0.1 >/dev/null 2>&1
$b/cmd/dlflame merge "$tmp/rank0.data" "$tmp/rank1.data" -o "$tmp/merged.data" >/dev/null 2>&1
for f in "$tmp"/*.data; do
  n=$(basename "$f" .data)
  cp "$f" "$out/profile/$n"
  cp "$f" "$out/report/$n"
  # the payload with fuzz_profile_file's mode byte: its version, finalized
  python3 - "$f" "$out/profile/$n.payload" <<'PY'
import struct, sys, zlib
d = open(sys.argv[1], 'rb').read()
version, flags = struct.unpack_from('<II', d, 8)
mode = {1: 0, 2: 1, 3: 4, 4: 8}[version] | (2 if flags & 1 else 0)
open(sys.argv[2], 'wb').write(bytes([mode]) + zlib.decompress(d[40:]))
PY
  cp "$out/profile/$n.payload" "$out/report/$n.payload"
done

# perf.data: perf record in its modes, file and pipe
perf record -q -F 200 -o "$out/perfdata/fp" -- $fx/chain 0.2 >/dev/null 2>&1
perf record -q -F 200 -g -o "$out/perfdata/g" -- $fx/chain 0.2 >/dev/null 2>&1
perf record -q -F 25 --call-graph dwarf,1024 -o "$out/perfdata/dwarf" -- $fx/chain 0.2 >/dev/null 2>&1
perf record -q -e context-switches -g -o "$out/perfdata/cs" -- $fx/offcpu_block >/dev/null 2>&1
perf record -q -F 200 --switch-events -g -o "$out/perfdata/switch" -- $fx/offcpu_block >/dev/null 2>&1
perf record -q -F 200 -g -o - -- $fx/chain 0.2 >"$out/perfdata/pipe" 2>/dev/null

# records with their layout (fuzz_decode.c): each kind's first record, and a run of them
python3 - "$out/decode" "$out"/perfdata/{g,dwarf,switch} <<'PY'
import struct, sys
outdir = sys.argv[1]
for path in sys.argv[2:]:
    d = open(path, 'rb').read()
    attr_size, aoff, asize, doff, dsize = struct.unpack_from('<QQQQQ', d, 16)
    sample_type, = struct.unpack_from('<Q', d, aoff + 24)
    flags, = struct.unpack_from('<Q', d, aoff + 40)
    regs, = struct.unpack_from('<Q', d, aoff + 80)
    layout = struct.pack('<QQB', sample_type, regs, (flags >> 18) & 1)
    recs, pos, seen = [], doff, set()
    while pos + 8 <= doff + dsize:
        typ, misc, size = struct.unpack_from('<IHH', d, pos)
        if size < 8:
            break
        recs.append((typ, d[pos:pos + size]))
        pos += size
    def ring(blob):
        n = 64
        while n < len(blob):
            n *= 2
        return struct.pack('<QQ', len(blob), 0) + blob + bytes(n - len(blob))
    name = path.rsplit('/', 1)[1]
    for typ, r in recs:
        if typ in seen or typ >= 64:
            continue
        seen.add(typ)
        open('%s/%s-%d' % (outdir, name, typ), 'wb').write(layout + ring(r))
    run = b''.join(r for t, r in recs if t < 64)[:4096]
    open('%s/%s-run' % (outdir, name), 'wb').write(layout + ring(run))
PY

# kallsyms: kernel text symbols, an end marker, module symbols, data symbols
{
  grep -m 20 ' [tT] ' /proc/kallsyms || true
  grep -m 3 -E ' (_etext|_stext)$' /proc/kallsyms || true
  grep -m 5 ' [dDbB] ' /proc/kallsyms || true
  grep -m 10 '\[' /proc/kallsyms || true
} >"$out/kallsyms/real"
printf 'ffffffffc0a01000 t mod_fn\t[somemod]\nffffffffc0a01100 T mod_fn2\t[somemod]\n' >"$out/kallsyms/module"
printf '0000000000000000 T zero\n0000000000000000 t zero2\n' >"$out/kallsyms/restricted"

# perf maps as JITs write them
printf '7ffff7ff0000 40 jit_a\n7ffff7ff0040 40 jit_b with spaces\n0x7ffff7ff0100 100 [oneDNN] brgemm\n' >"$out/perfmap/jit"
printf '1000 10 outer\n1004 4 inner\n1004 4 inner_later\nzz 10 bad\n2000 0 empty\n' >"$out/perfmap/nested"

# ELF files: the unwinder's fixture, stripped and not, and one with DWARF
cp tests/fuzz/unwind.elf "$out/elf/unwind.elf"
strip -o "$out/elf/stripped.elf" tests/fuzz/unwind.elf
cp $fx/symd "$out/elf/symd.elf"

# real stacks of unwind.elf at its no-ASLR base (fuzz_unwind.c's FUZZ_BASE)
setarch -R perf record -q -F 200 --call-graph dwarf,2048 -o "$tmp/unwind.data" \
  -- tests/fuzz/unwind.elf 0.3 >/dev/null 2>&1
$b/tests/fuzz/seed-unwind "$tmp/unwind.data" "$out/unwind" 3 >/dev/null
cat "$out"/unwind/unwind-* >"$out/unwind/three"
echo "seeds: $(find "$out" -type f | wc -l) files in $out"
