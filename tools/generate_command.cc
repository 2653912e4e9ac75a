// `tpumesh generate`: text to image over the emulated mesh (pipeline/
// generate.h), PNGs out. See docs/cli.md.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/input_file.h"
#include "io/atomic_file.h"
#include "io/h5io.h"
#include "io/run_files.h"
#include "mesh/prng.h"
#include "pipeline/default_model.h"
#include "pipeline/generate.h"
#include "report/report_files.h"
#include "tools/commands.h"
#include "tools/device_flags.h"
#include "tools/ranks.h"
#include "tools/request_flags.h"

namespace tpumesh::tools {
namespace {

std::atomic<bool> g_cancel{false};

extern "C" void OnSigint(int) {
  g_cancel.store(true);
  static const char kMsg[] = "\ntpumesh: interrupted; stopping at the next step (Ctrl-C again to kill)\n";
  ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  (void)ignored;
  signal(SIGINT, RemoveTempFilesAndDie);  // a second Ctrl-C kills, leaving no temporary file
}

struct GenerateCmdOptions {
  pipeline::GeneratorOptions gen;
  DeviceFlags dev;
  pipeline::RequestFlags req;
  pipeline::ImageInputFlags images;
  std::vector<std::string> prompts;
  std::string prompts_file;
  std::vector<std::string> negatives;
  std::string prng = "partitionable";
  std::string seed = "0";  // parsed strictly: 0 .. 2^64 - 1
  std::string out = "out";
  std::string latents;
  std::string save_latents;
  std::vector<std::string> loras;
  int runs = 1;
  int preview_every = 0;
  bool quiet = false;
};

// A progress bar on stderr: steps, it/s, ETA. On a terminal it redraws one
// line; otherwise (a log) it prints a line at every tenth of the way.
class ProgressBar {
 public:
  ProgressBar(bool quiet, int devices) : quiet_(quiet), tty_(isatty(STDERR_FILENO)), devices_(devices) {}
  // Host wall time of each phase, from its first report to its last, over
  // all devices: "text encoders 1.2 s, denoising 190 s (95.1 s per UNet
  // call), VAE decode 80 s".
  std::string PhaseTimes(int unet_calls) const {
    auto seconds = [&](const char* p) {
      auto it = phases_.find(p);
      return it == phases_.end() ? 0.0 : std::chrono::duration<double>(it->second.last - it->second.first).count();
    };
    char buf[256];
    std::snprintf(buf, sizeof buf, "text encoders %.2f s, denoising %.2f s (%.2f s per UNet call), VAE decode %.2f s",
                  seconds("text"), seconds("denoise"), unet_calls > 0 ? seconds("denoise") / unet_calls : 0.0,
                  seconds("decode"));
    return buf;
  }
  void operator()(const std::string& phase, int done, int total) {
    const auto now = std::chrono::steady_clock::now();
    auto [it, fresh] = phases_.try_emplace(phase, Span{now, now});
    it->second.last = now;
    if (quiet_ || done == 0) return;
    // One bar over the denoising steps of all devices (the devices share the
    // host's cores, so their text and decode phases interleave with others'
    // steps and get no line of their own).
    if (phase != "denoise") return;
    const double el = std::chrono::duration<double>(now - start_).count();
    if (!tty_ && static_cast<int64_t>(done) * 10 / total == static_cast<int64_t>(done - 1) * 10 / total) return;
    // done and total count device-steps; a step is done when every device
    // has done it.
    const double steps_done = static_cast<double>(done) / devices_;
    const int steps = total / devices_;
    const double rate = el > 0 ? steps_done / el : 0;
    const double eta = rate > 0 ? (steps - steps_done) / rate : 0;
    const int width = 30;
    const int fill = total > 0 ? static_cast<int>(static_cast<int64_t>(done) * width / total) : width;
    std::string bar(fill, '#');
    bar.resize(width, '.');
    // it/s, or s/it when a step takes more than a second (SDXL on a CPU).
    char speed[32];
    if (rate >= 1 || rate == 0) std::snprintf(speed, sizeof speed, "%.2f it/s", rate);
    else std::snprintf(speed, sizeof speed, "%.1f s/it", 1 / rate);
    std::fprintf(stderr, "%sdenoise  [%s] %d/%d UNet steps  %s  ETA %.0f s", tty_ ? "\r\033[K" : "",
                 bar.c_str(), done / devices_, steps, speed, eta);
    if (done == total) {
      std::fprintf(stderr, "  (%.2f s)\n", el);
    } else if (!tty_) {
      std::fprintf(stderr, "\n");
    }
  }

