# Sourced as `. lib.sh "$@"` by the command-line tests, which run as
# SCRIPT TRIDENT_BINARY SOURCE_DIR: sets bin and src, a scratch directory
# work removed at exit, the counters fails and passes, py (the project's
# Python, with torch and numpy), and the helpers below.
set -u
bin=$1; src=$2
# The project's Python (its torch is the LibTorch trident links); ctest sets it.
py=${TRIDENT_PYTHON:-$(bash "$src/scripts/install-peers.sh" | tail -1)}
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
# Note [Stable trajectories]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# (docs/design.md, contract "Tests are stable on any machine")
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
#
# Note [Bitwise comparisons]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# (docs/design.md, contract "Tests are stable on any machine")
# Two runs agree in every bit only where they run the same kernels on the
# same shapes in the same order. What picks a kernel differs between
# machines, and sometimes between two runs on one machine: the BLAS kernel
# (OpenBLAS's detection, or trident's choice; see Note [BLAS kernel] in
# process/blas.h), ATen's CPU capability, oneDNN's ISA, bf16 native or
# emulated, the thread count. A pair of runs that agrees on one machine
# proves nothing: blas_test.sh once compared a run of the kernel trident
# chose with one of the kernel OpenBLAS detects; on a Zen 4 both are
# Cooperlake, on a Sapphire Rapids OpenBLAS detects Prescott, and the
# weights lay 2.4e-5 apart (issue 52; the same gap forced on the Zen 4).
# So every exact comparison in a test (torch::equal, torch.equal, a diff
# with --rtol 0 --atol 0) carries a comment tagged "Bitwise:" that names why
# both sides take one path on any machine -- one process and thread count,
# the same BLAS decision, the same ops on the same shapes -- or that no
# arithmetic is compared (a copy, integers). scripts/check-bitwise.py (ctest
# bitwise_reasons) fails on one without it. Where no such reason holds,
# compare within a stated tolerance (Note [Stable trajectories]).
# same_weights NAME A B [DIFF FLAGS]: `trident diff` finds the newest checkpoints of runs A and B equal.
same_weights() {
  local name=$1 a=$2 b=$3 out rc; shift 3
  out=$("$bin" diff "$a" "$b" "$@" 2>&1); rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL $name: weights differ (exit $rc): $out"; fails=$((fails+1)); return; fi
  echo "ok $name: $(printf '%s' "$out" | grep -o 'largest |a - b| = [^ ]*' | head -1)"  # the measured rounding, for the log
  passes=$((passes+1))
}

# kill_rank NAME RANKS STEP MIN -- TRAIN ARGS: starts a run on RANKS processes and kills rank 1 once
# step STEP is logged; the launcher must exit within 20 s naming it, and at least MIN of the other
# ranks must say that rank 1 stopped responding (possibly among others: the launcher stops the
# rest once rank 1 is gone, so a late diagnosis may find, say, "ranks 1, 2 stopped responding").
kill_rank() {
  local name=$1 n=$2 step=$3 min=$4; shift 5
  "$bin" train "$@" > "$work/$name.out" 2> "$work/$name.err" &
  local launcher=$! pid="" rc took start
  for _ in $(seq 300); do  # at most 60 s
    pid=$(grep -o "rank 1/$n on .* (pid [0-9]*" "$work/$name.out" | grep -o "[0-9]*$")
    [ -n "$pid" ] && grep -q "step $step/" "$work/$name.out" && break; sleep 0.2
  done
  if [ -z "$pid" ] || ! grep -q "step $step/" "$work/$name.out"; then
    kill -9 $launcher 2>/dev/null; pkill -9 -P $launcher 2>/dev/null; wait $launcher 2>/dev/null
    echo "FAIL $name: rank 1 or step $step never appeared: $(tail -3 "$work/$name.out" "$work/$name.err")"
    fails=$((fails+1)); return
  fi
  start=$SECONDS; kill -9 "$pid"
  # The launcher must exit within 20 s; after 30 it is killed and the check fails.
  for _ in $(seq 150); do kill -0 $launcher 2>/dev/null || break; sleep 0.2; done
  kill -9 $launcher 2>/dev/null; wait $launcher; rc=$?; took=$((SECONDS - start))
  if [ $rc -eq 0 ] || [ $took -gt 20 ] || ! grep -q "launch: rank 1 was killed by signal 9" "$work/$name.err" ||
     [ "$(grep -cE "ranks? ([0-9]+, )*1(, [0-9]+)* stopped responding" "$work/$name.err")" -lt "$min" ]; then
    echo "FAIL $name: exit $rc after ${took}s: $(cat "$work/$name.err")"; fails=$((fails+1)); else passes=$((passes+1)); fi
}
# finish: the closing line ctest reads, and the exit status.
finish() {
  echo "$passes passed, $fails failed"
  [ "$fails" -eq 0 ]
  exit
}
