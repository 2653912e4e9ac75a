#include "mesh/prng.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

// Uniform and Normal follow what XLA:CPU (jaxlib 0.10.2, x86-64 with FMA)
// emits for jax.random.uniform / normal, read from its dumped LLVM IR and
// object code (XLA_FLAGS=--xla_dump_to=DIR): every multiply-add it fuses is
// written as std::fma here, and every one it does not must stay two
// roundings, so no contraction by the compiler whatever -march or
// -ffp-contract the build uses.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tpumesh::mesh {
namespace {

constexpr uint32_t kUint32Max = std::numeric_limits<uint32_t>::max();

inline uint32_t Rotl(uint32_t v, int r) { return (v << r) | (v >> (32 - r)); }

inline uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
inline float Float(uint32_t u) { return std::bit_cast<float>(u); }

int64_t Count(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// jax's threefry_2x32(keypair, count) on a flat count array: pad an odd size
// with one zero, cipher the first half against the second, concatenate, drop
// the pad.
std::vector<uint32_t> ThreefryFlat(PrngKey key, std::vector<uint32_t> count) {
  const bool odd = count.size() % 2 == 1;
  if (odd) count.push_back(0);
  const size_t half = count.size() / 2;
  std::vector<uint32_t> out(count.size());
  Threefry2x32(key, count.data(), count.data() + half, out.data(),
               out.data() + half, half);
  if (odd) out.pop_back();
  return out;
}

// XLA:CPU's float32 log (its "xla.log.f32" intrinsic, Eigen's Cephes-style
// plog), as the x86-64 backend compiles it: every multiply-add fused.
float XlaLogF32(float a) {
  if (!(a > 0.0f))
    return a == 0.0f ? -std::numeric_limits<float>::infinity()
                     : Float(0xffffffffu);  // NaN, as XLA
  if (a == std::numeric_limits<float>::infinity()) return a;
  const float x0 = std::max(a, std::numeric_limits<float>::min());
  const uint32_t b = Bits(x0);
  // Exponent, and the mantissa scaled into [0.5, 1).
  float e = static_cast<float>(static_cast<int32_t>(b >> 23) - 127) + 1.0f;
  const float m = Float((b & 0x807fffffu) | 0x3f000000u);
  // Below sqrt(1/2): use 2m - 1 and one exponent less.
  const bool below = m < Float(0x3f3504f3u);
  e = e - (below ? 1.0f : 0.0f);
  const float x = (m + -1.0f) + (below ? m : 0.0f);
  const float x2 = x * x;
  const float x3 = x2 * x;
  float y = std::fma(Float(0x3d9021bbu), x, Float(0xbdebd1b8u));
  float y1 = std::fma(Float(0xbdfe5d4fu), x, Float(0x3e11e9bfu));
  float y2 = std::fma(Float(0x3e4cceacu), x, Float(0xbe7ffffcu));
  y = std::fma(y, x, Float(0x3def251au));
  y1 = std::fma(y1, x, Float(0xbe2aae50u));
  y2 = std::fma(y2, x, Float(0x3eaaaaaau));
  y = std::fma(y, x3, y1);
  y = std::fma(y, x3, y2);
  y = std::fma(y, x3, e * Float(0xb95e8083u));  // e * -2.12194440e-4
  float r = std::fma(x2, -0.5f, x);
  r = r + y;
  return std::fma(e, Float(0x3f318000u), r);  // e * 0.693359375
}

// XLA's log1p (ElementalIrEmitter::EmitLog1p): log(1 + v) for |v| >= sqrt(2)
// - 1, else Cephes' rational approximation v - v^2/2 + v^3 P(v)/Q(v).
float XlaLog1pF32(float v) {
  if (!(std::fabs(v) < Float(0x3ed413cdu))) return XlaLogF32(v + 1.0f);
  static constexpr uint32_t kNum[7] = {0x383de04bu, 0x3eff40c5u, 0x40d284fau,
                                       0x41ef4b9cu, 0x4273cc76u, 0x426473adu,
                                       0x41a05101u};
  static constexpr uint32_t kDen[7] = {0x3f800000u, 0x417101adu, 0x42a6185bu,
                                       0x435dc32du, 0x439a8ca3u, 0x43586d8au,
                                       0x42707982u};
  float num = Float(kNum[0]);
  float den = Float(kDen[0]);
  for (int i = 1; i < 7; ++i) {
    num = std::fma(num, v, Float(kNum[i]));
    den = std::fma(den, v, Float(kDen[i]));
  }
  const float v2 = v * v;
  const float t = (v * v2) * (num / den);
  return v + std::fma(v2, -0.5f, t);
}

}  // namespace

PrngKey KeyFromSeed(uint64_t seed) {
  return {static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed)};
}

PrngKey KeyFromSeedX32(int64_t seed) {
  return {0u, static_cast<uint32_t>(static_cast<uint64_t>(seed))};
}

void Threefry2x32(PrngKey key, const uint32_t* x0, const uint32_t* x1,
                  uint32_t* out0, uint32_t* out1, size_t n) {
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
      // Key injection after each group of four rounds.
      a += ks[(g + 1) % 3];
      b += ks[(g + 2) % 3] + static_cast<uint32_t>(g + 1);
    }
    out0[i] = a;
    out1[i] = b;
  }
}

