"""The model zoo: the registry covers every script that saves a model, and `enjoy` plays local and Hub models."""

import dataclasses
import importlib
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from cleanrl_utils.enjoy import Args, EnjoyError, enjoy
from cleanrl_utils.runtime.huggingface import push_to_hub
from cleanrl_utils.zoo import ZOO, entry
from tests.fixtures.fake_hub import FakeHub
from tests.helpers import REPO, script_env

SAVING_SCRIPTS = sorted(
    p.stem for p in (REPO / "cleanrl").glob("*.py") if "--save-model" in p.read_text() or "save_model" in p.read_text()
)
DETERMINISTIC_ACTORS = ("ddpg_continuous_action", "td3_continuous_action")  # save (actor, critic...) state dicts
# played in Pendulum-v1, whose returns are negative
CONTINUOUS = ("ppo_continuous_action", "rpo_continuous_action", "sac_continuous_action", *DETERMINISTIC_ACTORS)
FLAX_ACTORS = ("ddpg_continuous_action_jax", "td3_continuous_action_jax", "sac_continuous_action_jax")  # [actor, critics]
PLAYED_IN_PENDULUM = (*CONTINUOUS, *FLAX_ACTORS)
# played in BreakoutNoFrameskip-v4, whose untrained scores can be 0
ATARI = tuple(name for name in ZOO if "atari" in name)
RETURN_LINE = re.compile(r"^eval_episode=\d+, episodic_return=[\d.]+$", re.M)
MEAN_LINE = re.compile(r"^mean return over (\d+) episodes: [\d.]+ \+/- [\d.]+$", re.M)


