"""PPO for continuous actions on MuJoCo Playground tasks simulated as one batch by MJX; torch reads them through DLPack.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ppo-playground/ (docs/rl-algorithms/ppo-playground.md)
"""

import contextlib
import functools
import io
import math
import os
import sys
from dataclasses import dataclass
from types import SimpleNamespace

from cleanrl_utils.runtime.command_line import check_command_line


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """experiment name, part of the run name (defaults to the file's name)"""
    seed: int = 1
    """random seed for Python, NumPy, PyTorch and the simulator's JAX keys"""
    torch_deterministic: bool = True
    """make cuDNN pick deterministic kernels (`torch.backends.cudnn.deterministic`)"""
    cuda: bool = True
    """simulate and learn on the GPU when JAX and PyTorch both have one (otherwise both run on the CPU)"""
    track: bool = False
    """log the run to Weights & Biases as well as TensorBoard"""
    wandb_project_name: str = "cleanRL"
    """Weights & Biases project the run is logged to"""
    wandb_entity: str | None = None
    """Weights & Biases user or team owning the project (default: your own)"""
    capture_video: bool = False
    """render clips of the batch's first environment into `videos/` (MuJoCo offscreen; MUJOCO_GL=egl without a display)"""
    record_video_step_frequency: int = 1464
    """with --capture-video: start a clip every this many vector steps"""
    save_model: bool = False
    """save the model (weights and observation statistics) into `runs/{run_name}`, then evaluate it"""
    upload_model: bool = False
    """upload the saved model, its evaluation and logs to the Hugging Face Hub"""
    hf_entity: str = ""
    """Hugging Face Hub account or organisation that owns the uploaded model's repo (empty: the token's own)"""
    checkpoint_frequency: int = 0
    """save a checkpoint to resume from every this many iterations (0: never)"""
    resume: str | None = None
    """continue the run of this checkpoint file, or of this run folder's newest one, with its arguments (checked as the command line's); a checkpoint is read as data, never run"""

    # the algorithm's settings; defaults are the Isaac Gym variant's published hyperparameters
    env_id: str = "CartpoleBalance"
    """MuJoCo Playground task (`mujoco_playground.registry.ALL_ENVS`)"""
    total_timesteps: int = 30000000
    """training budget in environment steps (summed over the envs)"""
    learning_rate: float = 0.0026
    """optimiser step size"""
    num_envs: int = 4096
    """environments simulated as one batch (thousands on a GPU; tens on a CPU)"""
    num_steps: int = 16
    """steps each environment takes per rollout"""
    episode_length: int | None = None
    """time limit of an episode in control steps (default: the task's own, 1000 for the DM Control tasks)"""
    impl: str = "jax"
    """MJX implementation: `jax` (MJX in JAX) or `warp` (MuJoCo Warp, Playground's default, for NVIDIA GPUs)"""
    anneal_lr: bool = False
    """decay the learning rate linearly to 0 over the run"""
    gamma: float = 0.99
    """discount factor γ"""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation"""
    num_minibatches: int = 2
    """minibatches each epoch splits the rollout into"""
    update_epochs: int = 4
    """passes over each rollout per update"""
    norm_adv: bool = True
    """normalise the advantages within each minibatch"""
    clip_coef: float = 0.2
    """clip range ε of the probability ratio (and of the value change with --clip-vloss)"""
    clip_vloss: bool = False
    """clip the value loss around the rollout's values"""
    ent_coef: float = 0.0
    """weight of the entropy bonus in the total loss"""
    vf_coef: float = 2.0
    """weight of the value loss in the total loss"""
    max_grad_norm: float = 1.0
    """global gradient norm above which gradients are scaled down"""
    target_kl: float | None = None
    """stop an update's epochs early once the approximate KL exceeds this (off when unset)"""
    reward_scaler: float = 1.0
    """factor the rewards are multiplied by before learning (the logged returns are the task's own)"""

    # derived from the settings above when the run starts
    batch_size: int = 0
    """transitions per rollout, num-envs × num-steps (set at start-up)"""
    minibatch_size: int = 0
    """transitions per minibatch (set at start-up)"""
    num_iterations: int = 0
    """rollout-and-update iterations (set from the budget at start-up)"""


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import torch
import torch.nn as nn
import torch.optim as optim