std::vector<PrngKey> Split(PrngKey key, int num, PrngImpl impl) {
  if (num <= 0) return {};
  std::vector<PrngKey> keys(static_cast<size_t>(num));
  if (impl == PrngImpl::kOriginal) {
    std::vector<uint32_t> iota(2 * static_cast<size_t>(num));
    for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<uint32_t>(i);
    const std::vector<uint32_t> bits = ThreefryFlat(key, std::move(iota));
    for (size_t i = 0; i < keys.size(); ++i)
      keys[i] = {bits[2 * i], bits[2 * i + 1]};
  } else {
    for (size_t i = 0; i < keys.size(); ++i) {
      const uint32_t hi = 0, lo = static_cast<uint32_t>(i);
      Threefry2x32(key, &hi, &lo, &keys[i][0], &keys[i][1], 1);
    }
  }
  return keys;
}

StatusOr<std::vector<PrngKey>> SplitChecked(PrngKey key, int num,
                                            PrngImpl impl) {
  if (num < 0)
    return InvalidArgumentError("split: num must be >= 0, got " +
                                std::to_string(num));
  return Split(key, num, impl);
}

PrngKey FoldIn(PrngKey key, uint32_t data, PrngImpl /*impl*/) {
  const uint32_t hi = 0;
  PrngKey out;
  Threefry2x32(key, &hi, &data, &out[0], &out[1], 1);
  return out;
}

Status CheckRandomShape(std::span<const int64_t> shape, PrngImpl impl) {
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      return InvalidArgumentError("random shape: dimension " +
                                  std::to_string(i) + " is negative (" +
                                  std::to_string(shape[i]) + ")");
  }
  if (std::find(shape.begin(), shape.end(), 0) != shape.end())
    return OkStatus();
  // The element count, kept below 2^62 so that it cannot overflow.
  constexpr int64_t kMaxElements = int64_t{1} << 62;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d > kMaxElements / n)
      return InvalidArgumentError("random shape: more than 2^62 elements");
    n *= d;
  }
  if (impl == PrngImpl::kOriginal && n >= int64_t{kUint32Max})
    return InvalidArgumentError(
        "random shape: " + std::to_string(n) +
        " elements; the original threefry implementation is supported up to "
        "2^32 - 2");
  return OkStatus();
}

void RandomBits32(PrngKey key, PrngImpl impl, std::span<const int64_t> shape,
                  uint32_t* out) {
  const int64_t n = Count(shape);
  if (n <= 0) return;
  if (impl == PrngImpl::kOriginal) {
    std::vector<uint32_t> iota(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) iota[i] = static_cast<uint32_t>(i);
    const std::vector<uint32_t> bits = ThreefryFlat(key, std::move(iota));
    std::copy(bits.begin(), bits.end(), out);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t idx = static_cast<uint64_t>(i);
    const uint32_t hi = static_cast<uint32_t>(idx >> 32);
    const uint32_t lo = static_cast<uint32_t>(idx);
    uint32_t b0, b1;
    Threefry2x32(key, &hi, &lo, &b0, &b1, 1);
    out[i] = b0 ^ b1;
  }
}

float UniformFromBits(uint32_t bits, float minval, float maxval) {
  // 23 random mantissa bits under the exponent of 1.0: a float in [1, 2).
  const float f = Float((bits >> 9) | 0x3f800000u) - 1.0f;
  // XLA:CPU fuses the multiply-add (plain f * s + m is 1 ulp off JAX for
  // some words).
  return std::max(minval, std::fma(f, maxval - minval, minval));
}

void Uniform(PrngKey key, PrngImpl impl, std::span<const int64_t> shape,
             float minval, float maxval, float* out) {
  const int64_t n = Count(shape);
  if (n <= 0) return;
  std::vector<uint32_t> bits(static_cast<size_t>(n));
  RandomBits32(key, impl, shape, bits.data());
  for (int64_t i = 0; i < n; ++i)
    out[i] = UniformFromBits(bits[i], minval, maxval);
}

float ErfInvF32(float x) {
  // Giles, "Approximating the erfinv function" (single precision), as XLA's
  // ErfInv32 / CHLO's erf_inv decomposition; Horner steps fused as XLA:CPU.
  static constexpr float kLt5[9] = {
      2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
      -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
      -0.00417768164f,  0.246640727f,    1.50140941f};
  static constexpr float kGe5[9] = {
      -0.000200214257f, 0.000100950558f, 0.00134934322f,
      -0.00367342844f,  0.00573950773f,  -0.0076224613f,
      0.00943887047f,   1.00167406f,     2.83297682f};
  if (std::fabs(x) == 1.0f) return x * std::numeric_limits<float>::infinity();
  const float lp = XlaLog1pF32(x * -x);  // -w
  const bool lt5 = lp > -5.0f;           // w < 5
  const float* c = lt5 ? kLt5 : kGe5;
  const float t = lt5 ? -2.5f - lp : std::sqrt(-lp) - 3.0f;
  float p = c[0];
  for (int i = 1; i < 9; ++i) p = std::fma(p, t, c[i]);
  return p * x;
}

float NormalFromBits(uint32_t bits) {
  // Uniform in (nextafter(-1, 0), 1): the open interval keeps erf_inv finite.
  constexpr float kLo = std::bit_cast<float>(0xbf7fffffu);     // -0.99999994
  constexpr float kSqrt2 = std::bit_cast<float>(0x3fb504f3u);  // float(sqrt 2)
  return ErfInvF32(UniformFromBits(bits, kLo, 1.0f)) * kSqrt2;
}

void Normal(PrngKey key, PrngImpl impl, std::span<const int64_t> shape,
            float* out) {
  const int64_t n = Count(shape);
  if (n <= 0) return;
  std::vector<uint32_t> bits(static_cast<size_t>(n));
  RandomBits32(key, impl, shape, bits.data());
  for (int64_t i = 0; i < n; ++i) out[i] = NormalFromBits(bits[i]);
}

}  // namespace tpumesh::mesh
