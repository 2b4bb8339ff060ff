"""benchmark/textbook_forms.py: the textbook copies it runs, and the 1.10x bar of its report."""

import dataclasses
import json
import py_compile

from benchmark import textbook_forms as bench


def test_every_case_finds_its_trick_and_its_textbook_copy_compiles(tmp_path):
    for case in bench.CASES:
        source = case.textbook_source()  # exits with one line if the file no longer holds the trick's lines
        assert source != (bench.REPO / "cleanrl" / case.script).read_text()
        copy = tmp_path / case.name / case.script
        copy.parent.mkdir()
        copy.write_text(source)
        py_compile.compile(str(copy), doraise=True)


def test_textbook_copy_trains(tmp_path):
    (case,) = [c for c in bench.CASES if c.script == "ppo_continuous_action.py"]
    short = dataclasses.replace(case, args=("--env-id", "Pendulum-v1", "--total-timesteps", "512", "--num-steps", "256"))
    assert bench.run_one(short, "textbook", tmp_path) > 0
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
