"""Evaluate a saved `qdagger_dqn_atari_jax_impalacnn.py` student (Flax parameters) on whole games, epsilon-greedy.

The student is saved as `flax.serialization.to_bytes(params)` and plays Atari through the same env
factory as `dqn_atari_jax.py`, so `dqn_atari_jax_eval.evaluate` plays it as is: pass the student's
`QNetwork` (IMPALA-CNN) as `Model`. The teacher, a `dqn_atari_jax.py` model, is played by that evaluator too.
"""

from cleanrl_utils.evals.dqn_atari_jax_eval import evaluate

__all__ = ["evaluate"]
