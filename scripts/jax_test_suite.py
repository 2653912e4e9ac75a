#!/usr/bin/env python3
"""JAX's own test suite on tpumesh (issue 41; docs/pjrt.md, "JAX's test suite").

Runs chosen test files of the installed jax's own test suite twice, once on
JAX's CPU backend (JAX_PLATFORMS=cpu) and once on tpumesh
(JAX_PLATFORMS=tpumesh), in the same venv, with the same environment
otherwise, each file under pytest with JUnit XML; then reports per file how
many of the tests that pass on CPU pass on tpumesh, and every failure of
those grouped by cause (the first line of its error with numbers, shapes
and names of values stripped), biggest groups first.

The sources: the tests of the installed jax's exact version. PyPI's sdist
is tried first (`pip download --no-binary :all: jax==VERSION`), but jax's
sdists carry no tests/ (0.4.38 and 0.10.2 measured); then a git
repository of jax given by --jax-git (or JAX_GIT_DIR) at tag
jax-vVERSION. Only tests/, conftest.py and pyproject.toml (the pytest
configuration jax's CI uses: warnings are errors) are unpacked, under
build/jax-suite/src/jax-VERSION. Nothing of them is copied into the repo.

What the tests need and the venv lacks (pytest, absl-py, cloudpickle,
mpmath; pytest-timeout and pytest-xdist to bound and to isolate tests) is
installed into the venv with its pip, each said on stderr; --no-install
refuses instead.

This file only uses the standard library: any python3 runs it; the tests
run with --python.

Usage: scripts/jax-test-suite.sh --python /opt/venvs/jaxnew/bin/python
           [--jax-git DIR] [--out REPORT.md] [--files a_test.py ...]
           [--cases N] [--sample-k EXPR | --full] [--timeout S] [--workers N]
           [--platforms cpu,tpumesh] [--reuse]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET

REPO = pathlib.Path(__file__).resolve().parent.parent

# The brief's families: lax ops, lax.numpy, random, api, pmap, shard_map and
# jit with shardings (pjit). A name missing in a version is skipped and said.
DEFAULT_FILES = [
    "lax_test.py",
    "lax_numpy_test.py",
    "random_test.py",
    "random_lax_test.py",
    "api_test.py",
    "pmap_test.py",
    "shard_map_test.py",
    "pjit_test.py",
]

# The default sample (measured, docs/pjrt.md): JAX_NUM_GENERATED_CASES=2 keeps
# each parameterized test to two of its sampled cases. --full: jax's default 10
# and nothing deselected.
DEFAULT_CASES = 2
FULL_CASES = 10

# Python modules the tests import (module -> the PyPI name to install), then
# the runner's plugins (optional for the tests themselves).
NEEDED = {"pytest": "pytest<9", "absl": "absl-py", "cloudpickle": "cloudpickle", "mpmath": "mpmath"}
RUNNER = {"pytest_timeout": "pytest-timeout", "xdist": "pytest-xdist"}


def log(*a):
    print("jax-test-suite:", *a, file=sys.stderr, flush=True)


def venv_info(python: str) -> dict:
    code = (
        "import json, sys, importlib.util as u\n"
        "import jax, jaxlib, numpy\n"
        f"mods = {sorted(list(NEEDED) + list(RUNNER))!r}\n"
        "print(json.dumps({'jax': jax.__version__, 'jaxlib': jaxlib.__version__,"
        " 'numpy': numpy.__version__, 'python': sys.version.split()[0],"
        " 'have': {m: u.find_spec(m) is not None for m in mods}}))\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=_clean_env())
    if out.returncode != 0:
        sys.exit(f"jax-test-suite: {python} has no working jax: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _clean_env() -> dict:
    env = dict(os.environ)
    for k in ("JAX_PLATFORMS", "PYTHONPATH", "XLA_FLAGS", "JAX_NUM_GENERATED_CASES"):
        env.pop(k, None)
    return env


def ensure_packages(python: str, info: dict, install: bool) -> list[str]:
    missing = [pkg for mod, pkg in {**NEEDED, **RUNNER}.items() if not info["have"][mod]]
    if not missing:
        return []
    if not install:
        sys.exit(f"jax-test-suite: {python}'s venv lacks {', '.join(missing)} (--no-install given)")
    log(f"installing into {python}'s venv what it lacks: {' '.join(missing)}")
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *missing], check=True)
    return missing


def _unpack_members(tar: tarfile.TarFile, prefix: str, dest: pathlib.Path) -> int:
    n = 0
    for m in tar.getmembers():
        if not m.name.startswith(prefix):
            continue
        rel = m.name[len(prefix):]
        if not (rel.startswith("tests/") or rel in ("conftest.py", "pyproject.toml")) or not m.isfile():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with tar.extractfile(m) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out)
        n += 1
    return n


def get_sources(python: str, version: str, cache: pathlib.Path, jax_git: str | None) -> tuple[pathlib.Path, str]:
    """The unpacked tests of jax VERSION and where they came from."""
    dest = cache / "src" / f"jax-{version}"
    stamp = dest / ".tpumesh-source"
    if stamp.exists() and (dest / "tests").is_dir():
        return dest, stamp.read_text().strip()
    if dest.exists():
        shutil.rmtree(dest)
    sdist_dir = cache / "sdist"
    sdist_dir.mkdir(parents=True, exist_ok=True)
    sdist = sdist_dir / f"jax-{version}.tar.gz"
    if not sdist.exists():
        log(f"downloading jax {version}'s sdist from PyPI")
        r = subprocess.run(
            [python, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
             "--no-binary", ":all:", f"jax=={version}", "-d", str(sdist_dir)],
            capture_output=True, text=True)
        if r.returncode != 0:
            log(f"pip download failed: {r.stderr.strip().splitlines()[-1:] if r.stderr.strip() else r.returncode}")
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    source = None
    if sdist.exists():
        with tarfile.open(sdist) as tar:
            if _unpack_members(tar, f"jax-{version}/", tmp) and (tmp / "tests").is_dir():
                source = f"PyPI sdist {sdist.name}"
            else:
                log(f"{sdist.name} carries no tests/ (jax's sdists ship the package only)")
    if source is None:
        if not jax_git:
            shutil.rmtree(tmp)
            sys.exit("jax-test-suite: no tests/ in the sdist; give a git repository of jax "
                     "with --jax-git DIR (or JAX_GIT_DIR) holding the tag jax-v" + version)
        tag = f"jax-v{version}"
        rev = subprocess.run(["git", "-C", jax_git, "rev-parse", "--verify", "--quiet", tag + "^{commit}"],
                             capture_output=True, text=True)
        if rev.returncode != 0:
            shutil.rmtree(tmp)
            sys.exit(f"jax-test-suite: {jax_git} has no tag {tag}")
        # git archive of the three paths; it may complain on stderr about
        # objects elsewhere in the tree that a partial clone lacks: the check
        # below is on what was written.
        arch = subprocess.run(["git", "-C", jax_git, "archive", "--format=tar", tag, "--",
                               "tests", "conftest.py", "pyproject.toml"], capture_output=True)
        with tarfile.open(fileobj=__import__("io").BytesIO(arch.stdout)) as tar:
            n = _unpack_members(tar, "", tmp)
        want = subprocess.run(["git", "-C", jax_git, "ls-tree", "-r", "--name-only", tag, "tests"],
                              capture_output=True, text=True).stdout.split()
        if n < len(want) + 2:
            shutil.rmtree(tmp)
            sys.exit(f"jax-test-suite: git archive of {tag} gave {n} files of {len(want) + 2}: "
                     f"{arch.stderr.decode(errors='replace').strip()[:300]}")
        source = f"git {tag} ({rev.stdout.strip()[:12]}) of {jax_git}"
    (tmp / ".tpumesh-source").write_text(source + "\n")
    tmp.rename(dest)
    log(f"jax {version}'s tests from {source} in {dest}")
    return dest, source


def run_file(python: str, src: pathlib.Path, test_file: str, platform: str, out_dir: pathlib.Path,
             opts: argparse.Namespace, have: dict, build: pathlib.Path) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = test_file.removesuffix(".py")
    xml = out_dir / f"{stem}.xml"
    logf = out_dir / f"{stem}.log"
    if xml.exists():
        xml.unlink()
    env = _clean_env()
    # --with-cpu: JAX_PLATFORMS=tpumesh,cpu, as JAX's own TPU CI runs with
    # tpu,cpu (ci/run_pytest_tpu.sh): tpumesh the default backend, a CPU
    # backend there for the tests that ask for one.
    env["JAX_PLATFORMS"] = "tpumesh,cpu" if platform == "tpumesh" and opts.with_cpu else platform
    # The same for both runs: on CPU it gives the 8 devices the sharding tests
    # ask for; under tpumesh the CPU backend is not started.
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    env["JAX_NUM_GENERATED_CASES"] = str(opts.cases)
    env["PYTHONPATH"] = str(build / "python")
    env["PYTHONHASHSEED"] = "0"
    cmd = [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rN", f"tests/{test_file}",
           f"--junitxml={xml}", "-o", "junit_logging=no"]
    if have["pytest_timeout"] and opts.timeout > 0:
        cmd += [f"--timeout={opts.timeout}"]
    if have["xdist"] and opts.workers > 0:
        # Even one worker: a test that kills its process is then one failure
        # ("worker crashed"), not the end of the file's run.
        cmd += ["-n", str(opts.workers)]
    if opts.k:
        cmd += ["-k", opts.k]
    cmd += opts.pytest_args
    t0 = time.monotonic()
    with open(logf, "w") as lf:
        lf.write("$ " + " ".join(cmd) + "\n")
        lf.flush()
        p = subprocess.Popen(cmd, cwd=src, env=env, stdout=lf, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=opts.file_timeout)
            killed = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
            killed = True
    secs = time.monotonic() - t0
    res = {"file": test_file, "platform": platform, "seconds": round(secs, 1), "rc": rc, "killed": killed,
           "xml": str(xml), "log": str(logf)}
    log(f"{platform:8s} {test_file:22s} {secs:7.1f} s rc={rc}{' (killed: --file-timeout)' if killed else ''}")
    return res


# ---------------------------------------------------------------- the report

def read_junit(path: pathlib.Path) -> dict[str, dict]:
    """test id -> {"outcome": passed|failed|error|skipped, "message": str, "seconds": float}."""
    tests = {}
    root = ET.parse(path).getroot()
    for tc in root.iter("testcase"):
        tid = f"{tc.get('classname', '')}::{tc.get('name', '')}"
        outcome, message = "passed", ""
        for child in tc:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "error"
                message = child.get("message") or (child.text or "").strip()
                body = child.text or ""
                # pytest puts the crash line in message; keep the "E   " lines as
                # a fallback when message is empty.
                if not message.strip():
                    elines = [ln[1:].strip() for ln in body.splitlines() if ln.startswith("E ")]
                    message = "\n".join(elines)
                break
            if child.tag == "skipped":
                outcome = "skipped"
                message = child.get("message") or ""
        prev = tests.get(tid)
        # A teardown error is a second testcase of the same id: the worse wins.
        if prev is None or prev["outcome"] == "passed":
            tests[tid] = {"outcome": outcome, "message": message, "seconds": float(tc.get("time") or 0)}
    return tests


_EXC_ONLY = re.compile(r"^[\w.]+(Error|Exception|Failure|Exit)?:?\s*$")


def first_line(message: str) -> str:
    """The line of an error that says what went wrong."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if not lines:
        return "(no message)"
    line = lines[0]
    # "AssertionError:" alone, or "XlaRuntimeError: INTERNAL:" with the
    # reason on the next line: the next line is the cause.
    if (_EXC_ONLY.match(line) or line.endswith(":")) and len(lines) > 1:
        line = line.rstrip(":") + ": " + lines[1]
    return line


