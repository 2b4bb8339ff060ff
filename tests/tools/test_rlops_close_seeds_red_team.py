"""Red team of commit 9257abb: seeds closer than their runs' num_envs are warned about, not judged as copies.

The claim (cleanrl_utils/rlops_runs.py `check_evidence`, `share_sub_env_streams`, `close_seeds`, `warn_close_seeds`;
docs/get-started/rlops.md, "Seeds that share env streams"): two runs on one env whose integer seeds differ by less
than their logged `num_envs` (both logged) are not judged by the curve rule `near_copy`; such pairs get one warning
line in all (the closest pair and the count), the gate gives its verdict, and an unedited copy among them (returns
equal episode for episode far beyond chance, `agree_beyond_chance`) is still refused (exit 2, one error line). Pairs not closer
than num_envs are judged by `near_copy` as before. Documented limit: an edited copy given a seed within num_envs of
its original passes with the warning alone.

Each test is one attack: a plain test where the claim held, a strict xfail ("finding: ...") where it broke. The
first round's six findings are fixed; their tests say "Found and fixed".
"""

import math
import zlib
from pathlib import Path

import numpy as np
import pytest

from cleanrl_utils.rlops_runs import mostly_equal, near_copy
from tests.tools.test_rlops_red_team import as_series, gate, one_line_error, write_run

FAIL_ON = ("--fail-on-regression",)


def stream_runs(
    seeds, num_envs: int, share: float, rng, rounds: int = 40, kind: str = "continuous", variable: bool = False
) -> dict:
    """{seed: series} for runs whose sub-env i of seed s plays stream s + i (`envs.reset(seed=s)`): each episode's
    return owes `share` of its variance to the stream's draw for that episode and the rest to the seed's own noise.

    Fixed-length episodes log sub-envs 0 to num_envs - 1 at each step of 512. With `variable`, every stream's
    episodes have their own lengths (1 to 9 vector steps, drawn from the stream, so two seeds sharing it finish its
    episodes at the same steps), and each vector step logs the sub-envs that finished, in sub-env order: the logging
    order interleaves irregularly. kind "hit or miss" makes each return 1 or 0 (the goal reached 80% of the time)."""
    top = max(seeds) + num_envs + 1
    draws = [np.random.default_rng([7, stream]) for stream in range(top)]
    values = [d.normal(size=rounds * 4) for d in draws]
    lengths = [d.integers(1, 10, size=rounds * 4) for d in draws]
    runs = {}
    for seed in seeds:
        events = []
        for env in range(num_envs):
            stream = seed + env
            ends = np.cumsum(lengths[stream]) if variable else np.arange(1, rounds * 4 + 1)
            for episode, end in enumerate(ends):
                if end > rounds:
                    break
                z = math.sqrt(share) * values[stream][episode] + math.sqrt(1 - share) * rng.normal()
                value = float(z > -0.8416) if kind == "hit or miss" else 100 + 10 * z
                events.append((int(end), env, value))
        events.sort()
        runs[seed] = as_series([v for _, _, v in events], [512 * end for end, _, _ in events])
    return runs


def write_series(root: Path, tag: str, seed, series, num_envs=None, clock=None, sps=None, env_id="A-v1") -> Path:
    """One run; unless `sps` is given, its own SPS reading (honest runs never share a clock: `fingerprint`)."""
    steps, returns = zip(*series)
    if sps is None:
        sps = [900.0 + zlib.crc32(f"{env_id}/{tag}/{seed}".encode()) % 997] * len(steps)
    return write_run(root, env_id, tag, seed, returns, steps=steps, num_envs=num_envs, clock=clock, sps=sps)


def warnings_about_num_envs(err: str) -> list[str]:
    return [line for line in err.splitlines() if "num_envs" in line]


def honest_gate(tmp_path, capsys, base_seeds, new_seeds, num_envs, share, **kind):
    """Baseline and tag, each on its own seeds from one stream model (so no difference), through the gate."""
    root = tmp_path / "runs"
    rng = np.random.default_rng(11)
    for tag, seeds in (("base", base_seeds), ("new", new_seeds)):
        for seed, series in stream_runs(seeds, num_envs, share, rng, **kind).items():
            write_series(root, tag, seed, series, num_envs=num_envs, clock=1.6e9 + 1000 * seed + 7 * len(tag))
    return gate(tmp_path, capsys, "--tags", "new", "base", *FAIL_ON)


# ---------------------------------------------------------------- honest close seeds: one warning, a verdict


