#!/usr/bin/env bash
# Classic-control learning results: ppo, dqn, c51 and pqn on CartPole-v1, Acrobot-v1 and
# MountainCar-v0 with their published defaults, seeds 1-3, through cleanrl_utils.benchmark;
# then the results tables, each run's own line and the learning curves with cleanrl_utils.report.
#   benchmark/checks/classic_control.sh [OUT_DIR]      (default benchmark_runs/classic_control)
# Knobs: ALGOS (default "pqn c51 ppo dqn"), ENV_IDS, NUM_SEEDS (3), WORKERS (2), EXTRA (flags added
# to every command, e.g. EXTRA="--total-timesteps 5000" for a quick check), REPORT_OUT (default
# OUT_DIR/report.md), PLOT_DIR (default OUT_DIR/plots), CURVE_TABLE_STEPS (each run's curve as a
# table of means per this many steps; default 0: none). One algorithm on one env, e.g. ppo.py on
# CartPole-v1: ALGOS=ppo ENV_IDS=CartPole-v1 CURVE_TABLE_STEPS=100000 bash benchmark/checks/classic_control.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-benchmark_runs/classic_control}" && cd "${1:-benchmark_runs/classic_control}" && pwd)
algos=${ALGOS:-pqn c51 ppo dqn}
read -r -a env_ids <<< "${ENV_IDS:-CartPole-v1 Acrobot-v1 MountainCar-v0}"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
cd "$out"  # runs/ and the benchmark logs land here
status=0
for algo in $algos; do
    # a failed run is listed by the runner; the other algorithms still run
    python -m cleanrl_utils.benchmark --env-ids "${env_ids[@]}" \
        --command "python $repo/cleanrl/$algo.py --no-cuda ${EXTRA:-}" \
        --num-seeds "${NUM_SEEDS:-3}" --workers "${WORKERS:-2}" --log-dir "logs/$algo" || status=1
done
# shellcheck disable=SC2086  # the algorithm names are separate words on purpose
python -m cleanrl_utils.report --runs-dir "$out/runs" --exp-names $algos --env-ids "${env_ids[@]}" \
    --published "$repo/benchmark/published/classic_control.json" \
    --per-run --curve-table-steps "${CURVE_TABLE_STEPS:-0}" \
    --plot-dir "${PLOT_DIR:-$out/plots}" --output "${REPORT_OUT:-$out/report.md}"
exit $status
