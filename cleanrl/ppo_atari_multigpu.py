"""Data-parallel PPO for Atari games from pixels: one process per device (torchrun), gradients averaged across them.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ppo-atari-multigpu/#ppo_atari_multigpupy (docs/rl-algorithms/ppo-atari-multigpu.md)
"""

import hashlib
import os
import sys
from dataclasses import dataclass, field

from cleanrl_utils.runtime.command_line import check_command_line, rollout_memory_problem


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """experiment name, part of the run name (defaults to the file's name)"""
    seed: int = 1
    """random seed (rank r seeds its envs and its action sampling from seed + r)"""
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
    env_id: str = "BreakoutNoFrameskip-v4"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 10000000
    """training budget in environment steps (summed over all ranks' envs)"""
    learning_rate: float = 2.5e-4
    """optimiser step size"""
    local_num_envs: int = 8
    """environments stepped in parallel by each process (rank)"""
    num_steps: int = 128
    """steps each environment takes per rollout"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run"""
    gamma: float = 0.99
    """discount factor γ"""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation"""
    num_minibatches: int = 4
    """minibatches per epoch (each rank splits its own batch into this many)"""
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
    device_ids: list[int] = field(default_factory=list)
    """the CUDA device of each local rank, e.g. `--device-ids 2 3` (empty: local rank r uses cuda:r)"""
    backend: str = "gloo"
    """the torch.distributed backend: gloo (CPUs or GPUs), nccl (GPUs) or mpi (a torch built with MPI)"""

    local_batch_size: int = 0
    """the batch size of each rank (set when the run starts)"""
    local_minibatch_size: int = 0
    """the mini-batch size of each rank (set when the run starts)"""
    num_envs: int = 0
    """the number of environments of all ranks together (set when the run starts)"""
    batch_size: int = 0
    """the batch size of all ranks together (set when the run starts)"""
    minibatch_size: int = 0
    """the mini-batch size of all ranks together (set when the run starts)"""
    num_iterations: int = 0
    """rollout-and-update iterations (set from the budget at start-up)"""
    world_size: int = 0
    """the number of processes, from torchrun's WORLD_SIZE (set when the run starts)"""


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import gymnasium as gym
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from stable_baselines3.common.atari_wrappers import ClipRewardEnv, EpisodicLifeEnv, FireResetEnv, MaxAndSkipEnv, NoopResetEnv

from cleanrl_utils.runtime.evals.atari import evaluate_ppo
from cleanrl_utils.runtime.experiment import Experiment, check_atari_game

BACKENDS = ("gloo", "nccl", "mpi")


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