@pytest.mark.parametrize(
    ("num_envs", "share", "variable"),
    [(4, 0.5, False), (4, 0.99, False), (8, 0.9, False), (16, 0.99, False), (4, 0.9, True), (8, 0.99, True)],
)
def test_honest_consecutive_seeds_at_other_num_envs_shares_and_episode_lengths_pass_with_one_warning(
    tmp_path, capsys, num_envs, share, variable
):
    """Held: baseline seeds 1-6 and tag seeds 101-106, each side consecutive (every pair within num_envs), with 4, 8
    or 16 sub-envs, shares of variance 0.5 to 0.99, fixed-length episodes or variable-length ones whose logging order
    interleaves irregularly: exit 0 with --fail-on-regression ("no detectable difference"), no error line, and one
    warning line in all naming seeds 1 and 2 and the pairs (12 per side at 4 envs, 15 at 8 and 16). At a share of
    0.9 or more with fixed-length episodes, near_copy alone calls seeds 1 and 2 copies (with variable lengths it
    does not in these draws)."""
    rng = np.random.default_rng(0)
    runs = stream_runs([1, 2], num_envs, share, rng, variable=variable)
    if share >= 0.9 and not variable:
        assert near_copy(runs[1], runs[2])  # what the exemption is for
    code, out, err = honest_gate(tmp_path, capsys, range(1, 7), range(101, 107), num_envs, share, variable=variable)
    assert code == 0, err
    assert "rlops: error" not in err
    assert "no detectable difference" in out
    lines = warnings_about_num_envs(err)
    assert len(lines) == 1, err
    pairs = 2 * sum(0 < b - a < num_envs for a in range(1, 7) for b in range(1, 7))
    assert f"seeds 1 (base) and 2 (base) on A-v1 are closer than their num_envs ({num_envs}), {pairs} pairs" in lines[0]


def test_seeds_three_apart_with_four_envs_share_one_stream_and_are_warned_about(tmp_path, capsys):
    """Held: baseline seeds 1, 4, 7, ... and tag seeds 101, 104, ... (3 apart, 4 envs: one shared stream per
    neighbour) at a 0.99 share: exit 0, one warning naming seeds 1 and 4 and the 10 pairs."""
    code, out, err = honest_gate(tmp_path, capsys, range(1, 19, 3), range(101, 119, 3), 4, 0.99)
    assert code == 0, err
    lines = warnings_about_num_envs(err)
    assert len(lines) == 1 and "seeds 1 (base) and 4 (base)" in lines[0] and "10 pairs" in lines[0], err


def test_seeds_close_across_the_tag_and_the_baseline_pass_with_one_warning(tmp_path, capsys):
    """Held: baseline seeds 1, 5, ..., 21 and tag seeds 2, 6, ..., 22 (4 envs, share 0.9): every tag seed shares
    three streams with one baseline seed and one with the next; exit 0, one warning naming 1 (base) and 2 (new) and
    11 pairs (6 one apart, 5 three apart)."""
    code, out, err = honest_gate(tmp_path, capsys, range(1, 25, 4), range(2, 26, 4), 4, 0.9)
    assert code == 0, err
    lines = warnings_about_num_envs(err)
    assert len(lines) == 1 and "seeds 1 (base) and 2 (new)" in lines[0] and "11 pairs" in lines[0], err


def test_many_envs_and_tags_with_close_seeds_still_give_one_warning_line(tmp_path, capsys):
    """Held: two envs, two tags and the baseline, every side on consecutive seeds (4 envs, share 0.9): exit 0 and
    exactly one num_envs warning line for the whole run, naming the lowest closest pair and each close pair once (72)."""
    root = tmp_path / "runs"
    rng = np.random.default_rng(5)
    for env_id in ("A-v1", "B-v1"):
        for tag, first in (("base", 1), ("one", 101), ("two", 201)):
            for seed, series in stream_runs(range(first, first + 6), 4, 0.9, rng).items():
                write_series(root, tag, seed, series, num_envs=4, clock=1.6e9 + 1000 * seed + len(env_id), env_id=env_id)
    code, out, err = gate(tmp_path, capsys, "--tags", "one", "two", "base")
    assert code == 0, err  # inconclusive (6 seeds in a Holm family of 6), so no --fail-on-regression here
    lines = warnings_about_num_envs(err)
    assert len(lines) == 1 and "seeds 1 (base) and 2 (base) on A-v1" in lines[0], err
    assert "72 pairs" in lines[0]  # 12 per side (6 seeds 1 apart, 4 envs): 2 envs x 3 sides x 12


