// JAX's threefry2x32 PRNG, bit for bit: keys from seeds, split, fold_in,
// random bits, uniform and normal floats — so the same seed gives the same
// per-device keys and the same initial latents as JAX would.
//
// Contract: two implementations, as JAX has them. PrngImpl::kOriginal is
// jax < 0.5 (jax_threefry_partitionable=False): split and random_bits run
// threefry over a flat iota counter. PrngImpl::kPartitionable is the default
// from jax 0.5: each output element's counter is its (hi, lo) 64-bit index.
// Key(0) split in 2 gives [[4146024105, 967050713], [2718843009, 1272950319]]
// (original) and [[1797259609, 2579123966], [928981903, 3453687069]]
// (partitionable). Uniform and Normal follow jax.random's float32 recipes;
// Normal uses XLA's float32 erf_inv polynomial (Giles' approximation).
// Tests compare every function with numbers JAX itself produced
// (scripts/refdata/make_prng_ref.py). Pure functions; thread-safe.
#ifndef TPUMESH_MESH_PRNG_H_
#define TPUMESH_MESH_PRNG_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace tpumesh::mesh {

using PrngKey = std::array<uint32_t, 2>;

enum class PrngImpl { kOriginal, kPartitionable };

// jax.random.PRNGKey(seed) / key_data(jax.random.key(seed)) for a seed given
// as a 64-bit integer: [seed >> 32, seed & 0xffffffff] (a negative int64 seed
// is taken as its two's complement, as JAX does).
PrngKey KeyFromSeed(uint64_t seed);

// The Threefry-2x32 block cipher with 20 rounds (Random123's threefry2x32_20,
// as jax's threefry2x32_p): (out0[i], out1[i]) = threefry(key, (x0[i], x1[i])).
void Threefry2x32(PrngKey key, const uint32_t* x0, const uint32_t* x1, uint32_t* out0,
                  uint32_t* out1, size_t n);

// jax.random.split(key, num). InvalidArgument for num < 0.
StatusOr<std::vector<PrngKey>> Split(PrngKey key, int num, PrngImpl impl);
// jax.random.fold_in(key, data).
PrngKey FoldIn(PrngKey key, uint32_t data);

// jax.random.bits(key, shape, jnp.uint32), row-major into out.
void RandomBits32(PrngKey key, PrngImpl impl, std::span<const int64_t> shape, uint32_t* out);
// jax.random.uniform(key, shape, jnp.float32, minval, maxval).
void Uniform(PrngKey key, PrngImpl impl, std::span<const int64_t> shape, float minval,
             float maxval, float* out);
// jax.random.normal(key, shape, jnp.float32).
void Normal(PrngKey key, PrngImpl impl, std::span<const int64_t> shape, float* out);

// XLA's float32 erf_inv (exposed for tests).
float ErfInvF32(float x);

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_PRNG_H_
