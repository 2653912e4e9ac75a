// Every collective on 1, 2, 4 and 8 devices and on 2-axis meshes, for every
// dtype, against a serial element-by-element computation; output shapes of
// the tiled and untiled variants; errors for bad shapes and for devices that
// do not take part.
#include "mesh/collectives.h"

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/mesh.h"

namespace tpumesh::mesh {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Mesh> MakeMesh(const ChipSpec& chip, std::vector<int> dims,
                               const std::string& axes, MeshOptions opt = {}) {
  auto parsed = ParseMeshAxes(axes);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto mesh = Mesh::Create(chip, dims, *parsed, opt);
  EXPECT_TRUE(mesh.ok()) << mesh.status().ToString();
  return std::move(mesh).value();
}

// Deterministic, device-dependent test values; exact in every dtype.
Array MakeInput(DType t, const Shape& shape, int device) {
  Array a = Array::Host(t, shape);
  const int64_t n = a.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = (device + 1) * 1000 + i * 7 - 50;
    switch (t) {
      case DType::kF32: a.mutable_data<float>()[i] = static_cast<float>(v) * 0.37f; break;
      case DType::kBF16: a.mutable_data<kernels::bf16>()[i] = kernels::F32ToBf16(static_cast<float>(v) * 0.37f); break;
      case DType::kI32: a.mutable_data<int32_t>()[i] = static_cast<int32_t>(v * 1000003); break;
      case DType::kU32: a.mutable_data<uint32_t>()[i] = static_cast<uint32_t>(v) * 2654435761u; break;
      case DType::kU8: a.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(v * 31); break;
    }
  }
  return a;
}

// Element i of `a` widened for arithmetic in the reference.
double ElemF(const Array& a, int64_t i) {
  switch (a.dtype()) {
    case DType::kF32: return a.data<float>()[i];
    case DType::kBF16: return kernels::Bf16ToF32(a.data<kernels::bf16>()[i]);
    default: return 0;
  }
}

uint32_t ElemBits(const Array& a, int64_t i) {
  uint32_t b = 0;
  std::memcpy(&b, static_cast<const std::byte*>(a.raw()) + i * DTypeSize(a.dtype()), DTypeSize(a.dtype()));
  return b;
}

std::vector<int64_t> Unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

int64_t Ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t r = 0;
  for (size_t d = 0; d < s.size(); ++d) r = r * s[d] + idx[d];
  return r;
}

// Serial sum of element i over the group, in group order, as the contract says.
uint32_t SumBits(const std::vector<Array>& xs, int64_t i, int divisor) {
  const DType t = xs[0].dtype();
  if (t == DType::kF32 || t == DType::kBF16) {
    float acc = static_cast<float>(ElemF(xs[0], i));
    for (size_t k = 1; k < xs.size(); ++k) acc += static_cast<float>(ElemF(xs[k], i));
    if (divisor != 1) acc /= static_cast<float>(divisor);
    if (t == DType::kF32) return std::bit_cast<uint32_t>(acc);
    return kernels::F32ToBf16(acc).bits;
  }
  uint32_t acc = 0;
  for (const auto& x : xs) acc += ElemBits(x, i);
  if (divisor != 1) {
    if (t == DType::kI32) return static_cast<uint32_t>(static_cast<int32_t>(acc) / divisor);
    return acc / divisor;
  }
  return acc;
}

struct Case {
  CollectiveKind kind;
  int axis = 0;
  int concat_axis = 0;
  bool tiled = false;
};

std::string CaseName(const Case& c) {
  return std::string(CollectiveName(c.kind)) + " axis=" + std::to_string(c.axis) +
         " concat=" + std::to_string(c.concat_axis) + (c.tiled ? " tiled" : "");
}

