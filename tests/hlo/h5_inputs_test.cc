// `tpumesh run --inputs`'s datasets as other writers make them (ReadInputs):
// a native IEEE half dataset (h5py's np.float16) is read as its values into
// f16, f32 and bf16 arguments; refused for an integer argument, as any float
// dataset is; refused in one line when its storage is external.
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/program.h"
#include "io/h5io.h"
#include "kernels/bf16.h"
#include "tests/testing/h5_files.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::hlo {
namespace {

using ::testing::HasSubstr;

const std::vector<uint16_t> kHalfBits = {0x40DD, 0xB800, 0x7BFF, 0x0400, 0x0001, 0x7C00};
const std::vector<float> kHalfValues = {2.431640625f, -0.5f, 65504.0f, 0x1p-14f, 0x1p-24f,
                                        std::numeric_limits<float>::infinity()};

Layout OneArgument(ElementType e, int64_t n) {
  Layout l;
  Type t;
  t.element = e;
  t.dims = {n};
  l.inputs = {t};
  l.outputs = {t};
  return l;
}

std::string HalfFile() {
  const std::string path = tpumesh::testing::TestTempDir() + "/half.h5";
  EXPECT_TRUE(tpumesh::testing::WriteHalf(path, "input_0", kHalfBits));
  return path;
}

TEST(H5InputsTest, NativeHalfIntoF16ArgumentIsExact) {
  auto in = ReadInputs(HalfFile(), OneArgument(ElementType::kF16, 6));
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  std::vector<uint16_t> bits(6);
  std::memcpy(bits.data(), (*in)[0].data.raw(), 12);
  EXPECT_EQ(bits, kHalfBits);
}

TEST(H5InputsTest, NativeHalfIntoF32ArgumentIsItsValues) {
  auto in = ReadInputs(HalfFile(), OneArgument(ElementType::kF32, 6));
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  const float* got = static_cast<const float*>((*in)[0].data.raw());
  for (size_t i = 0; i < kHalfValues.size(); ++i) EXPECT_EQ(got[i], kHalfValues[i]) << "index " << i;
}

TEST(H5InputsTest, NativeHalfIntoBf16ArgumentIsRoundedAsConvert) {
  auto in = ReadInputs(HalfFile(), OneArgument(ElementType::kBF16, 6));
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  const kernels::bf16* got = static_cast<const kernels::bf16*>((*in)[0].data.raw());
  for (size_t i = 0; i < kHalfValues.size(); ++i)
    EXPECT_EQ(kernels::Bf16ToF32(got[i]), kernels::RoundToBf16(kHalfValues[i])) << "index " << i;
}

TEST(H5InputsTest, NativeHalfIntoIntegerArgumentIsRefused) {
  auto in = ReadInputs(HalfFile(), OneArgument(ElementType::kI32, 6));
  ASSERT_FALSE(in.ok());
  EXPECT_THAT(in.status().message(), HasSubstr("dataset 'input_0' holds f16 but @main's argument 0 is tensor<6xi32>"));
}

// An i1 input is a byte 0 or 1: 2 or 255 (what a uint8 array cast to bool
// by hand can hold) is refused naming the dataset, not read as true.
TEST(H5InputsTest, PredInputOtherThanZeroOrOneIsRefused) {
  for (const uint8_t bad : {uint8_t{2}, uint8_t{255}}) {
    const std::string path = tpumesh::testing::TestTempDir() + "/pred.h5";
    pipeline::H5Raw raw;
    raw.cls = 'u';
    raw.width = 1;
    raw.dims = {4};
    raw.dtype = "bool";
    raw.data = {0, 1, bad, 0};
    auto w = pipeline::H5Writer::Create(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->WriteRaw("input_0", raw).ok());
    ASSERT_TRUE((*w)->Commit().ok());
    auto in = ReadInputs(path, OneArgument(ElementType::kPred, 4));
    ASSERT_FALSE(in.ok()) << int{bad};
    EXPECT_THAT(in.status().message(), HasSubstr("dataset 'input_0' holds " + std::to_string(bad) + " at element 2"));
    raw.data[2] = 1;
    auto w2 = pipeline::H5Writer::Create(path);
    ASSERT_TRUE(w2.ok());
    ASSERT_TRUE((*w2)->WriteRaw("input_0", raw).ok());
    ASSERT_TRUE((*w2)->Commit().ok());
    EXPECT_TRUE(ReadInputs(path, OneArgument(ElementType::kPred, 4)).ok());
  }
}

TEST(H5InputsTest, ExternalStorageIsRefused) {
  const std::string dir = tpumesh::testing::TestTempDir();
  std::ofstream(dir + "/secret.txt") << std::string(24, 'S');
  const std::string path = dir + "/external.h5";
  ASSERT_TRUE(tpumesh::testing::WriteExternal(path, "input_0", dir + "/secret.txt", 6));
  auto in = ReadInputs(path, OneArgument(ElementType::kF32, 6));
  ASSERT_FALSE(in.ok());
  EXPECT_THAT(in.status().message(), HasSubstr(path + ": dataset 'input_0' has external storage"));
}

}  // namespace
}  // namespace tpumesh::hlo
