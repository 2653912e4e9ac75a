// Collectives of a mesh spread over the ranks of the cluster this binary
// was started with (ctest runs it under mpirun -np 2 and -np 4, and alone)
// equal, bit for bit, the same collectives on the same mesh in this one
// process: every collective, tiled and untiled, f32, bf16 and s32, on an
// 8-device v5e 2x4 as data=8, data=4,model=2 and data=2,model=4, over each
// axis and both, so groups inside a rank and groups across ranks. The
// simulated clocks and ICI bytes agree too. Mismatched calls, a device that
// skips a collective and a device's own error fail every rank with
// FailedPrecondition naming the device.
//
// Every rank runs every test; each checks its own devices against its own
// in-process run, so together they check every device.
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/cluster.h"
#include "mesh/collectives.h"
#include "mesh/mesh.h"

namespace tpumesh::mesh {
namespace {

using ::testing::HasSubstr;

Cluster* g_cluster = nullptr;

std::unique_ptr<Mesh> MakeMesh(const std::string& axes, Cluster* cluster) {
  auto parsed = ParseMeshAxes(axes);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  MeshOptions o;
  o.cluster = cluster;
  auto mesh = Mesh::Create(V5eChip(), {2, 4}, *parsed, o);
  EXPECT_TRUE(mesh.ok()) << mesh.status().ToString();
  return std::move(mesh).value();
}

// Deterministic, device-dependent values; sums of them round in f32 and
// bf16 (so the order of a sum shows in the bits).
Array MakeInput(DType t, const Shape& shape, int device) {
  Array a = Array::Host(t, shape);
  const int64_t n = a.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = (device + 1) * 1000 + i * 7 - 50;
    const float f = static_cast<float>(v) * 0.37f + 1e-3f * static_cast<float>((i * 13 + device * 5) % 17);
    switch (t) {
      case DType::kF32: a.mutable_data<float>()[i] = f; break;
      case DType::kBF16: a.mutable_data<kernels::bf16>()[i] = kernels::F32ToBf16(f); break;
      case DType::kI32: a.mutable_data<int32_t>()[i] = static_cast<int32_t>(v * 1000003); break;
      default: break;
    }
  }
  return a;
}

struct Case {
  CollectiveKind kind;
  int axis = 0;
  int concat_axis = 0;
  bool tiled = false;
  // ppermute: 0 sends k -> k+1 (the last member is nobody's source, the
  // first nobody's destination); s sends every k -> (k+s) mod n.
  int shift = 0;
};

std::string CaseName(const Case& c) {
  return std::string(CollectiveName(c.kind)) + " axis=" + std::to_string(c.axis) +
         " concat=" + std::to_string(c.concat_axis) + (c.tiled ? " tiled" : "") +
         (c.shift ? " shift=" + std::to_string(c.shift) : "");
}

// Runs `c` on every device of `mesh` (this rank's, on a cluster mesh) and
// returns the outputs; device d's entry clock is set apart from the others'.
StatusOr<DistributedArray> RunCase(Mesh& mesh, const AxisNames& axes, const Case& c, DType t,
                                   const Shape& shape) {
  mesh.ResetClocks();
  DistributedArray in;
  in.shards.resize(mesh.num_devices());
  for (int d = 0; d < mesh.num_devices(); ++d) {
    if (!mesh.is_local(d)) continue;
    TPUMESH_ASSIGN_OR_RETURN(in.shards[d], MakeInput(t, shape, d).CopyTo(&mesh.device(d)));
  }
  TPUMESH_ASSIGN_OR_RETURN(std::vector<int> group0, mesh.Group(0, axes));
  const int n = static_cast<int>(group0.size());
  std::vector<std::pair<int, int>> perm;
  if (c.shift == 0) {
    for (int k = 0; k + 1 < n; ++k) perm.emplace_back(k, k + 1);
  } else {
    for (int k = 0; k < n; ++k) perm.emplace_back(k, (k + c.shift) % n);
  }
  auto out = mesh.Pmap(
      [&](DeviceContext& ctx, std::span<const Array> args) -> StatusOr<std::vector<Array>> {
        ctx.device().AdvanceClock(1e-4 * ((ctx.device_id() * 37) % 8));
        StatusOr<Array> r = InternalError("unset");
        switch (c.kind) {
          case CollectiveKind::kPsum: r = ctx.Psum(args[0], axes); break;
          case CollectiveKind::kPmean: r = ctx.Pmean(args[0], axes); break;
          case CollectiveKind::kAllGather: r = ctx.AllGather(args[0], axes, c.axis, c.tiled); break;
          case CollectiveKind::kPsumScatter: r = ctx.PsumScatter(args[0], axes, c.axis, c.tiled); break;
          case CollectiveKind::kPpermute: r = ctx.Ppermute(args[0], axes, perm); break;
          case CollectiveKind::kAllToAll: r = ctx.AllToAll(args[0], axes, c.axis, c.concat_axis, c.tiled); break;
        }
        if (!r.ok()) return r.status();
        return std::vector<Array>{*r};
      },
      std::span<const DistributedArray>(&in, 1));
  if (!out.ok()) return out.status();
  return (*out)[0];
}

void CheckCase(Mesh& spread, Mesh& local, const AxisNames& axes, const Case& c, DType t, const Shape& shape) {
  std::string axes_text;
  for (const auto& a : axes) axes_text += a + " ";
  SCOPED_TRACE(CaseName(c) + " over " + axes_text + "dtype=" + std::string(DTypeName(t)) + " shape=" +
               ShapeToString(shape) + " mesh=" + MeshAxesToString(spread.axes()));
  auto got = RunCase(spread, axes, c, t, shape);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto want = RunCase(local, axes, c, t, shape);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (int d = spread.first_local(); d < spread.first_local() + spread.num_local(); ++d) {
    const Array& g = got->shards[d];
    const Array& w = want->shards[d];
    ASSERT_EQ(g.shape(), w.shape()) << "device " << d;
    ASSERT_EQ(g.dtype(), w.dtype()) << "device " << d;
    const auto* gb = static_cast<const unsigned char*>(g.raw());
    const auto* wb = static_cast<const unsigned char*>(w.raw());
    const size_t elem = DTypeSize(t);
    for (int64_t i = 0; i < w.num_elements(); ++i) {
      ASSERT_EQ(std::memcmp(gb + i * elem, wb + i * elem, elem), 0) << "device " << d << " element " << i;
    }
    EXPECT_EQ(spread.device(d).clock_seconds(), local.device(d).clock_seconds()) << "device " << d;
  }
}

void CheckAll(Mesh& spread, Mesh& local, const AxisNames& axes) {
  const int n = static_cast<int>(spread.Group(0, axes)->size());
  for (DType t : {DType::kF32, DType::kBF16, DType::kI32}) {
    CheckCase(spread, local, axes, {CollectiveKind::kPsum}, t, {3, 5});
    CheckCase(spread, local, axes, {CollectiveKind::kPmean}, t, {7});
    CheckCase(spread, local, axes, {CollectiveKind::kPpermute}, t, {2, 3});
    for (int axis : {0, 1, 2}) CheckCase(spread, local, axes, {CollectiveKind::kAllGather, axis}, t, {2, 3});
    for (int axis : {0, 1}) CheckCase(spread, local, axes, {CollectiveKind::kAllGather, axis, 0, true}, t, {2, 3});
    CheckCase(spread, local, axes, {CollectiveKind::kPsumScatter, 0}, t, {n, 3});
    CheckCase(spread, local, axes, {CollectiveKind::kPsumScatter, 1}, t, {2, n, 3});
    CheckCase(spread, local, axes, {CollectiveKind::kPsumScatter, 1, 0, true}, t, {3, 2 * n});
    for (int split : {0, 1, 2})
      for (int concat : {0, 2}) {
        Shape s = {2, 3, 4};
        s[split] = n;
        CheckCase(spread, local, axes, {CollectiveKind::kAllToAll, split, concat}, t, s);
        s[split] = 2 * n;
        CheckCase(spread, local, axes, {CollectiveKind::kAllToAll, split, concat, true}, t, s);
      }
  }
}

class MeshShapeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MeshShapeTest, EveryCollectiveEqualsOneProcess) {
  auto spread = MakeMesh(GetParam(), g_cluster);
  auto local = MakeMesh(GetParam(), nullptr);
  ASSERT_EQ(spread->num_local(), 8 / g_cluster->size());
  if (spread->axes().size() == 1) {
    CheckAll(*spread, *local, {"data"});
    return;
  }
  CheckAll(*spread, *local, {"data"});
  CheckAll(*spread, *local, {"model"});
  CheckAll(*spread, *local, {"data", "model"});
  CheckAll(*spread, *local, {"model", "data"});
}

