"""Soft Actor-Critic for discrete actions on Atari games from pixels, with a replay memory that keeps each frame once.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/sac-atari/#sac_ataripy (docs/rl-algorithms/sac-atari.md)
"""

import os
import random
import signal
import sys
import time
from dataclasses import dataclass
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import tyro
from stable_baselines3.common.atari_wrappers import (
    ClipRewardEnv,
    EpisodicLifeEnv,
    FireResetEnv,
    MaxAndSkipEnv,
    NoopResetEnv,
)
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter

try:  # the Atari games come with the `atari` extra; without it, make_checked_env says how to install it
    import ale_py

    gym.register_envs(ale_py)
except ImportError:
    ale_py = None


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
    checkpoint_frequency: int = 0
    """save a checkpoint to resume from every this many steps (0: never); it holds the replay buffer too"""
    resume: str | None = None
    """continue the run of this checkpoint file, or of this run folder's newest checkpoint, with its arguments"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "BeamRiderNoFrameskip-v4"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 5000000
    """training budget in environment steps"""
    buffer_size: int = 1000000
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
    tau: float = 1.0
    """soft-update rate τ of the target networks (1.0 copies the weights)"""
    batch_size: int = 64
    """transitions per replay sample"""
    learning_starts: int = 20000
    """environment steps collected before the first update (uniformly random actions until then)"""
    policy_lr: float = 3e-4
    """actor's optimiser step size"""
    q_lr: float = 3e-4
    """critics' optimiser step size (the entropy temperature's too)"""
    update_frequency: int = 4
    """the number of environment steps between two updates of the networks"""
    target_network_frequency: int = 8000
    """environment steps between target-network updates"""
    alpha: float = 0.2
    """entropy temperature α (used as is without --autotune)"""
    autotune: bool = True
    """learn the entropy temperature α towards a target entropy"""
    target_entropy_scale: float = 0.89
    """target entropy of the autotuned temperature, as a share of the uniform policy's: scale × ln(number of actions)"""


# the extra of pyproject.toml that brings what an env family needs, keyed by its entry-point module
ENV_EXTRAS = {"box2d": "box2d", "mujoco": "mujoco", "ale_py": "atari"}


def fail(message: str):
    """Bad input: one line on stderr and exit code 2, no traceback."""
    message = " ".join(message.split())  # library messages can span lines
    print(f"{os.path.basename(__file__)}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


stop_signals = []  # Ctrl-C / SIGTERM received so far


def request_stop(signum, frame):
    """Note the signal: the loop stops at its next step, through `finally` (a second signal stops at once).

    Raising wherever the signal lands could hit TensorBoard's event writer mid-call and deadlock its
    close, losing the logs; the check at the top of each step cannot.
    """
    if stop_signals:
        raise KeyboardInterrupt
    stop_signals.append(signum)


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if ale_py is None:
            raise gym.error.DependencyNotInstalled('the Atari games need ale-py: pip install -e ".[atari]"')
        if "ale_py" not in str(gym.spec(env_id).entry_point):  # enjoy and the evaluators call this directly
            raise gym.error.Error(f"{env_id} is not an Atari game of ale-py")
        # ALE/...-v5 ids skip 4 frames by themselves; here MaxAndSkipEnv does it (max over the last two frames)
        skip = {"frameskip": 1} if gym.spec(env_id).kwargs.get("frameskip", 1) != 1 else {}
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True, **skip)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, disable_env_checker=True, **skip)
        # Below the life and reward wrappers: `info["episode"]` appears only when the whole game ends,
        # with its raw score and its length in frames.
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = NoopResetEnv(env, noop_max=30)
        env = MaxAndSkipEnv(env, skip=4)
        env = EpisodicLifeEnv(env)  # a lost life ends the episode for learning, not the game
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = FireResetEnv(env)
        env = ClipRewardEnv(env)
        env = gym.wrappers.ResizeObservation(env, (84, 84))
        env = gym.wrappers.GrayscaleObservation(env)
        env = gym.wrappers.FrameStackObservation(env, 4)
        return env

    return thunk


