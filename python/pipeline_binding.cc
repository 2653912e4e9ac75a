// tpumesh.Pipeline and tpumesh.simulate: text to image over the emulated mesh
// (pipeline/generate.h, the Generator `tpumesh generate` runs) and its
// pricing without compute (pipeline/simulate.h, `tpumesh simulate`'s). The
// request's values are checked by the same functions the commands use
// (pipeline/request_text.h ParseRequestFlags and ParseSeed, the flow's
// Validate), so a bad value is the same one-line message.
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "io/atomic_file.h"
#include "io/run_files.h"
#include "pipeline/default_model.h"
#include "pipeline/generate.h"
#include "pipeline/request_text.h"
#include "pipeline/simulate.h"
#include "py_status.h"
#include "report/report.h"

namespace tpumesh::python {
namespace py = pybind11;
namespace {

// The request's keyword arguments (python/tpumesh/_pipeline.py passes them
// as plain values: ints, floats, strings, "W,H" pairs) as the commands'
// request flags, then checked by ParseRequestFlags.
pipeline::GenerateRequest RequestFrom(const py::dict& kw) {
  pipeline::RequestFlags f;
  pipeline::GenerateRequest& r = f.request;
  auto get = [&](const char* key) -> std::optional<py::object> {
    if (!kw.contains(key) || kw[key].is_none()) return std::nullopt;
    return py::reinterpret_borrow<py::object>(kw[key]);
  };
  if (auto v = get("steps")) r.steps = v->cast<int>();
  if (auto v = get("guidance")) f.guidance = v->cast<float>();
  if (auto v = get("scheduler")) r.scheduler = v->cast<std::string>();
  if (auto v = get("scheduler_opts")) f.scheduler_opts = v->cast<std::vector<std::string>>();
  if (auto v = get("height")) r.height = v->cast<int>();
  if (auto v = get("width")) r.width = v->cast<int>();
  if (auto v = get("batch_per_device")) r.batch_per_device = v->cast<int>();
  if (auto v = get("precision")) f.precision = v->cast<std::string>();
  if (auto v = get("original_size")) f.original_size = v->cast<std::string>();
  if (auto v = get("crops_coords_top_left")) f.crops_coords_top_left = v->cast<std::string>();
  if (auto v = get("target_size")) f.target_size = v->cast<std::string>();
  if (auto v = get("negative_prompts")) r.negative_prompts = v->cast<std::vector<std::string>>();
  if (auto v = get("keep_ops")) r.keep_ops = v->cast<bool>();
  pipeline::ImageInputFlags images;
  if (auto v = get("init_images")) images.init_images = v->cast<std::vector<std::string>>();
  if (auto v = get("masks")) images.masks = v->cast<std::vector<std::string>>();
  if (auto v = get("strength")) images.strength = v->cast<double>();
  pipeline::GenerateRequest parsed = ValueOrThrow(pipeline::ParseRequestFlags(f));
  ThrowIfError(pipeline::ReadImageInputs(images, &parsed), ErrorKind::kFile);
  return parsed;
}

// kw[key] as a list of str, or {} when absent or None.
std::vector<std::string> StringsIn(const py::dict& kw, const char* key) {
  if (!kw.contains(key) || kw[key].is_none()) return {};
  return kw[key].cast<std::vector<std::string>>();
}

// One generate call's outputs, with what encoding its PNGs needs.
struct GenerateOutput {
  pipeline::GenerateResult result;
  pipeline::GenerateRequest request;
  std::string model_name;
  // The files the run read, as (argument, path): save() never writes over
  // one (io/run_files.h CheckRunFiles, generate's guard).
  std::vector<std::pair<std::string, std::string>> inputs;

