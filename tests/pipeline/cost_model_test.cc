// The chip's view: op prices equal hand calculations, per-op costs add up to
// the report's totals, reports and traces are valid JSON with the required
// fields, and a simulation and a real run of the tiny model agree. Prints the
// validation table of docs/cost-model.md.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/chip_spec.h"
#include "mesh/cost_model.h"
#include "nlohmann/json.hpp"
#include "pipeline/generate.h"
#include "pipeline/simulate.h"
#include "report/report.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_model.h"

namespace tpumesh::pipeline {
namespace {

using nlohmann::json;

mesh::ChipSpec Chip(const std::string& name) { return *mesh::LoadChipSpec(name); }

TEST(CostModelTest, MatmulPriceIsTheSystolicCycleCount) {
  // v5e: 4 MXUs of 128 x 128 at 1.5 GHz. C[256, 256] = A[256, 128] B[128, 256]:
  // 2 weight tiles, one per MXU: 2*128 + 128 + 256 - 2 = 638 cycles.
  mesh::OpRecord op;
  op.mxu = {{256, 256, 128, 1}};
  op.cost.flops = 2.0 * 256 * 256 * 128;
  op.cost.bytes_read = 2.0 * (256 * 128 + 128 * 256);
  op.cost.bytes_written = 4.0 * 256 * 256;
  const mesh::ChipSpec v5e = Chip("v5e");
  const mesh::OpTiming t = mesh::PriceOp(op, v5e);
  EXPECT_EQ(t.mxu_cycles, 638);
  EXPECT_DOUBLE_EQ(t.mxu_seconds, 638 / v5e.clock_hz);
  EXPECT_DOUBLE_EQ(t.vector_seconds, 0);
  EXPECT_DOUBLE_EQ(t.hbm_seconds, (2.0 * 2 * 256 * 128 + 4.0 * 256 * 256) / 819e9);
  EXPECT_DOUBLE_EQ(t.seconds, std::max(t.mxu_seconds, t.hbm_seconds));
  // Useful MACs 256*256*128 over 638 cycles x 128 x 128 x 4 slots.
  EXPECT_DOUBLE_EQ(t.utilisation, 256.0 * 256 * 128 / (638.0 * 128 * 128 * 4));
  // Highest precision: 6 passes, 12 tiles on 4 MXUs = 3 rounds.
  op.precision = kernels::Precision::kHighest;
  EXPECT_EQ(mesh::PriceOp(op, v5e).mxu_cycles, 3 * 638);
}

TEST(CostModelTest, VectorWorkAndMemoryBoundOps) {
  // An elementwise op of 1e6 values: 1e6 flops on the (8 x 128) VPU at 2
  // flops per lane per cycle, 8 MB through HBM: memory bound.
  mesh::OpRecord op;
  op.cost.flops = 1e6;
  op.cost.transcendentals = 1e6;
  op.cost.bytes_read = 4e6;
  op.cost.bytes_written = 4e6;
  const mesh::ChipSpec v5e = Chip("v5e");
  const mesh::OpTiming t = mesh::PriceOp(op, v5e);
  EXPECT_DOUBLE_EQ(mesh::VectorFlopsPerSecond(v5e), 8 * 128 * 2 * 1.5e9);
  EXPECT_DOUBLE_EQ(t.vector_seconds, 1e6 / (8 * 128 * 2 * 1.5e9) + 1e6 / (8 * 128 * 1.5e9));
  EXPECT_DOUBLE_EQ(t.hbm_seconds, 8e6 / 819e9);
  EXPECT_DOUBLE_EQ(t.seconds, t.hbm_seconds);
  // v2: a device is one of the chip's two cores: half the chip's bandwidth.
  EXPECT_DOUBLE_EQ(mesh::PriceOp(op, Chip("v2")).hbm_seconds, 8e6 / (Chip("v2").hbm_bandwidth / 2));
}

// Runs the tiny model for real and simulates the same settings.
TEST(CostModelTest, SimulationAndRealRunAgreeAndOpsAddUpToTheReport) {
  GeneratorOptions go;
  go.model = tpumesh::testing::TinyArchModel();
  go.mesh.devices = 2;
  auto gen = Generator::Open(go);
  ASSERT_TRUE(gen.ok());
  GenerateRequest r;
  r.prompts = {"a lighthouse"};
  r.steps = 3;
  r.keep_ops = true;
  auto res = (*gen)->Generate(r);
  ASSERT_TRUE(res.ok()) << res.status().message();

  SimulateOptions so;
  so.arch = "tiny";
  so.mesh.devices = 2;
  so.request.steps = 3;
  auto sim = Simulate(so);
  ASSERT_TRUE(sim.ok()) << sim.status().message();
  EXPECT_GT(res->modelled_seconds, 0);
  EXPECT_NEAR(sim->modelled_seconds(), res->modelled_seconds, 1e-9 * res->modelled_seconds);
  EXPECT_EQ(sim->logs[0].total().count, res->report.logs[0].total().count);
  EXPECT_NEAR(sim->logs[0].total().flops, res->report.logs[0].total().flops, 1e-9 * sim->logs[0].total().flops);
  // The device's simulated clock is the run's modelled time.
  EXPECT_DOUBLE_EQ((*gen)->mesh().device(1).clock_seconds(), res->report.logs[1].seconds());

  // Per-op figures add up to the per-type totals and to the report's.
  const mesh::DeviceCostLog& log = res->report.logs[0];
  double seconds = 0, flops = 0;
  for (const auto& e : log.ops()) {
    seconds += e.timing.seconds;
    flops += e.op.cost.flops;
  }
  EXPECT_NEAR(seconds, log.total().modelled_seconds, 1e-12 + 1e-9 * seconds);
  EXPECT_NEAR(flops, log.total().flops, 1e-9 * flops);
  EXPECT_GT(log.total().host_seconds, 0);

  const std::string dir = tpumesh::testing::TestTempDir();
  ASSERT_TRUE(report::WriteReportJson(dir + "/r.json", res->report).ok());
  ASSERT_TRUE(report::WriteTraceJson(dir + "/t.json", res->report).ok());
  std::ifstream rf(dir + "/r.json"), tf(dir + "/t.json");
  const json report = json::parse(rf);
  for (const char* k : {"modelled_seconds", "host_seconds", "images", "chip", "devices"})
    EXPECT_TRUE(report["summary"].contains(k)) << k;
  EXPECT_EQ(report["summary"]["images"], 2);
  EXPECT_DOUBLE_EQ(report["summary"]["modelled_seconds"].get<double>(), res->modelled_seconds);
  ASSERT_EQ(report["devices"].size(), 2u);
  double by_type = 0;
  for (const auto& [type, t] : report["devices"][0]["by_op_type"].items()) {
    for (const char* k : {"count", "flops", "bytes", "modelled_seconds", "utilisation", "host_seconds"})
      EXPECT_TRUE(t.contains(k)) << type << " " << k;
    by_type += t["modelled_seconds"].get<double>();
  }
  EXPECT_NEAR(by_type, report["devices"][0]["modelled_seconds"].get<double>(), 1e-9 * by_type);
  const json trace = json::parse(tf);
  std::set<std::string> tracks;
  int events = 0;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name"));
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") {
      ++events;
      ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e["args"].contains("flops") && e["args"].contains("bytes"))
          << e.dump();
    }
  }
  EXPECT_GT(events, 100);
  for (const char* t : {"MXU", "vector unit", "HBM DMA", "ICI"}) EXPECT_TRUE(tracks.count(t)) << t;
}

