"""Evaluators of the JAX scripts: their models are Flax parameters (`flax.serialization.to_bytes`).

| script | evaluator |
|---|---|
| `dqn_jax.py` | `evaluate_dqn`: epsilon-greedy on the Q-values |
| `c51_jax.py` | `evaluate_c51`: epsilon-greedy on the means of the return distributions |
| `ddpg_continuous_action_jax.py`, `td3_continuous_action_jax.py` | `evaluate_deterministic_actor` |
| `sac_continuous_action_jax.py` | `evaluate_sac`: the mean action (or sampled) |
| `dqn_atari_jax.py`, `qdagger_dqn_atari_jax_impalacnn.py` (the student) | `evaluate_dqn_atari`: whole games |
| `c51_atari_jax.py` | `evaluate_c51_atari`: whole games |
| `ppo_atari_envpool_xla_jax_scan.py` | `evaluate_ppo_envpool`: whole games of envpool |

Saved parameters are read back into freshly initialised ones of the script's network, so a file of another
network or env fails with a clear error. Each evaluator writes out the parameters the scripts pass, in their
order (the epsilon-greedy ones take `epsilon` before `capture_video`); `device` is among them for the same calling
convention as the PyTorch evaluators (enjoy passes one) and is ignored: JAX places arrays itself.
"""

import os
import warnings
from collections.abc import Callable
from typing import Any

import flax
import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from cleanrl_utils.runtime.evals.common import (
    closed_on_error,
    collect_returns,
    epsilon_greedy_fn,
    make_eval_env,
    make_eval_vector_env,
    single_env_returns,
    vector_env_returns,
    whole_game_returns,
)
from cleanrl_utils.runtime.model_files import read_flax

# ---------------------------------------------------------------- reading Flax parameters


def restore_params(state: Any, template: Any, model_path: str) -> Any:
    """`state` (a restored state dict) read into the structure of `template`; ValueError if the shapes differ."""
    params = flax.serialization.from_state_dict(template, state)  # raises ValueError on other layer names
    mismatched = [
        f"{jax.tree_util.keystr(path)}: {np.shape(leaf)} in the file, {np.shape(want)} here"
        for (path, leaf), want in zip(jax.tree_util.tree_leaves_with_path(params), jax.tree.leaves(template))
        if np.shape(leaf) != np.shape(want)
    ]
    if mismatched:
        raise ValueError(f"the parameters of {model_path} do not fit this network ({'; '.join(mismatched[:2])})")
    return params


def read_saved_state(model_path: str) -> dict:
    """The state dict in a file of Flax bytes; ValueError if the file holds something else (`model_files.read_flax`:
    a pickle, a torch file, a FIFO or a device is refused unread)."""
    state = read_flax(model_path)
    if not isinstance(state, dict):
        raise ValueError(f"{model_path} is not a file of Flax parameters (it holds a {type(state).__name__})")
    return state


def parameter_shapes(model: nn.Module, sample_obs: np.ndarray) -> Any:
    """The tree of `model`'s parameters as shapes only: tracing `init` costs a fraction of running it op by op
    (an Atari CNN: 0.07 s against 15-24 s on a 2-core CPU), and the saved values fill it in anyway."""
    return jax.eval_shape(model.init, jax.random.PRNGKey(0), sample_obs[None])


def restore_into(model: nn.Module, sample_obs: np.ndarray, state: Any, model_path: str) -> Any:
    """`state` read into the parameters of `model`, whose structure comes from one observation like `sample_obs`."""
    return restore_params(state, parameter_shapes(model, sample_obs), model_path)


def load_params(model_path: str, model: nn.Module, sample_obs: np.ndarray) -> Any:
    """The Flax parameters saved at `model_path`, for `model` initialised on one observation like `sample_obs`."""
    return restore_into(model, sample_obs, read_saved_state(model_path), model_path)


def load_params_with_args(
    model_path: str, build: Callable[[dict], nn.Module], sample_obs: np.ndarray, script: str
) -> tuple[nn.Module, Any, dict]:
    """For a file of {"model_weights": params, "args": training arguments} (the C51 files, whose network needs its
    support from the args): the network `build(args)` makes, its saved parameters, and the args."""
    saved = read_saved_state(model_path)
    if not {"model_weights", "args"} <= saved.keys():
        raise ValueError(f"{model_path} is not a {script} model (expected Flax bytes of a dict with model_weights and args)")
    model = build(saved["args"])
    return model, restore_into(model, sample_obs, saved["model_weights"], model_path), saved["args"]


