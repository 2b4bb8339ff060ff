"""cleanrl_utils.runtime.experiment in-process: argument spelling, one-line errors, logging, shutdown, checkpoints."""

import os
import signal
import sys
import warnings
from dataclasses import dataclass
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from cleanrl import sac_continuous_action
from cleanrl_utils.runtime import run_folder
from cleanrl_utils.runtime.command_line import bool_words_as_flags, named_fields, parse_args
from cleanrl_utils.runtime.experiment import Experiment
from cleanrl_utils.tensorboard_reader import read_scalars, read_texts
from tests.helpers import event_writer_threads

pytestmark = pytest.mark.fast  # the edit-test loop's tier: pytest -m fast (docs/community/contribution.md)


@dataclass
class Args(sac_continuous_action.Args):
    """A real script's arguments (every run flag, booleans of both defaults, optional strings) as a script "algo.py"
    on CartPole with two envs."""

    exp_name: str = "algo"
    env_id: str = "CartPole-v1"
    num_envs: int = 2


SCRIPT = "/somewhere/algo.py"


@pytest.fixture(autouse=True)
def in_scratch_folder(tmp_path, monkeypatch):
    """An Experiment claims its run folder when it is made: each test makes them in a folder of its own."""
    monkeypatch.chdir(tmp_path)


def fails_with(capsys, call) -> str:
    """The one stderr line of a call that must end in exit code 2."""
    with pytest.raises(SystemExit) as exit_info:
        call()
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("algo.py: error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--autotune", "False"], ["--no-autotune"]),
        (["--autotune", "false", "--seed", "3"], ["--no-autotune", "--seed", "3"]),
        (["--capture-video", "True"], ["--capture-video"]),
        (["--capture_video=False"], ["--no-capture_video"]),
        (["--capture-video", "--seed", "2"], ["--capture-video", "--seed", "2"]),  # a flag without a word stays
        (["--exp-name", "False"], ["--exp-name", "False"]),  # only boolean fields are rewritten
        (["--no-track"], ["--no-track"]),
    ],
)
def test_boolean_words_become_flags(argv, expected):
    assert bool_words_as_flags(Args, argv) == expected


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--seed", "1", "--checkpoint-frequency=0"], {"seed", "checkpoint_frequency"}),
        (["--no-track", "--cuda", "--capture_video", "False"], {"track", "cuda", "capture_video"}),
        (["--no-capture_video", "--no_save_model"], {"capture_video", "save_model"}),
        (["--no-seed", "--nothing", "-s", "--", "seed", "--exp-name", "--gamma"], {"exp_name", "gamma"}),
    ],
)
def test_named_fields_are_those_the_command_line_spells(argv, expected):
    assert named_fields(Args, argv) == expected


def test_parse_args_takes_both_spellings():
    assert parse_args(Args, ["--autotune", "False", "--capture-video"]) == Args(autotune=False, capture_video=True)
    assert parse_args(Args, ["--no-autotune", "--env_id", "Acrobot-v1"]) == Args(autotune=False, env_id="Acrobot-v1")


def test_run_name_and_bad_run_flags_are_one_line(capsys):
    exp = Experiment(Args(seed=3), SCRIPT)
    env_id, name, seed, stamp = exp.run_name.split("__")
    assert (env_id, name, seed) == ("CartPole-v1", "algo", "3") and stamp.isdigit()
    assert "--checkpoint-frequency" in fails_with(capsys, lambda: Experiment(Args(checkpoint_frequency=-1), SCRIPT))
    assert "add --save-model" in fails_with(capsys, lambda: Experiment(Args(upload_model=True), SCRIPT))
    assert "no such checkpoint" in fails_with(capsys, lambda: Experiment(Args(resume="/no/such/run"), SCRIPT))


def test_require_and_require_positive(capsys):
    exp = Experiment(Args(num_envs=0), SCRIPT)
    exp.require(True, "never shown")
    assert fails_with(capsys, lambda: exp.require(False, "a\n  message over\nlines")) == "algo.py: error: a message over lines"
    assert "--num-envs must be positive, got 0" in fails_with(capsys, lambda: exp.require_positive("seed", "num_envs"))


