// Multi-head scaled-dot-product attention in f32, flash style: a block of
// query rows meets the keys one block at a time with an online softmax, so no
// Lq x Lk score matrix ever exists (SD1.5's first block has Lq = Lk = 4096).
//
// Layout as diffusers before its head reshape: q [B, Lq, H*D], k and v
// [B, Lk, H*D], head h in columns [h*D, (h+1)*D); out [B, Lq, H*D].
// out[b, i, h] = sum_j softmax_j(scale * q[b, i, h] . k[b, j, h]) v[b, j, h],
// scale 1/sqrt(D) unless given; causal masks key j > query i (top-left
// aligned as torch's is_causal; CLIP's text encoder).
//
// Blocking (the structure the MXU kernel will slot into): per (b, h), K is
// packed transposed [D, Lk] and V [Lk, D rounded up to a vector], once. A task
// is 64 query rows of one (b, h): for each block of 256 keys, S = Q K^T
// (64 x 256, 64 KiB, stays in L2) by a 4-row x 4-vector broadcast-FMA
// micro-kernel (a vector at a time for the last block's tail), then per row
// m_new = max(m, max S), p = exp(S - m_new), l = l e^(m - m_new) + sum p,
// O = O e^(m - m_new) + P V (4-row micro-kernel over D), and at the end
// out = O / l. f32 accumulation throughout. Causal tasks stop at the first
// key block past their last row. The matmuls are Highway FMA loops for now,
// not calls to a GEMM: K = D is 40-160, too short for a packed GEMM to pay
// off at these block sizes.
//
// Contract: CheckAttention first (InvalidArgument). out must not overlap q, k
// or v. Scratch: K^T and V packed for every (b, h) (about the size of k + v),
// plus under 200 KiB per thread. Threads as kernels/ops_parallel.h (tasks:
// one per (b, h) to pack, one per (b, h, query block) to compute):
// bit-identical for every thread count.
#ifndef TPUMESH_KERNELS_ATTENTION_H_
#define TPUMESH_KERNELS_ATTENTION_H_

#include <cstdint>
#include <optional>

#include "base/status.h"
#include "kernels/cost.h"

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
