// tpumesh simulate, structurally (no timing assertions): what SD layers
// record in a dry run, priced on each preset, equals a hand count of the
// systolic model; the UNet runs once per scheduler timestep (PNDM's extra
// step included); guidance <= 1 drops the unconditional half; SDXL prices
// both text encoders and bigG's projection; a simulation's per-op prices add
// up to its report, and its trace is valid JSON with the required fields.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/matmul_cost.h"
#include "mesh/chip_spec.h"
#include "mesh/cost_model.h"
#include "models/nn.h"
#include "nlohmann/json.hpp"
#include "pipeline/simulate.h"
#include "report/report.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;
using nlohmann::json;

mesh::ChipSpec Chip(const std::string& name) {
  auto c = mesh::LoadChipSpec(name);
  EXPECT_TRUE(c.ok()) << name;
  return c.ok() ? *c : mesh::ChipSpec();
}

Array F32(mesh::Shape s) { return Array::Host(mesh::DType::kF32, std::move(s)); }

// A Ctx that records and computes nothing, at bf16 (the validation's precision).
models::Ctx DryCtx(std::vector<mesh::OpRecord>* ops) {
  models::Ctx ctx;
  ctx.precision = models::Precision::kDefault;
  ctx.dry_run = true;
  ctx.ops = ops;
  return ctx;
}

int MxusPerDevice(const mesh::ChipSpec& c) { return c.mxus_per_chip() / c.devices_per_chip; }

// Cycles of one weight tile on a 128 x 128 array with M rows streamed:
// 2R + C + M - 2 (kernels/matmul_cost.h).
int64_t TileCycles(int64_t m) { return 2 * 128 + 128 + m - 2; }

TEST(SimulateTest, Sd15ConvPriceIsTheHandCountOnEveryPreset) {
  // SD 1.5's level-0 3x3 conv, batch 2 (CFG): x [2, 320, 64, 64], w [320,
  // 320, 3, 3]. As a matmul: M = 2*64*64 = 8192, K = 320*9 = 2880, N = 320:
  // ceil(2880/128) * ceil(320/128) = 23 * 3 = 69 weight tiles.
  std::vector<mesh::OpRecord> ops;
  const Array x = F32({2, 320, 64, 64}), w = F32({320, 320, 3, 3}), b = F32({320});
  ASSERT_TRUE(models::Conv2d(DryCtx(&ops), x, w, &b, 1, 1).ok());
  ASSERT_EQ(ops.size(), 1u);
  const mesh::OpRecord& conv = ops[0];
  EXPECT_EQ(conv.type, "conv");
  EXPECT_DOUBLE_EQ(conv.cost.flops, 2.0 * 8192 * 320 * 2880 + 8192.0 * 320);  // + bias
  // bf16: input, weights, bias and output once, 2 bytes each.
  EXPECT_DOUBLE_EQ(conv.cost.bytes(), 2.0 * (2 * 320 * 64 * 64 + 320 * 2880 + 320) + 2.0 * 2 * 320 * 64 * 64);
  // 69 tiles over the device's MXUs: v5e 4 -> 18 rounds; v4 megacore 8 -> 9;
  // v2 one core's MXU -> 69.
  for (auto [name, rounds] : {std::pair<const char*, int64_t>{"v5e", 18}, {"v4", 9}, {"v2", 69}}) {
    const mesh::ChipSpec c = Chip(name);
    const mesh::OpTiming t = mesh::PriceOp(conv, c);
    EXPECT_EQ(t.mxu_cycles, rounds * TileCycles(8192)) << name;
    EXPECT_DOUBLE_EQ(t.mxu_seconds, rounds * TileCycles(8192) / c.clock_hz) << name;
    EXPECT_DOUBLE_EQ(t.utilisation,
                     8192.0 * 320 * 2880 / (static_cast<double>(rounds * TileCycles(8192)) * 128 * 128 * MxusPerDevice(c)))
        << name;
    // The bias adds run on the vector unit.
    EXPECT_DOUBLE_EQ(t.vector_seconds, 8192.0 * 320 / mesh::VectorFlopsPerSecond(c)) << name;
    EXPECT_DOUBLE_EQ(t.hbm_seconds, conv.cost.bytes() / c.hbm_bandwidth_per_device()) << name;
    EXPECT_DOUBLE_EQ(t.seconds, std::max(t.mxu_seconds + t.vector_seconds, t.hbm_seconds)) << name;
  }
}

