"""Which evaluator, model class and env factory play the saved model of each algorithm file.

This is the one place that imports algorithm files (lazily, when an entry is loaded), so the
evaluators in `cleanrl_utils.evals` stay free of them. Add an entry for every file that can save
a model; the key is the file's `exp_name` (its stem), which is also the name of the model file
(`{exp_name}.cleanrl_model`) and part of its Hub repo name.
"""

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ZooEntry:
    """How to play one algorithm file's saved model: `evaluator(model_path, make_env, ..., Model=model, **eval_kwargs)`."""

    algorithm: str  # module of the algorithm file, e.g. "cleanrl.dqn"
    model: str  # its network class, as `evaluate` needs it
    evaluator: str  # its evaluator, as module.function, e.g. "cleanrl_utils.evals.discrete.evaluate_dqn"
    eval_kwargs: dict[str, Any] = field(default_factory=dict)  # what the script passes besides the common arguments
    make_env: str = "make_env"  # its env factory: make_env(env_id, idx, capture_video, run_name) -> thunk
    from_script: dict[str, str] = field(default_factory=dict)  # evaluator arguments that are names in the algorithm file

    @property
    def flax_model(self) -> bool:
        """JAX files (named `*_jax*`) save Flax msgpack bytes; the others save with `torch.save`."""
        return "_jax" in self.algorithm

    def load(self) -> tuple[Callable[..., list[float]], type, Callable]:
        """(evaluate, model class, env factory), importing the algorithm file and its evaluator."""
        algorithm = importlib.import_module(self.algorithm)
        module, _, function = self.evaluator.rpartition(".")
        evaluate = getattr(importlib.import_module(module), function)
        if self.from_script:  # e.g. the file's video recorder, which the evaluator may not import itself
            evaluate = functools.partial(evaluate, **{arg: getattr(algorithm, name) for arg, name in self.from_script.items()})
        return evaluate, getattr(algorithm, self.model), getattr(algorithm, self.make_env)


