#!/usr/bin/env python3
"""Every relative link in the Markdown files resolves (ctest links).

A link `[text](path)` or `[text](path#anchor)` whose path is not a URL must
name a file or folder of the checkout, relative to the page; an anchor must be
the GitHub slug of a heading of the page it names (lower case, punctuation
other than `-` and `_` dropped, spaces made `-`, a repeated slug numbered).
Fails (exit 1, a line per problem).
  python3 scripts/check-links.py [ROOT]   (ctest links)
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.split()
    found = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
        found += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(".md")]
    return found


def prose_lines(text):
    """The lines outside fenced code blocks, with their numbers."""
    inside = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, line


def slug(heading):
    text = re.sub(r"`|\*\*|\*", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for _, line in prose_lines(open(path, errors="replace").read()):
        m = HEADING.match(line)
        if not m:
            continue
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def check(root):
    problems = []
    cache = {}
    for page in markdown_files(root):
        full = os.path.join(root, page)
        for number, line in prose_lines(open(full, errors="replace").read()):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(full), path)) if path else full
                if not os.path.exists(dest):
                    problems.append(f"{page}:{number}: link '{target}' names {os.path.relpath(dest, root)}, "
                                    "which does not exist")
                    continue
                if anchor and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        problems.append(f"{page}:{number}: link '{target}': {os.path.relpath(dest, root)} has no "
                                        f"heading whose anchor is '{anchor}'")
    return problems


def main(argv):
    root = argv[0] if argv else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
