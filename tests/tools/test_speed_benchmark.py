"""benchmark/compare/speed.py: ours, an earlier commit and SB3, alternating, with medians of paired ratios and the bars."""

import json
import re
import sys

import pytest

from benchmark.compare import speed
from tests.contract.test_layout import MEASURED
from tests.helpers import REPO


def fake_runs(sps: dict[str, list[float]], case: str) -> list[dict]:
    """Runs of one case: `sps[side][round - 1]` for each side."""
    return [
        {"round": r + 1, "case": case, "side": side, "sps": value, "wall_s": 10.0, "cpu_s": cpu, "load": 0.5 + r}
        for side, values in sps.items()
        for r, value in enumerate(values)
        for cpu in [20.0 if side == "base" else 10.0]
    ]


def record(runs: list[dict]) -> dict:
    machine = {"cpus": 2, "processor": "x86_64", "python": "3.11", "torch": "2.13", "torch_threads_default": 2}
    return {"command": "python -m benchmark.compare.speed", "ours_commit": "abc1234", "base_commit": "def5678", "date": "2026-12-04", "rounds": 3,
            "scale": 1.0, "machine": machine | {"OMP_NUM_THREADS": None}, "runs": runs}  # fmt: skip


def row(table: str, case: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(f"| {case} |"))


def test_ratios_are_medians_of_each_rounds_pair_and_the_bars_are_applied():
    # dqn: ours/base per round 1.5, 1.2, 1.4 -> median 1.4 >= 1.3 (the medians of the SPS would give 1.4 too,
    # but a round where one side ran slow counts once); SB3 ratio 2.0 each round, no SB3 bar for dqn
    dqn = fake_runs({"ours": [150, 120, 140], "base": [100, 100, 100], "sb3": [75, 60, 70]}, "dqn")
    # sac: 1.1 over base (bar 1.15 missed), 1.5 over SB3 (bar 1.3 met); its SB3 side ran in two rounds only
    sac = fake_runs({"ours": [110, 110, 110], "base": [100, 100, 100], "sb3": [70, 80]}, "sac")
    table = speed.report(record(dqn + sac))
    assert "| dqn | CartPole-v1, 100000 | 140 (150, 120, 140) | 100 (100, 100, 100) | 70 (75, 60, 70) |" in row(table, "dqn")
    # CPU seconds: base took 20 against ours' 10 in each round, SB3 10
    cpu = "| 2.00 (2.00, 2.00, 2.00) | 1.00 (1.00, 1.00, 1.00) | 0.5–2.5 |"
    assert "| 1.40 (1.50, 1.20, 1.40) ≥ 1.3: met | 2.00 (2.00, 2.00, 2.00) " + cpu in row(table, "dqn")
    assert "| 1.10 (1.10, 1.10, 1.10) < 1.15: MISSED | 1.47 (1.57, 1.38) ≥ 1.3: met |" in row(table, "sac")
    assert "| ppo |" not in table, "a case that did not run has no row"
    # the opening line that every file of benchmark/results/ carries (tests/contract/test_layout.py)
    assert MEASURED.match(table.splitlines()[2]), table.splitlines()[2]


