#!/usr/bin/env bash
# Issue 53's 27 runs: TD3, DDPG and SAC (the JAX files, measured faster than their torch twins) on Hopper-v4,
# HalfCheetah-v4 and Walker2d-v4, seeds 1-3, 1M steps each, one at a time in a lane, at nice 19, from a
# worktree pinned at the commit they started on. Run it again after any stop: each benchmark continues from its log
# folder (finished runs skipped, the others resumed from their newest checkpoint, every 25k steps).
# Then: python -m benchmark.checks.mujoco_1m collect --runs $HOME/runs/tree/runs && python -m benchmark.checks.mujoco_1m report
# `mujoco_1m.sh backward` is a second lane: the same list from its end. Each run is taken under a lock of its own
# (flock on <log folder>.lock), so a lane skips the run the other lane is on, and a run finished in either lane is
# skipped by its benchmark. The first lane takes no word: chain.sh knows it by its command line's last word.
set -u
if [ $# -gt 1 ] || { [ $# = 1 ] && [ "$1" != backward ]; }; then
    echo "mujoco_1m: usage: mujoco_1m.sh [backward], not: $*" >&2
    exit 2
fi
ORDER=${1:-forward}
command -v flock > /dev/null || { echo "mujoco_1m: needs flock (Debian package util-linux)" >&2; exit 2; }
PIN=c105263  # the commit every run of this queue uses
TREE=$HOME/runs/tree
OUT=$HOME/runs/mujoco_1m
VENV=${MUJOCO_1M_VENV:-/work/main/.venv}
REPO=${MUJOCO_1M_REPO:-/work/main}

mkdir -p "$OUT"
{
    flock 9  # lanes started together: one makes the worktree, the other waits for it
    if [ ! -d "$TREE" ]; then
        git -C "$REPO" worktree add --detach "$TREE" "$PIN" || { echo "mujoco_1m: cannot make the worktree $TREE at $PIN" >&2; exit 2; }
    fi
} 9> "$OUT/.tree.lock"
if ! head=$(git -C "$TREE" rev-parse --short=7 HEAD 2> /dev/null); then
    # its runs/ may hold checkpoints: never removed here
    echo "mujoco_1m: $TREE is not a git worktree (a worktree add cut short?): move its runs/ aside, remove it, start again" >&2
    exit 2
fi
if [ "$head" != "${PIN:0:7}" ] || [ -n "$(git -C "$TREE" status --porcelain --untracked-files=no)" ]; then
    echo "mujoco_1m: $TREE is at $head or has edits; the queue runs only from a clean $PIN" >&2
    exit 2
fi
cd "$TREE" || exit 2
. "$VENV/bin/activate"
export PYTHONPATH=$TREE OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MUJOCO_GL=egl
export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
# A run whose summary is committed under benchmark/results/mujoco_1m/ is done, so a fresh machine (its logs gone) runs
# only the others. Each run is a benchmark of its own (its own log folder, so it resumes alone), run one after another
# in a lane: a TD3 run alone takes ~1.3-1.6 cores (160-190 SPS, ~1.5 h for 1M steps); two lanes (~75-110 SPS each
# beside other work) take ~2.5-4 h a run, and a replaced machine loses both runs in progress, not one.
RESULTS=$REPO/benchmark/results/mujoco_1m
todo=()
for algo in td3 ddpg sac; do
    for env in Hopper-v4 HalfCheetah-v4 Walker2d-v4; do
        for seed in 1 2 3; do
            [ -f "$RESULTS/${algo}_continuous_action_jax__${env}__${seed}.json" ] || todo+=("$algo $env $seed")
        done
    done
done
echo "mujoco_1m: ${#todo[@]} runs to go ($ORDER)"
if [ "$ORDER" = backward ]; then
    reversed=()
    for ((i = ${#todo[@]} - 1; i >= 0; i--)); do reversed+=("${todo[i]}"); done
    todo=("${reversed[@]}")
fi
for run in "${todo[@]}"; do
    read -r algo env seed <<<"$run"
    mkdir -p "$OUT/logs/$algo/$env"
    exec 8> "$OUT/logs/$algo/$env/$seed.lock"  # held by this lane and its run until the run ends
    if flock -n 8; then
        nice -n 19 python -m cleanrl_utils.benchmark --env-ids "$env" --start-seed "$seed" --num-seeds 1 --workers 1 \
            --command "python cleanrl/${algo}_continuous_action_jax.py --checkpoint-frequency 25000" \
            --log-dir "$OUT/logs/$algo/$env/$seed"
    else
        echo "mujoco_1m: $algo $env $seed is running in the other lane; skipped"
    fi
    exec 8>&-
done
