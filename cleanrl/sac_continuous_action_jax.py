"""Soft Actor-Critic in JAX (Flax + Optax) for continuous actions and vector observations: the jitted twin of sac_continuous_action.py.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/sac/#sac_continuous_action_jaxpy (docs/rl-algorithms/sac.md)
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
    """environment id of the task"""
    total_timesteps: int = 1000000
    """training budget in environment steps, summed over the environments"""
    num_envs: int = 1
    """environments stepped in parallel (each loop iteration steps all of them, then makes one update)"""
    buffer_size: int = int(1e6)
    """replay memory capacity in transitions"""
    gamma: float = 0.99
    """discount factor γ"""
    tau: float = 0.005
    """soft-update rate τ of the target networks"""
    batch_size: int = 256
    """transitions per replay sample"""
    learning_starts: int = 5000
    """environment steps collected before the first update (random actions until then)"""
    policy_lr: float = 3e-4
    """actor's optimiser step size"""
    q_lr: float = 1e-3
    """critics' optimiser step size (the entropy temperature's too)"""
    policy_frequency: int = 2
    """critic updates per actor update: every N updates the actor (and alpha) get N steps"""
    target_network_frequency: int = 1
    """environment steps between target-network updates"""
    alpha: float = 0.2
    """entropy temperature α (when not autotuned)"""
    autotune: bool = True
    """learn the entropy temperature α towards a target entropy"""
    autotune_resample: bool = False
    """with --autotune, rate the policy's entropy on a new sample of the updated actor (off: the actor step's own)"""


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

    from cleanrl_utils.runtime.evals.jax import evaluate_sac
except ImportError as e:
    print(
        f'{os.path.basename(__file__)}: error: {e.name} is missing; install it with pip install -e ".[jax]"', file=sys.stderr
    )
    raise SystemExit(2) from None


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if env_id.startswith("dm_control/"):  # these ids exist once Shimmy has registered them
            try:
                import shimmy
            except ImportError:
                raise gym.error.DependencyNotInstalled("dm_control envs need shimmy and dm_control") from None
            gym.register_envs(shimmy)
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, disable_env_checker=True)
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


class SoftQNetwork(nn.Module):
    @nn.compact
    def __call__(self, x, a):
        x = jnp.concatenate([x, a], -1)
        x = nn.relu(nn.Dense(256)(x))
        x = nn.relu(nn.Dense(256)(x))
        return nn.Dense(1)(x).squeeze(-1)


LOG_STD_MAX = 2
LOG_STD_MIN = -5


class Actor(nn.Module):
    """Gaussian policy squashed by tanh, then mapped by scale and bias onto the action bounds."""

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
        mean = nn.Dense(len(self.action_low))(x)
        log_std = jnp.tanh(nn.Dense(len(self.action_low))(x))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)  # from (-1, 1) into (-5, 2)
        return mean, log_std

    def get_action(self, x, key):
        """A sampled action (reparameterised), its log-probability, and the deterministic (mean) action."""
        mean, log_std = self(x)
        std = jnp.exp(log_std)
        u = mean + std * jax.random.normal(key, mean.shape)  # gradients reach mean and std
        action = jnp.tanh(u) * self.action_scale + self.action_bias
        # Change of variables: log pi(action) = log N(u; mean, std) - log |d action / d u|, per dimension, where
        # d action / d u = scale * (1 - tanh(u)^2); the 1e-6 keeps the log finite where tanh(u) rounds to +-1.
        log_prob = jax.scipy.stats.norm.logpdf(u, mean, std) - jnp.log(self.action_scale * (1 - jnp.tanh(u) ** 2) + 1e-6)
        mean_action = jnp.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob.sum(-1), mean_action


