#!/usr/bin/env python3
"""Embed a text file into a C header as a NUL-terminated char array.

Usage: embed.py INPUT OUTPUT NAME
"""
import sys


def main():
    src, dst, name = sys.argv[1:4]
    data = open(src, 'rb').read()
    lines = ['/* generated from %s by scripts/embed.py; do not edit */' % src.split('/')[-1],
             'static const char %s[] = {' % name]
    for i in range(0, len(data), 16):
        lines.append('  ' + ', '.join('0x%02x' % b for b in data[i:i + 16]) + ',')
    lines.append('  0x00\n};')
    lines.append('static const unsigned long %s_len = %d;' % (name, len(data)))
    with open(dst, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