  py::object Images() const {
    const auto& images = result.images;
    const int64_t b = static_cast<int64_t>(images.size());
    const int64_t h = b ? images[0].height : result.height, w = b ? images[0].width : result.width;
    return NewArray("|u1", {b, h, w, 3}, [&images](uint8_t* p, size_t) {
      for (const auto& img : images) {
        std::memcpy(p, img.rgb.data(), img.rgb.size());
        p += img.rgb.size();
      }
    });
  }
  // The PNGs `tpumesh generate` writes for the same request, byte for byte:
  // [(name, bytes)], image_00.png ... then grid.png.
  py::list Pngs() const {
    pipeline::OutputFiles files = ValueOrThrow(pipeline::EncodeImages("", result, request, model_name));
    py::list out;
    for (auto& [path, bytes] : files)
      out.append(py::make_tuple(std::filesystem::path(path).filename().string(), py::bytes(bytes)));
    return out;
  }
  // Writes as `tpumesh generate -o DIR` does: the same guard first (no
  // image name in DIR that is a FIFO, device or folder; no input of the run
  // among the images), then all or none.
  std::vector<std::string> Save(const std::string& dir) const {
    RunFiles files;
    files.inputs = inputs;
    files.image_dir = dir;
    ThrowIfError(CheckRunFiles(files), ErrorKind::kOutputPath);
    ThrowIfError(CheckImageSet(dir, static_cast<int>(result.images.size())), ErrorKind::kOutputPath);
    return ValueOrThrow(pipeline::WriteImages(dir, result, request, model_name), ErrorKind::kFile);
  }
  py::object InitialLatents() const {
    const mesh::Array& a = result.initial_latents;
    return NewArray("=f4", a.shape(), [&a](uint8_t* p, size_t n) {
      if (a.num_elements() > 0) std::memcpy(p, a.data<float>(), n);
    });
  }
};

// A model opened once per mesh it is asked to run on (the Generator places
// its parameters on one mesh), each keeping its plans ("jit") between calls.
class PyPipeline {
 public:
  explicit PyPipeline(std::string model) : model_(std::move(model)) {}

  const std::string& model() const { return model_; }

  // Opens the model on `spec`'s mesh now (a bad model file or mesh fails
  // here rather than at the first generate); returns the model's name.
  std::string Open(const mesh::MeshSpec& spec) { return Opened(spec)->model_name(); }

  std::vector<std::string> Vocabulary(const mesh::MeshSpec& spec) { return Opened(spec)->vocabulary(); }

  std::unique_ptr<GenerateOutput> Generate(const mesh::MeshSpec& spec, std::vector<std::string> prompts,
                                           const py::dict& kw, const std::string& seed, const std::string& prng,
                                           std::optional<py::object> latents) {
    auto out = std::make_unique<GenerateOutput>();
    pipeline::GenerateRequest& r = out->request;
    r = RequestFrom(kw);
    out->inputs = {{"model", model_}, {"chip", ChipInput(spec.chip).second}};
    for (const std::string& f : StringsIn(kw, "init_images")) out->inputs.emplace_back("init_image", f);
    for (const std::string& f : StringsIn(kw, "masks")) out->inputs.emplace_back("mask", f);
    r.prompts = std::move(prompts);
    r.seed = ValueOrThrow(pipeline::ParseSeed(seed));
    if (prng == "partitionable") {
      r.prng = mesh::PrngImpl::kPartitionable;
    } else if (prng == "original") {
      r.prng = mesh::PrngImpl::kOriginal;
    } else {
      ThrowIfError(InvalidArgumentError("prng must be 'partitionable' or 'original', not '" + prng + "'"));
    }
    if (latents) {
      const pipeline::H5Raw z = ValueOrThrow(RawAs(*latents, "float32"));
      r.initial_latents = mesh::Array::HostFrom<float>(
          z.dims,
          std::span<const float>(reinterpret_cast<const float*>(z.data.data()), z.data.size() / sizeof(float)));
    }
    Status status;
    std::atomic<bool> cancel{false};
    RunReleased(
        [&] {
          StatusOr<pipeline::Generator*> opened = GeneratorFor(spec);
          if (!opened.ok()) {
            status = opened.status();
            return;
          }
          pipeline::Generator* gen = *opened;
          std::lock_guard<std::mutex> lock(run_mu_);
          status = gen->Validate(r);
          if (!status.ok()) return;
          auto got = gen->Generate(r, {}, &cancel);
          if (!got.ok()) {
            status = got.status();
            return;
          }
          out->result = std::move(got).value();
          out->model_name = gen->model_name();
          // The report's summary as the command's (tools/generate_command.cc).
          const pipeline::GenerateResult& res = out->result;
          out->result.report.info = {
              {"model", gen->model_name()}, {"scheduler", res.scheduler},
              {"steps", std::to_string(r.steps)}, {"unet_calls", std::to_string(res.timesteps.size())},
              {"size", std::to_string(res.width) + "x" + std::to_string(res.height)},
              {"precision", r.precision == models::Precision::kHighest ? "highest" : "default"}, {"guidance", std::to_string(res.guidance)},
              {"family", gen->flow().family().name}};
        },
        &cancel);
    ThrowIfError(status);
    return out;
  }

