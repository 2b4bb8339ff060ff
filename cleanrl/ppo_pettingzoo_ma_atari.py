"""PPO self-play on two-player PettingZoo Atari games (Pong, Surround, ...): one shared policy plays both sides.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ppo-pettingzoo-ma-atari/#ppo_pettingzoo_ma_ataripy (docs/rl-algorithms/ppo-pettingzoo-ma-atari.md)
"""

import contextlib
import importlib
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
    """save the model into the `runs/{run_name}` folder, then score it against a random opponent"""
    upload_model: bool = False
    """upload the saved model, its evaluation and logs to the Hugging Face Hub"""
    hf_entity: str = ""
    """Hugging Face Hub account or organisation that owns the uploaded model's repo (empty: the token's own)"""
    checkpoint_frequency: int = 0
    """save a checkpoint to resume from every this many iterations (0: never)"""
    resume: str | None = None
    """continue the run of this checkpoint file, or of this run folder's newest one, with its arguments (checked as the command line's); a checkpoint is read as data, never run"""
    snapshot_frequency: int = 0
    """keep the policy every this many iterations as `runs/{run_name}/{exp_name}-{global_step}.cleanrl_model`: the earlier selves a later policy can be scored against (0: never)"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "pong_v3"
    """environment id: a two-player game module of `pettingzoo.atari`"""
    total_timesteps: int = 20000000
    """training budget in environment steps (steps of every player of every game copy)"""
    learning_rate: float = 2.5e-4
    """optimiser step size"""
    num_envs: int = 16
    """the number of parallel player environments (two per game copy: num_envs // 2 games)"""
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
    max_cycles: int = 100000
    """a game is cut (truncated) after this many emulator frames (PettingZoo's `max_cycles`)"""

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

from cleanrl_utils.runtime.evals.special import evaluate_pettingzoo
from cleanrl_utils.runtime.experiment import Experiment


def make_vector_env(env_id, num_envs, max_cycles, capture_video):
    """num_envs // 2 copies of the game, each giving two player envs (player = index % 2); same-step autoreset.
    What is wrong with the game or the packages raises gym.error.Error, which the script reports in one line."""
    try:
        import ale_py
        import supersuit as ss

        game = importlib.import_module(f"pettingzoo.atari.{env_id}")
    except ImportError as e:
        if not str(e.name).startswith("pettingzoo.atari."):  # PettingZoo, SuperSuit or what a game needs is missing
            raise gym.error.Error(f'{e}; the PettingZoo Atari games need pip install -e ".[pettingzoo]"') from e
        game = None  # no such module: not a game
    if not hasattr(game, "parallel_env"):
        raise gym.error.Error(f"{env_id} is not a game of pettingzoo.atari (e.g. pong_v3, surround_v2)")
    roms = os.path.join(os.path.dirname(ale_py.__file__), "roms")  # ale-py ships the ROMs
    render_mode = "rgb_array" if capture_video else None
    env = game.parallel_env(auto_rom_install_path=roms, max_cycles=max_cycles, render_mode=render_mode)
    if len(env.possible_agents) != 2:
        raise gym.error.Error(f"{env_id} has {len(env.possible_agents)} players; self-play here needs a two-player game")
    env = ss.max_observation_v0(env, 2)
    env = ss.frame_skip_v0(env, 4)
    env = ss.clip_reward_v0(env, lower_bound=-1, upper_bound=1)
    env = ss.color_reduction_v0(env, mode="B")
    env = ss.resize_v1(env, x_size=84, y_size=84)
    env = ss.frame_stack_v1(env, 4)
    env = ss.agent_indicator_v0(env, type_only=False)  # one more channel per player: 255 in its own, 0 elsewhere
    env = ss.pettingzoo_env_to_vec_env_v1(env)
    return ss.concat_vec_envs_v1(env, num_envs // 2, num_cpus=0, base_class="gymnasium")


class VideoRecorder:
    """mp4s of the first game copy at episodes 0, 1, 8, 27, ... (then every 1000th), like Gymnasium's RecordVideo."""

    def __init__(self, envs, folder):
        self.game, self.folder, self.episode, self.frames = envs.vec_envs[0].par_env, folder, 0, []
        os.makedirs(folder, exist_ok=True)

    def step(self, game_ended):
        if self.episode < 1000 and round(self.episode ** (1 / 3)) ** 3 == self.episode or self.episode % 1000 == 0:
            self.frames.append(self.game.render())
        if game_ended:
            self.close()
            self.episode += 1

    def close(self):
        if self.frames:
            from moviepy import ImageSequenceClip

            clip = ImageSequenceClip(self.frames, fps=15)
            clip.write_videofile(f"{self.folder}/rl-video-episode-{self.episode}.mp4", logger=None)
        self.frames = []


def start_games(envs, seed, game_actions):
    """Reset `envs`, then play each game copy's actions since its last reset again: the emulators cannot be saved, but
    a game is deterministic (no sticky actions). The observations, and each player's return and length in its game."""
    obs, returns = envs.reset(seed=seed)[0].copy(), np.zeros(envs.num_envs)
    for k, (game, played) in enumerate(zip(envs.vec_envs, game_actions, strict=True)):
        for pair in played:
            obs[2 * k : 2 * k + 2], reward = game.step(pair)[:2]
            returns[2 * k : 2 * k + 2] += reward
    return obs, returns, np.repeat([len(played) for played in game_actions], 2)


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        # Nature-CNN over 4 stacked frames + 2 player-indicator channels, shared by the policy and the value function
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(6, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, envs.single_action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def hidden(self, x):
        return self.network(x.permute(0, 3, 1, 2) / 255.0)  # frames and player indicators (0 or 255) into [0, 1]

    def get_value(self, x):
        return self.critic(self.hidden(x)).squeeze(-1)

    def act(self, x):
        """Rollout: sampled actions, their log-probabilities and the state values, from one pass of the CNN."""
        hidden = self.hidden(x)
        logp_all = self.actor(hidden).log_softmax(-1)
        action = torch.distributions.Categorical(logits=logp_all).sample()
        return action, logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1), self.critic(hidden).squeeze(-1)

    def evaluate_actions(self, x, action):
        """Log-probability and entropy of given actions under the current policy, and the state value."""
        hidden = self.hidden(x)
        logp_all = self.actor(hidden).log_softmax(-1)
        logprob = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logprob, entropy, self.critic(hidden).squeeze(-1)


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs", "max_cycles")
    exp.require(args.num_envs % 2 == 0, f"--num-envs {args.num_envs} must be even: each game copy gives two player envs")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    exp.require(args.batch_size % args.num_minibatches == 0, "--num-minibatches does not divide --num-envs × --num-steps")
    exp.require(args.minibatch_size > 1 or not args.norm_adv, "--norm-adv needs minibatches of at least 2 transitions")
    exp.require(args.num_iterations > 0, f"--total-timesteps is less than one rollout batch ({args.batch_size} steps)")

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup, before any file is written
    envs = exp.make_envs(lambda: make_vector_env(args.env_id, args.num_envs, args.max_cycles, args.capture_video), args.env_id)
    envs.single_observation_space, envs.single_action_space = envs.observation_space, envs.action_space
    video = VideoRecorder(envs, f"videos/{exp.run_name}") if args.capture_video else None
    exp.require(not (problem := rollout_memory_problem(args.num_steps * args.num_envs, envs.observation_space)), problem)
    writer = exp.start_logging()

    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    learners = {"agent": agent, "optimizer": optimizer}

    # rollout storage: frames stay uint8 until the network scales them
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    dones = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)

    global_step, first_iteration = 0, 1
    game_actions = [[] for _ in range(args.num_envs // 2)]  # each game copy's (player 0, player 1) actions since its reset
    if exp.loaded_checkpoint:
        exp.restore_run_state(learners)
        global_step, first_iteration = exp.saved_iteration(args.num_iterations, args.batch_size)
        saved, known = exp.saved_list("game_actions", args.num_envs // 2, np.ndarray), range(envs.single_action_space.n)
        fits = len(saved) == args.num_envs // 2 and all(p.shape[1:] == (2,) and np.isin(p, known).all() for p in saved)
        exp.require(fits, "--resume: the checkpoint's games are not this run's")
        game_actions = [list(played) for played in saved]
        if video:
            video.episode = exp.saved_int("video_episode", 0, args.total_timesteps)
    # each player's episode is counted here, in clipped rewards (a resumed run's games are played up to its checkpoint)
    next_obs, episode_returns, episode_lengths = start_games(envs, args.seed, game_actions)
    next_obs = torch.as_tensor(next_obs, device=device)
    # exp catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit;
    # the video in progress is written before that
    with exp, contextlib.closing(video) if video else contextlib.nullcontext():
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

                    next_obs_np, reward, terminations, truncations, infos = envs.step(action_np := action.cpu().numpy())
                    terminations, truncations = terminations.astype(bool), truncations.astype(bool)
                    episode_returns += reward
                    episode_lengths += 1
                    cut = np.flatnonzero(truncations & ~terminations)
                    if len(cut):
                        # A time limit (max_cycles) is not a true end: credit the value of the state it was cut at.
                        final_obs = np.stack([infos[i]["terminal_observation"] for i in cut])
                        reward[cut] += args.gamma * agent.get_value(torch.as_tensor(final_obs, device=device)).cpu().numpy()
                    rewards[step] = reward
                    dones[step] = terminations | truncations
                    next_obs = torch.as_tensor(next_obs_np, device=device)
                    if video:
                        video.step(game_ended=bool(dones[step, 0]))
                    for k, pair in enumerate(action_np.reshape(-1, 2)):  # a game copy resets once both players are done
                        game_actions[k].append(pair)
                    game_actions = [[] if over else played for played, over in zip(game_actions, dones[step, ::2])]

                    for i in np.flatnonzero(dones[step]):
                        player = i % 2
                        print(f"global_step={global_step}, player={player}, episodic_return={episode_returns[i]}")
                        writer.add_scalar(f"charts/episodic_return-player{player}", episode_returns[i], global_step)
                        writer.add_scalar(f"charts/episodic_length-player{player}", episode_lengths[i], global_step)
                        episode_returns[i], episode_lengths[i] = 0, 0

                next_value = agent.get_value(next_obs).cpu().numpy()
            values_np = values.cpu().numpy()

            # dones[t] cuts the recursion, so no advantage flows across an episode boundary
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
            b_logprobs, b_actions, b_values = logprobs.reshape(-1), actions.reshape(-1), values.reshape(-1)
            b_advantages = torch.as_tensor(advantages.reshape(-1), device=device)
            b_returns = torch.as_tensor(returns_np.reshape(-1), device=device)

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

                    # value loss
                    if args.clip_vloss:
                        v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                        v_clipped = b_values[mb_inds] + (newvalue - b_values[mb_inds]).clamp(-args.clip_coef, args.clip_coef)
                        v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                        v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
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
                played = [np.array(moves, dtype=np.int64).reshape(-1, 2) for moves in game_actions]
                state = {"iteration": iteration, "game_actions": played, "video_episode": video and video.episode}
                exp.save_checkpoint(global_step, state, learners)
            if args.snapshot_frequency and iteration % args.snapshot_frequency == 0:
                exp.save_model(agent.state_dict(), f"{args.exp_name}-{global_step}")

        if args.save_model:  # self-play returns say little: the points won per game against a random player, sides alternating
            exp.save_model(agent.state_dict())
            eval_args = (exp.model_path, make_vector_env, args.env_id, 10, f"{exp.run_name}-eval", Agent, device)
            options = {"capture_video": args.capture_video, "VideoRecorder": VideoRecorder, "max_cycles": args.max_cycles}
            exp.log_evaluation_and_upload(evaluate_pettingzoo(*eval_args, **options), hub_algorithm_name="PPO")
