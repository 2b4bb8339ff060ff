"""Rainbow (double Q, dueling, noisy nets, C51, n-step returns, prioritised replay) for Atari games from pixels.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/rainbow-atari/#rainbow_ataripy (docs/rl-algorithms/rainbow-atari.md)
"""

import math
import os
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

from cleanrl_utils.runtime.command_line import check_command_line, replay_memory_problem


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """experiment name, part of the run name (defaults to the file's name)"""
    seed: int = 1
    """random seed for Python, NumPy, the framework and the environments"""
    torch_deterministic: bool = True
    """make cuDNN pick deterministic kernels (`torch.backends.cudnn.deterministic`)"""
    cuda: bool = True
    """use a CUDA GPU when one is available"""
    track: bool = False
    """log the run to Weights & Biases as well as TensorBoard"""
    wandb_project_name: str = "cleanRL"
    """Weights & Biases project the run is logged to"""
    wandb_entity: str | None = None
    """Weights & Biases user or team owning the project (default: your own)"""
    capture_video: bool = False
    """record episodes of the first environment as mp4 files under `videos/`"""
    save_model: bool = False
    """save the model into the `runs/{run_name}` folder, then evaluate it"""
    upload_model: bool = False
    """upload the saved model, its evaluation and logs to the Hugging Face Hub"""
    hf_entity: str = ""
    """Hugging Face Hub account or organisation that owns the uploaded model's repo (empty: the token's own)"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "BreakoutNoFrameskip-v4"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 10000000
    """training budget in environment steps"""
    learning_rate: float = 0.0000625
    """optimiser step size"""
    num_envs: int = 1
    """environments stepped in parallel (this script runs exactly one, without a vector-env wrapper)"""
    buffer_size: int = 1000000
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
    tau: float = 1.0
    """soft-update rate τ of the target network (1.0 copies the weights)"""
    target_network_frequency: int = 8000
    """environment steps between target-network updates"""
    batch_size: int = 32
    """transitions per replay sample"""
    start_e: float = 1
    """not used: the noisy layers explore (kept for command-line compatibility)"""
    end_e: float = 0.01
    """not used: the noisy layers explore (kept for command-line compatibility)"""
    exploration_fraction: float = 0.10
    """not used: the noisy layers explore (kept for command-line compatibility)"""
    learning_starts: int = 80000
    """environment steps collected before the first update"""
    train_frequency: int = 4
    """environment steps between gradient updates (and of new noise for the online network)"""
    n_step: int = 3
    """the number of steps of the n-step returns"""
    prioritized_replay_alpha: float = 0.5
    """the priority exponent alpha (0: uniform sampling)"""
    prioritized_replay_beta: float = 0.4
    """the importance-sampling exponent beta at the start, annealed linearly to 1 at the end"""
    prioritized_replay_eps: float = 1e-6
    """the constant added to every priority"""
    n_atoms: int = 51
    """atoms of the return distribution's support"""
    v_min: float = -10
    """smallest return the distribution's support covers (v_min)"""
    v_max: float = 10
    """largest return the distribution's support covers (v_max)"""


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from stable_baselines3.common.atari_wrappers import (
    ClipRewardEnv,
    EpisodicLifeEnv,
    FireResetEnv,
    MaxAndSkipEnv,
    NoopResetEnv,
)

from cleanrl_utils.runtime.evals.atari import evaluate_distributional
from cleanrl_utils.runtime.experiment import Experiment, check_atari_game


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        check_atari_game(env_id)
        import cv2  # here, not at the top: without the atari extra, making the env fails in one line

        # frame skip by MaxAndSkipEnv (max over the last two frames), not by the ALE
        skip = {"frameskip": 1} if gym.spec(env_id).kwargs.get("frameskip", 1) != 1 else {}
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True, **skip)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, disable_env_checker=True, **skip)
        # below the life and reward wrappers: `info["episode"]` holds a whole game's raw score
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = NoopResetEnv(env, noop_max=30)
        env = MaxAndSkipEnv(env, skip=4)
        env = EpisodicLifeEnv(env)  # a lost life ends the episode for learning, not the game
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = FireResetEnv(env)
        env = ClipRewardEnv(env)
        env = gym.wrappers.ResizeObservation(env, (84, 84))  # the max of the last two RGB frames, rescaled
        gray = gym.spaces.Box(0, 255, (84, 84), "uint8")  # then the luminance of the rescaled frame
        env = gym.wrappers.TransformObservation(env, lambda rgb: cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), gray)
        env = gym.wrappers.FrameStackObservation(env, 4)
        return env

    return thunk


