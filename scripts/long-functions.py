#!/usr/bin/env python3
"""Lists the C functions longer than a limit (STYLE.md: under ~80 lines),
longest first, with ctags' start and end lines.

Usage: scripts/long-functions.py [--limit N] [paths...]   (default: 80, src)
"""
import json
import subprocess
import sys


def main(argv):
    limit, paths = 80, []
    it = iter(argv)
    for a in it:
        if a == '--limit':
            limit = int(next(it))
        else:
            paths.append(a)
    cmd = ['ctags', '--output-format=json', '--fields=+ne', '--languages=C', '--kinds-C=f',
           '-R', '-f', '-'] + (paths or ['src'])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        t = json.loads(line)
        if t.get('_type') == 'tag' and 'end' in t:
            rows.append((t['end'] - t['line'] + 1, t['path'], t['line'], t['name']))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    long_rows = [r for r in rows if r[0] > limit]
    for n, path, line, name in long_rows:
        print(f'{n:5d}  {path}:{line}  {name}')
    return 1 if long_rows else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