// Expected output of device `me` (group index) from the group's inputs xs.
Array Reference(const Case& c, const std::vector<Array>& xs, int me, const Shape& out_shape,
                const std::vector<std::pair<int, int>>& perm) {
  const int n = static_cast<int>(xs.size());
  const Shape& s = xs[0].shape();
  Array out = Array::Host(xs[0].dtype(), out_shape);
  const size_t elem = DTypeSize(out.dtype());
  auto put = [&](int64_t i, uint32_t bits) {
    std::memcpy(static_cast<std::byte*>(out.mutable_raw()) + i * elem, &bits, elem);
  };
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    std::vector<int64_t> idx = Unravel(i, out_shape);
    switch (c.kind) {
      case CollectiveKind::kPsum: put(i, SumBits(xs, i, 1)); break;
      case CollectiveKind::kPmean: put(i, SumBits(xs, i, n)); break;
      case CollectiveKind::kAllGather: {
        int k;
        std::vector<int64_t> src = idx;
        if (c.tiled) {
          k = static_cast<int>(idx[c.axis] / s[c.axis]);
          src[c.axis] = idx[c.axis] % s[c.axis];
        } else {
          k = static_cast<int>(idx[c.axis]);
          src.erase(src.begin() + c.axis);
        }
        put(i, ElemBits(xs[k], Ravel(src, s)));
        break;
      }
      case CollectiveKind::kPsumScatter: {
        std::vector<int64_t> src = idx;
        if (c.tiled) src[c.axis] += me * (s[c.axis] / n);
        else src.insert(src.begin() + c.axis, me);
        put(i, SumBits(xs, Ravel(src, s), 1));
        break;
      }
      case CollectiveKind::kPpermute: {
        uint32_t bits = 0;
        for (auto [a, b] : perm)
          if (b == me) bits = ElemBits(xs[a], i);
        put(i, bits);
        break;
      }
      case CollectiveKind::kAllToAll: {
        const int a = c.axis, b = c.concat_axis;
        int j;
        std::vector<int64_t> src = idx;
        if (c.tiled) {
          const int64_t ch = s[a] / n;
          if (a != b) {
            j = static_cast<int>(idx[b] / s[b]);
            src[b] = idx[b] % s[b];
            src[a] = me * ch + idx[a];
          } else {
            j = static_cast<int>(idx[a] / ch);
            src[a] = me * ch + idx[a] % ch;
          }
        } else {
          j = static_cast<int>(idx[b]);
          src.erase(src.begin() + b);
          src.insert(src.begin() + a, me);
        }
        put(i, ElemBits(xs[j], Ravel(src, s)));
        break;
      }
    }
  }
  return out;
}

// Runs `c` over `axes` on every device of `mesh` with inputs of `shape` and
// compares every device's output with the serial reference.
void CheckCollective(Mesh& mesh, const AxisNames& axes, const Case& c, DType t, const Shape& shape) {
  SCOPED_TRACE(CaseName(c) + " dtype=" + std::string(DTypeName(t)) + " shape=" +
               ShapeToString(shape) + " mesh=" + MeshAxesToString(mesh.axes()));
  const int n_dev = mesh.num_devices();
  std::vector<Array> host_inputs;
  DistributedArray in;
  for (int d = 0; d < n_dev; ++d) {
    host_inputs.push_back(MakeInput(t, shape, d));
    auto a = host_inputs.back().CopyTo(&mesh.device(d));
    ASSERT_TRUE(a.ok());
    in.shards.push_back(*a);
  }
  auto group0 = mesh.Group(0, axes);
  ASSERT_TRUE(group0.ok());
  const int n = static_cast<int>(group0->size());
  // A cyclic shift that leaves group index 0 without a source when n > 1.
  std::vector<std::pair<int, int>> perm;
  for (int k = 0; k + 1 < n; ++k) perm.emplace_back(k, k + 1);

  auto out = mesh.Pmap(
      [&](DeviceContext& ctx, std::span<const Array> args) -> StatusOr<std::vector<Array>> {
        StatusOr<Array> r = InternalError("unset");
        switch (c.kind) {
          case CollectiveKind::kPsum: r = ctx.Psum(args[0], axes); break;
          case CollectiveKind::kPmean: r = ctx.Pmean(args[0], axes); break;
          case CollectiveKind::kAllGather: r = ctx.AllGather(args[0], axes, c.axis, c.tiled); break;
          case CollectiveKind::kPsumScatter: r = ctx.PsumScatter(args[0], axes, c.axis, c.tiled); break;
          case CollectiveKind::kPpermute: r = ctx.Ppermute(args[0], axes, perm); break;
          case CollectiveKind::kAllToAll:
            r = ctx.AllToAll(args[0], axes, c.axis, c.concat_axis, c.tiled);
            break;
        }
        if (!r.ok()) return r.status();
        return std::vector<Array>{*r};
      },
      std::span<const DistributedArray>(&in, 1));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (int d = 0; d < n_dev; ++d) {
    auto group = mesh.Group(d, axes);
    std::vector<Array> xs;
    int me = -1;
    for (size_t k = 0; k < group->size(); ++k) {
      xs.push_back(host_inputs[(*group)[k]]);
      if ((*group)[k] == d) me = static_cast<int>(k);
    }
    const Array& got = (*out)[0].shards[d];
    Array want = Reference(c, xs, me, got.shape(), perm);
    ASSERT_EQ(got.shape(), want.shape()) << "device " << d;
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      ASSERT_EQ(ElemBits(got, i), ElemBits(want, i))
          << "device " << d << " index " << i << ": got bits " << ElemBits(got, i) << ", want "
          << ElemBits(want, i);
    }
  }
}

