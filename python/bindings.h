// The pieces of the extension module tpumesh._tpumesh (python/module.cc):
// each Register* adds one area's functions and classes; the pure-Python
// package (python/tpumesh/) gives them JAX's names and keyword arguments.
// Arrays cross as numpy arrays, copied both ways, through ndarray.h only.
#ifndef TPUMESH_PYTHON_BINDINGS_H_
#define TPUMESH_PYTHON_BINDINGS_H_

#include <string>
#include <utility>
#include <vector>

#include "io/h5io.h"
#include "mesh/mesh.h"
#include "ndarray.h"  // arrays in and out, without numpy's C ABI
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"  // every TU alike: std::vector and std::string cross as lists and str

namespace tpumesh::python {

void RegisterDevices(pybind11::module_& m);    // devices, MeshSpec
void RegisterRandom(pybind11::module_& m);     // threefry keys and draws
void RegisterPipeline(pybind11::module_& m);   // Pipeline, simulate, sweeps
void RegisterStableHlo(pybind11::module_& m);  // run / price a module; HDF5 datasets; PNG
void RegisterEval(pybind11::module_& m);       // one component on inputs; HDF5 writers

// Every file the module writes for the user (a PNG, a trace, an HDF5 file)
// passes the commands' one output guard first (io/run_files.h
// CheckRunFiles: not a directory, FIFO, device or socket; its folder takes a
// file; not one of `inputs`, the files the call reads, as (argument, path));
// throws OSError with its one-line message.
void CheckOutputFile(const std::string& path,
                     const std::vector<std::pair<std::string, std::string>>& inputs = {});

}  // namespace tpumesh::python

#endif  // TPUMESH_PYTHON_BINDINGS_H_