INSTANTIATE_TEST_SUITE_P(V5e8, MeshShapeTest,
                         ::testing::Values("data=8", "data=4,model=2", "data=2,model=4"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '=' || ch == ',') ch = '_';
                           return s;
                         });

// The edges of the split between ranks (mesh/rank_split.h), over every
// axis of every mesh, so groups with members on 1, 2 and 4 ranks (under
// -np 4: `model` of data=4,model=2, `model` of data=2,model=4, `data` of
// data=8; both axis orders interleave the ranks): psums of fewer elements
// than ranks (some ranks own nothing) and of sizes no rank count divides;
// psum_scatter and all_to_all rows too many and too small to travel one by
// one (packed by the transport); ppermute cycles that cross ranks both ways.
class EdgeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EdgeTest, SplitEdgesEqualOneProcess) {
  auto spread = MakeMesh(GetParam(), g_cluster);
  auto local = MakeMesh(GetParam(), nullptr);
  std::vector<AxisNames> axes_list = {{"data"}};
  if (spread->axes().size() == 2) axes_list = {{"data"}, {"model"}, {"data", "model"}, {"model", "data"}};
  for (const AxisNames& axes : axes_list) {
    const int n = static_cast<int>(spread->Group(0, axes)->size());
    for (DType t : {DType::kF32, DType::kBF16, DType::kI32}) {
      for (int64_t count : {0, 1, 2, 3, 1001})
        CheckCase(*spread, *local, axes, {CollectiveKind::kPsum}, t, {count});
      CheckCase(*spread, *local, axes, {CollectiveKind::kPmean}, t, {3, 37});
      CheckCase(*spread, *local, axes, {CollectiveKind::kPsumScatter, 1}, t, {300, n, 3});
      CheckCase(*spread, *local, axes, {CollectiveKind::kPsumScatter, 1, 0, true}, t, {150, 2 * n});
      CheckCase(*spread, *local, axes, {CollectiveKind::kAllToAll, 1, 0, true}, t, {200, 2 * n});
      CheckCase(*spread, *local, axes, {CollectiveKind::kAllToAll, 1, 1}, t, {100, n, 3});
      for (int shift : {1, n - 1, n / 2})
        if (shift > 0) CheckCase(*spread, *local, axes, {CollectiveKind::kPpermute, 0, 0, false, shift}, t, {5});
    }
  }
  // A large odd pmean in every dtype (several messages, ranges no rank count
  // divides).
  for (DType t : {DType::kF32, DType::kBF16, DType::kI32})
    CheckCase(*spread, *local, {"data"}, {CollectiveKind::kPmean}, t, {1000003});
}

