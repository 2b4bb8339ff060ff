"""benchmark/guards/textbook_forms.py: the textbook copies it runs, and the 1.10x bar of its report."""

import dataclasses
import json
import py_compile

import pytest

from benchmark.guards import textbook_forms as bench
from cleanrl_utils import report, rlops


def test_every_case_finds_one_form_in_its_file_and_writes_the_other(tmp_path):
    for case in bench.CASES:
        held = case.held_form()  # exits with one line if the file holds neither form's lines
        assert case.source(held) == (bench.REPO / "cleanrl" / case.script).read_text()
        other = "trick" if held == "textbook" else "textbook"
        copy = tmp_path / case.name / case.script
        copy.parent.mkdir()
        copy.write_text(case.source(other))
        py_compile.compile(str(copy), doraise=True)
        for trick, textbook in case.replacements:  # each form holds its own lines; the textbook form has none of the trick's
            assert trick in case.source("trick") and trick not in case.source("textbook")
            assert textbook in case.source("textbook")


def test_a_file_that_holds_neither_form_is_one_line_error(monkeypatch):
    case = dataclasses.replace(bench.CASES[0], replacements=(("no such line\n", "nor this one\n"),))
    with pytest.raises(SystemExit, match="holds neither form"):
        case.held_form()


@pytest.mark.extended  # 8 s of one core: CI runs it after the quick run
def test_the_copy_in_the_other_form_trains_and_is_named_as_the_file(tmp_path):
    (case,) = [c for c in bench.CASES if c.script == "ppo_continuous_action.py"]
    short = dataclasses.replace(case, args=("--env-id", "Pendulum-v1", "--total-timesteps", "512", "--num-steps", "256"))
    assert bench.run_one(short, "trick", tmp_path) > 0  # the file holds the textbook form: the trick runs from a copy
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("Pendulum-v1__ppo_continuous_action__1__")  # named as the original file's runs


def test_report_keeps_a_trick_only_at_ten_percent(tmp_path):
    fast, slight = bench.CASES[0], bench.CASES[1]
    for case, trick, textbook in ((fast, 120.0, 100.0), (slight, 105.0, 100.0)):
        for round_ in (1, 2, 3):
            for form, sps in (("trick", trick + round_), ("textbook", textbook + round_)):
                bench.result_path(tmp_path, case, form, round_).write_text(json.dumps({"sps": sps}))
    table = bench.report(tmp_path)
    assert f"| {fast.script} | {fast.trick} | 122 (121, 122, 123) | 102 (101, 102, 103) | 1.20× | yes |" in table
    assert (
        f"| {slight.script} | {slight.trick} | 107 (106, 107, 108) | 102 (101, 102, 103) | 1.05× | **no**: use the textbook form |"
        in table
    )
    assert bench.CASES[2].script not in table  # not measured: no row


@pytest.mark.extended  # 15 s of one core: CI runs it after the quick run
def test_learn_runs_both_forms_tagged_and_compares_them_with_rlops(tmp_path):
    checks = {"ppo_continuous_action.py": ("Pendulum-v1", ("--total-timesteps", "512", "--num-steps", "256"))}
    # one seed a side cannot decide anything: the gate says so instead of passing
    assert bench.learn(tmp_path, 1, None, checks) == rlops.EXIT_INCONCLUSIVE
    (case,) = [c for c in bench.CASES if c.script == "ppo_continuous_action.py"]
    out = tmp_path / case.name
    assert sorted(p.name for p in out.glob("*.json")) == ["textbook__101.json", "trick__1.json"]
    runs = report.collect_runs([out], split_by_dir=False)
    tagged = sorted((r.tags, r.exp_name, r.env_id) for r in runs)
    assert tagged == [
        (("textbook",), "ppo_continuous_action", "Pendulum-v1"),
        (("trick",), "ppo_continuous_action", "Pendulum-v1"),
    ]
    compare = (out / "compare.md").read_text()
    assert "textbook" in compare and "trick" in compare
    # run again: every run is done, only the comparison is made again
    before = {p: p.stat().st_mtime_ns for p in out.glob("*.json")}
    assert bench.learn(tmp_path, 1, None, checks) == rlops.EXIT_INCONCLUSIVE
    assert {p: p.stat().st_mtime_ns for p in out.glob("*.json")} == before
