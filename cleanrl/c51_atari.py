"""C51 (categorical distributional DQN) for Atari games from pixels, with a replay memory that keeps each frame once.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/c51-atari/#c51_ataripy (docs/rl-algorithms/c51-atari.md)
"""

import os
import random
from dataclasses import dataclass

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
    learning_rate: float = 2.5e-4
    """optimiser step size"""
    num_envs: int = 1
    """environments stepped in parallel (this script runs exactly one, without a vector-env wrapper)"""
    n_atoms: int = 51
    """atoms of the return distribution's support"""
    v_min: float = -10
    """smallest return the distribution's support covers (v_min)"""
    v_max: float = 10
    """largest return the distribution's support covers (v_max)"""
    buffer_size: int = 1000000
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
    target_network_frequency: int = 10000
    """environment steps between target-network updates"""
    batch_size: int = 32
    """transitions per replay sample"""
    start_e: float = 1
    """ε of ε-greedy exploration at the start"""
    end_e: float = 0.01
    """ε of ε-greedy exploration once annealed"""
    exploration_fraction: float = 0.10
    """share of the budget over which ε falls linearly from start-e to end-e"""
    learning_starts: int = 80000
    """environment steps collected before the first update"""
    train_frequency: int = 4
    """environment steps between gradient updates"""


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import gymnasium as gym
import torch
import torch.nn as nn
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
from cleanrl_utils.runtime.frame_replay import FrameReplayBuffer


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


class QNetwork(nn.Module):
    """Nature-CNN that outputs, for every action, a probability mass over `n_atoms` fixed return values (the support)."""

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
            nn.Linear(3136, 512),
            nn.ReLU(),
            nn.Linear(512, self.n_actions * n_atoms),
        )

    def log_pmfs(self, x):
        """Log-probabilities, shape (batch, actions, atoms); uint8 frames become floats in [0, 1] only here."""
        logits = self.network(x / 255.0).view(len(x), self.n_actions, self.n_atoms)
        return logits.log_softmax(dim=-1)

    def pmfs(self, x):
        """Return distributions, shape (batch, actions, atoms)."""
        return self.log_pmfs(x).exp()

    def forward(self, x):
        """Q-values: the mean of each action's return distribution."""
        return (self.pmfs(x) * self.atoms).sum(-1)


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def project(next_atoms, next_pmfs, atoms):
    """Distribute each probability of `next_pmfs`, sitting at `next_atoms`, onto the two nearest atoms of the support.

    This is the categorical projection of the C51 paper: the Bellman-updated distribution lives on
    shifted and shrunk atoms (r + gamma * z), and the loss needs it on the network's fixed support.
    """
    v_min, v_max, n_atoms = atoms[0], atoms[-1], atoms.numel()
    delta_z = (v_max - v_min) / (n_atoms - 1)
    b = (next_atoms.clamp(v_min, v_max) - v_min) / delta_z  # fractional index into the support
    lower, upper = b.floor().clamp(0, n_atoms - 1), b.ceil().clamp(0, n_atoms - 1)
    # When b falls exactly on an atom, lower == upper and the whole mass goes to it.
    mass_lower = (upper + (lower == upper).float() - b) * next_pmfs
    mass_upper = (b - lower) * next_pmfs
    target_pmfs = torch.zeros_like(next_pmfs)
    target_pmfs.scatter_add_(-1, lower.long(), mass_lower)
    target_pmfs.scatter_add_(-1, upper.long(), mass_upper)
    return target_pmfs


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("batch_size")
    exp.require(args.num_envs == 1, f"--num-envs {args.num_envs}: c51_atari.py runs a single environment")
    exp.require(args.n_atoms >= 2, f"--n-atoms must be at least 2, got {args.n_atoms}")
    exp.require(args.v_min < args.v_max, f"need --v-min < --v-max, got {args.v_min} and {args.v_max}")
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

    support = dict(n_atoms=args.n_atoms, v_min=args.v_min, v_max=args.v_max)
    # the CNNs in channels-last layout, oneDNN's fastest for convolutions
    q_network = QNetwork(env, **support).to(device, memory_format=torch.channels_last)
    # Adam with the paper's eps
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate, eps=0.01 / args.batch_size, fused=True)
    target_network = QNetwork(env, **support).to(device, memory_format=torch.channels_last)
    target_network.load_state_dict(q_network.state_dict())

    # each frame is stored once; a transition's stacks are rebuilt when sampled
    rb = FrameReplayBuffer(args.buffer_size, env.observation_space.shape[1:], env.observation_space.shape[0], device)
    batch_index = torch.arange(args.batch_size, device=device)

    obs, _ = env.reset(seed=args.seed)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for global_step in range(args.total_timesteps):
            exp.raise_if_stopped()
            epsilon = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step)
            if random.random() < epsilon:
                action = env.action_space.sample()
            else:
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
                    data = rb.sample(args.batch_size)
                    with torch.no_grad():
                        # the target network's distribution for its greedy next action, moved by the Bellman update
                        next_pmfs = target_network.pmfs(data.next_observations)
                        next_actions = (next_pmfs * target_network.atoms).sum(-1).argmax(1)
                        next_pmfs = next_pmfs[batch_index, next_actions]
                        next_atoms = data.rewards[:, None] + args.gamma * target_network.atoms * (1 - data.dones[:, None])
                        target_pmfs = project(next_atoms, next_pmfs, target_network.atoms)

                    old_log_pmfs = q_network.log_pmfs(data.observations)[batch_index, data.actions]
                    # cross-entropy between the projected target and the predicted distribution, on log-softmax
                    # outputs: clamped probabilities would zero the gradient of a saturated distribution
                    loss = (-(target_pmfs * old_log_pmfs).sum(-1)).mean()

                    if global_step % 100 == 0:
                        writer.add_scalar("losses/loss", loss.item(), global_step)
                        old_val = (old_log_pmfs.detach().exp() * q_network.atoms).sum(-1)
                        writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)
                        sps = int(global_step / exp.elapsed)
                        print("SPS:", sps)
                        writer.add_scalar("charts/SPS", sps, global_step)

                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

                # the target network catches up with the online one
                if global_step % args.target_network_frequency == 0:
                    target_network.load_state_dict(q_network.state_dict())

        if args.save_model:
            # the support (n_atoms, v_min, v_max) rebuilds the network: the args go along
            exp.save_model({"model_weights": q_network.state_dict(), "args": vars(args)})
            episodic_returns = evaluate_distributional(
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", QNetwork, device, args.end_e, args.capture_video
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="C51")
