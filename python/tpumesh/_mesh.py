"""The device keywords every call that makes a mesh takes, as one MeshSpec.

chip: "v5e", "v4", "v2" or a chip JSON file; devices: 1 to 1024; mesh: the
axes, "data=4,model=2", a dict {"data": 4, "model": 2} or pairs; topology:
"2x4" or (2, 4); model_axis_along: "x", "y" or "z"; threads_per_device: host
threads per device arena (0: host cores / devices); dataflow: "ws", "os" or
"is"; vmem_mib: VMEM per TensorCore in MiB (0: none modelled). The checks
and their messages are the commands' (docs/cli.md, "Device flags").
"""

import os

from tpumesh import _tpumesh


def _axes_text(mesh):
    if mesh is None:
        return ""
    if isinstance(mesh, str):
        return mesh
    items = mesh.items() if isinstance(mesh, dict) else mesh
    try:
        return ",".join(f"{name}={int(size)}" for name, size in items)
    except (TypeError, ValueError):
        raise ValueError(f"mesh must be 'data=4,model=2', a dict or (name, size) pairs, not {mesh!r}") from None


def _whole(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number from {lo} to {hi}, not {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be from {lo} to {hi}, got {value}")
    return value


def mesh_spec(chip="v5e", devices=None, mesh=None, topology=None, model_axis_along="x", threads_per_device=0,
              dataflow=None, vmem_mib=None):
    spec = _tpumesh.MeshSpec()
    chip = os.fspath(chip)
    if os.sep in chip or chip.endswith(".json"):
        _check_readable(chip)
    spec.chip = chip
    if devices is not None:
        spec.devices = _whole("devices", devices, 1, 1024)
    spec.axes = _axes_text(mesh)
    if topology is not None:
        spec.topology = topology if isinstance(topology, str) else "x".join(str(int(d)) for d in topology)
    spec.model_axis_along = model_axis_along
    spec.threads_per_device = _whole("threads_per_device", threads_per_device, 0, 1024)
    if dataflow is not None:
        spec.dataflow = dataflow
    if vmem_mib is not None:
        spec.vmem_mib = float(vmem_mib)
    return spec


def _check_readable(path):
    """An input file the library will read: OSError now when it cannot."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    if os.path.isdir(path):
        raise IsADirectoryError(21, "Is a directory", path)
    if not os.access(path, os.R_OK):
        raise PermissionError(13, "Permission denied", path)
    return path