 private:
  struct Span {
    std::chrono::steady_clock::time_point first, last;
  };
  bool quiet_, tty_;
  int devices_;
  std::map<std::string, Span> phases_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Fails early, before any compute, when DIR cannot hold the images.
Status CheckOutputDir(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::is_symlink(std::filesystem::symlink_status(dir, ec)) && !std::filesystem::exists(dir, ec))
    return InvalidArgumentError("output directory " + dir + " is a symlink to " +
                                std::filesystem::read_symlink(dir, ec).string() + ", which does not exist");
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("cannot create output directory " + dir + ": " + ec.message());
  if (!std::filesystem::is_directory(dir)) return InvalidArgumentError("output " + dir + " is not a directory");
  if (access(dir.c_str(), W_OK) != 0) return InvalidArgumentError("output directory " + dir + " is not writable");
  return OkStatus();
}

Status RunGenerate(GenerateCmdOptions o) {
  // Under mpirun or srun: every rank reads the inputs and runs the checks,
  // rank 0 alone prints and writes (docs/cluster.md).
  pipeline::GenerateRequest r;
  bool root = false;
  // The folders this run makes (-o new/deeper/out: all three) are removed
  // again, innermost first and only while empty, if the run writes nothing
  // (an error, Ctrl-C, or SIGTERM: registered with the signal handler).
  struct RemoveIfEmpty {
    std::vector<std::filesystem::path> dirs;  // innermost first
    bool keep = false;
    ~RemoveIfEmpty() {
      std::error_code ec;
      bool removing = !keep;
      for (const auto& d : dirs) {
        UnregisterTempFile(d.string());
        if (removing && !std::filesystem::remove(d, ec)) removing = false;  // not empty, or not ours
      }
    }
  } made;
  std::unique_ptr<pipeline::Generator> gen;
  std::unique_ptr<pipeline::H5Writer> latents_out;
  // SIGINT stops the run gracefully from the start of the work until the
  // command returns.
  struct sigaction old_sigint{};
  bool sigint_set = false;
  struct Restore {
    struct sigaction* old;
    const bool* set;
    ~Restore() {
      if (*set) sigaction(SIGINT, old, nullptr);
    }
  } restore{&old_sigint, &sigint_set};
  // The preview (rank 0's images), replaced whole at every update. Once this
  // run has written it, it is one of the run's outputs: removed again if the
  // run writes nothing (an error, Ctrl-C, or SIGTERM: the signal handler
  // unlinks it as it does temporaries); a preview.png the run never wrote
  // (a user's file) is never removed.
  struct PreviewFile {
    std::string path;
    bool written = false;
    bool keep = false;
    ~PreviewFile() {
      if (!written) return;
      UnregisterTempFile(path);
      std::error_code ec;
      if (!keep) std::filesystem::remove(path, ec);
    }
  } preview_file{(std::filesystem::path(o.out) / "preview.png").string()};
  pipeline::PreviewFn preview;
  pipeline::GenerateResult res;
  int b = 0;
  std::string first, last;

  RankSteps steps;
  steps.check = [&](mesh::Cluster& cluster, RankSteps::Inputs* inputs) -> Status {
    root = cluster.rank() == 0;
    if (!root) o.quiet = true;
    RunFiles run_files;
    const Status ready = [&]() -> Status {
      TPUMESH_ASSIGN_OR_RETURN(r, pipeline::ParseRequestFlags(o.req));
      TPUMESH_RETURN_IF_ERROR(pipeline::ReadImageInputs(o.images, &r));
      TPUMESH_ASSIGN_OR_RETURN(r.seed, pipeline::ParseSeed(o.seed));
      if (o.prng == "partitionable") {
        r.prng = mesh::PrngImpl::kPartitionable;
      } else if (o.prng == "original") {
        r.prng = mesh::PrngImpl::kOriginal;
      } else {
        return InvalidArgumentError("--prng must be partitionable or original, not '" + o.prng + "'");
      }
      r.prompts = o.prompts;
      if (!o.prompts_file.empty()) {
        auto text = ReadInputFile(o.prompts_file);
        if (!text.ok()) return text.status().WithContext("--prompts-file");
        std::istringstream in(*text);
        std::string line;
        while (std::getline(in, line)) {
          if (!line.empty() && line.back() == '\r') line.pop_back();
          if (!line.empty()) r.prompts.push_back(line);
        }
        if (r.prompts.empty()) return InvalidArgumentError(o.prompts_file + ": no prompts (one per line)");
      }
      r.negative_prompts = o.negatives;

      // Every output checked before any work, on every rank: writable, and
      // not an input.
      run_files.outputs = o.dev.out.flags();
      run_files.outputs.insert(run_files.outputs.begin(), {"--save-latents", o.save_latents});
      run_files.inputs = {{"--model", o.gen.model}, {"--latents", o.latents}, {"--prompts-file", o.prompts_file},
                          ChipInput(o.dev.mesh.chip)};
      TPUMESH_ASSIGN_OR_RETURN(o.gen.loras, pipeline::ParseLoraFlags(o.loras));
      for (const pipeline::LoraSpec& l : o.gen.loras) run_files.inputs.push_back({"--lora", l.path});
      for (const std::string& f : o.images.init_images) run_files.inputs.emplace_back("--init-image", f);
      for (const std::string& f : o.images.masks) run_files.inputs.emplace_back("--mask", f);
      run_files.image_dir = o.out;
      run_files.preview = o.preview_every > 0;
      TPUMESH_RETURN_IF_ERROR(CheckRunFiles(run_files));
      // The image folder is made by the rank that writes.
      if (root) {
        std::error_code ec;
        for (std::filesystem::path d = std::filesystem::path(o.out).lexically_normal();
             !d.empty() && d != d.root_path() && !std::filesystem::exists(std::filesystem::symlink_status(d, ec));
             d = d.parent_path())
          made.dirs.push_back(d);
        for (const auto& d : made.dirs) RegisterTempFile(d.string());
        TPUMESH_RETURN_IF_ERROR(CheckOutputDir(o.out));
      }
      o.gen.mesh = o.dev.mesh;
      o.gen.mesh.cluster = &cluster;
      // One precision per process: each weight is held once, packed.
      pipeline::GeneratorOptions gen_options = o.gen;
      gen_options.release_packed_weights = true;
      TPUMESH_ASSIGN_OR_RETURN(gen, pipeline::Generator::Open(gen_options));
      if (!o.latents.empty()) {
        auto l = pipeline::H5ReadArray(o.latents, "latents");
        if (!l.ok()) return l.status().WithContext("--latents");
        if (l->dtype() == mesh::DType::kF32)
          for (int64_t i = 0; i < l->num_elements(); ++i)
            if (!std::isfinite(l->data<float>()[i]))
              return InvalidArgumentError("--latents " + o.latents + ": 'latents' holds " +
                                          std::to_string(l->data<float>()[i]) + " at index " + std::to_string(i) +
                                          " (every value must be finite)");
        r.initial_latents = std::move(l).value();
      }
      r.keep_step_latents = !o.save_latents.empty();
      r.preview_every = o.preview_every;
      r.keep_ops = !o.dev.out.trace.empty();
      TPUMESH_RETURN_IF_ERROR(gen->Validate(r));
      TPUMESH_RETURN_IF_ERROR(CheckImageSet(o.out, gen->data_size() * r.batch_per_device));
      // Created before the run so that an unwritable path fails first; the
      // file appears only on Commit.
      if (!o.save_latents.empty()) {
        auto w = pipeline::H5Writer::Create(o.save_latents);
        if (!w.ok()) return w.status().WithContext("--save-latents");
        latents_out = std::move(w).value();
      }
      return OkStatus();
    }();
    *inputs = run_files.inputs;
    return ready;
  };
  steps.work = [&](mesh::Cluster& cluster) -> Status {
    if (!o.quiet && !gen->vocabulary().empty()) {
      // A model trained on a small grammar (the default's) cannot draw other
      // words: say which ones it will not understand, and what it knows.
      std::vector<std::string> unknown;
      for (const auto* prompts : {&r.prompts, &r.negative_prompts})
        for (const std::string& p : *prompts)
          for (std::string& w : pipeline::UnknownWords(p, gen->vocabulary()))
            if (std::find(unknown.begin(), unknown.end(), w) == unknown.end()) unknown.push_back(std::move(w));
      if (!unknown.empty()) {
        std::string quoted, known;
        for (const std::string& w : unknown) quoted += (quoted.empty() ? "'" : ", '") + w + "'";
        for (const std::string& w : gen->vocabulary()) known += (known.empty() ? "" : " ") + w;
        std::fprintf(stderr, "tpumesh generate: note: %s not in the model's vocabulary; it was trained on: %s\n",
                     quoted.c_str(), known.c_str());
      }
    }

    g_cancel.store(false);
    struct sigaction sa{};
    sa.sa_handler = OnSigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sigint);
    sigint_set = true;

    b = gen->data_size() * r.batch_per_device;
    const std::string ranks =
        cluster.size() > 1 ? " over " + std::to_string(cluster.size()) + " ranks (" + cluster.transport() + ")" : "";
    if (!o.quiet)
      std::fprintf(stderr,
                   "tpumesh generate: %d image(s) on %d emulated %s device(s)%s, mesh %s, model %s (%s)%s%s\n", b,
                   gen->devices(), gen->mesh().chip().name.c_str(), ranks.c_str(),
                   mesh::MeshAxesToString(gen->mesh().axes()).c_str(), gen->model_name().c_str(),
                   gen->flow().family().pipeline_class, gen->loras().empty() ? "" : ", LoRA ", gen->loras().c_str());
    if (o.preview_every > 0 && root)
      preview = [&](const pipeline::Image& grid, int done, int total) {
        const CommitSection commit;  // written and registered before a signal's handler looks
        const Status st = pipeline::WritePngAtomic(
            preview_file.path, grid,
            {{"parameters",
              "preview (approximate: the denoised estimate through a linear map fitted to the VAE) after " +
                  std::to_string(done) + " of " + std::to_string(total) + " steps"}});
        if (st.ok() && !preview_file.written) {
          RegisterTempFile(preview_file.path);
          preview_file.written = true;
        }
        if (!st.ok() && !o.quiet) std::fprintf(stderr, "\ntpumesh generate: preview not written: %s\n", st.ToString().c_str());
      };
    for (int run = 0; run < o.runs; ++run) {
      ProgressBar bar(o.quiet, gen->mesh().num_local());
      // The last run gives each model's host memory back once it is done
      // with it (the decode runs beside the VAE alone).
      r.last_use = run + 1 == o.runs;
      auto got = gen->Generate(r, std::ref(bar), &g_cancel, preview);
      if (!got.ok()) {
        if (got.status().code() == StatusCode::kCancelled && cluster.remote_failure() < 0)
          return got.status().WithContext("interrupted; nothing written");
        return got.status();
      }
      res = std::move(got).value();
      if (!root) continue;
      if (res.compiled)
        std::printf("compiled in %.2f s (plan: %d data x %d model device(s), %d image(s) per data index, %dx%d, "
                    "%d steps = %d UNet calls, %s, guidance %.2f, precision %s)\n",
                    res.compile_seconds, gen->data_size(), gen->model_size(), r.batch_per_device, res.width,
                    res.height, r.steps,
                    static_cast<int>(res.timesteps.size()), res.scheduler.c_str(), res.guidance,
                    o.req.precision.c_str());
      std::printf("run %d: %.2f s host wall, %.3f images/s%s; %s\n", run + 1, res.run_seconds,
                  res.run_seconds > 0 ? b / res.run_seconds : 0.0, res.compiled ? "" : " (plan cached)",
                  bar.PhaseTimes(static_cast<int>(res.timesteps.size())).c_str());
      if (res.report.host_seconds_per_rank.size() > 1) {
        std::string per;
        for (size_t k = 0; k < res.report.host_seconds_per_rank.size(); ++k) {
          char t[48];
          std::snprintf(t, sizeof t, "%s%.2f s", k ? ", " : "", res.report.host_seconds_per_rank[k]);
          per += t;
        }
        std::printf("run %d: host wall per rank: %s\n", run + 1, per.c_str());
      }
    }
    return OkStatus();
  };
  // Cancelled (Ctrl-C): mpirun forwards the signal to every rank; the ranks
  // stop at the same step and agree on it.
  steps.finish = [&](mesh::Cluster&) -> Status {
    Status written = g_cancel.load() ? CancelledError("interrupted; nothing written") : OkStatus();
    if (!root || !written.ok()) return written;
    // Every output of the run together: all written, or none.
    TPUMESH_ASSIGN_OR_RETURN(pipeline::OutputFiles files, pipeline::EncodeImages(o.out, res, r, gen->model_name()));
    first = std::filesystem::path(files.front().first).filename().string();
    last = std::filesystem::path(files.back().first).filename().string();
    if (latents_out) {
      TPUMESH_RETURN_IF_ERROR(latents_out->Write("latents", res.initial_latents));
      TPUMESH_RETURN_IF_ERROR(latents_out->Write("latents_after_step", res.latents_after_step));
      TPUMESH_ASSIGN_OR_RETURN(std::string bytes, latents_out->Finish());
      files.emplace_back(o.save_latents, std::move(bytes));
    }
    res.report.info = {{"model", gen->model_name()}, {"scheduler", res.scheduler},
                       {"steps", std::to_string(r.steps)}, {"unet_calls", std::to_string(res.timesteps.size())},
                       {"size", std::to_string(res.width) + "x" + std::to_string(res.height)},
                       {"precision", o.req.precision}, {"guidance", std::to_string(res.guidance)},
                       {"family", gen->flow().family().name}};
    report::AddReportFiles(res.report, o.dev.out, &files);
    return WriteFilesAtomic(files);
  };
  steps.report = [&] {
    made.keep = true;
    preview_file.keep = true;
    std::printf("wrote %d image(s) to %s (%s ... %s)", b, o.out.c_str(), first.c_str(), last.c_str());
    if (latents_out) std::printf(", latents to %s", o.save_latents.c_str());
    std::printf("\n");
    if (res.nonfinite_values > 0)
      std::fprintf(stderr,
                   "tpumesh: warning: the run produced %lld non-finite values (NaN or Inf) in the decoded images; "
                   "they are black in the PNGs (a broken model file or scheduler settings?)\n",
                   static_cast<long long>(res.nonfinite_values));
    std::printf("modelled on %d emulated %s device(s): %.4f s for the run (%.2f images/s modelled; host %.2f s)\n",
                gen->devices(), gen->mesh().chip().name.c_str(), res.modelled_seconds,
                res.modelled_seconds > 0 ? b / res.modelled_seconds : 0.0, res.run_seconds);
    if (!o.quiet || !o.dev.out.report.empty()) std::printf("%s", report::ReportTable(res.report).c_str());
    report::PrintReportFiles(o.dev.out);
  };
  return RunOnRanks(steps);
}

}  // namespace

