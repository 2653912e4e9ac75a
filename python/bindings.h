// The pieces of the extension module tpumesh._tpumesh (python/module.cc):
// each Register* adds one area's functions and classes; the pure-Python
// package (python/tpumesh/) gives them JAX's names and keyword arguments.
// Arrays cross as numpy arrays, copied both ways: nothing Python owns is
// read after a call returns, and nothing returned points into the library.
#ifndef TPUMESH_PYTHON_BINDINGS_H_
#define TPUMESH_PYTHON_BINDINGS_H_

#include <string>
#include <utility>

#include "io/h5io.h"
#include "mesh/mesh.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"  // every TU alike: std::vector and std::string cross as lists and str

namespace tpumesh::python {

void RegisterDevices(pybind11::module_& m);    // devices, MeshSpec
void RegisterRandom(pybind11::module_& m);     // threefry keys and draws
void RegisterPipeline(pybind11::module_& m);   // Pipeline, simulate, sweeps
void RegisterStableHlo(pybind11::module_& m);  // run / price a module; HDF5 datasets; PNG
void RegisterEval(pybind11::module_& m);       // one component on inputs; HDF5 writers

// Elements as a dataset holds them (pipeline::H5Raw: class, width, shape,
// dtype tag "bfloat16" / "float16" / "bool", bytes) <-> a numpy array and
// its tag. bfloat16 crosses as uint16 with the tag "bfloat16" (numpy has no
// bf16; python/tpumesh/ makes it ml_dtypes' bfloat16 when that is there).
pybind11::tuple NumpyFromRaw(const pipeline::H5Raw& raw);
// InvalidArgument for a dtype with no StableHLO element type (complex,
// object, ...). `tag` "bfloat16" marks uint16 bits of bf16 values.
StatusOr<pipeline::H5Raw> RawFromNumpy(const pybind11::array& a, const std::string& tag);

}  // namespace tpumesh::python

#endif  // TPUMESH_PYTHON_BINDINGS_H_
