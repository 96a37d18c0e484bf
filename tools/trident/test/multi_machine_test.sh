#!/usr/bin/env bash
# Hosts of their own (docs/reliability.md): two ranks in separate Linux
# network namespaces joined by a veth pair, each namespace a host with its own
# address and host name. The rendezvous runs at host 0's address
# (MASTER_ADDR) and Gloo on each host's interface (GLOO_SOCKET_IFNAME), as
# on two machines. Checks:
# - data-parallel and pipeline training across the hosts end with the
#   weights of the same runs on loopback; so does data parallelism over an
#   impaired link: 1% of the packets each host sends dropped at random
#   (drop_packets.bpf.c, a tc BPF filter) and host 1's link limited to
#   100 Mbit/s (tc tbf);
# - cutting host 1's link mid-training ends the job within
#   parallel.timeout_s + the diagnosis, and host 0 names rank 1 and host1;
# - under `trident launch --min-devices 1` the same cut makes the job drop
#   host 1 and continue on host 0 from its checkpoint, re-planned, ending with
#   the weights of that path on loopback.
# tc netem is not run: this machine's kernel lacks sch_netem (and tc's gact
# action, and the fq qdisc that honours departure times), so there is no
# added delay; loss comes from the BPF filter instead.
# Skipped, saying why, where namespaces cannot be made (not root, no `ip`).
#   multi_machine_test.sh TRIDENT_BINARY SOURCE_DIR
. "$(dirname "$0")/lib.sh" "$@"
tag=t$$; ns0=${tag}h0; ns1=${tag}h1
net=10.$((200 + $$ % 50)).$(($$ % 250)); addr0=$net.1; addr1=$net.2
cleanup() { ip netns del "$ns0" 2>/dev/null; ip netns del "$ns1" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
if ! command -v ip >/dev/null || ! command -v unshare >/dev/null || ! ip netns add "$ns0" 2>/dev/null; then
  echo "SKIP hosts: cannot make network namespaces here (needs root, iproute2 and unshare)"; exit 0
fi
ip netns add "$ns1"
ip link add "${tag}0" type veth peer name "${tag}1"
ip link set "${tag}0" netns "$ns0"; ip link set "${tag}1" netns "$ns1"
ip -n "$ns0" addr add "$addr0/24" dev "${tag}0"; ip -n "$ns1" addr add "$addr1/24" dev "${tag}1"
for n in "$ns0" "$ns1"; do ip -n "$n" link set lo up; done
ip -n "$ns0" link set "${tag}0" up; ip -n "$ns1" link set "${tag}1" up

cfg=$src/examples/fmnist-mlp.yaml
common=(--config "$cfg" --set train.steps=30 --set train.epochs=null --set train.mini_batch=64 --set train.threads=1
        --set data.train_size=4096 --set data.test_size=500 --set train.log_every=10 --set checkpoint.every=0
        --set parallel.timeout_s=5)
# on_host R PORT ARGS...: rank R of 2 on its host (namespace, host name, interface), in the background.
on_host() {
  local r=$1 port=$2; shift 2
  local ns=$ns0 ifname=${tag}0; [ "$r" -eq 1 ] && ns=$ns1 ifname=${tag}1
  ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "host$r" \
    env RANK="$r" WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR="$addr0" MASTER_PORT="$port" \
    GLOO_SOCKET_IFNAME="$ifname" TRIDENT_JOB_ID="$tag-$port" "$bin" train "$@" \
    > "$work/r$r-$port.out" 2> "$work/r$r-$port.err" &
}
# across NAME PORT ARGS...: both ranks across the hosts; fails unless both exit 0 within 120 s.
across() {
  local name=$1 port=$2; shift 2
  on_host 0 "$port" "$@"; local p0=$!
  on_host 1 "$port" "$@"; local p1=$!
  local rc0=0 rc1=0
  ( sleep 120; kill -9 $p0 $p1 2>/dev/null ) & local watchdog=$!
  wait $p0 || rc0=$?; wait $p1 || rc1=$?
  kill $watchdog 2>/dev/null; wait $watchdog 2>/dev/null
  if [ $rc0 -ne 0 ] || [ $rc1 -ne 0 ]; then
    echo "FAIL $name: exits $rc0 and $rc1: $(tail -n 3 "$work/r0-$port.err" "$work/r1-$port.err")"; fails=$((fails+1)); return 1
  fi
}

for variant in "dp dp" "pipeline pipedream"; do
  set -- $variant
  extra=(--set parallel.partitioner=$2)
  [ "$1" = pipeline ] && extra+=(--set parallel.micro_batch=16 --set parallel.max_replicas=1)
  "$bin" train "${common[@]}" "${extra[@]}" --nproc 2 --set runs_dir="$work/lo-$1" > "$work/lo-$1.log" 2>&1 ||
    { echo "FAIL $1-loopback: $(tail -n 3 "$work/lo-$1.log")"; fails=$((fails+1)); continue; }
  port=$(( 20000 + ($$ * 7 + ${#1}) % 20000 ))
  across "$1-hosts" "$port" "${common[@]}" "${extra[@]}" --set parallel.devices=2 --set runs_dir="$work/ns-$1" &&
    same_weights "$1-hosts-equal-loopback" "$work/lo-$1/fmnist-mlp" "$work/ns-$1/fmnist-mlp"
done

# An impaired link: each host drops 1% of the packets it sends, and host 1 sends at most 100 Mbit/s.
# TCP retransmits; training must still end with the loopback run's weights.
# impair: the BPF filter on both hosts' interfaces and the rate limit on host 1's; non-zero when this machine cannot.
impair() {
  clang -O2 -target bpf -I/usr/include/"$(gcc -print-multiarch)" -DDROP_PERCENT=1 \
    -c "$src/tools/trident/test/drop_packets.bpf.c" -o "$work/drop.o" || return 1
  for r in 0 1; do
    # One wire packet per buffer the filter sees (no GSO batches of up to 64 KiB), so 1% is of packets.
    ip -n "${tag}h$r" link set dev "${tag}$r" gso_max_segs 1 || return 1
    tc -n "${tag}h$r" qdisc add dev "${tag}$r" clsact || return 1
    tc -n "${tag}h$r" filter add dev "${tag}$r" egress bpf da obj "$work/drop.o" sec tc || return 1
  done
  tc -n "$ns1" qdisc add dev "${tag}1" root tbf rate 100mbit burst 256kb latency 1s
}
# filtered R: "SENT DROPPED", the packets host R's interface sent and those its filter dropped.
filtered() {
  tc -n "${tag}h$1" -s qdisc show dev "${tag}$1" |
    awk '/qdisc clsact/ {c=1} c && /Sent/ {gsub(/,/, ""); for (i=1;i<=NF;i++) {if ($i=="pkt") s=$(i-1); if ($i=="(dropped") d=$(i+1)}; print s, d; exit}'
}
if impair 2> "$work/impair.err"; then
  port=$(( 20000 + ($$ * 7 + 11) % 20000 ))
  start=$SECONDS
  if across dp-impaired "$port" "${common[@]}" --set parallel.partitioner=dp --set parallel.devices=2 \
       --set runs_dir="$work/ns-impaired"; then
    same_weights dp-impaired-equal-loopback "$work/lo-dp/fmnist-mlp" "$work/ns-impaired/fmnist-mlp"
    read -r sent0 dropped0 <<<"$(filtered 0)"; read -r sent1 dropped1 <<<"$(filtered 1)"
    if [ "${dropped0:-0}" -gt 0 ] && [ "${dropped1:-0}" -gt 0 ]; then
      passes=$((passes+1))
      echo "impaired link: 30 steps in $((SECONDS - start)) s; the filters dropped $dropped0 of $sent0 packets" \
           "from host 0 and $dropped1 of $sent1 from host 1 (100 Mbit/s)"
    else
      echo "FAIL impaired-link: the filters dropped '${dropped0:-}' and '${dropped1:-}' packets"; fails=$((fails+1))
    fi
  fi
  for r in 0 1; do
    tc -n "${tag}h$r" qdisc del dev "${tag}$r" clsact; ip -n "${tag}h$r" link set dev "${tag}$r" gso_max_segs 65535
  done
  tc -n "$ns1" qdisc del dev "${tag}1" root
else
  echo "SKIP impaired link: cannot drop packets with a BPF filter here: $(head -2 "$work/impair.err")"
fi

# The link of host 1 goes down after step 20: the job must end, host 0 naming rank 1 on host1.
port=$(( 40000 + $$ % 20000 ))
long=("${common[@]}" --set train.steps=100000 --set parallel.devices=2 --set runs_dir="$work/cut")
on_host 0 "$port" "${long[@]}"; p0=$!
on_host 1 "$port" "${long[@]}"; p1=$!
for _ in $(seq 300); do grep -q "step 20/" "$work/r0-$port.out" 2>/dev/null && break; sleep 0.2; done
start=$SECONDS
ip -n "$ns1" link set "${tag}1" down
( sleep 60; kill -9 $p0 $p1 2>/dev/null ) & watchdog=$!
rc0=0; rc1=0; wait $p0 || rc0=$?; took0=$((SECONDS - start)); wait $p1 || rc1=$?; took1=$((SECONDS - start))
kill $watchdog 2>/dev/null; wait $watchdog 2>/dev/null
if [ $rc0 -eq 0 ] || [ $rc1 -eq 0 ] || [ $took0 -gt 30 ] || [ $took1 -gt 30 ] ||
   ! grep -q "rank 1 stopped responding (on host1)" "$work/r0-$port.err"; then
  echo "FAIL link-cut: exits $rc0 after ${took0}s and $rc1 after ${took1}s: $(cat "$work/r0-$port.err" "$work/r1-$port.err")"
  fails=$((fails+1))
else
  passes=$((passes+1))
  echo "link cut: host 0 exited after ${took0}s, host 1 after ${took1}s (parallel.timeout_s 5)"
  echo "  host 0: $(tail -1 "$work/r0-$port.err")"
  echo "  host 1: $(tail -1 "$work/r1-$port.err")"
fi
# The same cut under an elastic launcher: `trident launch` starts each rank on its host through
# --slot-command, with --max-restarts 2 --min-devices 1. Both ranks fail; on the restart host 1
# cannot reach the rendezvous, so its slot is dropped and the job continues on host 0 alone from
# the newest checkpoint, re-planned for 1 device. Its weights are compared with the same path on
# loopback (contract 14: one trajectory, not one that sums in another order from some step the
# timing picks): an uninterrupted 2-rank run keeping every checkpoint, resumed in one process from
# the step the elastic job continued from.
port=$(( 40000 + ($$ + 7) % 20000 ))
sgd=("${common[@]}" --set train.steps=60 --set checkpoint.every=10 --set optimizer.name=sgd --set optimizer.lr=0.05)
"$bin" train "${sgd[@]}" --nproc 2 --set checkpoint.keep=6 --set runs_dir="$work/lo-sgd" > "$work/lo-sgd.log" 2>&1 ||
  { echo "FAIL sgd-loopback: $(tail -n 3 "$work/lo-sgd.log")"; fails=$((fails+1)); }
slot_cmd="ip netns exec ${tag}h{slot} unshare --uts sh -c 'hostname host{slot} && exec env GLOO_SOCKET_IFNAME=${tag}{slot} \"\$0\" \"\$@\"'"
ip -n "$ns1" link set "${tag}1" up
timeout 180 "$bin" launch --nproc 2 --master-addr "$addr0" --master-port "$port" --slot-command "$slot_cmd" \
  --max-restarts 2 --min-devices 1 -- train "${sgd[@]}" --set parallel.devices=2 --set runs_dir="$work/elastic" \
  > "$work/elastic.out" 2>&1 &
launcher=$!
for _ in $(seq 300); do grep -q "\[rank 0\] .*step 20/" "$work/elastic.out" 2>/dev/null && break; sleep 0.2; done
start=$SECONDS
ip -n "$ns1" link set "${tag}1" down
rc=0; wait $launcher || rc=$?; took=$((SECONDS - start))
out=$(cat "$work/elastic.out")
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "launch: rank 1 exited with code 1 before it reached the rendezvous (slot 1)" ||
   ! printf '%s' "$out" | grep -q "launch: slot 1 failed to start; 1 of 2 devices left (slots 0); --min-devices 1" ||
   ! printf '%s' "$out" | grep -q "restart 2 of 2: starting 1 workers again (slots 0)" ||
   ! printf '%s' "$out" | grep -q "\[rank 0\] elastic: 1 of the 2 devices of the config started" ||
   ! printf '%s' "$out" | grep -q "\[rank 0\] restart 2: continuing from the checkpoint of step [1-9]"; then
  echo "FAIL elastic-host-lost: exit $rc after ${took}s: $out"; fails=$((fails+1))
else
  passes=$((passes+1))
  echo "elastic: host 1 cut after step 20; the job continued on host 0 alone and ended ${took}s after the cut"
  printf '%s\n' "$out" | grep "^trident: launch:" | cut -c1-160 | sed 's/^/  /'
fi
# The reference: the loopback run's checkpoints up to the elastic job's resume step, then one process.
resumed=$(printf '%s' "$out" | grep -o "\[rank 0\] restart 2: continuing from the checkpoint of step [0-9]*" | grep -o "[0-9]*$")
mkdir -p "$work/ref"; cp -r "$work/lo-sgd/fmnist-mlp" "$work/ref/"
for d in "$work/ref/fmnist-mlp/checkpoints"/step-*; do [ "${d##*step-}" -gt "${resumed:-0}" ] && rm -rf "$d"; done
"$bin" train --resume "$work/ref/fmnist-mlp" "${sgd[@]}" --set parallel.devices=1 --set runs_dir="$work/ref" \
  > "$work/ref.log" 2>&1 || { echo "FAIL sgd-resumed-reference: $(tail -n 3 "$work/ref.log")"; fails=$((fails+1)); }
# Bitwise: the reference takes the elastic job's path with this binary on this machine (2 ranks up to the
# resume step, then one process; the same plan, threads and BLAS decision of Note [BLAS kernel]); only the
# transport differs, and it moves bytes.
same_weights elastic-host-lost-weights "$work/ref/fmnist-mlp" "$work/elastic/fmnist-mlp" --rtol 0 --atol 0
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
