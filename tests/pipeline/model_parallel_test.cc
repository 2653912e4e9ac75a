// Tensor parallelism over the mesh's model axis (models/parallel.h,
// pipeline/generate.h): the same images as data parallelism on every mesh
// shape, the same bits on any thread count, each device holding its share
// of the weights, and the interconnect used exactly when model > 1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/cost_model.h"
#include "models/architectures.h"
#include "nlohmann/json.hpp"
#include "pipeline/convert.h"
#include "pipeline/generate.h"
#include "pipeline/simulate.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_model.h"

namespace tpumesh::pipeline {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// tiny-sd-b (tests/data) as a pipeline: its text encoder, UNet and VAE with
// the tiny architecture's tokenizer (the same 1000-token vocabulary) and
// scheduler, converted once.
std::string TinySdB() {
  static const std::string path = [] {
    const std::string dir = tpumesh::testing::ProcessTempDir() + "/tiny_sd_b";
    const std::string out = dir + ".h5";
    fs::remove_all(dir);
    fs::create_directories(dir + "/scheduler");
    const std::string src = std::string(TPUMESH_SOURCE_DIR) + "/tests/data/tiny-sd-b";
    for (const char* c : {"text_encoder", "unet", "vae"}) fs::create_directory_symlink(src + "/" + c, dir + "/" + c);
    fs::create_directory_symlink(std::string(TPUMESH_SOURCE_DIR) + "/text/data/tiny-tokenizer", dir + "/tokenizer");
    auto arch = models::BuiltinArchitecture("tiny");
    EXPECT_TRUE(arch.ok());
    std::ofstream(dir + "/scheduler/scheduler_config.json") << arch->scheduler;
    std::ofstream(dir + "/model_index.json") << R"({"_class_name": "StableDiffusionPipeline"})";
    auto st = ConvertDiffusersFolder(dir, out, mesh::DType::kF32);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return out;
  }();
  return path;
}

struct MeshRun {
  std::string mesh;
  int batch_per_device;
};

StatusOr<GenerateResult> RunMesh(const std::string& model, const std::string& mesh, int bpd, models::Precision p,
                             int threads = 0, const std::string& chip = "v5e") {
  GeneratorOptions o;
  o.model = model;
  o.mesh.axes = mesh;
  o.mesh.chip = chip;
  o.mesh.threads_per_device = threads;
  TPUMESH_ASSIGN_OR_RETURN(auto gen, Generator::Open(o));
  GenerateRequest r;
  r.prompts = {"a red fox in the snow", "a lighthouse at dusk"};
  r.prompts.resize(static_cast<size_t>(gen->data_size()) * bpd, "a bowl of fruit");
  r.steps = 2;
  r.seed = 11;
  r.batch_per_device = bpd;
  r.precision = p;
  r.keep_step_latents = true;
  return gen->Generate(r);
}

void ExpectSameImages(const GenerateResult& got, const GenerateResult& want, const std::string& label) {
  tpumesh::testing::ExpectEachStepWithin(got.latents_after_step, want.latents_after_step, 1e-5, label);
  ASSERT_EQ(got.images.size(), want.images.size());
  const int64_t per = static_cast<int64_t>(want.images[0].rgb.size());
  mesh::Array ref = mesh::Array::Host(mesh::DType::kI32, {static_cast<int64_t>(want.images.size()), per});
  std::vector<const std::vector<uint8_t>*> imgs;
  for (size_t i = 0; i < want.images.size(); ++i) {
    for (int64_t j = 0; j < per; ++j) ref.mutable_data<int32_t>()[i * per + j] = want.images[i].rgb[j];
    imgs.push_back(&got.images[i].rgb);
  }
  tpumesh::testing::ExpectImagesWithinOneLevel(imgs, ref, label);
}

class ModelParallelTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string Model() const { return GetParam() == "tiny" ? tpumesh::testing::TinyArchModel() : TinySdB(); }
};

