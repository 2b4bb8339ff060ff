"""PPO with a Transformer-XL episodic memory, for tasks that need memory (Memory Gym, MiniGrid Memory, ProofofMemory).

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ppo-trxl/#ppo_trxlpy (docs/rl-algorithms/ppo-trxl.md)
"""

import math
import os
from collections import deque
from dataclasses import dataclass

from cleanrl_utils.runtime.command_line import check_command_line


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
    """save the model (weights and the arguments that rebuild it) into `runs/{run_name}`, then evaluate it"""
    checkpoint_frequency: int = 0
    """save a checkpoint to resume from every this many iterations (0: never)"""
    resume: str | None = None
    """continue the run of this checkpoint file, or of this run folder's newest one, with its arguments (checked as the command line's); a checkpoint is read as data, never run"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "MortarMayhem-Grid-v0"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 200000000
    """training budget in environment steps"""
    init_lr: float = 2.75e-4
    """optimiser step size at the start"""
    final_lr: float = 1.0e-5
    """the learning rate once annealing is over"""
    num_envs: int = 32
    """environments stepped in parallel"""
    num_steps: int = 512
    """steps each environment takes per rollout"""
    anneal_steps: int = 32 * 512 * 10000
    """the number of environment steps over which the learning rate and entropy coefficient decay linearly"""
    gamma: float = 0.995
    """discount factor γ"""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation"""
    num_minibatches: int = 8
    """minibatches each epoch splits the rollout into"""
    update_epochs: int = 3
    """passes over each rollout per update"""
    norm_adv: bool = False
    """normalise the advantages within each minibatch"""
    clip_coef: float = 0.1
    """clip range ε of the probability ratio (and of the value change with --clip-vloss)"""
    clip_vloss: bool = True
    """clip the value loss around the rollout's values, as PPO's reference implementation does"""
    init_ent_coef: float = 0.0001
    """the initial coefficient of the entropy bonus"""
    final_ent_coef: float = 0.000001
    """the coefficient of the entropy bonus once annealing is over"""
    vf_coef: float = 0.5
    """weight of the value loss in the total loss"""
    max_grad_norm: float = 0.25
    """global gradient norm above which gradients are scaled down"""
    target_kl: float | None = None
    """stop an update's epochs early once the approximate KL exceeds this (off when unset)"""

    # Transformer-XL specific arguments
    trxl_num_layers: int = 3
    """the number of transformer layers"""
    trxl_num_heads: int = 4
    """attention heads per transformer layer"""
    trxl_dim: int = 384
    """the dimension of the transformer (embedding and hidden states)"""
    trxl_memory_length: int = 119
    """the memory window: a step and the steps before it in its episode (at most the episode length)"""
    trxl_attend_self: bool = False
    """a step attends to the earlier steps of its window only; --trxl-attend-self: to its own fresh state too"""
    trxl_vector_relu: bool = False
    """end the encoder of vector observations with a ReLU (off: a linear layer alone)"""
    trxl_positional_encoding: str = "absolute"
    """the positional encoding of the memory: absolute (sinusoidal), learned, or none ("" too)"""
    reconstruction_coef: float = 0.0
    """the coefficient of the observation reconstruction loss (0 disables the decoder; image observations only)"""
    per_branch_ratio: bool = True
    """MultiDiscrete actions: clip each branch's probability ratio on its own (off: one joint ratio per sample)"""

    # derived from the settings above when the run starts
    batch_size: int = 0
    """transitions per rollout, num-envs × num-steps (set at start-up)"""
    minibatch_size: int = 0
    """transitions per minibatch (set at start-up)"""
    num_iterations: int = 0
    """rollout-and-update iterations (set from the budget at start-up)"""


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions import Categorical

from cleanrl_utils.runtime.evals.special import evaluate_trxl
from cleanrl_utils.runtime.experiment import Experiment

try:  # MiniGrid and Memory Gym come with the `memory_gym` extra; importing them registers their envs
    import minigrid
except ImportError:
    minigrid = None
try:
    import memory_gym  # noqa: F401
except ImportError:
    memory_gym = None
MEMORY_GYM_IDS = ("MortarMayhem", "MysteryPath", "SearingSpotlights", "Endless-")


