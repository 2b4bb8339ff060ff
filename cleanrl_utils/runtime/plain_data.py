"""Plain data on disk: the format of checkpoints, which holds values and arrays and cannot run code.

A file is `MAGIC`, the length of its header (8 bytes, little-endian), the header (JSON), then the raw bytes of
its arrays one after the other. The header is `{"value": TREE, "blobs": [length, ...]}`: TREE is the saved value,
where JSON's own types stand for themselves (null, booleans, numbers, strings, lists) and every JSON object is a
tagged value, `{"$": tag, ...}`, one of a closed set:

| tag | Python value | fields |
|---|---|---|
| `float` | a float that JSON cannot write (nan, inf, -inf) | `value` |
| `tuple`, `list` | a tuple | `items` |
| `dict` | a dict or OrderedDict (keys: str, int, float, bool or None), read as a dict | `items`: [[key, value], ...] |
| `bytes` | bytes | `blob` |
| `ndarray`, `scalar` | a NumPy array / scalar of a number or bool dtype (no objects) | `dtype`, `shape`, `blob` |
| `tensor` | a torch tensor of a number or bool dtype, read onto the CPU in its memory order | `dtype`, `shape`, `order`, `blob` |
| `deque` | a collections.deque | `maxlen`, `items` |
| `generator` | a NumPy Generator of one of NumPy's bit generators, by its state | `bit_generator`, `state` |

Reading checks everything before it builds anything: the header's size against the file's, each tag's fields,
each array's dtype against the closed list and its size against its blob's, each blob used exactly once, and
the blobs' lengths against what the file holds (a file cut short is told apart from one that is not of this
format). Nothing is unpickled, imported or called by name: a file can only describe values.
"""

from __future__ import annotations

import collections
import io
import json
import math
import os
import stat
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

MAGIC = b"CLEANRL-PLAIN-DATA-1\n"
LENGTH = struct.Struct("<Q")
MAX_HEADER_BYTES = 16 << 20  # the header holds no array data: arguments, counters, small lists
MAX_DATA_BYTES = 1 << 44  # 16 TiB: a header claiming more is not a file cut short, but a made-up one
MAX_DEPTH = 64
MAX_ELEMENTS = 1 << 48  # an array's dimensions, its zero ones counted as one: NumPy and torch index in 63 bits
# NumPy dtypes an array may have, as written (little-endian; one byte: no order)
NUMPY_DTYPES = frozenset(["|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"])
TORCH_DTYPES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "complex64",
    "complex128",
)  # fmt: skip
BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
KEY_TYPES = (str, int, float, bool, type(None))

# Byte patterns of files that are not of this format, in the order they are told apart (see `foreign_kind`)
LEGACY_TORCH = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"  # pickle of torch's magic number: torch < 1.6's format
TORCHSCRIPT_ENTRIES = ("constants.pkl", "code/")


class FormatError(ValueError):
    """A file that is not valid data of this format; the message is one line."""


class CutShort(FormatError):
    """A file of this format that ends before its header says it does: a write or a copy that stopped."""


class Foreign(FormatError):
    """A file of another format (a pickle, a torch file, TorchScript...): refused by its first bytes, unread."""


# ---------------------------------------------------------------- writing


def write(file: BinaryIO, value: Any) -> None:
    """Write `value` (plain data of the types above, nested) to the open binary `file`; TypeError for anything else."""
    blobs: list[memoryview] = []
    tree = _encode(value, blobs, 0)
    header = json.dumps({"value": tree, "blobs": [blob.nbytes for blob in blobs]}, allow_nan=False).encode()
    file.write(MAGIC + LENGTH.pack(len(header)) + header)
    for blob in blobs:
        file.write(blob)


def dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    write(buffer, value)
    return buffer.getvalue()


def _little_endian(array: np.ndarray) -> np.ndarray:
    dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
    return np.asarray(array, dtype=dtype, order="C")  # 0-d arrays stay 0-d