// All the variants for a group of size n, with shapes that fit them.
void CheckAll(Mesh& mesh, const AxisNames& axes) {
  const int n = static_cast<int>(mesh.Group(0, axes)->size());
  for (DType t : {DType::kF32, DType::kBF16, DType::kI32, DType::kU32}) {
    CheckCollective(mesh, axes, {CollectiveKind::kPsum}, t, {3, 5});
    CheckCollective(mesh, axes, {CollectiveKind::kPmean}, t, {7});
    CheckCollective(mesh, axes, {CollectiveKind::kPpermute}, t, {2, 3});
    for (int axis : {0, 1, 2}) CheckCollective(mesh, axes, {CollectiveKind::kAllGather, axis}, t, {2, 3});
    for (int axis : {0, 1}) CheckCollective(mesh, axes, {CollectiveKind::kAllGather, axis, 0, true}, t, {2, 3});
    CheckCollective(mesh, axes, {CollectiveKind::kPsumScatter, 0}, t, {n, 3});
    CheckCollective(mesh, axes, {CollectiveKind::kPsumScatter, 1}, t, {2, n, 3});
    CheckCollective(mesh, axes, {CollectiveKind::kPsumScatter, 1, 0, true}, t, {3, 2 * n});
    for (int split : {0, 1, 2})
      for (int concat : {0, 1, 2}) {
        Shape s = {2, 3, 4};
        s[split] = n;
        CheckCollective(mesh, axes, {CollectiveKind::kAllToAll, split, concat}, t, s);
        s[split] = 2 * n;
        CheckCollective(mesh, axes, {CollectiveKind::kAllToAll, split, concat, true}, t, s);
      }
  }
}

class OneAxisTest : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(OneAxisTest, EveryCollectiveEqualsSerial) {
  std::vector<int> dims = GetParam();
  int n = 1;
  for (int d : dims) n *= d;
  auto mesh = MakeMesh(V5eChip(), dims, "data=" + std::to_string(n));
  CheckAll(*mesh, {"data"});
}

INSTANTIATE_TEST_SUITE_P(Devices1248, OneAxisTest,
                         ::testing::Values(std::vector<int>{1}, std::vector<int>{2},
                                           std::vector<int>{2, 2}, std::vector<int>{2, 4}));

TEST(TwoAxisTest, EveryCollectiveOverEachAxisAndBoth) {
  auto mesh = MakeMesh(V5eChip(), {2, 4}, "x=2,y=4");
  CheckAll(*mesh, {"x"});
  CheckAll(*mesh, {"y"});
  CheckAll(*mesh, {"x", "y"});
  CheckAll(*mesh, {"y", "x"});
}

TEST(TwoAxisTest, V2CoresAsDevices) {
  // A v2-8: 4 chips of 2 cores, 8 devices.
  auto mesh = MakeMesh(V2Chip(), {2, 2}, "a=4,b=2");
  ASSERT_EQ(mesh->num_devices(), 8);
  CheckAll(*mesh, {"b"});
  CheckAll(*mesh, {"a", "b"});
}

TEST(ShapesTest, TiledAndUntiledOutputShapes) {
  auto mesh = MakeMesh(V5eChip(), {2, 2}, "data=4");
  Array x = Array::Host(DType::kF32, {4, 8});
  auto in = mesh->Replicate(x);
  ASSERT_TRUE(in.ok());
  auto out = mesh->Pmap(
      [](DeviceContext& ctx, std::span<const Array> a) -> StatusOr<std::vector<Array>> {
        std::vector<Array> r;
        TPUMESH_ASSIGN_OR_RETURN(Array x, a[0].CopyTo(&ctx.device()));
        TPUMESH_ASSIGN_OR_RETURN(Array g0, ctx.AllGather(x, {"data"}, 0, false));
        TPUMESH_ASSIGN_OR_RETURN(Array g1, ctx.AllGather(x, {"data"}, 1, true));
        TPUMESH_ASSIGN_OR_RETURN(Array s0, ctx.PsumScatter(x, {"data"}, 0, false));
        TPUMESH_ASSIGN_OR_RETURN(Array s1, ctx.PsumScatter(x, {"data"}, 1, true));
        TPUMESH_ASSIGN_OR_RETURN(Array t0, ctx.AllToAll(x, {"data"}, 0, 1, false));
        TPUMESH_ASSIGN_OR_RETURN(Array t1, ctx.AllToAll(x, {"data"}, 0, 1, true));
        return std::vector<Array>{g0, g1, s0, s1, t0, t1};
      },
      std::span<const DistributedArray>(&*in, 1));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // As jax.lax with axis size 4 on an f32[4,8] input.
  EXPECT_EQ((*out)[0].shards[0].shape(), (Shape{4, 4, 8}));  // all_gather axis=0
  EXPECT_EQ((*out)[1].shards[0].shape(), (Shape{4, 32}));    // all_gather axis=1 tiled
  EXPECT_EQ((*out)[2].shards[0].shape(), (Shape{8}));        // psum_scatter dim 0
  EXPECT_EQ((*out)[3].shards[0].shape(), (Shape{4, 2}));     // psum_scatter dim 1 tiled
  EXPECT_EQ((*out)[4].shards[0].shape(), (Shape{8, 4}));     // all_to_all 0->1
  EXPECT_EQ((*out)[5].shards[0].shape(), (Shape{1, 32}));    // all_to_all 0->1 tiled
}

