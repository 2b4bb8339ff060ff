"""Does self-play learn? ppo_pettingzoo_ma_atari.py on PettingZoo's Pong, against a random player and by its games' lengths.

    python benchmark/checks/pettingzoo_pong_selfplay.py run [--total-timesteps 500000] [--seeds 1] [-- SCRIPT FLAGS]
    python benchmark/checks/pettingzoo_pong_selfplay.py report [--out DIR]       # the finished runs, against random
    python benchmark/checks/pettingzoo_pong_selfplay.py evaluate --games 50      # more games for the saved policies
    python benchmark/checks/pettingzoo_pong_selfplay.py lengths RUN_DIR [--bins 5]  # one run's episode-length curve
    python benchmark/checks/pettingzoo_pong_selfplay.py run --env-id boxing_v2 --out benchmark_runs/pettingzoo_boxing_selfplay

`--env-id` picks another two-player game of pettingzoo.atari for `run`, `report` and `evaluate` (Pong by
default); a summary and the random players' games are named after their game.

One policy plays both paddles, so each player's return stays near 0 however well it plays. Two
readings of what self-play learned:
- **Against a random player** (the check): each run trains with `--save-model`, and the script then
  scores the saved policy in 10 games against a player pressing uniformly random buttons, sides
  alternating (`eval/episodic_return`: points won per game). The yardstick is the same 10 games
  (same seed) with a random player in the policy's seat. A run passes when its policy wins more
  points per game than the random player does. Ten games separate little (a random player already
  wins half its games), so `evaluate` plays more games with each finished run's saved policy and with
  a random player in its seat (same games, another seed than training's evaluation), and reports the
  probability that a game of the policy scores more than a random player's game, with the two-sided
  permutation p-value of `cleanrl_utils.rlstats` (the policy is no better than random).
- **Episode lengths**: a random pair misses the ball quickly and a game is short; players that
  return the ball make rallies, and games grow longer. `lengths` splits a run's finished games (both
  players' episodes, by the step they ended at) into equal step ranges and prints the mean length in each.

Runs go through the project's runner (benchmark/harness.py: one torch thread, logs under
`--out`/logs); a run is done once its summary JSON exists, and `run` started again runs what is not
done. The file writes no checkpoints: a stopped run starts over, so size `--total-timesteps` to
finish in one sitting (500k agent steps: about 75 minutes alone on one core of the project's CPU).
"""

import argparse
import importlib
import json
import os
import statistics
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmark.harness import QueuedRun, Scalars, one_thread_env, positive_int, run_queue, script, summarize_run, write_result  # noqa: E402
from cleanrl_utils.tensorboard_reader import read_scalars  # noqa: E402

ENV_ID = "pong_v3"  # the default game
LENGTH_TAGS = ("charts/episodic_length-player0", "charts/episodic_length-player1")
WINNING_POINTS = {"pong_v3": 21}  # games whose winner is the first side to reach these points
EVAL_TAG = "eval/episodic_return"  # points the saved policy won in each evaluation game against random
EVAL_GAMES, EVAL_SEED = 10, 0  # as the script's evaluation plays them


def episode_lengths(run_dir: Path) -> list[tuple[int, float]]:
    """(global step at the end, length in agent steps) of every finished episode of both players, by step."""
    scalars = read_scalars(run_dir)
    return sorted(point for tag in LENGTH_TAGS for point in scalars.get(tag, []))


def length_curve(points: list[tuple[int, float]], total_steps: int, bins: int) -> list[tuple[int, int, int, float]]:
    """(first step, last step, episodes, mean length) for `bins` equal step ranges of the run; empty ranges are left out."""
    edges = [round(total_steps * i / bins) for i in range(bins + 1)]
    curve = []
    for lo, hi in zip(edges, edges[1:]):
        lengths = [length for step, length in points if lo < step <= hi]
        if lengths:
            curve.append((lo, hi, len(lengths), statistics.fmean(lengths)))
    return curve


def lengths_report(run_dir: Path, bins: int) -> str:
    points = episode_lengths(run_dir)
    if not points:
        raise SystemExit(f"pettingzoo_pong_selfplay.py: error: {run_dir} has no finished episodes to report")
    total_steps = max(step for tag_points in read_scalars(run_dir).values() for step, _ in tag_points)
    curve = length_curve(points, total_steps, bins)
    lines = ["| agent steps | episodes ended | mean episode length |", "|---|---|---|"]
    lines += [f"| {lo:,}–{hi:,} | {n} | {mean:.0f} |" for lo, hi, n, mean in curve]
    (_, _, _, start), (_, _, _, end) = curve[0], curve[-1]
    lines += ["", f"start {start:.0f} → end {end:.0f} agent steps per game ({end / start:.2f}×)"]
    return "\n".join(lines)


