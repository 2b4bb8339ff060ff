"""C51 (categorical distributional DQN) for Atari games from pixels in JAX (Flax + Optax), each frame stored once.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/c51-atari/#c51_atari_jaxpy (docs/rl-algorithms/c51-atari.md)
"""

import os
import random
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
    env_id: str = "BreakoutNoFrameskip-v4"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 10000000
    """training budget in environment steps"""
    learning_rate: float = 2.5e-4
    """optimiser step size"""
    num_envs: int = 1
    """environments stepped in parallel (this script runs exactly one, without a vector-env wrapper)"""
    n_atoms: int = 51
    """atoms of the return distribution's support"""
    v_min: float = -10
    """smallest return the distribution's support covers (v_min)"""
    v_max: float = 10
    """largest return the distribution's support covers (v_max)"""
    buffer_size: int = 1000000
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
    target_network_frequency: int = 10000
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


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import flax
import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState
from stable_baselines3.common.atari_wrappers import ClipRewardEnv, EpisodicLifeEnv, FireResetEnv, MaxAndSkipEnv, NoopResetEnv

from cleanrl_utils.runtime.evals.jax import evaluate_c51_atari
from cleanrl_utils.runtime.experiment import Experiment, check_atari_game
from cleanrl_utils.runtime.frame_replay import FrameReplayBuffer


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


class QNetwork(nn.Module):
    """Nature-CNN that outputs, for every action, a probability mass over `n_atoms` fixed return values (the support)."""

    action_dim: int
    n_atoms: int = 51
    v_min: float = -10
    v_max: float = 10

    @property
    def atoms(self):
        return jnp.linspace(self.v_min, self.v_max, self.n_atoms)

    def __call__(self, x):
        """Q-values: the mean of each action's return distribution."""
        return (self.pmfs(x) * self.atoms).sum(-1)

    @nn.compact
    def pmfs(self, x, log: bool = False):
        """Distributions of shape (batch, actions, atoms), from uint8 stacks of shape (batch, 4, 84, 84).

        With `log`, their logarithms, computed from the logits (what the loss needs).
        """
        x = jnp.transpose(x, (0, 2, 3, 1)) / 255.0  # uint8 frames become floats in [0, 1] only here; channels last
        x = nn.relu(nn.Conv(32, kernel_size=(8, 8), strides=(4, 4), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, kernel_size=(4, 4), strides=(2, 2), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, kernel_size=(3, 3), strides=(1, 1), padding="VALID")(x))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(512)(x))
        logits = nn.Dense(self.action_dim * self.n_atoms)(x).reshape((x.shape[0], self.action_dim, self.n_atoms))
        log_pmfs = nn.log_softmax(logits, axis=-1)
        return log_pmfs if log else jnp.exp(log_pmfs)


class QTrainState(TrainState):
    target_params: flax.core.FrozenDict


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def project(next_atoms, next_pmfs, atoms):
    """Distribute each probability of `next_pmfs`, sitting at `next_atoms`, onto the two nearest atoms of the support.

    This is the categorical projection of the C51 paper: the Bellman-updated distribution lives on
    shifted and shrunk atoms (r + gamma * z), and the loss needs it on the network's fixed support.
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


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("batch_size")
    exp.require(args.num_envs == 1, f"--num-envs {args.num_envs}: c51_atari_jax.py runs a single environment")
    exp.require(args.n_atoms >= 2 and args.v_min < args.v_max, "need --n-atoms >= 2 and --v-min < --v-max")
    problem = replay_memory_problem(args, 84 * 84, copies=1)  # one 84x84 frame per transition
    exp.require(not problem, problem)
    run_name = exp.run_name

    exp.seed_global_rngs()
    key = jax.random.PRNGKey(args.seed)
    key, q_key = jax.random.split(key, 2)

    # env setup, before any file is written
    exp.require_atari_game(see="c51_jax.py", see_continuous="sac_continuous_action.py")
    env = exp.make_envs(lambda: make_env(args.env_id, 0, args.capture_video, run_name)(), args.env_id)
    env.action_space.seed(args.seed)
    writer = exp.start_logging()

    obs, _ = env.reset(seed=args.seed)
    q_network = QNetwork(action_dim=env.action_space.n, n_atoms=args.n_atoms, v_min=args.v_min, v_max=args.v_max)
    q_params = jax.jit(q_network.init)(q_key, obs[None])
    q_state = QTrainState.create(
        apply_fn=q_network.apply,
        params=q_params,
        target_params=q_params,
        tx=optax.adam(learning_rate=args.learning_rate, eps=0.01 / args.batch_size),  # the paper's eps
    )
    atoms = q_network.atoms

    @jax.jit
    def greedy_action(params, obs):
        return jnp.argmax(q_network.apply(params, obs[None])[0])

    @jax.jit
    def update(q_state, batch):
        """One gradient step on the distributional loss of a batch: the whole update is one compiled call."""
        batch_index = jnp.arange(len(batch.actions))
        # the target network's distribution for its greedy next action, moved by the Bellman update
        next_pmfs = q_network.apply(q_state.target_params, batch.next_observations, method="pmfs")
        next_actions = (next_pmfs * atoms).sum(-1).argmax(-1)
        next_atoms = batch.rewards[:, None] + args.gamma * atoms * (1 - batch.dones[:, None])
        target_pmfs = project(next_atoms, next_pmfs[batch_index, next_actions], atoms)

        def cross_entropy(params):
            # on log-softmax outputs: clipped probabilities would zero the gradient of a saturated distribution
            old_log_pmfs = q_network.apply(params, batch.observations, log=True, method="pmfs")[batch_index, batch.actions]
            return (-(target_pmfs * old_log_pmfs).sum(-1)).mean(), jnp.exp(old_log_pmfs)

        (loss, old_pmfs), grads = jax.value_and_grad(cross_entropy, has_aux=True)(q_state.params)
        return q_state.apply_gradients(grads=grads), loss, (old_pmfs * atoms).sum(-1).mean()

    # each frame is stored once; a transition's stacks are rebuilt when sampled
    rb = FrameReplayBuffer(args.buffer_size, env.observation_space.shape[1:], env.observation_space.shape[0])

    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
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
            rb.add(obs, next_obs, action, reward, terminated, terminated or truncated)
            if "episode" in info:  # a whole game ended, not just a life
                episodic_return = float(info["episode"]["r"])
                print(f"global_step={global_step}, episodic_return={episodic_return}")
                writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                writer.add_scalar("charts/episodic_length", int(info["episode"]["l"]), global_step)
            obs = env.reset()[0] if terminated or truncated else next_obs  # after a lost life: the next one

            if global_step > args.learning_starts:
                if global_step % args.train_frequency == 0:
                    q_state, loss, q_values = update(q_state, rb.sample(args.batch_size))

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
            episodic_returns = evaluate_c51_atari(
                exp.model_path,
                make_env,
                args.env_id,
                10,
                f"{run_name}-eval",
                QNetwork,
                epsilon=args.end_e,
                capture_video=args.capture_video,
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="C51")