TEST(SimulateTest, Sd15AttentionAndLinearPricesAreTheHandCount) {
  // Level-0 self-attention of SD 1.5: q, k, v [2, 4096, 320], 8 heads of 40.
  // Per (batch, head), 16 of them: Q K^T [4096, 40] x [40, 4096] is 1 x 32
  // tiles and P V [4096, 4096] x [4096, 40] is 32 x 1 tiles; on v5e's 4
  // MXUs each is 8 rounds of 2*128 + 128 + 4096 - 2 cycles.
  std::vector<mesh::OpRecord> ops;
  const models::Ctx ctx = DryCtx(&ops);
  const Array q = F32({2, 4096, 320});
  ASSERT_TRUE(models::Attention(ctx, q, q, q, 8, false).ok());
  // to_q: [8192, 320] x [320, 320], 3 x 3 tiles: 3 rounds of 2*128 + 128 + 8192 - 2.
  const Array wq = F32({320, 320});
  ASSERT_TRUE(models::Linear(ctx, q, wq, nullptr).ok());
  ASSERT_EQ(ops.size(), 2u);
  const mesh::ChipSpec v5e = Chip("v5e");

  const mesh::OpTiming a = mesh::PriceOp(ops[0], v5e);
  EXPECT_EQ(a.mxu_cycles, 2 * 16 * 8 * TileCycles(4096));
  const double scores = 16.0 * 4096 * 4096;
  EXPECT_DOUBLE_EQ(a.utilisation, 2 * scores * 40 / (2.0 * 16 * 8 * TileCycles(4096) * 128 * 128 * 4));
  // Softmax (scale, max, subtract, sum: 4 per score), the 1/sum rescale of
  // the output, and one exp per score on the vector unit; the flash
  // kernel's rescaling per query row and block of 1024 keys (4 of them):
  // 3 + 2 x 40 flops and one exp.
  const double rescales = 16.0 * 4096 * 4;
  EXPECT_DOUBLE_EQ(a.vector_seconds,
                   (4 * scores + 16.0 * 4096 * 40 + rescales * (3 + 2 * 40)) / mesh::VectorFlopsPerSecond(v5e) +
                       (scores + rescales) / mesh::TranscendentalsPerSecond(v5e));
  // Flash attention: q, k, v and the output once, bf16, and K and V again
  // for each of the 3 blocks of 1024 queries after the first.
  EXPECT_DOUBLE_EQ(ops[0].cost.bytes(), 4 * 2.0 * 2 * 4096 * 320);
  EXPECT_DOUBLE_EQ(a.hbm_bytes, ops[0].cost.bytes() + 3 * 2 * 2.0 * 16 * 4096 * 40);
  EXPECT_DOUBLE_EQ(a.seconds, std::max(a.mxu_seconds + a.vector_seconds, a.hbm_seconds));

  const mesh::OpTiming l = mesh::PriceOp(ops[1], v5e);
  EXPECT_EQ(l.mxu_cycles, 3 * TileCycles(8192));
  EXPECT_DOUBLE_EQ(l.vector_seconds, 0);  // no bias
  EXPECT_DOUBLE_EQ(ops[1].cost.bytes(), 2.0 * (8192 * 320 + 320 * 320) + 2.0 * 8192 * 320);

  // Highest precision: 6 bf16 passes, 6 x 9 = 54 tiles -> 14 rounds; f32 bytes.
  ops.clear();
  models::Ctx hi = ctx;
  hi.precision = models::Precision::kHighest;
  ASSERT_TRUE(models::Linear(hi, q, wq, nullptr).ok());
  EXPECT_EQ(mesh::PriceOp(ops[0], v5e).mxu_cycles, 14 * TileCycles(8192));
  EXPECT_DOUBLE_EQ(ops[0].cost.bytes(), 4.0 * (8192 * 320 + 320 * 320) + 4.0 * 8192 * 320);
}

