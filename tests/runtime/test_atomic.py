"""Files written whole or not at all: a writer SIGKILLed halfway leaves the previous file, never half a new one."""

import json

from benchmark.harness import is_done
from cleanrl_utils import atomic
from tests.helpers import killed_mid_write


def test_a_write_killed_halfway_leaves_the_previous_file(tmp_path):
    target = tmp_path / "table.md"
    atomic.write_text(target, "the old table\n")
    killed_mid_write(
        f"from cleanrl_utils import atomic; atomic.write_text({str(target)!r}, 'the new table ' * 1000)", tmp_path
    )
    assert target.read_text() == "the old table\n"
    atomic.write_bytes(target, b"next")  # a later write goes through; the killed one's temporary file is never read
    assert target.read_bytes() == b"next"


def test_a_benchmark_summary_killed_halfway_is_absent_so_its_run_is_not_done(tmp_path):
    result = tmp_path / "out" / "ours__ppo__CartPole-v1__1.json"
    code = f"from benchmark.harness import write_result; write_result(__import__('pathlib').Path({str(result)!r}), "
    killed_mid_write(code + "{'sps': 1.0, 'episodic_returns': [1.0] * 500})", tmp_path)
    assert not result.exists() and not is_done(result)
    assert [p.name for p in result.parent.iterdir() if not p.name.startswith(".")] == []
    result.write_text(json.dumps({"sps": 1.0}))
    assert is_done(result)