// The 8 images of 8 devices computed on every data x model shape (the batch
// per device makes up the images a smaller data axis does not hold): latents
// after every step within 1e-5 relative and images within one level of the
// data-parallel run at precision highest; and on 4 devices, data=2,model=2.
TEST_P(ModelParallelTest, EveryMeshShapeMatchesDataParallel) {
  auto ref = RunMesh(Model(), "data=8", 1, models::Precision::kHighest);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (const MeshRun& m : {MeshRun{"data=4,model=2", 2}, MeshRun{"data=2,model=4", 4}, MeshRun{"data=1,model=8", 8}}) {
    auto got = RunMesh(Model(), m.mesh, m.batch_per_device, models::Precision::kHighest);
    ASSERT_TRUE(got.ok()) << m.mesh << ": " << got.status().ToString();
    ExpectSameImages(*got, *ref, GetParam() + " " + m.mesh);
    EXPECT_GT(got->report.logs[0].total().ici_bytes, 0) << m.mesh;
  }
  EXPECT_EQ(ref->report.logs[0].total().ici_bytes, 0);
  auto ref4 = RunMesh(Model(), "data=4", 1, models::Precision::kHighest);
  auto got4 = RunMesh(Model(), "data=2,model=2", 2, models::Precision::kHighest);
  ASSERT_TRUE(ref4.ok() && got4.ok());
  ExpectSameImages(*got4, *ref4, GetParam() + " 4 devices data=2,model=2");
}

