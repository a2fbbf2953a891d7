#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The outputs for viewers of time, through the real CLI.

  --speedscope: the golden files, what speedscope's schema requires of every
  object (file, frame, sampled profile), indices in range, weights summing to
  each profile's endValue, the filters, hostile names, exit codes.
  --trace: the default bound, --max-spans (spans nest, each thread keeps at
  most N, every span left out is counted once, the output says so).

Environment: DLFLAME, MKPROFILE, GOLDEN.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_outputs import check, check_trace, failures, golden, run  # noqa: E402

MKPROFILE = os.environ['MKPROFILE']
SCHEMA = 'https://www.speedscope.app/file-format-schema.json'
UNITS = {'none', 'nanoseconds', 'microseconds', 'milliseconds', 'seconds', 'bytes'}


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_speedscope(data, what):
    """What file-format-schema.json requires (the fields and their types), and more."""
    try:
        doc = json.loads(data)
    except ValueError as e:
        check(False, '%s: invalid JSON: %s' % (what, e))
        return None
    check(doc.get('$schema') == SCHEMA, what + ': $schema')
    check(isinstance(doc.get('shared'), dict) and isinstance(doc['shared'].get('frames'), list),
          what + ': shared.frames')
    check(isinstance(doc.get('profiles'), list), what + ': profiles')
    for key in ['name', 'exporter']:
        check(isinstance(doc.get(key, ''), str), what + ': ' + key + ' is a string')
    frames = doc['shared']['frames']
    for f in frames:
        check(isinstance(f.get('name'), str) and f['name'], what + ': a frame has a name')
        check(isinstance(f.get('file', ''), str), what + ': file is a string')
        check(number(f.get('line', 0)) and number(f.get('col', 0)), what + ': line is a number')
        check(not re.search('[\x00-\x1f\x7f]', f['name'] + f.get('file', '')),
              what + ': no control characters')
    check(len({json.dumps(f, sort_keys=True) for f in frames}) == len(frames),
          what + ': each frame once')
    check(number(doc.get('activeProfileIndex', 0)) and
          0 <= doc.get('activeProfileIndex', 0) < max(1, len(doc['profiles'])),
          what + ': activeProfileIndex in range')
    for p in doc['profiles']:
        name = '%s: profile %s' % (what, p.get('name'))
        for key in ['type', 'name', 'unit', 'startValue', 'endValue', 'samples', 'weights']:
            check(key in p, '%s: has %s' % (name, key))
        check(p.get('type') == 'sampled' and isinstance(p.get('name'), str), name + ': type')
        check(p.get('unit') in UNITS, name + ': unit')
        samples, weights = p.get('samples', []), p.get('weights', [])
        check(len(samples) == len(weights) and samples, name + ': a weight per sample')
        check(all(isinstance(s, list) and all(isinstance(i, int) and 0 <= i < len(frames)
                                                for i in s) for s in samples),
              name + ': stacks index the frames')
        check(all(number(w) and w > 0 for w in weights), name + ': weights > 0')
        check(p['endValue'] - p['startValue'] == sum(weights), name + ': endValue - startValue')
        check(all(samples[i] != samples[i + 1] for i in range(len(samples) - 1)),
              name + ': consecutive samples of one stack merged')
    return doc


