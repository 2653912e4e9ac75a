"""The device keywords every call that makes a mesh takes, as one MeshSpec.

chip: a preset ("v5e", "v4", "v2", "v6e", "v5p", "tpu7x") or a chip JSON
file; devices: 1 to 1024; mesh: the axes, "data=4,model=2", a dict
{"data": 4, "model": 2} or pairs; topology:
"2x4" or (2, 4); model_axis_along: "x", "y" or "z"; threads_per_device: host
threads per device arena (0: host cores / devices); dataflow: "ws", "os" or
"is"; vmem_mib: VMEM per TensorCore in MiB (0: none modelled). The checks
and their messages are the commands' (docs/cli.md, "Device flags").
"""

import os

from tpumesh import _check, _tpumesh


def _axes_text(mesh):
    if mesh is None:
        return ""
    if isinstance(mesh, str):
        return mesh
    if not isinstance(mesh, (dict, list, tuple)):
        raise TypeError(f"mesh must be 'data=4,model=2', a dict or (name, size) pairs, not {_check._what(mesh)}")
    items = mesh.items() if isinstance(mesh, dict) else mesh
    out = []
    for item in items:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise TypeError(f"mesh must be 'data=4,model=2', a dict or (name, size) pairs, not {_check._what(mesh)}")
        name, size = item
        out.append(f"{_check.string('mesh axis name', name)}={_check.integer(f'mesh axis {name}', size, 1, 1024)}")
    return ",".join(out)


def _topology_text(topology):
    if isinstance(topology, str):
        return topology
    if not isinstance(topology, (list, tuple)):
        raise TypeError(f"topology must be '2x4' or a tuple of ints, not {_check._what(topology)}")
    return "x".join(str(_check.integer("topology", d, 1, 1024)) for d in topology)


def mesh_spec(chip="v5e", devices=None, mesh=None, topology=None, model_axis_along="x", threads_per_device=0,
              dataflow=None, vmem_mib=None):
    spec = _tpumesh.MeshSpec()
    chip = _check.path("chip", chip)
    if os.sep in chip or chip.endswith(".json"):
        _check_readable(chip)
    spec.chip = chip
    if devices is not None:
        spec.devices = _check.integer("devices", devices, 1, 1024)
    spec.axes = _axes_text(mesh)
    if topology is not None:
        spec.topology = _topology_text(topology)
    spec.model_axis_along = _check.string("model_axis_along", model_axis_along)
    spec.threads_per_device = _check.integer("threads_per_device", threads_per_device, 0, 1024)
    if dataflow is not None:
        spec.dataflow = _check.string("dataflow", dataflow)
    if vmem_mib is not None:
        spec.vmem_mib = _check.number("vmem_mib", vmem_mib)
    return spec


def _check_readable(path):
    """An input file the library will read: OSError now when it cannot."""
    path = _check.path("path", path)
    if not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    if os.path.isdir(path):
        raise IsADirectoryError(21, "Is a directory", path)
    if not os.path.isfile(path):  # a FIFO would block, a device never end (base/input_file.h)
        raise OSError(f"{path}: not a regular file")
    if not os.access(path, os.R_OK):
        raise PermissionError(13, "Permission denied", path)
    return path
