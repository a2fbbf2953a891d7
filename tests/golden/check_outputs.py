#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every output format through the real CLI, on the fixed and hostile profiles.

  check_outputs.py cli     goldens via the CLI, default names, exit codes, filters,
                           hostile names in every format (xmllint, json), trace nesting
  check_outputs.py pprof   the pprof export read back by the real pprof: its -top
                           must match `dlflame report --top` (skips, 77, without pprof)

Environment: DLFLAME, MKPROFILE, GOLDEN (the golden dir), SOURCE_ROOT, PPROF (optional).
"""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

DLFLAME = os.environ['DLFLAME']
MKPROFILE = os.environ['MKPROFILE']
GOLDEN = os.environ['GOLDEN']
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print('FAIL: ' + what, flush=True)


def run(*args, cwd=None, stdout=subprocess.PIPE, check_rc=0):
    r = subprocess.run([DLFLAME, *args], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE)
    if check_rc is not None and r.returncode != check_rc:
        failures.append('dlflame %s: exit %d, want %d: %s' %
                        (' '.join(args), r.returncode, check_rc, r.stderr.decode(errors='replace')))
        print('FAIL: ' + failures[-1], flush=True)
    return r


def golden(name):
    with open(os.path.join(GOLDEN, name), 'rb') as f:
        return f.read()


def xml_ok(path):
    r = subprocess.run(['xmllint', '--noout', path], capture_output=True)
    return r.returncode == 0


def xpath(path, expr):
    r = subprocess.run(['xmllint', '--xpath', expr, path], capture_output=True)
    return r.stdout.decode().strip()


def folded_shape(text):
    """Frames per line and line count: a name that adds a frame changes it."""
    # bytes: str.splitlines() would also split at U+2028, which names may hold
    return sorted(line.rsplit(b' ', 1)[0].count(b';') for line in text.split(b'\n') if line)


def check_trace(data, what):
    """Valid JSON; per thread, X spans nest and never partly overlap."""
    try:
        doc = json.loads(data)
    except ValueError as e:
        check(False, '%s: invalid JSON: %s' % (what, e))
        return
    events = doc['traceEvents']
    check(all(isinstance(e['name'], str) for e in events), what + ': names are strings')
    check(not any(re.search('[\x00-\x1f\x7f]', e['name']) for e in events),
          what + ': no control characters in names')
    by_thread = {}
    for e in events:
        if e['ph'] == 'X':
            check(e['dur'] >= 0 and e['ts'] >= 0, what + ': ts and dur >= 0')
            by_thread.setdefault((e['pid'], e['tid']), []).append(e)
        else:
            check(e['ph'] == 'M', what + ': only X and M events')
    for tid, spans in by_thread.items():
        # ns integers: the file writes microseconds with 3 decimals
        spans = [(round(e['ts'] * 1000), round((e['ts'] + e['dur']) * 1000)) for e in spans]
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for s, t in spans:
            while stack and stack[-1][1] <= s:
                stack.pop()
            check(not stack or t <= stack[-1][1],
                  '%s: span %d-%d of %s crosses its parent %s' % (what, s, t, tid, stack[-1:]))
            stack.append((s, t))


def cli(tmp):
    fixed = os.path.join(tmp, 'fixed.data')
    hostile = os.path.join(tmp, 'hostile.data')
    subprocess.run([MKPROFILE, 'fixed', fixed], check=True)
    subprocess.run([MKPROFILE, 'hostile', hostile], check=True)

    # the CLI writes exactly what the library writes (tests/unit/test_outputs.c)
    for args, name in [
            (['--folded'], 'fixed.folded'),
            (['--folded', '--offcpu'], 'fixed-offcpu.folded'),
            (['--folded', '--wall', '--runqueue'], 'fixed-wall.folded'),
            (['--top', '-n', '0'], 'fixed.top'),
            (['--top', '--by', 'module', '--wall'], 'fixed-module-wall.top'),
            (['--top', '--by', 'kind', '--sort', 'total'], 'fixed-kind.top'),
            (['--trace', '-o', '-'], 'fixed.trace.json'),
            (['--trace', '--wall', '--runqueue', '-o', '-'], 'fixed-wall.trace.json')]:
        r = run('report', '-i', fixed, *args)
        check(r.stdout == golden(name), 'report %s == %s' % (' '.join(args), name))

    check_trace(run('report', '-i', fixed, '--trace', '--wall', '--runqueue', '-o', '-').stdout,
                'fixed wall trace')

    # default output names, in the current directory
    work = os.path.join(tmp, 'cwd')
    os.mkdir(work)
    for args, name in [(['--svg'], 'flame.svg'), (['--pprof'], 'profile.pb.gz'),
                       (['--trace'], 'trace.json')]:
        r = run('report', '-i', fixed, *args, cwd=work)
        check(os.path.exists(os.path.join(work, name)), 'report %s writes %s' % (args[0], name))
        check(name.encode() in r.stderr, 'report %s names %s: %s' % (args[0], name, r.stderr))
    run('diff', fixed, fixed, '--svg', cwd=work)
    check(os.path.exists(os.path.join(work, 'diff.svg')), 'diff --svg writes diff.svg')
    check(xml_ok(os.path.join(work, 'diff.svg')), 'diff.svg is well-formed')
    check(not [f for f in os.listdir(work) if '.tmp.' in f], 'no temporary files left')
    with gzip.open(os.path.join(work, 'profile.pb.gz')) as f:
        check(len(f.read()) > 100, 'profile.pb.gz is gzip')

    # filters on every report
    r = run('report', '-i', fixed, '--folded', '--pid', '100', '--tid', '101,999')
    check(r.stdout == b'omp worker;start_thread;[truncated] 1\n'
          b'omp worker;start_thread;gomp_thread_start;brgemm_kernel_f32_[j] 7\n',
          '--pid --tid: %s' % r.stdout)
    r = run('report', '-i', fixed, '--folded', '--offcpu', '--comm', 'loader',
            '--time', '0.05,0.1')
    check(r.stdout == b'loader;main;train_epoch;read_batch;read;ksys_read_[k];schedule_[k] 50000\n',
          '--comm --time: %s' % r.stdout)
    r = run('report', '-i', fixed, '--top', '--per-thread', '--by', 'kind', '--time', ',0.1')
    check(b'Total: 13 samples' in r.stdout, '--time ,END on --top: %s' % r.stdout)
    r = run('report', '-i', fixed, '--folded', '--per-thread', '--comm', 'mlp')
    check(r.stdout and all(l.startswith(b'mlp-100/100;') for l in r.stdout.splitlines()),
          '--per-thread: %s' % r.stdout)
    r = run('report', '-i', fixed, '--folded', '--offcpu', '--min-block', '1000')
    check(b'schedule_[k] 30000\n' in r.stdout, '--min-block: %s' % r.stdout)
    r = run('report', '-i', fixed, '--folded', '--lines')
    check(b'mlp;main;train_epoch;forward (mlp.c:131) 2\n' in r.stdout and
          b'forward (mlp.c:120);brgemm_kernel_f32_[j] 2\n' in r.stdout, '--lines: %s' % r.stdout)
    r = run('report', '-i', fixed, '--folded', '--pid', '1')
    check(r.stdout == b'' and b'no samples' in r.stderr, 'a filter that keeps nothing warns')
    for fmt in ['--svg', '--top', '--pprof', '--trace', '--folded']:
        r = run('report', '-i', fixed, fmt, '--comm', 'loader', '--wall', '--time', '0.01,',
                '-o', os.path.join(tmp, 'f.out'))

    # exit codes and one-line errors
    for args, rc, msg in [
            (['report', '-i', fixed, '--bogus'], 2, b"unknown option '--bogus'"),
            (['report', '-i', fixed], 2, b'choose an output'),
            (['report', '-i', fixed, '--svg', '--top'], 2, b'choose one of'),
            (['report', '-i', fixed, '--top', '--title', 'x'], 2, b'--title applies to --svg'),
            (['report', '-i', fixed, '--svg', '-n', '3'], 2, b'-n applies to --top'),
            (['report', '-i', fixed, '--folded', '--time', '5,1'], 2, b'--time takes'),
            (['report', '-i', fixed, '--folded', '--pid', 'x'], 2, b'--pid takes'),
            (['report', '-i', fixed, '--svg', '--minwidth', '200%'], 2, b'--minwidth takes'),
            (['report', '-i', fixed, '--top', '--by', 'file'], 2, b'--by takes'),
            (['report', '-i', fixed, '--folded', '--min-block', '5'], 2, b'--min-block applies'),
            (['report', '-i', fixed, '--offcpu', '--wall', '--folded'], 2, b'choose one'),
            (['report', '-i', fixed, '--trace', '--reverse'], 2, b'--reverse applies'),
            (['report', '-i', os.path.join(tmp, 'none'), '--top'], 1, b'no such file'),
            (['report', '-i', MKPROFILE, '--top'], 1, b'cannot read'),
            (['diff', fixed], 2, b'name two profiles'),
            (['diff', fixed, fixed], 2, b'choose one output'),
            (['diff', fixed, fixed, fixed, '--svg'], 2, b'unexpected argument'),
            (['diff', fixed, os.path.join(tmp, 'none'), '--folded'], 1, b'no such file'),
            (['diff', fixed, fixed, '--folded', '--title', 'x'], 2, b'--title applies')]:
        r = run(*args, check_rc=rc)
        lines = r.stderr.decode(errors='replace').splitlines()
        check(msg in r.stderr, '%s: message %s in %s' % (' '.join(args), msg, r.stderr))
        check(len(lines) == (2 if rc == 2 else 1) and lines[0].startswith('dlflame: '),
              '%s: one line (and the --help hint): %s' % (' '.join(args), lines))
    for cmd in ['report', 'diff']:
        r = run(cmd, '--help')
        check(b'Usage: dlflame ' + cmd.encode() in r.stdout, cmd + ' --help')
    with open('/dev/full', 'wb') as full:
        r = run('report', '-i', fixed, '--top', stdout=full, check_rc=1)
        check(b'No space left' in r.stderr, 'a full stdout is an error: %s' % r.stderr)

    # diff: difffolded of a profile with itself
    r = run('diff', fixed, fixed, '--folded')
    check(all(l.split()[-1] == l.split()[-2] for l in r.stdout.splitlines()) and r.stdout,
          'diff of a profile with itself: equal columns')

    # hostile names in every output
    check(folded_shape(run('report', '-i', hostile, '--folded').stdout) ==
          folded_shape(run('report', '-i', fixed, '--folded').stdout),
          'hostile folded: no name adds or removes a frame')
    check(folded_shape(run('report', '-i', hostile, '--folded', '--wall', '--runqueue').stdout) ==
          folded_shape(run('report', '-i', fixed, '--folded', '--wall', '--runqueue').stdout),
          'hostile wall folded: no name adds or removes a frame')
    for args in [[], ['--inverted'], ['--flamechart'], ['--wall', '--runqueue'], ['--per-thread'],
                 ['--reverse'], ['--lines'], ['--title', '<script>alert(1)</script>', '--subtitle', ']]>']]:
        svg = os.path.join(tmp, 'h.svg')
        run('report', '-i', hostile, '--svg', '-o', svg, *args)
        what = 'hostile svg %s' % args
        check(xml_ok(svg), what + ': well-formed')
        check(xpath(svg, 'count(//*[local-name()="script"])') == '1', what + ': one script')
        check(xpath(svg, 'count(//@*[starts-with(name(), "on")])') == '0', what + ': no handlers')
        check(xpath(svg, 'count(//*[local-name()="x"])') == '0', what + ': no injected element')
        data = open(svg, 'rb').read()
        check(b'\x1b' not in data and b'\x00' not in data, what + ': no ESC or NUL')
    svg = os.path.join(tmp, 'hd.svg')
    run('diff', hostile, fixed, '--svg', '-o', svg)
    check(xml_ok(svg), 'hostile diff svg well-formed')
    r = run('diff', hostile, hostile, '--folded')
    check(len(r.stdout.splitlines()) == len(run('report', '-i', fixed, '--folded').stdout.splitlines()),
          'hostile difffolded: one line per stack')
    check_trace(run('report', '-i', hostile, '--trace', '--wall', '--runqueue', '-o', '-').stdout,
                'hostile trace')
    check_trace(run('report', '-i', hostile, '--trace', '--lines', '-o', '-').stdout,
                'hostile trace with lines')
    check(folded_shape(run('report', '-i', hostile, '--folded', '--lines').stdout) ==
          folded_shape(run('report', '-i', fixed, '--folded', '--lines').stdout),
          'hostile folded with lines: file names add no frame')
    top = run('report', '-i', hostile, '--top', '-n', '0').stdout
    check(not re.search(b'[\x00-\x09\x0b-\x1f\x7f]', top), 'hostile top: no control bytes')
    check(len(top.splitlines()) == len(run('report', '-i', fixed, '--top', '-n', '0').stdout.splitlines()),
          'hostile top: a line per function')


def find_pprof():
    for p in [os.environ.get('PPROF'),
              os.path.join(os.environ.get('SOURCE_ROOT', '.'), 'build', 'tools', 'pprof'),
              shutil.which('pprof')]:
        if p and os.access(p, os.X_OK):
            return p
    return None


def parse_top(text):
    """report --top rows -> {name: (self, total)}, the kind suffix dropped."""
    rows = {}
    for line in text.splitlines()[2:]:
        f = line.split(None, 4)
        if len(f) == 5 and f[0].isdigit():
            rows[re.sub(r'_\[[kji]\]$', '', f[4])] = (int(f[0]), int(f[2]))
    return rows


def parse_pprof_top(text):
    """pprof -top rows -> {name: (flat, cum)}; "(inline)" marks dropped."""
    rows = {}
    body = False
    for line in text.splitlines():
        if line.strip().startswith('flat'):
            body = True
            continue
        f = line.split(None, 5)
        if body and len(f) == 6:
            rows[re.sub(r' \(inline\)$', '', f[5])] = (int(f[0]), int(f[3]))
    return rows


def pprof(tmp):
    tool = find_pprof()
    if not tool:
        print('SKIP: no pprof (scripts/setup.sh builds it into build/tools/pprof)')
        sys.exit(77)
    fixed = os.path.join(tmp, 'fixed.data')
    hostile = os.path.join(tmp, 'hostile.data')
    subprocess.run([MKPROFILE, 'fixed', fixed], check=True)
    subprocess.run([MKPROFILE, 'hostile', hostile], check=True)
    env = dict(os.environ, PPROF_TMPDIR=tmp, HOME=tmp)

    for extra in [[], ['--comm', 'omp worker'], ['--time', '0.05,']]:
        out = os.path.join(tmp, 'p.pb.gz')
        run('report', '-i', fixed, '--pprof', '-o', out, *extra)
        r = subprocess.run([tool, '-top', '-nodecount=1000', '-nodefraction=0',
                            '-sample_index=samples', out], capture_output=True, env=env)
        check(r.returncode == 0, 'pprof reads the export: %s' % r.stderr)
        theirs = parse_pprof_top(r.stdout.decode())
        ours = parse_top(run('report', '-i', fixed, '--top', '-n', '0', *extra).stdout.decode())
        print('report --top %s:' % extra, sorted(ours.items()))
        print('pprof -top:', sorted(theirs.items()))
        check(ours and ours == theirs, 'pprof -top == report --top %s' % extra)

    # off-CPU time survives too, in its own sample type
    out = os.path.join(tmp, 'o.pb.gz')
    run('report', '-i', fixed, '--pprof', '--offcpu', '-o', out)
    r = subprocess.run([tool, '-top', '-nodecount=1000', '-nodefraction=0', '-unit=us', out],
                       capture_output=True, env=env)
    text = r.stdout.decode()
    check('Type: offcpu' in text, 'offcpu sample type: %s' % text)
    theirs = {k: v for k, v in
              ((m.group(3), (int(m.group(1)), int(m.group(2)))) for m in
               re.finditer(r'^\s*(\d+)(?:us)?\s+\S+\s+\S+\s+(\d+)(?:us)?\s+\S+\s+(.*)$', text,
                           re.M))}
    ours = parse_top(run('report', '-i', fixed, '--top', '--offcpu', '-n', '0').stdout.decode())
    check(ours and ours == theirs, 'pprof offcpu -top == report --top --offcpu: %s %s' %
          (sorted(ours.items()), sorted(theirs.items())))

    out = os.path.join(tmp, 'h.pb.gz')
    run('report', '-i', hostile, '--pprof', '-o', out)
    r = subprocess.run([tool, '-top', out], capture_output=True, env=env)
    check(r.returncode == 0 and b'Showing nodes' in r.stdout, 'pprof reads the hostile export')


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else 'cli'
    with tempfile.TemporaryDirectory(prefix='dlflame-outputs-') as tmp:
        {'cli': cli, 'pprof': pprof}[mode](tmp)
    if failures:
        print('%d check(s) failed' % len(failures))
        sys.exit(1)
    print('all checks passed')


if __name__ == '__main__':
    main()
