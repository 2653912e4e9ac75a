#include "io/model_file.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hdf5.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string Dir() {
  return tpumesh::testing::TestTempDir();
}

mesh::Array Ramp(mesh::Shape shape) {
  mesh::Array a = mesh::Array::Host(mesh::DType::kF32, shape);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.mutable_data<float>()[i] = 0.1f * i - 1.0f;
  return a;
}

TEST(ModelFileTest, RoundTripTextF32AndBf16) {
  const std::string path = Dir() + "/rt.h5";
  {
    auto w = ModelFileWriter::Create(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->WriteText("unet/config.json", R"({"a": 1})").ok());
    ASSERT_TRUE((*w)->WriteText("model_index.json", "{}").ok());
    ASSERT_TRUE((*w)->WriteTensor("unet", "conv_in.weight", Ramp({4, 3, 3, 3}), mesh::DType::kF32).ok());
    ASSERT_TRUE((*w)->WriteTensor("unet", "conv_in.bias", Ramp({4}), mesh::DType::kBF16).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  auto f = ModelFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(*(*f)->ReadText("unet/config.json"), R"({"a": 1})");
  EXPECT_EQ(*(*f)->TensorNames("unet"), (std::vector<std::string>{"conv_in.bias", "conv_in.weight"}));
  auto w = (*f)->ReadTensor("unet", "conv_in.weight", mesh::DType::kF32);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->BitwiseEquals(Ramp({4, 3, 3, 3})));
  EXPECT_EQ((*f)->Info("unet", "conv_in.bias")->stored, mesh::DType::kBF16);
  auto b = (*f)->ReadTensor("unet", "conv_in.bias", mesh::DType::kF32);
  const mesh::Array want = Ramp({4});
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(b->data<float>()[i], kernels::RoundToBf16(want.data<float>()[i])) << "index " << i;
  auto missing = (*f)->ReadTensor("unet", "nope.weight", mesh::DType::kF32);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("missing tensor unet/nope.weight"));
  EXPECT_FALSE((*f)->Has("vae/config.json"));
  EXPECT_EQ((*f)->TensorNames("vae").status().code(), StatusCode::kNotFound);
}

TEST(ModelFileTest, NoPartialFileWithoutCommit) {
  const std::string path = Dir() + "/partial.h5";
  fs::remove(path);
  {
    auto w = ModelFileWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->WriteTensor("unet", "x", Ramp({8}), mesh::DType::kF32).ok());
    // Destroyed without Commit, as on an error.
  }
  EXPECT_FALSE(fs::exists(path));
  for (const auto& e : fs::directory_iterator(Dir()))
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr("partial.h5.tmp")));
}

TEST(ModelFileTest, BadFiles) {
  EXPECT_EQ(ModelFile::Open(Dir() + "/absent.h5").status().code(), StatusCode::kNotFound);
  const std::string text = Dir() + "/text.h5";
  std::ofstream(text) << "hello";
  EXPECT_THAT(ModelFile::Open(text).status().message(), HasSubstr("not an HDF5 file"));
  // A valid model file cut in half.
  const std::string good = Dir() + "/good.h5";
  {
    auto w = ModelFileWriter::Create(good);
    ASSERT_TRUE((*w)->WriteTensor("unet", "x", Ramp({100000}), mesh::DType::kF32).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  const std::string cut = Dir() + "/cut.h5";
  fs::copy_file(good, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(good) / 2);
  auto f = ModelFile::Open(cut);
  if (f.ok()) {
    EXPECT_EQ((*f)->ReadTensor("unet", "x", mesh::DType::kF32).status().code(), StatusCode::kDataLoss);
  } else {
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(ModelFileWriter::Create("/nonexistent-dir/x.h5").status().message(),
              HasSubstr("does not exist"));
}

// A file of another format version is refused, naming the one it claims
// and the one this tpumesh reads; version 99 loaded before.
TEST(ModelFileTest, UnknownFormatVersionIsRefused) {
  const std::string path = Dir() + "/v99.h5";
  {
    auto w = ModelFileWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->WriteText("model_index.json", "{}").ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  ASSERT_TRUE(ModelFile::Open(path).ok());
  for (const int version : {99, 0, -1}) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    ASSERT_GE(H5Awrite(a, H5T_NATIVE_INT, &version), 0);
    H5Aclose(a);
    H5Fclose(f);
    auto m = ModelFile::Open(path);
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << version;
    EXPECT_THAT(m.status().message(), HasSubstr("format version " + std::to_string(version) +
                                                "; this tpumesh reads version 1"));
  }
}

// A dataset compressed by another writer (h5py's gzip) reads; one that
// declares more than kMaxCompression times what it stores (a forged or
// all-zero shape) is refused before anything is allocated for it.
TEST(ModelFileTest, CompressedDatasetsAreBoundedByWhatTheyStore) {
  if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0) GTEST_SKIP() << "this HDF5 has no deflate filter";
  const std::string path = Dir() + "/gzip.h5";
  {
    auto w = ModelFileWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->WriteText("model_index.json", "{}").ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  const mesh::Array ramp = Ramp({64, 64});
  {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t g = H5Gcreate2(f, "unet", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t chunk[2] = {64, 64};
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_deflate(dcpl, 9);
    const hsize_t small[2] = {64, 64}, huge[2] = {1 << 14, 1 << 14};
    const hid_t s1 = H5Screate_simple(2, small, nullptr), s2 = H5Screate_simple(2, huge, nullptr);
    const hid_t d1 = H5Dcreate2(g, "ramp", H5T_IEEE_F32LE, s1, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(d1, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ramp.raw()), 0);
    // 1 GiB of zeros in one written chunk: a few KB stored.
    const hid_t d2 = H5Dcreate2(g, "zeros", H5T_IEEE_F32LE, s2, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    std::vector<float> zeros(64 * 64, 0.0f);
    const hid_t mem = H5Screate_simple(2, chunk, nullptr);
    const hsize_t start[2] = {0, 0};
    H5Sselect_hyperslab(s2, H5S_SELECT_SET, start, nullptr, chunk, nullptr);
    ASSERT_GE(H5Dwrite(d2, H5T_NATIVE_FLOAT, mem, s2, H5P_DEFAULT, zeros.data()), 0);
    for (const hid_t h : {d1, d2}) H5Dclose(h);
    for (const hid_t h : {s1, s2, mem}) H5Sclose(h);
    H5Pclose(dcpl);
    H5Gclose(g);
    H5Fclose(f);
  }
  auto m = ModelFile::Open(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto a = (*m)->ReadTensor("unet", "ramp", mesh::DType::kF32);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->ToVector<float>(), ramp.ToVector<float>());
  auto z = (*m)->ReadTensor("unet", "zeros", mesh::DType::kF32);
  EXPECT_EQ(z.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(z.status().message(), HasSubstr("unet/zeros declares shape [16384,16384] (1073741824 bytes) but stores"));
}

}  // namespace
}  // namespace tpumesh::pipeline
