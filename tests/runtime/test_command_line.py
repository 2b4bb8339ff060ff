"""Every tool reads its command line as the algorithm scripts do: tyro flags, booleans as flags or as words."""

import sys
from dataclasses import dataclass
from typing import Annotated

import pytest
import tyro

from cleanrl_utils import enjoy, submit_exp
from cleanrl_utils.benchmark import cli as benchmark_cli
from cleanrl_utils.command_line import boolean_fields, parse_args


@dataclass
class Args:
    plain: bool = False
    annotated: Annotated[bool, tyro.conf.arg(aliases=("-a",))] = False
    count: int = 1


def test_boolean_fields_see_through_annotations_in_both_spellings():
    assert boolean_fields(Args) == {"plain", "annotated"}  # field and flag spellings agree for one-word names
    assert parse_args(Args, ["--annotated", "True", "--plain=false", "--count", "3"]) == Args(False, True, 3)
    assert parse_args(Args, ["--plain", "yes", "--annotated=0"]) == Args(True, False, 1)


def test_benchmark_runner_takes_a_boolean_as_a_word(capsys):
    command = f"{sys.executable} -c pass"
    assert benchmark_cli.main(["--env-ids", "CartPole-v1", "--command", command, "--auto-tag", "False"]) == 0
    assert f"{command} --env-id CartPole-v1 --seed 1" in capsys.readouterr().out


def test_enjoy_takes_a_boolean_as_a_word(capsys):
    with pytest.raises(SystemExit) as stop:  # parsed, then refused for its unknown exp name: one line, exit 2
        enjoy.main(["--exp-name", "nosuch", "--capture-video", "False", "--cuda", "false"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.startswith("enjoy: error: no model zoo entry for exp name 'nosuch'")


def test_submit_exp_takes_a_boolean_as_a_word(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc: no W&B key needed without --track
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    argv = ["--command", "python cleanrl/ppo.py", "--num-seed", "2", "--build", "False", "--push", "no"]
    assert submit_exp.main(argv) == 0
    out = capsys.readouterr().out
    assert "--seed 1" in out and "--seed 2" in out


def test_rlops_takes_booleans_as_words_and_one_exp_name_list_per_tag():
    from cleanrl_utils import rlops

    argv = ["--tags", "new", "base", "--exp-name", "ppo_v2", "--exp-name", "ppo", "dqn", "--strict", "True"]
    args = parse_args(rlops.Args, [*argv, "--fail-on-regression", "false", "--reference-scores", "atari-human"])
    assert (args.exp_names, args.tags, args.strict, args.fail_on_regression) == (
        [["ppo_v2"], ["ppo", "dqn"]],
        ["new", "base"],
        True,
        False,
    )
    assert args.reference_scores == "atari-human" and args.metric_last_n_average_window == 100


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--tags", "a", "b"], "rlops: error: --exp-name and --tags are needed"),
        (["--tags", "a", "--exp-name", "ppo", "--reference-scores", "nope"], "invalid choice"),
    ],
)
def test_rlops_refuses_a_missing_exp_name_or_an_unknown_score_table_with_exit_2(argv, error, capsys, tmp_path):
    from cleanrl_utils import rlops

    try:
        code = rlops.main([*argv, "--runs-dir", str(tmp_path)])
    except SystemExit as stop:  # the parser's own refusal
        code = stop.code
    assert code == 2 and error in capsys.readouterr().err
