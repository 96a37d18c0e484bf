# What the bench scripts share; each sources it after `cd` to the checkout:
#   . bench/lib.sh
# field NAME: the value of NAME in the JSON object on stdin (a bench program's one line).
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# median X...: the middle of the values (of an even count, the lower of the two middles).
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# emulation_config FILE STEPS: the config bench/run_emulation.sh and run_delayed_emulation.sh emulate
# (paper-size mmt on synthetic data, graphpipe, hybrid sync; the scripts set model and devices).
emulation_config() {
  cat > "$1" <<YAML
name: emu
model: {name: mmt, preset: paper}
data: {name: synthetic, train_size: 256, test_size: 16}
train: {steps: $2, mini_batch: 128, seed: 0, threads: 1}
optimizer: {name: adam, lr: 0.001}
parallel: {devices: 8, partitioner: graphpipe, grad_sync: hybrid, timeout_s: 120}
YAML
}
