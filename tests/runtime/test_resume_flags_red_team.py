"""Red team of `--resume`'s "a flag counts as given when the command line names it" (`named_fields`, `restored_args`).

Hostile spellings tyro takes or refuses, values that look like flags, repeated flags, booleans as words, fields
starting with `no_`, an alias, args made in code, and real scripts resumed end to end (the benchmark runner's resume
command too). The two defects it found (the host process's argv read for args made in code; tyro aliases) are fixed.
"""

from dataclasses import asdict, dataclass

import pytest

from cleanrl import sac_continuous_action
from cleanrl_utils.benchmark.cli import build_runs
from cleanrl_utils.runtime.checkpoint import restored_args
from cleanrl_utils.runtime.command_line import named_fields, parse_args
from cleanrl_utils.runtime.experiment import Experiment
from tests.helpers import run_script


@dataclass
class Args(sac_continuous_action.Args):
    """A real script's arguments as a script "algo.py" on CartPole with two envs."""

    exp_name: str = "algo"
    env_id: str = "CartPole-v1"
    num_envs: int = 2


@dataclass
class NoArgs:
    """A boolean field whose own name starts with `no_`."""

    no_render: bool = False
    track: bool = False
    seed: int = 1


SCRIPT = "/somewhere/algo.py"
# the run being resumed: tracked, checkpointing, saving its model, without cuda, filming, seed 5
RUN = Args(
    track=True,
    checkpoint_frequency=1,
    save_model=True,
    cuda=False,
    capture_video=True,
    seed=5,
    wandb_project_name="proj",
    wandb_entity="team",
)
REPORT = "resume: the checkpoint's arguments win over "


def resumed(argv: list[str], run: Args = RUN) -> Args:
    """`Args` parsed from `argv`, then given the checkpointed `run`'s arguments as `--resume` gives them."""
    return restored_args(parse_args(Args, argv, prog="algo.py"), {"args": asdict(run)}, argv)


# ---- named_fields against what tyro takes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--track=0"], {"track"}),
        (["--track", "0"], {"track"}),
        (["--track", "False", "--track"], {"track"}),
        (["--capture-video", "YES"], {"capture_video"}),
        (["--no_track"], {"track"}),
        (["--no-capture_video"], {"capture_video"}),
        (["--checkpoint_frequency", "0"], {"checkpoint_frequency"}),
        (["--track", "--no-track"], {"track"}),
        (["--cuda", "no", "--cuda", "1"], {"cuda"}),
        (["--wandb-entity", "None"], {"wandb_entity"}),
        (["--exp-name=--track"], {"exp_name"}),  # a value that looks like a flag, after `=`: the value only
        (["--wandb-project-name=--no-track"], {"wandb_project_name"}),
        (["--exp_name=--no-cuda"], {"exp_name"}),
        (["--exp-name", "-", "--track"], {"exp_name", "track"}),
    ],
)
def test_named_fields_of_command_lines_tyro_takes(argv, expected):
    """Every spelling tyro takes names the fields it sets, and no other."""
    parse_args(Args, argv, prog="algo.py")  # tyro takes it
    assert named_fields(Args, argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["--exp-name", "--track"],  # a flag-like value as its own word: tyro wants a value, named_fields sees --track
        ["--wandb-project-name", "--no-track"],
        ["--hf-entity", "--no-save-model"],
        ["--", "--track"],
        ["--checkpoint-frequency", "0", "--", "--no-track"],
        ["--checkp", "0"],  # no abbreviations
        ["--No-track"],
        ["--no-track", "True"],
        ["--no-track=False"],
        ["--track=maybe"],
    ],
)
def test_command_lines_named_fields_over_reads_never_parse(argv, capsys):
    """Where named_fields would count a flag tyro does not set, tyro refuses the command line: exit 2, one line."""
    with pytest.raises(SystemExit) as stop:
        parse_args(Args, argv, prog="algo.py")
    assert stop.value.code == 2 and capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "value"),
    [
        (["--no-render"], True),
        (["--no_render"], True),
        (["--no-render", "False"], False),
        (["--no-no-render"], False),
        (["--no_no_render"], False),
        (["--no-no_render"], False),
    ],
)
def test_a_boolean_field_starting_with_no_is_named_in_every_spelling(argv, value):
    assert parse_args(NoArgs, argv, prog="algo.py").no_render is value
    assert named_fields(NoArgs, argv) == {"no_render"}


