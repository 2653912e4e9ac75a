"""The PEP 517 backend behind `pip install .` (pyproject.toml).

It configures a CMake build for the running interpreter (default build/pip,
Release, no tests or benchmarks; `--config-settings=build-dir=build/release`
reuses an existing build), builds the extension target _tpumesh (and with
it the JAX PJRT plugin) and packs the build tree's package folders into a
wheel: <build>/python/tpumesh (the extension and the .py files) and
<build>/python/jax_plugins/tpumesh (the plugin's .so and __init__.py, with
an entry point in the group "jax_plugins", docs/pjrt.md). Only the standard library is used, so pip's
isolated build environment needs nothing from an index.
"""

import base64
import hashlib
import os
import pathlib
import subprocess
import sys
import sysconfig
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME, VERSION = "tpumesh", "0.1.0"
METADATA = f"""Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: A TPU-v5e-like mesh emulated on the CPU, from Python
Requires-Python: >=3.9
Requires-Dist: numpy
"""


def _tag():
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}{getattr(sys, 'abiflags', '')}-{plat}"


def _build(config_settings):
    settings = config_settings or {}
    build = pathlib.Path(settings.get("build-dir") or os.environ.get("TPUMESH_PIP_BUILD_DIR") or ROOT / "build" / "pip")
    if not build.is_absolute():
        build = ROOT / build
    if not (build / "CMakeCache.txt").exists():
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                        "-DTPUMESH_PYTHON=ON", "-DTPUMESH_BUILD_TESTS=OFF", "-DTPUMESH_BUILD_BENCH=OFF",
                        f"-DPython3_EXECUTABLE={sys.executable}"], check=True, stdout=sys.stderr)
    jobs = settings.get("jobs") or str(os.cpu_count() or 1)
    subprocess.run(["cmake", "--build", str(build), "--target", "_tpumesh", "-j", jobs], check=True,
                   stdout=sys.stderr)
    package = build / "python" / NAME
    if not list(package.glob("_tpumesh*.so")):
        raise RuntimeError(f"{package} has no extension _tpumesh after the build (is TPUMESH_PYTHON ON in {build}?)")
    plugin = build / "python" / "jax_plugins" / NAME
    if not (plugin / "pjrt_plugin_tpumesh.so").exists():
        raise RuntimeError(f"{plugin} has no pjrt_plugin_tpumesh.so after the build")
    return package, plugin


def _digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    package, plugin = _build(config_settings)
    dist_info = f"{NAME}-{VERSION}.dist-info"
    wheel_name = f"{NAME}-{VERSION}-{_tag()}.whl"
    files = {}
    for folder, prefix in ((package, NAME), (plugin, f"jax_plugins/{NAME}")):
        for f in sorted(folder.iterdir()):
            if f.suffix in (".py", ".so"):
                files[f"{prefix}/{f.name}"] = f.resolve().read_bytes()  # the .py files are links to python/
    files[f"{dist_info}/METADATA"] = METADATA.encode()
    files[f"{dist_info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: tpumesh_build\nRoot-Is-Purelib: false\n"
                                   f"Tag: {_tag()}\n").encode()
    files[f"{dist_info}/top_level.txt"] = f"{NAME}\njax_plugins\n".encode()
    files[f"{dist_info}/entry_points.txt"] = f"[jax_plugins]\n{NAME} = jax_plugins.{NAME}\n".encode()
    record = "".join(f"{path},{_digest(data)},{len(data)}\n" for path, data in files.items())
    record += f"{dist_info}/RECORD,,\n"
    with zipfile.ZipFile(pathlib.Path(wheel_directory) / wheel_name, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(f"{dist_info}/RECORD", record)
    return wheel_name
