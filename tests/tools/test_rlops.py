"""cleanrl_utils.rlops: its statistics against hand-computed cases and rliable's numbers, the gate's refusals and
verdicts on small TensorBoard runs written here, and its verdicts on real short ppo.py runs.

The real runs are made by the benchmark runner with WANDB_TAGS set, as a user (or the runner's --auto-tag)
tags them: `base` (seeds 1-6), `broken` (learning rate 1e-7, seeds 1-6), and seeds 7-12 with no tags (6 seeds
a group: on one env fewer cannot reach p <= 0.05, see test_what_seed_counts_can_reach).
`base` and the untagged runs learn at learning rate 2.5e-3, so a few thousand steps tell them from `broken`.
"""

import itertools
import math
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from cleanrl_utils import rlops, rlstats
from cleanrl_utils.reference_scores import ATARI_HUMAN, atari_game
from cleanrl_utils.report import collect_runs, parse_tags
from cleanrl_utils.rlops_runs import _sampled_with_exact_tail
from cleanrl_utils.tensorboard_reader import read_scalars
from tests.helpers import REPO, script_env

# ppo.py on CartPole-v1 at learning rate 2.5e-3 is clearly learning by then: last-10 returns 108-148 on seeds 1-8,
# against 20-27 at lr 1e-7 (8 updates of 512 steps; the runs cost little more than their start-up)
STEPS = 4096
LEARNING = ["--learning-rate", "2.5e-3"]
WINDOW = ["--metric-last-n-average-window", "10"]


# ---------------------------------------------------------------- statistics, by hand


def test_iqm_drops_a_quarter_at_each_end():
    assert rlstats.iqm(np.arange(1.0, 9.0)) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    assert rlstats.iqm(np.array([1.0, 2.0, 3.0, 4.0, 100.0])) == pytest.approx(3.0)  # int(5/4) = 1 cut per end
    assert rlstats.iqm(np.array([7.0])) == pytest.approx(7.0)


def test_iqm_weighs_envs_equally_when_seed_counts_differ():
    # 2 runs at 0 on one env, 8 runs at 1 on another: pooled, the 8 would fill the middle half (IQM 1);
    # weighed per env, each env holds half the weight, and the middle half is a quarter of each.
    few, many = np.zeros(2), np.ones(8)
    assert rlstats.aggregate_iqm([few, many]) == pytest.approx(0.5)
    assert rlstats.aggregate_mean([few, many]) == pytest.approx(0.5)
    # with equal counts it is the flat trimmed mean, as rliable computes it
    a, b = np.array([1.0, 5.0, 2.0]), np.array([9.0, 3.0, 4.0])
    assert rlstats.aggregate_iqm([a, b]) == pytest.approx(rlstats.iqm(np.concatenate([a, b])))
    # a value straddling a quartile counts in part: 4 equal weights, middle half = second and third values
    assert rlstats.weighted_iqm(np.array([0.0, 1.0, 2.0, 10.0]), np.full(4, 0.25)) == pytest.approx(1.5)


def test_probability_of_improvement_counts_ties_as_half():
    # pairs (x, y): (1,2) no, (1,3) no, (2,2) tie, (2,3) no
    assert rlstats.probability_of_improvement(np.array([1.0, 2.0]), np.array([2.0, 3.0])) == pytest.approx(0.125)
    assert rlstats.probability_of_improvement(np.array([5.0]), np.array([1.0, 9.0])) == pytest.approx(0.5)


def test_improvement_averages_tasks_and_its_interval_is_exact_when_no_resample_can_change_it():
    rng = np.random.default_rng(0)
    # task 1: every x beats every y (PoI 1); task 2: all tied (0.5). No bootstrap draw changes either.
    x = [np.array([3.0, 4.0]), np.array([1.0, 1.0])]
    y = [np.array([1.0, 2.0]), np.array([1.0, 1.0])]
    estimate = rlstats.improvement_estimate(x, y, reps=500, confidence=0.95, rng=rng)
    assert (estimate.value, estimate.low, estimate.high) == pytest.approx((0.75, 0.75, 0.75))


def test_intervals_are_undefined_with_a_single_seed():
    rng = np.random.default_rng(0)
    one_seed = [np.array([1.0]), np.array([2.0, 3.0])]
    assert not rlstats.iqm_estimate(one_seed, 100, 0.95, rng).defined
    assert not rlstats.improvement_estimate(one_seed, one_seed, 100, 0.95, rng).defined


def test_iqm_interval_covers_the_estimate_and_narrows_with_more_seeds():
    rng = np.random.default_rng(0)
    few = rlstats.iqm_estimate([rng.normal(size=5)], 2000, 0.95, rng)
    many = rlstats.iqm_estimate([rng.normal(size=200)], 2000, 0.95, rng)
    assert few.low <= few.value <= few.high
    assert many.high - many.low < (few.high - few.low) / 2


# A fixed score matrix, runs x tasks as rliable takes them. rliable 1.2.0's numbers were recorded once, in a
# throwaway venv (python3 -m venv /tmp/rliable_venv; /tmp/rliable_venv/bin/pip install rliable==1.2.0 "pandas<3"),
# by `/tmp/rliable_venv/bin/python -m benchmark.studies.rlops_rliable_record` (get_interval_estimates with 200,000 draws
# on these matrices). Point estimates are exact; intervals carry bootstrap noise of about 0.002 at that many draws.
RLIABLE_X = np.array([[0.92, 0.41, 1.35], [0.77, 0.58, 1.02], [1.10, 0.36, 0.88], [0.65, 0.72, 1.21], [0.83, 0.49, 0.97]])
RLIABLE_Y = np.array([[0.71, 0.52, 0.90], [0.88, 0.30, 0.79], [0.60, 0.44, 1.05], [0.95, 0.39, 0.68], [0.54, 0.61, 0.83]])
RLIABLE = {
    "IQM": (0.8155555555555556, 0.7378, 0.9067),
    "median": (0.8539999999999999, 0.728, 0.992),
    "mean": (0.8173333333333334, 0.7427, 0.896),
    "optimality gap": (0.22799999999999987, 0.1747, 0.28),
}
RLIABLE_POI = (0.7066666666666667, 0.5067, 0.88)


@pytest.mark.parametrize("name", RLIABLE)
def test_aggregates_and_their_stratified_bootstrap_intervals_agree_with_rliable(name):
    rng = np.random.default_rng(0)
    estimate = rlstats.aggregate_estimate(rlstats.AGGREGATES[name], list(RLIABLE_X.T), 50000, 0.95, rng)
    value, low, high = RLIABLE[name]
    assert estimate.value == pytest.approx(value, abs=1e-12)
    assert (estimate.low, estimate.high) == pytest.approx((low, high), abs=0.006)


def test_probability_of_improvement_and_its_interval_agree_with_rliable():
    rng = np.random.default_rng(0)
    estimate = rlstats.improvement_estimate(list(RLIABLE_X.T), list(RLIABLE_Y.T), 50000, 0.95, rng)
    value, low, high = RLIABLE_POI
    assert estimate.value == pytest.approx(value, abs=1e-12)
    assert (estimate.low, estimate.high) == pytest.approx((low, high), abs=0.006)


