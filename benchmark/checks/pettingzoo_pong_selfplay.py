"""Does self-play learn? ppo_pettingzoo_ma_atari.py on PettingZoo's Pong: games won against a random player and
against the policy's own earlier selves, with an exact binomial test on the games.

    python -m benchmark.checks.pettingzoo_pong_selfplay run [--total-timesteps 4000000] [--seeds 1 2 3] [--workers 1]
    python -m benchmark.checks.pettingzoo_pong_selfplay evaluate     # the matches of every finished run, then report
    python -m benchmark.checks.pettingzoo_pong_selfplay report       # the tables and the verdict, from the matches played
    python -m benchmark.checks.pettingzoo_pong_selfplay lengths RUN_DIR [--bins 5]  # one run's episode-length curve

One policy plays both paddles, so each player's return stays near 0 however well it plays. What the check
measures instead is games won, a hit-or-miss outcome:

- **Training** (`run`): each seed trains with `--save-model`, `--snapshot-frequency` (the policy kept at every
  eighth of the run: its earlier selves) and `--checkpoint-frequency` (through the project's runner: a stopped
  run goes on from its newest checkpoint when `run` is started again; the runs' games are replayed exactly).
- **Matches** (`evaluate`): the final policy plays `GAMES` games against a uniformly random player and `GAMES`
  against its own snapshot nearest a quarter of the run, and `FEW_GAMES` against its snapshots nearest a half and
  three quarters; the snapshots nearest a quarter, a half and three quarters each play `FEW_GAMES` against the
  random player (the curve of how it rose). Both sides sample their actions, as in training. The games run in 10
  game copies at once; the measured policy holds side 0 (`first_0`) in the even copies and side 1 in the odd ones,
  so each side is taken equally often. A game is won by the first side to reach 21 points; a game cut by
  `--max-cycles` has no winner and is left out of the tests (its count is shown).
- **The test**: wins among the decided games, one-sided exact binomial test of "wins at most half its games"
  (`cleanrl_utils.rlstats.binomial_p_value`). Against a random player, a random player in the policy's seat wins
  half its games by symmetry; against an earlier self, an equal policy wins half. With unequal chances on the two
  sides the test still holds its level (see its docstring). Holm's correction over the verdict's tests.
- **Verdict** (fixed before any result): the check passes when, on every seed, the final policy beats the random
  player and beats its quarter-run self, all six tests (3 seeds x 2) rejecting at 5% after Holm. The other matches
  are reported, not judged.

Budget: 4M agent steps per seed (the reference trains 20M), 3 seeds; at ~87 agent steps/s per run with one thread
beside another run (the 500k run of 2026-12-02) that is ~12.8 h per seed. The matches: 450 games per seed, a game
between random players ~6 s of one core (10 of them: 61 s, measured beside a busy queue), longer with rallies: ~1-2 h
per seed. `lengths`
splits a run's finished games into equal step ranges and prints the mean length in each (rallies make long games).

The summaries (`selfplay__*.json`, `matches/*.json` under `--out`) are committed under
benchmark/results/pettingzoo_pong_selfplay/; `report --out` that folder rebuilds the tables.
"""

import argparse
import importlib
import json
import os
import re
import statistics
import sys
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from benchmark.harness import QueuedRun, Scalars, one_thread_env, positive_int, run_queue, script, summarize_run, write_result
from cleanrl_utils.tensorboard_reader import read_scalars

REPO = Path(__file__).resolve().parents[2]

ENV_ID = "pong_v3"
TOTAL_TIMESTEPS = 4_000_000
SEEDS = (1, 2, 3)
SNAPSHOTS = 8  # the policy is kept at every eighth of the run
CHECKPOINT_EVERY = 25  # iterations (51,200 agent steps, ~10 minutes)
LENGTH_TAGS = ("charts/episodic_length-player0", "charts/episodic_length-player1")
EVAL_TAG = "eval/episodic_return"  # points the saved policy won in each of the script's 10 evaluation games
WINNING_POINTS = 21
COPIES = 10  # game copies played at once in a match; games per copy = games / COPIES
GAMES, FEW_GAMES = 100, 50
ALPHA = 0.05
# (player, opponent, games, judged): a fraction of the run names a snapshot, 1 the final policy, None a random player
MATCHES = (
    (1, None, GAMES, True),
    (1, 0.25, GAMES, True),
    (1, 0.5, FEW_GAMES, False),
    (1, 0.75, FEW_GAMES, False),
    (0.25, None, FEW_GAMES, False),
    (0.5, None, FEW_GAMES, False),
    (0.75, None, FEW_GAMES, False),
)


