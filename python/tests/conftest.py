"""The Python suite's setup (docs/python.md, "Tests").

Finds the build: TPUMESH_BUILD_DIR (default <repo>/build/release), whose
python/ folder must be importable (scripts/pytest.sh puts it on PYTHONPATH)
and whose tools/tpumesh is the CLI the tests compare with.

Under CI=true nothing may be skipped: a skip (a missing binary or data file)
fails the test instead. The tests of tpumesh.jax need jax, an optional
dependency CI does not install: where jax is not importable they are
deselected (not skipped) and the summary says so; the stored StableHLO
programs and JAX outputs in tests/data test the same path without it.
"""

import importlib.util
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("TPUMESH_BUILD_DIR", REPO / "build" / "release"))
DATA = REPO / "tests" / "data"
CI = os.environ.get("CI", "").lower() == "true"
HAVE_JAX = importlib.util.find_spec("jax") is not None


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_jax: runs only where jax is importable")


def pytest_collection_modifyitems(config, items):
    if HAVE_JAX:
        return
    deselected = [i for i in items if i.get_closest_marker("needs_jax")]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [i for i in items if not i.get_closest_marker("needs_jax")]
        config._tpumesh_jax_deselected = len(deselected)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    n = getattr(config, "_tpumesh_jax_deselected", 0)
    if n:
        terminalreporter.write_line(
            f"tpumesh: {n} test(s) of tpumesh.jax deselected: jax is not importable here "
            "(optional; the stored StableHLO programs test the same run)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if CI and report.skipped:
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which skips nothing: {report.longrepr}"


def without_host_times(report):
    """A report without the host's own times (every key naming host seconds or wall time, at any depth),
    which differ run to run; the modelled figures are what must agree."""
    if isinstance(report, dict):
        return {k: without_host_times(v) for k, v in report.items() if "host_seconds" not in k and "wall" not in k}
    if isinstance(report, list):
        return [without_host_times(v) for v in report]
    return report


@pytest.fixture(scope="session")
def tpumesh_bin():
    path = pathlib.Path(os.environ.get("TPUMESH_BIN", BUILD / "tools" / "tpumesh"))
    if not path.is_file():
        pytest.skip(f"the tpumesh binary is not at {path} (build it, or set TPUMESH_BIN)")
    return str(path)


@pytest.fixture(scope="session")
def data_dir():
    if not (DATA / "stablehlo").is_dir():
        pytest.skip(f"no test data at {DATA}")
    return DATA
