"""A `dqn_atari.py` model for QDagger's teacher in tests that give the script fixed arguments.

Tables of script arguments (the contract rows, the Hub upload rows) are built when their module is
imported, so the teacher file is written then, once per test process, and removed when it exits.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from tests.helpers import save_untrained_model

TEACHER_ENV_ID = "BreakoutNoFrameskip-v4"


def save_teacher(path: Path, env_id: str = TEACHER_ENV_ID) -> Path:
    """An untrained dqn_atari.py QNetwork for `env_id`, saved as the script saves one (its state_dict)."""
    from cleanrl import dqn_atari

    path.parent.mkdir(parents=True, exist_ok=True)
    env = dqn_atari.make_env(env_id, 0, False, "unused")()
    partial = path.with_suffix(".partial")  # a reader never sees half a file
    save_untrained_model(dqn_atari.QNetwork, env, partial)
    env.close()
    partial.replace(path)
    return path


def _session_teacher() -> Path:
    folder = Path(tempfile.gettempdir()) / f"cleanrl-tests-teacher-{os.getpid()}"
    if not (folder / "dqn_atari.cleanrl_model").is_file():
        save_teacher(folder / "dqn_atari.cleanrl_model")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder / "dqn_atari.cleanrl_model"


TEACHER_MODEL = _session_teacher()
