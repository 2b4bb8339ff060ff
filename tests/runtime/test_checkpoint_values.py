"""A checkpoint's own values (counters, observations, train states, keys) are checked before a resumed run uses them.

The format (`plain_data`) guarantees a checkpoint is data; these tests craft data of the right format with values a
run never writes: a negative, huge or NaN step, an iteration beyond the run's total, observations of another shape,
dtype or with NaNs, a Flax train state with a weight of another shape, a JAX key of another size, a normaliser's
NaN variance. Each must be refused in one line with exit code 2, as a bad command line is, before training starts.
The unchanged checkpoint of each script resumes (exit 0): the bounds refuse nothing a run writes.
"""

import dataclasses
import math
from pathlib import Path
from typing import Annotated  # noqa: F401 - a string annotation below names it

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


def nan_in_first_leaf(tree: dict) -> dict:
    """A copy of a Flax state dict whose first array (in key order) has a NaN first."""
    key = next(iter(tree))
    return {**tree, key: nan_in_first_leaf(tree[key]) if isinstance(tree[key], dict) else nan_at_first(tree[key])}


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
        # a Flax train state goes through saved_tree, not load_state: its weights and Adam moments are checked there
        ({"actor_state.params": nan_in_first_leaf}, "actor_state.params.params.Dense_0.bias holds a nan or an infinity"),
        ({"actor_state.opt_state.0.nu.params.Dense_0.bias": lambda nu: nu - 1}, "0.nu.params.Dense_0.bias is negative"),
        ({"actor_state.opt_state.0.count": lambda count: count - 100}, "actor_state.opt_state.0.count is negative"),
        ({"qf_state.opt_state.0.mu": nan_in_first_leaf}, "qf_state.opt_state.0.mu.qf1.params.Dense_0.bias holds a nan"),
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


def test_saved_tree_refuses_negative_adam_second_moments_and_counts_only():
    """optax's Adam state, as `to_state_dict` writes it: `nu` and `count` below zero make NaN updates."""
    like = {"0": {"count": np.zeros((), np.int32), "mu": {"w": np.zeros(2, np.float32)}, "nu": {"w": np.zeros(2, np.float32)}}}
    ckpt.saved_tree({"s": like}, "s", like)
    negative_mean = {**like["0"], "mu": {"w": -np.ones(2, np.float32)}, "nu": {"w": np.ones(2, np.float32)}}
    ckpt.saved_tree({"s": {"0": negative_mean}}, "s", like)  # a mean may be
    for bad in (
        {**like["0"], "nu": {"w": np.array([0.0, -1e-30], np.float32)}},
        {**like["0"], "count": np.array(-1, np.int32)},
    ):
        with pytest.raises(ckpt.RefusedCheckpoint, match="is negative"):
            ckpt.saved_tree({"s": {"0": bad}}, "s", like)


def test_saved_tree_refuses_a_tree_nested_without_end():
    root_like, root = {}, {}
    node_like, node = root_like, root
    for _ in range(100):
        node_like["a"], node["a"] = {}, {}
        node_like, node = node_like["a"], node["a"]
    with pytest.raises(ckpt.RefusedCheckpoint, match="nests too deep"):
        ckpt.saved_tree({"s": root}, "s", root_like)


# ---------------------------------------------------------------- networks and optimisers (load_state)


def small_network() -> torch.nn.Module:
    torch.manual_seed(0)
    network = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    return network


def stepped(optimizer_class, **settings):
    """A network and its optimiser after two steps: the state a checkpoint holds mid-run."""
    network = small_network()
    optimizer = optimizer_class(network.parameters(), **settings)
    for _ in range(2):
        optimizer.zero_grad()
        network(torch.randn(5, 3)).pow(2).sum().backward()
        optimizer.step()
    return network, optimizer


def refused(obj, state, says: str) -> None:
    with pytest.raises(ckpt.RefusedCheckpoint, match=says):
        ckpt.load_state(obj, state, "learner")


