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

// docs/cost-model.md's validation table, printed: the model against
// published runs (no pass/fail on the figures; a structural check only).
TEST(CostModelTest, ValidationTable) {
  struct Case {
    const char* what;
    const char* arch;
    const char* chip;
    int devices, per_device, steps, size;
    const char* scheduler;
    double published;
  };
  const Case cases[] = {
      {"SD v1.4, TPU v2-8, 8 x 512^2, 50 PNDM, pmap", "sd15", "v2", 8, 1, 50, 512, "pndm", 6.82},
      {"SD v1.4, TPU v2-8, 8 x 512^2, 50 PNDM, jit pipeline", "sd15", "v2", 8, 1, 50, 512, "pndm", 7.07},
      {"SDXL base 1.0, v5e-4, batch 4, 1024^2, 20 Euler", "sdxl", "v5e", 4, 1, 20, 1024, "euler", 2.33},
      {"SDXL base 1.0, v5e-4, batch 8, 1024^2, 20 Euler", "sdxl", "v5e", 4, 2, 20, 1024, "euler", 4.99},
      {"SDXL base 1.0, v4-8, batch 4, 1024^2, 20 Euler", "sdxl", "v4", 4, 1, 20, 1024, "euler", 2.16},
  };
  std::printf("%-55s %10s %10s %7s\n", "run", "model s", "published", "ratio");
  for (const Case& c : cases) {
    SimulateOptions o;
    o.arch = c.arch;
    o.mesh.chip = c.chip;
    o.mesh.devices = c.devices;
    o.request.batch_per_device = c.per_device;
    o.request.steps = c.steps;
    o.request.height = o.request.width = c.size;
    o.request.scheduler = c.scheduler;
    o.request.negative_prompts = {""};  // the published runs pass a negative prompt
    auto r = Simulate(o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const double m = r->modelled_seconds();
    std::printf("%-55s %10.2f %10.2f %7.3f\n", c.what, m, c.published, m / c.published);
    EXPECT_GT(m, 0);
  }
}

}  // namespace
}  // namespace tpumesh::pipeline
