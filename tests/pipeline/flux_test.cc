// Flux through the text-to-image flow (pipeline/txt2img.h): the flux-tiny
// model computed for real (deterministic pseudo-random weights, given token
// ids: there is no T5 tokenizer) records the same ops and costs as its dry
// run, and `simulate` reports the same modelled time; split over a model
// axis it computes what it computes whole; FLUX.1-dev and -schnell simulate,
// and what is not implemented is refused. Parity with diffusers' numbers is not tested (no torch here).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mesh/chip_spec.h"
#include "mesh/cost_model.h"
#include "mesh/mesh.h"
#include "models/parallel.h"
#include "models/architectures.h"
#include "pipeline/simulate.h"
#include "pipeline/txt2img.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;
using mesh::DType;

ModelConfigs Configs(const std::string& name) {
  auto a = models::BuiltinArchitecture(name);
  EXPECT_TRUE(a.ok());
  return {a->name, a->model_index, a->text_encoder, a->text_encoder_2, a->unet, a->vae, a->scheduler, a->transformer};
}

// Weights in [-0.1, 0.1) from an integer hash of (parameter, index); norm
// scales near 1, so activations stay of order 1.
StatusOr<std::vector<models::ParamMap>> PseudoRandom(const std::string&, const std::vector<models::ParamSpec>& manifest,
                                                     int) {
  std::map<std::string, Array> m;
  uint32_t seed = 1;
  for (const models::ParamSpec& p : manifest) {
    Array a = Array::Host(DType::kF32, p.shape);
    float* d = a.mutable_data<float>();
    const bool scale = p.shape.size() == 1 && p.name.find("norm") != std::string::npos;
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      uint32_t h = (seed * 2654435761u) ^ (static_cast<uint32_t>(i) * 2246822519u);
      h ^= h >> 15;
      h *= 2654435761u;
      h ^= h >> 13;
      const float u = static_cast<float>(h % 20000) / 100000.0f - 0.1f;
      d[i] = scale ? 1.0f + u : u;
    }
    ++seed;
    m.emplace(p.name, std::move(a));
  }
  return std::vector<models::ParamMap>{models::ParamMap(std::move(m))};
}

double Priced(const std::vector<mesh::OpRecord>& ops, const mesh::ChipSpec& chip) {
  double s = 0;
  for (const mesh::OpRecord& op : ops) s += mesh::PriceOp(op, chip).seconds;
  return s;
}