// Runs `body` as a pmap on a 2x4 v5e mesh with one f32[4,8] argument per
// device and returns pmap's status.
Status RunPmap(const std::function<StatusOr<std::vector<Array>>(DeviceContext&, const Array&)>& body) {
  auto mesh = MakeMesh(V5eChip(), {2, 4}, "x=2,y=4");
  DistributedArray in;
  for (int d = 0; d < mesh->num_devices(); ++d)
    in.shards.push_back(*Array::Allocate(mesh->device(d), DType::kF32, {4, 8}));
  auto out = mesh->Pmap(
      [&](DeviceContext& ctx, std::span<const Array> a) { return body(ctx, a[0]); },
      std::span<const DistributedArray>(&in, 1));
  return out.status();
}

StatusOr<std::vector<Array>> Wrap(StatusOr<Array> a) {
  if (!a.ok()) return a.status();
  return std::vector<Array>{*a};
}

TEST(ErrorsTest, BadShapesAndAxes) {
  struct Bad {
    std::function<StatusOr<Array>(DeviceContext&, const Array&)> call;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {[](DeviceContext& c, const Array& x) { return c.Psum(x, {"z"}); }, "unknown mesh axis 'z'"},
      {[](DeviceContext& c, const Array& x) { return c.Psum(x, {"x", "x"}); }, "named twice"},
      {[](DeviceContext& c, const Array& x) { return c.AllGather(x, {"y"}, 3); }, "axis must be in 0..2"},
      {[](DeviceContext& c, const Array& x) { return c.AllGather(x, {"y"}, 2, true); }, "existing dimension"},
      {[](DeviceContext& c, const Array& x) { return c.PsumScatter(x, {"x"}, 1); },
       "has size 8 but untiled psum_scatter needs the group size 2"},
      {[](DeviceContext& c, const Array& x) { return c.PsumScatter(x, {"x", "y"}, 0, true); },
       "not divisible by the group size 8"},
      {[](DeviceContext& c, const Array& x) { return c.Ppermute(x, {"y"}, {{0, 1}, {2, 1}}); },
       "destination 1 appears twice"},
      {[](DeviceContext& c, const Array& x) { return c.Ppermute(x, {"y"}, {{0, 4}}); }, "out of range"},
      {[](DeviceContext& c, const Array& x) { return c.AllToAll(x, {"x", "y"}, 0, 1, true); },
       "split_axis size 4 is not divisible by the group size 8"},
      {[](DeviceContext& c, const Array& x) { return c.AllToAll(x, {"y"}, 1, 0); },
       "untiled all_to_all needs the group size 4"},
  };
  for (const auto& bad : cases) {
    Status s = RunPmap([&](DeviceContext& ctx, const Array& x) { return Wrap(bad.call(ctx, x)); });
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(bad.message));
  }
}

TEST(ErrorsTest, DeviceThatSkipsACollectiveFailsAllNeverHangs) {
  Status s = RunPmap([](DeviceContext& ctx, const Array& x) -> StatusOr<std::vector<Array>> {
    if (ctx.device_id() == 5) return std::vector<Array>{x};
    return Wrap(ctx.Psum(x, {"y"}));
  });
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("device 5 returned from the pmapped function without entering "
                                     "collective #0 (psum over ('y')"));
}