def test_the_warning_counts_a_baseline_pair_once_when_two_tags_are_compared(tmp_path, capsys):
    """Found and fixed: tags 'one' (seeds 101, 105, ...) and 'two' (201, 205, ...) against a baseline on 1, 2, 9, 13,
    17, 21 (4 envs): seeds 1 and 2, the one close pair, were counted once per comparison ('2 pairs')."""
    root = tmp_path / "runs"
    rng = np.random.default_rng(6)
    sides = (("base", [1, 2, 9, 13, 17, 21]), ("one", range(101, 125, 4)), ("two", range(201, 225, 4)))
    for tag, seeds in sides:
        for seed, series in stream_runs(seeds, 4, 0.9, rng).items():
            write_series(root, tag, seed, series, num_envs=4, clock=1.6e9 + 1000 * seed)
    code, out, err = gate(tmp_path, capsys, "--tags", "one", "two", "base")
    lines = warnings_about_num_envs(err)
    assert code == 0 and len(lines) == 1, err
    assert "1 pair of seeds in all" in lines[0], lines[0]


def test_honest_close_seeds_with_hit_or_miss_returns_are_not_refused(tmp_path, capsys):
    """Found and fixed: baseline seeds 1-6 and tag seeds 101-106, 8 envs, every episode a goal reached (1) or not (0),
    90% of its variance from the sub-env stream: honest seeds agreeing at 68% of episodes by chance were judged by the
    curve rule and refused (8 of 10 pairs at 4 envs); the rule now weighs agreement in step against chance."""
    rng = np.random.default_rng(1)
    runs = stream_runs([1, 2], 8, 0.9, rng, kind="hit or miss")
    assert mostly_equal(runs[1], runs[2])  # the escape hatch for unedited copies opens for honest seeds
    code, out, err = honest_gate(tmp_path, capsys, range(1, 7), range(101, 107), 8, 0.9, kind="hit or miss")
    assert "rise and fall together" not in err, err  # here: base seeds 3 and 4 called copies
    assert code == 0, err


# ---------------------------------------------------------------- copies among close seeds


def copy_gate(
    tmp_path, capsys, copy_seed, num_envs=4, edit=None, same_clock=False, copy_tag="base", copy_num_envs=None, logged=None
):
    """Honest baseline seeds 1, 5, ..., 21 and tag seeds 101, 105, ... (4 envs apart: none close), plus a copy of
    baseline seed 1's run under `copy_tag` and `copy_seed` (its returns edited by `edit`), with the original's clock
    or another one. Every run logs `logged` as its num_envs (default: `num_envs`, the sub-envs simulated)."""
    logged = num_envs if logged is None else logged
    root = tmp_path / "runs"
    rng = np.random.default_rng(3)
    original = None
    for tag, seeds in (("base", range(1, 25, 4)), ("new", range(101, 125, 4))):
        for seed, series in stream_runs(seeds, num_envs, 0.5, rng).items():
            write_series(root, tag, seed, series, num_envs=logged, clock=1.6e9 + 1000 * seed, sps=[900.0 + seed] * 160)
            if tag == "base" and seed == 1:
                original = series
    steps, values = map(np.array, zip(*original))
    if edit == "scaled by 1.001":
        values = values * 1.001
    elif edit == "1% noise":
        values = values * (1 + 0.01 * np.random.default_rng(9).normal(size=values.size))
    elif edit == "last episode dropped":
        steps, values = steps[:-1], values[:-1]
    clock, sps = (1.6e9 + 1000, [901.0] * 160) if same_clock else (1.7e9, None)
    write_series(
        root,
        copy_tag,
        copy_seed,
        as_series(values, steps),
        num_envs=logged if copy_num_envs is None else copy_num_envs,
        clock=clock,
        sps=sps[: len(steps)] if sps else None,
    )
    return gate(tmp_path, capsys, "--tags", "new", "base", *FAIL_ON)


@pytest.mark.parametrize(("copy_tag", "copy_seed"), [("base", 2), ("base", 4), ("new", 3)])
def test_an_unedited_copy_given_a_close_seed_is_refused_in_one_line(tmp_path, capsys, copy_tag, copy_seed):
    """Held: baseline seed 1's returns written again (another clock) as seed 2 or 4 of the baseline or seed 3 of
    the tag, 4 envs: exit 2, one error line naming copies and the copy's folder, no warning printed before it."""
    code, out, err = copy_gate(tmp_path, capsys, copy_seed, copy_tag=copy_tag)
    assert code == 2, err
    line = one_line_error(err)
    assert "copies of one run" in line and f"__{copy_seed}__" in line, line