// The first conv2d a run records is the UNet's conv_in (the text encoders
// have none): its input's batch is the UNet's.
std::string FirstConvShape(const report::RunReport& r) {
  for (const auto& e : r.logs.at(0).ops())
    if (e.op.name == "conv2d") return e.op.shape;
  return "";
}

int CountNamed(const report::RunReport& r, const std::string& name) {
  int n = 0;
  for (const auto& e : r.logs.at(0).ops()) n += e.op.name == name;
  return n;
}

TEST(SimulateTest, UNetCallsFollowTheSchedulerAndGuidanceOneDropsTheUnconditionalHalf) {
  SimulateOptions o;
  o.arch = "sd15";
  o.request.steps = 50;
  o.request.scheduler = "pndm";
  auto pndm = Simulate(o);
  ASSERT_TRUE(pndm.ok()) << pndm.status().ToString();
  EXPECT_EQ(pndm->info.at("unet_calls"), "51");  // PNDM (PLMS) repeats one timestep
  o.request.scheduler = "euler";
  auto euler = Simulate(o);
  ASSERT_TRUE(euler.ok()) << euler.status().ToString();
  EXPECT_EQ(euler->info.at("unet_calls"), "50");

  SimulateOptions t;
  t.arch = "tiny";
  t.mesh.devices = 2;
  t.request.batch_per_device = 2;
  t.request.steps = 3;
  t.request.scheduler = "euler";
  t.request.keep_ops = true;
  auto cfg = Simulate(t);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(FirstConvShape(*cfg).rfind("x[4,", 0), 0u) << FirstConvShape(*cfg);  // [uncond; cond]
  EXPECT_EQ(CountNamed(*cfg, "guidance"), 3);
  EXPECT_EQ(CountNamed(*cfg, "scheduler_step_euler"), 3);
  t.request.guidance = 1.0f;  // diffusers: no classifier-free guidance when guidance_scale <= 1
  auto plain = Simulate(t);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(FirstConvShape(*plain).rfind("x[2,", 0), 0u) << FirstConvShape(*plain);
  EXPECT_EQ(CountNamed(*plain, "guidance"), 0);
  EXPECT_EQ(CountNamed(*plain, "scheduler_step_euler"), 3);
  EXPECT_LT(plain->modelled_seconds(), cfg->modelled_seconds());
  EXPECT_EQ(cfg->images, 4);
}

