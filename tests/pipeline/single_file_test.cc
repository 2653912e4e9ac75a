// pipeline/single_file.h: a single-file LDM / SGM checkpoint converts to the
// same tensors, bit for bit, as diffusers' from_single_file of the same file
// saved as a folder (tests/data/single-file, made by
// scripts/refdata/make_single_file_refs.py) and converted by
// ConvertDiffusersFolder; the result generates; bad files are one error with
// nothing written. Also the embedded OpenAI CLIP vocabulary (clip_vocab.h).
#include "pipeline/single_file.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/h5io.h"
#include "io/model_file.h"
#include "io/safetensors.h"
#include "models/architectures.h"
#include "models/configs.h"
#include "nlohmann/json.hpp"
#include "pipeline/clip_vocab.h"
#include "pipeline/convert.h"
#include "pipeline/generate.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"
#include "text/tokenizer.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kData = std::string(TPUMESH_TEST_DATA_DIR) + "/single-file";

std::string Dir(const std::string& name) {
  const std::string d = tpumesh::testing::TestTempDir() + "/single_file_" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Every dataset of two model files: the same texts, the same tensor names
// per component and the same tensor bits (read as stored).
void ExpectSameModelFiles(const std::string& a_path, const std::string& b_path, mesh::DType as) {
  auto a = ModelFile::Open(a_path);
  auto b = ModelFile::Open(b_path);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const char* t : {"model_index.json", "scheduler/scheduler_config.json", "unet/config.json", "vae/config.json",
                        "text_encoder/config.json", "text_encoder_2/config.json", "tokenizer/vocab.json",
                        "tokenizer/merges.txt", "tokenizer_2/vocab.json"}) {
    ASSERT_EQ((*a)->Has(t), (*b)->Has(t)) << t;
    if ((*a)->Has(t)) {
      EXPECT_EQ(*(*a)->ReadText(t), *(*b)->ReadText(t)) << t;
    }
  }
  int64_t compared = 0;
  for (const char* comp : {"text_encoder", "text_encoder_2", "unet", "vae"}) {
    auto na = (*a)->TensorNames(comp);
    auto nb = (*b)->TensorNames(comp);
    ASSERT_EQ(na.ok(), nb.ok()) << comp;
    if (!na.ok()) continue;
    ASSERT_EQ(*na, *nb) << comp;
    for (const std::string& n : *na) {
      auto ta = (*a)->ReadTensor(comp, n, as);
      auto tb = (*b)->ReadTensor(comp, n, as);
      ASSERT_TRUE(ta.ok() && tb.ok()) << comp << "/" << n;
      ASSERT_EQ((*a)->Info(comp, n)->stored, (*b)->Info(comp, n)->stored) << comp << "/" << n;
      ASSERT_TRUE(ta->BitwiseEquals(*tb)) << comp << "/" << n;
      ++compared;
    }
  }
  EXPECT_GT(compared, 300);
}

class SingleFileParityTest : public ::testing::TestWithParam<std::string> {};

// <name>.safetensors with --config <name>/ (the folder from_single_file
// saved, which holds the tiny folder's configs) against that folder itself.
TEST_P(SingleFileParityTest, TensorsEqualFromSingleFilesSavedFolder) {
  const std::string name = GetParam();
  const std::string dir = Dir("parity_" + name);
  for (mesh::DType dtype : {mesh::DType::kF32, mesh::DType::kBF16}) {
    const std::string tag = dtype == mesh::DType::kF32 ? "f32" : "bf16";
    SingleFileOptions o;
    o.config_dir = kData + "/" + name;
    auto single = ConvertSingleFile(kData + "/" + name + ".safetensors", dir + "/single_" + tag + ".h5", dtype, o);
    ASSERT_TRUE(single.ok()) << single.status().ToString();
    auto folder = ConvertDiffusersFolder(kData + "/" + name, dir + "/folder_" + tag + ".h5", dtype);
    ASSERT_TRUE(folder.ok()) << folder.status().ToString();
    EXPECT_EQ(single->tensors, folder->tensors);
    EXPECT_EQ(single->parameters, folder->parameters);
    // The entries real checkpoints carry beside the models are left out.
    EXPECT_GT(single->unused, 0);
    ExpectSameModelFiles(dir + "/single_" + tag + ".h5", dir + "/folder_" + tag + ".h5", dtype);
  }
}