def _encode(value: Any, blobs: list[memoryview], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise TypeError(f"plain data nests at most {MAX_DEPTH} levels deep")

    def blob(data: Any) -> int:
        blobs.append(memoryview(data).cast("B"))
        return len(blobs) - 1

    def each(items: Any) -> list:
        return [_encode(item, blobs, depth + 1) for item in items]

    if value is None or isinstance(value, bool | str):
        return value
    if type(value) is int or type(value) is float and math.isfinite(value):
        return value
    if type(value) is float:
        return {"$": "float", "value": repr(value)}
    if type(value) is tuple:
        return {"$": "tuple", "items": each(value)}
    if type(value) is list:
        return each(value)
    if type(value) in (dict, collections.OrderedDict):  # state_dict()s are OrderedDicts: read back as dicts
        for key in value:
            if not isinstance(key, KEY_TYPES):
                raise TypeError(f"a dict key of plain data must be a str, number, bool or None, not {type(key).__name__}")
        return {"$": "dict", "items": [[_encode(k, blobs, depth + 1), _encode(v, blobs, depth + 1)] for k, v in value.items()]}
    if type(value) is bytes:
        return {"$": "bytes", "blob": blob(value)}
    if isinstance(value, np.ndarray | np.generic) and type(value).__module__ == "numpy":
        array = _little_endian(np.asarray(value))
        if array.dtype.str not in NUMPY_DTYPES:
            raise TypeError(f"a NumPy array of dtype {array.dtype} is not plain data (numbers and bools only)")
        tag = "scalar" if isinstance(value, np.generic) else "ndarray"
        return {"$": tag, "dtype": array.dtype.str, "shape": list(array.shape), "blob": blob(array.reshape(-1).view(np.uint8))}
    if type(value) is collections.deque:
        return {"$": "deque", "maxlen": value.maxlen, "items": each(value)}
    if type(value) is np.random.Generator:
        bit_generator = type(value.bit_generator).__name__
        if bit_generator not in BIT_GENERATORS:
            raise TypeError(f"a Generator of {bit_generator} is not among NumPy's bit generators")
        return {
            "$": "generator",
            "bit_generator": bit_generator,
            "state": _encode(value.bit_generator.state, blobs, depth + 1),
        }
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        tensor = value.detach().to("cpu")
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype not in TORCH_DTYPES or sys.byteorder != "little" or tensor.layout != torch.strided:
            raise TypeError(f"a tensor of {tensor.dtype} ({tensor.layout}) is not plain data")
        # in its memory order (channels_last stays so: an optimiser's state must have its parameter's strides)
        order = sorted(range(tensor.dim()), key=lambda d: -tensor.stride(d))
        if not tensor.permute(order).is_contiguous():
            tensor, order = tensor.contiguous(), list(range(tensor.dim()))
        in_memory = tensor.resolve_conj().resolve_neg().permute(order).contiguous()
        raw = in_memory.reshape(-1).view(torch.uint8).numpy() if tensor.numel() else np.zeros(0, np.uint8)
        return {"$": "tensor", "dtype": dtype, "shape": list(tensor.shape), "order": order, "blob": blob(raw)}
    raise TypeError(f"a {type(value).__module__}.{type(value).__qualname__} is not plain data")


def is_plain(value: Any) -> bool:
    """Whether `write` can write `value`."""
    try:
        _encode(value, [], 0)
    except (TypeError, ValueError):
        return False
    return True


# ---------------------------------------------------------------- reading


def foreign_kind(head: bytes) -> str | None:
    """What a file starting with `head` is, when it is not of this format (None when it may be one of ours)."""
    if MAGIC.startswith(head[: len(MAGIC)]):
        return None
    if head.startswith(LEGACY_TORCH):
        return "a torch file of the legacy (non-zip) format (a pickle)"
    if head[:1] == b"\x80" or head[:1] in (b"(", b"]", b"}", b"c"):
        return "a pickle"
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive"
    return None


def zip_kind(file: BinaryIO) -> str:
    """What a zip archive is: TorchScript, a torch.save file (a pickle in a zip) or another archive."""
    try:
        names = zipfile.ZipFile(file).namelist()
    except (zipfile.BadZipFile, ValueError, OSError):
        return "a damaged zip archive"
    if any(part in name for name in names for part in TORCHSCRIPT_ENTRIES):
        return "a TorchScript archive (loading it runs its code)"
    if any(name.endswith("/data.pkl") or name == "data.pkl" for name in names):
        return "a torch.save file (a pickle)"
    return "a zip archive"


def open_regular(path: str | Path) -> BinaryIO:
    """`path` opened for reading, if it is a regular file: not a FIFO or a device (which could block or never end)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO's open does not wait for a writer
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FormatError(f"{path} is not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read(path: str | Path) -> Any:
    """The value saved in the file `path` by `write`. FormatError (Foreign, CutShort) for any other file."""
    with open_regular(path) as file:
        return read_from(file, os.fstat(file.fileno()).st_size)


def loads(data: bytes) -> Any:
    return read_from(io.BytesIO(data), len(data))


def read_from(file: BinaryIO, size: int) -> Any:
    """The value in `file` (`size` bytes from its current position)."""
    header = _header(file, size)
    blobs = Blobs(file, file.tell(), header["blobs"])
    value = _decode(header["value"], blobs, 0)
    if blobs.unused():
        raise FormatError(f"{blobs.unused()} of its arrays belong to no value")
    return value


def peek_text(path: str | Path, key: str) -> str | None:
    """The string saved under `key` in the dict the file `path` holds, read from its header alone (its arrays are
    not read): None when there is none. FormatError as `read` for a file that is not of this format."""
    with open_regular(path) as file:
        tree = _header(file, os.fstat(file.fileno()).st_size)["value"]
    items = tree.get("items") if isinstance(tree, dict) and tree.get("$") == "dict" else None
    found = [item[1] for item in items or () if isinstance(item, list) and len(item) == 2 and item[0] == key]
    return found[0] if len(found) == 1 and isinstance(found[0], str) else None


def _header(file: BinaryIO, size: int) -> dict[str, Any]:
    """The header of the file, checked against the file's size; the file is left at its first array."""
    head = file.read(len(MAGIC) + LENGTH.size)
    if not head.startswith(MAGIC):
        kind = foreign_kind(head)
        if kind == "a zip archive":
            file.seek(file.tell() - len(head))
            kind = zip_kind(file)
        if kind is not None:
            raise Foreign(f"it is {kind}, not a file of this version's format")
        if MAGIC.startswith(head):
            raise CutShort(f"cut short ({len(head)} bytes)")
        raise Foreign("it is not a file of this version's format")
    if len(head) < len(MAGIC) + LENGTH.size:
        raise CutShort("cut short in its header")
    (header_size,) = LENGTH.unpack(head[len(MAGIC) :])
    room = size - len(head)
    if header_size > MAX_HEADER_BYTES:
        raise FormatError(f"its header claims {header_size} bytes (at most {MAX_HEADER_BYTES})")
    if header_size > room:
        raise CutShort(f"cut short in its header ({room} of {header_size} bytes)")
    try:
        header = json.loads(file.read(header_size), parse_constant=_no_constants)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError, a number too long
        raise FormatError(f"its header is not valid JSON ({type(e).__name__})") from None
    if not isinstance(header, dict) or set(header) != {"value", "blobs"} or not _lengths(header["blobs"]):
        raise FormatError("its header is not {value, blobs}")
    data_size = sum(header["blobs"])
    if data_size > MAX_DATA_BYTES:  # no write that stopped declares this much: a file made to look cut short
        raise FormatError(f"its arrays claim {data_size} bytes (at most {MAX_DATA_BYTES})")
    if data_size > room - header_size:
        raise CutShort(f"cut short: {room - header_size} of its {data_size} bytes of arrays are there")
    if data_size < room - header_size:
        raise FormatError(f"it has {room - header_size - data_size} bytes after its last array")
    return header


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _lengths(value: Any) -> bool:
    return isinstance(value, list) and all(type(n) is int and n >= 0 for n in value)


class Blobs:
    """The arrays' bytes of an open file, each read once, after its size was checked against the file."""

    def __init__(self, file: BinaryIO, start: int, lengths: list[int]) -> None:
        self.file, self.lengths, self.used = file, lengths, [False] * len(lengths)
        self.offsets = _offsets(start, lengths)

    def unused(self) -> int:
        return self.used.count(False)

    def read_into(self, index: Any, out: memoryview) -> None:
        """Fill `out` with blob `index`, whose length must be `out`'s."""
        if type(index) is not int or not 0 <= index < len(self.lengths):
            raise FormatError(f"an array refers to blob {index!r}, which it does not have")
        if self.used[index]:
            raise FormatError(f"two values share blob {index}")
        if self.lengths[index] != out.nbytes:
            raise FormatError(f"blob {index} holds {self.lengths[index]} bytes where its value needs {out.nbytes}")
        self.used[index] = True
        self.file.seek(self.offsets[index])
        done = 0
        while done < out.nbytes:
            n = self.file.readinto(out[done:])
            if not n:
                raise CutShort("cut short in its arrays")
            done += n


def _offsets(start: int, lengths: list[int]) -> list[int]:
    offsets = []
    for length in lengths:
        offsets.append(start)
        start += length
    return offsets


FIELDS = {
    "float": {"value"},
    "tuple": {"items"},
    "dict": {"items"},
    "bytes": {"blob"},
    "ndarray": {"dtype", "shape", "blob"},
    "scalar": {"dtype", "shape", "blob"},
    "tensor": {"dtype", "shape", "order", "blob"},
    "deque": {"maxlen", "items"},
    "generator": {"bit_generator", "state"},
}


def _decode(node: Any, blobs: Blobs, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise FormatError(f"it nests deeper than {MAX_DEPTH} levels")
    if node is None or type(node) in (bool, int, float, str):
        return node
    if type(node) is list:
        return [_decode(item, blobs, depth + 1) for item in node]
    tag = node.get("$") if type(node) is dict else None
    if type(tag) is not str or tag not in FIELDS or set(node) != FIELDS[tag] | {"$"}:
        raise FormatError(f"it holds an object that is none of the format's values (tag {str(tag)[:40]!r})")
    if tag == "float":
        if node["value"] not in ("nan", "inf", "-inf"):
            raise FormatError("a float tag holds something else than nan, inf or -inf")
        return float(node["value"])
    if tag in ("tuple", "dict", "deque") and type(node["items"]) is not list:
        raise FormatError(f"a {tag}'s items are not a list")
    if tag == "tuple":
        return tuple(_decode(item, blobs, depth + 1) for item in node["items"])
    if tag == "dict":
        return _decode_dict(node["items"], blobs, depth)
    if tag == "bytes":
        data = bytearray(_blob_length(blobs, node["blob"]))
        blobs.read_into(node["blob"], memoryview(data))
        return bytes(data)
    if tag in ("ndarray", "scalar"):
        return _decode_array(node, blobs, tag == "scalar")
    if tag == "tensor":
        return _decode_tensor(node, blobs)
    if tag == "deque":
        maxlen = node["maxlen"]
        if maxlen is not None and (type(maxlen) is not int or not 0 <= maxlen <= sys.maxsize):
            raise FormatError("a deque's maxlen is not a count")
        return collections.deque((_decode(item, blobs, depth + 1) for item in node["items"]), maxlen)
    return _decode_generator(node, blobs, depth)


def _decode_dict(items: list, blobs: Blobs, depth: int) -> dict:
    decoded = {}
    for item in items:
        if type(item) is not list or len(item) != 2:
            raise FormatError("a dict item is not a [key, value] pair")
        key = _decode(item[0], blobs, depth + 1)
        if not isinstance(key, KEY_TYPES):
            raise FormatError("a dict key is not a str, number, bool or None")
        decoded[key] = _decode(item[1], blobs, depth + 1)
    return decoded


def _blob_length(blobs: Blobs, index: Any) -> int:
    if type(index) is not int or not 0 <= index < len(blobs.lengths):
        raise FormatError(f"a value refers to blob {str(index)[:20]}, which it does not have")
    return blobs.lengths[index]


def _shape(node: dict) -> tuple[int, ...]:
    shape = node["shape"]
    if type(shape) is not list or len(shape) > 32 or not all(type(n) is int and n >= 0 for n in shape):
        raise FormatError("an array's shape is not a list of at most 32 sizes")
    # an array of no elements has no blob to check its sizes against: [0, 2**70] would fail in NumPy, not here
    if math.prod(max(n, 1) for n in shape) > MAX_ELEMENTS:
        raise FormatError(f"an array's shape has more than {MAX_ELEMENTS} elements")
    return tuple(shape)


def _decode_array(node: dict, blobs: Blobs, scalar: bool) -> Any:
    dtype = node["dtype"]
    if type(dtype) is not str or dtype not in NUMPY_DTYPES:
        raise FormatError(f"an array has dtype {str(dtype)[:20]!r}, not one of the format's")
    shape = _shape(node)
    if scalar and shape:
        raise FormatError("a scalar has a shape")
    if math.prod(shape) * np.dtype(dtype).itemsize != _blob_length(blobs, node["blob"]):
        raise FormatError(f"an array of shape {str(shape)[:60]} does not fit its blob")
    array = np.empty(shape, dtype=np.dtype(dtype))
    blobs.read_into(node["blob"], memoryview(array.reshape(-1).view(np.uint8)))
    array = array.astype(array.dtype.newbyteorder("="), copy=False)  # native order, for the code that uses it
    return array[()] if scalar else array


def _decode_tensor(node: dict, blobs: Blobs) -> Any:
    import torch

    if type(node["dtype"]) is not str or node["dtype"] not in TORCH_DTYPES:
        raise FormatError(f"a tensor has dtype {str(node['dtype'])[:20]!r}, not one of the format's")
    dtype = getattr(torch, node["dtype"])
    shape, order = _shape(node), node["order"]
    if type(order) is not list or sorted(order) != list(range(len(shape))) or not all(type(d) is int for d in order):
        raise FormatError("a tensor's memory order is not an order of its dimensions")
    if math.prod(shape) * dtype.itemsize != _blob_length(blobs, node["blob"]):
        raise FormatError(f"a tensor of shape {str(shape)[:60]} does not fit its blob")
    in_memory = torch.empty([shape[d] for d in order], dtype=dtype)
    raw = in_memory.reshape(-1).view(torch.uint8).numpy() if in_memory.numel() else np.zeros(0, np.uint8)
    blobs.read_into(node["blob"], memoryview(raw))
    return in_memory.permute([order.index(d) for d in range(len(order))])  # the saved strides again


def _decode_generator(node: dict, blobs: Blobs, depth: int) -> np.random.Generator:
    name = node["bit_generator"]
    if type(name) is not str or name not in BIT_GENERATORS:
        raise FormatError(f"a generator's bit generator {str(name)[:20]!r} is not one of NumPy's")
    state = _decode(node["state"], blobs, depth + 1)
    if not isinstance(state, dict) or state.get("bit_generator") != name:
        raise FormatError(f"a {name} generator's state is not a {name} state")
    generator = np.random.Generator(getattr(np.random, name)())
    try:
        generator.bit_generator.state = state  # NumPy checks every field
    except (TypeError, ValueError, KeyError, IndexError, OverflowError) as e:  # NumPy's, for each field it checks
        raise FormatError(f"a {name} generator's state is not valid ({type(e).__name__})") from None
    return generator
