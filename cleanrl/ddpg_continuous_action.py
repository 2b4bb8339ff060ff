"""DDPG for continuous actions and vector observations (MuJoCo, dm_control, Pendulum...): deterministic actor, one critic.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ddpg/#ddpg_continuous_actionpy (docs/rl-algorithms/ddpg.md)
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
    """continue the run of this checkpoint file, or of this run folder's newest readable one, with its arguments; a checkpoint is trusted input (it chooses what the run does): resume only your own"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "Hopper-v4"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 1000000
    """training budget in environment steps, summed over the environments"""
    learning_rate: float = 3e-4
    """optimiser step size"""
    num_envs: int = 1
    """environments stepped in parallel (one gradient step per step of all of them)"""
    buffer_size: int = 1000000
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
    tau: float = 0.005
    """soft-update rate τ of the target networks"""
    batch_size: int = 256
    """transitions per replay sample"""
    exploration_noise: float = 0.1
    """std of the Gaussian exploration noise, relative to the action half-range"""
    learning_starts: int = 25000
    """environment steps collected before the first update"""
    policy_frequency: int = 2
    """critic updates per actor (and target) update"""


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from stable_baselines3.common.buffers import ReplayBuffer

from cleanrl_utils.runtime.evals.continuous import evaluate_deterministic_actor
from cleanrl_utils.runtime.experiment import Experiment


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, disable_env_checker=True)
        if isinstance(env.observation_space, gym.spaces.Dict):
            env = gym.wrappers.FlattenObservation(env)  # dm_control's dict observations become one vector
        env = gym.wrappers.RecordEpisodeStatistics(env)
        return env

    return thunk


