#!/usr/bin/env bash
# Issue 54's long runs: the four README rows that fail their check, each at the budget its check now runs.
#   lane A: self-play Pong (3 seeds x 4M agent steps, then the matches), then ppo_trxl MiniGrid-MemoryS9 (2M, 2 seeds,
#           with and without memory), then RND seeds 1 and 2 (2M steps, with and without the bonus)
#   lane B: QDagger (one dqn_atari teacher, the PyTorch students on seeds 1-6, the JAX ones on 101-106, DQN from scratch on both), then RND seed 3
# Two runs at a time (one per lane), one thread each, at nice 19. Run it again after any stop: every check skips what
# is done and resumes its runs from their newest checkpoints. Estimated core-hours (from the SPS recorded in each
# check's docstring): self-play ~42, trxl ~18, QDagger ~34, RND ~33; ~64 h on two cores.
# A stop: kill -TERM <this script's pid>; each lane's checks stop their runs (logs kept, checkpoints on disk).
# ISSUE54_DRY_RUN=1 prints what would run and runs nothing.
set -u
PIN=700928d  # the commit every run of this queue uses (QDagger: teacher and students on the same frames, twins on seeds of their own)
TREE=$HOME/runs/tree54
OUT=$HOME/runs/issue54
VENV=${ISSUE54_VENV:-/work/main/.venv}
REPO=${ISSUE54_REPO:-/work/main}

if [ ! -d "$TREE" ]; then
    git -C "$REPO" worktree add --detach "$TREE" "$PIN" || { echo "issue54: cannot make the worktree $TREE at $PIN" >&2; exit 2; }
fi
head=$(git -C "$TREE" rev-parse --short=7 HEAD)
if [ "$head" != "${PIN:0:7}" ] || [ -n "$(git -C "$TREE" status --porcelain --untracked-files=no)" ]; then
    echo "issue54: $TREE is at $head or has edits; the queue runs only from a clean $PIN" >&2
    exit 2
fi
mkdir -p "$OUT"
cd "$TREE" || exit 2
. "$VENV/bin/activate"
export PYTHONPATH=$TREE OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MUJOCO_GL=egl PYTHONUNBUFFERED=1
export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

run() {  # one check command of a lane, logged; a failed one is said and the lane goes on
    echo "$(date -u +%FT%TZ) start: $*"
    if [ -n "${ISSUE54_DRY_RUN:-}" ]; then return 0; fi
    nice -n 19 python "$@"
    echo "$(date -u +%FT%TZ) exit $?: $*"
}

lane_a() {
    run -m benchmark.checks.pettingzoo_pong_selfplay run --workers 1 --out "$OUT/selfplay"
    run -m benchmark.checks.pettingzoo_pong_selfplay evaluate --out "$OUT/selfplay"
    run -m benchmark.checks.trxl_memory run --only MiniGrid-MemoryS9-v0 --workers 1 --threads 1 --out "$OUT/trxl"
    run -m benchmark.checks.rnd_exploration run --seeds 1 2 --workers 1 --threads 1 --out "$OUT/rnd"
}

lane_b() {
    run -m benchmark.checks.qdagger_reincarnation run --workers 1 --out "$OUT/qdagger"
    run -m benchmark.checks.rnd_exploration run --seeds 3 --workers 1 --threads 1 --out "$OUT/rnd"
}

# each lane in a process group of its own, so that a stop reaches the checks and, through them, their runs
export -f run lane_a lane_b
export OUT
start_lane() {  # into its log; a dry run prints instead, leaving the logs alone
    if [ -n "${ISSUE54_DRY_RUN:-}" ]; then setsid bash -c "$1" & else setsid bash -c "$1" >>"$OUT/$1.log" 2>&1 & fi
}
start_lane lane_a
a=$!
start_lane lane_b
b=$!
trap 'kill -TERM -- -$a -$b 2>/dev/null; wait; exit 130' TERM INT
wait
echo "$(date -u +%FT%TZ) issue54: both lanes ended; the reports:"
for check in "pettingzoo_pong_selfplay report --out $OUT/selfplay" "trxl_memory report --out $OUT/trxl" \
    "qdagger_reincarnation report --out $OUT/qdagger" "rnd_exploration report --out $OUT/rnd"; do
    echo "python -m benchmark.checks.$check"
    [ -n "${ISSUE54_DRY_RUN:-}" ] || python -m benchmark.checks.$check
done
