// tpumesh._tpumesh: the extension module under the Python package tpumesh
// (python/tpumesh/__init__.py imports it). docs/python.md is its guide.
#include "bindings.h"
#include "mesh/array.h"

PYBIND11_MODULE(_tpumesh, m) {
  m.doc() = "tpumesh's library from Python: devices, PRNG, text-to-image, one component (eval), pricing, StableHLO (docs/python.md)";
  // The host heap's policy for a process running virtual devices, as the
  // CLI sets it first thing (mesh/array.h).
  tpumesh::mesh::BoundHostHeap();
  tpumesh::python::RegisterDevices(m);
  tpumesh::python::RegisterRandom(m);
  tpumesh::python::RegisterPipeline(m);
  tpumesh::python::RegisterStableHlo(m);
  tpumesh::python::RegisterEval(m);
}
