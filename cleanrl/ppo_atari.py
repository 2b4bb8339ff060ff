"""PPO for Atari games from pixels (ale-py's Breakout, Pong, ...), with the usual Atari preprocessing.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ppo-atari/#ppo_ataripy (docs/rl-algorithms/ppo-atari.md)
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
    env_id: str = "BreakoutNoFrameskip-v4"
    """Gymnasium id of the environment to train on"""
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
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from stable_baselines3.common.atari_wrappers import ClipRewardEnv, EpisodicLifeEnv, FireResetEnv, MaxAndSkipEnv, NoopResetEnv

from cleanrl_utils.runtime.evals.atari import evaluate_ppo
from cleanrl_utils.runtime.experiment import Experiment, check_atari_game


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


def make_vector_env(env_id, num_envs, capture_video, run_name):
    # Sub-envs reset in the same step they end; `infos["final_info"]` keeps the info of that last step.
    return gym.vector.SyncVectorEnv(
        [make_env(env_id, i, capture_video, run_name) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        copy=False,
    )


def finished_games(infos):
    """(sub-env, raw return, length in frames) of each whole game that ended in this step."""
    final = infos.get("final_info", {})  # only there when some sub-env's episode (a life) ended
    ended = np.flatnonzero(final.get("_episode", ()))
    return [(i, float(final["episode"]["r"][i]), int(final["episode"]["l"][i])) for i in ended]


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
        self.actor = layer_init(nn.Linear(512, envs.single_action_space.n), std=0.01)
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
    run_name = exp.run_name

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup, before any file is written
    exp.require_atari_game(see="ppo.py for vector observations", see_continuous="ppo_continuous_action.py")
    envs = exp.make_envs(lambda: make_vector_env(args.env_id, args.num_envs, args.capture_video, run_name), args.env_id)
    envs.action_space.seed(args.seed)
    problem = rollout_memory_problem(args.num_steps * args.num_envs, envs.single_observation_space)
    exp.require(not problem, problem)
    writer = exp.start_logging()

    agent = Agent(envs).to(device, memory_format=torch.channels_last)  # oneDNN's fastest layout for convolutions
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # rollout storage: frames stay uint8 until the network divides them by 255
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    dones = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)  # 1 where an episode (a life) ended

    global_step, first_iteration = 0, 1
    if exp.loaded_checkpoint:
        exp.restore_run_state({"agent": agent, "optimizer": optimizer})
        global_step, first_iteration = exp.saved_iteration(args.num_iterations, args.batch_size)
        next_obs = exp.saved_array("next_obs", envs.observation_space.shape, torch.uint8).to(device)
    else:
        next_obs, _ = envs.reset(seed=args.seed)
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
                    obs[step] = next_obs  # copied before the next step overwrites the env's array
                    action, logprobs[step], values[step] = agent.act(next_obs)
                    actions[step] = action

                    next_obs_np, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
                    cut = truncations & ~terminations
                    if cut.any():
                        # A time limit is not a true end: credit the value of the state the episode was cut at.
                        final_obs = torch.as_tensor(np.stack(infos["final_obs"][cut]), device=device)
                        reward[cut] += args.gamma * agent.get_value(final_obs).cpu().numpy()
                    rewards[step] = reward
                    dones[step] = terminations | truncations
                    next_obs = torch.as_tensor(next_obs_np, device=device)

                    # a lost life ends an episode for learning; only a finished game is logged
                    if dones[step].any():
                        for _, episodic_return, episodic_length in finished_games(infos):
                            print(f"global_step={global_step}, episodic_return={episodic_return}")
                            writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                            writer.add_scalar("charts/episodic_length", episodic_length, global_step)

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
            b_actions = actions.reshape(-1)
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
                state = {"agent": agent.state_dict(), "optimizer": optimizer.state_dict(), "next_obs": next_obs.clone()}
                exp.save_checkpoint(global_step, {"iteration": iteration, **state})

        if args.save_model:
            exp.save_model(agent.state_dict())
            episodic_returns = evaluate_ppo(
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", Agent, device, args.capture_video
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="PPO")
