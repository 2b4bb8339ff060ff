"""qdagger_dqn_atari_jax_impalacnn.py against its PyTorch twin qdagger_dqn_atari_impalacnn.py: both files' own training
loops, from the same student weights, with the same teacher, on the same games and batches, update the student the
same way. What still differs between the twins is listed on docs/rl-algorithms/qdagger.md: the students' initial
weights (Flax's and PyTorch's default initialisations) and the max-pooling windows' padding, which this test aligns."""

import flax
import flax.linen
import jax
import numpy as np
import pytest
import torch

from benchmark.checks.qdagger_reincarnation import torch_teacher_as_flax
from cleanrl_utils.tensorboard_reader import read_scalars
from tests.algorithms.test_ddpg import run_in_process as run_torch_in_process
from tests.algorithms.test_ddpg_td3_jax import run_in_process
from tests.fixtures.teachers import TEACHER_MODEL

# Breakout: the teacher scored on one game and playing 100 steps into its memory; 3 offline updates, then 101 online
# steps learning from global step 96 on, every 4th step (updates at 96 and 100, the second's losses logged); the
# target copied every 2nd step. Epsilon 1 throughout, so both runs play the same random games; batches of 8.
TWIN_ARGS = (
    "--teacher-eval-episodes", "1", "--teacher-steps", "100", "--offline-steps", "3", "--offline-eval-frequency", "0",
    "--total-timesteps", "101", "--learning-starts", "95", "--start-e", "1", "--end-e", "1", "--batch-size", "8",
    "--buffer-size", "300", "--target-network-frequency", "2",
)  # fmt: skip


def torch_padding_max_pool(x, window_shape, strides=None, padding="VALID"):
    """Flax's max pooling with the PyTorch student's padding: one cell on every side (Flax's SAME pads 84 and 42 at the
    far end only, so its windows sit one pixel off PyTorch's there)."""
    return MAX_POOL(x, window_shape, strides, padding=((1, 1), (1, 1)))


MAX_POOL = flax.linen.max_pool


def flax_student_as_torch(params: dict) -> list[np.ndarray]:
    """The JAX student's kernels and biases, in the order the PyTorch student makes its layers, in its layouts."""
    layers = params["params"]
    convs = []
    for stage in range(3):
        sequence = layers[f"ConvSequence_{stage}"]
        for conv in [sequence["Conv_0"]] + [sequence[f"ResidualBlock_{b}"][f"Conv_{c}"] for b in (0, 1) for c in (0, 1)]:
            convs.append((np.asarray(conv["kernel"]).transpose(3, 2, 0, 1), np.asarray(conv["bias"])))
    hidden = np.asarray(layers["Dense_0"]["kernel"])  # (11 x 11 x 32, 256): rows in Flax's (row, column, channel) order
    hidden = hidden.reshape(11, 11, 32, -1).transpose(3, 2, 0, 1).reshape(hidden.shape[1], -1)
    dense = [(hidden, np.asarray(layers["Dense_0"]["bias"]))]
    dense.append((np.asarray(layers["Dense_1"]["kernel"]).T, np.asarray(layers["Dense_1"]["bias"])))
    return convs + dense


