// simulate --workload and --chip as a user meets them (issue 28): hostile
// workloads and chip files give one "tpumesh: error:" line or whole outputs,
// small files give bounded work, and figures at the documented limits stay
// finite with utilisation at most 100%.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using tpumesh::testing::CliResult;
using tpumesh::testing::RunTpumesh;

std::string Write(const std::string& name, const std::string& bytes) {
  const std::string path = tpumesh::testing::TestTempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One "tpumesh: error: ..." line holding `what`, and exit `code`.
void ExpectOneLineError(const CliResult& r, const std::string& what, int code = 1) {
  EXPECT_EQ(r.code, code) << r.err;
  EXPECT_THAT(r.err, HasSubstr(what));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// A run bounded to 1 GiB of address space (not under AddressSanitizer) and
// 60 s of CPU: a run that
// would take more fails (exit code -1 or 1) instead of swapping or hanging
// the host. The work these tests give takes well under a second.
CliResult RunBounded(const std::string& args) {
  return RunTpumesh("--version >/dev/null; " + tpumesh::testing::AddressSpaceLimit(1048576) + "ulimit -t 60; exec " +
                    std::string(TPUMESH_BIN) + " " + args);
}

// Every "N%" the run printed is at most 100 and no figure is inf or nan.
void ExpectSaneFigures(const std::string& out) {
  EXPECT_THAT(out, Not(HasSubstr("inf")));
  EXPECT_THAT(out, Not(HasSubstr("nan")));
  for (size_t at = out.find('%'); at != std::string::npos; at = out.find('%', at + 1)) {
    size_t from = at;
    while (from > 0 && (std::isdigit(static_cast<unsigned char>(out[from - 1])) || out[from - 1] == '.')) --from;
    if (from == at) continue;
    EXPECT_LE(std::strtod(out.substr(from, at - from).c_str(), nullptr), 100.0) << out;
  }
}

std::string ChipWith(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json c = nlohmann::json::parse(Read(std::string(TPUMESH_SOURCE_DIR) + "/docs/examples/custom_chip.json"));
  edit(c);
  return Write(name, c.dump());
}

// 200,000 arrays deep in one field: the message once dumped the value and
// overflowed the stack (SIGSEGV, no message).
TEST(SimulateCliTest, DeeplyNestedWorkloadAndChipAreOneLine) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  ExpectOneLineError(RunTpumesh("simulate --workload " +
                                Write("w.json", "{\"layers\":[{\"name\":\"a\",\"op\":\"matmul\",\"m\":" + deep +
                                                    ",\"n\":1,\"k\":1}]}")),
                     "field 'm' is an array");
  ExpectOneLineError(RunTpumesh("devices --chip " + Write("c.json", "{\"name\":" + deep + "}")), "c.json");
}

// A layer name that is not UTF-8 reaches the report, the trace and the CSV
// as U+FFFD (the report's JSON dump once threw: "unexpected failure:
// [json.exception...]"); a name with a newline is one line in an error.
TEST(SimulateCliTest, NamesThatAreNotUtf8AreReplacedInEveryOutput) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string w = Write("w.csv", "Layer, M, N, K,\nfc\xff\x01, 64, 64, 64,\n");
  const CliResult r = RunTpumesh("simulate --workload " + w + " --report " + dir + "/r.json --report-csv " + dir +
                                 "/r.csv --trace " + dir + "/t.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NO_THROW(nlohmann::json::parse(Read(dir + "/r.json")));
  EXPECT_NO_THROW(nlohmann::json::parse(Read(dir + "/t.json")));
  const std::string csv = Read(dir + "/r.csv");
  EXPECT_EQ(csv.find('\xff'), std::string::npos);
  EXPECT_THAT(csv, HasSubstr("fc\xEF\xBF\xBD"));
  ExpectOneLineError(
      RunTpumesh("simulate --workload " +
                 Write("n.json", "{\"layers\":[{\"name\":\"fc\\nsecond line\",\"op\":\"matmul\",\"m\":0,\"n\":8,\"k\":8}]}")),
      "field 'm' is 0");
}

// A UTF-8 BOM and CRLF line ends, as spreadsheet programs save a CSV (the
// BOM was refused as an unknown header).
TEST(SimulateCliTest, BomAndCrlfWorkloadsAreRead) {
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"bom.csv", "\xEF\xBB\xBFLayer, M, N, K,\r\nfc1, 64, 64, 64,\r\n"},
           {"crlf.csv", "Layer, M, N, K,\r\nfc1, 64, 64, 64,\r\n"},
           {"bom.json", "\xEF\xBB\xBF{\"layers\":[{\"name\":\"fc1\",\"op\":\"matmul\",\"m\":64,\"n\":64,\"k\":64}]}"}}) {
    const CliResult r = RunTpumesh("simulate --workload " + Write(name, text));
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("total ")) << name;
  }
}

