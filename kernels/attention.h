// Multi-head scaled-dot-product attention, f32 in and out, at a matmul
// precision (kernels/matmul.h) as a TPU runs it.
//
// Layout as diffusers before its head reshape: q [B, Lq, H*D], k and v
// [B, Lk, H*D], head h in columns [h*D, (h+1)*D); out [B, Lq, H*D].
// out[b, i, h] = sum_j softmax_j(scale * q[b, i, h] . k[b, j, h]) v[b, j, h],
// scale 1/sqrt(D) unless given; causal masks key j > query i (top-left
// aligned as torch's is_causal; CLIP's text encoder).
//
// kDefault, kHigh: on the matmul kernels, as XLA lowers diffusers' Flax
// attention (einsum, scale, softmax, einsum) for the MXU. Per (b, h), K^T
// [D, Lk] and V [Lk, D] are packed once as matmul B operands; a task is
// about 64 query rows of one head (whole micro-tiles of the provider's
// kernel): S = Q K^T by kernels::Matmul at the precision (Q and K rounded to
// bf16, or split bf16x3 for kHigh; f32 accumulation), then per row in f32
// the numerators e = exp(scale * S - m), m = max(scale * S) (kDefault:
// 2^(S scale log2 e - m log2 e) by Exp2NonPositiveCoarse of
// kernels/ops_math-inl.h, 2.7e-6 relative, as e is rounded to bf16 next;
// kHigh: ExpNonPositive, within 1 ulp) and their sum (f32 per 1024 keys,
// folded into a double), then out = E V by kernels::Matmul (E is an MXU
// operand too: at kDefault the exp pass stores it rounded to bf16 and P V
// reads it in place, matmul_internal::MatmulRoundedA) into the head's
// columns, each row times 1 / sum. The provider is the matmul's (kAuto: kBf16 where vdpbf16ps is the
// faster path, else kHighway) and kBf16 == kHighway bit for bit, as for a
// matmul. Scratch: the packed K^T and V of every head (half of k + v for
// kDefault) plus block x Lk floats per thread (512 KiB at Lk = 4096).
//
// kHighest: f32 throughout, flash style: a block of 64 query rows meets the
// keys 256 at a time with an online softmax, so no Lq x Lk score matrix
// exists. Per (b, h), K is packed transposed [D, Lk] and V [Lk, D rounded up
// to a vector]; S = Q K^T (64 x 256, in L2) by a 4-row x 4-vector
// broadcast-FMA micro-kernel, then per row m_new = max(m, max S),
// p = exp(S - m_new), l = l e^(m - m_new) + sum p, O = O e^(m - m_new) + P V,
// and at the end out = O / l. Causal tasks stop at the first key block past
// their last row. Scratch: about k + v, plus under 200 KiB per thread.
//
// Contract: CheckAttention first (InvalidArgument); a provider that cannot
// run the precision here is Unimplemented (as ResolveProvider). out must not
// overlap q, k or v. Threads as kernels/ops_parallel.h (tasks: one per
// (b, h) to pack, one per (b, h, query block) to compute): bit-identical for
// every thread count.
#ifndef TPUMESH_KERNELS_ATTENTION_H_
#define TPUMESH_KERNELS_ATTENTION_H_

#include <cstdint>
#include <optional>

#include "base/status.h"
#include "kernels/cost.h"
#include "kernels/matmul.h"

namespace tpumesh::kernels {

struct AttentionShape {
  int64_t batch = 1;
  int64_t q_len = 0;
  int64_t kv_len = 0;
  int64_t heads = 1;
  int64_t head_dim = 0;
  int64_t hidden() const { return heads * head_dim; }
};

struct AttentionOptions {
  std::optional<float> scale;  // default 1 / sqrt(head_dim)
  bool causal = false;
  int num_threads = 1;
  // kHighest keeps the f32 flash kernel, the only one before matmul
  // precisions reached attention.
  Precision precision = Precision::kHighest;
  Provider provider = Provider::kAuto;  // kDefault / kHigh only
};

Status CheckAttention(const AttentionShape& s);
Status AttentionF32(const AttentionShape& s, const float* q, const float* k,
                    const float* v, float* out,
                    const AttentionOptions& options = {});

// As XLA counts a dense attention (causal or not): 4 B H Lq Lk D flops for
// the two matmuls, 4 per score for scale, max, subtract and sum, plus B H Lq D
// for the final division; B H Lq Lk exps. Reads q, k, v once, writes out once
// (no score matrix goes through memory).
OpCost AttentionCost(const AttentionShape& s);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_ATTENTION_H_