INSTANTIATE_TEST_SUITE_P(V5e8, EdgeTest, ::testing::Values("data=8", "data=4,model=2", "data=2,model=4"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '=' || ch == ',') ch = '_';
                           return s;
                         });

// 12 MB per device: several 8 MiB messages per input on the wire.
TEST(LargeTest, PsumOf12MbPerDeviceEqualsOneProcess) {
  auto spread = MakeMesh("data=4,model=2", g_cluster);
  auto local = MakeMesh("data=4,model=2", nullptr);
  CheckCase(*spread, *local, {"data", "model"}, {CollectiveKind::kPsum}, DType::kF32, {3 << 20});
  CheckCase(*spread, *local, {"data"}, {CollectiveKind::kAllGather, 0, 0, true}, DType::kBF16, {3 << 19});
}

// Several collectives in one pmap, and pmaps with none.
TEST(SequenceTest, ChainedCollectivesAndEmptyPmaps) {
  std::vector<float> want;  // device 0's result in one process
  for (Cluster* cluster : {static_cast<Cluster*>(nullptr), g_cluster}) {
    std::unique_ptr<Mesh> mesh = MakeMesh("data=2,model=4", cluster);
    auto run = [&]() -> StatusOr<DistributedArray> {
      TPUMESH_ASSIGN_OR_RETURN(DistributedArray x, mesh->Shard(MakeInput(DType::kF32, {8, 6}, 3)));
      for (int i = 0; i < 3; ++i) {
        auto none = mesh->Pmap([](DeviceContext&, std::span<const Array>) { return StatusOr<std::vector<Array>>(std::vector<Array>{}); },
                               std::span<const DistributedArray>(&x, 1));
        if (!none.ok()) return none.status();
      }
      auto out = mesh->Pmap(
          [](DeviceContext& ctx, std::span<const Array> a) -> StatusOr<std::vector<Array>> {
            TPUMESH_ASSIGN_OR_RETURN(Array s, ctx.Psum(a[0], {"model"}));
            TPUMESH_ASSIGN_OR_RETURN(Array g, ctx.AllGather(s, {"data"}, 0, true));
            TPUMESH_ASSIGN_OR_RETURN(Array p, ctx.Pmean(g, {"data", "model"}));
            return std::vector<Array>{p};
          },
          std::span<const DistributedArray>(&x, 1));
      if (!out.ok()) return out.status();
      return (*out)[0];
    };
    auto out = run();
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    // Every device ends with the same pmean.
    for (int d = mesh->first_local(); d < mesh->first_local() + mesh->num_local(); ++d) {
      const Array& a = out->shards[d];
      std::vector<float> v(a.data<float>(), a.data<float>() + a.num_elements());
      if (want.empty()) want = v;
      EXPECT_EQ(v, want) << "device " << d;
    }
  }
}