def test_a_networks_state_loads_only_with_its_names_shapes_dtypes_and_finite_floats():
    saved = stepped(torch.optim.Adam)[0].state_dict()
    network = small_network()
    ckpt.load_state(network, saved, "learner")
    assert all(torch.equal(network.state_dict()[key], value) for key, value in saved.items())
    cases = [
        ({**saved, "0.weight": nan_at_first(saved["0.weight"])}, "learner 0.weight holds a nan or an infinity"),
        ({**saved, "1.running_var": torch.full((4,), math.inf)}, "learner 1.running_var holds a nan"),  # a buffer
        ({**saved, "0.weight": saved["0.weight"].double()}, r"learner 0.weight is torch.float64 \(4, 3\)"),
        ({**saved, "0.weight": saved["0.weight"].T}, r"learner 0.weight is torch.float32 \(3, 4\)"),
        ({**saved, "0.weight": saved["0.weight"].numpy()}, r"learner 0.weight is float32 \(4, 3\)"),
        ({**saved, "1.num_batches_tracked": torch.tensor(2.0)}, "learner 1.num_batches_tracked is torch.float32"),
        (
            {key: value for key, value in saved.items() if key != "2.bias"},
            r"does not hold this run's tensors \(\['2.bias'\]\)",
        ),
        ({**saved, "extra": torch.zeros(1)}, r"does not hold this run's tensors \(\['extra'\]\)"),
        ({**saved, 0: torch.zeros(1)}, r"does not hold this run's tensors \(\['0'\]\)"),
        ([saved], "does not hold this run's tensors"),
    ]
    for state, says in cases:
        refused(small_network(), state, says)


SCRIPTS_OPTIMISERS = [  # as the scripts make them (grep "optim." cleanrl/)
    (torch.optim.Adam, {"lr": 2.5e-4, "eps": 1e-5}),
    (torch.optim.Adam, {"lr": 1e-3, "fused": True}),
    (torch.optim.RAdam, {"lr": 1e-4}),
]


@pytest.mark.parametrize(("optimizer_class", "settings"), SCRIPTS_OPTIMISERS)
def test_an_optimisers_own_state_loads_and_steps_on_as_the_original(optimizer_class, settings):
    network, optimizer = stepped(optimizer_class, **settings)
    twin = small_network()
    twin.load_state_dict(network.state_dict())
    twin_optimizer = optimizer_class(twin.parameters(), **settings)
    ckpt.load_state(twin_optimizer, plain_data.loads(plain_data.dumps(optimizer.state_dict())), "optimizer")
    for model, opt in ((network, optimizer), (twin, twin_optimizer)):
        torch.manual_seed(1)
        opt.zero_grad()
        model(torch.randn(5, 3)).pow(2).sum().backward()
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(network.parameters(), twin.parameters(), strict=True))


def gradient_runs(steps: int = 400) -> dict[str, np.ndarray]:
    """Gradient sequences (steps x 6) that push Adam's |m| / sqrt(v) hardest, or its float32 sums."""
    rng = np.random.default_rng(0)
    return {
        # sizes spread over 35 orders, signs at random
        "spread": rng.normal(size=(steps, 6)) * 10.0 ** rng.uniform(-30, 5, size=(steps, 6)),
        # squares underflow float32 (1e-25 squared is 0): m grows, v stays 0
        "underflow": np.full((steps, 6), 1e-25),
        # the Cauchy-Schwarz worst case: g_k proportional to (b1 / b2)^(t - k), one sign
        "worst": np.tile((0.9 / 0.999) ** np.arange(steps, 0, -1.0)[:, None], (1, 6)),
        "constant": np.ones((steps, 6)),
    }


@pytest.mark.parametrize("optimizer_class", [torch.optim.Adam, torch.optim.AdamW, torch.optim.RAdam])
@pytest.mark.parametrize("kind", ["spread", "underflow", "worst", "constant"])
def test_adams_moments_after_any_gradients_load_and_a_first_moment_no_step_makes_is_refused(optimizer_class, kind):
    """|m| <= (1-b1) / sqrt((1-b2)(1-b1^2/b2)) sqrt(v), 7.3 sqrt(v) at the default betas, whatever the gradients."""
    parameter = torch.zeros(6, requires_grad=True)
    optimizer = optimizer_class([parameter])
    for gradient in gradient_runs()[kind]:
        parameter.grad = torch.tensor(gradient, dtype=torch.float32)
        optimizer.step()
    state = plain_data.loads(plain_data.dumps(optimizer.state_dict()))
    ckpt.load_state(optimizer_class([torch.zeros(6, requires_grad=True)]), state, "optimizer")
    m, v = state["state"][0]["exp_avg"], state["state"][0]["exp_avg_sq"]
    state["state"][0]["exp_avg"] = m.clone().index_fill_(0, torch.tensor([2]), float(7.4 * v[2].sqrt() + 1e-14))
    refused(optimizer_class([torch.zeros(6, requires_grad=True)]), state, "first moment larger than Adam's steps make")