def test_make_envs_turns_env_errors_into_one_line(capsys, monkeypatch):
    exp = Experiment(Args(env_id="NoSuchEnv-v0"), SCRIPT)
    assert "NoSuchEnv" in fails_with(capsys, lambda: exp.make_envs(lambda: gym.make("NoSuchEnv-v0"), "NoSuchEnv-v0"))

    def missing_box2d():
        raise gym.error.DependencyNotInstalled("Box2D is not installed, run `pip install gymnasium[box2d]`")

    line = fails_with(capsys, lambda: exp.make_envs(missing_box2d, "LunarLander-v3"))
    # our extra, not Gymnasium's advice
    assert line.endswith('Box2D is not installed; install it with pip install -e ".[box2d]"')
    # an id whose package is missing is not registered at all: its namespace names the extra
    assert '".[dm_control]"' in fails_with(capsys, lambda: exp.make_envs(missing_box2d, "dm_control/cartpole-balance-v0"))

    def missing_system_library():
        raise OSError("libQt5Core.so.5: cannot open shared object file")

    assert "libQt5Core" in fails_with(capsys, lambda: exp.make_envs(missing_system_library, "bigfish"))
    envs = exp.make_envs(lambda: gym.make("CartPole-v1"), "CartPole-v1")
    assert exp.envs is envs


def test_space_checks_name_the_script_to_use(capsys):
    exp = Experiment(Args(env_id="Pendulum-v1"), SCRIPT)
    env = gym.make("Pendulum-v1")
    exp.require_flat_observations(env.observation_space, see="other.py")
    line = fails_with(capsys, lambda: exp.require_action_space(env.action_space, gym.spaces.Discrete, see="sac.py"))
    assert "Pendulum-v1 has Box" in line and "algo.py needs Discrete ones (see sac.py)" in line
    image = gym.spaces.Box(0, 255, (84, 84, 3), np.uint8)
    assert "needs a flat Box (see cnn.py)" in fails_with(capsys, lambda: exp.require_flat_observations(image, "cnn.py"))


def test_make_envs_shows_warnings_only_once_the_envs_exist(capsys, recwarn):
    exp = Experiment(Args(env_id="Old-v4"), SCRIPT)

    def warn_then(fail: bool):
        def make():
            warnings.warn("Old-v4 is out of date", DeprecationWarning, stacklevel=2)
            if fail:
                raise gym.error.DependencyNotInstalled("mujoco is not installed")
            return gym.make("CartPole-v1")

        return make

    def shown() -> list[str]:  # what reached warnings.showwarning (pytest's recorder stands in for stderr)
        return [str(w.message) for w in recwarn if "out of date" in str(w.message)]

    assert "mujoco is not installed" in fails_with(capsys, lambda: exp.make_envs(warn_then(True), "Old-v4"))
    assert shown() == []  # the failure is the one line, without the warning
    exp.make_envs(warn_then(False), "Old-v4")
    assert shown() == ["Old-v4 is out of date"]  # shown once the envs were made


def test_several_kinds_of_actions_and_no_hint(capsys):
    exp = Experiment(Args(env_id="Pendulum-v1"), SCRIPT)
    space = gym.make("Pendulum-v1").action_space
    exp.require_action_space(gym.spaces.MultiDiscrete([2, 3]), (gym.spaces.Discrete, gym.spaces.MultiDiscrete))
    line = fails_with(capsys, lambda: exp.require_action_space(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)))
    assert line.endswith("algo.py needs Discrete or MultiDiscrete ones")


@pytest.mark.parametrize(
    ("env_id", "expected"),
    [
        ("CartPole-v1", "CartPole-v1 is not an Atari game of ale-py; algo.py needs one (see dqn.py)"),
        ("Pendulum-v1", "algo.py needs Discrete ones (see sac_continuous_action.py)"),
        ("NoSuchGame-v4", "cannot make env 'NoSuchGame-v4'"),
    ],
)
def test_require_atari_game_says_what_the_env_is_instead(capsys, env_id, expected):
    exp = Experiment(Args(env_id=env_id), SCRIPT)
    assert expected in fails_with(
        capsys, lambda: exp.require_atari_game(see="dqn.py", see_continuous="sac_continuous_action.py")
    )
    atari = Experiment(Args(env_id="BreakoutNoFrameskip-v4"), SCRIPT)
    atari.require_atari_game(see="dqn.py", see_continuous="sac_continuous_action.py")  # an ale-py game passes


