// FftF32 and TriangularSolveF32 / C64 against JAX's own results
// (tests/data/jax_fft_trsm_ref.h5, made by
// scripts/refdata/make_fft_trsm_ref.py with jax[cpu]: XLA:CPU, DUCC for the
// FFTs, Eigen's trsm for the solves). The bar issue 40 sets: f32 outputs
// within 1e-5 of JAX's, relative to the largest magnitude of each transform
// or system. The file's IRFFT operands have non-zero imaginary parts in
// their DC and Nyquist bins, so this also pins which parts XLA ignores.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hdf5.h"
#include "kernels/fft.h"
#include "kernels/triangular_solve.h"

namespace tpumesh::kernels {
namespace {

constexpr double kBar = 1e-5;

std::string RefPath() {
  return std::string(TPUMESH_TEST_DATA_DIR) + "/jax_fft_trsm_ref.h5";
}

// A whole dataset as T (H5T_NATIVE_FLOAT or H5T_NATIVE_INT64); empty when
// it does not exist.
template <typename T>
std::vector<T> ReadAll(hid_t file, const std::string& name, hid_t type) {
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) return {};
  const hid_t ds = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  std::vector<T> v(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
  if (H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0) v.clear();
  H5Sclose(space);
  H5Dclose(ds);
  return v;
}

bool GroupExists(hid_t file, const std::string& name) {
  // H5Lexists needs each parent to exist.
  const size_t slash = name.find('/');
  if (H5Lexists(file, name.substr(0, slash).c_str(), H5P_DEFAULT) <= 0) {
    return false;
  }
  return H5Lexists(file, name.c_str(), H5P_DEFAULT) > 0;
}

// max over groups of max |got - want| / max |want|, complex by modulus.
double RelativeError(const std::vector<float>& got,
                     const std::vector<float>& want, int64_t groups,
                     bool complex) {
  const size_t per = want.size() / static_cast<size_t>(groups);
  const size_t step = complex ? 2 : 1;
  double worst = 0;
  for (int64_t g = 0; g < groups; ++g) {
    double err = 0, scale = 0;
    for (size_t i = g * per; i < (g + 1) * per; i += step) {
      const double dr = double(got[i]) - want[i];
      const double di = complex ? double(got[i + 1]) - want[i + 1] : 0.0;
      const double wi = complex ? want[i + 1] : 0.0;
      err = std::max(err, std::hypot(dr, di));
      scale = std::max(scale, std::hypot(double(want[i]), wi));
    }
    worst = std::max(worst, scale > 0 ? err / scale : err);
  }
  return worst;
}

class JaxParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = H5Fopen(RefPath().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(file_, 0) << "cannot open " << RefPath();
  }
  void TearDown() override {
    if (file_ >= 0) H5Fclose(file_);
  }
  hid_t file_ = -1;
};

TEST_F(JaxParityTest, FftF32WithinBarOfJax) {
  double worst[4] = {0, 0, 0, 0};
  int cases = 0;
  for (int i = 0; GroupExists(file_, "fft/" + std::to_string(i)); ++i) {
    const std::string g = "fft/" + std::to_string(i);
    const auto meta = ReadAll<int64_t>(file_, g + "/meta", H5T_NATIVE_INT64);
    ASSERT_EQ(meta.size(), 6u) << g;
    FftShape s;
    s.type = static_cast<FftType>(meta[0]);
    s.batch = meta[1];
    s.fft_length.assign(meta.begin() + 3, meta.begin() + 3 + meta[2]);
    const auto in = ReadAll<float>(file_, g + "/in", H5T_NATIVE_FLOAT);
    const auto want = ReadAll<float>(file_, g + "/out", H5T_NATIVE_FLOAT);
    const bool complex_out = s.type != FftType::kIrfft;
    ASSERT_EQ(static_cast<int64_t>(in.size()),
              FftOperandElements(s) * (s.type == FftType::kRfft ? 1 : 2))
        << g;
    ASSERT_EQ(static_cast<int64_t>(want.size()),
              FftResultElements(s) * (complex_out ? 2 : 1))
        << g;
    std::vector<float> got(want.size(), NAN);
    ASSERT_TRUE(FftF32(s, in.data(), got.data()).ok()) << g;
    const double e = RelativeError(got, want, s.batch, complex_out);
    EXPECT_LE(e, kBar) << g << " " << FftTypeName(s.type) << " n0 "
                       << s.fft_length[0] << " rank " << s.fft_length.size();
    worst[meta[0]] = std::max(worst[meta[0]], e);
    ++cases;
  }
  EXPECT_GT(cases, 0);
  std::printf(
      "[ vs JAX  ] %d fft cases; worst relative error FFT %.3g, "
      "IFFT %.3g, RFFT %.3g, IRFFT %.3g (bar %.0e)\n",
      cases, worst[0], worst[1], worst[2], worst[3], kBar);
}

TEST_F(JaxParityTest, TriangularSolveWithinBarOfJax) {
  double worst[2] = {0, 0};
  int cases = 0;
  for (int i = 0; GroupExists(file_, "ts/" + std::to_string(i)); ++i) {
    const std::string g = "ts/" + std::to_string(i);
    const auto meta = ReadAll<int64_t>(file_, g + "/meta", H5T_NATIVE_INT64);
    ASSERT_EQ(meta.size(), 8u) << g;
    TriangularSolveShape s;
    const bool complex = meta[0] != 0;
    s.left_side = meta[1] != 0;
    s.lower = meta[2] != 0;
    s.unit_diagonal = meta[3] != 0;
    s.transpose_a = static_cast<TriangularTranspose>(meta[4]);
    s.batch = meta[5];
    s.m = meta[6];
    s.n = meta[7];
    const auto a = ReadAll<float>(file_, g + "/a", H5T_NATIVE_FLOAT);
    const auto b = ReadAll<float>(file_, g + "/b", H5T_NATIVE_FLOAT);
    const auto want = ReadAll<float>(file_, g + "/x", H5T_NATIVE_FLOAT);
    ASSERT_EQ(b.size(), want.size()) << g;
    std::vector<float> got(want.size(), NAN);
    const Status st =
        complex ? TriangularSolveC64(s, a.data(), b.data(), got.data())
                : TriangularSolveF32(s, a.data(), b.data(), got.data());
    ASSERT_TRUE(st.ok()) << g << ": " << st.ToString();
    const double e = RelativeError(got, want, s.batch, complex);
    EXPECT_LE(e, kBar) << g << (complex ? " c64" : " f32")
                       << (s.left_side ? " left" : " right")
                       << (s.lower ? " lower" : " upper")
                       << (s.unit_diagonal ? " unit" : "") << " transpose "
                       << meta[4];
    worst[complex] = std::max(worst[complex], e);
    ++cases;
  }
  EXPECT_GT(cases, 0);
  std::printf(
      "[ vs JAX  ] %d triangular_solve cases; worst relative error "
      "f32 %.3g, c64 %.3g (bar %.0e)\n",
      cases, worst[0], worst[1], kBar);
}

}  // namespace
}  // namespace tpumesh::kernels
