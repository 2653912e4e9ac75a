// Random matmul problems for the AMX tests (matmul_amx_test.cc, run where
// the host has AMX, and matmul_amx_emulated_test.cc, run everywhere on
// emulated tiles): A [m, k] and B [k, n] uniform in [-1, 1) from `seed`,
// every fifth value of A an integer in [-3, 3] (zeros and exact ties among
// the products), a bias row, and A in bf16 too when `bf16_a`.
#ifndef TPUMESH_TESTS_KERNELS_MATMUL_PROBLEM_H_
#define TPUMESH_TESTS_KERNELS_MATMUL_PROBLEM_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/matmul.h"

namespace tpumesh::kernels {

struct MatmulProblem {
  int64_t m = 0, n = 0, k = 0;
  Precision precision = Precision::kDefault;
  bool bf16_a = false, bias = false;
  std::vector<float> a, b, bias_v;
  std::vector<bf16> a16;
};

inline MatmulProblem MakeMatmulProblem(int64_t m, int64_t n, int64_t k, Precision precision, bool bf16_a, bool bias,
                                       uint32_t seed) {
  MatmulProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.precision = precision;
  p.bf16_a = bf16_a;
  p.bias = bias;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  p.a.resize(static_cast<size_t>(m * k));
  p.b.resize(static_cast<size_t>(k * n));
  p.bias_v.resize(static_cast<size_t>(n));
  for (float& v : p.a) v = u(rng);
  for (float& v : p.b) v = u(rng);
  for (float& v : p.bias_v) v = u(rng);
  for (size_t i = 0; i < p.a.size(); i += 5) p.a[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  if (bf16_a) {
    p.a16.resize(p.a.size());
    for (size_t i = 0; i < p.a.size(); ++i) p.a16[i] = F32ToBf16(p.a[i]);
  }
  return p;
}

// "17x33x37 default bf16 A bias": the problem in a failure message.
inline std::string MatmulProblemName(const MatmulProblem& p) {
  return std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k) + " " +
         std::string(PrecisionName(p.precision)) + (p.bf16_a ? " bf16 A" : "") + (p.bias ? " bias" : "");
}

}  // namespace tpumesh::kernels

#endif  // TPUMESH_TESTS_KERNELS_MATMUL_PROBLEM_H_
