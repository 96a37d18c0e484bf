#!/usr/bin/env python3
"""Every Note resolves (ctest notes).

A Note is defined once, by a line that holds only `Note [Title]` (after a
comment marker `//` or `#`, or alone in a Python docstring) followed by a line
of `~` (its underline), or in Markdown by a heading that ends in
`(Note [Title])` where no code defines it. Everywhere else `Note [Title]` is a reference. Fails
(exit 1, a line per problem) when a reference names no definition, when a
reference `Note [Title] in FILE` (FILE a path or its tail, in backticks or
not, on the same line or the next; lib/C/src/F may be named C/F) names a
file that does not define it, when
a definition-shaped line has no underline, when a title is defined twice or
is the start of another title (`[Recomputation]` beside `[Recomputation
costs]`), or when a Note defined in a component's private src/ is cited by
code outside that component (lib/C/...; the docs may cite it): a Note other
code relies on lives in a public header.
  python3 scripts/check-notes.py [ROOT]   (ctest notes)
"""
import os
import re
import subprocess
import sys

NOTE = re.compile(r"Note \[([^\]]+)\]")
PATHLIKE = r"`?([A-Za-z0-9_.][A-Za-z0-9_./-]*\.(?:h|cc|py|sh|md|cmake|txt|yaml))`?"
IN_FILE = re.compile(r"Note \[([^\]]+)\],?\s+in\s+" + PATHLIKE)
MARKER = re.compile(r"^\s*(?://+|#+)?\s?")
SUFFIXES = (".h", ".cc", ".py", ".sh", ".md", ".cmake", ".txt", ".yaml")


def files(root):
    """The checkout's files (git's list; outside a git checkout, the tree without build directories), less this
    script, whose text shows the forms it checks."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
        listed = out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        listed = [os.path.relpath(os.path.join(d, f), root) for d, dirs, fs in os.walk(root) for f in fs
                  if not os.path.relpath(d, root).startswith(("build", ".git", "runs"))]
    me = os.path.relpath(os.path.abspath(__file__), os.path.abspath(root))
    return [f for f in listed if f != me and (f.endswith(SUFFIXES) or os.path.basename(f) in ("Makefile", "run"))]


def short(path):
    """lib/C/src/F and lib/C/include/trident/C/F as C/F, the way references name them."""
    m = re.fullmatch(r"lib/([^/]+)/(?:src|include/trident/\1)/(.+)", path)
    return m.group(1) + "/" + m.group(2) if m else path


def names(ref, home):
    return any(full == ref or full.endswith("/" + ref) for full in (home, short(home)))


def bare(line):
    return MARKER.sub("", line, count=1).strip()


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    defined, headings, problems, texts = {}, {}, [], {}
    for f in files(root):
        try:
            lines = open(os.path.join(root, f), encoding="utf-8").read().splitlines()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        texts[f] = lines
        for i, line in enumerate(lines):
            heading = re.match(r"^#+ .*\(Note \[([^\]]+)\]\)\s*$", line) if f.endswith(".md") else None
            m = re.fullmatch(r"Note \[([^\]]+)\]", bare(line))
            if heading:
                headings.setdefault(heading.group(1), f)
                continue
            if m and not f.endswith(".md"):
                title = m.group(1)
                if i + 1 >= len(lines) or not re.fullmatch(r"~+", bare(lines[i + 1])):
                    problems.append("%s:%d: Note [%s] has no underline (a line of ~ under its title)" % (f, i + 1, title))
                    continue
            else:
                continue
            if title in defined:
                problems.append("%s:%d: Note [%s] is defined again (first in %s)" % (f, i + 1, title, defined[title]))
            else:
                defined[title] = f
    for title, f in headings.items():  # a page's section defines a Note only where no code does
        defined.setdefault(title, f)
    for f, lines in texts.items():
        for i, line in enumerate(lines):
            for m in NOTE.finditer(line):
                if m.group(1) not in defined:
                    problems.append("%s:%d: Note [%s] is defined nowhere" % (f, i + 1, m.group(1)))
            # A reference and its file, the file perhaps on the next line.
            joined = bare(line) + " " + (bare(lines[i + 1]) if i + 1 < len(lines) else "")
            for m in IN_FILE.finditer(joined):
                if m.start() >= len(bare(line)):
                    continue  # begins on the next line: checked there
                title, path = m.group(1), m.group(2).rstrip(".")
                home = defined.get(title)
                if home and not names(path, home):
                    problems.append("%s:%d: Note [%s] in %s: it is defined in %s" % (f, i + 1, title, path, home))
    titles = sorted(defined)
    for a in titles:
        for b in titles:
            if a != b and b.startswith(a):
                problems.append("Note [%s] (%s) is the start of Note [%s] (%s): give one a title of its own"
                                % (a, defined[a], b, defined[b]))
    for f, lines in texts.items():
        for i, line in enumerate(lines):
            for m in NOTE.finditer(line):
                home = defined.get(m.group(1), "")
                owner = re.match(r"lib/([^/]+)/src/", home)
                if owner and not f.startswith("lib/%s/" % owner.group(1)) and not f.endswith(".md"):
                    problems.append("%s:%d: Note [%s] is private to lib/%s (%s); move it to a public header"
                                    % (f, i + 1, m.group(1), owner.group(1), home))
    for p in problems:
        print(p)
    print("notes: %d defined, %d problem(s)" % (len(defined), len(problems)), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
