"""Does RND's curiosity make ppo_rnd_envpool.py explore? Montezuma's Revenge, with and without it.

    python benchmark/rnd_exploration.py run --workers 1 --threads 2    # the runs not done yet, one at a time
    python benchmark/rnd_exploration.py run --seeds 1                  # only seed 1 of each arm
    python benchmark/rnd_exploration.py report                         # the Markdown table for docs/rl-algorithms/ppo-rnd.md

The published run (2 billion steps on 128 envs) is far out of reach of a 2-core CPU, and at a small
budget neither arm scores points in Montezuma's Revenge. What RND changes first is where the agent
goes: its bonus pays for frames the predictor has not learned yet. So the check compares the same file
with the bonus on (`--int-coef 1`, the default) and off (`--int-coef 0`: the policy follows the
extrinsic advantages only; the predictor still trains, so both arms cost the same), on the same steps
and seeds, and counts what each run reached during training: the places (room and 8x8-pixel cell of the
player, read from the game's RAM by `cleanrl_utils.visited_places`, logged as `charts/visited_places`)
and the rooms. RND passes when every seed with the bonus reached more places than every seed without.

Settings: the published hyperparameters except 32 envs (published 128) so that a short run still
makes dozens of updates (a batch of 4,096 steps), and `STEPS` steps per run. The runs go through the
project's runner (benchlib's queue, logs under `--out`/logs); envpool's games cannot be saved, so the
file has no checkpoints and a stopped run starts over. The summaries (`*.json` under `--out`) are
committed under benchmark/results/rnd_exploration/.
"""

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmark import benchlib  # noqa: E402
from benchmark.benchlib import QueuedRun, one_thread_env, run_queue  # noqa: E402
from cleanrl_utils.tensorboard_reader import read_scalars  # noqa: E402

ENV_ID = "MontezumaRevenge-v5"
STEPS = 200_000
SHARED_ARGS = ("--num-envs", "32", "--total-timesteps", str(STEPS))
ARMS = {"rnd": ("--int-coef", "1.0"), "no_intrinsic": ("--int-coef", "0.0")}


def summarize(run_dir: Path, result: Path, arm: str, seed: int) -> None:
    """The run's final counts of places and rooms, its game scores and its speed."""
    scalars = read_scalars(run_dir)
    summary = {
        "arm": arm,
        "seed": seed,
        "env_id": ENV_ID,
        "steps": scalars["charts/visited_places"][-1][0],
        "visited_places": scalars["charts/visited_places"][-1][1],
        "visited_rooms": scalars["charts/visited_rooms"][-1][1],
        "places_curve": scalars["charts/visited_places"],
        "episodic_returns": [value for _, value in scalars.get("charts/episodic_return", [])],
        "sps": scalars["charts/SPS"][-1][1],
    }
    result.write_text(json.dumps(summary))


def result_path(out: Path, arm: str, seed: int) -> Path:
    return out / f"ppo_rnd_envpool__{arm}__{ENV_ID}__{STEPS}__{seed}.json"


def learning_runs(out: Path, seeds: list[int]) -> list[QueuedRun]:
    runs = []
    for seed in seeds:  # seed by seed, so that a stopped benchmark has compared pairs
        for arm, arm_args in ARMS.items():
            result = result_path(out, arm, seed)
            program = benchlib.script("ppo_rnd_envpool")
            write = lambda run_dir, result=result, arm=arm, seed=seed: summarize(run_dir, result, arm, seed)  # noqa: E731
            runs.append(QueuedRun(result, program, (*SHARED_ARGS, *arm_args), ENV_ID, seed, summarize=write))
    return runs


def report(out: Path) -> str:
    summaries = [json.loads(p.read_text()) for p in sorted(out.glob("ppo_rnd_envpool__*.json"))]
    lines = [
        "| arm | seed | steps | places reached | rooms reached | games | mean game score | SPS |",
        "|---|---|---|---|---|---|---|---|",
    ]
    places: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for s in sorted(summaries, key=lambda s: (list(ARMS).index(s["arm"]), s["seed"])):
        places[s["arm"]].append(s["visited_places"])
        games = s["episodic_returns"]
        mean_score = f"{statistics.fmean(games):.1f}" if games else "–"
        lines.append(
            f"| {s['arm']} | {s['seed']} | {s['steps'] // 1000}k | {s['visited_places']:.0f} | {s['visited_rooms']:.0f} "
            f"| {len(games)} | {mean_score} | {s['sps']:.0f} |"
        )
    if all(places.values()):
        passes = min(places["rnd"]) > max(places["no_intrinsic"])
        means = {arm: statistics.fmean(values) for arm, values in places.items()}
        lines += [
            "",
            f"Places reached, mean over seeds: with RND {means['rnd']:.1f}, without {means['no_intrinsic']:.1f} "
            f"({means['rnd'] / means['no_intrinsic']:.2f}×). Every RND seed above every seed without: "
            f"{'yes' if passes else '**no**'}.",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["run", "report"])
    parser.add_argument("--out", type=Path, default=REPO / "benchmark_runs" / "rnd_exploration")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--workers", type=int, default=1, help="run: learning runs at a time")
    parser.add_argument("--threads", type=int, default=2, help="run: torch threads per run")
    args = parser.parse_args()
    if args.command == "run":
        threads = str(args.threads)
        env = one_thread_env() | {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        sys.exit(run_queue(learning_runs(args.out, args.seeds), args.workers, env, args.out / "logs"))
    print(report(args.out))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
