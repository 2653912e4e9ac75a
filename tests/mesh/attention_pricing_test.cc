// mesh::FusedAttentionTraffic and PriceOp under each AttentionKernel, by
// hand: the standard kernel moves exactly the score matrix traffic more than
// the flash kernel (4 passes over B H Lq Lk elements), the MXU's work is the
// same, flash re-reads K and V per block of queries only when the keys span
// more than one block, and its online rescaling is vector work.
#include <cmath>

#include "gtest/gtest.h"
#include "mesh/chip_spec.h"
#include "mesh/cost_model.h"

namespace tpumesh::mesh {
namespace {

// One attention of `count` (batch x heads) score matrices in bf16, as
// models/nn.cc records it: Q, K, V read once, O written once, the two
// matmuls per (batch, head), and its AttentionSite.
OpRecord Attention(double count, int64_t lq, int64_t lk, int64_t d) {
  OpRecord r;
  r.name = r.type = "attention";
  const double scores = count * lq * lk;
  r.cost.flops = 4 * scores * d + 4 * scores + count * lq * d;
  r.cost.transcendentals = scores;
  r.cost.bytes_read = 2.0 * count * (lq + 2.0 * lk) * d;
  r.cost.bytes_written = 2.0 * count * lq * d;
  r.mxu = {{lq, lk, d, count}, {lq, d, lk, count}};
  r.attention = {count, lq, lk, d, 2};
  return r;
}

ChipSpec With(AttentionKernel k) {
  ChipSpec c = V6eChip();
  c.attention = k;
  return c;
}

TEST(AttentionPricingTest, StandardMovesExactlyTheScoreMatrixTrafficMore) {
  // 2 x 24 heads, 256 queries and keys of 64: one block each way, so flash
  // re-reads nothing; standard writes and reads S and P, 4 x 48 x 256 x 256
  // bf16 elements = 25,165,824 bytes.
  const OpRecord r = Attention(48, 256, 256, 64);
  const OpTiming flash = PriceOp(r, With(AttentionKernel::kFlash));
  const OpTiming standard = PriceOp(r, With(AttentionKernel::kStandard));
  EXPECT_EQ(flash.hbm_bytes, r.cost.bytes());
  EXPECT_EQ(standard.hbm_bytes - flash.hbm_bytes, 4.0 * 48 * 256 * 256 * 2);
  EXPECT_EQ(standard.hbm_bytes - flash.hbm_bytes, 25165824.0);
  EXPECT_EQ(flash.mxu_cycles, standard.mxu_cycles);
  EXPECT_EQ(flash.mxu_seconds, standard.mxu_seconds);
  // Flash's rescaling, one key block: per query row 1 exp and 3 + 2 x 64 flops.
  const ChipSpec chip = V6eChip();
  const double extra = 48.0 * 256 * (3 + 2 * 64) / VectorFlopsPerSecond(chip) + 48.0 * 256 / TranscendentalsPerSecond(chip);
  EXPECT_NEAR(flash.vector_seconds - standard.vector_seconds, extra, 1e-15);
  EXPECT_GT(flash.vector_seconds, standard.vector_seconds);
}

TEST(AttentionPricingTest, FlashReReadsKeysAndValuesPerQueryBlock) {
  // Self-attention over 4096 tokens in bf16: blocks of 1024 queries and
  // keys, 4 x 4; K and V (24 x 4096 x 128 x 2 bytes each) read 3 times more.
  AttentionSite self{24, 4096, 4096, 128, 2};
  EXPECT_EQ(FlashBlockQ(2), 1024);
  EXPECT_EQ(FlashBlockKv(self), 1024);
  AttentionTraffic t = FusedAttentionTraffic(self, AttentionKernel::kFlash);
  EXPECT_EQ(t.hbm_bytes, 3.0 * 2 * 24 * 4096 * 128 * 2);
  EXPECT_EQ(t.transcendentals, 24.0 * 4096 * 4);
  EXPECT_EQ(t.vector_flops, 24.0 * 4096 * 4 * (3 + 2 * 128));
  // f32: blocks of 512, 8 x 8.
  self.element_bytes = 4;
  EXPECT_EQ(FlashBlockKv(self), 512);
  t = FusedAttentionTraffic(self, AttentionKernel::kFlash);
  EXPECT_EQ(t.hbm_bytes, 7.0 * 2 * 24 * 4096 * 128 * 4);
  // Cross-attention to 77 tokens: one key block of 128, K and V read once.
  const AttentionSite cross{24, 4096, 77, 128, 2};
  EXPECT_EQ(FlashBlockKv(cross), 128);
  EXPECT_EQ(FusedAttentionTraffic(cross, AttentionKernel::kFlash).hbm_bytes, 0);
  EXPECT_EQ(FusedAttentionTraffic(cross, AttentionKernel::kStandard).hbm_bytes, 4.0 * 24 * 4096 * 77 * 2);
  // Not an attention: nothing added under either.
  EXPECT_EQ(FusedAttentionTraffic({}, AttentionKernel::kStandard).hbm_bytes, 0);
  EXPECT_EQ(FusedAttentionTraffic({}, AttentionKernel::kFlash).vector_flops, 0);
}

TEST(AttentionPricingTest, OnlyAnAttentionsRecordChanges) {
  OpRecord r = Attention(8, 512, 512, 64);
  r.attention = {};
  const OpTiming a = PriceOp(r, With(AttentionKernel::kFlash)), b = PriceOp(r, With(AttentionKernel::kStandard));
  EXPECT_EQ(a.hbm_bytes, b.hbm_bytes);
  EXPECT_EQ(a.vector_seconds, b.vector_seconds);
  EXPECT_EQ(a.seconds, b.seconds);
}

TEST(AttentionPricingTest, NamesParseAndBadOnesAreRefused) {
  EXPECT_EQ(*ParseAttentionKernel("flash"), AttentionKernel::kFlash);
  EXPECT_EQ(*ParseAttentionKernel("standard"), AttentionKernel::kStandard);
  EXPECT_EQ(AttentionKernelName(AttentionKernel::kStandard), "standard");
  const auto bad = ParseAttentionKernel("splash");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("attention 'splash'"), std::string::npos) << bad.status().message();
  EXPECT_EQ(V5eChip().attention, AttentionKernel::kFlash);  // the default
}

}  // namespace
}  // namespace tpumesh::mesh
