"""DQN for Atari games from pixels (ale-py's Breakout, Pong, ...), with a replay memory that keeps each frame once.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/dqn-atari/#dqn_ataripy (docs/rl-algorithms/dqn-atari.md)
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
    checkpoint_frequency: int = 0
    """save a checkpoint to resume from every this many steps (0: never); it holds the replay buffer too"""
    resume: str | None = None
    """continue the run of this checkpoint file, or of this run folder's newest one, with its arguments (checked as the command line's); a checkpoint is read as data, never run"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "BreakoutNoFrameskip-v4"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 10000000
    """training budget in environment steps"""
    learning_rate: float = 1e-4
    """optimiser step size"""
    num_envs: int = 1
    """environments stepped in parallel (this script runs exactly one, without a vector-env wrapper)"""
    buffer_size: int = 1000000
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
    tau: float = 1.0
    """soft-update rate τ of the target network (1.0 copies the weights)"""
    target_network_frequency: int = 1000
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
import torch.nn.functional as F
import torch.optim as optim
from stable_baselines3.common.atari_wrappers import (
    ClipRewardEnv,
    EpisodicLifeEnv,
    FireResetEnv,
    MaxAndSkipEnv,
    NoopResetEnv,
)

from cleanrl_utils.runtime.evals.atari import evaluate_dqn
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
    def __init__(self, env):
        super().__init__()
        # Nature-CNN
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
            nn.Linear(512, env.action_space.n),
        )

    def forward(self, x):
        return self.network(x / 255.0)  # uint8 frames become floats in [0, 1] only here


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("batch_size")
    exp.require(args.num_envs == 1, f"--num-envs {args.num_envs}: dqn_atari.py runs a single environment")
    problem = replay_memory_problem(args, 84 * 84, copies=1)  # one 84x84 frame per transition
    exp.require(not problem, problem)
    run_name = exp.run_name

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup, before any file is written
    exp.require_atari_game(see="dqn.py for vector observations", see_continuous="sac_continuous_action.py")
    env = exp.make_envs(make_env(args.env_id, 0, args.capture_video, run_name), args.env_id)
    env.action_space.seed(args.seed)
    writer = exp.start_logging()

    q_network = QNetwork(env).to(device, memory_format=torch.channels_last)  # oneDNN's fastest layout for convolutions
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate, fused=True)
    target_network = QNetwork(env).to(device, memory_format=torch.channels_last)
    target_network.load_state_dict(q_network.state_dict())

    # each frame is stored once; a transition's stacks are rebuilt when sampled
    rb = FrameReplayBuffer(args.buffer_size, env.observation_space.shape[1:], env.observation_space.shape[0], device)

    learners = {"q_network": q_network, "target_network": target_network, "optimizer": optimizer, "replay_buffer": rb}
    first_step = 0
    if exp.loaded_checkpoint:
        exp.restore_run_state(learners)
        exp.require(rb.actions.max() < env.action_space.n, "--resume: refused, its replay memory holds actions the game lacks")
        obs = exp.saved_array("obs", env.observation_space.shape, env.observation_space.dtype)
        first_step = exp.saved_int("global_step", 0, args.total_timesteps - 1) + 1
    else:
        obs, _ = env.reset(seed=args.seed)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for global_step in range(first_step, args.total_timesteps):
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
                        target_max, _ = target_network(data.next_observations).max(dim=1)
                        td_target = data.rewards + args.gamma * target_max * (1 - data.dones)
                    old_val = q_network(data.observations).gather(1, data.actions.unsqueeze(1)).squeeze(1)
                    loss = F.mse_loss(td_target, old_val)

                    if global_step % 100 == 0:
                        writer.add_scalar("losses/td_loss", loss.item(), global_step)
                        writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)
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

            if exp.checkpoint_due(global_step + 1):
                # named after the steps done; `global_step` is the last step logged
                exp.save_checkpoint(global_step + 1, {"global_step": global_step, "obs": obs}, learners)

        if args.save_model:
            exp.save_model(q_network.state_dict())
            episodic_returns = evaluate_dqn(
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", QNetwork, device, args.end_e, args.capture_video
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="DQN")
