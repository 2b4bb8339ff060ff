"""Recurrent PQN (Q(lambda) on many envs, no replay, no target network) for Atari games from pixels, stepped
by envpool: one frame per observation, an LSTM carries the memory.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/pqn-atari-envpool/#pqn_atari_envpool_lstmpy (docs/rl-algorithms/pqn-atari-envpool.md)
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
    """accepted for a common command line, but does nothing: envpool renders no frames to record"""
    checkpoint_frequency: int = 0
    """save a checkpoint to resume from every this many iterations (0: never)"""
    resume: str | None = None
    """continue the run of this checkpoint file, or of this run folder's newest one, with its arguments (checked as the command line's); a checkpoint is read as data, never run"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "Breakout-v5"
    """environment id (an envpool Atari id, e.g. Breakout-v5)"""
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
    num_minibatches: int = 4
    """minibatches per epoch (each holds whole environments' sequences: it must divide num-envs)"""
    update_epochs: int = 4
    """passes over each rollout per update"""
    max_grad_norm: float = 0.5
    """global gradient norm above which gradients are scaled down"""
    start_e: float = 1
    """ε of ε-greedy exploration at the start"""
    end_e: float = 0.01
    """ε of ε-greedy exploration once annealed"""
    exploration_fraction: float = 0.10
    """share of the budget over which ε falls linearly from start-e to end-e"""
    q_lambda: float = 0.65
    """λ of the Q(λ) returns"""

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
    """envpool's own Atari pipeline: 30 no-op starts, 4-frame skip with max-pooling, 84x84 grey, one frame (no stack).

    A lost life ends an episode (for learning) and rewards are clipped to their sign; `infos["reward"]`
    keeps the raw score. Sub-env i is seeded with seed + i. A finished sub-env resets on the step after
    its end (that step ignores the action, pays nothing and returns the new episode's first frame).
    """
    return envpool.make(
        env_id, env_type="gymnasium", num_envs=num_envs, seed=seed, episodic_life=True, reward_clip=True, stack_num=1
    )


