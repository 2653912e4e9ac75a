// LoRA (pipeline/lora.h): the weights the loader fuses against diffusers'
// fused weights (tests/data/lora, scripts/refdata/make_lora_refs.py) for the
// tiny SD and SDXL models in the kohya, diffusers/PEFT and older diffusers
// key formats; the fused weights split over the model axis as the weights
// they modify; generate with a LoRA (the images, the PNG parameters, data=8
// against data=4,model=2); and the bad inputs, each refused naming the file
// and the key.
#include "pipeline/lora.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/h5io.h"
#include "io/model_file.h"
#include "kernels/bf16.h"
#include "models/architectures.h"
#include "nlohmann/json.hpp"
#include "pipeline/convert.h"
#include "pipeline/generate.h"
#include "pipeline/loader.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using mesh::Array;

const std::string kData = std::string(TPUMESH_TEST_DATA_DIR) + "/lora/";

// tiny-sd-b (tests/data) as a pipeline (its text encoder, UNet and VAE, the
// tiny architecture's tokenizer and scheduler), converted once.
std::string TinySdB() {
  static const std::string path = [] {
    const std::string dir = tpumesh::testing::ProcessTempDir() + "/lora_tiny_sd_b";
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

// tiny-sdxl-b (tests/data), converted once.
std::string TinySdxlB() {
  static const std::string path = [] {
    const std::string out = tpumesh::testing::ProcessTempDir() + "/lora_tiny_sdxl_b.h5";
    auto st = ConvertDiffusersFolder(std::string(TPUMESH_TEST_DATA_DIR) + "/tiny-sdxl-b", out, mesh::DType::kF32);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return out;
  }();
  return path;
}

StatusOr<LoraSet> OpenFor(const std::string& model, const std::vector<LoraSpec>& specs) {
  TPUMESH_ASSIGN_OR_RETURN(auto file, ModelFile::Open(model));
  TPUMESH_ASSIGN_OR_RETURN(LoraTargets targets, ReadLoraTargets(*file));
  return LoraSet::Open(specs, targets);
}

// Each component's parameters as the loader builds them (one model rank of
// `ranks`), with the LoRAs fused or none.
std::map<std::string, std::vector<models::ParamMap>> Loaded(const std::string& model, const LoraSet* loras,
                                                            int ranks = 1) {
  std::map<std::string, std::vector<models::ParamMap>> out;
  auto file = ModelFile::Open(model);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return out;
  auto flow = LoadTextToImage(**file, ranks, loras);
  EXPECT_TRUE(flow.ok()) << flow.status().ToString();
  if (!flow.ok()) return out;
  for (const ComponentParams& c : (*flow)->components()) out[c.name] = *c.ranks;
  return out;
}

struct Case {
  std::string label;               // the test's
  std::string name;                // tests/data/lora/NAME.h5
  std::vector<std::string> files;  // the LoRAs, fused in order
  bool sdxl;
};

class LoraParityTest : public ::testing::TestWithParam<Case> {};

// The weights the loader fuses against diffusers' (load_lora_weights +
// fuse_lora) within 1e-6, every weight the LoRA does not touch unchanged to
// the bit, and the set of touched weights the reference's.
TEST_P(LoraParityTest, FusedWeightsMatchDiffusers) {
  const Case& c = GetParam();
  const std::string ref = kData + c.name + ".h5";
  const std::string model = c.sdxl ? TinySdxlB() : TinySdB();
  auto scales = H5ReadArray(ref, "scales");
  ASSERT_TRUE(scales.ok()) << scales.status().ToString();
  ASSERT_EQ(scales->num_elements(), static_cast<int64_t>(c.files.size()));
  std::vector<LoraSpec> specs;
  for (size_t i = 0; i < c.files.size(); ++i) specs.push_back({kData + c.files[i], scales->data<float>()[i]});
  auto set = OpenFor(model, specs);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const auto fused = Loaded(model, &*set);
  const auto plain = Loaded(model, nullptr);
  auto components = H5ReadStrings(ref, "components");
  ASSERT_TRUE(components.ok()) << components.status().ToString();
  EXPECT_EQ(components->size(), c.sdxl ? 3u : 2u);
  for (const std::string& comp : *components) {
    auto names = H5ReadStrings(ref, comp + "_names");
    ASSERT_TRUE(names.ok()) << names.status().ToString();
    EXPECT_EQ(set->Touched(comp), *names) << comp;
    const std::set<std::string> touched(names->begin(), names->end());
    ASSERT_TRUE(fused.count(comp) && plain.count(comp)) << comp;
    double worst = 0;
    for (const auto& [name, a] : fused.at(comp)[0].all()) {
      const Array& before = plain.at(comp)[0][name];
      ASSERT_EQ(a.shape(), before.shape()) << name;
      const bool changed = std::memcmp(a.raw(), before.raw(), a.size_bytes()) != 0;
      EXPECT_EQ(changed, touched.count(name) > 0) << comp << "/" << name;
      if (!touched.count(name)) continue;
      auto want = H5ReadArray(ref, comp + "/" + name);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      ASSERT_EQ(want->num_elements(), a.num_elements()) << name;
      for (int64_t i = 0; i < a.num_elements(); ++i)
        worst = std::max(worst, std::fabs(double(a.data<float>()[i]) - want->data<float>()[i]));
    }
    std::printf("%s %s: %zu fused weights, max |tpumesh - diffusers| %.3g\n", c.label.c_str(), comp.c_str(),
                touched.size(), worst);
    EXPECT_LE(worst, 1e-6) << c.name << " " << comp;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, LoraParityTest,
    ::testing::Values(Case{"sd_kohya", "sd_kohya", {"sd_kohya.safetensors"}, false},
                      Case{"sd_peft", "sd_peft", {"sd_peft.safetensors"}, false},
                      Case{"sd_old", "sd_old", {"sd_old.safetensors"}, false},
                      Case{"sd_two", "sd_two", {"sd_two_1.safetensors", "sd_two_2.safetensors"}, false},
                      // sd_kohya's tensors under SGM UNet names: the same weights.
                      Case{"sd_kohya_sgm", "sd_kohya", {"sd_kohya_sgm.safetensors"}, false},
                      Case{"sdxl_kohya", "sdxl_kohya", {"sdxl_kohya.safetensors"}, true},
                      Case{"sdxl_peft", "sdxl_peft", {"sdxl_peft.safetensors"}, true}),
    [](const auto& info) { return info.param.label; });

// A bf16 model file: the fused weights against diffusers' fusion into the
// pipeline loaded in bfloat16 (peft: the LoRA cast to bf16, the delta in f32
// rounded to bf16, the sum rounded), bf16 bits for bf16 bits.
TEST(LoraBf16Test, FusedBf16WeightsMatchDiffusersInBfloat16) {
  const std::string model = tpumesh::testing::ProcessTempDir() + "/lora_tiny_sdxl_b_bf16.h5";
  ASSERT_TRUE(ConvertDiffusersFolder(std::string(TPUMESH_TEST_DATA_DIR) + "/tiny-sdxl-b", model, mesh::DType::kBF16).ok());
  const std::string ref = kData + "sdxl_kohya_bf16.h5";
  auto set = OpenFor(model, {{kData + "sdxl_kohya.safetensors", 1.5}});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const auto fused = Loaded(model, &*set);
  auto components = H5ReadStrings(ref, "components");
  ASSERT_TRUE(components.ok()) << components.status().ToString();
  int64_t values = 0, off = 0;
  for (const std::string& comp : *components) {
    auto names = H5ReadStrings(ref, comp + "_names");
    ASSERT_TRUE(names.ok());
    for (const std::string& name : *names) {
      const Array& a = fused.at(comp)[0][name];
      ASSERT_EQ(a.dtype(), mesh::DType::kBF16) << name;
      auto want = H5ReadRaw(ref, comp + "/" + name);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      ASSERT_EQ(want->dtype, "bfloat16");
      ASSERT_EQ(static_cast<int64_t>(want->data.size()), a.size_bytes()) << name;
      const auto* got = a.data<kernels::bf16>();
      const auto* exp = reinterpret_cast<const uint16_t*>(want->data.data());
      for (int64_t i = 0; i < a.num_elements(); ++i, ++values) {
        const int d = std::abs(int(got[i].bits) - int(exp[i]));
        EXPECT_LE(d, 1) << comp << "/" << name << "[" << i << "]";
        off += d != 0;
      }
    }
  }
  std::printf("%lld bf16 fused values, %lld one bf16 step off diffusers'\n", static_cast<long long>(values),
              static_cast<long long>(off));
  EXPECT_GT(values, 10000);
  EXPECT_LE(off * 1000, values);
}

// Under model=2 each rank holds its share of the fused weight: the slices
// the loader cuts from the whole fused weight along the split dimension.
TEST(LoraShardingTest, EachModelRankHoldsItsShareOfTheFusedWeights) {
  const std::string model = TinySdxlB();
  auto set = OpenFor(model, {{kData + "sdxl_kohya.safetensors", 1.5}});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const auto whole = Loaded(model, &*set, 1);
  const auto split = Loaded(model, &*set, 2);
  auto file = ModelFile::Open(model);
  ASSERT_TRUE(file.ok());
  auto flow = LoadTextToImage(**file, 2, &*set);
  ASSERT_TRUE(flow.ok()) << flow.status().ToString();
  int checked = 0;
  for (const ComponentParams& c : (*flow)->components()) {
    if (c.name == "vae") continue;
    for (const models::ParamSpec& p : c.manifest) {
      const auto touched = set->Touched(c.name);
      if (std::find(touched.begin(), touched.end(), p.name) == touched.end() || !p.split.SplitsOver(2)) continue;
      const Array& full = whole.at(c.name)[0][p.name];
      const int d = p.split.dim;
      int64_t outer = 1, inner = 1;
      for (int i = 0; i < d; ++i) outer *= full.dim(i);
      for (int i = d + 1; i < full.rank(); ++i) inner *= full.dim(i);
      const int64_t unit = full.dim(d) / (p.split.parts * p.split.units);
      for (int r = 0; r < 2; ++r) {
        const Array& share = split.at(c.name)[r][p.name];
        const auto* units = split.at(c.name)[r].split(p.name);
        ASSERT_NE(units, nullptr) << p.name;
        const int64_t rows = (units->second - units->first) * unit;
        ASSERT_EQ(share.dim(d), rows * p.split.parts) << p.name;
        for (int64_t o = 0; o < outer; ++o)
          for (int part = 0; part < p.split.parts; ++part)
            for (int64_t k = 0; k < rows; ++k) {
              const int64_t src = part * (full.dim(d) / p.split.parts) + units->first * unit + k;
              const float* a = full.data<float>() + (o * full.dim(d) + src) * inner;
              const float* b = share.data<float>() + (o * share.dim(d) + part * rows + k) * inner;
              ASSERT_EQ(std::memcmp(a, b, inner * sizeof(float)), 0) << p.name << " rank " << r;
            }
      }
      ++checked;
    }
  }
  std::printf("%d split LoRA-fused weights checked share by share\n", checked);
  EXPECT_GT(checked, 10);
}

StatusOr<GenerateResult> RunGenerate(const std::string& model, const std::string& mesh, int bpd,
                                     const std::vector<LoraSpec>& loras) {
  GeneratorOptions o;
  o.model = model;
  o.mesh.axes = mesh;
  o.loras = loras;
  TPUMESH_ASSIGN_OR_RETURN(auto gen, Generator::Open(o));
  GenerateRequest r;
  r.prompts = {"a red fox in the snow", "a lighthouse at dusk"};
  r.prompts.resize(static_cast<size_t>(gen->data_size()) * bpd, "a bowl of fruit");
  r.steps = 2;
  r.seed = 11;
  r.height = 48;
  r.width = 64;
  r.batch_per_device = bpd;
  r.precision = models::Precision::kHighest;
  r.keep_step_latents = true;
  return gen->Generate(r);
}

// generate with two LoRAs on the tiny SDXL: other images than without them;
// the same images on data=8 and on data=4,model=2 (each device its share of
// the fused weights); the LoRAs in every PNG's parameters.
TEST(LoraGenerateTest, ImagesMeshShapesAndPngParameters) {
  const std::string model = TinySdxlB();
  const std::vector<LoraSpec> loras = {{kData + "sdxl_kohya.safetensors", 1.5}, {kData + "sdxl_peft.safetensors", -0.5}};
  auto plain = RunGenerate(model, "data=8", 1, {});
  auto ref = RunGenerate(model, "data=8", 1, loras);
  auto split = RunGenerate(model, "data=4,model=2", 2, loras);
  ASSERT_TRUE(plain.ok() && ref.ok() && split.ok())
      << plain.status().ToString() << ref.status().ToString() << split.status().ToString();
  EXPECT_EQ(ref->loras, "sdxl_kohya.safetensors:1.5, sdxl_peft.safetensors:-0.5");
  EXPECT_EQ(plain->loras, "");
  // The LoRAs change the images.
  int64_t differ = 0;
  for (size_t i = 0; i < ref->images.size(); ++i)
    for (size_t j = 0; j < ref->images[i].rgb.size(); ++j) differ += ref->images[i].rgb[j] != plain->images[i].rgb[j];
  EXPECT_GT(differ, static_cast<int64_t>(ref->images[0].rgb.size()));
  // data=4,model=2 against data=8.
  tpumesh::testing::ExpectEachStepWithin(split->latents_after_step, ref->latents_after_step, 1e-5, "lora model=2");
  const int64_t per = static_cast<int64_t>(ref->images[0].rgb.size());
  Array want = Array::Host(mesh::DType::kI32, mesh::Shape{static_cast<int64_t>(ref->images.size()), per});
  std::vector<const std::vector<uint8_t>*> got;
  for (size_t i = 0; i < ref->images.size(); ++i) {
    for (int64_t j = 0; j < per; ++j) want.mutable_data<int32_t>()[i * per + j] = ref->images[i].rgb[j];
    got.push_back(&split->images[i].rgb);
  }
  tpumesh::testing::ExpectImagesWithinOneLevel(got, want, "lora model=2");
  // The PNG parameters.
  GenerateRequest r;
  r.steps = 2;
  auto files = EncodeImages(tpumesh::testing::TestTempDir(), *ref, r, "tiny-sdxl-b.h5");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  for (const auto& [path, png] : *files)
    EXPECT_THAT(png, HasSubstr("LoRA: sdxl_kohya.safetensors:1.5, sdxl_peft.safetensors:-0.5")) << path;
}

// A small safetensors file: name -> (shape, f32 values); metadata as
// __metadata__.
void WriteSafetensors(const std::string& path,
                      const std::map<std::string, std::pair<mesh::Shape, std::vector<float>>>& tensors,
                      const std::map<std::string, std::string>& metadata = {}) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string data;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", "F32"}, {"shape", t.first}, {"data_offsets", {data.size(), data.size() + 4 * t.second.size()}}};
    data.append(reinterpret_cast<const char*>(t.second.data()), 4 * t.second.size());
  }
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h << data;
}

std::vector<float> Ones(int64_t n, float v = 0.5f) { return std::vector<float>(static_cast<size_t>(n), v); }

// A model of one Linear [3, 2] and one conv [2, 3, 3, 3] to fuse into.
LoraTargets SmallTargets() {
  return {{"unet", {{"time_embedding.linear_1.weight", {3, 2}}, {"conv_in.weight", {2, 3, 3, 3}}}}};
}

// The arithmetic on weights held in f32 and in bf16 (peft's on a bf16
// layer: the LoRA rounded to bf16, the delta rounded, then the sum).
TEST(LoraFuseTest, F32AndBf16Arithmetic) {
  const std::string path = tpumesh::testing::TestTempDir() + "/small.safetensors";
  // down [1, 2] = (0.3, -0.7), up [3, 1] = (1.1, 0.2, -0.9), alpha 2 (rank 1).
  WriteSafetensors(path, {{"lora_unet_time_embedding_linear_1.lora_down.weight", {{1, 2}, {0.3f, -0.7f}}},
                          {"lora_unet_time_embedding_linear_1.lora_up.weight", {{3, 1}, {1.1f, 0.2f, -0.9f}}},
                          {"lora_unet_time_embedding_linear_1.alpha", {{}, {2.0f}}}});
  auto set = LoraSet::Open({{path, 0.75}}, SmallTargets());
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const std::vector<float> w0 = {1.0f, -2.0f, 0.125f, 3.3f, 0.01f, -0.5f};
  std::map<std::string, Array> f32 = {{"time_embedding.linear_1.weight", Array::HostFrom<float>({3, 2}, w0)}};
  ASSERT_TRUE(set->Fuse("unet", &f32).ok());
  const float down[2] = {0.3f, -0.7f}, up[3] = {1.1f, 0.2f, -0.9f};
  const float s = static_cast<float>(2.0 / 1 * 0.75);
  std::vector<kernels::bf16> b(6);
  for (int i = 0; i < 6; ++i) b[i] = kernels::F32ToBf16(w0[i]);
  std::map<std::string, Array> bf = {{"time_embedding.linear_1.weight", Array::HostFrom<kernels::bf16>({3, 2}, b)}};
  ASSERT_TRUE(set->Fuse("unet", &bf).ok());
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(f32.begin()->second.data<float>()[o * 2 + i], w0[o * 2 + i] + up[o] * down[i] * s) << o << i;
      const float d = kernels::RoundToBf16(kernels::RoundToBf16(up[o]) * kernels::RoundToBf16(down[i]) * s);
      const float want = kernels::RoundToBf16(kernels::RoundToBf16(w0[o * 2 + i]) + d);
      EXPECT_EQ(kernels::Bf16ToF32(bf.begin()->second.data<kernels::bf16>()[o * 2 + i]), want) << o << i;
    }
  // A scale that overflows f32 is refused, naming the file, the key and the weight.
  auto huge = LoraSet::Open({{path, 1e39}}, SmallTargets());
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  for (std::map<std::string, Array>* w : {&f32, &bf}) {
    const Status st = huge->Fuse("unet", w);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("--lora " + path + ": key lora_unet_time_embedding_linear_1.lora_down.weight: "
                                        "the fused unet/time_embedding.linear_1.weight overflows"));
  }
}

