// What a matmul C[M,N] = A[M,K] x B[K,N] costs on a systolic array (a TPU
// MXU), beside the kernel and never inside it. Pure functions of the shape,
// the precision and the array's numbers, which the caller takes from the
// chip description (mesh::ChipSpec); nothing runs.
//
// Model: SCALE-Sim's three dataflows (docs/cost-model.md has the worked
// examples and the comparison with SCALE-Sim v2's own cycles). Each maps two
// of the matmul's dimensions onto the array, Sr along its R rows and Sc
// along its C columns, and streams the third, T, through it:
//   ws (weight stationary, a TPU): Sr = K, Sc = N, T = M (B stays, A streams)
//   os (output stationary):        Sr = M, Sc = N, T = K (C stays)
//   is (input stationary):         Sr = K, Sc = M, T = N (A stays, B streams)
// The Sr x Sc operand is cut into ceil(Sr/R) x ceil(Sc/C) folds; each is
// loaded, T rows stream through it, and the results drain:
//   ws, is: cycles per fold = 2R + C + T - 2  (load R + stream T + drain R + C - 2)
//   os:     cycles per fold = R + C + T - 2   (nothing to load first)
// as SCALE-Sim v2 schedules them (its demand matrices, compute/
// systolic_compute_*.py). A partial fold takes as long as a full one, and
// folds do not overlap. SCALE-Sim reports the index of the last cycle,
// counting from 0: its "Total Cycles" is these cycles - 1 per layer
// (tests/kernels/scalesim_test.cc compares every layer of its example
// topologies). A precision of p passes
// (kDefault 1, kHigh 3, kHighest 6: bf16x6 on a TPU) runs p times as many
// folds. The folds are shared by the `count` arrays of a chip:
//   cycles = ceil(folds / count) * cycles per fold,
//   utilisation = M*N*K*p / (cycles * R * C * count),
//   seconds = cycles / clock_hz.
// flops counts the MXU's work, 2*M*N*K per pass; bytes count each operand
// once from HBM: A and B as bf16 at kDefault, as f32 at kHigh/kHighest (the
// split happens on chip), C as f32.
// The array's own traffic with its on-chip buffer (VMEM on a TPU), counted
// as SCALE-Sim counts its SRAM reads and writes: the stationary operand is
// read once, a streamed one once per fold of the other mapped dimension,
// and outputs are written once per fold along Sr (partial sums):
//   ws: A M*K*ceil(N/C), B K*N,          C M*N*ceil(K/R)
//   os: A M*K*ceil(N/C), B K*N*ceil(M/R), C M*N
//   is: A M*K,           B K*N*ceil(M/C), C M*N*ceil(K/R)
// per pass, operands as bf16 (2 bytes: a pass feeds bf16 pieces), outputs
// as f32 (4 bytes).
#ifndef TPUMESH_KERNELS_MATMUL_COST_H_
#define TPUMESH_KERNELS_MATMUL_COST_H_

#include <cstdint>

#include <string_view>

#include "base/status.h"
#include "kernels/matmul.h"

namespace tpumesh::kernels {

// How a matmul's operands sit on the array (see the header comment).
enum class Dataflow { kWeightStationary, kOutputStationary, kInputStationary };
std::string_view DataflowName(Dataflow d);  // "ws", "os", "is" as SCALE-Sim
// "ws" | "os" | "is"; InvalidArgument otherwise, naming the three.
StatusOr<Dataflow> ParseDataflow(std::string_view name);

// The systolic arrays of one chip (v5e: 4 MXUs of 128 x 128 at 1.5 GHz,
// weight stationary).
struct SystolicArray {
  SystolicArray(int rows = 128, int cols = 128, int count = 4, double clock_hz = 1.5e9,
                Dataflow dataflow = Dataflow::kWeightStationary)
      : rows(rows), cols(cols), count(count), clock_hz(clock_hz), dataflow(dataflow) {}
  int rows;         // R: the Sr direction (K for ws)
  int cols;         // C: the Sc direction (N for ws)
  int count;        // arrays working in parallel on the chip
  double clock_hz;  // cycles per second
  Dataflow dataflow;
};

struct MatmulCostFigures {
  double flops = 0;          // 2*M*N*K per pass
  double bytes_read = 0;     // A + B
  double bytes_written = 0;  // C
  int passes = 0;            // bf16 passes of the precision
  // Whole numbers held as doubles: exact while below 2^53, rounded to 53
  // bits past it (a 2^24-cube matmul on a 1x1 array folds 2^48 times and
  // takes 2^72 cycles), never wrapped as an int64 would be.
  double folds = 0;          // passes * ceil(Sr/R) * ceil(Sc/C)
  double cycles_per_fold = 0;  // 2R + C + T - 2 (os: R + C + T - 2)
  double cycles = 0;         // ceil(folds / count) * cycles_per_fold
  double buffer_read_bytes = 0;   // A and B fed to the array from on-chip memory
  double buffer_write_bytes = 0;  // C (partial sums) written back to it
  double useful_macs = 0;    // M*N*K*passes
  double utilisation = 0;    // useful_macs / (cycles * R * C * count), 0..1 (at most 1 by construction)
  double seconds = 0;        // cycles / clock_hz
};

// Zero figures when any of M, N, K is 0. Negative dimensions count as 0.
MatmulCostFigures MatmulCost(int64_t m, int64_t n, int64_t k, Precision precision,
                             const SystolicArray& array = SystolicArray());

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_MATMUL_COST_H_