def selfplay_measures(run_dir: Path, scalars: Scalars) -> dict:
    """A finished run's own measures: its evaluation points and every episode length."""
    return {
        "run": run_dir.name,
        "eval_points": [value for _, value in scalars[EVAL_TAG]],
        "episode_lengths": episode_lengths(run_dir),
    }


# the summary of a finished run: its identity, its speed and the measures above (no returns: both players score)
summarize = partial(summarize_run, tag=None, extra=selfplay_measures)


def result_path(out: Path, env_id: str, total_timesteps: int, seed: int) -> Path:
    return out / f"selfplay__{env_id}__{total_timesteps}__{seed}.json"


def finished_runs(out: Path, env_id: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob(f"selfplay__{env_id}__*.json"))]


def random_name(env_id: str, max_cycles: int) -> str:
    """The stem of the random players' games (Pong's named as before other games could be chosen)."""
    return f"random_vs_random__{max_cycles}" if env_id == ENV_ID else f"random_vs_random__{env_id}__{max_cycles}"


def run(out: Path, env_id: str, total_timesteps: int, seeds: int, max_cycles: int, script_args: list[str]) -> int:
    """Train (and evaluate) every seed not done yet, one at a time; the runner's exit code."""
    runs = []
    for seed in range(1, seeds + 1):
        result = result_path(out, env_id, total_timesteps, seed)
        args = ("--total-timesteps", str(total_timesteps), "--max-cycles", str(max_cycles), "--save-model", *script_args)
        identity = {"env_id": env_id, "seed": seed, "total_timesteps": total_timesteps, "max_cycles": max_cycles}
        summary = partial(summarize, result=result, **identity)
        runs.append(QueuedRun(result, script("ppo_pettingzoo_ma_atari"), args, env_id, seed, summarize=summary))
    return run_queue(runs, 1, one_thread_env(), out / "logs")


def random_points(out: Path, env_id: str, max_cycles: int) -> list[float]:
    """Points per game of a random player against a random opponent, in the evaluation's games (computed once, kept in `out`)."""
    cached = out / f"{random_name(env_id, max_cycles)}.json"
    if not cached.exists():
        from cleanrl_utils.evals.special import points_against_random

        make_env = importlib.import_module("cleanrl.ppo_pettingzoo_ma_atari").make_vector_env
        points = points_against_random(make_env, env_id, None, EVAL_GAMES, EVAL_SEED, max_cycles)
        summary = {"env_id": env_id, "games": EVAL_GAMES, "seed": EVAL_SEED, "max_cycles": max_cycles, "points": points}
        write_result(cached, summary)
    return json.loads(cached.read_text())["points"]


