#!/usr/bin/env bash
# Does bootstrapping on truncation change how pqn.py learns CartPole-v1? Runs pqn.py as it is and a
# copy with the truncation bootstrap removed (every time-out then ends the target, as in the reference),
# NUM_SEEDS seeds each (default 10), and tables the two side by side with cleanrl_utils.report.
#   benchmark/studies/pqn_truncation_ablation.sh [OUT_DIR]      (default benchmark_runs/pqn_truncation_ablation)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-benchmark_runs/pqn_truncation_ablation}" && cd "${1:-benchmark_runs/pqn_truncation_ablation}" && pwd)
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$out/bootstrap" "$out/no_bootstrap"
# the variant: no sub-env counts as cut, so a truncation is treated like a termination
sed 's/cut = truncations & ~terminations/cut = np.zeros_like(truncations)/' "$repo/cleanrl/pqn.py" > "$out/pqn_no_bootstrap.py"
grep -q "cut = np.zeros_like(truncations)" "$out/pqn_no_bootstrap.py" || { echo "pqn.py changed: update the sed" >&2; exit 1; }
status=0
for variant in bootstrap no_bootstrap; do
    script=$repo/cleanrl/pqn.py
    [ "$variant" = no_bootstrap ] && script=$out/pqn_no_bootstrap.py
    (cd "$out/$variant" && python -m cleanrl_utils.benchmark --env-ids CartPole-v1 \
        --command "python $script --no-cuda --exp-name pqn ${EXTRA:-}" \
        --num-seeds "${NUM_SEEDS:-10}" --workers "${WORKERS:-2}" --log-dir logs) || status=1
done
python -m cleanrl_utils.report --runs-dir "$out/bootstrap" "$out/no_bootstrap" --split-by-dir \
    --plot-dir "$out/plots" --output "$out/report.md"
exit $status