_NORMALISE = [
    (re.compile(r"\S+\.mlir:\d+:\d+:\s*"), ""),               # a program's location
    (re.compile(r"\b(jit|pjit|pmap|xla_pmap|shard_map)_\w+"), r"\1_…"),  # the program's name
    (re.compile(r"~?\b(float|bfloat|int|uint|complex|bool)\d*\[[^\]]*\](, ~?\b(float|bfloat|int|uint|complex|bool)\d*\[[^\]]*\])*"),
     "T[…]"),                                                    # jax's avals: float32[3,4], ~float32[]
    (re.compile(r"loc\([^)]*\)"), "loc(…)"),
    (re.compile(r"tensor<[^<>]*(<[^<>]*>[^<>]*)*>"), "tensor<…>"),
    (re.compile(r"%[\w#.:-]+"), "%v"),                           # SSA values
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x#"),
    (re.compile(r"\b(bf16|[fsuic]\d+|pred|token)\[[^\]]*\](\{[^}]*\})?"), r"\1[…]"),  # HLO shapes
    (re.compile(r"\bArray\([^)]*\)"), "Array(…)"),
    (re.compile(r"\barray\([^)]*\)"), "array(…)"),
    (re.compile(r"ShapedArray\([^)]*\)"), "ShapedArray(…)"),
    (re.compile(r"(?<![\w.])[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?(?![\w.])"), "#"),  # numbers
    (re.compile(r"\((\s*#\s*,?)+\)"), "(…)"),                    # shape tuples
    (re.compile(r"\[(\s*[#.…]+\s*,?)+\]"), "[…]"),
    (re.compile(r"'[^']{40,}'"), "'…'"),                         # long quoted text
    (re.compile(r"\s+"), " "),
]