def test_an_unedited_copy_given_a_close_seed_and_the_same_clock_is_refused(tmp_path, capsys):
    """Held: baseline seed 1's files (steps, SPS values, runtime and returns) relabelled seed 2: the clock rule
    (`fingerprint`) refuses it in one line, exit 2."""
    code, out, err = copy_gate(tmp_path, capsys, 2, same_clock=True)
    assert code == 2, err
    assert "same charts/SPS values" in one_line_error(err)


def test_an_unedited_copy_within_sixteen_envs_is_refused(tmp_path, capsys):
    """Held: with 16 envs, baseline seed 1's returns under seed 16 (15 apart) are refused, exit 2."""
    code, out, err = copy_gate(tmp_path, capsys, 16, num_envs=16)
    assert code == 2 and "copies of one run" in one_line_error(err), err


@pytest.mark.parametrize("edit", ["scaled by 1.001", "1% noise"])
def test_an_edited_copy_given_a_close_seed_passes_with_the_warning_as_documented(tmp_path, capsys, edit):
    """Held as documented (the limit the page states): baseline seed 1's returns scaled by 1.001 or with 1% noise,
    under seed 2, pass (exit 0) with the one warning line naming seeds 1 and 2 (2 pairs: seed 2 is within 4 of seeds 1
    and 5); the curve rule alone would refuse."""
    code, out, err = copy_gate(tmp_path, capsys, 2, edit=edit)
    assert code == 0, err
    lines = warnings_about_num_envs(err)
    assert len(lines) == 1 and "seeds 1 (base) and 2 (base)" in lines[0] and "2 pairs of" in lines[0], err


def test_an_edited_copy_with_the_same_clock_and_a_close_seed_passes_with_the_warning(tmp_path, capsys):
    """Held as documented, and worth knowing: baseline seed 1's run with its steps, SPS values and runtime kept and
    every return scaled by 1.001, under seed 2, passes (exit 0) with the warning alone: the clock rule refuses only
    when the returns are mostly equal, and the curve rule is off for close seeds."""
    code, out, err = copy_gate(tmp_path, capsys, 2, edit="scaled by 1.001", same_clock=True)
    assert code == 0, err
    assert len(warnings_about_num_envs(err)) == 1


def test_a_copy_with_every_return_kept_but_its_last_episode_dropped_is_refused(tmp_path, capsys):
    """Found and fixed: baseline seed 1's 160 returns, unedited, less the last one, under seed 2 (4 envs), passed
    with the warning alone (the rule needed equal lengths); it now compares the runs' common first episodes."""
    code, out, err = copy_gate(tmp_path, capsys, 2, edit="last episode dropped")
    assert len(warnings_about_num_envs(err)) <= 1, err
    assert code == 2, err


# ---------------------------------------------------------------- pairs not closer than num_envs: near_copy as before


@pytest.mark.parametrize(
    ("copy_seed", "num_envs", "copy_num_envs"),
    [(5, 4, None), (3, 4, "absent"), (2, 4, "0"), (2, 1, None)],
    ids=["seed 5 with 4 envs", "num_envs not logged by the copy", "num_envs 0", "num_envs 1"],
)
def test_edited_copies_not_closer_than_num_envs_are_refused(tmp_path, capsys, copy_seed, num_envs, copy_num_envs):
    """Held: baseline seed 1's returns scaled by 1.001 under seed 5 (4 envs: not close), under seed 3 by a run that
    logged no num_envs, under seed 2 with num_envs logged as 0 (read as not logged) or 1 (seed s is stream s alone):
    near_copy judges them and refuses, exit 2, one error line, no seed-spacing warning."""
    given = {None: None, "absent": "", "0": "0"}[copy_num_envs]
    code, out, err = copy_gate(tmp_path, capsys, copy_seed, num_envs=num_envs, edit="scaled by 1.001", copy_num_envs=given)
    assert code == 2, err
    assert "rise and fall together" in one_line_error(err)
    assert warnings_about_num_envs(err) == []


def test_honest_seeds_num_envs_apart_are_never_called_copies(tmp_path, capsys):
    """Held: at a 0.99 share, seeds 1, 5, 9, ... (4 envs) and 1, 9, 17, ... (8 envs) share no stream: near_copy
    calls no pair of 6 copies, and the gate (baseline 1-21 by 4, tag 101-121 by 4) exits 0 with no warning."""
    rng = np.random.default_rng(2)
    for num_envs in (4, 8):
        runs = list(stream_runs(range(1, 6 * num_envs, num_envs), num_envs, 0.99, rng).values())
        assert not any(near_copy(a, b) for i, a in enumerate(runs) for b in runs[i + 1 :])
    code, out, err = honest_gate(tmp_path, capsys, range(1, 25, 4), range(101, 125, 4), 4, 0.99)
    assert code == 0 and warnings_about_num_envs(err) == [], err


