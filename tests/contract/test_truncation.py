"""Q-learning scripts tell a time-limit cut from a real end (docs/community/script-contract.md, "Correct on today's stack").

The same constant-reward task (reward 1 per step, 5-step episodes) ends either by a time limit
or by termination. A cut episode goes on in truth, so its value climbs towards 1 / (1 - 0.99) = 100;
a terminated one is worth at most the episode length. (ppo.py's version, which reads the learned
value function back, is in test_ppo.py.)
"""

import pytest

from tests.fixtures.envs import EPISODE_LENGTH
from tests.helpers import run_in_process

# 1800 updates, a target refresh every 25: the cut episode's value reaches ~51, the terminated one's stays ~4-5
DQN_FAMILY = (
    "--total-timesteps", "2000", "--learning-starts", "200", "--train-frequency", "1",
    "--target-network-frequency", "25", "--learning-rate", "0.003", "--batch-size", "64",
)  # fmt: skip
# no entropy bonus (alpha 0): the soft value is then the plain value; 800 updates with a target copy every 15
# take the cut episode's value to ~32 (the terminated one's stays ~4.1)
SAC_NO_ENTROPY = (
    "--total-timesteps", "1000", "--learning-starts", "200", "--batch-size", "64", "--tau", "1",
    "--target-network-frequency", "15", "--q-lr", "0.003", "--no-autotune", "--alpha", "0",
)  # fmt: skip
# DDPG/TD3: targets blended every critic update with tau 0.1, so within 800 updates the cut episode's value
# climbs to ~54 (the terminated one's stays ~4.7)
DETERMINISTIC_ACTOR = (
    "--total-timesteps", "1000", "--learning-starts", "200", "--batch-size", "64", "--tau", "0.1",
    "--learning-rate", "0.003", "--policy-frequency", "1",
)  # fmt: skip
FAST_Q_LEARNING = {
    "dqn.py": DQN_FAMILY,
    "c51.py": DQN_FAMILY,  # the default support [-100, 100] holds values up to 100
    # 4 envs whose episodes all end together every 5 steps
    "pqn.py": ("--total-timesteps", "16384", "--num-steps", "64", "--learning-rate", "0.01", "--no-anneal-lr"),
    "sac_continuous_action.py": SAC_NO_ENTROPY,
    "ddpg_continuous_action.py": DETERMINISTIC_ACTOR,
    "td3_continuous_action.py": DETERMINISTIC_ACTOR,
    # the JAX twins take the same flags
    "dqn_jax.py": DQN_FAMILY,
    "c51_jax.py": DQN_FAMILY,
    "ddpg_continuous_action_jax.py": DETERMINISTIC_ACTOR,
    "td3_continuous_action_jax.py": DETERMINISTIC_ACTOR,
    "sac_continuous_action_jax.py": SAC_NO_ENTROPY,
}
# continuous-action scripts play the Box-action version of the task, and log their Q-values under another tag
CONTINUOUS_Q_TAG = {
    "sac_continuous_action.py": "losses/qf1_values",
    "ddpg_continuous_action.py": "losses/qf1_values",
    "td3_continuous_action.py": "losses/qf1_values",
    "ddpg_continuous_action_jax.py": "losses/qf1_values",
    "td3_continuous_action_jax.py": "losses/qf1_values",
    "sac_continuous_action_jax.py": "losses/qf1_values",
}


def final_q_value(script: str, env_id: str, cwd) -> float:
    # in this process: a new interpreter (torch or JAX imports, ~5 s) would cost more than the run's learning
    run = run_in_process(script, "--env-id", env_id, *FAST_Q_LEARNING[script], cwd=cwd, timeout_s=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.scalars()[CONTINUOUS_Q_TAG.get(script, "losses/q_values")][-1][1]


# The quick run checks dqn.py (8 s of one core); the other cases (11-24 s each, the JAX twins' mostly compiling)
# are `extended`: CI runs them after the quick run
QUICK_CASES = {"dqn.py"}


@pytest.mark.parametrize(
    "script",
    [s if s in QUICK_CASES else pytest.param(s, marks=pytest.mark.extended) for s in sorted(FAST_Q_LEARNING)],
)
def test_truncation_bootstraps_and_termination_does_not(script, tmp_path):
    prefix = "Continuous" if script in CONTINUOUS_Q_TAG else ""
    truncated = final_q_value(script, f"tests.fixtures.envs:{prefix}ConstantRewardTruncated-v0", tmp_path / "t")
    terminated = final_q_value(script, f"tests.fixtures.envs:{prefix}ConstantRewardTerminated-v0", tmp_path / "d")
    # a terminated episode is worth at most its length (5); had its end been bootstrapped, its value would climb
    # like the cut one's (~30-55 after these runs): the two bounds leave a factor of 2 on either side
    assert terminated < 2 * EPISODE_LENGTH
    assert truncated > 4 * EPISODE_LENGTH