def test_the_statistic_is_brunner_munzels():
    # scipy.stats.brunnermunzel(x, y).statistic gives 1.7693034738587656 (scipy 1.17.1); its sign counts y above x
    x, y = np.array([1.2, 3.4, 2.2, 5.0]), np.array([2.5, 4.1, 6.3, 3.9, 7.7])
    assert rlstats.studentized_improvement([x], [y]) == pytest.approx(-1.7693034738587656)
    # and its t approximation's p, 0.13250802092109099 there (Welch–Satterthwaite df 5.42)
    studentized = rlstats.studentize([x], [y])
    assert rlstats.student_t_p_value(float(studentized.statistic), float(studentized.df)) == pytest.approx(0.1325080209)


def test_permutation_p_value_of_a_complete_separation_is_two_in_c_10_5():
    # 5 vs 5 runs, all x above all y: of the C(10, 5) = 252 splits, only this one and its mirror are as extreme.
    x, y = [np.arange(10.0, 15.0)], [np.arange(0.0, 5.0)]
    p = rlstats.permutation_p_value(x, y, reps=20000, rng=np.random.default_rng(1))
    assert p == pytest.approx(2 / 252, abs=0.002)
    assert rlstats.permutation_p_value([np.ones(4)], [np.ones(4)], reps=100, rng=np.random.default_rng(1)) == 1.0


def test_holm_adjusts_step_down_and_keeps_order():
    assert rlstats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert rlstats.holm([0.5]) == [0.5]


def mean_law(counts: list[int], chances: list[float]) -> dict[float, float]:
    """{mean over tasks of B_k / m_k: probability}, B_k ~ Binomial(m_k, chance_k), by listing every outcome."""
    law: dict[float, float] = {}
    for wins in itertools.product(*(range(m + 1) for m in counts)):
        chance = math.prod(math.comb(m, k) * q**k * (1 - q) ** (m - k) for m, k, q in zip(counts, wins, chances))
        value = round(float(np.mean([k / m for m, k in zip(counts, wins)])), 12)
        law[value] = law.get(value, 0.0) + chance
    return law


def stop_loss_p(law: dict[float, float], distance: float) -> float:
    """min over c < distance of E(|D| - c)+ / (distance - c), D = value - 1/2, written out from the definition."""
    folded: dict[float, float] = {}
    for value, chance in law.items():
        folded[round(abs(value - 0.5), 12)] = folded.get(round(abs(value - 0.5), 12), 0.0) + chance
    candidates = [c for c in folded if c < distance - 1e-12]
    ratios = [sum(max(a - c, 0.0) * p for a, p in folded.items()) / (distance - c) for c in candidates]
    return min([1.0, *ratios])


@pytest.mark.parametrize("pairs", [1, 5, 7, 12])
def test_the_null_bound_is_the_coin_flip_distribution_written_out(pairs):
    bound = rlstats.null_bound(pairs)
    law = mean_law([pairs], [0.5])
    distances = sorted({round(abs(v - 0.5), 12) for v in law})
    assert bound.atoms == pytest.approx(distances)
    assert bound.probabilities.sum() == pytest.approx(1.0)
    for distance in [0.01, 0.1, 0.17, 0.25, 0.333, 0.4, 0.49, 0.5]:
        assert bound.p_value(distance) == pytest.approx(stop_loss_p(law, distance), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(
    ("counts", "chances"),
    [
        ([1, 20], [0.8, 0.2]),  # one seed a side on one env, 20 on the other, opposite effects: mean PoI 1/2
        ([3, 20], [0.95, 0.05]),
        ([5, 10, 20], [0.7, 0.5, 0.3]),
        ([20, 10, 5], [0.9, 0.4, 0.2]),
        ([6, 6], [0.99, 0.01]),
    ],
)
def test_opposite_effects_with_a_mean_poi_of_one_half_stay_within_the_bound(counts, chances):
    """Hit-or-miss runs whose PoI is chance_k on env k (the most spread a PoI can be): the exact chance that the
    test across envs says p <= 0.05 stays at most 0.05, and every stop-loss value stays under the bound's."""
    assert np.mean(chances) == pytest.approx(0.5)
    law = mean_law(counts, chances)
    bound = rlstats.seed_bound(min(counts), min(counts))  # across envs: the seeds run on every env, none shared
    values, probabilities = np.array(list(law)), np.array(list(law.values()))
    p = bound.p_value(np.abs(values - 0.5))
    assert probabilities[p <= 0.05].sum() <= 0.05
    for c in np.linspace(0.0, 0.5, 51):
        spread = float(np.sum(np.clip(np.abs(values - 0.5) - c, 0.0, None) * probabilities))
        assert spread <= float(np.sum(np.clip(bound.atoms - c, 0.0, None) * bound.probabilities)) + 1e-12


def test_counting_each_env_by_its_own_seeds_would_not_hold_with_opposite_effects():
    """Why the test across envs counts every env as the one with the fewest seeds: bounded by the mean of
    Binomial(1) and Binomial(20) coins instead, 1 vs 1 seeds at PoI 0.8 and 20 vs 20 at 0.2 (mean 1/2) would be
    called different 16% of the time."""
    law, own = mean_law([1, 20], [0.8, 0.2]), mean_law([1, 20], [0.5, 0.5])
    called = sum(chance for value, chance in law.items() if stop_loss_p(own, abs(value - 0.5)) <= 0.05)
    assert 0.15 < called < 0.17


def test_hit_or_miss_seeds_get_the_sign_tests_answer_not_the_t_approximations():
    """The issue's case: 7 seeds of one version either far above or far below all 7 of the other's, 6 of 7 above.
    Brunner–Munzel's t approximation said p = 0.047; the chance of 6 or more of 7 coin flips one way is 0.125."""
    rng = np.random.default_rng(0)
    baseline = rng.normal(size=7)
    tag = np.array([10.0] * 6 + [-10.0]) + rng.normal(size=7)
    studentized = rlstats.studentize([tag], [baseline])
    assert rlstats.student_t_p_value(float(studentized.statistic), float(studentized.df)) < 0.05
    p = rlstats.improvement_p_value([tag], [baseline], [list(range(7))], [list(range(7, 14))])  # seeds of their own
    assert p >= 0.125 and p == pytest.approx(0.140625)  # the bound at 5/14 from 1/2: (36 / 1792) / (2 / 14)


@pytest.mark.parametrize(("n_tag", "n_base"), [(7, 7), (5, 20), (20, 5), (13, 13)])
def test_hit_or_miss_nulls_keep_the_false_alarm_rate(n_tag, n_base):
    """4,000 comparisons in which each of the tag's seeds is ±10 by a coin flip and the baseline's are N(0, 1):
    P(X > Y) = 1/2 exactly, and the share with p <= 0.05 must stay within 2 standard errors of 0.05."""
    rng = np.random.default_rng([n_tag, n_base])
    trials = 4000
    tag = rng.choice([-10.0, 10.0], size=(trials, n_tag)) + rng.normal(size=(trials, n_tag))
    base = rng.normal(size=(trials, n_base))
    p = rlstats.null_bound(min(n_tag, n_base)).p_value(np.abs(rlstats.probability_of_improvement(tag, base) - 0.5))
    assert np.mean(p <= 0.05) <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / trials)
    if min(n_tag, n_base) >= 13:  # where the bound can bite, it is not vacuous: some comparisons reach it
        assert np.mean(p <= 0.05) > 0.005