// Small files, bounded work: 1,000 psum layers on 1,024 devices (63 KB) ran
// for hours, each collective priced per device; a 110-byte depthwise row of
// a million channels took 5.5 GB before failing.
TEST(SimulateCliTest, SmallFilesGiveBoundedWork) {
  std::string layers;
  for (int i = 0; i < 1000; ++i)
    layers += std::string(i ? "," : "") + "{\"name\":\"p" + std::to_string(i) +
              "\",\"op\":\"psum\",\"axis\":\"data\",\"bytes\":1048576}";
  const CliResult psum = RunBounded("simulate --workload " + Write("psum.json", "{\"layers\":[" + layers + "]}") +
                                    " --devices 1024");
  EXPECT_EQ(psum.code, 0) << psum.err;
  EXPECT_THAT(psum.out, HasSubstr("ICI of device 0"));
  // Its report lists a row per device and layer: 760 MB of JSON, 1.5 GB of
  // RSS. The bound counts those rows.
  const std::string dir = tpumesh::testing::TestTempDir();
  ExpectOneLineError(RunBounded("simulate --workload " + dir + "/psum.json --devices 1024 --report " + dir + "/r.json"),
                     "1024000 rows of --report");
  EXPECT_FALSE(fs::exists(dir + "/r.json"));
  const std::string dp = Write("dp.csv",
                               "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num "
                               "Filter, Strides,\nDP1, 8, 8, 3, 3, 1000000, 1, 1,\n");
  ASSERT_LT(fs::file_size(dp), 200u);
  ExpectOneLineError(RunBounded("simulate --workload " + dp), "--max-layers");
}

// At the documented limits (dims 2^24, repeat 2^24, heads 65536) the int64
// cycle count wrapped: a conv at 73684548877135.1%, an attention at 0 MXU
// cycles and 100%. Now every figure is finite and at most 100%, or the
// layer is refused in one line.
TEST(SimulateCliTest, FiguresAtTheDocumentedLimitsStayFinite) {
  const std::string big = "16777216";
  for (const std::string& layer : std::vector<std::string>{
           "\"op\":\"matmul\",\"m\":" + big + ",\"n\":" + big + ",\"k\":" + big,
           "\"op\":\"conv\",\"batch\":1,\"height\":1048576,\"width\":1048576,\"in_channels\":" + big +
               ",\"out_channels\":" + big + ",\"kernel\":1",
           "\"op\":\"attention\",\"batch\":" + big + ",\"q_len\":" + big + ",\"kv_len\":" + big +
               ",\"heads\":65536,\"head_dim\":65536",
           "\"op\":\"elementwise\",\"elements\":1099511627776,\"flops_per_element\":1024,"
           "\"transcendentals_per_element\":1024,\"inputs\":64"}) {
    const CliResult r = RunTpumesh(
        "simulate --workload " + Write("w.json", "{\"layers\":[{\"name\":\"l\"," + layer + ",\"repeat\":" + big + "}]}"));
    EXPECT_EQ(r.code, 0) << layer << ": " << r.err;
    ExpectSaneFigures(r.out);
  }
  const std::string conv = Write("c.json", "{\"layers\":[{\"name\":\"c\",\"op\":\"conv\",\"batch\":" + big +
                                               ",\"height\":" + big + ",\"width\":" + big + ",\"in_channels\":1" +
                                               ",\"out_channels\":1,\"kernel\":1}]}");
  ExpectOneLineError(RunTpumesh("simulate --workload " + conv), "more than 2^40");
  // A 1x1 MXU on the largest GEMM read 1677721600 %.
  const std::string chip = ChipWith("mxu1.json", [](nlohmann::json& c) { c["mxu_rows"] = c["mxu_cols"] = 1; });
  const CliResult r = RunTpumesh("simulate --chip " + chip + " --workload " +
                                 Write("g.csv", "Layer, M, N, K,\nfc1, " + big + ", " + big + ", " + big + ",\n"));
  EXPECT_EQ(r.code, 0) << r.err;
  ExpectSaneFigures(r.out);
}

