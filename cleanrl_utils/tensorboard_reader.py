"""Read what a run logged back from its TensorBoard event files."""

from dataclasses import dataclass
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

Series = list[tuple[int, float]]


class EventFileError(ValueError):
    """A run's event files hold bytes that are not what TensorBoard writes: the message names the run folder."""


@dataclass(frozen=True)
class RunEvents:
    """Everything `read_run` gets from one pass over a run's event files."""

    scalars: dict[str, Series]
    texts: dict[str, str]
    # Wall-clock seconds (Unix time) of the first and last logged value, None when nothing was logged.
    first_wall_time: float | None
    last_wall_time: float | None


def _load(logdir: str | Path) -> EventAccumulator:
    if not Path(logdir).is_dir():
        raise FileNotFoundError(f"no TensorBoard run folder at {logdir}")
    # size_guidance 0 keeps every event: the default samples long series down.
    accumulator = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    try:
        accumulator.Reload()
    except Exception as e:  # protobuf's DecodeError and the like: a record with valid framing but not an Event
        raise EventFileError(f"{logdir}: an event file cannot be read ({type(e).__name__}: {e})") from None
    return accumulator


def _scalars(accumulator: EventAccumulator) -> dict[str, Series]:
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def _texts(accumulator: EventAccumulator, logdir: str | Path) -> dict[str, str]:
    texts = {}
    for tag in accumulator.Tags()["tensors"]:
        events = accumulator.Tensors(tag)
        if events and events[0].tensor_proto.string_val:
            try:
                texts[tag.removesuffix("/text_summary")] = events[0].tensor_proto.string_val[0].decode()
            except UnicodeDecodeError:
                raise EventFileError(f"{logdir}: the text {tag!r} is not UTF-8") from None
    return texts


def _wall_times(accumulator: EventAccumulator) -> list[float]:
    # Only logged values count: the writer's own file-header event is stamped when the
    # writer opens, which says nothing about when the run logged its first value.
    tags = accumulator.Tags()
    times = [e.wall_time for tag in tags["scalars"] for e in accumulator.Scalars(tag)]
    times += [e.wall_time for tag in tags["tensors"] for e in accumulator.Tensors(tag)]
    return times


def read_scalars(logdir: str | Path) -> dict[str, Series]:
    """Every scalar series of the run in `logdir`, as {tag: [(step, value), ...]} in logging order."""
    return _scalars(_load(logdir))


def read_texts(logdir: str | Path) -> dict[str, str]:
    """The text summaries of the run (e.g. the `hyperparameters` table), as {tag: first text}."""
    return _texts(_load(logdir), logdir)


def read_wall_times(logdir: str | Path, tag: str) -> list[tuple[int, float]]:
    """(step, Unix wall-clock time) of every value logged under `tag`, in logging order."""
    return [(e.step, e.wall_time) for e in _load(logdir).Scalars(tag)]


def read_run(logdir: str | Path) -> RunEvents:
    """Scalars, texts and the wall-time span of the run in `logdir`, reading its events once."""
    accumulator = _load(logdir)
    times = _wall_times(accumulator)
    return RunEvents(
        _scalars(accumulator), _texts(accumulator, logdir), min(times) if times else None, max(times) if times else None
    )
