"""Red-team checks of the RLops gate's claims (docs/get-started/rlops.md, cleanrl_utils/rlops.py, rlstats.py).

Each test is one attack. An attack the code withstands is a plain test, so the claim stays defended; an attack that
breaks a claim is marked `xfail(strict=True)` with the finding as its reason until the fix removes the mark. Every
finding of the first round is fixed (issue 52's follow-up), so no mark is left:

1. The false-alarm rate stays at most alpha for any pair of score distributions with P(X > Y) = 1/2: with runs
   independent (exact enumeration and simulation below), with one seed's luck shared by its runs on every env (the
   benchmark runner runs the same seeds on every env), and with a tag's seed paired with the baseline's.
2. The unit of evidence is (tag, env, seed): symlinks, path spellings and overlapping --runs-dir count a run once;
   a copy given another seed is refused, exact or with a few returns edited.
3. Every input error is one line and exit 2; a run that cannot be read is named; crashed seeds do not pass the gate.

A second round tried the seed as the unit (issue 52's follow-up). Held: partly shared seed numbers, unequal seeds
per env, three tags on the baseline's seeds, 0/1 ties (at most 0.75% false alarms), CartPole-like seeds all at the
cap, the fewest-seeds figures of the docs, the printed detectable shift, three more bad inputs. Broke, and fixed
since (no mark is left):

- crashed W&B runs passed the gate: they now count as left out, named (at best exit 3);
- a seed missing on one env was dropped silently: one warning line names it, and it counts as left out;
- a copy with its SPS values, its length or every return (x1.001) edited counted as a new seed: copies are now found
  by their curves' fluctuations (`rlops_runs.near_copy`), red-teamed against false refusals by a simulation of 14
  kinds of independent seeds kept below, and found under four edits;
- the printed shift could be below the one found (3.635 as 3.6): it is rounded up;
- consecutive seeds share env streams (`envs.reset(seed=s)` seeds sub-env i with s + i; 11.5% false alarms in an
  extreme model): the scripts stay as they are, so this stays a limitation; the tests below keep the fact and the
  measurement, and the gate now names seeds closer than num_envs in one warning line.

A third round attacked those fixes. Held (plain tests): W&B states the gate does not know ('preempted', 'pending',
'', None, 'finishing') and a W&B run marked finished that stopped half way are left out (exit 3); num_envs only in
the W&B config, as a number or a string, is read; a baseline seed missing on an env is named (exit 3); bad flags are
one line, exit 2, with none of numpy, matplotlib, torch or TensorBoard loaded; no two independent seeds called copies
in long runs (0/1 episodes, Atari-like counts, CartPole at the cap, Pong-like integers: 5,000 to 10,000 episodes),
in levels drawn at random, or in 8 sub-envs of fixed-length episodes logged at one step; copies of 300-episode runs
found when re-logged at other steps, with episodes cut (first, every other, one in the middle and steps moved), 1%
noise or rounded. Broke:

- honest seeds that learned an env handing out a fixed list of levels in turn (MiniGrid's ReseedWrapper, Procgen's
  sequential levels) were called copies, 50 of 50 pairs at periods 5 and 16, and 7 vs 7 such seeds exited 2: their
  returns repeat level by level in step. Fixed: the chance rate is raised to the most each run agrees with itself at
  one lag (the cycle); left as strict xfails: a cycle longer than half the run, and copies of short cycling runs;
- copies missed, 0 of 20 each on 30-episode runs: the first episode cut and every step moved by one (each edit alone
  is found; end to end, 5 vs 7 seeds at exit 3 become a regression, exit 1), a run's second half re-logged from the
  start (its score is the original's), 1% noise on every return, a two-episode moving average. Fixed: runs are lined
  up at their ends too, and continuous runs' fluctuations are compared by correlation (round 4 below);
- the baseline's run files copied under the tag on their own seed numbers (same steps, SPS, runtime) passed: 13 seeds,
  exit 0. Fixed: an exact clock match is refused under two tags too;
- a flag given no value (`--runs-dir`, `--exp-name`, `--env-ids` with an unset variable) passed the flag check and
  loaded numpy; an empty `--runs-dir` or `--runs-dir ''` compared ./runs or the whole current folder and exited 0.
  Fixed: refused in the flag check, one line, exit 2.

A fourth round built the correlation rule for noisy and smoothed copies and attacked it while it was built: heavy
tails, falls, noise correlated from episode to episode and continuous cycles of levels; what broke it is kept below
as plain tests, held since.
"""

import itertools
import math
import random
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from cleanrl_utils import rlops, rlstats

ALPHA = 0.05


def within_alpha(rate: float, trials: int) -> bool:
    """At most alpha + 2 standard errors: the calibration study's criterion."""
    return rate <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / trials)


def gate_flags(scores: dict[str, list[np.ndarray]], baseline: str) -> bool:
    """Whether the gate (rlops.compare, the family the CLI uses) calls any test of any tag different. Every group
    runs its own seed numbers (run i of a group is the same seed on every env), so the groups are independent and the
    test can use every seed (by default run i of every group would be one seed, and half the seeds would count)."""
    seeds = {tag: [[f"{tag}{i}" for i in range(len(a))] for a in per_env] for tag, per_env in scores.items()}
    verdicts = rlops.compare(scores, baseline, reps=10, confidence=1 - ALPHA, seed=0, seeds=seeds)
    return any(t.label in ("regression", "improvement") for v in verdicts for t in [v.overall, *v.per_env])


# ---------------------------------------------------------------- claim 1, held: independent runs, exact and simulated


def compositions(n: int, k: int):
    """Every way of splitting n runs among k score levels (counts per level)."""
    for cut in itertools.combinations(range(n + k - 1), k - 1):
        bounds = (-1, *cut, n + k - 1)
        yield [bounds[i + 1] - bounds[i] - 1 for i in range(k)]


def exact_false_alarm(levels_x, px, levels_y, py, n_x: int, n_y: int) -> float:
    """P(p <= alpha) of `rlstats.improvement_p_value` for n_x runs on levels_x (chances px) against n_y on levels_y,
    by listing every outcome (the p depends on the counts per level only)."""

    def law(levels, chances, n):
        for counts in compositions(n, len(levels)):
            chance = math.factorial(n) * math.prod(q**c / math.factorial(c) for q, c in zip(chances, counts))
            if chance > 0:
                yield np.repeat(np.asarray(levels, dtype=float), counts), chance

    ys = list(law(levels_y, py, n_y))
    total = 0.0
    # independent runs: no seed number shared by the two groups (by default run i of each would be one seed)
    x_seeds, y_seeds = [list(range(n_x))], [list(range(n_x, n_x + n_y))]
    for x, chance_x in law(levels_x, px, n_x):
        for y, chance_y in ys:
            if rlstats.improvement_p_value([x], [y], x_seeds, y_seeds) <= ALPHA:
                total += chance_x * chance_y
    return total


# (levels and chances of the tag's runs, the baseline's), each with P(X > Y) + P(X = Y) / 2 = 1/2 exactly
EXACT_NULLS = {
    # one tag constant, the other a symmetric two-point spread around it: the PoI is a mean of fair coins
    "constant against a two-point spread": ([1.0], [1.0], [0.0, 2.0], [0.5, 0.5]),
    "a two-point spread against a constant": ([0.0, 2.0], [0.5, 0.5], [1.0], [1.0]),
    # a three-way lottery with a tie level: 0 / 1.5 / 3 against 1 (p .8) or 2: .5 * .8 + .1 = .5
    "three-way lottery against a skewed two-point": ([0.0, 1.5, 3.0], [0.4, 0.5, 0.1], [1.0, 2.0], [0.8, 0.2]),
    # heavy ties: both fair 0/1, half of all pairs tie
    "fair 0/1 against fair 0/1": ([0.0, 1.0], [0.5, 0.5], [0.0, 1.0], [0.5, 0.5]),
    # the worst a random search over 4-level pairs found at 7 vs 7 (18.6%, above the two-point's 15.6%)
    "searched 4-level pair": ([1.0, 2.0], [0.0163, 0.9837], [0.0, 1.0, 2.0, 3.0], [0.0720, 0.4040, 0.0550, 0.4690]),
}


@pytest.mark.parametrize("null", list(EXACT_NULLS))
@pytest.mark.parametrize(("n_x", "n_y"), [(6, 6), (7, 7), (9, 6), (6, 9)])
def test_exact_false_alarm_rate_of_discrete_nulls_stays_at_alpha(null, n_x, n_y):
    levels_x, px, levels_y, py = EXACT_NULLS[null]
    w = np.array([[1.0 if a > b else 0.5 if a == b else 0.0 for b in levels_y] for a in levels_x])
    assert float(np.asarray(px) @ w @ np.asarray(py)) == pytest.approx(0.5, abs=1e-3)  # a null: PoI 1/2
    chance = exact_false_alarm(levels_x, px, levels_y, py, n_x, n_y)
    # the searched pair's PoI is 1/2 only to 4 digits; the bound's own worst case at 6 to 9 pairs is 3.9%
    assert chance <= ALPHA, chance


def test_many_envs_mixed_seed_counts_and_three_tags_keep_the_false_alarm_rate():
    """10 envs with 5 vs 20, 20 vs 5, 9 vs 9 ... seeds, three tags against one baseline, each env drawing one null:
    a constant tag against a symmetric two-point baseline, the reverse, fair 0/1 ties, or hit-or-miss against normal.
    Independent runs with P(X > Y) = 1/2 on every env: every flag of the gate is a false alarm."""
    rng = np.random.default_rng(52)
    counts = [(5, 20), (20, 5), (9, 9), (9, 9), (12, 7), (7, 12), (9, 9), (20, 20), (5, 5), (9, 13)]
    nulls = [
        (lambda n: np.zeros(n), lambda n: rng.choice([-1.0, 1.0], size=n)),
        (lambda n: rng.choice([-1.0, 1.0], size=n), lambda n: np.zeros(n)),
        (lambda n: rng.integers(0, 2, size=n).astype(float), lambda n: rng.integers(0, 2, size=n).astype(float)),
        (lambda n: rng.choice([-10.0, 10.0], size=n) + rng.normal(size=n), lambda n: rng.normal(size=n)),
    ]
    trials, alarms = 200, 0
    for _ in range(trials):
        kinds = [nulls[k] for k in rng.integers(0, len(nulls), size=len(counts))]
        scores = {f"t{tag}": [draw(n_x) for (n_x, _), (draw, _) in zip(counts, kinds)] for tag in range(3)}
        scores["b"] = [draw(n_y) for (_, n_y), (_, draw) in zip(counts, kinds)]
        alarms += gate_flags(scores, "b")
    assert within_alpha(alarms / trials, trials), alarms / trials


