#!/usr/bin/env bash
# Learning benchmark for ppo.py on CartPole-v1 with its published defaults: 500k steps,
# seeds 1-3, one run at a time, then a summary of every runs/CartPole-v1__ppo__* run.
# Runs land in ./runs of the current folder. SEEDS="1" TOTAL_TIMESTEPS=2048 make a quick check;
# LOG=file keeps the runs' console output.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
seeds=${SEEDS:-"1 2 3"}
steps=${TOTAL_TIMESTEPS:-500000}
for seed in $seeds; do
    python "$repo/cleanrl/ppo.py" --env-id CartPole-v1 --total-timesteps "$steps" --seed "$seed"
done > "${LOG:-/dev/null}"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" python -m cleanrl_utils.summarize runs/CartPole-v1__ppo__* --last 100 --window 50000