def make_checked_env(env_id, capture_video, run_name):
    """The training env, or one clear error line for an env this script cannot learn."""
    spec = gym.registry.get(env_id)
    if spec is None or "ale_py" not in str(spec.entry_point):
        if spec is None and ale_py is None:
            fail(f'{env_id}: not a known env, and the Atari games need ale-py: pip install -e ".[atari]"')
        try:  # made once to tell what is wrong with it
            env = gym.make(env_id, disable_env_checker=True)
        except gym.error.DependencyNotInstalled as e:
            extra = next((extra for family, extra in ENV_EXTRAS.items() if family in str(spec.entry_point)), "all")
            fail(f'{env_id}: {str(e).split(",")[0]}; install it with pip install -e ".[{extra}]"')
        except (gym.error.Error, ModuleNotFoundError) as e:
            fail(f"cannot make env {env_id!r}: {e}")
        if not isinstance(env.action_space, gym.spaces.Discrete):
            fail(f"{env_id} has {env.action_space} actions; sac_atari.py needs Discrete ones (see sac_continuous_action.py)")
        fail(f"{env_id} is not an Atari game of ale-py; sac_atari.py needs one (see dqn.py for vector observations)")
    try:
        return make_env(env_id, 0, capture_video, run_name)()
    except (gym.error.Error, ModuleNotFoundError) as e:
        fail(f"cannot make env {env_id!r}: {e}")


# the networks
def layer_init(layer):
    nn.init.kaiming_normal_(layer.weight)
    nn.init.constant_(layer.bias, 0.0)
    return layer


def nature_cnn():
    """The convolutional torso each network has its own copy of: 4 stacked 84x84 frames -> 3136 features."""
    return nn.Sequential(
        layer_init(nn.Conv2d(4, 32, kernel_size=8, stride=4)),
        nn.ReLU(),
        layer_init(nn.Conv2d(32, 64, kernel_size=4, stride=2)),
        nn.ReLU(),
        layer_init(nn.Conv2d(64, 64, kernel_size=3, stride=1)),
        nn.Flatten(),
    )


class SoftQNetwork(nn.Module):
    """Soft Q-values of every action at once: a discrete action needs no action input."""

    def __init__(self, env):
        super().__init__()
        self.conv = nature_cnn()
        self.fc1 = layer_init(nn.Linear(3136, 512))
        self.fc_q = layer_init(nn.Linear(512, env.action_space.n))

    def forward(self, x):
        x = F.relu(self.conv(x / 255.0))  # uint8 frames become floats in [0, 1] only here
        x = F.relu(self.fc1(x))
        return self.fc_q(x)


class Actor(nn.Module):
    def __init__(self, env):
        super().__init__()
        self.conv = nature_cnn()
        self.fc1 = layer_init(nn.Linear(3136, 512))
        self.fc_logits = layer_init(nn.Linear(512, env.action_space.n))

    def forward(self, x):
        x = F.relu(self.conv(x / 255.0))
        x = F.relu(self.fc1(x))
        return self.fc_logits(x)

    def get_action(self, x):
        """A sampled action, and the log-probabilities and probabilities of all the actions."""
        logits = self(x)
        action = Categorical(logits=logits).sample()
        # The policy's expectations are sums over its few actions: no sampled estimate, no reparameterisation.
        log_probs = F.log_softmax(logits, dim=1)
        return action, log_probs, log_probs.exp()


def actor_loss_fn(action_probs, log_probs, min_q_values, alpha):
    """E_s[ sum_a pi(a|s) (alpha log pi(a|s) - min Q(s, a)) ], averaged over the actions too, as the reference does."""
    return (action_probs * (alpha * log_probs - min_q_values)).mean()


def temperature_loss(log_alpha, action_probs, log_probs, target_entropy):
    """Lowers alpha while the policy's entropy is above the target, raises it while below (same averaging)."""
    return (action_probs.detach() * (-log_alpha.exp() * (log_probs + target_entropy).detach())).mean()


class ReplayBatch(NamedTuple):
    observations: torch.Tensor  # uint8 (batch, stack, 84, 84)
    actions: torch.Tensor  # int64 (batch, 1)
    next_observations: torch.Tensor
    dones: torch.Tensor  # float (batch,): 1 after a termination (a lost life), 0 after a time-limit cut
    rewards: torch.Tensor  # float (batch,)


