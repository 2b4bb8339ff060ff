#!/usr/bin/env bash
# Issue 55's RLops check of the Atari frame change (66d80a2: the two-frame max on RGB, as the original, instead of
# the max on the emulator's gray frames). ppo_atari.py on MsPacmanNoFrameskip-v4 (where the frames differ most
# often), 300k steps, 6 seeds a side: "gray-max" (seeds 1-6) runs from a worktree pinned at 66d80a2^ (0ae9cd3),
# "rgb-max" (seeds 101-106) from one pinned at 66d80a2. Each side has seeds of its own: the gate counts runs of one
# seed number under both tags as pairs of seeds (their luck may be shared), and 6 shared seeds could not decide.
# The two sides run side by side, one run each at a time, one thread each, at nice 19.
# Run it again after any stop: each side's benchmark continues from its log folder (finished runs skipped, the
# others resumed from their newest checkpoint, every 25 iterations = 25,600 steps). Estimated 5-13 core-hours
# (ppo_atari.py, one thread: ~200 SPS on an idle core, ~75 under this machine's load); ~3-7 h on two cores.
# Then the gate: RLops on the two sides' runs, --fail-on-regression (exit 1 regression, 3 inconclusive); its
# Markdown and figures go to $OUT, to be copied into benchmark/results/ and docs/benchmarks/images/.
# A stop: kill -TERM <this script's pid>; both sides' benchmarks stop their runs (logs and checkpoints kept).
# FRAMES_RLOPS_DRY_RUN=1 checks the pins and prints what would run; it makes no worktree and runs nothing.
set -u
BEFORE=0ae9cd3  # 66d80a2^: the max on the emulator's gray frames
AFTER=66d80a2   # the original's frames
OUT=$HOME/runs/frames_rlops
VENV=${FRAMES_RLOPS_VENV:-/work/main/.venv}
REPO=${FRAMES_RLOPS_REPO:-/work/main}
DRY=${FRAMES_RLOPS_DRY_RUN:-}
declare -A PIN=([gray-max]=$BEFORE [rgb-max]=$AFTER)
declare -A TREE=([gray-max]=$HOME/runs/tree_frames_gray_max [rgb-max]=$HOME/runs/tree_frames_rgb_max)

for side in gray-max rgb-max; do  # each side's code: a clean worktree at its pin, made once
    pin=${PIN[$side]} tree=${TREE[$side]}
    if [ "$(git -C "$REPO" rev-parse --short=7 "$pin^{commit}" 2>/dev/null)" != "$pin" ]; then
        echo "frames_rlops: $REPO has no commit $pin" >&2
        exit 2
    fi
    if [ ! -d "$tree" ]; then
        if [ -n "$DRY" ]; then echo "would make the worktree $tree at $pin"; continue; fi
        git -C "$REPO" worktree add --detach "$tree" "$pin" || { echo "frames_rlops: cannot make the worktree $tree at $pin" >&2; exit 2; }
    fi
    head=$(git -C "$tree" rev-parse --short=7 HEAD)
    if [ "$head" != "$pin" ] || [ -n "$(git -C "$tree" status --porcelain --untracked-files=no)" ]; then
        echo "frames_rlops: $tree is at $head or has edits; the $side side runs only from a clean $pin" >&2
        exit 2
    fi
done
[ -n "$DRY" ] || mkdir -p "$OUT/logs"
. "$VENV/bin/activate"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1

side() {  # one side's six runs, in its own worktree (runs land in its runs/), continued from its log folder
    local name=$1 tree=$2 start_seed=$3  # seeds of their own per side: the gate counts shared seed numbers as pairs
    local command=(python -m cleanrl_utils.benchmark --env-ids MsPacmanNoFrameskip-v4 --num-seeds 6 --start-seed "$start_seed" --workers 1
        --command "python cleanrl/ppo_atari.py --total-timesteps 300000 --checkpoint-frequency 25"
        --log-dir "$OUT/logs/$name")
    echo "$(date -u +%FT%TZ) start ($name, in $tree): WANDB_TAGS=frames-$name $(printf '%q ' "${command[@]}")"
    [ -n "$DRY" ] && return 0
    (cd "$tree" && PYTHONPATH=$tree WANDB_TAGS=frames-$name nice -n 19 "${command[@]}")
    local status=$?
    echo "$(date -u +%FT%TZ) exit $status ($name)"
    return $status
}

if [ -n "$DRY" ]; then
    side gray-max "${TREE[gray-max]}" 1
    side rgb-max "${TREE[rgb-max]}" 101
else  # each side in a process group of its own, so that a stop reaches its benchmark and, through it, the runs
    export -f side
    export OUT DRY
    setsid bash -c 'side "$@"' side gray-max "${TREE[gray-max]}" 1 >>"$OUT/gray-max.log" 2>&1 &
    a=$!
    setsid bash -c 'side "$@"' side rgb-max "${TREE[rgb-max]}" 101 >>"$OUT/rgb-max.log" 2>&1 &
    b=$!
    trap 'kill -TERM -- -$a -$b 2>/dev/null; wait; exit 130' TERM INT
    wait $a
    status_a=$?
    wait $b
    status_b=$?
    if [ $status_a -ne 0 ] || [ $status_b -ne 0 ]; then
        echo "frames_rlops: the sides' benchmarks ended with exit $status_a / $status_b (logs in $OUT); no verdict" >&2
        exit 1
    fi
fi

# the gate, by this repository's RLops (REPO's code), on both sides' runs
gate=(python -m cleanrl_utils.rlops --runs-dir "${TREE[rgb-max]}/runs" "${TREE[gray-max]}/runs"
    --exp-name ppo_atari --env-ids MsPacmanNoFrameskip-v4 --tags frames-rgb-max frames-gray-max
    --baseline frames-gray-max --fail-on-regression --output-filename "$OUT/rlops_ppo_atari_rgb_max/compare"
    --output-markdown "$OUT/rlops_ppo_atari_rgb_max.md")
echo "$(date -u +%FT%TZ) gate (in $REPO): $(printf '%q ' "${gate[@]}")"
[ -n "$DRY" ] && exit 0
cd "$REPO" && PYTHONPATH=$REPO nice -n 19 "${gate[@]}"
status=$?
echo "$(date -u +%FT%TZ) frames_rlops: gate exit $status (0 pass, 1 regression, 3 inconclusive)"
exit $status
