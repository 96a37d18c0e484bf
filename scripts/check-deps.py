#!/usr/bin/env python3
"""The components' dependency graph is what the build declares and the docs say (ctest deps).

Facts, read from the tree:
- a component is a folder lib/C with a CMakeLists.txt; it is torch-free unless
  its trident_add_library names TORCH;
- its declared dependencies are the trident_X targets its trident_add_library
  names (DEPS, CORE_DEPS); its test's are those plus trident_add_test's DEPS;
  a CORE library (trident_manifest) counts as its component;
- its used dependencies are the components whose headers its files include
  ("trident/X/...": include/ and src/ for the library, test/ for the test),
  directly or through a local header included by path (a test's helpers);
- the layer order is the order of the table in docs/architecture.md.

Fails (exit 1, a line per problem) when a file of lib/C declares a namespace
other than trident::C (or nested in it; base's is trident itself), an
include has no declared dependency, a declared dependency is never included, an edge points up the
layer order, a torch-free component depends on a torch one, the top
CMakeLists.txt adds components in another order than the table, or a row of
the table has another torch flag, other uses or a line count off by more than
max(100, 10%) than the tree. `--fix` rewrites the table's uses and lines.
  python3 scripts/check-deps.py [--fix] [ROOT]   (ctest deps)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]trident/([a-z_]+)/', re.M)
NAMESPACE = re.compile(r"^\s*namespace trident::([a-z_]+)", re.M)
LOCAL = re.compile(r'^\s*#\s*include\s*"([^"]+\.h)"', re.M)
CALL = re.compile(r"trident_add_(library|test)\(([^)]*)\)", re.S)
TARGET = re.compile(r"\btrident_([a-z_]+)\b")
ROW = re.compile(r"^\| `([a-z_]+)` \| (yes|no) \| ([^|]*) \|(.*)\| ~?([0-9,]+) \|$")
TABLE_DOC = "docs/architecture.md"


class Component:
    def __init__(self, root, name):
        self.name = name
        self.dir = os.path.join(root, "lib", name)
        text = open(os.path.join(self.dir, "CMakeLists.txt")).read()
        text = re.sub(r"#.*", "", text)
        self.torch = False
        self.cores = set()
        self.lib_deps, self.test_deps = set(), set()
        for kind, args in CALL.findall(text):
            words = args.split()
            if kind == "library":
                self.torch = "TORCH" in words
                if "CORE" in words:
                    self.cores.add(words[words.index("CORE") + 1])
                self.lib_deps |= set(TARGET.findall(" ".join(words[1:])))
            else:
                self.test_deps |= set(TARGET.findall(" ".join(words[1:])))
        self.lib_deps -= self.cores
        self.lib_uses = self.includes("include", "src")
        self.test_uses = self.includes("test")
        self.lines = sum(self.count(sub) for sub in ("include", "src"))

    def files(self, *subs):
        for sub in subs:
            for d, _, names in os.walk(os.path.join(self.dir, sub)):
                for n in sorted(names):
                    if n.endswith((".h", ".cc")):
                        yield os.path.join(d, n)

    def includes(self, *subs):
        """Components whose headers these files include, directly or through a
        local header they include by a relative path ("../../planner/test/x.h")."""
        found = {}
        todo, seen = list(self.files(*subs)), set()
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            text = open(path, errors="replace").read()
            for dep in INCLUDE.findall(text):
                if dep != self.name:
                    found.setdefault(dep, path)
            for local in LOCAL.findall(text):
                near = os.path.normpath(os.path.join(os.path.dirname(path), local))
                if os.path.exists(near):
                    todo.append(near)
        return found

    def count(self, sub):
        return sum(sum(1 for _ in open(p, errors="replace")) for p in self.files(sub))


def table_rows(root):
    rows = []
    for i, line in enumerate(open(os.path.join(root, TABLE_DOC)).read().split("\n")):
        m = ROW.match(line)
        if m:
            rows.append((i, m))
    return rows


def uses_cell(deps):
    return ", ".join(deps) if deps else "—"


def check(root, fix):
    names = sorted(d for d in os.listdir(os.path.join(root, "lib"))
                   if os.path.exists(os.path.join(root, "lib", d, "CMakeLists.txt")))
    comps = {n: Component(root, n) for n in names}
    owner = {n: n for n in names}
    for c in comps.values():
        for core in c.cores:
            owner[core] = c.name
    rows = table_rows(root)
    order = [m.group(1) for _, m in rows]
    rank = {n: i for i, n in enumerate(order)}
    problems = []
    for n in names:
        if n not in rank:
            problems.append(f"{TABLE_DOC}: component '{n}' has no row in the table (the layer order)")
    for n in order:
        if n not in comps:
            problems.append(f"{TABLE_DOC}: the table names '{n}', which is not a folder of lib/ with a CMakeLists.txt")
    top = re.findall(r"add_subdirectory\(lib/([a-z_]+)\)", open(os.path.join(root, "CMakeLists.txt")).read())
    if [n for n in top if n in rank] != [n for n in order if n in top]:
        problems.append(f"CMakeLists.txt adds lib/ in the order {', '.join(top)}; {TABLE_DOC} orders them "
                        f"{', '.join(order)}")
    for c in comps.values():
        lib_deps = {owner.get(d, d) for d in c.lib_deps}
        test_deps = lib_deps | {owner.get(d, d) for d in c.test_deps}
        for dep, path in sorted(c.lib_uses.items()):
            if dep not in lib_deps:
                problems.append(f"{os.path.relpath(path, root)} includes trident/{dep}/ but lib/{c.name} does not "
                                f"declare trident_{dep} (trident_add_library DEPS)")
        for dep, path in sorted(c.test_uses.items()):
            if dep not in test_deps:
                problems.append(f"{os.path.relpath(path, root)} includes trident/{dep}/ but lib/{c.name}'s test does "
                                f"not declare trident_{dep} (trident_add_library or trident_add_test DEPS)")
        for dep in sorted(lib_deps - set(c.lib_uses)):
            if dep in comps:
                problems.append(f"lib/{c.name}/CMakeLists.txt declares trident_{dep} but no file of its include/ "
                                f"or src/ includes trident/{dep}/")
        for dep in sorted({owner.get(d, d) for d in c.test_deps} - set(c.test_uses)):
            if dep in comps:
                problems.append(f"lib/{c.name}/CMakeLists.txt: its test declares trident_{dep} but no file of "
                                f"test/ includes trident/{dep}/")
        for dep in sorted(set(c.lib_uses) | set(c.test_uses)):
            if dep in rank and c.name in rank and rank[dep] > rank[c.name]:
                problems.append(f"lib/{c.name} uses {dep}, which comes after it in the layer order "
                                f"({TABLE_DOC}): an edge that points up")
            if dep in comps and comps[dep].torch and not c.torch and dep in c.lib_uses:
                problems.append(f"lib/{c.name} is torch-free but uses {dep}, which needs LibTorch")
    for c in comps.values():  # one folder, one namespace (base's is trident itself)
        for path in c.files("include", "src", "test"):
            for ns in NAMESPACE.findall(open(path, errors="replace").read()):
                if ns != c.name and c.name != "base":
                    problems.append(f"{os.path.relpath(path, root)} declares namespace trident::{ns}; "
                                    f"lib/{c.name}'s namespace is trident::{c.name}")
    lines = open(os.path.join(root, TABLE_DOC)).read().split("\n")
    for i, m in rows:
        c = comps.get(m.group(1))
        if c is None:
            continue
        uses = sorted((set(c.lib_uses) & set(comps)), key=lambda d: rank.get(d, 0))
        want_torch = "yes" if c.torch else "no"
        documented = int(m.group(5).replace(",", ""))
        if fix:
            lines[i] = f"| `{c.name}` | {want_torch} | {uses_cell(uses)} |{m.group(4)}| ~{round(c.lines, -1):,} |"
            continue
        if m.group(2) != want_torch:
            problems.append(f"{TABLE_DOC}: '{c.name}' says torch? {m.group(2)}; its CMakeLists says {want_torch}")
        if m.group(3).strip() != uses_cell(uses):
            problems.append(f"{TABLE_DOC}: '{c.name}' uses '{m.group(3).strip()}'; its includes say "
                            f"'{uses_cell(uses)}' (scripts/check-deps.py --fix)")
        if abs(documented - c.lines) > max(100, c.lines // 10):
            problems.append(f"{TABLE_DOC}: '{c.name}' has ~{documented} lines; the tree has {c.lines} "
                            f"(scripts/check-deps.py --fix)")
    if fix:
        open(os.path.join(root, TABLE_DOC), "w").write("\n".join(lines))
    return problems


def main(argv):
    fix = "--fix" in argv
    rest = [a for a in argv if a != "--fix"]
    root = rest[0] if rest else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root, fix)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
