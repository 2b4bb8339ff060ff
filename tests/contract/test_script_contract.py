"""What every algorithm script promises (docs/community/script-contract.md): outputs, determinism, bad input.

Each script is run as a user runs it, in a scratch folder, and what it wrote is read back.
Add a row to SCRIPTS for every new algorithm file: its smoke run, its documented tags and every bad input it
refuses, written out (a row reads on its own; the same line in two rows is the same check in two files).
"""

import importlib.util
import math
import os
import re
import runpy
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fixtures.teachers import JAX_TEACHER_MODEL, TEACHER_MODEL, short_teacher_phase
from tests.helpers import (
    REPO,
    RanIntoTraining,
    Run,
    SignalAfterLines,
    egl_missing,
    libgl_missing,
    missing_system_package,
    run_in_process,
    run_script,
    script_env,
    wait_for_wandb_history_keys,
)


@dataclass(frozen=True)
class Script:
    name: str
    # a few steps, enough for every tag to be logged once and for two seeds to log different returns or losses
    # (the smoke run is seed 1; the determinism check reruns the same arguments plainly with seeds 1 and 2)
    smoke_args: tuple[str, ...]
    tags: frozenset[str]  # the documented TensorBoard scalars
    bad_input: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)  # case -> (args, expected text)
    saves_model: bool = True  # has --save-model (the reference gives some scripts none)
    captures_video: bool = True  # False: --capture-video is accepted and films no training (envpool's vector envs)
    # "avg": the XLA scripts log the mean of the envs' last finished games once per iteration
    # (charts/avg_episodic_return), not every game
    episode_stats: str = "each"
    env_id: str = "CartPole-v1"  # the env of smoke_args
    returns_are_lengths: bool = True  # CartPole pays 1 per step, so each return equals its length
    run_args: tuple[str, ...] = ()  # what any run needs besides the env and budget (e.g. a teacher model)

    def skip_without_its_system_libraries(self) -> None:
        """Procgen's Qt 5 (from a wheel) loads the system's libGL: without it the script cannot start."""
        if self.env_id == "starpilot" and (reason := libgl_missing()):
            missing_system_package(reason)

    @property
    def films_through_egl(self) -> bool:
        """Its videos are MuJoCo renderings, made without a display through EGL."""
        return self.env_id in ("InvertedPendulum-v4", "CartpoleBalance")


# Bad values of the flags every script has: refused by the check every script's command line goes through
# (cleanrl_utils/runtime/command_line.py: tyro's errors in one line, then argument_problems), before any work (issue 51)
ARGUMENT_BAD_INPUT = {
    "seed below 0": (("--seed", "-1"), "--seed must be between 0 and 2147483647 (2**31 - 1), got -1"),
    "gamma not a number": (("--gamma", "nan"), "--gamma must be a finite number, got nan"),
    "gamma above 1": (("--gamma", "1.5"), "--gamma must be in [0, 1], got 1.5"),
    "timesteps written as a float": (("--total-timesteps", "1e30"), "Error parsing --total-timesteps: invalid literal"),
    "timesteps beyond 64 bits": (
        ("--total-timesteps", "1" + "0" * 30),
        "--total-timesteps must be at most 9223372036854775807",
    ),
    "exp name with a slash": (("--exp-name", "a/b"), "--exp-name cannot contain / or \\ (it becomes a folder name)"),
    "exp name '..'": (("--exp-name", ".."), "--exp-name cannot be '..'"),
    "empty exp name": (("--exp-name", ""), "--exp-name is empty"),
    "exp name longer than a file name": (("--exp-name", "x" * 300), "--exp-name is longer than a file name may be"),
    "exp name with a newline": (("--exp-name", "a\nb"), "--exp-name contains a control character"),
    "misspelt flag": (
        ("--total-timestep", "1"),
        "Unrecognized options: --total-timestep, 1 (perhaps you meant --total-timesteps",
    ),
    "flag without its value": (("--seed",), "Missing value for argument '--seed'"),
}
# the same check on the learning rate, under the two names most scripts give it (ppo_trxl.py's --init-lr: its row)
LEARNING_RATE_BAD_INPUT = {
    "learning rate not a number": (("--learning-rate", "nan"), "--learning-rate must be a finite number, got nan"),
    "learning rate infinite": (("--learning-rate", "inf"), "--learning-rate must be a finite number, got inf"),
    "learning rate -0": (("--learning-rate", "-0"), "--learning-rate must be positive, got -0.0"),
}
POLICY_LR_BAD_INPUT = {
    "learning rate not a number": (("--policy-lr", "nan"), "--policy-lr must be a finite number, got nan"),
    "learning rate infinite": (("--policy-lr", "inf"), "--policy-lr must be a finite number, got inf"),
    "learning rate -0": (("--policy-lr", "-0"), "--policy-lr must be positive, got -0.0"),
}
# Cases that recur in the rows below, and why they are written as they are:
# - "rollout beyond this machine": the on-policy scripts allocate their rollout storage when the run starts, and
#   10**10 steps per env are more than any machine holds; "replay memory beyond this machine": the same for a
#   replay memory allocated at the start, refused before it is allocated.
# - "one-transition minibatches with norm-adv": the std of one advantage is NaN, and so would be every loss.
# - "missing ale-py", "missing mujoco", "missing envpool": the package is blocked in these tests (a real process
#   with a stand-in that raises ImportError first on the path); the script names the extra that installs it.

# what every script that logs each game logs
EPISODE_TAGS = frozenset({"charts/episodic_return", "charts/episodic_length", "charts/SPS"})
PPO_TAGS = EPISODE_TAGS | frozenset(
    {
        "charts/learning_rate",
        "losses/value_loss",
        "losses/policy_loss",
        "losses/entropy",
        "losses/old_approx_kl",
        "losses/approx_kl",
        "losses/clipfrac",
        "losses/explained_variance",
    }
)
DQN_TAGS = EPISODE_TAGS | {"losses/td_loss", "losses/q_values"}
SAC_TAGS = EPISODE_TAGS | frozenset(
    {
        "losses/qf1_values",
        "losses/qf2_values",
        "losses/qf1_loss",
        "losses/qf2_loss",
        "losses/qf_loss",
        "losses/actor_loss",
        "losses/alpha",
        "losses/alpha_loss",
    }
)
QDAGGER_TAGS = DQN_TAGS | {
    "charts/teacher/avg_episodic_return",
    "charts/offline/loss",
    "charts/offline/q_loss",
    "charts/offline/distill_loss",
    "charts/offline/avg_episodic_return",
    "charts/epsilon",
    "losses/loss",
    "losses/distill_loss",
    "charts/distill_coeff",
}
# envpool's Breakout-v5 stepped inside compiled JAX code: the mean of each env's last finished game is logged
# once per iteration (episode_stats="avg")
XLA_JAX_TAGS = frozenset(
    {
        "charts/avg_episodic_return",
        "charts/avg_episodic_length",
        "charts/learning_rate",
        "losses/value_loss",
        "losses/policy_loss",
        "losses/entropy",
        "losses/approx_kl",
        "losses/loss",
        "charts/SPS",
        "charts/SPS_update",
    }
)
PQN_ENVPOOL_TAGS = frozenset(
    {
        "charts/avg_episodic_return",
        "charts/episodic_return",
        "charts/episodic_length",
        "charts/learning_rate",
        "charts/SPS",
        "losses/td_loss",
        "losses/q_values",
    }
)

