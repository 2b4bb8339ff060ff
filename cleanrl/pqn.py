"""PQN (parallel Q-learning: Q(lambda) on many envs, no replay, no target network) for discrete actions and
vector observations (CartPole, Acrobot...).

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/pqn/#pqnpy (docs/rl-algorithms/pqn.md)
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

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "CartPole-v1"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 500000
    """training budget in environment steps"""
    learning_rate: float = 2.5e-4
    """optimiser step size"""
    num_envs: int = 4
    """environments stepped in parallel"""
    num_steps: int = 128
    """steps each environment takes per rollout"""
    num_minibatches: int = 4
    """minibatches each epoch splits the rollout into"""
    update_epochs: int = 4
    """passes over each rollout per update"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run"""
    gamma: float = 0.99
    """discount factor γ"""
    start_e: float = 1
    """ε of ε-greedy exploration at the start"""
    end_e: float = 0.05
    """ε of ε-greedy exploration once annealed"""
    exploration_fraction: float = 0.5
    """share of the budget over which ε falls linearly from start-e to end-e"""
    max_grad_norm: float = 10.0
    """global gradient norm above which gradients are scaled down"""
    q_lambda: float = 0.65
    """λ of the Q(λ) returns"""

    # derived from the settings above when the run starts
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
import torch.nn.functional as F
import torch.optim as optim

from cleanrl_utils.runtime.evals.discrete import evaluate_pqn
from cleanrl_utils.runtime.experiment import Experiment


def make_env(env_id, idx, capture_video, run_name):
    # no env checker wrapper: the spaces are checked below, with clear errors
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, disable_env_checker=True)
        return env

    return thunk


def make_vector_env(env_id, num_envs, capture_video, run_name):
    # Sub-envs reset in the same step they end; `infos["final_obs"]` keeps the last observation.
    envs = gym.vector.SyncVectorEnv(
        [make_env(env_id, i, capture_video, run_name) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        copy=False,
    )
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class QNetwork(nn.Module):
    def __init__(self, envs):
        super().__init__()
        obs_dim = np.array(envs.single_observation_space.shape).prod()
        # Layer normalisation is what lets PQN learn stably without a target network.
        self.network = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 120)),
            nn.LayerNorm(120),
            nn.ReLU(),
            layer_init(nn.Linear(120, 84)),
            nn.LayerNorm(84),
            nn.ReLU(),
            layer_init(nn.Linear(84, envs.single_action_space.n)),
        )

    def forward(self, x):
        return self.network(x)


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def q_lambda_returns(rewards, dones, values, next_value, gamma, q_lambda):
    """Q(lambda) targets, computed backwards over a rollout of shape (num_steps, num_envs).

    values[t] = max_a Q(obs[t], a) as the rollout saw it. The target of step t mixes the one-step
    bootstrap and the next step's own target: r + gamma * (lambda * G[t+1] + (1 - lambda) * max Q(s')).
    dones[t] (the episode ended after step t) cuts both, so no target reaches across episodes.
    """
    returns = np.zeros_like(rewards)
    next_return = next_value  # after the last step, the lambda-return is just the bootstrap
    for t in reversed(range(len(rewards))):
        nextnonterminal = 1.0 - dones[t]
        bootstrap = next_value if t == len(rewards) - 1 else values[t + 1]
        mixed = q_lambda * next_return + (1 - q_lambda) * bootstrap
        returns[t] = next_return = rewards[t] + gamma * nextnonterminal * mixed
    return returns


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs")
    exp.require(0 < args.exploration_fraction <= 1, f"need 0 < --exploration-fraction <= 1, got {args.exploration_fraction}")
    exp.require(0 <= args.q_lambda <= 1, f"need 0 <= --q-lambda <= 1, got {args.q_lambda}")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    exp.require(args.batch_size % args.num_minibatches == 0, "--num-minibatches does not divide --num-envs × --num-steps")
    exp.require(args.num_iterations > 0, f"--total-timesteps is less than one rollout batch ({args.batch_size} steps)")
    run_name = exp.run_name

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)  # the network is too small for threads to pay off

    # env setup, before any file is written
    envs = exp.make_envs(lambda: make_vector_env(args.env_id, args.num_envs, args.capture_video, run_name), args.env_id)
    exp.require_action_space(envs.single_action_space, gym.spaces.Discrete, see="sac_continuous_action.py")
    exp.require_flat_observations(envs.single_observation_space, see="pqn_atari_envpool.py")
    envs.action_space.seed(args.seed)
    problem = rollout_memory_problem(args.num_steps * args.num_envs, envs.single_observation_space)
    exp.require(not problem, problem)
    writer = exp.start_logging()

    q_network = QNetwork(envs).to(device)
    optimizer = optim.RAdam(q_network.parameters(), lr=args.learning_rate)

    # rollout storage
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    dones = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)  # 1 where an episode ended after this step
    values = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)

    global_step = 0
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(next_obs, dtype=torch.float32, device=device)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for iteration in range(1, args.num_iterations + 1):
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
                    max_q, greedy = q_network(next_obs).max(dim=1)
                    values[step] = max_q.cpu().numpy()
                    explore = np.random.random(args.num_envs) < epsilon
                    action = np.where(explore, envs.action_space.sample(), greedy.cpu().numpy())
                    actions[step] = torch.as_tensor(action, device=device)

                    next_obs_np, reward, terminations, truncations, infos = envs.step(action)
                    cut = truncations & ~terminations
                    if cut.any():
                        # A time limit is not a true end: credit the value of the state the episode was cut at.
                        final_obs = torch.as_tensor(np.stack(infos["final_obs"][cut]), dtype=torch.float32, device=device)
                        reward[cut] += args.gamma * q_network(final_obs).max(dim=1).values.cpu().numpy()
                    rewards[step] = reward
                    dones[step] = terminations | truncations
                    next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=device)

                    for i in np.flatnonzero(infos.get("_episode", [])):
                        episodic_return = float(infos["episode"]["r"][i])
                        print(f"global_step={global_step}, episodic_return={episodic_return}")
                        writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                        writer.add_scalar("charts/episodic_length", int(infos["episode"]["l"][i]), global_step)

                next_value = q_network(next_obs).max(dim=1).values.cpu().numpy()
            returns = q_lambda_returns(rewards, dones, values, next_value, args.gamma, args.q_lambda)

            # one flat batch of the rollout
            b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
            b_actions = actions.reshape(-1)
            b_returns = torch.as_tensor(returns.reshape(-1), device=device)

            # the update: epochs of shuffled minibatches
            for _epoch in range(args.update_epochs):
                b_inds = torch.randperm(args.batch_size, device=device)
                for start in range(0, args.batch_size, args.minibatch_size):
                    mb_inds = b_inds[start : start + args.minibatch_size]
                    old_val = q_network(b_obs[mb_inds]).gather(1, b_actions[mb_inds].unsqueeze(-1)).squeeze(-1)
                    loss = F.mse_loss(b_returns[mb_inds], old_val)

                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(q_network.parameters(), args.max_grad_norm)
                    optimizer.step()

            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            writer.add_scalar("losses/td_loss", loss.item(), global_step)
            writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)
            sps = int(global_step / exp.elapsed)
            print("SPS:", sps)
            writer.add_scalar("charts/SPS", sps, global_step)

        if args.save_model:
            exp.save_model(q_network.state_dict())
            episodic_returns = evaluate_pqn(
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", QNetwork, device, args.end_e, args.capture_video
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="PQN")