// Chip-file numbers each have a range: energy near the largest double gave
// inf totals and null in the report; a default_topology axis of 2^32 + 2
// became 2; a key given twice was taken (the second).
TEST(SimulateCliTest, ChipFileNumbersOutsideTheirRangesAreRefused) {
  ExpectOneLineError(RunTpumesh("devices --chip " + ChipWith("e.json",
                                                             [](nlohmann::json& c) {
                                                               c["energy"] = {{"mac_pj", 1e308},
                                                                              {"vector_flop_pj", 1},
                                                                              {"transcendental_pj", 1},
                                                                              {"vmem_byte_pj", 1},
                                                                              {"hbm_byte_pj", 1},
                                                                              {"ici_byte_pj", 1}};
                                                             })),
                     "energy.mac_pj");
  ExpectOneLineError(
      RunTpumesh("devices --chip " + ChipWith("t.json",
                                              [](nlohmann::json& c) {
                                                c["default_topology"] = {4294967298LL, 4};
                                              })),
      "4294967298");
  std::string dup = Read(std::string(TPUMESH_SOURCE_DIR) + "/docs/examples/custom_chip.json");
  dup.insert(dup.find('{') + 1, "\"mxu_rows\": 64, ");
  ExpectOneLineError(RunTpumesh("devices --chip " + Write("d.json", dup)), "'mxu_rows' twice");
}

// --vmem-mib: a value given is 0 or 1 KiB to 1 TiB; -1 once meant "the
// chip's" and 1e-9 rounded to no VMEM, priced 120x faster than 128 MiB.
// Less VMEM is never faster.
TEST(SimulateCliTest, VmemMibHasARangeAndLessIsNeverFaster) {
  const std::string w = Write("w.csv", "Layer, M, N, K,\nfc1, 8192, 8192, 8192,\n");
  for (const char* v : {"-1", "1e-9", "nan", "0.0009"})
    ExpectOneLineError(RunTpumesh("simulate --workload " + w + " --vmem-mib " + v), "--vmem-mib", 2);
  const std::string dir = tpumesh::testing::TestTempDir();
  auto seconds = [&](const std::string& mib) {
    const std::string csv = dir + "/v" + mib + ".csv";
    const CliResult r = RunTpumesh("simulate --workload " + w + " --vmem-mib " + mib + " --report-csv " + csv);
    EXPECT_EQ(r.code, 0) << r.err;
    std::istringstream rows(Read(csv));
    std::string header, row;
    std::getline(rows, header);
    std::getline(rows, row);
    std::vector<std::string> fields;
    for (std::istringstream f(row); std::getline(f, fields.emplace_back(), ',');) {
    }
    // modelled_seconds, 14th from the end (the shape before it holds commas)
    return fields.size() > 14 ? std::strtod(fields[fields.size() - 14].c_str(), nullptr) : 0.0;
  };
  const double least = seconds("0.0009765625"), most = seconds("128");
  EXPECT_GT(most, 0);
  EXPECT_GE(least, most);
}

// --attention: the report names the kernel; standard moves the attention
// ops' score traffic more through HBM than flash, with the same FLOPs and
// MXU cycles, and the per-layer CSV's attention rows follow.
TEST(SimulateCliTest, AttentionFlagPricesTheScoresAndTheReportNamesIt) {
  const std::string dir = tpumesh::testing::TestTempDir();
  auto summary = [&](const std::string& kernel) {
    const std::string json = dir + "/att_" + kernel + ".json", csv = dir + "/att_" + kernel + ".csv";
    const CliResult r = RunTpumesh("simulate --arch tiny --steps 1 --devices 1 --attention " + kernel + " --report " +
                                   json + " --report-csv " + csv);
    EXPECT_EQ(r.code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(Read(json), nullptr, false);
    EXPECT_THAT(Read(csv), HasSubstr(",attention,"));
    return j;
  };
  const nlohmann::json flash = summary("flash"), standard = summary("standard");
  ASSERT_TRUE(flash.is_object() && standard.is_object());
  EXPECT_EQ(flash["summary"]["attention"], "flash");
  EXPECT_EQ(standard["summary"]["attention"], "standard");
  EXPECT_GT(standard["summary"]["hbm_bytes"].get<double>(), flash["summary"]["hbm_bytes"].get<double>());
  EXPECT_EQ(standard["summary"]["flops"], flash["summary"]["flops"]);
  const auto& fa = flash["devices"][0]["by_op_type"]["attention"];
  const auto& sa = standard["devices"][0]["by_op_type"]["attention"];
  EXPECT_EQ(fa["mxu_cycles"], sa["mxu_cycles"]);
  EXPECT_GT(sa["bytes"].get<double>(), fa["bytes"].get<double>());
  // Only the attention ops move more.
  EXPECT_EQ(flash["devices"][0]["by_op_type"]["conv"]["bytes"], standard["devices"][0]["by_op_type"]["conv"]["bytes"]);
}

}  // namespace
