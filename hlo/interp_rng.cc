// stablehlo.rng_bit_generator as XLA:CPU computes it, so a program's bits
// are the ones jax's CPU backend gives (jax.random's 'rbg' and
// 'unsafe_rbg' keys, lax.rng_bit_generator).
//
// XLA:CPU runs DEFAULT as PHILOX (its RngBitGeneratorExpander): Philox4x32
// with 10 rounds. The state is ui64[n]: state[0] the key (its low and high
// 32-bit words the two key words), the 128-bit counter (state[1], state[2])
// when n >= 3, else (state[1], state[0]) (low, high). Block i of four 32-bit
// words is Philox of the counter plus i (the carry into the high half);
// the result takes the words in order: a 32-bit element is one word, a
// 64-bit one two (low word first), an 8- or 16-bit one the low bits of one
// word. The state returned is the key, then the counter's low half plus the
// number of blocks (and, when n >= 3, its high half with the carry).
// THREE_FRY is refused (UNIMPLEMENTED).
#include <cstdint>
#include <cstring>
#include <string>

#include "base/printable.h"
#include "hlo/interpreter_impl.h"

namespace tpumesh::hlo {
namespace {

struct Block4 {
  uint32_t w[4];
};

// Philox4x32-10 of one counter block under key (k0, k1).
Block4 Philox4x32(Block4 x, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(x.w[0]) * 0xD2511F53u;
    const uint64_t p1 = static_cast<uint64_t>(x.w[2]) * 0xCD9E8D57u;
    x = Block4{{static_cast<uint32_t>(p1 >> 32) ^ x.w[1] ^ k0, static_cast<uint32_t>(p1),
                static_cast<uint32_t>(p0 >> 32) ^ x.w[3] ^ k1, static_cast<uint32_t>(p0)}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return x;
}

std::string AlgorithmOf(const Op& op) {
  for (const char* key : {"rng_algorithm", "algorithm"})
    if (const Attr* a = op.Find(key); a && (a->kind == Attr::Kind::kWord || a->kind == Attr::Kind::kString)) {
      for (const char* name : {"THREE_FRY", "PHILOX", "DEFAULT"})
        if (a->s.find(name) != std::string::npos) return name;
      return a->s;
    }
  return "DEFAULT";
}

}  // namespace

Status Interpreter::RngBitGenerator(const Op& op, const Tensor& state, std::vector<Tensor>& out) {
  const std::string algorithm = AlgorithmOf(op);
  if (algorithm == "THREE_FRY")
    return UnimplementedError("algorithm THREE_FRY is not computed (DEFAULT and PHILOX are, as XLA:CPU's Philox)");
  if (algorithm != "DEFAULT" && algorithm != "PHILOX")
    return InvalidArgumentError("unknown algorithm " + Quoted(algorithm));
  if (state.type.element != ElementType::kU64 || state.type.dims.size() != 1 || state.type.dims[0] < 2)
    return InvalidArgumentError("the state must be ui64[n], n >= 2; got " + state.type.ToString());
  if (out.size() != 2 || !(out[0].type == state.type))
    return InvalidArgumentError("the results must be the state's type and the bits");
  const int width = ElementTypeBytes(out[1].type.element);
  const ElementType et = out[1].type.element;
  const bool integer = et == ElementType::kU8 || et == ElementType::kU16 || et == ElementType::kU32 ||
                       et == ElementType::kU64 || et == ElementType::kI8 || et == ElementType::kI16 ||
                       et == ElementType::kI32 || et == ElementType::kI64;
  if (!integer) return InvalidArgumentError("the bits must be 8- to 64-bit integers, got " + out[1].type.ToString());
  const int64_t n = state.type.dims[0];
  const uint64_t* s = state.as<uint64_t>();
  const uint64_t key = s[0];
  const uint64_t low = s[1];
  const uint64_t high = n >= 3 ? s[2] : s[0];
  const uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  const int64_t count = out[1].num_elements();
  const int64_t words = width == 8 ? 2 * count : count;
  const int64_t blocks = (words + 3) / 4;
  uint8_t* bits = static_cast<uint8_t*>(out[1].data.mutable_raw());
  for (int64_t b = 0; b < blocks; ++b) {
    const uint64_t lo = low + static_cast<uint64_t>(b);
    const uint64_t hi = lo < low ? high + 1 : high;
    const Block4 r = Philox4x32(Block4{{static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32),
                                        static_cast<uint32_t>(hi), static_cast<uint32_t>(hi >> 32)}},
                                k0, k1);
    for (int j = 0; j < 4; ++j) {
      const int64_t w = 4 * b + j;
      if (w >= words) break;
      if (width == 8) {  // the low word of element w / 2, then its high word
        std::memcpy(bits + (w / 2) * 8 + (w % 2) * 4, &r.w[j], 4);
      } else if (width == 4) {
        std::memcpy(bits + w * 4, &r.w[j], 4);
      } else if (width == 2) {
        const uint16_t v = static_cast<uint16_t>(r.w[j]);
        std::memcpy(bits + w * 2, &v, 2);
      } else {
        bits[w] = static_cast<uint8_t>(r.w[j]);
      }
    }
  }
  uint64_t* next = out[0].mutable_as<uint64_t>();
  for (int64_t i = 0; i < n; ++i) next[i] = s[i];
  const uint64_t new_low = low + static_cast<uint64_t>(blocks);
  next[1] = new_low;
  if (n >= 3) next[2] = new_low < low ? high + 1 : high;
  return OkStatus();
}

}  // namespace tpumesh::hlo