def test_honest_close_seeds_when_one_run_logged_no_num_envs_are_judged_as_copies(tmp_path, capsys):
    """Held as specified (both runs must log num_envs), with a cost worth knowing: baseline seeds 1-6 on 4 envs at a
    0.9 share where seed 2 alone logged no num_envs: the pair (1, 2) is judged by near_copy and refused, exit 2."""
    root = tmp_path / "runs"
    rng = np.random.default_rng(11)
    for tag, seeds in (("base", range(1, 7)), ("new", range(101, 125, 4))):
        for seed, series in stream_runs(seeds, 4, 0.9, rng).items():
            write_series(root, tag, seed, series, num_envs=None if seed == 2 else 4, clock=1.6e9 + 1000 * seed)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", *FAIL_ON)
    assert code == 2 and "rise and fall together" in one_line_error(err), err


# ---------------------------------------------------------------- what num_envs and seeds can be


def test_a_huge_logged_num_envs_turns_the_curve_rule_off_for_every_pair(tmp_path, capsys):
    """Held as the claim states it (closeness is whatever num_envs the runs logged), and worth knowing: runs that log
    num_envs 1000000 exempt every pair of seeds from the curve rule, so baseline seed 1's returns scaled by 1.001
    under seed 500 pass, exit 0, with the one warning (which then advises --seed-stride 1000000)."""
    code, out, err = copy_gate(tmp_path, capsys, 500, logged=10**6, edit="scaled by 1.001")
    assert code == 0, err
    lines = warnings_about_num_envs(err)
    assert len(lines) == 1 and "--seed-stride 1000000" in lines[0], err


def test_num_envs_logged_as_a_float_still_exempts_close_seeds(tmp_path, capsys):
    """Found and fixed: baseline seeds 1-6 and tag seeds 101-106 on 4 envs at a 0.9 share, every run logging num_envs
    4.0, read as not logged, so the seeds were refused as copies."""
    root = tmp_path / "runs"
    rng = np.random.default_rng(11)
    for tag, seeds in (("base", range(1, 7)), ("new", range(101, 107))):
        for seed, series in stream_runs(seeds, 4, 0.9, rng).items():
            write_series(root, tag, seed, series, num_envs="4.0", clock=1.6e9 + 1000 * seed)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", *FAIL_ON)
    assert "rise and fall together" not in err, err  # here: tag seeds 102 and 103 called copies
    assert code == 0, err


def test_non_numeric_seeds_are_not_exempted_and_edited_copies_among_them_are_refused(tmp_path, capsys):
    """Held: seeds 'a1'..'a6' (not numbers, 4 envs logged): no seed-spacing warning, and an edited copy (x1.001) of
    'a1' under 'a2' is refused by near_copy, exit 2."""
    root = tmp_path / "runs"
    rng = np.random.default_rng(8)
    for tag, first in (("base", 1), ("new", 101)):
        for seed, series in stream_runs(range(first, first + 24, 4), 4, 0.5, rng).items():
            write_series(root, tag, f"a{seed}", series, num_envs=4, clock=1.6e9 + 1000 * seed)
            if seed == 1:
                steps, values = zip(*series)
                copy = as_series(np.array(values) * 1.001, steps)
                write_series(root, "base", "a2", copy, num_envs=4, clock=1.7e9)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", *FAIL_ON)
    assert code == 2 and "rise and fall together" in one_line_error(err), err
    assert warnings_about_num_envs(err) == []


def test_a_superscript_digit_seed_is_one_line_or_a_verdict_not_a_traceback(tmp_path, capsys):
    """Found and fixed: baseline seeds '²', 5, 9, 13, 17, 21 and tag seeds 101, ..., 121, every run logging num_envs 4:
    str.isdigit() took '²' and int() did not (a ValueError traceback)."""
    root = tmp_path / "runs"
    rng = np.random.default_rng(8)
    for tag, first in (("base", 1), ("new", 101)):
        for seed, series in stream_runs(range(first, first + 24, 4), 4, 0.5, rng).items():
            write_series(root, tag, "²" if seed == 1 else seed, series, num_envs=4, clock=1.6e9 + 1000 * seed)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", *FAIL_ON)
    assert isinstance(code, int), code