// One mesh shape: the same bytes on 1 or 2 threads per device and on a
// repeated run (every sum over the model axis runs in rank order).
TEST_P(ModelParallelTest, SameBitsOnEveryThreadCountAndRun) {
  auto a = RunMesh(Model(), "data=2,model=4", 1, models::Precision::kDefault, 1);
  auto b = RunMesh(Model(), "data=2,model=4", 1, models::Precision::kDefault, 2);
  auto c = RunMesh(Model(), "data=2,model=4", 1, models::Precision::kDefault, 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (const GenerateResult* r : {&*b, &*c}) {
    EXPECT_TRUE(r->latents_after_step.BitwiseEquals(a->latents_after_step));
    for (size_t i = 0; i < a->images.size(); ++i) EXPECT_EQ(r->images[i].rgb, a->images[i].rgb) << "image " << i;
  }
}

// Each device's parameter bytes: the split parameters' share plus the
// whole ones, within 10% of (split / M + whole).
TEST_P(ModelParallelTest, EachDeviceHoldsItsShareOfTheWeights) {
  for (int m : {2, 4, 8}) {
    GeneratorOptions o;
    o.model = Model();
    o.mesh.axes = "data=" + std::to_string(8 / m) + ",model=" + std::to_string(m);
    auto gen = Generator::Open(o);
    ASSERT_TRUE(gen.ok()) << gen.status().ToString();
    double split = 0, whole = 0;
    for (const ComponentParams& c : (*gen)->flow().components())
      for (const models::ParamSpec& p : c.manifest)
        (p.split.SplitsOver(m) ? split : whole) += 4.0 * mesh::NumElements(p.shape);
    GenerateRequest r;
    r.prompts = {"a cat"};
    r.steps = 1;
    auto res = (*gen)->Generate(r);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    ASSERT_EQ(res->report.param_bytes.size(), 8u);
    EXPECT_GT(split, 0) << "nothing split " << m << " ways";
    for (int d = 0; d < 8; ++d) {
      const double want = split / m + whole;
      EXPECT_NEAR(res->report.param_bytes[d], want, 0.1 * want) << "model=" << m << " device " << d;
      EXPECT_LE(res->report.param_bytes[d], (*gen)->mesh().device(d).hbm_peak());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelParallelTest, ::testing::Values("tiny", "tiny_sd_b"));

// A chip whose HBM holds the model's run split two or four ways but not
// whole: model=1 is refused before compute, model=2 and model=4 run.
TEST(ModelParallelMemoryTest, SplittingFitsAModelTheChipCannotHoldWhole) {
  const std::string model = TinySdB();
  std::vector<int64_t> peak;
  for (int m : {1, 2, 4}) {
    auto res = RunMesh(model, "data=1,model=" + std::to_string(m), 1, models::Precision::kDefault);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    peak.push_back(*std::max_element(res->report.hbm_peak_bytes.begin(), res->report.hbm_peak_bytes.end()));
  }
  ASSERT_LT(peak[1], peak[0]);
  ASSERT_LT(peak[2], peak[0]);
  const int64_t capacity = (peak[0] + std::max(peak[1], peak[2])) / 2;
  auto chip = mesh::LoadChipSpec("v5e");
  ASSERT_TRUE(chip.ok());
  nlohmann::json j = nlohmann::json::parse(chip->ToJson());
  j["name"] = "v5e-small-hbm";
  j["hbm_bytes"] = capacity;
  const std::string path = tpumesh::testing::TestTempDir() + "/small.json";
  std::ofstream(path) << j.dump();
  auto whole = RunMesh(model, "data=1,model=1", 1, models::Precision::kDefault, 0, path);
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.status().code(), StatusCode::kResourceExhausted) << whole.status().ToString();
  for (const char* m : {"data=1,model=2", "data=1,model=4"}) {
    auto split = RunMesh(model, m, 1, models::Precision::kDefault, 0, path);
    EXPECT_TRUE(split.ok()) << m << ": " << split.status().ToString();
  }
}

// simulate prices the sharded flow with the same code: the same modelled
// time and ICI traffic as a real run of the same mesh.
TEST(ModelParallelSimulateTest, SimulationMatchesTheRealRun) {
  auto real = RunMesh(tpumesh::testing::TinyArchModel(), "data=2,model=4", 1, models::Precision::kDefault);
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  SimulateOptions so;
  so.arch = "tiny";
  so.mesh.axes = "data=2,model=4";
  so.request.steps = 2;
  auto sim = Simulate(so);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  for (int d = 0; d < 8; ++d) {
    EXPECT_NEAR(sim->logs[d].seconds(), real->report.logs[d].seconds(), 1e-9 + 1e-6 * real->report.logs[d].seconds())
        << "device " << d;
    EXPECT_EQ(sim->logs[d].total().ici_bytes, real->report.logs[d].total().ici_bytes) << "device " << d;
  }
  auto rows = SweepMesh(so);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  // Per model size 1, 2, 4, 8: data parallel over the rest, then FSDP over
  // all of it (none beside model 8).
  ASSERT_EQ(rows->size(), 7u);
  EXPECT_EQ((*rows)[1].mesh, "data=1,fsdp=8,model=1");
  EXPECT_EQ((*rows)[2].mesh, "data=4,model=2");
  EXPECT_EQ((*rows)[6].mesh, "data=1,model=8");
  EXPECT_EQ(rows->front().ici_bytes, 0);
  // The model axis' collectives are read by the very next op: nothing to
  // hide (docs/cost-model.md), both columns the same bits; the fsdp
  // gathers hide under the layers before them.
  for (const MeshSweepRow& row : *rows) {
    EXPECT_EQ(row.images, rows->front().images / row.model) << row.mesh;
    if (row.fsdp == 1) {
      EXPECT_EQ(row.serial_seconds, row.seconds) << row.mesh;
    } else {
      EXPECT_LT(row.seconds, row.serial_seconds) << row.mesh;
    }
  }
  for (size_t i = 1; i < rows->size(); ++i) {
    EXPECT_GT((*rows)[i].ici_share, 0) << (*rows)[i].mesh;
    EXPECT_LT((*rows)[i].param_bytes, rows->front().param_bytes) << (*rows)[i].mesh;
  }
}

// --report and --trace show the interconnect: summary, per device and per
// collective kind ICI figures, the sharding plan with each split layer's
// collective and bytes, and one ICI trace event per collective per device;
// all zero on a data-parallel mesh.
TEST(ModelParallelReportTest, ReportAndTraceShowEveryCollective) {
  const std::string dir = tpumesh::testing::TestTempDir();
  for (const std::string mesh : {"data=8,model=1", "data=4,model=2"}) {
    GeneratorOptions o;
    o.mesh.axes = mesh;
    auto gen = Generator::Open(o);
    ASSERT_TRUE(gen.ok()) << gen.status().ToString();
    GenerateRequest r;
    r.prompts = {"a red fox in the snow"};
    r.prompts.resize(8, "a bowl of fruit");
    r.batch_per_device = 8 / (*gen)->data_size();
    r.steps = 2;
    r.keep_ops = true;
    auto res = (*gen)->Generate(r);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    ASSERT_TRUE(WriteReportJson(dir + "/r.json", res->report).ok());
    ASSERT_TRUE(WriteTraceJson(dir + "/t.json", res->report).ok());
    std::ifstream rf(dir + "/r.json"), tf(dir + "/t.json");
    const nlohmann::json report = nlohmann::json::parse(rf), trace = nlohmann::json::parse(tf);
    const nlohmann::json& summary = report["summary"];
    EXPECT_EQ(summary["mesh"], mesh);
    const bool split = mesh != "data=8,model=1";

    // Collectives per device, from the log, against the report and trace.
    std::vector<int> collectives(8, 0), ici_events(8, 0);
    double bytes_all = 0, seconds_max = 0;
    for (int d = 0; d < 8; ++d) {
      for (const auto& e : res->report.logs[d].ops()) collectives[d] += e.op.type == "collective";
      const nlohmann::json& dev = report["devices"][d];
      bytes_all += dev["ici_bytes"].get<double>();
      seconds_max = std::max(seconds_max, dev["ici_seconds"].get<double>());
      EXPECT_EQ(dev["param_bytes"].get<int64_t>(), res->report.param_bytes[d]);
      double by_kind = 0;
      for (const auto& [kind, t] : dev["by_collective"].items()) {
        EXPECT_TRUE(kind == "psum" || kind == "all_gather") << kind;
        by_kind += t["ici_bytes"].get<double>();
      }
      EXPECT_DOUBLE_EQ(by_kind, dev["ici_bytes"].get<double>()) << "device " << d;
      if (split) {
        EXPECT_GT(collectives[d], 0) << "device " << d;
        EXPECT_GT(dev["ici_bytes"].get<double>(), 0) << "device " << d;
        EXPECT_TRUE(dev["by_collective"].contains("psum")) << "device " << d;
      } else {
        EXPECT_EQ(collectives[d], 0);
        EXPECT_EQ(dev["ici_bytes"].get<double>(), 0);
      }
    }
    EXPECT_DOUBLE_EQ(summary["ici_bytes"].get<double>(), bytes_all);
    EXPECT_DOUBLE_EQ(summary["ici_seconds"].get<double>(), seconds_max);
    EXPECT_EQ(summary["ici_bytes"].get<double>() > 0, split);
    EXPECT_NEAR(summary["ici_share"].get<double>(), seconds_max / res->report.modelled_seconds(), 1e-12);
    for (const auto& e : trace["traceEvents"])
      if (e["ph"] == "X" && e["tid"] == 4 && e["pid"].get<int>() <= 8) {
        ++ici_events[e["pid"].get<int>() - 1];
        EXPECT_TRUE(e["name"] == "psum" || e["name"] == "all_gather") << e.dump();
        EXPECT_GT(e["args"]["ici_bytes"].get<int64_t>(), 0) << e.dump();
      }
    EXPECT_EQ(ici_events, collectives) << mesh;

    // The plan: every split layer listed; the ones that reduce or gather
    // name their collective, and the plan's bytes add up to device 0's.
    const nlohmann::json& plan = report["sharding_plan"];
    EXPECT_EQ(plan.empty(), !split);
    double plan_bytes = 0;
    int with_collective = 0;
    for (const auto& l : plan) {
      plan_bytes += l["calls"].get<double>() * l["bytes_per_call"].get<double>();
      if (l["collective"] != "none") ++with_collective;
    }
    EXPECT_NEAR(plan_bytes, report["devices"][0]["ici_bytes"].get<double>(), 1e-6 * (1 + plan_bytes));
    EXPECT_EQ(with_collective > 0, split);
    const std::string table = ReportTable(res->report);
    EXPECT_EQ(table.find("ICI of device 0") != std::string::npos, split) << table;
    EXPECT_THAT(table, HasSubstr("parameters of device 0"));
  }
}

TEST(ModelParallelFlagsTest, BadMeshesNameTheFlag) {
  GeneratorOptions o;
  o.mesh.axes = "data=2,tensor=4";
  auto g = Generator::Open(o);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("--mesh"));
  EXPECT_THAT(g.status().message(), HasSubstr("tensor"));
  o.mesh.axes = "data=2,model=2";
  o.mesh.devices = 8;
  g = Generator::Open(o);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("--devices"));
  o.mesh = {};
  o.mesh.axes = "model=4";
  o.mesh.devices = 8;
  g = Generator::Open(o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)->data_size(), 2);
  EXPECT_EQ((*g)->model_size(), 4);
}

