#include "kernels/matmul_cost.h"

#include <algorithm>
#include <cmath>
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
  const double r = array.rows, c = array.cols;
  double sr = static_cast<double>(k), sc = static_cast<double>(n), t = static_cast<double>(m);  // ws
  if (array.dataflow == Dataflow::kOutputStationary) {
    sr = static_cast<double>(m);
    t = static_cast<double>(k);
  } else if (array.dataflow == Dataflow::kInputStationary) {
    sc = static_cast<double>(m);
    t = static_cast<double>(n);
  }
  auto ceil_div = [](double a, double b) { return std::ceil(a / b); };
  f.folds = f.passes * ceil_div(sr, r) * ceil_div(sc, c);
  // os needs no weight load before its first row: R cycles less per fold.
  f.cycles_per_fold = (array.dataflow == Dataflow::kOutputStationary ? r : 2 * r) + c + t - 2;
  f.cycles = ceil_div(f.folds, array.count) * f.cycles_per_fold;
  // The buffer traffic (see the header): per pass, elements of A, B and C.
  const double mk = static_cast<double>(m) * k, kn = static_cast<double>(k) * n, mn = static_cast<double>(m) * n;
  const double dm = static_cast<double>(m), dn = static_cast<double>(n), dk = static_cast<double>(k);
  double a_reads = mk * ceil_div(dn, c), b_reads = kn, c_writes = mn * ceil_div(dk, r);  // ws
  if (array.dataflow == Dataflow::kOutputStationary) {
    b_reads = kn * ceil_div(dm, r);
    c_writes = mn;
  } else if (array.dataflow == Dataflow::kInputStationary) {
    a_reads = mk;
    b_reads = kn * ceil_div(dm, c);
  }
  f.buffer_read_bytes = 2.0 * (a_reads + b_reads) * f.passes;
  f.buffer_write_bytes = 4.0 * c_writes * f.passes;
  f.useful_macs = mnk * f.passes;
  // cycles * R * C * count >= M N K passes exactly; rounding past 2^53 must
  // not make it read above 1.
  f.utilisation = std::min(1.0, f.useful_macs / (f.cycles * r * c * array.count));
  f.seconds = array.clock_hz > 0 ? f.cycles / array.clock_hz : 0.0;
  return f;
}

}  // namespace tpumesh::kernels