def test_the_p_value_takes_no_draws_and_a_complete_separation_gives_the_smallest():
    x, y = [np.arange(10.0, 16.0), np.arange(10.0, 13.0)], [np.arange(0.0, 6.0), np.arange(5.0, 9.0)]
    # seeds of their own: the test across envs uses the 3 tag seeds and 4 baseline seeds run on both envs
    x_seeds, y_seeds = [list("abcdef"), list("abc")], [list("uvwxyz"), list("uvwx")]
    p = rlstats.improvement_p_value(x, y, x_seeds, y_seeds)
    assert p == rlstats.improvement_p_value(x, y, x_seeds, y_seeds) == rlstats.smallest_p(3, 4) == pytest.approx(2**-2)
    result = rlstats.improvement_test(x, y, x_seeds, y_seeds)
    assert (result.n_x, result.n_y, result.shared, result.improvement) == (3, 4, 0, 1.0)
    # by default run i of each group is seed i: 3 shared seeds and one of the baseline's own
    assert rlstats.improvement_test(x, y).shared == 3
    assert rlstats.improvement_p_value([np.ones(8)], [np.ones(5)]) == 1.0  # all tied: PoI 1/2


def test_pairs_of_one_seed_are_left_out_of_the_statistic():
    """By default run i of each group is seed i; the tag's run of each seed beats the baseline's run of that seed,
    so the diagonal alone would lift the PoI: the tested share counts pairs of different seeds only."""
    x, y = [np.arange(5.0) + 0.5], [np.arange(5.0)]  # x_s just above y_s, below y_{s+1}
    result = rlstats.improvement_test(x, y)
    other = rlstats.comparisons(x[0], y[0])[~np.eye(5, dtype=bool)].mean()
    assert result.improvement == pytest.approx(other) == pytest.approx(0.5) and result.shared == 5
    assert rlstats.probability_of_improvement(x[0], y[0]) == pytest.approx(0.6)


def test_what_seed_counts_can_reach():
    # seeds not shared: n matched coin flips all one way has chance 2 ** (1 - n), n the fewer group's seeds
    assert rlstats.smallest_p(3, 3) == pytest.approx(0.25)
    assert rlstats.smallest_p(6, 9) == pytest.approx(2**-5)
    assert rlstats.smallest_p(1, 5) == 1.0  # a single run: one coin flip
    # every seed run by both groups: pairs of seeds, half as many
    assert rlstats.smallest_p(7, 7, 7) == pytest.approx(0.25) and rlstats.smallest_p(14, 14, 14) == pytest.approx(2**-6)
    # 10 vs 7 sharing 7: 42 shared pairs (3 matched) and 21 of the tag's own against shared (3): 2 ** -2
    assert rlstats.seed_parts(10, 7, 7) == [(pytest.approx(2 / 3), 3), (pytest.approx(1 / 3), 3)]
    assert rlstats.smallest_p(1, 1, 1) == 1.0  # nothing but pairs of one seed: nothing to test
    # the gate: every test has the same smallest p, so Holm needs alpha / tests of each: one tag on one env 6 seeds,
    # two tags 7; 3 envs (4 tests) 8; 5 envs (6 tests) 8
    assert rlops.least_seeds(1, 1, 0.05) == 6 and rlops.least_seeds(2, 1, 0.05) == 7
    assert rlops.least_seeds(1, 3, 0.05) == 8 and rlops.least_seeds(1, 5, 0.05) == 8
    shift = rlstats.detectable_shift(3, 8, 8, 0, 0.05)
    assert 1.5 < shift < 2.5 and 0.85 < rlstats.shift_improvement(shift) < 0.96
    assert rlstats.detectable_shift(3, 8, 8, 0, 0.05) < rlstats.detectable_shift(1, 8, 8, 0, 0.05)  # envs average noise
    assert rlstats.detectable_shift(1, 5, 5, 0, 0.05) is None  # 5 vs 5 never reaches 0.05
    assert rlstats.detectable_shift(1, 20, 20, 0, 0.05) < rlstats.detectable_shift(1, 10, 10, 0, 0.05)


def false_alarms(draw, trials: int, seed: int) -> float:
    """Share of `trials` comparisons with no difference on any env in which the gate called some test different."""
    rng = np.random.default_rng(seed)
    alarms = 0
    for _ in range(trials):
        x, y = draw(rng)
        seeds = {tag: [[f"{tag}{i}" for i in range(len(a))] for a in runs] for tag, runs in (("x", x), ("y", y))}
        draw_seed = int(rng.integers(1 << 30))
        verdict = rlops.compare({"x": x, "y": y}, "y", reps=100, confidence=0.95, seed=draw_seed, seeds=seeds)[0]
        alarms += any(t.label in ("regression", "improvement") for t in [verdict.overall, *verdict.per_env])
    return alarms / trials


def test_the_gate_keeps_its_false_alarm_rate_with_hit_or_miss_seeds_and_unequal_spreads():
    """Through the gate's whole family (across two envs and on each): on one env the tag's 7 seeds hit or miss
    (±10 by a coin flip) against 7 normal ones, on the other 8 seeds of spread 3 meet 12 of spread 1."""

    def draw(rng):
        tag = [rng.choice([-10.0, 10.0], size=7) + rng.normal(size=7), rng.normal(0, 3, size=8)]
        return tag, [rng.normal(size=7), rng.normal(size=12)]

    rate = false_alarms(draw, trials=600, seed=7)
    assert rate <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 600), rate


def test_verdicts_rarely_cry_wolf_when_nothing_changed():
    def draw(rng):
        return [rng.normal(size=8), rng.normal(size=8)], [rng.normal(size=8), rng.normal(size=8)]

    assert false_alarms(draw, trials=300, seed=123) <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 300)


def test_opposite_effects_on_two_envs_cancel_in_the_aggregate_but_fail_the_gate():
    scores = {
        "new": [np.arange(5.0, 12.0), np.arange(0.0, 0.7, 0.1)],  # better on E1, worse on E2
        "base": [np.arange(1.0, 4.5, 0.5)] * 2,
    }
    seeds = {"new": [list("abcdefg")] * 2, "base": [list("tuvwxyz")] * 2}  # each group its own seeds
    (new,) = rlops.compare(scores, "base", reps=2000, confidence=0.95, seed=0, seeds=seeds)
    assert new.overall.improvement.value == pytest.approx(0.5)
    assert new.overall.label == "no detectable difference"
    assert [t.improvement.value for t in new.per_env] == [1.0, 0.0]
    # 7 vs 7 runs on each env separate completely: p = 2 ** -6, 0.047 after Holm over the three tests
    assert [t.label for t in new.per_env] == ["improvement", "regression"]
    assert [t.adjusted for t in new.per_env] == pytest.approx([3 * 2**-6] * 2)
    assert new.gate == "regression"


