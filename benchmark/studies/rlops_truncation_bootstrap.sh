#!/usr/bin/env bash
# RLops on a real question: does bootstrapping on truncation (a time limit credits the value of the state
# it cut) make our PPO better, worse, or no different? Two arms, NUM_SEEDS seeds each (default 5):
#   - the code as committed, tagged with the git tag of HEAD (`git describe --tags`, e.g. rlops-base);
#   - copies of ppo.py / ppo_continuous_action.py in which no time-out counts as cut, so every truncation
#     ends the value target like a termination (as the reference scripts do), tagged no-bootstrap.
# Every run lands in one runs folder; cleanrl_utils.rlops then tells the arms apart by their tags.
#   benchmark/studies/rlops_truncation_bootstrap.sh [OUT_DIR]   (default benchmark_runs/rlops_truncation_bootstrap)
# Environment: NUM_SEEDS, WORKERS (default 2), CLASSIC_STEPS (default 500000), MUJOCO_ENVS (default
# "Hopper-v4 HalfCheetah-v4"; HalfCheetah never terminates, so every episode ends in a time-out), MUJOCO_STEPS (default 200000), ARMS (default "base no_bootstrap"),
# BASE_TAG (default: the git tag of HEAD, as the runner's --auto-tag gives it, `-dirty` for uncommitted edits).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-benchmark_runs/rlops_truncation_bootstrap}" && cd "${1:-benchmark_runs/rlops_truncation_bootstrap}" && pwd)
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
base_tag=${BASE_TAG:-$(cd "$repo" && python -c "from cleanrl_utils.benchmark.common import git_tag; print(git_tag())")}

for script in ppo ppo_continuous_action; do
    sed 's/cut = truncations & ~terminations/cut = np.zeros_like(truncations)/' "$repo/cleanrl/$script.py" > "$out/${script}_no_bootstrap.py"
    grep -q "cut = np.zeros_like(truncations)" "$out/${script}_no_bootstrap.py" || { echo "$script.py changed: update the sed" >&2; exit 1; }
done

# run ARM SCRIPT_STEM STEPS ENV_ID...: the runner in the runs folder. The base arm carries the tag the runner's
# --auto-tag gives in the repo (`git describe --tags`), set here since the runs folder may lie outside it.
run() {
    local arm=$1 stem=$2 steps=$3
    shift 3
    local script=$repo/cleanrl/$stem.py tags=$base_tag
    if [ "$arm" = no_bootstrap ]; then
        script=$out/${stem}_no_bootstrap.py
        tags=no-bootstrap
    fi
    (cd "$out" && WANDB_TAGS=$tags python -m cleanrl_utils.benchmark --env-ids "$@" --no-auto-tag \
        --command "python $script --no-cuda --exp-name $stem --total-timesteps $steps" \
        --num-seeds "${NUM_SEEDS:-5}" --workers "${WORKERS:-2}" --log-dir "$out/logs/$arm-$stem")
}

# arm after arm on each task, so both see the same machine load
for arm in ${ARMS:-base no_bootstrap}; do run "$arm" ppo "${CLASSIC_STEPS:-500000}" CartPole-v1 Acrobot-v1; done
for arm in ${ARMS:-base no_bootstrap}; do run "$arm" ppo_continuous_action "${MUJOCO_STEPS:-200000}" ${MUJOCO_ENVS:-Hopper-v4 HalfCheetah-v4}; done

python -m cleanrl_utils.rlops --runs-dir "$out/runs" --exp-name ppo ppo_continuous_action \
    --tags "$base_tag" no-bootstrap --baseline "$base_tag" --env-ids CartPole-v1 Acrobot-v1 ${MUJOCO_ENVS:-Hopper-v4 HalfCheetah-v4} \
    --output-filename "$out/compare"
