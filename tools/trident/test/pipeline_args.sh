# Sourced by cli/pipeline.sh and cli/pipeline_plans.sh after lib.sh: icfg, the inception
# example config, and pcommon, the flags of their short pipeline runs (see cli/pipeline.sh
# for why SGD at a constant lr 0.05).
icfg=$src/examples/fmnist-inception.yaml
pcommon=(--config "$icfg" --set train.steps=12 --set train.epochs=null --set train.mini_batch=64 --set parallel.micro_batch=16
         --set data.train_size=2048 --set data.test_size=500 --set train.log_every=4 --set checkpoint.every=0
         --set train.profile_ops=true --set optimizer.name=sgd --set optimizer.lr=0.05 --set optimizer.momentum=0.9
         --set optimizer.schedule=constant --set optimizer.warmup_steps=0)
