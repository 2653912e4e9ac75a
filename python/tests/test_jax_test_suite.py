"""scripts/jax_test_suite.py's report (docs/pjrt.md, "JAX's test suite"): the
JUnit results of a CPU and a tpumesh run of the same files read back, the
CPU-passing tests counted per file, the failures grouped by their normalised
first line and placed by KNOWN_CAUSES. Synthetic results: no jax, no run."""

import importlib.util
import json
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("jax_test_suite", REPO / "scripts" / "jax_test_suite.py")
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)


def _junit(path, cases):
    """cases: (classname, name, outcome, message)."""
    rows = []
    for cls, name, outcome, message in cases:
        body = ""
        if outcome in ("failure", "error"):
            body = f'<{outcome} message="{message}">E   {message}</{outcome}>'
        elif outcome == "skipped":
            body = f'<skipped type="pytest.skip" message="{message}" />'
        rows.append(f'<testcase classname="{cls}" name="{name}" time="0.1">{body}</testcase>')
    path.write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest">' + "".join(rows) +
                    "</testsuite></testsuites>")
    return path


def test_one_cause_is_one_group_whatever_its_numbers_and_names():
    a = ("jax.errors.JaxRuntimeError: INVALID_ARGUMENT: jit__philox2x32_seed.mlir:18:30: "
         "unexpected '\"chlo.mulhi\" %arg1, %c_0' in stablehlo.composite")
    b = ("jax.errors.JaxRuntimeError: INVALID_ARGUMENT: jit__philox4x32_seed.mlir:22:30: "
         "unexpected '\"chlo.mulhi\" %arg2, %c_2' in stablehlo.composite")
    assert suite.cause(a) == suite.cause(b)
    assert "chlo.mulhi" in suite.cause(a) and "18" not in suite.cause(a)
    # shapes and program names
    tail = ", the program takes tensor<16xf32> (arguments split over the devices are not run yet)"
    s1 = "UNIMPLEMENTED: tpumesh: jit_f: argument 0 is given as PJRT type 11 f32[8,4] on device 3" + tail
    s2 = "UNIMPLEMENTED: tpumesh: jit__lambda: argument 2 is given as PJRT type 11 f32[16] on device 0" + tail
    assert suite.cause(s1) == suite.cause(s2)
    assert suite.cause("UserWarning: Some donated buffers were not usable: ~float32[], ~float32[3,4].") == \
        suite.cause("UserWarning: Some donated buffers were not usable: float32[2].")
    # a bare exception line takes the next line as its cause
    assert suite.cause("AssertionError: \nArrays are not almost equal to 6 decimals") == \
        "AssertionError: Arrays are not almost equal to # decimals"
    assert suite.where(suite.cause(s1)).startswith("pjrt/executable.cc")


def test_report_counts_cpu_passing_tests_and_groups_the_rest(tmp_path):
    cpu = _junit(tmp_path / "cpu.xml", [
        ("tests.lax_test.LaxTest", "testAdd0", "passed", ""),
        ("tests.lax_test.LaxTest", "testSort0", "passed", ""),
        ("tests.lax_test.LaxTest", "testSort1", "passed", ""),
        ("tests.lax_test.LaxTest", "testOnlyCpu", "passed", ""),
        ("tests.lax_test.LaxTest", "testBrokenOnCpu", "failure", "AssertionError: no"),
    ])
    tpumesh = _junit(tmp_path / "tpumesh.xml", [
        ("tests.lax_test.LaxTest", "testAdd0", "passed", ""),
        ("tests.lax_test.LaxTest", "testSort0", "failure",
         "jax.errors.JaxRuntimeError: INVALID_ARGUMENT: jit_sort.mlir:5:7: operand %cst_0 is not available"),
        ("tests.lax_test.LaxTest", "testSort1", "failure",
         "jax.errors.JaxRuntimeError: INVALID_ARGUMENT: jit_sort.mlir:9:7: operand %cst is not available"),
        ("tests.lax_test.LaxTest", "testOnlyCpu", "skipped", "Skipped unless running on devices with tags: cpu"),
        ("tests.lax_test.LaxTest", "testBrokenOnCpu", "passed", ""),
    ])
    runs = {p: {"lax_test.py": {"tests": suite.read_junit(x), "seconds": 1.0, "rc": 1, "killed": False}}
            for p, x in (("cpu", cpu), ("tpumesh", tpumesh))}
    data = suite.analyse(runs, ["lax_test.py"])
    row = data["files"][0]
    assert (row["cpu_passed"], row["tpumesh_passed"], row["percent"]) == (4, 1, 25.0)
    assert row["cpu_only"] == 1 and row["percent_not_cpu_only"] == 33.3
    groups = data["groups"]
    assert [g["count"] for g in groups] == [2, 1]  # the biggest first; the CPU failure is not counted
    assert groups[0]["methods"] == 1 and groups[0]["example"].endswith("testSort0")
    assert groups[1]["where"] == "the test itself: run_on_devices('cpu')"
    meta = {"jax": "0.0", "jaxlib": "0.0", "numpy": "2", "python_version": "3", "python": "py", "source": "s",
            "cases": 2, "k": None, "timeout": 1, "workers": 1, "host": "h", "cores": 2, "date": "d", "command": "c",
            "seconds": 1.0, "seconds_cpu": 1.0, "seconds_tpumesh": 1.0, "installed": [], "missing_files": [],
            "tpumesh_platforms": "tpumesh"}
    md = tmp_path / "report.md"
    suite.write_report(data, meta, md, max_groups=10)
    text = md.read_text()
    assert "| lax_test.py | 5 | 4 | 1 | 25.0 | 1 | 33.3 |" in text
    assert "operand %v is not available" in text
    json.dumps(data)  # what is written beside it