def save_untrained(exp_name: str, path: Path) -> Path:
    """A freshly initialised model of `exp_name`, saved the way its script saves one."""
    zoo_entry = entry(exp_name)
    model_class, make_env = zoo_entry.Model, zoo_entry.make_env
    torch.manual_seed(0)
    if exp_name == "sac_continuous_action":  # the actor's weights (the critics are not needed to act)
        import gymnasium as gym

        envs = gym.vector.SyncVectorEnv([make_env("Pendulum-v1", 0, False, "unused")])
        torch.save({"actor": model_class(envs).state_dict()}, path)
    elif exp_name in DETERMINISTIC_ACTORS:  # a tuple of state dicts, the actor's first, then the critics'
        import gymnasium as gym

        envs = gym.vector.SyncVectorEnv([make_env("Pendulum-v1", 0, False, "unused")])
        critic = importlib.import_module(f"cleanrl.{exp_name}").QNetwork
        torch.save((model_class(envs).state_dict(), critic(envs).state_dict()), path)
    elif exp_name in CONTINUOUS:  # Gaussian policy: weights and the observation-normalisation statistics
        import gymnasium as gym

        envs = gym.vector.SyncVectorEnv([make_env("Pendulum-v1", 0, False, "unused")])
        obs_rms = {"mean": torch.zeros(3, dtype=torch.float64), "var": torch.ones(3, dtype=torch.float64), "count": 1.0}
        torch.save({"agent": model_class(envs).state_dict(), "obs_rms": obs_rms}, path)
    elif exp_name == "ppo_pettingzoo_ma_atari":  # the shared Agent's state_dict, built on one game copy of Pong
        from cleanrl_utils.runtime.evals.special import make_game

        envs = make_game(make_env, "pong_v3")
        torch.save(model_class(envs).state_dict(), path)
        envs.close()
    elif exp_name == "ppo_atari":
        import gymnasium as gym

        envs = gym.vector.SyncVectorEnv([make_env("BreakoutNoFrameskip-v4", 0, False, "unused")])
        torch.save(model_class(envs).state_dict(), path)
    elif exp_name == "dqn_atari":
        torch.save(model_class(make_env("BreakoutNoFrameskip-v4", 0, False, "unused")()).state_dict(), path)
    elif exp_name in ("c51_atari", "rainbow_atari"):  # weights and the args that give the support
        support = {"n_atoms": 11, "v_min": -10.0, "v_max": 10.0}
        model = model_class(make_env("BreakoutNoFrameskip-v4", 0, False, "unused")(), **support)
        torch.save({"model_weights": model.state_dict(), "args": support}, path)
    elif exp_name in ("sac_atari", "qdagger_dqn_atari_impalacnn"):  # SAC: the actor's weights; QDagger: the student's
        model = model_class(make_env("BreakoutNoFrameskip-v4", 0, False, "unused")())
        torch.save({"actor": model.state_dict()} if exp_name == "sac_atari" else model.state_dict(), path)
    elif exp_name in ("ppo_atari_lstm", "ppo_atari_multigpu"):  # the Agent's state_dict, as ppo_atari saves it
        import gymnasium as gym

        envs = gym.vector.SyncVectorEnv([make_env("BreakoutNoFrameskip-v4", 0, False, "unused")])
        torch.save(model_class(envs).state_dict(), path)
    elif exp_name == "ppo_trxl":  # weights and the arguments that rebuild the agent (a small one, in CartPole-v1)
        import gymnasium as gym

        trxl = {"trxl_num_layers": 1, "trxl_num_heads": 1, "trxl_dim": 16, "trxl_memory_length": 8}
        args = {**trxl, "trxl_positional_encoding": "absolute", "reconstruction_coef": 0.0, "env_id": "CartPole-v1"}
        envs = gym.vector.SyncVectorEnv([make_env("CartPole-v1", 0, False, "unused")])
        model = model_class(SimpleNamespace(**args), envs.single_observation_space, envs.single_action_space, 500)
        torch.save({"model_weights": model.state_dict(), "args": args, "max_episode_steps": 500}, path)
    elif exp_name in ("dqn_jax", "c51_jax"):  # Flax parameters; C51's with the args that give the support
        import flax
        import jax
        import numpy as np

        obs, key = np.zeros(4, np.float32), jax.random.PRNGKey(0)  # CartPole-v1: 4 numbers, 2 actions
        if exp_name == "dqn_jax":
            path.write_bytes(flax.serialization.to_bytes(model_class(action_dim=2).init(key, obs)))
        else:
            support = {"n_atoms": 11, "v_min": -10.0, "v_max": 10.0}
            params = model_class(action_dim=2, n_atoms=11).init(key, obs)
            path.write_bytes(flax.serialization.to_bytes({"model_weights": params, "args": support}))
    elif exp_name in FLAX_ACTORS:  # Flax [actor, critic(s)] params
        import flax
        import gymnasium as gym
        import jax
        import numpy as np

        envs = gym.vector.SyncVectorEnv([make_env("Pendulum-v1", 0, False, "unused")])
        space = envs.single_action_space
        obs, action = np.zeros((1, 3), np.float32), np.zeros((1, 1), np.float32)  # Pendulum-v1: 3 numbers, 1 action
        algorithm = importlib.import_module(f"cleanrl.{exp_name}")
        critic = algorithm.SoftQNetwork() if exp_name.startswith("sac") else algorithm.QNetwork()
        keys = jax.random.split(jax.random.PRNGKey(0), 2 if exp_name.startswith("ddpg") else 3)
        params = [model_class(action_low=space.low, action_high=space.high).init(keys[0], obs)]
        params += [critic.init(key, obs, action) for key in keys[1:]]
        path.write_bytes(flax.serialization.to_bytes(params))
    elif exp_name in ("dqn_atari_jax", "c51_atari_jax", "qdagger_dqn_atari_jax_impalacnn"):  # Flax bytes of the params
        import flax
        import jax

        env = make_env("BreakoutNoFrameskip-v4", 0, False, "unused")()
        support = {"n_atoms": 11, "v_min": -10.0, "v_max": 10.0} if exp_name == "c51_atari_jax" else {}
        model = model_class(action_dim=env.action_space.n, **support)
        params = model.init(jax.random.PRNGKey(0), env.observation_space.sample()[None])
        env.close()  # C51 saves the args that give the support along with the weights
        path.write_bytes(flax.serialization.to_bytes({"model_weights": params, "args": support} if support else params))
    elif exp_name == "ppo_atari_envpool_xla_jax_scan":  # Flax bytes of [args, [network, actor, critic]] parameters
        import flax
        import jax
        import numpy as np

        params = model_class(action_dim=4).init(jax.random.PRNGKey(0), np.zeros((1, 4, 84, 84), np.uint8))["params"]
        parts = [{"params": params[name]} for name in ("network", "actor", "critic")]  # Breakout: 4 actions
        path.write_bytes(flax.serialization.to_bytes([{"env_id": "Breakout-v5"}, parts]))
    elif exp_name in ("ppo", "pqn"):  # vector-env scripts: the network reads the single-env spaces
        import gymnasium as gym

        envs = gym.vector.SyncVectorEnv([make_env("CartPole-v1", 0, False, "unused")])
        torch.save(model_class(envs).state_dict(), path)
    elif exp_name == "ppo_continuous_action_playground":  # the Agent's state_dict, observation statistics included
        torch.save(model_class(SimpleNamespace(observation_size=5, action_size=1)).state_dict(), path)  # CartpoleBalance
    elif exp_name == "c51":
        support = {"n_atoms": 11, "v_min": -10.0, "v_max": 10.0}
        model = model_class(make_env("CartPole-v1", 0, False, "unused")(), **support)
        torch.save({"model_weights": model.state_dict(), "args": support}, path)
    else:
        torch.save(model_class(make_env("CartPole-v1", 0, False, "unused")()).state_dict(), path)
    return path


