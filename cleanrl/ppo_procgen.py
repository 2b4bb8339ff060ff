"""PPO with the IMPALA CNN on the Procgen games (Starpilot, Coinrun, ...), run by envpool.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ppo-procgen/#ppo_procgenpy (docs/rl-algorithms/ppo-procgen.md)
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
    """accepted for compatibility and ignored: envpool's Procgen games render no video here"""
    checkpoint_frequency: int = 0
    """save a checkpoint to resume from every this many iterations (0: never)"""
    resume: str | None = None
    """continue the run of this checkpoint file, or of this run folder's newest one, with its arguments (checked as the command line's); a checkpoint is read as data, never run"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "starpilot"
    """the Procgen game (bigfish, bossfight, caveflyer, chaser, climber, coinrun, ..., starpilot)"""
    distribution_mode: str = "easy"
    """the Procgen distribution mode of the levels (easy, hard; some games also extreme, memory, exploration)"""
    total_timesteps: int = 25000000
    """training budget in environment steps"""
    learning_rate: float = 5e-4
    """optimiser step size"""
    num_envs: int = 64
    """environments stepped in parallel"""
    num_steps: int = 256
    """steps each environment takes per rollout"""
    anneal_lr: bool = False
    """decay the learning rate linearly to 0 over the run"""
    gamma: float = 0.999
    """discount factor γ (also that of the reward normalisation)"""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation"""
    num_minibatches: int = 8
    """minibatches each epoch splits the rollout into"""
    update_epochs: int = 3
    """passes over each rollout per update"""
    norm_adv: bool = True
    """normalise the advantages within each minibatch"""
    clip_coef: float = 0.2
    """clip range ε of the probability ratio (and of the value change with --clip-vloss)"""
    clip_vloss: bool = True
    """clip the value loss around the rollout's values, as PPO's reference implementation does"""
    ent_coef: float = 0.01
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

from cleanrl_utils.runtime import procgen_runtime
from cleanrl_utils.runtime.experiment import Experiment

try:  # the Procgen games come with the `procgen` extra (envpool carries them)
    import envpool
except ImportError:
    envpool = None


def procgen_ids():
    """{(game, distribution mode): envpool id}, e.g. ("starpilot", "easy"): "StarpilotEasy-v0"."""
    specs = envpool.registration.registry.specs.items()
    return {
        (kwargs["env_name"], task_id[len(kwargs["env_name"]) : -len("-v0")].lower()): task_id
        for task_id, (import_path, _, kwargs) in specs
        if import_path == "envpool.procgen"
    }


def make_env(game, distribution_mode, num_envs, seed):
    """The envpool vector env of a Procgen game: 3×64×64 uint8 frames, 15 actions, next-step autoreset.

    Each game keeps its own time limit (e.g. 1000 steps for starpilot), which ends an episode as a
    truncation. Levels are drawn from all levels (num_levels=0), as in the Procgen benchmark; env i
    draws them from seed + i. Bad names raise gym.error.Error, which the script reports in one line.
    """
    if envpool is None:
        raise gym.error.Error('the Procgen games need envpool: pip install -e ".[procgen]"')
    ids = procgen_ids()
    games, modes = sorted({g for g, _ in ids}), sorted({m for _, m in ids})
    if game not in games:
        hint = next((f" (use --env-id {g} --distribution-mode {m})" for (g, m), i in ids.items() if i == game), "")
        raise gym.error.Error(f"{game!r} is not a Procgen game{hint}; the games are {', '.join(games)}")
    if distribution_mode not in modes:
        raise gym.error.Error(f"--distribution-mode must be one of {', '.join(modes)}, got {distribution_mode!r}")
    if (game, distribution_mode) not in ids:
        game_modes = ", ".join(m for g, m in sorted(ids) if g == game)
        raise gym.error.Error(f"{game} has no {distribution_mode} distribution mode; it has {game_modes}")
    try:  # the Procgen library links Qt 5, which the PyQt5-Qt5 wheel brings
        procgen_runtime.load()
        return envpool.make(
            ids[game, distribution_mode], env_type="gymnasium", num_envs=num_envs, seed=seed, num_levels=0, start_level=0
        )
    except (ImportError, OSError) as e:
        raise gym.error.Error(f"envpool's Procgen needs Qt 5 ({e}); {procgen_runtime.install_hint(e)}") from e