def test_tags_are_split_on_commas():
    assert parse_tags(" v1.0 ,my-change,,") == ("v1.0", "my-change")
    assert parse_tags("") == ()


def test_atari_env_ids_find_their_game():
    assert atari_game("BreakoutNoFrameskip-v4") == atari_game("ALE/Breakout-v5") == atari_game("Breakout-v5") == "Breakout"
    assert atari_game("ALE/montezuma_revenge-v5") == "MontezumaRevenge"
    assert atari_game("CartPole-v1") is None
    assert len(ATARI_HUMAN) == 57 and all(random < human for random, human in ATARI_HUMAN.values())


# ---------------------------------------------------------------- the gate, on small runs written here


def write_run(
    root: Path, env_id: str, tags: str, seed: int, returns, steps=None, exp_name: str = "ppo", sps=None, clock=None
) -> Path:
    """A run folder as the scripts write it: hyperparameters and tags texts, returns and SPS at their steps (stamped
    `clock` + the value's index seconds when `clock` is given, else at the time of writing)."""
    from torch.utils.tensorboard import SummaryWriter

    folder = root / f"{env_id}__{exp_name}__{seed}__{tags.replace(',', '+') or 'none'}"
    steps = steps if steps is not None else [100 * (i + 1) for i in range(len(returns))]
    with SummaryWriter(str(folder)) as writer:
        table = f"|param|value|\n|-|-|\n|env_id|{env_id}|\n|exp_name|{exp_name}|\n|seed|{seed}|"
        writer.add_text("hyperparameters", table, walltime=clock)
        writer.add_text("tags", tags, walltime=clock)
        stamps = [None if clock is None else clock + i for i in range(len(steps))]
        for step, value, stamp in zip(steps, returns, stamps):
            writer.add_scalar("charts/episodic_return", value, step, walltime=stamp)
        for step, value, stamp in zip(steps, sps if sps is not None else [1000.0] * len(steps), stamps):
            writer.add_scalar("charts/SPS", value, step, walltime=stamp)
    return folder


def write_group(root: Path, env_id: str, tags: str, seeds, level: float, spread: float = 1.0, episodes: int = 30) -> None:
    """Runs that learn from about 0 to `level` (each seed's level drawn with `spread`) over `episodes` episodes."""
    rng = np.random.default_rng(zlib.crc32(f"{env_id} {tags}".encode()))
    for seed in seeds:
        final = level + spread * rng.normal()
        write_run(root, env_id, tags, seed, final * np.linspace(0.05, 1, episodes) + 0.1 * rng.normal(size=episodes))


def gate(runs_dir: Path, tmp_path: Path, capsys, *args: str) -> tuple[int, str, str]:
    """`python -m cleanrl_utils.rlops` through `rlops.main` in this process: main's return value is the exit code."""
    argv = ["--runs-dir", str(runs_dir), "--output-filename", str(tmp_path / "out" / "compare"), "--exp-name", "ppo"]
    code = rlops.main([*argv, "--metric-last-n-average-window", "5", "--bootstrap-samples", "2000", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    err = err.strip()
    assert err.startswith("rlops: error:") and "\n" not in err, err
    return err


def test_a_group_with_one_seed_is_inconclusive_and_fails_the_gate_with_3(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 6), 100)
    write_group(tmp_path, "A-v1", "new", [11], 50)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 3, err
    assert "rlops: new vs base: inconclusive (1 vs 5 seeds on 1 env can reach p = 1 at best" in out
    assert gate(tmp_path, tmp_path, capsys, "--tags", "new", "base")[0] == 0  # without the gate: a report


def test_three_seeds_on_one_env_cannot_reach_alpha_and_say_what_would(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 4), 100)
    write_group(tmp_path, "A-v1", "new", range(11, 14), 10)  # far worse, every seed
    code, out, _ = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 3
    assert "3 vs 3 seeds on 1 env can reach p = 0.25 at best" in out and "6 seeds per tag on every env" in out
    assert "| new | " in out and "| inconclusive |" in out


def test_k_tags_are_corrected_for_together(tmp_path, capsys):
    """6 vs 6 seeds on one env reach p = 2 ** -5 = 0.031: a regression for one tag, but not two (Holm: 0.0625)."""
    write_group(tmp_path, "A-v1", "base", range(1, 7), 100)
    write_group(tmp_path, "A-v1", "worse", range(11, 17), 10)  # each tag on seeds of its own
    write_group(tmp_path, "A-v1", "worse2", range(21, 27), 10)
    code, out, _ = gate(tmp_path, tmp_path, capsys, "--tags", "worse", "base", "--fail-on-regression")
    assert code == 1 and "rlops: worse vs base: regression" in out
    code, out, _ = gate(tmp_path, tmp_path, capsys, "--tags", "worse", "worse2", "base", "--fail-on-regression")
    assert code == 3
    assert "rlops: worse vs base: inconclusive" in out and "(Holm over 2 tests)" in out


def test_a_clear_regression_over_envs_shows_per_env_intervals_and_holm_p(tmp_path, capsys):
    for env in ("A-v1", "B-v1"):
        write_group(tmp_path, env, "base", range(1, 8), 100)
        write_group(tmp_path, env, "new", range(11, 18), 50)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 1, err
    rows = [line for line in out.splitlines() if re.match(r"\| new \| [AB]-v1 \| 7 vs 7 \| 0\.00 \[0\.00, 0\.00\] \|", line)]
    assert len(rows) == 2 and all(row.endswith("| regression |") for row in rows), out
    assert "Holm p: adjusted over the gate's 3 tests (each tag across envs and on each env)" in out
    # every test of the three reaches 2 ** -6 (the test across envs counts seeds, not runs): Holm p 3 * 2 ** -6
    assert "rlops: new vs base: regression on A-v1 (PoI 0.00 [0.00, 0.00], p=0.0156, Holm p=0.0469); B-v1" in out
    # 7 vs 7 reach 2 ** -6 only by a complete separation, on both envs: a large shift (PoI near 1)
    assert re.search(r"a shift of \d\.\d seed-to-seed standard deviations on every env \(PoI [01]\.\d\d\) is found", out)
    for name in ("compare", "compare_profile", "compare_aggregates", "compare_iqm_steps"):
        for suffix in (".png", ".svg"):
            assert (tmp_path / "out" / f"{name}{suffix}").stat().st_size > 0
    markdown = (tmp_path / "out" / "compare.md").read_text()
    assert "![Performance profile](compare_profile.png)" in markdown and "| optimality gap |" in markdown