from cleanrl_utils.runtime.evals.special import FirstEnvVideo, evaluate_playground
from cleanrl_utils.runtime.experiment import Experiment, mujoco_problem, one_line

try:
    import jax
    import jax.numpy as jnp
    from brax.envs.wrappers.training import EpisodeWrapper, VmapWrapper
    from mujoco_playground import registry
except Exception as e:  # not installed (ImportError), or a MUJOCO_GL that `import mujoco` cannot load
    reason = mujoco_problem(filming=False)
    if reason is None and not isinstance(e, ImportError):
        raise
    reason = reason or f'MuJoCo Playground cannot be imported ({one_line(e)}); install it with pip install -e ".[playground]"'
    print(f"{os.path.basename(__file__)}: error: {reason}", file=sys.stderr)
    raise SystemExit(2) from None
VIDEO_CLIP_STEPS = 100  # frames of a training clip (--capture-video), as the Isaac Gym variant films


@functools.cache  # one set of compiled functions per configuration: the evaluation after training reuses them
def make_env(env_id, num_envs, episode_length=None, impl="jax"):
    """`num_envs` copies of a Playground task, stepped as one batch by jitted JAX functions.

    Brax's VmapWrapper batches the task (`jax.vmap`) and its EpisodeWrapper ends episodes at the time limit,
    marking those ends in `state.info["truncation"]` and summing each episode's reward and length. The
    auto-reset is ours: an env whose episode ended continues from its row of `fresh`, a batch of new initial
    states the loop draws once per rollout, and the step also returns the observation the episode ended in.
    """
    config = registry.get_default_config(env_id)
    task = registry.load(env_id, config_overrides={"impl": impl})
    env = EpisodeWrapper(VmapWrapper(task), episode_length or config.episode_length, config.action_repeat)

    def reset(key):
        return env.reset(jax.random.split(key, num_envs))

    def step(state, action, fresh):
        """(next state, final observation, reward, done, truncated, episode return, episode length) of every env."""
        state = env.step(state, jnp.clip(action, -1.0, 1.0))  # Playground's actions lie in [-1, 1]
        done, episode = state.done.astype(bool), state.info["episode_metrics"]

        def restart(new, old):
            return jnp.where(done.reshape(done.shape + (1,) * (old.ndim - 1)), new, old)

        truncated = state.info["truncation"]  # set where the time limit, not the task, ended the episode
        stats = (state.reward, done.astype(jnp.float32), truncated, episode["sum_reward"], episode["length"])
        return jax.tree.map(restart, fresh, state), state.obs, *stats

    return SimpleNamespace(
        reset=jax.jit(reset),
        step=jax.jit(step),
        observation_size=task.observation_size,
        action_size=task.action_size,
        mj_model=task.mj_model,
        dt=task.dt * config.action_repeat,
    )


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class RunningMeanStd(nn.Module):
    """Running mean and variance of the observations; buffers, so the agent's state_dict saves them."""

    def __init__(self, shape):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))

    def update(self, x):
        """Fold a batch of observations in (Chan et al.'s parallel algorithm), in place, on the device."""
        batch_mean, batch_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta, total = batch_mean - self.mean, self.count + n
        self.mean.add_(delta * (n / total))
        self.var.copy_((self.var * self.count + batch_var * n + delta**2 * (self.count * n / total)) / total)
        self.count.add_(n)

    def normalize(self, x):
        return ((x - self.mean) / torch.sqrt(self.var + 1e-8)).clamp(-10.0, 10.0)


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        obs_dim, action_dim = envs.observation_size, envs.action_size
        self.obs_rms = RunningMeanStd(obs_dim)
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, action_dim), std=0.01),
        )
        # the log-std does not depend on the state: one learned number per action dimension
        self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def get_value(self, x):
        return self.critic(x).squeeze(-1)

    def sample_action(self, x, deterministic=False):
        """Rollout: sample actions (or take the mean). Log-probabilities and values come later, batched."""
        mean = self.actor_mean(x)
        return mean if deterministic else mean + self.actor_logstd.exp() * torch.randn_like(mean)

    def evaluate_actions(self, x, action):
        """Log-probability and entropy (summed over action dims) of given actions, and the state value."""
        mean = self.actor_mean(x)
        logstd = self.actor_logstd.expand_as(mean)
        logprob = (-0.5 * ((action - mean) / logstd.exp()) ** 2 - logstd - 0.5 * math.log(2 * math.pi)).sum(-1)
        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + logstd).sum(-1)
        return logprob, entropy, self.critic(x).squeeze(-1)


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("num_envs", "record_video_step_frequency")
    exp.require(args.episode_length is None or args.episode_length > 0, "--episode-length must be positive")
    exp.require(args.impl in ("jax", "warp"), f"--impl must be jax or warp, got {args.impl!r}")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    exp.require(args.batch_size % args.num_minibatches == 0, "--num-minibatches does not divide --num-envs × --num-steps")
    exp.require(args.minibatch_size > 1 or not args.norm_adv, "--norm-adv needs minibatches of at least 2 transitions")
    exp.require(args.num_iterations > 0, f"--total-timesteps is less than one rollout batch ({args.batch_size} steps)")
    examples = f"e.g. {', '.join(registry.dm_control_suite.ALL_ENVS[3:9])} (all: mujoco_playground.registry.ALL_ENVS)"
    exp.require(args.env_id in registry.ALL_ENVS, f"unknown Playground task {args.env_id!r}; {examples}")
    problem = mujoco_problem(filming=args.capture_video)
    exp.require(not problem, problem)
    run_name = exp.run_name

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX takes GPU memory as it needs it, like torch
    # the simulator's keys come from --seed below
    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)
    if device.type == "cuda" and jax.default_backend() != "gpu":
        device = torch.device("cpu")  # DLPack shares memory within one device: with a CPU-only JAX, both on the CPU
    jax.config.update("jax_default_device", jax.devices("gpu" if device.type == "cuda" else "cpu")[0])

    # env setup, before any file is written; a task that fetches its robot from the MuJoCo Menagerie (git, on
    # first use) prints while it tries: kept quiet, its failure is one line
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            envs = make_env(args.env_id, args.num_envs, args.episode_length, args.impl)
    except Exception as e:
        exp.fail(f"cannot load the Playground task {args.env_id}: {e}")
    size = envs.observation_size
    exp.require(isinstance(size, int), f"{args.env_id} observes {size}; {exp.script} needs one observation vector")
    video = None
    if args.capture_video:
        try:
            video = FirstEnvVideo(envs.mj_model, f"videos/{run_name}", round(1 / envs.dt))
        except Exception as e:
            exp.fail(f"--capture-video: MuJoCo cannot render here ({e}); without a display set MUJOCO_GL=egl")
    writer = exp.start_logging()

    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)

    # rollout storage, all on the device
    obs = torch.zeros((args.num_steps, args.num_envs, envs.observation_size), device=device)
    actions = torch.zeros((args.num_steps, args.num_envs, envs.action_size), device=device)
    final_obs = torch.zeros_like(obs)  # the (normalised) observation each env ended the step in, before any reset
    rewards, dones, truncations, episodic_returns, episodic_lengths = torch.zeros(
        (5, args.num_steps, args.num_envs), device=device
    )

    key = jax.random.PRNGKey(args.seed)
    global_step, first_iteration = 0, 1
    if exp.loaded_checkpoint:
        exp.restore_run_state({"agent": agent, "optimizer": optimizer})  # the observation statistics too
        global_step, first_iteration = exp.saved_iteration(args.num_iterations, args.batch_size)
        # the batch's simulator state: the saved arrays, of the shapes and in the structure of a fresh reset's
        fresh_state = jax.eval_shape(envs.reset, jax.random.fold_in(key, 0))
        saved_state = exp.saved_tree("env_state", jax.tree.leaves(fresh_state))
        state = jax.device_put(jax.tree.unflatten(jax.tree.structure(fresh_state), saved_state))
        next_obs = exp.saved_array("next_obs", (args.num_envs, envs.observation_size), torch.float32).to(device)
    else:
        state = envs.reset(jax.random.fold_in(key, 0))
        raw_obs = torch.from_dlpack(state.obs)  # the simulator's observation buffer itself, on the same device
        agent.obs_rms.update(raw_obs)
        next_obs = agent.obs_rms.normalize(raw_obs)
    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        for iteration in range(first_iteration, args.num_iterations + 1):
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate
            # the initial states of the episodes that start in this rollout: one batched reset per rollout
            fresh = envs.reset(jax.random.fold_in(key, iteration))
            rollout_start = global_step

            with torch.inference_mode():
                for step in range(args.num_steps):
                    exp.raise_if_stopped()
                    global_step += args.num_envs
                    obs[step] = next_obs
                    actions[step] = action = agent.sample_action(next_obs)

                    # DLPack both ways: JAX reads the action tensor's memory, torch the simulator's arrays
                    state, *out = envs.step(state, jnp.from_dlpack(action), fresh)
                    final, reward, done, truncated, episodic_return, episodic_length = (torch.from_dlpack(x) for x in out)
                    final_obs[step] = agent.obs_rms.normalize(final)
                    rewards[step] = reward * args.reward_scaler
                    dones[step], truncations[step] = done, truncated
                    episodic_returns[step], episodic_lengths[step] = episodic_return, episodic_length
                    raw_obs = torch.from_dlpack(state.obs)
                    agent.obs_rms.update(raw_obs)
                    next_obs = agent.obs_rms.normalize(raw_obs)

                    vector_step = global_step // args.num_envs - 1
                    if video is not None and vector_step % args.record_video_step_frequency < VIDEO_CLIP_STEPS:
                        video.add(state)  # copies env 0's positions to the host: only while a clip is recorded
                        if len(video.frames) == VIDEO_CLIP_STEPS:
                            video.write(f"rl-video-step-{vector_step + 1 - VIDEO_CLIP_STEPS}")

            # The episodes that ended in this rollout: one read from the device, then each is logged at its step.
            ended = dones.nonzero().tolist()
            returns_host, lengths_host = episodic_returns.cpu(), episodic_lengths.cpu()
            for s, i in ended:
                step_ended, episodic_return = rollout_start + (s + 1) * args.num_envs, returns_host[s, i].item()
                print(f"global_step={step_ended}, episodic_return={episodic_return}")
                writer.add_scalar("charts/episodic_return", episodic_return, step_ended)
                writer.add_scalar("charts/episodic_length", int(lengths_host[s, i]), step_ended)

            with torch.no_grad():
                # The parameters did not change during the rollout: log-probabilities and values in one batched call.
                logprobs, _, values = agent.evaluate_actions(obs, actions)
                next_value = agent.get_value(next_obs)
                # A time limit is not a true end: credit the value of the (normalised) state the episode was cut at.
                cut = truncations.bool()
                rewards[cut] += args.gamma * agent.get_value(final_obs[cut])

                # GAE on the device; dones[t] cuts the recursion, so no advantage flows across an episode boundary.
                advantages = torch.zeros_like(rewards)
                lastgaelam = 0.0
                for t in reversed(range(args.num_steps)):
                    nextvalues = next_value if t == args.num_steps - 1 else values[t + 1]
                    nextnonterminal = 1.0 - dones[t]
                    delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                    advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                returns = advantages + values

            # one flat batch of the rollout
            b_obs = obs.reshape((-1, envs.observation_size))
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape((-1, envs.action_size))
            b_advantages = advantages.reshape(-1)
            b_returns = returns.reshape(-1)
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
                        v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
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

            var_y = b_returns.var(correction=0).item()
            explained_var = math.nan if var_y == 0 else 1 - (b_returns - b_values).var(correction=0).item() / var_y

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
                state_now = {"agent": agent.state_dict(), "optimizer": optimizer.state_dict(), "next_obs": next_obs}
                env_state = jax.tree.leaves(jax.device_get(state))  # the batch's simulator state, as host arrays
                exp.save_checkpoint(global_step, {"iteration": iteration, "env_state": env_state, **state_now})

        if video is not None:
            video.write(f"rl-video-step-{global_step // args.num_envs - len(video.frames)}")  # the clip in progress
            video.close()  # its GL context now: at exit another library's atexit may have ended EGL first
        if args.save_model:
            exp.save_model(agent.state_dict())  # the weights and, as buffers, the observation statistics
            episodic_returns_eval = evaluate_playground(  # on the training's batch shape: its compiled functions are reused
                exp.model_path,
                make_env,
                args.env_id,
                10,
                f"{run_name}-eval",
                Agent,
                device,
                args.capture_video,
                num_envs=args.num_envs,
                episode_length=args.episode_length,
                impl=args.impl,
            )
            exp.log_evaluation_and_upload(episodic_returns_eval, hub_algorithm_name="PPO")