def test_an_edited_copy_across_two_tags_with_a_close_seed_is_warned_about_or_refused(tmp_path, capsys):
    """Found and fixed: three tags ('one', 'two', baseline 'base'), all on seeds num_envs (4) apart within each side;
    tag 'two' seed 102 is tag 'one' seed 101's returns scaled by 1.001 (another clock): passed with no warning, as
    the warning covered only a tag and its baseline; it now covers every pair on an env."""
    root = tmp_path / "runs"
    rng = np.random.default_rng(10)
    for tag, first in (("base", 1), ("one", 101), ("two", 202)):
        for seed, series in stream_runs(range(first, first + 24, 4), 4, 0.5, rng).items():
            if tag == "two" and seed == 202:
                continue
            write_series(root, tag, seed, series, num_envs=4, clock=1.6e9 + 1000 * seed)
            if tag == "one" and seed == 101:
                steps, values = zip(*series)
                write_series(root, "two", 102, as_series(np.array(values) * 1.001, steps), num_envs=4, clock=1.7e9)
    code, out, err = gate(tmp_path, capsys, "--tags", "one", "two", "base")
    assert code == 2 or len(warnings_about_num_envs(err)) == 1, (code, err)


# ---------------------------------------------------------------- round 2 (commit 1d8a53f): `agree_beyond_chance`


def close_pairs_refused(make, num_envs: int, pairs: int = 20) -> int:
    """How many of `pairs` honest pairs (two independent draws of `make(rng)`) `agree_beyond_chance` calls copies."""
    from cleanrl_utils.rlops_runs import agree_beyond_chance

    rng = np.random.default_rng(21)
    return sum(agree_beyond_chance(make(rng), make(rng), num_envs) for _ in range(pairs))


def copies_missed(make, num_envs: int = 4, pairs: int = 20) -> int:
    """How many of `pairs` unedited copies (a draw of `make(rng)` beside itself) `agree_beyond_chance` lets pass."""
    from cleanrl_utils.rlops_runs import agree_beyond_chance

    rng = np.random.default_rng(22)
    return sum(not agree_beyond_chance(run := make(rng), list(run), num_envs) for _ in range(pairs))


def honest_close_gate(tmp_path, capsys, make, num_envs: int = 4):
    """Baseline seeds 1-6 and tag seeds 101-106 (each side consecutive: every pair close), one draw of `make` each."""
    root = tmp_path / "runs"
    rng = np.random.default_rng(23)
    for tag, first in (("base", 1), ("new", 101)):
        for seed in range(first, first + 6):
            write_series(root, tag, seed, make(rng), num_envs=num_envs, clock=1.6e9 + 1000 * seed)
    return gate(tmp_path, capsys, "--tags", "new", "base")


def copy_close_gate(tmp_path, capsys, make, num_envs: int = 4):
    """Honest baseline seeds 1, 5, ..., 21 and tag seeds 101, 105, ... (none close), each a draw of `make`, plus
    baseline seed 1's returns, unedited, under seed 2 with another clock: close to seeds 1 and 5."""
    root = tmp_path / "runs"
    rng = np.random.default_rng(24)
    for tag, first in (("base", 1), ("new", 101)):
        for seed in range(first, first + 24, 4):
            series = make(rng)
            write_series(root, tag, seed, series, num_envs=num_envs, clock=1.6e9 + 1000 * seed)
            if seed == 1:
                write_series(root, tag, 2, series, num_envs=num_envs, clock=1.7e9)
    return gate(tmp_path, capsys, "--tags", "new", "base")


def levels_in_turn(rng, period: int = 16, episodes: int = 60) -> list[tuple[int, float]]:
    """Round 3's honest model (tests/tools/test_rlops_red_team.py): a learned deterministic env handing out a fixed
    list of `period` levels in turn (MiniGrid's ReseedWrapper, Procgen's sequential levels), each level's return fixed
    by its shortest path, 5% of episodes failed (0); every seed meets level i at episode i mod period, whatever its
    seed, so seeds close or not are in step."""
    level_returns = np.linspace(0.3, 0.95, period)[np.random.default_rng(period).permutation(period)]
    values = np.resize(level_returns, episodes)
    values[rng.random(episodes) < 0.05] = 0.0
    return as_series(values)


def test_close_seeds_of_levels_handed_out_in_turn_are_not_called_copies(tmp_path, capsys):
    assert not near_copy(levels_in_turn(np.random.default_rng(1)), levels_in_turn(np.random.default_rng(2)))
    refused = close_pairs_refused(levels_in_turn, 4)
    code, out, err = honest_close_gate(tmp_path, capsys, levels_in_turn)
    assert refused == 0 and code == 0, (refused, code, err)


