"""Evaluators of the scripts that play in their own way: with memory, in self-play, or on GPU-batched envs.

| script | evaluator |
|---|---|
| `ppo_trxl/ppo_trxl.py` | `evaluate_trxl`: the policy with its Transformer-XL episodic memory |
| `ppo_pettingzoo_ma_atari.py` | `evaluate_pettingzoo`: the self-play policy against a random player |
| `ppo_continuous_action_playground.py` | `evaluate_playground`: a batch of MuJoCo Playground envs, filmed by `FirstEnvVideo` |

**Self-play.** In self-play one policy holds both paddles, so the training returns stay near 0 however well it
plays. Here the policy holds one side of each game and the other side presses uniformly random buttons; the
policy takes side 0 (`first_0`) in even-numbered games and side 1 (`second_0`) in odd ones, so that
neither seat's advantage decides the result. A game's score is the number of points the policy's side
won: the steps at which its reward was positive. The script's wrappers clip rewards to ±1, so in Pong
a +1 is one point; points lost and Pong's penalty for serving late (both -1) do not count. The same
count for a random player on the policy's side (`act=None`) is the baseline a trained policy should beat.

The games run on the script's own env stack (`make_vector_env` with 2 player envs: one game copy, its
players as envs 0 and 1), so both players' episodes end together, when the game is over or cut by
`max_cycles`. The random actions come from a NumPy Generator seeded with `seed`, and the emulator is
reset with `seed` too: the same seed and policy play the same games.

**Playground.** The saved file is the agent's `state_dict`; the observation-normalisation statistics are buffers
of the agent (`obs_rms.mean/var/count`), so loading the weights restores them too. The evaluator steps a batch
of the task (the script's `make_env`), reads observations and hands actions over through DLPack as
training does, and keeps each env's episodes in turn: env i's j-th episode is the evaluation episode
j * num_envs + i, so short episodes are not favoured over long ones by finishing first.
"""

import atexit
import os
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.runtime.evals.common import (
    Act,
    closed_on_error,
    collect_returns,
    make_eval_vector_env,
    on_numpy,
    read_model_file,
    vector_env_returns_with_memory,
    with_weights,
)

# ---------------------------------------------------------------- memory


def load_agent(
    model_path: str, Model: type[torch.nn.Module], envs: gym.vector.VectorEnv, device: torch.device | str
) -> torch.nn.Module:
    """The agent of a saved model, rebuilt from its stored arguments, in eval mode."""
    saved = read_model_file(model_path, device)
    args = SimpleNamespace(**saved["args"])
    agent = Model(args, envs.single_observation_space, envs.single_action_space, saved["max_episode_steps"])
    return with_weights(agent, saved["model_weights"], device)


