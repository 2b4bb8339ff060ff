"""DDPG, TD3 and SAC at the published budget (1M steps) on Hopper-v4, HalfCheetah-v4 and Walker2d-v4, 3 seeds,
against the published tables.

    python -m benchmark.checks.mujoco_1m collect --runs RUNS_DIR [RUNS_DIR ...] --out benchmark/results/mujoco_1m
    python -m benchmark.checks.mujoco_1m report --out benchmark/results/mujoco_1m

Run from the repository's root (`-m`: the root is then on the import path). The 27 runs themselves are
`python -m cleanrl_utils.benchmark` queues, one per algorithm (docs/benchmarks/continuous-control.md gives the
commands); this module only reads what they logged.

`collect` reads the TensorBoard events of each run folder under the given folders (a folder may be a run
folder itself) and writes one small JSON file per run into `--out`, named `SCRIPT__ENV__SEED.json`: the script,
env, seed, the run's `tags` text (the runner's `--auto-tag`, a `git describe` of the code that ran) and the
commit read from it, the steps reached, whether the run is complete, the median of its `charts/SPS` values and
every training episode it logged: `step_deltas` (the global step at which each episode ended, as differences:
the first is the step itself, each next one the steps since the episode before) and `returns` (rounded to 0.1).
A run still going is written too, marked `"complete": false`; collecting again replaces its file. Complete
means the run's final checkpoint (at its `--total-timesteps`) is in its folder, or it logged a value within the
last 100 steps of its budget (the scripts log losses and SPS every 100 steps).

`report` reads only those JSON files: anyone re-computes the record from the committed files with it. It writes
the Markdown record (`--record`, by default `--out` with `.md`) and the learning-curves figure
(`--images`/learning_curves.png and .svg, for docs/benchmarks/continuous-control.md); both are written whole
or not at all.

The statistic is the original CleanRL's: each seed's mean over its last `WINDOW` (100) training episodes of
`charts/episodic_return`, then the mean and the population standard deviation (ddof=0) of those over the
seeds, as `openrlbenchmark.rlops` (its default `--metric-last-n-average-window 100`, `np.std`) made the
published tables. Beside it, the IQM over the seeds with a 95% stratified-bootstrap interval
(`cleanrl_utils.rlstats`, as RLops computes it), and per algorithm the IQM over the 9 runs of each run's score
divided by the published mean of its env.

Verdicts follow the README's legend. **matches published**: all 3 seeds reached 1M steps and their mean is at
least the published mean minus two published standard deviations. **learns**: below that bar, but above
random play, the mean return of the episodes that ended before learning started (uniformly random actions;
all runs of the env pooled, an episode that runs of one seed share counted once). **fails its check**: at or below random play. **pending**: fewer than 3 seeds
reached 1M steps.

Each (algorithm, env) is judged against one published figure chosen before the results were known: the one
measured the most like ours (the same file, gym MuJoCo v4, the same statistic, 1M steps). The other published
figures are listed beside it, each with its env version and statistic.
"""

import argparse
import itertools
import json
import os
import re
import shlex
import statistics
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from benchmark.harness import markdown_table, tree_commit
from cleanrl_utils import rlstats
from cleanrl_utils.report import find_run_dirs, parse_hyperparameters, parse_run_name, save_figure, seed_curve
from cleanrl_utils.runtime import atomic, checkpoint
from cleanrl_utils.tensorboard_reader import read_run

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "benchmark" / "results" / "mujoco_1m"
DEFAULT_IMAGES = REPO / "docs" / "benchmarks" / "images" / "mujoco_1m"
FIGURE_STEM = "learning_curves"
# the code whose edits change what `report` computes: the record's commit says "-dirty" when one is edited
RECORD_CODE = ("benchmark/checks/mujoco_1m.py", "cleanrl_utils/rlstats.py", "cleanrl_utils/report.py")

FORMAT = 1
RETURN_TAG = "charts/episodic_return"
SPS_TAG = "charts/SPS"
LOG_EVERY = 100  # the scripts log their losses and SPS once per 100 steps
BUDGET = 1_000_000
WINDOW = 100
SEEDS = (1, 2, 3)
ENVS = ("Hopper-v4", "HalfCheetah-v4", "Walker2d-v4")
# algorithm: the file that ran (the faster of the two twins, see SPS_CHOICE)
ALGOS = {
    "DDPG": "ddpg_continuous_action_jax",
    "TD3": "td3_continuous_action_jax",
    "SAC": "sac_continuous_action_jax",
}
SCRIPTS = {script: algo for algo, script in ALGOS.items()}