// The converted model runs: the same images as the folder's conversion (the
// same tensors), finite and not flat.
TEST_P(SingleFileParityTest, ConvertedModelGenerates) {
  const std::string name = GetParam();
  const std::string dir = Dir("generate_" + name);
  SingleFileOptions o;
  o.config_dir = kData + "/" + name;
  ASSERT_TRUE(ConvertSingleFile(kData + "/" + name + ".safetensors", dir + "/single.h5", mesh::DType::kF32, o).ok());
  ASSERT_TRUE(ConvertDiffusersFolder(kData + "/" + name, dir + "/folder.h5", mesh::DType::kF32).ok());
  std::vector<std::vector<uint8_t>> images;
  for (const char* file : {"/single.h5", "/folder.h5"}) {
    GeneratorOptions g;
    g.model = dir + file;
    g.mesh.devices = 1;
    auto gen = Generator::Open(g);
    ASSERT_TRUE(gen.ok()) << gen.status().ToString();
    GenerateRequest r;
    r.prompts = {"a photo of a cat"};
    r.steps = 2;
    r.seed = 3;
    auto res = (*gen)->Generate(r);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    ASSERT_EQ(res->images.size(), 1u);
    EXPECT_EQ(res->nonfinite_values, 0);
    images.push_back(res->images[0].rgb);
  }
  EXPECT_EQ(images[0], images[1]);
  const auto [lo, hi] = std::minmax_element(images[0].begin(), images[0].end());
  EXPECT_LT(*lo, *hi);
}

INSTANTIATE_TEST_SUITE_P(Layouts, SingleFileParityTest, ::testing::Values("sd1", "sd2", "sdxl"));

TEST(SingleFileTest, DetectsEachLayout) {
  for (const auto& [name, layout] : std::vector<std::pair<std::string, CheckpointLayout>>{
           {"sd1", CheckpointLayout::kSd1}, {"sd2", CheckpointLayout::kSd2}, {"sdxl", CheckpointLayout::kSdxl}}) {
    auto f = SafetensorsFile::Open(kData + "/" + name + ".safetensors");
    ASSERT_TRUE(f.ok());
    auto l = DetectLayout(*f);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ(*l, layout) << name;
  }
}

// SD 2.x: the fused in_proj is split into q, k, v rows; the last OpenCLIP
// layer (beyond the config's) and text_projection are not written.
TEST(SingleFileTest, OpenClipInProjIsSplitIntoQkv) {
  const std::string dir = Dir("qkv");
  SingleFileOptions o;
  o.config_dir = kData + "/sd2";
  ASSERT_TRUE(ConvertSingleFile(kData + "/sd2.safetensors", dir + "/m.h5", mesh::DType::kF32, o).ok());
  auto m = ModelFile::Open(dir + "/m.h5");
  auto f = SafetensorsFile::Open(kData + "/sd2.safetensors");
  auto fused = f->Read("cond_stage_model.model.transformer.resblocks.1.attn.in_proj_weight", mesh::DType::kF32);
  ASSERT_TRUE(fused.ok());
  const int64_t d = fused->dim(1);
  ASSERT_EQ(fused->dim(0), 3 * d);
  int part = 0;
  for (const char* qkv : {"q_proj", "k_proj", "v_proj"}) {
    auto t = (*m)->ReadTensor("text_encoder", std::string("text_model.encoder.layers.1.self_attn.") + qkv + ".weight",
                              mesh::DType::kF32);
    ASSERT_TRUE(t.ok()) << qkv;
    for (int64_t i = 0; i < d * d; ++i)
      ASSERT_EQ(t->data<float>()[i], fused->data<float>()[part * d * d + i]) << qkv << " " << i;
    ++part;
  }
  auto names = (*m)->TensorNames("text_encoder");
  for (const std::string& n : *names) EXPECT_EQ(n.find("text_projection"), std::string::npos) << n;
  auto cfg = nlohmann::json::parse(*(*m)->ReadText("text_encoder/config.json"));
  EXPECT_FALSE((*m)->Has("text_encoder/text_model.encoder.layers." +
                         std::to_string(cfg["num_hidden_layers"].get<int>()) + ".layer_norm1.weight"));
}