void RegisterGenerate(CLI::App& app, RunFn* run) {
  auto opt = std::make_shared<GenerateCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Text to image over the emulated mesh (prompts sharded over data, each model split over model, one PRNG "
      "key per image, pmap).");
  cmd->add_option("--model", opt->gen.model,
                  "Model file (tpumesh convert / init); default: the embedded shapes model (one coloured circle, square or "
                  "triangle on a coloured background; scripts/train_default)");
  cmd->add_option("-p,--prompt", opt->prompts, "Prompt; repeat for one per image (as many as images)");
  cmd->add_option("--prompts-file", opt->prompts_file, "File with one prompt per line (added to --prompt)");
  cmd->add_option("-n,--negative-prompt", opt->negatives,
                  "Negative prompt; once for all, or repeated to pair with the prompts in order (none: SD encodes \"\", "
                  "SDXL zeroes the unconditional embeddings)");
  AddRequestFlags(cmd, &opt->req);
  AddLoraFlag(cmd, &opt->loras);
  AddImageInputFlags(cmd, &opt->images);
  cmd->add_option("--seed", opt->seed,
                  "Seed, 0 to 18446744073709551615: image i starts from normal(split(key(seed), B)[i])")
      ->capture_default_str();
  AddDeviceFlags(cmd, &opt->dev);
  cmd->add_option("-o,--out", opt->out, "Output directory for image_NN.png and grid.png")->capture_default_str();
  cmd->add_option("--prng", opt->prng, "JAX threefry mode: partitionable (jax >= 0.5) or original")
      ->capture_default_str();
  cmd->add_option("--latents", opt->latents, "HDF5 file with 'latents' [B,4,h,w] f32 to start from");
  cmd->add_option("--save-latents", opt->save_latents,
                  "HDF5 file to write 'latents' (initial) and 'latents_after_step' [steps,B,4,h,w]");
  cmd->add_option("--preview-every", opt->preview_every,
                  "Write OUT/preview.png every N steps: the grid as it stands, an approximation (each image's "
                  "denoised estimate through a linear latent-to-RGB map fitted to the model's VAE), replaced whole "
                  "each time; kept after the run")
      ->check(CLI::Range(1, pipeline::kMaxSteps));
  cmd->add_option("--runs", opt->runs, "Run the same generation N times, 1 to 1000 (the first compiles, as jit)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", opt->quiet, "No progress on stderr");
  cmd->callback([opt, run] {
    *run = [opt] {
      if (opt->prompts.empty() && opt->prompts_file.empty())
        return InvalidArgumentError("generate needs a prompt: -p/--prompt TEXT or --prompts-file FILE");
      return RunGenerate(*opt);
    };
  });
}

}  // namespace tpumesh::tools