class CollectError(Exception):
    """A run folder whose events cannot be summarised; reported as one line, the other runs go on."""


# ---------------------------------------------------------------- the published figures


@dataclass(frozen=True)
class Published:
    algo: str
    env_id: str  # our env (v4); `version` says which one the figure was measured on
    source: str  # a key of SOURCES
    file: str  # the implementation the figure was measured with
    version: str  # the gym MuJoCo version of the figure
    mean: float
    std: float | None  # None: the source gives no spread
    statistic: str  # how it compares with ours (last-100 training episodes per seed, mean ± population std, 3 seeds)
    primary: bool = False  # the figure the verdict uses

    @property
    def bar(self) -> float | None:
        return None if self.std is None else self.mean - 2 * self.std

    @property
    def figure(self) -> str:
        """As the source prints it: two decimals, or more where it gives more; `~` where it reads a curve."""
        text = shown(self.mean) + ("" if self.std is None else f" ± {shown(self.std)}")
        return f"~{text}" if self.statistic == READ_OFF_CURVES else text


def shown(value: float) -> str:
    if isinstance(value, int):  # a round figure read off a curve
        return str(value)
    text = f"{value:.2f}"
    return text if float(text) == value else repr(value)


UPSTREAM_TABLE = (
    "each seed's mean of its last 100 training episodes (`charts/episodic_return`), mean ± std (`np.std`, "
    "population) over 3 seeds, made by `openrlbenchmark.rlops` with its default `--metric-last-n-average-window "
    "100` and `--scan-history` (benchmark/td3_plot.sh of the same fork; openrlbenchmark/rlops.py, `compare`); "
    "1M steps, the scripts' default `--total-timesteps` (the benchmark commands of benchmark/ddpg.sh, td3.sh, "
    "sac.sh at vwxyzjn/cleanrl@71eb95f/@33a5609 pass none)"
)
SOURCES = {
    "cleanrl-v4": (
        "The original CleanRL's generated tables of its `pr-424` runs (gym MuJoCo v4): docs/benchmark/ddpg.md and "
        "docs/benchmark/td3.md (https://github.com/vwxyzjn/cleanrl/tree/master/docs/benchmark), read from the copy "
        "in the fork lu-jun-yu/cleanrl@32c34211, whose PyTorch columns equal the tables of docs/rl-algorithms/ddpg.md "
        "(vwxyzjn/cleanrl@35896b1f) and docs/rl-algorithms/td3.md (vwxyzjn/cleanrl@33a5609c) digit for digit; "
        "and docs/benchmark/sac.md (vwxyzjn/cleanrl@35896b1f). Statistic: " + UPSTREAM_TABLE + "."
    ),
    "reference-ddpg": (
        "The original CleanRL's docs/rl-algorithms/ddpg.md (https://github.com/vwxyzjn/cleanrl/blob/master/"
        "docs/rl-algorithms/ddpg.md), the table of `ddpg_continuous_action_jax.py`: gym MuJoCo v2, 3 seeds, 1M steps "
        "(the default budget). The window of the JAX columns is not stated there; the `ddpg_continuous_action.py` "
        "column is the `pr-299` table its RLops section makes with `--metric-last-n-average-window 100` on "
        "HalfCheetah-v2, Walker2d-v2 and Hopper-v2."
    ),
    "fujimoto-2018": (
        "Fujimoto, van Hoof and Meger (2018), Addressing Function Approximation Error in Actor-Critic Methods, "
        "ICML, Table 1 (https://arxiv.org/abs/1802.09477), as the original CleanRL's docs/rl-algorithms/td3.md and "
        "ddpg.md quote it: `TD3.py` and `OurDDPG.py` of sfujim/TD3 on gym MuJoCo v1, 10 trials of 1M steps. Not "
        "the same statistic: per sfujim/TD3's README, the policy is evaluated without exploration noise over 10 "
        "episodes every 5000 steps; Table 1 reports the maximum of those evaluations (its caption, not re-read "
        "here from the paper itself). OurDDPG comes without a spread."
    ),
    "haarnoja-2018": (
        "Haarnoja et al. (2018), Soft Actor-Critic Algorithms and Applications (https://arxiv.org/abs/1812.05905), "
        "values read off its learning curves at 1M steps by the original CleanRL's docs/rl-algorithms/sac.md "
        "(vwxyzjn/cleanrl@71eb95f0): approximate, deterministic evaluation episodes, no spread, env version not "
        "stated there. The first SAC paper (https://arxiv.org/abs/1801.01290) gives curves only, no table."
    ),
}


SAME = "the same as ours"
WINDOW_NOT_STATED = "3 seeds, window not stated"
EVALUATION = "evaluation episodes, not ours"
READ_OFF_CURVES = "evaluation episodes, read off curves"


