#!/usr/bin/env bash
# Learning benchmark: run cleanrl/SCRIPT.py on ENV_ID with its published defaults for each seed,
# one run at a time, then summarise every runs/ENV_ID__SCRIPT__* run of the current folder.
#   benchmark/run_seeds.sh SCRIPT ENV_ID
# SEEDS (default "1 2 3") and TOTAL_TIMESTEPS (default 500000) override the defaults, e.g.
# SEEDS="1" TOTAL_TIMESTEPS=2048 for a quick check; LOG=file keeps the runs' console output.
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 SCRIPT ENV_ID   (e.g. $0 ppo CartPole-v1)" >&2
    exit 2
fi
script=$1 env_id=$2
repo=$(cd "$(dirname "$0")/.." && pwd)
for seed in ${SEEDS:-1 2 3}; do
    python "$repo/cleanrl/$script.py" --env-id "$env_id" --total-timesteps "${TOTAL_TIMESTEPS:-500000}" --seed "$seed"
done > "${LOG:-/dev/null}"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" python -m cleanrl_utils.summarize "runs/${env_id}__${script}__"* --last 100 --window 50000 --curve 100000
