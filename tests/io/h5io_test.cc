// HDF5 datasets as other writers make them, read through io/h5io.h and
// io/model_file.h: native IEEE half is read as its values; floats of other
// layouts, external storage, virtual datasets and unwritten chunks are
// refused in one line naming the file and the dataset; a gzip-compressed
// dataset that stores much less than it holds is read; h5py's complex
// compound {r, i} is read and written, other compounds refused.
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hdf5.h"
#include "io/h5io.h"
#include "io/model_file.h"
#include "tests/testing/h5_files.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Dir() { return tpumesh::testing::TestTempDir(); }

// 2.431640625, -0.5, 65504 (the largest half), 2^-14 (the smallest normal),
// 2^-24 (the smallest subnormal), infinity: each exact in half.
const std::vector<uint16_t> kHalfBits = {0x40DD, 0xB800, 0x7BFF, 0x0400, 0x0001, 0x7C00};
const std::vector<float> kHalfValues = {2.431640625f, -0.5f, 65504.0f, 0x1p-14f, 0x1p-24f,
                                        std::numeric_limits<float>::infinity()};

// The message is one line and names the file and the dataset.
void ExpectOneLineNaming(const Status& st, const std::string& file, const std::string& name) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), AllOf(HasSubstr(file), HasSubstr(name), Not(HasSubstr("\n"))));
}

TEST(H5ioTest, NativeHalfIsReadAsItsValues) {
  const std::string path = Dir() + "/half.h5";
  ASSERT_TRUE(tpumesh::testing::WriteHalf(path, "x", kHalfBits));
  auto raw = H5ReadRaw(path, "x");
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(raw->cls, 'f');
  EXPECT_EQ(raw->width, 2);
  EXPECT_EQ(raw->dims, (std::vector<int64_t>{6}));
  ASSERT_EQ(raw->data.size(), 12u);
  std::vector<uint16_t> bits(6);
  std::memcpy(bits.data(), raw->data.data(), 12);
  EXPECT_EQ(bits, kHalfBits);  // the elements themselves, not their values cast to integers
  auto a = H5ReadArray(path, "x");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->dtype(), mesh::DType::kF32);
  for (size_t i = 0; i < kHalfValues.size(); ++i) EXPECT_EQ(a->data<float>()[i], kHalfValues[i]) << "index " << i;
}

