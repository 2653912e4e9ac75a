#include "pipeline/convert.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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
    if (!fs::exists(kRef + "/model_index.json")) GTEST_SKIP() << "reference data absent: " << kRef;
    // One folder per test: ctest runs the tests of this binary in parallel.
    dir_ = ::testing::TempDir() + "/convert_test_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
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

}  // namespace
}  // namespace tpumesh::pipeline