# Where a group's cause lies, as found by reading the failures (docs/pjrt.md,
# "JAX's test suite"): the first pattern that matches a group's normalised
# cause names it. A group without one is not yet explained.
KNOWN_CAUSES = [
    (r"arguments split over the devices are not run yet",
     "pjrt/executable.cc: a program whose arguments are split over devices (sharded jit, shard_map, pmap of jax "
     ">= 0.8) is refused"),
    (r"UnspecifiedValue|std::bad_cast",
     "pjrt/executable.cc: a multi-device executable reports no output shardings (PJRT_Executable_OptimizedProgram "
     "is UNIMPLEMENTED, so get_output_shardings() is None); jax's result arrays get an UnspecifiedValue sharding, "
     "std::bad_cast where jaxlib's C++ reads one"),
    (r"could not broadcast input array from shape",
     "pjrt/executable.cc: a multi-device program's results come back whole on every device (one device's value), "
     "not as each device's shard"),
    (r"Skipped unless running on devices with tags: cpu$", "the test itself: run_on_devices('cpu')"),
    (r"Skipped unless running on devices with tags: (?!cpu$)",
     "the test itself: run only on the platforms it names (cpu, gpu, tpu; this one is 'tpumesh')"),
    (r"but the run's mesh is",
     "pjrt/executable.cc: a program with an sdy.mesh is run on a mesh named data=N, not the program's mesh"),
    (r"buffers of PJRT element type # are not implemented",
     "pjrt/buffer.cc: a buffer element type past the API's first 16 (int4, float8)"),
    (r"C API does not support uncompiled cost analysis", "jax: any PJRT C API plugin (the test skips it)"),
    (r"only implemented on the CPU and GPU backends", "jax: an op jax implements for CPU and GPU only"),
    (r"donated buffers were not usable|(donat|forwarding)\w* not supported on device",
     "buffer donation: jax did not donate to 'tpumesh' (a jax whose donation list the plugin did not reach)"),
    (r"not supported on device with tags \{'tpumesh'\}", "the test itself: its device filter leaves 'tpumesh' out"),
    (r"Unknown backend cpu", "the run: JAX_PLATFORMS=tpumesh starts no CPU backend, the test asks for one"),
    (r"MLIR translation rule for primitive '(\w+)' not found for platform tpumesh",
     "jax: no lowering of the primitive for platform 'tpumesh' (CPU's is a LAPACK custom call, TPU's an XLA one)"),
    (r"unsupported custom_call", "hlo/: a custom call of an XLA backend (LAPACK, TPU) that tpumesh does not run"),
    (r"unsupported element type", "hlo/: an element type tpumesh does not hold (int4, float8)"),
    (r"unsupported op 'stablehlo\.(create_token|after_all)'", "hlo/: tokens (no token type)"),
    (r"unsupported op", "hlo/: an op not in hlo/ops.h"),
    (r"PJRT_\w+ is not implemented", "pjrt/: a PJRT function the plugin lacks"),
    (r"does not take complex|complex \w+ is not|is not computed|not supported", "hlo/: an op's case not computed"),
    (r"(Jax|Xla)RuntimeError not raised", "pjrt/: compile options are not validated (XLA refuses unknown ones)"),
    (r"Timeout", "a per-test timeout"),
]


