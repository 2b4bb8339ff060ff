"""PPO with random network distillation (RND): a bonus for unfamiliar frames, for hard-exploration Atari games (envpool).

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ppo-rnd/#ppo_rnd_envpoolpy (docs/rl-algorithms/ppo-rnd.md)
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
    """accepted like in the other scripts, but does nothing here: envpool renders no frames to record"""
    checkpoint_frequency: int = 0
    """save a checkpoint to resume from every this many iterations (0: never)"""
    resume: str | None = None
    """continue the run of this checkpoint file, or of this run folder's newest one, with its arguments (checked as the command line's); a checkpoint is read as data, never run"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "MontezumaRevenge-v5"
    """environment id (an Atari game of envpool)"""
    total_timesteps: int = 2000000000
    """training budget in environment steps"""
    learning_rate: float = 1e-4
    """optimiser step size"""
    num_envs: int = 128
    """environments stepped in parallel"""
    num_steps: int = 128
    """steps each environment takes per rollout"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run"""
    gamma: float = 0.999
    """discount factor γ of the extrinsic rewards"""
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
    """clip the (extrinsic) value loss around the rollout's values, as the paper's code does"""
    ent_coef: float = 0.001
    """weight of the entropy bonus in the total loss"""
    vf_coef: float = 0.5
    """weight of the value loss in the total loss"""
    max_grad_norm: float = 0.5
    """global gradient norm above which gradients are scaled down"""
    target_kl: float | None = None
    """stop an update's epochs early once the approximate KL exceeds this (off when unset)"""

    # RND arguments
    update_proportion: float = 0.25
    """the share of each minibatch the RND predictor is trained on"""
    int_coef: float = 1.0
    """coefficient of the intrinsic advantages"""
    ext_coef: float = 2.0
    """coefficient of the extrinsic advantages"""
    int_gamma: float = 0.99
    """discount factor γ of the intrinsic rewards"""
    num_iterations_obs_norm_init: int = 50
    """the number of rollouts (num-steps each) of random play that initialise the observation normaliser"""

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
from cleanrl_utils.runtime.visited_places import VisitedPlaces

try:
    import envpool
except ImportError:
    envpool = None


def make_env(env_id, num_envs, seed):
    """envpool's Atari pipeline: 30 no-op resets, 4 skipped frames max-pooled, 84x84 grayscale, 4 stacked, sticky actions.

    A lost life ends an episode (terminated) and rewards are clipped to their sign; `infos["reward"]` keeps the score.
    The sub-env resets on the step after an end: that step returns the new episode's first observation, reward 0.
    """
    return envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        seed=seed,
        episodic_life=True,
        reward_clip=True,
        repeat_action_probability=0.25,  # sticky actions, as in the RND paper: the game is not deterministic
    )


class EpisodeStatistics:
    """Raw score and length (agent steps) of each sub-env's current game, all lives together."""

    def __init__(self, num_envs):
        self.returns = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def update(self, rewards, terminations, truncations, infos):
        """(sub-envs, returns, lengths) of the games that ended at this step."""
        # elapsed_step 0: envpool's reset after a game end, the new game's first observation; the counters restart there
        new_game = infos["elapsed_step"] == 0
        self.returns = np.where(new_game, 0.0, self.returns + infos["reward"])
        self.lengths = np.where(new_game, 0, self.lengths + 1)
        ended = np.flatnonzero(truncations | (terminations & (infos["lives"] == 0)))  # a lost life is not a game over
        return ended, self.returns[ended], self.lengths[ended]


class RunningMeanStd:
    """Mean and variance of everything seen so far, merged batch by batch (Chan et al.'s parallel formula)."""

    def __init__(self, shape=()):
        self.mean = np.zeros(shape)
        self.var = np.ones(shape)
        self.count = 1e-4

    def update(self, x):
        batch_mean, batch_var, batch_count = x.mean(0), x.var(0), x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        self.var = (self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total) / total
        self.count = total


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, num_actions):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 256)),
            nn.ReLU(),
            layer_init(nn.Linear(256, 448)),
            nn.ReLU(),
        )
        self.extra_layer = nn.Sequential(layer_init(nn.Linear(448, 448), std=0.1), nn.ReLU())
        self.actor = nn.Sequential(
            layer_init(nn.Linear(448, 448), std=0.01),
            nn.ReLU(),
            layer_init(nn.Linear(448, num_actions), std=0.01),
        )
        self.critic_ext = layer_init(nn.Linear(448, 1), std=0.01)
        self.critic_int = layer_init(nn.Linear(448, 1), std=0.01)

    def forward(self, x):
        """Log-probabilities of every action, extrinsic value, intrinsic value."""
        hidden = self.network(x / 255.0)  # uint8 frames become floats in [0, 1] only here
        features = self.extra_layer(hidden) + hidden  # the value heads read one more layer, with a skip connection
        return self.actor(hidden).log_softmax(-1), self.critic_ext(features).squeeze(-1), self.critic_int(features).squeeze(-1)

    def act(self, x):
        """Rollout: sampled actions, their log-probabilities and both values, from one pass of the CNN."""
        logp_all, ext_value, int_value = self(x)
        action = torch.distributions.Categorical(logits=logp_all).sample()
        return action, logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1), ext_value, int_value

    def evaluate_actions(self, x, action):
        """Log-probability and entropy of given actions under the current policy, and both values."""
        logp_all, ext_value, int_value = self(x)
        logprob = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logprob, entropy, ext_value, int_value