def parameters_digest(model):
    """sha256 of all the model's weights, in state_dict order: equal digests mean identical replicas."""
    return hashlib.sha256(b"".join(t.detach().cpu().numpy().tobytes() for t in model.state_dict().values())).hexdigest()


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    # torchrun sets these for each process it starts; a plain `python` run is a world of one
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    args.world_size = int(os.environ.get("WORLD_SIZE", "1"))
    exp.require_positive("local_num_envs")
    exp.require(args.backend in BACKENDS, f"--backend must be one of {', '.join(BACKENDS)}, got {args.backend!r}")
    args.local_batch_size = int(args.local_num_envs * args.num_steps)
    args.local_minibatch_size = int(args.local_batch_size // args.num_minibatches)
    args.num_envs = args.local_num_envs * args.world_size
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    divides = args.local_batch_size % args.num_minibatches == 0
    exp.require(divides, "--num-minibatches does not divide local-num-envs × num-steps (each rank splits its own batch)")
    exp.require(args.local_minibatch_size > 1 or not args.norm_adv, "--norm-adv needs minibatches of at least 2 transitions")
    exp.require(args.num_iterations > 0, f"--total-timesteps is less than one rollout batch of all ranks ({args.batch_size})")
    run_name = exp.run_name

    # device of each local rank: --device-ids[local_rank], else the GPUs in turn (several ranks may share one)
    device = torch.device("cpu")
    if torch.cuda.is_available() and args.cuda:
        local_world_size, gpus = int(os.environ.get("LOCAL_WORLD_SIZE", "1")), torch.cuda.device_count()
        ids = " ".join(map(str, args.device_ids))
        exp.require(len(args.device_ids) in (0, local_world_size), f"--device-ids {ids}: not one per process on this machine")
        exp.require(all(0 <= i < gpus for i in args.device_ids), f"--device-ids {ids}: this machine has GPUs 0 to {gpus - 1}")
        device = torch.device(f"cuda:{args.device_ids[local_rank] if args.device_ids else local_rank % gpus}")
        torch.cuda.set_device(device)
    exp.require(device.type == "cuda" or not args.device_ids, "--device-ids needs CUDA (a GPU and no --no-cuda)")
    exp.require(args.backend != "nccl" or device.type == "cuda", "--backend nccl needs a CUDA device for each process")
    exp.require(dist.is_backend_available(args.backend), f"--backend {args.backend} is not in this torch build; use gloo")
    if args.world_size > 1:  # torchrun's MASTER_ADDR and MASTER_PORT say where the ranks meet
        dist.init_process_group(args.backend, rank=rank, world_size=args.world_size)

    # every rank builds the same initial network from --seed; its envs and its action sampling get
    # seeds of their own (below), so the ranks gather different experience
    exp.seed_global_rngs()

    # env setup, before any file is written; a non-Atari id is made once to say what is wrong with it
    exp.require_atari_game(see="ppo.py for vector observations", see_continuous="ppo_continuous_action.py")
    video = args.capture_video and rank == 0  # rank 0 alone records videos and writes TensorBoard, W&B and the model
    envs = exp.make_envs(lambda: make_vector_env(args.env_id, args.local_num_envs, video, run_name), args.env_id)
    envs.action_space.seed(args.seed + rank)
    problem = rollout_memory_problem(args.num_steps * args.local_num_envs, envs.single_observation_space)
    exp.require(not problem, problem)
    writer = exp.start_logging(log=rank == 0)

    agent = Agent(envs).to(device, memory_format=torch.channels_last)  # oneDNN's fastest layout for convolutions
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    torch.manual_seed(args.seed + rank)

    # rollout storage of this rank: frames stay uint8 until the network divides them by 255
    obs_shape = envs.single_observation_space.shape
    obs = torch.zeros((args.num_steps, args.local_num_envs) + obs_shape, dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.local_num_envs), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, args.local_num_envs), device=device)
    values = torch.zeros((args.num_steps, args.local_num_envs), device=device)
    rewards = np.zeros((args.num_steps, args.local_num_envs), dtype=np.float32)
    dones = np.zeros((args.num_steps, args.local_num_envs), dtype=np.float32)  # 1 where an episode (a life) ended
    params = list(agent.parameters())

    global_step = 0  # steps of all ranks' envs: every rank steps its envs in lockstep with the others
    # env i of rank r gets seed + r * local_num_envs + i: no two envs of the run share a seed
    next_obs, _ = envs.reset(seed=args.seed + rank * args.local_num_envs)
    next_obs = torch.as_tensor(next_obs, device=device)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for iteration in range(1, args.num_iterations + 1):
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            games = []  # (global step, raw return, length) of the whole games this rank finished
            with torch.inference_mode():
                for step in range(args.num_steps):
                    if args.world_size == 1:
                        exp.raise_if_stopped()
                    elif exp.stop_requested():  # the ranks stop together, once their rollouts are over (below)
                        break
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
                        games += [(global_step, ret, length) for _, ret, length in finished_games(infos)]

                next_value = agent.get_value(next_obs).cpu().numpy()

            if args.world_size > 1:  # a signal reaches each rank at its own step: stop where all of them can
                stop = torch.tensor([float(exp.stop_requested())], device=device)
                dist.all_reduce(stop, op=dist.ReduceOp.MAX)
                if stop.item():
                    raise KeyboardInterrupt

            # rank 0 logs the games of every rank, at the global step where each ended
            all_games = [games]
            if args.world_size > 1:
                all_games = [None] * args.world_size if rank == 0 else None
                dist.gather_object(games, all_games, dst=0)
            if rank == 0:
                ended = sorted((s, r, ret, n) for r, rank_games in enumerate(all_games) for s, ret, n in rank_games)
                for at_step, from_rank, episodic_return, episodic_length in ended:
                    which = f", rank={from_rank}" if args.world_size > 1 else ""
                    print(f"global_step={at_step}, episodic_return={episodic_return}{which}")
                    writer.add_scalar("charts/episodic_return", episodic_return, at_step)
                    writer.add_scalar("charts/episodic_length", episodic_length, at_step)
            values_np = values.cpu().numpy()

            # GAE, each rank on its own rollout; dones[t] cuts the recursion at episode ends.
            advantages = np.zeros_like(rewards)
            lastgaelam = 0.0
            for t in reversed(range(args.num_steps)):
                nextvalues = next_value if t == args.num_steps - 1 else values_np[t + 1]
                nextnonterminal = 1.0 - dones[t]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values_np[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns_np = advantages + values_np

            # one flat batch of the rollout
            b_obs = obs.reshape((-1,) + obs_shape)
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape(-1)
            b_advantages = torch.as_tensor(advantages.reshape(-1), device=device)
            b_returns = torch.as_tensor(returns_np.reshape(-1), device=device)
            b_values = values.reshape(-1)

            # the update: epochs of shuffled minibatches: each rank takes a minibatch of its own batch, and
            # the step follows the gradient averaged over all ranks, as if from one minibatch of them all
            clipfracs = []
            for _epoch in range(args.update_epochs):
                b_inds = torch.randperm(args.local_batch_size, device=device)
                for start in range(0, args.local_batch_size, args.local_minibatch_size):
                    mb_inds = b_inds[start : start + args.local_minibatch_size]

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
                    if args.world_size > 1:
                        # all gradients in one flat buffer, one all-reduce, then the mean over the ranks
                        flat_grad = torch.cat([p.grad.reshape(-1) for p in params])
                        dist.all_reduce(flat_grad, op=dist.ReduceOp.SUM)
                        flat_grad /= args.world_size
                        for p, grad in zip(params, flat_grad.split([p.numel() for p in params])):
                            p.grad.copy_(grad.view_as(p))
                    # the same averaged gradients on every rank: the same clipping and Adam step keep the
                    # replicas identical
                    nn.utils.clip_grad_norm_(params, args.max_grad_norm, foreach=True)
                    optimizer.step()

                if args.target_kl is not None:
                    kl = approx_kl.clone()
                    if args.world_size > 1:  # every rank must stop at the same epoch, or the all-reduces hang
                        dist.all_reduce(kl, op=dist.ReduceOp.SUM)
                        kl /= args.world_size
                    if kl.item() > args.target_kl:
                        break

            if rank == 0:  # rank 0's own batch stands for the others in these statistics
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

        if args.world_size > 1:  # the replicas must have stayed identical
            digests = [None] * args.world_size
            dist.all_gather_object(digests, parameters_digest(agent))
            if rank == 0 and len(set(digests)) == 1:
                print(f"parameters identical on all {args.world_size} ranks (sha256 {digests[0]})")
            elif rank == 0:
                print(f"warning: the ranks' parameters differ: {digests}", file=sys.stderr)

        if args.save_model and rank == 0:
            exp.save_model(agent.state_dict())
            episodic_returns = evaluate_ppo(
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", Agent, device, args.capture_video
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="PPO")
        if args.world_size > 1:  # the others wait for rank 0's save and evaluation: all ranks leave the group together
            dist.barrier()
    if dist.is_initialized():
        dist.destroy_process_group()
