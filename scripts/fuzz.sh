#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/README.md) with clang, AddressSanitizer
# and UndefinedBehaviorSanitizer in a build of their own, replays every
# regression input (fuzz/regressions/TARGET/: inputs that once crashed), then
# fuzzes each target for SECONDS from its seed corpus (fuzz/corpus/TARGET/).
# New inputs go to a scratch directory, never into the repository. Prints one
# line per target: executions, seconds, crashes. Exit 1 on a crash (the
# input is kept and named), 2 on bad arguments.
#   bash scripts/fuzz.sh [SECONDS=20] [TARGET...]      (make fuzz: 300 s each)
# (make test does not run this: it replays the corpus and regressions through
# the normal build, ctest fuzz_replay_TARGET.)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: SECONDS = '$seconds'; allowed: a whole number ≥ 1" >&2; exit 2; }
shift || true
all=(config plan model cluster profile manifest npy idx graph tar token_index sample_index image)
targets=("${@:-${all[@]}}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: TARGET = '$t'; allowed: ${all[*]}" >&2; exit 2; }
done
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is missing; run scripts/install-deps.sh" >&2; exit 2; }

# Not inside build/: the main build has a fuzz/ folder of its own (the replay programs).
build=${FUZZ_BUILD:-build-fuzz}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
  -DTRIDENT_WITH_TORCH=OFF -DTRIDENT_FUZZ=ON >/dev/null
cmake --build "$build" -j"${JOBS:-2}" --target fuzz_all >/dev/null

scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
failed=0
printf '%-8s %12s %8s %8s\n' target executions seconds crashes
for t in "${targets[@]}"; do
  bin=$build/fuzz/fuzz_$t
  log=$scratch/$t.log
  # Every input that once crashed must now pass.
  regressions=(fuzz/regressions/$t/*)
  if [ -e "${regressions[0]}" ] && ! "$bin" "${regressions[@]}" >"$log" 2>&1; then
    echo "fuzz.sh: $t: a regression input crashes again:" >&2; tail -30 "$log" >&2; failed=1; continue
  fi
  mkdir -p "$scratch/$t"
  rc=0
  "$bin" "$scratch/$t" "fuzz/corpus/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -dict="fuzz/$t.dict" -max_len=65536 -print_final_stats=1 -artifact_prefix="$scratch/$t-" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  crashes=0
  if [ $rc -ne 0 ]; then
    crashes=1; failed=1
    keep=${FUZZ_ARTIFACTS:-$build/artifacts}; mkdir -p "$keep"
    cp "$scratch/$t-"* "$keep/" 2>/dev/null || true
    echo "fuzz.sh: $t crashed (exit $rc); the input is in $keep/ — make it a file of fuzz/regressions/$t/ once fixed:" >&2
    grep -E "ERROR|SUMMARY|runtime error|terminate|what\(\)" "$log" | head -8 >&2
  fi
  printf '%-8s %12s %8s %8s\n' "$t" "${runs:-0}" "$seconds" "$crashes"
done
exit $failed
