"""Which evaluator, model class and env factory play the saved model of each algorithm file.

One function per file that saves a model, named after its `exp_name` (its stem, which is also the name of the
model file `{exp_name}.cleanrl_model` and part of its Hub repo name). Each imports the algorithm file and its
evaluator by name when it is called, so grep and "go to definition" reach both, and loading the zoo imports no
algorithm file (nor torch or JAX): only `entry(exp_name)` imports the one it plays. This is the one module of
cleanrl_utils that imports algorithm files (tests/contract/test_layout.py).

Add a function and a line in `ZOO` for every file that can save a model (tests/tools/test_zoo.py checks).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ZooEntry:
    """How to play one algorithm file's saved model: `evaluate(model_path, make_env, env_id, ..., Model=Model,
    **eval_kwargs)`, with `eval_kwargs` what its script passes besides the common arguments."""

    evaluate: Callable[..., list[float]]
    Model: type
    make_env: Callable
    eval_kwargs: dict[str, Any] = field(default_factory=dict)


def saves_flax(exp_name: str) -> bool:
    """JAX files (named `*_jax*`) save Flax msgpack bytes; the others save with `torch.save`."""
    return "_jax" in exp_name


def ppo() -> ZooEntry:
    from cleanrl.ppo import Agent, make_env
    from cleanrl_utils.runtime.evals.discrete import evaluate_ppo

    return ZooEntry(evaluate_ppo, Agent, make_env)


def dqn() -> ZooEntry:
    from cleanrl.dqn import QNetwork, make_env
    from cleanrl_utils.runtime.evals.discrete import evaluate_dqn

    return ZooEntry(evaluate_dqn, QNetwork, make_env, {"epsilon": 0.05})


def c51() -> ZooEntry:
    from cleanrl.c51 import QNetwork, make_env
    from cleanrl_utils.runtime.evals.discrete import evaluate_c51

    return ZooEntry(evaluate_c51, QNetwork, make_env, {"epsilon": 0.05})


def pqn() -> ZooEntry:
    from cleanrl.pqn import QNetwork, make_env
    from cleanrl_utils.runtime.evals.discrete import evaluate_pqn

    return ZooEntry(evaluate_pqn, QNetwork, make_env, {"epsilon": 0.05})


def ppo_continuous_action() -> ZooEntry:
    from cleanrl.ppo_continuous_action import Agent, make_env
    from cleanrl_utils.runtime.evals.continuous import evaluate_ppo

    return ZooEntry(evaluate_ppo, Agent, make_env)


def rpo_continuous_action() -> ZooEntry:
    from cleanrl.rpo_continuous_action import Agent, make_env
    from cleanrl_utils.runtime.evals.continuous import evaluate_ppo

    return ZooEntry(evaluate_ppo, Agent, make_env)


def ppo_continuous_action_playground() -> ZooEntry:
    # a batch of Playground envs: make_env(env_id, num_envs, episode_length, impl); the weights hold the observation
    # statistics
    from cleanrl.ppo_continuous_action_playground import Agent, make_env
    from cleanrl_utils.runtime.evals.special import evaluate_playground

    return ZooEntry(evaluate_playground, Agent, make_env)


def sac_continuous_action() -> ZooEntry:
    from cleanrl.sac_continuous_action import Actor, make_env
    from cleanrl_utils.runtime.evals.continuous import evaluate_sac

    return ZooEntry(evaluate_sac, Actor, make_env)


def ddpg_continuous_action() -> ZooEntry:
    from cleanrl.ddpg_continuous_action import Actor, make_env
    from cleanrl_utils.runtime.evals.continuous import evaluate_deterministic_actor

    return ZooEntry(evaluate_deterministic_actor, Actor, make_env)


def td3_continuous_action() -> ZooEntry:
    from cleanrl.td3_continuous_action import Actor, make_env
    from cleanrl_utils.runtime.evals.continuous import evaluate_deterministic_actor

    return ZooEntry(evaluate_deterministic_actor, Actor, make_env)


def ppo_atari() -> ZooEntry:
    from cleanrl.ppo_atari import Agent, make_env
    from cleanrl_utils.runtime.evals.atari import evaluate_ppo

    return ZooEntry(evaluate_ppo, Agent, make_env)


def ppo_atari_lstm() -> ZooEntry:
    from cleanrl.ppo_atari_lstm import Agent, make_env
    from cleanrl_utils.runtime.evals.atari import evaluate_ppo_lstm

    return ZooEntry(evaluate_ppo_lstm, Agent, make_env)


def ppo_atari_multigpu() -> ZooEntry:
    from cleanrl.ppo_atari_multigpu import Agent, make_env
    from cleanrl_utils.runtime.evals.atari import evaluate_ppo

    return ZooEntry(evaluate_ppo, Agent, make_env)


def dqn_atari() -> ZooEntry:
    from cleanrl.dqn_atari import QNetwork, make_env
    from cleanrl_utils.runtime.evals.atari import evaluate_dqn

    return ZooEntry(evaluate_dqn, QNetwork, make_env, {"epsilon": 0.01})


def c51_atari() -> ZooEntry:
    from cleanrl.c51_atari import QNetwork, make_env
    from cleanrl_utils.runtime.evals.atari import evaluate_distributional

    return ZooEntry(evaluate_distributional, QNetwork, make_env, {"epsilon": 0.01})


def rainbow_atari() -> ZooEntry:
    from cleanrl.rainbow_atari import NoisyDuelingDistributionalNetwork, make_env
    from cleanrl_utils.runtime.evals.atari import evaluate_distributional

    return ZooEntry(evaluate_distributional, NoisyDuelingDistributionalNetwork, make_env, {"epsilon": 0.001})


def sac_atari() -> ZooEntry:
    from cleanrl.sac_atari import Actor, make_env
    from cleanrl_utils.runtime.evals.atari import evaluate_sac

    return ZooEntry(evaluate_sac, Actor, make_env)


def qdagger_dqn_atari_impalacnn() -> ZooEntry:
    # the student, played like a dqn_atari.py model
    from cleanrl.qdagger_dqn_atari_impalacnn import QNetwork, make_env
    from cleanrl_utils.runtime.evals.atari import evaluate_dqn

    return ZooEntry(evaluate_dqn, QNetwork, make_env, {"epsilon": 0.01})


def ppo_pettingzoo_ma_atari() -> ZooEntry:
    # self-play: points per game against a random opponent, filmed with the script's VideoRecorder
    from cleanrl.ppo_pettingzoo_ma_atari import Agent, VideoRecorder, make_vector_env
    from cleanrl_utils.runtime.evals.special import evaluate_pettingzoo

    return ZooEntry(evaluate_pettingzoo, Agent, make_vector_env, {"VideoRecorder": VideoRecorder})


def ppo_trxl() -> ZooEntry:
    # the package cleanrl/ppo_trxl/ exposes its script's Agent and make_env
    from cleanrl.ppo_trxl import Agent, make_env
    from cleanrl_utils.runtime.evals.special import evaluate_trxl

    return ZooEntry(evaluate_trxl, Agent, make_env)


def dqn_jax() -> ZooEntry:
    from cleanrl.dqn_jax import QNetwork, make_env
    from cleanrl_utils.runtime.evals.jax import evaluate_dqn

    return ZooEntry(evaluate_dqn, QNetwork, make_env, {"epsilon": 0.05})


def c51_jax() -> ZooEntry:
    from cleanrl.c51_jax import QNetwork, make_env
    from cleanrl_utils.runtime.evals.jax import evaluate_c51

    return ZooEntry(evaluate_c51, QNetwork, make_env, {"epsilon": 0.05})


def ddpg_continuous_action_jax() -> ZooEntry:
    # the evaluator builds the Flax Actor from the env's action bounds
    from cleanrl.ddpg_continuous_action_jax import Actor, make_env
    from cleanrl_utils.runtime.evals.jax import evaluate_deterministic_actor

    return ZooEntry(evaluate_deterministic_actor, Actor, make_env)


def td3_continuous_action_jax() -> ZooEntry:
    from cleanrl.td3_continuous_action_jax import Actor, make_env
    from cleanrl_utils.runtime.evals.jax import evaluate_deterministic_actor

    return ZooEntry(evaluate_deterministic_actor, Actor, make_env)


def sac_continuous_action_jax() -> ZooEntry:
    from cleanrl.sac_continuous_action_jax import Actor, make_env
    from cleanrl_utils.runtime.evals.jax import evaluate_sac

    return ZooEntry(evaluate_sac, Actor, make_env)


def dqn_atari_jax() -> ZooEntry:
    from cleanrl.dqn_atari_jax import QNetwork, make_env
    from cleanrl_utils.runtime.evals.jax import evaluate_dqn_atari

    return ZooEntry(evaluate_dqn_atari, QNetwork, make_env, {"epsilon": 0.01})


def c51_atari_jax() -> ZooEntry:
    from cleanrl.c51_atari_jax import QNetwork, make_env
    from cleanrl_utils.runtime.evals.jax import evaluate_c51_atari

    return ZooEntry(evaluate_c51_atari, QNetwork, make_env, {"epsilon": 0.01})


def qdagger_dqn_atari_jax_impalacnn() -> ZooEntry:
    from cleanrl.qdagger_dqn_atari_jax_impalacnn import QNetwork, make_env
    from cleanrl_utils.runtime.evals.jax import evaluate_dqn_atari

    return ZooEntry(evaluate_dqn_atari, QNetwork, make_env, {"epsilon": 0.01})


def ppo_atari_envpool_xla_jax_scan() -> ZooEntry:
    # saves [args, [network, actor, critic]] Flax parameters; the non-scan file saves no model
    from cleanrl.ppo_atari_envpool_xla_jax_scan import Agent, make_env
    from cleanrl_utils.runtime.evals.jax import evaluate_ppo_envpool

    return ZooEntry(evaluate_ppo_envpool, Agent, make_env)


ZOO: dict[str, Callable[[], ZooEntry]] = {
    "ppo": ppo,
    "dqn": dqn,
    "c51": c51,
    "pqn": pqn,
    "ppo_continuous_action": ppo_continuous_action,
    "rpo_continuous_action": rpo_continuous_action,
    "ppo_continuous_action_playground": ppo_continuous_action_playground,
    "sac_continuous_action": sac_continuous_action,
    "ddpg_continuous_action": ddpg_continuous_action,
    "td3_continuous_action": td3_continuous_action,
    "ppo_atari": ppo_atari,
    "ppo_atari_lstm": ppo_atari_lstm,
    "ppo_atari_multigpu": ppo_atari_multigpu,
    "dqn_atari": dqn_atari,
    "c51_atari": c51_atari,
    "rainbow_atari": rainbow_atari,
    "sac_atari": sac_atari,
    "qdagger_dqn_atari_impalacnn": qdagger_dqn_atari_impalacnn,
    "ppo_pettingzoo_ma_atari": ppo_pettingzoo_ma_atari,
    "ppo_trxl": ppo_trxl,
    "dqn_jax": dqn_jax,
    "c51_jax": c51_jax,
    "ddpg_continuous_action_jax": ddpg_continuous_action_jax,
    "td3_continuous_action_jax": td3_continuous_action_jax,
    "sac_continuous_action_jax": sac_continuous_action_jax,
    "dqn_atari_jax": dqn_atari_jax,
    "c51_atari_jax": c51_atari_jax,
    "qdagger_dqn_atari_jax_impalacnn": qdagger_dqn_atari_jax_impalacnn,
    "ppo_atari_envpool_xla_jax_scan": ppo_atari_envpool_xla_jax_scan,
}


def entry(exp_name: str) -> ZooEntry:
    """The zoo entry of `exp_name`, its algorithm file imported; KeyError with the known names otherwise."""
    try:
        play = ZOO[exp_name]
    except KeyError:
        raise KeyError(f"no model zoo entry for exp name {exp_name!r}; known: {', '.join(sorted(ZOO))}") from None
    return play()
