// `tpumesh run` and `simulate --stablehlo` as a user meets them: a module
// JAX exported runs and its outputs and reports are written; bad modules and
// bad inputs (truncated text, an unknown op, a shape that does not match, an
// input of the wrong dtype, a type of 10^12 elements) are one line naming
// the file and place, a non-zero exit, and nothing written.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/h5io.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using tpumesh::testing::CliResult;
using tpumesh::testing::RunTpumesh;

const std::string kData = std::string(TPUMESH_SOURCE_DIR) + "/tests/data/stablehlo/jax-0.4.38/";

std::string Dir() {
  const std::string d = tpumesh::testing::TestTempDir() + "/run_cli";
  fs::create_directories(d);
  return d;
}

std::string Write(const std::string& name, const std::string& bytes) {
  const std::string path = Dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One "tpumesh: error:" line, exit 1, and `out` not created.
void ExpectRefused(const CliResult& r, const std::string& out, const std::string& where) {
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, StartsWith("tpumesh: error: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(where));
  EXPECT_FALSE(fs::exists(out)) << out;
}

constexpr char kAdd[] =
    "module @m {\n"
    "  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {\n"
    "    %0 = stablehlo.add %arg0, %arg1 : tensor<4xf32>\n"
    "    return %0 : tensor<4xf32>\n"
    "  }\n"
    "}\n";

TEST(RunCli, RunsAnExportedModuleAndWritesEverything) {
  const std::string out = Dir() + "/dot.out.h5", csv = Dir() + "/dot.csv";
  const CliResult r = RunTpumesh("run " + kData + "dot.mlir --inputs " + kData + "dot.h5 --outputs " + out +
                                 " --report-csv " + csv);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ran "));
  EXPECT_THAT(r.out, HasSubstr("wrote " + out));
  auto want = tpumesh::pipeline::H5ReadRaw(kData + "dot.h5", "output_0");
  auto got = tpumesh::pipeline::H5ReadRaw(out, "output_0");
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(want->dims, got->dims);
  EXPECT_THAT(Read(csv), HasSubstr("dot_general"));
}

TEST(RunCli, PmapModuleRunsOnItsEightDevicesWithRandomInputs) {
  const std::string out = Dir() + "/psum.out.h5";
  const CliResult r = RunTpumesh("run " + kData + "pmap_psum.mlir --outputs " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pmap over 8 replicas"));
  auto got = tpumesh::pipeline::H5ReadRaw(out, "output_0");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->dims, (std::vector<int64_t>{8, 4, 6}));
}

TEST(RunCli, SimulatePricesWithoutInputs) {
  const CliResult r = RunTpumesh("simulate --stablehlo " + kData + "tiny_unet.mlir");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("priced "));
  EXPECT_THAT(r.out, HasSubstr("conv"));
}

TEST(RunCli, TruncatedModuleNamesTheFileAndLine) {
  const std::string text = Read(kData + "conv.mlir");
  const std::string p = Write("trunc.mlir", text.substr(0, text.size() / 2));
  const std::string out = Dir() + "/trunc.out.h5";
  ExpectRefused(RunTpumesh("run " + p + " --outputs " + out), out, p + ":");
}

TEST(RunCli, UnknownOpIsRefusedBeforeAnythingRuns) {
  std::string text = kAdd;
  text.replace(text.find("stablehlo.add"), 13, "stablehlo.einsum");
  const std::string p = Write("einsum.mlir", text);
  const std::string out = Dir() + "/einsum.out.h5";
  ExpectRefused(RunTpumesh("run " + p + " --outputs " + out), out, p + ":3:10: unsupported op 'stablehlo.einsum'");
}

TEST(RunCli, ShapeMismatchNamesTheOp) {
  const std::string p = Write("shape.mlir",
                              "func.func @main(%a: tensor<4xf32>, %b: tensor<5xf32>) -> tensor<4xf32> {\n"
                              "  %0 = \"stablehlo.add\"(%a, %b) : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>\n"
                              "  return %0 : tensor<4xf32>\n"
                              "}\n");
  const std::string out = Dir() + "/shape.out.h5";
  ExpectRefused(RunTpumesh("run " + p + " --outputs " + out), out, p + ":2:8: stablehlo.add: operand 1");
}

TEST(RunCli, HugeTensorTypeIsRefusedWhileReading) {
  const std::string p = Write("huge.mlir",
                              "func.func @main(%a: tensor<1000000x1000000x1000xf32>) -> tensor<1000000x1000000x1000xf32> {\n"
                              "  return %a : tensor<1000000x1000000x1000xf32>\n"
                              "}\n");
  const std::string out = Dir() + "/huge.out.h5";
  ExpectRefused(RunTpumesh("run " + p + " --outputs " + out), out, p + ":1:");
  const CliResult s = RunTpumesh("simulate --stablehlo " + p);
  EXPECT_EQ(s.code, 1);
  EXPECT_THAT(s.err, HasSubstr("2^40"));
}

TEST(RunCli, InputOfTheWrongDtypeIsRefused) {
  const std::string p = Write("int.mlir",
                              "func.func @main(%a: tensor<4xi32>) -> tensor<4xi32> {\n"
                              "  return %a : tensor<4xi32>\n"
                              "}\n");
  auto w = tpumesh::pipeline::H5Writer::Create(Dir() + "/f32.h5");
  ASSERT_TRUE(w.ok());
  tpumesh::pipeline::H5Raw raw;
  raw.cls = 'f';
  raw.width = 4;
  raw.dims = {4};
  raw.data.assign(16, 0);
  ASSERT_TRUE((*w)->WriteRaw("input_0", raw).ok());
  ASSERT_TRUE((*w)->Commit().ok());
  const std::string out = Dir() + "/int.out.h5";
  ExpectRefused(RunTpumesh("run " + p + " --inputs " + Dir() + "/f32.h5 --outputs " + out), out,
                "dataset 'input_0' holds f32 but @main's argument 0 is tensor<4xi32>");
}

TEST(RunCli, ExistingOutputIsKeptWhenTheRunFails) {
  const std::string p = Write("bad.mlir", "func.func @main( {\n");
  const std::string out = Write("keep.h5", "precious");
  const CliResult r = RunTpumesh("run " + p + " --outputs " + out);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(Read(out), "precious");
}

TEST(RunCli, ListOpsPrintsTheTable) {
  const CliResult r = RunTpumesh("run --list-ops");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("| `stablehlo.dot_general` | matmul |"));
  // The table in docs/stablehlo.md is this one.
  EXPECT_THAT(Read(std::string(TPUMESH_SOURCE_DIR) + "/docs/stablehlo.md"), HasSubstr(r.out));
}

}  // namespace

