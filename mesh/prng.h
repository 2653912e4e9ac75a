// JAX's threefry2x32 PRNG, bit for bit: keys from seeds, split, fold_in,
// random bits, uniform and normal float32 — so that a seed gives the same
// per-device keys and the same initial latents here as in JAX on a CPU.
//
// Contract: two implementations, as JAX has them. PrngImpl::kOriginal is
// jax < 0.5, or jax_threefry_partitionable=False: split and random bits run
// threefry over a flat uint32 iota counter (odd sizes padded by one).
// PrngImpl::kPartitionable is the default from jax 0.5 on: each output
// element's counter is its 64-bit row-major index as (hi, lo); bits are
// out0 ^ out1. split(key(0), 2) is [[4146024105, 967050713], [2718843009,
// 1272950319]] (original) and [[1797259609, 2579123966], [928981903,
// 3453687069]] (partitionable). Uniform and Normal are jax.random's float32
// recipes as XLA:CPU on x86-64 compiles them (FMA-contracted, erf_inv through
// XLA's own log1p), bit-exact with JAX 0.10.2 for all 2^23 distinct inputs
// (bits >> 9). The tests compare every function with numbers JAX itself
// produced (scripts/refdata/make_prng_ref.py). Pure functions; thread-safe.
// Inputs from outside go through SplitChecked / CheckRandomShape first; the
// plain functions treat bad arguments as preconditions.
#ifndef TPUMESH_MESH_PRNG_H_
#define TPUMESH_MESH_PRNG_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace tpumesh::mesh {

// The raw key data: jax.random.key_data(key), or a legacy PRNGKey array.
using PrngKey = std::array<uint32_t, 2>;

enum class PrngImpl {
  kOriginal,       // jax < 0.5; jax_threefry_partitionable=False
  kPartitionable,  // default from jax 0.5; jax_threefry_partitionable=True
};

// jax.random.key(seed) / PRNGKey(seed) with jax_enable_x64=True:
// [seed >> 32, seed & 0xffffffff]. A negative int64 seed is its two's
// complement (JAX's threefry_seed shifts it logically), so pass
// static_cast<uint64_t>(seed); key(-1) is [0xffffffff, 0xffffffff].
PrngKey KeyFromSeed(uint64_t seed);

// jax.random.key(seed) with the default jax_enable_x64=False: JAX narrows the
// seed to int32 first, so the key is [0, seed & 0xffffffff] (key(2**32 + 7)
// is [0, 7], key(-1) is [0, 0xffffffff]). Equal to KeyFromSeed for
// 0 <= seed < 2**32.
PrngKey KeyFromSeedX32(int64_t seed);

// The Threefry-2x32 block cipher, 20 rounds (Random123's threefry2x32_20, as
// jax's threefry2x32_p): (out0[i], out1[i]) = threefry(key, (x0[i], x1[i]))
// for i < n.
void Threefry2x32(PrngKey key, const uint32_t* x0, const uint32_t* x1,
                  uint32_t* out0, uint32_t* out1, size_t n);

// jax.random.split(key, num). Precondition: num >= 0 (an empty result
// otherwise); SplitChecked says InvalidArgument instead.
std::vector<PrngKey> Split(PrngKey key, int num, PrngImpl impl);
StatusOr<std::vector<PrngKey>> SplitChecked(PrngKey key, int num,
                                            PrngImpl impl);

// jax.random.fold_in(key, data): threefry(key, (0, data)). The same in both
// implementations; `impl` is accepted for symmetry with the rest.
PrngKey FoldIn(PrngKey key, uint32_t data,
               PrngImpl impl = PrngImpl::kPartitionable);

// OK when `shape` can be sampled: no negative dimension, and (kOriginal) at
// most 2^32 - 2 elements (JAX switches to per-block subkeys beyond that,
// which is not implemented here).
Status CheckRandomShape(std::span<const int64_t> shape, PrngImpl impl);

// jax.random.bits(key, shape, jnp.uint32), row-major into out (which holds
// the product of `shape` elements). Precondition: CheckRandomShape is OK.
void RandomBits32(PrngKey key, PrngImpl impl, std::span<const int64_t> shape,
                  uint32_t* out);

// jax.random.uniform(key, shape, jnp.float32, minval, maxval).
void Uniform(PrngKey key, PrngImpl impl, std::span<const int64_t> shape,
             float minval, float maxval, float* out);

// jax.random.normal(key, shape, jnp.float32).
void Normal(PrngKey key, PrngImpl impl, std::span<const int64_t> shape,
            float* out);

// The per-element maps behind Uniform and Normal, from one 32-bit random word
// (what RandomBits32 gives): max(minval, f * (maxval - minval) + minval) with
// f = bitcast((bits >> 9) | 0x3f800000) - 1, and sqrt(2) * erf_inv(uniform in
// (nextafter(-1, 0), 1)).
float UniformFromBits(uint32_t bits, float minval, float maxval);
float NormalFromBits(uint32_t bits);

// XLA's float32 erf_inv (Giles' single-precision approximation: w =
// -log1p(-x^2), one polynomial in w - 2.5 for w < 5 and one in sqrt(w) - 3
// beyond; erf_inv(+-1) = +-inf), with XLA:CPU's own log1p and log, and the
// multiply-adds fused where XLA:CPU fuses them. Checked on every input
// Normal gives it; XLA flushes subnormals to zero and this does not.
float ErfInvF32(float x);

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_PRNG_H_