ZOO: dict[str, ZooEntry] = {
    "ppo": ZooEntry("cleanrl.ppo", "Agent", "cleanrl_utils.evals.discrete.evaluate_ppo"),
    "dqn": ZooEntry("cleanrl.dqn", "QNetwork", "cleanrl_utils.evals.discrete.evaluate_dqn", {"epsilon": 0.05}),
    "c51": ZooEntry("cleanrl.c51", "QNetwork", "cleanrl_utils.evals.discrete.evaluate_c51", {"epsilon": 0.05}),
    "pqn": ZooEntry("cleanrl.pqn", "QNetwork", "cleanrl_utils.evals.discrete.evaluate_pqn", {"epsilon": 0.05}),
    "ppo_continuous_action": ZooEntry("cleanrl.ppo_continuous_action", "Agent", "cleanrl_utils.evals.continuous.evaluate_ppo"),
    "rpo_continuous_action": ZooEntry("cleanrl.rpo_continuous_action", "Agent", "cleanrl_utils.evals.continuous.evaluate_ppo"),
    # a batch of Playground envs: make_env(env_id, num_envs, episode_length, impl); the weights hold the observation statistics
    "ppo_continuous_action_playground": ZooEntry(
        "cleanrl.ppo_continuous_action_playground", "Agent", "cleanrl_utils.evals.special.evaluate_playground"
    ),
    "sac_continuous_action": ZooEntry("cleanrl.sac_continuous_action", "Actor", "cleanrl_utils.evals.continuous.evaluate_sac"),
    "ddpg_continuous_action": ZooEntry(
        "cleanrl.ddpg_continuous_action", "Actor", "cleanrl_utils.evals.continuous.evaluate_deterministic_actor"
    ),
    "td3_continuous_action": ZooEntry(
        "cleanrl.td3_continuous_action", "Actor", "cleanrl_utils.evals.continuous.evaluate_deterministic_actor"
    ),
    "ppo_atari": ZooEntry("cleanrl.ppo_atari", "Agent", "cleanrl_utils.evals.atari.evaluate_ppo"),
    "dqn_atari": ZooEntry("cleanrl.dqn_atari", "QNetwork", "cleanrl_utils.evals.atari.evaluate_dqn", {"epsilon": 0.01}),
    "c51_atari": ZooEntry(
        "cleanrl.c51_atari", "QNetwork", "cleanrl_utils.evals.atari.evaluate_distributional", {"epsilon": 0.01}
    ),
    "rainbow_atari": ZooEntry(
        "cleanrl.rainbow_atari",
        "NoisyDuelingDistributionalNetwork",
        "cleanrl_utils.evals.atari.evaluate_distributional",
        {"epsilon": 0.001},
    ),
    "sac_atari": ZooEntry("cleanrl.sac_atari", "Actor", "cleanrl_utils.evals.atari.evaluate_sac"),
    "qdagger_dqn_atari_impalacnn": ZooEntry(
        "cleanrl.qdagger_dqn_atari_impalacnn",
        "QNetwork",
        "cleanrl_utils.evals.atari.evaluate_dqn",
        {"epsilon": 0.01},
    ),
    "ppo_atari_lstm": ZooEntry("cleanrl.ppo_atari_lstm", "Agent", "cleanrl_utils.evals.atari.evaluate_ppo_lstm"),
    "ppo_atari_multigpu": ZooEntry("cleanrl.ppo_atari_multigpu", "Agent", "cleanrl_utils.evals.atari.evaluate_ppo"),
    # self-play: points per game against a random opponent, filmed with the script's VideoRecorder
    "ppo_pettingzoo_ma_atari": ZooEntry(
        "cleanrl.ppo_pettingzoo_ma_atari",
        "Agent",
        "cleanrl_utils.evals.special.evaluate_pettingzoo",
        make_env="make_vector_env",
        from_script={"VideoRecorder": "VideoRecorder"},
    ),
    # the package cleanrl/ppo_trxl/ exposes its script's Agent and make_env
    "ppo_trxl": ZooEntry("cleanrl.ppo_trxl", "Agent", "cleanrl_utils.evals.special.evaluate_trxl"),
    "dqn_jax": ZooEntry("cleanrl.dqn_jax", "QNetwork", "cleanrl_utils.evals.jax.evaluate_dqn", {"epsilon": 0.05}),
    "c51_jax": ZooEntry("cleanrl.c51_jax", "QNetwork", "cleanrl_utils.evals.jax.evaluate_c51", {"epsilon": 0.05}),
    # Flax models: the evaluators build the Actor from the env's action bounds and restore its saved parameters
    "ddpg_continuous_action_jax": ZooEntry(
        "cleanrl.ddpg_continuous_action_jax", "Actor", "cleanrl_utils.evals.jax.evaluate_deterministic_actor"
    ),
    "td3_continuous_action_jax": ZooEntry(
        "cleanrl.td3_continuous_action_jax", "Actor", "cleanrl_utils.evals.jax.evaluate_deterministic_actor"
    ),
    "sac_continuous_action_jax": ZooEntry(
        "cleanrl.sac_continuous_action_jax", "Actor", "cleanrl_utils.evals.jax.evaluate_sac"
    ),
    "dqn_atari_jax": ZooEntry(
        "cleanrl.dqn_atari_jax", "QNetwork", "cleanrl_utils.evals.jax.evaluate_dqn_atari", {"epsilon": 0.01}
    ),
    "c51_atari_jax": ZooEntry(
        "cleanrl.c51_atari_jax", "QNetwork", "cleanrl_utils.evals.jax.evaluate_c51_atari", {"epsilon": 0.01}
    ),
    "qdagger_dqn_atari_jax_impalacnn": ZooEntry(
        "cleanrl.qdagger_dqn_atari_jax_impalacnn",
        "QNetwork",
        "cleanrl_utils.evals.jax.evaluate_dqn_atari",
        {"epsilon": 0.01},
    ),
    # the scan file saves [args, [network, actor, critic]] Flax parameters; the non-scan file saves no model
    "ppo_atari_envpool_xla_jax_scan": ZooEntry(
        "cleanrl.ppo_atari_envpool_xla_jax_scan", "Agent", "cleanrl_utils.evals.jax.evaluate_ppo_envpool"
    ),
}


def entry(exp_name: str) -> ZooEntry:
    """The zoo entry of `exp_name`; KeyError with the known names otherwise."""
    try:
        return ZOO[exp_name]
    except KeyError:
        raise KeyError(f"no model zoo entry for exp name {exp_name!r}; known: {', '.join(sorted(ZOO))}") from None
