"""tpumesh.simulate and sweep_mesh against `tpumesh simulate`'s JSON."""

import json
import subprocess

import pytest

import tpumesh

from conftest import without_host_times


def cli_json(tpumesh_bin, tmp_path, *args):
    report = tmp_path / "r.json"
    subprocess.run([tpumesh_bin, "simulate", *args, "--report", str(report)], check=True, capture_output=True)
    return json.loads(report.read_text())


@pytest.mark.parametrize("kwargs,flags", [
    ({"arch": "sd15", "steps": 4}, ["--arch", "sd15", "--steps", "4"]),
    ({"arch": "sd15", "mesh": "data=2,model=4", "steps": 2, "chip": "v4"},
     ["--arch", "sd15", "--mesh", "data=2,model=4", "--steps", "2", "--chip", "v4"]),
    ({"arch": "tiny", "devices": 2, "batch_per_device": 2, "precision": "highest", "scheduler": "euler"},
     ["--arch", "tiny", "--devices", "2", "--batch-per-device", "2", "--precision", "highest", "--scheduler", "euler"]),
])
def test_report_equals_the_cli(tpumesh_bin, tmp_path, kwargs, flags):
    got = without_host_times(tpumesh.simulate(**kwargs))
    want = without_host_times(cli_json(tpumesh_bin, tmp_path, *flags))
    assert got["summary"] == want["summary"]
    assert got == want


def test_sweep_mesh_equals_the_cli(tpumesh_bin):
    want = json.loads(subprocess.run([tpumesh_bin, "simulate", "--arch", "sd15", "--steps", "2", "--sweep-mesh",
                                      "--json"], check=True, capture_output=True, text=True).stdout)
    got = tpumesh.sweep_mesh(arch="sd15", steps=2)
    assert got == want


def test_errors():
    with pytest.raises(ValueError, match="arch"):
        tpumesh.simulate()
    with pytest.raises(ValueError):
        tpumesh.simulate(arch="sd99")
    with pytest.raises(ValueError, match="steps"):
        tpumesh.simulate(arch="sd15", steps=0)
    with pytest.raises(TypeError):
        tpumesh.simulate(arch="sd15", stepz=3)
    with pytest.raises(RuntimeError, match="RESOURCE|HBM|device"):
        tpumesh.simulate(arch="sdxl", devices=1, batch_per_device=64, steps=1)


def test_trace_on_request(tpumesh_bin, tmp_path):
    report = tpumesh.simulate(arch="tiny", devices=2, steps=2, trace=tmp_path / "t.json")
    trace = json.loads((tmp_path / "t.json").read_text())
    subprocess.run([tpumesh_bin, "simulate", "--arch", "tiny", "--devices", "2", "--steps", "2", "--trace",
                    str(tmp_path / "cli.json")], check=True, capture_output=True)
    want = json.loads((tmp_path / "cli.json").read_text())
    # the same events as the CLI's trace (their host-time track aside, the same figures)
    assert len(trace["traceEvents"]) == len(want["traceEvents"]) > 0
    assert report["summary"]["devices"] == 2
