"""Algorithm files' comments are about the algorithm: the comment-line rule and the lab-note check of benchmark/guards/script_lengths.py."""

from pathlib import Path

import pytest

from benchmark.guards.script_lengths import comment_lines, comment_problems, comment_ratios, lab_notes

pytestmark = pytest.mark.fast  # the edit-test loop's tier: pytest -m fast (docs/community/contribution.md)


def test_comment_lines_counts_comments_not_docstrings_or_strings():
    source = '"""A docstring # not a comment."""\nx = "# nor this"  # this one\n# and this one\ny = 1\n'
    assert comment_lines(source) == 2


def test_lab_notes_are_found_in_comments_and_nowhere_else(tmp_path):
    (tmp_path / "cleanrl").mkdir()
    (tmp_path / "cleanrl_utils" / "runtime").mkdir(parents=True)
    (tmp_path / "cleanrl_utils" / "runtime" / "experiment.py").write_text("# the SPS clock\n")
    (tmp_path / "cleanrl" / "algo.py").write_text(
        'HELP = "6.4k vs 4.2k SPS"  # a string is not a comment\n'
        "# a time limit is not a true end\n"
        "# 6.4k vs 4.2k SPS on a whole run (2-core CPU)\n"
        "x = 1  # one thread: on a busy machine two threads waited on each other\n"
        "# unlike ppo.py, the values come from the acting pass\n"
        "# frames 64×64 → 32×32\n"
    )
    assert [note.split(": ")[0] for note in lab_notes(tmp_path)] == [
        "cleanrl/algo.py:3",
        "cleanrl/algo.py:4",
        "cleanrl/algo.py:5",
    ]


def test_algorithm_files_comment_about_the_algorithm_only():
    """No measured figure, machine or core count, or comparison with another file in a comment; comment lines at
    most 1.3 times the original CleanRL file's, median (figures go on the docs pages' Speed notes)."""
    found = comment_ratios()
    assert len(found) == 35
    assert comment_problems(found) == []
    assert lab_notes() == []


def test_originals_comment_counts_cover_the_files_of_their_lengths():
    from benchmark.guards.script_lengths import ORIGINAL_COMMENTS, ORIGINAL_LENGTHS, original_lengths

    assert set(original_lengths(ORIGINAL_COMMENTS)) == set(original_lengths(ORIGINAL_LENGTHS))
    assert all(Path(name).suffix == ".py" for name in original_lengths(ORIGINAL_COMMENTS))
