// models/flops.h: the analytic matmul FLOP counts against (1) diffusers'
// own modules for SD 1.5's UNet (PyTorch forward hooks on every Conv2d,
// Linear and attention bmm of diffusers 0.30.0, batch 2, 64x64 latents, 77
// tokens: conv 887.9, linear 466.6, attention 252.1 GFLOP) and (2) the MXU
// products the model code itself records in a dry run (Ctx::ops), for every
// built-in architecture and component (Flux's T5 and transformer too).
#include "models/flops.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mesh/cost_model.h"
#include "models/architectures.h"
#include "models/clip.h"
#include "models/configs.h"
#include "models/flux.h"
#include "models/t5.h"
#include "models/unet.h"
#include "models/vae.h"

namespace tpumesh::models {
namespace {

using mesh::Array;
using mesh::DType;

// Zero weights of the manifest's shapes (large ones are untouched mapped
// pages): a dry run reads none of them.
ParamMap ZeroParams(const std::vector<ParamSpec>& manifest) {
  std::map<std::string, Array> m;
  for (const ParamSpec& p : manifest) m.emplace(p.name, Array::Host(DType::kF32, p.shape));
  return ParamMap(std::move(m));
}

// The recorded MXU work of a dry run, by the category flops.h uses.
MatmulFlops Recorded(const std::vector<mesh::OpRecord>& ops) {
  MatmulFlops f;
  for (const mesh::OpRecord& r : ops) {
    double sum = 0;
    for (const mesh::MxuMatmul& m : r.mxu) sum += 2.0 * m.m * m.n * m.k * m.count;
    if (r.type == "conv") f.conv += sum;
    else if (r.type == "attention") f.attention += sum;
    else f.linear += sum;
  }
  return f;
}

void ExpectSame(const MatmulFlops& want, const MatmulFlops& got, const std::string& what) {
  EXPECT_DOUBLE_EQ(want.conv, got.conv) << what;
  EXPECT_DOUBLE_EQ(want.linear, got.linear) << what;
  EXPECT_DOUBLE_EQ(want.attention, got.attention) << what;
}

TEST(FlopsTest, Sd15UNetMatchesDiffusersModuleHooks) {
  auto arch = BuiltinArchitecture("sd15");
  ASSERT_TRUE(arch.ok());
  auto cfg = ParseUNetConfig(arch->unet, "sd15 unet");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  const MatmulFlops f = UNetMatmulFlops(*cfg, 2, 64, 64, 77);
  std::printf("sd15 unet, batch 2, 64x64: conv %.4f + linear %.4f + attention %.4f = %.4f GFLOP\n", f.conv / 1e9,
              f.linear / 1e9, f.attention / 1e9, f.total() / 1e9);
  // The hook figures are rounded to 0.1 GFLOP.
  EXPECT_NEAR(f.conv / 1e9, 887.9, 0.05);
  EXPECT_NEAR(f.linear / 1e9, 466.6, 0.05);
  EXPECT_NEAR(f.attention / 1e9, 252.1, 0.05);
  EXPECT_NEAR(f.total() / 1e9, 1606.5, 0.1);
}

TEST(FlopsTest, EqualTheProductsTheModelsRecordInADryRun) {
  for (const std::string& name : ArchitectureNames()) {
    auto arch = BuiltinArchitecture(name);
    ASSERT_TRUE(arch.ok()) << name;
    Ctx ctx;
    ctx.precision = Precision::kDefault;
    ctx.dry_run = true;
    std::vector<mesh::OpRecord> ops;
    ctx.ops = &ops;
    const int64_t b = 2;

    auto tc = ParseClipTextConfig(arch->text_encoder, name);
    ASSERT_TRUE(tc.ok()) << tc.status().ToString();
    auto clip = ClipTextModel::Create(*tc, ZeroParams(ClipTextParams(*tc)));
    ASSERT_TRUE(clip.ok()) << clip.status().ToString();
    ASSERT_TRUE(clip->Forward(ctx, Array::Host(DType::kI32, {b, 77})).ok());
    ExpectSame(ClipTextMatmulFlops(*tc, b, 77), Recorded(ops), name + " text encoder");

    if (!arch->transformer.empty()) {
      // Flux: T5 on 64 tokens, the transformer on a 32x32 latent (16x16
      // tokens) joined by them; lazy zero weights (the real ones are ~47 GB).
      auto lazy = [](const std::vector<ParamSpec>& manifest) {
        std::map<std::string, Array> m;
        for (const ParamSpec& p : manifest) m.emplace(p.name, Array::LazyZeros(DType::kF32, p.shape));
        return std::vector<ParamMap>{ParamMap(std::move(m))};
      };
      auto t5c = ParseT5EncoderConfig(arch->text_encoder_2, name);
      ASSERT_TRUE(t5c.ok()) << t5c.status().ToString();
      auto t5 = T5EncoderModel::Create(*t5c, lazy(T5EncoderParams(*t5c)));
      ASSERT_TRUE(t5.ok()) << t5.status().ToString();
      ops.clear();
      ASSERT_TRUE(t5->Forward(ctx, Array::Host(DType::kI32, {b, 64})).ok());
      ExpectSame(T5EncoderMatmulFlops(*t5c, b, 64), Recorded(ops), name + " t5");
      auto fc = ParseFluxTransformerConfig(arch->transformer, name);
      ASSERT_TRUE(fc.ok()) << fc.status().ToString();
      auto tr = FluxTransformerModel::Create(*fc, lazy(FluxTransformerParams(*fc)));
      ASSERT_TRUE(tr.ok()) << tr.status().ToString();
      ops.clear();
      const Array hidden = Array::Host(DType::kF32, {b, 16 * 16, fc->in_channels});
      const Array context = Array::Host(DType::kF32, {b, 64, fc->joint_attention_dim});
      const Array pooled = Array::Host(DType::kF32, {b, fc->pooled_projection_dim});
      FluxTransformerModel::Inputs in{&hidden, 16, 16, &context, &pooled, std::vector<float>(b, 0.5f),
                                      std::vector<float>(fc->guidance_embeds ? b : 0, 3.5f)};
      auto y = tr->Forward(ctx, in);
      ASSERT_TRUE(y.ok()) << y.status().ToString();
      EXPECT_EQ(y->shape(), (mesh::Shape{b, 256, fc->out()}));
      ExpectSame(FluxTransformerMatmulFlops(*fc, b, 32, 32, 64), Recorded(ops), name + " transformer");
    } else {
      auto uc = ParseUNetConfig(arch->unet, name);
      ASSERT_TRUE(uc.ok()) << uc.status().ToString();
      auto unet = UNetModel::Create(*uc, ZeroParams(UNetParams(*uc)));
      ASSERT_TRUE(unet.ok()) << unet.status().ToString();
      const int64_t hw = arch->default_image_size / 8;
      ops.clear();
      const Array sample = Array::Host(DType::kF32, {b, uc->in_channels, hw, hw});
      const Array ehs = Array::Host(DType::kF32, {b, 77, uc->cross_attention_dim[0]});
      UNetModel::AddedCond added;  // SDXL's text_time conditioning; ignored by the others
      added.text_embeds = Array::Host(
          DType::kF32, {b, uc->projection_class_embeddings_input_dim - 6 * uc->addition_time_embed_dim});
      added.time_ids.assign(6 * b, 1024.0f);
      auto y = unet->Forward(ctx, sample, std::vector<float>(b, 981.0f), ehs, {},
                             uc->text_time_embedding ? &added : nullptr);
      ASSERT_TRUE(y.ok()) << y.status().ToString();
      ExpectSame(UNetMatmulFlops(*uc, b, hw, hw, 77), Recorded(ops), name + " unet");
    }

    auto vc = ParseVaeConfig(arch->vae, name);
    ASSERT_TRUE(vc.ok()) << vc.status().ToString();
    auto vae = VaeModel::Create(*vc, ZeroParams(VaeParams(*vc)));
    ASSERT_TRUE(vae.ok()) << vae.status().ToString();
    const int64_t px = 64, lat = px / vc->scale_factor();
    ops.clear();
    ASSERT_TRUE(vae->Decode(ctx, Array::Host(DType::kF32, {b, vc->latent_channels, lat, lat})).ok());
    ExpectSame(VaeDecoderMatmulFlops(*vc, b, lat, lat), Recorded(ops), name + " vae decoder");
    ops.clear();
    ASSERT_TRUE(vae->EncodeMean(ctx, Array::Host(DType::kF32, {b, vc->in_channels, px, px})).ok());
    ExpectSame(VaeEncoderMatmulFlops(*vc, b, px, px), Recorded(ops), name + " vae encoder");
  }
}

}  // namespace
}  // namespace tpumesh::models