# ---------------------------------------------------------------- claim 1, broken: runs that are not independent


def shared_luck_null(rng, envs: int, seeds: int, kind: str):
    """Each group's seed s has one luck for all its runs, on every env (same seed on every env, as the benchmark runner
    runs them; e.g. the same initial network on games that share an architecture); the groups are independent and every
    env's PoI is 1/2 exactly, so every flag is a false alarm."""
    if kind == "hit-or-miss":  # the seed decides hit or miss everywhere, against normal baseline seeds in between
        luck = rng.choice([-10.0, 10.0], size=seeds)
        return [luck + rng.normal(size=seeds) for _ in range(envs)], [rng.normal(size=seeds) for _ in range(envs)]
    luck_x, luck_y = rng.normal(size=seeds), rng.normal(size=seeds)
    rho = 0.5
    x = [math.sqrt(rho) * luck_x + math.sqrt(1 - rho) * rng.normal(size=seeds) for _ in range(envs)]
    y = [math.sqrt(rho) * luck_y + math.sqrt(1 - rho) * rng.normal(size=seeds) for _ in range(envs)]
    return x, y


@pytest.mark.parametrize("kind", ["hit-or-miss", "normal, correlation 0.5"])
def test_seed_luck_shared_across_envs_keeps_the_false_alarm_rate(kind):
    rng = np.random.default_rng(2026)
    trials, alarms = 300, 0
    for _ in range(trials):
        tag, base = shared_luck_null(rng, envs=10, seeds=9, kind=kind)  # 9 seeds: every test of the gate decidable
        alarms += gate_flags({"new": tag, "base": base}, "base")
    assert within_alpha(alarms / trials, trials), f"{alarms / trials:.1%} false alarms"


@pytest.mark.parametrize("seeds", [6, 14])  # 6: 3 pairs of seeds, never below 0.25; 14: 7, p can reach 2 ** -6
def test_a_tag_seed_paired_against_the_baselines_seed_keeps_the_false_alarm_rate(seeds):
    rng = np.random.default_rng(6)
    trials = 20000
    base = rng.random((trials, seeds))
    tag = 1.0 - base  # the same seed's run, mirrored: P(X > Y') = 1/2 for runs of different seeds
    rate = np.mean([rlstats.improvement_p_value([x], [y]) <= ALPHA for x, y in zip(tag, base)])
    assert within_alpha(rate, trials), f"{rate:.2%} false alarms"


def test_the_detectable_shift_is_found_four_times_in_five():
    # one env, 13 seeds a side, none shared (the draws are independent): label the baseline's seeds 13..25
    design, level = (1, 13, 13, 0), ALPHA / rlops.family_size(1, 5)
    shift = rlops.detectable(design, level)
    rng = np.random.default_rng(13)
    trials = 20000
    x, y = rng.normal(size=(trials, 13)) + shift, rng.normal(size=(trials, 13))
    poi = rlstats.probability_of_improvement(x, y)
    tag_seeds, base_seeds = [list(range(13))], [list(range(13, 26))]
    p = np.array([rlstats.improvement_p_value([a], [b], tag_seeds, base_seeds) for a, b in zip(x, y)])
    found = float(np.mean((p <= level) & (poi > 0.5)))
    assert found >= 0.8 - 2 * math.sqrt(0.8 * 0.2 / trials), f"found {found:.1%} of the time at shift {shift:.3f}"


# ---------------------------------------------------------------- runs written as the scripts write them


def write_run(
    root: Path, env_id: str, tags: str, seed, returns, steps=None, sps=None, clock=None, name=None, num_envs=None
) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    folder = root / (name or f"{env_id}__ppo__{seed}__{tags.replace(',', '+').replace(chr(10), '_') or 'none'}")
    steps = steps if steps is not None else [100 * (i + 1) for i in range(len(returns))]
    stamps = [None if clock is None else clock + i for i in range(len(steps))]
    table = f"|param|value|\n|-|-|\n|env_id|{env_id}|\n|exp_name|ppo|\n|seed|{seed}|"
    with SummaryWriter(str(folder)) as writer:
        writer.add_text("hyperparameters", table + (f"\n|num_envs|{num_envs}|" if num_envs else ""), walltime=clock)
        writer.add_text("tags", tags, walltime=clock)
        for step, value, stamp in zip(steps, returns, stamps):
            writer.add_scalar("charts/episodic_return", value, step, walltime=stamp)
        for step, value, stamp in zip(steps, sps if sps is not None else [1000.0] * len(steps), stamps):
            writer.add_scalar("charts/SPS", value, step, walltime=stamp)
    return folder


def write_group(root: Path, env_id: str, tags: str, seeds, level: float, noise_seed: int = 0) -> None:
    rng = np.random.default_rng([noise_seed, len(tags), int(level) % 1000])
    for seed in seeds:
        final = level + rng.normal()
        write_run(root, env_id, tags, seed, final * np.linspace(0.05, 1, 30) + 0.1 * rng.normal(size=30))


def gate(tmp_path: Path, capsys, *args: str, runs=None) -> tuple[object, str, str]:
    """rlops.main in this process; an exception is what the CLI shows as a traceback with exit code 1."""
    dirs = [str(d) for d in (runs if isinstance(runs, list) else [runs or tmp_path / "runs"])]
    argv = [
        "--runs-dir",
        *dirs,
        "--output-filename",
        str(tmp_path / "out" / "compare"),
        "--exp-name",
        "ppo",
        "--metric-last-n-average-window",
        "5",
        "--bootstrap-samples",
        "200",
        *args,
    ]
    try:
        code = rlops.main(argv)
    except SystemExit as stop:
        code = stop.code
    except Exception as e:  # noqa: BLE001 - the CLI would print a traceback and exit 1
        code = f"traceback: {type(e).__name__}: {e}"
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("rlops: warning:")]
    assert len(lines) == 1 and lines[0].startswith("rlops: error:"), err
    return lines[0]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """7 seeds of `new` and of `base` on A-v1, no difference between them."""
    root = tmp_path / "runs"
    write_group(root, "A-v1", "base", range(1, 8), 100, noise_seed=1)
    write_group(root, "A-v1", "new", range(1, 8), 100, noise_seed=2)
    return root


def seeds_compared(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("| new | A-v1 |")).split("|")[3].strip()


# ---------------------------------------------------------------- claim 2: the unit of evidence


def test_a_run_reached_by_symlink_or_another_spelling_counts_once(tmp_path, capsys, runs):
    (runs / "link_to_seed_3").symlink_to(runs / "A-v1__ppo__3__new", target_is_directory=True)
    alias = tmp_path / "alias"
    alias.symlink_to(runs, target_is_directory=True)
    relative = Path(*[".."] * len(Path.cwd().parts)) / runs.relative_to("/")
    for dirs in ([runs], [runs, runs / "." / "A-v1__ppo__3__new"], [runs, alias], [relative, runs]):
        code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", runs=dirs)
        assert code == 0, err
        assert seeds_compared(out) == "7 vs 7", dirs


def test_an_event_file_linked_into_another_folder_is_refused_naming_both(tmp_path, capsys, runs):
    original = runs / "A-v1__ppo__3__new"
    (runs / "copy").mkdir()
    event = next(original.glob("events.out.tfevents.*"))
    (runs / "copy" / event.name).symlink_to(event)
    code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", runs=runs)
    line = one_line_error(err)
    assert code == 2 and "tag 'new' has 2 runs of seed 3 on A-v1" in line and str(runs / "copy") in line


def test_an_event_file_copied_inside_its_own_folder_counts_once(tmp_path, capsys, runs):
    event = next((runs / "A-v1__ppo__3__new").glob("events.out.tfevents.*"))
    before = gate(tmp_path, capsys, "--tags", "new", "base", runs=runs)[1]
    shutil.copy(event, event.with_name(event.name + ".2"))
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", runs=runs)
    assert code == 0, err
    row = [line for line in out.splitlines() if line.startswith("| new | A-v1 |")]
    assert row == [line for line in before.splitlines() if line.startswith("| new | A-v1 |")]


def near_copy_runs(root: Path, perturb: bool) -> None:
    """base: 7 seeds; new: 5 seeds, all below base, and seed 1 again as `seed 6` (the copy's first return changed by
    0.001 when `perturb`): 5 vs 7 seeds cannot reach alpha, 6 vs 7 can."""
    for seed in range(1, 8):
        write_run(
            root, "A-v1", "base", seed, np.linspace(0, 100, 30) + seed, clock=1.7e9 + 1000 * seed, sps=[900.0 + seed] * 30
        )
    for seed in range(1, 6):
        write_run(root, "A-v1", "new", seed, np.linspace(0, 90, 30) + seed, clock=1.8e9 + 1000 * seed, sps=[800.0 + seed] * 30)
    returns = np.linspace(0, 90, 30) + 1
    returns[0] += 1e-3 if perturb else 0.0
    write_run(root / "copy", "A-v1", "new", 6, returns, clock=1.8e9 + 1000, sps=[801.0] * 30)


def test_an_exact_copy_under_another_seed_is_refused(tmp_path, capsys):
    near_copy_runs(tmp_path / "runs", perturb=False)
    code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 2 and "copies of one run" in one_line_error(err)


