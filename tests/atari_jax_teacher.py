"""A `dqn_atari_jax.py` model for the JAX QDagger's teacher in tests that give the script fixed arguments.

Like `tests/atari_teacher.py` for the PyTorch twin: the tables of script arguments are built when
their module is imported, so the teacher file is written then, once per test process, and removed
when it exits.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

TEACHER_ENV_ID = "BreakoutNoFrameskip-v4"


def save_jax_teacher(path: Path, env_id: str = TEACHER_ENV_ID, seed: int = 0) -> Path:
    """An untrained dqn_atari_jax.py QNetwork for `env_id`, saved as the script saves one (Flax bytes of its params)."""
    import flax
    import jax

    from cleanrl import dqn_atari_jax

    path.parent.mkdir(parents=True, exist_ok=True)
    env = dqn_atari_jax.make_env(env_id, 0, False, "unused")()
    network = dqn_atari_jax.QNetwork(action_dim=env.action_space.n)
    params = jax.jit(network.init)(jax.random.PRNGKey(seed), env.observation_space.sample()[None])
    env.close()
    partial = path.with_suffix(".partial")  # a reader never sees half a file
    partial.write_bytes(flax.serialization.to_bytes(params))
    partial.replace(path)
    return path


def _session_teacher() -> Path:
    folder = Path(tempfile.gettempdir()) / f"cleanrl-tests-jax-teacher-{os.getpid()}"
    if not (folder / "dqn_atari_jax.cleanrl_model").is_file():
        save_jax_teacher(folder / "dqn_atari_jax.cleanrl_model")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder / "dqn_atari_jax.cleanrl_model"


JAX_TEACHER_MODEL = _session_teacher()