 private:
  static std::string Key(const mesh::MeshSpec& s) {
    return s.chip + "|" + s.dataflow + "|" + std::to_string(s.vmem_mib) + "|" + std::to_string(s.devices) + "|" +
           s.axes + "|" + s.topology + "|" + s.model_axis_along + "|" + std::to_string(s.threads_per_device);
  }
  // The Generator for `spec`, opened at its first use (called with the GIL
  // released). The pointer lives as long as this object.
  StatusOr<pipeline::Generator*> GeneratorFor(const mesh::MeshSpec& spec) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = generators_.find(Key(spec));
    if (it != generators_.end()) return it->second.get();
    pipeline::GeneratorOptions options;
    options.model = model_;
    options.mesh = spec;
    TPUMESH_ASSIGN_OR_RETURN(std::unique_ptr<pipeline::Generator> gen, pipeline::Generator::Open(options));
    return (generators_[Key(spec)] = std::move(gen)).get();
  }
  pipeline::Generator* Opened(const mesh::MeshSpec& spec) {
    StatusOr<pipeline::Generator*> gen = InternalError("not opened");
    RunReleased([&] { gen = GeneratorFor(spec); });
    return ValueOrThrow(std::move(gen));
  }

  std::string model_;
  std::mutex mu_;      // generators_
  std::mutex run_mu_;  // one Generate at a time (a Generator is not thread-safe)
  std::map<std::string, std::unique_ptr<pipeline::Generator>> generators_;
};

py::dict SweepRowDict(const pipeline::MeshSweepRow& r) {
  py::dict d;
  d["mesh"] = r.mesh;
  d["data"] = r.data;
  d["fsdp"] = r.fsdp;
  d["model"] = r.model;
  d["images"] = r.images;
  d["seconds_per_image"] = r.seconds;
  d["serial_seconds_per_image"] = r.serial_seconds;
  d["images_per_second"] = r.images_per_second;
  d["param_bytes_per_device"] = r.param_bytes;
  d["activation_bytes_per_device"] = r.activation_bytes;
  d["hbm_capacity_bytes"] = r.hbm_capacity;
  d["fits"] = r.fits;
  d["mxu_utilisation"] = r.mxu_utilisation;
  d["ici_seconds"] = r.ici_seconds;
  d["ici_share"] = r.ici_share;
  d["ici_bytes"] = r.ici_bytes;
  d["modelled"] = true;
  return d;
}

pipeline::SimulateOptions SimulateOptionsFrom(const mesh::MeshSpec& spec, const std::string& arch,
                                              const std::string& model, const py::dict& kw) {
  pipeline::SimulateOptions o;
  o.arch = arch;
  o.model = model;
  o.mesh = spec;
  o.request = RequestFrom(kw);
  return o;
}

}  // namespace

