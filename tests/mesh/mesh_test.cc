// Topology, devices (HBM accounting), arrays, replicate/shard and pmap.
#include "mesh/mesh.h"

#include <atomic>
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/collectives.h"

namespace tpumesh::mesh {
namespace {

using ::testing::HasSubstr;

TEST(TopologyTest, V5eSliceHasNoWraparound) {
  auto t = Topology::Create(V5eChip(), {2, 4});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->num_devices(), 8);
  EXPECT_FALSE(t->wraps(0));
  EXPECT_FALSE(t->wraps(1));
  // Device ids run x fastest: id 1 is (1,0), id 2 is (0,1).
  EXPECT_EQ(t->Coords(1).chip, (std::array<int, 3>{1, 0, 0}));
  EXPECT_EQ(t->Coords(2).chip, (std::array<int, 3>{0, 1, 0}));
  EXPECT_EQ(t->Coords(7).chip, (std::array<int, 3>{1, 3, 0}));
  // (0,0) -> (1,3): 1 + 3 hops, no wraparound shortcut.
  EXPECT_EQ(t->Hops(0, 7), 4);
  EXPECT_EQ(t->Hops(0, 6), 3);
  EXPECT_EQ(t->Neighbours(0), (std::vector<int>{1, 2}));
  EXPECT_EQ(t->Neighbours(3), (std::vector<int>{1, 2, 5}));
}

TEST(TopologyTest, FullPodAxesWrapAround) {
  auto t = Topology::Create(V5eChip(), {16, 16});
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->wraps(0));
  EXPECT_TRUE(t->wraps(1));
  EXPECT_EQ(t->ChipHops(0, 15), 1);  // (0,0) -> (15,0) over the wraparound link
  EXPECT_EQ(t->ChipHops(0, t->ChipAt({8, 8, 0})), 16);
  EXPECT_EQ(t->Neighbours(0).size(), 4u);
  auto v4 = Topology::Create(V4Chip(), {4, 4, 4});
  ASSERT_TRUE(v4.ok());
  EXPECT_TRUE(v4->wraps(2));
  EXPECT_EQ(v4->Neighbours(0).size(), 6u);
}

TEST(TopologyTest, V2CoresShareAChip) {
  auto t = Topology::Create(V2Chip(), {2, 2});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->num_devices(), 8);
  EXPECT_EQ(t->Coords(5).core_on_chip, 1);
  EXPECT_EQ(t->Coords(5).chip, (std::array<int, 3>{0, 1, 0}));
  EXPECT_EQ(t->Hops(4, 5), 0);
  EXPECT_EQ(t->Neighbours(0), (std::vector<int>{2, 3, 4, 5, 1}));
}

