"""Evaluate a saved `qdagger_dqn_atari_impalacnn.py` student on whole games, with epsilon-greedy actions.

The student is a Q-network saved as a plain state_dict and plays Atari through the same env factory
as `dqn_atari.py`, so `dqn_atari_eval.evaluate` plays it as is: pass the student's `QNetwork`
(IMPALA-CNN) as `Model`. The teacher, a `dqn_atari.py` model, is played by that evaluator too.
"""

from cleanrl_utils.evals.dqn_atari_eval import evaluate

__all__ = ["evaluate"]
