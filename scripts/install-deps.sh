#!/usr/bin/env bash
# Installs the Debian packages that building and testing tpumesh needs.
# Idempotent: when everything is present it only checks (about a second).
# Usage: scripts/install-deps.sh        (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  cmake g++ make pkg-config
  clang libclang-rt-14-dev  # the ASan+UBSan build and libFuzzer (scripts/sanitizers.sh)
  libhwy-dev        # Highway 1.0.3: portable SIMD with dynamic dispatch
  libblis-dev       # BLIS 0.9: the f32 GEMM provider
  libhdf5-dev       # model files and reference data
  libtbb-dev        # per-device task arenas
  libomp-dev        # OpenMP (omp simd; the alternative executor)
  libpng-dev        # image output
  libgtest-dev libgmock-dev  # GoogleTest
  libbenchmark-dev  # Google Benchmark
  libdnnl-dev       # oneDNN 2.6: a matmul peer in bench/kernels_matmul_bench (issue 31); never linked by tpumesh
  libcli11-dev      # command-line parsing
  nlohmann-json3-dev  # JSON (chip files, configs, reports)
  libicu-dev        # Unicode categories, case mapping, NFC (tokenizer)
  libopenmpi-dev openmpi-bin  # MPI: the mesh across processes and hosts (docs/cluster.md); optional in CMake
  python3-dev pybind11-dev python3-numpy  # the Python module `import tpumesh` (docs/python.md); optional in CMake
  python3-pytest    # its test suite (python/tests, run by .ci/run)
  python3-venv      # scripts/make-venv.sh: the suite again with jax and numpy 2 from PyPI
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