def test_neighbouring_seeds_on_deterministic_levels_of_variable_length_are_not_called_copies():
    from cleanrl_utils.rlops_runs import agree_beyond_chance

    refused = 0
    for draw in range(20):
        rng = np.random.default_rng(100 + draw)
        runs = stream_runs([1 + 20 * draw, 2 + 20 * draw], 8, 1.0, rng, rounds=100, variable=True)
        refused += agree_beyond_chance(runs[1 + 20 * draw], runs[2 + 20 * draw], 8)
    assert refused == 0, f"{refused} of 20 pairs of honest neighbouring seeds called copies"


def eval_every(k: int, episodes: int = 1000):
    """Found and fixed (chance now counts each run's agreement with itself at any lag, and a copy must agree at
    most episodes). Found and fixed (chance now counts each run's agreement with itself at any lag, and a copy must agree at
    most episodes). Every k-th logged episode is a deterministic evaluation at CartPole's cap (500); the others train below it
    (whole numbers around 300)."""

    def make(rng):
        values = np.clip(np.round(300 + 50 * rng.normal(size=episodes)), 0, 499)
        values[::k] = 500.0
        return as_series(values)

    return make


@pytest.mark.parametrize("k", [5, 20])
def test_close_seeds_with_a_periodic_deterministic_evaluation_are_not_called_copies(k):
    refused = close_pairs_refused(eval_every(k), 4)
    assert refused == 0, f"{refused} of 20 pairs of honest close seeds called copies"


def discrete_kind(kind: str, episodes: int):
    def make(rng):
        n = episodes
        if kind == "0/1 learning from 0% to 100% hits":
            return as_series((rng.random(n) < np.clip(np.linspace(-0.2, 1.2, n), 0, 1)).astype(float))
        if kind == "0/1 learning in a sharp step at mid-run":
            return as_series((rng.random(n) < 1 / (1 + np.exp(-(np.arange(n) - n / 2)))).astype(float))
        if kind == "CartPole learning to the cap":
            return as_series(np.clip(np.round(20 + 600 * np.linspace(0, 1, n) + 100 * rng.normal(size=n)), 8, 500))
        if kind == "Atari scores in tens":
            trend = 300 + 2000 * np.linspace(0, 1, n)
            return as_series(np.round(np.exp(np.log(trend) + 0.6 * rng.normal(size=n)) / 10) * 10)
        solved = rng.random(n) < np.linspace(0, 0.6, n)  # MountainCar: -200 until solved, then -100 to -160
        return as_series(np.where(solved, -rng.integers(100, 160, size=n), -200).astype(float))

    return make


@pytest.mark.parametrize("num_envs", [4, 16])
@pytest.mark.parametrize("episodes", [12, 30, 300, 3000])
@pytest.mark.parametrize(
    "kind",
    [
        "0/1 learning from 0% to 100% hits",
        "0/1 learning in a sharp step at mid-run",
        "CartPole learning to the cap",
        "Atari scores in tens",
        "MountainCar mostly -200",
    ],
)
def test_close_seeds_of_discrete_returns_that_change_over_time_are_not_called_copies(kind, episodes, num_envs):
    """Found and fixed (chance now counts each run's agreement with itself at any lag, and a copy must agree at
    most episodes). Held: 0 of 20 honest pairs of each kind called copies, at 12, 30, 300 and 3000 episodes, 4 or 16 envs (lags
    capped at a quarter of the run for the short ones): the in-step excess of a shared trend (p_t - p_t+L)^2 is small
    beside the lagged rate, even for a 0/1 step from 0 to 1 at one episode."""
    assert close_pairs_refused(discrete_kind(kind, episodes), num_envs) == 0


def hit_or_miss(episodes: int, hits: float):
    return lambda rng: as_series((rng.random(episodes) < hits).astype(float))


def capped_with_dips(episodes: int, dips: float):
    def make(rng):
        values = np.full(episodes, 500.0)
        dipped = rng.random(episodes) < dips
        values[dipped] = rng.integers(9, 500, size=int(dipped.sum()))
        return as_series(values, np.cumsum(values).astype(int))

    return make


@pytest.mark.xfail(
    strict=True,
    reason="limitation (stated on the RLops page): an unedited copy of a 160-episode 0/1 run at 90% hits, given a close seed, passes: in-step "
    "agreement 1.0 against the chance rate 0.82 gives a bound of exp(-160/3 ln(1/0.82)) = 2e-5; 20 of 20 such copies "
    "missed (7/20 at 80% hits, 13/20 still missed at 300 episodes, 90%), where near_copy (seeds not close) misses 0/20; "
    "the gate exits 0 with the warning alone",
)
def test_an_unedited_copy_of_a_hit_or_miss_run_given_a_close_seed_is_refused(tmp_path, capsys):
    missed = copies_missed(hit_or_miss(160, 0.9))
    code, out, err = copy_close_gate(tmp_path, capsys, hit_or_miss(160, 0.9))
    assert missed == 0 and code == 2, (missed, code, err)


