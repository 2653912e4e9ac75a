// stablehlo.fft, stablehlo.triangular_solve and stablehlo.cholesky through
// hlo/ on small modules worked by hand: the types each fft_type takes, the
// transforms of an impulse, a 2x2 solve in the generic form and as JAX's
// CPU custom call (@lapack_dtrsm_ffi, its flags as LAPACK's characters),
// the custom calls that stay refused; cholesky in the pretty form JAX
// prints and the generic one, lower and not (the spec's default), batched
// and complex, with XLA:CPU's NaN for a matrix that is not positive
// definite, its types checked, and priced with XLA's count.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/interpreter.h"
#include "mesh/mesh.h"
#include "tests/testing/hlo_run.h"

namespace tpumesh::hlo {
namespace {

using ::testing::HasSubstr;

using ::tpumesh::testing::RunMain;

std::string OneOp(const std::string& args, const std::string& result, const std::string& op) {
  return "func.func @main(" + args + ") -> " + result + " {\n  %0 = " + op + "\n  return %0 : " + result + "\n}\n";
}

Status VerifyText(const std::string& text) {
  auto m = ParseModule(text, "t.mlir");
  if (!m.ok()) return m.status();
  return Verify(*m);
}

TEST(LinalgTest, FftTransformsAnImpulseAndBack) {
  // FFT of the impulse at 0 is all ones; IFFT of all ones (scaled by 1/n)
  // is the impulse; RFFT of a real impulse is n/2 + 1 ones.
  const std::string c4 = "tensor<4xcomplex<f32>>";
  const std::vector<float> impulse = {1, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<float> ones = {1, 0, 1, 0, 1, 0, 1, 0};
  EXPECT_EQ(RunMain<float>(OneOp("%a: " + c4, c4, "stablehlo.fft %a, type = FFT, length = [4] : " + c4), {impulse}),
            ones);
  EXPECT_EQ(RunMain<float>(OneOp("%a: " + c4, c4, "stablehlo.fft %a, type = IFFT, length = [4] : " + c4), {ones}),
            impulse);
  EXPECT_EQ(RunMain<double>(OneOp("%a: tensor<4xf64>", "tensor<3xcomplex<f64>>",
                                  "stablehlo.fft %a, type = RFFT, length = [4] : (tensor<4xf64>) -> "
                                  "tensor<3xcomplex<f64>>"),
                            {{1, 0, 0, 0}}),
            (std::vector<double>{1, 0, 1, 0, 1, 0}));
}

TEST(LinalgTest, FftTypesAreChecked) {
  // RFFT of 8 reals gives 5 bins; FFT takes complex values; IRFFT gives reals.
  EXPECT_THAT(VerifyText(OneOp("%a: tensor<4x8xf32>", "tensor<4x4xcomplex<f32>>",
                               "stablehlo.fft %a, type = RFFT, length = [8] : (tensor<4x8xf32>) -> "
                               "tensor<4x4xcomplex<f32>>"))
                  .message(),
              HasSubstr("tensor<4x5xcomplex<f32>>"));
  EXPECT_THAT(VerifyText(OneOp("%a: tensor<8xf32>", "tensor<8xf32>",
                               "stablehlo.fft %a, type = FFT, length = [8] : tensor<8xf32>"))
                  .message(),
              HasSubstr("FFT does not take tensor<8xf32>"));
  EXPECT_THAT(VerifyText(OneOp("%a: tensor<8xcomplex<f32>>", "tensor<8xcomplex<f32>>",
                               "stablehlo.fft %a, type = FFT, length = [4] : tensor<8xcomplex<f32>>"))
                  .message(),
              HasSubstr("fft"));
}

// a = [[2, 0], [1, 1]] (lower), b = [2, 3]: a x = b gives x = [1, 2];
// a^T x = b gives x = [-0.5, 3].
const std::vector<double> kA = {2, 0, 1, 1};
const std::vector<double> kB = {2, 3};

std::string Generic(const std::string& transpose) {
  return OneOp("%a: tensor<2x2xf64>, %b: tensor<2x1xf64>", "tensor<2x1xf64>",
               "\"stablehlo.triangular_solve\"(%a, %b) <{left_side = true, lower = true, transpose_a = "
               "#stablehlo<transpose " + transpose + ">, unit_diagonal = false}> : (tensor<2x2xf64>, "
               "tensor<2x1xf64>) -> tensor<2x1xf64>");
}

std::string Trsm(const std::string& operands, const std::string& types, int trans_x, int side = 76) {
  return OneOp("%a: tensor<2x2xf64>, %b: tensor<2x1xf64>, %s: tensor<f64>", "tensor<2x1xf64>",
               "stablehlo.custom_call @lapack_dtrsm_ffi(" + operands +
                   ") {mhlo.backend_config = {diag = 78 : ui8, side = " + std::to_string(side) +
                   " : ui8, trans_x = " + std::to_string(trans_x) +
                   " : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : "
                   "tensor<2xindex>]} : (" + types + ") -> tensor<2x1xf64>");
}

TEST(LinalgTest, TriangularSolveAndTheLapackCustomCall) {
  const std::vector<double> unused = {0};
  EXPECT_EQ(RunMain<double>(Generic("NO_TRANSPOSE"), {kA, kB}), (std::vector<double>{1, 2}));
  EXPECT_EQ(RunMain<double>(Generic("TRANSPOSE"), {kA, kB}), (std::vector<double>{-0.5, 3}));
  const std::string two = "tensor<2x2xf64>, tensor<2x1xf64>";
  EXPECT_EQ(RunMain<double>(Trsm("%a, %b", two, 'N'), {kA, kB, unused}), (std::vector<double>{1, 2}));
  EXPECT_EQ(RunMain<double>(Trsm("%a, %b", two, 'T'), {kA, kB, unused}), (std::vector<double>{-0.5, 3}));
}

TEST(LinalgTest, OtherTrsmCallsStayRefused) {
  // A flag LAPACK does not have, or the older form with an alpha operand.
  for (const std::string& text : {Trsm("%a, %b", "tensor<2x2xf64>, tensor<2x1xf64>", 'X'),
                                  Trsm("%a, %b", "tensor<2x2xf64>, tensor<2x1xf64>", 'N', 'Q'),
                                  Trsm("%a, %b, %s", "tensor<2x2xf64>, tensor<2x1xf64>, tensor<f64>", 'N')}) {
    // Left a custom call (not read as triangular_solve), which Verify refuses.
    const Status st = VerifyText(text);
    EXPECT_FALSE(st.ok());
    EXPECT_THAT(st.message(), HasSubstr("unsupported custom_call @lapack_dtrsm_ffi"));
  }
}

// a = [[4, 2, 1], [2, 5, 3], [1, 3, 6]] = L L^T, L = [[2, 0, 0], [1, 2, 0],
// [0.5, 1.25, r]], r = sqrt(6 - 0.25 - 1.5625); the 9s are the triangle
// not read.
TEST(LinalgTest, CholeskyFactorsAsXla) {
  const double r = std::sqrt(6.0 - 0.25 - 1.5625);
  const std::string t = "tensor<3x3xf64>";
  EXPECT_EQ(RunMain<double>(OneOp("%a: " + t, t, "stablehlo.cholesky %a, lower = true : " + t),
                            {{4, 9, 9, 2, 5, 9, 1, 3, 6}}),
            (std::vector<double>{2, 0, 0, 1, 2, 0, 0.5, 1.25, r}));
  // Generic form, lower = false: U = L^T from the upper triangle.
  EXPECT_EQ(RunMain<double>(OneOp("%a: " + t, t, "\"stablehlo.cholesky\"(%a) <{lower = false}> : (" + t + ") -> " + t),
                            {{4, 2, 1, 9, 5, 3, 9, 9, 6}}),
            (std::vector<double>{2, 1, 0.5, 0, 2, 1.25, 0, 0, r}));
  // No lower: the spec's default, false.
  EXPECT_EQ(RunMain<double>(OneOp("%a: " + t, t, "stablehlo.cholesky %a : " + t), {{4, 2, 1, 9, 5, 3, 9, 9, 6}}),
            (std::vector<double>{2, 1, 0.5, 0, 2, 1.25, 0, 0, r}));
}

TEST(LinalgTest, CholeskyBatchedAndComplex) {
  // Two f32 entries: [[1, 0], [0, -1]] is not positive definite (NaN
  // everywhere, as XLA:CPU), [[4, 2], [2, 5]] gives [[2, 0], [1, 2]].
  const std::string b = "tensor<2x2x2xf32>";
  const std::vector<float> got =
      RunMain<float>(OneOp("%a: " + b, b, "stablehlo.cholesky %a, lower = true : " + b), {{1, 0, 0, -1, 4, 2, 2, 5}});
  ASSERT_EQ(got.size(), 8u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(got[i])) << i;
  EXPECT_EQ(std::vector<float>(got.begin() + 4, got.end()), (std::vector<float>{2, 0, 1, 2}));
  // Hermitian [[4, 2-2i], [2+2i, 6]]: L = [[2, 0], [1+i, 2]].
  const std::string c = "tensor<2x2xcomplex<f32>>";
  EXPECT_EQ(RunMain<float>(OneOp("%a: " + c, c, "stablehlo.cholesky %a, lower = true : " + c),
                           {{4, 0, 2, -2, 2, 2, 6, 0}}),
            (std::vector<float>{2, 0, 0, 0, 1, 1, 2, 0}));
}

TEST(LinalgTest, CholeskyTypesAreChecked) {
  const auto verify = [](const std::string& t) {
    return VerifyText(OneOp("%a: " + t, t, "stablehlo.cholesky %a, lower = true : " + t));
  };
  EXPECT_THAT(verify("tensor<3x4xf32>").message(), HasSubstr("square"));
  EXPECT_THAT(verify("tensor<2x2xi32>").message(), HasSubstr("f32, f64, complex<f32> or complex<f64>"));
  EXPECT_THAT(verify("tensor<4xf32>").message(), HasSubstr("rank"));
}

TEST(LinalgTest, CholeskyIsPricedAsXlaCountsIt) {
  // XLA's HandleCholesky: n x elements(a) / 3 = 3 x 2 x 9 / 3 = 18 flops.
  const std::string t = "tensor<2x3x3xf32>";
  auto m = ParseModule(OneOp("%a: " + t, t, "stablehlo.cholesky %a, lower = true : " + t), "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(Verify(*m).ok());
  std::vector<Tensor> args;
  args.push_back(NewTensor(m->funcs[0].arg_types[0], nullptr).value());
  std::vector<mesh::OpRecord> records;
  Options o;
  o.ops = &records;
  ASSERT_TRUE(RunFunction(*m, "main", std::move(args), DeviceSite{}, o).ok());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].type, "linalg");
  EXPECT_EQ(records[0].cost.flops, 18);
  EXPECT_EQ(records[0].cost.transcendentals, 0);
}

}  // namespace
}  // namespace tpumesh::hlo