class EpisodeStatistics:
    """Raw score and length of whole games (all lives), per sub-env, from envpool's step outputs.

    A game ends at a truncation or at a termination with no lives left; the step after an end is the
    env's reset and belongs to no game, so the counters restart from the step after that.
    """

    def __init__(self, num_envs):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self.resetting = np.zeros(num_envs, dtype=bool)  # the game ended at the previous step

    def update(self, rewards, terminations, truncations, infos):
        playing = ~self.resetting
        self.returns += np.where(playing, infos["reward"], 0.0)
        self.lengths += playing
        ended = np.flatnonzero(truncations | (terminations & (infos["lives"] == 0)))
        returns, lengths = self.returns[ended].copy(), self.lengths[ended].copy()
        self.returns[ended], self.lengths[ended] = 0.0, 0
        self.resetting[:] = False
        self.resetting[ended] = True
        return ended, returns, lengths


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class QNetwork(nn.Module):
    def __init__(self, envs):
        super().__init__()
        # Nature-CNN on a single frame with a LayerNorm after every layer, then an LSTM
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(1, 32, 8, stride=4)),
            nn.LayerNorm([32, 20, 20]),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.LayerNorm([64, 9, 9]),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.LayerNorm([64, 7, 7]),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.LayerNorm(512),
            nn.ReLU(),
        )
        self.lstm = nn.LSTM(512, 128)
        for name, param in self.lstm.named_parameters():
            if "bias" in name:
                nn.init.constant_(param, 0)
            elif "weight" in name:
                nn.init.orthogonal_(param, 1.0)
        self.q_head = layer_init(nn.Linear(128, envs.single_action_space.n))

    def initial_state(self, num_envs, device=None):
        """The (h, c) an episode starts from: zeros, one column per env."""
        shape = (self.lstm.num_layers, num_envs, self.lstm.hidden_size)
        return torch.zeros(shape, device=device), torch.zeros(shape, device=device)

    def forward(self, x, lstm_state, starts):
        """Q-values for a sequence of observations, flattened step-major (step 0 of every env, then step 1...).

        The sequence starts from `lstm_state`; where `starts[t, i]` is 1 (obs t of env i is the first of an
        episode) the state of env i is zeroed before step t, so no memory crosses an episode boundary.
        Returns the Q-values and the LSTM state after the last step.
        """
        hidden = self.network(x / 255.0)  # uint8 frames become floats only here
        num_envs = lstm_state[0].shape[1]
        hidden = hidden.reshape(-1, num_envs, hidden.shape[-1])
        keep = (1.0 - starts).reshape(-1, 1, num_envs, 1)
        outputs = []
        for h, k in zip(hidden, keep):
            out, lstm_state = self.lstm(h.unsqueeze(0), (k * lstm_state[0], k * lstm_state[1]))
            outputs.append(out)
        return self.q_head(torch.cat(outputs).flatten(0, 1)), lstm_state


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def q_lambda_returns(rewards, terminations, truncations, values, next_value, gamma, q_lambda):
    """Q(lambda) targets, computed backwards over a rollout of shape (num_steps, num_envs).

    values[t] = max_a Q(obs[t], a) as the rollout saw it, next_value the same for the state after the
    last step. With envpool the observation after an ending step is the episode's last one, so:
    G[t] = r + gamma * (lambda * G[t+1] + (1 - lambda) * values[t+1]) inside an episode;
    G[t] = r + gamma * values[t+1] at a truncation (bootstrap on the last state, no lambda mix, since
    G[t+1] belongs to the env's reset step); G[t] = r at a termination.
    """
    returns = np.zeros_like(rewards)
    next_return = next_value  # after the last step, the lambda-return is just the bootstrap
    for t in reversed(range(len(rewards))):
        bootstrap = next_value if t == len(rewards) - 1 else values[t + 1]
        lam = q_lambda * (1.0 - np.maximum(terminations[t], truncations[t]))
        mixed = lam * next_return + (1.0 - lam) * bootstrap
        returns[t] = next_return = rewards[t] + gamma * (1.0 - terminations[t]) * mixed
    return returns


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs")
    exp.require(0 < args.exploration_fraction <= 1, "--exploration-fraction must be in (0, 1]")
    exp.require(0 <= args.q_lambda <= 1, "--q-lambda must be in [0, 1]")
    divides = args.num_envs % args.num_minibatches == 0
    exp.require(divides, f"--num-minibatches does not divide --num-envs {args.num_envs} (minibatches hold whole envs)")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    exp.require(args.num_iterations > 0, f"--total-timesteps is less than one rollout batch ({args.batch_size} steps)")

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup, before any file is written
    exp.require(envpool is not None, f'{args.env_id}: envpool is not installed; install it with pip install -e ".[envpool]"')
    hint = "an envpool Atari id such as Breakout-v5 (Gymnasium's BreakoutNoFrameskip-v4 runs with dqn_atari.py)"
    exp.require(args.env_id in envpool.list_all_envs(), f"{args.env_id} is not an envpool env; use {hint}")
    atari = "Atari" in type(envpool.make_spec(args.env_id)).__name__
    exp.require(atari, f"{args.env_id} is not an Atari game (see pqn.py for vector observations)")
    # envpool cannot save its games: a run resumed at iteration k plays new ones, seeded from
    # seed + k × num_envs (not the run's first games)
    env_seed = args.seed + (exp.saved_int("iteration", 1, args.num_iterations) * args.num_envs if exp.loaded_checkpoint else 0)
    envs = exp.make_envs(lambda: make_env(args.env_id, args.num_envs, env_seed), args.env_id)
    problem = rollout_memory_problem(args.num_steps * args.num_envs, envs.single_observation_space)
    exp.require(not problem, problem)
    writer = exp.start_logging()

    q_network = QNetwork(envs).to(device)
    optimizer = optim.RAdam(q_network.parameters(), lr=args.learning_rate)

    # rollout storage: frames stay uint8 until the network divides them by 255
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    terminations = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)  # a life was lost (or the game over)
    truncations = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)  # the time limit cut the game
    learnable = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)  # 0 at a reset step: it crosses a boundary
    starts = torch.zeros((args.num_steps, args.num_envs), device=device)  # 1 where obs[t] begins an episode (a life)

    global_step, first_iteration = 0, 1
    if exp.loaded_checkpoint:
        exp.restore_run_state({"q_network": q_network, "optimizer": optimizer})
        global_step, first_iteration = exp.saved_iteration(args.num_iterations, args.batch_size)
    next_obs, _ = envs.reset()
    next_obs = torch.as_tensor(next_obs, device=device)
    resetting = np.zeros(args.num_envs, dtype=bool)  # the sub-env's episode ended: its next step is the reset
    next_start = torch.ones(args.num_envs, device=device)
    next_lstm_state = q_network.initial_state(args.num_envs, device)
    # the update replays each env's rollout from its (h, c) at step 0; its minibatches are sets of whole envs
    flat_inds = torch.arange(args.batch_size, device=device).reshape(args.num_steps, args.num_envs)
    envs_per_batch = args.num_envs // args.num_minibatches
    episode_stats = EpisodeStatistics(args.num_envs)
    avg_returns = deque(maxlen=20)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for iteration in range(first_iteration, args.num_iterations + 1):
            initial_lstm_state = (next_lstm_state[0].clone(), next_lstm_state[1].clone())
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            with torch.inference_mode():
                for step in range(args.num_steps):
                    exp.raise_if_stopped()
                    # epsilon follows the steps taken so far; each sub-env explores on its own coin flip
                    epsilon = linear_schedule(
                        args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step
                    )
                    global_step += args.num_envs
                    obs[step] = next_obs
                    starts[step] = next_start
                    q_values, next_lstm_state = q_network(next_obs, next_lstm_state, next_start)
                    values[step], greedy = q_values.max(dim=1)
                    explore = np.random.random(args.num_envs) < epsilon
                    random_actions = np.random.randint(envs.single_action_space.n, size=args.num_envs)
                    action = np.where(explore, random_actions, greedy.cpu().numpy())
                    actions[step] = torch.as_tensor(action, device=device)

                    learnable[step] = ~resetting
                    next_obs_np, reward, term, trunc, infos = envs.step(action)
                    rewards[step], terminations[step], truncations[step] = reward, term, trunc
                    # The frame an ending step returns is still the old episode's (its last): the memory is
                    # zeroed only before the frame the reset step returns, the new episode's first.
                    next_start = torch.as_tensor(resetting, dtype=torch.float32, device=device)
                    resetting = term | trunc
                    next_obs = torch.as_tensor(next_obs_np, device=device)

                    # a lost life ends an episode for learning; only a finished game is logged
                    for _, episodic_return, episodic_length in zip(*episode_stats.update(reward, term, trunc, infos)):
                        avg_returns.append(episodic_return)
                        print(f"global_step={global_step}, episodic_return={episodic_return}")
                        writer.add_scalar("charts/avg_episodic_return", np.average(avg_returns), global_step)
                        writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                        writer.add_scalar("charts/episodic_length", episodic_length, global_step)

                next_value = q_network(next_obs, next_lstm_state, next_start)[0].max(dim=1).values.cpu().numpy()
            returns = q_lambda_returns(
                rewards, terminations, truncations, values.cpu().numpy(), next_value, args.gamma, args.q_lambda
            )

            # one flat batch of the rollout, step-major: index t * num_envs + i is step t of env i
            b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
            b_actions = actions.reshape(-1)
            b_starts = starts.reshape(-1)
            b_returns = torch.as_tensor(returns.reshape(-1), device=device)
            b_learnable = torch.as_tensor(learnable.reshape(-1), device=device)

            # Optimizing the Q-network
            for _epoch in range(args.update_epochs):
                env_perm = torch.randperm(args.num_envs, device=device)
                for first in range(0, args.num_envs, envs_per_batch):
                    mb_envs = env_perm[first : first + envs_per_batch]
                    mb_inds = flat_inds[:, mb_envs].reshape(-1)  # the whole sequences of these envs, step-major
                    mb_state = (initial_lstm_state[0][:, mb_envs], initial_lstm_state[1][:, mb_envs])
                    q_values, _ = q_network(b_obs[mb_inds], mb_state, b_starts[mb_inds])
                    old_val = q_values.gather(1, b_actions[mb_inds].unsqueeze(-1)).squeeze(-1)
                    # mean squared error over the learnable steps only (a reset step's target means nothing)
                    weight = b_learnable[mb_inds]
                    count = weight.sum().clamp(min=1.0)
                    loss = (weight * (b_returns[mb_inds] - old_val) ** 2).sum() / count

                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(q_network.parameters(), args.max_grad_norm)
                    optimizer.step()

            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            writer.add_scalar("losses/td_loss", loss.item(), global_step)
            writer.add_scalar("losses/q_values", ((weight * old_val).sum() / count).item(), global_step)
            sps = int(global_step / exp.elapsed)
            print("SPS:", sps)
            writer.add_scalar("charts/SPS", sps, global_step)

            if exp.checkpoint_due(iteration):
                state = {"q_network": q_network.state_dict(), "optimizer": optimizer.state_dict()}
                exp.save_checkpoint(global_step, {"iteration": iteration, **state})
