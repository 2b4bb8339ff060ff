"""Files written whole or not at all: a writer SIGKILLed halfway leaves the previous file, never half a new one."""

import json

import pytest

from benchmark.harness import is_done
from cleanrl_utils.runtime import atomic
from tests.helpers import killed_mid_write


def test_a_write_killed_halfway_leaves_the_previous_file(tmp_path):
    target = tmp_path / "table.md"
    atomic.write_text(target, "the old table\n")
    killed_mid_write(
        f"from cleanrl_utils.runtime import atomic; atomic.write_text({str(target)!r}, 'the new table ' * 1000)", tmp_path
    )
    assert target.read_text() == "the old table\n"
    atomic.write_bytes(target, b"next")  # a later write goes through; the killed one's temporary file is never read
    assert target.read_bytes() == b"next"


def test_summary_killed_halfway_is_absent_so_its_run_is_not_done(tmp_path):
    result = tmp_path / "out" / "ours__ppo__CartPole-v1__1.json"
    code = f"from benchmark.harness import write_result; write_result(__import__('pathlib').Path({str(result)!r}), "
    killed_mid_write(code + "{'sps': 1.0, 'episodic_returns': [1.0] * 500})", tmp_path)
    assert not result.exists() and not is_done(result)
    assert [p.name for p in result.parent.iterdir() if not p.name.startswith(".")] == []
    result.write_text(json.dumps({"sps": 1.0}))
    assert is_done(result)


@pytest.mark.fast
def test_link_planted_at_the_temporary_name_is_replaced_not_followed(tmp_path):
    import os

    precious = tmp_path / "precious"
    precious.write_text("keep me\n")
    target = tmp_path / "model.cleanrl_model"
    os.symlink(precious, tmp_path / f".model.{os.getpid()}.tmp.cleanrl_model")  # the temporary file's name
    atomic.write_bytes(target, b"the model")
    assert precious.read_text() == "keep me\n" and target.read_bytes() == b"the model"
    os.symlink(precious, tmp_path / "linked.cleanrl_model")  # a link at the final name: replaced by the new file
    atomic.write_bytes(tmp_path / "linked.cleanrl_model", b"new")
    assert precious.read_text() == "keep me\n" and not (tmp_path / "linked.cleanrl_model").is_symlink()
