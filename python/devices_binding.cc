// tpumesh.devices(): the emulated devices as the CLI's `devices` prints them
// (report/devices_text.h), and MeshSpec, the device flags' values, which
// every call that makes a mesh takes.
#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "mesh/device.h"
#include "py_status.h"
#include "report/devices_text.h"

namespace tpumesh::python {
namespace py = pybind11;

void RegisterDevices(py::module_& m) {
  py::class_<mesh::MeshSpec>(m, "MeshSpec", "The device flags' values (mesh/mesh.h MeshSpec)")
      .def(py::init<>())
      .def_readwrite("chip", &mesh::MeshSpec::chip)
      .def_readwrite("dataflow", &mesh::MeshSpec::dataflow)
      .def_readwrite("vmem_mib", &mesh::MeshSpec::vmem_mib)
      .def_readwrite("devices", &mesh::MeshSpec::devices)
      .def_readwrite("axes", &mesh::MeshSpec::axes)
      .def_readwrite("topology", &mesh::MeshSpec::topology)
      .def_readwrite("model_axis_along", &mesh::MeshSpec::model_axis_along)
      .def_readwrite("threads_per_device", &mesh::MeshSpec::threads_per_device);

  // (text, json, [repr per device]): the CLI's text and --json, and each
  // device as jax.devices() prints it.
  m.def("devices", [](const mesh::MeshSpec& spec) {
    std::unique_ptr<mesh::Mesh> mesh = ValueOrThrow(mesh::CreateMesh(spec));
    std::vector<std::string> reprs;
    for (int d = 0; d < mesh->num_devices(); ++d) reprs.push_back(mesh->device(d).ToString());
    return py::make_tuple(report::DevicesText(*mesh), report::DevicesJson(*mesh), reprs);
  });
}

}  // namespace tpumesh::python