def memory_policy(agent: torch.nn.Module, device: torch.device | str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """`act(obs, done)` for a one-env vector env: the action for `obs`; `done` (of the previous step) empties the memory."""
    memory = agent.new_memory(1, device)
    episode_step = torch.full((1,), -1, dtype=torch.long, device=device)

    def act(obs: np.ndarray, done: np.ndarray) -> np.ndarray:
        if done.any():
            memory.zero_()
            episode_step.fill_(-1)
        episode_step.add_(1)
        with torch.inference_mode():
            action = agent.act(torch.as_tensor(obs, device=device), memory, episode_step)[0]
        return (action[:, 0] if action.shape[1] == 1 else action).cpu().numpy()

    return act


def evaluate_trxl(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: torch.device | str = "cpu",
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    """Play a saved `ppo_trxl/ppo_trxl.py` agent: the policy samples its actions with its episodic memory, as in
    training. The file holds the weights and the arguments that rebuild the agent (`model_weights`, `args`,
    `max_episode_steps`); the memory of the episode under way is emptied when it ends."""
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video)
    with closed_on_error(envs):
        act = memory_policy(load_agent(model_path, Model, envs, device), device)
    return vector_env_returns_with_memory(envs, act, eval_episodes, seed)


# ---------------------------------------------------------------- self-play


MAX_CYCLES = 100_000
"""Emulator frames after which a game is cut: the script's default `--max-cycles` (PettingZoo's own)."""


def make_game(
    make_env: Callable, env_id: str, max_cycles: int = MAX_CYCLES, capture_video: bool = False
) -> gym.vector.VectorEnv:
    """One copy of the game from the script's `make_vector_env`, its two players as envs 0 and 1.

    The single-env spaces are set as the script sets them, so the script's `Agent(envs)` can be built on it.
    """
    envs = make_env(env_id, 2, max_cycles, capture_video)
    envs.single_observation_space, envs.single_action_space = envs.observation_space, envs.action_space
    return envs


def play_against_random(
    envs: gym.vector.VectorEnv, act: Act | None, games: int, seed: int = 0, video: Any = None
) -> list[float]:
    """Points of the policy's side in each of `games` games against a uniformly random opponent; `envs` is closed after.

    `envs` is one game copy (`make_game`). The policy's side is player `game % 2`. `act` maps a batch of
    observations (here one) to a batch of actions (as `on_numpy` makes of a network); None puts a random
    player on the policy's side as well. `video`, the script's `VideoRecorder` on `envs`, is told of each step.
    """
    rng = np.random.default_rng(seed)
    num_actions = envs.single_action_space.n
    game, points = 0, 0.0

    def step(obs: np.ndarray) -> tuple[np.ndarray, list[float]]:
        nonlocal game, points
        side = game % 2
        actions = rng.integers(num_actions, size=2)  # drawn for both sides, so the opponent's draws do not depend on act
        if act is not None:
            actions[side] = np.asarray(act(obs[side : side + 1])).reshape(-1)[0]
        obs, rewards, terminations, truncations, _ = envs.step(actions)
        points += float(rewards[side] > 0)
        game_over = bool((terminations | truncations).all())  # the game copy resets only when both players are done
        if video is not None:
            video.step(game_ended=game_over)
        if not game_over:
            return obs, []
        finished, points, game = points, 0.0, game + 1
        return obs, [finished]

    try:
        return collect_returns(envs, step, games, seed)
    finally:
        if video is not None:
            video.close()


def points_against_random(
    make_env: Callable, env_id: str, act: Act | None, games: int, seed: int = 0, max_cycles: int = MAX_CYCLES
) -> list[float]:
    """Points per game of `act` (None: a random player) against a random opponent, sides alternating by game.

    For benchmarks: the random-vs-random baseline of Pong is `points_against_random(make_vector_env, "pong_v3",
    None, games)`, with the script's `make_vector_env` (e.g. from `cleanrl_utils.zoo`'s entry).
    """
    return play_against_random(make_game(make_env, env_id, max_cycles), act, games, seed)


def evaluate_pettingzoo(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: torch.device | str = "cpu",
    capture_video: bool = True,
    seed: int = 0,
    *,
    VideoRecorder: type | None = None,
    max_cycles: int = MAX_CYCLES,
) -> list[float]:
    """Points per game of a saved `ppo_pettingzoo_ma_atari.py` policy (sampling its actions, as in training) against a
    random opponent; see "Self-play" above. `make_env` is the script's `make_vector_env`.

    With `capture_video`, the script's `VideoRecorder` films games 0, 1, 8, ... into `videos/{run_name}`.
    """
    if capture_video and VideoRecorder is None:
        raise TypeError("capture_video needs the script's VideoRecorder")
    envs = make_game(make_env, env_id, max_cycles, capture_video)
    with closed_on_error(envs):
        agent = with_weights(Model(envs), read_model_file(model_path, device), device)
    video = VideoRecorder(envs, f"videos/{run_name}") if capture_video else None
    return play_against_random(envs, on_numpy(lambda x: agent.act(x)[0], device), eval_episodes, seed, video)


# ---------------------------------------------------------------- GPU-batched envs


VIDEO_HEIGHT, VIDEO_WIDTH = 240, 320


class FirstEnvVideo:
    """Renders sub-environment 0 of batched Playground states with MuJoCo and writes the frames as mp4 clips.

    Only the first env's positions and velocities are copied to the host, one frame at a time. Without a
    display MuJoCo needs `MUJOCO_GL=egl` (or `osmesa`); the constructor raises when it cannot render.
    """

    def __init__(self, mj_model, folder: str, fps: int) -> None:
        import mujoco

        self.mujoco, self.model, self.data = mujoco, mj_model, mujoco.MjData(mj_model)
        self.renderer = mujoco.Renderer(mj_model, VIDEO_HEIGHT, VIDEO_WIDTH)
        self.folder, self.fps, self.frames = folder, fps, []
        atexit.register(self.close)  # an interrupted run too releases the GL context before Python tears down

    def add(self, state) -> None:
        """Add a frame of env 0 of the batched state `state`."""
        data = state.data
        self.data.qpos[:], self.data.qvel[:] = np.asarray(data.qpos[0]), np.asarray(data.qvel[0])
        if self.model.nmocap:
            self.data.mocap_pos[:], self.data.mocap_quat[:] = np.asarray(data.mocap_pos[0]), np.asarray(data.mocap_quat[0])
        self.mujoco.mj_forward(self.model, self.data)
        self.renderer.update_scene(self.data)
        self.frames.append(self.renderer.render())

    def write(self, name: str) -> None:
        """Write the frames gathered so far to `{folder}/{name}.mp4` and start a new clip."""
        from moviepy import ImageSequenceClip

        if self.frames:
            os.makedirs(self.folder, exist_ok=True)
            ImageSequenceClip(self.frames, fps=self.fps).write_videofile(f"{self.folder}/{name}.mp4", logger=None)
        self.frames = []

    def close(self) -> None:
        if self.renderer is not None:
            self.renderer.close()
            self.renderer = None


def evaluate_playground(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: torch.device | str = "cpu",
    capture_video: bool = True,
    seed: int = 0,
    *,
    num_envs: int | None = None,
    episode_length: int | None = None,
    impl: str = "jax",
    deterministic: bool = False,
) -> list[float]:
    """Play `eval_episodes` episodes in a batch of `num_envs` envs (default: one per episode).

    `make_env(env_id, num_envs, episode_length, impl)` is the script's factory; the policy samples as in
    training (`deterministic`: acts with its mean). With `capture_video`, env 0's first episode is filmed
    into `videos/{run_name}/`.
    """
    import jax
    import jax.numpy as jnp

    if eval_episodes <= 0:
        raise ValueError(f"eval_episodes must be positive, got {eval_episodes}")
    num_envs = num_envs or eval_episodes
    envs = make_env(env_id, num_envs, episode_length, impl)
    agent = with_weights(Model(envs), read_model_file(model_path, device), device)  # envs has nothing to close
    video = FirstEnvVideo(envs.mj_model, f"videos/{run_name}", round(1 / envs.dt)) if capture_video else None

    key = jax.random.PRNGKey(seed)
    key, reset_key, fresh_key = jax.random.split(key, 3)
    state, fresh = envs.reset(reset_key), envs.reset(fresh_key)
    episodes_of_env = np.zeros(num_envs, dtype=np.int64)
    returns: dict[int, float] = {}
    try:
        while len(returns) < eval_episodes:
            with torch.inference_mode():  # through DLPack, copied only if JAX and `device` differ
                raw = torch.from_dlpack(state.obs)
                action = agent.sample_action(agent.obs_rms.normalize(raw.to(device)), deterministic=deterministic)
                action = action.to(raw.device).contiguous()
            state, _, _, done, _, episodic_return, _ = envs.step(state, jnp.from_dlpack(action), fresh)
            if video is not None and episodes_of_env[0] == 0:
                video.add(state)  # env 0's first episode (its last frame shows the next episode's start)
            done, episodic_return = np.asarray(done), np.asarray(episodic_return)
            for i in np.flatnonzero(done):
                slot = int(episodes_of_env[i]) * num_envs + i
                episodes_of_env[i] += 1
                if slot < eval_episodes:
                    print(f"eval_episode={len(returns)}, episodic_return={float(episodic_return[i])}")
                    returns[slot] = float(episodic_return[i])
            if done.any():  # the next ends start from other initial states
                key, fresh_key = jax.random.split(key)
                fresh = envs.reset(fresh_key)
        if video is not None:
            video.write("eval-episode-0")
    finally:
        if video is not None:
            video.close()
    return [returns[slot] for slot in sorted(returns)]