def _figures(algo: str, source: str, file: str, version: str, statistic: str, values: dict, primary: bool = False):
    return [
        Published(algo, env_id, source, file, version, mean, std, statistic, primary) for env_id, (mean, std) in values.items()
    ]


# (mean, std) per env, as the sources print them
PUBLISHED: list[Published] = [
    *_figures(
        "DDPG",
        "cleanrl-v4",
        "ddpg_continuous_action_jax.py",
        "v4",
        SAME,
        {"Hopper-v4": (1208.52, 659.22), "HalfCheetah-v4": (8638.60, 1954.46), "Walker2d-v4": (1427.23, 104.91)},
        primary=True,
    ),
    *_figures(
        "DDPG",
        "cleanrl-v4",
        "ddpg_continuous_action.py",
        "v4",
        SAME,
        {"Hopper-v4": (1576.78, 818.98), "HalfCheetah-v4": (10374.07, 157.37), "Walker2d-v4": (1240.16, 390.10)},
    ),
    *_figures(
        "DDPG",
        "reference-ddpg",
        "ddpg_continuous_action_jax.py (RTX 3060 Ti)",
        "v2",
        WINDOW_NOT_STATED,
        {"Hopper-v4": (1275.28, 209.60), "HalfCheetah-v4": (9592.25, 135.10), "Walker2d-v4": (1083.15, 567.65)},
    ),
    *_figures(
        "DDPG",
        "reference-ddpg",
        "ddpg_continuous_action_jax.py (TPU)",
        "v2",
        WINDOW_NOT_STATED,
        {"Hopper-v4": (1145.05, 41.95), "HalfCheetah-v4": (9125.06, 1477.58), "Walker2d-v4": (1303.82, 448.41)},
    ),
    *_figures(
        "DDPG",
        "reference-ddpg",
        "ddpg_continuous_action.py (pr-299)",
        "v2",
        SAME,
        {"Hopper-v4": (1007.44, 148.29), "HalfCheetah-v4": (10210.57, 196.22), "Walker2d-v4": (1661.14, 250.01)},
    ),
    *_figures(
        "DDPG",
        "fujimoto-2018",
        "OurDDPG.py",
        "v1",
        EVALUATION,
        {"Hopper-v4": (1860.02, None), "HalfCheetah-v4": (8577.29, None), "Walker2d-v4": (3098.11, None)},
    ),
    *_figures(
        "TD3",
        "cleanrl-v4",
        "td3_continuous_action_jax.py",
        "v4",
        SAME,
        {"Hopper-v4": (2940.10, 655.63), "HalfCheetah-v4": (9345.93, 770.54), "Walker2d-v4": (3686.19, 141.23)},
        primary=True,
    ),
    *_figures(
        "TD3",
        "cleanrl-v4",
        "td3_continuous_action.py",
        "v4",
        SAME,
        {"Hopper-v4": (3134.61, 360.18), "HalfCheetah-v4": (9583.22, 126.09), "Walker2d-v4": (4057.59, 658.78)},
    ),
    *_figures(
        "TD3",
        "fujimoto-2018",
        "TD3.py",
        "v1",
        EVALUATION,
        {"Hopper-v4": (3564.07, 114.74), "HalfCheetah-v4": (9636.95, 859.065), "Walker2d-v4": (4682.82, 539.64)},
    ),
    # the original has no JAX SAC: its PyTorch file's table is the closest figure
    *_figures(
        "SAC",
        "cleanrl-v4",
        "sac_continuous_action.py",
        "v4",
        SAME,
        {"Hopper-v4": (2310.46, 342.82), "HalfCheetah-v4": (9634.89, 1423.73), "Walker2d-v4": (3591.45, 911.33)},
        primary=True,
    ),
    *_figures(
        "SAC",
        "haarnoja-2018",
        "SAC (the authors')",
        "not stated",
        READ_OFF_CURVES,
        {"Hopper-v4": (3250, None), "HalfCheetah-v4": (11250, None), "Walker2d-v4": (4800, None)},
    ),
]


def primary(algo: str, env_id: str) -> Published:
    return next(p for p in PUBLISHED if p.algo == algo and p.env_id == env_id and p.primary)


# Why these files ran: steps per second of each twin, one thread each, Hopper-v4, 30k steps with learning from
# 25k, seed 1, measured one at a time beside other work on the 2-core machine (~/runs/sps_choice/*.json,
# 2026-12-05: the "sps" of each summary). script: (PyTorch twin's SPS, JAX file's SPS)
SPS_CHOICE = {
    "td3_continuous_action": (116.58, 187.65),
    "ddpg_continuous_action": (172.31, 308.51),
    "sac_continuous_action": (74.25, 88.54),
}


