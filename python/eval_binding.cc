// tpumesh.eval: one model component on inputs, `tpumesh eval`'s run
// (pipeline/eval.h RunEval) from Python; and the HDF5 writers it and the
// tests use (io/h5io.h H5Writer: numeric datasets, or a list of strings as
// the tokenizer's "prompts").
//
// Contract: eval_component reads the input file, runs RunEval with the GIL
// released, writes the output file's bytes to the caller's output path
// (python/tpumesh/_eval.py passes paths in a private temporary folder) and
// returns its dataset as a numpy array with the report. The arguments are
// checked by the command's functions (models::ParsePrecision,
// pipeline::ParseLoraFlags), so a bad value is the CLI's one-line message; the
// caller's `input_label` replaces the input path in messages (a dict's
// temporary file is named "inputs"). RunEval polls no cancel flag: Ctrl-C
// raises KeyboardInterrupt when the run returns.
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "io/atomic_file.h"
#include "io/h5io.h"
#include "pipeline/default_model.h"
#include "pipeline/eval.h"
#include "pipeline/request_text.h"
#include "py_status.h"
#include "report/report.h"

namespace tpumesh::python {
namespace py = pybind11;
namespace {

// The dataset RunEval writes for `component` ("" for an unknown one, which
// RunEval refuses with its message).
std::string OutputName(const std::string& component) {
  if (component == "tokenizer") return "input_ids";
  if (component == "text_encoder") return "last_hidden_state";
  if (component == "unet") return "out_sample";
  if (component == "vae_decoder") return "sample";
  if (component == "vae_encoder") return "latent_mean";
  return "";
}

// `status` with every occurrence of `from` in its message replaced by `to`.
Status Relabel(const Status& status, const std::string& from, const std::string& to) {
  if (status.ok() || from == to || from.empty()) return status;
  std::string msg = status.message();
  for (size_t at = msg.find(from); at != std::string::npos; at = msg.find(from, at + to.size()))
    msg.replace(at, from.size(), to);
  return Status(status.code(), msg);
}

// (dataset name, numpy array, report JSON or "" for the tokenizer, trace
// JSON or "", batch, host_seconds, total_seconds, modelled_seconds).
py::tuple EvalComponent(const std::string& model, const std::string& model_label, const std::string& component,
                        const std::string& input, const std::string& input_label, const std::string& output,
                        const mesh::MeshSpec& spec, const std::string& precision,
                        const std::vector<std::string>& loras, bool keep_ops) {
  pipeline::EvalOptions o;
  o.model = model;
  o.component = component;
  o.input = input;
  o.output = output;
  o.precision = ValueOrThrow(models::ParsePrecision(precision));
  o.loras = ValueOrThrow(pipeline::ParseLoraFlags(loras));
  o.mesh = spec;
  o.keep_ops = keep_ops;
  StatusOr<pipeline::EvalStats> ran = InternalError("not run");
  Status written;
  RunReleased([&] {
    ran = pipeline::RunEval(o);
    if (ran.ok() && !ran->files.empty()) written = WriteFileAtomic(output, ran->files[0].second);
  });
  // NotFound: a missing input file or dataset (FileNotFoundError), with the
  // CLI's message.
  ThrowIfError(Relabel(Relabel(ran.status(), input, input_label), model, model_label.empty() ? model : model_label));
  ThrowIfError(written, ErrorKind::kFile);
  pipeline::EvalStats& s = *ran;
  const std::string name = OutputName(component);
  py::tuple array = NumpyFromRaw(ValueOrThrow(pipeline::H5ReadRaw(output, name), ErrorKind::kFile));
  std::string report, trace;
  if (component != "tokenizer") {
    // The embedded model's file is a temporary copy: the report names the
    // model as generate's does.
    if (!model_label.empty()) s.report.info["model"] = model_label;
    report = report::ReportJson(s.report);
    if (keep_ops) trace = report::TraceJson(s.report);
  }
  return py::make_tuple(name, array[0], report, trace, s.batch, s.host_seconds, s.total_seconds,
                        s.modelled_seconds);
}

}  // namespace

void RegisterEval(py::module_& m) {
  m.def("eval_component", &EvalComponent, py::arg("model"), py::arg("model_label"), py::arg("component"),
        py::arg("input"), py::arg("input_label"), py::arg("output"), py::arg("spec"), py::arg("precision"),
        py::arg("loras"), py::arg("keep_ops"));
  m.def("default_model_bytes", [] {
    const std::string_view b = pipeline::DefaultModelBytes();
    return py::bytes(b.data(), b.size());
  });
  m.attr("default_model_name") = py::str(pipeline::kDefaultModelName);
  // Numeric datasets [(name, array, tag)] into a new HDF5 file at `path`
  // (H5Writer: checked writable first, written whole or not at all).
  m.def("h5_write", [](const std::string& path, const std::vector<py::tuple>& datasets) {
    CheckOutputFile(path);
    std::vector<std::pair<std::string, pipeline::H5Raw>> raws;
    for (const py::tuple& t : datasets) {
      const std::string name = t[0].cast<std::string>();
      StatusOr<pipeline::H5Raw> raw = RawFromNumpy(t[1], t[2].cast<std::string>());
      ThrowIfError(raw.status().WithContext("dataset '" + name + "'"));
      raws.emplace_back(name, std::move(raw).value());
    }
    Status done;
    {
      py::gil_scoped_release release;
      done = [&]() -> Status {
        TPUMESH_ASSIGN_OR_RETURN(auto w, pipeline::H5Writer::Create(path));
        for (const auto& [name, raw] : raws) TPUMESH_RETURN_IF_ERROR(w->WriteRaw(name, raw));
        return w->Commit();
      }();
    }
    ThrowIfError(done, ErrorKind::kFile);
  });
  // A list of str as one dataset in a file of its own, the same way.
  m.def("h5_write_strings", [](const std::string& path, const std::string& name, const std::vector<std::string>& v) {
    CheckOutputFile(path);
    ThrowIfError(
        [&]() -> Status {
          TPUMESH_ASSIGN_OR_RETURN(auto w, pipeline::H5Writer::Create(path));
          TPUMESH_RETURN_IF_ERROR(w->WriteStrings(name, v));
          return w->Commit();
        }(),
        ErrorKind::kFile);
  });
}

}  // namespace tpumesh::python
