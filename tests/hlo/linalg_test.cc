// stablehlo.fft and stablehlo.triangular_solve through hlo/ on small
// modules worked by hand: the types each fft_type takes, the transforms of
// an impulse, a 2x2 solve in the generic form and as JAX's CPU custom call
// (@lapack_dtrsm_ffi, its flags as LAPACK's characters), and the custom
// calls that stay refused.
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/interpreter.h"
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

}  // namespace
}  // namespace tpumesh::hlo
