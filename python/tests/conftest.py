"""The Python suite's setup (docs/python.md, "Tests").

Finds the build: TPUMESH_BUILD_DIR (default <repo>/build/release), whose
python/ folder must be importable (scripts/pytest.sh puts it on PYTHONPATH)
and whose tools/tpumesh is the CLI the tests compare with.

Under CI=true nothing may be skipped: a skip (a missing binary or data file)
fails the test instead. The tests of tpumesh.jax need jax, an optional
dependency: where jax is not importable they are deselected (not skipped)
and the summary says so; the stored StableHLO programs and JAX outputs in
tests/data test the same path without it. CI runs the suite (.ci/run):
with Debian's python and numpy 1.x, no jax, so deselected there; in the
venv of scripts/make-venv.sh (current jax, numpy 2); and its PJRT tests
(-k pjrt) in the venv of the oldest supported jax (jax 0.4.38, numpy
1.26.4). In the venvs scripts/pytest.sh sets TPUMESH_REQUIRE_JAX=1: there a
missing jax is an error, not a deselection. The Flax UNet test needs
diffusers' Flax UNet, which current diffusers no longer has: deselected
where it is not importable, in every run (a plain-jax block of the same ops
runs instead).
The seed flow through diffusers' FlaxStableDiffusionPipeline (test_pjrt.py)
is deselected the same way where diffusers has no Flax pipeline; the jax
0.4.38 venv has it (diffusers 0.32.2), and CI runs it there.
The header names the numpy and jax in use.
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
REQUIRE_JAX = os.environ.get("TPUMESH_REQUIRE_JAX", "") == "1"


def _have_diffusers_module(name):
    """Whether diffusers' module `name` is importable (looked up without importing diffusers' models)."""
    if not HAVE_JAX or importlib.util.find_spec("diffusers") is None:
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def _have_flax_unet():
    """diffusers' Flax UNet, which diffusers dropped (0.42 has none): importable only in an older stack."""
    return _have_diffusers_module("diffusers.models.unets.unet_2d_condition_flax")


def _have_flax_pipeline():
    """diffusers' FlaxStableDiffusionPipeline (with flax and transformers' Flax CLIP), gone with the Flax UNet."""
    return (_have_diffusers_module("diffusers.pipelines.stable_diffusion.pipeline_flax_stable_diffusion")
            and importlib.util.find_spec("flax") is not None and importlib.util.find_spec("transformers") is not None)


# marker: (available here?, why not); None: looked up only when a collected
# test needs it (diffusers imports slowly), by LAZY[marker].
OPTIONAL = {
    "needs_jax": (HAVE_JAX, "jax is not importable here (optional; the stored StableHLO programs test the same run)"),
    "needs_flax_unet": (None, "diffusers' Flax UNet is not importable here (diffusers 0.42 has none; "
                              "test_jitted_conv_block and the stored tiny_unet program run its ops)"),
    "needs_flax_pipeline": (None, "diffusers' FlaxStableDiffusionPipeline is not importable here (current "
                                  "diffusers has none; the seed flow runs in a jax 0.4 venv with diffusers 0.32, "
                                  "docs/pjrt.md)"),
}
LAZY = {"needs_flax_unet": _have_flax_unet, "needs_flax_pipeline": _have_flax_pipeline}


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_jax: runs only where jax is importable")
    config.addinivalue_line("markers", "needs_flax_unet: runs only where diffusers' Flax UNet is importable")
    config.addinivalue_line("markers", "needs_flax_pipeline: runs only where diffusers' Flax SD pipeline is importable")
    if REQUIRE_JAX and not HAVE_JAX:
        raise pytest.UsageError("TPUMESH_REQUIRE_JAX=1 but jax is not importable by this python "
                                "(scripts/make-venv.sh makes the venv that has it)")


def pytest_collection_modifyitems(config, items):
    config._tpumesh_deselected = []
    for marker, (available, why) in OPTIONAL.items():
        wanted = [i for i in items if i.get_closest_marker(marker)]
        if not wanted:
            continue
        if available is None:  # looked up only when a collected test needs it (diffusers imports slowly)
            available = LAZY[marker]()
        if available:
            continue
        config.hook.pytest_deselected(items=wanted)
        items[:] = [i for i in items if not i.get_closest_marker(marker)]
        config._tpumesh_deselected.append(f"{len(wanted)} test(s) deselected: {why}")


def _versions():
    import importlib.metadata
    import numpy
    jax = "not importable"
    if HAVE_JAX:  # its version without importing it (test_jax.py sets XLA_FLAGS before jax's first import)
        jax = importlib.metadata.version("jax")
    return f"tpumesh: numpy {numpy.__version__} ({os.path.dirname(numpy.__file__)}), jax {jax}"


def pytest_report_header(config):
    return _versions()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    terminalreporter.write_line(_versions())  # also under -q, which hides the header
    for line in getattr(config, "_tpumesh_deselected", []):
        terminalreporter.write_line(f"tpumesh: {line}")


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