TEST(SimulateTest, SdxlPricesBothTextEncodersTheProjectionAndTheAddedConditioning) {
  SimulateOptions o;
  o.arch = "sdxl";
  o.mesh.devices = 4;
  o.request.steps = 1;
  o.request.scheduler = "euler";
  o.request.keep_ops = true;
  auto r = Simulate(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // CLIP ViT-L's 12 layers and OpenCLIP bigG's 32, each with one causal
  // self-attention. No negative prompt: force_zeros_for_empty_prompt zeroes
  // the unconditional embeddings, so the encoders see the prompt rows only.
  EXPECT_EQ(CountNamed(*r, "causal_attention"), 12 + 32);
  // Up to the UNet's first op (its timestep embedding), the text encoders:
  // bigG's text_projection of the pooled output once (the UNet has products
  // of the same shape).
  // Then the UNet's add_embedding.linear_1 on text_embeds ++ 6 x 256 time ids.
  int projection = 0, add_embedding = 0;
  bool text = true;
  for (const auto& e : r->logs[0].ops()) {
    text = text && e.op.name != "timestep_embedding";
    if (text) projection += e.op.shape == "x[1,1280] w[1280,1280]";
    add_embedding += e.op.shape == "x[2,2816] w[1280,2816]";
  }
  EXPECT_EQ(projection, 1);
  EXPECT_EQ(add_embedding, 1);  // one UNet call
  EXPECT_EQ(FirstConvShape(*r).rfind("x[2,4,128,128]", 0), 0u) << FirstConvShape(*r);  // 1024 / 8

  // A negative prompt is encoded: [uncond; cond] through both encoders.
  o.request.negative_prompts = {"blurry"};
  auto neg = Simulate(o);
  ASSERT_TRUE(neg.ok()) << neg.status().ToString();
  int projection_neg = 0;
  text = true;
  for (const auto& e : neg->logs[0].ops()) {
    text = text && e.op.name != "timestep_embedding";
    if (text) projection_neg += e.op.shape == "x[2,1280] w[1280,1280]";
  }
  EXPECT_EQ(projection_neg, 1);
  EXPECT_GT(neg->modelled_seconds(), r->modelled_seconds());
}

// Each device's per-layer rows hold every op once: their counts and MXU
// cycles sum exactly to the per-op-type table, their seconds, FLOPs and
// bytes to its totals (within the rounding of a different summation order),
// and the JSON report and the CSV carry one row per layer.
TEST(SimulateTest, PerLayerRowsSumToTheOpTypeTotals) {
  SimulateOptions o;
  o.arch = "tiny";
  o.mesh.devices = 2;
  o.mesh.axes = "data=1,model=2";
  o.request.steps = 3;
  auto r = Simulate(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const mesh::DeviceCostLog& log : r->logs) {
    mesh::OpTypeTotals sum;
    for (const mesh::LayerTotals& l : log.layers()) {
      EXPECT_FALSE(l.module.empty());
      sum.count += l.totals.count;
      sum.mxu_cycles += l.totals.mxu_cycles;
      sum.modelled_seconds += l.totals.modelled_seconds;
      sum.flops += l.totals.flops;
      sum.bytes += l.totals.bytes;
      sum.ici_seconds += l.totals.ici_seconds;
      sum.energy.Add(l.totals.energy);
    }
    const mesh::OpTypeTotals total = log.total();
    for (auto part : {&mesh::EnergyJoules::mxu, &mesh::EnergyJoules::vector, &mesh::EnergyJoules::vmem,
                      &mesh::EnergyJoules::hbm, &mesh::EnergyJoules::ici}) {
      EXPECT_NEAR(sum.energy.*part, total.energy.*part, 1e-12 * total.energy.*part);
      EXPECT_GT(total.energy.*part, 0);  // the tiny UNet split 2 ways spends energy in every part
    }
    EXPECT_EQ(sum.count, total.count);
    EXPECT_EQ(sum.mxu_cycles, total.mxu_cycles);
    EXPECT_NEAR(sum.modelled_seconds, total.modelled_seconds, 1e-12 * total.modelled_seconds);
    EXPECT_NEAR(sum.flops, total.flops, 1e-12 * total.flops);
    EXPECT_NEAR(sum.bytes, total.bytes, 1e-12 * total.bytes);
    EXPECT_NEAR(sum.ici_seconds, total.ici_seconds, 1e-12 * total.ici_seconds);
    EXPECT_GT(total.ici_seconds, 0);  // model=2: the split layers' collectives are layers too
  }
  // Layers are named as diffusers names the modules: after their weight, or
  // (an op without one) after the module of the weighted op before it.
  std::set<std::string> names;
  for (const mesh::LayerTotals& l : r->logs[0].layers()) names.insert(l.module);
  for (const char* want : {"unet/down_blocks.0.resnets.0.conv1", "unet/down_blocks.0.resnets.0.norm2",
                           "unet/down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q",
                           "unet/down_blocks.1.attentions.0.transformer_blocks.0.attn1",
                           "text_encoder/text_model.encoder.layers.0.mlp.fc1", "vae/decoder.conv_out"})
    EXPECT_TRUE(names.count(want)) << want;
  const json report = json::parse(report::ReportJson(*r));
  EXPECT_EQ(report.at("devices").at(0).at("layers").size(), r->logs[0].layers().size());
  const std::string csv = report::LayersCsv(*r);
  EXPECT_EQ(static_cast<size_t>(std::count(csv.begin(), csv.end(), '\n')),
            1 + r->logs[0].layers().size() + r->logs[1].layers().size());
}

// simulate --workload: the layers on every device, each collective priced
// over its axis's group, the dataflow the chip's; an axis the mesh lacks is
// refused naming the layer.
TEST(SimulateTest, WorkloadLayersArePricedOnTheMesh) {
  const std::string dir = tpumesh::testing::TestTempDir();
  std::ofstream(dir + "/w.json") << R"({"layers": [
      {"name": "fc", "op": "matmul", "m": 1024, "n": 256, "k": 512, "repeat": 2},
      {"name": "ar", "op": "psum", "axis": "model", "bytes": 1048576}]})";
  WorkloadOptions o;
  o.path = dir + "/w.json";
  o.mesh.devices = 4;
  o.mesh.axes = "data=2,model=2";
  auto r = SimulateWorkload(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->logs.size(), 4u);
  const mesh::ChipSpec chip = Chip("v5e");
  const kernels::MatmulCostFigures fc = kernels::MatmulCost(1024, 256, 512, kernels::Precision::kDefault,
                                                            mesh::DeviceArray(chip));
  for (const mesh::DeviceCostLog& log : r->logs) {
    ASSERT_EQ(log.layers().size(), 2u);
    EXPECT_EQ(log.layers()[0].module, "fc");
    EXPECT_EQ(log.layers()[0].totals.count, 2);
    EXPECT_EQ(log.layers()[0].totals.mxu_cycles, 2.0 * fc.cycles);
    EXPECT_EQ(log.layers()[1].module, "ar");
    EXPECT_GT(log.layers()[1].totals.ici_seconds, 0);
    EXPECT_EQ(log.layers()[1].totals.bound(), "ICI");
  }
  // Output stationary from the flag: the same work, other cycles.
  o.mesh.dataflow = "os";
  auto os = SimulateWorkload(o);
  ASSERT_TRUE(os.ok()) << os.status().ToString();
  kernels::SystolicArray a = mesh::DeviceArray(chip);
  a.dataflow = kernels::Dataflow::kOutputStationary;
  EXPECT_EQ(os->logs[0].layers()[0].totals.mxu_cycles,
            2.0 * kernels::MatmulCost(1024, 256, 512, kernels::Precision::kDefault, a).cycles);
  EXPECT_NE(os->logs[0].layers()[0].totals.mxu_cycles, r->logs[0].layers()[0].totals.mxu_cycles);
  o.mesh.dataflow = "diagonal";
  auto bad_flow = SimulateWorkload(o);
  ASSERT_FALSE(bad_flow.ok());
  EXPECT_NE(std::string(bad_flow.status().message()).find("--dataflow"), std::string::npos);

  o.mesh.dataflow.clear();
  o.mesh.axes = "data=4";
  auto bad = SimulateWorkload(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("layer 'ar'"), std::string::npos) << bad.status().ToString();
  EXPECT_NE(std::string(bad.status().message()).find("model"), std::string::npos) << bad.status().ToString();
}