def load_actor_params(model_path: str, actor_params: Any) -> Any:
    """The saved actor parameters, restored into `actor_params` (same structure and shapes)."""
    saved = read_flax(model_path)
    if not isinstance(saved, dict) or "0" not in saved:
        raise ValueError(f"{model_path} holds no [actor, critic...] list of Flax parameters")
    # the critics' entries are read as they are (target None): only the actor's are checked and kept
    restored = flax.serialization.from_state_dict([actor_params] + [None] * (len(saved) - 1), saved)[0]
    shapes = jax.tree.map(np.shape, restored), jax.tree.map(np.shape, actor_params)
    if shapes[0] != shapes[1]:
        raise ValueError(f"the actor saved in {model_path} does not fit this env's observation and action sizes")
    return restored


# ---------------------------------------------------------------- vector observations


def evaluate_dqn(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: Any = None,
    epsilon: float = 0.05,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    """Play a saved `dqn_jax.py` Q-network (`to_bytes(params)` of `Model`) with epsilon-greedy actions."""
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    model = Model(action_dim=env.action_space.n)
    with closed_on_error(env):
        params = load_params(model_path, model, env.observation_space.sample())
    q_values = jax.jit(lambda obs: model.apply(params, obs))
    return single_env_returns(env, epsilon_greedy_fn(q_values, env.action_space, epsilon), eval_episodes, seed)


def evaluate_c51(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: Any = None,
    epsilon: float = 0.05,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    """Play a saved `c51_jax.py` model, epsilon-greedy on its Q-values (the means of its distributions).

    The file holds `to_bytes({"model_weights": params, "args": training arguments})`: the arguments give the
    support (n_atoms, v_min, v_max).
    """
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)

    def build(args: dict) -> nn.Module:
        return Model(action_dim=env.action_space.n, n_atoms=args["n_atoms"])  # the support is applied below

    with closed_on_error(env):
        model, params, args = load_params_with_args(model_path, build, env.observation_space.sample(), "c51_jax.py")
    atoms = jnp.linspace(args["v_min"], args["v_max"], num=args["n_atoms"])
    q_values = jax.jit(lambda obs: (model.apply(params, obs) * atoms).sum(-1))
    return single_env_returns(env, epsilon_greedy_fn(q_values, env.action_space, epsilon), eval_episodes, seed)


def evaluate_deterministic_actor(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: Any = None,
    capture_video: bool = True,
    seed: int = 0,
    *,
    exploration_noise: float = 0.1,
) -> list[float]:
    """Play a saved `ddpg_continuous_action_jax.py` or `td3_continuous_action_jax.py` actor: `Model` is the script's
    Flax Actor, built from the env's action bounds.

    The file is a list of parameter trees whose first is the actor's: [actor, qf1] for DDPG, [actor, qf1, qf2]
    for TD3. As in training, Gaussian noise of std `exploration_noise` x the action half-range is added and the
    action clipped to the bounds (`exploration_noise=0` plays the deterministic policy).
    """
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video)
    space = envs.single_action_space
    actor = Model(action_low=space.low.astype(np.float32), action_high=space.high.astype(np.float32))
    init_key, key = jax.random.split(jax.random.key(seed))
    obs_shape = (1, *envs.single_observation_space.shape)
    with closed_on_error(envs):
        params = load_actor_params(model_path, jax.jit(actor.init)(init_key, np.zeros(obs_shape, np.float32)))

    @jax.jit
    def explore(obs, key):
        key, noise_key = jax.random.split(key)
        return actor.apply(params, obs, exploration_noise, noise_key, method="explore"), key

    act_deterministic = jax.jit(lambda obs: actor.apply(params, obs))

    def act(obs: np.ndarray) -> np.ndarray:
        nonlocal key
        obs = obs.astype(np.float32)
        if exploration_noise > 0:
            action, key = explore(obs, key)
        else:
            action = act_deterministic(obs)
        return np.asarray(action)

    return vector_env_returns(envs, act, eval_episodes, seed)