TEST(SingleFileTest, PredictionTypeOverride) {
  const std::string dir = Dir("prediction");
  SingleFileOptions o;
  o.config_dir = kData + "/sd2";
  ASSERT_TRUE(ConvertSingleFile(kData + "/sd2.safetensors", dir + "/v.h5", mesh::DType::kF32, o).ok());
  o.prediction_type = "epsilon";
  ASSERT_TRUE(ConvertSingleFile(kData + "/sd2.safetensors", dir + "/e.h5", mesh::DType::kF32, o).ok());
  auto folder = nlohmann::json::parse(std::ifstream(kData + "/sd2/scheduler/scheduler_config.json"));
  auto v = nlohmann::json::parse(*(*ModelFile::Open(dir + "/v.h5"))->ReadText("scheduler/scheduler_config.json"));
  auto e = nlohmann::json::parse(*(*ModelFile::Open(dir + "/e.h5"))->ReadText("scheduler/scheduler_config.json"));
  EXPECT_EQ(v["prediction_type"], folder["prediction_type"]);
  EXPECT_EQ(e["prediction_type"], "epsilon");
  EXPECT_EQ(e["_class_name"], folder["_class_name"]);
}

// A small safetensors file of F32 tensors (name -> shape), values i * 0.5.
void WriteSafetensors(const std::string& path, const std::vector<std::pair<std::string, mesh::Shape>>& tensors) {
  nlohmann::json h = nlohmann::json::object();
  uint64_t off = 0;
  std::string data;
  for (const auto& [name, shape] : tensors) {
    const int64_t n = mesh::NumElements(shape);
    h[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {off, off + 4 * n}}};
    for (int64_t i = 0; i < n; ++i) {
      const float v = 0.5f * static_cast<float>(i);
      data.append(reinterpret_cast<const char*>(&v), 4);
    }
    off += 4 * n;
  }
  std::string header = h.dump();
  while (header.size() % 8) header += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t len = header.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header << data;
}

// A copy of a safetensors file's float tensors as F32, each name passed
// through `rename`.
void CopyRenamed(const std::string& from, const std::string& to,
                 const std::function<std::string(const std::string&)>& rename) {
  auto f = SafetensorsFile::Open(from);
  ASSERT_TRUE(f.ok());
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (const SafetensorsEntry& e : f->entries()) {
    if (e.dtype == "I64") continue;
    auto a = f->Read(e.name, mesh::DType::kF32);
    ASSERT_TRUE(a.ok());
    h[rename(e.name)] = {{"dtype", "F32"}, {"shape", e.shape}, {"data_offsets", {data.size(), data.size() + a->size_bytes()}}};
    data.append(static_cast<const char*>(a->raw()), a->size_bytes());
  }
  std::string header = h.dump();
  while (header.size() % 8) header += ' ';
  std::ofstream out(to, std::ios::binary);
  const uint64_t len = header.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header << data;
}

// The VAE under "vae." (diffusers' other LDM_VAE_KEYS prefix) maps as under
// "first_stage_model.".
TEST(SingleFileTest, VaePrefixVaeMapsAsFirstStageModel) {
  const std::string dir = Dir("vae_prefix");
  CopyRenamed(kData + "/sd1.safetensors", dir + "/vae.safetensors", [](const std::string& n) {
    return n.rfind("first_stage_model.", 0) == 0 ? "vae." + n.substr(18) : n;
  });
  SingleFileOptions o;
  o.config_dir = kData + "/sd1";
  ASSERT_TRUE(ConvertSingleFile(dir + "/vae.safetensors", dir + "/a.h5", mesh::DType::kF32, o).ok());
  ASSERT_TRUE(ConvertSingleFile(kData + "/sd1.safetensors", dir + "/b.h5", mesh::DType::kF32, o).ok());
  ExpectSameModelFiles(dir + "/a.h5", dir + "/b.h5", mesh::DType::kF32);
}