def test_the_same_seed_numbers_for_both_tags_count_as_pairs_of_seeds(tmp_path, capsys):
    """Seeds 1..7 run by both: a run of one seed number may share its luck (initial network, env states) with the
    other tag's, so only pairs of different seeds count, 3 of them: inconclusive, saying to use other seeds. The
    same runs with the tag on seeds 11..17 are a regression."""
    write_group(tmp_path / "shared", "A-v1", "base", range(1, 8), 100)
    write_group(tmp_path / "shared", "A-v1", "new", range(1, 8), 50)
    code, out, _ = gate(tmp_path / "shared", tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 3
    assert "7 vs 7 seeds on 1 env, 7 of them run by both" in out and "can reach p = 0.25 at best" in out
    assert "run the tag on seeds the baseline did not use" in out
    write_group(tmp_path / "own", "A-v1", "base", range(1, 8), 100)
    write_group(tmp_path / "own", "A-v1", "new", range(11, 18), 50)
    code, out, _ = gate(tmp_path / "own", tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 1 and "rlops: new vs base: regression (PoI 0.00 [0.00, 0.00], p=0.0156" in out


def test_a_non_finite_score_is_one_line_naming_the_run(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 6), 100)
    write_group(tmp_path, "A-v1", "new", range(1, 5), 100)
    bad = write_run(tmp_path, "A-v1", "new", 5, [1.0, 2.0, float("nan"), 3.0, 4.0, 5.0])
    code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base")
    assert code == 2
    line = one_line_error(err)
    assert str(bad) in line and "seed 5" in line and "nan at step 300" in line


def test_a_run_that_stopped_early_is_named_and_left_out(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 6), 100)
    write_group(tmp_path, "A-v1", "new", range(1, 5), 100)
    # crashed a third of the way, while still scoring well on its last episodes
    crashed = write_run(tmp_path, "A-v1", "new", 5, [300.0] * 10)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base")
    assert code == 0
    warning = next(line for line in err.splitlines() if str(crashed) in line)
    assert "stopped at step 1,000 of 3,000 (33%): left out" in warning
    assert f"- left out: `{crashed} (new, seed 5, A-v1)` stopped at step 1,000 of 3,000" in out
    assert "| new | A-v1 | 4 vs 5 |" in out  # four seeds of `new` compared
    code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--strict")
    assert code == 2 and "--strict refuses runs that stopped early" in one_line_error(err)


def test_a_crashed_seed_keeps_a_passing_tag_inconclusive(tmp_path, capsys):
    """8 vs 8 seeds, no difference: the gate passes; the same with a ninth seed of the tag crashed half way: the
    survivors alone must not pass it (the crash may be what the change broke)."""
    write_group(tmp_path, "A-v1", "base", range(1, 9), 100)
    write_group(tmp_path, "A-v1", "new", range(11, 19), 100)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 0, err
    write_run(tmp_path, "A-v1", "new", 19, np.linspace(0, 50, 15))  # stopped at step 1,500 of 3,000
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 3 and "stopped at step 1,500 of 3,000" in err
    summary = next(line for line in out.splitlines() if line.startswith("rlops: new vs base:"))
    assert "inconclusive (1 run of it or the baseline left out (stopped early" in summary, summary


def test_a_window_longer_than_a_run_warns(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 6), 100)
    write_group(tmp_path, "A-v1", "new", range(1, 6), 100)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--metric-last-n-average-window", "50")
    assert code == 0
    assert err.count("has 30 values of charts/episodic_return, fewer than the window of 50") == 10
    assert "- flagged:" in out


def test_a_run_carrying_both_compared_tags_is_an_error(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 5), 100)
    write_group(tmp_path, "A-v1", "new", range(1, 5), 100)
    both = write_run(tmp_path, "A-v1", "new,base", 9, np.linspace(0, 100, 30))
    code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base")
    assert code == 2
    line = one_line_error(err)
    assert str(both) in line and "carries the tags 'new' and 'base'" in line


# ---------------------------------------------------------------- the unit of evidence: (tag, env, seed)


def test_a_copied_run_folder_is_refused_naming_both(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 7), 100)
    write_group(tmp_path, "A-v1", "new", range(1, 7), 90)
    original = next(tmp_path.glob("A-v1__ppo__3__new"))
    copy = tmp_path / "backup" / original.name
    shutil.copytree(original, copy)
    code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    line = one_line_error(err)
    assert code == 2 and "tag 'new' has 2 runs of seed 3 on A-v1" in line
    assert str(original) in line and str(copy) in line


def test_a_seed_run_twice_under_one_tag_is_refused(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 7), 100)
    write_group(tmp_path, "A-v1", "new", range(1, 7), 90)
    write_run(tmp_path / "again", "A-v1", "new", 2, np.linspace(0, 70, 30))  # other values, same tag and seed
    code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base")
    assert code == 2 and "tag 'new' has 2 runs of seed 2 on A-v1" in one_line_error(err)


def test_a_copy_under_another_seed_is_refused_but_twins_that_never_learned_are_not(tmp_path, capsys):
    for seed in range(1, 7):
        write_run(tmp_path, "A-v1", "base", seed, np.linspace(0, 100, 30) + seed)
        # seeds that never learn log the same returns at the same steps (MountainCar's -200), but not the same clock
        write_run(tmp_path, "A-v1", "stuck", seed + 10, [-200.0] * 30, sps=[900.0 + seed] * 30)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "stuck", "base", "--fail-on-regression")
    assert code == 1, err
    assert "rlops: stuck vs base: regression" in out
    # a copy: the same values, SPS and clock, given another seed's hyperparameters
    original = write_run(tmp_path / "a", "A-v1", "base", 7, np.linspace(0, 90, 30), clock=1.7e9)
    copy = write_run(tmp_path / "b", "A-v1", "base", 8, np.linspace(0, 90, 30), clock=1.7e9)
    code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "stuck", "base")
    line = one_line_error(err)
    assert code == 2 and str(original) in line and str(copy) in line and "copies of one run" in line


def test_one_seeds_runs_under_two_tags_may_match_a_deterministic_change_that_alters_nothing(tmp_path, capsys):
    for seed in range(1, 7):
        for tag, clock in (("base", 1.7e9), ("same", 1.8e9)):
            # the same returns, but a re-run's own clock: its own speeds and start time
            returns, speeds = np.linspace(0, 100, 30) + seed, [clock / 1e6 + seed] * 30
            write_run(tmp_path / tag, "A-v1", tag, seed, returns, sps=speeds, clock=clock + seed)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "same", "base", "--fail-on-regression")
    # not refused as copies; inconclusive, as the same seed numbers leave 3 pairs of independent seeds
    assert code == 3, err
    assert "6 vs 6 seeds on 1 env, 6 of them run by both" in out and "| same | A-v1 | 6 vs 6 | 0.50 " in out


def test_an_env_id_given_twice_is_refused(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 6), 100)
    write_group(tmp_path, "A-v1", "new", range(1, 6), 50)
    code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--env-ids", "A-v1", "A-v1", "A-v1")
    assert code == 2 and "--env-ids repeats A-v1" in one_line_error(err)


def test_one_tag_compares_nothing_so_a_baseline_or_a_gate_is_an_error(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 6), 100)
    for flags in (["--baseline", "base"], ["--fail-on-regression"]):
        code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "base", *flags)
        assert code == 2 and "with the one tag 'base' compares nothing" in one_line_error(err)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "base")  # its tables and figures alone
    assert code == 0, err
    assert "| env id | base |" in out and "rlops: base" not in out


def test_target_scores_for_an_env_not_compared_or_given_twice_are_errors(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 7), 100)
    write_group(tmp_path, "A-v1", "new", range(1, 7), 90)
    code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--target-scores", "A-v2=0,100")
    assert code == 2 and "--target-scores names A-v2, which is not compared (envs: A-v1)" in one_line_error(err)
    code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--target-scores", "A-v1=0,100", "A-v1=0,50")
    assert code == 2 and "--target-scores gives A-v1 twice" in one_line_error(err)