# ---------------------------------------------------------------- collect


def encode_steps(steps: list[int]) -> list[int]:
    """The steps as differences (the first one as it is); they must not go backwards."""
    deltas = [b - a for a, b in itertools.pairwise([0, *steps])]
    if any(d < 0 for d in deltas[1:]):
        at = next(i for i, d in enumerate(deltas) if i and d < 0)
        raise CollectError(f"episode steps go backwards at {steps[at - 1]} -> {steps[at]} (two histories in one folder?)")
    return deltas


def decode_steps(deltas: list[int]) -> list[int]:
    return list(itertools.accumulate(deltas))


def tags_commit(tags: str) -> str | None:
    """The commit of a `git describe` tag such as `no-tag-520-gc105263` or `v1.2-3-gabc1234` (None if none says)."""
    for tag in tags.split(","):
        if match := re.search(r"-g([0-9a-f]{7,40})$", tag.strip()):
            return match.group(1)
    return None


def newest_checkpoint_step(run_dir: Path) -> int:
    found = checkpoint.checkpoints(run_dir / checkpoint.CHECKPOINT_DIR)
    return int(checkpoint.NAME.fullmatch(found[-1].name).group(1)) if found else 0


def summarize(run_dir: Path) -> dict:
    """One run folder's summary (the JSON `collect` writes); CollectError when it cannot say what ran."""
    events = read_run(run_dir)
    params = parse_hyperparameters(events.texts.get("hyperparameters", ""))
    info = parse_run_name(run_dir.name) | {k: params[k] for k in ("exp_name", "env_id", "seed") if k in params}
    if "exp_name" not in info or "env_id" not in info:
        raise CollectError("no hyperparameters table and the folder name is not env_id__exp_name__seed__time")
    try:
        seed = int(info.get("seed", ""))
        total = int(params["total_timesteps"])
        learning_starts = int(float(params["learning_starts"]))
    except (KeyError, ValueError) as e:
        raise CollectError(
            f"the hyperparameters table lacks a usable seed, total_timesteps or learning_starts ({e})"
        ) from None
    episodes = events.scalars.get(RETURN_TAG, [])
    last_logged = max((series[-1][0] for series in events.scalars.values() if series), default=-1)
    checkpointed = newest_checkpoint_step(run_dir)
    sps = [value for _, value in events.scalars.get(SPS_TAG, [])]
    tags = events.texts.get("tags", "")
    return {
        "format": FORMAT,
        "script": info["exp_name"],
        "env_id": info["env_id"],
        "seed": seed,
        "run_name": run_dir.name,
        "tags": tags,
        "commit": tags_commit(tags),
        "total_timesteps": total,
        "learning_starts": learning_starts,
        "steps": max(last_logged + 1, checkpointed),
        "complete": checkpointed >= total or last_logged + LOG_EVERY >= total,
        "median_sps": statistics.median(sps) if sps else None,
        "episodes": len(episodes),
        "step_deltas": encode_steps([step for step, _ in episodes]),
        "returns": [round(value, 1) for _, value in episodes],
    }


def result_name(summary: dict) -> str:
    return f"{summary['script']}__{summary['env_id']}__{summary['seed']}.json"


