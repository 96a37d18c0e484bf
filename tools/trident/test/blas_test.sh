#!/usr/bin/env bash
# The BLAS kernel choice (see Note [BLAS kernel] in lib/process/include/trident/process/blas.h):
#   blas_test.sh TRIDENT_BINARY SOURCE_DIR BLAS_STANDIN_LIBRARY
# The stand-in (blas_standin.cc), preloaded, makes OpenBLAS report the
# fallback kernel of issue 32 (Prescott) and, in "wrong" mode, makes any
# kernel forced by OPENBLAS_CORETYPE compute wrong products.
# Where OpenBLAS itself detects a fallback (the Sapphire Rapids of issue 52),
# the refused run keeps another kernel than the plain run chose. To see that
# case on a CPU OpenBLAS knows, run this script with TRIDENT_BINARY a wrapper
# that execs `qemu-x86_64 -cpu max` on trident (Debian's qemu-user; OpenBLAS
# detects "Opteron", the CPU has AVX2) and OMP_WAIT_POLICY=PASSIVE set, so
# that only the runs that keep their kernel stay emulated.
. "$(dirname "$0")/lib.sh" "$@"  # bin, src, work, counters; check, same_weights
standin=$3
# Every case below sets OPENBLAS_CORETYPE itself, or means it unset.
unset OPENBLAS_CORETYPE TRIDENT_BLAS_CHOICE TRIDENT_BLAS_CHECK TRIDENT_TEST_BLAS_STANDIN
cfg=$src/examples/fmnist-mlp.yaml
short=(--config "$cfg" --set train.epochs=null --set train.steps=3 --set data.train_size=512 --set data.test_size=100
       --set train.eval=false --set train.threads=1)
expect() {  # expect NAME RC WANT_RC TEXT NEEDLE...: exit code, and every needle in TEXT
  local name=$1 rc=$2 want=$3 text=$4; shift 4
  if [ "$rc" -ne "$want" ]; then echo "FAIL $name: exit $rc, want $want: $text"; fails=$((fails+1)); return; fi
  for needle in "$@"; do
    if ! printf '%s' "$text" | grep -qF -- "$needle"; then echo "FAIL $name: '$needle' not in: $text"; fails=$((fails+1)); return; fi
  done
  passes=$((passes+1))
}
kernel_of() { printf '%s' "$1" | sed -n 's/^BLAS: .*, kernel \([A-Za-z0-9_]*\).*/\1/p'; }
# The kernel OpenBLAS itself detects on this CPU: "kernel K (detected)", or "kernel C (detected K; checked)"
# when trident replaced a fallback K by C.
detected_of() {
  local replaced
  replaced=$(printf '%s' "$1" | sed -n 's/^BLAS: .*(detected \([A-Za-z0-9_]*\); checked).*/\1/p')
  if [ -n "$replaced" ]; then echo "$replaced"; else kernel_of "$1"; fi
}

# As it is: the version names the library and the kernel that runs, and a run's first line does too.
out=$("$bin" version 2>&1); rc=$?
expect version "$rc" 0 "$out" "BLAS: OpenBLAS " ", kernel "
runs=$(kernel_of "$out")
detected=$(detected_of "$out")
out=$("$bin" train "${short[@]}" --set runs_dir="$work/plain" 2>&1); rc=$?
expect banner "$rc" 0 "$out" "; BLAS OpenBLAS " "kernel $runs"
# See Note [ATen CPU kernels]: the set LibTorch runs is named, and a set the user asks for is the one that runs
# (default: LibTorch's scalar kernels, "NO AVX" in 1.13's words, "DEFAULT" in 2.x's; never its own choice on x86-64).
case $("$bin" version | head -1) in *"LibTorch 1."*) scalar="NO AVX" ;; *) scalar="DEFAULT" ;; esac
out=$(ATEN_CPU_CAPABILITY=default "$bin" version 2>&1); rc=$?
expect aten-user-set "$rc" 0 "$out" "ATen CPU kernels: $scalar (set by ATEN_CPU_CAPABILITY=default)"
out=$(ATEN_CPU_CAPABILITY=default "$bin" train "${short[@]}" --set runs_dir="$work/aten" 2>&1); rc=$?
expect aten-banner "$rc" 0 "$out" "; ATen kernels $scalar (set by ATEN_CPU_CAPABILITY=default)"

