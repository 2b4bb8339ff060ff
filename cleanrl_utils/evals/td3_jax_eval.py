"""Evaluate a saved `td3_continuous_action_jax.py` model: Flax parameters [actor, qf1, qf2]; the actor acts.

TD3 acts exactly as DDPG does (a deterministic actor plus clipped Gaussian exploration noise), so this
is `ddpg_jax_eval.evaluate`; the module exists so that each algorithm has its named evaluator.
"""

from cleanrl_utils.evals.ddpg_jax_eval import evaluate

__all__ = ["evaluate"]