def test_rounds_alternate_sides_and_resume_measures_only_the_missing(tmp_path, monkeypatch):
    calls = []

    def measure(case, side, trees):
        calls.append((case.name, side))
        return {"sps": 100.0, "wall_s": 1.0, "cpu_s": 1.0, "load": 0.0}

    monkeypatch.setattr(speed, "measure", measure)
    out = tmp_path / "speed"
    argv = ["--base", str(REPO), "--only", "ppo", "dqn", "--rounds", "2", "--out", str(out)]
    assert speed.main(argv) == 0
    assert calls == [("ppo", "ours"), ("ppo", "base"), ("ppo", "sb3"), ("dqn", "ours"), ("dqn", "base"), ("dqn", "sb3"),
                     ("ppo", "base"), ("ppo", "sb3"), ("ppo", "ours"), ("dqn", "base"), ("dqn", "sb3"), ("dqn", "ours")]  # fmt: skip
    saved = json.loads(out.with_suffix(".json").read_text())
    assert len(saved["runs"]) == 12 and saved["command"].startswith("python -m benchmark.compare.speed --base")
    assert "| ppo | CartPole-v1, 100000 | 100 (100, 100) |" in out.with_suffix(".md").read_text()

    saved["runs"] = [run for run in saved["runs"] if not (run["round"] == 2 and run["case"] == "dqn")]  # a stopped run
    out.with_suffix(".json").write_text(json.dumps(saved))
    calls.clear()
    assert speed.main([*argv, "--rounds", "3", "--resume"]) == 0
    assert calls == [("dqn", "base"), ("dqn", "sb3"), ("dqn", "ours")] + [
        (case, side) for case in ("ppo", "dqn") for side in ("sb3", "ours", "base")
    ]
    assert len(json.loads(out.with_suffix(".json").read_text())["runs"]) == 18

    out.with_suffix(".md").unlink()
    calls.clear()
    assert speed.main([*argv, "--report"]) == 0 and not calls, "--report runs nothing"
    assert "| dqn | CartPole-v1, 100000 | 100 (100, 100, 100) |" in out.with_suffix(".md").read_text()


def test_a_records_title_is_kept_by_a_rerun_a_resume_and_a_report(tmp_path, monkeypatch):
    """Records of different questions share benchmark/results/: each keeps its own title, however it is redone."""
    monkeypatch.setattr(speed, "measure", lambda case, side, trees: {"sps": 100.0, "wall_s": 1.0, "cpu_s": 1.0, "load": 0.0})
    out = tmp_path / "speed_td3"
    argv = ["--base", str(REPO), "--only", "ppo", "--rounds", "1", "--out", str(out)]

    def title() -> str:
        assert (
            json.loads(out.with_suffix(".json").read_text())["title"] == out.with_suffix(".md").read_text().split("\n")[0][2:]
        )
        return out.with_suffix(".md").read_text().split("\n")[0]

    assert speed.main(argv) == 0 and title() == f"# {speed.DEFAULT_TITLE}"
    assert speed.main([*argv, "--title", "TD3 alone, five rounds"]) == 0 and title() == "# TD3 alone, five rounds"
    for again in ([], ["--resume", "--rounds", "2"], ["--report"]):
        assert speed.main([*argv, *again]) == 0 and title() == "# TD3 alone, five rounds", again
    assert speed.main([*argv, "--report", "--title", "TD3 against SB3"]) == 0 and title() == "# TD3 against SB3"
    assert speed.main([*argv, "--report"]) == 0 and title() == "# TD3 against SB3"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--base", "/nonexistent"], "--base /nonexistent: not a checkout of this project (no cleanrl/ folder in it)"),
        (["--base", str(REPO), "--only", "ppo_atary"], "--only ppo_atary: not a name this benchmark knows; one of: "),
        (["--base", str(REPO), "--scale", "0"], "--scale must be positive, got 0"),
        (["--base", str(REPO), "--rounds", "0"], "argument --rounds: must be at least 1, got 0"),
        (
            ["--base", str(REPO), "--sides", "base", "sb3"],
            "--sides must include ours: every ratio is ours against another side",
        ),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(argv, error, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["speed.py"])
    with pytest.raises(SystemExit) as stopped:
        speed.main([*argv, "--out", str(tmp_path / "speed")])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"speed.py: error: {error}")
    assert not any(tmp_path.iterdir()), "nothing ran"


@pytest.mark.extended  # three short runs (ours, base, SB3): about a minute of one core
def test_a_short_round_measures_every_side_from_its_own_tree(tmp_path):
    out = tmp_path / "speed"
    argv = ["--base", str(REPO), "--only", "ppo", "--scale", "0.02", "--rounds", "1", "--out", str(out)]
    assert speed.main(argv) == 0
    runs = json.loads(out.with_suffix(".json").read_text())["runs"]
    assert sorted(run["side"] for run in runs) == ["base", "ours", "sb3"]
    assert all(run["sps"] > 0 and run["cpu_s"] > 0 and run["wall_s"] > 0 for run in runs)
    assert "| ppo | CartPole-v1, 2000 |" in out.with_suffix(".md").read_text()