// Each bad input: one error naming the problem, and no output (nor a
// temporary file) left in the folder.
void ExpectRefused(const std::string& dir, const std::string& checkpoint, const SingleFileOptions& o,
                   const std::string& message) {
  const std::string out = dir + "/out.h5";
  auto r = ConvertSingleFile(checkpoint, out, mesh::DType::kF32, o);
  ASSERT_FALSE(r.ok()) << checkpoint;
  EXPECT_THAT(r.status().message(), HasSubstr(message));
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().extension(), e.path().extension() == ".h5" ? ".none" : e.path().extension())
        << "left behind: " << e.path();
}

TEST(SingleFileTest, PicklesAreRefusedUnread) {
  const std::string dir = Dir("pickle");
  // By extension, whatever the bytes (the file is not opened).
  for (const char* ext : {".ckpt", ".pt", ".pth", ".bin", ".CKPT"}) {
    const std::string p = dir + "/model" + ext;
    std::ofstream(p) << "not even a pickle";
    ExpectRefused(dir, p, {}, "a pickle checkpoint");
  }
  // By magic bytes under a .safetensors name: a pickle stream, a zip.
  std::ofstream(dir + "/pickle.safetensors", std::ios::binary) << std::string("\x80\x04\x95\x10", 4) << "rest";
  ExpectRefused(dir, dir + "/pickle.safetensors", {}, "a pickle (protocol 4)");
  std::ofstream(dir + "/zip.safetensors", std::ios::binary) << std::string("PK\x03\x04", 4) << "archive";
  ExpectRefused(dir, dir + "/zip.safetensors", {}, "a zip archive");
}

TEST(SingleFileTest, UnknownLayoutNamesWhatWasLookedFor) {
  const std::string dir = Dir("unknown");
  WriteSafetensors(dir + "/other.safetensors", {{"encoder.layer.0.weight", {2, 2}}, {"head.bias", {2}}});
  ExpectRefused(dir, dir + "/other.safetensors", {}, "no known single-file layout");
  ExpectRefused(dir, dir + "/other.safetensors", {}, "looked for the UNet under model.diffusion_model.");
  // A diffusers component file is named as such.
  WriteSafetensors(dir + "/unet.safetensors", {{"conv_in.weight", {4, 4, 3, 3}}, {"down_blocks.0.x", {2}}});
  ExpectRefused(dir, dir + "/unet.safetensors", {}, "the weights of one diffusers component");
  // A UNet and a VAE but no known text encoder.
  WriteSafetensors(dir + "/notext.safetensors",
                   {{"model.diffusion_model.input_blocks.0.0.weight", {4, 4, 3, 3}},
                    {"first_stage_model.encoder.conv_in.weight", {4, 3, 3, 3}}});
  ExpectRefused(dir, dir + "/notext.safetensors", {}, "no known text encoder");
  // An SDXL refiner.
  WriteSafetensors(dir + "/refiner.safetensors",
                   {{"model.diffusion_model.input_blocks.0.0.weight", {4, 4, 3, 3}},
                    {"conditioner.embedders.0.model.text_projection", {4, 4}}});
  ExpectRefused(dir, dir + "/refiner.safetensors", {}, "an SDXL refiner checkpoint");
}

TEST(SingleFileTest, TruncatedFileIsRefused) {
  const std::string dir = Dir("truncated");
  const std::string src = kData + "/sd1.safetensors";
  std::ifstream in(src, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t keep : {bytes.size() - 1, bytes.size() / 2, size_t{100}, size_t{5}}) {
    std::ofstream(dir + "/cut.safetensors", std::ios::binary | std::ios::trunc) << bytes.substr(0, keep);
    ExpectRefused(dir, dir + "/cut.safetensors", {}, dir + "/cut.safetensors");
  }
}

