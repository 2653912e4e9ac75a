// Per-target bf16 rounding for Highway bodies: the vector twin of
// F32ToBf16 / RoundToBf16 in kernels/bf16.h, bit-identical to them on every
// input (round to nearest, ties to even; Inf kept; NaN -> 0x7fc0 | sign; no
// flushing of denormals). Highway 1.0.3's DemoteTo(bf16) truncates instead,
// so it is not used. Include after hwy/highway.h inside a Highway
// per-target compilation (see kernels/matmul-inl.h).

// Per-target include guard (the Highway idiom).
#if defined(TPUMESH_KERNELS_BF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TPUMESH_KERNELS_BF16_INL_H_
#undef TPUMESH_KERNELS_BF16_INL_H_
#else
#define TPUMESH_KERNELS_BF16_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tpumesh::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// RoundToBf16 for lanes known not to be NaN (e.g. an exp's outputs): the
// same bits on every other input, five operations fewer.
template <class D>
HWY_INLINE hn::Vec<D> RoundNonNanToBf16(D d, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  return hn::BitCast(d, hn::And(hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), lsb), hn::Set(du, 0xffff0000u)));
}

// f32 lanes rounded to the nearest bf16 value, returned as f32 (low 16 bits
// zero).
template <class D>
HWY_INLINE hn::Vec<D> RoundToBf16(D d, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto u = hn::BitCast(du, v);
  const auto rounded = hn::BitCast(du, RoundNonNanToBf16(d, v));
  // |v| > Inf as a signed compare: the magnitude bits are < 2^31.
  const auto magnitude = hn::BitCast(di, hn::And(u, hn::Set(du, 0x7fffffffu)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(magnitude, hn::Set(di, 0x7f800000)));
  const auto quiet_nan = hn::Or(hn::And(u, hn::Set(du, 0x80000000u)), hn::Set(du, 0x7fc00000u));
  return hn::BitCast(d, hn::IfThenElse(is_nan, quiet_nan, rounded));
}

// bf16 bit patterns (as uint16 lanes of a half-width vector) widened to f32.
template <class D>
HWY_INLINE hn::Vec<D> Bf16BitsToF32(D d, const uint16_t* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<uint16_t, D> d16;
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
}

}  // namespace tpumesh::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TPUMESH_KERNELS_BF16_INL_H_