@pytest.mark.parametrize("kind", ["spread", "underflow", "worst", "constant"])
def test_optax_adams_moments_after_any_gradients_pass_and_a_first_moment_no_step_makes_is_refused(kind):
    """The JAX scripts' optax.adam state, through `saved_tree` as they read it."""
    flax_serialization = pytest.importorskip("flax.serialization")
    optax = pytest.importorskip("optax")
    params = {"w": np.zeros(6, np.float32)}
    tx = optax.adam(1e-3)
    state = tx.init(params)
    for gradient in gradient_runs()[kind]:
        _, state = tx.update({"w": np.float32(gradient)}, state, params)
    host = pytest.importorskip("jax").device_get(flax_serialization.to_state_dict(state))  # as the scripts save it
    saved = plain_data.loads(plain_data.dumps({"opt": host}))
    like = flax_serialization.to_state_dict(tx.init(params))
    ckpt.saved_tree(saved, "opt", like)
    adam = saved["opt"]["0"]
    mu = np.array(adam["mu"]["w"])
    mu[2] = 7.4 * math.sqrt(float(adam["nu"]["w"][2])) + 1e-14
    adam["mu"]["w"] = mu
    with pytest.raises(ckpt.RefusedCheckpoint, match="first moment larger than Adam's steps make"):
        ckpt.saved_tree(saved, "opt", like)


def test_an_optimiser_state_before_its_first_step_loads():
    network = small_network()
    ckpt.load_state(torch.optim.Adam(network.parameters()), torch.optim.Adam(network.parameters()).state_dict(), "o")


def with_group(state: dict, **settings) -> dict:
    return {**state, "param_groups": [{**state["param_groups"][0], **settings}]}


def with_entry(state: dict, index: int, **values) -> dict:
    entries = dict(state["state"])
    entries[index] = {key: value for key, value in {**entries.get(index, {}), **values}.items() if value is not DELETE}
    return {**state, "state": entries}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda s: with_group(s, lr=math.nan), r"learner lr \(nan\) is not a finite number in 0 to 0.001"),
        (lambda s: with_group(s, lr=math.inf), r"learner lr \(inf\) is not a finite number"),
        (lambda s: with_group(s, lr=-1e-3), r"learner lr \(-0.001\) is not a finite number in 0 to 0.001"),
        (lambda s: with_group(s, lr=10**400), "learner lr .* is not a finite number"),
        (lambda s: with_group(s, lr=2e-3), r"learner lr \(0.002\) is not a finite number in 0 to 0.001"),
        (lambda s: with_group(s, lr=True), r"learner lr \(True\)"),
        (lambda s: with_group(s, lr="0.1"), r"learner lr \('0.1'\)"),
        (lambda s: with_group(s, lr=torch.tensor(0.1)), "learner lr .a Tensor."),
        (lambda s: with_group(s, eps=0.0), r"learner eps \(0.0\) is not this run's 1e-08"),
        (lambda s: with_group(s, eps=math.nan), r"learner eps \(nan\)"),
        (lambda s: with_group(s, betas=(1.0, 0.999)), r"learner betas \(1.0\) is not this run's 0.9"),
        (lambda s: with_group(s, betas=(0.9, -0.1)), r"learner betas \(-0.1\)"),
        (lambda s: with_group(s, betas=(0.9,)), "learner betas is not 2 values"),
        (lambda s: with_group(s, weight_decay=-1.0), r"learner weight_decay \(-1.0\)"),
        (lambda s: with_group(s, fused=True), "learner fused is True, this run's None"),
        (lambda s: with_group(s, amsgrad=None), "learner amsgrad is None, this run's False"),
        (lambda s: with_group(s, maximize=1), "learner maximize is 1, this run's False"),
        (lambda s: with_group(s, params=[0, 1, 2, 3, 4, 5, 6]), "param group 0 is not this run's"),
        (lambda s: with_group(s, params=torch.arange(6)), "param group 0 is not this run's"),
        (lambda s: {**s, "param_groups": s["param_groups"] * 2}, "is not a state of this run's optimizer"),
        (lambda s: {**s, "extra": 1}, "is not a state of this run's optimizer"),
        (lambda s: with_entry(s, 0, exp_avg=nan_at_first(s["state"][0]["exp_avg"])), "learner state 0 exp_avg holds a nan"),
        (lambda s: with_entry(s, 2, exp_avg_sq=-s["state"][2]["exp_avg_sq"] - 1), "learner state 2 exp_avg_sq is negative"),
        (lambda s: with_entry(s, 1, step=torch.tensor(-1.0)), "learner state 1 step is negative"),
        (lambda s: with_entry(s, 1, step=torch.tensor(math.inf)), "learner state 1 step holds a nan or an infinity"),
        (lambda s: with_entry(s, 1, step=2), r"learner state 1 step is a int, not an array"),
        (lambda s: with_entry(s, 0, exp_avg=torch.zeros(3)), r"learner state 0 exp_avg is torch.float32 \(3,\), this run's"),
        (lambda s: with_entry(s, 0, exp_avg=s["state"][0]["exp_avg"].double()), "state 0 exp_avg is torch.float64"),
        (lambda s: with_entry(s, 0, exp_avg_sq=DELETE), r"state 0 is not \['exp_avg', 'exp_avg_sq', 'step'\]"),
        (lambda s: with_entry(s, 0, max_exp_avg_sq=torch.zeros(4, 3)), "state 0 is not"),
        (lambda s: with_entry(s, 99, step=torch.tensor(1.0)), "has a state 99, for no parameter"),
        (lambda s: {**s, "state": {"0": s["state"][0]}}, "state is not by parameter index"),
        (lambda s: {**s, "state": {True: s["state"][1]}}, "state is not by parameter index"),
        (lambda s: {**s, "state": [s["state"][0]]}, "state is not by parameter index"),
    ],
)
def test_an_optimisers_state_that_a_run_never_writes_is_refused(change, says):
    network, optimizer = stepped(torch.optim.Adam, lr=1e-3)
    refused(torch.optim.Adam(network.parameters(), lr=1e-3), change(optimizer.state_dict()), says)


