# Sourced as `. lib.sh "$@"` by the command-line tests, which run as
# SCRIPT TRIDENT_BINARY SOURCE_DIR: sets bin and src, a scratch directory
# work removed at exit, the counters fails and passes, and the helpers below.
set -u
bin=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() {  # check NAME EXPECTED_RC NEEDLE -- ARGS...
  local name=$1 want=$2 needle=$3; shift 4
  local err rc
  err=$("$bin" "$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne "$want" ]; then echo "FAIL $name: exit $rc, want $want: $err"; fails=$((fails+1)); return; fi
  if [ "$want" -ne 0 ]; then
    lines=$(printf '%s\n' "$err" | grep -c .)
    if [ "$lines" -ne 1 ]; then echo "FAIL $name: want one line, got: $err"; fails=$((fails+1)); return; fi
  fi
  if ! printf '%s' "$err" | grep -qF -- "$needle"; then echo "FAIL $name: '$needle' not in: $err"; fails=$((fails+1)); return; fi
  passes=$((passes+1))
}
# Note [Stable trajectories] (docs/design.md, contract 14)
# A run on several processes sums in another order than one process (another
# replica split, another micro-batch), so the two differ by rounding. A weight
# comparison means something only where training does not amplify that
# rounding, and only for the plan the test means:
# - the trajectory is stable: SGD at a modest lr (Adam turns the rounding of a
#   near-zero gradient into a step of up to lr; lr 0.5 on a small net turned
#   a 1e-7 nudge into 1e-2 in 20 steps), checked where it is cheap (the
#   own-model test measures the growth of a nudge before it compares);
# - the tolerance is stated beside the check with the difference measured on
#   two BLAS kernels (SkylakeX and Prescott), at least 10x below it;
# - the plan is pinned (parallel.cluster set to a preset, or a plan file),
#   never this machine's calibration, and a check that means two plans
#   asserts that they differ.
# same_weights NAME A B [DIFF FLAGS]: `trident diff` finds the newest checkpoints of runs A and B equal.
same_weights() {
  local name=$1 a=$2 b=$3 out rc; shift 3
  out=$("$bin" diff "$a" "$b" "$@" 2>&1); rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL $name: weights differ (exit $rc): $out"; fails=$((fails+1)); return; fi
  echo "ok $name: $(printf '%s' "$out" | grep -o 'largest |a - b| = [^ ]*' | head -1)"  # the measured rounding, for the log
  passes=$((passes+1))
}
