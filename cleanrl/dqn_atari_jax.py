"""DQN for Atari games from pixels in JAX (Flax + Optax), with a replay memory that keeps each frame once.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/dqn-atari/#dqn_atari_jaxpy (docs/rl-algorithms/dqn-atari.md)
"""

import os
import random
import signal
import sys
import time
from dataclasses import dataclass
from typing import NamedTuple

import flax
import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
import tyro
from flax.training.train_state import TrainState
from stable_baselines3.common.atari_wrappers import (
    ClipRewardEnv,
    EpisodicLifeEnv,
    FireResetEnv,
    MaxAndSkipEnv,
    NoopResetEnv,
)
from torch.utils.tensorboard import SummaryWriter

try:  # the Atari games come with the `atari` extra; without it, make_checked_env says how to install it
    import ale_py

    gym.register_envs(ale_py)
except ImportError:
    ale_py = None


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """experiment name, part of the run name (defaults to the file's name)"""
    seed: int = 1
    """random seed for Python, NumPy, the framework and the environments"""
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
    """training budget in environment steps"""
    learning_rate: float = 1e-4
    """optimiser step size"""
    num_envs: int = 1
    """environments stepped in parallel (this script runs exactly one, without a vector-env wrapper)"""
    buffer_size: int = 1000000
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
    tau: float = 1.0
    """soft-update rate τ of the target network (1.0 copies the weights)"""
    target_network_frequency: int = 1000
    """environment steps between target-network updates"""
    batch_size: int = 32
    """transitions per replay sample"""
    start_e: float = 1
    """ε of ε-greedy exploration at the start"""
    end_e: float = 0.01
    """ε of ε-greedy exploration once annealed"""
    exploration_fraction: float = 0.10
    """share of the budget over which ε falls linearly from start-e to end-e"""
    learning_starts: int = 80000
    """environment steps collected before the first update"""
    train_frequency: int = 4
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
    def thunk():
        if ale_py is None:
            raise gym.error.DependencyNotInstalled('the Atari games need ale-py: pip install -e ".[atari]"')
        if "ale_py" not in str(gym.spec(env_id).entry_point):  # enjoy and the evaluators call this directly
            raise gym.error.Error(f"{env_id} is not an Atari game of ale-py")
        # ALE/...-v5 ids skip 4 frames by themselves; here MaxAndSkipEnv does it (max over the last two frames)
        skip = {"frameskip": 1} if gym.spec(env_id).kwargs.get("frameskip", 1) != 1 else {}
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True, **skip)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, disable_env_checker=True, **skip)
        # Below the life and reward wrappers: `info["episode"]` appears only when the whole game ends,
        # with its raw score and its length in frames.
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = NoopResetEnv(env, noop_max=30)
        env = MaxAndSkipEnv(env, skip=4)
        env = EpisodicLifeEnv(env)  # a lost life ends the episode for learning, not the game
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = FireResetEnv(env)
        env = ClipRewardEnv(env)
        env = gym.wrappers.ResizeObservation(env, (84, 84))
        env = gym.wrappers.GrayscaleObservation(env)
        env = gym.wrappers.FrameStackObservation(env, 4)
        return env

    return thunk


def make_checked_env(env_id, capture_video, run_name):
    """The training env, or one clear error line for an env this script cannot learn."""
    spec = gym.registry.get(env_id)
    if spec is None or "ale_py" not in str(spec.entry_point):
        if spec is None and ale_py is None:
            fail(f'{env_id}: not a known env, and the Atari games need ale-py: pip install -e ".[atari]"')
        try:  # made once to tell what is wrong with it
            env = gym.make(env_id, disable_env_checker=True)
        except gym.error.DependencyNotInstalled as e:
            extra = next((extra for family, extra in ENV_EXTRAS.items() if family in str(spec.entry_point)), "all")
            fail(f'{env_id}: {str(e).split(",")[0]}; install it with pip install -e ".[{extra}]"')
        except (gym.error.Error, ModuleNotFoundError) as e:
            fail(f"cannot make env {env_id!r}: {e}")
        if not isinstance(env.action_space, gym.spaces.Discrete):
            fail(
                f"{env_id} has {env.action_space} actions; dqn_atari_jax.py needs Discrete ones (see sac_continuous_action.py)"
            )
        fail(f"{env_id} is not an Atari game of ale-py; dqn_atari_jax.py needs one (see dqn_jax.py for vector observations)")
    try:
        return make_env(env_id, 0, capture_video, run_name)()
    except (gym.error.Error, ModuleNotFoundError) as e:
        fail(f"cannot make env {env_id!r}: {e}")


