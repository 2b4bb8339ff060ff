"""Evaluate a saved `ppo_continuous_action_playground.py` model, and film sub-environment 0 of a batched task.

The saved file is the agent's `state_dict`; the observation-normalisation statistics are buffers of the
agent (`obs_rms.mean/var/count`), so loading the weights restores them too. The evaluator steps a batch
of the task (the script's `make_env`), reads observations and hands actions over through DLPack as
training does, and keeps each env's episodes in turn: env i's j-th episode is the evaluation episode
j * num_envs + i, so short episodes are not favoured over long ones by finishing first.
"""

import atexit
import os
from collections.abc import Callable

import numpy as np
import torch

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


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type[torch.nn.Module],
    device: torch.device | str = "cpu",
    capture_video: bool = True,
    seed: int = 0,
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
    agent = Model(envs).to(device)
    agent.load_state_dict(torch.load(model_path, map_location=device, weights_only=True))
    agent.eval()
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
                action = agent.act(agent.obs_rms.normalize(raw.to(device)), deterministic=deterministic)
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
