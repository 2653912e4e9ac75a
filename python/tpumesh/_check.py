"""The public functions' argument checks, run before the extension is called.

pybind11 converts loosely (a bool is an int, 2.9 is refused with a dump of
every overload, an int past the C type's range likewise), so every public
function checks its arguments here first: a wrong type is a one-line
TypeError naming the argument and the value, a value out of range a
one-line ValueError. The library then checks what only it knows (a
scheduler's name, steps against the scheduler, a mesh against the devices).
"""

import math
import os

import numpy as np


def _show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _what(value):
    return f"{type(value).__name__} {_show(value)}"


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def integer(name, value, lo=None, hi=None):
    """An int (or numpy integer; never a bool) from lo to hi."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an int, not {_what(value)}")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if lo is not None and hi is not None:
            bounds = f"from {lo} to {hi}"
        else:
            bounds = f">= {lo}" if lo is not None else f"<= {hi}"
        raise ValueError(f"{name} must be {bounds}, got {value}")
    return value


def optional_integer(name, value, lo=None, hi=None):
    return None if value is None else integer(name, value, lo, hi)


def number(name, value):
    """A finite real number (int or float, numpy's too; never a bool) as float."""
    if not (_is_int(value) or isinstance(value, (float, np.floating))):
        raise TypeError(f"{name} must be a number, not {_what(value)}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def optional_number(name, value):
    return None if value is None else number(name, value)


def flag(name, value):
    """True or False (numpy's bool too), nothing else."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, not {_what(value)}")
    return bool(value)


def string(name, value, choices=None):
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {_what(value)}")
    if choices is not None and value not in choices:
        raise ValueError(f"{name} must be {', '.join(map(repr, choices[:-1]))} or {choices[-1]!r}, not {value!r}")
    return value


def optional_string(name, value, choices=None):
    return None if value is None else string(name, value, choices)


def strings(name, value):
    """A str or a list (or tuple) of str, as a list."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a str or a list of str, not {_what(value)}")
    for v in value:
        if not isinstance(v, str):
            raise TypeError(f"{name} must be a str or a list of str, not a list holding {_what(v)}")
    return list(value)


def optional_strings(name, value):
    return None if value is None else strings(name, value)


def path(name, value):
    """A str or os.PathLike as str."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), not {_what(value)}")
    value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str path, not {_what(value)}")
    return value


def optional_path(name, value):
    return None if value is None else path(name, value)