TEST(TopologyTest, ParseDims) {
  EXPECT_EQ(*Topology::ParseDims("2x4"), (std::vector<int>{2, 4}));
  EXPECT_EQ(*Topology::ParseDims("4x4x8"), (std::vector<int>{4, 4, 8}));
  for (const char* bad : {"", "2x", "x4", "0x4", "2x4x1x1", "a", "2*4", "-2"}) {
    auto r = Topology::ParseDims(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(MeshTest, AxisIndicesAreRowMajorLikeJax) {
  auto mesh = Mesh::Create(V5eChip(), {2, 4}, *ParseMeshAxes("x=2,y=4"));
  ASSERT_TRUE(mesh.ok());
  EXPECT_EQ((*mesh)->AxisIndices(5), (std::vector<int>{1, 1}));
  EXPECT_EQ(*(*mesh)->Group(5, std::vector<std::string>{"y"}), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(*(*mesh)->Group(5, std::vector<std::string>{"x"}), (std::vector<int>{1, 5}));
  EXPECT_EQ(*(*mesh)->Group(0, std::vector<std::string>{"y", "x"}),
            (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7}));
}

TEST(MeshTest, BadMeshes) {
  EXPECT_THAT(Mesh::Create(V5eChip(), {2, 4}, *ParseMeshAxes("data=4")).status().message(),
              HasSubstr("hold 4 devices but topology 2x4 of v5e has 8"));
  EXPECT_EQ(ParseMeshAxes("x=2,x=4").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseMeshAxes("x=0").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseMeshAxes("=3").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseMeshAxes("8")->front().name, "data");
}

TEST(DeviceTest, HbmExhaustionNamesDeviceAskedAndFree) {
  auto mesh = Mesh::Create(V5eChip(), {2, 4}, {});
  ASSERT_TRUE(mesh.ok());
  Device& d3 = (*mesh)->device(3);
  EXPECT_EQ(d3.hbm_capacity(), int64_t{16} << 30);
  d3.set_hbm_capacity(1 << 20);
  auto a = Array::Allocate(d3, DType::kF32, {128, 1024}, "latents");  // 512 KiB
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(d3.hbm_in_use(), 512 << 10);
  auto b = Array::Allocate(d3, DType::kF32, {256, 1024}, "weights");  // 1 MiB
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(b.status().message(),
            "device 3 (TPU v5 lite (emulated)) out of HBM: weights f32[256,1024] asks for "
            "1048576 bytes (1.0 MiB), 524288 bytes free (512.0 KiB) of 1.0 MiB");
  {
    Array copy = *a;  // a handle: shares the reservation
    EXPECT_EQ(d3.hbm_in_use(), 512 << 10);
  }
  *a = Array();
  EXPECT_EQ(d3.hbm_in_use(), 0);
  EXPECT_EQ(d3.hbm_peak(), 512 << 10);
  EXPECT_EQ((*mesh)->device(2).hbm_in_use(), 0);
}

TEST(DeviceTest, ReplicationCountsOnEveryDeviceButSharesStorage) {
  auto mesh = Mesh::Create(V5eChip(), {2, 2}, {});
  Array w = Array::Host(DType::kBF16, {1000});
  auto r = (*mesh)->Replicate(w);
  ASSERT_TRUE(r.ok());
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ((*mesh)->device(d).hbm_in_use(), 2000);
    EXPECT_TRUE(r->shards[d].SharesStorageWith(w));
    EXPECT_TRUE(r->shards[d].read_only());
  }
  (*mesh)->device(2).set_hbm_capacity(3000);
  auto again = (*mesh)->Replicate(w);
  EXPECT_EQ(again.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(again.status().message(), HasSubstr("device 2"));
}

TEST(DeviceTest, KindAndString) {
  auto mesh = Mesh::Create(V2Chip(), {2, 2}, {});
  EXPECT_EQ((*mesh)->device(3).kind(), "TPU v2 (emulated)");
  EXPECT_EQ((*mesh)->device(3).ToString(), "TpuDevice(id=3, coords=(1,0,0), core_on_chip=1)");
  EXPECT_EQ((*mesh)->device(0).hbm_capacity(), int64_t{8} << 30);
}

TEST(ShardTest, SplitsLeadingDimension) {
  auto mesh = Mesh::Create(V5eChip(), {2, 4}, {});
  std::vector<int32_t> v(16 * 3);
  std::iota(v.begin(), v.end(), 0);
  Array x = Array::HostFrom<int32_t>({16, 3}, v);
  auto s = (*mesh)->Shard(x);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->stacked_shape(), (Shape{8, 2, 3}));
  EXPECT_EQ(s->shards[5].ToVector<int32_t>(), (std::vector<int32_t>{30, 31, 32, 33, 34, 35}));
  EXPECT_EQ(s->shards[5].device(), &(*mesh)->device(5));
  auto bad = (*mesh)->Shard(Array::Host(DType::kF32, {12, 3}));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("leading dimension 12 is not divisible by 8"));
}

// f(rows) = 3 * row + sum(row), computed row by row.
Array RowFunction(const Array& x) {
  Array y = Array::Host(DType::kI32, x.shape());
  const int64_t cols = x.dim(1);
  for (int64_t r = 0; r < x.dim(0); ++r) {
    int32_t sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += x.data<int32_t>()[r * cols + c];
    for (int64_t c = 0; c < cols; ++c)
      y.mutable_data<int32_t>()[r * cols + c] = 3 * x.data<int32_t>()[r * cols + c] + sum;
  }
  return y;
}

class PmapTest : public ::testing::TestWithParam<int> {};

TEST_P(PmapTest, ShardedEqualsUnsharded) {
  const int host_cores = GetParam();
  auto mesh = Mesh::Create(V5eChip(), {2, 4}, {}, MeshOptions{.threads_per_device = 0, .host_cores = host_cores});
  ASSERT_TRUE(mesh.ok());
  std::vector<int32_t> v(24 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 37) % 101) - 50;
  Array x = Array::HostFrom<int32_t>({24, 5}, v);
  Array want = RowFunction(x);
  int32_t total = 0;
  for (int32_t e : v) total += e;

  auto sharded = (*mesh)->Shard(x);
  ASSERT_TRUE(sharded.ok());
  auto out = (*mesh)->Pmap(
      [](DeviceContext& ctx, std::span<const Array> a) -> StatusOr<std::vector<Array>> {
        TPUMESH_ASSIGN_OR_RETURN(Array y, a[0].CopyTo(&ctx.device()));
        Array host = RowFunction(a[0]);
        std::memcpy(y.mutable_raw(), host.raw(), host.size_bytes());
        // Partial sum of this shard, then the global sum over the mesh.
        TPUMESH_ASSIGN_OR_RETURN(Array part, ctx.Allocate(DType::kI32, {1}));
        int32_t s = 0;
        for (int32_t e : a[0].ToVector<int32_t>()) s += e;
        part.mutable_data<int32_t>()[0] = s;
        TPUMESH_ASSIGN_OR_RETURN(Array sum, ctx.Psum(part, {"data"}));
        TPUMESH_ASSIGN_OR_RETURN(int idx, ctx.axis_index("data"));
        TPUMESH_ASSIGN_OR_RETURN(Array id, ctx.Allocate(DType::kI32, {}));
        id.mutable_data<int32_t>()[0] = idx;
        return std::vector<Array>{y, sum, id};
      },
      std::span<const DistributedArray>(&*sharded, 1));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 3u);
  auto stacked = (*out)[0].Gather();
  ASSERT_TRUE(stacked.ok());
  EXPECT_EQ(stacked->shape(), (Shape{8, 3, 5}));
  auto flat = stacked->Reshape({24, 5});
  EXPECT_TRUE(flat->BitwiseEquals(want));
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ((*out)[1].shards[d].ToVector<int32_t>()[0], total);
    EXPECT_EQ((*out)[2].shards[d].ToVector<int32_t>()[0], d);
  }
}