// alpha / rank as diffusers reads it: kohya's .alpha, or rank without any;
// the diffusers metadata's lora_alpha, alpha_pattern ("^" anchored, or a
// name suffix) and use_rslora (alpha / sqrt(rank)); no metadata: rank.
TEST(LoraFuseTest, AlphaOverRankAsDiffusersReadsIt) {
  const std::string dir = tpumesh::testing::TestTempDir();
  // rank 4: down rows (1, 0) and zeros, up column 0 = (1, 1, 1): delta[o][0] = scaling.
  std::vector<float> down(8, 0.0f), up(12, 0.0f);
  down[0] = 1.0f;
  for (int o = 0; o < 3; ++o) up[o * 4] = 1.0f;
  auto scaling = [&](const std::string& name, const std::map<std::string, std::pair<mesh::Shape, std::vector<float>>>& t,
                     const std::map<std::string, std::string>& meta, double scale) -> double {
    const std::string path = dir + "/" + name + ".safetensors";
    WriteSafetensors(path, t, meta);
    auto set = LoraSet::Open({{path, scale}}, SmallTargets());
    EXPECT_TRUE(set.ok()) << name << ": " << set.status().ToString();
    if (!set.ok()) return NAN;
    std::map<std::string, Array> w = {{"time_embedding.linear_1.weight", Array::Host(mesh::DType::kF32, {3, 2})}};
    EXPECT_TRUE(set->Fuse("unet", &w).ok());
    return w.begin()->second.data<float>()[0];
  };
  const std::string kd = "lora_unet_time_embedding_linear_1.lora_down.weight",
                    ku = "lora_unet_time_embedding_linear_1.lora_up.weight",
                    ka = "lora_unet_time_embedding_linear_1.alpha";
  EXPECT_EQ(scaling("kohya_alpha", {{kd, {{4, 2}, down}}, {ku, {{3, 4}, up}}, {ka, {{}, {1.0f}}}}, {}, 0.5),
            static_cast<float>(1.0 / 4 * 0.5));
  EXPECT_EQ(scaling("kohya_no_alpha", {{kd, {{4, 2}, down}}, {ku, {{3, 4}, up}}}, {}, 0.5), 0.5f);
  const std::string pd = "unet.time_embedding.linear_1.lora_A.weight", pu = "unet.time_embedding.linear_1.lora_B.weight";
  EXPECT_EQ(scaling("peft_no_meta", {{pd, {{4, 2}, down}}, {pu, {{3, 4}, up}}}, {}, 1.25), 1.25f);
  EXPECT_EQ(scaling("peft_alpha", {{pd, {{4, 2}, down}}, {pu, {{3, 4}, up}}},
                    {{"lora_adapter_metadata", R"({"unet.r": 4, "unet.lora_alpha": 6})"}}, 1.0),
            1.5f);
  EXPECT_EQ(scaling("peft_anchored", {{pd, {{4, 2}, down}}, {pu, {{3, 4}, up}}},
                    {{"lora_adapter_metadata",
                      R"({"unet.r": 4, "unet.lora_alpha": 6, "unet.alpha_pattern": {"^time_embedding.linear_1": 2}})"}},
                    1.0),
            0.5f);
  // A pattern anchored elsewhere does not select the module; a suffix does.
  EXPECT_EQ(scaling("peft_other", {{pd, {{4, 2}, down}}, {pu, {{3, 4}, up}}},
                    {{"lora_adapter_metadata",
                      R"({"unet.r": 4, "unet.lora_alpha": 6, "unet.alpha_pattern": {"^linear_1": 2}})"}},
                    1.0),
            1.5f);
  EXPECT_EQ(scaling("peft_suffix", {{pd, {{4, 2}, down}}, {pu, {{3, 4}, up}}},
                    {{"lora_adapter_metadata",
                      R"({"unet.r": 4, "unet.lora_alpha": 6, "unet.alpha_pattern": {"linear_1": 2}})"}},
                    1.0),
            0.5f);
  EXPECT_EQ(scaling("peft_rslora", {{pd, {{4, 2}, down}}, {pu, {{3, 4}, up}}},
                    {{"lora_adapter_metadata", R"({"unet.r": 4, "unet.lora_alpha": 6, "unet.use_rslora": true})"}},
                    1.0),
            3.0f);
}

