"""A checkpoint's own values (counters, observations, train states, keys) are checked before a resumed run uses them.

The format (`plain_data`) guarantees a checkpoint is data; these tests craft data of the right format with values a
run never writes: a negative, huge or NaN step, an iteration beyond the run's total, observations of another shape,
dtype or with NaNs, a Flax train state with a weight of another shape, a JAX key of another size, a normaliser's
NaN variance. Each must be refused in one line with exit code 2, as a bad command line is, before training starts.
The unchanged checkpoint of each script resumes (exit 0): the bounds refuse nothing a run writes.
"""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from cleanrl_utils.runtime import checkpoint as ckpt
from cleanrl_utils.runtime import plain_data
from tests.helpers import run_in_process

DELETE = object()  # the key is left out of the checkpoint

# a few runs of each script, each writing its checkpoints, then resumed from a changed copy of the newest one
RUNS = {
    "ppo.py": ("--total-timesteps", "1024", "--num-steps", "64", "--checkpoint-frequency", "2"),
    "dqn.py": ("--total-timesteps", "600", "--learning-starts", "100", "--checkpoint-frequency", "300"),
    "ppo_continuous_action.py": (
        *("--env-id", "Hopper-v4", "--total-timesteps", "512", "--num-steps", "128", "--checkpoint-frequency", "2"),
        *("--update-epochs", "1", "--num-minibatches", "2"),
    ),
    "td3_continuous_action_jax.py": (
        *("--env-id", "Pendulum-v1", "--total-timesteps", "300", "--learning-starts", "100", "--batch-size", "16"),
        *("--buffer-size", "300", "--checkpoint-frequency", "200"),
    ),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, dict]:
    """script -> the state of its run's newest checkpoint, each run made once for the module, when first asked for."""
    made: dict[str, dict] = {}

    def newest(script: str) -> dict:
        if script not in made:
            cwd = tmp_path_factory.mktemp(script.removesuffix(".py"))
            run = run_in_process(script, *RUNS[script], cwd=cwd, timeout_s=240)
            assert run.returncode == 0, run.stderr[-2000:]
            made[script] = ckpt.read(ckpt.find(run.run_dir))
        return made[script]

    return newest


def resumed_with(script: str, state: dict, changes: dict, tmp_path: Path):
    """`script --resume` of a copy of `state` with `changes` (nested dicts by path: "a.b"), run in this process."""
    state = dict(state)
    for dotted, value in changes.items():
        *path, key = dotted.split(".")
        parent = state
        for part in path:
            parent[part] = dict(parent[part])  # a copy: the module's state stays as the run wrote it
            parent = parent[part]
        if value is DELETE:
            del parent[key]
        else:
            parent[key] = value(parent[key]) if callable(value) else value
    path = tmp_path / "checkpoint_1.pt"
    path.write_bytes(plain_data.dumps(state))
    return run_in_process(script, "--resume", str(path), cwd=tmp_path, timeout_s=240)


def assert_refused_in_one_line(run, script: str, says: str) -> None:
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(f"{script}: error: --resume: ") and says in lines[0], run.stderr
    assert "SPS" not in run.stdout, "refused before it trained"


@pytest.mark.parametrize("script", list(RUNS))
def test_each_scripts_own_checkpoint_resumes(script, checkpoints, tmp_path):
    """The control: the bounds below take every value the run wrote (a finished run resumes to its end)."""
    run = resumed_with(script, checkpoints(script), {}, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]


def nan_at_first(array):
    array = array.clone() if isinstance(array, torch.Tensor) else array.copy()
    array.reshape(-1)[0] = math.nan
    return array