// The fsdp axis (docs/sharding.md), priced by simulate: the same images and
// compute as data parallel, each Linear and conv weight all_gathered over
// the fsdp group before its layer (one all_gather per such layer call, its
// reader the layer), shards in HBM; with overlap on, the gathers hide under
// the previous layer (serial - hidden = modelled), with it off they do not.
// A real run refuses the axis.
TEST(FsdpTest, SimulateGathersEveryWeightAndOverlapHidesIt) {
  SimulateOptions so;
  so.arch = "tiny";
  so.request.steps = 2;
  so.request.keep_ops = true;
  so.mesh.axes = "data=4";
  auto dp = Simulate(so);
  ASSERT_TRUE(dp.ok()) << dp.status().ToString();
  so.mesh.axes = "data=2,fsdp=2";
  auto fsdp = Simulate(so);
  ASSERT_TRUE(fsdp.ok()) << fsdp.status().ToString();
  so.mesh.overlap = "off";
  auto serial = Simulate(so);
  ASSERT_TRUE(serial.ok()) << serial.status().ToString();

  EXPECT_EQ(fsdp->mesh_axes, "data=2,fsdp=2,model=1");
  EXPECT_EQ(fsdp->images, dp->images);
  ASSERT_EQ(fsdp->logs.size(), 4u);
  const mesh::DeviceCostLog& log = fsdp->logs[0];
  int64_t weighted = 0, gathers = 0;
  for (size_t i = 0; i < log.ops().size(); ++i) {
    const mesh::OpRecord& op = log.ops()[i].op;
    if (op.type == "collective") {
      ASSERT_EQ(op.name, "all_gather") << op.shape;
      EXPECT_TRUE(op.prefetch);
      ASSERT_LT(i + 1, log.ops().size());
      const mesh::OpRecord& reader = log.ops()[i + 1].op;  // the layer right after it reads it
      EXPECT_EQ(reader.module, op.module);
      EXPECT_EQ(reader.awaits, std::vector<int64_t>{op.async_id});
      ++gathers;
    } else if (op.type == "conv" || op.type == "matmul") {
      ++weighted;  // every Linear and conv of the tiny model has a weight parameter
    }
  }
  EXPECT_GT(gathers, 0);
  EXPECT_EQ(gathers, weighted);
  // The compute is data parallel's: the same FLOPs per device.
  EXPECT_EQ(fsdp->logs[0].total().flops, dp->logs[0].total().flops);
  EXPECT_LT(fsdp->param_bytes[0], dp->param_bytes[0]);
  EXPECT_GT(fsdp->param_bytes[0], dp->param_bytes[0] / 2);  // half the weights, the rest whole
  // Overlap: hidden under the previous layers; off, the serial sum.
  EXPECT_GT(fsdp->serial_modelled_seconds() - fsdp->modelled_seconds(), 0);
  EXPECT_NEAR(log.serial_seconds() - log.ici_hidden_seconds(), log.seconds(), 1e-15);
  EXPECT_NEAR(log.by_collective_hidden().at("all_gather").ici_hidden_seconds, log.ici_hidden_seconds(),
              1e-9 * log.ici_hidden_seconds());
  EXPECT_EQ(serial->modelled_seconds(), serial->serial_modelled_seconds());
  EXPECT_EQ(serial->modelled_seconds(), fsdp->serial_modelled_seconds());
  EXPECT_GT(serial->modelled_seconds(), dp->modelled_seconds());

  GeneratorOptions o;
  o.mesh.axes = "data=2,fsdp=2";
  auto g = Generator::Open(o);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("--mesh data=2,fsdp=2,model=1: the fsdp axis is priced by simulate only"));
}

}  // namespace
}  // namespace tpumesh::pipeline
