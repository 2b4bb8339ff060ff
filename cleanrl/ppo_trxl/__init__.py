"""PPO with a Transformer-XL memory: the training script `ppo_trxl.py` and `enjoy.py`, which plays a saved model.

The package exposes the script's network and env factory, so the model zoo finds them as `cleanrl.ppo_trxl`.
"""

from cleanrl.ppo_trxl.ppo_trxl import Agent, make_env

__all__ = ["Agent", "make_env"]