def versus_random_report(out: Path, env_id: str = ENV_ID) -> str:
    """Each finished run's policy against random, beside random against random, in the same games."""
    results = finished_runs(out, env_id)
    if not results:
        raise SystemExit(f"pettingzoo_pong_selfplay.py: error: no finished runs under {out}")
    lines = [
        f"| agent steps | seed | trained policy vs random: points per game ({EVAL_GAMES} games) "
        "| random vs random | passes (more points than random) |",
        "|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: (r["total_timesteps"], r["seed"])):
        baseline_points = random_points(out, env_id, r["max_cycles"])
        trained, baseline = statistics.fmean(r["eval_points"]), statistics.fmean(baseline_points)
        lines.append(
            f"| {r['total_timesteps']:,} | {r['seed']} | {points_cell(r['eval_points'], env_id)} "
            f"| {points_cell(baseline_points, env_id)} "
            f"| {'yes' if trained > baseline else '**no**'} |"
        )
    return "\n".join(lines)


def won(points: Sequence[float], env_id: str) -> str:
    """ "; N won": the games won, in a game won by the first side to reach a score (Pong: 21); "" in others."""
    if env_id not in WINNING_POINTS:
        return ""
    return f"; {sum(p >= WINNING_POINTS[env_id] for p in points)} won"


def points_cell(points: list[float], env_id: str = ENV_ID) -> str:
    """Mean points per game, each game's points, and the games won."""
    return f"{statistics.fmean(points):.1f} ({', '.join(f'{p:.0f}' for p in points)}{won(points, env_id)})"


def saved_model(out: Path, result: dict) -> Path:
    """The model file the finished run saved (the runner ran it in `out/<summary name>`)."""
    stem = result_path(out, result["env_id"], result["total_timesteps"], result["seed"]).stem
    return out / stem / "runs" / result["run"] / "ppo_pettingzoo_ma_atari.cleanrl_model"


def more_games_files(out: Path, result: dict, games: int, seed: int) -> tuple[Path, Path]:
    """Where the extra games of a finished run's policy, and of a random player in its seat, are kept."""
    games_name = f"{games}_games__seed{seed}.json"
    env = "" if result["env_id"] == ENV_ID else f"{result['env_id']}__"  # Pong's named as before
    played = out / f"more_games__{env}{result['total_timesteps']}__{result['seed']}__{games_name}"
    return played, out / f"{random_name(result['env_id'], result['max_cycles'])}__{games_name}"


def more_games(out: Path, env_id: str, games: int, seed: int) -> None:
    """Play `games` games (from `seed`) with each finished run's saved policy, and with a random player in its seat."""
    from cleanrl_utils.evals.special import evaluate_pettingzoo, points_against_random

    module = importlib.import_module("cleanrl.ppo_pettingzoo_ma_atari")
    for result in finished_runs(out, env_id):
        max_cycles = result["max_cycles"]
        played, baseline = more_games_files(out, result, games, seed)
        if not baseline.exists():
            points = points_against_random(module.make_vector_env, env_id, None, games, seed, max_cycles)
            write_result(baseline, {"games": games, "seed": seed, "max_cycles": max_cycles, "points": points})
        if not played.exists():
            model = saved_model(out, result)
            points = evaluate_pettingzoo(
                str(model),
                module.make_vector_env,
                env_id,
                games,
                "more-games",
                module.Agent,
                capture_video=False,
                seed=seed,
                max_cycles=max_cycles,
            )
            write_result(played, {"games": games, "seed": seed, "run": result["run"], "points": points})
        print(f"{played.name}: done", flush=True)


def more_games_report(out: Path, games: int, seed: int, env_id: str = ENV_ID) -> str:
    """Each run's policy against random in the extra games, beside random against random in the same games."""
    import numpy as np

    from cleanrl_utils import rlstats

    lines = [
        "| agent steps | seed | games (seed) | trained policy vs random: points per game ± s.e. | random vs random "
        "| P(policy's game > random's) | p (permutation) | passes (more points per game) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in sorted(finished_runs(out, env_id), key=lambda r: r["seed"]):
        played, baseline = more_games_files(out, result, games, seed)
        if not (played.exists() and baseline.exists()):
            continue
        trained, randoms = (np.asarray(json.loads(p.read_text())["points"], float) for p in (played, baseline))
        better = float(rlstats.probability_of_improvement(trained, randoms))
        p_value = rlstats.permutation_p_value([trained], [randoms], 10_000, np.random.default_rng(0))
        passes = trained.mean() > randoms.mean()
        lines.append(
            f"| {result['total_timesteps']:,} | {result['seed']} | {games} ({seed}) | {mean_cell(trained, env_id)} "
            f"| {mean_cell(randoms, env_id)} | {better:.2f} | {p_value:.3f} | {'yes' if passes else '**no**'} |"
        )
    return "\n".join(lines)


def mean_cell(points: Sequence[float], env_id: str = ENV_ID) -> str:
    """Mean ± standard error of the points per game, and the games won."""
    se = statistics.stdev(points) / len(points) ** 0.5 if len(points) > 1 else float("nan")
    games = won(points, env_id).removeprefix("; ")
    return f"{statistics.fmean(points):.1f} ± {se:.1f}" + (f" ({games})" if games else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="train and evaluate the seeds not done yet, then report")
    run_parser.add_argument("--total-timesteps", type=int, default=500_000, help="agent steps (both players)")
    run_parser.add_argument("--seeds", type=positive_int, default=1)
    run_parser.add_argument(
        "--max-cycles", type=int, default=100_000, help="emulator frames after which a game is cut (training and evaluation)"
    )
    run_parser.add_argument("script_args", nargs="*", help="more flags for the script, after --")
    report_parser = commands.add_parser("report", help="the finished runs' policies against a random player")
    evaluate_parser = commands.add_parser("evaluate", help="more games for each finished run's saved policy, then report")
    evaluate_parser.add_argument("--games", type=positive_int, default=50)
    evaluate_parser.add_argument("--seed", type=int, default=1000, help="of the first game (training's evaluation: 0)")
    for sub in (run_parser, report_parser, evaluate_parser):
        sub.add_argument("--out", type=Path, default=REPO / "benchmark_runs" / "pettingzoo_pong_selfplay")
        sub.add_argument("--env-id", default=ENV_ID, help="a two-player game of pettingzoo.atari")
    lengths_parser = commands.add_parser("lengths", help="the episode-length curve of a finished run")
    lengths_parser.add_argument("run_dir", type=Path)
    lengths_parser.add_argument("--bins", type=int, default=5, help="equal step ranges of the curve")
    args = parser.parse_args()
    if args.command == "lengths":
        print(lengths_report(args.run_dir, args.bins))
        return
    if args.command == "evaluate":
        if args.games < 2:
            parser.error("--games must be at least 2 (a standard error needs two games)")
        more_games(args.out, args.env_id, args.games, args.seed)
        print(more_games_report(args.out, args.games, args.seed, args.env_id))
        return
    if args.command == "run":
        args.out.mkdir(parents=True, exist_ok=True)
        if code := run(args.out, args.env_id, args.total_timesteps, args.seeds, args.max_cycles, args.script_args):
            sys.exit(code)
    print(versus_random_report(args.out, args.env_id))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
