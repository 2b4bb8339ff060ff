"""Reading the model files a user points a tool at (`--model-path`, a teacher, a Hub download): data, never code.

A PyTorch script's `.cleanrl_model` is a `torch.save` zip of tensors and plain values. Before torch reads it,
`check_torch_file` looks at what the file is, by its bytes: a regular file, a zip whose entries are exactly those
`torch.save` writes (one folder of `data.pkl`, `data/N` records and version files), each stored uncompressed with
the size it declares, all of them together no larger than the file. TorchScript archives (which `torch.load`
would hand to `torch.jit.load`, running their code), torch's legacy non-zip format, bare pickles and anything
else are refused there, in one line, unread. Then `torch.load(weights_only=True)` unpickles `data.pkl` with
torch's own restricted unpickler, which builds tensors and plain containers only.

A JAX script's model is Flax's msgpack bytes, which describe values only; `read_flax` refuses the same foreign
files first, so that a torch file or a pickle given to a JAX tool is named for what it is.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

from cleanrl_utils.runtime import plain_data

TORCH_ENTRY = re.compile(
    r"(data\.pkl|byteorder|version|\.format_version|\.storage_alignment|data/\d+|\.data/serialization_id|\.data/version)"
)


class ModelFileError(ValueError):
    """A file that is not a model file of the expected kind; the message is one line naming it."""


def check_torch_file(path: str | Path) -> None:
    """Raise ModelFileError unless `path` is, by its content, a zip that `torch.save` wrote (see above)."""
    with _open(path) as file:
        head = file.read(32)
        if not head.startswith(b"PK\x03\x04"):
            raise ModelFileError(f"{path} is {_kind(head)}, not a torch.save file")
        size = os.fstat(file.fileno()).st_size
        try:
            entries = zipfile.ZipFile(file).infolist()
        except (zipfile.BadZipFile, ValueError, OSError) as e:
            raise ModelFileError(f"{path} is a damaged zip archive ({' '.join(str(e).split())[:100]})") from None
        _check_torch_entries(path, entries, size)


def _check_torch_entries(path: str | Path, entries: list[zipfile.ZipInfo], size: int) -> None:
    names = [entry.filename for entry in entries]
    if any(part in name for name in names for part in plain_data.TORCHSCRIPT_ENTRIES):
        raise ModelFileError(f"{path} is a TorchScript archive (loading it runs its code), not a torch.save file")
    folders = {name.split("/", 1)[0] for name in names}
    if len(folders) != 1 or not all("/" in name for name in names):
        raise ModelFileError(f"{path} is a zip archive, not a torch.save file (its entries are not in one folder)")
    (folder,) = folders
    odd = [name for name in names if not TORCH_ENTRY.fullmatch(name[len(folder) + 1 :])]
    if odd or names.count(f"{folder}/data.pkl") != 1 or len(set(names)) != len(names):
        shown = f" ({odd[0][:60]!r})" if odd else ""
        raise ModelFileError(f"{path} is a zip archive with entries torch.save does not write{shown}")
    if any(e.compress_type != zipfile.ZIP_STORED or e.file_size != e.compress_size for e in entries):
        raise ModelFileError(f"{path} has compressed zip entries, which torch.save does not write")
    if sum(entry.file_size for entry in entries) > size:
        raise ModelFileError(f"{path} declares entries larger than the file itself")


def _open(path: str | Path) -> BinaryIO:
    try:
        return plain_data.open_regular(path)
    except plain_data.FormatError as e:
        raise ModelFileError(str(e)) from None


def _kind(head: bytes) -> str:
    if not head:
        return "an empty file"
    if head.startswith(plain_data.MAGIC):
        return "a checkpoint (for --resume)"
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive (a torch.save file or TorchScript?)"
    return plain_data.foreign_kind(head) or "a file of another kind"


def read_torch(path: str | Path, device: Any = "cpu") -> Any:
    """The tensors and plain values of the torch model file `path`, checked first (ModelFileError), then read with
    `torch.load(weights_only=True)` (whose own errors, for a pickle that asks for more, propagate)."""
    import torch

    check_torch_file(path)
    return torch.load(path, map_location=device, weights_only=True)


def read_flax(path: str | Path) -> Any:
    """What the Flax msgpack file `path` holds (nested dicts of arrays); ModelFileError for a file of another kind."""
    from flax.serialization import msgpack_restore

    with _open(path) as file:
        data = file.read()
    # Flax's bytes are a msgpack map: a first byte 0x80-0x8f (0x80 alone: an empty one), 0xde or 0xdf; a pickle
    # starts with 0x80 and its protocol
    is_map = data == b"\x80" or data[:1] in (b"\xde", b"\xdf") or 0x81 <= (data[:1] or b"\0")[0] <= 0x8F
    if not is_map:
        raise ModelFileError(f"{path} is {_kind(data[:32])}, not a file of Flax parameters")
    try:
        return msgpack_restore(data)
    except Exception as e:  # msgpack's errors share no base class worth naming
        raise ModelFileError(f"{path} is not a file of Flax parameters ({type(e).__name__})") from None
