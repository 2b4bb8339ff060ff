"""How often does the RLops verdict call two identical algorithms different? And how often does it see a real change?

Draws synthetic scores (normal, one per seed and env) for a baseline and a tag, with the tag's mean shifted
by `effect` standard deviations, and counts the verdicts that are not "no detectable difference" under two
rules: the bootstrap interval of the probability of improvement alone, and rlops' rule (the interval and the
permutation test). With effect 0 that count is the false-alarm rate; with an effect, the power.

    python benchmark/rlops_calibration.py --trials 1000 --output benchmark/results/rlops_calibration.md
"""

import argparse
from pathlib import Path

import numpy as np

from cleanrl_utils import rlstats
from cleanrl_utils.rlops import verdict_label


def alarm_rates(seeds: int, envs: int, effect: float, trials: int, reps: int, rng: np.random.Generator) -> tuple[float, float]:
    interval_only = both = 0
    for _ in range(trials):
        baseline = [rng.normal(size=seeds) for _ in range(envs)]
        tag = [rng.normal(loc=effect, size=seeds) for _ in range(envs)]
        improvement = rlstats.improvement_estimate(tag, baseline, reps, 0.95, rng)
        interval_only += improvement.high < 0.5 or improvement.low > 0.5
        p_value = rlstats.permutation_p_value(tag, baseline, reps, rng)
        both += verdict_label(improvement, p_value, 0.05) != "no detectable difference"
    return interval_only / trials, both / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000, help="comparisons drawn per row")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap and permutation draws per comparison")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, help="also write the Markdown table here")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    lines = [
        f"Share of {args.trials} comparisons per row with a verdict other than *no detectable difference* "
        f"({args.reps} bootstrap and permutation draws each; `python benchmark/rlops_calibration.py --trials {args.trials} "
        f"--reps {args.reps} --seed {args.seed}`). Effect: the tag's mean minus the baseline's, in standard deviations of the "
        "seed-to-seed spread; 0 means the two are the same algorithm, so every verdict is a false alarm.",
        "",
        "| seeds per tag | envs | effect | interval alone | rlops (interval and permutation test) |",
        "|---|---|---|---|---|",
    ]
    for effect in (0.0, 1.0, 2.0):
        for seeds, envs in ((3, 1), (5, 1), (10, 1), (3, 3), (5, 3)):
            interval_only, both = alarm_rates(seeds, envs, effect, args.trials, args.reps, rng)
            lines.append(f"| {seeds} | {envs} | {effect:g} | {interval_only:.1%} | {both:.1%} |")
            print(lines[-1], flush=True)
    if args.output:
        args.output.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