def where(cause_text: str) -> str:
    for pattern, place in KNOWN_CAUSES:
        if re.search(pattern, cause_text):
            return place
    return ""


def cause(message: str) -> str:
    """One group per cause: the error's first line with the variable parts stripped."""
    line = first_line(message)
    for pat, rep in _NORMALISE:
        line = pat.sub(rep, line)
    line = line.strip()
    return line[:200] + ("…" if len(line) > 200 else "")


def skip_cause(message: str) -> str:
    return "skipped on tpumesh: " + cause(message or "(no reason)")


def analyse(runs: dict, files: list[str]) -> dict:
    """runs[platform][file] = {"tests": {...}, "seconds", "rc", "killed"} -> the report's data."""
    per_file, groups = [], collections.OrderedDict()
    all_groups: dict[str, dict] = {}
    for f in files:
        cpu = runs.get("cpu", {}).get(f)
        tm = runs.get("tpumesh", {}).get(f)
        row = {"file": f}
        if cpu is None or tm is None:
            continue
        cpu_t, tm_t = cpu["tests"], tm["tests"]
        cpu_pass = sorted(t for t, r in cpu_t.items() if r["outcome"] == "passed")
        row.update({
            "cpu_collected": len(cpu_t), "cpu_passed": len(cpu_pass),
            "cpu_failed": sum(r["outcome"] in ("failed", "error") for r in cpu_t.values()),
            "cpu_skipped": sum(r["outcome"] == "skipped" for r in cpu_t.values()),
            "tpumesh_collected": len(tm_t),
            "tpumesh_passed_all": sum(r["outcome"] == "passed" for r in tm_t.values()),
            "cpu_seconds": cpu["seconds"], "tpumesh_seconds": tm["seconds"],
            "cpu_rc": cpu["rc"], "tpumesh_rc": tm["rc"],
            "killed": [p for p, r in (("cpu", cpu), ("tpumesh", tm)) if r.get("killed")],
        })
        passed = 0
        cpu_only = 0
        for t in cpu_pass:
            r = tm_t.get(t)
            if r is None:
                key = "not run on tpumesh (missing from its results: the file's run ended early?)"
                msg = ""
            elif r["outcome"] == "passed":
                passed += 1
                continue
            elif r["outcome"] == "skipped":
                key, msg = skip_cause(r["message"]), r["message"]
                if re.search(r"Skipped unless running on devices with tags: cpu$", r["message"] or ""):
                    cpu_only += 1
            else:
                key, msg = cause(r["message"]), r["message"]
            g = all_groups.setdefault(key, {"cause": key, "where": where(key), "count": 0,
                                            "files": collections.Counter(),
                                            "example": t, "example_message": first_line(msg)[:500],
                                            "tests": []})
            g["count"] += 1
            g["files"][f] += 1
            g["tests"].append(t)
        row["tpumesh_passed"] = passed
        row["percent"] = round(100.0 * passed / len(cpu_pass), 1) if cpu_pass else None
        # The tests the file itself runs on the CPU only (run_on_devices("cpu")).
        row["cpu_only"] = cpu_only
        rest = len(cpu_pass) - cpu_only
        row["percent_not_cpu_only"] = round(100.0 * passed / rest, 1) if rest else None
        per_file.append(row)
    ordered = sorted(all_groups.values(), key=lambda g: (-g["count"], g["cause"]))
    for g in ordered:
        g["files"] = dict(g["files"].most_common())
        # The test methods behind a group (parameter suffixes dropped).
        g["methods"] = len({re.sub(r"(_?\d+)+$", "", t) for t in g["tests"]})
    tot_cpu = sum(r["cpu_passed"] for r in per_file)
    tot_tm = sum(r["tpumesh_passed"] for r in per_file)
    tot_only = sum(r["cpu_only"] for r in per_file)
    places = collections.Counter()
    for g in ordered:
        places[g["where"] or "(not yet explained)"] += g["count"]
    return {"files": per_file, "groups": ordered, "where": dict(places.most_common()),
            "total": {"cpu_passed": tot_cpu, "tpumesh_passed": tot_tm, "cpu_only": tot_only,
                      "percent": round(100.0 * tot_tm / tot_cpu, 1) if tot_cpu else None,
                      "percent_not_cpu_only": round(100.0 * tot_tm / (tot_cpu - tot_only), 1)
                      if tot_cpu > tot_only else None}}


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def write_report(data: dict, meta: dict, md_path: pathlib.Path, max_groups: int) -> None:
    L = []
    L.append(f"# JAX's test suite on tpumesh: jax {meta['jax']}")
    L.append("")
    L.append(f"- run: {meta['date']}, host {meta['host']}, {meta['cores']} cores")
    L.append(f"- venv: `{meta['python']}` (jax {meta['jax']}, jaxlib {meta['jaxlib']}, numpy {meta['numpy']}, "
             f"python {meta['python_version']})")
    L.append(f"- tests from: {meta['source']}")
    L.append(f"- tpumesh run: JAX_PLATFORMS={meta['tpumesh_platforms']}")
    L.append(f"- sample: JAX_NUM_GENERATED_CASES={meta['cases']}"
             + (f", `-k {meta['k']}`" if meta["k"] else ", no -k")
             + f"; per-test timeout {meta['timeout']} s; {meta['workers']} xdist worker(s)")
    L.append(f"- command: `{meta['command']}`")
    L.append(f"- wall time: {meta['seconds']:.0f} s (cpu run {meta['seconds_cpu']:.0f} s, "
             f"tpumesh run {meta['seconds_tpumesh']:.0f} s)")
    if meta.get("installed"):
        L.append(f"- installed into the venv for this run: {', '.join(meta['installed'])}")
    L.append("")
    L.append("Counted: the tests that pass on JAX's CPU backend (JAX_PLATFORMS=cpu, 8 host devices); "
             "of those, how many pass with JAX_PLATFORMS=tpumesh. A test skipped on tpumesh that passed "
             "on CPU counts as not passing.")
    L.append("")
    L.append("| file | collected | CPU passed | tpumesh passed | % | CPU-only tests | % of the others | CPU s | tpumesh s |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    fmt = lambda v: "–" if v is None else f"{v:.1f}"
    for r in data["files"]:
        note = f" (killed: {', '.join(r['killed'])})" if r["killed"] else ""
        L.append(f"| {r['file']}{note} | {r['cpu_collected']} | {r['cpu_passed']} | {r['tpumesh_passed']} | "
                 f"{fmt(r['percent'])} | {r['cpu_only']} | {fmt(r['percent_not_cpu_only'])} | "
                 f"{r['cpu_seconds']:.0f} | {r['tpumesh_seconds']:.0f} |")
    t = data["total"]
    L.append(f"| **all** | | **{t['cpu_passed']}** | **{t['tpumesh_passed']}** | **{fmt(t['percent'])}** | "
             f"{t['cpu_only']} | **{fmt(t['percent_not_cpu_only'])}** | | |")
    L.append("")
    L.append("CPU-only tests: passed on CPU, skipped on tpumesh by the test's own `run_on_devices(\"cpu\")`; "
             "'% of the others' leaves them out.")
    L.append("")
    L.append("### Failures by where the cause lies")
    L.append("")
    L.append("| tests | where |")
    L.append("|---:|---|")
    for place, n in data["where"].items():
        L.append(f"| {n} | {_md_escape(place)} |")
    L.append("")
    for m in meta.get("missing_files", []):
        L.append(f"- {m} is not in this version's tests/: not run")
    L.append("")
    groups = data["groups"]
    L.append(f"## Failures on tpumesh of tests that pass on CPU, by cause ({len(groups)} groups, "
             f"{sum(g['count'] for g in groups)} tests)")
    L.append("")
    L.append("| # | tests | methods | cause (first line, normalised) | where | files | example |")
    L.append("|---:|---:|---:|---|---|---|---|")
    for i, g in enumerate(groups[:max_groups], 1):
        files = ", ".join(f"{k.removesuffix('.py')} {v}" for k, v in g["files"].items())
        L.append(f"| {i} | {g['count']} | {g['methods']} | {_md_escape(g['cause'])} | {_md_escape(g['where'])} | "
                 f"{files} | `{_md_escape(g['example'])}` |")
    if len(groups) > max_groups:
        rest = groups[max_groups:]
        L.append(f"| | {sum(g['count'] for g in rest)} | | {len(rest)} more groups (in the JSON) | | | |")
    L.append("")
    md_path.write_text("\n".join(L) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=str(REPO / "build/venv/bin/python"),
                    help="the venv's python whose jax is tested (default build/venv/bin/python)")
    ap.add_argument("--build", default=os.environ.get("TPUMESH_BUILD_DIR", str(REPO / "build/release")),
                    help="the build with python/jax_plugins/tpumesh (default build/release)")
    ap.add_argument("--cache", default=None, help="sources and runs (default <build>/../jax-suite)")
    ap.add_argument("--jax-git", default=os.environ.get("JAX_GIT_DIR"),
                    help="a git repository of jax with tags jax-vVERSION, when the sdist has no tests/")
    ap.add_argument("--out", default=None, help="the markdown report (default <cache>/jax-VERSION/report.md); "
                    "the JSON is beside it (.json)")
    ap.add_argument("--files", nargs="+", default=DEFAULT_FILES, help="test files under tests/")
    ap.add_argument("--cases", type=int, default=None,
                    help=f"JAX_NUM_GENERATED_CASES (default {DEFAULT_CASES}; {FULL_CASES} with --full)")
    ap.add_argument("-k", dest="k", default=None, help="pytest -k expression for both runs")
    ap.add_argument("--full", action="store_true", help=f"jax's own sample: {FULL_CASES} generated cases")
    ap.add_argument("--timeout", type=int, default=180, help="per-test timeout in s (pytest-timeout; 0: none)")
    ap.add_argument("--file-timeout", type=int, default=3600, help="one file's run is killed after this")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                    help="pytest-xdist workers (default: the cores, at most 2)")
    ap.add_argument("--platforms", default=None,
                    help="which runs to make, the others reused (default: tpumesh, and cpu where no CPU run of "
                         "the same version, sample and file is recorded)")
    ap.add_argument("--reuse", action="store_true", help="reuse every run already recorded (only report)")
    ap.add_argument("--with-cpu", action="store_true",
                    help="JAX_PLATFORMS=tpumesh,cpu for the tpumesh run (as JAX's TPU CI: tpu,cpu), not tpumesh")
    ap.add_argument("--no-install", action="store_true", help="refuse rather than pip install what is missing")
    ap.add_argument("--max-groups", type=int, default=40)
    ap.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments for both runs")
    opts = ap.parse_args(argv)
    if opts.cases is None:
        opts.cases = FULL_CASES if opts.full else DEFAULT_CASES

    t_start = time.monotonic()
    python = opts.python
    build = pathlib.Path(opts.build).resolve()
    if not (build / "python/jax_plugins/tpumesh/pjrt_plugin_tpumesh.so").exists():
        sys.exit(f"jax-test-suite: {build}/python/jax_plugins/tpumesh has no pjrt_plugin_tpumesh.so "
                 "(build the targets _tpumesh and pjrt_plugin_tpumesh)")
    cache = pathlib.Path(opts.cache).resolve() if opts.cache else build.parent / "jax-suite"
    info = venv_info(python)
    version = info["jax"]
    installed = ensure_packages(python, info, not opts.no_install)
    if installed:
        info = venv_info(python)
    src, source = get_sources(python, version, cache, opts.jax_git)
    files = [f for f in opts.files if (src / "tests" / f).exists()]
    missing_files = [f for f in opts.files if f not in files]
    for m in missing_files:
        log(f"{m} is not in jax {version}'s tests/: not run")
    label = f"cases{opts.cases}" + (f"-k-{re.sub(r'[^A-Za-z0-9]+', '_', opts.k)[:40]}" if opts.k else "")
    run_dir = cache / f"jax-{version}" / label
    if opts.reuse:
        todo = []
    elif opts.platforms is not None:
        todo = [p for p in opts.platforms.split(",") if p]
    else:
        todo = ["tpumesh"]
        if any(not (run_dir / "cpu" / (f.removesuffix(".py") + ".run.json")).exists() for f in files):
            todo.insert(0, "cpu")
    runs: dict = {"cpu": {}, "tpumesh": {}}
    seconds = {"cpu": 0.0, "tpumesh": 0.0}
    subdir = {"cpu": "cpu", "tpumesh": "tpumesh+cpu" if opts.with_cpu else "tpumesh"}
    for platform in ("cpu", "tpumesh"):
        for f in files:
            meta_path = run_dir / subdir[platform] / (f.removesuffix(".py") + ".run.json")
            recorded = meta_path.exists()
            if platform in todo and (platform != "cpu" or opts.platforms is not None or not recorded):
                res = run_file(python, src, f, platform, run_dir / subdir[platform], opts, info["have"], build)
                meta_path.write_text(json.dumps(res, indent=1))
            elif recorded:
                res = json.loads(meta_path.read_text())
            else:
                log(f"no {platform} run of {f} recorded in {run_dir}: run it (--platforms {platform})")
                continue
            xml = pathlib.Path(res["xml"])
            res["tests"] = read_junit(xml) if xml.exists() else {}
            if not xml.exists():
                log(f"{platform} {f}: no JUnit XML (rc {res['rc']}); see {res['log']}")
            runs[platform][f] = res
            seconds[platform] += res["seconds"]
    data = analyse(runs, files)
    out = pathlib.Path(opts.out).resolve() if opts.out else run_dir / "report.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    host = "unknown"
    try:
        for ln in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if ln.startswith("Model name"):
                host = ln.split(":", 1)[1].strip()
    except OSError:
        pass
    meta = {
        "jax": version, "jaxlib": info["jaxlib"], "numpy": info["numpy"], "python_version": info["python"],
        "python": python, "source": source, "cases": opts.cases, "k": opts.k, "timeout": opts.timeout,
        "workers": opts.workers if info["have"]["xdist"] else 0, "host": host, "cores": os.cpu_count(),
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "command": "scripts/jax-test-suite.sh " + " ".join(sys.argv[1:] if argv is None else argv),
        "seconds": time.monotonic() - t_start, "seconds_cpu": seconds["cpu"],
        "seconds_tpumesh": seconds["tpumesh"], "installed": installed, "missing_files": missing_files,
        "run_dir": str(run_dir), "tpumesh_platforms": "tpumesh,cpu" if opts.with_cpu else "tpumesh",
    }
    write_report(data, meta, out, opts.max_groups)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, **data}, indent=1))
    t = data["total"]
    log(f"report: {out} (and .json): {t['tpumesh_passed']} of {t['cpu_passed']} CPU-passing tests pass "
        f"on tpumesh ({t['percent']}%)")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
