#!/usr/bin/env python3
"""Checks that the docs still name things that exist (ctest `docs`).

For docs/*.md and docs/internals/*.md, outside fenced code blocks:
  - every repository path written in backticks or as a link target
    (`src/engine/kernels/kernels.c`, `engine/quant/`, [x](internals/quant.md))
    must exist: paths resolve against the repository root, then src/, then
    the document's folder;
  - every `symbol()` and `table[]` in backticks (a C identifier followed by
    "()" or "[]") must occur in the sources (src/, tools/, bench/, tests/).
And every docs/....md or spec/....md file a source comment cites must exist
(one written after "Ollama's" is Ollama's, not ours).

Only what looks like one of ours is checked, so prose stays free: a path must
start with a top-level folder of the repository or a module of src/, and
contain no wildcard or placeholder (*, <, {, ...) nor end in another
language's extension (.go, .cpp, .mdx, ...); a symbol in Go's or
JavaScript's case (ParseModelfile(), parseFromModel()) is someone else's.

Usage: check_docs.py ROOT
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), '..', '..'))
FOREIGN_EXT = ('.go', '.cpp', '.cc', '.hpp', '.mdx', '.ts', '.rs', '.swift')
SRC_EXT = ('.c', '.h', '.inc', '.def', '.py', '.sh', '.txt', '.cmake', '.js', '.mjs')

TICK = re.compile(r'`([^`\n]+)`')
LINK = re.compile(r'\]\(([^)\s#]+)(?:#[^)]*)?\)')
SYMBOL = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)(\(\)|\[\])$')
# Go's and JavaScript's names (ParseModelfile, parseFromModel) are others'.
FOREIGN = re.compile(r'^(?:[A-Z]\w*|[a-z][a-z0-9]*[A-Z]\w*)$')
PATHISH = re.compile(r'^[A-Za-z0-9_.\-/]+$')


def top_names():
    tops = {n for n in os.listdir(ROOT) if not n.startswith('.')}
    mods = set(os.listdir(os.path.join(ROOT, 'src')))
    return tops, mods


def source_text():
    chunks = []
    for top in ('src', 'tools', 'bench', 'tests'):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(SRC_EXT):
                    with open(os.path.join(d, f), errors='replace') as fh:
                        chunks.append(fh.read())
    return '\n'.join(chunks)


def path_exists(p, doc_dir):
    p = p.rstrip('/')
    for base in (ROOT, os.path.join(ROOT, 'src'), doc_dir):
        if os.path.exists(os.path.normpath(os.path.join(base, p))):
            return True
    return False


def candidates(line):
    """(kind, text) pairs worth checking on one line of prose."""
    for m in TICK.finditer(line):
        t = m.group(1).strip()
        s = SYMBOL.match(t)
        if s:
            if not FOREIGN.match(s.group(1)):
                yield 'symbol', s.group(1)
        elif PATHISH.match(t):
            yield 'path', t
    for m in LINK.finditer(line):
        t = m.group(1)
        if '://' not in t and not t.startswith('mailto:'):
            yield 'link', t


def looks_like_ours(p, tops, mods):
    if '/' not in p or p.startswith(('/', '~', '.')) or '...' in p:
        return False
    if p.endswith(FOREIGN_EXT):  # Ollama's, llama.cpp's files (server/routes.go)
        return False
    first = p.split('/', 1)[0]
    return first in tops or first in mods


def check_doc(path, tops, mods, src, problems):
    doc_dir = os.path.dirname(path)
    rel = os.path.relpath(path, ROOT)
    fenced = False
    with open(path, errors='replace') as fh:
        for n, line in enumerate(fh, 1):
            if line.lstrip().startswith('```'):
                fenced = not fenced
                continue
            if fenced:
                continue
            for kind, t in candidates(line):
                if kind == 'symbol':
                    if not re.search(r'\b%s\b' % re.escape(t), src):
                        problems.append('%s:%d: symbol %s not found in the sources' %
                                        (rel, n, t))
                elif kind == 'link':
                    if not path_exists(t, doc_dir):
                        problems.append('%s:%d: link target %s does not exist' % (rel, n, t))
                elif looks_like_ours(t, tops, mods) and not path_exists(t, doc_dir):
                    problems.append('%s:%d: path %s does not exist' % (rel, n, t))


def check_comment_citations(problems):
    cite = re.compile(
        r'(?<![A-Za-z0-9_/])((?:docs/)?spec/[a-z0-9_\-]+\.md|docs/[A-Za-z0-9_/\-]+\.md)(?![A-Za-z])')
    for top in ('src', 'tools', 'bench'):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if not f.endswith(SRC_EXT):
                    continue
                p = os.path.join(d, f)
                with open(p, errors='replace') as fh:
                    for n, line in enumerate(fh, 1):
                        for m in cite.finditer(line):
                            c = m.group(1)
                            if line[:m.start()].rstrip().endswith("Ollama's"):
                                continue  # a file of Ollama's repository
                            if not c.startswith('docs/'):
                                problems.append('%s:%d: cites %s (write docs/%s)' %
                                                (os.path.relpath(p, ROOT), n, c, c))
                            elif not os.path.exists(os.path.join(ROOT, c)):
                                problems.append('%s:%d: cites missing %s' %
                                                (os.path.relpath(p, ROOT), n, c))


def main():
    tops, mods = top_names()
    src = source_text()
    problems = []
    docs = [os.path.join(ROOT, 'docs', f) for f in sorted(os.listdir(os.path.join(ROOT, 'docs')))]
    internals = os.path.join(ROOT, 'docs', 'internals')
    if os.path.isdir(internals):
        docs += [os.path.join(internals, f) for f in sorted(os.listdir(internals))]
    checked = 0
    for p in docs:
        if p.endswith('.md') and os.path.isfile(p):
            check_doc(p, tops, mods, src, problems)
            checked += 1
    check_comment_citations(problems)
    for p in problems:
        print(p)
    print('%d documents checked, %d problems' % (checked, len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
