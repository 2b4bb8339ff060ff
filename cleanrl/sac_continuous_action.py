"""Soft Actor-Critic for continuous actions and vector observations (MuJoCo, dm_control, Pendulum...).

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/sac/#sac_continuous_actionpy (docs/rl-algorithms/sac.md)
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
    env_id: str = "Hopper-v4"
    """environment id of the task"""
    total_timesteps: int = 1000000
    """training budget in environment steps, summed over the environments"""
    num_envs: int = 1
    """environments stepped in parallel (each loop iteration steps all of them, then makes one update)"""
    buffer_size: int = int(1e6)
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
    tau: float = 0.005
    """soft-update rate τ of the target networks"""
    batch_size: int = 256
    """transitions per replay sample"""
    learning_starts: int = 5000
    """environment steps collected before the first update (random actions until then)"""
    policy_lr: float = 3e-4
    """actor's optimiser step size"""
    q_lr: float = 1e-3
    """critics' optimiser step size (the entropy temperature's too)"""
    policy_frequency: int = 2
    """critic updates per actor update: every N updates the actor (and alpha) get N steps"""
    target_network_frequency: int = 1
    """environment steps between target-network updates"""
    alpha: float = 0.2
    """entropy temperature α (when not autotuned)"""
    autotune: bool = True
    """learn the entropy temperature α towards a target entropy"""
    autotune_resample: bool = False
    """with --autotune, rate the policy's entropy on a new sample of the updated actor (off: the actor step's own)"""


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from stable_baselines3.common.buffers import ReplayBuffer

from cleanrl_utils.runtime.evals.continuous import evaluate_sac
from cleanrl_utils.runtime.experiment import Experiment


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if env_id.startswith("dm_control/"):  # these ids exist once Shimmy has registered them
            try:
                import shimmy
            except ImportError:
                raise gym.error.DependencyNotInstalled("dm_control envs need shimmy and dm_control") from None
            gym.register_envs(shimmy)
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, disable_env_checker=True)
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