def test_a_near_copy_under_another_seed_is_refused(tmp_path, capsys):
    near_copy_runs(tmp_path / "runs", perturb=True)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 2, (code, out.splitlines()[-1:])


# ---------------------------------------------------------------- claim 3: bad input is one line and exit 2


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 1e300])
def test_a_non_finite_metric_value_is_one_line_and_exit_2(tmp_path, capsys, runs, value):
    odd = write_run(runs / "odd", "A-v1", "new", 99, [1.0] * 29 + [value])  # 1e300 is inf in the float32 event
    code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", runs=runs)
    assert code == 2 and str(odd) in one_line_error(err)


def test_metric_values_near_the_float32_limit_still_give_a_verdict(tmp_path, capsys):
    root = tmp_path / "runs"
    for seed in range(1, 8):  # new on seeds of its own: runs of one seed number would count as half a pair each
        write_run(root, "A-v1", "base", seed, np.linspace(0, 3e38, 30) - seed * 1e36)
        write_run(root, "A-v1", "new", seed + 10, np.linspace(0, -3e38, 30) - seed * 1e36)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 1, err
    assert "rlops: new vs base: regression" in out


@pytest.mark.parametrize("case", ["empty folder", "missing folder", "a file"])
def test_a_runs_dir_without_runs_is_one_line_and_exit_2(tmp_path, capsys, case):
    target = tmp_path / "given"
    if case == "empty folder":
        target.mkdir()
    elif case == "a file":
        target.write_text("x")
    code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", runs=target)
    assert code == 2 and str(target) in one_line_error(err)


@pytest.mark.parametrize(
    "spec", ["A-v1=1,2,3", "A-v1", "=1,2", "A-v1=1,", "A-v1=a,b", "A-v1=1e999,2", "A-v1=0,0", "A-v1=nan,1", "A-v1==1,2"]
)
def test_malformed_target_scores_are_one_line_and_exit_2(tmp_path, capsys, runs, spec):
    code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", "--target-scores", spec, runs=runs)
    assert code == 2 and "--target-scores" in one_line_error(err)


def test_target_scores_whose_range_overflows_are_refused(tmp_path, capsys, runs):
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", "--target-scores", "A-v1=0,1e-320", runs=runs)
    assert code == 2 and "--target-scores" in one_line_error(err), [line for line in out.splitlines() if "inf" in line][:2]


def test_a_bootstrap_count_too_large_for_memory_is_one_line_and_exit_2(tmp_path, capsys, runs):
    code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", "--bootstrap-samples", str(10**12), runs=runs)
    assert code == 2 and "--bootstrap-samples" in one_line_error(err), code


def test_an_empty_output_filename_is_one_line_and_exit_2(tmp_path, capsys, runs):
    code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", "--output-filename", "", runs=runs)
    assert code == 2 and "--output-filename" in one_line_error(err), code


def test_an_empty_baseline_is_an_error_not_the_last_tag(tmp_path, capsys):
    root = tmp_path / "runs"
    write_group(root, "A-v1", "base", range(1, 8), 100, noise_seed=1)
    write_group(root, "A-v1", "new", range(11, 18), 50, noise_seed=2)  # seeds of its own: 7 independent pairs
    assert gate(tmp_path, capsys, "--tags", "base", "new", "--baseline", "base", "--fail-on-regression")[0] == 1
    code, out, err = gate(tmp_path, capsys, "--tags", "base", "new", "--baseline", "", "--fail-on-regression")
    assert code == 2 and "--baseline" in one_line_error(err), (code, out.splitlines()[-1:])


def test_a_newline_in_a_tag_keeps_one_summary_line_and_whole_table_rows(tmp_path, capsys):
    root = tmp_path / "runs"
    write_group(root, "A-v1", "base", range(1, 8), 100, noise_seed=1)
    write_group(root, "A-v1", "lr\n0.1", range(1, 8), 50, noise_seed=2)
    code, out, err = gate(tmp_path, capsys, "--tags", "lr\n0.1", "base", runs=root)
    if code == 2:  # refusing control characters in tags is a fix too
        one_line_error(err)
        return
    markdown = (tmp_path / "out" / "compare.md").read_text()
    stray = [line for line in markdown.splitlines() if line.startswith("0.1 |")]
    summary = [line for line in out.splitlines() if "vs base" in line]
    assert not stray and all(line.startswith("rlops: ") for line in summary), (stray, summary)


def event_record(data: bytes) -> bytes:
    """One TFRecord with correct masked-CRC32C framing around `data`, as event files hold them."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    header = struct.pack("Q", len(data))
    return header + struct.pack("I", masked_crc32c(header)) + data + struct.pack("I", masked_crc32c(data))


def test_an_event_record_that_is_not_an_event_is_one_line_and_exit_2(tmp_path, capsys, runs):
    event = next((runs / "A-v1__ppo__3__new").glob("events.out.tfevents.*"))
    event.write_bytes(event.read_bytes() + event_record(random.Random(1).randbytes(300)))
    code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", runs=runs)
    assert code == 2 and "A-v1__ppo__3__new" in one_line_error(err), code


def test_a_tags_text_that_is_not_utf8_is_one_line_and_exit_2(tmp_path, capsys, runs):
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2

    def text(tag: str, raw: bytes):
        plugin = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
        value = summary_pb2.Summary.Value(
            tag=f"{tag}/text_summary", tensor=tensor_pb2.TensorProto(dtype=7, string_val=[raw]), metadata=plugin
        )
        return event_pb2.Event(wall_time=1.0, step=0, summary=summary_pb2.Summary(value=[value]))

    victim = runs / "A-v1__ppo__3__new"
    shutil.rmtree(victim)
    victim.mkdir()
    events = [event_pb2.Event(wall_time=1.0, file_version="brain.Event:2")]
    events += [
        text("hyperparameters", b"|param|value|\n|-|-|\n|env_id|A-v1|\n|exp_name|ppo|\n|seed|3|"),
        text("tags", b"new\xff"),
    ]
    for i in range(30):
        value = summary_pb2.Summary.Value(tag="charts/episodic_return", simple_value=100.0)
        events.append(event_pb2.Event(wall_time=2.0 + i, step=100 * (i + 1), summary=summary_pb2.Summary(value=[value])))
    (victim / "events.out.tfevents.1.host.1").write_bytes(b"".join(event_record(e.SerializeToString()) for e in events))
    code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", runs=runs)
    assert code == 2 and "A-v1__ppo__3__new" in one_line_error(err), code


@pytest.mark.parametrize("damage", ["zero bytes", "random bytes"])
def test_a_run_whose_event_file_cannot_be_read_is_named(tmp_path, capsys, runs, damage):
    event = next((runs / "A-v1__ppo__3__new").glob("events.out.tfevents.*"))
    event.write_bytes(b"" if damage == "zero bytes" else random.Random(0).randbytes(5000))
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", runs=runs)
    assert "A-v1__ppo__3__new" in err, (code, seeds_compared(out) if code == 0 else err)


def test_seeds_that_crash_do_not_pass_the_gate(tmp_path, capsys):
    root = tmp_path / "runs"
    rng = np.random.default_rng(0)
    for seed in range(1, 11):  # episode noise: straight lines would be refused as copies (exit 2) before any test
        write_run(root, "A-v1", "base", seed, np.linspace(0, 100, 30) + rng.normal(size=30))
        if seed <= 4:  # crashed half way, far below the baseline
            write_run(root, "A-v1", "new", seed, np.linspace(0, 20, 15) + rng.normal(size=15))
        else:
            write_run(root, "A-v1", "new", seed, np.linspace(0, 100, 30) + rng.normal(size=30))
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 3 and all(f"A-v1__ppo__{seed}__new" in err for seed in range(1, 5)), (code, err)


# ---------------------------------------------------------------- round 2: the seed as the unit, left-out runs, copies


class StandInWandbRun:
    """What rlops reads of a W&B run (id, state, config, tags, summary, history), built from a local run."""

    def __init__(self, run, index: int, state: str):
        from cleanrl_utils.tensorboard_reader import read_scalars

        self.id, self.state, self.tags = f"run{index}", state, list(run.tags)
        self.config = {"env_id": run.env_id, "exp_name": run.exp_name, "seed": int(run.seed)}
        self.summary = {"_runtime": (run.runtime_minutes or 0) * 60}
        self._scalars = read_scalars(run.path)

    def scan_history(self, keys, min_step=None):
        step_key, tag = keys
        rows = [{"_step": i, step_key: s, tag: v} for i, (s, v) in enumerate(self._scalars.get(tag, []))]
        return iter(row for row in rows if min_step is None or row["_step"] >= min_step)

    def history(self, keys, samples, pandas):
        return list(self.scan_history(keys))


def test_crashed_wandb_runs_do_not_pass_the_gate(tmp_path, capsys, monkeypatch):
    """The docs: runs left out (a seed that crashed may be what the change broke) keep a tag from passing; W&B's
    crashed runs are 'left out' too. 10 vs 10 seeds of one level, 4 of the tag's seeds crashed on W&B."""
    import wandb

    from cleanrl_utils.report import collect_runs

    write_group(tmp_path / "runs", "A-v1", "base", range(1, 11), 100, noise_seed=1)
    write_group(tmp_path / "runs", "A-v1", "new", range(11, 21), 100, noise_seed=2)
    local = collect_runs([tmp_path / "runs"], split_by_dir=False)
    states = {("new", seed): "crashed" for seed in ("11", "12", "13", "14")}
    remote = [StandInWandbRun(r, i, states.get((r.tags[0], r.seed), "finished")) for i, r in enumerate(local)]
    monkeypatch.setattr(wandb, "Api", lambda: type("Api", (), {"runs": lambda self, path, filters=None: remote})())
    argv = ["--exp-name", "ppo", "--tags", "new", "base", "--output-filename", str(tmp_path / "out" / "c")]
    code = rlops.main(
        [
            *argv,
            "--wandb-project-name",
            "p",
            "--metric-last-n-average-window",
            "5",
            "--bootstrap-samples",
            "200",
            "--fail-on-regression",
        ]
    )
    out, err = capsys.readouterr()
    assert "left out 4 runs that have not finished (4 crashed)" in err
    assert code == 3, "four crashed seeds of the tag, and the gate passes"
    assert "4 runs of it or the baseline left out" in out.splitlines()[-1]
    for seed in (11, 12, 13, 14):  # each named, in a warning and in the Markdown
        assert f"(new, seed {seed}, A-v1) is crashed on W&B, not finished: left out" in err
        assert f"(new, seed {seed}, A-v1)` is crashed on W&B, not finished" in out