@pytest.mark.parametrize(
    ("optimizer_class", "settings"),
    [
        (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
        (torch.optim.RMSprop, {"lr": 0.01, "momentum": 0.5, "centered": True}),
        (torch.optim.Adam, {"amsgrad": True}),
        (torch.optim.AdamW, {}),
        (torch.optim.Adagrad, {}),
        (torch.optim.Adafactor, {}),  # keeps row and column statistics for a matrix, one variance for a vector
    ],
)
def test_other_optimisers_states_load_and_a_nan_in_each_is_refused(optimizer_class, settings):
    """What each optimiser keeps is read from a step of a twin of it, not from a list: others than the scripts' work."""
    network, optimizer = stepped(optimizer_class, **settings)
    saved = optimizer.state_dict()
    ckpt.load_state(optimizer_class(network.parameters(), **settings), saved, "learner")
    for key, value in saved["state"][0].items():
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            refused(optimizer_class(network.parameters(), **settings), with_entry(saved, 0, **{key: value * math.nan}), key)


# ---------------------------------------------------------------- arguments (restored_args) and the run's clock


@dataclasses.dataclass
class Flags:
    """Annotations as strings, as a script with `from __future__ import annotations` has them."""

    num_envs: "int" = 4
    learning_rate: "float" = 2.5e-4
    anneal_lr: "bool" = True
    target_kl: "float | None" = None
    teacher: "Annotated[str | None, 'an alias']" = None
    seeds: "list[int]" = dataclasses.field(default_factory=lambda: [1, 2])


@pytest.mark.parametrize(
    ("name", "value", "fits"),
    [
        ("num_envs", 8, True),
        ("num_envs", 4.0, False),
        ("num_envs", True, False),
        ("num_envs", 1e30, False),
        ("learning_rate", 1, True),
        ("learning_rate", 0.5, True),
        ("learning_rate", "0.5", False),
        ("learning_rate", None, False),
        ("anneal_lr", 1, False),
        ("anneal_lr", False, True),
        ("target_kl", None, True),
        ("target_kl", 0.02, True),
        ("target_kl", "x", False),
        ("teacher", "user/model", True),
        ("teacher", None, True),
        ("teacher", 3, False),
        ("seeds", (1, 2, 3), True),
        ("seeds", [1.0], False),
        ("seeds", "12", False),
    ],
)
def test_saved_arguments_must_be_of_their_fields_declared_types(name, value, fits):
    saved = {**dataclasses.asdict(Flags()), name: value}
    if fits:
        assert getattr(ckpt.restored_args(Flags(), {"args": saved}), name) == value
    else:
        with pytest.raises(ckpt.RefusedCheckpoint, match=f"--{name.replace('_', '-')} is a {type(value).__name__}"):
            ckpt.restored_args(Flags(), {"args": saved})


@dataclasses.dataclass
class Unreadable:
    """A hint that cannot be read here (tyro could not parse such a script's flags either): the defaults' types."""

    count: "int" = 1
    unknown: "NotImportableHere" = 3  # noqa: F821
    optional: "str | None" = None


def test_saved_arguments_of_unreadable_hints_go_by_their_defaults_types():
    assert ckpt.restored_args(Unreadable(), {"args": {"count": 2, "unknown": 5, "optional": "x"}}).unknown == 5
    for name, value in (("count", 2.0), ("unknown", 5.0), ("count", True)):
        saved = {**dataclasses.asdict(Unreadable()), name: value}
        with pytest.raises(ckpt.RefusedCheckpoint, match=f"--{name} is a {type(value).__name__}"):
            ckpt.restored_args(Unreadable(), {"args": saved})


def run_state(**changes) -> dict:
    state = {"args": {}, "run_name": "a", "wandb_id": None, "global_step": 10, "elapsed_time": 12.5, "rng": {}, "envs": None}
    return {**state, **changes}


def test_the_runs_clock_is_a_time_a_run_can_have_taken():
    for elapsed in (0, 12.5, 3e8):
        ckpt.check_run_state(run_state(elapsed_time=elapsed))
    for elapsed in (-1e300, -0.5, 1e9, math.inf, math.nan):
        with pytest.raises(ckpt.RefusedCheckpoint, match="clock is out of range"):
            ckpt.check_run_state(run_state(elapsed_time=elapsed))


# ---------------------------------------------------------------- Stable-Baselines3 replay memories


def sb3_memory(action_space, size: int = 8):
    from gymnasium import spaces
    from stable_baselines3.common.buffers import ReplayBuffer

    observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    return ReplayBuffer(size, observation_space, action_space, "cpu", handle_timeout_termination=False)


def filled(action_space, actions):
    memory = sb3_memory(action_space)
    for action in actions:
        memory.add(np.ones((1, 2)), np.ones((1, 2)), np.array([action]), np.array([1.0]), np.array([False]), [{}])
    return ckpt.state_of(memory)


def test_a_replay_memory_of_values_a_run_adds_loads():
    from gymnasium import spaces

    for space, actions in [
        (spaces.Discrete(3, start=-1), [-1, 0, 1]),
        (spaces.MultiDiscrete([2, 3]), [[0, 2], [1, 0]]),
        (spaces.Box(-2.0, 2.0, (2,), np.float32), [[2.0, -2.0], [np.float32(2.0) + np.float32(1e-6), 0.0]]),  # rounding
        (spaces.Box(-np.inf, np.inf, (1,), np.float32), [[1e30]]),
    ]:
        saved = filled(space, actions)
        memory = sb3_memory(space)
        ckpt.load_state(memory, saved, "replay_buffer")
        assert memory.pos == len(actions) and np.array_equal(memory.actions[: len(actions)], saved["actions"])


def test_a_replay_memory_of_values_no_run_adds_is_refused_and_not_copied():
    from gymnasium import spaces

    discrete, box = spaces.Discrete(3, start=-1), spaces.Box(-2.0, 2.0, (2,), np.float32)
    cases = [
        (discrete, "rewards", nan_at_first, "its rewards hold a nan or an infinity"),
        (discrete, "observations", lambda a: a * math.inf, "its observations hold a nan or an infinity"),
        (discrete, "actions", lambda a: np.full_like(a, 2), "its actions are not all in the action space Discrete"),
        (discrete, "actions", lambda a: np.full_like(a, -2), "its actions are not all in"),
        (spaces.MultiDiscrete([2, 3]), "actions", lambda a: a + [0, 1], "its actions are not all in"),
        (box, "actions", lambda a: a + 0.1, "its actions are not all in the action space Box"),
        (box, "actions", nan_at_first, "its actions hold a nan or an infinity"),
        (discrete, "dones", lambda a: a + 2, "its dones are not all 0 or 1"),
        (discrete, "dones", lambda a: a + 0.5, "its dones are not all 0 or 1"),
    ]
    for space, name, change, says in cases:
        actions = [[2.0, -2.0], [1.0, 0.0]] if space is box else [[0, 2], [1, 0]] if space.shape == (2,) else [-1, 1]
        saved = filled(space, actions)
        memory = sb3_memory(space)
        refused(memory, {**saved, name: change(saved[name])}, says)
        assert memory.pos == 0 and not memory.observations.any(), "nothing is copied into a memory that is refused"