// Issues 40 and 42: simulate --stablehlo prices every op or fails naming
// it, bounds its work, and warns once per loop it cannot count; run refuses
// what it cannot compute before anything runs.
namespace issue40 {

const std::string kCurrent = std::string(TPUMESH_SOURCE_DIR) + "/tests/data/stablehlo/jax-current/";

// The FLOPs of simulate's "priced ..." line.
double PricedFlops(const std::string& out) {
  const size_t at = out.find(" FLOPs per device");
  if (at == std::string::npos) return -1;
  size_t from = out.rfind(", ", at);
  return std::strtod(out.substr(from + 2, at - from - 2).c_str(), nullptr);
}

// The kernel gradients of a depthwise convolution (batch_group_count 2 and
// 8) are priced, not dropped: 162,208 FLOPs (XLA's lowered count 162,206);
// they were dropped with exit 0 (136,512).
TEST(RunCli, SimulatePricesConvolutionsWithBatchGroups) {
  const CliResult r = RunTpumesh("simulate --stablehlo " + kCurrent + "cnn_train_step.mlir");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NEAR(PricedFlops(r.out), 162206, 162206 * 0.01) << r.out;
}

// run cannot compute batch groups yet: refused before anything runs, in
// one line naming the op's place, without a "pmap: device 0:" prefix.
TEST(RunCli, RunRefusesAComplexConvolutionBeforeAnythingRuns) {
  // Running the iota first would ask for 3.6 TiB: the refusal must come
  // from the whole-module check before it.
  const std::string p = Write(
      "conv_c64.mlir",
      "func.func @main(%x: tensor<1x4x4x2xcomplex<f32>>, %w: tensor<3x3x2x2xcomplex<f32>>) -> "
      "tensor<1x2x2x2xcomplex<f32>> {\n"
      "  %big = stablehlo.iota dim = 0 : tensor<1000000000000xf32>\n"
      "  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], "
      "window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : "
      "(tensor<1x4x4x2xcomplex<f32>>, tensor<3x3x2x2xcomplex<f32>>) -> tensor<1x2x2x2xcomplex<f32>>\n"
      "  return %0 : tensor<1x2x2x2xcomplex<f32>>\n"
      "}\n");
  const std::string out = Dir() + "/conv_c64.h5";
  const CliResult r = RunTpumesh("run " + p + " --outputs " + out);
  ExpectRefused(r, out, p + ":3:8: stablehlo.convolution: complex convolution is not computed");
  EXPECT_EQ(r.err.find("pmap"), std::string::npos) << r.err;
}

// A loop whose trip count depends on the inputs: one warning line naming
// it, priced as one trip; with --inputs, its real trips.
TEST(RunCli, SimulateWarnsOnceForEachDataDependentLoop) {
  const CliResult r = RunTpumesh("simulate --stablehlo " + kCurrent + "while_dynamic.mlir");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("while_dynamic.mlir:10:12: stablehlo.while: its trip count depends on the inputs; "
                               "priced as one trip"));
  EXPECT_THAT(r.err, HasSubstr("while_dynamic.mlir:26:12: stablehlo.while"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
  const CliResult real = RunTpumesh("simulate --stablehlo " + kCurrent + "while_dynamic.mlir --inputs " + kCurrent +
                                    "while_dynamic.h5");
  ASSERT_EQ(real.code, 0) << real.err;
  EXPECT_EQ(real.err, "");
  EXPECT_GT(PricedFlops(real.out), PricedFlops(r.out)) << real.out;
}

// A loop that never ends over small values, which a dry run computes (a
// 64x64 matmul each trip): the work a dry run computes is bounded
// (kDryRunComputeWork), then the loop is priced by the trips so far with
// one warning saying why, in about a second, not after a million ops.
TEST(RunCli, SimulateBoundsTheSmallValuesItComputes) {
  const std::string p = Write(
      "small_endless.mlir",
      "func.func @main(%a: tensor<64x64xf32>) -> tensor<64x64xf32> {\n"
      "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
      "  %0:2 = stablehlo.while(%i = %c0, %x = %a) : tensor<i32>, tensor<64x64xf32>\n"
      "  cond {\n"
      "    %m = stablehlo.constant dense<-1> : tensor<i32>\n"
      "    %t = stablehlo.compare GT, %i, %m, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
      "    stablehlo.return %t : tensor<i1>\n"
      "  } do {\n"
      "    %z = stablehlo.constant dense<0> : tensor<i32>\n"
      "    %j = stablehlo.multiply %i, %z : tensor<i32>\n"
      "    %y = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : "
      "(tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n"
      "    stablehlo.return %j, %y : tensor<i32>, tensor<64x64xf32>\n"
      "  }\n"
      "  return %0#1 : tensor<64x64xf32>\n"
      "}\n");
  const CliResult r = RunTpumesh("simulate --stablehlo " + p);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr(p + ":3:10: stablehlo.while: its trip count needs more values computed than a dry run "
                               "computes (2^28 element steps); priced as "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

constexpr char kCounted[] =
    "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
    "  %0:2 = stablehlo.while(%i = %c0, %a = %x) : tensor<i32>, tensor<4xf32>\n"
    "  cond {\n"
    "    %n = stablehlo.constant dense<2000000> : tensor<i32>\n"
    "    %t = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
    "    stablehlo.return %t : tensor<i1>\n"
    "  } do {\n"
    "    %one = stablehlo.constant dense<1> : tensor<i32>\n"
    "    %j = stablehlo.add %i, %one : tensor<i32>\n"
    "    %s = stablehlo.add %a, %a : tensor<4xf32>\n"
    "    stablehlo.return %j, %s : tensor<i32>, tensor<4xf32>\n"
    "  }\n"
    "  return %0#1 : tensor<4xf32>\n"
    "}\n";

// A counted loop (fori_loop) of 2 million trips is priced in well under a
// second, for every trip: 2e6 x (compare, counter add, 4-element add) ops,
// plus the last compare; 2e6 x 6 + 1 FLOPs. It hit the 2^32-op bound after
// hours, growing ~200 MB/s.
TEST(RunCli, SimulatePricesACountedLoopByItsTripCount) {
  const std::string p = Write("counted.mlir", kCounted);
  const CliResult r = RunTpumesh("simulate --stablehlo " + p);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("6000001 ops priced on device 0"));
  EXPECT_NEAR(PricedFlops(r.out), 2e6 * 6 + 1, 1e4) << r.out;
}

// An endless loop ends at the dry run's bound with one line naming the op.
TEST(RunCli, SimulateOfAnEndlessLoopEndsAtItsBound) {
  const std::string p = Write("endless.mlir",
                              "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                              "  %0 = stablehlo.while(%a = %x) : tensor<4xf32>\n"
                              "  cond {\n"
                              "    %t = stablehlo.constant dense<true> : tensor<i1>\n"
                              "    stablehlo.return %t : tensor<i1>\n"
                              "  } do {\n"
                              "    %s = stablehlo.add %a, %a : tensor<4xf32>\n"
                              "    stablehlo.return %s : tensor<4xf32>\n"
                              "  }\n"
                              "  return %0 : tensor<4xf32>\n"
                              "}\n");
  const CliResult r = RunTpumesh("simulate --stablehlo " + p);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("endless.mlir:7:10: stablehlo.add: more than 1048576 ops executed"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

constexpr char kHugeWindow[] =
    "func.func @main(%x: tensor<4xf32>) -> tensor<2xf32> {\n"
    "  %one = stablehlo.constant dense<1.0> : tensor<f32>\n"
    "  %0 = \"stablehlo.reduce_window\"(%x, %one) <{window_dimensions = array<i64: 1000000000000>, "
    "padding = dense<[[0, 999999999997]]> : tensor<1x2xi64>}> ({\n"
    "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
    "    %s = stablehlo.add %a, %b : tensor<f32>\n"
    "    stablehlo.return %s : tensor<f32>\n"
    "  }) : (tensor<4xf32>, tensor<f32>) -> tensor<2xf32>\n"
    "  return %0 : tensor<2xf32>\n"
    "}\n";

// A 10^12-element window over padding: simulate prices it from the
// window's size (2 x 10^12 adds) without folding it; run refuses it
// before anything runs (it ran for hours).
TEST(RunCli, HugeWindowIsPricedBySimulateAndRefusedByRun) {
  const std::string p = Write("window.mlir", kHugeWindow);
  const CliResult s = RunTpumesh("simulate --stablehlo " + p);
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(PricedFlops(s.out), 2e12) << s.out;
  const std::string out = Dir() + "/window.h5";
  ExpectRefused(RunTpumesh("run " + p + " --outputs " + out), out,
                p + ":3:8: stablehlo.reduce_window: its window folds 2e+12 values, more than the 4294967296");
}

// A collective_permute naming a device outside the mesh: simulate refuses
// it as run does (it was priced).
TEST(RunCli, SimulateRefusesCollectivesOutsideTheMesh) {
  const std::string p = Write("permute.mlir",
                              "module @m attributes {mhlo.num_replicas = 2 : i32} {\n"
                              "  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                              "    %0 = \"stablehlo.collective_permute\"(%x) <{source_target_pairs = dense<[[0, 5]]> : "
                              "tensor<1x2xi64>}> : (tensor<4xf32>) -> tensor<4xf32>\n"
                              "    return %0 : tensor<4xf32>\n"
                              "  }\n"
                              "}\n");
  const CliResult r = RunTpumesh("simulate --stablehlo " + p);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("source_target_pairs names device 5 of a mesh of 2"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace issue40

namespace issue40 {

// A scatter the interpreter cannot compute (a slice scattered with a 1-D
// index vector and no scatter dims), inside a while body, after an op that
// would take 4 TB: refused by the whole-module check before anything runs,
// naming the scatter (run reached it only after computing what came first).
TEST(RunCli, UnsupportedScatterInALoopIsRefusedBeforeAnythingRuns) {
  const std::string p = Write(
      "scatter.mlir",
      "func.func @main(%x: tensor<6x7xf32>, %i: tensor<2xi32>, %u: tensor<3x9xf32>) -> tensor<6x7xf32> {\n"
      "  %big = stablehlo.iota dim = 0 : tensor<1000000000000xf32>\n"
      "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
      "  %0:2 = stablehlo.while(%k = %c0, %a = %x) : tensor<i32>, tensor<6x7xf32>\n"
      "  cond {\n"
      "    %n = stablehlo.constant dense<3> : tensor<i32>\n"
      "    %t = stablehlo.compare LT, %k, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
      "    stablehlo.return %t : tensor<i1>\n"
      "  } do {\n"
      "    %s = \"stablehlo.scatter\"(%a, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<"
      "update_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1]>}> ({\n"
      "    ^bb0(%p: tensor<f32>, %q: tensor<f32>):\n"
      "      %r = stablehlo.add %p, %q : tensor<f32>\n"
      "      stablehlo.return %r : tensor<f32>\n"
      "    }) : (tensor<6x7xf32>, tensor<2xi32>, tensor<3x9xf32>) -> tensor<6x7xf32>\n"
      "    %one = stablehlo.constant dense<1> : tensor<i32>\n"
      "    %k1 = stablehlo.add %k, %one : tensor<i32>\n"
      "    stablehlo.return %k1, %s : tensor<i32>, tensor<6x7xf32>\n"
      "  }\n"
      "  return %0#1 : tensor<6x7xf32>\n"
      "}\n");
  const std::string out = Dir() + "/scatter.h5";
  const CliResult r = RunTpumesh("run " + p + " --outputs " + out);
  ExpectRefused(r, out, p + ":10:10: stablehlo.scatter: the update window is larger than the operand along dimension 1");
  EXPECT_EQ(r.err.find("pmap"), std::string::npos) << r.err;
}

}  // namespace issue40

namespace issue40 {

// The trace of a 2-million-trip loop: one event per op of its body, each as
// long as all its calls (the next starts where it ends), with their count.
TEST(RunCli, TraceOfALoopHasOneEventPerOpForAllItsCalls) {
  const std::string p = Write("counted_trace.mlir", kCounted);
  const std::string trace = Dir() + "/loop_trace.json";
  const CliResult r = RunTpumesh("simulate --stablehlo " + p + " --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string t = Read(trace);
  EXPECT_THAT(t, HasSubstr("\"calls\":2000001.0"));  // the compares, the last one included
  EXPECT_THAT(t, HasSubstr("\"calls\":2000000.0"));
  EXPECT_LT(t.size(), size_t{1} << 16);
}

}  // namespace issue40
