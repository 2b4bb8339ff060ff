"""The replay memory of the Atari value-based scripts: each 84x84 frame stored once, ~7 KB per transition.

Consecutive stacked observations share all but one frame, and a transition's next observation is the
following one, so storing both stacks (as a generic buffer does) keeps every frame 8 times: 56 GB for
the published one million transitions. Here slot `i` of a ring holds one frame (the newest of an
observation) and the action, clipped reward and termination flag of the transition that starts from
it; its next observation ends at slot `i + 1`. Stacks are rebuilt when sampling, and never reach
across an episode start: slots flagged `first` hold the first frame of an episode, which the env's
frame stack repeats to fill up the stack, and so does the rebuild. An episode's last frame takes a
slot of its own, with no transition from it, so a stored next observation is always the real one,
also after a time-limit cut (which then bootstraps from it).

`buffer_size` counts transitions, as in every other script; the ring has `2 × stack` slots more, so
the oldest transitions keep whole stacks, and each episode's last frame takes one of its slots.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class ReplayBatch(NamedTuple):
    """Sampled transitions. One window of `stack + 1` frames per transition holds both observations."""

    frames: Any  # uint8 (batch, stack + 1, H, W); a NumPy array, or a tensor on the memory's torch device
    actions: Any  # int64 (batch,)
    dones: Any  # float32 (batch,): 1 after a termination (a lost life), 0 after a time-limit cut
    rewards: Any  # float32 (batch,)

    @property
    def observations(self) -> Any:
        return self.frames[:, :-1]

    @property
    def next_observations(self) -> Any:
        return self.frames[:, 1:]


class FrameReplayBuffer:
    """Holds about `buffer_size` transitions of stacked frames; samples them as NumPy arrays or torch tensors."""

    ARRAYS = ("frames", "actions", "rewards", "terminated", "first", "valid")

    def __init__(self, buffer_size: int, frame_shape: tuple[int, ...], stack: int, device: Any = None) -> None:
        """`device`: a torch device to sample tensors onto; None samples NumPy arrays (for JAX)."""
        if buffer_size < 1:
            raise ValueError(f"a replay memory needs room for one transition at least, got {buffer_size}")
        capacity = buffer_size + 2 * stack
        self.capacity, self.stack, self.device = capacity, stack, device
        self.frames = np.zeros((capacity, *frame_shape), dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.uint8)  # Atari games have at most 18 actions
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)
        self.first = np.zeros(capacity, dtype=bool)  # the frame starts an episode
        self.valid = np.zeros(capacity, dtype=bool)  # a transition starts here and all its frames are stored
        self.pos = self.size = 0  # next slot to write; slots filled
        self.last: int | None = None  # slot of the current observation's newest frame; None between episodes
        self._window = np.arange(-stack + 1, 2)  # a stack and the next frame, relative to the sampled slot
        self._ahead = np.arange(1, stack)  # the slots whose stacks reach back to a slot being written

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in self.ARRAYS)

    def _write(self, frame: np.ndarray, first: bool) -> int:
        slot = self.pos
        self.frames[slot], self.first[slot], self.valid[slot] = frame, first, False
        # The transitions of the next slots, now the oldest, would rebuild their stacks from this new frame.
        self.valid[(slot + self._ahead) % self.capacity] = False
        self.pos, self.size = (slot + 1) % self.capacity, min(self.size + 1, self.capacity)
        return slot

    def add(self, obs, next_obs, action, reward, terminated, episode_end) -> None:
        """Store a transition between stacked observations (only their newest frames are kept)."""
        if self.last is None:  # an episode starts: its first observation is one frame, repeated
            self.last = self._write(obs[-1], first=True)
        slot = self.last
        self.actions[slot], self.rewards[slot], self.terminated[slot] = action, reward, terminated
        self.last = self._write(next_obs[-1], first=False)
        self.valid[slot] = True
        if episode_end:
            self.last = None

    def sample(self, batch_size: int) -> ReplayBatch:
        """`batch_size` transitions drawn uniformly with NumPy's global generator (seeded by the script)."""
        slots = np.random.randint(0, self.size, size=batch_size)
        while not (ok := self.valid[slots]).all():  # the few slots with no transition are drawn again
            slots[~ok] = np.random.randint(0, self.size, size=int((~ok).sum()))
        return self.fetch(slots)

    def fetch(self, slots: np.ndarray) -> ReplayBatch:
        """The transitions that start at these (valid) slots."""
        # Rebuild the window of stack + 1 frames backwards: before the first frame of an episode, repeat it.
        window = (slots[:, None] + self._window) % self.capacity
        for k in range(self.stack - 2, -1, -1):
            window[:, k] = np.where(self.first[window[:, k + 1]], window[:, k + 1], window[:, k])
        batch = ReplayBatch(
            self.frames[window],  # one copy serves both stacks, and crosses to the device once
            self.actions[slots].astype(np.int64),
            self.terminated[slots].astype(np.float32),
            self.rewards[slots],
        )
        if self.device is None:
            return batch
        import torch

        return ReplayBatch(*(torch.from_numpy(array).to(self.device) for array in batch))

    def state_dict(self) -> dict[str, Any]:
        """The memory as plain data for a checkpoint: the filled part of its arrays (not the empty rest), and counters."""
        return {
            **{name: getattr(self, name)[: self.size] for name in self.ARRAYS},
            "pos": self.pos,
            "size": self.size,
            "last": self.last,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take a `state_dict()` of a memory made with the same arguments; ValueError (nothing changed) if it is not one."""
        if not isinstance(state, dict) or set(state) != {*self.ARRAYS, "pos", "size", "last"}:
            raise ValueError("it is not a frame replay memory's arrays and counters")
        pos, size, last = state["pos"], state["size"], state["last"]
        counters = [pos, size] + ([] if last is None else [last])
        if not all(type(n) is int for n in counters) or not 0 <= size <= self.capacity or not 0 <= pos < self.capacity:
            raise ValueError("its counters are out of range")
        if size < self.capacity and pos != size:  # the ring fills from slot 0 before it wraps
            raise ValueError("its position is not where its next frame goes")
        if last is not None and (size == 0 or last != (pos - 1) % self.capacity):  # the newest frame is the current one
            raise ValueError("its current frame is not its newest")
        for name in self.ARRAYS:
            array, own = state[name], getattr(self, name)
            if not isinstance(array, np.ndarray) or array.dtype != own.dtype or array.shape != (size, *own.shape[1:]):
                raise ValueError(f"its {name} are not {size} of this memory's")
        if not np.isfinite(state["rewards"]).all():
            raise ValueError("its rewards hold a nan or an infinity")
        if size and not state["valid"].any():  # `sample` would draw slots forever
            raise ValueError("it holds no whole transition")
        for name in self.ARRAYS:
            getattr(self, name)[:size] = state[name]
        self.pos, self.size, self.last = pos, size, last
