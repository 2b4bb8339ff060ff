"""cleanrl_utils.rlops: its statistics against hand-computed cases, and its verdicts on real short ppo.py runs.

The runs are made by the benchmark runner with WANDB_TAGS set, as a user (or the runner's --auto-tag)
tags them: `base` (seeds 1-4), `broken` (learning rate 1e-7, seeds 1-4), and seeds 5-8 with no tags.
`base` and the untagged runs learn at learning rate 2.5e-3, so a few thousand steps tell them from `broken`.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cleanrl_utils import rlops, rlstats
from cleanrl_utils.report import collect_runs, parse_tags
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


def test_permutation_p_value_of_a_complete_separation_is_two_in_c_10_5():
    # 5 vs 5 runs, all x above all y: of the C(10, 5) = 252 splits, only this one and its mirror are as extreme.
    x, y = [np.arange(10.0, 15.0)], [np.arange(0.0, 5.0)]
    p = rlstats.permutation_p_value(x, y, reps=20000, rng=np.random.default_rng(1))
    assert p == pytest.approx(2 / 252, abs=0.002)
    assert rlstats.permutation_p_value([np.ones(4)], [np.ones(4)], reps=100, rng=np.random.default_rng(1)) == 1.0


def test_verdicts_rarely_cry_wolf_when_nothing_changed():
    """Two groups drawn from one distribution: the rule (interval off 0.5 and p < 0.05) calls few of them different.

    The bootstrap interval alone is known to be too narrow with few seeds (about 22% false alarms at 3 seeds,
    9% at 5, measured by the same draws); the permutation test keeps the rule near its 5%.
    """
    rng = np.random.default_rng(123)
    alarms = 0
    trials = 200
    for _ in range(trials):
        x, y = [rng.normal(size=5), rng.normal(size=5)], [rng.normal(size=5), rng.normal(size=5)]
        improvement = rlstats.improvement_estimate(x, y, 1000, 0.95, rng)
        label = rlops.verdict_label(improvement, rlstats.permutation_p_value(x, y, 1000, rng), alpha=0.05)
        alarms += label != "no detectable difference"
    assert alarms / trials <= 0.07


def test_default_normalization_maps_worst_to_0_and_baseline_mean_to_1():
    scores = {"base": [np.array([10.0, 20.0])], "new": [np.array([0.0, 40.0])]}
    lows, highs = rlops.normalization(scores, "base", ["E"], {})
    assert (lows, highs) == ([0.0], [15.0])
    assert rlops.normalization(scores, "base", ["E"], {"E": (-5.0, 5.0)}) == ([-5.0], [5.0])
    # every score equal: each maps to 1, no division by zero
    same = {"base": [np.array([3.0, 3.0])], "new": [np.array([3.0])]}
    lows, highs = rlops.normalization(same, "base", ["E"], {})
    assert rlstats.normalize([np.array([3.0])], lows, highs)[0][0] == pytest.approx(1.0)


def test_opposite_effects_on_two_envs_cancel_in_the_aggregate_and_show_per_env():
    scores = {
        "base": [np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 3.0, 4.0])],
        "new": [np.array([5.0, 6.0, 7.0, 8.0]), np.array([0.0, 0.0, 0.0, 0.0])],  # better on E1, worse on E2
    }
    lows, highs = rlops.normalization(scores, "base", ["E1", "E2"], {})
    base, new = rlops.compare(scores, "base", lows, highs, reps=1000, confidence=0.95, seed=0)
    assert (new.tag, base.label) == ("new", "baseline")
    assert new.per_env == [1.0, 0.0] and new.improvement.value == pytest.approx(0.5)
    assert new.label == "no detectable difference"
    markdown = rlops.aggregate_section([new, base], "base", ["E1", "E2"], 0.95, 1000, "", "m", 10)
    assert "| new | 1.00 | 0.00 |" in markdown


def test_tags_are_split_on_commas():
    assert parse_tags(" v1.0 ,my-change,,") == ("v1.0", "my-change")
    assert parse_tags("") == ()


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
            str(cwd / "logs"),
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
    benchmark_runs(cwd, "base,extra-tag", range(1, 5), *LEARNING)
    benchmark_runs(cwd, "broken", range(1, 5), "--learning-rate", "1e-7")
    benchmark_runs(cwd, None, range(5, 9), *LEARNING)
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


@pytest.mark.extended  # shares 12 real ppo.py runs (63-81 s of one core): CI runs these after the quick run
def test_runs_record_their_tags_and_untagged_runs_stay_readable(tagged_runs):
    runs = collect_runs([tagged_runs / "runs"], split_by_dir=False)
    by_seed = {(run.seed, run.tags) for run in runs}
    assert {("1", ("base", "extra-tag")), ("1", ("broken",)), ("5", ())} <= by_seed
    assert len(runs) == 12


@pytest.mark.extended
def test_a_broken_learning_rate_is_a_regression_and_fails_the_gate(tagged_runs, tmp_path, capsys):
    code, out, err = run_rlops(tagged_runs / "runs", tmp_path, "--tags", "broken", "base", "--fail-on-regression")
    assert code == 1, err
    assert "rlops: broken vs base: regression" in out
    # the reference's per-env tables, one column per tag, and the files
    assert "| env id | broken | base |" in out
    assert "## Median SPS" in out and "## Runtime (minutes)" in out
    for suffix in (".md", ".png", ".svg"):
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
def test_one_seed_per_tag_says_the_interval_is_undefined(tagged_runs, tmp_path, capsys):
    one = tmp_path / "one"
    for run in collect_runs([tagged_runs / "runs"], split_by_dir=False):
        if run.seed == "1":
            shutil.copytree(run.path, one / run.path.name)
    code, out, err = rlops_in_process(one, tmp_path, capsys, "--tags", "broken", "base")
    assert code == 0, err
    assert "undefined" in out


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
    """What rlops reads of a `wandb.apis.public.Run`: id, config, tags, summary, history and scan_history."""

    def __init__(self, run, index: int):
        self.id = f"run{index}"
        self.config = {"env_id": run.env_id, "exp_name": run.exp_name, "seed": int(run.seed)}
        self.tags = list(run.tags)
        self.summary = {"_runtime": (run.runtime_minutes or 0) * 60}
        self._scalars = read_scalars(run.path)
        self.scanned = False

    def _rows(self, keys):
        step_key, tag = keys
        return [{step_key: step, tag: value} for step, value in self._scalars.get(tag, [])]

    def scan_history(self, keys):
        self.scanned = True
        return iter(self._rows(keys))

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


@pytest.mark.extended
def test_wandb_source_gives_the_local_verdicts(tagged_runs, tmp_path, monkeypatch, capsys):
    import wandb

    local = collect_runs([tagged_runs / "runs"], split_by_dir=False)
    api = FakeApi([FakeWandbRun(run, i) for i, run in enumerate(local)])
    monkeypatch.setattr(wandb, "Api", lambda: api)
    argv = ["--exp-name", "ppo", "--tags", "broken", "base", *WINDOW, "--output-filename", str(tmp_path / "c")]
    code = rlops.main([*argv, "--wandb-project-name", "cleanRL", "--wandb-entity", "me", "--scan-history"])
    assert code == 0
    assert api.paths == ["me/cleanRL"] and all(run.scanned for run in api.remote)
    assert "rlops: broken vs base: regression" in capsys.readouterr().out


def test_wandb_unreachable_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    import wandb

    monkeypatch.setattr(wandb, "Api", lambda: FakeApi([], fail=ConnectionError("Max retries exceeded\nwith url")))
    argv = ["--exp-name", "ppo", "--tags", "a", "b", "--wandb-project-name", "p", "--output-filename", str(tmp_path / "c")]
    assert rlops.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == "rlops: error: cannot read W&B project p: ConnectionError: Max retries exceeded with url"