TEST(SingleFileTest, ArchAndConfigMismatchesAreRefused) {
  const std::string dir = Dir("mismatch");
  SingleFileOptions o;
  o.arch = "sdxl";
  ExpectRefused(dir, kData + "/sd1.safetensors", o, "--arch sdxl: " + kData + "/sd1.safetensors is an SD 1.x");
  o.arch = "sd21";
  ExpectRefused(dir, kData + "/sdxl.safetensors", o, "is an SDXL checkpoint");
  o.arch = "sd15";
  ExpectRefused(dir, kData + "/sd2.safetensors", o, "is an SD 2.x checkpoint");
  o.arch = "nonesuch";
  ExpectRefused(dir, kData + "/sd1.safetensors", o, "nonesuch");
  // The right layout at other sizes: the first mismatched tensor, and the way out.
  o.arch = "sd15";
  ExpectRefused(dir, kData + "/sd1.safetensors", o, "but the built-in sd15's text_encoder/config.json needs");
  ExpectRefused(dir, kData + "/sd1.safetensors", {}, "--config DIR takes other sizes");
  // A config folder of the other family, and both --arch and --config.
  o = {};
  o.config_dir = kData + "/sdxl";
  ExpectRefused(dir, kData + "/sd2.safetensors", o, "an SDXL folder");
  o.config_dir = kData + "/sd1";
  ExpectRefused(dir, kData + "/sdxl.safetensors", o, "not SDXL");
  o.arch = "sd15";
  ExpectRefused(dir, kData + "/sd1.safetensors", o, "--arch and --config");
  // An OpenCLIP file against CLIP-sized configs: the split's shapes do not
  // fit, named with the tensor.
  o = {};
  o.config_dir = kData + "/sd1";
  ExpectRefused(dir, kData + "/sd2.safetensors", o, "cond_stage_model.model.");
  o = {};
  o.prediction_type = "x0";
  ExpectRefused(dir, kData + "/sd1.safetensors", o, "--prediction-type");
}

// A tensor the configs need that no file tensor maps to, and one of the
// wrong shape: named with the parameter and the config.
TEST(SingleFileTest, MissingOrMisShapedTensorIsNamed) {
  const std::string dir = Dir("missing");
  auto f = SafetensorsFile::Open(kData + "/sd1.safetensors");
  ASSERT_TRUE(f.ok());
  std::vector<std::pair<std::string, mesh::Shape>> all;
  for (const SafetensorsEntry& e : f->entries())
    if (e.dtype != "I64") all.emplace_back(e.name, e.shape);
  auto without = all;
  std::erase_if(without, [](const auto& t) { return t.first == "model.diffusion_model.out.2.bias"; });
  WriteSafetensors(dir + "/missing.safetensors", without);
  SingleFileOptions o;
  o.config_dir = kData + "/sd1";
  ExpectRefused(dir, dir + "/missing.safetensors", o, "no tensor maps to unet/conv_out.bias");
  auto reshaped = all;
  for (auto& [name, shape] : reshaped)
    if (name == "first_stage_model.decoder.conv_in.bias") shape = {shape[0] + 1};
  WriteSafetensors(dir + "/shape.safetensors", reshaped);
  ExpectRefused(dir, dir + "/shape.safetensors", o,
                "tensor first_stage_model.decoder.conv_in.bias (vae/decoder.conv_in.bias) has shape");
}

