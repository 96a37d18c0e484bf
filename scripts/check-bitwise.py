#!/usr/bin/env python3
"""Every bit-for-bit comparison in trident's tests says why it holds on any machine.

    check-bitwise.py [SOURCE_DIR]        (ctest: bitwise_reasons)

See Note [Bitwise comparisons] in tools/trident/test/lib.sh. Two runs agree in
every bit only where they run the same kernels (BLAS kernel, ATen CPU
capability, oneDNN ISA, bf16 native or emulated, thread count) on the same
shapes in the same order; that two kernels happened to agree on the machine a
test was written on is luck (issue 52: Prescott and Cooperlake agreed on AMD,
not on Intel). So each exact comparison in a test carries a comment tagged
`Bitwise:` -- on its line or within the WINDOW lines above -- that names why
both sides take the same path, or that no arithmetic is compared (a copy,
integers, a round trip). This script finds every exact comparison and fails,
naming file and line, where no such tag is near.

Exact comparisons, by language:
  C++     torch::equal(...) asserted true; EXPECT_EQ(most_difference(...), 0)
  Python  torch.equal(...)
  shell   a weight diff (same_weights, trident diff) with --rtol 0 and --atol 0
Asserting a difference (EXPECT_FALSE(torch::equal ...)) claims nothing and is
not counted.
"""
import os
import re
import sys

WINDOW = 10  # lines above a comparison where its tag may stand
TAG = "Bitwise:"

PATTERNS = {
    ".cc": [re.compile(r"torch::equal\("), re.compile(r"EXPECT_EQ\(most_difference\(")],
    ".h": [re.compile(r"torch::equal\("), re.compile(r"EXPECT_EQ\(most_difference\(")],
    ".py": [re.compile(r"torch\.equal\(")],
    ".sh": [re.compile(r"(?=.*--rtol 0(\s|$))(?=.*--atol 0(\s|$))")],
}
NOT_A_CLAIM = re.compile(r"(EXPECT|ASSERT)_FALSE\(torch::equal\(")

# Where tests live: every file under a test/ folder, and the test programs
# ctest runs from elsewhere.
TEST_DIRS = ["lib", "tools", "fuzz"]
TEST_FILES = ["scripts/gpu-check.sh", "bench/chaos.py"]


def test_files(root):
    for top in TEST_DIRS:
        for folder, _, names in os.walk(os.path.join(root, top)):
            if "/test" not in folder.replace(os.sep, "/") + "/":
                continue
            for name in sorted(names):
                if os.path.splitext(name)[1] in PATTERNS:
                    yield os.path.join(folder, name)
    for rel in TEST_FILES:
        path = os.path.join(root, rel)
        if os.path.exists(path):
            yield path


def untagged(path):
    """(line number, text) of each exact comparison in `path` with no tag near it."""
    patterns = PATTERNS[os.path.splitext(path)[1]]
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    missing = []
    for i, line in enumerate(lines):
        if NOT_A_CLAIM.search(line) or not any(p.search(line) for p in patterns):
            continue
        if not any(TAG in above for above in lines[max(0, i - WINDOW):i + 1]):
            missing.append((i + 1, line.strip()))
    return missing


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    found = 0
    bad = []
    for path in test_files(root):
        with open(path, encoding="utf-8") as f:
            text = f.read().splitlines()
        patterns = PATTERNS[os.path.splitext(path)[1]]
        found += sum(1 for l in text if any(p.search(l) for p in patterns) and not NOT_A_CLAIM.search(l))
        bad += [(os.path.relpath(path, root), n, l) for n, l in untagged(path)]
    for path, n, line in bad:
        print("%s:%d: an exact comparison with no '%s' comment on its line or the %d above, saying why both sides "
              "run the same kernels on any machine (see Note [Bitwise comparisons] in tools/trident/test/lib.sh): %s"
              % (path, n, TAG, WINDOW, line))
    print("%d exact comparisons in tests, %d without a reason" % (found, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
