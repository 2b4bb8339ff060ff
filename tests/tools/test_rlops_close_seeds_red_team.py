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