TEST(ErrorsTest, SkippingALaterCollective) {
  Status s = RunPmap([](DeviceContext& ctx, const Array& x) -> StatusOr<std::vector<Array>> {
    TPUMESH_ASSIGN_OR_RETURN(Array a, ctx.Psum(x, {"x"}));
    if (ctx.device_id() == 0) return std::vector<Array>{a};
    return Wrap(ctx.AllGather(a, {"x", "y"}));
  });
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("device 0 returned from the pmapped function without entering collective #1"));
}

TEST(ErrorsTest, MismatchedCollectivesFail) {
  Status s = RunPmap([](DeviceContext& ctx, const Array& x) -> StatusOr<std::vector<Array>> {
    if (ctx.device_id() == 3) return Wrap(ctx.AllGather(x, {"y"}));
    return Wrap(ctx.Psum(x, {"y"}));
  });
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("does not match across devices"));
  EXPECT_THAT(s.message(), HasSubstr("all_gather over ('y')"));

  Status shape = RunPmap([](DeviceContext& ctx, const Array& x) -> StatusOr<std::vector<Array>> {
    if (ctx.device_id() == 6) {
      TPUMESH_ASSIGN_OR_RETURN(Array r, x.Reshape({8, 4}));
      return Wrap(ctx.Psum(r, {"x"}));
    }
    return Wrap(ctx.Psum(x, {"x"}));
  });
  EXPECT_EQ(shape.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(shape.message(), HasSubstr("f32[8,4]"));
}

TEST(ErrorsTest, DeviceErrorIsReportedAsTheCause) {
  Status s = RunPmap([](DeviceContext& ctx, const Array& x) -> StatusOr<std::vector<Array>> {
    if (ctx.device_id() == 2) return InvalidArgumentError("bad prompt");
    return Wrap(ctx.Psum(x, {"x", "y"}));
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "pmap: device 2: bad prompt");
}

TEST(ErrorsTest, CollectiveOutsidePmap) {
  auto mesh = MakeMesh(V5eChip(), {2}, "data=2");
  Array x = *Array::Allocate(mesh->device(0), DType::kF32, {2});
  DeviceContext ctx(*mesh, 0, nullptr);
  EXPECT_EQ(ctx.Psum(x, {"data"}).status().code(), StatusCode::kFailedPrecondition);
}

TEST(ClockTest, CollectiveEndsAtTheLatestArrivalPlusModelledTime) {
  auto mesh = MakeMesh(V5eChip(), {2, 4}, "data=8");
  DistributedArray in;
  for (int d = 0; d < 8; ++d) in.shards.push_back(*Array::Allocate(mesh->device(d), DType::kF32, {1024}));
  auto out = mesh->Pmap(
      [](DeviceContext& ctx, std::span<const Array> a) -> StatusOr<std::vector<Array>> {
        ctx.device().AdvanceClock(1e-3 * ctx.device_id());  // device 7 is the last to arrive
        return Wrap(ctx.Psum(a[0], {"data"}));
      },
      std::span<const DistributedArray>(&in, 1));
  ASSERT_TRUE(out.ok());
  std::vector<int> group = {0, 1, 2, 3, 4, 5, 6, 7};
  const double t = ModelCollective(mesh->chip(), mesh->topology(), CollectiveKind::kPsum, group, 4096).seconds;
  EXPECT_GT(t, 0);
  for (int d = 0; d < 8; ++d) {
    EXPECT_DOUBLE_EQ(mesh->device(d).clock_seconds(), 7e-3 + t) << "device " << d;
    EXPECT_GT(mesh->device(d).ici_bytes_sent(), 0);
  }
}

}  // namespace
}  // namespace tpumesh::mesh

namespace tpumesh::mesh {
namespace {

TEST(ErrorsTest, DeviceOutOfHbmInACollectiveIsTheReportedCause) {
  auto mesh = MakeMesh(V5eChip(), {2, 2}, "data=4");
  DistributedArray in;
  for (int d = 0; d < 4; ++d) in.shards.push_back(*Array::Allocate(mesh->device(d), DType::kF32, {1024}));
  mesh->device(2).set_hbm_capacity(mesh->device(2).hbm_in_use() + 100);
  auto out = mesh->Pmap(
      [](DeviceContext& ctx, std::span<const Array> a) -> StatusOr<std::vector<Array>> {
        return Wrap(ctx.AllGather(a[0], {"data"}));
      },
      std::span<const DistributedArray>(&in, 1));
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted) << out.status().ToString();
  EXPECT_THAT(out.status().message(), HasSubstr("pmap: device 2: device 2 (TPU v5 lite (emulated)) out of HBM: all_gather f32[4,1024] asks for 16384 bytes"));
}

}  // namespace
}  // namespace tpumesh::mesh