def speedscope(tmp, fixed, hostile):
    for args, name in [(['--speedscope', '-o', '-'], 'fixed.speedscope.json'),
                       (['--speedscope', '--wall', '--runqueue', '--lines', '-o', '-'],
                        'fixed-wall.speedscope.json')]:
        r = run('report', '-i', fixed, *args)
        check(r.stdout == golden(name), 'report %s == %s' % (' '.join(args), name))
        check_speedscope(r.stdout, name)

    # the default name, in the current directory
    work = os.path.join(tmp, 'cwd')
    os.makedirs(work, exist_ok=True)
    r = run('report', '-i', fixed, '--speedscope', cwd=work)
    check(os.path.exists(os.path.join(work, 'speedscope.json')), '--speedscope writes speedscope.json')
    check(b'wrote speedscope.json' in r.stderr, '--speedscope names its file: %s' % r.stderr)

    def names(*args):
        doc = check_speedscope(run('report', '-i', fixed, '--speedscope', '-o', '-', *args).stdout,
                               'fixed %s' % ' '.join(args))
        return [p['name'] for p in doc['profiles']] if doc else []

    check(names() == ['mlp-100/100 (on-CPU)', 'mlp-100/100 (off-CPU)', 'omp worker-100/101 (on-CPU)',
                      'omp worker-100/101 (off-CPU)', 'loader-100/102 (off-CPU)'],
          'a profile per thread and view: %s' % names())
    check(names('--offcpu') == ['mlp-100/100 (off-CPU)', 'omp worker-100/101 (off-CPU)',
                                'loader-100/102 (off-CPU)'], '--offcpu: %s' % names('--offcpu'))
    check(names('--tid', '101') == ['omp worker-100/101 (on-CPU)', 'omp worker-100/101 (off-CPU)'],
          '--tid: %s' % names('--tid', '101'))
    check(names('--pid', '1') == [], '--pid that keeps nothing: no profile')
    check(names('--comm', 'loader', '--wall') == ['loader-100/102 (wall)'], '--comm --wall')
    # --time: the loader's 120 ms block clipped to 50 ms
    doc = json.loads(run('report', '-i', fixed, '--speedscope', '-o', '-', '--comm', 'loader',
                         '--time', '0.05,0.1').stdout)
    check(doc['profiles'][0]['weights'] == [50000000], '--time clips: %s' % doc['profiles'])
    check(names('--complete') and all('100/102' not in n for n in names('--cut')), '--complete, --cut')

    # hostile names: valid JSON, the names kept (escaped), no structure broken
    doc = check_speedscope(run('report', '-i', hostile, '--speedscope', '--wall', '--runqueue',
                               '--lines', '-o', '-').stdout, 'hostile speedscope')
    if doc:
        check(any(f['name'] == '<script>alert(1)</script>' for f in doc['shared']['frames']),
              'hostile: names survive')
        check(len(doc['profiles']) == 3, 'hostile: a profile per thread')

    # exit codes
    for args, msg in [(['--speedscope', '--reverse'], b'--reverse applies'),
                      (['--speedscope', '--svg'], b'choose one of'),
                      (['--speedscope', '--title', 'x'], b'--title applies'),
                      (['--speedscope', '--max-spans', '5'], b'--max-spans applies'),
                      (['--trace', '--max-spans', 'x'], b'--max-spans takes')]:
        r = run('report', '-i', fixed, *args, '-o', '-', check_rc=2)
        check(msg in r.stderr, '%s: %s' % (args, r.stderr))


def trace(tmp):
    wide = os.path.join(tmp, 'wide.data')
    subprocess.run([MKPROFILE, 'wide', wide], check=True)
    full = run('report', '-i', wide, '--trace', '-o', '-', '--max-spans', '0').stdout
    total = sum(1 for e in json.loads(full)['traceEvents'] if e['ph'] == 'X')
    # the default bound: the wide profile fits whole, and nothing says otherwise
    r = run('report', '-i', wide, '--trace', '-o', '-')
    check(r.stdout == full and b'longest spans' not in r.stderr, 'under the default bound: whole')
    r = run('report', '-i', wide, '--trace', '-o', '-', '--max-spans', '300')
    check_trace(r.stdout, 'wide --max-spans 300')
    doc = json.loads(r.stdout)
    spans = [e for e in doc['traceEvents'] if e['ph'] == 'X']
    summaries = [e for e in spans if e['cat'] == 'hidden']
    hidden = sum(e.get('args', {}).get('hidden', 0) for e in spans)
    check(0 < len(spans) <= 300, '--max-spans 300: %d spans' % len(spans))
    check(hidden == doc['otherData']['hidden_spans'] and
          len(spans) - len(summaries) + hidden == total,
          'every span written or counted once: %d + %d of %d' % (len(spans), hidden, total))
    check(doc['otherData']['span_bound'] == '300 spans per track', 'otherData states the bound')
    check(any(re.match(r'wide \(spans under .* hidden\)$', e['args']['name'])
              for e in doc['traceEvents'] if e['ph'] == 'M'), "the track's name states the cut")
    check(b'shorter spans' in r.stderr and b'--max-spans N' in r.stderr,
          'the report says what it left out: %s' % r.stderr)


def main():
    with tempfile.TemporaryDirectory(prefix='dlflame-timelines-') as tmp:
        fixed = os.path.join(tmp, 'fixed.data')
        hostile = os.path.join(tmp, 'hostile.data')
        subprocess.run([MKPROFILE, 'fixed', fixed], check=True)
        subprocess.run([MKPROFILE, 'hostile', hostile], check=True)
        speedscope(tmp, fixed, hostile)
        trace(tmp)
    if failures:
        print('%d check(s) failed' % len(failures))
        sys.exit(1)
    print('all checks passed')


if __name__ == '__main__':
    main()
