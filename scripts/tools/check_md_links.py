#!/usr/bin/env python3
"""Checks the relative links of Markdown files: each [text](path#anchor) must name a file or
folder that exists, and an anchor into a Markdown file must be one of its headings as GitHub
renders it (lower case, punctuation but '-' and '_' dropped, spaces to '-', a repeated heading
'-1', '-2', ...). Web links (http:, https:, mailto:) are not followed. Prints one line a broken
link, "FILE:LINE: target: why", and exits 1 if there was one.

    scripts/tools/check_md_links.py FILE.md...
"""
import os
import re
import sys

LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def outside_fences(path):
    """(line number, text) of the lines outside fenced code blocks."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                inside = not inside
            elif not inside:
                yield n, line


def prose_lines(path):
    """outside_fences's lines with inline code blanked (a link there is not one)."""
    for n, line in outside_fences(path):
        yield n, re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    """The anchors of a Markdown file: its headings' slugs and its HTML <a name|id="..."> anchors."""
    if path not in _anchors:
        seen, found = {}, set()
        for _, line in outside_fences(path):
            found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line))
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                found.add(s if s not in seen else f"{s}-{seen[s]}")
                seen[s] = seen.get(s, 0) + 1
        _anchors[path] = found
    return _anchors[path]


def check(md):
    broken = []
    for n, line in prose_lines(md):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            if not os.path.exists(dest):
                broken.append(f"{md}:{n}: {target}: no such file or folder")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                broken.append(f"{md}:{n}: {target}: no heading '{anchor}' in {dest}")
    return broken


def main(files):
    if not files:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    broken = [b for md in files for b in check(md)]
    for b in broken:
        print(b)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