def test_a_non_finite_sps_is_named_and_left_out_of_the_speed_table(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 7), 100)
    write_group(tmp_path, "A-v1", "new", range(1, 6), 100)
    odd = write_run(tmp_path, "A-v1", "new", 6, np.linspace(0, 100, 30), sps=[float("nan")] * 29 + [float("inf")])
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code in (0, 3), err  # a verdict, not a crash or the regression code
    warning = next(line for line in err.splitlines() if str(odd) in line)
    assert "charts/SPS is nan at step 100 (30 non-finite of 30 values): left out of its median SPS" in warning
    sps_table = out.split("## Median SPS")[1].split("##")[0]
    assert "| A-v1 | 1000 ± 0 (n=5) | 1000 ± 0 (n=6) |" in sps_table and "nan" not in sps_table and "inf" not in sps_table


def table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


def test_a_pipe_in_a_tag_does_not_break_the_tables(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 7), 100)
    write_group(tmp_path, "A-v1", "lr|0.1", range(11, 17), 50)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "lr|0.1", "base", "--fail-on-regression")
    assert code == 1, err
    assert "| env id | lr\\|0.1 | base |" in out and "| lr\\|0.1 | A-v1 | 6 vs 6 |" in out
    markdown = (tmp_path / "out" / "compare.md").read_text()
    for table in markdown.split("\n\n"):
        rows = table_rows(table)
        cells = {len(re.split(r"(?<!\\)\|", row)) for row in rows}  # cells split on unescaped pipes only
        assert len(cells) <= 1, table
    assert "rlops: lr|0.1 vs base: regression" in out


def test_a_collapse_on_one_env_of_five_fails_the_gate(tmp_path, capsys):
    """Four envs gain a little, one collapses: across envs nothing is detected, but a regression gate must fail.
    10 seeds a side on 5 envs: each env alone can reach 2 ** -9, below Holm's 0.05 / 5."""
    envs = ["A-v1", "B-v1", "C-v1", "D-v1", "E-v1"]
    for env in envs:
        write_group(tmp_path, env, "base", range(1, 11), 100)
        write_group(tmp_path, env, "new", range(11, 21), 10 if env == "C-v1" else 101)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 1, err
    summary = next(line for line in out.splitlines() if line.startswith("rlops: new vs base:"))
    assert summary.startswith("rlops: new vs base: regression on C-v1 (PoI 0.00 [0.00, 0.00], p=0.00195")
    assert "; across envs: no detectable difference (PoI 0.5" in summary
    assert re.search(r"\| new \| C-v1 \| 10 vs 10 \| 0\.00 \[0\.00, 0\.00\] \| 0\.00195 \| 0\.0\d+ \| regression \|", out)
    assert re.search(r"\| new \| .* \| no detectable difference \| regression \|", out)  # across envs, gate


def test_several_envs_count_seeds_not_runs_so_five_seeds_stay_inconclusive(tmp_path, capsys):
    """5 seeds on each of 4 envs: a seed's luck may be shared by its runs on every env, so the test across envs
    counts 5 seeds, not 20 runs, and no test of the gate can reach 0.05 / 5: inconclusive."""
    for env in ("A-v1", "B-v1", "C-v1", "D-v1"):
        write_group(tmp_path, env, "base", range(1, 6), 100)
        write_group(tmp_path, env, "new", range(11, 16), 100)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 3, err
    summary = next(line for line in out.splitlines() if line.startswith("rlops: new vs base:"))
    assert "inconclusive (5 vs 5 seeds on 4 envs can reach p = 0.062 at best" in summary
    assert "no effect of any size can be detected; 8 seeds per tag on every env" in summary


def test_a_parse_error_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.rlops", "--tags", "a", "b", "--exp-name", "ppo", "--confidence", "high"],
        cwd=tmp_path,
        env=script_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "--confidence" in one_line_error(proc.stderr) and "Traceback" not in proc.stderr


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_an_untracked_file_makes_the_runners_tag_dirty(tmp_path, monkeypatch):
    """RLops groups runs by the tag the benchmark runner gives them: a tree with a new, untracked module (that a
    script may import) is not the commit's code, so its runs must not join the commit's group."""
    from cleanrl_utils.benchmark.common import git_tag

    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / "algo.py").write_text("print(1)\n")
    git(tmp_path, "add", "algo.py")
    git(tmp_path, "commit", "-qm", "one")
    git(tmp_path, "tag", "v1.0")
    monkeypatch.chdir(tmp_path)
    assert git_tag() == "v1.0"
    (tmp_path / "helper.py").write_text("x = 2\n")
    assert git_tag() == "v1.0-dirty"


def test_target_scores_in_the_wrong_order_are_an_error_unless_lower_is_better(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 7), 100)
    write_group(tmp_path, "A-v1", "new", range(11, 17), 20)
    code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--target-scores", "A-v1=500,0")
    assert code == 2 and "LOW (500) must be below HIGH (0)" in one_line_error(err)
    code, _, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--target-scores", "A-v1=5,5")
    assert code == 2
    # lower is better: `new` ends lower, so it is the better one, and the order of the targets turns with it
    code, out, err = gate(
        tmp_path, tmp_path, capsys, "--tags", "new", "base", "--lower-is-better", "--target-scores", "A-v1=500,0"
    )
    assert code == 0, err
    assert "rlops: new vs base: improvement" in out and "A-v1 500 → 0, 0 → 1 (--target-scores)" in out
    code, _, err = gate(
        tmp_path, tmp_path, capsys, "--tags", "new", "base", "--lower-is-better", "--target-scores", "A-v1=0,500"
    )
    assert code == 2 and "must be above the one mapped to 1" in one_line_error(err)


def iqm_cell(out: str, tag: str) -> str:
    return re.search(rf"^\| {tag} \| (-?[0-9.]+) \[", out, re.MULTILINE).group(1)


def test_adding_a_tag_changes_no_normalised_score(tmp_path, capsys):
    write_group(tmp_path, "A-v1", "base", range(1, 6), 100)
    write_group(tmp_path, "A-v1", "new", range(1, 6), 90)
    write_group(tmp_path, "A-v1", "awful", range(1, 6), -400)  # far below anything else
    _, two, _ = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base")
    _, three, _ = gate(tmp_path, tmp_path, capsys, "--tags", "awful", "new", "base")
    assert iqm_cell(two, "new") == iqm_cell(three, "new") and iqm_cell(two, "base") == iqm_cell(three, "base")
    assert "A-v1 " in two and "(the baseline's start and end of training)" in two


def test_a_baseline_that_did_not_improve_leaves_the_aggregates_out_not_the_verdict(tmp_path, capsys):
    for seed in range(1, 7):  # both get worse over training: no scale from the baseline's start to its end
        write_run(tmp_path, "A-v1", "base", seed, np.linspace(50, 40, 30) + seed)
        write_run(tmp_path, "A-v1", "new", seed + 10, np.linspace(50, 0, 30) + seed)
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 1, err
    assert "baseline base did not improve on A-v1" in err and "Scores are not normalised" in out
    assert "rlops: new vs base: regression" in out
    assert not (tmp_path / "out" / "compare_profile.png").exists() and (tmp_path / "out" / "compare.png").exists()