// docs/cost-model.md's validation table: the model against published runs,
// printed, each priced with the presets as they are (no constant fitted).
// A run the table lists as within +-15% must stay there (a change to the
// model that moves it out fails here); the misses the table explains (Flux
// on v4, FSDP with overlap) are printed and only bounded loosely, so their
// move is seen without pinning a figure.
TEST(CostModelTest, ValidationTable) {
  struct Case {
    const char* what;
    const char* arch;
    const char* chip;
    int devices, per_device, steps, size;
    const char* scheduler;  // empty: the model's
    const char* mesh;       // empty: data=devices
    const char* overlap;
    double published;
    bool within;  // the table claims +-15%
  };
  const Case cases[] = {
      {"SD v1.4, TPU v2-8, 8 x 512^2, 50 PNDM, pmap", "sd15", "v2", 8, 1, 50, 512, "pndm", "", "on", 6.82, true},
      {"SD v1.4, TPU v2-8, 8 x 512^2, 50 PNDM, jit pipeline", "sd15", "v2", 8, 1, 50, 512, "pndm", "", "on", 7.07,
       true},
      {"SDXL base 1.0, v5e-4, batch 4, 1024^2, 20 Euler", "sdxl", "v5e", 4, 1, 20, 1024, "euler", "", "on", 2.33, true},
      {"SDXL base 1.0, v5e-4, batch 8, 1024^2, 20 Euler", "sdxl", "v5e", 4, 2, 20, 1024, "euler", "", "on", 4.99, true},
      {"SDXL base 1.0, v4-8, batch 4, 1024^2, 20 Euler", "sdxl", "v4", 4, 1, 20, 1024, "euler", "", "on", 2.16, true},
      {"FLUX.1-dev, v6e-4, 4 x 1024^2, 28 steps, DP", "flux-dev", "v6e", 4, 1, 28, 1024, "", "", "on", 5.5, true},
      {"FLUX.1-dev, v4-8, 4 x 1024^2, 28 steps, DP", "flux-dev", "v4", 4, 1, 28, 1024, "", "", "on", 23.0, false},
      {"FLUX.1-schnell, v6e-4, 4 x 1024^2, 4 steps, DP", "flux-schnell", "v6e", 4, 1, 4, 1024, "", "", "on", 0.8,
       true},
      {"FLUX.1-schnell, v6e-4, 4 steps, FSDP, overlap off", "flux-schnell", "v6e", 4, 1, 4, 1024, "", "fsdp=4", "off",
       1.2, true},
      {"FLUX.1-schnell, v6e-4, 4 steps, FSDP, overlap on", "flux-schnell", "v6e", 4, 1, 4, 1024, "", "fsdp=4", "on",
       1.2, false},
      {"FLUX.1-schnell, v4-8, 4 x 1024^2, 4 steps, DP", "flux-schnell", "v4", 4, 1, 4, 1024, "", "", "on", 2.2, false},
  };
  std::printf("%-55s %10s %10s %7s\n", "run", "model s", "published", "ratio");
  for (const Case& c : cases) {
    SimulateOptions o;
    o.arch = c.arch;
    o.mesh.chip = c.chip;
    o.mesh.devices = c.devices;
    o.mesh.axes = c.mesh;
    o.mesh.overlap = c.overlap;
    o.request.batch_per_device = c.per_device;
    o.request.steps = c.steps;
    o.request.height = o.request.width = c.size;
    if (*c.scheduler != 0) {
      o.request.scheduler = c.scheduler;
      o.request.negative_prompts = {""};  // the published SD runs pass a negative prompt
    } else {
      // maxdiffusion moves T5 to the host after encoding (offload_encoders);
      // tpumesh keeps it on the device, so a data-parallel FLUX.1 on 32 GiB
      // is priced past the HBM limit (docs/cost-model.md).
      o.check_hbm = false;
    }
    auto r = Simulate(o);
    ASSERT_TRUE(r.ok()) << c.what << ": " << r.status().message();
    const double m = r->modelled_seconds(), ratio = m / c.published;
    std::printf("%-55s %10.2f %10.2f %7.3f%s\n", c.what, m, c.published, ratio, c.within ? "" : "  (a miss, explained)");
    if (c.within) {
      EXPECT_NEAR(ratio, 1.0, 0.15) << c.what;
    } else {
      EXPECT_GT(ratio, 0.3) << c.what;
      EXPECT_LT(ratio, 3.0) << c.what;
    }
  }
}

}  // namespace
}  // namespace tpumesh::pipeline