# ---- restored_args: what a resume takes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "changed"),
    [
        (["--track", "False"], {"track": False}),
        (["--track=0"], {"track": False}),
        (["--no_track"], {"track": False}),
        (["--no-track", "--track"], {}),  # the last one wins, as tyro takes it
        (["--track", "--no-track"], {"track": False}),
        (["--save-model", "no"], {"save_model": False}),
        (["--no_save_model"], {"save_model": False}),
        (["--cuda", "1"], {"cuda": True}),
        (["--checkpoint_frequency", "0"], {"checkpoint_frequency": 0}),
        (["--wandb-entity", "None"], {"wandb_entity": None}),
        (["--wandb-project-name=--no-track"], {"wandb_project_name": "--no-track"}),  # not --no-track itself
    ],
)
def test_run_control_flags_named_in_any_spelling_win(argv, changed, capsys):
    """Each run-control flag named wins at its value, default or not; the others keep the run's; nothing is reported."""
    args = resumed(["--resume", "runs/x", *argv])
    assert asdict(args) == {**asdict(RUN), "resume": "runs/x", **changed}
    assert capsys.readouterr().err == ""


def test_a_flag_like_value_of_another_flag_is_reported_as_that_flags(capsys):
    """`--exp-name=--no-track` is an exp name: overridden and reported as such, tracking stays on."""
    args = resumed(["--resume", "runs/x", "--exp-name=--no-track"])
    assert (args.exp_name, args.track) == ("algo", True)
    assert capsys.readouterr().err == REPORT + "--exp-name --no-track (the run uses algo)\n"


def test_other_flags_named_are_reported_only_where_they_differ_from_the_run(capsys):
    """Named at the default and differing from the run's: reported. Named at the run's value: not reported."""
    args = resumed(["--resume", "runs/x", "--capture-video", "False", "--seed", "5", "--gamma=0.99", "--seed=5"])
    assert (args.capture_video, args.seed) == (True, 5)
    assert capsys.readouterr().err == REPORT + "--capture-video False (the run uses True)\n"


def test_args_made_in_code_with_a_neutral_command_line_behave_as_before(capsys):
    """No command line: a flag counts as given only where it differs from its default (tracking stays on)."""
    args = restored_args(Args(resume="runs/x", track=False, seed=9, checkpoint_frequency=3), {"args": asdict(RUN)}, [])
    assert (args.track, args.checkpoint_frequency, args.save_model, args.cuda, args.seed) == (True, 3, True, False, 5)
    assert capsys.readouterr().err == REPORT + "--seed 9 (the run uses 5)\n"


# ---- Experiment: args made in code, and flags that go together ---------------------------------------------------


def started_run(monkeypatch, *flags: str) -> str:
    """Run "algo.py" with `flags` and a checkpoint at step 10; its run folder."""
    monkeypatch.setattr("cleanrl_utils.runtime.checkpoint.running_script", lambda: "algo.py")
    monkeypatch.setattr("sys.argv", ["algo.py", *flags])
    _, exp = Experiment.from_command_line(Args, SCRIPT)
    with exp:
        exp.start_logging()
        exp.save_checkpoint(10, {})
    return f"runs/{exp.run_name}"


