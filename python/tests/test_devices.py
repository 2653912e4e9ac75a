"""tpumesh.devices() against `tpumesh devices`: the same text and JSON."""

import json
import subprocess

import pytest

import tpumesh


def cli(tpumesh_bin, *args):
    return subprocess.run([tpumesh_bin, "devices", *args], check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("kwargs,flags", [
    ({}, []),
    ({"chip": "v4", "devices": 4}, ["--chip", "v4", "--devices", "4"]),
    ({"chip": "tpu7x"}, ["--chip", "tpu7x"]),
    ({"mesh": "x=2,y=4", "topology": "2x4"}, ["--mesh", "x=2,y=4", "--topology", "2x4"]),
    ({"mesh": {"data": 2, "model": 2}, "threads_per_device": 1}, ["--mesh", "data=2,model=2", "--threads-per-device", "1"]),
])
def test_prints_as_the_cli(tpumesh_bin, kwargs, flags):
    devs = tpumesh.devices(**kwargs)
    assert str(devs) == cli(tpumesh_bin, *flags)
    assert devs.info == json.loads(cli(tpumesh_bin, *flags, "--json"))
    assert len(devs) == len(devs.info["devices"])


def test_devices_read_as_jax_devices():
    devs = tpumesh.devices()
    assert len(devs) == 8 == tpumesh.device_count()
    assert repr(devs[0]) == "TpuDevice(id=0, coords=(0,0,0), core_on_chip=0)"
    assert devs[7].coords == (1, 3, 0) and devs[7].platform == "tpu" and devs[7].mesh_indices == (7,)


def test_errors():
    with pytest.raises(ValueError, match="devices"):
        tpumesh.devices(devices=0)
    with pytest.raises(ValueError, match="topology"):
        tpumesh.devices(devices=8, topology="2x2")
    with pytest.raises(FileNotFoundError):
        tpumesh.devices(chip="/nonexistent/chip.json")
    with pytest.raises(FileNotFoundError, match="neither a preset"):  # not a preset: read as a chip file
        tpumesh.devices(chip="v9")