TEST(H5ioTest, WrittenHalfIsANativeHalf) {
  // run's f16 outputs: an IEEE half dataset (np.float16 to h5py), no tag.
  const std::string path = Dir() + "/half_out.h5";
  H5Raw raw;
  raw.cls = 'f';
  raw.width = 2;
  raw.dims = {6};
  raw.data.resize(12);
  std::memcpy(raw.data.data(), kHalfBits.data(), 12);
  {
    auto w = H5Writer::Create(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->WriteRaw("y", raw).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hid_t d = H5Dopen2(f, "y", H5P_DEFAULT);
  const hid_t t = H5Dget_type(d);
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize);
  EXPECT_EQ(H5Tget_class(t), H5T_FLOAT);
  EXPECT_EQ(H5Tget_size(t), 2u);
  EXPECT_EQ(H5Tget_ebias(t), 15u);
  EXPECT_EQ((std::vector<size_t>{spos, epos, esize, mpos, msize}), (std::vector<size_t>{15, 10, 5, 0, 10}));
  EXPECT_EQ(H5Aexists(d, "dtype"), 0);
  H5Tclose(t);
  H5Dclose(d);
  H5Fclose(f);
  auto a = H5ReadArray(path, "y");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  for (size_t i = 0; i < kHalfValues.size(); ++i) EXPECT_EQ(a->data<float>()[i], kHalfValues[i]) << "index " << i;
}

TEST(H5ioTest, HalfWithAnotherTypesTagIsRefused) {
  // A native half tagged dtype="bfloat16" would have its bits read as bf16.
  const std::string path = Dir() + "/half_tagged.h5";
  ASSERT_TRUE(tpumesh::testing::WriteHalf(path, "x", kHalfBits));
  ASSERT_TRUE(tpumesh::testing::AddDtypeAttribute(path, "x", "bfloat16"));
  auto raw = H5ReadRaw(path, "x");
  ASSERT_FALSE(raw.ok());
  ExpectOneLineNaming(raw.status(), path, "'x'");
  EXPECT_THAT(raw.status().message(), HasSubstr("bfloat16"));
}

TEST(H5ioTest, TwoByteFloatOfAnotherLayoutIsRefused) {
  // bfloat16's layout (1-8-7) declared as an HDF5 float: its bits are not
  // IEEE half, and its values are never cast to integers.
  const std::string path = Dir() + "/bf16_float.h5";
  ASSERT_TRUE(tpumesh::testing::WriteBf16LayoutFloat(path, "w", {0x4000, 0x3F80}));
  for (const Status& st : {H5ReadRaw(path, "w").status(), H5ReadArray(path, "w").status()}) {
    ExpectOneLineNaming(st, path, "'w'");
    EXPECT_THAT(st.message(), AllOf(HasSubstr("2-byte float"), HasSubstr("8-bit exponent"), HasSubstr("IEEE")));
  }
}

TEST(H5ioTest, OpaqueTwoByteElementsAreRefusedNamingTheirType) {
  // What h5py writes for an ml_dtypes bfloat16 array.
  const std::string path = Dir() + "/opaque.h5";
  ASSERT_TRUE(tpumesh::testing::WriteOpaque2(path, "w", {0x4000, 0x3F80}));
  for (const Status& st : {H5ReadRaw(path, "w").status(), H5ReadArray(path, "w").status()}) {
    ExpectOneLineNaming(st, path, "'w'");
    EXPECT_THAT(st.message(), AllOf(HasSubstr("2-byte opaque"), HasSubstr("NUMPY:bfloat16")));
  }
}

// A dataset `name` of compound elements, members (name, HDF5 float type) at
// consecutive offsets, holding `values` (the members' values in order, as
// doubles, converted by HDF5 to the members' types).
bool WriteCompound(const std::string& path, const std::string& name,
                   const std::vector<std::pair<std::string, hid_t>>& members, const std::vector<double>& values) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) return false;
  size_t size = 0;
  for (const auto& m : members) size += H5Tget_size(m.second);
  const hid_t type = H5Tcreate(H5T_COMPOUND, size);
  const hid_t mem = H5Tcreate(H5T_COMPOUND, members.size() * sizeof(double));
  size_t offset = 0;
  for (size_t k = 0; k < members.size(); ++k) {
    H5Tinsert(type, members[k].first.c_str(), offset, members[k].second);
    H5Tinsert(mem, members[k].first.c_str(), k * sizeof(double), H5T_NATIVE_DOUBLE);
    offset += H5Tget_size(members[k].second);
  }
  const hsize_t dims[1] = {values.size() / members.size()};
  const hid_t space = H5Screate_simple(1, dims, nullptr);
  const hid_t ds = H5Dcreate2(file, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const bool ok = ds >= 0 && H5Dwrite(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0;
  if (ds >= 0) H5Dclose(ds);
  H5Sclose(space);
  H5Tclose(mem);
  H5Tclose(type);
  H5Fclose(file);
  return ok;
}

// h5py's complex64 and complex128 (a compound {r, i} of IEEE floats, of
// either byte order) are read as interleaved (re, im) pairs, little-endian.
TEST(H5ioTest, H5pyComplexIsReadAsPairs) {
  const std::vector<double> values = {1.5, -2.25, 0.0, 3.0e38, -0.0, 1e-3};
  struct Case {
    hid_t part;
    int width;
  };
  for (const Case& c : {Case{H5T_IEEE_F32LE, 8}, Case{H5T_IEEE_F32BE, 8}, Case{H5T_IEEE_F64LE, 16},
                        Case{H5T_IEEE_F64BE, 16}}) {
    const std::string path = Dir() + "/complex" + std::to_string(c.width) + ".h5";
    ASSERT_TRUE(WriteCompound(path, "z", {{"r", c.part}, {"i", c.part}}, values));
    auto raw = H5ReadRaw(path, "z");
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    EXPECT_EQ(raw->cls, 'c');
    EXPECT_EQ(raw->width, c.width);
    EXPECT_EQ(raw->dims, (std::vector<int64_t>{3}));
    ASSERT_EQ(raw->data.size(), static_cast<size_t>(3 * c.width));
    for (size_t i = 0; i < values.size(); ++i) {
      double v;
      if (c.width == 8) {
        float f;
        std::memcpy(&f, raw->data.data() + 4 * i, 4);
        v = f;
        EXPECT_EQ(v, static_cast<double>(static_cast<float>(values[i]))) << i;
      } else {
        std::memcpy(&v, raw->data.data() + 8 * i, 8);
        EXPECT_EQ(v, values[i]) << i;
      }
      EXPECT_EQ(std::signbit(v), std::signbit(values[i])) << i;
    }
    // The f32 reader takes real arrays only: it says the dataset is complex.
    auto a = H5ReadArray(path, "z");
    ASSERT_FALSE(a.ok());
    ExpectOneLineNaming(a.status(), path, "'z'");
    EXPECT_THAT(a.status().message(), HasSubstr("complex"));
  }
}

// Any other compound is refused, naming its type, as before.
TEST(H5ioTest, OtherCompoundsAreRefused) {
  const std::vector<std::vector<std::pair<std::string, hid_t>>> refused = {
      {{"re", H5T_IEEE_F32LE}, {"im", H5T_IEEE_F32LE}},                          // other names
      {{"i", H5T_IEEE_F32LE}, {"r", H5T_IEEE_F32LE}},                            // other order
      {{"r", H5T_IEEE_F32LE}, {"i", H5T_IEEE_F64LE}},                            // mixed widths
      {{"r", H5T_IEEE_F32LE}, {"i", H5T_IEEE_F32BE}},                            // mixed byte orders
      {{"r", H5T_STD_I32LE}, {"i", H5T_STD_I32LE}},                              // integers
      {{"r", H5T_IEEE_F32LE}, {"i", H5T_IEEE_F32LE}, {"j", H5T_IEEE_F32LE}},     // three members
  };
  for (size_t k = 0; k < refused.size(); ++k) {
    const std::string path = Dir() + "/compound" + std::to_string(k) + ".h5";
    const std::vector<double> values(refused[k].size() * 2, 1.0);
    ASSERT_TRUE(WriteCompound(path, "c", refused[k], values)) << k;
    const Status st = H5ReadRaw(path, "c").status();
    ExpectOneLineNaming(st, path, "'c'");
    EXPECT_THAT(st.message(), HasSubstr("compound type of " + std::to_string(refused[k].size()) + " members")) << k;
  }
}

// Complex outputs are written as h5py writes them: a compound {r, i} of
// little-endian IEEE floats, read back bit for bit.
TEST(H5ioTest, ComplexIsWrittenAsH5pyDoes) {
  const std::string path = Dir() + "/complex_out.h5";
  H5Raw raw;
  raw.cls = 'c';
  raw.width = 16;
  raw.dims = {2};
  const double pairs[4] = {1.0, -2.0, std::numeric_limits<double>::infinity(), -0.0};
  raw.data.resize(sizeof pairs);
  std::memcpy(raw.data.data(), pairs, sizeof pairs);
  {
    auto w = H5Writer::Create(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->WriteRaw("z", raw).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t ds = H5Dopen2(file, "z", H5P_DEFAULT);
  const hid_t type = H5Dget_type(ds);
  EXPECT_EQ(H5Tget_class(type), H5T_COMPOUND);
  ASSERT_EQ(H5Tget_nmembers(type), 2);
  for (unsigned m = 0; m < 2; ++m) {
    char* name = H5Tget_member_name(type, m);
    EXPECT_STREQ(name, m == 0 ? "r" : "i");
    H5free_memory(name);
    EXPECT_EQ(H5Tget_member_offset(type, m), 8u * m);
    const hid_t part = H5Tget_member_type(type, m);
    EXPECT_TRUE(H5Tequal(part, H5T_IEEE_F64LE) > 0);
    H5Tclose(part);
  }
  H5Tclose(type);
  H5Dclose(ds);
  H5Fclose(file);
  auto back = H5ReadRaw(path, "z");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->cls, 'c');
  EXPECT_EQ(back->width, 16);
  EXPECT_EQ(back->data, raw.data);
}

TEST(H5ioTest, ExternalStorageIsRefused) {
  // A dataset whose elements are another file's bytes (H5Pset_external).
  const std::string secret = Dir() + "/secret.txt";
  std::ofstream(secret) << std::string(64, 'S');
  const std::string path = Dir() + "/external.h5";
  ASSERT_TRUE(tpumesh::testing::WriteExternal(path, "x", secret, 16));
  for (const Status& st : {H5ReadRaw(path, "x").status(), H5ReadArray(path, "x").status(),
                           H5ReadStrings(path, "x").status()}) {
    ExpectOneLineNaming(st, path, "'x'");
    EXPECT_THAT(st.message(), HasSubstr("external storage"));
  }
  EXPECT_FALSE(H5HasDataset(path, "x"));
  // /dev/zero declaring 64 MiB: not read, whatever its size.
  const std::string zero = Dir() + "/zero.h5";
  ASSERT_TRUE(tpumesh::testing::WriteExternal(zero, "x", "/dev/zero", hsize_t{1} << 24));
  const Status st = H5ReadRaw(zero, "x").status();
  ExpectOneLineNaming(st, zero, "'x'");
  EXPECT_THAT(st.message(), HasSubstr("external storage"));
}

TEST(H5ioTest, VirtualDatasetIsRefused) {
  // Its source is missing: HDF5 would give the fill value as the data.
  const std::string path = Dir() + "/virtual.h5";
  ASSERT_TRUE(tpumesh::testing::WriteVirtual(path, "x", Dir() + "/missing.h5", 8));
  for (const Status& st : {H5ReadRaw(path, "x").status(), H5ReadArray(path, "x").status()}) {
    ExpectOneLineNaming(st, path, "'x'");
    EXPECT_THAT(st.message(), HasSubstr("virtual dataset"));
  }
}

TEST(H5ioTest, UnwrittenChunksAreRefused) {
  // 4 chunks declared, 1 written: the other 3 would read as the fill value.
  const std::string path = Dir() + "/partial.h5";
  ASSERT_TRUE(tpumesh::testing::WritePartlyWrittenChunks(path, "x", 4096, 1024));
  const Status st = H5ReadArray(path, "x").status();
  ExpectOneLineNaming(st, path, "'x'");
  EXPECT_THAT(st.message(), HasSubstr("declares 4096 values but stores 4096 bytes"));
}

TEST(H5ioTest, GzipChunkedSparseDatasetIsRead) {
  // 2^20 values, almost all zero: gzip stores them in a few KiB, far less
  // than 1/16 of what they hold.
  std::vector<float> values(size_t{1} << 20, 0.0f);
  values[12345] = 3.5f;
  values[1000000] = -2.0f;
  const std::string path = Dir() + "/sparse.h5";
  ASSERT_TRUE(tpumesh::testing::WriteGzip(path, "x", values, 1 << 16, /*shuffle=*/true));
  auto a = H5ReadArray(path, "x");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->num_elements(), static_cast<int64_t>(values.size()));
  EXPECT_EQ(std::memcmp(a->data<float>(), values.data(), values.size() * 4), 0);
  auto raw = H5ReadRaw(path, "x");
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  ASSERT_EQ(raw->data.size(), values.size() * 4);
  EXPECT_EQ(std::memcmp(raw->data.data(), values.data(), raw->data.size()), 0);
}

TEST(H5ioTest, OtherFiltersAndExternalLinksAreRefused) {
  // Scale-offset (lossy, built into HDF5): not one of deflate, shuffle,
  // fletcher32.
  const std::string path = Dir() + "/scaleoffset.h5";
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  const hsize_t chunk = 4;
  H5Pset_chunk(dcpl, 1, &chunk);
  H5Pset_scaleoffset(dcpl, H5Z_SO_FLOAT_DSCALE, 2);
  const std::vector<float> values = {1.25f, 2.5f, 3.75f, 5.0f};
  ASSERT_TRUE(tpumesh::testing::WriteH5(path, "x", H5T_IEEE_F32LE, {4}, H5T_NATIVE_FLOAT, values.data(), dcpl));
  H5Pclose(dcpl);
  const Status filtered = H5ReadArray(path, "x").status();
  ExpectOneLineNaming(filtered, path, "'x'");
  EXPECT_THAT(filtered.message(), HasSubstr("HDF5 filter 6 ('scaleoffset')"));
  // A link to a dataset of another file: never followed.
  const std::string other = Dir() + "/other.h5", linking = Dir() + "/linking.h5";
  ASSERT_TRUE(tpumesh::testing::WriteH5(other, "x", H5T_IEEE_F32LE, {4}, H5T_NATIVE_FLOAT, values.data()));
  const hid_t f = H5Fcreate(linking.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Lcreate_external(other.c_str(), "/x", f, "x", H5P_DEFAULT, H5P_DEFAULT);
  H5Gclose(H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  H5Lcreate_external(other.c_str(), "/", f, "g/ext", H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(f);
  for (const std::string name : {"x", "g/ext/x"}) {
    const Status st = H5ReadArray(linking, name).status();
    ExpectOneLineNaming(st, linking, "'" + name + "'");
    EXPECT_THAT(st.message(), HasSubstr("external link to another file"));
  }
}

TEST(H5ioTest, Uint16TaggedAsA16BitFloatIsReadAsItsValues) {
  // H5ReadArray (eval inputs, --latents): bfloat16 or float16 kept as
  // uint16 is its values, not integers.
  const std::string path = Dir() + "/tagged.h5";
  const std::vector<uint16_t> bf16 = {0x4020, 0xBF80};  // 2.5, -1
  ASSERT_TRUE(tpumesh::testing::WriteH5(path, "b", H5T_STD_U16LE, {2}, H5T_NATIVE_UINT16, bf16.data()));
  ASSERT_TRUE(tpumesh::testing::AddDtypeAttribute(path, "b", "bfloat16"));
  auto b = H5ReadArray(path, "b");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->dtype(), mesh::DType::kF32);
  EXPECT_EQ(b->data<float>()[0], 2.5f);
  EXPECT_EQ(b->data<float>()[1], -1.0f);
  const std::string path16 = Dir() + "/tagged16.h5";
  ASSERT_TRUE(tpumesh::testing::WriteH5(path16, "h", H5T_STD_U16LE, {6}, H5T_NATIVE_UINT16, kHalfBits.data()));
  ASSERT_TRUE(tpumesh::testing::AddDtypeAttribute(path16, "h", "float16"));
  auto h = H5ReadArray(path16, "h");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->dtype(), mesh::DType::kF32);
  for (size_t i = 0; i < kHalfValues.size(); ++i) EXPECT_EQ(h->data<float>()[i], kHalfValues[i]) << "index " << i;
}

// A model file whose tensor unet/x.weight is made by `make` (given the open
// file), beside a regular one.
template <typename Make>
std::string ModelWith(const std::string& name, Make make) {
  const std::string path = Dir() + "/" + name;
  {
    auto w = ModelFileWriter::Create(path);
    EXPECT_TRUE(w.ok());
    EXPECT_TRUE((*w)->WriteTensor("unet", "ok.weight", mesh::Array::Host(mesh::DType::kF32, {4}), mesh::DType::kF32)
                    .ok());
    EXPECT_TRUE((*w)->Commit().ok());
  }
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  make(f);
  H5Fclose(f);
  return path;
}

TEST(H5ioTest, ModelFileRefusesExternalAndVirtualTensors) {
  const std::string secret = Dir() + "/secret.txt";
  std::ofstream(secret) << std::string(64, 'S');
  const std::string ext = ModelWith("m_external.h5", [&](hid_t f) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(dcpl, secret.c_str(), 0, 64);
    const hsize_t n = 16;
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    H5Dclose(H5Dcreate2(f, "unet/x.weight", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Sclose(space);
    H5Pclose(dcpl);
  });
  const std::string virt = ModelWith("m_virtual.h5", [&](hid_t f) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t n = 16;
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    H5Pset_virtual(dcpl, space, (Dir() + "/missing.h5").c_str(), "/data", space);
    H5Dclose(H5Dcreate2(f, "unet/x.weight", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Sclose(space);
    H5Pclose(dcpl);
  });
  for (const auto& [path, what] : {std::pair{ext, "external storage"}, std::pair{virt, "virtual dataset"}}) {
    auto m = ModelFile::Open(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_TRUE((*m)->ReadTensor("unet", "ok.weight", mesh::DType::kF32).ok());
    const Status st = (*m)->ReadTensor("unet", "x.weight", mesh::DType::kF32).status();
    ExpectOneLineNaming(st, path, "unet/x.weight");
    EXPECT_THAT(st.message(), HasSubstr(what));
  }
}

TEST(H5ioTest, ModelFileRefusesATensorLinkedFromAnotherFile) {
  const std::string other = Dir() + "/weights.h5";
  const std::vector<float> values(4, 1.0f);
  ASSERT_TRUE(tpumesh::testing::WriteH5(other, "w", H5T_IEEE_F32LE, {4}, H5T_NATIVE_FLOAT, values.data()));
  const std::string path = ModelWith("m_linked.h5", [&](hid_t f) {
    H5Lcreate_external(other.c_str(), "/w", f, "unet/x.weight", H5P_DEFAULT, H5P_DEFAULT);
  });
  auto m = ModelFile::Open(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // Listed without being followed, and refused when read.
  EXPECT_EQ(*(*m)->TensorNames("unet"), (std::vector<std::string>{"ok.weight", "x.weight"}));
  const Status st = (*m)->ReadTensor("unet", "x.weight", mesh::DType::kF32).status();
  ExpectOneLineNaming(st, path, "unet/x.weight");
  EXPECT_THAT(st.message(), HasSubstr("external link to another file"));
}

TEST(H5ioTest, ModelFileReadsGzipSparseTensor) {
  std::vector<float> values(size_t{1} << 18, 0.0f);
  values[7] = 1.5f;
  const std::string path = ModelWith("m_sparse.h5", [&](hid_t f) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t n = values.size(), chunk = 1 << 14;
    H5Pset_chunk(dcpl, 1, &chunk);
    H5Pset_deflate(dcpl, 9);
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t ds = H5Dcreate2(f, "unet/x.weight", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(ds);
    H5Sclose(space);
    H5Pclose(dcpl);
  });
  auto m = ModelFile::Open(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto t = (*m)->ReadTensor("unet", "x.weight", mesh::DType::kF32);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(std::memcmp(t->data<float>(), values.data(), values.size() * 4), 0);
}

}  // namespace
}  // namespace tpumesh::pipeline