CASES = {
    "ppo.py": [
        ({"iteration": -5}, "iteration (-5) is not in 1 to 4"),
        ({"iteration": 0}, "iteration (0) is not in 1 to 4"),
        ({"iteration": 5}, "iteration (5) is not in 1 to 4"),  # beyond the run's total
        ({"iteration": 2**70}, "is not in 1 to 4"),
        ({"iteration": 3.0}, "iteration (3.0) is not in"),
        ({"iteration": True}, "iteration (True) is not in"),
        ({"iteration": "3"}, "iteration ('3') is not in"),
        ({"iteration": DELETE}, "holds no iteration"),
        ({"iteration": 3}, "global_step (1024) is not 3 iterations' steps"),  # in range, behind its step count
        ({"global_step": 1000}, "global_step (1000) is not 4 iterations' steps"),
        ({"global_step": 2**62}, "global step or clock is out of range"),  # its loop counts iterations
        ({"global_step": -1}, "global step or clock is out of range"),
        ({"global_step": math.nan}, "global_step is not a int"),
        ({"elapsed_time": math.inf}, "global step or clock is out of range"),
        ({"next_obs": lambda obs: obs[:, :3]}, "next_obs is torch.float32 (4, 3), this run's torch.float32 (4, 4)"),
        ({"next_obs": lambda obs: obs.double()}, "next_obs is torch.float64 (4, 4)"),
        ({"next_obs": lambda obs: obs.numpy()}, "next_obs is float32 (4, 4), this run's torch.float32"),
        ({"next_obs": nan_at_first}, "next_obs holds a nan or an infinity"),
        ({"next_obs": [[0.0] * 4] * 4}, "next_obs is a list, not an array"),
        ({"next_obs": DELETE}, "holds no next_obs"),
    ],
    "dqn.py": [
        ({"global_step": 600}, "global_step (600) is not in 0 to 599"),
        ({"global_step": 2**62}, "global step or clock is out of range"),
        ({"obs": lambda obs: obs[None]}, "obs is float32 (1, 4), this run's float32 (4,)"),
        ({"obs": lambda obs: obs.astype(np.int64)}, "obs is int64 (4,)"),
        ({"obs": nan_at_first}, "obs holds a nan or an infinity"),
        ({"replay_buffer.pos": -1}, "replay_buffer does not fit"),
    ],
    "ppo_continuous_action.py": [
        ({"iteration": 5}, "iteration (5) is not in 1 to 4"),
        ({"next_obs": nan_at_first}, "next_obs holds a nan or an infinity"),
        ({"next_obs": lambda obs: obs[:, :5]}, "next_obs is torch.float32 (1, 5), this run's torch.float32 (1, 11)"),
    ],
    "td3_continuous_action_jax.py": [
        ({"num_updates": -1}, "num_updates (-1) is not in 99 to 99"),
        ({"num_updates": 98}, "num_updates (98) is not in 99 to 99"),  # one update per step after step 100
        ({"global_step": 300}, "global_step (300) is not in 0 to 299"),
        ({"actor_loss": np.float32(math.nan)}, "actor_loss (nan) is not a finite number"),
        ({"obs": lambda obs: obs.astype(np.float64)}, "obs is float64 (1, 3), this run's float32 (1, 3)"),
        ({"explore_key": np.zeros(4, np.uint32)}, "explore_key is uint32 (4,), this run's uint32 (2,)"),
        ({"update_key": np.zeros(2, np.int64)}, "update_key is int64 (2,)"),
        ({"actor_state.params": lambda params: {}}, "actor_state.params does not hold this run's ['params']"),
        ({"qf_state.step": math.nan}, "qf_state.step (nan) is not a finite number"),
    ],
}


@pytest.mark.parametrize(
    ("script", "changes", "says"),
    [(script, changes, says) for script, cases in CASES.items() for changes, says in cases],
    ids=[f"{script}-{says[:40]}" for script, cases in CASES.items() for _, says in cases],
)
def test_a_checkpoints_own_values_out_of_range_are_one_line(script, changes, says, checkpoints, tmp_path):
    run = resumed_with(script, checkpoints(script), changes, tmp_path)
    assert_refused_in_one_line(run, script, says)


def test_a_flax_weight_of_another_shape_is_refused_not_broadcast(checkpoints, tmp_path):
    """`flax.serialization.from_state_dict` compares the keys only: a (1, 64) bias would broadcast in the update."""
    state = checkpoints("td3_continuous_action_jax.py")
    layer = next(iter(state["actor_state"]["params"]["params"]))
    wrong = {"params": {**state["actor_state"]["params"]["params"]}}
    wrong["params"][layer] = {**wrong["params"][layer], "bias": wrong["params"][layer]["bias"][None]}
    run = resumed_with("td3_continuous_action_jax.py", state, {"actor_state.params": wrong}, tmp_path)
    assert_refused_in_one_line(run, "td3_continuous_action_jax.py", f"actor_state.params.params.{layer}.bias is float32 (1,")


def with_statistics(layers: list, name: str, **values) -> list:
    """A copy of an env snapshot whose running statistics `name` (in every sub-env) take `values`."""
    copied = []
    for layer in layers:
        objects = {
            key: {**state, **values} if key == name and state["kind"] == "running_mean_std" else state
            for key, state in layer["objects"].items()
        }
        sub_envs = None if layer["sub_envs"] is None else [with_statistics(sub, name, **values) for sub in layer["sub_envs"]]
        copied.append({**layer, "objects": objects, "sub_envs": sub_envs})
    return copied