@pytest.mark.xfail(
    strict=True,
    reason="limitation (stated on the RLops page): an unedited copy of a CartPole run at the cap with 5% dips (160 episodes), given a close seed, "
    "passes: every dip agrees in step (none at lags 5-14), but the rule pools them with the cap's agreement; 20 of "
    "20 missed (near_copy: 7/20), 20/20 at 3% dips over 400 episodes, 14/20 over 1000; MountainCar at -200 with 10% "
    "solved: 20/20 missed at 160 episodes",
)
def test_an_unedited_copy_of_a_run_mostly_at_the_cap_given_a_close_seed_is_refused(tmp_path, capsys):
    missed = copies_missed(capped_with_dips(160, 0.05))
    code, out, err = copy_close_gate(tmp_path, capsys, capped_with_dips(160, 0.05))
    assert missed == 0 and code == 2, (missed, code, err)


@pytest.mark.xfail(
    strict=True,
    reason="limitation (stated on the RLops page): unedited copies of continuous runs of 10 to 13 episodes (at least COPY_MIN_VALUES) given a close "
    "seed pass: chance is 1/(compared+1) over so few lags that the bound stays above 1e-9 (12 episodes: 4e-8); 20 of "
    "20 missed at each length, 2/20 at 14, 0/20 from 15; near_copy (seeds not close) misses them too, up to 18, as the "
    "page says for runs of about a dozen episodes, but the close-seeds section promises every unedited copy",
)
@pytest.mark.parametrize("episodes", [10, 13])
def test_an_unedited_copy_of_a_short_run_given_a_close_seed_is_refused(episodes):
    assert copies_missed(lambda rng: as_series(100 + 10 * rng.normal(size=episodes))) == 0


def test_an_unedited_copy_of_a_short_continuous_run_from_fifteen_episodes_is_refused():
    """Held: unedited copies of 15-, 20- and 30-episode continuous runs, close seed, 4 or 16 envs: 0 of 20 missed."""
    for episodes in (15, 20, 30):
        for num_envs in (4, 16):
            assert copies_missed(lambda rng, n=episodes: as_series(100 + 10 * rng.normal(size=n)), num_envs) == 0


def test_copies_with_nans_flat_copies_and_copies_cut_at_their_start_are_judged_as_documented():
    """Held: a flat run's copy (all 500) is not called a copy, as documented (the clock rule's); a copy cut by one
    episode at its start is not (documented as edited). (A NaN return never reaches the rule: the gate refuses
    non-finite metric values first, `test_a_non_finite_metric_value_is_one_line_and_exit_2`.)"""
    from cleanrl_utils.rlops_runs import agree_beyond_chance

    rng = np.random.default_rng(25)
    assert not agree_beyond_chance(as_series([500.0] * 200), as_series([500.0] * 200), 4)
    run = as_series(100 + 10 * rng.normal(size=160))
    assert not agree_beyond_chance(run, run[1:], 4)


@pytest.mark.parametrize(
    ("seeds_and_envs", "close"),
    [
        (((1, 1), (2, 4)), False),  # streams {1} and {2..5}
        (((2, 1), (1, 4)), True),  # {2} within {1..4}
        (((1, 4), (5, 4)), False),  # {1..4} and {5..8}: spaced by num_envs
        (((1, 4), (4, 2)), True),
        (((3, 8), (3, 8)), False),  # one seed: two tags' runs of it are compared as such, not as neighbours
    ],
)
def test_close_means_sharing_a_stream_not_a_seed_gap_under_the_larger_num_envs(seeds_and_envs, close):
    """Found and fixed (round 2's last idea): seed 1 with 1 env and seed 2 with 4 envs were called close (the gap
    under the larger num_envs) though their streams {1} and {2..5} do not meet, which also turned the curve rule off."""
    from cleanrl_utils.report import Run
    from cleanrl_utils.rlops_runs import share_sub_env_streams

    first, second = (
        Run(Path(f"r{seed}"), "A-v1", "ppo", str(seed), "base", {}, None, num_envs=envs) for seed, envs in seeds_and_envs
    )
    assert share_sub_env_streams(first, second) is close and share_sub_env_streams(second, first) is close