def test_a_seed_missing_on_one_env_does_not_pass_the_gate(tmp_path, capsys):
    """A seed run on A-v1 but with no run at all on B-v1 (it died before its first write there, or the runner
    lost it): the test across envs drops the seed silently. Seen from its run on A-v1, it is a run left out."""
    root = tmp_path / "runs"
    for env in ("A-v1", "B-v1"):
        write_group(root, env, "base", range(1, 11), 100, noise_seed=1)
        write_group(root, env, "new", [s for s in range(11, 21) if env == "A-v1" or s not in (11, 12, 13)], 100, 2)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 3, (out.splitlines()[-1], err)
    warnings = [line for line in err.splitlines() if "but none on" in line]
    assert warnings == [
        f"rlops: warning: tag 'new', seed {seed}: runs on A-v1 but none on B-v1: left out of the test across envs, "
        "and the gate cannot pass without it"
        for seed in (11, 12, 13)
    ]
    assert "3 runs of it or the baseline left out" in out.splitlines()[-1]
    assert "- left out of the test across envs: tag 'new', seed 11: runs on A-v1 but none on B-v1" in out


def test_a_seed_that_crashed_on_one_env_is_named_once(tmp_path, capsys):
    """Seed 11 stopped early on B-v1: left out there (a warning naming its run); it is not named again as missing."""
    root = tmp_path / "runs"
    for env in ("A-v1", "B-v1"):
        write_group(root, env, "base", range(1, 11), 100, noise_seed=1)
        write_group(root, env, "new", range(12, 21), 100, 2)
    write_run(root, "A-v1", "new", 11, np.linspace(0, 100, 30))
    write_run(root, "B-v1", "new", 11, np.linspace(0, 20, 10))  # stopped a third of the way
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 3, (out.splitlines()[-1], err)
    assert "but none on" not in err and "1 run of it or the baseline left out" in out.splitlines()[-1]


@pytest.mark.parametrize("edit", ["none", "SPS values one higher", "one more episode logged", "every return times 1.001"])
def test_a_copy_under_another_seed_with_a_trivial_edit_is_refused(tmp_path, capsys, edit):
    """base: seeds 1-7; new: seeds 11-15, all below base (5 vs 7 seeds cannot reach alpha: exit 3), and seed 11's run
    again as seed 16, its SPS values each +1 or one more return logged at its end. The copy agrees with seed 11's run
    in every return they share: the same evidence twice, and it turns exit 3 into a regression (exit 1)."""
    root = tmp_path / "runs"
    for seed in range(1, 8):
        write_run(
            root, "A-v1", "base", seed, np.linspace(0, 100, 30) + seed, clock=1.7e9 + 1000 * seed, sps=[900.0 + seed] * 30
        )
    for seed in range(11, 16):
        write_run(root, "A-v1", "new", seed, np.linspace(0, 50, 30) + seed, clock=1.8e9 + 1000 * seed, sps=[800.0 + seed] * 30)
    returns = list((np.linspace(0, 50, 30) + 11) * (1.001 if edit == "every return times 1.001" else 1.0))
    steps = [100 * (i + 1) for i in range(31)]
    sps = [811.0 + (edit == "SPS values one higher")] * 31
    extra = edit == "one more episode logged"
    copied = [*returns, returns[-1]] if extra else returns
    write_run(root / "copy", "A-v1", "new", 16, copied, steps[: len(copied)], sps[: len(copied)], clock=1.8e9 + 11000)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 2, (code, out.splitlines()[-1:])


def test_different_seeds_that_all_reach_the_cap_are_not_called_copies(tmp_path, capsys):
    """CartPole-like: every seed of both tags logs 500 at the same steps; only their clocks differ. Not copies."""
    root = tmp_path / "runs"
    for tag, first in (("base", 1), ("new", 11)):
        for seed in range(first, first + 7):
            write_run(root, "A-v1", tag, seed, [500.0] * 30, clock=1.7e9 + 997 * seed, sps=[1000.0 + seed] * 30)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 0, err
    assert seeds_compared(out) == "7 vs 7"


def as_series(values, steps=None) -> list[tuple[int, float]]:
    """Values as an event file gives them back: float32, at their steps (every 100 by default)."""
    steps = steps if steps is not None else [100 * (i + 1) for i in range(len(values))]
    return list(zip([int(s) for s in steps], np.float32(values).astype(float)))


def seed_runs(kind: str, rng) -> list[tuple[int, float]]:
    """One seed's episodic returns (at their global steps) in a kind of run where two seeds may look alike."""
    if kind.startswith("learning"):  # a sigmoid learning curve, episode noise 5% (1% for the long run)
        n, noise = {"learning, 12 episodes": (12, 0.05), "learning, 30": (30, 0.05), "learning, 300, 1% noise": (300, 0.01)}[
            kind
        ]
        final = 1000 * (1 + 0.1 * rng.normal())
        values = final / (1 + np.exp(-np.linspace(-6, 6, n))) + noise * final * rng.normal(size=n)
        return as_series(values, np.cumsum(rng.integers(100, 200, size=n)))
    if kind == "seeds 0.3% apart, noise 0.05%":  # test_rlops' write_group at level -400: near-identical lines
        return as_series((-400 + rng.normal()) * np.linspace(0.05, 1, 30) + 0.1 * rng.normal(size=30))
    if kind == "CartPole learning":
        values = np.clip(np.round(20 + 600 * np.linspace(0, 1, 300) + 100 * rng.normal(size=300)), 8, 500)
        return as_series(values, np.cumsum(values).astype(int) // 4 * 4)
    if kind == "CartPole at the cap, 5% dips":
        values = np.full(400, 500.0)
        dips = rng.random(400) < 0.05
        values[dips] = rng.integers(100, 499, size=dips.sum())
        return as_series(values, np.cumsum(values).astype(int))
    if kind == "all at the cap":
        return as_series([500.0] * 50, [500 * (i + 1) for i in range(50)])
    if kind == "never learned (-200 at fixed steps)":
        return as_series([-200.0] * 80, [200 * (i + 1) for i in range(80)])
    if kind == "Pong-like integers":
        values = np.round(np.clip(-21 + 42 * np.linspace(0, 1, 500) + 3 * rng.normal(size=500), -21, 21))
        return as_series(values, np.cumsum(rng.integers(800, 3000, size=500)))
    if kind == "Pong at -21 and -20":
        return as_series(np.round(np.clip(-20.5 + 0.8 * rng.normal(size=200), -21, 21)))
    if kind.startswith("hit or miss"):  # 0/1 episodes: a deterministic goal reached or not
        n, p = {"hit or miss, 12 episodes": (12, 0.5), "hit or miss, 40": (40, 0.5), "hit or miss, 100 at 0.9": (100, 0.9)}[
            kind
        ]
        return as_series((rng.random(n) < p).astype(float))
    if kind == "deterministic env, improving in jumps":
        jumps = np.sort(rng.integers(0, 50, size=6))
        return as_series(-100.0 + 10 * np.searchsorted(jumps, np.arange(50), side="right"))
    raise ValueError(kind)


SEED_KINDS = [
    "learning, 12 episodes",
    "learning, 30",
    "learning, 300, 1% noise",
    "seeds 0.3% apart, noise 0.05%",
    "CartPole learning",
    "CartPole at the cap, 5% dips",
    "all at the cap",
    "never learned (-200 at fixed steps)",
    "Pong-like integers",
    "Pong at -21 and -20",
    "hit or miss, 12 episodes",
    "hit or miss, 40",
    "hit or miss, 100 at 0.9",
    "deterministic env, improving in jumps",
]


@pytest.mark.parametrize("kind", SEED_KINDS)
def test_the_near_copy_rule_refuses_no_two_seeds(kind):
    """The rule compares the curves (rlops_runs.near_copy): 200 pairs of independent seeds of each kind, none
    called copies. Measured when the rule was written: 0 of 5,700 pairs over 19 kinds (300 each)."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(sum(map(ord, kind)))
    refused = [i for i in range(200) if near_copy(seed_runs(kind, rng), seed_runs(kind, rng))]
    assert refused == [], f"{len(refused)} of 200 pairs of different seeds called copies"


@pytest.mark.parametrize(
    "kind", ["learning, 30", "seeds 0.3% apart, noise 0.05%", "CartPole at the cap, 5% dips", "Pong-like integers"]
)
@pytest.mark.parametrize("edit", ["times 1.001", "one more episode", "a tenth of the returns changed", "plus 1% of the mean"])
def test_the_near_copy_rule_finds_edited_copies(kind, edit):
    """What a copy keeps whatever is edited around it: its episode-to-episode fluctuations, found at every kind of
    run that fluctuates (flat runs at a cap hold no fluctuation to find; the exact rule of steps, SPS and runtime
    covers their unedited copies)."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(1)
    for _ in range(10):
        run = seed_runs(kind, rng)
        steps, values = [s for s, _ in run], np.array([v for _, v in run])
        if edit == "times 1.001":
            copy = as_series(values * 1.001, steps)
        elif edit == "one more episode":
            copy = as_series(np.append(values, values[-1]), [*steps, steps[-1] + 100])
        elif edit == "plus 1% of the mean":
            copy = as_series(values + 0.01 * np.abs(values).mean(), steps)
        else:
            changed = rng.choice(len(values), size=len(values) // 10, replace=False)
            edited = values.copy()
            edited[changed] += (np.std(values) + 1) * rng.normal(size=len(changed))
            copy = as_series(edited, steps)
        assert near_copy(run, copy) and near_copy(copy, run)


def first_observations(seed: int, num_envs: int = 4) -> np.ndarray:
    import gymnasium as gym

    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(num_envs)])
    observations, _ = envs.reset(seed=seed)
    envs.close()
    return observations


