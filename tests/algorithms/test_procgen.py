"""ppo_procgen.py and ppg_procgen.py: the game names, the envpool episode ends, GAE, reward scaling, PPG's network
and its auxiliary phase. The contract rows (tests/contract/test_script_contract.py) cover the command line and the logs.
"""

import importlib
import math
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.helpers import libgl_missing, missing_system_package, run_in_process

envpool = pytest.importorskip("envpool")

MODULES = ["ppo_procgen", "ppg_procgen"]


@pytest.fixture
def procgen_can_start():
    """The games load Qt 5 (a wheel), which loads the system's libGL: without it, tests that play them skip."""
    if reason := libgl_missing():
        missing_system_package(reason)


@pytest.fixture(params=MODULES)
def module(request, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["x"])
    return importlib.import_module(f"cleanrl.{request.param}")


def test_game_names_map_to_envpool_ids(module, procgen_can_start):
    ids = module.procgen_ids()
    games = {game for game, _ in ids}
    assert len(games) == 16 and {"starpilot", "coinrun", "bigfish", "maze"} <= games
    assert all((game, "easy") in ids and (game, "hard") in ids for game in games)
    assert ids["starpilot", "easy"] == "StarpilotEasy-v0" and ids["heist", "memory"] == "HeistMemory-v0"
    envs = module.make_env("coinrun", "hard", 2, 5)
    config = envs.spec.config
    assert (config.env_name, config.distribution_mode, config.seed, config.num_levels) == ("coinrun", 1, 5, 0)
    assert envs.observation_space.shape == (3, 64, 64) and envs.action_space.n == 15
    envs.close()