class NoisyLinear(nn.Module):
    """Linear layer with weights mu + sigma * epsilon, epsilon factorised Gaussian noise (Fortunato et al., 2018).

    Only the noise vectors are kept: epsilon = f(eps_out) f(eps_in)^T is rebuilt at each forward pass, which
    costs less than the matrix product. It stays until `reset_noise()`; in eval mode the layer uses mu only.
    """

    def __init__(self, in_features, out_features, std_init=0.5):
        super().__init__()
        bound = 1 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), std_init / math.sqrt(in_features)))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), std_init / math.sqrt(out_features)))
        self.register_buffer("epsilon_in", torch.zeros(in_features))
        self.register_buffer("epsilon_out", torch.zeros(out_features))
        self.reset_noise()

    def reset_noise(self):
        for epsilon in (self.epsilon_in, self.epsilon_out):
            x = torch.randn(epsilon.shape, device=epsilon.device)
            epsilon.copy_(x.sign() * x.abs().sqrt())

    def forward(self, x):
        if not self.training:
            return F.linear(x, self.weight_mu, self.bias_mu)
        weight = torch.addcmul(self.weight_mu, self.weight_sigma, torch.outer(self.epsilon_out, self.epsilon_in))
        return F.linear(x, weight, torch.addcmul(self.bias_mu, self.bias_sigma, self.epsilon_out))


class NoisyDuelingDistributionalNetwork(nn.Module):
    """Nature-CNN trunk, then noisy value and advantage streams of return distributions over `n_atoms` atoms."""

    def __init__(self, env, n_atoms=51, v_min=-10, v_max=10):
        super().__init__()
        self.register_buffer("atoms", torch.linspace(v_min, v_max, steps=n_atoms))
        self.n_actions, self.n_atoms = env.action_space.n, n_atoms
        self.network = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.value_head = nn.Sequential(NoisyLinear(3136, 512), nn.ReLU(), NoisyLinear(512, n_atoms))
        self.advantage_head = nn.Sequential(NoisyLinear(3136, 512), nn.ReLU(), NoisyLinear(512, self.n_actions * n_atoms))

    def log_pmfs(self, x):
        """Log-probabilities, shape (batch, actions, atoms); uint8 frames become floats in [0, 1] only here."""
        h = self.network(x / 255.0)
        value = self.value_head(h).view(len(x), 1, self.n_atoms)
        advantage = self.advantage_head(h).view(len(x), self.n_actions, self.n_atoms)
        # dueling: the advantages are centred over actions, atom by atom, before the softmax over atoms
        return (value + advantage - advantage.mean(dim=1, keepdim=True)).log_softmax(dim=-1)

    def pmfs(self, x):
        """Return distributions, shape (batch, actions, atoms)."""
        return self.log_pmfs(x).exp()

    def forward(self, x):
        """Q-values: the mean of each action's return distribution."""
        return (self.pmfs(x) * self.atoms).sum(-1)

    def reset_noise(self):
        for layer in self.modules():
            if isinstance(layer, NoisyLinear):
                layer.reset_noise()


def project(next_atoms, next_pmfs, atoms):
    """C51's projection: each mass of `next_pmfs`, at `next_atoms` (R + gamma^n z), split between its two nearest atoms."""
    v_min, v_max, n_atoms = atoms[0], atoms[-1], atoms.numel()
    b = (next_atoms.clamp(v_min, v_max) - v_min) / ((v_max - v_min) / (n_atoms - 1))  # fractional index into the support
    lower, upper = b.floor().clamp(0, n_atoms - 1), b.ceil().clamp(0, n_atoms - 1)
    # When b falls exactly on an atom, lower == upper and the whole mass goes to it.
    target_pmfs = torch.zeros_like(next_pmfs)
    target_pmfs.scatter_add_(-1, lower.long(), (upper + (lower == upper).float() - b) * next_pmfs)
    target_pmfs.scatter_add_(-1, upper.long(), (b - lower) * next_pmfs)
    return target_pmfs