void RegisterPipeline(py::module_& m) {
  py::class_<GenerateOutput>(m, "GenerateOutput")
      .def("images", &GenerateOutput::Images)
      .def("pngs", &GenerateOutput::Pngs)
      .def("save", &GenerateOutput::Save)
      .def("initial_latents", &GenerateOutput::InitialLatents)
      .def("report_json", [](const GenerateOutput& o) { return report::ReportJson(o.result.report); })
      .def("trace_json", [](const GenerateOutput& o) { return report::TraceJson(o.result.report); })
      .def_property_readonly("model_name", [](const GenerateOutput& o) { return o.model_name; })
      .def_property_readonly("prompts", [](const GenerateOutput& o) { return o.result.prompts; })
      .def_property_readonly("negative_prompts", [](const GenerateOutput& o) { return o.result.negative_prompts; })
      .def_property_readonly("scheduler", [](const GenerateOutput& o) { return o.result.scheduler; })
      .def_property_readonly("timesteps", [](const GenerateOutput& o) { return o.result.timesteps; })
      .def_property_readonly("guidance", [](const GenerateOutput& o) { return o.result.guidance; })
      .def_property_readonly("seed", [](const GenerateOutput& o) { return o.request.seed; })
      .def_property_readonly("steps", [](const GenerateOutput& o) { return o.request.steps; })
      .def_property_readonly("compiled", [](const GenerateOutput& o) { return o.result.compiled; })
      .def_property_readonly("compile_seconds", [](const GenerateOutput& o) { return o.result.compile_seconds; })
      .def_property_readonly("run_seconds", [](const GenerateOutput& o) { return o.result.run_seconds; })
      .def_property_readonly("modelled_seconds", [](const GenerateOutput& o) { return o.result.modelled_seconds; })
      .def_property_readonly("nonfinite_values", [](const GenerateOutput& o) { return o.result.nonfinite_values; });

  py::class_<PyPipeline>(m, "Pipeline")
      .def(py::init<std::string>(), py::arg("model"))
      .def_property_readonly("model", &PyPipeline::model)
      .def("open", &PyPipeline::Open)
      .def("vocabulary", &PyPipeline::Vocabulary)
      .def("generate", &PyPipeline::Generate, py::arg("spec"), py::arg("prompts"), py::arg("request"),
           py::arg("seed"), py::arg("prng"), py::arg("latents") = py::none());

  m.def("unknown_words", [](const std::string& prompt, const std::vector<std::string>& vocabulary) {
    return pipeline::UnknownWords(prompt, vocabulary);
  });

  // (report JSON, trace JSON or "") of `tpumesh simulate`'s single run.
  m.def("simulate", [](const mesh::MeshSpec& spec, const std::string& arch, const std::string& model,
                       const py::dict& kw, bool check_hbm) {
    pipeline::SimulateOptions o = SimulateOptionsFrom(spec, arch, model, kw);
    o.check_hbm = check_hbm;
    StatusOr<report::RunReport> r = InternalError("not run");
    RunReleased([&] { r = pipeline::Simulate(o); });
    report::RunReport report = ValueOrThrow(std::move(r));
    return py::make_tuple(report::ReportJson(report),
                          o.request.keep_ops ? report::TraceJson(report) : std::string());
  });
  m.def("sweep_mesh", [](const mesh::MeshSpec& spec, const std::string& arch, const std::string& model,
                         const py::dict& kw) {
    pipeline::SimulateOptions o = SimulateOptionsFrom(spec, arch, model, kw);
    StatusOr<std::vector<pipeline::MeshSweepRow>> rows = InternalError("not run");
    RunReleased([&] { rows = pipeline::SweepMesh(o); });
    py::list out;
    for (const auto& r : ValueOrThrow(std::move(rows))) out.append(SweepRowDict(r));
    return out;
  });
}

}  // namespace tpumesh::python