TEST(FluxTest, TinyRealRunRecordsWhatItsDryRunAndSimulateDo) {
  const ModelConfigs cf = Configs("flux-tiny");
  auto real = BuildTextToImage(cf, PseudoRandom, nullptr, nullptr);
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  const TextToImage& flow = **real;
  EXPECT_TRUE(flow.is_flux());
  EXPECT_EQ(std::string(flow.family().name), "flux");
  GenerateRequest r;
  r.steps = 3;
  ASSERT_TRUE(flow.Validate(r, 1, /*dry_run=*/true).ok());
  auto plan = flow.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->scheduler, "flow_euler");
  EXPECT_FALSE(plan->guided);
  // CLIP's 77 ids and T5's 512 (a guidance-distilled transformer), all in
  // the tiny vocabularies.
  ASSERT_EQ(flow.conditioning().token_length(1), 512);
  std::vector<Array> ids;
  for (int t = 0; t < 2; ++t) {
    ids.push_back(Array::Host(DType::kI32, {1, flow.conditioning().token_length(t)}));
    for (int64_t i = 0; i < ids.back().num_elements(); ++i) ids.back().mutable_data<int32_t>()[i] = (7 * i + 3) % 900;
  }
  const uint32_t keys[2] = {0, 42};
  DeviceInputs in;
  in.ids = ids;
  in.keys = keys;
  models::Ctx ctx;
  ctx.precision = r.precision;
  std::vector<mesh::OpRecord> real_ops, dry_ops;
  ctx.ops = &real_ops;
  auto out = flow.RunDevice(ctx, *plan, r, in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->decoded.shape(), (mesh::Shape{1, 3, 64, 64}));
  double lo = 1e30, hi = -1e30;
  for (int64_t i = 0; i < out->decoded.num_elements(); ++i) {
    const float v = out->decoded.data<float>()[i];
    ASSERT_TRUE(std::isfinite(v)) << i;
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
  }
  EXPECT_LT(lo, hi);  // an image, not a constant

  auto zeros = BuildTextToImage(
      cf, [](const std::string& c, const std::vector<models::ParamSpec>& m, int n) { return ZeroParams(c, m, n); },
      nullptr, nullptr);
  ASSERT_TRUE(zeros.ok());
  ctx.dry_run = true;
  ctx.ops = &dry_ops;
  ASSERT_TRUE((*zeros)->RunDevice(ctx, *plan, r, in).ok());
  ASSERT_EQ(real_ops.size(), dry_ops.size());
  for (size_t i = 0; i < real_ops.size(); ++i) {
    ASSERT_EQ(real_ops[i].name, dry_ops[i].name) << i;
    EXPECT_EQ(real_ops[i].shape, dry_ops[i].shape) << i << " " << real_ops[i].name;
    EXPECT_EQ(real_ops[i].cost.flops, dry_ops[i].cost.flops) << i << " " << real_ops[i].name;
    EXPECT_EQ(real_ops[i].cost.bytes(), dry_ops[i].cost.bytes()) << i << " " << real_ops[i].name;
  }
  const mesh::ChipSpec chip = *mesh::LoadChipSpec("v5e");
  const double seconds = Priced(real_ops, chip);
  EXPECT_GT(seconds, 0);
  EXPECT_DOUBLE_EQ(Priced(dry_ops, chip), seconds);

  SimulateOptions so;
  so.arch = "flux-tiny";
  so.mesh.devices = 1;
  so.request.steps = 3;
  auto sim = Simulate(so);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  EXPECT_NEAR(sim->modelled_seconds(), seconds, 1e-9 * seconds);
  EXPECT_EQ(sim->info["family"], "flux");
}

// flux-tiny split over a model axis of 2 (heads and MLP columns, psums)
// computes what it computes whole (the psums only reorder f32 sums), and
// its simulation records the collectives.
TEST(FluxTest, ModelAxisComputesWhatTheWholeModelDoes) {
  const ModelConfigs cf = Configs("flux-tiny");
  GenerateRequest r;
  r.steps = 2;
  r.precision = models::Precision::kHighest;
  std::vector<Array> ids;
  for (int64_t len : {int64_t{77}, int64_t{512}}) {
    ids.push_back(Array::Host(DType::kI32, {1, len}));
    for (int64_t i = 0; i < len; ++i) ids.back().mutable_data<int32_t>()[i] = (5 * i + 1) % 900;
  }
  const uint32_t keys[2] = {0, 7};
  DeviceInputs in;
  in.ids = ids;
  in.keys = keys;
  auto whole = BuildTextToImage(cf, PseudoRandom, nullptr, nullptr);
  ASSERT_TRUE(whole.ok());
  auto plan = (*whole)->MakePlan(r);
  ASSERT_TRUE(plan.ok());
  models::Ctx ctx;
  ctx.precision = r.precision;
  auto want = (*whole)->RunDevice(ctx, *plan, r, in);
  ASSERT_TRUE(want.ok()) << want.status().ToString();

  auto split = [](const std::string& c, const std::vector<models::ParamSpec>& m,
                  int ranks) -> StatusOr<std::vector<models::ParamMap>> {
    TPUMESH_ASSIGN_OR_RETURN(auto full, PseudoRandom(c, m, 1));
    return models::ShardParams(full[0], m, ranks);
  };
  auto sharded = BuildTextToImage(cf, split, nullptr, nullptr, 2);
  ASSERT_TRUE(sharded.ok()) << sharded.status().ToString();
  EXPECT_EQ((*sharded)->model_ranks(), 2);
  mesh::MeshSpec spec;
  spec.devices = 2;
  spec.axes = "data=1,model=2";
  auto m = mesh::CreateDataModelMesh(spec);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<std::vector<mesh::OpRecord>> ops(2);
  auto outs = (*m)->Pmap(
      [&](mesh::DeviceContext& dctx, std::span<const Array>) -> StatusOr<std::vector<Array>> {
        TPUMESH_ASSIGN_OR_RETURN(models::ModelAxis axis, models::ModelAxis::ForDevice(dctx));
        models::Ctx c{&dctx.device(), r.precision};
        c.model = &axis;
        c.ops = &ops[dctx.device_id()];
        TPUMESH_ASSIGN_OR_RETURN(DeviceOutputs o, (*sharded)->RunDevice(c, *plan, r, in));
        return std::vector<Array>{o.decoded};
      },
      {});
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  for (int d = 0; d < 2; ++d) {
    const Array& got = (*outs)[0].shards[d];
    ASSERT_EQ(got.shape(), want->decoded.shape());
    double worst = 0;
    for (int64_t i = 0; i < got.num_elements(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(got.data<float>()[i]) - want->decoded.data<float>()[i]));
    EXPECT_LT(worst, 1e-4) << "device " << d;
  }
  int psums = 0;
  for (const mesh::OpRecord& op : ops[0]) psums += op.type == "collective";
  EXPECT_GT(psums, 0);

  SimulateOptions so;
  so.arch = "flux-tiny";
  so.mesh = spec;
  so.request = r;
  auto sim = Simulate(so);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  EXPECT_GT(sim->logs[0].total().ici_bytes, 0);
}