# The saved model's 10 evaluation games (and QDagger's teacher and offline games) are played at ε = --end-e. At
# 0.5 half the actions still come from the network, and an untrained one no longer idles after each lost life
# until a random FIRE: dqn_atari.py's smoke run 18.8 s at the default 0.01, 11.9 s at 0.5 (one other run beside)
QUICK_EVAL = ("--end-e", "0.5")
# 8 frames per update instead of 32-64: an Atari CNN's update costs about its batch (sac_atari.py's smoke run
# 29 s with its default 64, 11 s with 8); the losses are logged and two seeds differ all the same
SMALL_BATCH = ("--batch-size", "8")
# a QDagger run's teacher: an untrained dqn_atari(_jax).py model (written when this module imports it), played briefly
QDAGGER_RUN_ARGS = short_teacher_phase(TEACHER_MODEL)
QDAGGER_JAX_RUN_ARGS = (*short_teacher_phase(JAX_TEACHER_MODEL), *SMALL_BATCH)
# 2 epochs x 2 minibatches: the non-scan file unrolls every minibatch update into its compiled update
# without annealing, the learning rate is one constant: the iteration count is then not compiled in, and the smoke,
# determinism and interrupted runs (this one with 10^8 steps) share one compiled rollout and update per session
XLA_JAX_RUN_ARGS = ("--num-envs", "2", "--num-steps", "32", "--update-epochs", "2", "--num-minibatches", "2", "--no-anneal-lr")
# envpool Atari (Breakout-v5): random play ends a game every ~130 steps per env; one epoch keeps the CNN updates cheap
PQN_ENVPOOL_RUN_ARGS = ("--num-envs", "4", "--num-steps", "32", "--update-epochs", "1")
# Breakout-v5, not MontezumaRevenge-v5: a random Montezuma game lasts ~300-1400 steps, a Breakout one ~115-300.
# The normaliser's random play (2 x 64 steps) runs the first games near their end.
RND_RUN_ARGS = ("--num-envs", "4", "--num-steps", "64", "--num-iterations-obs-norm-init", "2", "--update-epochs", "2",
                "--num-minibatches", "2")  # fmt: skip
# MuJoCo Playground through MJX: 4 envs whose episodes the time limit ends after 50 steps
PLAYGROUND_ARGS = ("--num-envs", "4", "--num-steps", "16", "--episode-length", "50")

