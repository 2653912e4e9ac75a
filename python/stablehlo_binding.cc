// tpumesh.stablehlo: a StableHLO module (the MLIR text JAX prints) run or
// priced on the emulated mesh through the flow `tpumesh run` and `simulate
// --stablehlo` share (hlo/run.h RunModule), numpy arrays
// in and out; and the small file helpers the tests and examples use (HDF5
// datasets as the commands read them, PNG as generate writes it).
#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "hlo/module.h"
#include "hlo/program.h"
#include "hlo/run.h"
#include "io/atomic_file.h"
#include "io/png.h"
#include "io/run_files.h"
#include "py_status.h"

namespace tpumesh::python {
namespace py = pybind11;

namespace {

// A module from its text (`name` in messages) or from the file at `path`,
// read with the GIL released (other Python threads run while a large
// module's text is parsed).
hlo::Module ReadModule(const std::string& text_or_path, bool is_path, const std::string& name) {
  StatusOr<hlo::Module> m = InternalError("not read");
  RunReleased([&] { m = is_path ? hlo::ReadModuleFile(text_or_path) : hlo::ParseModule(text_or_path, name); });
  return ValueOrThrow(std::move(m), is_path ? ErrorKind::kFile : ErrorKind::kArgument);
}

// (outputs as [(array, tag)], report JSON, trace JSON or "") of a run, or of
// a dry run (price) with no outputs.
py::tuple RunModule(const std::string& text_or_path, bool is_path, const std::string& name,
                    const std::vector<py::tuple>& inputs, const mesh::MeshSpec& spec, bool dry_run,
                    bool mxu_precision, const std::string& xla_generation, bool trace) {
  const hlo::Module m = ReadModule(text_or_path, is_path, name);
  std::vector<pipeline::H5Raw> raws;
  for (const py::tuple& t : inputs)
    raws.push_back(ValueOrThrow(RawFromNumpy(t[0], t[1].cast<std::string>())));
  hlo::RunOptions o;
  o.program = name;
  o.dry_run = dry_run;
  o.mxu_precision = mxu_precision;
  o.xla_generation = xla_generation;
  o.mesh = spec;
  o.keep_ops = trace;
  auto from_arrays = [&raws, &name](const hlo::Layout& layout) -> StatusOr<std::vector<hlo::Tensor>> {
    if (raws.size() != layout.inputs.size())
      return InvalidArgumentError(name + ": @main takes " + std::to_string(layout.inputs.size()) +
                                  " argument(s) (" + layout.Describe() + "), got " + std::to_string(raws.size()));
    std::vector<hlo::Tensor> args;
    for (size_t i = 0; i < raws.size(); ++i) {
      TPUMESH_ASSIGN_OR_RETURN(hlo::Tensor t, hlo::InputFromRaw(raws[i], layout, i, "input " + std::to_string(i)));
      args.push_back(std::move(t));
    }
    return args;
  };
  StatusOr<hlo::RunResult> ran = InternalError("not run");
  std::atomic<bool> cancel{false};
  RunReleased([&] { ran = hlo::RunModule(m, o, from_arrays, {}, &cancel); }, &cancel);
  hlo::RunResult result = ValueOrThrow(std::move(ran));
  py::list outputs;
  for (const auto& [unused, raw] : hlo::OutputDatasets(result.run.outputs)) outputs.append(NumpyFromRaw(raw));
  return py::make_tuple(outputs, report::ReportJson(result.report),
                        trace ? report::TraceJson(result.report) : std::string());
}

}  // namespace

void CheckOutputFile(const std::string& path, const std::vector<std::pair<std::string, std::string>>& inputs) {
  RunFiles files;
  files.outputs.push_back({"path", path});
  files.inputs = inputs;
  ThrowIfError(CheckRunFiles(files), ErrorKind::kOutputPath);
}

void RegisterStableHlo(py::module_& m) {
  m.def("stablehlo_run", &RunModule, py::arg("text_or_path"), py::arg("is_path"), py::arg("name"),
        py::arg("inputs"), py::arg("spec"), py::arg("dry_run"), py::arg("mxu_precision"),
        py::arg("xla_generation"), py::arg("trace"));
  // The module's layout without running it: (description, devices,
  // [input types], [output types]) as MLIR spells them.
  m.def("stablehlo_layout", [](const std::string& text_or_path, bool is_path, const std::string& name) {
    const hlo::Module mod = ReadModule(text_or_path, is_path, name);
    const hlo::Layout layout = ValueOrThrow(hlo::LayoutOf(mod));
    std::vector<std::string> in, out;
    for (const auto& t : layout.inputs) in.push_back(t.ToString());
    for (const auto& t : layout.outputs) out.push_back(t.ToString());
    return py::make_tuple(layout.Describe(), layout.devices, in, out);
  });

  m.def("h5_has_dataset", &pipeline::H5HasDataset);
  m.def("h5_read", [](const std::string& file, const std::string& name) {
    return NumpyFromRaw(ValueOrThrow(pipeline::H5ReadRaw(file, name), ErrorKind::kFile));
  });
  m.def("encode_png", [](const py::object& array, const std::vector<std::pair<std::string, std::string>>& text) {
    pipeline::H5Raw rgb = ValueOrThrow(RawAs(array, "uint8"));
    if (rgb.dims.size() != 3 || rgb.dims[2] != 3)
      ThrowIfError(InvalidArgumentError("encode_png takes uint8 [height, width, 3]"));
    pipeline::Image img;
    img.height = static_cast<int>(rgb.dims[0]);
    img.width = static_cast<int>(rgb.dims[1]);
    img.rgb = std::move(rgb.data);
    return py::bytes(ValueOrThrow(pipeline::EncodePng(img, text)));
  });
  // A file the module writes (a trace, a PNG) goes through the commands' one
  // output guard (not an input, a device node or a FIFO) and is written
  // whole or not at all. check_output runs the guard alone, before a long
  // call whose output it is (as a command checks before any work).
  m.def("check_output", &CheckOutputFile, py::arg("path"), py::arg("inputs"));
  m.def("write_file", [](const std::string& path, const py::bytes& data,
                         const std::vector<std::pair<std::string, std::string>>& inputs) {
    CheckOutputFile(path, inputs);
    const std::string bytes = data;
    Status written;
    {
      py::gil_scoped_release release;
      written = WriteFileAtomic(path, bytes);
    }
    ThrowIfError(written, ErrorKind::kFile);
  }, py::arg("path"), py::arg("data"), py::arg("inputs") = std::vector<std::pair<std::string, std::string>>());
}

}  // namespace tpumesh::python
