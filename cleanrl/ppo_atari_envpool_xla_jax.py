"""PPO for Atari games from pixels in JAX (Flax + Optax), with envpool's XLA interface: every env step runs compiled.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ppo-atari-envpool-xla-jax/#ppo_atari_envpool_xla_jaxpy
(docs/rl-algorithms/ppo-atari-envpool-xla-jax.md)
"""

import os
import time
from dataclasses import dataclass
from typing import NamedTuple

from cleanrl_utils.runtime.command_line import check_command_line, rollout_memory_problem


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
    """accepted for a common command line, does nothing: envpool's compiled steps render no frames, no video is written"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "Breakout-v5"
    """environment id (an envpool Atari id, e.g. Breakout-v5, Pong-v5)"""
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
    clip_vloss: bool = False
    """clip the value loss around the rollout's values (off by default: the published runs did not clip)"""
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
import flax
import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training.train_state import TrainState

from cleanrl_utils.runtime.experiment import Experiment

try:
    import envpool
except ImportError:
    envpool = None


def make_env(env_id, seed, num_envs, capture_video=False):
    def thunk():
        # envpool's Atari pipeline: no-op starts, frame skip (max of the last two), 84x84 grayscale, 4 stacked,
        # a lost life ends an episode, clipped rewards; `info["reward"]` is the raw score
        return envpool.make(
            env_id,
            env_type="gymnasium",
            num_envs=num_envs,
            seed=seed,
            episodic_life=True,
            reward_clip=True,
            **({"render_mode": "rgb_array"} if capture_video else {}),
        )

    return thunk


class Network(nn.Module):
    """The shared Nature-CNN torso on uint8 stacks of shape (batch, 4, 84, 84)."""

    @nn.compact
    def __call__(self, x):
        x = jnp.transpose(x, (0, 2, 3, 1)) / 255.0  # uint8 frames become floats in [0, 1] only here; channels last
        for features, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.Conv(
                features,
                kernel_size=(kernel, kernel),
                strides=(stride, stride),
                padding="VALID",
                kernel_init=nn.initializers.orthogonal(np.sqrt(2)),
                bias_init=nn.initializers.constant(0.0),
            )(x)
            x = nn.relu(x)
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(512, kernel_init=nn.initializers.orthogonal(np.sqrt(2)), bias_init=nn.initializers.constant(0.0))(x)
        return nn.relu(x)