class RNDModel(nn.Module):
    """A fixed random network (target) and a trained one (predictor) that learns to reproduce its features.

    Both read one normalised frame; the predictor's error is small on frames like those it was trained on,
    so it measures how new a frame is.
    """

    def __init__(self):
        super().__init__()

        def convs():
            return [
                layer_init(nn.Conv2d(1, 32, 8, stride=4)),
                nn.LeakyReLU(),
                layer_init(nn.Conv2d(32, 64, 4, stride=2)),
                nn.LeakyReLU(),
                layer_init(nn.Conv2d(64, 64, 3, stride=1)),
                nn.LeakyReLU(),
                nn.Flatten(),
            ]

        self.predictor = nn.Sequential(
            *convs(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
            layer_init(nn.Linear(512, 512)),
            nn.ReLU(),
            layer_init(nn.Linear(512, 512)),
        )
        self.target = nn.Sequential(*convs(), layer_init(nn.Linear(64 * 7 * 7, 512)))
        self.target.requires_grad_(False)  # never trained

    def curiosity(self, x):
        """The intrinsic reward of each frame: half the squared distance between the two networks' features."""
        return (self.target(x) - self.predictor(x)).pow(2).sum(1) / 2

    def predictor_loss(self, x, update_proportion):
        """Mean squared error of the predictor on a random `update_proportion` share of the frames.

        Training on a part of each minibatch only keeps the predictor from learning too fast when there are many
        environments (the paper's setting); the frames left out cost nothing.
        """
        chosen = torch.rand(len(x), device=x.device) < update_proportion
        if not chosen.any():
            return x.new_zeros(())
        x = x[chosen]
        return (self.predictor(x) - self.target(x)).pow(2).mean()


def normalize_frames(frames, mean, std):
    """RND's input: each pixel whitened by the running statistics of the frames seen, clipped to [-5, 5]."""
    return ((frames.float() - mean) / std).clamp(-5.0, 5.0).unsqueeze(1)


def random_play(envs, num_steps, obs_rms, stats, rng, raise_if_stopped):
    """Step every sub-env `num_steps` times with uniformly random actions, feeding each step's newest frames to `obs_rms`.

    The RND input is whitened from the start, so its statistics must not begin at zero mean and unit variance.
    Returns the last observation and end flags, which training continues from; the game statistics keep counting.
    `raise_if_stopped` is called before each step: Ctrl-C ends the run here too.
    """
    next_obs, next_done = None, None
    for _ in range(num_steps):
        raise_if_stopped()
        next_obs, reward, terminations, truncations, infos = envs.step(rng.integers(0, envs.action_space.n, envs.num_envs))
        obs_rms.update(next_obs[:, -1])
        stats.update(reward, terminations, truncations, infos)
        next_done = terminations | truncations
    return next_obs, next_done


def discounted_sums(rewards, running, gamma):
    """Each sub-env's running discounted sum of intrinsic rewards, step after step (carried over between rollouts).

    rewards: (num_steps, num_envs); running: (num_envs,), updated in place. Its spread is what scales the rewards.
    """
    sums = np.empty_like(rewards, dtype=np.float64)
    for t in range(len(rewards)):
        running *= gamma
        running += rewards[t]
        sums[t] = running
    return sums


def advantages(rewards, int_rewards, terminations, truncations, ext_values, int_values, next_values, args):
    """GAE for both value heads: (extrinsic, intrinsic) advantages, each (num_steps, num_envs).

    Step t goes from observation t to t + 1. Extrinsic: episodic; after a termination (a lost life) there is no value,
    a truncation bootstraps from the value of the observation it cut at (envpool returns it as the step's
    observation), and the recursion stops at either. Intrinsic: not episodic, as in the paper: novelty found after
    a lost life or a game over still counts, so neither ends the intrinsic return.
    """
    next_ext_value, next_int_value = next_values
    ext_advantages, int_advantages = np.zeros_like(ext_values), np.zeros_like(int_values)
    ext_lastgaelam = int_lastgaelam = 0.0
    for t in reversed(range(len(rewards))):
        ext_next = next_ext_value if t == len(rewards) - 1 else ext_values[t + 1]
        int_next = next_int_value if t == len(rewards) - 1 else int_values[t + 1]
        ext_delta = rewards[t] + args.gamma * ext_next * (1.0 - terminations[t]) - ext_values[t]
        ongoing = (1.0 - terminations[t]) * (1.0 - truncations[t])
        ext_advantages[t] = ext_lastgaelam = ext_delta + args.gamma * args.gae_lambda * ongoing * ext_lastgaelam
        int_delta = int_rewards[t] + args.int_gamma * int_next - int_values[t]
        int_advantages[t] = int_lastgaelam = int_delta + args.int_gamma * args.gae_lambda * int_lastgaelam
    return ext_advantages, int_advantages


def masked_mean(x, mask):
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs", "num_iterations_obs_norm_init")
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
    hint = "its Atari games are named like MontezumaRevenge-v5; envpool.list_all_envs()"
    exp.require(args.env_id in envpool.list_all_envs(), f"{args.env_id}: not an env of envpool ({hint})")
    atari = type(envpool.make_spec(args.env_id)).__name__ == "AtariEnvSpec"
    exp.require(atari, f"{args.env_id} is not an Atari game of envpool (e.g. MontezumaRevenge-v5)")
    # envpool cannot save its games: a run resumed at iteration k plays new ones, seeded from seed + k × num_envs
    env_seed = args.seed + (exp.saved_int("iteration", 1, args.num_iterations) * args.num_envs if exp.loaded_checkpoint else 0)
    envs = exp.make_envs(lambda: make_env(args.env_id, args.num_envs, env_seed), args.env_id)
    obs_shape = envs.observation_space.shape  # (4, 84, 84): 4 stacked frames
    frame_shape = obs_shape[1:]
    action_rng = np.random.default_rng(args.seed)  # the random play that initialises the observation normaliser

    problem = rollout_memory_problem(args.num_steps * args.num_envs, envs.observation_space)
    exp.require(not problem, problem)
    writer = exp.start_logging()

    agent = Agent(envs.action_space.n).to(device)
    rnd_model = RNDModel().to(device)
    trained_parameters = list(agent.parameters()) + list(rnd_model.predictor.parameters())
    optimizer = optim.Adam(trained_parameters, lr=args.learning_rate, eps=1e-5)
    obs_rms = RunningMeanStd(shape=frame_shape)  # per pixel, over the newest frame of each observation
    reward_rms = RunningMeanStd()  # of the discounted sums of intrinsic rewards
    discounted_curiosity = np.zeros(args.num_envs)

    # rollout storage: frames stay uint8 until a network reads them
    obs = torch.zeros((args.num_steps, args.num_envs) + obs_shape, dtype=torch.uint8, device=device)
    next_frames = torch.zeros((args.num_steps, args.num_envs) + frame_shape, dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    ext_values = torch.zeros((args.num_steps, args.num_envs), device=device)
    int_values = torch.zeros((args.num_steps, args.num_envs), device=device)
    curiosity_rewards = torch.zeros((args.num_steps, args.num_envs), device=device)  # before normalisation
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)  # clipped extrinsic rewards
    terminations = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    truncations = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    # 0 where the step is envpool's reset after an end: its action was ignored, so the policy does not learn from it
    valid = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)

    stats = EpisodeStatistics(args.num_envs)
    game_curiosity = torch.zeros(args.num_envs, device=device)  # intrinsic rewards of each sub-env's current game
    recent_returns = deque(maxlen=20)
    visited = VisitedPlaces(args.env_id, args.num_envs)  # rooms and places reached, where the RAM layout is known
    learners = {"agent": agent, "rnd_model": rnd_model, "optimizer": optimizer, "visited_places": visited}
    global_step, first_iteration = 0, 1
    if exp.loaded_checkpoint:
        exp.restore_run_state(learners)
        global_step, first_iteration = exp.saved_iteration(args.num_iterations, args.batch_size)
        rms = exp.saved_tree(
            "rms", ((obs_rms.mean, obs_rms.var, obs_rms.count), (reward_rms.mean, reward_rms.var, reward_rms.count))
        )
        statistics = all(np.all(var >= 0) and count > 0 for _, var, count in rms)
        exp.require(statistics, "--resume: refused, the checkpoint's rms are not means, variances and counts")
        (obs_rms.mean, obs_rms.var, obs_rms.count), (reward_rms.mean, reward_rms.var, reward_rms.count) = rms
        discounted_curiosity = exp.saved_array("discounted_curiosity", (args.num_envs,), np.float64)
        recent_returns.extend(exp.saved_list("recent_returns", recent_returns.maxlen, 0.0))
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        next_obs, next_done = envs.reset()[0], np.zeros(args.num_envs, dtype=bool)
        if not exp.loaded_checkpoint:  # a resumed run has its normaliser
            print(f"initialising the normaliser: {args.num_iterations_obs_norm_init * args.num_steps} random steps")
            next_obs, next_done = random_play(
                envs, args.num_steps * args.num_iterations_obs_norm_init, obs_rms, stats, action_rng, exp.raise_if_stopped
            )
            exp.restart_sps_clock()  # after the random play: SPS counts training only
        next_obs = torch.as_tensor(next_obs, device=device)
        frame_mean = torch.as_tensor(obs_rms.mean, dtype=torch.float32, device=device)
        frame_std = torch.as_tensor(np.sqrt(obs_rms.var), dtype=torch.float32, device=device)

        for iteration in range(first_iteration, args.num_iterations + 1):
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            with torch.inference_mode():
                for step in range(args.num_steps):
                    exp.raise_if_stopped()
                    global_step += args.num_envs
                    obs[step] = next_obs
                    valid[step] = 1.0 - next_done
                    action, logprobs[step], ext_values[step], int_values[step] = agent.act(next_obs)
                    actions[step] = action

                    next_obs_np, reward, terminated, truncated, infos = envs.step(action.cpu().numpy())
                    rewards[step], terminations[step], truncations[step] = reward, terminated, truncated
                    next_done = terminated | truncated
                    next_obs = torch.as_tensor(next_obs_np, device=device)
                    visited.update(infos["ram"])
                    # the bonus of this step: how unfamiliar the frame it led to is
                    next_frames[step] = next_obs[:, -1]
                    curiosity_rewards[step] = rnd_model.curiosity(normalize_frames(next_frames[step], frame_mean, frame_std))
                    game_curiosity += curiosity_rewards[step]

                    # a lost life ends an episode for learning; only a finished game is logged
                    ended, game_returns, game_lengths = stats.update(reward, terminated, truncated, infos)
                    if len(ended):
                        ended_curiosity = game_curiosity[ended].cpu().numpy()
                        game_curiosity[ended] = 0.0
                        game_rooms, game_places = visited.rooms_of(ended), visited.end_games(ended)
                        for game_return, game_length, curiosity, places, rooms in zip(
                            game_returns, game_lengths, ended_curiosity, game_places, game_rooms
                        ):
                            recent_returns.append(game_return)
                            print(f"global_step={global_step}, episodic_return={float(game_return)}")
                            writer.add_scalar("charts/episodic_return", game_return, global_step)
                            writer.add_scalar("charts/episodic_length", game_length, global_step)
                            writer.add_scalar("charts/avg_episodic_return", np.mean(recent_returns), global_step)
                            writer.add_scalar("charts/episode_curiosity_reward", curiosity, global_step)
                            if visited.known:
                                writer.add_scalar("charts/episode_visited_places", places, global_step)
                                writer.add_scalar("charts/episode_visited_rooms", rooms, global_step)

                next_values = [value.cpu().numpy() for value in agent(next_obs)[1:]]

            # Intrinsic rewards are divided by the running standard deviation of their discounted sums, so their
            # scale stays steady while the predictor improves.
            curiosity_np = curiosity_rewards.cpu().numpy()
            reward_rms.update(discounted_sums(curiosity_np, discounted_curiosity, args.int_gamma).reshape(-1))
            int_rewards = curiosity_np / np.sqrt(reward_rms.var)
            ext_values_np, int_values_np = ext_values.cpu().numpy(), int_values.cpu().numpy()
            ext_advantages, int_advantages = advantages(
                rewards, int_rewards, terminations, truncations, ext_values_np, int_values_np, next_values, args
            )
            # the frames of this rollout join the observation statistics before the predictor trains on them
            for frames in next_frames.cpu().numpy():
                obs_rms.update(frames)
            frame_mean = torch.as_tensor(obs_rms.mean, dtype=torch.float32, device=device)
            frame_std = torch.as_tensor(np.sqrt(obs_rms.var), dtype=torch.float32, device=device)

            # one flat batch of the rollout
            b_obs = obs.reshape((-1,) + obs_shape)
            b_next_frames = next_frames.reshape((-1,) + frame_shape)
            b_logprobs, b_actions, b_ext_values = logprobs.reshape(-1), actions.reshape(-1), ext_values.reshape(-1)
            b_ext_returns = torch.as_tensor((ext_advantages + ext_values_np).reshape(-1), device=device)
            b_int_returns = torch.as_tensor((int_advantages + int_values_np).reshape(-1), device=device)
            b_advantages = args.int_coef * int_advantages + args.ext_coef * ext_advantages
            b_advantages = torch.as_tensor(b_advantages.reshape(-1), device=device)
            b_valid = torch.as_tensor(valid.reshape(-1), device=device)

            for _epoch in range(args.update_epochs):
                b_inds = torch.randperm(args.batch_size, device=device)
                for start in range(0, args.batch_size, args.minibatch_size):
                    mb_inds = b_inds[start : start + args.minibatch_size]
                    mb_valid = b_valid[mb_inds]

                    forward_loss = rnd_model.predictor_loss(
                        normalize_frames(b_next_frames[mb_inds], frame_mean, frame_std), args.update_proportion
                    )

                    newlogprob, entropy, new_ext_values, new_int_values = agent.evaluate_actions(
                        b_obs[mb_inds], b_actions[mb_inds]
                    )
                    logratio = newlogprob - b_logprobs[mb_inds]
                    ratio = logratio.exp()

                    with torch.no_grad():
                        # two estimators of the KL to the rollout policy (http://joschu.net/blog/kl-approx.html)
                        old_approx_kl = masked_mean(-logratio, mb_valid)
                        approx_kl = masked_mean((ratio - 1) - logratio, mb_valid)

                    mb_advantages = b_advantages[mb_inds]
                    if args.norm_adv:
                        adv_mean = masked_mean(mb_advantages, mb_valid)
                        adv_std = masked_mean((mb_advantages - adv_mean) ** 2, mb_valid).sqrt()
                        mb_advantages = (mb_advantages - adv_mean) / (adv_std + 1e-8)

                    # clipped surrogate objective, on the steps whose action the env carried out
                    pg_loss1 = -mb_advantages * ratio
                    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                    pg_loss = masked_mean(torch.max(pg_loss1, pg_loss2), mb_valid)

                    # value losses: the extrinsic one (clipped) where an episode goes on, the intrinsic one everywhere
                    mb_ext_returns = b_ext_returns[mb_inds]
                    if args.clip_vloss:
                        ext_v_loss_unclipped = (new_ext_values - mb_ext_returns) ** 2
                        ext_v_change = (new_ext_values - b_ext_values[mb_inds]).clamp(-args.clip_coef, args.clip_coef)
                        ext_v_clipped = b_ext_values[mb_inds] + ext_v_change
                        ext_v_loss_clipped = (ext_v_clipped - mb_ext_returns) ** 2
                        ext_v_loss = 0.5 * masked_mean(torch.max(ext_v_loss_unclipped, ext_v_loss_clipped), mb_valid)
                    else:
                        ext_v_loss = 0.5 * masked_mean((new_ext_values - mb_ext_returns) ** 2, mb_valid)
                    int_v_loss = 0.5 * ((new_int_values - b_int_returns[mb_inds]) ** 2).mean()
                    v_loss = ext_v_loss + int_v_loss

                    entropy_loss = masked_mean(entropy, mb_valid)
                    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef + forward_loss

                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(trained_parameters, args.max_grad_norm, foreach=True)
                    optimizer.step()

                if args.target_kl is not None and approx_kl.item() > args.target_kl:
                    break

            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
            writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
            writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
            writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
            writer.add_scalar("losses/fwd_loss", forward_loss.item(), global_step)
            writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
            sps = int(global_step / exp.elapsed)
            print("SPS:", sps)
            writer.add_scalar("charts/SPS", sps, global_step)
            if visited.known:
                writer.add_scalar("charts/visited_rooms", len(visited.rooms), global_step)
                writer.add_scalar("charts/visited_places", len(visited.places), global_step)

            if exp.checkpoint_due(iteration):
                rms = ((obs_rms.mean, obs_rms.var, obs_rms.count), (reward_rms.mean, reward_rms.var, reward_rms.count))
                state = {"iteration": iteration, "rms": rms, "discounted_curiosity": discounted_curiosity}
                exp.save_checkpoint(global_step, state | {"recent_returns": list(recent_returns)}, learners)