def test_check_atari_game_raises_gymnasium_errors(monkeypatch):
    from cleanrl_utils.runtime import experiment

    experiment.check_atari_game("BreakoutNoFrameskip-v4")
    with pytest.raises(gym.error.Error, match="CartPole-v1 is not an Atari game of ale-py"):
        experiment.check_atari_game("CartPole-v1")
    monkeypatch.setattr(experiment, "register_atari_games", lambda: False)  # as without the atari extra
    with pytest.raises(gym.error.DependencyNotInstalled, match=r'pip install -e "\.\[atari\]"'):
        experiment.check_atari_game("BreakoutNoFrameskip-v4")


def test_sps_clock_counts_training_only(monkeypatch):
    from cleanrl_utils.runtime import experiment

    now = [1000.0]
    monkeypatch.setattr(experiment.time, "time", lambda: now[0])
    exp = Experiment(Args(), SCRIPT)
    now[0] += 5.0  # making envs, writer and networks: not training (SB3's clock starts in learn() too)
    with exp:
        now[0] += 2.0
        assert exp.elapsed == 2.0
        now[0] += 30.0  # compiling inside the loop
        exp.restart_sps_clock()
        now[0] += 2.0
        assert exp.elapsed == 2.0


def test_sps_clock_of_a_resumed_run_goes_on_from_the_checkpoint(tmp_path, monkeypatch):
    from cleanrl_utils.runtime import experiment

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("cleanrl_utils.runtime.checkpoint.running_script", lambda: "algo.py")
    now = [1000.0]
    monkeypatch.setattr(experiment.time, "time", lambda: now[0])
    exp = Experiment(Args(checkpoint_frequency=1), SCRIPT)
    with exp:
        exp.start_logging()
        now[0] += 40.0
        exp.save_checkpoint(40, {})
    resumed = Experiment(Args(resume=f"runs/{exp.run_name}"), SCRIPT)
    resumed.restore_run_state()
    now[0] += 7.0  # setup of the resumed run
    with resumed:
        now[0] += 3.0
        assert resumed.elapsed == 43.0


