"""Every tool reads its command line as the algorithm scripts do: tyro flags, booleans as flags or as words."""

import dataclasses
import math
import sys
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np
import pytest
import tyro

from cleanrl_utils import enjoy, submit_exp
from cleanrl_utils.benchmark import cli as benchmark_cli
from cleanrl_utils.runtime.command_line import argument_problems, boolean_fields, box_text, check_command_line, parse_args

pytestmark = pytest.mark.fast  # the edit-test loop's tier: pytest -m fast (docs/community/contribution.md)


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
def test_rlops_refuses_missing_exp_name_or_unknown_score_table_exit_2(argv, error, capsys, tmp_path):
    from cleanrl_utils import rlops

    try:
        code = rlops.main([*argv, "--runs-dir", str(tmp_path)])
    except SystemExit as stop:  # the parser's own refusal
        code = stop.code
    assert code == 2 and error in capsys.readouterr().err


# ---- bad input: one line, exit code 2 ----------------------------------------------------------------------------


@dataclass
class RunArgs:
    """The fields the generic checks know, as the algorithm scripts declare them."""

    exp_name: str = "ppo"
    seed: int = 1
    env_id: str = "CartPole-v1"
    wandb_project_name: str = "cleanRL"
    wandb_entity: str | None = None
    hf_entity: str = ""
    total_timesteps: int = 500000
    learning_rate: float = 2.5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    tau: float = 1.0
    v_min: float = -10  # a float field with an int default: checked as a float
    ent_coef: float = 0.01
    clip_coef: float = 0.2
    target_kl: float | None = None
    device_ids: list[int] = field(default_factory=list)
    resume: str | None = None


def test_the_defaults_pass():
    assert argument_problems(RunArgs()) == []
    assert argument_problems(RunArgs(env_id="ALE/Breakout-v5", seed=0, tau=1.0, gamma=0.0, target_kl=0.02)) == []


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"seed": -1}, "--seed must be between 0 and 2147483647"),
        ({"seed": 2**31}, "--seed must be between 0 and 2147483647"),
        ({"learning_rate": math.nan}, "--learning-rate must be a finite number, got nan"),
        ({"learning_rate": -0.0}, "--learning-rate must be positive, got -0.0"),
        ({"v_min": math.inf}, "--v-min must be a finite number, got inf"),
        ({"gamma": 1.5}, "--gamma must be in [0, 1], got 1.5"),
        ({"gae_lambda": -math.inf}, "--gae-lambda must be a finite number, got -inf"),
        ({"tau": 0.0}, "--tau must be in (0, 1], got 0.0"),
        ({"ent_coef": -1.0}, "--ent-coef must not be negative"),
        ({"clip_coef": 0.0}, "--clip-coef must be positive"),
        ({"target_kl": math.nan}, "--target-kl must be a finite number"),
        ({"total_timesteps": -5}, "--total-timesteps must be positive, got -5"),
        ({"total_timesteps": 0}, "--total-timesteps must be positive, got 0"),  # a count every script needs positive
        ({"total_timesteps": 10**30}, "--total-timesteps must be at most 9223372036854775807 (2**63 - 1), got about 10**30"),
        ({"device_ids": [0, -1]}, "--device-ids must not be negative, got -1"),
        ({"resume": "runs/a\0b"}, "--resume contains a NUL character"),
        ({"exp_name": ""}, "--exp-name is empty"),
        ({"exp_name": "a/b"}, "--exp-name cannot contain / or \\"),
        ({"exp_name": ".."}, "--exp-name cannot be '..'"),
        ({"exp_name": "a\nb"}, "--exp-name contains a control character"),
        ({"exp_name": "a\udcffb"}, "--exp-name is not valid UTF-8"),
        ({"exp_name": "x" * 300}, "--exp-name is longer than a file name may be (255 bytes), got 'xxxxxxxxxx"),
        ({"exp_name": "é" * 120}, "--exp-name is too long for the run's folder name"),  # 240 bytes, with the rest 280
        ({"env_id": "../CartPole-v1"}, "--env-id cannot be '..'"),
        ({"env_id": "ALE//Breakout-v5"}, "--env-id is empty"),
        ({"wandb_project_name": "a/b"}, "--wandb-project-name must be 1 to 128 characters"),
        ({"wandb_entity": ""}, "--wandb-entity is empty"),
        ({"hf_entity": "me/you"}, "--hf-entity cannot contain /"),
    ],
)
def test_argument_problems_name_the_flag_and_the_value(changes, problem):
    problems = argument_problems(dataclasses.replace(RunArgs(), **changes))
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_the_counts_every_script_needs_are_positive_and_others_may_be_0():
    assert argument_problems({"buffer_size": 0, "num_envs": 1}) == ["--buffer-size must be positive, got 0"]
    assert argument_problems({"update_epochs": 0}) == ["--update-epochs must be positive, got 0"]
    assert argument_problems({"update_proportion": 0.0}) == ["--update-proportion must be in (0, 1], got 0.0"]
    # learning_starts, checkpoint_frequency: 0 is a setting; batch_size: PPO's is set at start-up
    assert argument_problems({"learning_starts": 0, "checkpoint_frequency": 0, "batch_size": 0}) == []