def temperature_loss(alpha_params, log_pi, target_entropy):
    """Lowers alpha while the policy's entropy (about -log_pi) is above the target, raises it while below."""
    return (-jnp.exp(alpha_params["log_alpha"]) * (jax.lax.stop_gradient(log_pi) + target_entropy)).mean()


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
        margin = 1e-5 * (np.abs(low) + np.abs(high))  # tanh(u) * scale + bias may round past a bound
        if not np.isfinite(data).all() or not np.isin(data[:, self.action_columns.stop + 1], (0, 1)).all():
            raise ValueError("its rows hold a nan, an infinity or a termination flag other than 0 and 1")
        if not ((low - margin <= actions) & (actions <= high + margin)).all():
            raise ValueError("its actions are out of the action bounds")
        self.rng.bit_generator.state = state["rng"]
        self.data[:size], self.pos, self.size = data, pos, size


class CriticState(TrainState):
    target_params: flax.core.FrozenDict


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs", "batch_size")
    exp.require(args.total_timesteps >= args.num_envs, f"--total-timesteps is less than one step of the {args.num_envs} envs")
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
    exp.require(bounded, f"{args.env_id} has unbounded actions {space}; the tanh-squashed policy needs finite bounds")
    problem = replay_memory_problem(args, np.zeros(obs_space.shape, obs_space.dtype).nbytes)
    exp.require(not problem, problem)
    envs.action_space.seed(args.seed)
    writer = exp.start_logging()

    actor = Actor(action_low=space.low.astype(np.float32), action_high=space.high.astype(np.float32))
    qf = SoftQNetwork()
    obs_dim, action_dim = obs_space.shape[0], space.shape[0]
    zero_obs = np.zeros((args.num_envs, obs_dim), np.float32)  # the networks' input shapes
    actor_params = jax.jit(actor.init)(actor_key, zero_obs)
    qf_init, zero_actions = jax.jit(qf.init), np.zeros((args.num_envs, action_dim), np.float32)
    qf1_params, qf2_params = qf_init(qf1_key, zero_obs, zero_actions), qf_init(qf2_key, zero_obs, zero_actions)
    actor_state = TrainState.create(apply_fn=actor.apply, params=actor_params, tx=optax.adam(args.policy_lr))
    # one Adam for both critics (Adam works per parameter)
    qf_params = {"qf1": qf1_params, "qf2": qf2_params}
    qf_state = CriticState.create(apply_fn=qf.apply, params=qf_params, target_params=qf_params, tx=optax.adam(args.q_lr))
    # the temperature is learned as log alpha, from 0 (alpha = 1); without --autotune alpha stays --alpha
    alpha_state = TrainState.create(apply_fn=None, params={"log_alpha": jnp.zeros(())}, tx=optax.adam(args.q_lr))
    target_entropy = -float(action_dim)
    # The stored termination flag is the only "done": a time-limit cut still bootstraps from the next state.
    rb = ReplayBuffer(args.buffer_size, args.num_envs, obs_dim, space, args.seed)

    def temperature(alpha_state):
        return jnp.exp(alpha_state.params["log_alpha"]) if args.autotune else args.alpha

    @jax.jit
    def sample_actions(actor_params, obs, key):
        key, sample_key = jax.random.split(key)
        return actor.apply(actor_params, obs, sample_key, method="get_action")[0], key

    @jax.jit
    def update_critics(actor_state, qf_state, alpha_state, batch, key):
        obs, actions, rewards, terminations, next_obs = jnp.split(batch, np.cumsum([obs_dim, action_dim, 1, 1]), axis=1)
        rewards, terminations = rewards[:, 0], terminations[:, 0]
        # the soft target: the next action and its log-probability come from the current policy
        key, next_key = jax.random.split(key)
        next_actions, next_log_pi, _ = actor.apply(actor_state.params, next_obs, next_key, method="get_action")
        targets = qf_state.target_params
        min_qf_next = jnp.minimum(
            qf.apply(targets["qf1"], next_obs, next_actions), qf.apply(targets["qf2"], next_obs, next_actions)
        )
        next_q_value = rewards + (1 - terminations) * args.gamma * (min_qf_next - temperature(alpha_state) * next_log_pi)

        def mse_losses(params):  # both critics regress on the same target; they are trained on the sum
            qf1_a_values, qf2_a_values = qf.apply(params["qf1"], obs, actions), qf.apply(params["qf2"], obs, actions)
            qf1_loss, qf2_loss = ((qf1_a_values - next_q_value) ** 2).mean(), ((qf2_a_values - next_q_value) ** 2).mean()
            return qf1_loss + qf2_loss, (qf1_loss, qf2_loss, qf1_a_values.mean(), qf2_a_values.mean())

        (_, logs), grads = jax.value_and_grad(mse_losses, has_aux=True)(qf_state.params)
        return qf_state.apply_gradients(grads=grads), key, logs

    # one actor step, then (with --autotune) one temperature step
    @jax.jit
    def update_actor(actor_state, qf_state, alpha_state, batch, key):
        obs = batch[:, :obs_dim]
        key, pi_key, resample_key = jax.random.split(key, 3)

        def actor_loss_fn(params):  # the gradient flows through the critics; only the actor's is taken
            pi, log_pi, _ = actor.apply(params, obs, pi_key, method="get_action")
            min_qf_pi = jnp.minimum(qf.apply(qf_state.params["qf1"], obs, pi), qf.apply(qf_state.params["qf2"], obs, pi))
            return (temperature(alpha_state) * log_pi - min_qf_pi).mean(), log_pi

        (actor_loss, log_pi), grads = jax.value_and_grad(actor_loss_fn, has_aux=True)(actor_state.params)
        actor_state = actor_state.apply_gradients(grads=grads)
        alpha_loss = None
        if args.autotune:
            # the log-probabilities of the actor step just taken, or of the updated actor
            if args.autotune_resample:
                _, log_pi, _ = actor.apply(actor_state.params, obs, resample_key, method="get_action")
            alpha_loss, grads = jax.value_and_grad(temperature_loss)(alpha_state.params, log_pi, target_entropy)
            alpha_state = alpha_state.apply_gradients(grads=grads)
        return actor_state, alpha_state, key, actor_loss, alpha_loss

    @jax.jit
    def update_targets(qf_state):
        return qf_state.replace(target_params=optax.incremental_update(qf_state.params, qf_state.target_params, args.tau))

    # compile before the clock starts: the SPS counts training only
    compile_start = time.time()
    sample_actions.lower(actor_state.params, zero_obs, explore_key).compile()
    batch_shape = jax.ShapeDtypeStruct((args.batch_size, rb.data.shape[1]), np.float32)
    update_critics.lower(actor_state, qf_state, alpha_state, batch_shape, update_key).compile()
    update_actor.lower(actor_state, qf_state, alpha_state, batch_shape, update_key).compile()
    update_targets.lower(qf_state).compile()
    print(f"jit compile time: {time.time() - compile_start:.2f} s")

    first_iteration, actor_loss, alpha_loss = 0, None, None
    if exp.loaded_checkpoint:
        checkpoint = exp.restore_run_state({"replay_buffer": rb})
        fresh = {"actor_state": actor_state, "qf_state": qf_state, "alpha_state": alpha_state}
        saved = {name: exp.saved_tree(name, flax.serialization.to_state_dict(state)) for name, state in fresh.items()}
        actor_state = flax.serialization.from_state_dict(actor_state, saved["actor_state"])  # weights, Adam
        qf_state = flax.serialization.from_state_dict(qf_state, saved["qf_state"])  # with the targets
        alpha_state = flax.serialization.from_state_dict(alpha_state, saved["alpha_state"])  # log alpha, Adam
        log_alpha = float(alpha_state.params["log_alpha"])
        exp.require(
            -88 <= log_alpha <= 88, f"--resume: refused, the checkpoint's log alpha ({log_alpha:g}) is not in -88 to 88"
        )
        key_data = jax.random.key_data(explore_key)
        explore_key, update_key = (
            jax.random.wrap_key_data(exp.saved_tree(k, key_data)) for k in ("explore_key", "update_key")
        )
        # the last losses are logged until the actor's next update, which may come after the next log step
        actor_loss = None if checkpoint.get("actor_loss") is None else exp.saved_float("actor_loss")
        alpha_loss = None if checkpoint.get("alpha_loss") is None else exp.saved_float("alpha_loss")
        obs = exp.saved_array("obs", envs.observation_space.shape, np.float32)
        first_iteration = exp.saved_int("global_step", 0, args.total_timesteps - 1) // args.num_envs + 1
    else:
        obs, _ = envs.reset(seed=args.seed)
        obs = obs.astype(np.float32)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for iteration in range(first_iteration, args.total_timesteps // args.num_envs):
            exp.raise_if_stopped()
            global_step = iteration * args.num_envs  # environment steps taken before this one
            # act: uniformly random until learning starts, then from the policy
            if global_step < args.learning_starts:
                actions = envs.action_space.sample()
            else:
                actions, explore_key = sample_actions(actor_state.params, obs, explore_key)
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

            # learn
            if global_step > args.learning_starts:
                batch = jax.device_put(rb.sample(args.batch_size))
                qf_state, update_key, logs = update_critics(actor_state, qf_state, alpha_state, batch, update_key)
                if iteration % args.policy_frequency == 0:  # the actor's updates are delayed, as in TD3
                    for _ in range(args.policy_frequency):  # as many actor steps as critic steps, in a burst
                        actor_state, alpha_state, update_key, actor_loss, alpha_loss = update_actor(
                            actor_state, qf_state, alpha_state, batch, update_key
                        )
                if iteration % args.target_network_frequency == 0:
                    qf_state = update_targets(qf_state)

                if global_step % 100 < args.num_envs and actor_loss is not None:  # once per 100 steps
                    qf1_loss, qf2_loss, qf1_values, qf2_values = jax.device_get(logs)
                    writer.add_scalar("losses/qf1_values", qf1_values, global_step)
                    writer.add_scalar("losses/qf2_values", qf2_values, global_step)
                    writer.add_scalar("losses/qf1_loss", qf1_loss, global_step)
                    writer.add_scalar("losses/qf2_loss", qf2_loss, global_step)
                    writer.add_scalar("losses/qf_loss", (qf1_loss + qf2_loss) / 2.0, global_step)
                    writer.add_scalar("losses/actor_loss", float(actor_loss), global_step)
                    writer.add_scalar("losses/alpha", float(temperature(alpha_state)), global_step)
                    sps = int(global_step / exp.elapsed)
                    print("SPS:", sps)
                    writer.add_scalar("charts/SPS", sps, global_step)
                    if args.autotune:
                        writer.add_scalar("losses/alpha_loss", float(alpha_loss), global_step)

            done = global_step + args.num_envs  # environment steps taken so far
            if exp.checkpoint_due(done, since=global_step):
                # named after the steps taken; "global_step" is the last step logged (a resume purges the logs after it)
                states = {"actor_state": actor_state, "qf_state": qf_state, "alpha_state": alpha_state}
                state = flax.serialization.to_state_dict(jax.device_get(states))
                state |= jax.device_get({"actor_loss": actor_loss, "alpha_loss": alpha_loss})
                keys = {"explore_key": explore_key, "update_key": update_key}
                state |= {name: np.asarray(jax.random.key_data(key)) for name, key in keys.items()}
                exp.save_checkpoint(done, {"global_step": global_step, "obs": obs, **state}, {"replay_buffer": rb})

        if args.save_model:
            exp.save_model(flax.serialization.to_bytes([actor_state.params, qf_state.params["qf1"], qf_state.params["qf2"]]))
            episodic_returns = evaluate_sac(
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", Actor, capture_video=args.capture_video
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="SAC")
