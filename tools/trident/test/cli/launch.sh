#!/usr/bin/env bash
# Launching: another job's worker is refused at the rendezvous; a killed data-parallel rank is named by the others.
. "$(dirname "$0")/../lib.sh" "$@"  # bin, src, work, counters; check, same_weights, kill_rank, finish
cfg=$src/examples/fmnist-mlp.yaml
# A worker of another job at this job's rendezvous (same MASTER_PORT) is refused, naming both jobs.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TRIDENT_JOB_ID=job-a timeout 60 "$bin" train --config "$cfg" \
  --set parallel.devices=2 --set parallel.timeout_s=5 --set runs_dir=$work/job-a >/dev/null 2>&1 &
job_a=$!
export RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TRIDENT_JOB_ID=job-b
check other-job 2 "rank 1 of job 'job-b' reached the rendezvous of job 'job-a' at 127.0.0.1:$port" -- \
  train --config "$cfg" --set parallel.devices=2 --set parallel.timeout_s=5 --set runs_dir=$work/job-b
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT TRIDENT_JOB_ID
kill $job_a 2>/dev/null; wait $job_a 2>/dev/null
check launch-nothing 2 "give the subcommand after --" -- launch --nproc 2
check launch-zero 2 "must be >= 1" -- launch --nproc 0 -- train --config "$cfg"
# Killing one of 3 data-parallel ranks: the other two name it.
kill_rank kill-rank 3 20 2 -- --config "$cfg" --nproc 3 --set train.mini_batch=96 --set train.steps=100000 \
  --set train.epochs=null --set train.threads=1 --set runs_dir=$work/kill --set parallel.timeout_s=5 --set train.log_every=10
# The same with rank 2 starting its diagnosis 4 s late (as on a loaded machine): rank 0, which hosts the
# store, stays until rank 2 has diagnosed (see Note [Rank 0 stays for the diagnosis]), so both still name rank 1.
export TRIDENT_TEST_DIAGNOSE_DELAY=2:4000
kill_rank kill-rank-late 3 20 2 -- --config "$cfg" --nproc 3 --set train.mini_batch=96 --set train.steps=100000 \
  --set train.epochs=null --set train.threads=1 --set runs_dir=$work/kill-late --set parallel.timeout_s=5 --set train.log_every=10
unset TRIDENT_TEST_DIAGNOSE_DELAY
# The same under bounded staleness, where the fast ranks do not wait for rank 1 every step.
kill_rank kill-rank-ssp 3 20 2 -- --config "$cfg" --nproc 3 --set train.mini_batch=96 --set train.steps=100000 \
  --set train.epochs=null --set train.threads=1 --set runs_dir=$work/kill-ssp --set parallel.timeout_s=5 --set train.log_every=10 \
  --set parallel.grad_sync=ps --set parallel.staleness=2
finish
