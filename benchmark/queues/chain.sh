#!/usr/bin/env bash
# The long queues one after another: mujoco_1m.sh (issue 53), then issue54.sh. (frames_rlops.sh, issue 55, has its
# verdict recorded in benchmark/results/rlops_ppo_atari_rgb_max.md; run it by hand to repeat it.)
# Each queue is resumable, so this chain is too: run it again after any stop, and a queue that finished before
# passes quickly (its benchmarks skip finished runs) before the next one continues. A queue already running when the
# chain reaches it (started by hand) is waited for, never started twice. A queue's exit status is logged and the
# chain goes on, except after a stop.
# A stop: kill -TERM <this script's pid>; the running queue gets SIGTERM and stops its runs (logs and checkpoints kept).
# CHAIN_DRY_RUN=1 prints the order and runs each queue's own dry run (ISSUE54_DRY_RUN);
# mujoco_1m.sh has no dry run, so it is only named.
set -u
HERE=$(cd "$(dirname "$0")" && pwd -P)
QUEUES=(mujoco_1m.sh issue54.sh)
DRY=${CHAIN_DRY_RUN:-}

running() {  # pids of processes running this folder's queue script $1, by whatever path they were started
    local pid script
    for pid in $(pgrep -f "queues/$1\$"); do
        script=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep "queues/$1\$" | head -n 1)
        [ "$(cd "/proc/$pid/cwd" 2>/dev/null && realpath -m "$script")" = "$HERE/$1" ] && echo "$pid"
    done
}

# Linux weighs each session's scheduling autogroup at nice 0, and every run has a session of its own, so nice 19 alone
# would not make the runs yield to other work; the runners of the pinned queues predate the fix that carries the
# niceness over (cleanrl_utils/benchmark/supervise.py keep_niceness): give every nice-19 process's group nice 19.
keep_queues_niced() {
    while true; do
        ps -eo pid=,ni= | while read -r pid ni; do
            [ "$ni" = 19 ] && echo 19 >"/proc/$pid/autogroup" 2>/dev/null
        done
        sleep 60
    done
}
niced=
[ -z "$DRY" ] && { keep_queues_niced </dev/null >/dev/null 2>&1 & niced=$!; }  # holds none of our pipes open

child= sleeper=
trap '[ -n "$niced" ] && kill "$niced" 2>/dev/null; [ -n "$child" ] && kill -TERM -- -"$child" 2>/dev/null; [ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null; wait
    echo "$(date -u +%FT%TZ) chain: stopped"; exit 130' TERM INT
for queue in "${QUEUES[@]}"; do
    if [ -n "$DRY" ]; then
        echo "chain: $queue"
        case $queue in
            issue54.sh) ISSUE54_DRY_RUN=1 bash "$HERE/$queue" ;;
        esac
        continue
    fi
    while [ -n "$(running "$queue")" ]; do  # started by hand before the chain: let it finish, do not race it
        echo "$(date -u +%FT%TZ) chain: $queue is already running (pid $(running "$queue" | tr '\n' ' ')); waiting"
        sleep "${CHAIN_POLL_S:-300}" &
        sleeper=$!
        wait $sleeper
        sleeper=
    done
    echo "$(date -u +%FT%TZ) chain: start $queue"
    setsid bash "$HERE/$queue" &  # a process group of its own, which a stop of the chain reaches whole
    child=$!
    wait $child
    status=$?
    child=
    echo "$(date -u +%FT%TZ) chain: $queue ended, exit $status"
done
[ -n "$niced" ] && kill "$niced" 2>/dev/null
echo "$(date -u +%FT%TZ) chain: all queues ended"
