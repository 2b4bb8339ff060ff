"""DQN for discrete actions and vector observations (CartPole, Acrobot, MountainCar...), in JAX (Flax + Optax).

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/dqn/#dqn_jaxpy (docs/rl-algorithms/dqn.md)
"""

import os
import random
import sys
import time
from dataclasses import dataclass

from cleanrl_utils.runtime.command_line import check_command_line, replay_memory_problem


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


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import gymnasium as gym
import numpy as np

from cleanrl_utils.runtime.experiment import Experiment

try:
    import flax
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax
    from flax.training.train_state import TrainState

    from cleanrl_utils.runtime.evals.jax import evaluate_dqn
except ImportError as e:
    print(
        f'{os.path.basename(__file__)}: error: {e.name} is not installed; install it with pip install -e ".[jax]"',
        file=sys.stderr,
    )
    raise SystemExit(2) from None


def make_env(env_id, idx, capture_video, run_name):
    # no env checker wrapper: the spaces are checked below, with clear errors
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, disable_env_checker=True)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        return env

    return thunk


class QNetwork(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(120)(x))
        x = nn.relu(nn.Dense(84)(x))
        return nn.Dense(self.action_dim)(x)


class QTrainState(TrainState):
    target_params: flax.core.FrozenDict


class ReplayBuffer:
    """Transitions in preallocated NumPy arrays, overwritten oldest first once full.

    `dones` holds the termination flag only: a transition cut by a time limit still bootstraps.
    """

    def __init__(self, size, obs_shape, seed):
        self.obs = np.zeros((size, *obs_shape), dtype=np.float32)
        self.next_obs = np.zeros_like(self.obs)
        self.actions = np.zeros(size, dtype=np.int32)
        self.rewards = np.zeros(size, dtype=np.float32)
        self.dones = np.zeros(size, dtype=np.float32)
        self.size, self.pos, self.full = size, 0, False
        self.rng = np.random.default_rng(seed)

    def add(self, obs, next_obs, action, reward, terminated):
        i = self.pos
        self.obs[i], self.next_obs[i] = obs, next_obs
        self.actions[i], self.rewards[i], self.dones[i] = action, reward, terminated
        self.pos = (i + 1) % self.size
        self.full = self.full or self.pos == 0

    def sample(self, batch_size):
        """(obs, actions, next_obs, rewards, dones) of `batch_size` transitions drawn uniformly, with replacement."""
        idx = self.rng.integers(0, self.size if self.full else self.pos, batch_size)
        return self.obs[idx], self.actions[idx], self.next_obs[idx], self.rewards[idx], self.dones[idx]


@jax.jit
def update(q_state, obs, actions, next_obs, rewards, dones, gamma):
    """One gradient step on the squared TD error of a batch, compiled as one call; also returns the loss and mean Q(s, a)."""
    # `dones` are terminations only: after a time-limit cut the target still bootstraps from next_obs.
    target_max = q_state.apply_fn(q_state.target_params, next_obs).max(axis=-1)
    td_target = rewards + gamma * target_max * (1.0 - dones)

    def mse_loss(params):
        old_val = jnp.take_along_axis(q_state.apply_fn(params, obs), actions[:, None], axis=-1)[:, 0]
        return ((td_target - old_val) ** 2).mean(), old_val.mean()

    (loss, q_values), grads = jax.value_and_grad(mse_loss, has_aux=True)(q_state.params)
    return q_state.apply_gradients(grads=grads), loss, q_values


@jax.jit
def update_target(q_state, tau):
    """Blend the target network towards the online one (tau = 1 copies it)."""
    return q_state.replace(target_params=optax.incremental_update(q_state.params, q_state.target_params, tau))


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("batch_size")
    exp.require(args.num_envs == 1, f"--num-envs {args.num_envs}: dqn_jax.py runs a single environment")
    run_name = exp.run_name

    exp.seed_global_rngs()
    # small networks: XLA computes on the calling thread, with no hand-off to a worker
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    key = jax.random.PRNGKey(args.seed)

    # env setup, before any file is written
    env = exp.make_envs(make_env(args.env_id, 0, args.capture_video, run_name), args.env_id)
    exp.require_action_space(env.action_space, gym.spaces.Discrete, see="sac_continuous_action.py")
    exp.require_flat_observations(env.observation_space, see="dqn_atari_jax.py")
    problem = replay_memory_problem(args, np.zeros(env.observation_space.shape, env.observation_space.dtype).nbytes)
    exp.require(not problem, problem)
    env.action_space.seed(args.seed)
    writer = exp.start_logging()

    obs, _ = env.reset(seed=args.seed)
    q_network = QNetwork(action_dim=env.action_space.n)
    q_params = jax.jit(q_network.init)(key, obs)
    q_state = QTrainState.create(
        apply_fn=q_network.apply, params=q_params, target_params=q_params, tx=optax.adam(learning_rate=args.learning_rate)
    )
    greedy_action = jax.jit(lambda params, obs: q_network.apply(params, obs).argmax())
    rb = ReplayBuffer(args.buffer_size, env.observation_space.shape, args.seed)

    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        # compile now, on inputs of the training shapes: the SPS counts training only
        compile_start = time.time()
        warmup_batch = [
            np.zeros((args.batch_size, *a.shape[1:]), a.dtype) for a in (rb.obs, rb.actions, rb.next_obs, rb.rewards, rb.dones)
        ]
        jax.block_until_ready((greedy_action(q_state.params, obs), update(q_state, *warmup_batch, args.gamma)))
        jax.block_until_ready(update_target(q_state, args.tau))
        print(f"compile time: {time.time() - compile_start:.2f} s (the update, target update and greedy action)")
        exp.restart_sps_clock()
        for global_step in range(args.total_timesteps):
            exp.raise_if_stopped()
            epsilon = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step)
            if random.random() < epsilon:
                action = env.action_space.sample()
            else:
                action = int(greedy_action(q_state.params, obs))

            next_obs, reward, terminated, truncated, info = env.step(action)

            # next_obs is the true next state even when the episode ends (we reset only below), and
            # only a termination is stored as done: a time-limit cut still bootstraps from next_obs.
            rb.add(obs, next_obs, action, reward, terminated)
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
                    q_state, loss, q_values = update(q_state, *rb.sample(args.batch_size), args.gamma)

                    if global_step % 100 == 0:
                        writer.add_scalar("losses/td_loss", float(loss), global_step)
                        writer.add_scalar("losses/q_values", float(q_values), global_step)
                        sps = int(global_step / exp.elapsed)
                        print("SPS:", sps)
                        writer.add_scalar("charts/SPS", sps, global_step)

                # the target network catches up with the online one
                if global_step % args.target_network_frequency == 0:
                    q_state = update_target(q_state, args.tau)

        if args.save_model:
            exp.save_model(flax.serialization.to_bytes(q_state.params))
            episodic_returns = evaluate_dqn(
                exp.model_path,
                make_env,
                args.env_id,
                eval_episodes=10,
                run_name=f"{run_name}-eval",
                Model=QNetwork,
                epsilon=args.end_e,
                capture_video=args.capture_video,
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="DQN")