def test_consecutive_seeds_share_env_random_streams_and_spaced_seeds_do_not():
    """What the gate's seed-spacing warning stands on (finding 4 of round 2, kept as a limitation): ppo.py resets
    its vector env with `envs.reset(seed=args.seed)`, which seeds sub-env i with seed + i, so seeds 1 and 2 start
    three of four envs alike; seeds num_envs apart start none alike. The scripts are left as they are."""

    def shared(a: int, b: int) -> int:
        one, two = first_observations(a), first_observations(b)
        return sum(any(np.array_equal(x, y) for y in two) for x in one)

    assert shared(1, 2) == 3 and shared(1, 4) == 1
    assert shared(1, 5) == 0 and shared(5, 9) == 0


def env_stream_null(seeds_x: list[int], seeds_y: list[int], num_envs: int = 4, share: float = 0.9, trials: int = 2000):
    """The false-alarm rate of the test when sub-env i of seed s draws stream s + i and that stream's luck makes
    `share` of a run's score variance (0.9: an extreme, the initial states decide the outcome). Same law for both
    sides: every flag is a false alarm."""
    rng = np.random.default_rng(3)
    top = max(seeds_x + seeds_y) + num_envs + 1
    alarms = 0
    for _ in range(trials):
        streams = rng.normal(size=top)
        noise = math.sqrt(1 - share) * rng.normal(size=top)
        score = math.sqrt(share) * np.array([streams[s : s + num_envs].sum() / math.sqrt(num_envs) for s in range(top)])
        score += noise
        x, y = score[seeds_x], score[seeds_y]
        alarms += rlstats.improvement_p_value([x], [y], [seeds_x], [seeds_y]) <= ALPHA
    return alarms / trials


def test_seeds_sharing_env_streams_break_the_false_alarm_rate_and_spaced_seeds_keep_it():
    """The measured limitation the RLops page states: consecutive seeds (tag 9-16, baseline 1-8, 4 envs) give about
    12% false alarms in this extreme model (11.5% in round 2's draws, 11.85% in these); about 4% at a 50% share;
    the same seeds spaced by num_envs (4) stay within alpha (0.6%)."""
    consecutive = env_stream_null(list(range(9, 17)), list(range(1, 9)))
    assert 0.10 <= consecutive <= 0.13 and not within_alpha(consecutive, 2000), consecutive
    spaced = env_stream_null(list(range(33, 65, 4)), list(range(1, 33, 4)))
    assert within_alpha(spaced, 2000), spaced


def write_spaced_groups(root: Path, base_seeds, new_seeds, num_envs) -> None:
    rng = np.random.default_rng(4)
    for tag, seeds in (("base", base_seeds), ("new", new_seeds)):
        for seed in seeds:
            final = 100 + rng.normal()
            returns = final * np.linspace(0.05, 1, 30) + rng.normal(size=30)
            write_run(root, "A-v1", tag, seed, returns, num_envs=num_envs)


@pytest.mark.parametrize(
    ("base_seeds", "new_seeds", "num_envs", "warned"),
    [
        (range(1, 8), range(11, 18), 4, "seeds 1 (base) and 2 (base) on A-v1 are closer than their num_envs (4)"),
        (range(1, 29, 4), range(101, 129, 4), 4, None),  # spaced by num_envs: independent streams
        (range(1, 8), range(11, 18), 1, None),  # one env per run: seed s is stream s alone
        (range(1, 8), range(11, 18), None, None),  # no num_envs logged: nothing to check
        (range(1, 29, 4), range(3, 31, 4), 4, "seeds 1 (base) and 3 (new) on A-v1"),  # the groups interleaved
    ],
)
def test_seeds_closer_than_num_envs_are_named_in_one_warning(tmp_path, capsys, base_seeds, new_seeds, num_envs, warned):
    write_spaced_groups(tmp_path / "runs", base_seeds, new_seeds, num_envs)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base")
    assert code == 0, err
    lines = [line for line in err.splitlines() if "num_envs" in line]
    if warned is None:
        assert lines == []
        return
    assert len(lines) == 1 and warned in lines[0], lines
    assert f"--seed-stride {num_envs}" in lines[0] and "--seed" in lines[0]


def seed_patterns(kind: str, rng) -> tuple[dict, dict]:
    """(scores, seed labels) for a null in which runs of different seeds are independent and P(X > Y) = 1/2."""
    if kind == "partly shared seed numbers, mirrored, luck on every env":  # tag 1-12, base 7-18
        tag_seeds, base_seeds, envs = list(range(1, 13)), list(range(7, 19)), 3
        luck = {s: rng.choice([-10.0, 10.0]) for s in range(1, 19)}
        x = [np.array([luck[s] + rng.normal() for s in tag_seeds]) for _ in range(envs)]
        y = [
            np.array([(-luck[s] if s in tag_seeds else rng.normal()) + rng.normal() for s in base_seeds]) for _ in range(envs)
        ]
        return {"t": x, "b": y}, {"t": [tag_seeds] * envs, "b": [base_seeds] * envs}
    if kind == "unequal seeds per env, hit-or-miss luck on every env":
        tag_seeds = [list(range(11, 26)), list(range(11, 20)), list(range(13, 24))]
        base_seeds = [list(range(1, 21)), list(range(1, 10)), list(range(2, 12))]
        luck = {s: rng.choice([-10.0, 10.0]) for s in range(1, 30)}
        x = [np.array([luck[s] + rng.normal() for s in seeds]) for seeds in tag_seeds]
        y = [rng.normal(size=len(seeds)) for seeds in base_seeds]
        return {"t": x, "b": y}, {"t": tag_seeds, "b": base_seeds}
    if kind == "three tags on the baseline's seeds, one luck per seed for all":
        seeds, envs = list(range(1, 15)), 2
        luck = rng.choice([-10.0, 10.0], size=14)
        scores = {tag: [luck + rng.normal(size=14) for _ in range(envs)] for tag in ("t0", "t1", "t2", "b")}
        return scores, {tag: [seeds] * envs for tag in scores}
    # 0/1 scores, a seed hits or misses on every env under both tags, seed numbers 4-10 shared
    tag_seeds, base_seeds, envs = list(range(1, 11)), list(range(4, 14)), 4
    hit = {s: float(rng.integers(0, 2)) for s in range(1, 14)}
    x = [np.array([hit[s] for s in tag_seeds]) for _ in range(envs)]
    y = [np.array([hit[s] for s in base_seeds]) for _ in range(envs)]
    return {"t": x, "b": y}, {"t": [tag_seeds] * envs, "b": [base_seeds] * envs}


@pytest.mark.parametrize(
    "kind",
    [
        "partly shared seed numbers, mirrored, luck on every env",
        "unequal seeds per env, hit-or-miss luck on every env",
        "three tags on the baseline's seeds, one luck per seed for all",
        "0/1 ties, partly shared seed numbers, luck on every env",
    ],
)
def test_seed_patterns_the_docs_cover_keep_the_false_alarm_rate(kind):
    rng = np.random.default_rng(7)
    trials, alarms = 400, 0
    for _ in range(trials):
        scores, seeds = seed_patterns(kind, rng)
        verdicts = rlops.compare(scores, "b", reps=10, confidence=1 - ALPHA, seed=0, seeds=seeds)
        alarms += any(t.label in ("regression", "improvement") for v in verdicts for t in [v.overall, *v.per_env])
    assert within_alpha(alarms / trials, trials), f"{alarms / trials:.1%} false alarms"


@pytest.mark.parametrize(("envs", "seeds"), [(1, 6), (2, 7), (3, 8), (5, 8), (8, 9), (10, 9), (57, 12)])
def test_the_fewest_seeds_the_docs_give_are_the_codes(envs, seeds):
    """docs/get-started/rlops.md: one env needs 6 seeds per tag, 2 envs 7, 3 to 5 envs 8, 8 to 10 envs 9, 57 games
    12; and on the baseline's own seed numbers about twice as many (one env: 12)."""
    assert rlops.least_seeds(1, envs, ALPHA) == seeds
    assert rlstats.smallest_p(11, 11, 11) > ALPHA >= rlstats.smallest_p(12, 12, 12)


@pytest.mark.parametrize("case", ["--seed -1", "--seed 2**70", "output under a file"])
def test_more_bad_input_is_one_line_and_exit_2(tmp_path, capsys, runs, case):
    (tmp_path / "a file").write_text("x")
    args = {
        "--seed -1": ["--seed", "-1"],
        "--seed 2**70": ["--seed", str(2**70)],
        "output under a file": ["--output-filename", str(tmp_path / "a file" / "compare")],
    }[case]
    code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", *args, runs=runs)
    line = one_line_error(err)
    assert code == 2 and ("--seed" in line if "seed" in case else "a file" in line), (code, line)


@pytest.mark.parametrize("design", [(5, 9, 9, 0), (2, 14, 14, 14)])
def test_the_shift_the_page_prints_is_found_four_times_in_five(design):
    """The page prints the detectable shift to one decimal, rounded up (3.635 shows as 3.7): at the printed shift,
    fresh draws of independent normal runs on every env (seed labels as the design says) are found at least 80% - 2 SE."""
    envs, n_x, n_y, shared = design
    level = ALPHA / rlops.family_size(1, envs)
    shown = float(rlops.rounded_up(rlops.detectable(design, level)))
    rng = np.random.default_rng(5)
    trials = 10000
    other = np.ones((n_x, n_y), dtype=bool)
    other[np.arange(shared), np.arange(shared)] = False  # the first `shared` runs of each side are one seed
    improvement = np.zeros(trials)
    for _ in range(envs):
        x, y = rng.normal(size=(trials, n_x)) + shown, rng.normal(size=(trials, n_y))
        improvement += rlstats.comparisons(x, y)[:, other].mean(axis=-1) / envs
    p = rlstats.seed_bound(n_x, n_y, shared).p_value(np.abs(improvement - 0.5))
    found = float(np.mean((p <= level) & (improvement > 0.5)))
    assert found >= 0.8 - 2 * math.sqrt(0.8 * 0.2 / trials), f"found {found:.1%} at the printed shift {shown}"


