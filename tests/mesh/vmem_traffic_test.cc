// mesh::TileIntoVmem and PriceOp's HBM bytes: a matmul's operands tiled into
// the chip's VMEM, by hand for a small GEMM in each dataflow, and a VMEM
// sweep whose HBM bytes fall as VMEM grows and flatten once the stationary
// operand fits.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "mesh/chip_spec.h"
#include "mesh/cost_model.h"

namespace tpumesh::mesh {
namespace {

constexpr double kKiB = 1024, kMiB = 1024 * 1024;
using kernels::Dataflow;

// C[256, 512] = A[256, 1024] B[1024, 512] in bf16: |A| = 512 KiB,
// |B| = 1 MiB, |C| = 256 KiB.
OpRecord Gemm() {
  OpRecord r;
  r.name = r.type = "matmul";
  r.cost.flops = 2.0 * 256 * 512 * 1024;
  r.cost.bytes_read = 512 * kKiB + 1 * kMiB;
  r.cost.bytes_written = 256 * kKiB;
  r.mxu = {{256, 512, 1024, 1, 512 * kKiB, 1 * kMiB, 256 * kKiB}};
  return r;
}

ChipSpec WithVmem(double bytes, Dataflow d) {
  ChipSpec c = V5eChip();
  c.vmem_bytes = static_cast<int64_t>(bytes);
  c.dataflow = d;
  return c;
}

TEST(VmemTrafficTest, HandComputedSmallGemm) {
  const double once = 1.75 * kMiB;  // |A| + |B| + |C|
  struct Case {
    double vmem;
    Dataflow d;
    int64_t parts;
    double extra;
  };
  for (const Case& c : std::vector<Case>{
           // ws holds B (1 MiB) in half of VMEM; A is read once per part.
           {4 * kMiB, Dataflow::kWeightStationary, 1, 0},
           {2 * kMiB, Dataflow::kWeightStationary, 1, 0},
           {1 * kMiB, Dataflow::kWeightStationary, 2, 512 * kKiB},
           {256 * kKiB, Dataflow::kWeightStationary, 8, 7 * 512 * kKiB},
           // is holds A (512 KiB); B is read once per part.
           {256 * kKiB, Dataflow::kInputStationary, 4, 3 * kMiB},
           {1 * kMiB, Dataflow::kInputStationary, 1, 0},
           // os holds C (256 KiB); A is read once per part.
           {256 * kKiB, Dataflow::kOutputStationary, 2, 512 * kKiB},
           {512 * kKiB, Dataflow::kOutputStationary, 1, 0},
       }) {
    const VmemTraffic v = TileIntoVmem(Gemm().mxu[0], c.vmem, c.d);
    EXPECT_EQ(v.parts, c.parts) << c.vmem << " " << kernels::DataflowName(c.d);
    EXPECT_DOUBLE_EQ(v.extra_read_bytes, c.extra) << c.vmem << " " << kernels::DataflowName(c.d);
    EXPECT_DOUBLE_EQ(v.vmem_bytes, std::min(c.vmem, once));
    const OpTiming t = PriceOp(Gemm(), WithVmem(c.vmem, c.d));
    EXPECT_DOUBLE_EQ(t.hbm_bytes, once + c.extra);
    EXPECT_DOUBLE_EQ(t.hbm_seconds, (once + c.extra) / V5eChip().hbm_bandwidth_per_device());
  }
  // No VMEM in the chip file, or a matmul that states no operand bytes
  // (attention): each operand once.
  EXPECT_DOUBLE_EQ(PriceOp(Gemm(), WithVmem(0, Dataflow::kWeightStationary)).hbm_bytes, once);
  OpRecord untiled = Gemm();
  untiled.mxu[0].a_bytes = untiled.mxu[0].b_bytes = untiled.mxu[0].c_bytes = 0;
  EXPECT_DOUBLE_EQ(PriceOp(untiled, WithVmem(64 * kKiB, Dataflow::kWeightStationary)).hbm_bytes, once);
}

// 16 to 128 MiB of VMEM over GEMMs whose weights are 4 to 64 MiB: each
// layer's HBM bytes never rise with VMEM, and stop falling once its weights
// fit in half of it.
TEST(VmemTrafficTest, HbmBytesFallWithVmemAndFlattenOnceOperandsFit) {
  for (double weights_mib : {4.0, 16.0, 40.0, 64.0}) {
    OpRecord r = Gemm();
    r.mxu[0].b_bytes = weights_mib * kMiB;
    r.mxu[0].a_bytes = 8 * kMiB;
    r.cost.bytes_read = r.mxu[0].a_bytes + r.mxu[0].b_bytes;
    double previous = 0;
    for (int vmem_mib = 16; vmem_mib <= 128; vmem_mib *= 2) {
      const double bytes = PriceOp(r, WithVmem(vmem_mib * kMiB, Dataflow::kWeightStationary)).hbm_bytes;
      if (vmem_mib > 16) {
        EXPECT_LE(bytes, previous) << weights_mib << " MiB of weights, " << vmem_mib << " MiB of VMEM";
      }
      const bool fits = weights_mib <= vmem_mib / 2.0;
      if (fits) {
        EXPECT_DOUBLE_EQ(bytes, r.cost.bytes()) << weights_mib << " MiB, " << vmem_mib << " MiB";
      } else {
        EXPECT_GT(bytes, r.cost.bytes()) << weights_mib << " MiB, " << vmem_mib << " MiB";
      }
      previous = bytes;
    }
  }
}

// Less VMEM is never faster, from --vmem-mib's least (1 KiB) to its most
// (1 TiB), down to a stationary operand of 2^72 bytes: its parts pass 2^63
// and once wrapped in an int64 to one part, so 1 KiB priced no re-reads and
// ran faster than 128 MiB.
TEST(VmemTrafficTest, LessVmemIsNeverFasterDownToOneKib) {
  for (const double weights : {4 * kMiB, 0x1p50, 0x1p72}) {
    OpRecord r = Gemm();
    r.mxu[0].b_bytes = weights;
    r.cost.bytes_read = r.mxu[0].a_bytes + r.mxu[0].b_bytes;
    double previous_bytes = 0, previous_seconds = 0;
    for (double vmem = kKiB; vmem <= 0x1p40; vmem *= 4) {
      const OpTiming t = PriceOp(r, WithVmem(vmem, Dataflow::kWeightStationary));
      ASSERT_TRUE(std::isfinite(t.seconds)) << weights << " " << vmem;
      EXPECT_GE(t.hbm_bytes, r.cost.bytes()) << weights << " " << vmem;
      if (vmem > kKiB) {
        EXPECT_LE(t.hbm_bytes, previous_bytes) << weights << " bytes of weights, " << vmem << " of VMEM";
        EXPECT_LE(t.seconds, previous_seconds) << weights << " bytes of weights, " << vmem << " of VMEM";
      }
      previous_bytes = t.hbm_bytes;
      previous_seconds = t.seconds;
    }
    EXPECT_GT(PriceOp(r, WithVmem(kKiB, Dataflow::kWeightStationary)).hbm_bytes, r.cost.bytes()) << weights;
  }
}

}  // namespace
}  // namespace tpumesh::mesh