@pytest.mark.extended  # ~30 s of one core: CI runs it after the quick run
def test_the_jax_student_learns_as_the_pytorch_student(tmp_path, monkeypatch):
    for side in ("jax", "torch"):
        (tmp_path / side).mkdir()
    flax_teacher = torch_teacher_as_flax(TEACHER_MODEL, tmp_path / "teacher.cleanrl_model")
    with monkeypatch.context() as patch:
        patch.setattr(flax.linen, "max_pool", torch_padding_max_pool)
        ran_jax = run_in_process(
            "qdagger_dqn_atari_jax_impalacnn.py", *TWIN_ARGS, "--teacher-model-path", str(flax_teacher),
            cwd=tmp_path / "jax", monkeypatch=patch,
        )  # fmt: skip
        # the student's weights before training: the file's own initialisation, from its seed
        jax_module = ran_jax["q_network"]
        key = jax.random.split(jax.random.PRNGKey(1), 2)[1]
        initial = jax_module.init(key, np.zeros((1, 4, 84, 84), np.uint8))
        final_jax = lambda x: np.asarray(jax_module.apply(ran_jax["q_state"].params, x))  # noqa: E731
        frames = np.random.default_rng(0).integers(0, 256, (16, 4, 84, 84), dtype=np.uint8)
        q_jax, q_jax_initial = final_jax(frames), np.asarray(jax_module.apply(initial, frames))
        target_jax = np.asarray(jax_module.apply(ran_jax["q_state"].target_params, frames))

    student = flax_student_as_torch(initial)
    layers = iter(student + student)  # the student, then its target network (which copies it)

    student_shapes = {weight.shape for weight, _ in student}  # none of them a shape of the teacher's Nature CNN

    def jax_weights(layer):
        if tuple(layer.weight.shape) not in student_shapes:  # a teacher layer: its model file's weights replace these
            return
        weight, bias = next(layers)
        assert weight.shape == tuple(layer.weight.shape), "the PyTorch student makes its layers in another order"
        with torch.no_grad():
            layer.weight.copy_(torch.as_tensor(weight))
            layer.bias.copy_(torch.as_tensor(bias))

    with monkeypatch.context() as patch:
        patch.setattr(torch.nn.Conv2d, "reset_parameters", jax_weights)
        patch.setattr(torch.nn.Linear, "reset_parameters", jax_weights)
        ran_torch = run_torch_in_process(
            "qdagger_dqn_atari_impalacnn.py", *TWIN_ARGS, "--teacher-model-path", str(TEACHER_MODEL),
            cwd=tmp_path / "torch", monkeypatch=patch,
        )  # fmt: skip
    assert next(layers, None) is None, "the PyTorch file made other student layers than the JAX file's"

    # the teacher converted for the JAX file computes the PyTorch teacher's Q-values
    with torch.no_grad():
        teacher_torch = ran_torch["teacher_model"](torch.as_tensor(frames)).numpy()
    teacher_jax = np.asarray(ran_jax["teacher_model"].apply(ran_jax["teacher_params"], frames))
    np.testing.assert_allclose(teacher_jax, teacher_torch, rtol=1e-4, atol=1e-5)

    with torch.no_grad():
        q_torch = ran_torch["q_network"](torch.as_tensor(frames)).numpy()
        target_torch = ran_torch["target_network"](torch.as_tensor(frames)).numpy()
    # the 5 updates moved the student, and both files moved it to the same place (to float32 rounding: measured 1e-5
    # of the move after 1 or 2 updates, growing over tens of updates of batches of 8 as two float32 programs drift:
    # 4e-3 after 30), and copied it into their targets at the same steps
    assert np.abs(q_jax - q_jax_initial).max() > 0.5
    assert np.abs(q_jax - q_torch).max() < 1e-3 * np.abs(q_jax - q_jax_initial).max()
    assert np.abs(target_jax - target_torch).max() < 1e-3 * np.abs(q_jax - q_jax_initial).max()
    assert ran_jax["steps_done"] == ran_torch["steps_done"] == 104
    # the losses logged: the first offline update's (the same weights and batch) and the last online one's
    for tag, step in [(f"charts/offline/{key}", 0) for key in ("q_loss", "distill_loss")] + [
        (f"losses/{key}", 100) for key in ("td_loss", "distill_loss", "q_values")
    ]:
        (jax_value,), (torch_value,) = (logged(tmp_path / side, tag, step) for side in ("jax", "torch"))
        assert jax_value != 0 and jax_value == pytest.approx(torch_value, rel=1e-4), tag


def logged(cwd, tag, step):
    (run_dir,) = (cwd / "runs").glob("*")
    return [value for at, value in read_scalars(run_dir)[tag] if at == step]