class Actor(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(
            self.action_dim, kernel_init=nn.initializers.orthogonal(0.01), bias_init=nn.initializers.constant(0.0)
        )(x)


class Critic(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1, kernel_init=nn.initializers.orthogonal(1), bias_init=nn.initializers.constant(0.0))(x)


class Agent(nn.Module):
    """Torso, policy head and value head in one module: one apply gives the logits and the value."""

    action_dim: int

    def setup(self):
        self.network = Network()
        self.actor = Actor(self.action_dim)
        self.critic = Critic()

    def __call__(self, x):
        hidden = self.network(x)
        return self.actor(hidden), self.critic(hidden)[:, 0]


@flax.struct.dataclass
class EpisodeStatistics:
    """Per-env scores kept on the device, in fixed shapes: the running game's, and the last finished game's.

    Returns are raw scores (`info["reward"]`, not clipped) of whole games (all lives); lengths count agent
    steps. Until an env finishes its first game its last score reads 0.
    """

    episode_returns: jax.Array
    episode_lengths: jax.Array
    returned_episode_returns: jax.Array
    returned_episode_lengths: jax.Array

    @classmethod
    def zeros(cls, num_envs):
        returns, lengths = jnp.zeros(num_envs, jnp.float32), jnp.zeros(num_envs, jnp.int32)
        return cls(returns, lengths, returns, lengths)

    def update(self, info, truncated):
        # A step with elapsed_step 0 is envpool's reset into a new game (the step after an end): it
        # belongs to no game. A game ends at a game over (info["terminated"]) or a time-limit cut.
        restarted = info["elapsed_step"] == 0
        returns = jnp.where(restarted, 0.0, self.episode_returns + info["reward"])
        lengths = jnp.where(restarted, 0, self.episode_lengths + 1)
        game_over = (info["terminated"] == 1) | truncated
        return EpisodeStatistics(
            returns,
            lengths,
            jnp.where(game_over, returns, self.returned_episode_returns),
            jnp.where(game_over, lengths, self.returned_episode_lengths),
        )


class Transition(NamedTuple):
    obs: jax.Array  # uint8 (num_envs, 4, 84, 84): the observation acted on
    actions: jax.Array
    logprobs: jax.Array
    values: jax.Array
    rewards: jax.Array
    terminations: jax.Array  # the episode (a life) ended for real: no bootstrap
    dones: jax.Array  # it ended for real or by a time-limit cut: the GAE recursion stops here
    valid: jax.Array  # False: the step after an episode end, where envpool resets (the action is ignored)


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    exp.require(args.batch_size % args.num_minibatches == 0, "--num-minibatches does not divide --num-envs × --num-steps")
    exp.require(args.num_iterations > 0, f"--total-timesteps is less than one rollout batch ({args.batch_size} steps)")
    updates = args.num_iterations * args.num_minibatches * args.update_epochs  # JAX counts them in 32 bits
    exp.require(updates < 2**31, f"--total-timesteps {args.total_timesteps} takes {updates} updates, more than 2**31 - 1")

    exp.seed_global_rngs()
    key = jax.random.PRNGKey(args.seed)
    key, agent_key = jax.random.split(key)

    # env setup, before any file is written
    exp.require(envpool is not None, 'this script steps its envs with envpool: pip install -e ".[envpool]" (Linux only)')
    spec = envpool.registration.registry.specs.get(args.env_id)
    exp.require(spec, f"{args.env_id} is not an envpool env id (envpool names Atari games Breakout-v5, Pong-v5, ...)")
    exp.require_action_space(envpool.make_spec(args.env_id).action_space, gym.spaces.Discrete, see="ppo_continuous_action.py")
    exp.require(spec[0] == "envpool.atari", f"{args.env_id} is not an Atari game of envpool")
    try:
        envs = exp.make_envs(make_env(args.env_id, args.seed, args.num_envs), args.env_id)
    except Exception as e:
        exp.fail(f"cannot make env {args.env_id!r}: {e}")
    handle, _, _, step_env = envs.xla()  # the env step as an XLA operation, callable inside jitted code
    problem = rollout_memory_problem(args.num_steps * args.num_envs, envs.observation_space)
    exp.require(not problem, problem)
    writer = exp.start_logging()

    next_obs, _ = envs.reset()
    agent = Agent(action_dim=envs.action_space.n)

    def linear_schedule(count):
        # the learning rate drops once per iteration (num_minibatches * update_epochs optimizer steps)
        frac = 1.0 - (count // (args.num_minibatches * args.update_epochs)) / args.num_iterations
        return args.learning_rate * frac

    agent_state = TrainState.create(
        apply_fn=agent.apply,
        params=jax.jit(agent.init)(agent_key, next_obs),
        tx=optax.chain(
            optax.clip_by_global_norm(args.max_grad_norm),
            optax.inject_hyperparams(optax.adam)(
                learning_rate=linear_schedule if args.anneal_lr else args.learning_rate, eps=1e-5
            ),
        ),
    )

    def step_once(params, obs, done, handle, stats, key):
        """Act on `obs` and step the envs, all in one compiled call: no round trip to Python in between."""
        key, action_key = jax.random.split(key)
        logits, value = agent.apply(params, obs)
        # Gumbel-max: the argmax of the logits plus Gumbel noise is a sample of the softmax policy
        u = jax.random.uniform(action_key, shape=logits.shape)
        action = jnp.argmax(logits - jnp.log(-jnp.log(u)), axis=1)
        logprob = jax.nn.log_softmax(logits)[jnp.arange(action.shape[0]), action]
        handle, (next_obs, reward, terminated, truncated, info) = step_env(handle, action)
        # After an episode end (a lost life too), envpool's next step resets the env and ignores the
        # action: a transition not to learn from. `done` says the previous step ended an episode.
        next_done = terminated | truncated
        transition = Transition(obs, action, logprob, value, reward, terminated, next_done, ~done)
        return next_obs, next_done, handle, stats.update(info, truncated), key, transition

    def compute_gae(params, next_obs, rollout):
        """GAE with a Python loop over the steps, unrolled by jit into one compiled function."""
        next_values = jnp.concatenate([rollout.values[1:], agent.apply(params, next_obs)[1][None]])
        terminations, dones = rollout.terminations.astype(jnp.float32), rollout.dones.astype(jnp.float32)
        # an episode cut by the time limit bootstraps from the value of its last observation (next_values[t]);
        # a done stops the recursion, so no advantage flows across an episode boundary
        advantages, lastgaelam = [], 0.0
        for t in reversed(range(args.num_steps)):
            delta = rollout.rewards[t] + args.gamma * next_values[t] * (1.0 - terminations[t]) - rollout.values[t]
            lastgaelam = delta + args.gamma * args.gae_lambda * (1.0 - dones[t]) * lastgaelam
            advantages.insert(0, lastgaelam)
        advantages = jnp.stack(advantages)
        return advantages, advantages + rollout.values

    def masked_mean(x, mask):
        return (x * mask).sum() / jnp.maximum(mask.sum(), 1.0)

    def ppo_loss(params, obs, actions, logprobs, values, advantages, returns, mask):
        """The clipped PPO loss over a minibatch's valid transitions (the reset steps count for nothing)."""
        logits, newvalue = agent.apply(params, obs)
        logp_all = jax.nn.log_softmax(logits)
        newlogprob = logp_all[jnp.arange(actions.shape[0]), actions]
        entropy = -(jnp.exp(logp_all) * logp_all).sum(-1)
        logratio = newlogprob - logprobs
        ratio = jnp.exp(logratio)
        approx_kl = masked_mean((ratio - 1) - logratio, mask)  # http://joschu.net/blog/kl-approx.html

        if args.norm_adv:
            mean = masked_mean(advantages, mask)
            std = jnp.sqrt((mask * (advantages - mean) ** 2).sum() / jnp.maximum(mask.sum() - 1.0, 1.0))
            advantages = (advantages - mean) / (std + 1e-8)

        clipped_ratio = jnp.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
        pg_loss = masked_mean(jnp.maximum(-advantages * ratio, -advantages * clipped_ratio), mask)
        if args.clip_vloss:
            v_clipped = values + jnp.clip(newvalue - values, -args.clip_coef, args.clip_coef)
            v_loss = 0.5 * masked_mean(jnp.maximum((newvalue - returns) ** 2, (v_clipped - returns) ** 2), mask)
        else:
            v_loss = 0.5 * masked_mean((newvalue - returns) ** 2, mask)
        entropy_loss = masked_mean(entropy, mask)
        loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
        return loss, (pg_loss, v_loss, entropy_loss, jax.lax.stop_gradient(approx_kl))

    ppo_loss_grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)

    def update_ppo(agent_state, rollout, advantages, returns, key):
        """All epochs and minibatches as Python loops, unrolled by jit into one compiled function."""
        batch = jax.tree.map(
            lambda x: x.reshape((args.batch_size,) + x.shape[2:]),
            (rollout.obs, rollout.actions, rollout.logprobs, rollout.values, advantages, returns),
        )
        mask = rollout.valid.reshape(-1).astype(jnp.float32)
        stopped = jnp.array(False)  # --target-kl: once an epoch ends above it, the later epochs change nothing
        losses = None
        for epoch in range(args.update_epochs):
            key, subkey = jax.random.split(key)
            b_inds = jax.random.permutation(subkey, args.batch_size)
            new_state = agent_state
            for start in range(0, args.batch_size, args.minibatch_size):
                mb_inds = b_inds[start : start + args.minibatch_size]
                (loss, aux), grads = ppo_loss_grad_fn(new_state.params, *(x[mb_inds] for x in batch), mask[mb_inds])
                new_state = new_state.apply_gradients(grads=grads)
                new_losses = (loss, *aux)
            if args.target_kl is not None and epoch > 0:
                new_state, new_losses = jax.tree.map(
                    lambda old, new, stopped=stopped: jnp.where(stopped, old, new),
                    (agent_state, losses),
                    (new_state, new_losses),
                )
            agent_state, losses = new_state, new_losses
            if args.target_kl is not None:
                stopped = stopped | (losses[4] > args.target_kl)
        return agent_state, losses, key

    # compile now, ahead of time on the training shapes: the SPS counts training only
    compile_start = time.time()
    stats = EpisodeStatistics.zeros(args.num_envs)
    next_done = jnp.zeros(args.num_envs, dtype=bool)
    step_shapes = jax.eval_shape(step_once, agent_state.params, next_obs, next_done, handle, stats, key)
    rollout_shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct((args.num_steps, *x.shape), x.dtype), step_shapes[-1])
    step_once = jax.jit(step_once).lower(agent_state.params, next_obs, next_done, handle, stats, key).compile()
    compute_gae = jax.jit(compute_gae).lower(agent_state.params, next_obs, rollout_shapes).compile()
    values_shape = jax.ShapeDtypeStruct((args.num_steps, args.num_envs), jnp.float32)
    update_ppo = jax.jit(update_ppo).lower(agent_state, rollout_shapes, values_shape, values_shape, key).compile()
    print(f"compile time: {time.time() - compile_start:.2f} s (the rollout step, GAE and the update)")

    global_step = 0
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for _iteration in range(args.num_iterations):
            transitions = []
            for _step in range(args.num_steps):
                exp.raise_if_stopped()
                global_step += args.num_envs
                next_obs, next_done, handle, stats, key, transition = step_once(
                    agent_state.params, next_obs, next_done, handle, stats, key
                )
                transitions.append(transition)
            rollout = jax.tree.map(lambda *xs: jnp.stack(xs), *transitions)

            update_start = time.time()
            advantages, returns = compute_gae(agent_state.params, next_obs, rollout)
            agent_state, (loss, pg_loss, v_loss, entropy_loss, approx_kl), key = update_ppo(
                agent_state, rollout, advantages, returns, key
            )
            jax.block_until_ready(agent_state)
            update_time = time.time() - update_start

            # the mean of each env's last finished game
            avg_episodic_return = float(stats.returned_episode_returns.mean())
            print(f"global_step={global_step}, avg_episodic_return={avg_episodic_return}")
            writer.add_scalar("charts/avg_episodic_return", avg_episodic_return, global_step)
            writer.add_scalar("charts/avg_episodic_length", float(stats.returned_episode_lengths.mean()), global_step)
            learning_rate = agent_state.opt_state[1].hyperparams["learning_rate"]
            writer.add_scalar("charts/learning_rate", float(learning_rate), global_step)
            writer.add_scalar("losses/value_loss", float(v_loss), global_step)
            writer.add_scalar("losses/policy_loss", float(pg_loss), global_step)
            writer.add_scalar("losses/entropy", float(entropy_loss), global_step)
            writer.add_scalar("losses/approx_kl", float(approx_kl), global_step)
            writer.add_scalar("losses/loss", float(loss), global_step)
            sps = int(global_step / exp.elapsed)
            print("SPS:", sps)
            writer.add_scalar("charts/SPS", sps, global_step)
            writer.add_scalar("charts/SPS_update", int(args.batch_size / update_time), global_step)