class EpisodeStatistics:
    """Raw return and length of each sub-environment's current episode; reports the episodes that end."""

    def __init__(self, num_envs):
        self.returns = np.zeros(num_envs)

    def update(self, rewards, terminations, truncations, infos):
        # a step with elapsed_step 0 is the autoreset into a new episode: it belongs to no episode yet
        self.returns = np.where(infos["elapsed_step"] == 0, 0.0, self.returns + rewards)
        ended = np.flatnonzero(terminations | truncations)
        return ended, self.returns[ended], infos["elapsed_step"][ended]


class RewardScaler:
    """Rewards divided by the running std of the discounted return, then clipped to ±clip (gym's NormalizeReward)."""

    def __init__(self, num_envs, gamma, clip=10.0, epsilon=1e-8):
        self.gamma, self.clip, self.epsilon = gamma, clip, epsilon
        self.returns = np.zeros(num_envs)
        self.mean, self.var, self.count = 0.0, 1.0, 1e-4

    def __call__(self, rewards, ended, valid):
        self.returns[valid] = self.returns[valid] * self.gamma + rewards[valid]
        if valid.any():  # running variance (parallel algorithm) of the returns of real transitions
            batch = self.returns[valid]
            delta, total = batch.mean() - self.mean, self.count + len(batch)
            m2 = self.var * self.count + batch.var() * len(batch) + delta**2 * self.count * len(batch) / total
            self.mean, self.var, self.count = self.mean + delta * len(batch) / total, m2 / total, total
        self.returns[ended] = 0.0
        return np.clip(rewards / np.sqrt(self.var + self.epsilon), -self.clip, self.clip)


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)

    def forward(self, x):
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


