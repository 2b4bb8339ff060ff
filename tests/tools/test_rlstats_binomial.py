"""rlstats.binomial_p_value: the exact one-sided binomial test of games won, and its level on hit-or-miss outcomes."""

import math

import numpy as np
import pytest

from cleanrl_utils import rlstats

pytestmark = pytest.mark.fast  # the edit-test loop's tier: pytest -m fast (docs/community/contribution.md)


def test_small_cases_by_hand():
    assert rlstats.binomial_p_value(9, 10) == pytest.approx(11 / 1024, rel=1e-12)  # 9 or 10 heads of 10 fair coins
    assert rlstats.binomial_p_value(0, 7) == 1.0
    assert rlstats.binomial_p_value(7, 7) == pytest.approx(0.5**7, rel=1e-12)
    assert rlstats.binomial_p_value(2, 3, p=0.25) == pytest.approx(3 * 0.25**2 * 0.75 + 0.25**3, rel=1e-9)


def test_large_counts_stay_exact():
    """300 games: no float overflow in the binomial coefficients; the tail equals the symmetric one."""
    upper = rlstats.binomial_p_value(170, 300)
    lower = sum(math.comb(300, k) for k in range(0, 131)) / 2**300  # P(X <= 130) = P(X >= 170) for fair coins
    assert upper == pytest.approx(lower, rel=1e-12)
    assert 0.01 < upper < 0.015


@pytest.mark.parametrize(("successes", "trials", "p"), [(-1, 5, 0.5), (6, 5, 0.5), (2, 5, 0.0), (2, 5, 1.0), (2.0, 5, 0.5)])
def test_bad_arguments_are_refused(successes, trials, p):
    with pytest.raises(ValueError):
        rlstats.binomial_p_value(successes, trials, p)


def test_level_holds_on_hit_or_miss_games_with_unequal_sides():
    """No better than even, on average over both sides (0.7 on one side, 0.3 on the other, sides taken equally):
    the test rejects at 5% in at most 5% of 20,000 matches of 60 games; a policy winning 0.65 of its games on
    both sides is found in most matches."""
    rng = np.random.default_rng(0)
    side_chances = np.tile([0.7, 0.3], 30)
    null_wins = (rng.random((20_000, 60)) < side_chances).sum(1)
    p_of = {wins: rlstats.binomial_p_value(int(wins), 60) for wins in range(61)}
    false_alarms = np.mean([p_of[w] <= 0.05 for w in null_wins])
    assert false_alarms <= 0.05
    better_wins = (rng.random((2_000, 60)) < 0.65).sum(1)
    assert np.mean([p_of[w] <= 0.05 for w in better_wins]) > 0.6