// A full-size single file's header (layouts.json) over a sparse data
// section of zeros, with `values` (name -> little-endian bytes) written where
// given.
std::string WriteSparseLayout(const std::string& path, const std::string& arch,
                              const std::map<std::string, std::string>& values = {},
                              const std::map<std::string, mesh::Shape>& shapes = {}) {
  const auto layouts = nlohmann::json::parse(std::ifstream(kData + "/layouts.json"));
  nlohmann::json h = nlohmann::json::object();
  uint64_t off = 0;
  std::map<uint64_t, std::string> writes;
  auto add = [&](const std::string& name, const std::string& dtype, const mesh::Shape& shape) {
    const uint64_t size = static_cast<uint64_t>(mesh::NumElements(shape)) * (dtype == "I64" ? 8 : 2);
    h[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {off, off + size}}};
    if (auto it = values.find(name); it != values.end()) writes[off] = it->second;
    off += size;
  };
  for (const auto& e : layouts[arch]) {
    const std::string name = e[0].get<std::string>();
    add(name, e[1].get<std::string>(), shapes.count(name) ? shapes.at(name) : e[2].get<mesh::Shape>());
  }
  if (values.count("global_step")) add("global_step", "I64", {});
  std::string header = h.dump();
  while (header.size() % 8) header += ' ';
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const uint64_t len = header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header;
    for (const auto& [at, bytes] : writes) {
      out.seekp(static_cast<std::streamoff>(8 + len + at));
      out << bytes;
    }
  }
  fs::resize_file(path, 8 + header.size() + off);
  return path;
}

// The built-in path at real sizes: each full-size layout plans against its
// architecture's configs (every parameter mapped with its shape, the loader's
// checks passed) with the embedded tokenizers, and is refused by the others.
TEST(SingleFileTest, FullSizeLayoutsPlanAgainstTheBuiltInArchitectures) {
  const std::string dir = Dir("full_size");
  for (const auto& [arch, layout] : std::vector<std::pair<std::string, CheckpointLayout>>{
           {"sd15", CheckpointLayout::kSd1}, {"sd21", CheckpointLayout::kSd2}, {"sdxl", CheckpointLayout::kSdxl}}) {
    const std::string path = WriteSparseLayout(dir + "/" + arch + ".safetensors", arch);
    auto f = SafetensorsFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto plan = PlanSingleFile(*f, {});
    ASSERT_TRUE(plan.ok()) << arch << ": " << plan.status().ToString();
    EXPECT_EQ(plan->layout, layout);
    EXPECT_EQ(plan->texts.origin, "built-in " + arch);
    int64_t parameters = 0;
    for (const auto& [component, tensors] : plan->components)
      for (const MappedTensor& t : tensors) parameters += mesh::NumElements(t.shape);
    auto a = models::BuiltinArchitecture(arch);
    int64_t want = 0;
    for (const auto& [component, text] : plan->texts.configs) {
      if (component == "unet") want += models::CountParameters(models::UNetParams(*models::ParseUNetConfig(text, "u")));
      else if (component == "vae") want += models::CountParameters(models::VaeParams(*models::ParseVaeConfig(text, "v")));
      else want += models::CountParameters(models::ClipTextParams(*models::ParseClipTextConfig(text, "t")));
    }
    EXPECT_EQ(parameters, want) << arch;
    // The texts are the architecture's, the tokenizers the embedded CLIP's.
    EXPECT_EQ(*plan->texts.Config("unet"), a->unet);
    bool has_tokenizer_2 = false;
    for (const auto& [name, text] : plan->texts.texts) has_tokenizer_2 |= name == "tokenizer_2/vocab.json";
    EXPECT_EQ(has_tokenizer_2, arch == "sdxl");
    const auto scheduler = nlohmann::json::parse(plan->texts.scheduler);
    // diffusers' default when the config has none: epsilon.
    EXPECT_EQ(scheduler.value("prediction_type", "epsilon"), arch == "sd21" ? "v_prediction" : "epsilon") << arch;
    // Unused: SD 2.x's last OpenCLIP layer and text_projection, the buffers.
    for (const std::string& u : plan->unused) EXPECT_EQ(u.find("model.diffusion_model."), std::string::npos) << u;
    if (arch == "sd21") {
      EXPECT_NE(std::find(plan->unused.begin(), plan->unused.end(),
                          "cond_stage_model.model.transformer.resblocks.23.attn.in_proj_weight"),
                plan->unused.end());
    }
    for (const std::string other : {"sd15", "sd21", "sdxl"}) {
      if (other == arch) continue;
      SingleFileOptions o;
      o.arch = other;
      auto refused = PlanSingleFile(*f, o);
      ASSERT_FALSE(refused.ok()) << arch << " as " << other;
      EXPECT_THAT(refused.status().message(), HasSubstr("--arch " + other));
    }
  }
}