# ---------------------------------------------------------------- training


def episode_lengths(run_dir: Path) -> list[tuple[int, float]]:
    """(global step at the end, length in agent steps) of every finished episode of both players, by step."""
    scalars = read_scalars(run_dir)
    return sorted(point for tag in LENGTH_TAGS for point in scalars.get(tag, []))


def selfplay_measures(run_dir: Path, scalars: Scalars) -> dict:
    """A finished run's own measures: its 10 evaluation games' points and every episode length."""
    return {
        "run": run_dir.name,
        "eval_points": [value for _, value in scalars[EVAL_TAG]],
        "episode_lengths": episode_lengths(run_dir),
    }


def result_path(out: Path, env_id: str, total_timesteps: int, seed: int) -> Path:
    return out / f"selfplay__{env_id}__{total_timesteps}__{seed}.json"


def snapshot_frequency(total_timesteps: int, batch: int = 16 * 128) -> int:
    """Iterations between snapshots: an eighth of the run's iterations (the script's default batch)."""
    return max(1, total_timesteps // batch // SNAPSHOTS)


def training_runs(out: Path, total_timesteps: int, seeds: list[int], max_cycles: int, script_args: list[str]) -> list:
    runs = []
    for seed in seeds:
        result = result_path(out, ENV_ID, total_timesteps, seed)
        args = ("--total-timesteps", str(total_timesteps), "--max-cycles", str(max_cycles), "--save-model", *script_args)
        args += ("--snapshot-frequency", str(snapshot_frequency(total_timesteps)))
        identity = {"env_id": ENV_ID, "seed": seed, "total_timesteps": total_timesteps, "max_cycles": max_cycles}
        summary = partial(summarize_run, result=result, tag=None, extra=selfplay_measures, **identity)
        program = script("ppo_pettingzoo_ma_atari")
        runs.append(QueuedRun(result, program, args, ENV_ID, seed, CHECKPOINT_EVERY, summary))
    return runs


def finished_runs(out: Path, total_timesteps: int | None = None) -> list[dict]:
    runs = [json.loads(p.read_text()) for p in sorted(out.glob(f"selfplay__{ENV_ID}__*.json"))]
    return [r for r in runs if total_timesteps is None or r["total_timesteps"] == total_timesteps]


def run_folder(out: Path, result: dict) -> Path:
    """The run folder of a finished run (the runner ran it in `out/<summary name>`)."""
    stem = result_path(out, result["env_id"], result["total_timesteps"], result["seed"]).stem
    return out / stem / "runs" / result["run"]


SNAPSHOT_NAME = re.compile(r"ppo_pettingzoo_ma_atari-(\d+)\.cleanrl_model")


def policy_file(out: Path, result: dict, fraction: float) -> tuple[Path, int]:
    """The model file of the run's policy at `fraction` of its steps (1: the final model), and its step."""
    folder = run_folder(out, result)
    if fraction == 1:
        return folder / "ppo_pettingzoo_ma_atari.cleanrl_model", result["total_timesteps"]
    snapshots = {int(m.group(1)): p for p in folder.glob("*.cleanrl_model") if (m := SNAPSHOT_NAME.fullmatch(p.name))}
    if not snapshots:
        raise SystemExit(f"pettingzoo_pong_selfplay.py: error: {folder} holds no snapshots (--snapshot-frequency)")
    step = min(snapshots, key=lambda s: abs(s - fraction * result["total_timesteps"]))
    return snapshots[step], step


# ---------------------------------------------------------------- matches


@dataclass(frozen=True)
class Game:
    side: int  # the side the measured policy held (0: first_0, 1: second_0)
    points: int  # points it won
    conceded: int  # points its opponent won
    over: bool  # the game ended with a side at 21 points (not cut by --max-cycles)

    @property
    def won(self) -> bool:
        return self.over and self.points > self.conceded


def play_match(make_env, env_id, policy, opponent, games: int, seed: int, max_cycles: int, copies: int = COPIES) -> list:
    """`games` games of `policy` against `opponent` (each maps a batch of observations to a batch of actions) in
    `copies` game copies of the script's env; the policy holds side `k % 2` in copy k. Each copy plays
    games / copies games; the copies that are done wait for the others."""
    import numpy as np

    if games % copies:
        raise ValueError(f"{games} games do not divide among {copies} game copies")
    envs = make_env(env_id, 2 * copies, max_cycles, False)
    obs, _ = envs.reset(seed=seed)
    obs = obs.reshape(copies, 2, *obs.shape[1:]).copy()
    sides = np.arange(copies) % 2
    played: list[list[Game]] = [[] for _ in range(copies)]
    points = np.zeros((copies, 2), dtype=np.int64)
    active = np.arange(copies)
    try:
        while len(active):
            rows = np.arange(len(active))
            actions = np.zeros((len(active), 2), dtype=np.int64)
            actions[rows, sides[active]] = policy(obs[active, sides[active]])
            actions[rows, 1 - sides[active]] = opponent(obs[active, 1 - sides[active]])
            for row, k in enumerate(active):
                obs[k], rewards, terminations, truncations, _ = envs.vec_envs[k].step(actions[row])
                points[k] += rewards > 0
                if (terminations | truncations).all():  # the copy resets: its next game starts
                    side = sides[k]
                    played[k].append(Game(int(side), int(points[k, side]), int(points[k, 1 - side]), bool(terminations.all())))
                    points[k] = 0
            active = np.array([k for k in active if len(played[k]) < games // copies], dtype=np.int64)
    finally:
        envs.close()
    return [game for copy_games in played for game in copy_games]


def random_player(num_actions: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    return lambda obs: rng.integers(num_actions, size=len(obs))


def saved_policy(model: Path, envs_for_spaces):
    """`act(obs batch) -> actions` of a saved ppo_pettingzoo_ma_atari.py model, sampling as in training."""
    import torch

    from cleanrl.ppo_pettingzoo_ma_atari import Agent
    from cleanrl_utils.runtime.evals.common import with_weights
    from cleanrl_utils.runtime.model_files import read_torch

    agent = with_weights(Agent(envs_for_spaces), read_torch(model, "cpu"), "cpu")

    def act(obs):
        with torch.inference_mode():
            return agent.act(torch.as_tensor(obs))[0].numpy()

    return act


def name_of(fraction: float | None) -> str:
    return "random" if fraction is None else "final" if fraction == 1 else f"at{fraction:g}"


def match_path(out: Path, result: dict, player: float, opponent: float | None, games: int) -> Path:
    stem = f"{result['env_id']}__{result['total_timesteps']}__{result['seed']}"
    return out / "matches" / f"{stem}__{name_of(player)}__vs__{name_of(opponent)}__{games}.json"


def play_matches(out: Path, total_timesteps: int) -> None:
    """Every match of MATCHES for each finished run not played yet (each written when played: a stop loses one)."""
    import torch

    module = importlib.import_module("cleanrl.ppo_pettingzoo_ma_atari")
    from cleanrl_utils.runtime.evals.special import make_game

    for result in finished_runs(out, total_timesteps):
        spaces = make_game(module.make_vector_env, ENV_ID, result["max_cycles"])
        spaces.close()
        for index, (player, opponent, games, _) in enumerate(MATCHES):
            path = match_path(out, result, player, opponent, games)
            if path.exists():
                continue
            seed = 10_000 * result["seed"] + index  # other games than training's and than every other match's
            torch.manual_seed(seed)
            model, step = policy_file(out, result, player)
            if opponent is None:
                against, opponent_step = random_player(spaces.single_action_space.n, seed), None
            else:
                opponent_model, opponent_step = policy_file(out, result, opponent)
                against = saved_policy(opponent_model, spaces)
            played = play_match(
                module.make_vector_env, ENV_ID, saved_policy(model, spaces), against, games, seed, result["max_cycles"]
            )
            summary = {"run": result["run"], "seed": result["seed"], "player_step": step, "opponent_step": opponent_step}
            write_result(path, summary | {"match_seed": seed, "games": [asdict(game) for game in played]})
            print(f"{path.name}: {sum(g.won for g in played)} won of {len(played)}", flush=True)


# ---------------------------------------------------------------- report


@dataclass(frozen=True)
class Tally:
    games: int
    decided: int
    wins: int
    points: float  # per game
    conceded: float

    @property
    def p_value(self) -> float:
        from cleanrl_utils import rlstats

        return rlstats.binomial_p_value(self.wins, self.decided) if self.decided else 1.0


def tally(path: Path) -> Tally:
    games = [Game(**game) for game in json.loads(path.read_text())["games"]]
    decided = [game for game in games if game.over]
    return Tally(
        len(games),
        len(decided),
        sum(game.won for game in decided),
        statistics.fmean(game.points for game in games),
        statistics.fmean(game.conceded for game in games),
    )


def report(out: Path, total_timesteps: int = TOTAL_TIMESTEPS) -> str:
    from cleanrl_utils import rlstats

    rows, judged = [], []
    for result in sorted(finished_runs(out, total_timesteps), key=lambda r: r["seed"]):
        for player, opponent, games, is_judged in MATCHES:
            path = match_path(out, result, player, opponent, games)
            if not path.exists():
                continue
            t, steps = tally(path), json.loads(path.read_text())
            rows.append((result["seed"], player, opponent, steps, t, is_judged))
            if is_judged:
                judged.append(t.p_value)
    if not rows:
        raise SystemExit(f"pettingzoo_pong_selfplay.py: error: no matches played under {out} (run, then evaluate)")
    adjusted = iter(rlstats.holm(judged))
    lines = [
        "| seed | policy (agent steps) | opponent (agent steps) | games (decided) | won | win rate | points per game: "
        "won – conceded | p (binomial, one-sided) | Holm-adjusted p (verdict's tests) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    passes = []
    for seed, player, opponent, steps, t, is_judged in rows:
        holm_cell = "—"
        if is_judged:
            holm_p = next(adjusted)
            passes.append(holm_p < ALPHA and t.wins * 2 > t.decided)
            holm_cell = f"{holm_p:.2g}"
        opponent_cell = "random player" if opponent is None else f"itself at {opponent:g} ({steps['opponent_step']:,})"
        rate = f"{t.wins / t.decided:.2f}" if t.decided else "—"
        lines.append(
            f"| {seed} | {name_of(player)} ({steps['player_step']:,}) | {opponent_cell} | {t.games} ({t.decided}) "
            f"| {t.wins} | {rate} | {t.points:.1f} – {t.conceded:.1f} | {t.p_value:.2g} | {holm_cell} |"
        )
    complete = len(passes) == 2 * len(SEEDS)
    verdict = "passes" if complete and all(passes) else ("**fails**" if complete else "not complete")
    lines += [
        "",
        f"Verdict ({total_timesteps:,} agent steps, seeds {', '.join(map(str, sorted({r[0] for r in rows})))}): "
        f"{verdict} — every seed's final policy beats the random player and its quarter-run self "
        f"({sum(passes)} of {len(passes)} judged matches reject 'wins at most half' at {ALPHA:g} after Holm; "
        f"{2 * len(SEEDS)} needed).",
    ]
    return "\n".join(lines)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="train the seeds not done yet (resuming stopped ones)")
    run_parser.add_argument("--seeds", type=positive_int, nargs="+", default=list(SEEDS))
    run_parser.add_argument("--workers", type=positive_int, default=1, help="runs at a time (one torch thread each)")
    run_parser.add_argument(
        "--max-cycles", type=positive_int, default=100_000, help="emulator frames after which a game is cut"
    )
    run_parser.add_argument("script_args", nargs="*", help="more flags for the script, after --")
    evaluate_parser = commands.add_parser("evaluate", help="play the matches of every finished run, then report")
    report_parser = commands.add_parser("report", help="the matches' tables and the verdict")
    for sub in (run_parser, evaluate_parser, report_parser):
        sub.add_argument("--out", type=Path, default=REPO / "benchmark_runs" / "pettingzoo_pong_selfplay")
        sub.add_argument("--total-timesteps", type=positive_int, default=TOTAL_TIMESTEPS, help="agent steps (both players)")
    lengths_parser = commands.add_parser("lengths", help="the episode-length curve of a finished run")
    lengths_parser.add_argument("run_dir", type=Path)
    lengths_parser.add_argument("--bins", type=positive_int, default=5, help="equal step ranges of the curve")
    args = parser.parse_args()
    if args.command == "lengths":
        print(lengths_report(args.run_dir, args.bins))
        return
    if args.command == "run":
        args.out.mkdir(parents=True, exist_ok=True)
        runs = training_runs(args.out, args.total_timesteps, args.seeds, args.max_cycles, args.script_args)
        sys.exit(run_queue(runs, args.workers, one_thread_env(), args.out / "logs"))
    if args.command == "evaluate":
        play_matches(args.out, args.total_timesteps)
    print(report(args.out, args.total_timesteps))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
