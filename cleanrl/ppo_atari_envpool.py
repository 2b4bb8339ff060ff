"""PPO for Atari games from pixels, stepped by envpool's C++ vectorised Atari envs (Breakout-v5, Pong-v5, ...).

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ppo-atari-envpool/#ppo_atari_envpoolpy (docs/rl-algorithms/ppo-atari-envpool.md)
"""

import os
from collections import deque
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
    """accepted for a common command line, but does nothing here: envpool renders no frames to record"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "Breakout-v5"
    """environment id (an Atari game of envpool)"""
    total_timesteps: int = 10000000
    """training budget in environment steps"""
    learning_rate: float = 2.5e-4
    """optimiser step size"""
    num_envs: int = 8
    """environments stepped in parallel"""
    num_steps: int = 128
    """steps each environment takes per rollout"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run"""
    gamma: float = 0.99
    """discount factor γ"""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation"""
    num_minibatches: int = 4
    """minibatches each epoch splits the rollout into"""
    update_epochs: int = 4
    """passes over each rollout per update"""
    norm_adv: bool = True
    """normalise the advantages within each minibatch"""
    clip_coef: float = 0.1
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
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

from cleanrl_utils.runtime.experiment import Experiment

try:
    import envpool
except ImportError:
    envpool = None


def make_env(env_id, num_envs, seed):
    """envpool's own Atari pipeline (its defaults: up to 30 no-ops at reset, 4 frames skipped with a max over
    the last two, FIRE at reset, 84x84 grayscale, 4 stacked frames), a lost life ending the episode for
    learning and rewards clipped to their sign. Sub-env i is seeded with seed + i."""
    return envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, seed=seed, episodic_life=True, reward_clip=True)


class EpisodeStatistics:
    """Whole-game score and length of each sub-env; envpool's `info["reward"]` is the reward before clipping.

    envpool resets a sub-env on the step after its episode ended: that step returns the new game's first
    observation with `elapsed_step` 0 (after a lost life, the reset step keeps the game and its counters).
    """

    def __init__(self, num_envs):
        self.returns = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def update(self, rewards, terminations, truncations, infos):
        """(sub-envs, raw scores, lengths in agent steps) of the games that ended at this step."""
        new_game = infos["elapsed_step"] == 0
        self.returns = np.where(new_game, 0.0, self.returns + infos["reward"])
        self.lengths = np.where(new_game, 0, self.lengths + 1)
        # a terminated episode is a lost life; the game is over with the last one, or at the time limit
        ended = np.flatnonzero(truncations | (terminations & (infos["lives"] == 0)))
        return ended, self.returns[ended], self.lengths[ended]


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        # Nature-CNN, shared by the policy and the value function
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, envs.action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def get_value(self, x):
        return self.critic(self.network(x / 255.0)).squeeze(-1)

    def act(self, x):
        """Rollout: sampled actions, their log-probabilities and the state values, from one pass of the CNN."""
        hidden = self.network(x / 255.0)  # uint8 frames become floats in [0, 1] only here
        logp_all = self.actor(hidden).log_softmax(-1)
        action = torch.distributions.Categorical(logits=logp_all).sample()
        return action, logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1), self.critic(hidden).squeeze(-1)

    def evaluate_actions(self, x, action):
        """Log-probability and entropy of given actions under the current policy, and the state value."""
        hidden = self.network(x / 255.0)
        logp_all = self.actor(hidden).log_softmax(-1)
        logprob = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logprob, entropy, self.critic(hidden).squeeze(-1)


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

    # env setup, before any file is written
    exp.require(envpool is not None, 'this script runs the Atari games of envpool: pip install -e ".[envpool]"')
    spec = envpool.registration.registry.specs.get(args.env_id)
    hint = " (gymnasium's ids such as BreakoutNoFrameskip-v4 run with ppo_atari.py)" if "Frameskip" in args.env_id else ""
    exp.require(spec, f"{args.env_id}: not an env id of envpool, whose Atari ids look like Breakout-v5{hint}")
    exp.require(spec[0] == "envpool.atari", f"{args.env_id} is not an Atari game of envpool (ppo.py runs vector envs)")
    envs = exp.make_envs(lambda: make_env(args.env_id, args.num_envs, args.seed), args.env_id)
    problem = rollout_memory_problem(args.num_steps * args.num_envs, envs.observation_space)
    exp.require(not problem, problem)
    writer = exp.start_logging()

    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # rollout storage: frames stay uint8 until the network divides them by 255
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.observation_space.shape, dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    terminated = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)  # 1 where a life (or the game) ended
    dones = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)  # 1 where an episode ended, by time limit too
    # 0 for envpool's reset steps: the action of the step after an episode's end is ignored by the env
    learnable = np.zeros((args.num_steps, args.num_envs), dtype=bool)

    global_step = 0
    next_obs, _ = envs.reset()
    next_obs = torch.as_tensor(next_obs, device=device)
    next_done = np.zeros(args.num_envs, dtype=bool)
    episode_stats = EpisodeStatistics(args.num_envs)
    recent_returns = deque(maxlen=20)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for iteration in range(1, args.num_iterations + 1):
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            with torch.inference_mode():
                for step in range(args.num_steps):
                    exp.raise_if_stopped()
                    global_step += args.num_envs
                    obs[step] = next_obs
                    learnable[step] = ~next_done
                    action, logprobs[step], values[step] = agent.act(next_obs)
                    actions[step] = action

                    next_obs_np, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
                    rewards[step] = reward
                    terminated[step] = terminations
                    next_done = terminations | truncations
                    dones[step] = next_done
                    next_obs = torch.as_tensor(next_obs_np, device=device)

                    # a lost life ends an episode for learning; only a finished game is logged
                    _, game_returns, game_lengths = episode_stats.update(reward, terminations, truncations, infos)
                    for episodic_return, episodic_length in zip(game_returns.tolist(), game_lengths.tolist()):
                        recent_returns.append(episodic_return)
                        print(f"global_step={global_step}, episodic_return={episodic_return}")
                        writer.add_scalar("charts/avg_episodic_return", np.mean(recent_returns), global_step)
                        writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                        writer.add_scalar("charts/episodic_length", episodic_length, global_step)

                next_value = agent.get_value(next_obs).cpu().numpy()
            values_np = values.cpu().numpy()

            # envpool shows an ended episode's last observation, then resets: values[t + 1] is the value of the
            # state step t ended in, bootstrapped from on a time-limit cut only. dones[t] cuts the recursion.
            advantages = np.zeros_like(rewards)
            lastgaelam = 0.0
            for t in reversed(range(args.num_steps)):
                nextvalues = next_value if t == args.num_steps - 1 else values_np[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * (1.0 - terminated[t]) - values_np[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * (1.0 - dones[t]) * lastgaelam
            returns_np = advantages + values_np

            # one flat batch of the rollout; the reset steps (the env ignored their actions) are left out of the update
            b_obs = obs.reshape((-1,) + envs.observation_space.shape)
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape(-1)
            b_advantages = torch.as_tensor(advantages.reshape(-1), device=device)
            b_returns = torch.as_tensor(returns_np.reshape(-1), device=device)
            b_values = values.reshape(-1)
            b_learnable = torch.as_tensor(np.flatnonzero(learnable.reshape(-1)), device=device)

            # the update: epochs of shuffled minibatches
            clipfracs = []
            for _epoch in range(args.update_epochs):
                b_inds = b_learnable[torch.randperm(len(b_learnable), device=device)]
                # num-minibatches parts, as equal as the learnable samples allow
                for mb_inds in b_inds.tensor_split(args.num_minibatches):
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
                            newvalue - b_values[mb_inds],
                            -args.clip_coef,
                            args.clip_coef,
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

            y_pred, y_true = values_np[learnable], returns_np[learnable]
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
