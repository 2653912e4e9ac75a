// Every chip preset's figures reach a priced op: a large matmul's modelled
// MXU time follows the device's peak FLOP/s, an HBM-bound op's its HBM
// bandwidth (mesh/cost_model.h, kernels/matmul_cost.h).
#include <string>

#include "gtest/gtest.h"
#include "mesh/chip_spec.h"
#include "mesh/cost_model.h"

namespace tpumesh::mesh {
namespace {

// C[M, N] = A[M, K] x B[K, N], dimensions multiples of every preset's MXU
// (128 or 256) and M long enough that the systolic fill and drain are under
// 1% of the stream.
OpRecord BigMatmul() {
  OpRecord r;
  r.name = "linear";
  r.type = "matmul";
  MxuMatmul mm;
  mm.m = 1 << 16;
  mm.n = 4096;
  mm.k = 4096;
  r.mxu.push_back(mm);
  r.cost.flops = 2.0 * mm.m * mm.n * mm.k;
  return r;
}

TEST(PresetPricingTest, MatmulTimeFollowsPeakFlops) {
  const OpRecord op = BigMatmul();
  for (const std::string& name : ChipPresetNames()) {
    auto chip = LoadChipSpec(name);
    ASSERT_TRUE(chip.ok()) << name;
    const OpTiming t = PriceOp(op, *chip);
    const double ideal = op.cost.flops / chip->peak_bf16_flops_per_device();
    EXPECT_NEAR(t.mxu_seconds / ideal, 1.0, 0.02) << name;
    EXPECT_GT(t.utilisation, 0.97) << name;
  }
  // Between presets, the ratio of the published peaks per device.
  const double v5e = PriceOp(op, V5eChip()).mxu_seconds;
  EXPECT_NEAR(v5e / PriceOp(op, V6eChip()).mxu_seconds, 918.0 / 197, 0.05 * 918 / 197);
  EXPECT_NEAR(v5e / PriceOp(op, V5pChip()).mxu_seconds, 459.0 / 197, 0.05 * 459 / 197);
  // TPU7x: a device is one chiplet, half the chip's 2307 TFLOP/s.
  EXPECT_NEAR(v5e / PriceOp(op, Tpu7xChip()).mxu_seconds, 2307.0 / 2 / 197, 0.05 * 2307 / 2 / 197);
}

TEST(PresetPricingTest, StreamingOpFollowsHbmBandwidth) {
  OpRecord op;
  op.name = "add";
  op.type = "elementwise";
  op.cost.bytes_read = 2e9;
  op.cost.bytes_written = 1e9;
  for (const std::string& name : ChipPresetNames()) {
    const ChipSpec chip = *LoadChipSpec(name);
    EXPECT_DOUBLE_EQ(PriceOp(op, chip).hbm_seconds, 3e9 / chip.hbm_bandwidth_per_device()) << name;
  }
  EXPECT_DOUBLE_EQ(PriceOp(op, Tpu7xChip()).hbm_seconds, 3e9 / 3690e9);
  EXPECT_DOUBLE_EQ(PriceOp(op, V6eChip()).hbm_seconds, 3e9 / 1638e9);
  EXPECT_DOUBLE_EQ(PriceOp(op, V5pChip()).hbm_seconds, 3e9 / 2765e9);
}

}  // namespace
}  // namespace tpumesh::mesh