def test_check_command_line_refuses_at_once_only_when_run_as_a_script(capsys, monkeypatch):
    @dataclass
    class ReplayArgs:
        total_timesteps: int = 1000
        buffer_size: int = 1000
        resume: str | None = None

    monkeypatch.setattr(sys, "argv", ["/somewhere/dqn.py", "--buffer-size", str(10**15)])
    check_command_line(ReplayArgs, "dqn")  # imported as a module: the command line is not read
    with pytest.raises(SystemExit) as stop:
        check_command_line(ReplayArgs, "__main__")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("dqn.py: error: --buffer-size 1000000000000000: a replay memory of")
    assert "(at least 64 bytes per transition), more than this machine's" in err and len(err.splitlines()) == 1
    # on --resume the checkpoint's replay memory size is the run's: checked once it is read
    monkeypatch.setattr(sys, "argv", ["/somewhere/dqn.py", "--buffer-size", str(10**15), "--resume", "runs/x"])
    check_command_line(ReplayArgs, "__main__")
    monkeypatch.setattr(sys, "argv", ["/somewhere/dqn.py", "--seed", "1"])
    with pytest.raises(SystemExit):
        check_command_line(ReplayArgs, "__main__")
    assert capsys.readouterr().err.startswith("dqn.py: error: Unrecognized options: --seed")


def test_a_batch_larger_than_the_replay_memory_is_refused():
    assert argument_problems({"batch_size": 256, "buffer_size": 1000}) == []
    assert argument_problems({"batch_size": 2000, "buffer_size": 1000}) == [
        "--batch-size 2000 is more than the replay memory holds (--buffer-size 1000)"
    ]
    assert argument_problems({"batch_size": 0, "minibatch_size": 0}) == []  # PPO's, set at start-up


