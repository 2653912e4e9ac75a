// OpCost: what one kernel call costs, as plain named figures, beside the
// kernel and never inside it (as XLA's HloCostAnalysis). The figures describe
// the operation, not this host: a cost model turns them into time on a chip
// by reading the chip's numbers from mesh::ChipSpec.
//
// Contract: flops counts each add, multiply, compare or FMA half as one flop
// (an FMA is 2), the way XLA counts them; transcendentals counts exp, erf,
// tanh, sin, cos, rsqrt and divides-by-a-variable that a chip's vector unit
// runs as a function; bytes_read / bytes_written count every operand and
// result once, as an ideal fused kernel would (no re-reads, no scratch).
// Figures are doubles so SD-sized shapes never overflow; they add with +=.
#ifndef TPUMESH_KERNELS_COST_H_
#define TPUMESH_KERNELS_COST_H_

namespace tpumesh::kernels {

struct OpCost {
  double flops = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  double transcendentals = 0;

  double bytes() const { return bytes_read + bytes_written; }
  // flops per byte moved; 0 when nothing moves.
  double arithmetic_intensity() const {
    return bytes() > 0 ? flops / bytes() : 0;
  }

  OpCost& operator+=(const OpCost& o) {
    flops += o.flops;
    bytes_read += o.bytes_read;
    bytes_written += o.bytes_written;
    transcendentals += o.transcendentals;
    return *this;
  }
  friend OpCost operator+(OpCost a, const OpCost& b) { return a += b; }
  friend bool operator==(const OpCost&, const OpCost&) = default;
};

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_COST_H_