class FrameReplayBuffer:
    """A replay memory that stores each 84x84 frame once, ~7 KB per transition.

    Consecutive stacked observations share all but one frame, and a transition's next observation is
    the following one, so storing both stacks (as a generic buffer does) keeps every frame 8 times.
    Here slot `i` of a ring holds one frame (the newest of an observation) and the action, clipped
    reward and termination flag of the transition that starts from it; its next observation ends at
    slot `i + 1`. Stacks are rebuilt when sampling, and never reach across an episode start: slots
    flagged `first` hold the first frame of an episode, which the env's frame stack repeats to fill
    up the stack, and so does the rebuild. An episode's last frame takes a slot of its own, with no
    transition from it, so a stored next observation is always the real one, also after a time-limit
    cut (which then bootstraps from it).
    """

    ARRAYS = ("frames", "actions", "rewards", "terminated", "first", "valid")

    def __init__(self, capacity, frame_shape, stack, device):
        if capacity < 2 * stack:
            raise ValueError(f"a replay memory of {capacity} frames cannot hold stacks of {stack}")
        self.capacity, self.stack, self.device = capacity, stack, device
        self.frames = np.zeros((capacity, *frame_shape), dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.uint8)  # Atari games have at most 18 actions
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)
        self.first = np.zeros(capacity, dtype=bool)  # the frame starts an episode
        self.valid = np.zeros(capacity, dtype=bool)  # a transition starts here and all its frames are stored
        self.pos = self.size = 0  # next slot to write; slots filled
        self.last = None  # slot of the current observation's newest frame; None between episodes
        self._window = np.arange(-stack + 1, 2)  # a stack and the next frame, relative to the sampled slot
        self._ahead = np.arange(1, stack)  # the slots whose stacks reach back to a slot being written

    @property
    def nbytes(self):
        return sum(getattr(self, name).nbytes for name in self.ARRAYS)

    def _write(self, frame, first):
        slot = self.pos
        self.frames[slot], self.first[slot], self.valid[slot] = frame, first, False
        # The transitions of the next slots, now the oldest, would rebuild their stacks from this new frame.
        self.valid[(slot + self._ahead) % self.capacity] = False
        self.pos, self.size = (slot + 1) % self.capacity, min(self.size + 1, self.capacity)
        return slot

    def add(self, obs, next_obs, action, reward, terminated, episode_end):
        """Store a transition between stacked observations (only their newest frames are kept)."""
        if self.last is None:  # an episode starts: its first observation is one frame, repeated
            self.last = self._write(obs[-1], first=True)
        slot = self.last
        self.actions[slot], self.rewards[slot], self.terminated[slot] = action, reward, terminated
        self.last = self._write(next_obs[-1], first=False)
        self.valid[slot] = True
        if episode_end:
            self.last = None

    def sample(self, batch_size):
        slots = np.random.randint(0, self.size, size=batch_size)
        while not (ok := self.valid[slots]).all():  # the few slots with no transition are drawn again
            slots[~ok] = np.random.randint(0, self.size, size=int((~ok).sum()))
        return self.fetch(slots)

    def __getstate__(self):  # a checkpoint of a memory not yet full leaves out its empty part
        state = dict(vars(self))
        for name in self.ARRAYS:
            state[name] = state[name][: self.size]
        return state

    def __setstate__(self, state):
        for name in self.ARRAYS:
            part = state[name]
            state[name] = np.zeros((state["capacity"], *part.shape[1:]), dtype=part.dtype)
            state[name][: len(part)] = part
        vars(self).update(state)

    def fetch(self, slots):
        """The transitions that start at these (valid) slots."""
        # Rebuild the window of stack + 1 frames backwards: before the first frame of an episode, repeat it.
        window = (slots[:, None] + self._window) % self.capacity
        for k in range(self.stack - 2, -1, -1):
            window[:, k] = np.where(self.first[window[:, k + 1]], window[:, k + 1], window[:, k])
        frames = torch.from_numpy(self.frames[window]).to(self.device)  # one copy serves both stacks
        return ReplayBatch(
            frames[:, :-1],
            torch.from_numpy(self.actions[slots].astype(np.int64)).to(self.device).unsqueeze(1),
            frames[:, 1:],
            torch.from_numpy(self.terminated[slots].astype(np.float32)).to(self.device),
            torch.from_numpy(self.rewards[slots]).to(self.device),
        )