def test_resumed_run_keeps_writing_checkpoints_at_its_frequency(tmp_path, monkeypatch):
    """`--resume` alone (as the benchmark runner resumes a stopped run) goes on checkpointing every N iterations."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("cleanrl_utils.runtime.checkpoint.running_script", lambda: "algo.py")
    exp = Experiment(Args(checkpoint_frequency=4), SCRIPT)
    with exp:
        exp.start_logging()
        exp.save_checkpoint(400, {})
    resumed = Experiment(Args(resume=f"runs/{exp.run_name}"), SCRIPT)
    assert [i for i in range(5, 13) if resumed.checkpoint_due(i)] == [8, 12]
    resumed.writer_lock.release()  # one writer at a time: this resume lets go of the folder before the next
    # a frequency given with --resume wins (a run-control flag), and is checked like any other
    assert Experiment(Args(resume=f"runs/{exp.run_name}", checkpoint_frequency=3), SCRIPT).checkpoint_due(6)


def test_seeding_makes_draws_repeat():
    import torch

    draws = []
    for _ in range(2):
        Experiment(Args(seed=7, cuda=False), SCRIPT).seed_global_rngs()
        draws.append((np.random.rand(), torch.rand(1).item()))
    assert draws[0] == draws[1]


def test_from_command_line_gives_the_checkpointed_runs_arguments(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("cleanrl_utils.runtime.checkpoint.running_script", lambda: "algo.py")
    monkeypatch.setattr("sys.argv", ["algo.py", "--seed", "5", "--num-envs", "3", "--checkpoint-frequency", "1"])
    args, exp = Experiment.from_command_line(Args, SCRIPT)
    assert exp.args is args and (args.seed, args.num_envs) == (5, 3) and exp.loaded_checkpoint is None
    with exp:
        exp.start_logging()
        exp.save_checkpoint(10, {})
    monkeypatch.setattr("sys.argv", ["algo.py", "--resume", f"runs/{exp.run_name}", "--no-autotune", "--num-envs", "1"])
    resumed_args, resumed = Experiment.from_command_line(Args, SCRIPT)
    assert (resumed_args.seed, resumed_args.num_envs, resumed_args.autotune) == (5, 3, True)
    assert resumed.run_name == exp.run_name and resumed.loaded_checkpoint["global_step"] == 10


def test_a_resumes_command_line_flag_counts_when_named_even_at_its_default(tmp_path, monkeypatch, capsys):
    """A run-control flag given at its default value still wins (checkpoints off, no model saved, cuda back on); any
    other flag named at its default, and differing from the run's, is reported as overridden, never dropped in silence."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("cleanrl_utils.runtime.checkpoint.running_script", lambda: "algo.py")
    start = ["--seed", "5", "--checkpoint-frequency", "1", "--save-model", "--no-cuda", "--capture-video"]
    monkeypatch.setattr("sys.argv", ["algo.py", *start])
    args, exp = Experiment.from_command_line(Args, SCRIPT)
    with exp:
        exp.start_logging()
        exp.save_checkpoint(10, {})
    capsys.readouterr()
    resume = ["--resume", f"runs/{exp.run_name}", "--checkpoint-frequency=0", "--no-save-model", "--cuda"]
    monkeypatch.setattr("sys.argv", ["algo.py", *resume, "--seed", "1", "--no-capture-video", "--gamma", "0.99"])
    resumed_args, resumed = Experiment.from_command_line(Args, SCRIPT)
    assert (resumed.checkpoint_frequency, resumed_args.save_model, resumed_args.cuda) == (0, False, True)
    assert (resumed_args.seed, resumed_args.capture_video, resumed_args.gamma) == (5, True, 0.99)
    assert capsys.readouterr().err == (
        "resume: the checkpoint's arguments win over --seed 1 (the run uses 5), --capture-video False (the run uses True)\n"
    )
    resumed.writer_lock.release()  # one writer at a time: this resume lets go of the folder before the next
    # not named: the run's run-control values go on (it checkpointed every step, saved its model, ran without cuda)
    monkeypatch.setattr("sys.argv", ["algo.py", "--resume", f"runs/{exp.run_name}"])
    kept_args, kept = Experiment.from_command_line(Args, SCRIPT)
    assert (kept.checkpoint_frequency, kept_args.save_model, kept_args.cuda) == (1, True, False)