def conv_sequence(in_channels, out_channels):
    """IMPALA stage: conv 3×3, max-pool 3×3 stride 2 (halves the frame), two residual blocks."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1),
        nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
        ResidualBlock(out_channels),
        ResidualBlock(out_channels),
    )


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        # IMPALA CNN (PyTorch's default initialisation), shared by the policy and the value function
        self.network = nn.Sequential(
            conv_sequence(3, 16),  # 64×64 → 32×32
            conv_sequence(16, 32),  # → 16×16
            conv_sequence(32, 32),  # → 8×8
            nn.Flatten(),
            nn.ReLU(),
            nn.Linear(32 * 8 * 8, 256),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(256, envs.action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(256, 1), std=1)

    def trunk(self, x):
        """The CNN's features of uint8 frames, which become floats in [0, 1] only here.

        The frames go channels-last (as the weights do, see `.to(memory_format=...)` below): oneDNN's
        convolutions then run ~1.7x faster on a CPU, in the same float32 arithmetic.
        """
        return self.network(x.contiguous(memory_format=torch.channels_last) / 255.0)

    def get_value(self, x):
        return self.critic(self.trunk(x)).squeeze(-1)

    def act(self, x):
        """Rollout: sampled actions, their log-probabilities and the state values, from one pass of the CNN."""
        hidden = self.trunk(x)
        logp_all = self.actor(hidden).log_softmax(-1)
        action = torch.distributions.Categorical(logits=logp_all).sample()
        return action, logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1), self.critic(hidden).squeeze(-1)

    def evaluate_actions(self, x, action):
        """Log-probability and entropy of given actions under the current policy, and the state value."""
        hidden = self.trunk(x)
        logp_all = self.actor(hidden).log_softmax(-1)
        logprob = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logprob, entropy, self.critic(hidden).squeeze(-1)


def compute_gae(rewards, values, next_value, terminations, ends, gamma, gae_lambda):
    """GAE over a rollout of shape (num_steps, num_envs); next_value is the value after its last step.

    The observation after step t is that of step t + 1: when t ended an episode, it is the episode's last
    frame (envpool resets one step later), whose value bootstraps a truncation; a termination has no
    future. No advantage flows back across an episode end (`ends`: terminated or truncated).
    """
    next_values = np.concatenate([values[1:], next_value[None]])
    deltas = rewards + gamma * next_values * ~terminations - values
    advantages = np.zeros_like(rewards)
    lastgaelam = 0.0
    for t in reversed(range(len(rewards))):
        advantages[t] = lastgaelam = deltas[t] + gamma * gae_lambda * ~ends[t] * lastgaelam
    return advantages


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    exp.require(args.batch_size % args.num_minibatches == 0, "--num-minibatches does not divide --num-envs × --num-steps")
    exp.require(args.minibatch_size > 1 or not args.norm_adv, "--norm-adv needs minibatches of at least 2 transitions")
    exp.require(args.num_iterations > 0, f"--total-timesteps is less than one rollout batch ({args.batch_size} steps)")

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup, before any file is written. envpool cannot save its games: a run resumed at
    # iteration k starts new ones, seeded from seed + k × num_envs (not the run's first levels)
    env_seed = args.seed + (exp.saved_int("iteration", 1, args.num_iterations) * args.num_envs if exp.loaded_checkpoint else 0)
    envs = exp.make_envs(lambda: make_env(args.env_id, args.distribution_mode, args.num_envs, env_seed), args.env_id)
    problem = rollout_memory_problem(args.num_steps * args.num_envs, envs.observation_space)
    exp.require(not problem, problem)
    writer = exp.start_logging()

    agent = Agent(envs).to(device, memory_format=torch.channels_last)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    episode_stats = EpisodeStatistics(args.num_envs)
    scale_rewards = RewardScaler(args.num_envs, args.gamma)

    # rollout storage: frames stay uint8 until the network divides them by 255
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.observation_space.shape, dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)  # scaled and clipped rewards
    terminations = np.zeros((args.num_steps, args.num_envs), dtype=bool)  # the episode truly ended
    ends = np.zeros((args.num_steps, args.num_envs), dtype=bool)  # it ended, by termination or time limit
    valid = np.zeros((args.num_steps, args.num_envs), dtype=bool)  # False: the autoreset step, not learned from

    global_step, first_iteration = 0, 1
    if exp.loaded_checkpoint:
        exp.restore_run_state({"agent": agent, "optimizer": optimizer})
        mean, var, count = exp.saved_tree("reward_scale", (0.0, 1.0, 1e-4))  # finite numbers
        exp.require(var >= 0 and count > 0, "--resume: refused, the checkpoint's reward_scale is not statistics")
        scale_rewards.mean, scale_rewards.var, scale_rewards.count = mean, var, count
        global_step, first_iteration = exp.saved_iteration(args.num_iterations, args.batch_size)
    next_obs, _ = envs.reset()
    next_obs = torch.as_tensor(next_obs, device=device)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for iteration in range(first_iteration, args.num_iterations + 1):
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            with torch.inference_mode():
                for step in range(args.num_steps):
                    exp.raise_if_stopped()
                    global_step += args.num_envs
                    obs[step] = next_obs
                    action, logprobs[step], values[step] = agent.act(next_obs)
                    actions[step] = action

                    next_obs_np, reward, term, trunc, infos = envs.step(action.cpu().numpy())
                    # envpool resets an env on the step after its episode ended: that step's action is
                    # ignored and its observation is the new episode's first (elapsed_step 0)
                    valid[step] = infos["elapsed_step"] != 0
                    terminations[step], ends[step] = term, term | trunc
                    rewards[step] = scale_rewards(reward, ends[step], valid[step])
                    next_obs = torch.as_tensor(next_obs_np, device=device)

                    for _, episodic_return, episodic_length in zip(*episode_stats.update(reward, term, trunc, infos)):
                        print(f"global_step={global_step}, episodic_return={float(episodic_return)}")
                        writer.add_scalar("charts/episodic_return", float(episodic_return), global_step)
                        writer.add_scalar("charts/episodic_length", int(episodic_length), global_step)

                next_value = agent.get_value(next_obs).cpu().numpy()
            values_np = values.cpu().numpy()

            advantages = compute_gae(rewards, values_np, next_value, terminations, ends, args.gamma, args.gae_lambda)
            returns_np = advantages + values_np

            # one flat batch of the rollout, keeping only the real transitions (not the autoreset steps)
            b_valid = torch.as_tensor(np.flatnonzero(valid.reshape(-1)), device=device)
            b_obs = obs.reshape((-1,) + envs.observation_space.shape)
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape(-1)
            b_advantages = torch.as_tensor(advantages.reshape(-1), device=device)
            b_returns = torch.as_tensor(returns_np.reshape(-1), device=device)
            b_values = values.reshape(-1)

            # the update: epochs of shuffled minibatches: num_minibatches minibatches of the real transitions
            clipfracs = []
            for _epoch in range(args.update_epochs):
                b_inds = b_valid[torch.randperm(len(b_valid), device=device)]
                for mb_inds in torch.tensor_split(b_inds, args.num_minibatches):
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

                    # value loss
                    if args.clip_vloss:
                        v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                        v_clipped = b_values[mb_inds] + torch.clamp(
                            newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                        )
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

            y_true, y_pred = returns_np[valid], values_np[valid]
            var_y = np.var(y_true)
            explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

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
                reward_scale = (scale_rewards.mean, scale_rewards.var, scale_rewards.count)
                state = {"agent": agent.state_dict(), "optimizer": optimizer.state_dict(), "reward_scale": reward_scale}
                exp.save_checkpoint(global_step, {"iteration": iteration, **state})