if __name__ == "__main__":
    args = tyro.cli(Args)
    if args.checkpoint_frequency < 0:
        fail(f"--checkpoint-frequency must be 0 (off) or positive, got {args.checkpoint_frequency}")
    checkpoint = None
    if args.checkpoint_frequency or args.resume:
        try:  # a resumed run goes on with the arguments it was started with
            from cleanrl_utils import checkpoint as ckpt

            checkpoint = ckpt.load(args.resume) if args.resume else None
            args = ckpt.restored_args(args, checkpoint) if checkpoint else args
        except ImportError:
            fail("--checkpoint-frequency and --resume use cleanrl_utils: install this project first (pip install -e .)")
        except ckpt.CheckpointError as e:
            fail(str(e))
    for name in ("total_timesteps", "batch_size", "update_frequency", "target_network_frequency"):
        if getattr(args, name) <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.buffer_size < 8:
        fail(f"--buffer-size {args.buffer_size}: the replay memory needs room for 8 frames at least")
    if args.learning_starts < 0 or not 0 < args.tau <= 1 or args.alpha < 0 or args.target_entropy_scale < 0:
        fail("need --learning-starts >= 0, 0 < --tau <= 1, --alpha >= 0 and --target-entropy-scale >= 0")
    run_name = checkpoint["run_name"] if checkpoint else f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if args.upload_model and not args.save_model:
        fail("--upload-model uploads the saved model: add --save-model")
    if args.save_model:
        try:  # checked now, not after training: the evaluator and uploader come with this project's package
            from cleanrl_utils.evals.sac_atari_eval import evaluate

            if args.upload_model:
                from cleanrl_utils.huggingface import UploadError, push_to_hub, require_token

                require_token()
        except ImportError:
            fail("--save-model evaluates the model with cleanrl_utils: install this project first (pip install -e .)")
        except UploadError as e:
            fail(str(e))

    # seeds
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup (before any file is written, so bad input leaves nothing behind)
    # One env stepped directly: a one-env vector wrapper would only add cost to each step.
    env = make_checked_env(args.env_id, args.capture_video, run_name)
    env.action_space.seed(args.seed)

    if args.track:
        import wandb

        wandb.init(
            project=args.wandb_project_name,
            entity=args.wandb_entity,
            sync_tensorboard=True,
            config=vars(args),
            name=run_name,
            save_code=True,
            id=checkpoint["wandb_id"] if checkpoint else None,  # a resumed run goes on in the same W&B run
            resume="allow" if checkpoint else None,
        )
    # A resumed run appends to the same folder; TensorBoard drops what the old run logged after the checkpoint.
    writer = SummaryWriter(f"runs/{run_name}", purge_step=checkpoint["global_step"] + 1 if checkpoint else None)
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n" + "\n".join(f"|{key}|{value}|" for key, value in vars(args).items()),
    )
    writer.add_text("tags", os.environ.get("WANDB_TAGS", ""))  # comma-separated; read back by cleanrl_utils.rlops

    actor = Actor(env).to(device)
    qf1 = SoftQNetwork(env).to(device)
    qf2 = SoftQNetwork(env).to(device)
    qf1_target = SoftQNetwork(env).to(device)
    qf2_target = SoftQNetwork(env).to(device)
    qf1_target.load_state_dict(qf1.state_dict())
    qf2_target.load_state_dict(qf2.state_dict())
    q_params = list(qf1.parameters()) + list(qf2.parameters())
    target_params = list(qf1_target.parameters()) + list(qf2_target.parameters())
    # Adam with eps 1e-4 for all three optimisers (critics, actor, temperature), the published setting
    q_optimizer = optim.Adam(q_params, lr=args.q_lr, eps=1e-4)
    actor_optimizer = optim.Adam(actor.parameters(), lr=args.policy_lr, eps=1e-4)

    # Automatic entropy tuning: the target is a share of the largest entropy, that of the uniform policy
    if args.autotune:
        target_entropy = args.target_entropy_scale * np.log(env.action_space.n)
        log_alpha = torch.zeros(1, requires_grad=True, device=device)
        a_optimizer = optim.Adam([log_alpha], lr=args.q_lr, eps=1e-4)
        alpha = log_alpha.detach().exp()[0]  # starts at 1
    else:
        alpha = torch.tensor(args.alpha, device=device)  # a tensor, like the tuned one (no host round trips)

    # 1M transitions take ~7 GB here, where two stored stacks per transition would take ~56 GB.
    rb = FrameReplayBuffer(args.buffer_size, env.observation_space.shape[1:], env.observation_space.shape[0], device)
    start_time = time.time()

    first_step = 0
    if checkpoint:  # pick up exactly where the checkpoint was written
        actor.load_state_dict(checkpoint["actor"])
        qf1.load_state_dict(checkpoint["qf1"])
        qf2.load_state_dict(checkpoint["qf2"])
        qf1_target.load_state_dict(checkpoint["qf1_target"])
        qf2_target.load_state_dict(checkpoint["qf2_target"])
        q_optimizer.load_state_dict(checkpoint["q_optimizer"])
        actor_optimizer.load_state_dict(checkpoint["actor_optimizer"])
        if args.autotune:
            with torch.no_grad():
                log_alpha.copy_(checkpoint["log_alpha"])
            a_optimizer.load_state_dict(checkpoint["a_optimizer"])
            alpha = log_alpha.detach().exp()[0]
        rb = checkpoint["replay_buffer"]
        rb.device = device
        ckpt.restore_env(env, checkpoint["env"])
        env.unwrapped.ale.restoreState(checkpoint["ale_state"])  # the emulator, which the env snapshot cannot pickle
        ckpt.set_rng_state(checkpoint["rng"])
        obs, first_step = checkpoint["obs"], checkpoint["global_step"] + 1
        start_time -= checkpoint["elapsed_time"]
    else:
        obs, _ = env.reset(seed=args.seed)
    # Ctrl-C and SIGTERM (a scheduler, the benchmark runner) end the run through `finally`, logs saved.
    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        for global_step in range(first_step, args.total_timesteps):
            if stop_signals:
                raise KeyboardInterrupt
            # act: uniformly random until learning starts, then from the policy
            if global_step < args.learning_starts:
                action = env.action_space.sample()
            else:
                with torch.inference_mode():
                    action, _, _ = actor.get_action(torch.as_tensor(obs, device=device).unsqueeze(0))
                action = action.item()

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

            # learn
            if global_step > args.learning_starts:
                if global_step % args.update_frequency == 0:
                    data = rb.sample(args.batch_size)
                    # CRITIC training
                    with torch.no_grad():
                        _, next_log_pi, next_action_probs = actor.get_action(data.next_observations)
                        qf_next_target = torch.min(qf1_target(data.next_observations), qf2_target(data.next_observations))
                        # the soft state value V(s') = sum_a pi(a|s') (Q(s', a) - alpha log pi(a|s')), exactly
                        min_qf_next_target = (next_action_probs * (qf_next_target - alpha * next_log_pi)).sum(dim=1)
                        next_q_value = data.rewards + (1 - data.dones) * args.gamma * min_qf_next_target

                    qf1_a_values = qf1(data.observations).gather(1, data.actions).view(-1)
                    qf2_a_values = qf2(data.observations).gather(1, data.actions).view(-1)
                    qf1_loss = F.mse_loss(qf1_a_values, next_q_value)
                    qf2_loss = F.mse_loss(qf2_a_values, next_q_value)
                    qf_loss = qf1_loss + qf2_loss

                    q_optimizer.zero_grad()
                    qf_loss.backward()
                    q_optimizer.step()

                    # ACTOR training: the critics, just updated, are evaluated without gradients
                    _, log_pi, action_probs = actor.get_action(data.observations)
                    with torch.no_grad():
                        min_qf_values = torch.min(qf1(data.observations), qf2(data.observations))
                    actor_loss = actor_loss_fn(action_probs, log_pi, min_qf_values, alpha)

                    actor_optimizer.zero_grad()
                    actor_loss.backward()
                    actor_optimizer.step()

                    if args.autotune:
                        # the probabilities of the actor step just taken, without a second forward pass
                        alpha_loss = temperature_loss(log_alpha, action_probs, log_pi, target_entropy)

                        a_optimizer.zero_grad()
                        alpha_loss.backward()
                        a_optimizer.step()
                        alpha = log_alpha.detach().exp()[0]

                    if global_step % 100 < args.update_frequency:  # about every 100 steps, whatever the frequency
                        writer.add_scalar("losses/qf1_values", qf1_a_values.mean().item(), global_step)
                        writer.add_scalar("losses/qf2_values", qf2_a_values.mean().item(), global_step)
                        writer.add_scalar("losses/qf1_loss", qf1_loss.item(), global_step)
                        writer.add_scalar("losses/qf2_loss", qf2_loss.item(), global_step)
                        writer.add_scalar("losses/qf_loss", qf_loss.item() / 2.0, global_step)
                        writer.add_scalar("losses/actor_loss", actor_loss.item(), global_step)
                        writer.add_scalar("losses/alpha", alpha.item(), global_step)
                        if args.autotune:
                            writer.add_scalar("losses/alpha_loss", alpha_loss.item(), global_step)
                        sps = int(global_step / (time.time() - start_time))
                        print("SPS:", sps)
                        writer.add_scalar("charts/SPS", sps, global_step)

                # update the target networks
                if global_step % args.target_network_frequency == 0:
                    with torch.no_grad():
                        for target_param, param in zip(target_params, q_params):
                            target_param.lerp_(param, args.tau)

            if args.checkpoint_frequency and (global_step + 1) % args.checkpoint_frequency == 0:
                writer.flush()  # the logs on disk reach the checkpoint, whatever happens next
                ckpt.save(f"runs/{run_name}", global_step + 1, {
                    "args": vars(args), "run_name": run_name, "wandb_id": wandb.run.id if args.track else None,
                    "global_step": global_step, "elapsed_time": time.time() - start_time, "rng": ckpt.rng_state(),
                    "actor": actor.state_dict(), "qf1": qf1.state_dict(), "qf2": qf2.state_dict(),
                    "qf1_target": qf1_target.state_dict(), "qf2_target": qf2_target.state_dict(),
                    "q_optimizer": q_optimizer.state_dict(), "actor_optimizer": actor_optimizer.state_dict(),
                    "log_alpha": log_alpha.detach() if args.autotune else None,
                    "a_optimizer": a_optimizer.state_dict() if args.autotune else None,
                    "replay_buffer": rb, "env": ckpt.env_state(env), "obs": obs,
                    "ale_state": env.unwrapped.ale.cloneState(include_rng=True),
                })  # fmt: skip

        if args.save_model:
            model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
            # the actor is what acts; the critics come along for whoever wants to go on training
            torch.save({"actor": actor.state_dict(), "qf1": qf1.state_dict(), "qf2": qf2.state_dict()}, model_path)
            print(f"model saved to {model_path}")
            episodic_returns = evaluate(
                model_path,
                make_env,
                args.env_id,
                eval_episodes=10,
                run_name=f"{run_name}-eval",
                Model=Actor,
                device=device,
                capture_video=args.capture_video,
            )
            for idx, episodic_return in enumerate(episodic_returns):
                writer.add_scalar("eval/episodic_return", episodic_return, idx)
            if args.upload_model:
                writer.flush()  # the uploaded event file then holds the evaluation too
                try:
                    push_to_hub(args, episodic_returns, "SAC", f"runs/{run_name}", f"videos/{run_name}-eval", __file__)
                except UploadError as e:
                    fail(str(e))
        if stop_signals:  # one came during the evaluation
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        print(f"{os.path.basename(__file__)}: interrupted; what was logged is in runs/{run_name}", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        # Runs on a crash or an interruption too: the event file is flushed and videos are closed.
        env.close()
        writer.close()
        if args.track:
            for video in sorted(os.listdir(f"videos/{run_name}")) if args.capture_video else []:
                wandb.log({"videos": wandb.Video(f"videos/{run_name}/{video}", format="mp4")})
            wandb.finish()