def dump(summary: dict) -> str:
    """JSON with one key a line and each list on one line: small, and a diff shows which fields changed."""
    lines = [f"{json.dumps(key)}: {json.dumps(value, separators=(',', ':'))}" for key, value in summary.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def collect(runs_dirs: list[Path], out: Path) -> int:
    """Summarise every run of the three scripts under `runs_dirs` into `out`; 1 if some folder could not be read."""
    found: dict[str, dict] = {}
    failed = 0
    for run_dir in sorted({d for runs_dir in runs_dirs for d in find_run_dirs(runs_dir)}):
        named = parse_run_name(run_dir.name).get("exp_name")
        if named is not None and named not in SCRIPTS:  # another script's run: not read at all
            continue
        try:
            summary = summarize(run_dir)
        except CollectError as e:
            print(f"skipped {run_dir}: {e}", file=sys.stderr)
            failed += 1
            continue
        if summary["script"] not in SCRIPTS:
            continue
        name = result_name(summary)
        if name in found:  # two folders of one (script, env, seed): the one that went further is kept
            other = found[name]
            if other["steps"] >= summary["steps"]:
                summary, other = other, summary
            print(
                f"two runs of {name[:-5]}: kept {summary['run_name']} ({summary['steps']:,} steps), left out {other['run_name']}"
            )
        found[name] = summary
    out.mkdir(parents=True, exist_ok=True)
    for name, summary in sorted(found.items()):
        atomic.write_text(out / name, dump(summary))
        state = "complete" if summary["complete"] else f"partial, {summary['steps']:,} of {summary['total_timesteps']:,} steps"
        print(f"{out / name}: {summary['episodes']} episodes, {state}")
    return 1 if failed else 0


# ---------------------------------------------------------------- report: statistics


@dataclass(frozen=True)
class Result:
    """One run as the report reads it back from its JSON file."""

    script: str
    env_id: str
    seed: int
    tags: str
    total_timesteps: int
    learning_starts: int
    steps: int
    complete: bool
    median_sps: float | None
    steps_of_episodes: list[int]
    returns: list[float]

    @property
    def algo(self) -> str:
        return SCRIPTS[self.script]

    @property
    def at_budget(self) -> bool:
        return self.complete and self.total_timesteps == BUDGET

    @property
    def window(self) -> int:
        return min(WINDOW, len(self.returns))

    @property
    def score(self) -> float | None:
        """The mean of the last WINDOW returns (of all of them when there are fewer); None with no episode yet."""
        return statistics.fmean(self.returns[-WINDOW:]) if self.returns else None

    @property
    def random_play(self) -> list[tuple[int, float]]:
        """(step, return) of the episodes played with random actions only (ended before learning started)."""
        return [(s, r) for s, r in zip(self.steps_of_episodes, self.returns) if s < self.learning_starts]


def load_results(out: Path) -> list[Result]:
    results = []
    for path in sorted(out.glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT:
            raise SystemExit(f"{path}: not a run summary of this version (format {data.get('format')!r}, expected {FORMAT})")
        if data["script"] not in SCRIPTS:
            continue
        steps = decode_steps(data["step_deltas"])
        if len(steps) != len(data["returns"]):
            raise SystemExit(f"{path}: {len(steps)} episode steps for {len(data['returns'])} returns")
        results.append(
            Result(
                data["script"],
                data["env_id"],
                data["seed"],
                data["tags"],
                data["total_timesteps"],
                data["learning_starts"],
                data["steps"],
                data["complete"],
                data["median_sps"],
                steps,
                data["returns"],
            )
        )
    return results


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and population standard deviation (ddof=0, as `np.std`): the published tables' pair."""
    return statistics.fmean(values), (statistics.pstdev(values) if len(values) > 1 else 0.0)


def verdict(mean: float, at_budget: int, published: Published, random_play: float | None) -> str:
    """The README's status for a cell whose seeds' scores average `mean`, `at_budget` of them at 1M steps."""
    if at_budget < len(SEEDS):
        return f"pending ({at_budget} of {len(SEEDS)} seeds at 1M)"
    if published.bar is not None and mean >= published.bar:
        return "matches published"
    if random_play is None:
        return "below the bar (no random-play episodes to compare with)"
    return "learns" if mean > random_play else "fails its check"


def random_play_episodes(results: list[Result]) -> dict[str, list[float]]:
    """Per env, the returns of the random-action episodes of its runs, all algorithms pooled, each episode once: runs
    of one seed play the same random episodes whatever their algorithm (same seeds, same sampler), counted once."""
    pooled: dict[str, dict[tuple[int, int, float], float]] = {}
    for result in results:
        for step, episode_return in result.random_play:
            pooled.setdefault(result.env_id, {})[(result.seed, step, episode_return)] = episode_return
    return {env_id: list(episodes.values()) for env_id, episodes in pooled.items() if episodes}


def random_play_means(results: list[Result]) -> dict[str, float]:
    """Per env, the mean return of its random-action episodes (`random_play_episodes`)."""
    return {env_id: statistics.fmean(returns) for env_id, returns in random_play_episodes(results).items()}


@dataclass(frozen=True)
class Cell:
    algo: str
    env_id: str
    runs: list[Result]  # those with at least one episode, by seed
    mean: float
    std: float
    iqm: rlstats.Estimate
    random_play: float | None  # the env's random-play mean
    verdict: str

    @property
    def at_budget(self) -> int:
        return sum(run.at_budget for run in self.runs)


def cells(results: list[Result], reps: int, confidence: float, seed: int) -> list[Cell]:
    rng = np.random.default_rng(seed)
    random_play = random_play_means(results)
    table = []
    for algo, env_id in itertools.product(ALGOS, ENVS):
        runs = sorted((r for r in results if r.algo == algo and r.env_id == env_id and r.returns), key=lambda r: r.seed)
        if not runs:
            continue
        scores = [run.score for run in runs]
        mean, std = mean_std(scores)
        iqm = rlstats.iqm_estimate([np.array(scores)], reps, confidence, rng)
        at_budget = sum(run.at_budget for run in runs)
        random = random_play.get(env_id)
        table.append(Cell(algo, env_id, runs, mean, std, iqm, random, verdict(mean, at_budget, primary(algo, env_id), random)))
    return table


def aggregate(table: list[Cell], reps: int, confidence: float, seed: int) -> dict[str, rlstats.Estimate]:
    """Per algorithm, the IQM over all its runs of score / published mean (each env weighing the same)."""
    rng = np.random.default_rng(seed)
    estimates = {}
    for algo in ALGOS:
        normalised = [np.array([r.score for r in c.runs]) / primary(algo, c.env_id).mean for c in table if c.algo == algo]
        if normalised:
            estimates[algo] = rlstats.iqm_estimate(normalised, reps, confidence, rng)
    return estimates


# ---------------------------------------------------------------- report: Markdown and figure


def interval(estimate: rlstats.Estimate, digits: int) -> str:
    bounds = f"[{estimate.low:.{digits}f}, {estimate.high:.{digits}f}]" if estimate.defined else "[one seed: none]"
    return f"{estimate.value:.{digits}f} {bounds}"


def source_numbers() -> dict[str, int]:
    return {key: number for number, key in enumerate(SOURCES, start=1)}


def results_section(table: list[Cell], confidence: float) -> str:
    numbers = source_numbers()
    rows = []
    for c in table:
        p = primary(c.algo, c.env_id)
        sps = [r.median_sps for r in c.runs if r.median_sps is not None]
        windows = sorted({r.window for r in c.runs})
        notes = [] if len(c.runs) > 1 else ["one seed"]
        notes += [] if windows == [WINDOW] else [f"last {'/'.join(map(str, windows))} episodes"]
        score = f"{c.mean:.1f}" + (f" ± {c.std:.1f}" if len(c.runs) > 1 else "")
        shown_verdict = f"**{c.verdict}**" if c.verdict == "matches published" else c.verdict
        if c.random_play is not None and p.bar <= c.random_play:
            shown_verdict += " (the bar is below random play: the published spread is too wide to tell)"
        rows.append(
            [
                f"{c.algo} (`{ALGOS[c.algo]}.py`)",
                c.env_id,
                f"{c.at_budget} of {len(SEEDS)}" + ("" if len(c.runs) <= len(SEEDS) else f" ({len(c.runs)} seeds)"),
                score + (f" ({', '.join(notes)})" if notes else ""),
                interval(c.iqm, 1),
                f"{statistics.median(sps):.0f}" if sps else "none logged",
                f"{p.figure} (`{p.file}`, {p.version}) [{numbers[p.source]}]",
                f"{p.bar:.1f}",
                shown_verdict,
            ]
        )
    header = [
        "algorithm (file)",
        "env",
        "seeds at 1M",
        f"last-{WINDOW} return, mean ± std",
        f"IQM [{confidence:.0%} CI]",
        "median SPS",
        "published",
        "bar: published mean − 2σ",
        "verdict",
    ]
    return markdown_table(header, rows)


def aggregate_section(estimates: dict[str, rlstats.Estimate], table: list[Cell], confidence: float) -> str:
    rows = []
    for algo, estimate in estimates.items():
        runs = [r for c in table if c.algo == algo for r in c.runs]
        envs = sum(c.algo == algo for c in table)
        counted = f"{len(runs)} run{'s' * (len(runs) != 1)} on {envs} env{'s' * (envs != 1)}"
        rows.append([algo, f"{counted}, {sum(r.at_budget for r in runs)} at 1M", interval(estimate, 2)])
    return markdown_table(["algorithm", "runs", f"IQM of score / published mean [{confidence:.0%} CI]"], rows)


def others_section(table: list[Cell]) -> str:
    numbers = source_numbers()
    rows = []
    for c in table:
        for p in PUBLISHED:
            if p.algo != c.algo or p.env_id != c.env_id or p.primary:
                continue
            if p.bar is None:
                clears = "no spread published"
            else:
                so_far = "" if c.at_budget == len(SEEDS) else "so far "
                clears = so_far + ("yes" if c.mean >= p.bar else "no") + f" (bar {p.bar:.1f})"
            rows.append(
                [c.algo, c.env_id, f"{p.figure} (`{p.file}`, {p.version})", p.statistic, clears, f"[{numbers[p.source]}]"]
            )
    return markdown_table(["algorithm", "env", "published", "statistic", "ours ≥ mean − 2σ", "source"], rows)


def runs_section(results: list[Result]) -> str:
    rows = []
    for r in sorted(
        results, key=lambda r: (list(ALGOS).index(r.algo), ENVS.index(r.env_id) if r.env_id in ENVS else 99, r.seed)
    ):
        score = (
            "no episode yet" if r.score is None else f"{r.score:.1f}" + ("" if r.window == WINDOW else f" (last {r.window})")
        )
        rows.append(
            [
                f"`{r.script}`",
                r.env_id,
                r.seed,
                f"{r.steps:,} of {r.total_timesteps:,}",
                "yes" if r.complete else "**no**",
                len(r.returns),
                score,
                "—" if r.median_sps is None else f"{r.median_sps:.0f}",
                f"`{r.tags}`" if r.tags else "none",
            ]
        )
    header = ["script", "env", "seed", "steps", "complete", "episodes", f"last-{WINDOW} mean", "median SPS", "tags"]
    return markdown_table(header, rows)


def random_play_section(results: list[Result]) -> str:
    episodes = random_play_episodes(results)
    rows = [
        [env_id, f"{statistics.fmean(episodes[env_id]):.1f}", len(episodes[env_id])] for env_id in ENVS if env_id in episodes
    ]
    return markdown_table(["env", "random play, mean return", "distinct episodes"], rows)


def sps_choice_section() -> str:
    rows = [
        [f"`{torch}.py`", f"{torch_sps:.0f}", f"`{torch}_jax.py`", f"{jax_sps:.0f}", f"{jax_sps / torch_sps:.2f}×"]
        for torch, (torch_sps, jax_sps) in SPS_CHOICE.items()
    ]
    return markdown_table(["PyTorch file", "SPS", "JAX file", "SPS", "JAX / PyTorch"], rows)


def sources_section() -> str:
    return "\n".join(f"{number}. {SOURCES[key]}" for key, number in source_numbers().items())


def curves_figure(results: list[Result]) -> Figure:
    """One panel per env: per algorithm, the mean over seeds of the trailing WINDOW-episode mean, ± one std
    across seeds, and its published figure (dashed); a curve's last point is the table's score."""
    figure = Figure(figsize=(15, 4.2), layout="constrained")
    axes = figure.subplots(1, len(ENVS))
    for ax, env_id in zip(axes, ENVS):
        for index, algo in enumerate(ALGOS):
            series = [
                list(zip(r.steps_of_episodes, r.returns))
                for r in results
                if r.algo == algo and r.env_id == env_id and r.returns
            ]
            colour = f"C{index}"
            if series:
                curve = seed_curve(series, WINDOW, "std")
                seeds = f"{len(series)} seed{'s' if len(series) > 1 else ''}"
                ax.plot(curve.steps, curve.mean, color=colour, label=f"{algo} ({seeds})")
                ax.fill_between(curve.steps, curve.low, curve.high, color=colour, alpha=0.2, linewidth=0)
            published = primary(algo, env_id)
            ax.axhline(
                published.mean, color=colour, linestyle="--", linewidth=1, label=f"{algo} published ({published.version})"
            )
        ax.set_title(env_id)
        ax.set_xlabel("global step")
        ax.set_xlim(0, BUDGET)
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
        ax.set_ylabel(f"training return, trailing mean of {WINDOW} episodes")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return figure


def report(out: Path, record: Path, images: Path, argv: list[str], reps: int, confidence: float, seed: int) -> str:
    results = load_results(out)
    if not results:
        raise SystemExit(f"no run summaries in {out}: `collect` writes them")
    table = cells(results, reps, confidence, seed)
    estimates = aggregate(table, reps, confidence, seed)
    stem = images / FIGURE_STEM
    save_figure(curves_figure(results), stem, ["png", "svg"])
    image_link = Path(os.path.relpath(stem.with_suffix(".png"), record.parent)).as_posix()
    at_budget = sum(r.at_budget for r in results)
    expected = len(ALGOS) * len(ENVS) * len(SEEDS)
    tags = sorted({r.tags or "none" for r in results})
    commits = sorted({c for r in results if (c := tags_commit(r.tags))})
    command = shlex.join(["python", "-m", "benchmark.checks.mujoco_1m", *argv])
    date = datetime.now(UTC).date().isoformat()
    status = (
        "All runs are complete."
        if at_budget == expected and len(results) == expected
        else f"**Incomplete: {at_budget} of {expected} runs reached 1M steps** ({len(results)} run files); the verdicts "
        "of cells without 3 seeds at 1M are *pending* and their figures are provisional."
    )
    parts = [
        "# DDPG, TD3 and SAC at 1M steps on MuJoCo (gym v4)",
        "",
        f"Measured at commit {tree_commit(REPO, RECORD_CODE)} on {date} with `{command}`, from the run files in "
        f"`{display(out)}`. The runs ran the code tagged {', '.join(f'`{t}`' for t in tags)}"
        + (f" (commit {', '.join(commits)})" if commits else "")
        + f". {status}",
        "",
        "## Results",
        "",
        f"Score of a run: the mean of its last {WINDOW} training episodes' returns (`{RETURN_TAG}`, exploration noise on); "
        "per cell, mean ± population std (ddof=0) over the seeds, the statistic of the original's tables. IQM: over the "
        f"seeds, with a {confidence:.0%} stratified-bootstrap interval ({reps} draws; with 3 seeds the IQM is their mean and the interval their range: a draw of one seed three times is 1 in 27). "
        "Median SPS: the median over the cell's runs of each run's median `charts/SPS` (steps over training time, "
        "random-action steps included), on a 2-core machine (two runs at a time, except one on 2026-12-06 and three for DDPG Walker2d-v4). "
        "Verdict: *matches published* at or above the bar with 3 seeds at 1M; *learns* below the bar but above "
        "random play; *fails its check* at or below random play; *pending* before 3 seeds reach 1M.",
        "",
        results_section(table, confidence),
        "",
        "Per algorithm, each run's score divided by its env's published mean (the figure above), IQM over all its runs:",
        "",
        aggregate_section(estimates, table, confidence),
        "",
        "## The other published figures",
        "",
        "The verdict uses the figure measured the most like ours (the same file, gym MuJoCo v4, the same statistic, "
        "1M steps), chosen before the runs ended. Our runs are on v4; figures on v1/v2 come from older MuJoCo "
        "bindings and env versions.",
        "",
        others_section(table),
        "",
        "## Random play",
        "",
        "Episodes that ended before learning started (uniformly random actions), all runs of the env pooled, each "
        "episode once (runs of one seed play the same random episodes whatever the algorithm): the bar a run must "
        "pass to *learn*.",
        "",
        random_play_section(results),
        "",
        "## Runs",
        "",
        runs_section(results),
        "",
        "## Learning curves",
        "",
        f"![Learning curves]({image_link})",
        "",
        f"Per algorithm and env: each run's trailing mean over {WINDOW} episodes, averaged over the seeds on a common "
        "grid of steps (where all its seeds have logged), band ± one std across seeds; dashed: the published mean the "
        "verdict uses.",
        "",
        "## Why the JAX files",
        "",
        "Each algorithm ran the faster of its two files, measured before the runs: steps per second, one thread, "
        "Hopper-v4, 30k steps with learning from 25k, seed 1, one run at a time beside other work.",
        "",
        sps_choice_section(),
        "",
        "## Sources",
        "",
        sources_section(),
        "",
    ]
    text = "\n".join(parts)
    atomic.write_text(record, text)
    return text


def display(path: Path) -> str:
    path = path.resolve()
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)


# ---------------------------------------------------------------- command line


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmark.checks.mujoco_1m", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    collect_parser = commands.add_parser("collect", help="summarise run folders into one JSON file each")
    collect_parser.add_argument("--runs", type=Path, nargs="+", required=True, help="run folders, or folders of them")
    collect_parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of the JSON files")
    report_parser = commands.add_parser("report", help="the Markdown record and the learning curves, from the JSON files")
    report_parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of the JSON files")
    report_parser.add_argument("--record", type=Path, help="the Markdown record (default: --out with .md)")
    report_parser.add_argument("--images", type=Path, default=DEFAULT_IMAGES, help="folder of the learning-curves figure")
    report_parser.add_argument("--bootstrap-samples", type=int, default=5000, help="draws of the bootstrap intervals")
    report_parser.add_argument("--confidence", type=float, default=0.95, help="level of the intervals")
    report_parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap draws")
    args = parser.parse_args(argv)
    if args.command == "collect":
        missing = [str(d) for d in args.runs if not d.is_dir()]
        if missing:
            parser.error(f"--runs: no such folder: {', '.join(missing)}")
    elif not 0 < args.confidence < 1 or args.bootstrap_samples < 1:
        parser.error("--confidence must lie in (0, 1) and --bootstrap-samples be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.command == "collect":
        return collect(args.runs, args.out)
    record = args.record or args.out.with_name(f"{args.out.name}.md")
    print(report(args.out, record, args.images, argv, args.bootstrap_samples, args.confidence, args.seed))
    print(f"written: {record}, {args.images / FIGURE_STEM}.png/.svg", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
