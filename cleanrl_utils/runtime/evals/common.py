"""The small pieces the evaluators share, each called in a plain line of an evaluator: making the eval env, the
episode loops, the epsilon-greedy rule, and reading the model files of the PyTorch scripts.

Every evaluator writes its own parameter list and body in its family's module; nothing here wraps or rewrites one.
"""

import random
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.runtime.model_files import ModelFileError, read_torch

Act = Callable[[np.ndarray], Any]
"""A policy: the action(s) for an observation (a batch of them for a vector env)."""

QValues = Callable[[np.ndarray], Any]
"""A network's Q-values (array-like, last axis the actions) for an observation: a torch one through `on_numpy`,
or a jitted JAX function."""


# ---------------------------------------------------------------- the eval env


def make_eval_env(make_env: Callable, env_id: str, run_name: str, capture_video: bool, seed: int) -> gym.Env:
    """One env from a single-env script's factory, its action space seeded for the random actions of epsilon-greedy."""
    env = make_env(env_id, 0, capture_video, run_name)()
    env.action_space.seed(seed)
    return env


def make_eval_vector_env(
    make_env: Callable, env_id: str, run_name: str, capture_video: bool, *env_args: Any, episode_statistics: bool = True
) -> gym.vector.VectorEnv:
    """One sub-env from a vector-env script's own factory (given `env_args` after the usual four), reset in the same step.

    `episode_statistics` adds vector-level episode statistics, read by `recorded_returns`. Leave it off
    where the factory's own statistics must count (Atari whole games, rewards normalised after them):
    `final_info_returns` reads those.
    """
    envs = gym.vector.SyncVectorEnv(
        [make_env(env_id, 0, capture_video, run_name, *env_args)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    return gym.wrappers.vector.RecordEpisodeStatistics(envs) if episode_statistics else envs


@contextmanager
def closed_on_error(env: gym.Env | gym.vector.VectorEnv) -> Iterator[None]:
    """Close `env` if the body (reading a model file into a network) fails, so a bad file leaves nothing running."""
    try:
        yield
    except Exception:
        env.close()
        raise


# ---------------------------------------------------------------- episode loops


def collect_returns(env, step: Callable, eval_episodes: int, seed: int) -> list[float]:
    """Reset `env`, then call `step(obs) -> (obs, returns of the episodes that just ended)` until enough ended.
    `env` is closed after, and on an error."""
    if eval_episodes <= 0:
        env.close()
        raise ValueError(f"eval_episodes must be positive, got {eval_episodes}")
    episodic_returns: list[float] = []
    obs, _ = env.reset(seed=seed)
    try:
        while len(episodic_returns) < eval_episodes:
            obs, finished = step(obs)
            for episodic_return in finished:
                print(f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}")
                episodic_returns.append(episodic_return)
    finally:
        env.close()
    return episodic_returns[:eval_episodes]


def single_env_returns(env: gym.Env, act: Act, eval_episodes: int, seed: int = 0, whole_games: bool = False) -> list[float]:
    """Step one env (wrapped in RecordEpisodeStatistics) until `eval_episodes` episodes end.

    `whole_games` is for the Atari factories: they end an episode at each lost life, for learning, but
    put `info["episode"]` (the raw score, below the life and reward-clipping wrappers) only where the
    game ends. So only those count: a return is a whole game's score, not one life's clipped rewards.
    """

    def step(obs: np.ndarray) -> tuple[np.ndarray, list[float]]:
        obs, _, terminated, truncated, info = env.step(act(obs))
        if not (terminated or truncated):
            return obs, []
        # a lost life ends the episode but not the game: the next life starts from this reset
        counted = not whole_games or "episode" in info
        return env.reset()[0], [float(info["episode"]["r"])] if counted else []

    return collect_returns(env, step, eval_episodes, seed)


def recorded_returns(infos: dict) -> list[float]:
    """Returns of the episodes that ended in a vector-env step, from `make_eval_vector_env`'s episode statistics."""
    return [float(infos["episode"]["r"][i]) for i in np.flatnonzero(infos.get("_episode", []))]


def final_info_returns(infos: dict) -> list[float]:
    """Returns recorded inside the sub-envs of a SAME_STEP vector env, for the episodes that ended in this step."""
    final = infos.get("final_info", {})
    return [float(final["episode"]["r"][i]) for i in np.flatnonzero(final.get("_episode", ()))]


def vector_env_returns_with_memory(
    envs: gym.vector.VectorEnv,
    act: Callable[[np.ndarray, np.ndarray], Any],
    eval_episodes: int,
    seed: int = 0,
    returns: Callable[[dict], list[float]] = recorded_returns,
) -> list[float]:
    """Step a vector env until `eval_episodes` episodes end, counted by `returns(infos)`.

    The policy is `act(obs, ended)`: `ended` flags the sub-envs whose episode ended at the previous step
    (none before the first), for a policy whose memory must not cross into the next episode.
    """
    ended = np.zeros(envs.num_envs, dtype=bool)

    def step(obs: np.ndarray) -> tuple[np.ndarray, list[float]]:
        nonlocal ended
        obs, _, terminations, truncations, infos = envs.step(act(obs, ended))
        ended = terminations | truncations
        return obs, returns(infos)

    return collect_returns(envs, step, eval_episodes, seed)


def vector_env_returns(
    envs: gym.vector.VectorEnv,
    act: Act,
    eval_episodes: int,
    seed: int = 0,
    returns: Callable[[dict], list[float]] = recorded_returns,
) -> list[float]:
    """Step a vector env until `eval_episodes` episodes end, counted by `returns(infos)`, with a policy of the
    observations alone."""

    def step(obs: np.ndarray) -> tuple[np.ndarray, list[float]]:
        obs, _, _, _, infos = envs.step(act(obs))
        return obs, returns(infos)

    return collect_returns(envs, step, eval_episodes, seed)


# ---------------------------------------------------------------- action rules


def on_numpy(
    fn: Callable[[torch.Tensor], torch.Tensor], device: torch.device | str, dtype: torch.dtype | None = None
) -> Callable[[np.ndarray], np.ndarray]:
    """`fn` of tensors as a function of numpy arrays, without gradients: the form the loops and action rules take.

    `dtype` converts the observations first (float32 for the networks of vector observations); None
    keeps theirs (the uint8 Atari frames, which the networks scale themselves).
    """

    def numpy_fn(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return fn(torch.as_tensor(obs, dtype=dtype, device=device)).cpu().numpy()

    return numpy_fn


def epsilon_greedy_fn(q_values: QValues, action_space: gym.Space, epsilon: float) -> Callable[[np.ndarray], int | np.ndarray]:
    """Act greedily on `q_values(obs)`, at random with probability `epsilon`.

    For a vector env (a MultiDiscrete action space) the draw is made per sub-env. `q_values` may be a
    PyTorch network through `on_numpy` or a jitted JAX function.
    """

    def act(obs: np.ndarray) -> int | np.ndarray:
        batched = isinstance(action_space, gym.spaces.MultiDiscrete)  # a vector env's action space
        if not batched and random.random() < epsilon:
            return action_space.sample()
        greedy = np.asarray(q_values(obs)).argmax(-1)
        if not batched:
            return int(greedy)
        return np.where(np.random.random(greedy.shape) < epsilon, action_space.sample(), greedy)

    return act


def whole_game_returns(env: gym.Env, q_values: QValues, epsilon: float, eval_episodes: int, seed: int) -> list[float]:
    """Scores of `eval_episodes` whole Atari games, epsilon-greedy on `q_values` of a batch of one frame stack."""
    act = epsilon_greedy_fn(lambda obs: np.asarray(q_values(obs[None]))[0], env.action_space, epsilon)
    return single_env_returns(env, act, eval_episodes, seed, whole_games=True)


# ---------------------------------------------------------------- PyTorch model files


def read_model_file(model_path: str, device: torch.device | str = "cpu", keys: Collection[str] = (), not_it: str = "") -> Any:
    """What `model_path` holds: tensors and plain values only, the file's kind checked by its bytes first
    (`model_files.read_torch`: TorchScript, legacy torch files and pickles are refused unread). With `keys`, it must
    be a dict of them, else ValueError "`model_path` `not_it`", a line that says which file it is not."""
    try:
        saved = read_torch(model_path, device)
    except ModelFileError as e:  # said as the file the caller expected, then what it is instead
        if not not_it:
            raise
        raise ValueError(f"{model_path} {not_it}: it {str(e).removeprefix(f'{model_path} ')}") from None
    if keys and (not isinstance(saved, dict) or not set(keys) <= saved.keys()):
        raise ValueError(f"{model_path} {not_it}")
    return saved


def with_weights(model: torch.nn.Module, state_dict: dict, device: torch.device | str) -> torch.nn.Module:
    """`model` on `device` with the saved weights, in eval mode (no dropout, noisy layers at their means)."""
    model = model.to(device)
    model.load_state_dict(state_dict)
    return model.eval()


def load_distributional(
    model_path: str, env: gym.Env, Model: type[torch.nn.Module], device: torch.device | str
) -> torch.nn.Module:
    """A C51-style network saved as {model_weights, args}, rebuilt on the support (n_atoms, v_min, v_max) of its args."""
    not_it = "is not a distributional Q-network's model (expected a dict with model_weights and args)"
    saved = read_model_file(model_path, device, {"model_weights"}, not_it)
    support = {key: saved["args"][key] for key in ("n_atoms", "v_min", "v_max")}
    return with_weights(Model(env, **support), saved["model_weights"], device)
