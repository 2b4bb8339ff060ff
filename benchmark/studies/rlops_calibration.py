"""How often does the RLops verdict call two algorithms different when neither is better? How often does it
find a real change? Measured on synthetic scores, with the verdict rule `python -m cleanrl_utils.rlops` uses.

Each comparison draws one score per seed and env for a baseline and a tag, then asks rlops' test for a verdict
across the envs. With no effect, every regression or improvement is a false alarm; with the tag's scores
shifted up by 0.5 or 1 standard deviation of the baseline's seed-to-seed spread, the share of improvements is
the power. Inconclusive verdicts (seed counts that cannot reach alpha) are neither; their share is reported.

Scenarios, each at 5, 10 and 20 seeds per tag on 1, 3 and 5 envs:
- normal: both N(0, 1);
- unequal: the tag has n seeds with spread 3, the baseline 1.6 n seeds with spread 1 (same median);
- ties: N(0, 1) capped at 0.5, so about a third of the runs tie at the cap (like CartPole's 500);
- bimodal: each run fails with chance 0.3 (N(-3, 0.5)), else N(0, 1);
- mixed: the tag is 1 std better on half the envs and 1 std worse on the other half (the middle env of an odd
  count unchanged), so the average probability of improvement is 0.5: no difference across envs;
- three tags: three tags that equal the baseline, compared at once (Holm): a false alarm is any of them flagged.

    python benchmark/studies/rlops_calibration.py --output benchmark/results/rlops_calibration.md
"""

import os

# one BLAS thread: the tests' small matrix products run several times slower with a pool on a busy machine
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmark.harness import measured_at  # noqa: E402
from cleanrl_utils import rlops, rlstats  # noqa: E402
from cleanrl_utils.atomic import write_text  # noqa: E402

ALPHA = 0.05
SEEDS = (5, 10, 20)
ENVS = (1, 3, 5)
EFFECTS = (0.5, 1.0)

# draw(rng, seeds, effect) -> one env's scores; `effect` shifts the tag (0 for the baseline)
Draw = Callable[[np.random.Generator, int, float], np.ndarray]


def normal(rng: np.random.Generator, seeds: int, effect: float) -> np.ndarray:
    return rng.normal(effect, 1.0, seeds)


def capped(rng: np.random.Generator, seeds: int, effect: float) -> np.ndarray:
    return np.minimum(rng.normal(effect, 1.0, seeds), 0.5)  # the cap is the env's: a better tag piles up there


def bimodal(rng: np.random.Generator, seeds: int, effect: float) -> np.ndarray:
    failed = rng.random(seeds) < 0.3
    return np.where(failed, rng.normal(-3.0, 0.5, seeds), rng.normal(0.0, 1.0, seeds)) + effect


@dataclass(frozen=True)
class Scenario:
    name: str
    tag: Draw
    baseline: Draw
    baseline_seeds: Callable[[int], int] = lambda n: n
    env_shift: Callable[[int, int], float] = lambda env, envs: 0.0  # the tag's own effect on each env
    tags: int = 1


def wide(rng: np.random.Generator, seeds: int, effect: float) -> np.ndarray:
    return rng.normal(effect, 3.0, seeds)


def opposite(env: int, envs: int) -> float:
    """+1 on the first half of the envs, -1 on the second, 0 on the middle one of an odd count."""
    middle = (envs - 1) / 2
    return 0.0 if env == middle else (1.0 if env < middle else -1.0)


SCENARIOS = [
    Scenario("normal", normal, normal),
    Scenario("unequal", wide, normal, baseline_seeds=lambda n: math.ceil(1.6 * n)),
    Scenario("ties", capped, capped),
    Scenario("bimodal", bimodal, bimodal),
    Scenario("mixed", normal, normal, env_shift=opposite),
    Scenario("three tags", normal, normal, tags=3),
]


def verdicts(scenario: Scenario, seeds: int, envs: int, effect: float, reps: int, rng: np.random.Generator) -> list[str]:
    """One comparison: the labels rlops gives each of the scenario's tags."""
    base_seeds = scenario.baseline_seeds(seeds)
    baseline = [scenario.baseline(rng, base_seeds, 0.0) for _ in range(envs)]
    pairs = [
        ([scenario.tag(rng, seeds, effect + scenario.env_shift(env, envs)) for env in range(envs)], baseline)
        for _ in range(scenario.tags)
    ]
    return [test.label for test in rlops.family(pairs, reps, 1 - ALPHA, rng)]


@dataclass(frozen=True)
class Cell:
    false_alarms: float
    inconclusive: float
    power: dict[float, float]


def measure(scenario: Scenario, seeds: int, envs: int, null_trials: int, power_trials: int, reps: int, seed: int) -> Cell:
    key = zlib.crc32(f"{scenario.name} {seeds} {envs}".encode())
    rng = np.random.default_rng([seed, key])
    null = [verdicts(scenario, seeds, envs, 0.0, reps, rng) for _ in range(null_trials)]
    false_alarms = sum(any(label in ("regression", "improvement") for label in labels) for labels in null) / null_trials
    inconclusive = sum(labels[0] == "inconclusive" for labels in null) / null_trials
    power = {}
    if scenario.tags == 1:
        for effect in EFFECTS:
            found = [verdicts(scenario, seeds, envs, effect, reps, rng)[0] for _ in range(power_trials)]
            power[effect] = sum(label == "improvement" for label in found) / power_trials
    return Cell(false_alarms, inconclusive, power)


