"""Read what a run logged back from its TensorBoard event files."""

from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def _load(logdir: str | Path) -> EventAccumulator:
    if not Path(logdir).is_dir():
        raise FileNotFoundError(f"no TensorBoard run folder at {logdir}")
    # size_guidance 0 keeps every event: the default samples long series down.
    accumulator = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def read_scalars(logdir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series of the run in `logdir`, as {tag: [(step, value), ...]} in logging order."""
    accumulator = _load(logdir)
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def read_texts(logdir: str | Path) -> dict[str, str]:
    """The text summaries of the run (e.g. the `hyperparameters` table), as {tag: first text}."""
    accumulator = _load(logdir)
    texts = {}
    for tag in accumulator.Tags()["tensors"]:
        events = accumulator.Tensors(tag)
        if events and events[0].tensor_proto.string_val:
            texts[tag.removesuffix("/text_summary")] = events[0].tensor_proto.string_val[0].decode()
    return texts