class ProofofMemoryEnv(gym.Env):
    """A tiny memory task: a cue names the rewarded end of a line, then hides before the agent may move.

    Observation [left cue, position / 5, right cue]; the cue (1 on the rewarded side) shows only in the first
    two observations, and the agent's first two actions are ignored. Then each action (0: left, 1: right) moves
    one cell; the episode ends at either end, 5 cells from the start. Each step costs 0.1, except the last,
    which pays 1.6 at the cued end and -1.0 at the other: the shortest way to the cued end returns 1.0, the
    wrong end -1.6, running into the time limit (16 steps) -1.6, and a guess -0.3 on average.
    """

    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 4}
    cue_steps = 2

    def __init__(self, render_mode=None):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.render_mode = render_mode

    def _obs(self):
        cue = self.step_count < self.cue_steps
        return np.array([cue * (self.goal == -1), self.position / 5, cue * (self.goal == 1)], dtype=np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.goal, self.position, self.step_count = int(self.np_random.choice([-1, 1])), 0, 0
        return self._obs(), {}

    def step(self, action):
        if self.step_count >= self.cue_steps:
            self.position += 1 if int(action) == 1 else -1
        self.step_count += 1
        terminated = abs(self.position) == 5
        reward = (1.6 if self.position == 5 * self.goal else -1.0) if terminated else -0.1
        if self.render_mode == "human":
            print(self.render_text())
        return self._obs(), reward, terminated, False, {}

    def render_text(self):
        cells = ["L" if self.goal == -1 else "."] + ["_"] * 9 + ["R" if self.goal == 1 else "."]
        cells[self.position + 5] = "A"
        return "".join(cells)

    def render(self):
        if self.render_mode == "human":
            return print(self.render_text())
        frame = np.full((32, 352, 3), 40, dtype=np.uint8)
        for i, cell in enumerate(self.render_text()):
            color = {"A": (255, 255, 255), "L": (0, 200, 0), "R": (0, 200, 0), "_": (90, 90, 90), ".": (200, 0, 0)}[cell]
            frame[4:28, i * 32 + 4 : i * 32 + 28] = color
        return frame


gym.register("ProofofMemory-v0", entry_point=ProofofMemoryEnv, max_episode_steps=16)


def make_env(env_id, idx, capture_video, run_name, render_mode=None):
    def thunk():
        if env_id.startswith("MiniGrid"):
            env = gym.make(env_id, agent_view_size=3, tile_size=28, render_mode=render_mode or "rgb_array")
            # the partial 3x3 view drawn as an 84x84 RGB image
            env = gym.wrappers.TimeLimit(
                minigrid.wrappers.ImgObsWrapper(minigrid.wrappers.RGBImgPartialObsWrapper(env, 28)), 96
            )
        else:
            env = gym.make(env_id, render_mode="rgb_array" if capture_video and idx == 0 else render_mode)
        # The memory holds one slot per episode step, so every episode gets a length limit.
        limit = env.spec.max_episode_steps if env.spec else None
        limit = limit or getattr(env.unwrapped, "max_episode_steps", -1)  # Memory Gym: set after a reset
        if limit is None or limit <= 0:
            env.reset(seed=0)
            limit = getattr(env.unwrapped, "max_episode_steps", -1)
        if limit is None or limit <= 0:  # endless tasks
            limit = 1024
        env = gym.wrappers.TimeLimit(env, limit)
        if capture_video and idx == 0:
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        return gym.wrappers.RecordEpisodeStatistics(env)

    return thunk


def make_vector_env(env_id, num_envs, capture_video, run_name):
    """Sub-envs reset in the same step they end; `infos["final_obs"]` / `["final_info"]` keep that last step."""
    return gym.vector.SyncVectorEnv(
        [make_env(env_id, i, capture_video, run_name) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def finished_episodes(infos):
    """(sub-env, return, length, seconds) of each episode that ended in this step; returns as TensorBoard stores them."""
    final = infos.get("final_info", {})
    episode = final.get("episode", {})
    return [
        (i, float(np.float32(episode["r"][i])), int(episode["l"][i]), float(episode["t"][i]))
        for i in np.flatnonzero(final.get("_episode", ()))
    ]


def layer_init(layer, std=2**0.5):
    torch.nn.init.orthogonal_(layer.weight, std)  # biases keep PyTorch's default init
    return layer


class MultiHeadAttention(nn.Module):
    """Attention whose heads share one set of (bias-free) query, key and value projections."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim, self.dim = num_heads, dim // num_heads, dim
        self.query = nn.Linear(self.head_dim, self.head_dim, bias=False)
        self.key = nn.Linear(self.head_dim, self.head_dim, bias=False)
        self.value = nn.Linear(self.head_dim, self.head_dim, bias=False)
        self.out = nn.Linear(dim, dim)

    def forward(self, query, memory, mask):
        """query (B, dim) attends to memory (B, L, dim) where mask (B, L) is True."""
        B, L, _ = memory.shape
        q = self.query(query.view(B, 1, self.num_heads, self.head_dim))
        k = self.key(memory.view(B, L, self.num_heads, self.head_dim))
        v = self.value(memory.view(B, L, self.num_heads, self.head_dim))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.dim)
        mask = mask[:, None, None, :]
        # a step with nothing to attend to (an episode's first, without itself) gets zero weights, not NaN
        weights = scores.masked_fill(~mask, torch.finfo(scores.dtype).min).softmax(-1) * mask
        return self.out(torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(B, self.dim))


class TransformerBlock(nn.Module):
    """Pre-layer-norm block: attention over the memory, then a ReLU layer, each with a residual connection."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.attention = MultiHeadAttention(dim, num_heads)
        self.norm_query, self.norm_memory, self.norm_fc = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, query, memory, mask):
        x = query + self.attention(self.norm_query(query), self.norm_memory(memory), mask)
        return x + torch.relu(self.fc(self.norm_fc(x)))


def sinusoidal_encoding(position, dim):
    """Sines of position x frequency in the first half of the features, cosines in the second."""
    frequency = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    angle = position.float()[:, None] * frequency
    return torch.cat([angle.sin(), angle.cos()], 1)[:, :dim]


def clipped_surrogate(logratio, advantages, clip_coef, per_branch):
    """PPO's clipped surrogate loss, with the log-ratios and ratios it clipped; logratio has a column per action
    branch: clipped one by one, each with the sample's advantage, or summed into the joint action's ratio."""
    if not per_branch:
        logratio = logratio.sum(1, keepdim=True)
    ratio = logratio.exp()
    advantages = advantages[:, None]
    loss = torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
    return loss, logratio, ratio


class Agent(nn.Module):
    """Encoder → Transformer-XL over the cached hidden states of the episode → policy branches and value.

    The memory of an episode holds, for each of its steps, the input of every TrXL layer at that step
    (shape: steps x layers x dim). A step attends, in each layer, to a window of the last `memory_length`
    steps of its own episode (itself included, unless not attend_self); only its own hidden states are computed anew.
    """

    def __init__(self, args, observation_space, action_space, max_episode_steps):
        super().__init__()
        dim, self.num_layers = args.trxl_dim, args.trxl_num_layers
        self.memory_length = min(args.trxl_memory_length, max_episode_steps)
        self.memory_slots = max_episode_steps + 1  # one more: the value of a truncated episode's last observation
        self.attend_self = getattr(args, "trxl_attend_self", True)  # model files saved without the flag attended to it
        self.image = len(observation_space.shape) == 3
        if self.image:
            self.encoder = nn.Sequential(
                layer_init(nn.Conv2d(3, 32, 8, stride=4)),
                nn.ReLU(),
                layer_init(nn.Conv2d(32, 64, 4, stride=2)),
                nn.ReLU(),
                layer_init(nn.Conv2d(64, 64, 3, stride=1)),
                nn.ReLU(),
                nn.Flatten(),
                layer_init(nn.Linear(64 * 7 * 7, dim)),
                nn.ReLU(),
            )
        else:  # model files whose arguments lack trxl_vector_relu were trained with the ReLU
            relu = [nn.ReLU()] if getattr(args, "trxl_vector_relu", True) else []
            self.encoder = nn.Sequential(layer_init(nn.Linear(observation_space.shape[0], dim)), *relu)
        encoding = args.trxl_positional_encoding.lower()
        if encoding == "absolute":  # each slot's step counted back from the episode's last one
            steps_back = max_episode_steps - 1 - torch.arange(self.memory_slots)
            self.register_buffer("positional_encoding", sinusoidal_encoding(steps_back, dim))
        elif encoding == "learned":
            self.positional_encoding = nn.Parameter(torch.randn(self.memory_slots, dim))
        else:
            self.positional_encoding = None
        self.blocks = nn.ModuleList([TransformerBlock(dim, args.trxl_num_heads) for _ in range(self.num_layers)])
        self.hidden = nn.Sequential(layer_init(nn.Linear(dim, dim)), nn.ReLU())
        self.action_dims = [int(action_space.n)] if action_space.shape == () else [int(n) for n in action_space.nvec]
        self.actor_branches = nn.ModuleList([layer_init(nn.Linear(dim, n), std=0.1) for n in self.action_dims])
        self.critic = layer_init(nn.Linear(dim, 1), std=1.0)
        self.decoder = None
        if args.reconstruction_coef > 0:  # transposed Nature CNN back to the 84x84 RGB observation
            self.decoder = nn.Sequential(
                layer_init(nn.Linear(dim, 64 * 7 * 7)),
                nn.ReLU(),
                nn.Unflatten(1, (64, 7, 7)),
                layer_init(nn.ConvTranspose2d(64, 64, 3, stride=1)),
                nn.ReLU(),
                layer_init(nn.ConvTranspose2d(64, 32, 4, stride=2)),
                nn.ReLU(),
                layer_init(nn.ConvTranspose2d(32, 3, 8, stride=4)),
                nn.Sigmoid(),
            )

    def new_memory(self, num_episodes, device):
        return torch.zeros((num_episodes, self.memory_slots, self.num_layers, self.blocks[0].fc.in_features), device=device)

    def window(self, episode_step):
        """Episode steps in each step's memory window (B, L), and which of them it may attend to."""
        start = (episode_step - self.memory_length + 1).clamp(min=0)
        positions = start[:, None] + torch.arange(self.memory_length, device=episode_step.device)
        t = episode_step[:, None]
        return positions, (positions <= t) if self.attend_self else (positions < t)  # it slides as the episode grows

    def normalize(self, obs):
        return obs.permute(0, 3, 1, 2).float() / 255.0 if self.image else obs.float()

    def trxl(self, obs, memory_window, episode_step):
        """TrXL output (B, dim) and this step's layer inputs (B, layers, dim) to cache; memory_window (B, L, layers, dim)."""
        positions, mask = self.window(episode_step)
        is_current = (positions == episode_step[:, None])[..., None]
        h, layer_inputs = self.encoder(self.normalize(obs)), []
        for layer, block in enumerate(self.blocks):
            layer_inputs.append(h)
            memory = torch.where(is_current, h[:, None], memory_window[:, :, layer])  # the fresh state replaces the cached one
            if self.positional_encoding is not None:
                memory = memory + self.positional_encoding[positions]
            h = block(h, memory, mask)
        return h, torch.stack(layer_inputs, 1)

    def heads(self, h):
        hidden = self.hidden(h)
        dists = [Categorical(logits=branch(hidden)) for branch in self.actor_branches]
        return dists, self.critic(hidden).squeeze(-1), hidden

    def gather(self, memory, episode_step):
        """The memory windows of each env's current episode; memory (E, slots, layers, dim)."""
        positions, _ = self.window(episode_step)
        return memory[torch.arange(len(memory), device=memory.device)[:, None], positions]

    def act(self, obs, memory, episode_step):
        """Sample actions (E, branches) for each env's current step and cache the step's hidden states in `memory`."""
        h, layer_inputs = self.trxl(obs, self.gather(memory, episode_step), episode_step)
        memory[torch.arange(len(memory), device=memory.device), episode_step] = layer_inputs
        dists, value, _ = self.heads(h)
        action = torch.stack([dist.sample() for dist in dists], 1)
        logprob = torch.stack([dist.log_prob(a) for dist, a in zip(dists, action.T)], 1)  # one per action branch
        return action, logprob, value

    def get_value(self, obs, memory, episode_step):
        return self.heads(self.trxl(obs, self.gather(memory, episode_step), episode_step)[0])[1]

    def evaluate_actions(self, obs, memory_window, episode_step, action):
        """Log-probabilities (one per action branch), entropy (summed), value and hidden layer output of the steps."""
        dists, value, hidden = self.heads(self.trxl(obs, memory_window, episode_step)[0])
        logprob = torch.stack([dist.log_prob(a) for dist, a in zip(dists, action.T)], 1)
        return logprob, sum(dist.entropy() for dist in dists), value, hidden


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs", "anneal_steps")
    exp.require_positive("trxl_num_layers", "trxl_num_heads", "trxl_dim", "trxl_memory_length")
    exp.require(args.trxl_dim % args.trxl_num_heads == 0, f"--trxl-num-heads does not divide --trxl-dim {args.trxl_dim}")
    encoding = args.trxl_positional_encoding.lower()
    exp.require(encoding in ("", "none", "absolute", "learned"), "--trxl-positional-encoding is absolute, learned or none")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    exp.require(args.batch_size % args.num_minibatches == 0, "--num-minibatches does not divide --num-envs × --num-steps")
    exp.require(args.minibatch_size > 1 or not args.norm_adv, "--norm-adv needs minibatches of at least 2 transitions")
    exp.require(args.num_iterations > 0, f"--total-timesteps is less than one rollout batch ({args.batch_size} steps)")
    run_name = exp.run_name

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup, before any file is written
    env_id = args.env_id
    memory_gym_checkpoints = env_id.startswith(MEMORY_GYM_IDS) and args.checkpoint_frequency > 0
    exp.require(
        not memory_gym_checkpoints,
        "--checkpoint-frequency covers MiniGrid and ProofofMemory; Memory Gym's games cannot be saved",
    )
    missing = env_id.startswith(MEMORY_GYM_IDS) and memory_gym is None or env_id.startswith("MiniGrid") and minigrid is None
    extra = 'pip install -e ".[memory_gym]" (and memory-gym==1.0.2 with --no-deps)'
    exp.require(not missing, f"{env_id} needs MiniGrid or Memory Gym: {extra}")
    envs = exp.make_envs(lambda: make_vector_env(env_id, args.num_envs, args.capture_video, run_name), env_id)
    obs_space, action_space = envs.single_observation_space, envs.single_action_space
    flat_or_image = isinstance(obs_space, gym.spaces.Box) and (len(obs_space.shape) == 1 or obs_space.shape == (84, 84, 3))
    exp.require(flat_or_image, f"{env_id} observations are {obs_space}; ppo_trxl.py needs a flat Box or 84x84 RGB images")
    exp.require_action_space(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete))
    exp.require(len(obs_space.shape) == 3 or args.reconstruction_coef <= 0, "--reconstruction-coef needs image observations")
    max_episode_steps = envs.envs[0].spec.max_episode_steps
    writer = exp.start_logging()

    agent = Agent(args, obs_space, action_space, max_episode_steps).to(device)
    optimizer = optim.AdamW(agent.parameters(), lr=args.init_lr)
    bce = nn.BCELoss()

    # rollout storage; the hidden states are kept once per episode, and each step records where its memory is
    obs = torch.zeros(
        (args.num_steps, args.num_envs) + obs_space.shape, dtype=torch.as_tensor(obs_space.sample()).dtype, device=device
    )
    actions = torch.zeros((args.num_steps, args.num_envs, len(agent.action_dims)), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs, len(agent.action_dims)), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = torch.zeros((args.num_steps, args.num_envs), device=device)
    dones = torch.zeros((args.num_steps, args.num_envs), device=device)
    episode_ids = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)  # which episode memory
    episode_steps = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)  # step within it
    env_memory = agent.new_memory(args.num_envs, device)  # the memory of each env's current episode
    env_step = torch.zeros(args.num_envs, dtype=torch.long, device=device)
    env_range = torch.arange(args.num_envs, device=device)
    episode_infos = deque(maxlen=100)

    global_step, first_iteration = 0, 1
    if exp.loaded_checkpoint:
        exp.restore_run_state({"agent": agent, "optimizer": optimizer})
        global_step, first_iteration = exp.saved_iteration(args.num_iterations, args.batch_size)
        obs_like = torch.as_tensor(np.zeros(envs.observation_space.shape, envs.observation_space.dtype))
        next_obs = exp.saved_tree("next_obs", obs_like).to(device)
        env_memory = exp.saved_tree("env_memory", env_memory).to(device)
        # an index into each env's memory slots
        env_step = exp.saved_array("env_step", (args.num_envs,), torch.long, 0, max_episode_steps).to(device)
        episode_infos.extend(exp.saved_list("episode_infos", episode_infos.maxlen, (0.0, 0, 0.0)))
    else:
        next_obs, _ = envs.reset(seed=args.seed)
        next_obs = torch.as_tensor(next_obs, device=device)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for iteration in range(first_iteration, args.num_iterations + 1):
            # linear decay to the final values over anneal_steps, then held
            frac = max(1.0 - global_step / args.anneal_steps, 0.0)
            lr = args.final_lr + (args.init_lr - args.final_lr) * frac
            ent_coef = args.final_ent_coef + (args.init_ent_coef - args.final_ent_coef) * frac
            optimizer.param_groups[0]["lr"] = lr

            # the episodes under way carry their memory into this rollout as its first entries
            episode_memories = [None] * args.num_envs
            env_episode = env_range.clone()
            with torch.inference_mode():
                for step in range(args.num_steps):
                    exp.raise_if_stopped()
                    global_step += args.num_envs
                    obs[step] = next_obs
                    episode_ids[step], episode_steps[step] = env_episode, env_step
                    action, logprobs[step], values[step] = agent.act(next_obs, env_memory, env_step)
                    actions[step] = action

                    env_action = action[:, 0] if action.shape[1] == 1 else action
                    next_obs_np, reward, terminations, truncations, infos = envs.step(env_action.cpu().numpy())
                    reward = torch.as_tensor(reward, dtype=torch.float32, device=device)
                    cut = torch.as_tensor(truncations & ~terminations, device=device)
                    if cut.any():
                        # A time limit is not a true end: credit the value of the state the episode was cut at.
                        final_obs = torch.as_tensor(np.stack(infos["final_obs"][cut.cpu().numpy()]), device=device)
                        reward[cut] += args.gamma * agent.get_value(final_obs, env_memory[cut], env_step[cut] + 1)
                    rewards[step] = reward
                    done = terminations | truncations
                    dones[step] = torch.as_tensor(done, device=device)
                    next_obs = torch.as_tensor(next_obs_np, device=device)

                    env_step += 1
                    for i in np.flatnonzero(done):  # the finished episode's memory is kept; a new one starts empty
                        episode_memories[int(env_episode[i])] = env_memory[i].clone()
                        env_memory[i] = 0
                        env_step[i] = 0
                        env_episode[i] = len(episode_memories)
                        episode_memories.append(None)
                    for _, episodic_return, episodic_length, seconds in finished_episodes(infos):
                        print(f"global_step={global_step}, episodic_return={episodic_return}")
                        writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                        writer.add_scalar("charts/episodic_length", episodic_length, global_step)
                        episode_infos.append((episodic_return, episodic_length, seconds))

                for i in range(args.num_envs):
                    episode_memories[int(env_episode[i])] = env_memory[i].clone()
                episode_memories = torch.stack(episode_memories)
                next_value = agent.get_value(next_obs, env_memory, env_step)

                # GAE; dones[t] cuts the recursion, so no advantage flows across an episode boundary
                advantages = torch.zeros_like(rewards)
                lastgaelam = 0
                for t in reversed(range(args.num_steps)):
                    nextvalues = next_value if t == args.num_steps - 1 else values[t + 1]
                    nextnonterminal = 1.0 - dones[t]
                    delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                    advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                returns = advantages + values

            # one flat batch of the rollout
            b_obs = obs.reshape((-1,) + obs_space.shape)
            b_logprobs, b_actions = logprobs.reshape(-1, len(agent.action_dims)), actions.reshape(-1, len(agent.action_dims))
            b_advantages, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)
            b_episode_ids, b_episode_steps = episode_ids.reshape(-1), episode_steps.reshape(-1)

            # the update: epochs of shuffled minibatches: each sample attends to the hidden states cached in the rollout
            stats = {key: [] for key in ("policy_loss", "value_loss", "entropy", "reconstruction_loss", "loss")}
            clipfracs = []
            for _epoch in range(args.update_epochs):
                b_inds = torch.randperm(args.batch_size, device=device)
                for start in range(0, args.batch_size, args.minibatch_size):
                    mb_inds = b_inds[start : start + args.minibatch_size]
                    positions, _ = agent.window(b_episode_steps[mb_inds])
                    mb_memory = episode_memories[b_episode_ids[mb_inds][:, None], positions]
                    newlogprob, entropy, newvalue, hidden = agent.evaluate_actions(
                        b_obs[mb_inds], mb_memory, b_episode_steps[mb_inds], b_actions[mb_inds]
                    )
                    mb_advantages = b_advantages[mb_inds]
                    if args.norm_adv:
                        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                    pg_loss, logratio, ratio = clipped_surrogate(
                        newlogprob - b_logprobs[mb_inds], mb_advantages, args.clip_coef, args.per_branch_ratio
                    )

                    with torch.no_grad():
                        # two estimators of the KL to the rollout policy (http://joschu.net/blog/kl-approx.html)
                        old_approx_kl = (-logratio).mean()
                        approx_kl = ((ratio - 1) - logratio).mean()
                        clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())

                    # value loss (no 0.5 factor: vf_coef alone weighs it)
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    if args.clip_vloss:
                        v_clipped = b_values[mb_inds] + torch.clamp(
                            newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                        )
                        v_loss = torch.max(v_loss_unclipped, (v_clipped - b_returns[mb_inds]) ** 2).mean()
                    else:
                        v_loss = v_loss_unclipped.mean()

                    entropy_loss = entropy.mean()
                    loss = pg_loss - ent_coef * entropy_loss + v_loss * args.vf_coef
                    r_loss = torch.zeros((), device=device)
                    if agent.decoder is not None:  # auxiliary task: rebuild the observation from the hidden layer
                        r_loss = bce(agent.decoder(hidden), agent.normalize(b_obs[mb_inds]))
                        loss = loss + args.reconstruction_coef * r_loss

                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                    optimizer.step()
                    for key, value in zip(stats, (pg_loss, v_loss, entropy_loss, r_loss, loss), strict=True):
                        stats[key].append(value.detach())

                if args.target_kl is not None and approx_kl.item() > args.target_kl:
                    break

            y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
            var_y = np.var(y_true)
            explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

            if episode_infos:  # the last 100 episodes: return, length, seconds
                for key, mean in zip(("r", "l", "t"), np.mean(episode_infos, axis=0), strict=True):
                    writer.add_scalar(f"episode/{key}_mean", mean, global_step)
            writer.add_scalar("episode/value_mean", values.mean().item(), global_step)
            writer.add_scalar("episode/advantage_mean", advantages.mean().item(), global_step)
            writer.add_scalar("charts/learning_rate", lr, global_step)
            writer.add_scalar("charts/entropy_coefficient", ent_coef, global_step)
            for key, history in stats.items():
                writer.add_scalar(f"losses/{key}", torch.stack(history).mean().item(), global_step)
            writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
            writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
            writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
            writer.add_scalar("losses/explained_variance", explained_var, global_step)
            sps = int(global_step / exp.elapsed)
            print("SPS:", sps)
            writer.add_scalar("charts/SPS", sps, global_step)

            if exp.checkpoint_due(iteration):
                state = {"agent": agent.state_dict(), "optimizer": optimizer.state_dict(), "next_obs": next_obs}
                state |= {"env_memory": env_memory, "env_step": env_step, "episode_infos": list(episode_infos)}
                exp.save_checkpoint(global_step, {"iteration": iteration, **state})

        if args.save_model:
            # the weights, and what rebuilds the agent around them (enjoy.py and the evaluator read both)
            model = {"model_weights": agent.state_dict(), "args": vars(args), "max_episode_steps": max_episode_steps}
            exp.save_model(model)
            episodic_returns = evaluate_trxl(
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", Agent, device, args.capture_video
            )
            for idx, episodic_return in enumerate(episodic_returns):  # no --upload-model here: logged by hand
                writer.add_scalar("eval/episodic_return", episodic_return, idx)