PARTS_DESIGNS = ((3, 8, 1), (3, 8, 3), (5, 8, 1), (5, 8, 3), (10, 16, 1))  # (tag seeds, baseline seeds, envs)


def parts_alarms(tag_seeds: int, base_seeds: int, envs: int, trials: int, reps: int, seed: int) -> tuple[float, ...]:
    """With the `unequal` scenario's null: the share of p <= alpha by the permutation alone, with the t
    approximation as well, and with the separation floor too (the p rlops uses)."""
    rng = np.random.default_rng([seed, tag_seeds, base_seeds, envs])
    counts = [0, 0, 0]
    for _ in range(trials):
        x = [wide(rng, tag_seeds, 0.0) for _ in range(envs)]
        y = [normal(rng, base_seeds, 0.0) for _ in range(envs)]
        permutation = rlstats.permutation_p_value(x, y, reps, rng)
        studentized = rlstats.studentize(x, y)
        with_t = max(permutation, rlstats.student_t_p_value(float(studentized.statistic), float(studentized.df)))
        full = max(with_t, rlstats.separation_floor([(tag_seeds, base_seeds)] * envs))
        for index, p_value in enumerate((permutation, with_t, full)):
            counts[index] += p_value <= ALPHA
    return tuple(count / trials for count in counts)


def parts_table(rows: list[tuple[tuple[int, int, int], tuple[float, ...]]], trials: int) -> str:
    lines = [
        "",
        "## The parts of the test",
        "",
        f"The `unequal` null (tag spread 3, baseline spread 1, same median), {trials} comparisons per row: the share "
        "with p <= α from the permutation alone, with the t approximation's p as well (the larger of the two), and "
        "with the separation floor too (the p rlops uses), without the interval condition of the verdict; ✓ as above.",
        "",
        "| seeds (tag vs baseline) | envs | permutation | and t approximation | and floor |",
        "|---|---|---|---|---|",
    ]
    bound = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / trials)
    marked = [[f"{rate:.1%} {'✓' if rate <= bound else '✗'}" for rate in rates] for _, rates in rows]
    lines += [f"| {a} vs {b} | {e} | " + " | ".join(cells) + " |" for ((a, b, e), _), cells in zip(rows, marked)]
    return "\n".join(lines) + "\n"


def table(rows: list[tuple[Scenario, int, int, Cell]], args: argparse.Namespace, seconds: float, done: bool) -> str:
    bound = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / args.null_trials)
    lines = [
        "# RLops calibration",
        "",
        measured_at(
            f"python benchmark/studies/rlops_calibration.py --null-trials {args.null_trials} "
            f"--power-trials {args.power_trials} --reps {args.reps} --seed {args.seed}"
        )
        + f" ({'finished' if done else 'partial'}: {len(rows)} rows, "
        f"{seconds / 60:.0f} min on one core). Scenarios as the script's docstring describes them; α = {ALPHA}.",
        "",
        f"False alarms: share of {args.null_trials} comparisons with no difference across envs that got a "
        f"regression or improvement verdict (any of the tags for *three tags*); ✓ when at most α + 2 standard "
        f"errors = {bound:.1%}. Inconclusive: share of those comparisons the seed counts could not decide. Power: "
        f"share of {args.power_trials} comparisons with the tag better by 0.5 or 1 std of the baseline's seed-to-seed "
        "spread (on top of the ±1 std per env for *mixed*) that were called an improvement.",
        "",
        "| scenario | seeds (tag vs baseline) | envs | false alarms | inconclusive | power, 0.5 std | power, 1 std |",
        "|---|---|---|---|---|---|---|",
    ]
    for scenario, seeds, envs, cell in rows:
        mark = "✓" if cell.false_alarms <= bound else "✗"
        power = [f"{cell.power[e]:.0%}" if e in cell.power else "—" for e in EFFECTS]
        lines.append(
            f"| {scenario.name} | {seeds} vs {scenario.baseline_seeds(seeds)} | {envs} | {cell.false_alarms:.1%} {mark} | "
            f"{cell.inconclusive:.0%} | {power[0]} | {power[1]} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null-trials", type=int, default=1000, help="comparisons with no difference per row")
    parser.add_argument("--power-trials", type=int, default=300, help="comparisons per row and effect size")
    parser.add_argument("--reps", type=int, default=1000, help="bootstrap and permutation draws per comparison")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, help="write the Markdown tables here (rewritten after every row)")
    args = parser.parse_args()
    start = time.monotonic()
    rows, parts = [], []

    def report(done: bool) -> None:
        text = table(rows, args, time.monotonic() - start, done) + (parts_table(parts, args.null_trials) if parts else "")
        if args.output:
            write_text(args.output, text)

    for scenario in SCENARIOS:
        for seeds in SEEDS:
            for envs in ENVS:
                if scenario.name == "mixed" and envs == 1:
                    continue  # one env cannot differ from itself
                cell = measure(scenario, seeds, envs, args.null_trials, args.power_trials, args.reps, args.seed)
                rows.append((scenario, seeds, envs, cell))
                print(table(rows, args, time.monotonic() - start, False).splitlines()[-1], flush=True)
                report(False)
    for design in PARTS_DESIGNS:
        parts.append((design, parts_alarms(*design, args.null_trials, args.reps, args.seed)))
        print(parts_table(parts, args.null_trials).splitlines()[-1], flush=True)
        report(False)
    report(True)


if __name__ == "__main__":
    main()
