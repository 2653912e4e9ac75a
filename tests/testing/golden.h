// Test helpers: read datasets of the reference HDF5 files (../shared/refdata)
// and compare arrays the way the issues state tolerances.
#ifndef TPUMESH_TESTS_TESTING_GOLDEN_H_
#define TPUMESH_TESTS_TESTING_GOLDEN_H_

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hdf5.h"
#include "mesh/array.h"

namespace tpumesh::testing {

inline std::string RefdataDir() { return std::string(TPUMESH_SOURCE_DIR) + "/../shared/refdata"; }
inline bool Exists(const std::string& p) { return access(p.c_str(), R_OK) == 0; }
// A reference model folder by name: the "-a" variants come from
// ../shared/refdata, the others (made by scripts/refdata/) from tests/data.
inline std::string ReferenceDir(const std::string& variant) {
  const bool shared = variant.size() > 2 && variant.compare(variant.size() - 2, 2, "-a") == 0;
  return shared ? RefdataDir() + "/" + variant : std::string(TPUMESH_SOURCE_DIR) + "/tests/data/" + variant;
}
// CI sets CI=true; there, absent reference data is a failure, not a skip.
inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

}  // namespace tpumesh::testing

// In a test body or SetUp: skips when `path` is absent outside CI, fails
// under CI=true (where ../shared is always beside the clone).
#define TPUMESH_REQUIRE_REFDATA(path)                                                        \
  do {                                                                                       \
    if (!::tpumesh::testing::Exists(path)) {                                                 \
      if (::tpumesh::testing::InCi()) GTEST_FAIL() << "reference data absent under CI: " << (path); \
      GTEST_SKIP() << "reference data absent: " << (path);                                   \
    }                                                                                        \
  } while (0)

namespace tpumesh::testing {

// Reads a numeric dataset as f32 (floats) or s32 (integers). Empty array
// with shape {0} on failure.
inline mesh::Array ReadDataset(const std::string& file, const std::string& name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  mesh::Array out;
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return out;
  hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  if (ds >= 0) {
    hid_t space = H5Dget_space(ds);
    const int rank = H5Sget_simple_extent_ndims(space);
    std::vector<hsize_t> dims(std::max(rank, 0));
    H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    mesh::Shape shape(dims.begin(), dims.end());
    hid_t t = H5Dget_type(ds);
    if (H5Tget_class(t) == H5T_FLOAT) {
      out = mesh::Array::Host(mesh::DType::kF32, shape);
      H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.mutable_raw());
    } else if (H5Tget_class(t) == H5T_INTEGER) {
      out = mesh::Array::Host(mesh::DType::kI32, shape);
      H5Dread(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.mutable_raw());
    }
    H5Tclose(t);
    H5Sclose(space);
    H5Dclose(ds);
  }
  H5Fclose(f);
  return out;
}

// A string attribute of a group or dataset (h5py writes str attributes as
// variable-length UTF-8). Empty on failure.
inline std::string ReadStringAttribute(const std::string& file, const std::string& object,
                                       const std::string& name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  std::string out;
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return out;
  hid_t a = H5Aopen_by_name(f, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  if (a >= 0) {
    hid_t t = H5Aget_type(a);
    if (H5Tget_class(t) == H5T_STRING) {
      if (H5Tis_variable_str(t) > 0) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(t));
        char* v = nullptr;
        if (H5Aread(a, mt, &v) >= 0 && v != nullptr) {
          out = v;
          H5free_memory(v);
        }
        H5Tclose(mt);
      } else {
        std::vector<char> buf(H5Tget_size(t) + 1, '\0');
        if (H5Aread(a, t, buf.data()) >= 0) out = buf.data();
      }
    }
    H5Tclose(t);
    H5Aclose(a);
  }
  H5Fclose(f);
  return out;
}

// max |got - want| / max |want|, the issues' relative error.
inline double RelativeError(const mesh::Array& got, const mesh::Array& want) {
  double err = 0, ref = 0;
  const int64_t n = std::min(got.num_elements(), want.num_elements());
  for (int64_t i = 0; i < n; ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got.data<float>()[i]) - want.data<float>()[i]));
    ref = std::max(ref, std::fabs(static_cast<double>(want.data<float>()[i])));
  }
  return ref > 0 ? err / ref : err;
}

// [steps, ...] latents: for each leading index, max |got - want| over max
// |want| within `tol` (printed with `label`, one line per step).
inline void ExpectEachStepWithin(const mesh::Array& got, const mesh::Array& want, double tol,
                                 const std::string& label) {
  ASSERT_EQ(got.shape(), want.shape()) << label;
  const int64_t per_step = want.num_elements() / want.dim(0);
  for (int64_t s = 0; s < want.dim(0); ++s) {
    double err = 0, ref = 0;
    for (int64_t i = s * per_step; i < (s + 1) * per_step; ++i) {
      err = std::max(err, std::fabs(double(got.data<float>()[i]) - want.data<float>()[i]));
      ref = std::max(ref, std::fabs(double(want.data<float>()[i])));
    }
    std::printf("%s step %lld: relative error %.3g\n", label.c_str(), static_cast<long long>(s), err / ref);
    EXPECT_LE(err / ref, tol) << label << " step " << s << ": max abs error " << err << ", max abs reference " << ref;
  }
}

// uint8 images (one RGB buffer each) against want [B, H, W, 3]: none more
// than one level off, at most 0.1% of the values one level off.
inline void ExpectImagesWithinOneLevel(const std::vector<const std::vector<uint8_t>*>& got, const mesh::Array& want,
                                       const std::string& label) {
  ASSERT_EQ(static_cast<int64_t>(got.size()), want.dim(0)) << label;
  const int64_t per_image = want.num_elements() / want.dim(0);
  int64_t off = 0, far = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(static_cast<int64_t>(got[i]->size()), per_image) << label;
    for (int64_t j = 0; j < per_image; ++j) {
      const int d = std::abs(int((*got[i])[j]) - want.data<int32_t>()[i * per_image + j]);
      off += d > 0;
      far += d > 1;
    }
  }
  std::printf("%s images: %lld of %lld uint8 values one level off, %lld more\n", label.c_str(),
              static_cast<long long>(off), static_cast<long long>(want.num_elements()), static_cast<long long>(far));
  EXPECT_EQ(far, 0) << label << ": values more than one level off";
  EXPECT_LE(off * 1000, want.num_elements()) << label << ": " << off << " values one level off";
}

}  // namespace tpumesh::testing

#endif  // TPUMESH_TESTS_TESTING_GOLDEN_H_
