// TimestepEmbeddingF32: hand-computed values of diffusers'
// get_timestep_embedding, and the reference on every Highway target.
#include "kernels/timestep_embedding.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/ops_reference.h"
#include "tests/kernels/ops_test_util.h"

namespace tpumesh::kernels {
namespace {

using testing::ExpectAllNear;
using testing::ForEachTarget;
using testing::kU;
using testing::WorstRatio;

// sin/cos of the (identical) f32 arguments: Highway's are within 3 ulp of
// values <= 1, the reference rounds the double value once: 4 u absolute.
constexpr double kTol = 4 * kU;

struct Golden {
  std::vector<float> t;
  int64_t dim;
  bool flip;
  float shift;
  std::vector<float> want;
};

// Worked by hand from embeddings.py with every step rounded to f32 as torch
// does (exponent = f32(-ln 10000) * i / f32(half - shift), freq = exp, arg =
// t * freq), then sin/cos of those f32 arguments:
//  dim 4, shift 1: half 2, freq = [1, exp(-9.2103405) = 9.99999902e-5].
//  dim 6, shift 0: half 3, freq = [1, 10000^(-1/3) = 0.0464158915, 10000^(-2/3)
//  = 0.0021544348].
std::vector<Golden> Goldens() {
  return {
      {{1.0f},
       4,
       false,
       1.0f,
       {0.84147096f, 9.99999902e-05f, 0.54030228f, 1.0f}},
      {{1.0f},
       4,
       true,
       1.0f,
       {0.54030228f, 1.0f, 0.84147096f, 9.99999902e-05f}},
      // Odd dim: one zero column at the end.
      {{1.0f},
       5,
       false,
       1.0f,
       {0.84147096f, 9.99999902e-05f, 0.54030228f, 1.0f, 0.0f}},
      {{0.0f}, 6, true, 0.0f, {1, 1, 1, 0, 0, 0}},
      // args 10, 0.464158922, 0.0215443484.
      {{10.0f},
       6,
       true,
       0.0f,
       {-0.83907151f, 0.89419842f, 0.99976796f, -0.54402113f, 0.44767088f,
        0.02154268f}},
      // args 981, 45.533989, 2.1135006 (SD's first DDIM/PNDM step); batch 2.
      {{981.0f, 1.0f},
       6,
       false,
       0.0f,
       {0.73325181f, 0.99981749f, 0.85631520f, 0.67995721f, 0.019103363f,
        -0.51645356f, 0.84147096f, 0.046399228f, 0.0021544332f, 0.54030228f,
        0.99892300f, 0.99999768f}},
  };
}

TEST(TimestepEmbeddingTest, HandComputedValuesEveryTarget) {
  ForEachTarget([](const char*) {
    for (const Golden& g : Goldens()) {
      const int64_t b = static_cast<int64_t>(g.t.size());
      std::vector<float> got(b * g.dim, NAN);
      ASSERT_TRUE(TimestepEmbeddingF32(g.t.data(), b, g.dim, g.flip, g.shift,
                                       got.data())
                      .ok());
      ExpectAllNear(got, g.want, kTol,
                    "dim " + std::to_string(g.dim) + (g.flip ? " flip" : "") +
                        " shift " + std::to_string(g.shift));
    }
  });
}

TEST(TimestepEmbeddingTest, MatchesReferenceEveryTarget) {
  const std::vector<float> t = {0.0f,   1.0f,   20.5f,  500.0f,
                                981.0f, 999.0f, 1000.0f};
  WorstRatio worst("timestep_embedding");
  ForEachTarget([&](const char*) {
    for (int64_t dim : {1, 5, 17, 320, 321, 1280}) {
      for (bool flip : {false, true}) {
        for (float shift : {0.0f, 1.0f}) {
          for (float scale : {1.0f, 0.5f}) {
            const int64_t b = static_cast<int64_t>(t.size());
            std::vector<float> got(b * dim, NAN), want(b * dim);
            ASSERT_TRUE(TimestepEmbeddingF32(t.data(), b, dim, flip, shift,
                                             got.data(), scale)
                            .ok());
            reference::TimestepEmbedding(t.data(), b, dim, flip, shift,
                                         want.data(), scale);
            worst.Add(ExpectAllNear(got, want, kTol,
                                    "dim " + std::to_string(dim) +
                                        (flip ? " flip" : "") + " shift " +
                                        std::to_string(shift) + " scale " +
                                        std::to_string(scale)));
          }
        }
      }
    }
  });
}

TEST(TimestepEmbeddingTest, RejectsBadArguments) {
  float t = 1, y[4];
  // dim 2 with shift 1: half - shift = 0, diffusers would compute 0 / 0.
  Status st = TimestepEmbeddingF32(&t, 1, 2, false, 1.0f, y);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("divide by 0"), std::string::npos)
      << st.message();
  EXPECT_EQ(TimestepEmbeddingF32(&t, 1, 0, false, 1.0f, y).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(TimestepEmbeddingF32(&t, 1, 2, false, 0.0f, y).ok());
  EXPECT_EQ(TimestepEmbeddingF32(&t, 1, 4, false, 1.0f, y, 1.0f, 0.0f).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpumesh::kernels