def test_experiment_made_in_code_keeps_the_runs_values_under_a_neutral_argv(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = started_run(monkeypatch, "--no-cuda", "--save-model", "--checkpoint-frequency", "1")
    monkeypatch.setattr("sys.argv", ["driver.py", "--verbose", "-n", "3"])
    exp = Experiment(Args(resume=folder), SCRIPT)
    assert (exp.args.cuda, exp.args.save_model, exp.checkpoint_frequency) == (False, True, 1)
    exp.writer_lock.release()


def test_experiment_made_in_code_does_not_read_the_host_processs_command_line(tmp_path, monkeypatch):
    """A driver (`python driver.py --no-cuda --save-model`) that resumes a run with `Args(resume=...)` made in code:
    its own argv is not the args' command line, so a flag counts as given only where it differs from its default and
    the run's values go on. (Found by this red team: the driver's `--no-cuda` turned cuda on, `--save-model` saving off.)"""
    monkeypatch.chdir(tmp_path)
    folder = started_run(monkeypatch, "--no-cuda", "--save-model", "--checkpoint-frequency", "1")
    monkeypatch.setattr("sys.argv", ["driver.py", "--no-cuda", "--save-model"])
    exp = Experiment(Args(resume=folder), SCRIPT)
    try:
        assert (exp.args.cuda, exp.args.save_model, exp.checkpoint_frequency) == (False, True, 1)
    finally:
        exp.writer_lock.release()


def test_no_save_model_on_a_run_that_uploads_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """`--no-save-model` alone on a run started with `--upload-model` is refused (exit 2, one line), not run without
    the model it would upload; with `--no-upload-model` too it goes on."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("cleanrl_utils.runtime.huggingface.require_token", lambda: None)
    folder = started_run(monkeypatch, "--save-model", "--upload-model", "--checkpoint-frequency", "1")
    capsys.readouterr()
    monkeypatch.setattr("sys.argv", ["algo.py", "--resume", folder, "--no-save-model"])
    with pytest.raises(SystemExit) as stop:
        Experiment.from_command_line(Args, SCRIPT)
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        "algo.py: error: --upload-model uploads the saved model: add --save-model, or --no-upload-model\n"
    )
    monkeypatch.setattr("sys.argv", ["algo.py", "--resume", folder, "--no-save-model", "--no-upload-model"])
    args, exp = Experiment.from_command_line(Args, SCRIPT)
    assert (args.save_model, args.upload_model) == (False, False)
    exp.writer_lock.release()


# ---- an alias tyro takes -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qdagger_args():
    return pytest.importorskip("cleanrl.qdagger_dqn_atari_impalacnn").Args


@pytest.mark.parametrize(
    "spelling",
    [
        "--teacher-model-path",
        "--teacher-policy-hf-repo",  # found by this red team: an alias named nothing, the override was silent
    ],
)
def test_a_flag_named_by_its_alias_at_its_default_is_reported(qdagger_args, spelling, capsys):
    """qdagger's `--teacher-model-path` has the alias `--teacher-policy-hf-repo` (its published commands use it): named
    at its default (None) on a run with a teacher, the checkpoint's teacher wins, and stderr must say so."""
    argv = ["--resume", "runs/x", spelling, "None"]
    args = parse_args(qdagger_args, argv, prog="qdagger_dqn_atari_impalacnn.py")
    assert args.teacher_model_path is None
    run = qdagger_args(teacher_model_path="teacher.cleanrl_model")
    restored_args(args, {"args": asdict(run)}, argv)
    assert args.teacher_model_path == "teacher.cleanrl_model"
    assert capsys.readouterr().err == REPORT + "--teacher-model-path None (the run uses teacher.cleanrl_model)\n"
    assert named_fields(qdagger_args, argv) == {"resume", "teacher_model_path"}


# ---- real scripts, end to end ------------------------------------------------------------------------------------


def files(run_dir) -> list[str]:
    return sorted(p.name for p in (run_dir / "checkpoints").glob("*.pt")) + sorted(
        p.name for p in run_dir.glob("*.cleanrl_model")
    )


def test_ppo_resumed_with_checkpoints_and_model_off_writes_neither(tmp_path):
    """ppo.py interrupted after checkpoint 1792 (its last checkpoint and model removed): `--checkpoint-frequency 0
    --no-save-model` writes no checkpoint and no model; the benchmark runner's resume command (the run's own command,
    then `--resume runs/<name>`) writes both again and reports nothing."""
    command = ["--total-timesteps", "2048", "--num-steps", "128", "--checkpoint-frequency", "1", "--save-model"]
    spec = build_runs(["ppo.py", *command, "--num-envs", "2"], ["CartPole-v1"], [1])[0]
    first = run_script(*spec.argv, cwd=tmp_path, timeout=120)
    assert first.returncode == 0, first.stderr
    run = first.run_dir
    assert files(run) == ["checkpoint_1792.pt", "checkpoint_2048.pt", "ppo.cleanrl_model"]
    (run / "checkpoints" / "checkpoint_2048.pt").unlink()
    (run / "ppo.cleanrl_model").unlink()

    off = run_script("ppo.py", "--resume", f"runs/{run.name}", "--checkpoint-frequency", "0", "--no-save-model", cwd=tmp_path)
    assert off.returncode == 0, off.stderr
    assert files(run) == ["checkpoint_1792.pt"] and REPORT not in off.stderr

    again = run_script(*spec.argv, "--resume", f"runs/{run.name}", cwd=tmp_path, timeout=120)
    assert again.returncode == 0, again.stderr
    assert files(run) == ["checkpoint_1792.pt", "checkpoint_2048.pt", "ppo.cleanrl_model"]
    assert REPORT not in again.stderr


def test_dqn_resumed_with_flags_as_words_turns_them_off_and_reports_the_rest(tmp_path):
    """dqn.py (off-policy) interrupted after checkpoint 2000: `--checkpoint-frequency=0 --save-model False` writes
    nothing more; `--capture-video False --seed 1` (the run's values) are not reported, `--total-timesteps 4000` is."""
    start = ["--env-id", "CartPole-v1", "--total-timesteps", "3000", "--learning-starts", "500"]
    first = run_script("dqn.py", *start, "--checkpoint-frequency", "1000", "--save-model", cwd=tmp_path, timeout=120)
    assert first.returncode == 0, first.stderr
    run = first.run_dir
    assert files(run) == ["checkpoint_2000.pt", "checkpoint_3000.pt", "dqn.cleanrl_model"]
    (run / "checkpoints" / "checkpoint_3000.pt").unlink()
    (run / "dqn.cleanrl_model").unlink()
    flags = ["--checkpoint-frequency=0", "--save-model", "False", "--capture-video", "False", "--seed", "1"]
    off = run_script("dqn.py", "--resume", f"runs/{run.name}", *flags, "--total-timesteps", "4000", cwd=tmp_path)
    assert off.returncode == 0, off.stderr
    assert files(run) == ["checkpoint_2000.pt"]
    assert [line for line in off.stderr.splitlines() if line.startswith("resume: the")] == [
        REPORT + "--total-timesteps 4000 (the run uses 3000)"
    ]