class SoftQNetwork(nn.Module):
    def __init__(self, env):
        super().__init__()
        obs_dim = np.prod(env.single_observation_space.shape)
        self.fc1 = nn.Linear(obs_dim + np.prod(env.single_action_space.shape), 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 1)

    def forward(self, x, a):
        x = torch.cat([x, a], 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


LOG_STD_MAX = 2
LOG_STD_MIN = -5


class Actor(nn.Module):
    def __init__(self, env):
        super().__init__()
        self.fc1 = nn.Linear(np.prod(env.single_observation_space.shape), 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc_mean = nn.Linear(256, np.prod(env.single_action_space.shape))
        self.fc_logstd = nn.Linear(256, np.prod(env.single_action_space.shape))
        # action = tanh(u) * scale + bias maps (-1, 1) onto the Box bounds, which need not be symmetric
        high, low = env.single_action_space.high, env.single_action_space.low
        self.register_buffer("action_scale", torch.tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("action_bias", torch.tensor((high + low) / 2.0, dtype=torch.float32))

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        mean = self.fc_mean(x)
        log_std = torch.tanh(self.fc_logstd(x))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)  # from (-1, 1) into (-5, 2)
        return mean, log_std

    def get_action(self, x):
        """A sampled action (reparameterised), its log-probability, and the deterministic (mean) action."""
        mean, log_std = self(x)
        normal = torch.distributions.Normal(mean, log_std.exp())
        u = normal.rsample()  # mean + std * noise: gradients reach mean and std
        action = torch.tanh(u) * self.action_scale + self.action_bias
        # Change of variables: log pi(action) = log N(u; mean, std) - log |d action / d u|, per dimension, where
        # d action / d u = scale * (1 - tanh(u)^2); the 1e-6 keeps the log finite where tanh(u) rounds to +-1.
        log_prob = normal.log_prob(u) - torch.log(self.action_scale * (1 - torch.tanh(u).pow(2)) + 1e-6)
        mean_action = torch.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob.sum(1, keepdim=True), mean_action


def temperature_loss(log_alpha, log_pi, target_entropy):
    """Lowers alpha while the policy's entropy (about -log_pi) is above the target, raises it while below."""
    return (-log_alpha.exp() * (log_pi.detach() + target_entropy)).mean()


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs", "batch_size")
    exp.require(args.total_timesteps >= args.num_envs, f"--total-timesteps is less than one step of the {args.num_envs} envs")
    run_name = exp.run_name

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup, before any file is written
    envs = exp.make_envs(lambda: make_vector_env(args.env_id, args.num_envs, args.capture_video, run_name), args.env_id)
    action_space = envs.single_action_space
    exp.require_action_space(action_space, gym.spaces.Box, see="dqn.py")
    bounded = np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()
    exp.require(bounded, f"{args.env_id} has unbounded actions {action_space}; the tanh-squashed policy needs finite bounds")
    obs_space = envs.single_observation_space
    problem = replay_memory_problem(args, np.zeros(obs_space.shape, obs_space.dtype).nbytes)
    exp.require(not problem, problem)
    envs.action_space.seed(args.seed)
    writer = exp.start_logging()

    actor = Actor(envs).to(device)
    qf1 = SoftQNetwork(envs).to(device)
    qf2 = SoftQNetwork(envs).to(device)
    qf1_target = SoftQNetwork(envs).to(device)
    qf2_target = SoftQNetwork(envs).to(device)
    qf1_target.load_state_dict(qf1.state_dict())
    qf2_target.load_state_dict(qf2.state_dict())
    q_params = list(qf1.parameters()) + list(qf2.parameters())
    target_params = list(qf1_target.parameters()) + list(qf2_target.parameters())
    q_optimizer = optim.Adam(q_params, lr=args.q_lr, fused=True)
    actor_optimizer = optim.Adam(actor.parameters(), lr=args.policy_lr, fused=True)
    learners = {"actor": actor, "qf1": qf1, "qf2": qf2, "qf1_target": qf1_target, "qf2_target": qf2_target}
    learners |= {"q_optimizer": q_optimizer, "actor_optimizer": actor_optimizer}

    if args.autotune:
        target_entropy = -float(np.prod(action_space.shape))
        log_alpha = torch.zeros(1, requires_grad=True, device=device)
        learners["a_optimizer"] = a_optimizer = optim.Adam([log_alpha], lr=args.q_lr, fused=True)
        alpha = log_alpha.detach().exp()[0]  # starts at 1
    else:
        alpha = torch.tensor(args.alpha, device=device)  # a tensor, like the tuned one

    # `dones` in the buffer are terminations only: a time-limit cut still bootstraps from the next state.
    rb = ReplayBuffer(
        args.buffer_size,
        gym.spaces.Box(-np.inf, np.inf, envs.single_observation_space.shape, np.float32),
        gym.spaces.Box(action_space.low, action_space.high, action_space.shape, np.float32),
        device,
        n_envs=args.num_envs,
        handle_timeout_termination=False,
    )

    learners["replay_buffer"] = rb
    first_iteration, actor_loss, alpha_loss = 0, None, None
    if exp.loaded_checkpoint:
        checkpoint = exp.restore_run_state(learners)
        if args.autotune:
            with torch.no_grad():
                log_alpha.copy_(exp.saved_array("log_alpha", (1,), torch.float32, -88, 88))  # e^x finite in float32
            alpha = log_alpha.detach().exp()[0]
        # the last losses are logged until the actor's next update, which may come after the next log step
        actor_loss = None if checkpoint.get("actor_loss") is None else exp.saved_array("actor_loss", (), torch.float32)
        alpha_loss = None if checkpoint.get("alpha_loss") is None else exp.saved_array("alpha_loss", (), torch.float32)
        obs = exp.saved_array("obs", envs.observation_space.shape, envs.observation_space.dtype)
        first_iteration = exp.saved_int("global_step", 0, args.total_timesteps - 1) // args.num_envs + 1
    else:
        obs, _ = envs.reset(seed=args.seed)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for iteration in range(first_iteration, args.total_timesteps // args.num_envs):
            exp.raise_if_stopped()
            global_step = iteration * args.num_envs  # environment steps taken before this one
            # act: uniformly random until learning starts, then from the policy
            if global_step < args.learning_starts:
                actions = envs.action_space.sample()
            else:
                with torch.inference_mode():
                    actions, _, _ = actor.get_action(torch.as_tensor(obs, dtype=torch.float32, device=device))
                actions = actions.cpu().numpy()

            next_obs, rewards, terminations, truncations, infos = envs.step(actions)

            if "final_info" in infos:
                episode = infos["final_info"]["episode"]
                for i in np.flatnonzero(infos["final_info"]["_episode"]):
                    episodic_return = float(np.float32(episode["r"][i]))
                    print(f"global_step={global_step}, episodic_return={episodic_return}")
                    writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                    writer.add_scalar("charts/episodic_length", int(episode["l"][i]), global_step)

            # A sub-env that ended has already reset: `next_obs` holds its new episode's first observation,
            # and the transition is stored with the last observation of the episode that ended instead.
            real_next_obs = next_obs
            if "final_obs" in infos:
                real_next_obs = next_obs.copy()
                for i in np.flatnonzero(terminations | truncations):
                    real_next_obs[i] = infos["final_obs"][i]
            rb.add(obs, real_next_obs, actions, rewards, terminations, [])
            obs = next_obs

            if global_step > args.learning_starts:
                data = rb.sample(args.batch_size)
                with torch.no_grad():
                    next_actions, next_log_pi, _ = actor.get_action(data.next_observations)
                    qf1_next_target = qf1_target(data.next_observations, next_actions)
                    qf2_next_target = qf2_target(data.next_observations, next_actions)
                    min_qf_next_target = (torch.min(qf1_next_target, qf2_next_target) - alpha * next_log_pi).view(-1)
                    next_q_value = data.rewards.flatten() + (1 - data.dones.flatten()) * args.gamma * min_qf_next_target

                qf1_a_values = qf1(data.observations, data.actions).view(-1)
                qf2_a_values = qf2(data.observations, data.actions).view(-1)
                qf1_loss = F.mse_loss(qf1_a_values, next_q_value)
                qf2_loss = F.mse_loss(qf2_a_values, next_q_value)
                qf_loss = qf1_loss + qf2_loss

                q_optimizer.zero_grad()
                qf_loss.backward()
                q_optimizer.step()

                if iteration % args.policy_frequency == 0:  # the actor's updates are delayed, as in TD3
                    # the actor's loss needs dQ/d(action) only: no gradients for the critics' weights
                    for p in q_params:
                        p.requires_grad_(False)
                    for _ in range(args.policy_frequency):  # as many actor steps as critic steps, in a burst
                        pi, log_pi, _ = actor.get_action(data.observations)
                        min_qf_pi = torch.min(qf1(data.observations, pi), qf2(data.observations, pi))
                        actor_loss = ((alpha * log_pi) - min_qf_pi).mean()

                        actor_optimizer.zero_grad()
                        actor_loss.backward()
                        actor_optimizer.step()

                        if args.autotune:
                            # the log-probabilities of the actor step just taken, or of the updated actor
                            if args.autotune_resample:
                                with torch.no_grad():
                                    _, log_pi, _ = actor.get_action(data.observations)
                            alpha_loss = temperature_loss(log_alpha, log_pi, target_entropy)

                            a_optimizer.zero_grad()
                            alpha_loss.backward()
                            a_optimizer.step()
                            alpha = log_alpha.detach().exp()[0]
                    for p in q_params:
                        p.requires_grad_(True)

                if iteration % args.target_network_frequency == 0:
                    with torch.no_grad():
                        for target_param, param in zip(target_params, q_params):
                            target_param.lerp_(param, args.tau)

                if global_step % 100 < args.num_envs and actor_loss is not None:  # once per 100 steps
                    writer.add_scalar("losses/qf1_values", qf1_a_values.mean().item(), global_step)
                    writer.add_scalar("losses/qf2_values", qf2_a_values.mean().item(), global_step)
                    writer.add_scalar("losses/qf1_loss", qf1_loss.item(), global_step)
                    writer.add_scalar("losses/qf2_loss", qf2_loss.item(), global_step)
                    writer.add_scalar("losses/qf_loss", qf_loss.item() / 2.0, global_step)
                    writer.add_scalar("losses/actor_loss", actor_loss.item(), global_step)
                    writer.add_scalar("losses/alpha", alpha.item(), global_step)
                    sps = int(global_step / exp.elapsed)
                    print("SPS:", sps)
                    writer.add_scalar("charts/SPS", sps, global_step)
                    if args.autotune:
                        writer.add_scalar("losses/alpha_loss", alpha_loss.item(), global_step)

            done = global_step + args.num_envs  # environment steps taken so far
            if exp.checkpoint_due(done, since=global_step):
                # named after the steps taken; "global_step" is the last step logged (a resume purges the logs after it)
                state = {"log_alpha": log_alpha.detach() if args.autotune else None}
                state |= {"actor_loss": actor_loss, "alpha_loss": alpha_loss}
                exp.save_checkpoint(done, {"global_step": global_step, "obs": obs, **state}, learners)

        if args.save_model:
            exp.save_model({"actor": actor.state_dict(), "qf1": qf1.state_dict(), "qf2": qf2.state_dict()})
            episodic_returns = evaluate_sac(
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", Actor, device, args.capture_video
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="SAC")