# the networks
class QNetwork(nn.Module):
    """Nature-CNN on uint8 stacks of shape (batch, 4, 84, 84): one Q-value per action."""

    action_dim: int

    @nn.compact
    def __call__(self, x):
        x = jnp.transpose(x, (0, 2, 3, 1)) / 255.0  # uint8 frames become floats in [0, 1] only here; channels last
        x = nn.relu(nn.Conv(32, kernel_size=(8, 8), strides=(4, 4), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, kernel_size=(4, 4), strides=(2, 2), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, kernel_size=(3, 3), strides=(1, 1), padding="VALID")(x))
        x = x.reshape((x.shape[0], -1))  # 7 * 7 * 64 = 3136
        x = nn.relu(nn.Dense(512)(x))
        return nn.Dense(self.action_dim)(x)


class QTrainState(TrainState):
    target_params: flax.core.FrozenDict


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


class ReplayBatch(NamedTuple):
    frames: np.ndarray  # uint8 (batch, stack + 1, 84, 84): the observation is [:, :-1], the next one [:, 1:]
    actions: np.ndarray  # int32 (batch,)
    dones: np.ndarray  # float32 (batch,): 1 after a termination (a lost life), 0 after a time-limit cut
    rewards: np.ndarray  # float32 (batch,)


class FrameReplayBuffer:
    """A replay memory that stores each 84x84 frame once, ~7 KB per transition.

    Consecutive stacked observations share all but one frame, and a transition's next observation is
    the following one, so storing both stacks (as a generic buffer does) keeps every frame 8 times.
    Here slot `i` of a ring holds one frame (the newest of an observation) and the action, clipped
    reward and termination flag of the transition that starts from it; its next observation ends at
    slot `i + 1`. Stacks are rebuilt when sampling, and never reach across an episode start: slots
    flagged `first` hold the first frame of an episode, which the env's frame stack repeats to fill
    up the stack, and so does the rebuild. An episode's last frame takes a slot of its own, with no
    transition from it, so a stored next observation is always the real one, also after a time-limit
    cut (which then bootstraps from it).
    """

    ARRAYS = ("frames", "actions", "rewards", "terminated", "first", "valid")

    def __init__(self, capacity, frame_shape, stack):
        if capacity < 2 * stack:
            raise ValueError(f"a replay memory of {capacity} frames cannot hold stacks of {stack}")
        self.capacity, self.stack = capacity, stack
        self.frames = np.zeros((capacity, *frame_shape), dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.uint8)  # Atari games have at most 18 actions
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)
        self.first = np.zeros(capacity, dtype=bool)  # the frame starts an episode
        self.valid = np.zeros(capacity, dtype=bool)  # a transition starts here and all its frames are stored
        self.pos = self.size = 0  # next slot to write; slots filled
        self.last = None  # slot of the current observation's newest frame; None between episodes
        self._window = np.arange(-stack + 1, 2)  # a stack and the next frame, relative to the sampled slot
        self._ahead = np.arange(1, stack)  # the slots whose stacks reach back to a slot being written

    @property
    def nbytes(self):
        return sum(getattr(self, name).nbytes for name in self.ARRAYS)

    def _write(self, frame, first):
        slot = self.pos
        self.frames[slot], self.first[slot], self.valid[slot] = frame, first, False
        # The transitions of the next slots, now the oldest, would rebuild their stacks from this new frame.
        self.valid[(slot + self._ahead) % self.capacity] = False
        self.pos, self.size = (slot + 1) % self.capacity, min(self.size + 1, self.capacity)
        return slot

    def add(self, obs, next_obs, action, reward, terminated, episode_end):
        """Store a transition between stacked observations (only their newest frames are kept)."""
        if self.last is None:  # an episode starts: its first observation is one frame, repeated
            self.last = self._write(obs[-1], first=True)
        slot = self.last
        self.actions[slot], self.rewards[slot], self.terminated[slot] = action, reward, terminated
        self.last = self._write(next_obs[-1], first=False)
        self.valid[slot] = True
        if episode_end:
            self.last = None

    def sample(self, batch_size):
        slots = np.random.randint(0, self.size, size=batch_size)
        while not (ok := self.valid[slots]).all():  # the few slots with no transition are drawn again
            slots[~ok] = np.random.randint(0, self.size, size=int((~ok).sum()))
        return self.fetch(slots)

    def fetch(self, slots):
        """The transitions that start at these (valid) slots."""
        # Rebuild the window of stack + 1 frames backwards: before the first frame of an episode, repeat it.
        window = (slots[:, None] + self._window) % self.capacity
        for k in range(self.stack - 2, -1, -1):
            window[:, k] = np.where(self.first[window[:, k + 1]], window[:, k + 1], window[:, k])
        return ReplayBatch(  # one copy of the frames serves both stacks, and crosses to the device once
            self.frames[window],
            self.actions[slots].astype(np.int32),
            self.terminated[slots].astype(np.float32),
            self.rewards[slots],
        )