class SumTree:
    """Binary tree whose leaves hold the priorities and each node the sum of its children (node 1: the total)."""

    def __init__(self, capacity):
        self.leaves = 1 << (capacity - 1).bit_length()  # a power of two >= capacity; slot i is node leaves + i
        self.nodes = np.zeros(2 * self.leaves)

    def update(self, slots, priorities):
        nodes = self.leaves + np.asarray(slots)
        self.nodes[nodes] = priorities
        while nodes[0] > 1:  # recompute the sums on the way up, from the children
            nodes = np.unique(nodes // 2)
            self.nodes[nodes] = self.nodes[2 * nodes] + self.nodes[2 * nodes + 1]

    def find(self, values):
        """For each value in [0, total), the slot whose leaf holds it when the leaves are laid end to end."""
        nodes, values = np.ones(len(values), dtype=np.int64), np.array(values, dtype=np.float64)
        while nodes[0] < self.leaves:
            left = 2 * nodes
            go_right = values >= self.nodes[left]
            values -= np.where(go_right, self.nodes[left], 0.0)
            nodes = left + go_right
        return nodes - self.leaves


class ReplayBatch(NamedTuple):
    observations: torch.Tensor  # uint8 (batch, stack, 84, 84)
    actions: torch.Tensor  # int64 (batch,)
    next_observations: torch.Tensor  # n steps later, or at the episode's end if it came first
    returns: torch.Tensor  # float (batch, 1): discounted sum of the (up to n) clipped rewards
    dones: torch.Tensor  # float (batch, 1): 1 if a termination (a lost life) ended those steps
    discounts: torch.Tensor  # float (batch, 1): gamma ** (number of steps summed), the bootstrap's factor
    weights: torch.Tensor  # float (batch,): importance-sampling weights, the batch's largest being 1


class PrioritizedFrameReplayBuffer:
    """Prioritised replay of n-step transitions that stores each 84x84 frame once, ~7 KB per transition.

    Slot `i` of a ring holds one frame (the newest of an observation) and the action, clipped reward,
    termination and episode-end flags of the step taken from it; an episode's last frame has a slot
    of its own. The n-step transition of slot `i` sums the rewards of slots i .. i+n-1 up to the
    first episode end, and its next observation ends one slot after the last step summed: it never
    crosses into the next episode. Slot `i` can be sampled (`valid`, priority > 0) once its n steps
    are stored or its episode ended. Stacks are rebuilt when sampling: going back from their newest
    frame, they repeat the frame of a slot flagged `first`, as the env's frame stack does.

    `buffer_size` counts transitions: the ring has 2 * stack + n slots more, as the oldest transitions
    lose their stacks to new frames, the newest wait for their n steps and each episode's last frame
    takes a slot of its own.
    """

    ARRAYS = ("frames", "actions", "rewards", "terminated", "ends", "first", "valid")

    def __init__(self, buffer_size, obs_shape, n_step, gamma, alpha, eps, device):
        self.stack, self.n_step, self.alpha, self.eps, self.device = obs_shape[0], n_step, alpha, eps, device
        self.capacity = capacity = buffer_size + 2 * self.stack + n_step
        self.frames = np.zeros((capacity, *obs_shape[1:]), dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.uint8)  # Atari games have at most 18 actions
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)
        self.ends = np.zeros(capacity, dtype=bool)  # the step ends its episode (terminated or truncated)
        self.first = np.zeros(capacity, dtype=bool)  # the frame starts an episode
        self.valid = np.zeros(capacity, dtype=bool)  # an n-step transition starts here, all its frames stored
        self.tree = SumTree(capacity)
        self.max_priority = 1.0  # what new transitions get, so that each is soon sampled
        self.pos = self.size = 0  # next slot to write; slots filled
        self.last = None  # slot of the current observation's newest frame; None between episodes
        self.pending = deque()  # slots of the current episode whose n steps are not all stored yet
        self._discounts = gamma ** np.arange(n_step + 1)

    @property
    def nbytes(self):
        return sum(getattr(self, name).nbytes for name in self.ARRAYS) + self.tree.nodes.nbytes

    def _write(self, frame, first):
        slot = self.pos
        self.frames[slot], self.first[slot] = frame, first
        # This slot's old transition, and those of the next ones (now the oldest), whose stacks reach back to it.
        stale = (slot + np.arange(self.stack)) % self.capacity
        if (stale := stale[self.valid[stale]]).size:
            self.valid[stale] = False
            self.tree.update(stale, 0.0)
        self.pos, self.size = (slot + 1) % self.capacity, min(self.size + 1, self.capacity)
        return slot

    def add(self, obs, next_obs, action, reward, terminated, episode_end):
        """Store a step between stacked observations (only their newest frames are kept)."""
        if self.last is None:  # an episode starts: its first observation is one frame, repeated
            self.last = self._write(obs[-1], first=True)
        slot = self.last
        self.actions[slot], self.rewards[slot] = action, reward
        self.terminated[slot], self.ends[slot] = terminated, episode_end
        self.last = self._write(next_obs[-1], first=False)
        self.pending.append(slot)
        if episode_end:  # the episode's last transitions are complete with fewer than n steps
            ready, self.last, self.pending = list(self.pending), None, deque()
        else:
            ready = [self.pending.popleft()] if len(self.pending) == self.n_step else []
        if ready:
            self.valid[ready] = True
            self.tree.update(ready, self.max_priority)

    def sample(self, batch_size, beta):
        """A batch drawn in proportion to the priorities, one draw in each of `batch_size` equal parts of the total."""
        total = self.tree.nodes[1]
        slots = self.tree.find((np.arange(batch_size) + np.random.random(batch_size)) * (total / batch_size))
        while not (ok := self.valid[slots]).all():  # a value that rounding put on an empty leaf is drawn again
            slots[~ok] = self.tree.find(np.random.random(int((~ok).sum())) * total)
        # Importance weights (N * P(i)) ** -beta, divided by the batch's largest: N cancels out.
        weights = (self.tree.nodes[self.tree.leaves + slots] / total) ** -beta
        return self.fetch(slots, weights / weights.max()), slots

    def update_priorities(self, slots, losses):
        priorities = (losses + self.eps) ** self.alpha
        self.tree.update(slots, priorities)
        self.max_priority = max(self.max_priority, float(priorities.max()))

    def _stacks(self, newest):
        """The slots of the frame stacks that end at `newest`, repeating an episode's first frame before it."""
        window = (newest[:, None] + np.arange(1 - self.stack, 1)) % self.capacity
        for k in range(self.stack - 2, -1, -1):
            window[:, k] = np.where(self.first[window[:, k + 1]], window[:, k + 1], window[:, k])
        return window

    def fetch(self, slots, weights):
        """The n-step transitions that start at these (valid) slots."""
        steps = (slots[:, None] + np.arange(self.n_step)) % self.capacity
        used = np.ones(steps.shape, dtype=bool)  # step k counts if no episode ended at an earlier one
        used[:, 1:] = np.cumsum(self.ends[steps[:, :-1]], axis=1) == 0
        n_used = used.sum(1)
        window = np.concatenate([self._stacks(slots), self._stacks((slots + n_used) % self.capacity)])
        frames = torch.from_numpy(self.frames[window]).to(self.device)
        returns = (self.rewards[steps] * used * self._discounts[:-1]).sum(1)
        dones, discounts = (self.terminated[steps] & used).any(1), self._discounts[n_used]
        columns = torch.from_numpy(np.stack([returns, dones, discounts], 1).astype(np.float32)).to(self.device)
        return ReplayBatch(
            frames[: len(slots)],
            torch.from_numpy(self.actions[slots].astype(np.int64)).to(self.device),
            frames[len(slots) :],
            *columns.split(1, dim=1),
            torch.from_numpy(weights.astype(np.float32)).to(self.device),
        )


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("batch_size", "n_step")
    exp.require(args.num_envs == 1, f"--num-envs {args.num_envs}: rainbow_atari.py runs a single environment")
    exp.require(args.n_atoms >= 2, f"--n-atoms must be at least 2, got {args.n_atoms}")
    exp.require(args.v_min < args.v_max, f"need --v-min < --v-max, got {args.v_min} and {args.v_max}")
    exp.require(args.learning_starts >= args.n_step, "need --learning-starts >= --n-step (a first transition to sample)")
    exp.require(0 <= args.prioritized_replay_beta <= 1, "need 0 <= --prioritized-replay-beta <= 1")
    exp.require(args.prioritized_replay_eps > 0, "need --prioritized-replay-eps > 0")
    problem = replay_memory_problem(args, 84 * 84, copies=1)  # one 84x84 frame per transition
    exp.require(not problem, problem)
    run_name = exp.run_name

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup, before any file is written
    exp.require_atari_game(see="c51.py for vector observations", see_continuous="sac_continuous_action.py")
    env = exp.make_envs(make_env(args.env_id, 0, args.capture_video, run_name), args.env_id)
    env.action_space.seed(args.seed)
    writer = exp.start_logging()

    support = {"n_atoms": args.n_atoms, "v_min": args.v_min, "v_max": args.v_max}
    # the CNNs in channels-last layout, oneDNN's fastest for convolutions
    q_network = NoisyDuelingDistributionalNetwork(env, **support).to(device, memory_format=torch.channels_last)
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate, eps=1.5e-4, fused=True)
    target_network = NoisyDuelingDistributionalNetwork(env, **support).to(device, memory_format=torch.channels_last)
    target_network.load_state_dict(q_network.state_dict())

    # each frame is stored once; a transition's stacks are rebuilt when sampled
    alpha, eps = args.prioritized_replay_alpha, args.prioritized_replay_eps
    rb = PrioritizedFrameReplayBuffer(
        args.buffer_size, env.observation_space.shape, args.n_step, args.gamma, alpha, eps, device
    )
    batch_index = torch.arange(args.batch_size, device=device)

    obs, _ = env.reset(seed=args.seed)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for global_step in range(args.total_timesteps):
            exp.raise_if_stopped()
            # no epsilon: the online network's noise explores; a new sample every train-frequency steps
            if global_step % args.train_frequency == 0:
                q_network.reset_noise()
            with torch.inference_mode():
                action = q_network(torch.as_tensor(obs, device=device).unsqueeze(0)).argmax().item()

            next_obs, reward, terminated, truncated, info = env.step(action)

            # next_obs is the true next state even when the episode ends (we reset only below), and
            # only a termination is stored as done: a time-limit cut still bootstraps from next_obs.
            rb.add(obs, next_obs, action, reward, terminated, terminated or truncated)
            if "episode" in info:  # a whole game ended, not just a life
                episodic_return = float(info["episode"]["r"])
                print(f"global_step={global_step}, episodic_return={episodic_return}")
                writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                writer.add_scalar("charts/episodic_length", int(info["episode"]["l"]), global_step)
            obs = env.reset()[0] if terminated or truncated else next_obs  # after a lost life: the next one

            if global_step > args.learning_starts:
                if global_step % args.train_frequency == 0:
                    # the importance-sampling correction grows to full (beta = 1) by the end of training
                    beta = (
                        args.prioritized_replay_beta + (1 - args.prioritized_replay_beta) * global_step / args.total_timesteps
                    )
                    data, slots = rb.sample(args.batch_size, beta)
                    target_network.reset_noise()
                    with torch.no_grad():
                        # double Q: the online network picks the next action, the target network rates it
                        next_actions = q_network(data.next_observations).argmax(1)
                        next_pmfs = target_network.pmfs(data.next_observations)[batch_index, next_actions]
                        next_atoms = data.returns + data.discounts * target_network.atoms * (1 - data.dones)
                        target_pmfs = project(next_atoms, next_pmfs, target_network.atoms)

                    old_log_pmfs = q_network.log_pmfs(data.observations)[batch_index, data.actions]
                    # per-transition cross-entropy: weighted for the loss, and the new priorities; on log-softmax
                    # outputs: clamped probabilities would zero the gradient of a saturated distribution
                    losses = -(target_pmfs * old_log_pmfs).sum(-1)
                    loss = (data.weights * losses).mean()
                    rb.update_priorities(slots, losses.detach().cpu().numpy())

                    if global_step % 100 == 0:
                        writer.add_scalar("losses/td_loss", loss.item(), global_step)
                        old_val = (old_log_pmfs.detach().exp() * q_network.atoms).sum(-1)
                        writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)
                        writer.add_scalar("charts/beta", beta, global_step)
                        sps = int(global_step / exp.elapsed)
                        print("SPS:", sps)
                        writer.add_scalar("charts/SPS", sps, global_step)

                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

                # the target network catches up with the online one
                if global_step % args.target_network_frequency == 0:
                    with torch.no_grad():
                        for target_param, q_param in zip(target_network.parameters(), q_network.parameters()):
                            target_param.lerp_(q_param, args.tau)

        if args.save_model:
            # the support (n_atoms, v_min, v_max) rebuilds the network: the args go along
            exp.save_model({"model_weights": q_network.state_dict(), "args": vars(args)})
            Model = NoisyDuelingDistributionalNetwork
            episodic_returns = evaluate_distributional(
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", Model, device, 0.001, args.capture_video
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="Rainbow")
