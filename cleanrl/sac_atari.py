"""Soft Actor-Critic for discrete actions on Atari games from pixels, with a replay memory that keeps each frame once.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/sac-atari/#sac_ataripy (docs/rl-algorithms/sac-atari.md)
"""

import os
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


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from stable_baselines3.common.atari_wrappers import ClipRewardEnv, EpisodicLifeEnv, FireResetEnv, MaxAndSkipEnv, NoopResetEnv
from torch.distributions.categorical import Categorical

from cleanrl_utils.runtime.evals.atari import evaluate_sac
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


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("batch_size", "update_frequency")
    exp.require(args.target_entropy_scale >= 0, "--target-entropy-scale must not be negative")
    problem = replay_memory_problem(args, 84 * 84, copies=1)  # one 84x84 frame per transition
    exp.require(not problem, problem)
    run_name = exp.run_name

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup, before any file is written
    exp.require_atari_game(see="dqn.py for vector observations", see_continuous="sac_continuous_action.py")
    env = exp.make_envs(lambda: make_env(args.env_id, 0, args.capture_video, run_name)(), args.env_id)
    env.action_space.seed(args.seed)
    writer = exp.start_logging()

    actor = Actor(env).to(device, memory_format=torch.channels_last)  # oneDNN's fastest layout for convolutions
    qf1 = SoftQNetwork(env).to(device, memory_format=torch.channels_last)
    qf2 = SoftQNetwork(env).to(device, memory_format=torch.channels_last)
    qf1_target = SoftQNetwork(env).to(device, memory_format=torch.channels_last)
    qf2_target = SoftQNetwork(env).to(device, memory_format=torch.channels_last)
    qf1_target.load_state_dict(qf1.state_dict())
    qf2_target.load_state_dict(qf2.state_dict())
    q_params = list(qf1.parameters()) + list(qf2.parameters())
    target_params = list(qf1_target.parameters()) + list(qf2_target.parameters())
    # Adam with eps 1e-4 for the critics, the actor and the temperature, the published setting
    q_optimizer = optim.Adam(q_params, lr=args.q_lr, eps=1e-4, fused=True)
    actor_optimizer = optim.Adam(actor.parameters(), lr=args.policy_lr, eps=1e-4, fused=True)

    # Automatic entropy tuning: the target is a share of the largest entropy, that of the uniform policy
    if args.autotune:
        target_entropy = args.target_entropy_scale * np.log(env.action_space.n)
        log_alpha = torch.zeros(1, requires_grad=True, device=device)
        a_optimizer = optim.Adam([log_alpha], lr=args.q_lr, eps=1e-4, fused=True)
        alpha = log_alpha.detach().exp()[0]  # starts at 1
    else:
        alpha = torch.tensor(args.alpha, device=device)  # a tensor, like the tuned one

    # each frame is stored once; a transition's stacks are rebuilt when sampled
    rb = FrameReplayBuffer(args.buffer_size, env.observation_space.shape[1:], env.observation_space.shape[0], device)
    learners = {"actor": actor, "qf1": qf1, "qf2": qf2, "qf1_target": qf1_target, "qf2_target": qf2_target}
    learners |= {"q_optimizer": q_optimizer, "actor_optimizer": actor_optimizer, "replay_buffer": rb}
    if args.autotune:
        learners["a_optimizer"] = a_optimizer

    first_step = 0
    if exp.loaded_checkpoint:
        exp.restore_run_state(learners)
        exp.require(rb.actions.max() < env.action_space.n, "--resume: refused, its replay memory holds actions the game lacks")
        if args.autotune:
            with torch.no_grad():
                log_alpha.copy_(exp.saved_array("log_alpha", (1,), torch.float32, -88, 88))  # e^x finite in float32
            alpha = log_alpha.detach().exp()[0]
        obs = exp.saved_array("obs", env.observation_space.shape, env.observation_space.dtype)
        first_step = exp.saved_int("global_step", 0, args.total_timesteps - 1) + 1
    else:
        obs, _ = env.reset(seed=args.seed)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for global_step in range(first_step, args.total_timesteps):
            exp.raise_if_stopped()
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

                    qf1_a_values = qf1(data.observations).gather(1, data.actions.unsqueeze(1)).view(-1)
                    qf2_a_values = qf2(data.observations).gather(1, data.actions.unsqueeze(1)).view(-1)
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
                        # the probabilities of the actor step just taken
                        alpha_loss = temperature_loss(log_alpha, action_probs, log_pi, target_entropy)

                        a_optimizer.zero_grad()
                        alpha_loss.backward()
                        a_optimizer.step()
                        alpha = log_alpha.detach().exp()[0]

                    if global_step % 100 < args.update_frequency:
                        writer.add_scalar("losses/qf1_values", qf1_a_values.mean().item(), global_step)
                        writer.add_scalar("losses/qf2_values", qf2_a_values.mean().item(), global_step)
                        writer.add_scalar("losses/qf1_loss", qf1_loss.item(), global_step)
                        writer.add_scalar("losses/qf2_loss", qf2_loss.item(), global_step)
                        writer.add_scalar("losses/qf_loss", qf_loss.item() / 2.0, global_step)
                        writer.add_scalar("losses/actor_loss", actor_loss.item(), global_step)
                        writer.add_scalar("losses/alpha", alpha.item(), global_step)
                        if args.autotune:
                            writer.add_scalar("losses/alpha_loss", alpha_loss.item(), global_step)
                        sps = int(global_step / exp.elapsed)
                        print("SPS:", sps)
                        writer.add_scalar("charts/SPS", sps, global_step)

                if global_step % args.target_network_frequency == 0:
                    with torch.no_grad():
                        for target_param, param in zip(target_params, q_params):
                            target_param.lerp_(param, args.tau)

            if exp.checkpoint_due(global_step + 1):
                state = {"log_alpha": log_alpha.detach() if args.autotune else None}
                exp.save_checkpoint(global_step, {**state, "obs": obs}, learners)

        if args.save_model:
            # the actor is what acts; the critics come along for whoever wants to go on training
            exp.save_model({"actor": actor.state_dict(), "qf1": qf1.state_dict(), "qf2": qf2.state_dict()})
            episodic_returns = evaluate_sac(
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", Actor, device, args.capture_video
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="SAC")
