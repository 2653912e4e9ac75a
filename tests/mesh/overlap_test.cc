// A device's timeline with collectives overlapped with compute
// (mesh/cost_model.h): an async collective hides under the ops that do not
// read its result and nothing else; serial - hidden = modelled; off is the
// serial sum, to the bit.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mesh/cost_model.h"

namespace tpumesh::mesh {
namespace {

// Timings given directly: the timeline only adds them up.
OpTiming Compute(double seconds) {
  OpTiming t;
  t.seconds = seconds;
  return t;
}
OpTiming Ici(double compute, double ici) {
  OpTiming t;
  t.ici_seconds = ici;
  t.seconds = compute + ici;
  return t;
}
OpRecord Op(const std::string& name, std::vector<int64_t> awaits = {}) {
  OpRecord r;
  r.name = name;
  r.type = "matmul";
  r.awaits = std::move(awaits);
  return r;
}
OpRecord Collective(const std::string& kind, int64_t async_id) {
  OpRecord r;
  r.name = kind;
  r.type = "collective";
  r.async_id = async_id;
  return r;
}

TEST(OverlapTest, AnAsyncCollectiveHidesUnderIndependentWork) {
  // psum (3 s on the ICI) started after op a; b and c (2 s each) do not read
  // it; d does: d waits until 1 + 3 = 4 s, after c ended at 5 s: no wait.
  DeviceCostLog log;
  log.Add(Op("a"), Compute(1));
  log.Add(Collective("psum", 7), Ici(0, 3));
  log.Add(Op("b"), Compute(2));
  log.Add(Op("c"), Compute(2));
  log.Add(Op("d", {7}), Compute(1));
  EXPECT_DOUBLE_EQ(log.serial_seconds(), 9);
  EXPECT_DOUBLE_EQ(log.seconds(), 6);
  EXPECT_DOUBLE_EQ(log.ici_hidden_seconds(), 3);
  EXPECT_DOUBLE_EQ(log.by_collective_hidden().at("psum").ici_hidden_seconds, 3);
  EXPECT_DOUBLE_EQ(log.serial_seconds() - log.ici_hidden_seconds(), log.seconds());
}

TEST(OverlapTest, PartlyHiddenWhenTheReaderComesEarly) {
  // The reader after 2 s of independent work waits the third second.
  DeviceCostLog log;
  log.set_keep_ops(true);
  log.Add(Collective("all_gather", 1), Ici(0.5, 3));
  log.Add(Op("b"), Compute(2));
  log.Add(Op("d", {1}), Compute(1));
  EXPECT_DOUBLE_EQ(log.seconds(), 0.5 + 3 + 1);
  EXPECT_DOUBLE_EQ(log.ici_hidden_seconds(), 2);
  EXPECT_DOUBLE_EQ(log.by_collective_hidden().at("all_gather").ici_hidden_seconds, 2);
  // The ICI part starts when the collective's own compute is done; d when
  // the result is there.
  ASSERT_EQ(log.ops().size(), 3u);
  EXPECT_DOUBLE_EQ(log.ops()[0].ici_start_seconds, 0.5);
  EXPECT_DOUBLE_EQ(log.ops()[2].start_seconds, 3.5);
}

TEST(OverlapTest, NothingHidesWithoutIndependentWork) {
  // Read at once (Megatron's row-parallel psum feeding the next op), or
  // with no async id, or standing for repeated calls, or overlap off: serial.
  for (int form = 0; form < 4; ++form) {
    DeviceCostLog log;
    log.set_overlap(form != 3);
    log.Add(Op("a"), Compute(1));
    OpRecord c = Collective("psum", form == 1 ? 0 : 5);
    log.Add(c, Ici(0.25, 3), form == 2 ? 2 : 1);
    log.Add(Op("b", {5}), Compute(2));
    const double serial = 1 + (form == 2 ? 2 : 1) * 3.25 + 2;
    EXPECT_EQ(log.serial_seconds(), serial) << form;
    EXPECT_EQ(log.seconds(), serial) << form;  // bit for bit
    EXPECT_EQ(log.ici_hidden_seconds(), 0) << form;
    EXPECT_EQ(log.by_collective_hidden().at("psum").ici_hidden_seconds, 0) << form;
  }
}

TEST(OverlapTest, TheIciRunsOneCollectiveAtATimeAndTheDeviceEndsWithIt) {
  // Two async all_gathers back to back: the second starts when the first is
  // done (2 s), ends at 4 s; nothing reads them: the device is done at 4 s,
  // the cores at 1 s. A synchronous psum after them queues behind.
  DeviceCostLog log;
  log.Add(Collective("all_gather", 1), Ici(0, 2));
  log.Add(Collective("all_gather", 2), Ici(0, 2));
  log.Add(Op("a"), Compute(1));
  EXPECT_DOUBLE_EQ(log.seconds(), 4);
  EXPECT_DOUBLE_EQ(log.ici_hidden_seconds(), 1);
  log.Add(Collective("psum", 0), Ici(0, 1));
  EXPECT_DOUBLE_EQ(log.seconds(), 5);
  EXPECT_DOUBLE_EQ(log.serial_seconds(), 6);
  // The wait behind the all_gathers is theirs; the psum's own second is
  // exposed: per kind the hidden seconds add up to the device's.
  const auto kinds = log.by_collective_hidden();
  EXPECT_DOUBLE_EQ(kinds.at("all_gather").ici_hidden_seconds, 1);
  EXPECT_DOUBLE_EQ(kinds.at("psum").ici_hidden_seconds, 0);
  EXPECT_DOUBLE_EQ(kinds.at("all_gather").ici_hidden_seconds + kinds.at("psum").ici_hidden_seconds,
                   log.ici_hidden_seconds());
}

TEST(OverlapTest, APrefetchStartsOneLayerAhead) {
  // FSDP: each layer's weight all_gather (1.5 s) before the layer (2 s)
  // that reads it. The first waits in full; the second may start when the
  // first layer starts (1.5 s), done at 3 s, before the second layer starts
  // at 3.5 s. Without `prefetch` it starts at its place (3.5 s): nothing
  // hidden.
  for (const bool prefetch : {true, false}) {
    DeviceCostLog log;
    OpRecord g1 = Collective("all_gather", 1), g2 = Collective("all_gather", 2);
    g1.prefetch = g2.prefetch = prefetch;
    log.Add(g1, Ici(0, 1.5));
    log.Add(Op("layer1", {1}), Compute(2));
    log.Add(g2, Ici(0, 1.5));
    log.Add(Op("layer2", {2}), Compute(2));
    EXPECT_DOUBLE_EQ(log.serial_seconds(), 7);
    EXPECT_DOUBLE_EQ(log.seconds(), prefetch ? 5.5 : 7) << prefetch;
    EXPECT_DOUBLE_EQ(log.by_collective_hidden().at("all_gather").ici_hidden_seconds, prefetch ? 1.5 : 0);
  }
}

}  // namespace
}  // namespace tpumesh::mesh
