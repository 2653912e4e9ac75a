"""tpumesh.io: the files the commands read and write, as numpy arrays.

read_dataset / has_dataset: an HDF5 dataset as `tpumesh run` and `eval`
read them (bf16 stored as uint16 with dtype="bfloat16" comes back as
ml_dtypes' bfloat16 when ml_dtypes is installed, else widened to float32,
exactly); encode_png / write_png: a uint8 [H, W, 3] image as generate writes
its PNGs.
"""

import numpy as np

from tpumesh import _check, _tpumesh
from tpumesh._mesh import _check_readable

__all__ = ["encode_png", "has_dataset", "read_dataset", "write_datasets", "write_png"]


def _bf16_dtype():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes.bfloat16


# An HDF5 file's superblock signature, at 0 or after a user block of 512, 1024, 2048, ... bytes.
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _check_hdf5(path):
    """OSError naming the file unless it is an HDF5 file (h5_has_dataset says False for any other)."""
    with open(path, "rb") as f:
        offset = 0
        while True:
            f.seek(offset)
            head = f.read(len(_HDF5_SIGNATURE))
            if head == _HDF5_SIGNATURE:
                return path
            if len(head) < len(_HDF5_SIGNATURE):
                raise OSError(f"{path}: not an HDF5 file")
            offset = 512 if offset == 0 else offset * 2


def from_tagged(array, tag):
    """A (numpy array, tag) pair from the extension as the user's array."""
    if tag == "bfloat16":
        bf16 = _bf16_dtype()
        if bf16 is not None:
            return array.view(bf16)
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array


def to_tagged(x):
    """The user's array as (numpy array, tag): bfloat16 (ml_dtypes) as its uint16 bits. Any byte order
    and layout: the extension reads the array's buffer (python/ndarray.h), swapping big-endian
    elements and copying a strided view in C order."""
    a = np.asarray(x)
    if a.dtype.name == "bfloat16":
        return np.ascontiguousarray(a).view(np.uint16), "bfloat16"
    return a, ""


def has_dataset(path, name):
    """Whether the HDF5 file at `path` holds dataset `name` (OSError when it is not an HDF5 file)."""
    return _tpumesh.h5_has_dataset(_check_hdf5(_check_readable(path)), _check.string("name", name))


def read_dataset(path, name):
    """Dataset `name` of the HDF5 file at `path`, with its dtype as stored."""
    return from_tagged(*_tpumesh.h5_read(_check_readable(path), _check.string("name", name)))


def write_datasets(path, datasets):
    """A new HDF5 file at `path` holding `datasets` ({name: numpy array}, or
    {name: list of str}, alone in its file: the tokenizer's "prompts"), as
    `tpumesh eval --input` and `run --input` read them; written whole or not
    at all."""
    path = _check.path("path", path)
    if not isinstance(datasets, dict):
        raise TypeError(f"datasets must be a dict {{name: array}}, not {_check._what(datasets)}")
    strings = {k: v for k, v in datasets.items() if isinstance(v, (list, tuple)) and v and
               all(isinstance(x, str) for x in v)}
    if strings:
        if len(datasets) != 1:
            raise ValueError(f"write_datasets: a list of str ({', '.join(map(repr, strings))}) goes in a file of its own")
        (name, values), = strings.items()
        _tpumesh.h5_write_strings(path, name, list(values))
        return
    out = []
    for name, value in datasets.items():
        if not isinstance(name, str):
            raise TypeError(f"write_datasets: names must be str, not {type(name).__name__}")
        array, tag = to_tagged(value)
        out.append((name, array, tag))
    _tpumesh.h5_write(path, out)


def _rgb(rgb):
    """uint8 [H, W, 3] as given: any other dtype is refused, never cast (a float image in [0, 1] cast to
    uint8 is black)."""
    a = np.asarray(rgb)
    if a.dtype != np.uint8:
        raise TypeError(f"rgb must be a uint8 [height, width, 3] array, not {a.dtype}"
                        + (" (convert with (x * 255).round().astype(np.uint8))" if a.dtype.kind == "f" else ""))
    return a


def encode_png(rgb, text=None):
    """PNG bytes of uint8 [H, W, 3]; text: {keyword: value} tEXt/iTXt chunks (str)."""
    if text is not None and not isinstance(text, dict):
        raise TypeError(f"text must be a dict {{keyword: value}} of str, not {_check._what(text)}")
    items = [(_check.string("text keyword", k), _check.string(f"text[{k!r}]", v)) for k, v in (text or {}).items()]
    return _tpumesh.encode_png(_rgb(rgb), items)


def write_png(path, rgb, text=None):
    """encode_png's bytes at `path`, through the commands' output guard, written whole or not at all."""
    _tpumesh.write_file(_check.path("path", path), encode_png(rgb, text))
