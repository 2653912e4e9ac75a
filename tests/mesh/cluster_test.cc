// The one-process cluster, ConnectCluster without a launcher, and a mesh
// that takes its rank's block of devices from a cluster (a stand-in that
// only claims a rank and a size: nothing is exchanged here; cross-rank
// collectives are tested under mpirun in tests/cluster).
#include "mesh/cluster.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/mesh.h"

namespace tpumesh::mesh {
namespace {

using ::testing::HasSubstr;

TEST(LocalClusterTest, ExchangeHandsTheBlobBack) {
  Cluster& c = LocalCluster();
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  const std::string text = "abc";
  auto all = c.AllGatherBytes(std::as_bytes(std::span(text)));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*all)[0].data()), (*all)[0].size()), "abc");
  EXPECT_TRUE(c.Barrier().ok());
}

TEST(ConnectClusterTest, AloneIsTheLocalCluster) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("SLURM_STEP_NUM_TASKS"))
    GTEST_SKIP() << "started by a launcher";
  auto c = ConnectCluster();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, &LocalCluster());
}

TEST(ConnectClusterTest, WithoutMpiSaysSoUnderMpirun) {
  if (ClusterHasMpi()) GTEST_SKIP() << "built with MPI (tests/cluster runs it under mpirun)";
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  auto c = ConnectCluster();
  unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("one of 2 ranks"));
  EXPECT_THAT(c.status().message(), HasSubstr("built without MPI"));
}

// Claims to be rank `rank` of `size`; never asked to exchange here.
class Claimed final : public Cluster {
 public:
  Claimed(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string transport() const override { return "claimed"; }
  StatusOr<std::vector<Bytes>> Exchange(std::span<const Outgoing>) override {
    return InternalError("not connected");
  }
  Status Barrier() override { return InternalError("not connected"); }
  [[noreturn]] void Fail(const Status&) override { std::abort(); }

 private:
  int rank_, size_;
};

TEST(MeshOverRanksTest, EachRankHostsAContiguousBlockOfDevices) {
  Claimed c(1, 4);
  MeshOptions o;
  o.cluster = &c;
  auto mesh = Mesh::Create(V5eChip(), {2, 4}, {{"data", 2}, {"model", 4}}, o);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  Mesh& m = **mesh;
  EXPECT_EQ(m.num_devices(), 8);
  EXPECT_EQ(m.first_local(), 2);
  EXPECT_EQ(m.num_local(), 2);
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(m.rank_of(d), d / 2);
    EXPECT_EQ(m.is_local(d), d == 2 || d == 3) << d;
  }
  EXPECT_EQ(m.device(2).id(), 2);
  // Only this rank's shards are made; the others are empty placeholders.
  auto r = m.Replicate(Array::Host(DType::kF32, {4}));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->num_shards(), 8);
  for (int d = 0; d < 8; ++d) EXPECT_EQ(r->shards[d].device() != nullptr, m.is_local(d)) << d;
  auto s = m.Shard(Array::Host(DType::kF32, {16, 3}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->shards[3].shape(), (Shape{2, 3}));
  EXPECT_EQ(s->shards[0].device(), nullptr);
}

TEST(MeshOverRanksTest, RanksMustDivideTheDevices) {
  Claimed c(0, 3);
  MeshOptions o;
  o.cluster = &c;
  auto mesh = Mesh::Create(V5eChip(), {2, 4}, {{"data", 8}}, o);
  EXPECT_EQ(mesh.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(mesh.status().message(), HasSubstr("a mesh of 8 devices cannot be split over 3 ranks"));
}

}  // namespace
}  // namespace tpumesh::mesh
