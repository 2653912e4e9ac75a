// What a matmul C[M,N] = A[M,K] x B[K,N] costs on a weight-stationary
// systolic array (a TPU MXU), beside the kernel and never inside it. Pure
// functions of the shape, the precision and the array's numbers, which the
// caller takes from the chip description (mesh::ChipSpec); nothing runs.
//
// Model (SCALE-Sim's weight-stationary dataflow, docs/kernels.md has a worked
// example). B is cut into ceil(K/R) x ceil(N/C) tiles of R x C weights (K
// along the array's R rows, N along its C columns). Each tile is loaded,
// the M rows of A stream through it, and the results drain:
//   cycles per tile = 2R + C + M - 2   (fill R + stream M + drain R + C - 2).
// A partial tile takes as long as a full one. A precision of p passes
// (kDefault 1, kHigh 3, kHighest 6: bf16x6 on a TPU) runs p times as many
// tiles. The tiles are shared by the `count` arrays of a chip:
//   cycles = ceil(tiles / count) * (2R + C + M - 2),
//   utilisation = M*N*K*p / (cycles * R * C * count),
//   seconds = cycles / clock_hz.
// flops counts the MXU's work, 2*M*N*K per pass; bytes count each operand
// once from HBM: A and B as bf16 at kDefault, as f32 at kHigh/kHighest (the
// split happens on chip), C as f32.
#ifndef TPUMESH_KERNELS_MATMUL_COST_H_
#define TPUMESH_KERNELS_MATMUL_COST_H_

#include <cstdint>

#include "kernels/matmul.h"

namespace tpumesh::kernels {

// The systolic arrays of one chip (v5e: 4 MXUs of 128 x 128 at 1.5 GHz).
struct SystolicArray {
  SystolicArray(int rows = 128, int cols = 128, int count = 4, double clock_hz = 1.5e9)
      : rows(rows), cols(cols), count(count), clock_hz(clock_hz) {}
  int rows;         // R: weights per column (the K direction)
  int cols;         // C: columns (the N direction)
  int count;        // arrays working in parallel on the chip
  double clock_hz;  // cycles per second
};

struct MatmulCostFigures {
  double flops = 0;          // 2*M*N*K per pass
  double bytes_read = 0;     // A + B
  double bytes_written = 0;  // C
  int passes = 0;            // bf16 passes of the precision
  int64_t weight_tiles = 0;  // passes * ceil(K/R) * ceil(N/C)
  int64_t cycles_per_tile = 0;  // 2R + C + M - 2
  int64_t cycles = 0;        // ceil(weight_tiles / count) * cycles_per_tile
  double useful_macs = 0;    // M*N*K*passes
  double utilisation = 0;    // useful_macs / (cycles * R * C * count), 0..1
  double seconds = 0;        // cycles / clock_hz
};

// Zero figures when any of M, N, K is 0. Negative dimensions count as 0.
MatmulCostFigures MatmulCost(int64_t m, int64_t n, int64_t k, Precision precision,
                             const SystolicArray& array = SystolicArray());

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_MATMUL_COST_H_
