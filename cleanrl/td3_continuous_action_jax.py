"""TD3 in JAX (Flax + Optax) for continuous actions and vector observations: the jitted twin of td3_continuous_action.py.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/td3/#td3_continuous_action_jaxpy (docs/rl-algorithms/td3.md)
"""

import os
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
    checkpoint_frequency: int = 0
    """save a checkpoint to resume from every this many steps (0: never); it holds the replay buffer too"""
    resume: str | None = None
    """continue the run of this checkpoint file, or of this run folder's newest readable one, with its arguments; a checkpoint is trusted input (it chooses what the run does): resume only your own"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "Hopper-v4"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 1000000
    """training budget in environment steps, summed over the environments"""
    learning_rate: float = 3e-4
    """optimiser step size"""
    num_envs: int = 1
    """environments stepped in parallel (one gradient step per step of all of them)"""
    buffer_size: int = 1000000
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
    tau: float = 0.005
    """soft-update rate τ of the target networks"""
    batch_size: int = 256
    """transitions per replay sample"""
    policy_noise: float = 0.2
    """std of the target-policy smoothing noise, relative to the action half-range"""
    exploration_noise: float = 0.1
    """std of the Gaussian exploration noise, relative to the action half-range"""
    learning_starts: int = 25000
    """environment steps collected before the first update"""
    policy_frequency: int = 2
    """critic updates per actor (and target) update"""
    noise_clip: float = 0.5
    """bound on the target-policy smoothing noise, relative to the action half-range"""


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

    from cleanrl_utils.runtime.evals.jax import evaluate_deterministic_actor
except ImportError as e:
    print(
        f'{os.path.basename(__file__)}: error: {e.name} is missing; install it with pip install -e ".[jax]"', file=sys.stderr
    )
    raise SystemExit(2) from None


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, disable_env_checker=True)
        if isinstance(env.observation_space, gym.spaces.Dict):
            env = gym.wrappers.FlattenObservation(env)  # dm_control's dict observations become one vector
        env = gym.wrappers.RecordEpisodeStatistics(env)
        return env

    return thunk


def make_vector_env(env_id, num_envs, capture_video, run_name):
    """Sub-envs reset in the same step they end, and `infos["final_obs"]` keeps the last observation."""
    return gym.vector.SyncVectorEnv(
        [make_env(env_id, i, capture_video, run_name) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


class QNetwork(nn.Module):
    @nn.compact
    def __call__(self, x, a):
        x = jnp.concatenate([x, a], -1)
        x = nn.relu(nn.Dense(256)(x))
        x = nn.relu(nn.Dense(256)(x))
        return nn.Dense(1)(x).squeeze(-1)


class Actor(nn.Module):
    """Deterministic policy: tanh squashes into [-1, 1], then scale and bias map onto the action bounds."""

    action_low: np.ndarray  # the Box's bounds, per dimension; they may be asymmetric (not [-1, 1])
    action_high: np.ndarray

    @property
    def action_scale(self):
        return (self.action_high - self.action_low) / 2.0

    @property
    def action_bias(self):
        return (self.action_high + self.action_low) / 2.0

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(256)(x))
        x = nn.relu(nn.Dense(256)(x))
        return jnp.tanh(nn.Dense(len(self.action_low))(x)) * self.action_scale + self.action_bias

    def explore(self, x, noise, key):
        """The action plus Gaussian noise of std `noise` x the half-range, clipped to the bounds."""
        action = self(x)
        action = action + jax.random.normal(key, action.shape) * (noise * self.action_scale)
        return jnp.clip(action, self.action_low, self.action_high)


def smoothed_target_actions(actor, target_params, next_obs, key, policy_noise, noise_clip):
    """Target policy smoothing: the target actor's action plus clipped noise, N(0, policy_noise) clipped to
    +-noise_clip, both in units of the half-range; the result is clipped to the action bounds."""
    action = actor.apply(target_params, next_obs)
    noise = jnp.clip(jax.random.normal(key, action.shape) * policy_noise, -noise_clip, noise_clip) * actor.action_scale
    return jnp.clip(action + noise, actor.action_low, actor.action_high)


class ReplayBuffer:
    """A ring of the last `capacity` transitions in one float32 NumPy array on the host, a row per transition:
    obs | action | reward | termination | next obs. A batch is one fancy-indexing gather and one array sent
    to the jitted update (Stable-Baselines3's buffer makes five torch tensors per batch)."""

    def __init__(self, capacity, num_envs, obs_dim, action_space, seed):
        self.rows = capacity // num_envs * num_envs
        self.data = np.zeros((self.rows, 2 * obs_dim + action_space.shape[0] + 2), np.float32)
        self.num_envs, self.pos, self.size = num_envs, 0, 0
        self.rng = np.random.default_rng(seed)
        self.action_columns, self.action_space = slice(obs_dim, obs_dim + action_space.shape[0]), action_space

    def add(self, obs, next_obs, actions, rewards, terminations):
        self.data[self.pos : self.pos + self.num_envs] = np.column_stack([obs, actions, rewards, terminations, next_obs])
        self.pos = (self.pos + self.num_envs) % self.rows
        self.size = min(self.size + self.num_envs, self.rows)

    def sample(self, batch_size):
        return self.data[self.rng.integers(0, self.size, batch_size)]

    def state_dict(self):
        return {"data": self.data[: self.size], "pos": self.pos, "size": self.size, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        """Take a `state_dict()` of a memory made with the same arguments; ValueError if it is not one."""
        data, pos, size = state["data"], state["pos"], state["size"]
        if type(pos) is not int or type(size) is not int or not 0 <= size <= self.rows or size % self.num_envs:
            raise ValueError(f"its size ({size!r}) is not a number of steps of at most {self.rows} rows")
        # the ring fills from row 0, then wraps: until it is full, the next row is the first empty one
        if (pos != size) if size < self.rows else (not 0 <= pos < self.rows or pos % self.num_envs):
            raise ValueError(f"its position ({pos}) is not where its next step goes")
        if not isinstance(data, np.ndarray) or data.dtype != np.float32 or data.shape != (size, self.data.shape[1]):
            raise ValueError(f"its rows are not {size} of this memory's float32 rows")
        actions, low, high = data[:, self.action_columns], self.action_space.low, self.action_space.high
        if not np.isfinite(data).all() or not np.isin(data[:, self.action_columns.stop + 1], (0, 1)).all():
            raise ValueError("its rows hold a nan, an infinity or a termination flag other than 0 and 1")
        if not ((low <= actions) & (actions <= high)).all():
            raise ValueError("its actions are out of the action bounds")
        self.rng.bit_generator.state = state["rng"]
        self.data[:size], self.pos, self.size = data, pos, size


class ActorCriticState(TrainState):
    target_params: flax.core.FrozenDict


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs", "batch_size")
    exp.require(args.buffer_size >= args.num_envs, f"--buffer-size must hold at least one step of the {args.num_envs} envs")
    run_name = exp.run_name

    exp.seed_global_rngs()
    key = jax.random.key(args.seed)
    # separate keys for acting and for the updates
    key, actor_key, qf1_key, qf2_key, explore_key, update_key = jax.random.split(key, 6)

    # env setup, before any file is written
    envs = exp.make_envs(lambda: make_vector_env(args.env_id, args.num_envs, args.capture_video, run_name), args.env_id)
    space, obs_space = envs.single_action_space, envs.single_observation_space
    exp.require_action_space(space, gym.spaces.Box, see="dqn.py")
    bounded = np.isfinite(space.low).all() and np.isfinite(space.high).all()
    exp.require(bounded, f"{args.env_id} has unbounded actions {space}; {exp.script} needs finite bounds")
    exp.require(len(obs_space.shape) == 1, f"{args.env_id} observations are {obs_space}; {exp.script} needs flat ones")
    problem = replay_memory_problem(args, np.zeros(obs_space.shape, obs_space.dtype).nbytes)
    exp.require(not problem, problem)
    envs.action_space.seed(args.seed)
    writer = exp.start_logging()

    actor = Actor(action_low=space.low.astype(np.float32), action_high=space.high.astype(np.float32))
    qf = QNetwork()
    obs_dim, action_dim = obs_space.shape[0], space.shape[0]
    zero_obs = np.zeros((args.num_envs, obs_dim), np.float32)  # the networks' input shapes
    actor_params = jax.jit(actor.init)(actor_key, zero_obs)
    qf_init, zero_actions = jax.jit(qf.init), np.zeros((args.num_envs, action_dim), np.float32)
    qf1_params, qf2_params = qf_init(qf1_key, zero_obs, zero_actions), qf_init(qf2_key, zero_obs, zero_actions)
    actor_state = ActorCriticState.create(
        apply_fn=actor.apply, params=actor_params, target_params=actor_params, tx=optax.adam(args.learning_rate)
    )
    # one Adam for both critics (Adam works per parameter)
    qf_params = {"qf1": qf1_params, "qf2": qf2_params}
    qf_state = ActorCriticState.create(
        apply_fn=qf.apply, params=qf_params, target_params=qf_params, tx=optax.adam(args.learning_rate)
    )
    # The stored termination flag is the only "done": a time-limit cut still bootstraps from the next state.
    rb = ReplayBuffer(args.buffer_size, args.num_envs, obs_dim, space, args.seed)

    @jax.jit
    def explore(actor_params, obs, key):
        key, noise_key = jax.random.split(key)
        return actor.apply(actor_params, obs, args.exploration_noise, noise_key, method="explore"), key

    # the critics' update, every iteration, and the actor's with the target networks', every
    # `policy_frequency`-th
    @jax.jit
    def update_critics(actor_state, qf_state, batch, key):
        obs, actions, rewards, terminations, next_obs = jnp.split(batch, np.cumsum([obs_dim, action_dim, 1, 1]), axis=1)
        rewards, terminations = rewards[:, 0], terminations[:, 0]
        key, noise_key = jax.random.split(key)
        next_actions = smoothed_target_actions(
            actor, actor_state.target_params, next_obs, noise_key, args.policy_noise, args.noise_clip
        )
        targets = qf_state.target_params
        min_qf_next = jnp.minimum(
            qf.apply(targets["qf1"], next_obs, next_actions), qf.apply(targets["qf2"], next_obs, next_actions)
        )
        next_q_value = rewards + (1 - terminations) * args.gamma * min_qf_next

        def mse_losses(params):  # both critics regress on the same target; they are trained on the sum
            qf1_a_values, qf2_a_values = qf.apply(params["qf1"], obs, actions), qf.apply(params["qf2"], obs, actions)
            qf1_loss, qf2_loss = ((qf1_a_values - next_q_value) ** 2).mean(), ((qf2_a_values - next_q_value) ** 2).mean()
            return qf1_loss + qf2_loss, (qf1_loss, qf2_loss, qf1_a_values.mean(), qf2_a_values.mean())

        (_, logs), grads = jax.value_and_grad(mse_losses, has_aux=True)(qf_state.params)
        return qf_state.apply_gradients(grads=grads), key, logs

    @jax.jit
    def update_actor(actor_state, qf_state, batch):
        obs = batch[:, :obs_dim]

        def actor_loss_fn(params):  # the gradient flows through the first critic; only the actor's is taken
            return -qf.apply(qf_state.params["qf1"], obs, actor.apply(params, obs)).mean()

        actor_loss, grads = jax.value_and_grad(actor_loss_fn)(actor_state.params)
        actor_state = actor_state.apply_gradients(grads=grads)
        # update the target networks
        actor_state = actor_state.replace(
            target_params=optax.incremental_update(actor_state.params, actor_state.target_params, args.tau)
        )
        qf_state = qf_state.replace(target_params=optax.incremental_update(qf_state.params, qf_state.target_params, args.tau))
        return actor_state, qf_state, actor_loss

    # compile before the clock starts: the SPS counts training only
    compile_start = time.time()
    explore.lower(actor_state.params, zero_obs, explore_key).compile()
    batch_shape = jax.ShapeDtypeStruct((args.batch_size, rb.data.shape[1]), np.float32)
    update_critics.lower(actor_state, qf_state, batch_shape, update_key).compile()
    update_actor.lower(actor_state, qf_state, batch_shape).compile()
    print(f"jit compile time: {time.time() - compile_start:.2f} s")

    first_step = 0
    num_updates = 0  # critic updates so far; the actor and the targets follow every `policy_frequency`-th
    actor_loss = None
    if exp.loaded_checkpoint:
        checkpoint = exp.restore_run_state({"replay_buffer": rb})
        saved_actor = exp.saved_tree("actor_state", flax.serialization.to_state_dict(actor_state))
        actor_state = flax.serialization.from_state_dict(actor_state, saved_actor)  # weights, targets, Adam
        qf_state = flax.serialization.from_state_dict(
            qf_state, exp.saved_tree("qf_state", flax.serialization.to_state_dict(qf_state))
        )
        key_data = jax.random.key_data(explore_key)
        explore_key, update_key = (
            jax.random.wrap_key_data(exp.saved_tree(k, key_data)) for k in ("explore_key", "update_key")
        )
        obs = exp.saved_array("obs", envs.observation_space.shape, np.float32)
        first_step = exp.saved_int("global_step", 0, args.total_timesteps - 1) + args.num_envs
        # a critic update per iteration after learning_starts: the actor's cadence counts them
        updates = max(0, first_step // args.num_envs - 1 - args.learning_starts // args.num_envs)
        num_updates = exp.saved_int("num_updates", updates, updates)
        # the last one is logged until the actor's next update
        actor_loss = None if checkpoint.get("actor_loss") is None else exp.saved_float("actor_loss")
    else:
        obs, _ = envs.reset(seed=args.seed)
        obs = obs.astype(np.float32)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        # global_step: environment steps taken before this iteration, summed over the envs
        for global_step in range(first_step, args.total_timesteps, args.num_envs):
            exp.raise_if_stopped()
            if global_step < args.learning_starts:
                actions = envs.action_space.sample()
            else:
                actions, explore_key = explore(actor_state.params, obs, explore_key)
                actions = np.asarray(actions)

            next_obs, rewards, terminations, truncations, infos = envs.step(actions)

            # The transition of a sub-env whose episode just ended leads to its true last observation,
            # not to the first one of the next episode that `next_obs` already holds.
            real_next_obs = next_obs.copy()
            if "final_info" in infos:
                ended = terminations | truncations
                real_next_obs[ended] = np.stack(infos["final_obs"][ended])
                episode = infos["final_info"]["episode"]
                for i in np.flatnonzero(infos["final_info"]["_episode"]):
                    episodic_return = float(np.float32(episode["r"][i]))
                    print(f"global_step={global_step}, episodic_return={episodic_return}")
                    writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                    writer.add_scalar("charts/episodic_length", int(episode["l"][i]), global_step)
            rb.add(obs, real_next_obs, actions, rewards, terminations)
            obs = next_obs.astype(np.float32)

            if global_step > args.learning_starts:
                num_updates += 1
                batch = jax.device_put(rb.sample(args.batch_size))
                qf_state, update_key, logs = update_critics(actor_state, qf_state, batch, update_key)
                if num_updates % args.policy_frequency == 0:
                    actor_state, qf_state, actor_loss = update_actor(actor_state, qf_state, batch)

                if global_step % 100 < args.num_envs:  # once per 100 environment steps
                    qf1_loss, qf2_loss, qf1_values, qf2_values = jax.device_get(logs)
                    writer.add_scalar("losses/qf1_values", qf1_values, global_step)
                    writer.add_scalar("losses/qf2_values", qf2_values, global_step)
                    writer.add_scalar("losses/qf1_loss", qf1_loss, global_step)
                    writer.add_scalar("losses/qf2_loss", qf2_loss, global_step)
                    writer.add_scalar("losses/qf_loss", (qf1_loss + qf2_loss) / 2.0, global_step)
                    if actor_loss is not None:
                        writer.add_scalar("losses/actor_loss", float(actor_loss), global_step)
                    sps = int(global_step / exp.elapsed)
                    print("SPS:", sps)
                    writer.add_scalar("charts/SPS", sps, global_step)

            next_step = global_step + args.num_envs
            if exp.checkpoint_due(next_step, since=global_step):
                # named after the steps taken; "global_step" is the last step logged (a resume purges the logs after it)
                states = {"actor_state": actor_state, "qf_state": qf_state, "actor_loss": actor_loss}
                state = flax.serialization.to_state_dict(jax.device_get(states))
                keys = {"explore_key": explore_key, "update_key": update_key}
                state |= {name: np.asarray(jax.random.key_data(key)) for name, key in keys.items()}
                state |= {"num_updates": num_updates, "global_step": global_step, "obs": obs}
                exp.save_checkpoint(next_step, state, {"replay_buffer": rb})

        if args.save_model:
            exp.save_model(flax.serialization.to_bytes([actor_state.params, qf_state.params["qf1"], qf_state.params["qf2"]]))
            episodic_returns = evaluate_deterministic_actor(
                exp.model_path,
                make_env,
                args.env_id,
                eval_episodes=10,
                run_name=f"{run_name}-eval",
                Model=Actor,
                capture_video=args.capture_video,
                exploration_noise=args.exploration_noise,
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="TD3")