def evaluate_sac(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: Any = None,
    capture_video: bool = True,
    seed: int = 0,
    *,
    deterministic: bool = True,
) -> list[float]:
    """Play a saved `sac_continuous_action_jax.py` actor with its mean action (`deterministic=False`: sample as in
    training). `Model` is the script's Flax Actor, built from the env's action bounds.

    The file is the list [actor, qf1, qf2] of parameter trees; only the actor is needed to act. The action is
    tanh(mean) rescaled to the bounds, the usual way to report SAC's learned policy.
    """
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video)
    space = envs.single_action_space
    actor = Model(action_low=space.low.astype(np.float32), action_high=space.high.astype(np.float32))
    init_key, key = jax.random.split(jax.random.key(seed))
    obs_shape = (1, *envs.single_observation_space.shape)
    with closed_on_error(envs):
        params = load_actor_params(model_path, jax.jit(actor.init)(init_key, np.zeros(obs_shape, np.float32)))
    chosen = 2 if deterministic else 0  # get_action gives (sampled action, its log-probability, mean action)

    @jax.jit
    def policy(obs, key):
        key, sample_key = jax.random.split(key)
        return actor.apply(params, obs, sample_key, method="get_action")[chosen], key

    def act(obs: np.ndarray) -> np.ndarray:
        nonlocal key
        action, key = policy(obs.astype(np.float32), key)
        return np.asarray(action)

    return vector_env_returns(envs, act, eval_episodes, seed)


# ---------------------------------------------------------------- Atari


def evaluate_dqn_atari(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: Any = None,
    epsilon: float = 0.05,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    """Play a saved `dqn_atari_jax.py` Q-network (the QDagger student with its IMPALA CNN as `Model`) on whole
    games, epsilon-greedy. Returns are counted as in `cleanrl_utils.runtime.evals.atari`: only when a whole game ends,
    with its raw score."""
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    model = Model(action_dim=env.action_space.n)
    with closed_on_error(env):
        params = load_params(model_path, model, env.observation_space.sample())
    q_values = jax.jit(lambda obs: model.apply(params, obs))
    return whole_game_returns(env, q_values, epsilon, eval_episodes, seed)


def evaluate_c51_atari(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: Any = None,
    epsilon: float = 0.01,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    """Play a saved `c51_atari_jax.py` model on whole games, epsilon-greedy on its Q-values (the means of its
    distributions). The file holds `to_bytes({"model_weights": params, "args": vars(args)})`: the args give the
    support (n_atoms, v_min, v_max) that rebuilds the network."""
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)

    def build(args: dict) -> nn.Module:
        return Model(action_dim=env.action_space.n, **{key: args[key] for key in ("n_atoms", "v_min", "v_max")})

    with closed_on_error(env):
        model, params, _ = load_params_with_args(model_path, build, env.observation_space.sample(), "c51_atari_jax.py")
    q_values = jax.jit(lambda obs: model.apply(params, obs))
    return whole_game_returns(env, q_values, epsilon, eval_episodes, seed)


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


def evaluate_ppo_envpool(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: Any = None,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    """Play a saved `ppo_atari_envpool_xla_jax_scan.py` agent on whole Atari games of envpool, sampling its actions.

    The file holds `to_bytes([vars(args), [network, actor, critic]])`, each of the three a `{"params": ...}` tree
    (the reference project's layout), read into the script's `Agent` (its `network`, `actor` and `critic`
    submodules). A game's return is its raw score (`info["reward"]`, not clipped) summed until the game is over
    (`info["terminated"]`, not a lost life) or cut by the time limit. With `capture_video`, the first game is
    rendered to `videos/{run_name}/rl-video-episode-0.mp4`.
    """
    try:
        envs = make_env(env_id, seed, 1, capture_video)()
    except (AssertionError, RuntimeError) as e:  # envpool's errors for an id it does not know, or bad settings
        raise gym.error.Error(f"envpool cannot make it ({e}); envpool names Atari games Breakout-v5, Pong-v5, ...") from None
    model = Model(action_dim=envs.action_space.n)
    with closed_on_error(envs):
        params = load_agent_params(model_path, model, envs.observation_space.sample())

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

    with warnings.catch_warnings():  # envpool was seeded when made; it warns that the reset(seed=...) is ignored
        warnings.filterwarnings("ignore", message="EnvPool seeds are fixed")
        returns = collect_returns(envs, step, eval_episodes, seed)
    if capture_video and frames:
        write_video(frames, f"videos/{run_name}")
    return returns
