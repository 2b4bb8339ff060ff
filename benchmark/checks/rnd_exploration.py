"""Does RND's curiosity make ppo_rnd_envpool.py explore? Montezuma's Revenge, with and without it.

    python -m benchmark.checks.rnd_exploration run --workers 2 --threads 1    # the runs not done yet, resuming stopped ones
    python -m benchmark.checks.rnd_exploration run --seeds 1                  # only seed 1 of each arm
    python -m benchmark.checks.rnd_exploration report                         # the Markdown table for docs/rl-algorithms/ppo-rnd.md

The published run (2 billion steps on 128 envs) is far out of reach of a 2-core CPU, and at a small
budget neither arm scores many points in Montezuma's Revenge. What RND changes first is where the agent
goes: its bonus pays for frames the predictor has not learned yet. So the check compares the same file
with the bonus on (`--int-coef 1`, the default) and off (`--int-coef 0`: the policy follows the
extrinsic advantages only; the predictor and the intrinsic value head still train, so both arms cost the
same and differ in nothing else), on the same steps and seeds, and counts where each run went, from the
game's RAM (`cleanrl_utils.runtime.visited_places`): the places (a room and an 8x8-pixel cell of the player) and
rooms reached by the whole run (`charts/visited_places`, `charts/visited_rooms`) and by each game
(`charts/episode_visited_places`, `charts/episode_visited_rooms`), and the games that scored (the key, in the
first room, is worth 100).

**Verdict** (fixed before the runs): RND passes when every seed with the bonus reached more places over
the whole run than every seed without (3 seeds a side: an exact one-sided permutation test at 1/20).
The run's total measures what exploration found. In the first room it saturates (about 190 places,
reached by both arms within 53k steps in 2026-12's 200k runs): only leaving it, through a door the key
opens, adds places. The per-game counts are reported beside it, not judged: with the bonus the games of
the 200k runs were shorter (a lost life's frames are new to the predictor) and reached fewer places each.

Settings: the published hyperparameters except 32 envs (published 128: a run of this budget makes ~490
updates instead of ~120), `STEPS` steps per run, seeds 1-3. The runs go through the project's runner
(harness's queue, logs under `--out`/logs), with a checkpoint every `CHECKPOINT_EVERY` iterations: a
stopped run resumes (envpool cannot save its games, so a resumed run starts new games from other env
seeds; what it learned and reached carries over). Cost: ~100 steps/s per run with one torch thread beside
another run (92-112 measured, 2026-12-02), ~5.6 h per run, ~33 core-hours for the six. The summaries
(`*.json` under `--out`) are committed under benchmark/results/rnd_exploration/.
"""

import json
import os
import statistics
from functools import partial
from pathlib import Path

from benchmark.harness import (
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

REPO = Path(__file__).resolve().parents[2]

ENV_ID = "MontezumaRevenge-v5"
STEPS = 2_000_000
SEEDS = (1, 2, 3)
CHECKPOINT_EVERY = 25  # iterations of 32 x 128 steps: ~17 minutes
LAST_GAMES = 100
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
        "game_rooms": [value for _, value in scalars.get("charts/episode_visited_rooms", [])],
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
            runs.append(QueuedRun(result, program, (*SHARED_ARGS, *arm_args), ENV_ID, seed, CHECKPOINT_EVERY, write))
    return runs


def report(out: Path) -> str:
    summaries = [json.loads(p.read_text()) for p in sorted(out.glob(f"ppo_rnd_envpool__*__{ENV_ID}__{STEPS}__*.json"))]
    rows = []
    totals: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for s in sorted(summaries, key=lambda s: (list(ARMS).index(s["arm"]), s["seed"])):
        games, places, rooms = s["episodic_returns"], s["game_places"][-LAST_GAMES:], s.get("game_rooms", [])[-LAST_GAMES:]
        totals[s["arm"]].append(s["visited_places"])
        rows.append(
            [s["arm"], s["seed"], f"{s['steps'] // 1000}k", f"{s['visited_places']:.0f}", f"{s['visited_rooms']:.0f}"]
            + [f"{statistics.fmean(places):.1f}" if places else "—", f"{statistics.fmean(rooms):.2f}" if rooms else "—"]
            + [len(games), sum(score > 0 for score in games), f"{statistics.fmean(games):.1f}" if games else "—"]
            + [f"{s['sps']:.0f}"]
        )
    header = ["arm", "seed", "steps", "places reached in all", "rooms reached in all"]
    header += [f"places per game, last {LAST_GAMES}", f"rooms per game, last {LAST_GAMES}", "games", "games that scored"]
    lines = [markdown_table([*header, "mean game score", "SPS"], rows)]
    if all(len(values) == len(SEEDS) for values in totals.values()):
        passes = min(totals["rnd"]) > max(totals["no_intrinsic"])
        means = {arm: statistics.fmean(values) for arm, values in totals.items()}
        lines += [
            "",
            f"Places reached in all, mean over seeds: with RND {means['rnd']:.0f}, without {means['no_intrinsic']:.0f}. "
            f"Every RND seed above every seed without (the verdict): {'yes: passes' if passes else '**no**: fails'}.",
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
    cli.parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    cli.count("--workers", 1, "run: learning runs at a time")
    cli.count("--threads", 2, "run: torch threads per run")
    cli.run(cli.parse())


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