def test_missing_qt_names_the_extra_that_brings_it(module, monkeypatch, capsys, procgen_can_start):
    def make(*args, **kwargs):
        raise ImportError("libQt5Core.so.5: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(module.envpool, "make", make)
    exp = module.Experiment(module.Args(), module.__file__)
    with pytest.raises(SystemExit) as exit_info:  # the script makes its envs this way
        exp.make_envs(lambda: module.make_env("starpilot", "easy", 2, 1), "starpilot")
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "libQt5Core" in lines[0] and 'pip install -e ".[procgen]"' in lines[0]


MAPPED_QT = """
import json, sys
from cleanrl.{script} import make_env
envs = make_env("starpilot", "easy", 2, 1)
envs.reset()
maps = {{line.split()[-1] for line in open("/proc/self/maps") if "libQt5Core" in line or "libQt5Gui" in line}}
print(json.dumps(sorted(maps)))
"""


def test_a_missing_libgl_names_its_system_package():
    from cleanrl_utils.runtime import procgen_runtime

    hint = procgen_runtime.install_hint(OSError("libGL.so.1: cannot open shared object file: No such file or directory"))
    assert "apt-get install libgl1" in hint
    assert procgen_runtime.install_hint(ImportError("libQt5Core.so.5: cannot open")) == procgen_runtime.INSTALL_HINT


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps is Linux's")
@pytest.mark.parametrize("script", MODULES)
def test_procgen_runs_on_the_qt_of_the_pyqt5_wheel(script, procgen_can_start):
    """Procgen needs no system Qt 5: the Qt libraries mapped into a process that made a Procgen env are the wheel's.

    The scripts import envpool before they make an env, so this also covers envpool having given up on Procgen
    at import time, before the wheel's libraries were loaded.
    """
    import json
    import subprocess

    from cleanrl_utils.runtime import procgen_runtime

    wheel = procgen_runtime.wheel_lib_dir()
    assert wheel is not None, 'the PyQt5-Qt5 wheel is missing: pip install -e ".[procgen]"'
    out = subprocess.run(
        [sys.executable, "-c", MAPPED_QT.format(script=script)], capture_output=True, text=True, timeout=120, check=True
    )
    mapped = json.loads(out.stdout.strip().splitlines()[-1])
    names = {path.rsplit("/", 1)[-1] for path in mapped}
    assert names == {"libQt5Core.so.5", "libQt5Gui.so.5"}, mapped
    assert all(path.startswith(str(wheel) + "/") for path in mapped), f"Qt mapped from outside the wheel: {mapped}"


def test_game_time_limit_ends_as_a_truncation(procgen_can_start):
    """The scripts keep each game's own time limit, which envpool reports as a truncation (maze: 500 steps)."""
    from cleanrl.ppo_procgen import make_env

    envs = make_env("maze", "easy", 4, 1)
    envs.reset()
    rng = np.random.default_rng(0)
    cut_at = []
    for _ in range(520):
        _, _, term, trunc, infos = envs.step(rng.integers(0, 15, 4))
        assert not (term & trunc).any()
        cut_at += list(infos["elapsed_step"][trunc])
    envs.close()
    assert cut_at and set(cut_at) == {500}  # random walkers rarely find the cheese in 500 steps


def test_gae_bootstraps_truncations_and_stops_at_episode_ends(module):
    gamma, lam = 0.9, 0.5
    rewards = np.array([[1.0], [2.0], [0.0], [4.0]], dtype=np.float32)  # step 2: the autoreset step
    values = np.array([[10.0], [20.0], [30.0], [40.0]], dtype=np.float32)  # values[2]: the episode's last frame
    next_value = np.array([50.0], dtype=np.float32)
    ends = np.array([[False], [True], [False], [False]])

    def gae(terminated):
        terminations = ends & terminated
        return module.compute_gae(rewards, values, next_value, terminations, ends, gamma, lam)[:, 0]

    for terminated, bootstrap in ((True, 0.0), (False, gamma * 30.0)):
        advantages = gae(terminated)
        a3 = 4.0 + gamma * 50.0 - 40.0
        a2 = 0.0 + gamma * 40.0 - 30.0 + gamma * lam * a3
        a1 = 2.0 + bootstrap - 20.0  # nothing of steps 2 and 3 flows back across the end
        a0 = 1.0 + gamma * 20.0 - 10.0 + gamma * lam * a1
        np.testing.assert_allclose(advantages, [a0, a1, a2, a3], rtol=1e-6)


def test_reward_scaler_divides_by_the_std_of_discounted_returns(module):
    gamma = 0.5
    scaler = module.RewardScaler(1, gamma)
    rewards, returns, ret = [1.0, 3.0, -2.0, 5.0, 1.0], [], 0.0
    for r in rewards:
        ret = ret * gamma + r
        returns.append(ret)
        scaled = scaler(np.array([r]), np.array([False]), np.array([True]))
        if len(returns) > 1:  # (the first return alone has no spread: that reward is clipped)
            np.testing.assert_allclose(scaled, [r / math.sqrt(np.var(returns))], rtol=1e-3)
    # the autoreset step neither feeds the statistics nor the running return; an end restarts the return
    var = scaler.var
    scaler(np.array([0.0]), np.array([False]), np.array([False]))
    assert scaler.var == var and scaler.returns[0] == returns[-1]
    scaler(np.array([1.0]), np.array([True]), np.array([True]))
    assert scaler.returns[0] == 0.0
    # constant returns: a tiny std, and the scaled reward is clipped at 10
    scaler = module.RewardScaler(2, 0.0)
    for _ in range(50):
        scaled = scaler(np.array([5.0, 5.0]), np.array([False, False]), np.array([True, True]))
    np.testing.assert_array_equal(scaled, [10.0, 10.0])


def test_channels_last_agent_computes_what_a_channel_first_copy_does(module):
    """The speed layout changes no number that matters, and its saved weights load into a plain agent."""
    torch.manual_seed(0)
    fast = module.Agent(SimpleNamespace(action_space=SimpleNamespace(n=15))).to(memory_format=torch.channels_last)
    plain = module.Agent(SimpleNamespace(action_space=SimpleNamespace(n=15)))
    plain.load_state_dict(fast.state_dict())
    assert fast.network[0][0].weight.is_contiguous(memory_format=torch.channels_last)
    assert plain.network[0][0].weight.is_contiguous()
    frames = torch.randint(0, 256, (6, 3, 64, 64), dtype=torch.uint8)
    actions = torch.arange(6)
    hidden = plain.network(frames / 255.0)  # the reference computation, channel-first throughout
    logp = plain.actor(hidden).log_softmax(-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    logprob, _, value = fast.evaluate_actions(frames, actions)
    torch.testing.assert_close(logprob, logp, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(value, plain.critic(hidden).squeeze(-1), rtol=1e-5, atol=1e-5)


def ppg_agent():
    from cleanrl.ppg_procgen import Agent

    torch.manual_seed(0)
    return Agent(SimpleNamespace(action_space=SimpleNamespace(n=15)))


def test_ppg_layers_have_normalised_initialisation():
    agent = ppg_agent()
    residual = math.sqrt(1 / math.sqrt(3) / math.sqrt(2))  # ≈ 0.639
    expected = {}
    for stage in range(3):
        expected[f"network.{stage}.0.weight"] = 1.0
        for block in (2, 3):
            for conv in ("conv0", "conv1"):
                expected[f"network.{stage}.{block}.{conv}.weight"] = residual
    expected |= {"network.5.weight": 1.4, "actor.weight": 0.1, "critic.weight": 0.1, "aux_critic.weight": 0.1}
    weights = {name: p for name, p in agent.named_parameters() if name.endswith("weight")}
    assert set(weights) == set(expected)
    for name, scale in expected.items():
        w = weights[name].detach()
        norms = w.flatten(1).norm(dim=1)  # one norm per output unit, over its inputs
        torch.testing.assert_close(norms, torch.full_like(norms, scale), msg=name)
    assert all(not p.any() for name, p in agent.named_parameters() if name.endswith("bias"))


def test_ppg_value_trains_the_trunk_only_in_the_auxiliary_phase():
    agent = ppg_agent()
    x = torch.randint(0, 256, (4, 3, 64, 64), dtype=torch.uint8)
    _, _, value = agent.evaluate_actions(x, torch.zeros(4, dtype=torch.long))
    value.sum().backward()
    assert all(p.grad is None for p in agent.network.parameters())  # the policy phase: the head alone
    assert agent.critic.weight.grad is not None
    _, value, aux_value = agent.aux_outputs(x)
    value.sum().backward()
    assert all(p.grad is None for p in agent.network.parameters())
    aux_value.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in agent.network.parameters())


def test_ppg_takes_the_stored_rollouts_it_has_when_fewer_than_a_minibatch(tmp_path, procgen_can_start):
    """The original's own test line: 1 env × 1 iteration stores 1 rollout, less than --num-aux-rollouts 4."""
    args = ("--num-envs", "1", "--num-steps", "64", "--total-timesteps", "256", "--num-minibatches", "2", "--n-iteration", "1")
    run = run_in_process("ppg_procgen.py", *args, cwd=tmp_path, timeout_s=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert [step for step, _ in run.scalars()["losses/aux/kl_loss"]] == [64, 128, 192, 256]  # one phase per iteration


def test_ppg_runs_an_auxiliary_phase_after_every_n_iterations(tmp_path, procgen_can_start):
    """Two phases of two policy iterations: the PPO losses after every iteration, the auxiliary ones after each phase."""
    args = ("--num-envs", "2", "--num-steps", "16", "--num-minibatches", "2", "--n-iteration", "2")
    run = run_in_process(
        "ppg_procgen.py", *args, "--total-timesteps", "128", "--num-aux-rollouts", "2", cwd=tmp_path, timeout_s=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    scalars = run.scalars()
    assert [step for step, _ in scalars["losses/policy_loss"]] == [32, 64, 96, 128]
    for tag in ("losses/aux/kl_loss", "losses/aux/aux_value_loss", "losses/aux/real_value_loss"):
        assert [step for step, _ in scalars[tag]] == [64, 128], tag
        assert all(math.isfinite(v) and v >= 0 for _, v in scalars[tag])
    # the distillation keeps the policy close to the one the phase started from
    assert all(v < 0.05 for _, v in scalars["losses/aux/kl_loss"])


@pytest.mark.extended  # 18 s of one core: CI runs it after the quick run
def test_resumed_run_keeps_the_learner_and_starts_new_games(tmp_path, procgen_can_start):
    """envpool cannot save its games: a resumed ppo_procgen.py run restores the learner and plays new ones.

    4 iterations of 4 envs x 64 steps, a checkpoint every 2; the run is resumed twice from its first
    checkpoint (step 512), each time from a copy of the run folder.
    """
    import shutil

    from cleanrl_utils.runtime import checkpoint as ckpt
    from cleanrl_utils.tensorboard_reader import read_scalars

    args = ("--num-envs", "4", "--num-steps", "64", "--total-timesteps", "1024", "--num-minibatches", "2")
    # in this process: three interpreters importing torch and envpool would cost more than the runs
    first = run_in_process(
        "ppo_procgen.py", *args, "--update-epochs", "1", "--checkpoint-frequency", "2", cwd=tmp_path / "first", timeout_s=300
    )
    assert first.returncode == 0, first.stderr[-3000:]
    saved = [p.name for p in ckpt.checkpoints(first.run_dir / ckpt.CHECKPOINT_DIR)]
    assert saved == ["checkpoint_512.pt", "checkpoint_1024.pt"]

    logs = []
    for copy in ("a", "b"):
        shutil.copytree(tmp_path / "first", tmp_path / copy)
        run_dir = tmp_path / copy / "runs" / first.run_dir.name
        checkpoint = str(run_dir / "checkpoints" / "checkpoint_512.pt")
        resumed = run_in_process("ppo_procgen.py", "--resume", checkpoint, cwd=tmp_path / copy, timeout_s=300)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        logs.append({tag: series for tag, series in read_scalars(run_dir).items() if tag != "charts/SPS"})
        # the optimiser went on from its state: 4 iterations x 1 epoch x 2 minibatches of Adam steps in all
        state = ckpt.read(run_dir / "checkpoints" / "checkpoint_1024.pt")
        assert {float(param["step"]) for param in state["optimizer"]["state"].values()} == {8.0}
    assert logs[0] == logs[1], "resuming the same checkpoint twice gives the same run"

    before = {tag: [(s, v) for s, v in series if s <= 512] for tag, series in read_scalars(first.run_dir).items()}
    resumed_logs = logs[0]
    assert {tag: [(s, v) for s, v in series if s <= 512] for tag, series in resumed_logs.items()} == {
        tag: series for tag, series in before.items() if tag != "charts/SPS"
    }, "what was logged up to the checkpoint stays"
    assert max(s for s, _ in resumed_logs["losses/value_loss"]) == 1024, "it trained to the end"
    # Every episode that ends after the resume began with it: new games, not the checkpoint's half-played ones.
    ends_after = [(s, length) for s, length in resumed_logs["charts/episodic_length"] if s > 512]
    assert ends_after, "starpilot games end within 128 steps of a near-random policy"
    assert all(length <= (s - 512) / 4 for s, length in ends_after), ends_after