def make_vector_env(env_id, num_envs, capture_video, run_name):
    """Sub-envs reset in the same step they end, and `infos["final_obs"]` keeps the last observation."""
    return gym.vector.SyncVectorEnv(
        [make_env(env_id, i, capture_video, run_name) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


class QNetwork(nn.Module):
    def __init__(self, envs):
        super().__init__()
        obs_dim = np.prod(envs.single_observation_space.shape)
        self.fc1 = nn.Linear(obs_dim + np.prod(envs.single_action_space.shape), 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 1)

    def forward(self, x, a):
        x = F.relu(self.fc1(torch.cat([x, a], 1)))
        x = F.relu(self.fc2(x))
        return self.fc3(x).view(-1)


class Actor(nn.Module):
    """Deterministic policy: tanh squashes into [-1, 1], then scale and bias map onto the action bounds."""

    def __init__(self, envs):
        super().__init__()
        space = envs.single_action_space
        self.fc1 = nn.Linear(np.prod(envs.single_observation_space.shape), 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc_mu = nn.Linear(256, np.prod(space.shape))
        # buffers move with .to(device); the bounds may be asymmetric (not [-1, 1]), per dimension
        self.register_buffer("action_scale", torch.tensor((space.high - space.low) / 2.0, dtype=torch.float32))
        self.register_buffer("action_bias", torch.tensor((space.high + space.low) / 2.0, dtype=torch.float32))
        # the bounds themselves, for clipping; not saved (scale and bias give them)
        self.register_buffer("action_low", torch.tensor(space.low, dtype=torch.float32), persistent=False)
        self.register_buffer("action_high", torch.tensor(space.high, dtype=torch.float32), persistent=False)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return torch.tanh(self.fc_mu(x)) * self.action_scale + self.action_bias

    def explore(self, x, noise):
        """The action plus Gaussian noise of std `noise` x the half-range, clipped to the bounds."""
        action = self(x)
        return torch.clamp(action + torch.randn_like(action) * (noise * self.action_scale), self.action_low, self.action_high)


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs", "batch_size")
    exp.require(args.buffer_size >= args.num_envs, f"--buffer-size must hold at least one step of the {args.num_envs} envs")
    run_name = exp.run_name

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup, before any file is written
    envs = exp.make_envs(lambda: make_vector_env(args.env_id, args.num_envs, args.capture_video, run_name), args.env_id)
    action_space, obs_space = envs.single_action_space, envs.single_observation_space
    exp.require_action_space(action_space, gym.spaces.Box, see="dqn.py")
    bounded = np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()
    exp.require(bounded, f"{args.env_id} has unbounded actions {action_space}; {exp.script} needs finite bounds")
    exp.require(len(obs_space.shape) == 1, f"{args.env_id} observations are {obs_space}; {exp.script} needs flat ones")
    problem = replay_memory_problem(args, np.zeros(obs_space.shape, obs_space.dtype).nbytes)
    exp.require(not problem, problem)
    envs.action_space.seed(args.seed)
    writer = exp.start_logging()

    actor = Actor(envs).to(device)
    qf1 = QNetwork(envs).to(device)
    target_actor = Actor(envs).to(device)
    qf1_target = QNetwork(envs).to(device)
    target_actor.load_state_dict(actor.state_dict())
    qf1_target.load_state_dict(qf1.state_dict())
    q_optimizer = optim.Adam(qf1.parameters(), lr=args.learning_rate, fused=True)
    actor_optimizer = optim.Adam(actor.parameters(), lr=args.learning_rate, fused=True)
    # Polyak averaging pairs (target, online)
    online_params = [*actor.parameters(), *qf1.parameters()]
    target_params = [*target_actor.parameters(), *qf1_target.parameters()]
    learners = {"actor": actor, "qf1": qf1, "target_actor": target_actor, "qf1_target": qf1_target}
    learners |= {"q_optimizer": q_optimizer, "actor_optimizer": actor_optimizer}

    # `dones` in the buffer are terminations only: a time-limit cut still bootstraps from the next state.
    rb = ReplayBuffer(
        args.buffer_size,
        gym.spaces.Box(-np.inf, np.inf, obs_space.shape, np.float32),
        action_space,
        device,
        n_envs=args.num_envs,
        handle_timeout_termination=False,
    )
    learners["replay_buffer"] = rb

    first_step = 0
    num_updates = 0  # critic updates so far; the actor and the targets follow every `policy_frequency`-th
    actor_loss = None
    if exp.loaded_checkpoint:
        checkpoint = exp.restore_run_state(learners)
        obs = exp.saved_array("obs", envs.observation_space.shape, envs.observation_space.dtype)
        first_step = exp.saved_int("global_step", 0, args.total_timesteps - 1) + args.num_envs
        # a critic update per iteration after learning_starts: the actor's cadence counts them
        updates = max(0, first_step // args.num_envs - 1 - args.learning_starts // args.num_envs)
        num_updates = exp.saved_int("num_updates", updates, updates)
        # the last one is logged until the actor's next update
        actor_loss = None if checkpoint.get("actor_loss") is None else exp.saved_array("actor_loss", (), torch.float32)
    else:
        obs, _ = envs.reset(seed=args.seed)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        # global_step: environment steps taken before this iteration, summed over the envs
        for global_step in range(first_step, args.total_timesteps, args.num_envs):
            exp.raise_if_stopped()
            if global_step < args.learning_starts:
                actions = envs.action_space.sample()
            else:
                with torch.inference_mode():
                    obs_tensor = torch.as_tensor(obs, dtype=torch.float32, device=device)
                    actions = actor.explore(obs_tensor, args.exploration_noise).cpu().numpy()

            next_obs, rewards, terminations, truncations, infos = envs.step(actions)

            # The transition of a sub-env whose episode just ended leads to its true last observation,
            # not to the first one of the next episode that `next_obs` already holds.
            real_next_obs = next_obs.copy()
            if "final_info" in infos:
                ended = terminations | truncations
                real_next_obs[ended] = np.stack(infos["final_obs"][ended])
                episode = infos["final_info"]["episode"]
                for i in np.flatnonzero(infos["final_info"]["_episode"]):
                    episodic_return = float(np.float32(episode["r"][i]))
                    print(f"global_step={global_step}, episodic_return={episodic_return}")
                    writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                    writer.add_scalar("charts/episodic_length", int(episode["l"][i]), global_step)
            rb.add(obs, real_next_obs, actions, rewards, terminations, infos)
            obs = next_obs

            if global_step > args.learning_starts:
                num_updates += 1
                data = rb.sample(args.batch_size)
                with torch.no_grad():
                    qf1_next_target = qf1_target(data.next_observations, target_actor(data.next_observations))
                    next_q_value = data.rewards.flatten() + (1 - data.dones.flatten()) * args.gamma * qf1_next_target
                qf1_a_values = qf1(data.observations, data.actions)
                qf1_loss = F.mse_loss(qf1_a_values, next_q_value)

                q_optimizer.zero_grad()
                qf1_loss.backward()
                q_optimizer.step()

                if num_updates % args.policy_frequency == 0:
                    # the gradient flows through the critic to the actor; the critic's own weights get none
                    qf1.requires_grad_(False)
                    actor_loss = -qf1(data.observations, actor(data.observations)).mean()
                    qf1.requires_grad_(True)
                    actor_optimizer.zero_grad()
                    actor_loss.backward()
                    actor_optimizer.step()

                    with torch.no_grad():
                        torch._foreach_lerp_(target_params, online_params, args.tau)

                if global_step % 100 < args.num_envs:  # once per 100 environment steps
                    writer.add_scalar("losses/qf1_values", qf1_a_values.mean().item(), global_step)
                    writer.add_scalar("losses/qf1_loss", qf1_loss.item(), global_step)
                    if actor_loss is not None:
                        writer.add_scalar("losses/actor_loss", actor_loss.item(), global_step)
                    sps = int(global_step / exp.elapsed)
                    print("SPS:", sps)
                    writer.add_scalar("charts/SPS", sps, global_step)

            next_step = global_step + args.num_envs
            if exp.checkpoint_due(next_step, since=global_step):
                # named after the steps taken; "global_step" is the last step logged (a resume purges the logs after it)
                state = {"num_updates": num_updates, "actor_loss": actor_loss, "obs": obs}
                exp.save_checkpoint(next_step, {"global_step": global_step, **state}, learners)

        if args.save_model:
            exp.save_model((actor.state_dict(), qf1.state_dict()))
            episodic_returns = evaluate_deterministic_actor(
                exp.model_path,
                make_env,
                args.env_id,
                eval_episodes=10,
                run_name=f"{run_name}-eval",
                Model=Actor,
                device=device,
                capture_video=args.capture_video,
                exploration_noise=args.exploration_noise,
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="DDPG")