// diffusers' rule: an SD 2.x file with global_step 875000 is SD 2.x base,
// epsilon; --prediction-type overrides either way.
TEST(SingleFileTest, Sd2GlobalStep875000IsEpsilon) {
  const std::string dir = Dir("global_step");
  const int64_t step = 875000;
  const std::string path = WriteSparseLayout(dir + "/base.safetensors", "sd21",
                                             {{"global_step", std::string(reinterpret_cast<const char*>(&step), 8)}});
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto plan = PlanSingleFile(*f, {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(plan->texts.scheduler)["prediction_type"], "epsilon");
  SingleFileOptions o;
  o.prediction_type = "v_prediction";
  auto forced = PlanSingleFile(*f, o);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(nlohmann::json::parse(forced->texts.scheduler)["prediction_type"], "v_prediction");
}

// A UNet of 9 input channels is an inpainting model (diffusers'
// "inpainting", "inpainting_v2", "xl_inpaint"): the architecture's configs
// with in_channels 9, an ...InpaintPipeline, epsilon for SD 2.x; 8 input
// channels (InstructPix2Pix) is refused.
TEST(SingleFileTest, NineInputChannelsIsAnInpaintingModel) {
  const std::string dir = Dir("inpainting");
  const std::string conv_in = "model.diffusion_model.input_blocks.0.0.weight";
  for (const std::string arch : {"sd15", "sd21", "sdxl"}) {
    const std::string path = WriteSparseLayout(dir + "/" + arch + ".safetensors", arch, {}, {{conv_in, {320, 9, 3, 3}}});
    auto f = SafetensorsFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto plan = PlanSingleFile(*f, {});
    ASSERT_TRUE(plan.ok()) << arch << ": " << plan.status().ToString();
    const auto unet = nlohmann::json::parse(*plan->texts.Config("unet"));
    EXPECT_EQ(unet["in_channels"], 9) << arch;
    const std::string cls = nlohmann::json::parse(plan->texts.model_index)["_class_name"];
    EXPECT_THAT(cls, ::testing::EndsWith("InpaintPipeline")) << arch;
    EXPECT_EQ(nlohmann::json::parse(plan->texts.scheduler).value("prediction_type", "epsilon"), "epsilon") << arch;
  }
  const std::string path = WriteSparseLayout(dir + "/p2p.safetensors", "sd15", {}, {{conv_in, {320, 8, 3, 3}}});
  auto f = SafetensorsFile::Open(path);
  auto plan = PlanSingleFile(*f, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("an InstructPix2Pix checkpoint"));
}

// A folder as transformers 5 saves it (tests/data/single-file/sdxl: the
// tokenizers as tokenizer.json only): the texts convert derives tokenize as
// the files the tokenizers were loaded from (tests/data/tiny-sdxl-b), the
// "!" of tokenizer_2 split out as an added token.
TEST(SingleFileTest, TokenizerJsonFolderTokenizesAsItsSource) {
  auto d = ReadDiffusersTexts(kData + "/sdxl");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  std::map<std::string, std::string> t(d->texts.begin(), d->texts.end());
  for (const std::string tok : {"tokenizer", "tokenizer_2"}) {
    ASSERT_TRUE(t.count(tok + "/vocab.json") && t.count(tok + "/merges.txt")) << tok;
    auto ours = ClipTokenizer::FromStrings(ClipTokenizerTexts{t[tok + "/vocab.json"], t[tok + "/merges.txt"],
                                                              t[tok + "/special_tokens_map.json"],
                                                              t[tok + "/tokenizer_config.json"]},
                                           tok);
    ASSERT_TRUE(ours.ok()) << ours.status().ToString();
    auto source = ClipTokenizer::FromFolder(std::string(TPUMESH_TEST_DATA_DIR) + "/tiny-sdxl-b/" + tok);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    for (const char* prompt : {"a red circle on a blue background", "", "hello! world!!", "Caf\u00e9 <|endoftext|> x"}) {
      auto a = ours->EncodePadded(prompt);
      auto b = source->EncodePadded(prompt);
      ASSERT_TRUE(a.ok() && b.ok()) << prompt;
      EXPECT_EQ(*a, *b) << tok << ": " << prompt;
    }
  }
}

// The embedded vocabulary is the published one: merges.txt byte for byte,
// vocab.json entry for entry, and the ids transformers' CLIPTokenizer gives.
TEST(ClipVocabTest, EmbeddedVocabularyIsOpenAiClips) {
  const std::string ref = tpumesh::testing::RefdataDir() + "/clip-tokenizer";
  TPUMESH_REQUIRE_REFDATA(ref + "/vocab.json");
  auto merges = OpenAiClipMerges();
  ASSERT_TRUE(merges.ok()) << merges.status().ToString();
  std::ifstream m(ref + "/merges.txt", std::ios::binary);
  EXPECT_EQ(*merges, std::string((std::istreambuf_iterator<char>(m)), std::istreambuf_iterator<char>()));
  const auto ours = nlohmann::json::parse(ClipVocabJsonFromMerges(*merges));
  const auto want = nlohmann::json::parse(std::ifstream(ref + "/vocab.json"));
  EXPECT_EQ(ours.size(), want.size());
  EXPECT_EQ(ours, want);

  auto texts = OpenAiClipTokenizerTexts("tokenizer", "<|endoftext|>");
  ASSERT_TRUE(texts.ok());
  std::map<std::string, std::string> t(texts->begin(), texts->end());
  auto tok = ClipTokenizer::FromStrings(
      ClipTokenizerTexts{t["tokenizer/vocab.json"], t["tokenizer/merges.txt"], t["tokenizer/special_tokens_map.json"],
                         t["tokenizer/tokenizer_config.json"]},
      "embedded");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::string tokens = ref + "/tokens.h5";
  TPUMESH_REQUIRE_REFDATA(tokens);
  auto prompts = H5ReadStrings(tokens, "prompts");
  auto ids = H5ReadArray(tokens, "input_ids");
  ASSERT_TRUE(prompts.ok() && ids.ok());
  for (size_t p = 0; p < prompts->size(); ++p) {
    auto got = tok->EncodePadded((*prompts)[p]);
    ASSERT_TRUE(got.ok());
    for (int i = 0; i < 77; ++i) ASSERT_EQ((*got)[i], ids->data<int32_t>()[p * 77 + i]) << (*prompts)[p] << " @" << i;
  }
}

// SD 2.x's and SDXL's tokenizer_2 pad with "!", an added token of its own.
TEST(ClipVocabTest, BangPaddedTokenizerLoads) {
  auto texts = OpenAiClipTokenizerTexts("tokenizer_2", "!");
  ASSERT_TRUE(texts.ok());
  std::map<std::string, std::string> t(texts->begin(), texts->end());
  auto tok = ClipTokenizer::FromStrings(
      ClipTokenizerTexts{t["tokenizer_2/vocab.json"], t["tokenizer_2/merges.txt"],
                         t["tokenizer_2/special_tokens_map.json"], t["tokenizer_2/tokenizer_config.json"]},
      "embedded");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const auto vocab = nlohmann::json::parse(t["tokenizer_2/vocab.json"]);
  auto ids = tok->EncodePadded("a cat");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->back(), vocab["!"].get<int>());
  EXPECT_EQ((*ids)[0], vocab["<|startoftext|>"].get<int>());
}

}  // namespace
}  // namespace tpumesh::pipeline
