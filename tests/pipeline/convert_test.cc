#include "pipeline/convert.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"
#include "io/model_file.h"
#include "io/safetensors.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kRef = std::string(TPUMESH_SOURCE_DIR) + "/../shared/refdata/tiny-sd-a";

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TPUMESH_REQUIRE_REFDATA(kRef + "/model_index.json");
    // One folder per test: ctest runs the tests of this binary in parallel.
    dir_ = tpumesh::testing::TestTempDir() + "/convert";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  // A writable copy of the reference folder.
  std::string CopyRef() {
    const std::string copy = dir_ + "/copy";
    fs::copy(kRef, copy, fs::copy_options::recursive);
    for (auto& e : fs::recursive_directory_iterator(copy))
      fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add);
    return copy;
  }
  std::string dir_;
};

TEST_F(ConvertTest, ConvertsTheReferenceFolder) {
  const std::string out = dir_ + "/tiny.h5";
  auto stats = ConvertDiffusersFolder(kRef, out, mesh::DType::kF32);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  auto f = ModelFile::Open(out);
  ASSERT_TRUE(f.ok());
  for (const char* t : {"model_index.json", "scheduler/scheduler_config.json", "tokenizer/vocab.json",
                        "tokenizer/merges.txt", "text_encoder/config.json", "unet/config.json", "vae/config.json"})
    EXPECT_TRUE((*f)->Has(t)) << t;
  int64_t total = 0;
  for (const char* comp : {"text_encoder", "unet", "vae"}) total += (*f)->TensorNames(comp)->size();
  EXPECT_EQ(total, stats->tensors);
  // Bit-exact against the safetensors source.
  auto st = SafetensorsFile::Open(kRef + "/unet/diffusion_pytorch_model.safetensors");
  auto want = st->Read("conv_in.weight", mesh::DType::kF32);
  auto got = (*f)->ReadTensor("unet", "conv_in.weight", mesh::DType::kF32);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->BitwiseEquals(*want));
  EXPECT_EQ(*(*f)->TensorNames("unet"), [&] {
    std::vector<std::string> names;
    for (const auto& e : st->entries()) names.push_back(e.name);
    std::sort(names.begin(), names.end());
    return names;
  }());
}

TEST_F(ConvertTest, Bf16RoundsToNearestEven) {
  const std::string out = dir_ + "/tiny16.h5";
  ASSERT_TRUE(ConvertDiffusersFolder(kRef, out, mesh::DType::kBF16).ok());
  auto f = ModelFile::Open(out);
  EXPECT_EQ((*f)->Info("vae", "decoder.conv_in.weight")->stored, mesh::DType::kBF16);
  auto st = SafetensorsFile::Open(kRef + "/vae/diffusion_pytorch_model.safetensors");
  auto want = st->Read("decoder.conv_in.weight", mesh::DType::kF32);
  auto got = (*f)->ReadTensor("vae", "decoder.conv_in.weight", mesh::DType::kF32);
  for (int64_t i = 0; i < want->num_elements(); ++i)
    ASSERT_EQ(got->data<float>()[i], kernels::RoundToBf16(want->data<float>()[i])) << "index " << i;
}

TEST_F(ConvertTest, MissingOrCorruptInputWritesNothing) {
  const std::string copy = CopyRef();
  const std::string out = dir_ + "/out.h5";
  fs::remove(copy + "/vae/config.json");
  auto r = ConvertDiffusersFolder(copy, out, mesh::DType::kF32);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("vae/config.json: missing"));
  EXPECT_FALSE(fs::exists(out));

  fs::copy_file(kRef + "/vae/config.json", copy + "/vae/config.json");
  const std::string w = copy + "/unet/diffusion_pytorch_model.safetensors";
  fs::resize_file(w, fs::file_size(w) - 1000);
  r = ConvertDiffusersFolder(copy, out, mesh::DType::kF32);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("truncated"));
  EXPECT_FALSE(fs::exists(out));

  fs::copy_file(kRef + "/unet/diffusion_pytorch_model.safetensors", w, fs::copy_options::overwrite_existing);
  { std::ofstream(copy + "/unet/config.json") << "{not json"; }
  r = ConvertDiffusersFolder(copy, out, mesh::DType::kF32);
  EXPECT_THAT(r.status().message(), HasSubstr("unet/config.json: not valid JSON"));
  EXPECT_FALSE(fs::exists(out));
}

// A training record beside the components is copied verbatim; one that is
// not JSON is refused, naming it, and nothing is written.
TEST_F(ConvertTest, CopiesTheTrainingRecord) {
  const std::string copy = CopyRef();
  const std::string record = R"({"vocabulary": ["a", "red", "circle"], "steps": 10})";
  { std::ofstream(copy + "/" + kTrainingMetadata) << record; }
  const std::string out = dir_ + "/trained.h5";
  ASSERT_TRUE(ConvertDiffusersFolder(copy, out, mesh::DType::kF32).ok());
  auto f = ModelFile::Open(out);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*(*f)->ReadText(kTrainingMetadata), record);
  { std::ofstream(copy + "/" + kTrainingMetadata) << "{vocabulary"; }
  const std::string bad = dir_ + "/bad.h5";
  auto r = ConvertDiffusersFolder(copy, bad, mesh::DType::kF32);
  EXPECT_THAT(r.status().message(), HasSubstr("tpumesh_training.json: not valid JSON"));
  EXPECT_FALSE(fs::exists(bad));
}

// An SDXL folder converts whole (both encoders and tokenizers), and one
// missing a part is refused in one line naming the part and why the folder
// counts as SDXL; nothing is written.
TEST(ConvertSdxlTest, WholeFolderConvertsHalfFolderIsRefused) {
  const std::string ref = std::string(TPUMESH_TEST_DATA_DIR) + "/tiny-sdxl-b";
  const std::string dir = tpumesh::testing::TestTempDir() + "/convert_sdxl";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string out = dir + "/out.h5";
  auto whole = ConvertDiffusersFolder(ref, out, mesh::DType::kBF16);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto file = ModelFile::Open(out);
  ASSERT_TRUE(file.ok());
  for (const char* d : {"text_encoder_2/config.json", "tokenizer_2/vocab.json", "tokenizer_2/merges.txt",
                        "tokenizer_2/special_tokens_map.json", "model_index.json"})
    EXPECT_TRUE((*file)->Has(d)) << d;
  auto names = (*file)->TensorNames("text_encoder_2");
  ASSERT_TRUE(names.ok());
  EXPECT_NE(std::find(names->begin(), names->end(), "text_projection.weight"), names->end());
  file->reset();
  fs::remove(out);

  struct Case {
    const char* remove;
    const char* message;
  };
  for (const Case& c : {Case{"text_encoder_2", "without text_encoder_2/config.json"},
                        Case{"tokenizer_2", "(model_index.json names StableDiffusionXLPipeline) without "
                                            "tokenizer_2/vocab.json"}}) {
    SCOPED_TRACE(c.remove);
    const std::string copy = dir + "/copy";
    fs::remove_all(copy);
    fs::copy(ref, copy, fs::copy_options::recursive);
    fs::remove_all(copy + "/" + c.remove);
    auto r = ConvertDiffusersFolder(copy, out, mesh::DType::kF32);
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
    EXPECT_THAT(r.status().message(), HasSubstr("an SDXL folder"));
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
    EXPECT_FALSE(fs::exists(out));
  }
}

}  // namespace
}  // namespace tpumesh::pipeline
