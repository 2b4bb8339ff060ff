"""DQN for discrete actions and vector observations (CartPole, Acrobot, MountainCar...).

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/dqn/#dqnpy (docs/rl-algorithms/dqn.md)
"""

import os
import random
import signal
import sys
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import tyro
from stable_baselines3.common.buffers import ReplayBuffer
from torch.utils.tensorboard import SummaryWriter


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
    """continue the run of this checkpoint file, or of this run folder's newest checkpoint, with its arguments"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "CartPole-v1"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 500000
    """training budget in environment steps"""
    learning_rate: float = 2.5e-4
    """optimiser step size"""
    num_envs: int = 1
    """environments stepped in parallel (this script runs exactly one, without a vector-env wrapper)"""
    buffer_size: int = 10000
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
    tau: float = 1.0
    """soft-update rate τ of the target network (1.0 copies the weights)"""
    target_network_frequency: int = 500
    """environment steps between target-network updates"""
    batch_size: int = 128
    """transitions per replay sample"""
    start_e: float = 1
    """ε of ε-greedy exploration at the start"""
    end_e: float = 0.05
    """ε of ε-greedy exploration once annealed"""
    exploration_fraction: float = 0.5
    """share of the budget over which ε falls linearly from start-e to end-e"""
    learning_starts: int = 10000
    """environment steps collected before the first update"""
    train_frequency: int = 10
    """environment steps between gradient updates"""


# the extra of pyproject.toml that brings what an env family needs, keyed by its entry-point module
ENV_EXTRAS = {"box2d": "box2d", "mujoco": "mujoco", "ale_py": "atari"}


def fail(message: str):
    """Bad input: one line on stderr and exit code 2, no traceback."""
    message = " ".join(message.split())  # library messages can span lines
    print(f"{os.path.basename(__file__)}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


stop_signals = []  # Ctrl-C / SIGTERM received so far


def request_stop(signum, frame):
    """Note the signal: the loop stops at its next step, through `finally` (a second signal stops at once).

    Raising wherever the signal lands could hit TensorBoard's event writer mid-call and deadlock its
    close, losing the logs; the check at the top of each step cannot.
    """
    if stop_signals:
        raise KeyboardInterrupt
    stop_signals.append(signum)


def make_env(env_id, idx, capture_video, run_name):
    # Gymnasium's env checker only inspects the first reset and step; afterwards it is one more
    # wrapper call per step, so it is left out (the spaces are checked below, with clear errors).
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, disable_env_checker=True)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        return env

    return thunk


def make_checked_env(env_id, capture_video, run_name):
    """The training env, or one clear error line for an env this script cannot learn."""
    try:
        env = make_env(env_id, 0, capture_video, run_name)()
    except gym.error.DependencyNotInstalled as e:
        entry_point = str(getattr(gym.registry.get(env_id.split(":")[-1]), "entry_point", ""))
        extra = next((extra for family, extra in ENV_EXTRAS.items() if family in entry_point), "all")
        reason = str(e).split(",")[0]  # Gymnasium's own advice after the comma names its extras, not ours
        fail(f'{env_id}: {reason}; install it with pip install -e ".[{extra}]"')
    except (gym.error.Error, ModuleNotFoundError) as e:
        fail(f"cannot make env {env_id!r}: {e}")
    if not isinstance(env.action_space, gym.spaces.Discrete):
        fail(f"{env_id} has {env.action_space} actions; dqn.py needs Discrete ones (see sac_continuous_action.py)")
    if not isinstance(env.observation_space, gym.spaces.Box) or len(env.observation_space.shape) != 1:
        fail(f"{env_id} observations are {env.observation_space}; dqn.py needs a flat Box (see dqn_atari.py)")
    return env


# the networks
class QNetwork(nn.Module):
    def __init__(self, env):
        super().__init__()
        self.network = nn.Sequential(
            nn.Linear(np.array(env.observation_space.shape).prod(), 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, env.action_space.n),
        )

    def forward(self, x):
        return self.network(x)


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


if __name__ == "__main__":
    args = tyro.cli(Args)
    if args.checkpoint_frequency < 0:
        fail(f"--checkpoint-frequency must be 0 (off) or positive, got {args.checkpoint_frequency}")
    checkpoint = None
    if args.checkpoint_frequency or args.resume:
        try:  # a resumed run goes on with the arguments it was started with
            from cleanrl_utils import checkpoint as ckpt

            checkpoint = ckpt.load(args.resume) if args.resume else None
            args = ckpt.restored_args(args, checkpoint) if checkpoint else args
        except ImportError:
            fail("--checkpoint-frequency and --resume use cleanrl_utils: install this project first (pip install -e .)")
        except ckpt.CheckpointError as e:
            fail(str(e))
    for name in ("total_timesteps", "buffer_size", "batch_size", "train_frequency", "target_network_frequency"):
        if getattr(args, name) <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.num_envs != 1:
        fail(f"--num-envs {args.num_envs}: dqn.py runs a single environment")
    if args.learning_starts < 0 or not 0 < args.exploration_fraction <= 1 or not 0 < args.tau <= 1:
        fail("need --learning-starts >= 0, 0 < --exploration-fraction <= 1 and 0 < --tau <= 1")
    run_name = checkpoint["run_name"] if checkpoint else f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if args.upload_model and not args.save_model:
        fail("--upload-model uploads the saved model: add --save-model")
    if args.save_model:
        try:  # checked now, not after training: the evaluator and uploader come with this project's package
            from cleanrl_utils.evals.dqn_eval import evaluate

            if args.upload_model:
                from cleanrl_utils.huggingface import UploadError, push_to_hub, require_token

                require_token()
        except ImportError:
            fail("--save-model evaluates the model with cleanrl_utils: install this project first (pip install -e .)")
        except UploadError as e:
            fail(str(e))

    # seeds
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)  # for a 120-84 MLP, waking extra threads costs more than the math

    # env setup (before any file is written, so bad input leaves nothing behind)
    # One env stepped directly: a one-env vector wrapper would double the cost of each step.
    env = make_checked_env(args.env_id, args.capture_video, run_name)
    env.action_space.seed(args.seed)

    if args.track:
        import wandb

        wandb.init(
            project=args.wandb_project_name,
            entity=args.wandb_entity,
            sync_tensorboard=True,
            config=vars(args),
            name=run_name,
            save_code=True,
            id=checkpoint["wandb_id"] if checkpoint else None,  # a resumed run goes on in the same W&B run
            resume="allow" if checkpoint else None,
        )
    # A resumed run appends to the same folder; TensorBoard drops what the old run logged after the checkpoint.
    writer = SummaryWriter(f"runs/{run_name}", purge_step=checkpoint["global_step"] + 1 if checkpoint else None)
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n" + "\n".join(f"|{key}|{value}|" for key, value in vars(args).items()),
    )
    writer.add_text("tags", os.environ.get("WANDB_TAGS", ""))  # comma-separated; read back by cleanrl_utils.rlops

    q_network = QNetwork(env).to(device)
    # fused: one kernel updates every parameter, instead of a loop of small ops per tensor
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate, fused=True)
    target_network = QNetwork(env).to(device)
    target_network.load_state_dict(q_network.state_dict())

    # `dones` in the buffer are terminations only: a time-limit cut still bootstraps from the next state.
    rb = ReplayBuffer(
        args.buffer_size,
        env.observation_space,
        env.action_space,
        device,
        handle_timeout_termination=False,
    )
    start_time = time.time()

    first_step = 0
    if checkpoint:  # pick up exactly where the checkpoint was written
        q_network.load_state_dict(checkpoint["q_network"])
        target_network.load_state_dict(checkpoint["target_network"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        rb = checkpoint["replay_buffer"]
        rb.device = device
        ckpt.restore_env(env, checkpoint["env"])
        ckpt.set_rng_state(checkpoint["rng"])
        obs, first_step = checkpoint["obs"], checkpoint["global_step"] + 1
        start_time -= checkpoint["elapsed_time"]
    else:
        obs, _ = env.reset(seed=args.seed)
    # Ctrl-C and SIGTERM (a scheduler, the benchmark runner) end the run through `finally`, logs saved.
    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        for global_step in range(first_step, args.total_timesteps):
            if stop_signals:
                raise KeyboardInterrupt
            epsilon = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step)
            if random.random() < epsilon:
                action = env.action_space.sample()
            else:
                with torch.inference_mode():
                    action = q_network(torch.as_tensor(obs, dtype=torch.float32, device=device)).argmax().item()

            next_obs, reward, terminated, truncated, info = env.step(action)

            # next_obs is the true next state even when the episode ends (we reset only below), and
            # only a termination is stored as done: a time-limit cut still bootstraps from next_obs.
            rb.add(obs, next_obs, np.array(action), reward, terminated, [info])
            if terminated or truncated:
                episodic_return = float(info["episode"]["r"])
                print(f"global_step={global_step}, episodic_return={episodic_return}")
                writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                writer.add_scalar("charts/episodic_length", int(info["episode"]["l"]), global_step)
                obs, _ = env.reset()
            else:
                obs = next_obs

            # learn
            if global_step > args.learning_starts:
                if global_step % args.train_frequency == 0:
                    data = rb.sample(args.batch_size)
                    with torch.no_grad():
                        target_max, _ = target_network(data.next_observations).max(dim=1)
                        td_target = data.rewards.flatten() + args.gamma * target_max * (1 - data.dones.flatten())
                    old_val = q_network(data.observations).gather(1, data.actions).squeeze(1)
                    loss = F.mse_loss(td_target, old_val)

                    if global_step % 100 == 0:
                        writer.add_scalar("losses/td_loss", loss.item(), global_step)
                        writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)
                        sps = int(global_step / (time.time() - start_time))
                        print("SPS:", sps)
                        writer.add_scalar("charts/SPS", sps, global_step)

                    # optimize the model
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

                # the target network catches up with the online one
                if global_step % args.target_network_frequency == 0:
                    with torch.no_grad():
                        for target_param, q_param in zip(target_network.parameters(), q_network.parameters()):
                            target_param.lerp_(q_param, args.tau)

            if args.checkpoint_frequency and (global_step + 1) % args.checkpoint_frequency == 0:
                writer.flush()  # the logs on disk reach the checkpoint, whatever happens next
                ckpt.save(f"runs/{run_name}", global_step + 1, {
                    "args": vars(args), "run_name": run_name, "wandb_id": wandb.run.id if args.track else None,
                    "global_step": global_step, "elapsed_time": time.time() - start_time, "rng": ckpt.rng_state(),
                    "q_network": q_network.state_dict(), "target_network": target_network.state_dict(),
                    "optimizer": optimizer.state_dict(), "replay_buffer": rb, "env": ckpt.env_state(env), "obs": obs,
                })  # fmt: skip

        if args.save_model:
            model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
            torch.save(q_network.state_dict(), model_path)
            print(f"model saved to {model_path}")
            episodic_returns = evaluate(
                model_path,
                make_env,
                args.env_id,
                eval_episodes=10,
                run_name=f"{run_name}-eval",
                Model=QNetwork,
                device=device,
                epsilon=args.end_e,
                capture_video=args.capture_video,
            )
            for idx, episodic_return in enumerate(episodic_returns):
                writer.add_scalar("eval/episodic_return", episodic_return, idx)
            if args.upload_model:
                writer.flush()  # the uploaded event file then holds the evaluation too
                try:
                    push_to_hub(args, episodic_returns, "DQN", f"runs/{run_name}", f"videos/{run_name}-eval", __file__)
                except UploadError as e:
                    fail(str(e))
        if stop_signals:  # one came during the evaluation
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        print(f"{os.path.basename(__file__)}: interrupted; what was logged is in runs/{run_name}", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        # Runs on a crash or an interruption too: the event file is flushed and videos are closed.
        env.close()
        writer.close()
        if args.track:
            for video in sorted(os.listdir(f"videos/{run_name}")) if args.capture_video else []:
                wandb.log({"videos": wandb.Video(f"videos/{run_name}/{video}", format="mp4")})
            wandb.finish()