def test_atari_reference_scores_normalise_by_random_and_human(tmp_path, capsys):
    for tag, level in (("base", 20.0), ("new", 25.0)):
        for seed in range(1, 6):
            write_run(tmp_path, "BreakoutNoFrameskip-v4", tag, seed, level + seed * np.linspace(0, 1, 30))
    code, out, err = gate(tmp_path, tmp_path, capsys, "--tags", "new", "base", "--reference-scores", "atari-human")
    assert code == 0, err
    assert "BreakoutNoFrameskip-v4 1.7 → 0, 30.5 → 1 (atari-human reference scores)" in out
    write_group(tmp_path, "CartPole-v1", "base", range(1, 6), 100)
    write_group(tmp_path, "CartPole-v1", "new", range(1, 6), 100)
    code, _, err = gate(
        tmp_path, tmp_path, capsys, "--tags", "new", "base", "--reference-scores", "atari-human",
        "--env-ids", "BreakoutNoFrameskip-v4", "CartPole-v1",
    )  # fmt: skip
    assert code == 2 and "has no scores for CartPole-v1" in one_line_error(err)


OPENRLBENCHMARK = [
    "--filters",
    "?we=openrlbenchmark&wpn=cleanrl&ceik=env_id&cen=exp_name&metric=charts/episodic_return",
    "ddpg_continuous_action?tag=pr-299",
    "ddpg_continuous_action?tag=rlops-pilot",
    "--output-filename",
    "compare",
    "--scan-history",
    "--report",
]


def test_openrlbenchmarks_form_gets_one_line_with_our_flags(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.rlops", *OPENRLBENCHMARK],
        cwd=tmp_path,
        env=script_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    line = one_line_error(proc.stderr)
    assert (
        "python -m cleanrl_utils.rlops --wandb-entity openrlbenchmark --wandb-project-name cleanrl "
        "--metric charts/episodic_return --exp-name ddpg_continuous_action --tags pr-299 rlops-pilot "
        "--baseline rlops-pilot --output-filename compare --scan-history" in line
    )
    assert "--report (a W&B report) has no counterpart" in line


# ---------------------------------------------------------------- real runs


def benchmark_runs(cwd: Path, tags: str | None, seeds: range, *extra: str) -> None:
    env = script_env()
    env.pop("WANDB_TAGS", None)
    if tags is not None:
        env["WANDB_TAGS"] = tags
    command = f"{sys.executable} {REPO / 'cleanrl' / 'ppo.py'} --no-cuda --total-timesteps {STEPS} {' '.join(extra)}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "cleanrl_utils.benchmark",
            "--env-ids",
            "CartPole-v1",
            "--command",
            command,
            "--num-seeds",
            str(len(seeds)),
            "--start-seed",
            str(seeds.start),
            "--workers",
            "2",
            "--no-auto-tag",
            "--log-dir",
            str(cwd / "logs" / f"{tags or 'untagged'}-{seeds.start}"),  # one benchmark per log folder
        ],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def tagged_runs(tmp_path_factory) -> Path:
    cwd = tmp_path_factory.mktemp("rlops")
    benchmark_runs(cwd, "base,extra-tag", range(1, 7), *LEARNING)
    benchmark_runs(cwd, "broken", range(13, 19), "--learning-rate", "1e-7")  # seeds of its own: 6 independent pairs
    benchmark_runs(cwd, None, range(7, 13), *LEARNING)
    return cwd


def run_rlops(runs_dir: Path, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """`python -m cleanrl_utils.rlops` on the ppo runs under `runs_dir`, as a user runs it."""
    out = tmp_path / "compare"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cleanrl_utils.rlops",
            "--runs-dir",
            str(runs_dir),
            "--output-filename",
            str(out),
            "--exp-name",
            "ppo",
            *WINDOW,
            *args,
        ],
        cwd=tmp_path,
        env=script_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, proc.stdout, proc.stderr