// DeviceContext::HostBarrier: no device leaves barrier k before every device
// has reached it (on fewer host cores than devices: a parked device gives its
// core away, else this hangs), exactly one device of each barrier is told it
// leads, and a device that returns early holds no one up.
TEST_P(PmapTest, HostBarrierWaitsForEveryDeviceOnce) {
  auto mesh = Mesh::Create(V5eChip(), {2, 4}, {}, MeshOptions{.threads_per_device = 0, .host_cores = GetParam()});
  ASSERT_TRUE(mesh.ok());
  constexpr int kBarriers = 3;
  std::atomic<int> reached[kBarriers] = {}, leaders[kBarriers] = {};
  std::atomic<bool> early_leave{false};
  auto out = (*mesh)->Pmap(
      [&](DeviceContext& ctx, std::span<const Array>) -> StatusOr<std::vector<Array>> {
        // Device 5 leaves after the first barrier, with an error.
        const int barriers = ctx.device_id() == 5 ? 1 : kBarriers;
        for (int k = 0; k < barriers; ++k) {
          ++reached[k];
          const bool lead = ctx.HostBarrier();
          const int want = k == 0 ? 8 : 7;
          if (reached[k].load() != want) early_leave = true;
          leaders[k] += lead;
        }
        if (ctx.device_id() == 5) return InternalError("device 5 stops");
        return std::vector<Array>{};
      },
      {});
  EXPECT_EQ(out.status().code(), StatusCode::kInternal);
  EXPECT_FALSE(early_leave.load()) << "a device left a barrier before every device reached it";
  for (int k = 0; k < kBarriers; ++k) EXPECT_EQ(leaders[k].load(), 1) << "barrier " << k;
}

INSTANTIATE_TEST_SUITE_P(HostCores, PmapTest, ::testing::Values(1, 2, 8));

TEST(PmapArgsTest, RejectsMisplacedArguments) {
  auto mesh = Mesh::Create(V5eChip(), {2, 2}, {});
  DistributedArray a;
  for (int d = 0; d < 4; ++d) a.shards.push_back(*Array::Allocate((*mesh)->device(0), DType::kF32, {1}));
  auto r = (*mesh)->Pmap([](DeviceContext&, std::span<const Array>) -> StatusOr<std::vector<Array>> {
    return std::vector<Array>{};
  }, std::span<const DistributedArray>(&a, 1));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("not on device 1"));
}

TEST(PmapArgsTest, OutputsMustAgree) {
  auto mesh = Mesh::Create(V5eChip(), {2}, {});
  auto r = (*mesh)->Pmap([](DeviceContext& ctx, std::span<const Array>) -> StatusOr<std::vector<Array>> {
    TPUMESH_ASSIGN_OR_RETURN(Array a, ctx.Allocate(DType::kF32, {ctx.device_id() + 1}));
    return std::vector<Array>{a};
  }, {});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("f32[2]@1 on device 1 but f32[1]@0"));
}

