// PriceOp's energy estimate (mesh/cost_model.h): joules = each count x the
// chip's picojoules per event, by hand for a GEMM, an elementwise op and a
// collective; the per-op-type totals and the average power follow.
#include <vector>

#include "gtest/gtest.h"
#include "mesh/chip_spec.h"
#include "mesh/cost_model.h"

namespace tpumesh::mesh {
namespace {

constexpr double kPico = 1e-12;

// C[256, 512] = A[256, 1024] B[1024, 512] in bf16, on a v5e (128 x 128
// arrays, ws, 128 MiB VMEM: nothing read twice).
OpRecord Gemm() {
  OpRecord r;
  r.name = r.type = "matmul";
  r.cost.flops = 2.0 * 256 * 512 * 1024;
  r.cost.bytes_read = 2.0 * (256 * 1024 + 1024 * 512);
  r.cost.bytes_written = 2.0 * 256 * 512;
  r.mxu = {{256, 512, 1024, 1, 2.0 * 256 * 1024, 2.0 * 1024 * 512, 2.0 * 256 * 512}};
  return r;
}

TEST(EnergyTest, GemmByHand) {
  const ChipSpec chip = V5eChip();
  const EnergySpec& e = chip.energy;
  const OpTiming t = PriceOp(Gemm(), chip);
  const double macs = 256.0 * 512 * 1024;
  const double hbm = 2.0 * (256 * 1024 + 1024 * 512 + 256 * 512);
  // ws on 128 x 128: A is read once per column fold (512 / 128 = 4), B once,
  // C written once per row fold (1024 / 128 = 8), f32 partial sums.
  const double buffer = 2.0 * (256 * 1024 * 4 + 1024 * 512) + 4.0 * (256 * 512 * 8);
  EXPECT_DOUBLE_EQ(t.vmem_access_bytes, hbm + buffer);
  EXPECT_DOUBLE_EQ(t.energy.mxu, macs * e.mac_pj * kPico);
  EXPECT_DOUBLE_EQ(t.energy.vector, 0);
  EXPECT_DOUBLE_EQ(t.energy.vmem, (hbm + buffer) * e.vmem_byte_pj * kPico);
  EXPECT_DOUBLE_EQ(t.energy.hbm, hbm * e.hbm_byte_pj * kPico);
  EXPECT_DOUBLE_EQ(t.energy.ici, 0);
  EXPECT_DOUBLE_EQ(t.energy.total(), t.energy.mxu + t.energy.vmem + t.energy.hbm);
  // About 0.18 mJ: the MXU's 79 uJ, VMEM's 20 uJ and HBM's 80 uJ.
  EXPECT_NEAR(t.energy.total(), 1.796e-4, 0.001e-4);

  // highest: 6 bf16 passes of every MAC and of the buffer traffic; the
  // operands in HBM stay as recorded.
  OpRecord f32 = Gemm();
  f32.precision = kernels::Precision::kHighest;
  const OpTiming t6 = PriceOp(f32, chip);
  EXPECT_DOUBLE_EQ(t6.energy.mxu, 6 * t.energy.mxu);
  EXPECT_DOUBLE_EQ(t6.vmem_access_bytes, hbm + 6 * buffer);
}

TEST(EnergyTest, ElementwiseAndCollectiveByHand) {
  const ChipSpec chip = V5eChip();
  const EnergySpec& e = chip.energy;
  OpRecord gelu;
  gelu.name = gelu.type = "elementwise";
  gelu.cost.flops = 8000;
  gelu.cost.transcendentals = 1000;
  gelu.cost.bytes_read = gelu.cost.bytes_written = 2000;
  const OpTiming g = PriceOp(gelu, chip);
  EXPECT_DOUBLE_EQ(g.energy.mxu, 0);
  EXPECT_DOUBLE_EQ(g.energy.vector, (8000 * e.vector_flop_pj + 1000 * e.transcendental_pj) * kPico);
  // The DMA writes the 4000 bytes into VMEM and the vector unit reads and
  // writes them there.
  EXPECT_DOUBLE_EQ(g.vmem_access_bytes, 8000);
  EXPECT_DOUBLE_EQ(g.energy.vmem, 8000 * e.vmem_byte_pj * kPico);
  EXPECT_DOUBLE_EQ(g.energy.hbm, 4000 * e.hbm_byte_pj * kPico);

  OpRecord psum;
  psum.name = "psum";
  psum.type = "collective";
  psum.ici_bytes = 1 << 20;
  psum.ici_seconds = 1e-5;
  const OpTiming p = PriceOp(psum, chip);
  EXPECT_DOUBLE_EQ(p.energy.ici, (1 << 20) * e.ici_byte_pj * kPico);
  EXPECT_DOUBLE_EQ(p.energy.mxu + p.energy.vector + p.energy.hbm, 0);
}

// A chip file's energies are what the estimate uses: doubling every figure
// doubles every part.
TEST(EnergyTest, FollowsTheChipsFigures) {
  ChipSpec doubled = V5eChip();
  for (const auto& [field, member] : EnergyFields()) doubled.energy.*member *= 2;
  const OpTiming a = PriceOp(Gemm(), V5eChip());
  const OpTiming b = PriceOp(Gemm(), doubled);
  EXPECT_DOUBLE_EQ(b.energy.mxu, 2 * a.energy.mxu);
  EXPECT_DOUBLE_EQ(b.energy.vmem, 2 * a.energy.vmem);
  EXPECT_DOUBLE_EQ(b.energy.hbm, 2 * a.energy.hbm);
  ChipSpec free = V5eChip();
  for (const auto& [field, member] : EnergyFields()) free.energy.*member = 0;
  EXPECT_EQ(PriceOp(Gemm(), free).energy.total(), 0);
}

// The per-op-type totals add each op's energy times its calls; the average
// power is that energy over the modelled seconds.
TEST(EnergyTest, TotalsAndAveragePower) {
  const ChipSpec chip = V5eChip();
  DeviceCostLog log;
  const OpTiming t = PriceOp(Gemm(), chip);
  log.Add(Gemm(), t);
  log.Add(Gemm(), t);
  const OpTypeTotals all = log.total();
  EXPECT_DOUBLE_EQ(all.energy.total(), 2 * t.energy.total());
  EXPECT_DOUBLE_EQ(all.vmem_access_bytes, 2 * t.vmem_access_bytes);
  EXPECT_DOUBLE_EQ(all.average_watts(), all.energy.total() / all.modelled_seconds);
  EXPECT_GT(all.average_watts(), 0);
  EXPECT_EQ(OpTypeTotals{}.average_watts(), 0);
}

}  // namespace
}  // namespace tpumesh::mesh