if ! grep -qw avx2 /proc/cpuinfo; then  # the stand-in's fallback has nothing better to go to
  echo "blas_kernel: this CPU has no AVX2; the fallback cases are not run"
  echo "$passes passed, $fails failed"; [ $fails -eq 0 ]; exit
fi

# A fallback detected: trident tries the best family the CPU supports, checks it, and runs it.
out=$(LD_PRELOAD=$standin "$bin" version 2>&1); rc=$?
expect fallback-replaced "$rc" 0 "$out" "(detected Prescott; checked)"
chosen=$(kernel_of "$out")
[ -n "$chosen" ] && [ "$chosen" != Prescott ] && passes=$((passes+1)) || { echo "FAIL fallback-kernel: ran '$chosen': $out"; fails=$((fails+1)); }
# The workers of a 2-process run inherit the decision: no second check, the same kernel.
out=$(LD_PRELOAD=$standin "$bin" train "${short[@]}" --nproc 2 --set runs_dir="$work/chosen" 2>&1); rc=$?
expect fallback-workers "$rc" 0 "$out" "kernel $chosen (detected Prescott; checked)"

# The tried kernel computes wrong products: refused, said so in one line, the detected kernel kept.
err=$(LD_PRELOAD=$standin TRIDENT_TEST_BLAS_STANDIN=wrong "$bin" version 2>&1 >/dev/null); rc=$?
expect refused-line "$rc" 0 "$err" "trident: OpenBLAS kernel $chosen refused (wrong products: " "keeping Prescott"
[ "$(printf '%s\n' "$err" | grep -c .)" -eq 1 ] && passes=$((passes+1)) || { echo "FAIL refused-one-line: $err"; fails=$((fails+1)); }
out=$(LD_PRELOAD=$standin TRIDENT_TEST_BLAS_STANDIN=wrong "$bin" train "${short[@]}" --set runs_dir="$work/refused" 2>&1); rc=$?
expect refused-banner "$rc" 0 "$out" "kernel Prescott (detected; $chosen refused: wrong products"
# ... and the run's products were right: bit for bit those of the kernel it kept. The stand-in only
# names Prescott; what runs is what OpenBLAS detects on this CPU ($detected), so the reference is a run
# that sets that kernel from the start, under the stand-in in its honest mode.
# Bitwise: both runs multiply with OpenBLAS's $detected kernel (the reference names it in
# OPENBLAS_CORETYPE, the refused run keeps it as detected), on one thread, the same ops and shapes.
out=$(OPENBLAS_CORETYPE=$detected LD_PRELOAD=$standin "$bin" train "${short[@]}" --set runs_dir="$work/kept" 2>&1); rc=$?
expect kept-banner "$rc" 0 "$out" "kernel $detected (set by OPENBLAS_CORETYPE=$detected; checked)"
same_weights refused-weights "$work/kept/fmnist-mlp" "$work/refused/fmnist-mlp" --rtol 0 --atol 0
# For the log: how far the kernel a plain run chose ($runs) lands from the kept one's weights. Two kernels
# sum in different orders, so this may be anything from 0 up; nothing is asserted.
echo "info: plain ($runs) against kept ($detected): $("$bin" diff "$work/plain/fmnist-mlp" "$work/kept/fmnist-mlp" \
      --rtol 0 --atol 0 2>&1 | grep -o 'largest |a - b| = [^ ]*' | head -1)"

# A kernel set outside trident is never replaced; it is checked, and a wrong one stops the command.
out=$(OPENBLAS_CORETYPE=Haswell LD_PRELOAD=$standin "$bin" version 2>&1); rc=$?
expect user-kernel-kept "$rc" 0 "$out" "kernel Haswell (set by OPENBLAS_CORETYPE=Haswell; checked)"
err=$(OPENBLAS_CORETYPE=Haswell LD_PRELOAD=$standin TRIDENT_TEST_BLAS_STANDIN=wrong "$bin" train "${short[@]}" \
      --set runs_dir="$work/user-wrong" 2>&1 >/dev/null); rc=$?
expect user-kernel-wrong "$rc" 1 "$err" "trident: OPENBLAS_CORETYPE=Haswell (set outside trident)" "computes wrong products"
[ "$(printf '%s\n' "$err" | grep -c .)" -eq 1 ] && passes=$((passes+1)) || { echo "FAIL user-kernel-wrong-one-line: $err"; fails=$((fails+1)); }
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