def test_argument_problems_of_a_mapping_check_the_values_by_their_types():
    """Arguments read back from a checkpoint: the same checks, NumPy's numbers included."""
    assert argument_problems({"seed": np.int64(-3), "gamma": np.float32(2.0)}) == [
        "--seed must be between 0 and 2147483647 (2**31 - 1), got -3",
        "--gamma must be in [0, 1], got 2.0",
    ]


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--seed", "-1"], "command_line_test.py: error: --seed must be between 0 and 2147483647 (2**31 - 1), got -1"),
        (
            ["--seed", "abc"],
            "command_line_test.py: error: Error parsing --seed: invalid literal for int() with base 10: 'abc'",
        ),
        (["--total-timesteps", "1e30"], "invalid literal for int() with base 10: '1e30'"),
        (["--learning-rate", "nan", "--gamma", "2"], "--learning-rate must be a finite number, got nan; --gamma must be in"),
        (["--learnin-rate", "1"], "Unrecognized options: --learnin-rate, 1 (perhaps you meant --learning-rate)"),
        (["--seed"], "Missing value for argument '--seed'"),
        (["--exp-name", "x" * 500], "--exp-name is longer than a file name may be"),  # not wrapped by tyro's box
        (["--device-ids", "a"], "Error parsing --device-ids"),
    ],
)
def test_parse_args_says_what_is_wrong_in_one_line_with_exit_code_2(argv, line, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/somewhere/command_line_test.py"])
    with pytest.raises(SystemExit) as stop:
        parse_args(RunArgs, argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.splitlines()) == 1 and line in err, err
    assert err.startswith("command_line_test.py: error: ")


def test_a_tool_names_itself_by_its_module(capsys):
    with pytest.raises(SystemExit):
        parse_args(RunArgs, ["--gamma", "inf"], prog="python -m cleanrl_utils.submit_exp")
    assert capsys.readouterr().err == "submit_exp: error: --gamma must be a finite number, got inf\n"


def test_help_still_exits_0(capsys):
    with pytest.raises(SystemExit) as stop:
        parse_args(RunArgs, ["--help"])
    assert stop.value.code == 0 and "--learning-rate" in capsys.readouterr().out


def test_box_text_reads_tyros_box_with_and_without_box_drawing_characters():
    utf8 = (
        "╭─ Unrecognized options ──╮\n│ Unrecognized options: --nn │\n│ ──────── │\n│ Perhaps you meant: │\n"
        "│     --n INT │\n│         (default: 1) │\n│ ──────── │\n│ For full helptext, run prog --help │\n╰────╯\n"
    )
    assert box_text(utf8) == "Unrecognized options: --nn (perhaps you meant --n)"
    ascii_box = " Value error \n ------------ \n  Error parsing --n: bad\n  ------------\n  For full helptext\n \n"
    assert box_text(ascii_box) == "Error parsing --n: bad"
    assert box_text("\x1b[31mnot a box\x1b[0m\n") == ""
    required = "╭─ Required options ─╮\n│ Missing from prog: │\n│     --env-ids [STR [STR ...]] │\n│ (required) │\n│ --command STR │\n╰──╯\n"
    assert box_text(required) == "missing --env-ids, --command"


@pytest.mark.parametrize(
    ("tool", "argv", "line"),
    [
        ("benchmark", [], "benchmark: error: missing --env-ids, --command"),
        ("benchmark", ["--env-ids", "A", "--command", "true", "--start-seed", "-1"], "benchmark: error: --start-seed must be"),
        (
            "benchmark",
            ["--env-ids", "A", "--command", "true", "--num-seeds", "1e3"],
            "benchmark: error: Error parsing --num-seeds",
        ),
        (
            "rlops",
            ["--tags", "a", "--exp-name", "x", "--confidence", "nan"],
            "rlops: error: --confidence must be a finite number",
        ),
        ("rlops", ["--tags", "a", "--exp-name", "x", "--seed", "-1"], "rlops: error: --seed must be between 0 and 2147483647"),
        ("report", ["--smooth", "abc"], "report: error: Error parsing --smooth: invalid literal for int()"),
        ("report", ["--metric-last-n-average-window", "-5"], "report: error: --metric-last-n-average-window must not be"),
        ("enjoy", ["--exp-name", "dqn", "--seed", "-1"], "enjoy: error: --seed must be between 0 and 2147483647"),
        ("submit_exp", ["--num-hours", "nan"], "submit_exp: error: --num-hours must be a finite number, got nan"),
        ("submit_exp", ["--num-hours", "inf"], "submit_exp: error: --num-hours must be a finite number, got inf"),
    ],
)
def test_every_tool_refuses_bad_arguments_in_one_line(tool, argv, line, capsys):
    from cleanrl_utils import report, rlops

    mains = {"benchmark": benchmark_cli.main, "rlops": rlops.main, "report": report.main, "enjoy": enjoy.main}
    mains["submit_exp"] = submit_exp.main
    with pytest.raises(SystemExit) as stop:
        mains[tool](argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith(line) and len(err.splitlines()) == 1, err


# The packages that take seconds to import, for the tools: each refuses a bad flag before it imports any of them
TOOL_SLOW_PACKAGES = ("torch", "jax", "numpy", "gymnasium", "huggingface_hub", "optuna", "sqlalchemy")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["-m", "cleanrl_utils.enjoy", "--exp-name", "dqn", "--seed", "-1"], "enjoy: error: --seed must be between 0"),
        (["-m", "cleanrl_utils.enjoy", "--env-id", "CartPole-v1"], "enjoy: error: missing --exp-name"),
        (["-m", "cleanrl_utils.enjoy", "--exp-name", "nosuch"], "enjoy: error: no model zoo entry for exp name 'nosuch'"),
        (["-m", "cleanrl_utils.enjoy", "--exp-name", "dqn", "--eval-episodes", "0"], "enjoy: error: --eval-episodes must"),
        (["-m", "cleanrl_utils.enjoy", "--exp-name", "dqn", "--model-path", "none.pt"], "enjoy: error: no model file at"),
        (["cleanrl_utils/enjoy.py", "--exp-name", "dqn", "--cuda", "maybe"], "enjoy: error: Unrecognized options: maybe"),
        (["-m", "cleanrl_utils.tuner", "--bogus"], "tuner: error: cleanrl_utils.tuner is a library"),
        (["tuner_example.py", "--num-trials", "0"], "tuner_example.py: error: --num-trials, --num-seeds and"),
        (["tuner_example.py", "--bogus"], "tuner_example.py: error: Unrecognized options: --bogus"),
    ],
)
def test_enjoy_and_the_tuner_refuse_bad_flags_before_the_slow_imports(command, expected, tmp_path):
    """One line and exit code 2 while torch, NumPy, Gymnasium, the Hub's client, Optuna and SQLAlchemy cannot be
    imported (a stand-in that raises ImportError comes first on the path): nothing slow is imported to say so."""
    import subprocess

    from tests.helpers import REPO, script_env

    for package in TOOL_SLOW_PACKAGES:
        (tmp_path / "blocked" / package).mkdir(parents=True)
        (tmp_path / "blocked" / package / "__init__.py").write_text(f"raise ImportError('{package} is imported')\n")
    env = script_env()
    env["PYTHONPATH"] = f"{tmp_path / 'blocked'}:{env['PYTHONPATH']}"
    proc = subprocess.run([sys.executable, *command], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(expected), proc.stderr[-2000:]
