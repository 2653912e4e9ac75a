#include "io/safetensors.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) { return tpumesh::testing::TestTempDir() + "/" + name; }

// Writes an 8-byte little-endian length, the header and the data.
std::string WriteFile(const std::string& name, const std::string& header, const std::string& data,
                      uint64_t declared_len = UINT64_MAX) {
  const std::string path = TempPath(name);
  std::ofstream f(path, std::ios::binary);
  uint64_t n = declared_len == UINT64_MAX ? header.size() : declared_len;
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
  f << header << data;
  return path;
}

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST(SafetensorsTest, ReadsF32F16Bf16) {
  // a: F32 [2,2]; b: F16 [3] = {1, -2, 0.5}; c: BF16 [2] = {1.5, -0.25}.
  std::string data = Floats({1, 2, 3, 4});
  const uint16_t f16[3] = {0x3c00, 0xc000, 0x3800};
  data.append(reinterpret_cast<const char*>(f16), 6);
  const uint16_t b16[2] = {0x3fc0, 0xbe80};
  data.append(reinterpret_cast<const char*>(b16), 4);
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F16","shape":[3],"data_offsets":[16,22]},"c":{"dtype":"BF16","shape":[2],"data_offsets":[22,26]}})";
  auto f = SafetensorsFile::Open(WriteFile("ok.safetensors", header, data));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->entries().size(), 3u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  auto a = f->Read("a", mesh::DType::kF32);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->shape(), (mesh::Shape{2, 2}));
  EXPECT_EQ(a->ToVector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(f->Read("b", mesh::DType::kF32)->ToVector<float>(), (std::vector<float>{1, -2, 0.5f}));
  EXPECT_EQ(f->Read("c", mesh::DType::kF32)->ToVector<float>(), (std::vector<float>{1.5f, -0.25f}));
  auto c16 = f->Read("c", mesh::DType::kBF16);
  EXPECT_EQ(c16->data<kernels::bf16>()[1].bits, 0xbe80);
  EXPECT_EQ(f->Read("zz", mesh::DType::kF32).status().code(), StatusCode::kNotFound);
}

TEST(SafetensorsTest, HostileFilesAreRejectedWithTheReason) {
  const std::string good_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data = Floats({1, 2});
  struct Case {
    std::string header;
    std::string data;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"[1,2]", data, "does not start with '{'"},
      {"{\"a\":", data, "not valid JSON"},
      {"{" + good_entry + "," + good_entry + "}", data, "names 'a' twice"},
      {R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", data, "unknown dtype 'Q7'"},
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data, "not a non-negative integer"},
      {R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", data, "not a non-negative integer"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data, "begin > end"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,80]}})", data, "ends at byte 80 but the data section has 8 bytes"},
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data, "needs 12 bytes but data_offsets span 8"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       data, "overlap"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data, "after a gap"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", data, "cover 4 of the 8 data bytes"},
      {R"({"__metadata__":{"k":1},)" + good_entry + "}", data, "is not a string"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data, "unknown field 'x'"},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", data, "too large"},
  };
  int i = 0;
  for (const Case& c : cases) {
    auto f = SafetensorsFile::Open(WriteFile("bad" + std::to_string(i++) + ".safetensors", c.header, c.data));
    ASSERT_FALSE(f.ok()) << c.header;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument) << c.header;
    EXPECT_THAT(f.status().message(), HasSubstr(c.message)) << c.header;
    EXPECT_THAT(f.status().message(), HasSubstr(".safetensors: ")) << "names the file";
  }
}

TEST(SafetensorsTest, BadLengthsAndMissingFiles) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  auto past = SafetensorsFile::Open(WriteFile("past.safetensors", header, "", 4096));
  EXPECT_THAT(past.status().message(), HasSubstr("runs past the end"));
  auto huge = SafetensorsFile::Open(WriteFile("huge.safetensors", header, "", uint64_t{1} << 40));
  EXPECT_THAT(huge.status().message(), HasSubstr("exceeds the 100 MiB limit"));
  // Another kind of file (a PNG's first bytes): named as not safetensors.
  {
    std::ofstream(TempPath("image.png"), std::ios::binary) << std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
  }
  EXPECT_THAT(SafetensorsFile::Open(TempPath("image.png")).status().message(),
              HasSubstr("image.png: not a safetensors file"));
  // Truncated: the header promises 8 data bytes, the file has 4.
  auto trunc = SafetensorsFile::Open(WriteFile("trunc.safetensors", header, Floats({1})));
  EXPECT_THAT(trunc.status().message(), HasSubstr("truncated"));
  {
    std::ofstream(TempPath("short.safetensors")) << "abc";
  }
  EXPECT_THAT(SafetensorsFile::Open(TempPath("short.safetensors")).status().message(), HasSubstr("too short"));
  auto missing = SafetensorsFile::Open(TempPath("does-not-exist.safetensors"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(SafetensorsTest, ReadsTheRefdataUnet) {
  const std::string path = std::string(TPUMESH_SOURCE_DIR) +
                           "/../shared/refdata/tiny-sd-a/unet/diffusion_pytorch_model.safetensors";
  TPUMESH_REQUIRE_REFDATA(path);
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const SafetensorsEntry* e = f->Find("conv_in.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, "F32");
  EXPECT_EQ(e->shape.size(), 4u);
  EXPECT_EQ(e->shape[1], 4);  // 4 latent channels in
  auto a = f->Read("conv_in.weight", mesh::DType::kF32);
  ASSERT_TRUE(a.ok());
  double sum2 = 0;
  for (float v : a->ToVector<float>()) sum2 += v * v;
  EXPECT_GT(sum2, 0);
}

}  // namespace
}  // namespace tpumesh::pipeline