def test_restoring_before_the_envs_exist_fails_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("cleanrl_utils.runtime.checkpoint.running_script", lambda: "algo.py")
    exp = Experiment(Args(checkpoint_frequency=1), SCRIPT)
    exp.make_envs(lambda: gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")]), "CartPole-v1")
    with exp:
        exp.start_logging()
        exp.save_checkpoint(10, {})
    resumed = Experiment(Args(resume=f"runs/{exp.run_name}"), SCRIPT)
    assert "call it after make_envs()" in fails_with(capsys, resumed.restore_run_state)
    assert "none was given" in fails_with(capsys, Experiment(Args(), SCRIPT).restore_run_state)


def test_learners_restored_by_name_and_steps_cross_checkpoint_multiples(tmp_path, monkeypatch):
    import torch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("cleanrl_utils.runtime.checkpoint.running_script", lambda: "algo.py")
    exp = Experiment(Args(checkpoint_frequency=5), SCRIPT)
    # 3 envs per step: 3, 6, 9, 12, 15 steps done; due where a multiple of 5 was passed
    assert [done for done in range(3, 18, 3) if exp.checkpoint_due(done, since=done - 3)] == [6, 12, 15]
    net = torch.nn.Linear(2, 1)
    optimizer = torch.optim.Adam(net.parameters())
    net(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    with exp:
        exp.start_logging()
        exp.save_checkpoint(6, {"extra": 1}, {"net": net, "optimizer": optimizer})
    fresh_net = torch.nn.Linear(2, 1)
    fresh_optimizer = torch.optim.Adam(fresh_net.parameters())
    resumed = Experiment(Args(resume=f"runs/{exp.run_name}"), SCRIPT)
    state = resumed.restore_run_state({"net": fresh_net, "optimizer": fresh_optimizer})
    assert state["extra"] == 1 and torch.equal(fresh_net.weight, net.weight)
    assert fresh_optimizer.state_dict()["state"][0]["step"] == 1


def test_logging_writes_hyperparameters_and_tags(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_TAGS", "base,v1")
    exp = Experiment(Args(), SCRIPT)
    with exp:
        writer = exp.start_logging()
        writer.add_scalar("charts/x", 1.0, 5)
    texts = read_texts(tmp_path / "runs" / exp.run_name)
    assert "|env_id|CartPole-v1|" in texts["hyperparameters"] and texts["tags"] == "base,v1"
    assert read_scalars(tmp_path / "runs" / exp.run_name)["charts/x"] == [(5, 1.0)]
    assert Experiment(Args(), SCRIPT).start_logging(log=False) is None  # a worker of a multi-process run


def test_bad_input_after_logging_started_closes_the_writer_and_lets_the_folder_go(tmp_path, capsys):
    """A --resume checkpoint is checked after start_logging: refusing it must not leave TensorBoard's writer thread
    running (in a test or tuner process it would write into whatever folder is current later), lose the events it
    held, or keep the folder's lock from the next attempt."""
    exp = Experiment(Args(), SCRIPT)
    envs = exp.make_envs(lambda: gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")]), "CartPole-v1")
    exp.start_logging()
    assert "refused" in fails_with(capsys, lambda: exp.fail("--resume: refused"))
    assert not event_writer_threads()
    assert envs.closed
    assert "|env_id|CartPole-v1|" in read_texts(tmp_path / "runs" / exp.run_name)["hyperparameters"]
    run_folder.lock(f"runs/{exp.run_name}").release()  # free: the refused run no longer holds it


def test_tracked_run_syncs_its_tensorboard_tags_to_wandb_and_unpatches(tmp_path, monkeypatch):
    import wandb

    from tests.helpers import stop_wandb_service, wait_for_wandb_history_keys

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    exp = Experiment(Args(track=True), SCRIPT)
    with exp:
        exp.start_logging().add_scalar("charts/x", 1.0, 5)
    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    # the tag as logged, not under the run folder's name (W&B's service may still be writing the file)
    assert "charts/x" in wait_for_wandb_history_keys(run_file, {"charts/x"})
    assert wandb.patched["tensorboard"] == []  # TensorBoard writers made after the run are plain again
    stop_wandb_service()  # a later tracked run in this worker starts from a fresh service, in its own folder


class Closable:
    closed = False

    def close(self):
        self.closed = True


def test_signals_stop_the_run_between_steps_and_everything_is_closed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    handlers_before = [signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)]
    exp = Experiment(Args(), SCRIPT)
    exp.envs = Closable()
    steps = 0
    with pytest.raises(SystemExit) as exit_info, exp:
        writer = exp.start_logging()
        for steps in range(1, 100):
            exp.raise_if_stopped()
            writer.add_scalar("charts/step", steps, steps)
            if steps == 3:
                os.kill(os.getpid(), signal.SIGTERM)  # noted, not raised where it lands
    assert exit_info.value.code == 130 and steps == 4  # stopped at the check that starts step 4
    assert "interrupted; what was logged is in runs/" in capsys.readouterr().err
    assert exp.envs.closed
    assert [s for s, _ in read_scalars(tmp_path / "runs" / exp.run_name)["charts/step"]] == [1, 2, 3]
    # the handlers from before are back (not necessarily SIG_DFL: earlier tests in this worker may have set some)
    assert [signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)] == handlers_before


def test_a_signal_is_reported_without_raising_until_the_script_chooses(tmp_path, monkeypatch):
    """`stop_requested` lets ranks finish their rollout and stop together; the run still ends as interrupted."""
    monkeypatch.chdir(tmp_path)
    exp = Experiment(Args(), SCRIPT)
    with pytest.raises(SystemExit) as exit_info, exp:
        exp.start_logging()
        assert not exp.stop_requested()
        os.kill(os.getpid(), signal.SIGTERM)
        assert exp.stop_requested() and exp.stop_requested()  # asking twice neither raises nor forgets
    assert exit_info.value.code == 130


def test_second_signal_stops_at_once_and_a_crash_still_closes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exp = Experiment(Args(), SCRIPT)
    with pytest.raises(SystemExit), exp:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        pytest.fail("the second signal must interrupt at once")
    exp = Experiment(Args(), SCRIPT)
    exp.envs = Closable()
    with pytest.raises(RuntimeError), exp:
        raise RuntimeError("a crash in the training loop")
    assert exp.envs.closed


def test_checkpoint_round_trip_restores_args_envs_and_random_state(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("cleanrl_utils.runtime.checkpoint.running_script", lambda: "algo.py")
    args = Args(checkpoint_frequency=2, num_envs=3, seed=5)
    exp = Experiment(args, SCRIPT)
    envs = exp.make_envs(lambda: gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3), args.env_id)
    envs.reset(seed=5)
    assert [exp.checkpoint_due(i) for i in (1, 2, 3, 4)] == [False, True, False, True]
    with exp:
        exp.start_logging()
        exp.save_checkpoint(40, {"iteration": 2, "weights": np.arange(3)})
    expected_draw, expected_obs = np.random.rand(), envs.step(np.zeros(3, dtype=np.int64))[0]

    resumed_args = Args(resume=f"runs/{exp.run_name}", num_envs=1)  # the checkpoint's arguments win
    resumed = Experiment(resumed_args, SCRIPT)
    assert resumed.run_name == exp.run_name and resumed_args.num_envs == 3 and resumed_args.seed == 5
    fresh = resumed.make_envs(lambda: gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3), args.env_id)
    fresh.reset(seed=99)
    state = resumed.restore_run_state()
    assert state["iteration"] == 2 and state["global_step"] == 40 and list(state["weights"]) == [0, 1, 2]
    assert np.random.rand() == expected_draw
    np.testing.assert_array_equal(fresh.step(np.zeros(3, dtype=np.int64))[0], expected_obs)
    assert resumed.elapsed >= state["elapsed_time"]


def test_evaluation_logs_ten_returns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exp = Experiment(Args(save_model=True), SCRIPT)
    with exp:
        exp.start_logging()
        assert exp.model_path == f"runs/{exp.run_name}/algo.cleanrl_model"
        exp.log_evaluation_and_upload([float(r) for r in range(10)], hub_algorithm_name="ALGO")
    assert read_scalars(tmp_path / "runs" / exp.run_name)["eval/episodic_return"] == [(i, float(i)) for i in range(10)]


@pytest.mark.parametrize(
    ("env", "refused"),
    [
        ({}, True),
        ({"MUJOCO_GL": "glfw"}, True),  # GLFW is the default: it needs a display too
        ({"MUJOCO_GL": "EGL"}, True),  # Gymnasium's renderer and dm_control know the lower-case names only
        ({"MUJOCO_GL": "EGL", "DISPLAY": ":0"}, True),
        ({"MUJOCO_GL": "disable", "DISPLAY": ":0"}, True),  # rendering off
        ({"MUJOCO_GL": "", "DISPLAY": ":0"}, True),  # set but empty: Gymnasium's renderer looks "" up
        ({"MUJOCO_GL": "glfw", "DISPLAY": ":0"}, False),
        ({"MUJOCO_GL": "disable"}, True),
        ({"MUJOCO_GL": "egl"}, False),
        ({"MUJOCO_GL": "osmesa"}, False),
        ({"DISPLAY": ":0"}, False),
        ({"WAYLAND_DISPLAY": "wayland-0"}, False),
        ({"DISPLAY": ""}, True),  # set but empty: no display
    ],
)
def test_mujoco_filming_is_refused_where_it_cannot_render(env, refused, monkeypatch):
    """The rules alone: stand-ins for mujoco and GLFW whose GL contexts always work (real ones that do not are
    tests/runtime/test_headless_video_red_team.py's)."""
    from cleanrl_utils.runtime.experiment import MUJOCO_GL_NAMES, mujoco_problem

    working_context = SimpleNamespace(free=lambda: None)
    monkeypatch.setitem(sys.modules, "mujoco", SimpleNamespace(GLContext=lambda width, height: working_context))
    monkeypatch.setitem(sys.modules, "glfw", SimpleNamespace(init=lambda: True))  # a display GLFW can open
    monkeypatch.setattr("sys.platform", "linux")
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert (mujoco_problem(filming=True) is not None) == refused
    assert (mujoco_problem(filming=False) is None) == (env.get("MUJOCO_GL", "egl") in MUJOCO_GL_NAMES)