@pytest.mark.parametrize(
    ("name", "values"),
    [
        ("obs_rms", {"var": np.full(11, math.nan)}),
        ("obs_rms", {"mean": np.full(11, math.inf)}),
        ("obs_rms", {"var": np.full(11, -1.0)}),
        ("return_rms", {"count": 0.0}),
        ("return_rms", {"count": math.nan}),
    ],
)
def test_a_normalisers_statistics_that_are_not_statistics_are_one_line(name, values, checkpoints, tmp_path):
    """ppo_continuous_action.py's observation and reward normalisers: a NaN there reaches every input, silently."""
    state = checkpoints("ppo_continuous_action.py")
    run = resumed_with("ppo_continuous_action.py", state, {"envs": with_statistics(state["envs"], name, **values)}, tmp_path)
    assert_refused_in_one_line(run, "ppo_continuous_action.py", f"{name} are not statistics (a nan")


def with_value(layers: list, class_name: str, name: str, value) -> list:
    """A copy of an env snapshot whose layers of `class_name` (in every sub-env) hold `value` under `name`."""
    copied = []
    for layer in layers:
        values = {**layer["values"], name: value} if layer["class"] == class_name else layer["values"]
        sub_envs = (
            None if layer["sub_envs"] is None else [with_value(sub, class_name, name, value) for sub in layer["sub_envs"]]
        )
        copied.append({**layer, "values": values, "sub_envs": sub_envs})
    return copied


@pytest.mark.parametrize("value", [np.array([0.0, math.nan, 0.0, 0.0]), np.array([math.inf, 0.0, 0.0, 0.0])])
def test_a_simulator_state_with_a_nan_is_one_line(value, checkpoints, tmp_path):
    """CartPole's state (None in the fresh env, an array once it plays): a NaN there is every next observation."""
    state = checkpoints("ppo.py")
    envs = with_value(state["envs"], "CartPoleEnv", "state", value)
    run = resumed_with("ppo.py", state, {"envs": envs}, tmp_path)
    assert_refused_in_one_line(run, "ppo.py", "CartPoleEnv.state to a nan or an infinity")


# ---------------------------------------------------------------- the checks themselves


def test_saved_int_takes_whole_numbers_in_range_only():
    assert ckpt.saved_int({"n": 3}, "n", 0, 3) == 3
    for bad in (-1, 4, 3.0, True, np.int64(3), "3", None):
        with pytest.raises(ckpt.RefusedCheckpoint, match="n"):
            ckpt.saved_int({"n": bad}, "n", 0, 3)


def test_saved_float_takes_finite_numbers_and_their_zero_dimensional_arrays():
    assert ckpt.saved_float({"x": np.float32(0.5)}, "x") == 0.5
    assert ckpt.saved_float({"x": np.array(2.0)}, "x", 0, 2) == 2.0
    assert ckpt.saved_float({"x": torch.tensor(-1.0)}, "x") == -1.0
    for bad in (math.nan, -math.inf, np.float64(math.nan), 3.0, True, np.zeros(2), torch.zeros(2), "1"):
        with pytest.raises(ckpt.RefusedCheckpoint, match="x"):
            ckpt.saved_float({"x": bad}, "x", 0, 2)


def test_saved_tree_compares_structure_shapes_and_dtypes():
    like = {"w": np.zeros((2, 3), np.float32), "parts": [np.zeros(1, np.int32), 0], "name": "adam"}
    good = {"w": np.ones((2, 3), np.float32), "parts": (np.ones(1, np.int32), np.array(5)), "name": "adam"}
    assert ckpt.saved_tree({"s": good}, "s", like) is good
    bad_ones = [
        {**good, "w": np.ones((3, 2), np.float32)},
        {**good, "w": np.ones((2, 3), np.float64)},
        {**good, "w": torch.ones(2, 3)},
        {**good, "extra": 1},
        {**good, "parts": [np.ones(1, np.int32)]},
        {**good, "parts": [np.ones(1, np.int32), math.inf]},
        {**good, "name": 3},
        [good],
    ]
    for bad in bad_ones:
        with pytest.raises(ckpt.RefusedCheckpoint):
            ckpt.saved_tree({"s": bad}, "s", like)


def test_saved_tree_refuses_a_tree_nested_without_end():
    root_like, root = {}, {}
    node_like, node = root_like, root
    for _ in range(100):
        node_like["a"], node["a"] = {}, {}
        node_like, node = node_like["a"], node["a"]
    with pytest.raises(ckpt.RefusedCheckpoint, match="nests too deep"):
        ckpt.saved_tree({"s": root}, "s", root_like)