TEST(ArrayTest, DTypesAndShapes) {
  EXPECT_EQ(*ParseDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(ParseDType("f16").status().code(), StatusCode::kInvalidArgument);
  Array a = Array::Host(DType::kBF16, {2, 3});
  EXPECT_EQ(a.size_bytes(), 12);
  EXPECT_EQ(a.ToString(), "bf16[2,3]@host");
  EXPECT_EQ(a.Reshape({4}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw()) % 64, 0u);
}

// Large arrays come from mappings that a freed array hands on to the next of
// the same size (mesh/array.cc): reused, and zeroed again as every new array
// is; a different size or a lazy array gets its own.
TEST(ArrayTest, LargeMappingsAreReusedAndComeBackZeroed) {
  const Shape shape = {3 << 20};  // 12 MiB of f32
  const void* first = nullptr;
  {
    Array a = Array::Host(DType::kF32, shape);
    first = a.raw();
    float* p = a.mutable_data<float>();
    for (int64_t i = 0; i < a.num_elements(); i += 4096) p[i] = 1.0f;
    p[a.num_elements() - 1] = 2.0f;
  }
  Array b = Array::Host(DType::kF32, shape);
  EXPECT_EQ(b.raw(), first);
  const float* q = b.data<float>();
  int64_t nonzero = 0;
  for (int64_t i = 0; i < b.num_elements(); ++i) nonzero += q[i] != 0.0f;
  EXPECT_EQ(nonzero, 0);
  Array c = Array::Host(DType::kF32, shape);  // b holds the cached one
  EXPECT_NE(c.raw(), b.raw());
  EXPECT_EQ(c.data<float>()[c.num_elements() - 1], 0.0f);
}

// --topology alone sets the device count for every command's mesh, and
// model=M alone leaves data the rest (both once failed naming a --mesh
// data=8 the user never gave, or holding 4 devices of a topology of 8).
TEST(MeshSpecTest, TheTopologySetsTheDeviceCountAndDataTakesTheRest) {
  MeshSpec spec;
  spec.topology = "4x4";
  for (auto create : {CreateMesh, CreateDataModelMesh}) {
    auto m = create(spec);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ((*m)->num_devices(), 16);
  }
  spec.topology = "2x4";
  spec.axes = "model=4";
  for (auto create : {CreateMesh, CreateDataModelMesh}) {
    auto m = create(spec);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(MeshAxesToString((*m)->axes()), "data=2,model=4");
  }
  spec.axes.clear();
  spec.topology = "100x100";
  auto big = CreateDataModelMesh(spec);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(), "--topology 100x100: more than 1024 devices (at most 1024 are emulated)");
}

// A refusal names the flags as the user gave them: "--mesh data=2", not the
// data=2,model=1 the data x model mesh fills in, and the topology's count,
// not a --devices the user never gave.
TEST(MeshSpecTest, MessagesNameOnlyTheFlagsGiven) {
  struct Case {
    std::string axes, topology;
    int devices;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"data=2", "4x4", 0, "--mesh data=2 holds 2 devices but --topology 4x4 holds 16"},
           {"data=2", "", 4, "--mesh data=2 holds 2 devices but --devices is 4"},
           {"model=3", "2x4", 0, "--mesh model=3: model=3 does not divide the 8 devices (--topology 2x4 holds 8)"},
           {"model=3", "", 8, "--mesh model=3: model=3 does not divide the 8 devices (--devices is 8)"},
       }) {
    MeshSpec spec;
    spec.axes = c.axes;
    spec.topology = c.topology;
    spec.devices = c.devices;
    auto m = CreateDataModelMesh(spec);
    ASSERT_FALSE(m.ok()) << c.message;
    EXPECT_EQ(m.status().message(), c.message);
  }
}

// VMEM sizes that round to no bytes would mean "not modelled": refused.
TEST(MeshSpecTest, VmemBelowOneKibIsRefused) {
  MeshSpec spec;
  for (const double mib : {-2.0, 1e-9, 0.0009, 2e6}) {  // -1 is MeshSpec's "the chip's"
    spec.vmem_mib = mib;
    EXPECT_FALSE(CreateMesh(spec).ok()) << mib;
  }
  for (const double mib : {0.0, 1.0 / 1024, 128.0}) {
    spec.vmem_mib = mib;
    EXPECT_TRUE(CreateMesh(spec).ok()) << mib;
  }
}

}  // namespace
}  // namespace tpumesh::mesh
