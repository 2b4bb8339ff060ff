"""PPO for continuous actions and vector observations (MuJoCo, dm_control, Pendulum...): Gaussian policy.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ppo-continuous/#ppo_continuous_actionpy (docs/rl-algorithms/ppo-continuous.md)
"""

import os
from dataclasses import dataclass

from cleanrl_utils.runtime.command_line import check_command_line, rollout_memory_problem


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
    """save a checkpoint to resume from every this many iterations (0: never)"""
    resume: str | None = None
    """continue the run of this checkpoint file, or of this run folder's newest one, with its arguments (checked as the command line's); a checkpoint is read as data, never run"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "HalfCheetah-v4"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 1000000
    """training budget in environment steps"""
    learning_rate: float = 3e-4
    """optimiser step size"""
    num_envs: int = 1
    """environments stepped in parallel"""
    num_steps: int = 2048
    """steps each environment takes per rollout"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run"""
    gamma: float = 0.99
    """discount factor γ"""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation"""
    num_minibatches: int = 32
    """minibatches each epoch splits the rollout into"""
    update_epochs: int = 10
    """passes over each rollout per update"""
    norm_adv: bool = True
    """normalise the advantages within each minibatch"""
    clip_coef: float = 0.2
    """clip range ε of the probability ratio (and of the value change with --clip-vloss)"""
    clip_vloss: bool = True
    """clip the value loss around the rollout's values, as PPO's reference implementation does"""
    ent_coef: float = 0.0
    """weight of the entropy bonus in the total loss"""
    vf_coef: float = 0.5
    """weight of the value loss in the total loss"""
    max_grad_norm: float = 0.5
    """global gradient norm above which gradients are scaled down"""
    target_kl: float | None = None
    """stop an update's epochs early once the approximate KL exceeds this (off when unset)"""

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

from cleanrl_utils.runtime.evals.continuous import evaluate_ppo
from cleanrl_utils.runtime.experiment import Experiment


def make_env(env_id, idx, capture_video, run_name, gamma=0.99):
    def thunk():
        if env_id.startswith("dm_control/"):
            try:  # Shimmy registers the dm_control/... ids
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
        # Counts the environment's own rewards, before the reward scaling below: the logged returns are true returns.
        env = gym.wrappers.RecordEpisodeStatistics(env)
        if not isinstance(env.action_space, gym.spaces.Box):
            return env
        env = gym.wrappers.ClipAction(env)  # the Gaussian samples any real number; the env gets its bounds
        env = gym.wrappers.NormalizeObservation(env)
        env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)
        env = gym.wrappers.NormalizeReward(env, gamma=gamma)
        env = gym.wrappers.TransformReward(env, lambda reward: np.clip(reward, -10, 10))
        return env

    return thunk