def rlops_in_process(runs_dir: Path, tmp_path: Path, capsys, *args: str) -> tuple[int, str, str]:
    """The same command through `rlops.main` in this process: the command line's exit code is main's return value."""
    argv = ["--runs-dir", str(runs_dir), "--output-filename", str(tmp_path / "compare"), "--exp-name", "ppo", *WINDOW]
    code = rlops.main([*argv, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.extended  # shares 18 real ppo.py runs (about 2 min of one core): CI runs these after the quick run
def test_runs_record_their_tags_and_untagged_runs_stay_readable(tagged_runs):
    runs = collect_runs([tagged_runs / "runs"], split_by_dir=False)
    by_seed = {(run.seed, run.tags) for run in runs}
    assert {("1", ("base", "extra-tag")), ("13", ("broken",)), ("7", ())} <= by_seed
    assert len(runs) == 18


@pytest.mark.extended
def test_a_broken_learning_rate_is_a_regression_and_fails_the_gate(tagged_runs, tmp_path, capsys):
    code, out, err = run_rlops(tagged_runs / "runs", tmp_path, "--tags", "broken", "base", "--fail-on-regression")
    assert code == 1, err
    assert "rlops: broken vs base: regression" in out
    # the reference's per-env tables, one column per tag, and the files
    assert "| env id | broken | base |" in out
    assert "## Median SPS" in out and "## Runtime (minutes)" in out
    for suffix in (".md", ".png", ".svg", "_profile.png", "_aggregates.svg", "_iqm_steps.png"):
        assert (tmp_path / f"compare{suffix}").stat().st_size > 0
    # without the gate the same comparison exits 0
    assert rlops_in_process(tagged_runs / "runs", tmp_path, capsys, "--tags", "broken", "base")[0] == 0


@pytest.mark.extended
def test_the_same_script_with_other_seeds_shows_no_detectable_difference(tagged_runs, tmp_path, capsys):
    args = ("--tags", "untagged", "base", "--fail-on-regression")
    code, out, err = rlops_in_process(tagged_runs / "runs", tmp_path, capsys, *args)
    assert code == 0, err
    assert "rlops: untagged vs base: no detectable difference" in out


@pytest.mark.extended
def test_one_seed_per_tag_is_inconclusive(tagged_runs, tmp_path, capsys):
    one = tmp_path / "one"
    for run in collect_runs([tagged_runs / "runs"], split_by_dir=False):
        if run.seed in ("1", "13"):  # base's seed 1, broken's seed 13
            shutil.copytree(run.path, one / run.path.name)
    code, out, err = rlops_in_process(one, tmp_path, capsys, "--tags", "broken", "base", "--fail-on-regression")
    assert code == 3, err
    assert "undefined" in out and "rlops: broken vs base: inconclusive" in out


BAD_INPUT = {
    "unknown tag": (["--tags", "nope", "base"], "carry tag 'nope'"),
    "env without runs": (["--tags", "broken", "base", "--env-ids", "Acrobot-v1"], "has no runs on Acrobot-v1"),
    "metric nobody logged": (["--tags", "broken", "base", "--metric", "charts/nothing"], "'charts/nothing'"),
    "exp names per tag miscounted": (["--tags", "a", "b", "c", "--exp-name", "ppo"], "given 2 times for 3 tags"),
    "baseline not a tag": (["--tags", "broken", "base", "--baseline", "other"], "not one of --tags"),
    "no such folder": (["--tags", "broken", "base", "--runs-dir", "/nonexistent"], "no such folder"),
}


@pytest.mark.extended
@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_input_is_one_line_and_exit_2(case, tagged_runs, tmp_path, capsys):
    args, expected = BAD_INPUT[case]
    argv = ["--exp-name", "ppo", *args, "--output-filename", str(tmp_path / "c")]
    if "--runs-dir" not in args:
        argv += ["--runs-dir", str(tagged_runs / "runs")]
    assert rlops.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlops: error:") and expected in err and "\n" not in err, err


# ---------------------------------------------------------------- the W&B source, through a stand-in of wandb.Api


class FakeWandbRun:
    """What rlops reads of a `wandb.apis.public.Run`: id, state, config, tags, summary, history and scan_history.

    History rows carry `_step`, the row number, as W&B's do; `history` returns an evenly spaced sample.
    """

    def __init__(self, run, index: int, state: str = "finished"):
        self.id = f"run{index}"
        self.state = state
        self.config = {"env_id": run.env_id, "exp_name": run.exp_name, "seed": int(run.seed)}
        self.tags = list(run.tags)
        self.summary = {"_runtime": (run.runtime_minutes or 0) * 60}
        self._scalars = read_scalars(run.path)
        self.scanned = []

    def _rows(self, keys):
        step_key, tag = keys
        return [{"_step": i, step_key: step, tag: value} for i, (step, value) in enumerate(self._scalars.get(tag, []))]

    def scan_history(self, keys, min_step=None):
        self.scanned.append(min_step)
        return iter(row for row in self._rows(keys) if min_step is None or row["_step"] >= min_step)

    def history(self, keys, samples, pandas):
        assert pandas is False
        rows = self._rows(keys)
        return rows[:: max(1, len(rows) // samples)]


class FakeApi:
    def __init__(self, runs, fail: Exception | None = None):
        self.remote = runs
        self.fail = fail
        self.paths = []

    def runs(self, path, filters=None):
        self.paths.append(path)
        if self.fail:
            raise self.fail
        return [run for run in self.remote if run.config["exp_name"] in filters["config.exp_name"]["$in"]]


def test_without_scan_history_the_score_window_is_read_whole(tmp_path):
    """A sample of 500 rows of a 2000-episode run holds every 4th episode: the last 100 sampled rows span 400
    episodes. The window's rows are read whole from the first of them on, so the score is the last 100 episodes."""
    returns = np.arange(2000.0)
    run = collect_runs([write_run(tmp_path / "runs", "A-v1", "base", 1, returns).parent], split_by_dir=False)[0]
    remote = FakeWandbRun(run, 0)
    series, exact = _sampled_with_exact_tail(remote, ["global_step", "charts/episodic_return"], "charts/episodic_return", 100)
    assert exact and remote.scanned == [1600]  # the 100th-last sampled row: every 4th of 2000
    assert np.mean([value for _, value in series[-100:]]) == pytest.approx(returns[-100:].mean())
    assert len(series) == 400 + 400  # before the window a sample, from it on every row


def test_wandb_source_keeps_finished_runs_and_counts_the_others(tmp_path, monkeypatch, capsys):
    import wandb

    for tag, level in (("base", 100), ("new", 50)):
        write_group(tmp_path / "runs", "A-v1", tag, range(1, 6), level)
    local = collect_runs([tmp_path / "runs"], split_by_dir=False)
    remote = [FakeWandbRun(run, i) for i, run in enumerate(local)]
    remote[0].state, remote[1].state, remote[2].state = "running", "crashed", "running"
    monkeypatch.setattr(wandb, "Api", lambda: FakeApi(remote))
    argv = ["--exp-name", "ppo", "--tags", "new", "base", "--output-filename", str(tmp_path / "c")]
    code = rlops.main([*argv, "--wandb-project-name", "p", "--metric-last-n-average-window", "5"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "W&B project p: left out 3 runs that have not finished (1 crashed, 2 running)" in captured.err
    assert re.search(r"\| new \| A-v1 \| \d vs \d \|", captured.out)
    compared = sum(int(n) for n in re.search(r"\| new \| A-v1 \| (\d) vs (\d) \|", captured.out).groups())
    assert compared == 7  # 10 runs, 3 unfinished


@pytest.mark.extended
def test_wandb_source_gives_the_local_verdicts(tagged_runs, tmp_path, monkeypatch, capsys):
    import wandb

    local = collect_runs([tagged_runs / "runs"], split_by_dir=False)
    api = FakeApi([FakeWandbRun(run, i) for i, run in enumerate(local)])
    monkeypatch.setattr(wandb, "Api", lambda: api)
    argv = ["--exp-name", "ppo", "--tags", "broken", "base", *WINDOW, "--output-filename", str(tmp_path / "c")]
    code = rlops.main([*argv, "--wandb-project-name", "cleanRL", "--wandb-entity", "me", "--scan-history"])
    assert code == 0
    assert api.paths == ["me/cleanRL"] and all(run.scanned == [None, None] for run in api.remote)
    assert "rlops: broken vs base: regression" in capsys.readouterr().out


def test_wandb_unreachable_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    import wandb

    monkeypatch.setattr(wandb, "Api", lambda: FakeApi([], fail=ConnectionError("Max retries exceeded\nwith url")))
    argv = ["--exp-name", "ppo", "--tags", "a", "b", "--wandb-project-name", "p", "--output-filename", str(tmp_path / "c")]
    assert rlops.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == "rlops: error: cannot read W&B project p: ConnectionError: Max retries exceeded with url"


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--bogus"], "rlops: error: missing --tags"),
        (["--tags", "a", "--exp-name", "x", "--bogus"], "rlops: error: Unrecognized options: --bogus"),
        (["--tags", "a", "a", "--exp-name", "x"], "rlops: error: --tags repeats 'a'"),
        (["--tags", "a", "b", "--exp-name", "x", "--target-scores", "A=2,1"], "rlops: error: --target-scores A=2,1: LOW"),
        (["--filters", "?we=e&wpn=p", "ppo?tag=x"], "rlops: error: --filters is openrlbenchmark's form"),
    ],
)
def test_bad_flags_are_refused_before_the_slow_imports(argv, line):
    """`python -m cleanrl_utils.rlops` checks its flags before it imports numpy, matplotlib or TensorBoard (issue
    51): the refusal is one line and exit 2 with none of them loaded (CPU time 1.3 s before, 0.27 s after)."""
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['rlops', *{argv!r}]\n"
        "try:\n"
        "    runpy.run_module('cleanrl_utils.rlops', run_name='__main__')\n"
        "except SystemExit as stop:\n"
        "    heavy = [m for m in ('numpy', 'scipy', 'pandas', 'matplotlib', 'tensorboard', 'torch') if m in sys.modules]\n"
        "    print(stop.code, heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "2 []", (proc.stdout, proc.stderr)
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(line), proc.stderr