def run_enjoy(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.enjoy", *args],
        cwd=cwd,
        env=script_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_script_that_saves_a_model_is_in_the_zoo():
    assert SAVING_SCRIPTS, "no algorithm file saves a model?"
    assert set(SAVING_SCRIPTS) <= set(ZOO), f"no zoo entry for {sorted(set(SAVING_SCRIPTS) - set(ZOO))}"
    for exp_name, play in ZOO.items():
        zoo_entry = play()
        assert play.__name__ == exp_name
        assert zoo_entry.Model.__module__.startswith(f"cleanrl.{exp_name}")  # the file's own class, not a sibling's
        assert zoo_entry.make_env.__module__.startswith(f"cleanrl.{exp_name}")
        assert zoo_entry.evaluate.__module__.startswith("cleanrl_utils.runtime.evals.") and isinstance(zoo_entry.Model, type)


# The costliest models to play (6-19 s each of one core: QDagger's IMPALA CNNs, the JAX Atari networks and MJX
# compiling, two-player Pong) are `extended`: CI runs them after the quick run
EXTENDED_ZOO = {
    "c51_atari_jax",
    "dqn_atari_jax",
    "ppo_atari_envpool_xla_jax_scan",
    "ppo_continuous_action_playground",
    "ppo_pettingzoo_ma_atari",
    "qdagger_dqn_atari_impalacnn",
    "qdagger_dqn_atari_jax_impalacnn",
}


@pytest.mark.parametrize(
    "exp_name", [pytest.param(name, marks=pytest.mark.extended) if name in EXTENDED_ZOO else name for name in sorted(ZOO)]
)
def test_enjoy_plays_each_zoo_model(exp_name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    model = save_untrained(exp_name, tmp_path / f"{exp_name}.cleanrl_model")
    if exp_name in PLAYED_IN_PENDULUM:
        returns = enjoy(Args(exp_name=exp_name, model_path=str(model), eval_episodes=3, env_id="Pendulum-v1"))
        out = capsys.readouterr().out
        assert len(returns) == 3 and all(-2000 < r < 0 for r in returns)  # 200 steps of a cost in [-16.3, 0]
        assert len(re.findall(r"^eval_episode=\d+, episodic_return=-[\d.]+$", out, re.M)) == 3
        return
    if exp_name == "ppo_continuous_action_playground":
        # a batch of 4 CartpoleBalance envs, episodes of 50 steps paying at most 1 each: the shapes of the contract's
        # smoke run, so the MJX step it compiled comes from the test session's JAX cache
        playground = ZOO[exp_name]
        monkeypatch.setitem(ZOO, exp_name, lambda: dataclasses.replace(playground(), eval_kwargs={"episode_length": 50}))
        returns = enjoy(Args(exp_name=exp_name, model_path=str(model), eval_episodes=4, env_id="CartpoleBalance"))
        assert len(returns) == 4 and all(0 < r <= 50 for r in returns)
        assert len(RETURN_LINE.findall(capsys.readouterr().out)) == 4
        return
    if exp_name == "ppo_pettingzoo_ma_atari":  # Pong against a random player, games cut after 100 agent steps
        pettingzoo = ZOO[exp_name]

        def short_games():
            zoo_entry = pettingzoo()
            return dataclasses.replace(zoo_entry, eval_kwargs={**zoo_entry.eval_kwargs, "max_cycles": 400})

        monkeypatch.setitem(ZOO, exp_name, short_games)
        args = Args(exp_name=exp_name, model_path=str(model), eval_episodes=2, env_id="pong_v3", capture_video=True)
        returns = enjoy(args)
        assert len(returns) == 2 and all(r == int(r) >= 0 for r in returns)  # points won per game
        assert MEAN_LINE.search(capsys.readouterr().out).group(1) == "2"
        videos = sorted(v.name for v in (tmp_path / "videos").glob("pong_v3__ppo_pettingzoo_ma_atari__enjoy__*/*.mp4"))
        assert videos == ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4"]  # filmed with the script's recorder
        return
    if exp_name in ATARI:
        env_id = "Breakout-v5" if "envpool" in exp_name else "BreakoutNoFrameskip-v4"  # envpool's own Atari ids
        returns = enjoy(Args(exp_name=exp_name, model_path=str(model), eval_episodes=2, env_id=env_id))
        assert len(returns) == 2 and all(r >= 0 for r in returns)
        assert MEAN_LINE.search(capsys.readouterr().out).group(1) == "2"
        return
    returns = enjoy(Args(exp_name=exp_name, model_path=str(model), eval_episodes=3))
    out = capsys.readouterr().out
    assert len(returns) == 3 and all(r >= 1 for r in returns)
    assert len(RETURN_LINE.findall(out)) == 3 and MEAN_LINE.search(out).group(1) == "3"


def test_enjoy_is_reproducible_and_captures_video(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    model = str(save_untrained("dqn", tmp_path / "dqn.cleanrl_model"))
    first = enjoy(Args(exp_name="dqn", model_path=model, eval_episodes=2, capture_video=True))
    assert first == enjoy(Args(exp_name="dqn", model_path=model, eval_episodes=2))
    videos = list((tmp_path / "videos").glob("CartPole-v1__dqn__enjoy__*/*.mp4"))
    assert videos and all(v.read_bytes()[4:8] == b"ftyp" for v in videos)
    assert "videos in videos/CartPole-v1__dqn__enjoy__" in capsys.readouterr().out


def test_enjoy_command_line_plays_a_local_model(tmp_path):
    model = save_untrained("dqn", tmp_path / "dqn.cleanrl_model")
    proc = run_enjoy("--exp-name", "dqn", "--env-id", "CartPole-v1", "--model-path", str(model), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(RETURN_LINE.findall(proc.stdout)) == 10 and MEAN_LINE.search(proc.stdout).group(1) == "10"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            {"exp_name": "nosuch"},
            f"no model zoo entry for exp name 'nosuch'; known: {', '.join(sorted(ZOO))}",
        ),
        ({"exp_name": "dqn", "model_path": "missing.cleanrl_model"}, "no model file at missing.cleanrl_model"),
        ({"exp_name": "dqn", "eval_episodes": 0}, "--eval-episodes must be positive"),
        ({"exp_name": "dqn", "env_id": "Acrobot-v1"}, "does not fit dqn in Acrobot-v1: Error(s) in loading state_dict"),
        ({"exp_name": "dqn", "env_id": "NoSuchEnv-v0"}, "cannot make env 'NoSuchEnv-v0'"),
        ({"exp_name": "c51"}, "does not fit c51 in CartPole-v1"),
    ],
)
def test_enjoy_errors_are_one_clear_line(args, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    save_untrained("dqn", tmp_path / "dqn.cleanrl_model")
    args.setdefault("model_path", "dqn.cleanrl_model")
    with pytest.raises(EnjoyError, match=re.escape(expected)):
        enjoy(Args(**args))


def test_enjoy_rejects_a_file_that_is_not_a_model(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model\n")
    proc = run_enjoy("--exp-name", "dqn", "--model-path", "notes.txt", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("enjoy: error: notes.txt is not a model file saved by an algorithm script")


@pytest.fixture
def hub(tmp_path):
    """A fake Hub holding tester/CartPole-v1-dqn-seed3 (uploaded with push_to_hub), and an empty Hub cache."""
    from huggingface_hub import HfApi

    hub = FakeHub().start()
    run_dir = tmp_path / "upload" / "runs" / "r"
    run_dir.mkdir(parents=True)
    save_untrained("dqn", run_dir / "dqn.cleanrl_model")
    args = SimpleNamespace(env_id="CartPole-v1", exp_name="dqn", seed=3, hf_entity="")
    push_to_hub(
        args, [9.0, 10.0], "DQN", run_dir, "", REPO / "cleanrl" / "dqn.py", api=HfApi(endpoint=hub.url, token=hub.token)
    )
    yield hub
    hub.stop()


def hub_env(hub: FakeHub, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf_home"), "HF_TOKEN": hub.token, **extra}


@pytest.mark.extended  # 14 s of one core: CI runs it after the quick run
def test_enjoy_downloads_from_the_hub_then_plays_from_the_offline_cache(hub, tmp_path):
    repo_args = ("--exp-name", "dqn", "--hf-entity", "tester", "--seed", "3", "--eval-episodes", "4")
    online = run_enjoy(*repo_args, cwd=tmp_path, **hub_env(hub, tmp_path))
    assert online.returncode == 0, online.stderr
    assert "from the Hub repo tester/CartPole-v1-dqn-seed3" in online.stdout
    assert ("GET", "/tester/CartPole-v1-dqn-seed3/resolve/main/dqn.cleanrl_model") in hub.requests
    cached = list(
        (tmp_path / "hf_home" / "hub" / "models--tester--CartPole-v1-dqn-seed3" / "snapshots").glob("*/dqn.cleanrl_model")
    )
    assert len(cached) == 1

    # With the Hub gone and HF_HUB_OFFLINE=1, the same command plays the cached model: same episodes.
    hub.stop()
    offline = run_enjoy(*repo_args, cwd=tmp_path, **hub_env(hub, tmp_path, HF_HUB_OFFLINE="1"))
    assert offline.returncode == 0, offline.stderr
    assert RETURN_LINE.findall(offline.stdout) == RETURN_LINE.findall(online.stdout)
    assert len(RETURN_LINE.findall(offline.stdout)) == 4

    # --hf-repository names the repo directly
    direct = run_enjoy(
        "--exp-name", "dqn", "--hf-repository", "tester/CartPole-v1-dqn-seed3", "--seed", "3", "--eval-episodes", "4",
        cwd=tmp_path, **hub_env(hub, tmp_path, HF_HUB_OFFLINE="1"),
    )  # fmt: skip
    assert direct.returncode == 0 and RETURN_LINE.findall(direct.stdout) == RETURN_LINE.findall(online.stdout)


@pytest.mark.parametrize(
    ("args", "offline", "expected"),
    [
        (("--hf-entity", "tester", "--seed", "4"), False, "Hub repo tester/CartPole-v1-dqn-seed4 not found"),
        (("--hf-entity", "nobody", "--seed", "3"), False, "Hub repo nobody/CartPole-v1-dqn-seed3 not found"),
        (("--hf-entity", "tester", "--seed", "3"), True, "HF_HUB_OFFLINE is set and it is not in the local Hub cache"),
    ],
    ids=["other seed", "other entity", "offline and not cached"],
)
def test_enjoy_hub_errors_are_one_clear_line(hub, tmp_path, args, offline, expected):
    extra = {"HF_HUB_OFFLINE": "1"} if offline else {}
    proc = run_enjoy("--exp-name", "dqn", *args, cwd=tmp_path, **hub_env(hub, tmp_path, **extra))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("enjoy: error: ") and expected in lines[0], proc.stderr


def test_enjoy_names_a_missing_file_in_an_existing_repo(hub, tmp_path):
    hub.repos["tester/CartPole-v1-ppo-seed3"] = {"README.md": b"no model here"}
    proc = run_enjoy("--exp-name", "ppo", "--hf-entity", "tester", "--seed", "3", cwd=tmp_path, **hub_env(hub, tmp_path))
    assert proc.returncode == 2
    assert "Hub repo tester/CartPole-v1-ppo-seed3 has no file ppo.cleanrl_model" in proc.stderr
