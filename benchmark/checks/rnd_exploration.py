"""Does RND's curiosity make ppo_rnd_envpool.py explore? Montezuma's Revenge, with and without it.

    python benchmark/checks/rnd_exploration.py run --workers 1 --threads 2    # the runs not done yet, one at a time
    python benchmark/checks/rnd_exploration.py run --seeds 1                  # only seed 1 of each arm
    python benchmark/checks/rnd_exploration.py report                         # the Markdown table for docs/rl-algorithms/ppo-rnd.md

The published run (2 billion steps on 128 envs) is far out of reach of a 2-core CPU, and at a small
budget neither arm scores points in Montezuma's Revenge. What RND changes first is where the agent
goes: its bonus pays for frames the predictor has not learned yet. So the check compares the same file
with the bonus on (`--int-coef 1`, the default) and off (`--int-coef 0`: the policy follows the
extrinsic advantages only; the predictor still trains, so both arms cost the same), on the same steps
and seeds, and counts where each run's games went: the places (room and 8x8-pixel cell of the player, read from
the game's RAM by `cleanrl_utils.visited_places`) that each game reached (`charts/episode_visited_places`),
and those and the rooms reached by the whole run. RND passes when every seed with the bonus reached
more places per game, over its last `LAST_GAMES` games, than every seed without. Per game, because the
run's total saturates in the first room, which only the key opens: in a first try (seed 1, 2026-12-02,
stopped at 94k steps) the run without the bonus had reached 183 places by 53k steps and none after,
the run with it 189 by 53k and none after.

Settings: the published hyperparameters except 32 envs (published 128) so that a short run still
makes dozens of updates (a batch of 4,096 steps), and `STEPS` steps per run. The runs go through the
project's runner (harness's queue, logs under `--out`/logs); envpool's games cannot be saved, so the
file has no checkpoints and a stopped run starts over. The summaries (`*.json` under `--out`) are
committed under benchmark/results/rnd_exploration/.
"""

import json
import os
import statistics
import sys
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmark.harness import (  # noqa: E402
    CommandLine,
    QueuedRun,
    Scalars,
    markdown_table,
    queue_command,
    report_command,
    script,
    summarize_run,
    torch_threads_env,
)

ENV_ID = "MontezumaRevenge-v5"
STEPS = 200_000
LAST_GAMES = 20
SHARED_ARGS = ("--num-envs", "32", "--total-timesteps", str(STEPS))
ARMS = {"rnd": ("--int-coef", "1.0"), "no_intrinsic": ("--int-coef", "0.0")}


def exploration(run_dir: Path, scalars: Scalars) -> dict:
    """The run's final counts of places and rooms, its curve of places and its game scores."""
    return {
        "steps": scalars["charts/visited_places"][-1][0],
        "visited_places": scalars["charts/visited_places"][-1][1],
        "visited_rooms": scalars["charts/visited_rooms"][-1][1],
        "places_curve": scalars["charts/visited_places"],
        "episodic_returns": [value for _, value in scalars.get("charts/episodic_return", [])],
        "game_places": [value for _, value in scalars.get("charts/episode_visited_places", [])],
    }


def result_path(out: Path, arm: str, seed: int) -> Path:
    return out / f"ppo_rnd_envpool__{arm}__{ENV_ID}__{STEPS}__{seed}.json"


def learning_runs(out: Path, seeds: list[int]) -> list[QueuedRun]:
    runs = []
    for seed in seeds:  # seed by seed, so that a stopped benchmark has compared pairs
        for arm, arm_args in ARMS.items():
            result = result_path(out, arm, seed)
            program = script("ppo_rnd_envpool")
            # episodic_returns as exploration() reads them: a run that finished no game is still summarised
            write = partial(summarize_run, result=result, tag=None, extra=exploration, arm=arm, seed=seed, env_id=ENV_ID)
            runs.append(QueuedRun(result, program, (*SHARED_ARGS, *arm_args), ENV_ID, seed, summarize=write))
    return runs


def report(out: Path) -> str:
    summaries = [json.loads(p.read_text()) for p in sorted(out.glob("ppo_rnd_envpool__*.json"))]
    rows = []
    per_game: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for s in sorted(summaries, key=lambda s: (list(ARMS).index(s["arm"]), s["seed"])):
        games, places = s["episodic_returns"], s["game_places"][-LAST_GAMES:]
        per_game[s["arm"]].append(statistics.fmean(places))
        rows.append(
            [s["arm"], s["seed"], f"{s['steps'] // 1000}k", f"{statistics.fmean(places):.1f}", f"{s['visited_places']:.0f}"]
            + [f"{s['visited_rooms']:.0f}", len(games), f"{statistics.fmean(games):.1f}", f"{s['sps']:.0f}"]
        )
    header = ["arm", "seed", "steps", f"places per game, last {LAST_GAMES}", "places reached in all", "rooms reached"]
    lines = [markdown_table([*header, "games", "mean game score", "SPS"], rows)]
    if all(per_game.values()):
        passes = min(per_game["rnd"]) > max(per_game["no_intrinsic"])
        means = {arm: statistics.fmean(values) for arm, values in per_game.items()}
        lines += [
            "",
            f"Places per game (last {LAST_GAMES}), mean over seeds: with RND {means['rnd']:.1f}, without "
            f"{means['no_intrinsic']:.1f} ({means['rnd'] / means['no_intrinsic']:.2f}×). Every RND seed above every "
            f"seed without: {'yes' if passes else '**no**'}.",
        ]
    return "\n".join(lines)


def main() -> None:
    cli = CommandLine(
        __doc__,
        "rnd_exploration",
        {
            "run": queue_command(
                lambda args: learning_runs(args.out, args.seeds), lambda args: torch_threads_env(args.threads)
            ),
            "report": report_command(report),
        },
    )
    cli.parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    cli.count("--workers", 1, "run: learning runs at a time")
    cli.count("--threads", 2, "run: torch threads per run")
    cli.run(cli.parse())


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
