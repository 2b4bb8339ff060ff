"""Tiny environments whose right answers are known, for behavioural tests.

Scripts reach them through Gymnasium's `module:EnvId` syntax, e.g.
`--env-id tests.envs:ConstantRewardTruncated-v0` (the repository root must be on PYTHONPATH).
"""

import gymnasium as gym
import numpy as np

EPISODE_LENGTH = 5


class ConstantRewardEnv(gym.Env):
    """Reward 1 every step and an observation that never changes.

    With `terminate_after=None` the episode never ends by itself: a TimeLimit cuts it
    (truncation), so the true value of the state is 1 / (1 - gamma). With
    `terminate_after=N` it ends for real after N steps, and the value is at most N.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, terminate_after: int | None = None, render_mode: str | None = None, continuous: bool = False):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        # `continuous`: one action in [-1, 1] (for SAC/TD3/DDPG); the reward ignores it either way
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32) if continuous else gym.spaces.Discrete(2)
        self.terminate_after = terminate_after
        self.render_mode = render_mode
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.full(3, 0.5, np.float32), {}

    def step(self, action):
        self._t += 1
        terminated = self.terminate_after is not None and self._t >= self.terminate_after
        return np.full(3, 0.5, np.float32), 1.0, terminated, False, {}

    def render(self):
        return np.zeros((64, 64, 3), np.uint8)


gym.register("ConstantRewardTruncated-v0", entry_point=ConstantRewardEnv, max_episode_steps=EPISODE_LENGTH)
gym.register("ConstantRewardTerminated-v0", entry_point=ConstantRewardEnv, kwargs={"terminate_after": EPISODE_LENGTH})
gym.register(
    "ContinuousConstantRewardTruncated-v0",
    entry_point=ConstantRewardEnv,
    max_episode_steps=EPISODE_LENGTH,
    kwargs={"continuous": True},
)
gym.register(
    "ContinuousConstantRewardTerminated-v0",
    entry_point=ConstantRewardEnv,
    kwargs={"terminate_after": EPISODE_LENGTH, "continuous": True},
)
