"""tpumesh.devices(): the emulated devices, as jax.devices() lists them."""

import json

from tpumesh import _tpumesh
from tpumesh._mesh import mesh_spec


class Device:
    """One emulated device; repr as the CLI prints it (TpuDevice(id=0, coords=(0,0,0), core_on_chip=0))."""

    platform = "tpu"

    def __init__(self, info, text):
        self.id = info["id"]
        self.coords = tuple(info["coords"])
        self.core_on_chip = info["core_on_chip"]
        self.device_kind = info["kind"]
        self.hbm_bytes = info["hbm_bytes"]
        self.mesh_indices = tuple(info["mesh_indices"])
        self.threads = info["threads"]
        self._text = text

    def __repr__(self):
        return self._text


class DeviceList(list):
    """A list of Device; str() is the CLI's `tpumesh devices` text, .info its --json."""

    def __init__(self, devices, text, info):
        super().__init__(devices)
        self.text = text
        self.info = info

    def __str__(self):
        return self.text


def devices(chip="v5e", topology=None, *, devices=None, mesh=None, model_axis_along="x", threads_per_device=0,
            dataflow=None, vmem_mib=None):
    """The emulated devices, placed as generate, simulate and run place them.

    devices(chip="v5e", topology=None) is a v5e-8 (2x4); `devices=N`,
    `mesh="x=2,y=4"` (any axis names) and the rest as docs/cli.md's device
    flags. print() gives `tpumesh devices`'s text.
    """
    spec = mesh_spec(chip, devices, mesh, topology, model_axis_along, threads_per_device, dataflow, vmem_mib)
    text, info_json, reprs = _tpumesh.devices(spec)
    info = json.loads(info_json)
    return DeviceList([Device(d, r) for d, r in zip(info["devices"], reprs)], text, info)


def device_count(chip="v5e", topology=None, **kwargs):
    """len(devices(...)), as jax.device_count()."""
    return len(devices(chip, topology, **kwargs))
