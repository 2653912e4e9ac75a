// hlo/run.h RunModule: the run `tpumesh run`, `simulate --stablehlo` and
// tpumesh.stablehlo share: computed with its report, priced alone in a dry
// run, and refused on a mesh of the wrong size.
#include "hlo/run.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpumesh::hlo {
namespace {

using ::testing::HasSubstr;

Module Add() {
  auto m = ParseModule(R"(func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.add %a, %b : tensor<8xf32>
  return %0 : tensor<8xf32>
})",
                       "add.mlir");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(m).value();
}

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v(8);
  std::memcpy(v.data(), t.data.raw(), sizeof(float) * v.size());
  return v;
}

TEST(RunModuleTest, ComputesAndReports) {
  const Module m = Add();
  RunOptions o;
  o.program = "add.mlir";
  o.keep_ops = true;
  std::vector<Tensor> given;
  auto inputs = [&given](const Layout& layout) -> StatusOr<std::vector<Tensor>> {
    given = RandomInputs(layout, 7);
    return RandomInputs(layout, 7);
  };
  auto r = RunModule(m, o, inputs);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->run.outputs.size(), 1u);
  const std::vector<float> a = Floats(given[0]), b = Floats(given[1]), sum = Floats(r->run.outputs[0]);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(sum[i], a[i] + b[i]);
  EXPECT_EQ(r->report.mode, "run");
  EXPECT_EQ(r->report.devices, 1);
  ASSERT_EQ(r->report.logs.size(), 1u);
  EXPECT_FALSE(r->report.logs[0].ops().empty());  // keep_ops
  EXPECT_EQ(r->report.info.at("program"), "add.mlir");
  EXPECT_EQ(r->report.info.at("layout"), r->layout.Describe());
  EXPECT_EQ(r->report.info.at("matmul_arithmetic"), "f32 (as XLA on a CPU)");
  EXPECT_EQ(r->report.hbm_peak_bytes.size(), 1u);
}

TEST(RunModuleTest, DryRunPricesWithoutInputs) {
  RunOptions o;
  o.program = "add.mlir";
  o.dry_run = true;
  bool asked = false;
  auto r = RunModule(Add(), o, [&asked](const Layout&) -> StatusOr<std::vector<Tensor>> {
    asked = true;
    return InternalError("not asked in a dry run");
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(asked);
  EXPECT_TRUE(r->run.outputs.empty());
  EXPECT_EQ(r->report.mode, "simulate");
  EXPECT_TRUE(r->report.hbm_peak_bytes.empty());
  EXPECT_GT(r->report.modelled_seconds(), 0);
}

TEST(RunModuleTest, RefusesAMeshOfAnotherSize) {
  RunOptions o;
  o.program = "add.mlir";
  o.mesh.devices = 2;
  auto r = RunModule(Add(), o, [](const Layout& l) -> StatusOr<std::vector<Tensor>> { return RandomInputs(l, 0); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("add.mlir runs on 1 device(s)"));
  EXPECT_THAT(r.status().message(), HasSubstr("the device flags give 2"));
}

}  // namespace
}  // namespace tpumesh::hlo