def make_vector_env(env_id, num_envs, capture_video, run_name, gamma):
    # Sub-envs reset in the same step they end; `infos["final_obs"]` keeps the last observation.
    return gym.vector.SyncVectorEnv(
        [make_env(env_id, i, capture_video, run_name, gamma) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        copy=False,
    )


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        obs_dim = np.array(envs.single_observation_space.shape).prod()
        action_dim = np.prod(envs.single_action_space.shape)
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, action_dim), std=0.01),
        )
        # the log-std does not depend on the state: one learned number per action dimension
        self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def get_value(self, x):
        return self.critic(x).squeeze(-1)

    def sample_action(self, x, deterministic=False):
        """Rollout: sample actions (or take the mean). Log-probabilities and values come later, batched."""
        mean = self.actor_mean(x)
        return mean if deterministic else mean + self.actor_logstd.exp() * torch.randn_like(mean)

    def evaluate_actions(self, x, action):
        """Log-probability and entropy (summed over action dims) of given actions, and the state value."""
        mean = self.actor_mean(x)
        logstd = self.actor_logstd.expand_as(mean)
        normal = torch.distributions.Normal(mean, logstd.exp())
        logprob, entropy = normal.log_prob(action).sum(-1), normal.entropy().sum(-1)
        return logprob, entropy, self.critic(x).squeeze(-1)


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    exp.require(args.batch_size % args.num_minibatches == 0, "--num-minibatches does not divide --num-envs × --num-steps")
    exp.require(args.minibatch_size > 1 or not args.norm_adv, "--norm-adv needs minibatches of at least 2 transitions")
    exp.require(args.num_iterations > 0, f"--total-timesteps is less than one rollout batch ({args.batch_size} steps)")
    run_name = exp.run_name

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)  # the network is too small for threads to pay off

    # env setup, before any file is written
    envs = exp.make_envs(
        lambda: make_vector_env(args.env_id, args.num_envs, args.capture_video, run_name, args.gamma), args.env_id
    )
    space = envs.single_action_space
    exp.require(isinstance(space, gym.spaces.Box), f"{args.env_id} has {space} actions, not Box ones (use ppo.py)")
    envs.action_space.seed(args.seed)
    problem = rollout_memory_problem(args.num_steps * args.num_envs, envs.single_observation_space)
    exp.require(not problem, problem)
    writer = exp.start_logging()

    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)

    # rollout storage
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape, device=device)
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    dones = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)  # 1 where an episode ended after this step

    global_step, first_iteration = 0, 1
    if exp.loaded_checkpoint:
        exp.restore_run_state({"agent": agent, "optimizer": optimizer})
        global_step, first_iteration = exp.saved_iteration(args.num_iterations, args.batch_size)
        next_obs = exp.saved_array("next_obs", envs.observation_space.shape, torch.float32).to(device)
    else:
        next_obs, _ = envs.reset(seed=args.seed)
        next_obs = torch.as_tensor(next_obs, dtype=torch.float32, device=device)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for iteration in range(first_iteration, args.num_iterations + 1):
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            with torch.inference_mode():
                for step in range(args.num_steps):
                    exp.raise_if_stopped()
                    global_step += args.num_envs
                    action = agent.sample_action(next_obs)
                    obs[step] = next_obs
                    actions[step] = action

                    next_obs_np, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
                    # `reward` is already scaled and clipped, the scale the critic learns in; so is the bootstrap.
                    cut = truncations & ~terminations
                    if cut.any():
                        # A time limit is not a true end: credit the value of the (normalised) state it cut.
                        final_obs = torch.as_tensor(np.stack(infos["final_obs"][cut]), dtype=torch.float32, device=device)
                        reward[cut] += args.gamma * agent.get_value(final_obs).cpu().numpy()
                    rewards[step] = reward
                    dones[step] = terminations | truncations
                    next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=device)

                    if "final_info" in infos:  # the unscaled return, from RecordEpisodeStatistics inside each sub-env
                        episode = infos["final_info"]["episode"]
                        for i in np.flatnonzero(infos["final_info"]["_episode"]):
                            episodic_return = float(np.float32(episode["r"][i]))
                            print(f"global_step={global_step}, episodic_return={episodic_return}")
                            writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                            writer.add_scalar("charts/episodic_length", int(episode["l"][i]), global_step)

            # The parameters did not change during the rollout: log-probabilities and values of the whole
            # rollout, in one batched call, are the ones each step would have computed.
            with torch.no_grad():
                logprobs, _, values = agent.evaluate_actions(obs, actions)
                next_value = agent.get_value(next_obs).cpu().numpy()
            values_np = values.cpu().numpy()

            # dones[t] cuts the recursion, so no advantage flows across an episode boundary.
            advantages = np.zeros_like(rewards)
            lastgaelam = 0.0
            for t in reversed(range(args.num_steps)):
                nextvalues = next_value if t == args.num_steps - 1 else values_np[t + 1]
                nextnonterminal = 1.0 - dones[t]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values_np[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns_np = advantages + values_np

            # one flat batch of the rollout
            b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
            b_advantages = torch.as_tensor(advantages.reshape(-1), device=device)
            b_returns = torch.as_tensor(returns_np.reshape(-1), device=device)
            b_values = values.reshape(-1)

            # the update: epochs of shuffled minibatches
            clipfracs = []
            for _epoch in range(args.update_epochs):
                b_inds = torch.randperm(args.batch_size, device=device)
                for start in range(0, args.batch_size, args.minibatch_size):
                    mb_inds = b_inds[start : start + args.minibatch_size]

                    newlogprob, entropy, newvalue = agent.evaluate_actions(b_obs[mb_inds], b_actions[mb_inds])
                    logratio = newlogprob - b_logprobs[mb_inds]
                    ratio = logratio.exp()

                    with torch.no_grad():
                        # two estimators of the KL to the rollout policy (http://joschu.net/blog/kl-approx.html)
                        old_approx_kl = (-logratio).mean()
                        approx_kl = ((ratio - 1) - logratio).mean()
                        clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())

                    mb_advantages = b_advantages[mb_inds]
                    if args.norm_adv:
                        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                    # clipped surrogate objective
                    pg_loss1 = -mb_advantages * ratio
                    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                    pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                    if args.clip_vloss:
                        v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                        v_clipped = b_values[mb_inds] + (newvalue - b_values[mb_inds]).clamp(-args.clip_coef, args.clip_coef)
                        v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                        v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
                        v_loss = 0.5 * v_loss_max.mean()
                    else:
                        v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                    entropy_loss = entropy.mean()
                    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm, foreach=True)
                    optimizer.step()

                if args.target_kl is not None and approx_kl.item() > args.target_kl:
                    break

            var_y = np.var(returns_np)
            explained_var = np.nan if var_y == 0 else 1 - np.var(returns_np - values_np) / var_y

            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
            writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
            writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
            writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
            writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
            writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
            writer.add_scalar("losses/explained_variance", explained_var, global_step)
            sps = int(global_step / exp.elapsed)
            print("SPS:", sps)
            writer.add_scalar("charts/SPS", sps, global_step)

            if exp.checkpoint_due(iteration):
                state = {"agent": agent.state_dict(), "optimizer": optimizer.state_dict(), "next_obs": next_obs}
                exp.save_checkpoint(global_step, {"iteration": iteration, **state})

        if args.save_model:
            # The observation statistics are part of the policy: without them a reloaded agent sees other inputs.
            rms = envs.envs[0].get_wrapper_attr("obs_rms")
            obs_rms = {"mean": torch.as_tensor(rms.mean), "var": torch.as_tensor(rms.var), "count": float(rms.count)}
            exp.save_model({"agent": agent.state_dict(), "obs_rms": obs_rms})
            episodic_returns = evaluate_ppo(  # the eval env's reward scaling (gamma) does not touch the returns it counts
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", Agent, device, args.capture_video
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="PPO")
