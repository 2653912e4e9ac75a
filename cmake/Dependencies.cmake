# Every dependency is a Debian package (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(TBB REQUIRED)
find_package(hwy REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(PNG REQUIRED)
find_package(HDF5 REQUIRED COMPONENTS C CXX)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(ICU REQUIRED COMPONENTS uc)
# Optional: the mesh across processes and hosts (docs/cluster.md). Without
# MPI the build runs one process, and says so when started by mpirun.
find_package(MPI COMPONENTS C)
if(MPI_C_FOUND)
  option(TPUMESH_MPI "Spread the mesh over MPI ranks (mesh/cluster.h)" ON)
else()
  option(TPUMESH_MPI "Spread the mesh over MPI ranks (mesh/cluster.h)" OFF)
  if(TPUMESH_MPI)
    message(FATAL_ERROR "TPUMESH_MPI=ON but MPI was not found: run scripts/install-deps.sh (libopenmpi-dev)")
  endif()
endif()
message(STATUS "tpumesh: MPI ${TPUMESH_MPI} (found: ${MPI_C_FOUND} ${MPI_C_VERSION})")

# Optional: the Python module `import tpumesh` (python/, docs/python.md), with
# Debian's python3-dev and pybind11-dev. Off in the sanitizer builds: a
# module needs every library compiled position-independent, and an
# instrumented module would need the sanitizer runtime preloaded into Python.
# The interpreter is Debian's, the one install-deps.sh gives numpy and pytest
# (a pyenv or venv python3 earlier on PATH may have neither); pass
# -DPython3_EXECUTABLE=... to build for another one.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python the module is built for")
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module)
if(Python3_FOUND)
  find_package(pybind11 2.10 CONFIG QUIET)
endif()
if(Python3_FOUND AND pybind11_FOUND AND TPUMESH_SANITIZE STREQUAL "")
  option(TPUMESH_PYTHON "Build the Python module tpumesh (python/)" ON)
else()
  option(TPUMESH_PYTHON "Build the Python module tpumesh (python/)" OFF)
endif()
if(TPUMESH_PYTHON AND NOT (Python3_FOUND AND pybind11_FOUND))
  message(FATAL_ERROR "TPUMESH_PYTHON=ON needs Python 3 headers and pybind11: run scripts/install-deps.sh (python3-dev, pybind11-dev)")
endif()
message(STATUS "tpumesh: Python module ${TPUMESH_PYTHON} (Python ${Python3_VERSION}, pybind11 ${pybind11_VERSION})")

# BLIS ships neither a CMake nor a pkg-config file (TOOLCHAIN.md).
find_path(BLIS_INCLUDE_DIR blis.h PATH_SUFFIXES blis-openmp blis-pthread blis-serial blis)
find_library(BLIS_LIBRARY NAMES blis PATH_SUFFIXES blis-openmp blis-pthread blis-serial)
if(NOT BLIS_INCLUDE_DIR OR NOT BLIS_LIBRARY)
  message(FATAL_ERROR "BLIS not found: run scripts/install-deps.sh (libblis-dev)")
endif()
add_library(blis::blis UNKNOWN IMPORTED)
set_target_properties(blis::blis PROPERTIES
  IMPORTED_LOCATION "${BLIS_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${BLIS_INCLUDE_DIR}")

if(TPUMESH_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(TPUMESH_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