TEST(SimulateTest, PerOpPricesAddUpToTheReportAndTheTraceIsValid) {
  SimulateOptions o;
  o.arch = "tiny";
  o.mesh.devices = 2;
  o.request.steps = 4;
  o.request.keep_ops = true;
  auto r = Simulate(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Priced without keeping the ops (the repeat path): the same totals.
  o.request.keep_ops = false;
  auto lean = Simulate(o);
  ASSERT_TRUE(lean.ok()) << lean.status().ToString();
  EXPECT_NEAR(lean->modelled_seconds(), r->modelled_seconds(), 1e-12 * r->modelled_seconds());
  EXPECT_EQ(lean->logs[0].total().count, r->logs[0].total().count);

  double seconds = 0, flops = 0, bytes = 0;
  for (const auto& e : r->logs[0].ops()) {
    seconds += e.timing.seconds;
    flops += e.op.cost.flops;
    bytes += e.op.cost.bytes();
  }
  const mesh::OpTypeTotals total = r->logs[0].total();
  EXPECT_EQ(static_cast<int64_t>(r->logs[0].ops().size()), total.count);
  EXPECT_NEAR(seconds, total.modelled_seconds, 1e-9 * seconds);
  EXPECT_NEAR(seconds, r->modelled_seconds(), 1e-9 * seconds);
  EXPECT_NEAR(flops, total.flops, 1e-9 * flops);
  EXPECT_NEAR(bytes, total.bytes, 1e-9 * bytes);
  EXPECT_DOUBLE_EQ(total.host_seconds, 0);  // nothing ran

  const std::string dir = tpumesh::testing::TestTempDir();
  ASSERT_TRUE(report::WriteReportJson(dir + "/r.json", *r).ok());
  ASSERT_TRUE(report::WriteTraceJson(dir + "/t.json", *r).ok());
  std::ifstream rf(dir + "/r.json"), tf(dir + "/t.json");
  const json report = json::parse(rf);
  const json& s = report.at("summary");
  EXPECT_EQ(s.at("mode"), "simulate");
  EXPECT_EQ(s.at("images"), 2);
  EXPECT_EQ(s.at("devices"), 2);
  EXPECT_EQ(s.at("chip"), "v5e");
  EXPECT_DOUBLE_EQ(s.at("host_seconds").get<double>(), 0);
  EXPECT_DOUBLE_EQ(s.at("modelled_seconds").get<double>(), r->modelled_seconds());
  ASSERT_EQ(report.at("devices").size(), 2u);
  for (const json& d : report.at("devices")) {
    double by_type = 0;
    for (const auto& [type, t] : d.at("by_op_type").items()) by_type += t.at("modelled_seconds").get<double>();
    EXPECT_NEAR(by_type, d.at("modelled_seconds").get<double>(), 1e-9 * by_type);
  }

  const json trace = json::parse(tf);
  std::set<int> pids;
  std::set<std::string> tracks;
  int64_t mxu = 0, vector = 0, hbm = 0;
  for (const json& e : trace.at("traceEvents")) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name")) << e.dump();
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("tid")) << e.dump();
    for (const char* k : {"shape", "flops", "bytes"}) ASSERT_TRUE(e["args"].contains(k)) << k << " " << e.dump();
    EXPECT_GE(e["dur"].get<double>(), 0);
    pids.insert(e["pid"].get<int>());
    const int tid = e["tid"].get<int>();
    mxu += tid == 1;
    vector += tid == 2;
    hbm += tid == 3;
  }
  EXPECT_EQ(pids, (std::set<int>{1, 2}));  // one process per device; no host events in a simulation
  EXPECT_GT(mxu, 0);
  EXPECT_GT(vector, 0);
  EXPECT_GT(hbm, 0);
  EXPECT_LE(hbm, 2 * total.count);
  for (const char* t : {"MXU", "vector unit", "HBM DMA", "ICI"}) EXPECT_TRUE(tracks.count(t)) << t;
}

}  // namespace
}  // namespace tpumesh::pipeline
