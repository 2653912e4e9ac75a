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
  text.replace(text.find("stablehlo.add"), 13, "stablehlo.cholesky");
  const std::string p = Write("chol.mlir", text);
  const std::string out = Dir() + "/chol.out.h5";
  ExpectRefused(RunTpumesh("run " + p + " --outputs " + out), out, p + ":3:10: unsupported op 'stablehlo.cholesky'");
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