def test_the_printed_shift_is_never_below_the_one_found():
    """Rounding to the nearest would print 79.25 as 79.2 and 3.635 as 3.6: a shift the seeds do not find four times
    in five. The page rounds up; a value already on the grid stays as it is."""
    assert rlops.rounded_up(79.25) == "79.3" and rlops.rounded_up(3.635) == "3.7" and rlops.rounded_up(0.7925, 2) == "0.80"
    assert rlops.rounded_up(3.6) == "3.6" and rlops.rounded_up(0.1 + 0.2) == "0.3"
    rng = np.random.default_rng(5)
    for value in rng.uniform(0, 12, size=2000):
        assert float(rlops.rounded_up(value)) >= value - 1e-9, value


# ---------------------------------------------------------------- round 3: unfinished runs, missing seeds, near copies


def levels_in_turn(rng, period: int, episodes: int = 300) -> list[tuple[int, float]]:
    """A seed that learned a deterministic env which hands out a fixed list of `period` levels in turn, one per
    episode (MiniGrid's ReseedWrapper, Procgen's sequential levels): each level's return is fixed by its shortest
    path; 5% of episodes fail (return 0) by the policy's own sampling. Level i of every seed is episode i mod period."""
    level_returns = np.linspace(0.3, 0.95, period)[np.random.default_rng(period).permutation(period)]
    values = np.tile(level_returns, episodes // period + 1)[:episodes]
    values[rng.random(episodes) < 0.05] = 0.0
    return as_series(values)


@pytest.mark.parametrize("episodes", [60, 300])
@pytest.mark.parametrize("period", [5, 16])
def test_seeds_that_learned_levels_handed_out_in_turn_are_not_called_copies(period, episodes):
    """Fixed (round 3 called 50 of 50 pairs copies at 300 episodes): each run agrees with itself a cycle later as much
    as the two seeds agree in step, and that is the chance rate."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(3)
    refused = sum(near_copy(levels_in_turn(rng, period, episodes), levels_in_turn(rng, period, episodes)) for _ in range(50))
    assert refused == 0, f"{refused} of 50 pairs of independent seeds called copies"


@pytest.mark.parametrize("period", [5, 16])
def test_seeds_of_levels_drawn_at_random_are_not_called_copies(period):
    """Held: the same levels drawn at random for each episode (Procgen's default), not in turn: 0 of 50 pairs."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(4)
    level_returns = np.linspace(0.3, 0.95, period)

    def seed_run():
        values = level_returns[rng.integers(0, period, size=300)]
        values[rng.random(300) < 0.05] = 0.0
        return as_series(values)

    assert sum(near_copy(seed_run(), seed_run()) for _ in range(50)) == 0


def test_the_gate_compares_honest_seeds_of_levels_handed_out_in_turn(tmp_path, capsys):
    rng = np.random.default_rng(8)
    for tag, first in (("base", 1), ("new", 101)):
        for seed in range(first, first + 7):
            run = levels_in_turn(rng, 16, episodes=60)
            returns = [v for _, v in run]  # each run its own clock readings, as real runs have
            write_run(tmp_path / "runs", "A-v1", tag, seed, returns, clock=1.7e9 + 997 * seed, sps=[900.0 + seed] * 60)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base")
    assert code == 0, err


@pytest.mark.parametrize("period", [5, 16])
def test_copies_of_long_runs_of_levels_handed_out_in_turn_are_found(period):
    """The cycle raises the chance rate to each run's agreement with itself a cycle later (about 3 in 4 episodes, the
    5% failures aside); a copy scaled by 1.001 agrees at every episode, which 300 episodes tell apart."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(13)
    for _ in range(20):
        run = levels_in_turn(rng, period)
        assert near_copy(run, as_series(np.array([v for _, v in run]) * 1.001, [s for s, _ in run]))


@pytest.mark.xfail(
    strict=True,
    reason="limitation: a cycle of levels longer than half the run shows no repeat within it, so two honest seeds "
    "agree level by level as a copy would: a cycle of 64 levels over 60 episodes, every pair called copies",
)
def test_seeds_of_a_cycle_longer_than_half_the_run_are_not_called_copies():
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(14)
    refused = sum(near_copy(levels_in_turn(rng, 64, 60), levels_in_turn(rng, 64, 60)) for _ in range(20))
    assert refused == 0, f"{refused} of 20 pairs of independent seeds called copies"


@pytest.mark.xfail(
    strict=True,
    reason="limitation: a copy (x1.001) of a 60-episode run of levels handed out in turn agrees with the original "
    "too little more than the run agrees with itself a cycle later: most are missed (the exact rule finds unedited "
    "copies by their clock)",
)
@pytest.mark.parametrize("period", [5, 16])
def test_copies_of_short_runs_of_levels_handed_out_in_turn_are_found(period):
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(15)
    missed = 0
    for _ in range(20):
        run = levels_in_turn(rng, period, 60)
        missed += not near_copy(run, as_series(np.array([v for _, v in run]) * 1.001, [s for s, _ in run]))
    assert missed == 0, f"{missed} of 20 copies missed"


def edited_copy(edit: str, run: list[tuple[int, float]], rng) -> list[tuple[int, float]]:
    """A copy of `run`, edited."""
    steps, values = [s for s, _ in run], np.array([v for _, v in run])
    middle = len(values) // 2
    if edit == "steps one later":
        return as_series(values, [s + 1 for s in steps])
    if edit == "steps doubled":
        return as_series(values, [2 * s for s in steps])
    if edit == "first episode cut, steps kept":
        return as_series(values[1:], steps[1:])
    if edit == "every other episode dropped":
        return as_series(values[::2], steps[::2])
    if edit == "one episode cut in the middle, steps one later":
        return as_series(np.delete(values, middle), [s + 1 for s in np.delete(np.array(steps), middle)])
    if edit == "rounded to whole numbers":
        return as_series(np.round(values), steps)
    if edit == "first episode cut, steps one later":
        return as_series(values[1:], [s + 1 for s in steps[1:]])
    if edit == "its second half as a run (steps doubled from the start)":
        half = values[len(values) // 2 :]
        return as_series(half, [2 * s for s in steps[: len(half)]])
    if edit == "every return plus 1% noise":
        return as_series(values * (1 + 0.01 * rng.normal(size=len(values))), steps)
    if edit == "smoothed over two episodes":
        return as_series(np.convolve(values, [0.5, 0.5], "same"), steps)
    raise ValueError(edit)


@pytest.mark.parametrize(
    "edit",
    [
        "first episode cut, steps one later",
        "its second half as a run (steps doubled from the start)",
        "every return plus 1% noise",
        "smoothed over two episodes",
    ],
)
def test_the_near_copy_rule_finds_copies_edited_twice(edit):
    """Fixed (round 3 found 0 of 20 of each): lined up at its end, each cut copy agrees episode for episode; the noisy
    and the smoothed copies are found by the correlation of their fluctuations. Measured on 200 more copies of each
    (seed 2026): 200, 200, 183 (1% noise on 30 episodes holds little more than the rule needs) and 200."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(11)
    missed = 0
    for _ in range(20):
        run = seed_runs("learning, 30", rng)
        missed += not near_copy(run, edited_copy(edit, run, rng))
    assert missed == 0, f"{missed} of 20 copies missed"


def test_a_copy_cut_by_one_episode_and_moved_by_one_step_is_refused(tmp_path, capsys):
    root, rng = tmp_path / "runs", np.random.default_rng(2)
    curves = {}
    for seed in range(1, 8):
        write_run(root, "A-v1", "base", seed, 100 * np.linspace(0.1, 1, 30) + 3 * rng.normal(size=30))
    for seed in range(11, 16):
        curves[seed] = 50 * np.linspace(0.1, 1, 30) + 3 * rng.normal(size=30)
        write_run(root, "A-v1", "new", seed, curves[seed])
    steps = [100 * (i + 1) + 1 for i in range(1, 30)]  # the copy: episodes 2-30 of seed 11, each a step later
    write_run(tmp_path / "copy", "A-v1", "new", 16, curves[11][1:], steps)
    before = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression", runs=[root])[0]
    assert before == 3, "5 vs 7 seeds, the copy aside, cannot reach alpha"
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression", runs=[root, tmp_path / "copy"])
    assert code == 2, (code, out.splitlines()[-1:])


@pytest.mark.parametrize(
    "edit",
    [
        "steps one later",
        "steps doubled",
        "first episode cut, steps kept",
        "every other episode dropped",
        "one episode cut in the middle, steps one later",
        "every return plus 1% noise",
        "rounded to whole numbers",
    ],
)
def test_the_near_copy_rule_finds_copies_of_long_runs_edited(edit):
    """Held: on 300-episode learning curves (5% noise) each of these copies is found, 20 of 20."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(12)
    for _ in range(20):
        run = seed_runs("learning, 300, 1% noise", rng)
        copy = edited_copy(edit, run, rng)
        assert near_copy(run, copy), edit


def long_seed_run(kind: str, rng) -> list[tuple[int, float]]:
    """One seed of a long run: 5,000 to 10,000 episodes."""
    if kind == "0/1 episodes, 10,000":
        return as_series((rng.random(10000) < 0.5).astype(float))
    if kind == "0/1 episodes at 0.99, 10,000":
        return as_series((rng.random(10000) < 0.99).astype(float))
    if kind == "Atari-like counts of clipped rewards, 5,000":
        rate = 1 + 300 / (1 + np.exp(-np.linspace(-6, 6, 5000)))
        return as_series(rng.poisson(rate).astype(float), np.cumsum(rng.integers(500, 5000, size=5000)))
    if kind == "CartPole at the cap with dips, 10,000":
        values = np.full(10000, 500.0)
        dips = rng.random(10000) < 0.05
        values[dips] = rng.integers(100, 499, size=dips.sum())
        return as_series(values, np.cumsum(values).astype(int))
    if kind == "Pong-like integers, 10,000":
        values = np.round(np.clip(-21 + 42 * np.linspace(0, 1, 10000) + 3 * rng.normal(size=10000), -21, 21))
        return as_series(values, np.cumsum(rng.integers(800, 3000, size=10000)))
    raise ValueError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "0/1 episodes, 10,000",
        "0/1 episodes at 0.99, 10,000",
        "Atari-like counts of clipped rewards, 5,000",
        "CartPole at the cap with dips, 10,000",
        "Pong-like integers, 10,000",
    ],
)
def test_the_near_copy_rule_refuses_no_two_seeds_of_long_runs(kind):
    """Held: 10 pairs of independent seeds of each long kind, none called copies (20 of each when tried)."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(sum(map(ord, kind)))
    refused = sum(near_copy(long_seed_run(kind, rng), long_seed_run(kind, rng)) for _ in range(10))
    assert refused == 0, f"{refused} of 10 pairs called copies"


def test_seeds_of_fixed_length_episodes_logged_together_are_not_called_copies():
    """Held: 8 sub-envs whose episodes all end at the same global steps (fixed-length episodes: every run logs 8
    returns at each step), 150 such steps, continuous or whole-number returns: 0 of 50 pairs of seeds called copies."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(9)

    def seed_run(whole: bool):
        level = np.repeat(50 / (1 + np.exp(-np.linspace(-6, 6, 150))), 8)
        values = rng.poisson(1 + level).astype(float) if whole else level * (1 + 0.1 * rng.normal()) + rng.normal(size=1200)
        return as_series(values, np.repeat(8000 * np.arange(1, 151), 8))

    for whole in (False, True):
        assert sum(near_copy(seed_run(whole), seed_run(whole)) for _ in range(50)) == 0, whole


def test_the_baselines_runs_copied_under_the_tag_do_not_pass(tmp_path, capsys):
    rng = np.random.default_rng(10)
    for seed in range(1, 14):  # 13 seeds on the baseline's seed numbers: the test can reach alpha
        returns = 100 * np.linspace(0.1, 1, 30) + 3 * rng.normal(size=30)
        for tag in ("base", "new"):
            write_run(tmp_path / "runs", "A-v1", tag, seed, returns, clock=1.7e9 + 997 * seed, sps=[900.0 + seed] * 30)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 2 and "(new, seed " in err and "(base, seed " in err and len(err.strip().splitlines()) == 1, err


def stand_in_wandb(monkeypatch, remote: list) -> None:
    import wandb

    monkeypatch.setattr(wandb, "Api", lambda: type("Api", (), {"runs": lambda self, path, filters=None: remote})())


def wandb_gate(tmp_path: Path, capsys, *args: str) -> tuple[object, str, str]:
    argv = ["--exp-name", "ppo", "--tags", "new", "base", "--output-filename", str(tmp_path / "out" / "c")]
    argv += ["--wandb-project-name", "p", "--metric-last-n-average-window", "5", "--bootstrap-samples", "200", *args]
    code = rlops.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("state", ["preempted", "pending", "", None, "finishing"])
def test_wandb_runs_in_states_the_gate_does_not_know_are_left_out(tmp_path, capsys, monkeypatch, state):
    """Held: any state but 'finished' is left out, named, and keeps the gate at best at exit 3."""
    from cleanrl_utils.report import collect_runs

    write_group(tmp_path / "runs", "A-v1", "base", range(1, 11), 100, noise_seed=1)
    write_group(tmp_path / "runs", "A-v1", "new", range(11, 21), 100, noise_seed=2)
    local = collect_runs([tmp_path / "runs"], split_by_dir=False)
    remote = [StandInWandbRun(r, i, state if r.seed == "11" else "finished") for i, r in enumerate(local)]
    stand_in_wandb(monkeypatch, remote)
    code, out, err = wandb_gate(tmp_path, capsys, "--fail-on-regression")
    assert code == 3 and "(new, seed 11, A-v1) is" in err, (code, err)


def test_a_finished_wandb_run_that_stopped_early_is_left_out(tmp_path, capsys, monkeypatch):
    """Held: a W&B run marked finished (the script caught a signal and closed the run) that logged half the steps is
    left out as a local one would be: exit 3, not 0."""
    from cleanrl_utils.report import collect_runs

    write_group(tmp_path / "runs", "A-v1", "base", range(1, 11), 100, noise_seed=1)
    write_group(tmp_path / "runs", "A-v1", "new", range(12, 21), 100, noise_seed=2)
    write_run(tmp_path / "runs", "A-v1", "new", 11, np.linspace(5, 50, 15))  # stopped half way, closed cleanly
    remote = [StandInWandbRun(r, i, "finished") for i, r in enumerate(collect_runs([tmp_path / "runs"], split_by_dir=False))]
    stand_in_wandb(monkeypatch, remote)
    code, out, err = wandb_gate(tmp_path, capsys, "--fail-on-regression")
    assert code == 3 and "(new, seed 11, A-v1) stopped at step 1,500 of 3,000" in err, (code, err)


@pytest.mark.parametrize("logged", [4, "4"])
def test_close_seeds_are_named_when_num_envs_is_only_in_the_wandb_config(tmp_path, capsys, monkeypatch, logged):
    """Held: num_envs read from a W&B run's config, as a number or as a string."""
    from cleanrl_utils.report import collect_runs

    write_spaced_groups(tmp_path / "runs", range(1, 8), range(11, 18), num_envs=None)
    remote = [StandInWandbRun(r, i, "finished") for i, r in enumerate(collect_runs([tmp_path / "runs"], split_by_dir=False))]
    for run in remote:
        run.config["num_envs"] = logged
    stand_in_wandb(monkeypatch, remote)
    code, out, err = wandb_gate(tmp_path, capsys)
    lines = [line for line in err.splitlines() if "num_envs" in line]
    assert code == 0 and len(lines) == 1 and "seeds 1 (base) and 2 (base) on A-v1" in lines[0], err


def test_a_baseline_seed_missing_on_one_env_does_not_pass_the_gate(tmp_path, capsys):
    """Held: the rule of round 2 holds for the baseline's seeds too."""
    root = tmp_path / "runs"
    for env in ("A-v1", "B-v1"):
        write_group(root, env, "base", [s for s in range(1, 11) if env == "A-v1" or s != 4], 100, noise_seed=1)
        write_group(root, env, "new", range(11, 21), 100, 2)
    code, out, err = gate(tmp_path, capsys, "--tags", "new", "base", "--fail-on-regression")
    assert code == 3 and "tag 'base', seed 4: runs on A-v1 but none on B-v1" in err, (code, err)


def run_rlops_module(cwd: Path, *flags: str):
    """`python -m cleanrl_utils.rlops FLAGS` in a fresh interpreter: (exit code, stderr, modules loaded at exit)."""
    import subprocess
    import sys

    probe = (
        "import runpy, sys\n"
        "try:\n"
        "    runpy.run_module('cleanrl_utils.rlops', run_name='__main__')\n"
        "finally:\n"
        "    print('loaded:', *(m for m in ('numpy', 'matplotlib', 'torch', 'tensorboard') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, *flags], cwd=cwd, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr, done.stdout.strip().splitlines()[-1].split()[1:]


@pytest.mark.parametrize(
    "flags",
    [
        ["--tags", "a", "b", "--exp-name", "x", "--confidence", "nan"],
        ["--tags", "a", "--exp-name", "x", "--fail-on-regression"],
        ["--tags", "a", "b", "--exp-name", "x", "--seed", "1e3"],
        ["--tags", "a", "b", "--exp-name", "x", "--reference-scores", "nope"],
    ],
)
def test_bad_flags_are_refused_before_numpy_loads(tmp_path, flags):
    """Held: one line, exit 2, and none of numpy, matplotlib, torch or TensorBoard imported."""
    code, err, loaded = run_rlops_module(tmp_path, *flags)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("rlops: error:"), err
    assert loaded == [], loaded


@pytest.mark.parametrize("case", ["--runs-dir", "--exp-name", "--env-ids", "--runs-dir ''", "--exp-name ''", "--env-ids ''"])
def test_a_flag_given_no_value_is_refused_before_numpy_loads(tmp_path, case):
    flag = case.split()[0]
    flags = ["--tags", "new", "base", "--exp-name", "ppo", "--runs-dir", str(tmp_path / "runs"), "--env-ids", "A-v1"]
    at = flags.index(flag)
    flags[at + 1 : at + 2] = [""] if case.endswith("''") else []  # the flag stays, its value goes or is empty
    write_group(tmp_path / "runs", "A-v1", "base", range(1, 8), 100, noise_seed=1)
    write_group(tmp_path / "runs", "A-v1", "new", range(11, 18), 100, noise_seed=2)
    code, err, loaded = run_rlops_module(tmp_path, *flags)
    assert code == 2 and flag in err and "numpy" not in loaded, (code, err, loaded)


# ---------------------------------------------------------------- round 4: the correlation rule for noisy copies


def noisy_seed_run(kind: str, rng) -> list[tuple[int, float]]:
    """A seed of continuous returns whose noise is not the normal white noise the correlation rule's tail assumes."""
    episodes = 300 if "300" in kind else 30
    final = 1000 * (1 + 0.1 * rng.normal())
    if kind.startswith("continuous levels in turn"):  # a cycle of 16 levels, 1% noise: both seeds in step
        levels = np.linspace(0.3, 0.95, 16)[np.random.default_rng(16).permutation(16)]
        return as_series(np.resize(levels, episodes) * (1 + 0.01 * rng.normal(size=episodes)))
    if kind.startswith("Cauchy"):
        noise = rng.standard_cauchy(episodes)
    elif kind.startswith("correlated"):  # each episode's noise 0.9 of the last one's plus its own
        noise = np.zeros(episodes)
        for i, own in enumerate(rng.normal(size=episodes)):
            noise[i] = 0.9 * noise[i - 1] + own if i else own
    else:  # falls: 5% of episodes end at -1000, the others learning with normal noise
        noise = rng.normal(size=episodes)
    values = final / (1 + np.exp(-np.linspace(-6, 6, episodes))) + 0.05 * final * noise
    if kind.startswith("falls"):
        values[rng.random(episodes) < 0.05] = -1000.0
    return as_series(values, np.cumsum(rng.integers(100, 200, size=episodes)))


@pytest.mark.parametrize(
    "kind",
    [
        "Cauchy noise, 30",
        "Cauchy noise, 300",
        "correlated noise, 30",
        "correlated noise, 300",
        "falls, 30",
        "continuous levels in turn, 300",
    ],
)
def test_the_correlation_rule_refuses_no_two_seeds_of_odd_noise(kind):
    """Broke while the rule was built, held since: without clipping the fluctuations, big ones of both seeds at one
    episode decided the fit (here 1 of 200 pairs with Cauchy noise at 300 episodes, 3 of 200 with falls at 30); without
    leaving runs whose fluctuations repeat to the agreement rule, a cycle of 16 levels made all 200 pairs copies."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(sum(map(ord, kind)))
    refused = sum(near_copy(noisy_seed_run(kind, rng), noisy_seed_run(kind, rng)) for _ in range(200))
    assert refused == 0, f"{refused} of 200 pairs of independent seeds called copies"


# ---------------------------------------------------------------- round 4: real runs, shared streams and schedules

REAL_WALKER2D = Path(__file__).parents[1] / "fixtures" / "td3_walker2d_returns.json"


def real_walker2d_run(seed: int) -> list[tuple[int, float]]:
    """Episodes 1000 to 1199 of a real 1M-step td3_continuous_action_jax run on Walker2d-v4 (seed 1 or 2), read from
    its event files with `cleanrl_utils.report.collect_runs` and kept as (step, return) pairs."""
    import json

    return [(int(step), float(value)) for step, value in json.loads(REAL_WALKER2D.read_text())[f"seed {seed}"]]


def smoothed_copy(run: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """A copy whose every return is the mean of it and the one before (its first episode dropped, steps kept)."""
    values = np.array([value for _, value in run])
    return as_series((values[1:] + values[:-1]) / 2, [step for step, _ in run[1:]])


def test_two_real_seeds_and_their_halves_are_not_called_copies_and_edited_copies_are_found():
    """Held: two seeds of a real TD3 run (200 Walker2d episodes each) are not copies, nor is each run's first half
    against its second; a copy with its first episode cut and its steps moved by one, its second half re-logged, or 1%
    noise on each return is found. On the full real runs (TD3 Hopper, Walker2d and HalfCheetah seeds 1 and 2, 119 to
    4,066 episodes; two ppo_atari MsPacman seeds), no pair of the 28, across seeds or envs, came within 0.2 of the
    10^-9 budget, and the same three edits were found in all 8 runs. Over the runs tests left behind (CartPole ppo and
    dqn seeds 1 and 2, Pendulum SAC, Hopper TD3; 30 to 3,970 episodes), 0 of 861 pairs of different seeds on one env
    and 0 of 474 of one seed under two algorithms (sharing env streams) were called copies; 500 MsPacman or Hopper
    returns drawn at random from the real runs, sorted or not, 0 of 50 pairs each."""
    from cleanrl_utils.rlops_runs import near_copy

    first, second = real_walker2d_run(1), real_walker2d_run(2)
    assert not near_copy(first, second)
    assert not near_copy(first[:100], first[100:]) and not near_copy(second[:100], second[100:])
    rng = np.random.default_rng(52)
    for run in (first, second):
        assert near_copy(run, [(step + 1, value) for step, value in run[1:]])
        assert near_copy(run, run[100:])
        assert near_copy(run, as_series([value * (1 + 0.01 * rng.normal()) for _, value in run], [s for s, _ in run]))


@pytest.mark.xfail(
    strict=True,
    reason="limitation (listed on the RLops page): a copy of a real TD3 Walker2d run smoothed over two episodes is not found; the real run's own "
    "fluctuations pass for a cycle (`repeats_itself`), so the correlation rule is never asked, and its chance "
    "(8e-5 at best) is far above the budget anyway: the lagged fits find the real noise correlated",
)
def test_a_smoothed_copy_of_a_real_run_is_found():
    """The page says a moving average of two episodes does not make a copy of continuous returns a new seed. On the
    full real runs the smoothed copy was missed in 2 of 6 TD3 runs (Hopper seed 2, 3,667 episodes; Walker2d seed 2,
    1,632; and in windows of the others: 2 of 20 200-episode windows of Hopper seed 1, 1 of 19 of Walker2d seed 1)."""
    from cleanrl_utils.rlops_runs import near_copy

    run = real_walker2d_run(2)
    assert near_copy(run, smoothed_copy(run))


def seeds_sharing_sub_env_streams(rng, share: float, num_envs: int = 4, rounds: int = 150) -> list:
    """Seeds 1 and 2 of a run of `num_envs` sub-envs, each seeded s + i (`envs.reset(seed=s)`), whose episodes'
    returns owe `share` of their variance to their sub-env's stream (the level it draws) and the rest to the policy's
    own noise; fixed-length episodes, so each step logs sub-envs 0 to num_envs - 1 in turn."""
    streams = [np.random.default_rng(1000 + stream).normal(size=rounds) for stream in range(num_envs + 1)]
    runs = []
    for first_stream in (0, 1):
        values = [
            100 + 10 * math.sqrt(share) * streams[first_stream + env][episode] + 10 * math.sqrt(1 - share) * rng.normal()
            for episode in range(rounds)
            for env in range(num_envs)
        ]
        runs.append(as_series(values, np.repeat(512 * np.arange(1, rounds + 1), num_envs)))
    return runs


def test_consecutive_seeds_sharing_sub_env_streams_are_warned_about_not_called_copies(tmp_path, capsys):
    """Found (and fixed): seeds s and s+1 of a 4-env run whose returns owe 90% of their variance to the sub-env
    streams they share were refused as copies (an error, exit 2) in 20 of 20 pairs, where the page promised one
    warning line; one seed's sub-env k logs beside the other's sub-env k + 1, so the runs line up one episode apart as
    a copy cut by one episode does. Such seeds now get the warning alone; an unedited copy among them is refused."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(4)
    for trial in range(3):
        first, second = seeds_sharing_sub_env_streams(rng, 0.9)
        assert near_copy(first, second)  # the curves alone: a copy
        root = tmp_path / f"runs{trial}"
        for seed, run in ((1, first), (2, second)):
            steps, returns = zip(*run)
            write_run(root, "A-v1", "base", seed, returns, steps=steps, num_envs=4)
            write_run(root, "A-v1", "new", seed + 10, returns[::-1], steps=steps, num_envs=4)
        code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", runs=root)
        assert code == 0, err
        warnings = [line for line in err.splitlines() if "num_envs" in line]
        assert len(warnings) == 1 and "seeds 1 (base) and 2 (base) on A-v1 are closer" in warnings[0], err
    steps, returns = zip(*first)
    write_run(root, "A-v1", "base", 3, returns, steps=steps, num_envs=4, clock=1e9)  # seed 1's returns, another clock
    code, _, err = gate(tmp_path, capsys, "--tags", "new", "base", runs=root)
    assert code == 2 and "copies of one run" in one_line_error(err) and "__3__" in err, err


def hostile_seed_run(kind: str, rng) -> list[tuple[int, float]]:
    """A seed whose curve shares what every seed of a setup shares."""
    if kind == "schedule with warm restarts":  # lr restarts bend every seed's curve at the same episodes; 0.2% noise
        t = np.linspace(0, 1, 300)
        trend = 1000 * (1 - np.exp(-5 * ((4 * t) % 1))) + 500 * t
        return as_series(trend * (1 + 0.002 * rng.normal(size=300)))
    if kind == "CartPole at the time limit with rare dips":
        values = np.full(1000, 500.0)
        dips = rng.random(1000) < 0.03
        values[dips] = rng.integers(9, 500, size=int(dips.sum()))
        return as_series(values)
    if kind == "Atari-like heavy tails, scores of ten":  # log-normal around a learning trend, MsPacman's multiples of 10
        trend = 300 + 2000 * np.linspace(0, 1, 500)
        return as_series(np.round(np.exp(np.log(trend) + 0.6 * rng.normal(size=500)) / 10) * 10)
    if kind == "heavy tails, continuous":  # t with 2 degrees of freedom on the log scale, within float32's range
        trend = 300 + 2000 * np.linspace(0, 1, 500)
        return as_series(np.exp(np.log(trend) + np.clip(0.8 * rng.standard_t(2, size=500), -30, 30)))
    # a shared per-episode part (30% of the noise: a common eval schedule, a fixed start list) around a shared trend
    shared = np.random.default_rng(7).normal(size=300)
    trend = 1000 / (1 + np.exp(-10 * (np.linspace(0, 1, 300) - 0.5)))
    return as_series(trend + 30 * (math.sqrt(0.3) * shared + math.sqrt(0.7) * rng.normal(size=300)))


@pytest.mark.parametrize(
    "kind",
    [
        "schedule with warm restarts",
        "CartPole at the time limit with rare dips",
        "Atari-like heavy tails, scores of ten",
        "heavy tails, continuous",
        "a shared part of each episode's noise",
    ],
)
def test_seeds_sharing_a_schedule_a_time_limit_or_heavy_tails_are_not_called_copies(kind):
    """Held: 0 of 30 pairs of each kind called copies when tried (here 20, to stay fast)."""
    from cleanrl_utils.rlops_runs import near_copy

    rng = np.random.default_rng(sum(map(ord, kind)))
    refused = sum(near_copy(hostile_seed_run(kind, rng), hostile_seed_run(kind, rng)) for _ in range(20))
    assert refused == 0, f"{refused} of 20 pairs of independent seeds called copies"
