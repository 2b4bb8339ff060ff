"""Evaluate a saved `ppo_atari_envpool_xla_jax_scan.py` model (Flax parameters) on whole Atari games of envpool.

The model file holds `flax.serialization.to_bytes([vars(args), [network, actor, critic]])`, each of the
three a `{"params": ...}` tree (the reference project's layout). They are read back into freshly
initialised parameters of the script's `Agent` (its `network`, `actor` and `critic` submodules), which
checks that the file fits the network and the game. Actions are sampled from the policy. A game's return
is its raw score (`info["reward"]`, not clipped) summed until the game is over (`info["terminated"]`,
not a lost life) or cut by the time limit. With `capture_video`, the first game is rendered to
`videos/{run_name}/rl-video-episode-0.mp4`.
"""

import os
import warnings
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from cleanrl_utils.evals.episodes import _collect
from cleanrl_utils.evals.flax_params import parameter_shapes, read_saved_state, restore_params

PARTS = ("network", "actor", "critic")  # the order of the saved parameter trees


def load_agent_params(model_path: str, model: nn.Module, sample_obs: np.ndarray) -> Any:
    """The saved [args, [network, actor, critic]] parameters as parameters of `model` (an `Agent`)."""
    template = parameter_shapes(model, sample_obs)
    saved = read_saved_state(model_path)
    try:
        trees = saved["1"]
        state = {"params": {name: trees[str(i)]["params"] for i, name in enumerate(PARTS)}}
    except (KeyError, TypeError):
        raise ValueError(f"{model_path} does not hold [args, [network, actor, critic]] parameters") from None
    return restore_params(state, template, model_path)


def write_video(frames: list[np.ndarray], folder: str, fps: int = 15) -> None:
    """An mp4 of rgb frames (Atari at 60 frames per second, every 4th seen: 15 per second)."""
    from moviepy import ImageSequenceClip

    os.makedirs(folder, exist_ok=True)
    ImageSequenceClip(frames, fps=fps).write_videofile(f"{folder}/rl-video-episode-0.mp4", logger=None)


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type[nn.Module],
    device: Any = None,  # accepted for the common evaluator signature; JAX places arrays itself
    capture_video: bool = True,
    seed: int = 1,
) -> list[float]:
    try:
        envs = make_env(env_id, seed, 1, capture_video)()
    except (AssertionError, RuntimeError) as e:  # envpool's errors for an id it does not know, or bad settings
        raise gym.error.Error(f"envpool cannot make it ({e}); envpool names Atari games Breakout-v5, Pong-v5, ...") from None
    model = Model(action_dim=envs.action_space.n)
    try:
        params = load_agent_params(model_path, model, envs.observation_space.sample())
    except Exception:
        envs.close()
        raise

    @jax.jit
    def act(obs, key):
        key, action_key = jax.random.split(key)
        logits, _ = model.apply(params, obs)
        u = jax.random.uniform(action_key, shape=logits.shape)  # Gumbel-max: a sample of the softmax policy
        return jnp.argmax(logits - jnp.log(-jnp.log(u)), axis=1), key

    key = jax.random.PRNGKey(seed)
    score = 0.0
    frames: list[np.ndarray] = []
    recording = capture_video  # until the first game ends

    def step(obs: np.ndarray) -> tuple[np.ndarray, list[float]]:
        nonlocal key, score, recording
        if recording:
            frames.append(envs.render()[0])
        action, key = act(obs, key)
        obs, _, _, truncated, info = envs.step(np.asarray(action))
        score += float(info["reward"][0])  # 0 on the step that resets a finished game
        if not (info["terminated"][0] or truncated[0]):
            return obs, []
        finished, score = score, 0.0
        if recording:
            frames.append(envs.render()[0])
            recording = False
        return obs, [finished]

    with warnings.catch_warnings():  # envpool was seeded when made; it warns that _collect's reset(seed=...) is ignored
        warnings.filterwarnings("ignore", message="EnvPool seeds are fixed")
        returns = _collect(envs, step, eval_episodes, seed)
    if capture_video and frames:
        write_video(frames, f"videos/{run_name}")
    return returns
