#include "mesh/prng.h"

#include <bit>
#include <cmath>
#include <limits>

namespace tpumesh::mesh {
namespace {

inline uint32_t Rotl(uint32_t v, int r) { return (v << r) | (v >> (32 - r)); }

int64_t Count(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// jax's threefry_2x32(keypair, count) on a flat count array: pad to even,
// cipher the first half against the second, concatenate, drop the pad.
std::vector<uint32_t> ThreefryFlat(PrngKey key, const std::vector<uint32_t>& count) {
  std::vector<uint32_t> c = count;
  const bool odd = c.size() % 2 == 1;
  if (odd) c.push_back(0);
  const size_t half = c.size() / 2;
  std::vector<uint32_t> out(c.size());
  Threefry2x32(key, c.data(), c.data() + half, out.data(), out.data() + half, half);
  if (odd) out.pop_back();
  return out;
}

}  // namespace

PrngKey KeyFromSeed(uint64_t seed) {
  return {static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed & 0xffffffffu)};
}

void Threefry2x32(PrngKey key, const uint32_t* x0, const uint32_t* x1, uint32_t* out0,
                  uint32_t* out1, size_t n) {
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {key[0], key[1], key[0] ^ key[1] ^ 0x1BD11BDAu};
  for (size_t i = 0; i < n; ++i) {
    uint32_t a = x0[i] + ks[0];
    uint32_t b = x1[i] + ks[1];
    for (int g = 0; g < 5; ++g) {
      for (int r : kRot[g % 2]) {
        a += b;
        b = Rotl(b, r);
        b ^= a;
      }
      // Key injection after each group of 4 rounds.
      a += ks[(g + 1) % 3];
      b += ks[(g + 2) % 3] + static_cast<uint32_t>(g + 1);
    }
    out0[i] = a;
    out1[i] = b;
  }
}

StatusOr<std::vector<PrngKey>> Split(PrngKey key, int num, PrngImpl impl) {
  if (num < 0) return InvalidArgumentError("split: num must be >= 0, got " + std::to_string(num));
  std::vector<PrngKey> keys(num);
  if (impl == PrngImpl::kOriginal) {
    std::vector<uint32_t> iota(2 * static_cast<size_t>(num));
    for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<uint32_t>(i);
    const std::vector<uint32_t> bits = ThreefryFlat(key, iota);
    for (int i = 0; i < num; ++i) keys[i] = {bits[2 * i], bits[2 * i + 1]};
  } else {
    for (int i = 0; i < num; ++i) {
      const uint32_t hi = 0, lo = static_cast<uint32_t>(i);
      Threefry2x32(key, &hi, &lo, &keys[i][0], &keys[i][1], 1);
    }
  }
  return keys;
}

PrngKey FoldIn(PrngKey key, uint32_t data) {
  const std::vector<uint32_t> bits = ThreefryFlat(key, {0u, data});
  return {bits[0], bits[1]};
}

void RandomBits32(PrngKey key, PrngImpl impl, std::span<const int64_t> shape, uint32_t* out) {
  const int64_t n = Count(shape);
  if (impl == PrngImpl::kOriginal) {
    std::vector<uint32_t> iota(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) iota[i] = static_cast<uint32_t>(i);
    const std::vector<uint32_t> bits = ThreefryFlat(key, iota);
    std::copy(bits.begin(), bits.end(), out);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t idx = static_cast<uint64_t>(i);
    const uint32_t hi = static_cast<uint32_t>(idx >> 32), lo = static_cast<uint32_t>(idx);
    uint32_t b0, b1;
    Threefry2x32(key, &hi, &lo, &b0, &b1, 1);
    out[i] = b0 ^ b1;
  }
}

void Uniform(PrngKey key, PrngImpl impl, std::span<const int64_t> shape, float minval,
             float maxval, float* out) {
  const int64_t n = Count(shape);
  std::vector<uint32_t> bits(static_cast<size_t>(n));
  RandomBits32(key, impl, shape, bits.data());
  const float scale = maxval - minval;
  for (int64_t i = 0; i < n; ++i) {
    // 23 random mantissa bits under the exponent of 1.0: a float in [1, 2).
    const float f = std::bit_cast<float>((bits[i] >> 9) | 0x3f800000u) - 1.0f;
    // XLA's CPU backend fuses this multiply-add (measured: plain f*s+m is 1
    // ulp off JAX for some elements).
    out[i] = std::max(minval, std::fma(f, scale, minval));
  }
}

float ErfInvF32(float x) {
  // Giles, "Approximating the erfinv function" (single precision), as XLA's
  // ErfInv32: w = -log1p(-x^2), a degree-8 polynomial in w - 2.5 (w < 5) or
  // sqrt(w) - 3, times x; erfinv(+-1) = +-inf.
  static constexpr float kLt5[9] = {2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
                                    -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
                                    -0.00417768164f,  0.246640727f,    1.50140941f};
  static constexpr float kGe5[9] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                                    -0.00367342844f,  0.00573950773f,  -0.0076224613f,
                                    0.00943887047f,   1.00167406f,     2.83297682f};
  float w = -std::log1p(-x * x);
  const bool lt = w < 5.0f;
  const float* c = lt ? kLt5 : kGe5;
  w = lt ? w - 2.5f : std::sqrt(w) - 3.0f;
  float p = c[0];
  for (int i = 1; i < 9; ++i) p = std::fma(p, w, c[i]);  // fused, as XLA CPU
  if (std::fabs(x) == 1.0f) return x * std::numeric_limits<float>::max() * 2.0f;  // +-inf
  return p * x;
}

void Normal(PrngKey key, PrngImpl impl, std::span<const int64_t> shape, float* out) {
  const int64_t n = Count(shape);
  // uniform in (nextafter(-1, 0), 1), then sqrt(2) * erfinv(u).
  const float lo = std::nextafter(-1.0f, 0.0f);
  Uniform(key, impl, shape, lo, 1.0f, out);
  const float sqrt2 = static_cast<float>(std::sqrt(2.0));
  for (int64_t i = 0; i < n; ++i) out[i] = sqrt2 * ErfInvF32(out[i]);
}

}  // namespace tpumesh::mesh