if __name__ == "__main__":
    args = tyro.cli(Args)
    for name in ("total_timesteps", "batch_size", "train_frequency", "target_network_frequency"):
        if getattr(args, name) <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.buffer_size < 8:
        fail(f"--buffer-size {args.buffer_size}: the replay memory needs room for 8 frames at least")
    if args.num_envs != 1:
        fail(f"--num-envs {args.num_envs}: dqn_atari_jax.py runs a single environment")
    if args.learning_starts < 0 or not 0 < args.exploration_fraction <= 1 or not 0 < args.tau <= 1:
        fail("need --learning-starts >= 0, 0 < --exploration-fraction <= 1 and 0 < --tau <= 1")
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if args.upload_model and not args.save_model:
        fail("--upload-model uploads the saved model: add --save-model")
    if args.save_model:
        try:  # checked now, not after training: the evaluator and uploader come with this project's package
            from cleanrl_utils.evals.dqn_atari_jax_eval import evaluate

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
    key = jax.random.PRNGKey(args.seed)
    key, q_key = jax.random.split(key, 2)

    # env setup (before any file is written, so bad input leaves nothing behind)
    # One env stepped directly: a one-env vector wrapper would only add cost to each step.
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
        )
    writer = SummaryWriter(f"runs/{run_name}")
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n" + "\n".join(f"|{key}|{value}|" for key, value in vars(args).items()),
    )
    writer.add_text("tags", os.environ.get("WANDB_TAGS", ""))  # comma-separated; read back by cleanrl_utils.rlops

    obs, _ = env.reset(seed=args.seed)
    q_network = QNetwork(action_dim=env.action_space.n)
    q_params = q_network.init(q_key, obs[None])
    q_state = QTrainState.create(
        apply_fn=q_network.apply,
        params=q_params,
        target_params=q_params,
        tx=optax.adam(learning_rate=args.learning_rate),
    )

    @jax.jit
    def greedy_action(params, obs):
        return jnp.argmax(q_network.apply(params, obs[None])[0])

    @jax.jit
    def update(q_state, frames, actions, rewards, dones):
        """One gradient step on the TD error of a batch: the whole update is one compiled call."""
        observations, next_observations = frames[:, :-1], frames[:, 1:]
        target_max = q_network.apply(q_state.target_params, next_observations).max(axis=-1)
        td_target = rewards + args.gamma * target_max * (1 - dones)

        def mse_loss(params):
            old_val = q_network.apply(params, observations)[jnp.arange(len(actions)), actions]
            return ((td_target - old_val) ** 2).mean(), old_val

        (loss, old_val), grads = jax.value_and_grad(mse_loss, has_aux=True)(q_state.params)
        return q_state.apply_gradients(grads=grads), loss, old_val.mean()

    @jax.jit
    def update_target(q_state):
        return q_state.replace(target_params=optax.incremental_update(q_state.params, q_state.target_params, args.tau))

    # 1M transitions take ~7 GB here, where two stored stacks per transition would take ~56 GB.
    rb = FrameReplayBuffer(args.buffer_size, env.observation_space.shape[1:], env.observation_space.shape[0])
    start_time = time.time()

    # Ctrl-C and SIGTERM (a scheduler, the benchmark runner) end the run through `finally`, logs saved.
    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        for global_step in range(args.total_timesteps):
            if stop_signals:
                raise KeyboardInterrupt
            epsilon = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step)
            if random.random() < epsilon:
                action = env.action_space.sample()
            else:
                action = int(greedy_action(q_state.params, obs))

            next_obs, reward, terminated, truncated, info = env.step(action)

            # next_obs is the true next state even when the episode ends (we reset only below), and
            # only a termination is stored as done: a time-limit cut still bootstraps from next_obs.
            rb.add(obs, next_obs, action, reward, terminated, terminated or truncated)
            if "episode" in info:  # a whole game ended, not just a life
                episodic_return = float(info["episode"]["r"])
                print(f"global_step={global_step}, episodic_return={episodic_return}")
                writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                writer.add_scalar("charts/episodic_length", int(info["episode"]["l"]), global_step)
            obs = env.reset()[0] if terminated or truncated else next_obs  # after a lost life: the next one

            # learn
            if global_step > args.learning_starts:
                if global_step % args.train_frequency == 0:
                    q_state, loss, q_values = update(q_state, *rb.sample(args.batch_size))

                    if global_step % 100 == 0:  # reading the loss waits for the update: only when logged
                        writer.add_scalar("losses/td_loss", float(loss), global_step)
                        writer.add_scalar("losses/q_values", float(q_values), global_step)
                        sps = int(global_step / (time.time() - start_time))
                        print("SPS:", sps)
                        writer.add_scalar("charts/SPS", sps, global_step)

                # the target network catches up with the online one
                if global_step % args.target_network_frequency == 0:
                    q_state = update_target(q_state)

        if args.save_model:
            model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
            with open(model_path, "wb") as f:
                f.write(flax.serialization.to_bytes(q_state.params))
            print(f"model saved to {model_path}")
            episodic_returns = evaluate(
                model_path,
                make_env,
                args.env_id,
                eval_episodes=10,
                run_name=f"{run_name}-eval",
                Model=QNetwork,
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
