"""Where a script's training loop spends its time, by part: environments, network, optimizer, replay, logging, the loop.

    python -m benchmark.compare.speed_profile cleanrl/dqn.py --total-timesteps 50000
    python -m benchmark.compare.speed_profile cleanrl/ppo_atari.py --total-timesteps 8192 --top 20

Runs the script in this process under cProfile, switched on when its training starts (`with exp:`)
and off when it ends, so imports and set-up are left out. Each function's own time goes to a part
by the file it is defined in (Gymnasium, ALE, MuJoCo and SB3's Atari wrappers: env; torch.nn and
autograd: network; torch.optim: optimizer; ...); a built-in (a torch kernel, a NumPy call) goes to
the parts of the functions that called it, in proportion, and so does a function of a library of no
part (NumPy, torch's core: a NumPy call made by a Gymnasium wrapper is the env's time). The table gives each part's seconds and
share; `--top N` adds the N functions with the most own time. cProfile adds a cost to every Python
call, so the Python-heavy parts (env wrappers, the loop) read larger than they run; the parts'
order is what the table is for. It uses the threads the script would (`OMP_NUM_THREADS`...).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import runpy
import sys
from collections import defaultdict
from pathlib import Path

OTHER = "other (calls in a cycle)"
LOOP = "the script's loop"
# (part, fragments of a file path that mark it); the first match wins
PARTS = (
    ("replay memory", ("stable_baselines3/common/buffers.py", "cleanrl_utils/runtime/frame_replay.py")),
    ("env", ("gymnasium/", "ale_py/", "mujoco/", "stable_baselines3/common/atari_wrappers.py", "shimmy/", "dm_control/")),
    # the event writer's queue wakes its thread (threading, queue): that hand-over is logging's cost
    ("logging", ("torch/utils/tensorboard/", "tensorboard/", "google/protobuf/", "wandb/", "/threading.py", "/queue.py")),
    ("optimizer", ("torch/optim/",)),
    ("network (forward, backward)", ("torch/nn/", "torch/autograd/", "torch/_tensor.py", "torch/distributions/")),
    ("run plumbing (cleanrl_utils)", ("cleanrl_utils/",)),
    (LOOP, ("cleanrl/",)),
)


def part_of(filename: str) -> str | None:
    """The part a function belongs to by its file; None for a built-in or a file of no part (NumPy, torch's core)."""
    path = filename.replace("\\", "/")
    return next((part for part, marks in PARTS if any(mark in path for mark in marks)), None)


def split_by_part(stats: pstats.Stats) -> dict[str, float]:
    """Own time per part; a built-in's own time is shared among its callers' parts by what each call cost."""
    raw = stats.stats  # func -> (primitive calls, calls, own time, cumulative time, callers)
    memo: dict[tuple, dict[str, float]] = {}

    def shares(func: tuple, seen: frozenset) -> dict[str, float]:
        """How one second of `func`'s own time splits among parts."""
        if func in memo:
            return memo[func]
        part = "logging" if func[2] == "<built-in method builtins.print>" else part_of(func[0])
        if part is not None:
            return {part: 1.0}
        callers = raw[func][4] if func in raw else {}
        if not callers:  # called from the script's own frame, which began before the profiler
            return {LOOP: 1.0}
        total = sum(entry[2] for entry in callers.values())
        out: dict[str, float] = defaultdict(float)
        for caller, entry in callers.items():
            weight = entry[2] / total if total else 1.0 / len(callers)
            for p, share in (shares(caller, seen | {func}) if caller not in seen else {OTHER: 1.0}).items():  # a cycle
                out[p] += weight * share
        memo[func] = dict(out)
        return memo[func]

    parts: dict[str, float] = defaultdict(float)
    for func, (_, _, own, _, _) in raw.items():
        for part, share in shares(func, frozenset()).items():
            parts[part] += own * share
    return dict(parts)


def profile_training(script: Path, argv: list[str]) -> cProfile.Profile:
    """Run `script` as __main__ with `argv`, profiling from `with exp:` to its end."""
    from cleanrl_utils.runtime.experiment import Experiment

    profiler = cProfile.Profile()
    enter, leave = Experiment.__enter__, Experiment.__exit__

    def profiled_enter(self):
        result = enter(self)
        profiler.enable()
        return result

    def profiled_exit(self, *exc):
        profiler.disable()
        return leave(self, *exc)

    Experiment.__enter__, Experiment.__exit__ = profiled_enter, profiled_exit
    sys.argv = [str(script), *argv]
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        Experiment.__enter__, Experiment.__exit__ = enter, leave
    return profiler


def table(parts: dict[str, float]) -> str:
    total = sum(parts.values())
    lines = ["| part | seconds | share |", "|---|---|---|"]
    for part, seconds in sorted(parts.items(), key=lambda item: -item[1]):
        lines.append(f"| {part} | {seconds:.2f} | {seconds / total:.0%} |")
    return "\n".join(lines + [f"| all of the training loop | {total:.2f} | 100% |"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("script", type=Path, help="an algorithm file, e.g. cleanrl/dqn.py")
    parser.add_argument("--top", type=int, default=0, help="also list the N functions with the most own time")
    args, script_argv = parser.parse_known_args(argv)
    if not args.script.is_file():
        parser.error(f"{args.script}: no such file")
    profiler = profile_training(args.script.resolve(), script_argv)
    profiler.create_stats()
    if not profiler.stats:
        parser.error(f"{args.script} never entered its training loop (`with exp:`): nothing was profiled")
    stats = pstats.Stats(profiler)
    print(f"\n`python -m benchmark.compare.speed_profile {args.script} {' '.join(script_argv)}`\n")
    print(table(split_by_part(stats)))
    if args.top:
        print(f"\nThe {args.top} functions with the most own time:\n")
        stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