// FLUX.1-dev and -schnell priced on a data-parallel mesh: one image per
// device, the transformer's 57 blocks per step, 512 or 256 T5 tokens.
TEST(FluxTest, DevAndSchnellSimulateOnADataMesh) {
  for (const char* arch : {"flux-dev", "flux-schnell"}) {
    SimulateOptions so;
    so.arch = arch;
    so.mesh.chip = "v6e";
    so.mesh.devices = 2;
    so.request.steps = 2;
    so.check_hbm = false;  // 31.4 GiB of bf16 weights: see docs/models.md
    auto r = Simulate(so);
    ASSERT_TRUE(r.ok()) << arch << ": " << r.status().ToString();
    EXPECT_EQ(r->images, 2);
    EXPECT_EQ(r->info["size"], "1024x1024");
    EXPECT_EQ(r->info["scheduler"], "flow_euler");
    EXPECT_GT(r->modelled_seconds(), 0);
    // The weights alone: 11.9 B (dev) + 4.76 B + 0.12 B + 0.08 B in bf16.
    EXPECT_GT(r->param_bytes[0], int64_t{33'000'000'000}) << arch;
    // With the limit enforced they do not fit a 32 GiB v6e chip.
    so.check_hbm = true;
    EXPECT_EQ(Simulate(so).status().code(), StatusCode::kResourceExhausted) << arch;
  }
}

TEST(FluxTest, RefusesWhatIsNotImplemented) {
  SimulateOptions so;
  so.arch = "flux-tiny";
  so.mesh.devices = 2;
  so.request.steps = 1;
  so.request.scheduler = "euler";
  auto s = Simulate(so);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("flow_euler"), std::string::npos) << s.status().ToString();
  so.request.scheduler = "";
  so.request.height = 70;  // not a multiple of 4 (the tiny VAE's factor 2 x the 2x2 packing)
  auto h = Simulate(so);
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("--height 70"), std::string::npos) << h.status().ToString();
  // SD models refuse the flow-matching scheduler.
  SimulateOptions sd;
  sd.arch = "tiny";
  sd.mesh.devices = 1;
  sd.request.steps = 1;
  sd.request.scheduler = "flow_euler";
  EXPECT_EQ(Simulate(sd).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpumesh::pipeline