def test_each_side_runs_its_own_trees_file_with_that_trees_utilities(tmp_path):
    trees = speed.Trees(ours=tmp_path / "ours", base=tmp_path / "base")
    (case,) = [case for case in speed.CASES if case.name == "sac"]
    argv, env = speed.command(case, "base", trees, tmp_path / "sb3.json")
    assert argv[1] == str(tmp_path / "base" / "cleanrl" / "sac_continuous_action.py") and env["PYTHONPATH"] == str(trees.base)
    assert argv[2:] == ["--env-id", "Hopper-v4", "--seed", "1", "--total-timesteps", "6000", "--learning-starts", "1000"]
    argv, env = speed.command(case, "sb3", trees, tmp_path / "sb3.json")
    assert argv[1:3] == [str(REPO / "benchmark" / "compare" / "sb3_baselines.py"), "sac"] and argv[-2:] == [
        "--json",
        str(tmp_path / "sb3.json"),
    ]
    assert "--learning-starts" in argv and env["PYTHONPATH"] == str(REPO)


def test_the_qdagger_case_gives_both_sides_the_same_teacher_file(tmp_path):
    (case,) = [case for case in speed.CASES if case.name == "qdagger_dqn_atari"]
    teacher = tmp_path / "dqn_atari.cleanrl_model"
    trees = speed.Trees(ours=tmp_path / "ours", base=tmp_path / "base", teacher=teacher)
    for side in ("ours", "base"):
        argv, _ = speed.command(case, side, trees, tmp_path / "sb3.json")
        assert argv[1] == str(tmp_path / side / "cleanrl" / "qdagger_dqn_atari_impalacnn.py")
        assert argv[argv.index("--teacher-model-path") + 1] == str(teacher)
    with pytest.raises(ValueError, match="case qdagger_dqn_atari needs a teacher model file"):
        speed.command(case, "ours", speed.Trees(ours=tmp_path, base=tmp_path), tmp_path / "sb3.json")


def test_a_teacher_that_cannot_be_made_stops_the_benchmark_before_any_run(tmp_path, monkeypatch, capsys):
    (tmp_path / "cleanrl").mkdir()
    (tmp_path / "cleanrl" / "dqn_atari.py").write_text("raise SystemExit('dqn_atari: error: no ROMs')\n")
    monkeypatch.setattr(speed, "measure", lambda *a: pytest.fail("no run may start without the teacher"))
    argv = ["--ours", str(tmp_path), "--base", str(REPO), "--only", "qdagger_dqn_atari", "--out", str(tmp_path / "s")]
    assert speed.main(argv) == 1
    err = capsys.readouterr().err
    assert "(the QDagger teacher) exited with code 1" in err and "dqn_atari: error: no ROMs" in err


def test_profile_splits_the_training_loop_into_parts(tmp_path, monkeypatch, capsys):
    from benchmark.compare import speed_profile

    monkeypatch.chdir(tmp_path)
    argv = [str(REPO / "cleanrl" / "ppo.py"), "--total-timesteps", "1024", "--top", "3"]
    assert speed_profile.main(argv) == 0
    out = capsys.readouterr().out
    parts = dict(re.findall(r"^\| ([^|]+) \| [\d.]+ \| (\d+)% \|$", out, re.M))
    assert {"env", "network (forward, backward)", "optimizer", "the script's loop"} <= set(parts)
    assert parts.pop("all of the training loop") == "100" and 95 <= sum(map(int, parts.values())) <= 105  # rounding
    assert "The 3 functions with the most own time" in out
    assert (tmp_path / "runs").is_dir(), "the script ran for real, in the current folder"


def test_profile_of_a_script_that_never_trains_is_one_line(tmp_path, capsys):
    from benchmark.compare import speed_profile

    script = tmp_path / "no_loop.py"
    script.write_text("print('set up, no training')\n")
    with pytest.raises(SystemExit) as stopped:
        speed_profile.main([str(script)])
    assert stopped.value.code == 2
    assert "never entered its training loop" in capsys.readouterr().err.splitlines()[-1]