SCRIPTS = {
    # CartPole: each return equals its length
    "ppo.py": Script(
        name="ppo.py",
        smoke_args=("--total-timesteps", "2048"),
        tags=PPO_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "one-transition minibatches with norm-adv": (
                ("--num-envs", "1", "--num-steps", "4", "--num-minibatches", "4"),
                "--norm-adv needs minibatches of at least 2",
            ),
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
            "negative envs": (("--num-envs", "-1"), "--num-envs"),
        },
    ),
    "dqn.py": Script(
        name="dqn.py",
        smoke_args=("--total-timesteps", "1500", "--learning-starts", "500"),
        tags=DQN_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "several envs": (("--num-envs", "2"), "--num-envs"),
        },
    ),
    "dqn_jax.py": Script(
        name="dqn_jax.py",
        smoke_args=("--total-timesteps", "1500", "--learning-starts", "500"),
        tags=DQN_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "several envs": (("--num-envs", "2"), "--num-envs"),
        },
    ),
    "c51.py": Script(
        name="c51.py",
        smoke_args=("--total-timesteps", "1500", "--learning-starts", "500"),
        tags=EPISODE_TAGS | {"losses/loss", "losses/q_values"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "empty support": (("--v-min", "10", "--v-max", "10"), "--v-min < --v-max"),
            "several envs": (("--num-envs", "2"), "--num-envs"),
        },
    ),
    "c51_jax.py": Script(
        name="c51_jax.py",
        smoke_args=("--total-timesteps", "1500", "--learning-starts", "500"),
        tags=EPISODE_TAGS | {"losses/loss", "losses/q_values"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "empty support": (("--v-min", "10", "--v-max", "10"), "--v-min < --v-max"),
            "several envs": (("--num-envs", "2"), "--num-envs"),
        },
    ),
    "pqn.py": Script(
        name="pqn.py",
        smoke_args=("--total-timesteps", "2048"),
        tags=EPISODE_TAGS | {"charts/learning_rate", "losses/td_loss", "losses/q_values"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
            "lambda out of range": (("--q-lambda", "1.5"), "--q-lambda"),
        },
    ),
    # Continuous actions on MuJoCo's InvertedPendulum-v4 (video through EGL, headless). Not the scripts' default
    # Hopper-v4: a Hopper frame takes ~0.13 s to render here (InvertedPendulum's ~0.012 s), and an untrained policy
    # keeps Hopper up for ~150-200 steps, so the 3 filmed of the 10 evaluation episodes took 40-110 s of each smoke
    # run. An InvertedPendulum episode ends after a few steps, and each pays 1 per step.
    # "missing mujoco" runs the default env: its "v4 is out of date" warning must not make the error two lines.
    "ppo_continuous_action.py": Script(
        name="ppo_continuous_action.py",
        smoke_args=("--env-id", "InvertedPendulum-v4", "--total-timesteps", "1024", "--num-steps", "256"),
        tags=PPO_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "BipedalWalker-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "discrete actions": (("--env-id", "CartPole-v1"), "use ppo.py"),
            "missing mujoco": ((), '.[mujoco]"'),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "one-transition minibatches with norm-adv": (
                ("--num-envs", "1", "--num-steps", "4", "--num-minibatches", "4"),
                "--norm-adv needs minibatches of at least 2",
            ),
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
        },
        env_id="InvertedPendulum-v4",
    ),
    "rpo_continuous_action.py": Script(
        name="rpo_continuous_action.py",
        smoke_args=("--env-id", "InvertedPendulum-v4", "--total-timesteps", "1024", "--num-steps", "256"),
        tags=PPO_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "BipedalWalker-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "discrete actions": (("--env-id", "CartPole-v1"), "use ppo.py"),
            "missing mujoco": ((), '.[mujoco]"'),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
            "one-transition minibatches with norm-adv": (
                ("--num-envs", "1", "--num-steps", "4", "--num-minibatches", "4"),
                "--norm-adv needs minibatches of at least 2",
            ),
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "negative rpo alpha": (("--rpo-alpha", "-1"), "--rpo-alpha"),
        },
        env_id="InvertedPendulum-v4",
    ),
    # off-policy continuous control, tiny budgets: learning after 100 steps
    "sac_continuous_action.py": Script(
        name="sac_continuous_action.py",
        smoke_args=(
            "--total-timesteps",
            "300",
            "--env-id",
            "InvertedPendulum-v4",
            "--learning-starts",
            "100",
            "--batch-size",
            "32",
            "--buffer-size",
            "1000",
        ),  # fmt: skip
        tags=SAC_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **POLICY_LR_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "BipedalWalker-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "discrete actions": (("--env-id", "CartPole-v1"), "see dqn.py"),
            "missing mujoco": ((), '.[mujoco]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "negative envs": (("--num-envs", "-1"), "--num-envs"),
            "zero policy frequency": (("--policy-frequency", "0"), "--policy-frequency"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
        },
        env_id="InvertedPendulum-v4",
    ),
    "sac_continuous_action_jax.py": Script(
        name="sac_continuous_action_jax.py",
        smoke_args=(
            "--total-timesteps",
            "300",
            "--env-id",
            "InvertedPendulum-v4",
            "--learning-starts",
            "100",
            "--batch-size",
            "32",
            "--buffer-size",
            "1000",
        ),  # fmt: skip
        tags=SAC_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **POLICY_LR_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "BipedalWalker-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "discrete actions": (("--env-id", "CartPole-v1"), "see dqn.py"),
            "missing mujoco": ((), '.[mujoco]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "negative envs": (("--num-envs", "-1"), "--num-envs"),
            "zero policy frequency": (("--policy-frequency", "0"), "--policy-frequency"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
        },
        env_id="InvertedPendulum-v4",
    ),
    "ddpg_continuous_action.py": Script(
        name="ddpg_continuous_action.py",
        smoke_args=(
            "--total-timesteps",
            "300",
            "--env-id",
            "InvertedPendulum-v4",
            "--learning-starts",
            "100",
            "--batch-size",
            "32",
            "--buffer-size",
            "1000",
        ),  # fmt: skip
        tags=EPISODE_TAGS | {"losses/qf1_values", "losses/qf1_loss", "losses/actor_loss"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "BipedalWalker-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "discrete actions": (("--env-id", "CartPole-v1"), "see dqn.py"),
            "missing mujoco": ((), '.[mujoco]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "negative envs": (("--num-envs", "-1"), "--num-envs"),
            "zero policy frequency": (("--policy-frequency", "0"), "--policy-frequency"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
        },
        env_id="InvertedPendulum-v4",
    ),
    "ddpg_continuous_action_jax.py": Script(
        name="ddpg_continuous_action_jax.py",
        smoke_args=(
            "--total-timesteps",
            "300",
            "--env-id",
            "InvertedPendulum-v4",
            "--learning-starts",
            "100",
            "--batch-size",
            "32",
            "--buffer-size",
            "1000",
        ),  # fmt: skip
        tags=EPISODE_TAGS | {"losses/qf1_values", "losses/qf1_loss", "losses/actor_loss"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "BipedalWalker-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "discrete actions": (("--env-id", "CartPole-v1"), "see dqn.py"),
            "missing mujoco": ((), '.[mujoco]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "negative envs": (("--num-envs", "-1"), "--num-envs"),
            "zero policy frequency": (("--policy-frequency", "0"), "--policy-frequency"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
        },
        env_id="InvertedPendulum-v4",
    ),
    "td3_continuous_action.py": Script(
        name="td3_continuous_action.py",
        smoke_args=(
            "--total-timesteps",
            "300",
            "--env-id",
            "InvertedPendulum-v4",
            "--learning-starts",
            "100",
            "--batch-size",
            "32",
            "--buffer-size",
            "1000",
        ),  # fmt: skip
        tags=SAC_TAGS - {"losses/alpha", "losses/alpha_loss"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "BipedalWalker-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "discrete actions": (("--env-id", "CartPole-v1"), "see dqn.py"),
            "missing mujoco": ((), '.[mujoco]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "negative envs": (("--num-envs", "-1"), "--num-envs"),
            "zero policy frequency": (("--policy-frequency", "0"), "--policy-frequency"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
        },
        env_id="InvertedPendulum-v4",
    ),
    "td3_continuous_action_jax.py": Script(
        name="td3_continuous_action_jax.py",
        smoke_args=(
            "--total-timesteps",
            "300",
            "--env-id",
            "InvertedPendulum-v4",
            "--learning-starts",
            "100",
            "--batch-size",
            "32",
            "--buffer-size",
            "1000",
        ),  # fmt: skip
        tags=SAC_TAGS - {"losses/alpha", "losses/alpha_loss"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "BipedalWalker-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "discrete actions": (("--env-id", "CartPole-v1"), "see dqn.py"),
            "missing mujoco": ((), '.[mujoco]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "negative envs": (("--num-envs", "-1"), "--num-envs"),
            "zero policy frequency": (("--policy-frequency", "0"), "--policy-frequency"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
        },
        env_id="InvertedPendulum-v4",
    ),
    # Atari from pixels (the `atari` extra): Breakout games end after ~130 random steps, so tiny budgets log some;
    # its scores are not lengths
    "ppo_atari.py": Script(
        name="ppo_atari.py",
        smoke_args=("--num-envs", "2", "--num-steps", "64", "--total-timesteps", "512"),
        tags=PPO_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "missing ale-py": ((), '.[atari]"'),
            "one-transition minibatches with norm-adv": (
                ("--num-envs", "1", "--num-steps", "4", "--num-minibatches", "4"),
                "--norm-adv needs minibatches of at least 2",
            ),
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
        },
        env_id="BreakoutNoFrameskip-v4",
        returns_are_lengths=False,
    ),
    "dqn_atari.py": Script(
        name="dqn_atari.py",
        smoke_args=(
            "--buffer-size",
            "1000",
            "--learning-starts",
            "200",
            "--total-timesteps",
            "400",
            "--train-frequency",
            "4",
            *SMALL_BATCH,
            *QUICK_EVAL,
        ),  # fmt: skip
        tags=DQN_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "missing ale-py": ((), '.[atari]"'),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "several envs": (("--num-envs", "2"), "--num-envs"),
            "replay memory too small": (("--buffer-size", "0"), "--buffer-size must be positive"),
        },
        env_id="BreakoutNoFrameskip-v4",
        returns_are_lengths=False,
    ),
    "dqn_atari_jax.py": Script(
        name="dqn_atari_jax.py",
        smoke_args=(
            "--buffer-size",
            "1000",
            "--learning-starts",
            "200",
            "--total-timesteps",
            "400",
            "--train-frequency",
            "4",
            *SMALL_BATCH,
            *QUICK_EVAL,
        ),  # fmt: skip
        tags=DQN_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "missing ale-py": ((), '.[atari]"'),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "several envs": (("--num-envs", "2"), "--num-envs"),
            "replay memory too small": (("--buffer-size", "0"), "--buffer-size must be positive"),
        },
        env_id="BreakoutNoFrameskip-v4",
        returns_are_lengths=False,
    ),
    # 25 updates (half of dqn_atari.py's): a distributional update costs more, Rainbow's (3 forward passes) most
    "c51_atari.py": Script(
        name="c51_atari.py",
        smoke_args=(
            "--buffer-size",
            "1000",
            "--learning-starts",
            "300",
            "--total-timesteps",
            "401",
            *SMALL_BATCH,
            *QUICK_EVAL,
        ),  # fmt: skip
        tags=EPISODE_TAGS | {"losses/q_values", "losses/loss"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "missing ale-py": ((), '.[atari]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "several envs": (("--num-envs", "2"), "--num-envs"),
            "replay memory too small": (("--buffer-size", "0"), "--buffer-size must be positive"),
            "empty support": (("--v-min", "10", "--v-max", "10"), "--v-min < --v-max"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
        },
        env_id="BreakoutNoFrameskip-v4",
        returns_are_lengths=False,
    ),
    "c51_atari_jax.py": Script(
        name="c51_atari_jax.py",
        smoke_args=(
            "--buffer-size",
            "1000",
            "--learning-starts",
            "300",
            "--total-timesteps",
            "401",
            *SMALL_BATCH,
            *QUICK_EVAL,
        ),  # fmt: skip
        tags=EPISODE_TAGS | {"losses/q_values", "losses/loss"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "missing ale-py": ((), '.[atari]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "several envs": (("--num-envs", "2"), "--num-envs"),
            "replay memory too small": (("--buffer-size", "0"), "--buffer-size must be positive"),
            "empty support": (("--v-min", "10", "--v-max", "10"), "--v-min < --v-max"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
        },
        env_id="BreakoutNoFrameskip-v4",
        returns_are_lengths=False,
    ),
    "rainbow_atari.py": Script(
        name="rainbow_atari.py",
        smoke_args=("--buffer-size", "1000", "--learning-starts", "300", "--total-timesteps", "401", *SMALL_BATCH),
        tags=EPISODE_TAGS | {"losses/q_values", "losses/td_loss", "charts/beta"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "missing ale-py": ((), '.[atari]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "several envs": (("--num-envs", "2"), "--num-envs"),
            "replay memory too small": (("--buffer-size", "0"), "--buffer-size must be positive"),
            "empty support": (("--v-min", "10", "--v-max", "10"), "--v-min < --v-max"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "zero n-step": (("--n-step", "0"), "--n-step"),
            "beta above 1": (("--prioritized-replay-beta", "1.5"), "--prioritized-replay-beta"),
        },
        env_id="BreakoutNoFrameskip-v4",
        returns_are_lengths=False,
    ),
    "sac_atari.py": Script(
        name="sac_atari.py",
        smoke_args=(
            "--env-id",
            "BreakoutNoFrameskip-v4",
            "--buffer-size",
            "1000",
            "--learning-starts",
            "200",
            *SMALL_BATCH,
            "--total-timesteps",
            "400",
        ),  # fmt: skip
        tags=SAC_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **POLICY_LR_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "missing ale-py": ((), '.[atari]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "replay memory too small": (("--buffer-size", "0"), "--buffer-size must be positive"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "zero update frequency": (("--update-frequency", "0"), "--update-frequency"),
        },
        env_id="BreakoutNoFrameskip-v4",
        returns_are_lengths=False,
    ),
    # 25 online updates (steps 200-296, every 4th): the first at step 200, where the losses are logged; an IMPALA-CNN
    # update costs ~0.44 s on one thread, so each one left out saves that much
    "qdagger_dqn_atari_impalacnn.py": Script(
        name="qdagger_dqn_atari_impalacnn.py",
        smoke_args=(
            *QDAGGER_RUN_ARGS,
            "--offline-eval-frequency",
            "10",
            "--learning-starts",
            "196",
            "--total-timesteps",
            "300",
            *SMALL_BATCH,
            *QUICK_EVAL,
        ),  # fmt: skip
        tags=QDAGGER_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "missing ale-py": ((), '.[atari]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "replay memory too small": (("--buffer-size", "0"), "--buffer-size must be positive"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "several envs": (("--num-envs", "2"), "--num-envs"),
            "missing teacher file": (("--teacher-model-path", "nosuch.cleanrl_model"), "no teacher model file at nosuch"),
            "offline phase without teacher data": (("--teacher-steps", "0"), "--teacher-steps"),
        },
        env_id="BreakoutNoFrameskip-v4",
        returns_are_lengths=False,
        run_args=QDAGGER_RUN_ARGS,
    ),
    # ~27 online updates from step 200 (an IMPALA-CNN update costs ~8 of dqn_atari_jax.py's on this CPU)
    "qdagger_dqn_atari_jax_impalacnn.py": Script(
        name="qdagger_dqn_atari_jax_impalacnn.py",
        smoke_args=(
            *QDAGGER_JAX_RUN_ARGS,
            "--offline-eval-frequency",
            "10",
            "--learning-starts",
            "200",
            "--total-timesteps",
            "300",
            *QUICK_EVAL,
        ),  # fmt: skip
        tags=QDAGGER_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "missing ale-py": ((), '.[atari]"'),
            "zero batch size": (("--batch-size", "0"), "--batch-size"),
            "replay memory too small": (("--buffer-size", "0"), "--buffer-size must be positive"),
            "replay memory beyond this machine": (
                ("--buffer-size", str(10**12)),
                "--buffer-size 1000000000000: a replay memory of",
            ),
            "batch larger than the replay memory": (
                ("--batch-size", "2000", "--buffer-size", "1000"),
                "--batch-size 2000 is more than",
            ),
            "several envs": (("--num-envs", "2"), "--num-envs"),
            "missing teacher file": (("--teacher-model-path", "nosuch.cleanrl_model"), "no teacher model file at nosuch"),
            "offline phase without teacher data": (("--teacher-steps", "0"), "--teacher-steps"),
        },
        env_id="BreakoutNoFrameskip-v4",
        returns_are_lengths=False,
        run_args=QDAGGER_JAX_RUN_ARGS,
    ),
    "ppo_atari_lstm.py": Script(
        name="ppo_atari_lstm.py",
        smoke_args=("--num-envs", "2", "--num-minibatches", "2", "--num-steps", "64", "--total-timesteps", "512"),
        tags=PPO_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "missing ale-py": ((), '.[atari]"'),
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "minibatches do not divide the envs": (("--num-minibatches", "3"), "does not divide --num-envs 8"),
        },
        env_id="BreakoutNoFrameskip-v4",
        returns_are_lengths=False,
    ),
    # the single-process form (world size 1); two ranks under torchrun: tests/algorithms/test_ppo_atari_multigpu.py
    "ppo_atari_multigpu.py": Script(
        name="ppo_atari_multigpu.py",
        smoke_args=("--local-num-envs", "2", "--num-steps", "64", "--total-timesteps", "512"),
        tags=PPO_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "missing optional dependency": (("--env-id", "LunarLander-v3"), '.[box2d]"'),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "missing ale-py": ((), '.[atari]"'),
            "minibatches do not divide the local batch": (("--num-minibatches", "3"), "does not divide local-num-envs"),
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "one-transition minibatches with norm-adv": (
                ("--local-num-envs", "1", "--num-steps", "4", "--num-minibatches", "4"),
                "--norm-adv needs minibatches of at least 2",
            ),
            "unknown backend": (("--backend", "nosuch"), "--backend must be one of gloo, nccl, mpi"),
            "device ids that do not fit": (("--device-ids", "0", "1"), "--device-ids"),
        },
        env_id="BreakoutNoFrameskip-v4",
        returns_are_lengths=False,
    ),
    # ppo_trxl lives in its own folder: its name is a path below cleanrl/, its exp_name the file stem "ppo_trxl".
    # ppo_pettingzoo_ma_atari.py logs per-player tags and scores its saved model in points against a random player:
    # tests/algorithms/test_ppo_pettingzoo_ma_atari.py
    "ppo_trxl/ppo_trxl.py": Script(
        name="ppo_trxl/ppo_trxl.py",
        smoke_args=(
            "--env-id",
            "ProofofMemory-v0",
            "--num-envs",
            "4",
            "--num-steps",
            "64",
            "--total-timesteps",
            "256",
            "--trxl-num-layers",
            "2",
            "--trxl-dim",
            "16",
            "--trxl-num-heads",
            "2",
            "--trxl-memory-length",
            "8",
        ),  # fmt: skip
        tags=PPO_TAGS
        | {
            "charts/entropy_coefficient",
            "losses/loss",
            "losses/reconstruction_loss",
            "episode/r_mean",
            "episode/l_mean",
            "episode/t_mean",
            "episode/value_mean",
            "episode/advantage_mean",
        },
        bad_input={
            **ARGUMENT_BAD_INPUT,
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "learning rate not a number": (("--init-lr", "nan"), "--init-lr must be a finite number, got nan"),
            "learning rate infinite": (("--init-lr", "inf"), "--init-lr must be a finite number, got inf"),
            "learning rate -0": (("--init-lr", "-0"), "--init-lr must be positive, got -0.0"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "checkpoints of Memory Gym": (
                ("--env-id", "MortarMayhem-Grid-v0", "--checkpoint-frequency", "2"),
                "cannot be saved",
            ),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
            "heads do not divide the width": (("--trxl-num-heads", "5"), "does not divide --trxl-dim"),
            "one-transition minibatches with norm-adv": (
                ("--norm-adv", "--num-envs", "1", "--num-steps", "4", "--num-minibatches", "4"),
                "--norm-adv needs minibatches of at least 2",
            ),
            "reconstruction of vector observations": (
                ("--env-id", "ProofofMemory-v0", "--reconstruction-coef", "0.1"),
                "image",
            ),
        },
        env_id="ProofofMemory-v0",
        returns_are_lengths=False,
    ),
    # envpool's Atari games (envpool is blocked in these tests' real processes: a new interpreter importing envpool
    # also imports JAX, ~4 s). No training video (envpool's vector envs render none) and no --save-model (as in the
    # reference; the scan file has one, and its evaluation films its first game).
    "ppo_atari_envpool_xla_jax.py": Script(
        name="ppo_atari_envpool_xla_jax.py",
        smoke_args=(*XLA_JAX_RUN_ARGS, "--total-timesteps", "256"),
        tags=XLA_JAX_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "missing envpool": ((), '.[envpool]"'),
            # the learning rate's schedule counts the updates in JAX's 32-bit ints
            "more updates than 32 bits count": (("--total-timesteps", str(2**62)), "updates, more than 2**31 - 1"),
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
        },
        saves_model=False,
        captures_video=False,
        episode_stats="avg",
        env_id="Breakout-v5",
        returns_are_lengths=False,
        run_args=XLA_JAX_RUN_ARGS,
    ),
    "ppo_atari_envpool_xla_jax_scan.py": Script(
        name="ppo_atari_envpool_xla_jax_scan.py",
        smoke_args=(*XLA_JAX_RUN_ARGS, "--total-timesteps", "256"),
        tags=XLA_JAX_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "missing envpool": ((), '.[envpool]"'),
            # the learning rate's schedule counts the updates in JAX's 32-bit ints
            "more updates than 32 bits count": (("--total-timesteps", str(2**62)), "updates, more than 2**31 - 1"),
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "continuous actions": (("--env-id", "Pendulum-v1"), "needs Discrete"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
        },
        captures_video=False,
        episode_stats="avg",
        env_id="Breakout-v5",
        returns_are_lengths=False,
        run_args=XLA_JAX_RUN_ARGS,
    ),
    # 2 x 192 steps end at least one Breakout game per sub-env (a random game lasts ~125 steps)
    "ppo_atari_envpool.py": Script(
        name="ppo_atari_envpool.py",
        smoke_args=("--num-envs", "2", "--num-steps", "32", "--total-timesteps", "384"),
        tags=PPO_TAGS | {"charts/avg_episodic_return"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "one-transition minibatches with norm-adv": (
                ("--num-envs", "1", "--num-steps", "4", "--num-minibatches", "4"),
                "--norm-adv needs minibatches of at least 2",
            ),
            "missing envpool": ((), '.[envpool]"'),
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game of envpool"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "negative envs": (("--num-envs", "-1"), "--num-envs"),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
            "gymnasium's Atari id": (("--env-id", "BreakoutNoFrameskip-v4"), "ppo_atari.py"),
        },
        saves_model=False,
        captures_video=False,
        env_id="Breakout-v5",
        returns_are_lengths=False,
        run_args=("--num-envs", "8", "--num-steps", "32"),  # 5 games end within ~4 small iterations
    ),
    "pqn_atari_envpool.py": Script(
        name="pqn_atari_envpool.py",
        smoke_args=(*PQN_ENVPOOL_RUN_ARGS, "--total-timesteps", "640"),
        tags=PQN_ENVPOOL_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "missing envpool": ((), '.[envpool]"'),
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "not an envpool env": (("--env-id", "BreakoutNoFrameskip-v4"), "not an envpool env"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "lambda out of range": (("--q-lambda", "1.5"), "--q-lambda"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game"),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
        },
        saves_model=False,
        captures_video=False,
        env_id="Breakout-v5",
        returns_are_lengths=False,
        run_args=PQN_ENVPOOL_RUN_ARGS,
    ),
    "pqn_atari_envpool_lstm.py": Script(
        name="pqn_atari_envpool_lstm.py",
        smoke_args=(*PQN_ENVPOOL_RUN_ARGS, "--total-timesteps", "640"),
        tags=PQN_ENVPOOL_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "missing envpool": ((), '.[envpool]"'),
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "not an envpool env": (("--env-id", "BreakoutNoFrameskip-v4"), "not an envpool env"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "lambda out of range": (("--q-lambda", "1.5"), "--q-lambda"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "minibatches do not divide the envs": (("--num-minibatches", "3"), "does not divide --num-envs 8"),
        },
        saves_model=False,
        captures_video=False,
        env_id="Breakout-v5",
        returns_are_lengths=False,
        run_args=PQN_ENVPOOL_RUN_ARGS,
    ),
    "ppo_rnd_envpool.py": Script(
        name="ppo_rnd_envpool.py",
        smoke_args=("--env-id", "Breakout-v5", *RND_RUN_ARGS, "--total-timesteps", "256"),
        tags=(PPO_TAGS - {"losses/clipfrac", "losses/explained_variance"})
        | {"charts/avg_episodic_return", "charts/episode_curiosity_reward", "losses/fwd_loss"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "one-transition minibatches with norm-adv": (
                ("--num-envs", "1", "--num-steps", "4", "--num-minibatches", "4"),
                "--norm-adv needs minibatches of at least 2",
            ),
            "missing envpool": ((), '.[envpool]"'),
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "not an Atari game": (("--env-id", "CartPole-v1"), "not an Atari game of envpool"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "negative envs": (("--num-envs", "-1"), "--num-envs"),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
            "gymnasium's Atari id": (("--env-id", "BreakoutNoFrameskip-v4"), "named like MontezumaRevenge-v5"),
            "predictor trained on nothing": (("--update-proportion", "0"), "--update-proportion"),
            "normaliser without random play": (("--num-iterations-obs-norm-init", "0"), "--num-iterations-obs-norm-init"),
        },
        saves_model=False,
        captures_video=False,
        env_id="Breakout-v5",
        returns_are_lengths=False,
        run_args=RND_RUN_ARGS,
    ),
    # Procgen through envpool (the `procgen` extra): no --save-model (none in the reference), --capture-video
    # accepted and ignored. Starpilot games end after ~35-160 random steps: 4 envs x 64 steps log one or more.
    "ppo_procgen.py": Script(
        name="ppo_procgen.py",
        smoke_args=(
            "--num-envs",
            "4",
            "--num-steps",
            "64",
            "--total-timesteps",
            "256",
            "--num-minibatches",
            "2",
            "--update-epochs",
            "1",
        ),  # fmt: skip
        tags=PPO_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "missing envpool": ((), '.[procgen]"'),
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "envpool id instead of a game": (("--env-id", "StarpilotHard-v0"), "--env-id starpilot --distribution-mode hard"),
            "unknown distribution mode": (("--distribution-mode", "medium"), "--distribution-mode must be one of"),
            "mode the game lacks": (("--env-id", "bigfish", "--distribution-mode", "memory"), "bigfish has no memory"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "one-transition minibatches with norm-adv": (
                ("--num-envs", "1", "--num-steps", "4", "--num-minibatches", "4"),
                "--norm-adv needs minibatches of at least 2",
            ),
        },
        saves_model=False,
        captures_video=False,
        env_id="starpilot",
        returns_are_lengths=False,
        run_args=("--num-envs", "8"),
    ),
    # one phase: 2 policy iterations, then 1 auxiliary epoch over the 8 stored rollouts (2 minibatches of 4). The game
    # and mode checks are ppo_procgen.py's (tests/algorithms/test_procgen.py maps both files' names).
    "ppg_procgen.py": Script(
        name="ppg_procgen.py",
        smoke_args=(
            "--num-envs",
            "4",
            "--num-steps",
            "32",
            "--total-timesteps",
            "256",
            "--num-minibatches",
            "2",
            "--n-iteration",
            "2",
            "--e-auxiliary",
            "1",
        ),  # fmt: skip
        tags=PPO_TAGS | {"losses/aux/kl_loss", "losses/aux/aux_value_loss", "losses/aux/real_value_loss"},
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "missing envpool": ((), '.[procgen]"'),
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
            "rollout beyond this machine": (
                ("--num-steps", str(10**10), "--total-timesteps", str(10**14)),
                "--num-envs × --num-steps",
            ),
            "less than one phase": (("--total-timesteps", "100000"), "less than one phase"),
            "value epochs other than 1": (("--v-value", "2"), "--v-value must be 1"),
            # the default 64 × 32 stored rollouts in minibatches of 3: 683 minibatches (the last of 2)
            "grad accumulation does not divide": (
                ("--num-aux-rollouts", "3", "--n-aux-grad-accum", "2"),
                "--n-aux-grad-accum 2 does not divide the 683 aux minibatches",
            ),
        },
        saves_model=False,
        captures_video=False,
        env_id="starpilot",
        returns_are_lengths=False,
        run_args=("--num-envs", "8", "--n-iteration", "2"),  # a small auxiliary buffer (default: 6.4 GB)
    ),
}
# MuJoCo Playground (the `playground` extra, which the test extra brings; elsewhere the row is left out and
# tests/algorithms/test_ppo_playground.py says why)
if importlib.util.find_spec("mujoco_playground") is not None or os.environ.get("CI") == "true":
    SCRIPTS["ppo_continuous_action_playground.py"] = Script(
        name="ppo_continuous_action_playground.py",
        smoke_args=(*PLAYGROUND_ARGS, "--total-timesteps", "640"),
        tags=PPO_TAGS,
        bad_input={
            **ARGUMENT_BAD_INPUT,
            **LEARNING_RATE_BAD_INPUT,
            "negative checkpoint frequency": (("--checkpoint-frequency", "-1"), "--checkpoint-frequency"),
            "one-transition minibatches with norm-adv": (
                ("--num-envs", "1", "--num-steps", "4", "--num-minibatches", "4"),
                "--norm-adv needs minibatches of at least 2",
            ),
            "unknown env id": (("--env-id", "NoSuchEnv-v0"), "NoSuchEnv"),
            "a Gymnasium id": (("--env-id", "CartPole-v1"), "unknown Playground task 'CartPole-v1'; e.g. CartpoleBalance"),
            "zero timesteps": (("--total-timesteps", "0"), "--total-timesteps"),
            "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
            "missing mujoco": ((), '.[playground]"'),  # mujoco is blocked: mujoco_playground cannot be imported
            "upload-model without save-model": (("--upload-model",), "add --save-model"),
        },
        env_id="CartpoleBalance",
        returns_are_lengths=False,
        run_args=PLAYGROUND_ARGS,
    )

SMOKE_TAGS = "smoke,v2.0.0-3-gabc1234"
LOSS_TAGS = ("losses/value_loss", "losses/td_loss", "losses/loss", "losses/qf_loss", "losses/qf1_loss")


@pytest.fixture(scope="module", params=sorted(SCRIPTS))
def smoke(request, tmp_path_factory) -> tuple[Script, Run]:
    """One short run per script with --save-model, --capture-video and --track (W&B offline), shared by the checks below.

    It runs in this process: a new interpreter would spend ~5 s importing torch (and torch._dynamo, on the first
    optimizer step) or JAX before each. Every script also runs as a real process in this file (its bad-input case
    in a real process: start, one line, exit code 2), and real training processes are killed and resumed in
    test_resume.py.
    """
    script = SCRIPTS[request.param]
    script.skip_without_its_system_libraries()
    cwd = tmp_path_factory.mktemp(Path(script.name).stem)
    save = ["--save-model"] if script.saves_model else []
    track = ["--track", "--wandb-project-name", "tests"]
    video = [] if script.films_through_egl and egl_missing() else ["--capture-video"]  # test_capture_video says why
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_TAGS", SMOKE_TAGS)  # as the benchmark runner's --auto-tag sets them
        run = run_in_process(script.name, *script.smoke_args, *save, *video, *track, cwd=cwd, timeout_s=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return script, run


def test_run_name_and_hyperparameters(smoke):
    script, run = smoke
    assert re.fullmatch(rf"{script.env_id}__{Path(script.name).stem}__1__\d+", run.run_dir.name)
    table = run.texts()["hyperparameters"]
    assert table.startswith("|param|value|")
    assert "|seed|1|" in table and f"|env_id|{script.env_id}|" in table
    assert run.texts()["tags"] == SMOKE_TAGS  # what cleanrl_utils.rlops groups local runs by


def test_documented_tags_are_logged(smoke):
    script, run = smoke
    scalars = run.scalars()
    missing = script.tags - set(scalars)
    assert not missing, f"{script.name} did not log {sorted(missing)}"
    undocumented = set(scalars) - script.tags - {"eval/episodic_return"}
    assert not undocumented, f"{script.name} logged undocumented tags {sorted(undocumented)}"


def return_tag(script: Script) -> str:
    return "charts/avg_episodic_return" if script.episode_stats == "avg" else "charts/episodic_return"


def test_every_episode_is_logged_and_printed(smoke):
    script, run = smoke
    scalars = run.scalars()
    key = return_tag(script).removeprefix("charts/")
    printed = re.findall(rf"^global_step=(\d+), {key}=(-?[\d.]+)$", run.stdout, flags=re.M)
    logged = scalars[return_tag(script)]
    assert len(printed) == len(logged) == len(scalars[return_tag(script).replace("return", "length")]) > 0
    assert [(int(s), float(r)) for s, r in printed] == [(s, r) for s, r in logged]
    if script.returns_are_lengths:
        assert [r for _, r in logged] == [n for _, n in scalars["charts/episodic_length"]]


def test_saved_model_is_evaluated_for_ten_episodes(smoke):
    script, run = smoke
    if not script.saves_model:
        assert not list(run.run_dir.glob("*.cleanrl_model")) and "eval/episodic_return" not in run.scalars()
        return
    model = run.run_dir / f"{Path(script.name).stem}.cleanrl_model"
    assert model.is_file() and model.stat().st_size > 0
    evals = run.scalars()["eval/episodic_return"]
    assert [step for step, _ in evals] == list(range(10))
    assert all(r >= 1 if script.returns_are_lengths else math.isfinite(r) for _, r in evals)


def test_capture_video_writes_mp4s(smoke):
    script, run = smoke
    if script.films_through_egl and (reason := egl_missing()):
        missing_system_package(reason)
    if not script.captures_video:  # no training video; a saving script may still film its evaluation
        assert not (run.cwd / "videos" / run.run_dir.name).exists()
        return
    for suffix in ("", "-eval") if script.saves_model else ("",):
        videos = run.videos(suffix)
        assert videos, f"no mp4 under videos/{run.run_dir.name}{suffix}"
        assert all(v.stat().st_size > 1000 and v.read_bytes()[4:8] == b"ftyp" for v in videos)


# Two more runs each (the smoke run is shared). For the first group below those cost 50-85 s of a CI worker: their
# determinism checks are `slow` (run them with `pytest -m slow tests/contract/test_script_contract.py -k same_seed`). For the
# second (4-17 s: the other Atari, envpool and Procgen rows, the MuJoCo ones but DDPG's) they are `extended`: the
# quick run leaves them out and CI runs them after it. Every other check of those scripts stays in the quick run, and
# the cheap rows (CartPole and its JAX twins, ddpg_continuous_action.py, ppo_trxl.py) keep this one there.
SLOW_DETERMINISM = {
    "qdagger_dqn_atari_impalacnn.py", "qdagger_dqn_atari_jax_impalacnn.py", "sac_atari.py",
    "ppo_atari_envpool_xla_jax.py", "ppo_atari_envpool_xla_jax_scan.py", "ppo_atari_lstm.py",
    "ppo_continuous_action_playground.py",  # each run loads (or compiles) the MJX step
}  # fmt: skip
EXTENDED_DETERMINISM = {
    "rainbow_atari.py", "ppo_atari_multigpu.py", "ppo_atari.py", "ppo_atari_envpool.py", "pqn_atari_envpool_lstm.py",
    "dqn_atari.py", "ppo_rnd_envpool.py", "dqn_atari_jax.py", "pqn_atari_envpool.py", "ppg_procgen.py",
    "c51_atari_jax.py", "c51_atari.py", "ppo_continuous_action.py", "rpo_continuous_action.py",
    "sac_continuous_action.py", "td3_continuous_action.py", "td3_continuous_action_jax.py",
    "ddpg_continuous_action_jax.py", "ppo_procgen.py", "sac_continuous_action_jax.py",
}  # fmt: skip


def determinism_param(name: str):
    if name in SLOW_DETERMINISM:
        return pytest.param(name, marks=pytest.mark.slow)
    return pytest.param(name, marks=pytest.mark.extended) if name in EXTENDED_DETERMINISM else name


def learned(script: Script, run: Run) -> list[tuple[int, float]]:
    """What a run learned and played: its episode returns, then its first loss tag's values."""
    assert run.returncode == 0, run.stderr[-3000:]
    scalars = run.scalars()
    loss_tag = next(tag for tag in LOSS_TAGS if tag in scalars)
    return scalars[return_tag(script)] + [(0, v) for _, v in scalars[loss_tag]]


@pytest.mark.parametrize(
    "smoke",
    [determinism_param(name) for name in sorted(SCRIPTS)],
    indirect=True,
)
def test_same_seed_same_returns_other_seed_differs(smoke, tmp_path):
    """The smoke run is seed 1 with --track, --capture-video and --save-model: a plain run of seed 1 must log the
    same returns and losses (so none of those flags changes what is learned), and one of seed 2 different ones."""
    script, tracked = smoke
    # in this process: the same computation as a real one (tests/conftest.py), without a new interpreter each
    again, other = (
        run_in_process(script.name, *script.smoke_args, "--seed", seed, cwd=tmp_path / seed, timeout_s=300) for seed in "12"
    )
    first = learned(script, tracked)
    assert first == learned(script, again)
    assert first != learned(script, other)


# Cases that need a package to be missing run in a real process with it blocked; so does one case of every
# script that has none of them. The rest run in-process (`run_in_process`): they stop before training.
MISSING_PACKAGE_CASES = {"missing optional dependency", "missing ale-py", "missing mujoco", "missing envpool"}
IN_A_REAL_PROCESS = {
    (name, case) for name in SCRIPTS for case in (MISSING_PACKAGE_CASES & set(SCRIPTS[name].bad_input) or {"unknown env id"})
}
# A script whose own family's package (ale-py, mujoco) is tested missing in a real process runs its Box2D case
# (the same path: the env factory's error naming the extra) only with -m slow: one real process per script
# in the default run, ~6 s each saved
SECOND_REAL_PROCESS = {
    (name, "missing optional dependency")
    for name in SCRIPTS
    if {"missing ale-py", "missing mujoco"} & set(SCRIPTS[name].bad_input)
    and "missing optional dependency" in SCRIPTS[name].bad_input
}


def bad_input_marks(name: str, case: str) -> list[pytest.MarkDecorator]:
    """A second real process runs with -m slow only. The in-process cases of the flags every script has are also
    in the edit-test loop's tier (pytest -m fast): refused before any import or env, ~0.05 s each; the other
    in-process cases may build the env first (up to ~50 s under load for ppo_rnd_envpool.py's rollout case)."""
    if (name, case) in SECOND_REAL_PROCESS:
        return [pytest.mark.slow]
    if (name, case) in IN_A_REAL_PROCESS:
        return []
    return [pytest.mark.fast] if case in ARGUMENT_BAD_INPUT or case in LEARNING_RATE_BAD_INPUT else []


BAD_INPUT_CASES = [
    pytest.param(name, case, marks=bad_input_marks(name, case))
    for name in sorted(SCRIPTS)
    for case in sorted(SCRIPTS[name].bad_input)
]


def assert_one_clear_line(name: str, run: Run, expected: str) -> None:
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{run.stderr}"
    assert lines[0].startswith(f"{Path(name).name}: error: ") and expected in lines[0]
    assert "Traceback" not in run.stdout + run.stderr
    assert not (run.cwd / "runs").exists(), "bad input must not leave a run behind"


@pytest.mark.parametrize(("name", "case"), BAD_INPUT_CASES)
def test_bad_input_is_one_clear_line(name, case, tmp_path, blocked_imports):
    args, expected = SCRIPTS[name].bad_input[case]
    if case == "rollout beyond this machine":  # checked once the envs are made (their observation shape)
        SCRIPTS[name].skip_without_its_system_libraries()
    if (name, case) in IN_A_REAL_PROCESS:
        env = script_env()
        env["PYTHONPATH"] = f"{blocked_imports}:{env['PYTHONPATH']}"
        run = run_script(name, *args, cwd=tmp_path, env=env)
    else:
        run = run_in_process(name, *args, cwd=tmp_path)
    assert_one_clear_line(name, run, expected)


# The packages that take seconds to import. Each file checks its command line before importing any of them
# (`check_command_line`, right after its Args): bad input is refused at once, and fails the same with them missing.
SLOW_PACKAGES = ("torch", "jax", "flax", "optax", "envpool", "numpy", "gymnasium", "stable_baselines3")
# every file with an Args, enjoy.py included
FILES_WITH_ARGS = sorted(
    str(path.relative_to(REPO / "cleanrl")) for path in (REPO / "cleanrl").rglob("*.py") if "class Args" in path.read_text()
)


@pytest.fixture(scope="module")
def slow_packages_blocked(tmp_path_factory) -> dict[str, str]:
    """A script environment where each of SLOW_PACKAGES, imported, raises ImportError (a stand-in first on the path)."""
    blocked = tmp_path_factory.mktemp("slow-packages")
    for package in SLOW_PACKAGES:
        (blocked / package).mkdir()
        (blocked / package / "__init__.py").write_text(f"raise ImportError('{package} must not be imported yet')\n")
    env = script_env()
    env["PYTHONPATH"] = f"{blocked}{os.pathsep}{env['PYTHONPATH']}"
    return env


@pytest.mark.parametrize("name", FILES_WITH_ARGS)
def test_bad_arguments_are_refused_before_the_slow_imports(name, tmp_path, slow_packages_blocked):
    """A bad value, a parse error and, where there is one, a replay memory no machine holds: one line and exit code
    2 while torch, JAX, envpool, NumPy and Gymnasium cannot be imported (each in a new process). Imported as a
    module (as the zoo and the tests import it), the file reads no command line."""
    cases = [ARGUMENT_BAD_INPUT["seed below 0"], ARGUMENT_BAD_INPUT["flag without its value"]]
    if "buffer_size:" in (REPO / "cleanrl" / name).read_text():
        cases.append((("--buffer-size", str(10**12)), "--buffer-size 1000000000000: a replay memory of"))
    for args, expected in cases:
        assert_one_clear_line(name, run_script(name, *args, cwd=tmp_path, env=slow_packages_blocked), expected)
    saved_argv, saved_path, sys.argv = sys.argv, list(sys.path), [name, "--seed", "-1"]
    try:
        runpy.run_path(str(REPO / "cleanrl" / name), run_name="imported")  # bad arguments, not read: no SystemExit
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path  # enjoy.py puts its folder on the path


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_help_and_underscore_flags(name, tmp_path):
    helped = run_in_process(name, "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "--env-id" in helped.stdout and "--total-timesteps" in helped.stdout
    # the reference's own scripts pass underscore spellings, and both must keep working
    run = run_in_process(name, "--env_id", "NoSuchEnv-v0", cwd=tmp_path)
    assert run.returncode != 0 and "NoSuchEnv" in run.stderr
    # booleans spelled as the published commands spell them: parsed, so the run gets to the env error
    run = run_in_process(name, "--capture-video", "False", "--track", "false", "--env-id", "NoSuchEnv-v0", cwd=tmp_path)
    assert run.returncode == 2 and "NoSuchEnv" in run.stderr, run.stderr


def test_track_makes_offline_wandb_run_with_scalars(smoke):
    script, run = smoke
    run_files = list((run.cwd / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(run_files) == 1
    keys = wait_for_wandb_history_keys(run_files[0], script.tags)  # W&B's service may still be writing it
    assert script.tags <= keys, f"W&B run lacks {sorted(script.tags - keys)}"


# Both signals go through the same handler of cleanrl_utils.runtime.experiment (tests/runtime/test_experiment.py sends
# each); per script, what matters is where the loop checks for it, so the scripts take turns.
INTERRUPTIONS = [(name, (signal.SIGINT, signal.SIGTERM)[i % 2]) for i, name in enumerate(sorted(SCRIPTS))]


@pytest.mark.parametrize(("name", "sig"), INTERRUPTIONS, ids=[f"{name}-{sig.name}" for name, sig in INTERRUPTIONS])
def test_interrupted_run_keeps_what_it_logged(name, sig, tmp_path):
    """A real signal, sent to this process once the script printed its 2nd episode; the script runs in-process."""
    script = SCRIPTS[name]
    script.skip_without_its_system_libraries()
    args = ("--env-id", script.env_id, "--total-timesteps", "100000000", *script.run_args)
    run = run_in_process(name, *args, cwd=tmp_path, timeout_s=120, stdout=SignalAfterLines("global_step=", 2, sig))
    assert run.returncode == 130, run.stderr[-3000:]
    assert "interrupted" in run.stderr and "Traceback" not in run.stderr
    printed = [line for line in run.stdout.splitlines() if line.startswith("global_step=")]
    assert len(printed) >= 2
    key = return_tag(script).removeprefix("charts/")
    logged = run.scalars()[return_tag(script)]
    # The signal is acted on between steps, never between printing an episode and logging it.
    assert [f"global_step={s}, {key}={r}" for s, r in logged] == printed


def live_cartpoles() -> int:
    """CartPole envs alive in this process, after a full collection."""
    import gc

    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    gc.collect()
    return sum(isinstance(obj, CartPoleEnv) for obj in gc.get_objects())


@pytest.mark.parametrize("stop", ["finished", "interrupted"])
def test_an_in_process_run_leaves_no_env_behind(stop, tmp_path):
    """What a script made is freed after an in-process run, as at a process's exit: JAX keeps the script's pytree
    classes registered, whose methods hold its globals (an ALE emulator left so is reported leaked at exit)."""
    before = live_cartpoles()
    if stop == "finished":
        run = run_in_process("dqn_jax.py", "--total-timesteps", "600", "--learning-starts", "500", cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
    else:
        stdout = SignalAfterLines("global_step=", 2, signal.SIGTERM)
        run = run_in_process("dqn_jax.py", "--total-timesteps", "100000000", cwd=tmp_path, stdout=stdout)
        assert run.returncode == 130, run.stderr[-3000:]
    assert live_cartpoles() == before


def test_an_in_process_run_that_times_out_leaves_no_env_behind(tmp_path):
    """The run the harness stops itself (its SIGALRM timeout, RanIntoTraining) is freed too: the exception passes
    through run_in_process, which must still clear the script's namespace that JAX's pytree classes keep alive."""
    before = live_cartpoles()
    # the harness's own timeout, sent while training (as `signal.alarm` would) rather than after a wall-clock wait
    stdout = SignalAfterLines("global_step=", 2, signal.SIGALRM)
    with pytest.raises(RanIntoTraining):
        run_in_process("dqn_jax.py", "--total-timesteps", "100000000", cwd=tmp_path, stdout=stdout)
    assert live_cartpoles() == before


def test_an_in_process_run_leaves_the_env_registry_as_it_found_it(tmp_path):
    """ppo_trxl.py registers ProofofMemory-v0 with a class defined in its namespace, which is cleared after the
    run: the test process must keep its own registration (a new interpreter would never have touched it)."""
    import gymnasium as gym

    from cleanrl.ppo_trxl import ppo_trxl  # noqa: F401 (registers ProofofMemory-v0 if no test has yet)

    before = gym.spec("ProofofMemory-v0")
    # a run that gets past the script's module-level registration, stopped by a check that comes after it
    run = run_in_process("ppo_trxl/ppo_trxl.py", "--total-timesteps", "1", cwd=tmp_path)
    assert run.returncode == 2 and "less than one rollout batch" in run.stderr, run.stderr[-3000:]
    # whichever import registered it last before the run (this one, or another test's `import ppo_trxl`) is kept
    assert gym.spec("ProofofMemory-v0") is before
    gym.make("ProofofMemory-v0").reset(seed=0)


def test_an_in_process_run_keeps_the_envs_a_package_it_imported_registered(tmp_path, monkeypatch):
    """A package registers its envs when first imported (minigrid, imported by ppo_trxl.py; shimmy's dm_control/...):
    putting the registry back as it was dropped them while the package stayed imported, and this process's own import
    of it then registered nothing. Seen: an in-process ppo_trxl.py run, then MiniGrid-MemoryS7-v0 not found by
    tests/runtime/test_checkpoint_restore.py in the same worker; a second in-process dm_control run not finding its
    namespace. Here a package of the test's own, imported by the run through gymnasium's `module:env-id` form."""
    import gymnasium as gym
    from gymnasium.envs.registration import registry

    package, env_id = "registers_envs_on_import", "RegisteredOnImport-v0"
    (tmp_path / "pkg" / package).mkdir(parents=True)
    (tmp_path / "pkg" / package / "__init__.py").write_text(
        "import gymnasium as gym\n"
        f"gym.register({env_id!r}, entry_point='gymnasium.envs.classic_control.pendulum:PendulumEnv')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    try:
        # imported and made, then refused (continuous actions), as a run that goes on to train would have made it
        run = run_in_process("dqn.py", "--env-id", f"{package}:{env_id}", cwd=tmp_path / "run")
        assert run.returncode == 2 and "needs Discrete" in run.stderr, run.stderr[-3000:]
        assert package in sys.modules
        gym.make(env_id).reset(seed=0)  # as this process's `import registers_envs_on_import` would have left it
    finally:
        sys.modules.pop(package, None)
        registry.pop(env_id, None)


def test_an_in_process_run_leaves_this_process_exception_hooks(tmp_path):
    """Experiment sets `threading.excepthook` (TensorBoard's writer thread dying of a full disk says it in one line)
    and W&B's `init` sets `sys.excepthook` and `sys.exit`, for good: a new process's own. Left in this one, pytest's
    hook was gone for the rest of the worker, and a thread's uncaught exception in a later test went to stderr instead
    of being reported (PytestUnhandledThreadExceptionWarning, an error under -W error)."""
    import threading

    before = sys.excepthook, threading.excepthook, sys.exit
    run = run_in_process("dqn.py", "--total-timesteps", "600", "--learning-starts", "500", "--track", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (sys.excepthook, threading.excepthook, sys.exit) == before


def test_an_in_process_run_leaves_this_process_import_path(tmp_path):
    """ppo_trxl/enjoy.py puts its own folder first on sys.path to import ppo_trxl.py; a new process's own."""
    before = sys.path[:]
    run = run_in_process("ppo_trxl/enjoy.py", "--name", str(tmp_path / "nothing"), "--no-render", cwd=tmp_path)
    assert run.returncode == 2 and "nothing" in run.stderr, run.stderr[-3000:]
    assert sys.path == before
