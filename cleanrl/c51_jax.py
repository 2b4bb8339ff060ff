"""C51 (categorical distributional DQN) for discrete actions and vector observations, in JAX (Flax + Optax).

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/c51/#c51_jaxpy (docs/rl-algorithms/c51.md)
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
    n_atoms: int = 101
    """atoms of the return distribution's support"""
    v_min: float = -100
    """smallest return the distribution's support covers (v_min)"""
    v_max: float = 100
    """largest return the distribution's support covers (v_max)"""
    buffer_size: int = 10000
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
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

    from cleanrl_utils.runtime.evals.jax import evaluate_c51
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
    """Outputs, for every action, a probability mass over `n_atoms` fixed return values (the support)."""

    action_dim: int
    n_atoms: int = 101

    @nn.compact
    def __call__(self, x, log: bool = False):
        """Return distributions, shape (..., actions, atoms); their logarithms if `log` (what the loss needs)."""
        x = nn.relu(nn.Dense(120)(x))
        x = nn.relu(nn.Dense(84)(x))
        logits = nn.Dense(self.action_dim * self.n_atoms)(x)
        log_pmfs = nn.log_softmax(logits.reshape(*x.shape[:-1], self.action_dim, self.n_atoms), axis=-1)
        return log_pmfs if log else jnp.exp(log_pmfs)


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


def project(next_atoms, next_pmfs, atoms):
    """Distribute each probability of `next_pmfs`, sitting at `next_atoms`, onto the two nearest atoms of the support.

    This is the categorical projection of the C51 paper: the Bellman-updated distribution lives on
    shifted and shrunk atoms (r + gamma * z), and the loss needs it on the network's fixed support.
    Shapes: `next_atoms` and `next_pmfs` (batch, atoms), `atoms` (atoms,).
    """
    v_min, v_max, n_atoms = atoms[0], atoms[-1], atoms.shape[0]
    delta_z = (v_max - v_min) / (n_atoms - 1)
    b = (jnp.clip(next_atoms, v_min, v_max) - v_min) / delta_z  # fractional index into the support
    lower, upper = jnp.clip(jnp.floor(b), 0, n_atoms - 1), jnp.clip(jnp.ceil(b), 0, n_atoms - 1)
    # When b falls exactly on an atom, lower == upper and the whole mass goes to it.
    mass_lower = (upper + (lower == upper) - b) * next_pmfs
    mass_upper = (b - lower) * next_pmfs
    rows = jnp.arange(next_pmfs.shape[0])[:, None]
    target_pmfs = jnp.zeros_like(next_pmfs).at[rows, lower.astype(jnp.int32)].add(mass_lower)
    return target_pmfs.at[rows, upper.astype(jnp.int32)].add(mass_upper)


@jax.jit
def update(q_state, atoms, obs, actions, next_obs, rewards, dones, gamma):
    """One gradient step on the cross-entropy of a batch, compiled as one call; also returns the loss and mean Q(s, a)."""
    # the target network's distribution for its greedy next action, moved by the Bellman update;
    # `dones` are terminations only: after a time-limit cut the target still bootstraps from next_obs
    next_pmfs = q_state.apply_fn(q_state.target_params, next_obs)
    next_actions = (next_pmfs * atoms).sum(-1).argmax(-1)
    next_pmfs = jnp.take_along_axis(next_pmfs, next_actions[:, None, None], axis=1)[:, 0]
    next_atoms = rewards[:, None] + gamma * atoms * (1.0 - dones[:, None])
    target_pmfs = project(next_atoms, next_pmfs, atoms)

    def cross_entropy(params):
        # on log-softmax outputs: clipped probabilities would zero the gradient of a saturated distribution
        old_log_pmfs = q_state.apply_fn(params, obs, log=True)
        old_log_pmfs = jnp.take_along_axis(old_log_pmfs, actions[:, None, None], axis=1)[:, 0]
        loss = (-(target_pmfs * old_log_pmfs).sum(-1)).mean()
        return loss, (jnp.exp(old_log_pmfs) * atoms).sum(-1).mean()

    (loss, q_values), grads = jax.value_and_grad(cross_entropy, has_aux=True)(q_state.params)
    return q_state.apply_gradients(grads=grads), loss, q_values


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("batch_size")
    exp.require(args.num_envs == 1, f"--num-envs {args.num_envs}: c51_jax.py runs a single environment")
    exp.require(args.n_atoms >= 2 and args.v_min < args.v_max, "need --n-atoms >= 2 and --v-min < --v-max")
    run_name = exp.run_name

    exp.seed_global_rngs()
    # small networks: XLA computes on the calling thread, with no hand-off to a worker
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    key = jax.random.PRNGKey(args.seed)

    # env setup, before any file is written
    env = exp.make_envs(make_env(args.env_id, 0, args.capture_video, run_name), args.env_id)
    exp.require_action_space(env.action_space, gym.spaces.Discrete, see="sac_continuous_action.py")
    exp.require_flat_observations(env.observation_space, see="c51_atari_jax.py")
    problem = replay_memory_problem(args, np.zeros(env.observation_space.shape, env.observation_space.dtype).nbytes)
    exp.require(not problem, problem)
    env.action_space.seed(args.seed)
    writer = exp.start_logging()

    obs, _ = env.reset(seed=args.seed)
    q_network = QNetwork(action_dim=env.action_space.n, n_atoms=args.n_atoms)
    q_params = jax.jit(q_network.init)(key, obs)
    # the paper's Adam epsilon, 0.01 / batch size
    q_state = QTrainState.create(
        apply_fn=q_network.apply,
        params=q_params,
        target_params=q_params,
        tx=optax.adam(learning_rate=args.learning_rate, eps=0.01 / args.batch_size),
    )
    atoms = jnp.linspace(args.v_min, args.v_max, num=args.n_atoms)
    greedy_action = jax.jit(lambda params, obs: (q_network.apply(params, obs) * atoms).sum(-1).argmax())
    rb = ReplayBuffer(args.buffer_size, env.observation_space.shape, args.seed)

    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        # compile now, on inputs of the training shapes: the SPS counts training only
        compile_start = time.time()
        warmup_batch = [
            np.zeros((args.batch_size, *a.shape[1:]), a.dtype) for a in (rb.obs, rb.actions, rb.next_obs, rb.rewards, rb.dones)
        ]
        jax.block_until_ready((greedy_action(q_state.params, obs), update(q_state, atoms, *warmup_batch, args.gamma)))
        print(f"compile time: {time.time() - compile_start:.2f} s (the update and the greedy action)")
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
                    q_state, loss, q_values = update(q_state, atoms, *rb.sample(args.batch_size), args.gamma)

                    if global_step % 100 == 0:
                        writer.add_scalar("losses/loss", float(loss), global_step)
                        writer.add_scalar("losses/q_values", float(q_values), global_step)
                        sps = int(global_step / exp.elapsed)
                        print("SPS:", sps)
                        writer.add_scalar("charts/SPS", sps, global_step)

                # the target network catches up with the online one
                if global_step % args.target_network_frequency == 0:
                    q_state = q_state.replace(target_params=q_state.params)

        if args.save_model:
            # the support (n_atoms, v_min, v_max) rebuilds the network: the args go along
            exp.save_model(flax.serialization.to_bytes({"model_weights": q_state.params, "args": vars(args)}))
            episodic_returns = evaluate_c51(
                exp.model_path,
                make_env,
                args.env_id,
                eval_episodes=10,
                run_name=f"{run_name}-eval",
                Model=QNetwork,
                epsilon=args.end_e,
                capture_video=args.capture_video,
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="C51")
