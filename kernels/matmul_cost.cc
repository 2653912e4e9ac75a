#include "kernels/matmul_cost.h"

#include <algorithm>
#include <string>

namespace tpumesh::kernels {

std::string_view DataflowName(Dataflow d) {
  switch (d) {
    case Dataflow::kOutputStationary: return "os";
    case Dataflow::kInputStationary: return "is";
    case Dataflow::kWeightStationary: break;
  }
  return "ws";
}

StatusOr<Dataflow> ParseDataflow(std::string_view name) {
  for (Dataflow d : {Dataflow::kWeightStationary, Dataflow::kOutputStationary, Dataflow::kInputStationary})
    if (name == DataflowName(d)) return d;
  return InvalidArgumentError("dataflow '" + std::string(name) +
                              "': ws (weight stationary), os (output stationary) or is (input stationary)");
}

MatmulCostFigures MatmulCost(int64_t m, int64_t n, int64_t k, Precision precision,
                             const SystolicArray& array) {
  MatmulCostFigures f;
  m = std::max<int64_t>(m, 0);
  n = std::max<int64_t>(n, 0);
  k = std::max<int64_t>(k, 0);
  f.passes = PrecisionPasses(precision);
  if (m == 0 || n == 0 || k == 0 || array.rows <= 0 || array.cols <= 0 || array.count <= 0) return f;
  const double mnk = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  f.flops = 2.0 * mnk * f.passes;
  const double operand_bytes = precision == Precision::kDefault ? 2.0 : 4.0;
  f.bytes_read = operand_bytes * (static_cast<double>(m) * k + static_cast<double>(k) * n);
  f.bytes_written = 4.0 * static_cast<double>(m) * n;
  const int64_t r = array.rows, c = array.cols;
  int64_t sr = k, sc = n, t = m;  // ws
  if (array.dataflow == Dataflow::kOutputStationary) {
    sr = m;
    t = k;
  } else if (array.dataflow == Dataflow::kInputStationary) {
    sc = m;
    t = n;
  }
  f.folds = f.passes * ((sr + r - 1) / r) * ((sc + c - 1) / c);
  // os needs no weight load before its first row: R cycles less per fold.
  f.cycles_per_fold = (array.dataflow == Dataflow::kOutputStationary ? r : 2 * r) + c + t - 2;
  f.cycles = (f.folds + array.count - 1) / array.count * f.cycles_per_fold;
  // The buffer traffic (see the header): per pass, elements of A, B and C.
  auto ceil_div = [](int64_t a, int64_t b) { return static_cast<double>((a + b - 1) / b); };
  const double mk = static_cast<double>(m) * k, kn = static_cast<double>(k) * n, mn = static_cast<double>(m) * n;
  double a_reads = mk * ceil_div(n, c), b_reads = kn, c_writes = mn * ceil_div(k, r);  // ws
  if (array.dataflow == Dataflow::kOutputStationary) {
    b_reads = kn * ceil_div(m, r);
    c_writes = mn;
  } else if (array.dataflow == Dataflow::kInputStationary) {
    a_reads = mk;
    b_reads = kn * ceil_div(m, c);
  }
  f.buffer_read_bytes = 2.0 * (a_reads + b_reads) * f.passes;
  f.buffer_write_bytes = 4.0 * c_writes * f.passes;
  f.useful_macs = mnk * f.passes;
  f.utilisation = f.useful_macs / (static_cast<double>(f.cycles) * r * c * array.count);
  f.seconds = array.clock_hz > 0 ? static_cast<double>(f.cycles) / array.clock_hz : 0.0;
  return f;
}

}  // namespace tpumesh::kernels