// Runs `body` on a data=2,model=4 mesh over the cluster, one f32[4,8] per
// device; returns pmap's status.
Status RunSpread(const std::function<StatusOr<std::vector<Array>>(DeviceContext&, const Array&)>& body) {
  auto mesh = MakeMesh("data=2,model=4", g_cluster);
  DistributedArray in;
  in.shards.resize(8);
  for (int d = mesh->first_local(); d < mesh->first_local() + mesh->num_local(); ++d)
    in.shards[d] = *Array::Allocate(mesh->device(d), DType::kF32, {4, 8});
  auto out = mesh->Pmap([&](DeviceContext& ctx, std::span<const Array> a) { return body(ctx, a[0]); },
                        std::span<const DistributedArray>(&in, 1));
  return out.status();
}

StatusOr<std::vector<Array>> Wrap(StatusOr<Array> a) {
  if (!a.ok()) return a.status();
  return std::vector<Array>{*a};
}

TEST(ErrorsTest, MismatchedCallsFailEveryRankNamingTheDevice) {
  Status s = RunSpread([](DeviceContext& ctx, const Array& x) -> StatusOr<std::vector<Array>> {
    if (ctx.device_id() == 5) return Wrap(ctx.AllGather(x, {"model"}));
    return Wrap(ctx.Psum(x, {"model"}));
  });
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("does not match across devices"));
  EXPECT_THAT(s.message(), HasSubstr("device 5"));
  EXPECT_THAT(s.message(), HasSubstr("all_gather over ('model')"));
}

TEST(ErrorsTest, SkippedCollectiveFailsEveryRankNeverHangs) {
  Status s = RunSpread([](DeviceContext& ctx, const Array& x) -> StatusOr<std::vector<Array>> {
    TPUMESH_ASSIGN_OR_RETURN(Array a, ctx.Psum(x, {"data"}));
    if (ctx.device_id() == 7) return std::vector<Array>{a};
    return Wrap(ctx.Psum(a, {"model"}));
  });
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("device 7"));
  EXPECT_THAT(s.message(), HasSubstr("returned from the pmapped function without entering collective #1"));
}

TEST(ErrorsTest, DeviceErrorIsTheCauseOnItsRankAndNamedOnTheOthers) {
  Status s = RunSpread([](DeviceContext& ctx, const Array& x) -> StatusOr<std::vector<Array>> {
    if (ctx.device_id() == 6) return InvalidArgumentError("bad prompt");
    return Wrap(ctx.Psum(x, {"data", "model"}));
  });
  const int size = g_cluster->size();
  if (g_cluster->rank() == 6 / (8 / size)) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_EQ(s.message(), "pmap: device 6: bad prompt");
  } else {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("failed before entering collective #0"));
    EXPECT_THAT(s.message(), HasSubstr("INVALID_ARGUMENT: bad prompt"));
  }
}

TEST(MappingTest, ContiguousBlocksOfDeviceIds) {
  auto mesh = MakeMesh("data=2,model=4", g_cluster);
  const int per = 8 / g_cluster->size();
  EXPECT_EQ(mesh->first_local(), g_cluster->rank() * per);
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(mesh->rank_of(d), d / per);
    EXPECT_EQ(mesh->is_local(d), d / per == g_cluster->rank());
  }
  MeshOptions o;
  o.cluster = g_cluster;
  auto bad = Mesh::Create(V5eChip(), {1, 3}, {{"data", 3}}, o);
  if (g_cluster->size() > 1 && 3 % g_cluster->size() != 0) {
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(bad.status().message(), HasSubstr("3 devices cannot be split over " + std::to_string(g_cluster->size()) + " ranks"));
  }
}

// On ranks other than 0, only failures are printed, each naming its rank.
class FailuresOnly : public ::testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.summary());
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace tpumesh::mesh

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto cluster = tpumesh::mesh::ConnectCluster();
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  tpumesh::mesh::g_cluster = *cluster;
  const int rank = (*cluster)->rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new tpumesh::mesh::FailuresOnly(rank));
  } else {
    std::printf("cluster: %d rank(s) over %s\n", (*cluster)->size(), (*cluster)->transport().c_str());
  }
  return RUN_ALL_TESTS();
}