// Each bad input: InvalidArgument (NotFound for a missing file) naming the
// file and, where one is at fault, the key.
TEST(LoraErrorsTest, EachBadInputNamesTheFileAndTheKey) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string down = "lora_unet_time_embedding_linear_1.lora_down.weight";
  const std::string up = "lora_unet_time_embedding_linear_1.lora_up.weight";
  struct Bad {
    std::string label;
    std::map<std::string, std::pair<mesh::Shape, std::vector<float>>> tensors;
    std::map<std::string, std::string> metadata;
    std::string key, why;
  };
  const std::vector<Bad> bads = {
      {"unknown_kohya", {{down, {{1, 2}, Ones(2)}}, {up, {{3, 1}, Ones(3)}},
                         {"lora_unet_time_embedding_linear_1.lora_mid.weight", {{1}, Ones(1)}}},
       {}, "lora_unet_time_embedding_linear_1.lora_mid.weight", "unknown kohya LoRA key"},
      {"unknown_module", {{"lora_unet_no_such_layer.lora_down.weight", {{1, 2}, Ones(2)}},
                          {"lora_unet_no_such_layer.lora_up.weight", {{3, 1}, Ones(3)}}},
       {}, "lora_unet_no_such_layer.lora_down.weight", "no Linear or conv module"},
      {"foreign_key", {{"model.diffusion_model.x.weight", {{1}, Ones(1)}}}, {}, "model.diffusion_model.x.weight",
       "unknown LoRA key"},
      {"mixed", {{down, {{1, 2}, Ones(2)}}, {up, {{3, 1}, Ones(3)}}, {"unet.conv_in.lora_A.weight", {{1, 3, 3, 3}, Ones(27)}}},
       {}, "unet.conv_in.lora_A.weight", "unknown key in a kohya LoRA"},
      {"missing_up", {{down, {{1, 2}, Ones(2)}}}, {}, down, "no up weight"},
      {"missing_down", {{"unet.conv_in.lora_B.weight", {{2, 1, 1, 1}, Ones(2)}}}, {}, "unet.conv_in.lora_B.weight",
       "no down weight"},
      {"rank_mismatch", {{down, {{2, 2}, Ones(4)}}, {up, {{3, 1}, Ones(3)}}}, {}, up, "has rank 1"},
      {"other_arch", {{down, {{4, 5}, Ones(20)}}, {up, {{3, 4}, Ones(12)}}}, {}, down, "do not fit"},
      {"conv_shape", {{"unet.conv_in.lora_A.weight", {{2, 3, 1, 1}, Ones(6)}}, {"unet.conv_in.lora_B.weight", {{2, 2, 1, 1}, Ones(4)}}},
       {}, "unet.conv_in.lora_A.weight", "do not fit"},
      {"text_encoder_2", {{"lora_te2_text_model_encoder_layers_0_mlp_fc1.lora_down.weight", {{1, 2}, Ones(2)}},
                          {"lora_te2_text_model_encoder_layers_0_mlp_fc1.lora_up.weight", {{3, 1}, Ones(3)}}},
       {}, "lora_te2_text_model_encoder_layers_0_mlp_fc1.lora_down.weight", "the model has no text_encoder_2"},
      {"nan", {{down, {{1, 2}, {0.5f, NAN}}}, {up, {{3, 1}, Ones(3)}}}, {}, down, "NaN or Inf"},
      {"alpha_shape", {{down, {{1, 2}, Ones(2)}}, {up, {{3, 1}, Ones(3)}},
                       {"lora_unet_time_embedding_linear_1.alpha", {{2}, Ones(2)}}},
       {}, "lora_unet_time_embedding_linear_1.alpha", "one number"},
      {"partial_alpha", {{down, {{1, 2}, Ones(2)}}, {up, {{3, 1}, Ones(3)}},
                         {"lora_unet_conv_in.lora_down.weight", {{1, 3, 3, 3}, Ones(27)}},
                         {"lora_unet_conv_in.lora_up.weight", {{2, 1, 1, 1}, Ones(2)}},
                         {"lora_unet_conv_in.alpha", {{}, Ones(1)}}},
       {}, down, "has no .alpha while other modules"},
      {"dora", {{down, {{1, 2}, Ones(2)}}, {up, {{3, 1}, Ones(3)}},
                {"lora_unet_time_embedding_linear_1.dora_scale", {{3, 1}, Ones(3)}}},
       {}, "lora_unet_time_embedding_linear_1.dora_scale", "DoRA"},
      {"meta_rank", {{"unet.conv_in.lora_A.weight", {{1, 3, 3, 3}, Ones(27)}}, {"unet.conv_in.lora_B.weight", {{2, 1, 1, 1}, Ones(2)}}},
       {{"lora_adapter_metadata", R"({"unet.r": 4, "unet.lora_alpha": 8})"}}, "unet.conv_in.lora_A.weight",
       "lora_adapter_metadata gives 4"},
  };
  for (const Bad& b : bads) {
    const std::string path = dir + "/" + b.label + ".safetensors";
    WriteSafetensors(path, b.tensors, b.metadata);
    auto set = LoraSet::Open({{path, 1.0}}, SmallTargets());
    ASSERT_FALSE(set.ok()) << b.label;
    const std::string msg = set.status().message();
    EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument) << b.label << ": " << msg;
    EXPECT_THAT(msg, HasSubstr("--lora " + path + ": key " + b.key + ": ")) << b.label;
    EXPECT_THAT(msg, HasSubstr(b.why)) << b.label;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << b.label << ": " << msg;
  }
  // Not a safetensors file; no file.
  const std::string text = dir + "/notes.safetensors";
  std::ofstream(text) << "this is not a LoRA, just some words\n";
  auto set = LoraSet::Open({{text, 1.0}}, SmallTargets());
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr("--lora " + text + ": not a LoRA safetensors file"));
  set = LoraSet::Open({{dir + "/absent.safetensors", 1.0}}, SmallTargets());
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(set.status().message(), HasSubstr("absent.safetensors"));
  // An SDXL LoRA on the tiny SD, an SD LoRA on the tiny SDXL.
  for (const auto& [lora, model] : {std::pair{"sdxl_kohya.safetensors", TinySdB()}, {"sd_kohya.safetensors", TinySdxlB()},
                                    {"sdxl_peft.safetensors", TinySdB()}, {"sd_peft.safetensors", TinySdxlB()}}) {
    auto s = OpenFor(model, {{kData + lora, 1.0}});
    ASSERT_FALSE(s.ok()) << lora;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << s.status().ToString();
    EXPECT_THAT(s.status().message(), HasSubstr("--lora " + kData + lora + ": key ")) << lora;
    std::printf("%s on %s: %s\n", lora, fs::path(model).filename().c_str(), s.status().message().c_str());
  }
}

TEST(LoraSpecTest, FileAndScale) {
  auto a = ParseLoraSpec("style.safetensors");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->path, "style.safetensors");
  EXPECT_EQ(a->scale, 1.0);
  auto b = ParseLoraSpec("dir/style.safetensors:-0.35");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->path, "dir/style.safetensors");
  EXPECT_EQ(b->scale, -0.35);
  EXPECT_EQ(LoraLabel(*b), "style.safetensors:-0.35");
  // A file whose name holds ':' is taken whole.
  const std::string odd = tpumesh::testing::TestTempDir() + "/a:1.5";
  std::ofstream(odd) << "x";
  auto c = ParseLoraSpec(odd);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->path, odd);
  for (const char* bad : {"style.safetensors:", "style.safetensors:abc", "style.safetensors:nan", "x:inf", "x:1e999",
                          ":0.5", "", "x:0.5f"}) {
    auto s = ParseLoraSpec(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.status().message(), HasSubstr("--lora")) << bad;
  }
}

}  // namespace
}  // namespace tpumesh::pipeline
