// report/: a small hand-made report (two devices, a matmul, an elementwise op
// and a collective) through every public function: priced by Finish, read
// back from its JSON, CSV, trace and table, written to files, gathered
// across ranks in one process, and its op records through their wire form.
#include "report/report.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/atomic_file.h"
#include "mesh/chip_spec.h"
#include "mesh/mesh.h"
#include "nlohmann/json.hpp"
#include "report/devices_text.h"
#include "report/rank_report.h"
#include "report/report_files.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::report {
namespace {

using nlohmann::json;

mesh::OpRecord Matmul(const std::string& module) {
  mesh::OpRecord r;
  r.name = "linear";
  r.type = "matmul";
  r.shape = "x[128,256] w[256,512]";
  r.module = module;
  r.cost.flops = 2.0 * 128 * 256 * 512;
  r.cost.bytes_read = 2.0 * (128 * 256 + 256 * 512);
  r.cost.bytes_written = 4.0 * 128 * 512;
  r.mxu.push_back({128, 512, 256, 1, 2.0 * 128 * 256, 2.0 * 256 * 512, 4.0 * 128 * 512});
  r.host_seconds = 0.25;
  return r;
}

mesh::OpRecord Elementwise(int64_t n) {
  mesh::OpRecord r;
  r.name = "silu";
  r.type = "elementwise";
  r.shape = "x[" + std::to_string(n) + "]";
  r.cost.flops = 4.0 * n;
  r.cost.transcendentals = n;
  r.cost.bytes_read = 4.0 * n;
  r.cost.bytes_written = 4.0 * n;
  r.repeat = 3;
  return r;
}

mesh::OpRecord Psum(const std::string& module) {
  mesh::OpRecord r;
  r.name = "psum";
  r.type = "collective";
  r.shape = "x[65536]";
  r.module = module;
  r.ici_seconds = 2e-5;
  r.ici_bytes = 1 << 18;
  return r;
}

// Device 0 does more than device 1, so the slowest device is device 0.
std::vector<std::vector<mesh::OpRecord>> Records() {
  return {{Matmul("unet/a"), Elementwise(1 << 20), Psum("unet/a")}, {Matmul("unet/b"), Elementwise(1 << 10)}};
}

RunReport MadeReport(bool keep_ops = true) {
  RunReport r;
  r.mode = "simulate";
  r.chip = mesh::V5eChip();
  r.devices = 2;
  r.images = 4;
  r.host_seconds = 1.5;
  r.mesh_axes = "data=1,model=2";
  r.param_bytes = {1000, 2000};
  r.hbm_peak_bytes = {5000, 4000};
  r.info = {{"model", "tiny"}, {"steps", "2"}};
  r.sharding = {{"unet/a", "output features by 2", "psum"}, {"unet/never_ran", "input features by 2", "none"}};
  r.Finish(Records(), keep_ops);
  return r;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RunReportTest, FinishPricesEveryDeviceAndTheSlowestIsTheRun) {
  const RunReport r = MadeReport();
  ASSERT_EQ(r.logs.size(), 2u);
  EXPECT_GT(r.logs[0].seconds(), r.logs[1].seconds());
  EXPECT_DOUBLE_EQ(r.modelled_seconds(), r.logs[0].seconds());
  EXPECT_EQ(r.logs[0].total().count, 1 + 3 + 1);  // the elementwise op stands for 3 calls
  EXPECT_EQ(r.logs[0].ops().size(), 3u);           // keep_ops
  EXPECT_TRUE(MadeReport(false).logs[0].ops().empty());
}

TEST(RunReportTest, SharedLogsPriceEachDistinctListOnce) {
  RunReport shared;
  shared.chip = mesh::V5eChip();
  const std::vector<std::vector<mesh::OpRecord>> records = Records();
  shared.Finish(records, {0, 1, 0, 1}, false);
  ASSERT_EQ(shared.logs.size(), 4u);
  EXPECT_DOUBLE_EQ(shared.logs[2].seconds(), shared.logs[0].seconds());
  EXPECT_DOUBLE_EQ(shared.logs[3].seconds(), shared.logs[1].seconds());
}

TEST(RunReportTest, AllDevicesTotalsAddEveryDeviceAndTakeTheBusiestIci) {
  const RunReport r = MadeReport();
  const mesh::OpTypeTotals all = AllDevicesTotals(r);
  EXPECT_DOUBLE_EQ(all.flops, r.logs[0].total().flops + r.logs[1].total().flops);
  EXPECT_DOUBLE_EQ(all.bytes, r.logs[0].total().bytes + r.logs[1].total().bytes);
  EXPECT_DOUBLE_EQ(all.ici_bytes, 1 << 18);
  EXPECT_DOUBLE_EQ(all.ici_seconds, r.logs[0].total().ici_seconds);
}

// The JSON holds what the report holds: the summary, every device and the
// sharding plan, read back equal.
TEST(RunReportTest, JsonRoundTrips) {
  const RunReport r = MadeReport();
  const json j = json::parse(ReportJson(r));
  const json& s = j.at("summary");
  EXPECT_EQ(s.at("mode"), r.mode);
  EXPECT_EQ(s.at("chip"), r.chip.name);
  EXPECT_EQ(s.at("devices"), r.devices);
  EXPECT_EQ(s.at("images"), r.images);
  EXPECT_EQ(s.at("mesh"), r.mesh_axes);
  EXPECT_DOUBLE_EQ(s.at("modelled_seconds").get<double>(), r.modelled_seconds());
  EXPECT_DOUBLE_EQ(s.at("host_seconds").get<double>(), r.host_seconds);
  EXPECT_DOUBLE_EQ(s.at("flops").get<double>(), AllDevicesTotals(r).flops);
  EXPECT_EQ(s.at("param_bytes_per_device"), 2000);
  EXPECT_EQ(s.at("hbm_peak_bytes"), 5000);
  EXPECT_EQ(s.at("model"), "tiny");
  EXPECT_EQ(s.at("steps"), "2");
  EXPECT_FALSE(s.contains("host_seconds_per_rank"));
  ASSERT_EQ(j.at("devices").size(), 2u);
  for (int d = 0; d < 2; ++d) {
    const json& dev = j.at("devices")[d];
    EXPECT_EQ(dev.at("id"), d);
    EXPECT_DOUBLE_EQ(dev.at("modelled_seconds").get<double>(), r.logs[d].seconds());
    EXPECT_EQ(dev.at("param_bytes"), r.param_bytes[d]);
    EXPECT_EQ(dev.at("hbm_peak_bytes"), r.hbm_peak_bytes[d]);
    EXPECT_EQ(dev.at("layers").size(), r.logs[d].layers().size());
    EXPECT_EQ(dev.at("totals").at("count"), r.logs[d].total().count);
  }
  const json& plan = j.at("sharding_plan");
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].at("module"), "unet/a");
  EXPECT_EQ(plan[0].at("collective"), "psum");
  EXPECT_EQ(plan[0].at("calls"), 1);
  EXPECT_EQ(plan[1].at("module"), "unet/never_ran");
  EXPECT_EQ(plan[1].at("calls"), 0);
}

// Devices that share a log are written once and told apart by their id:
// the text is what a full dump would be.
TEST(RunReportTest, JsonOfSharedLogsNamesEveryDevice) {
  RunReport r;
  r.chip = mesh::V5eChip();
  r.devices = 3;
  r.Finish(Records(), {0, 0, 1}, false);
  const json j = json::parse(ReportJson(r));
  ASSERT_EQ(j.at("devices").size(), 3u);
  for (int d = 0; d < 3; ++d) EXPECT_EQ(j.at("devices")[d].at("id"), d);
  json first = j.at("devices")[0], second = j.at("devices")[1];
  first.erase("id");
  second.erase("id");
  EXPECT_EQ(first, second);
}

TEST(RunReportTest, LayersCsvRowsSumToEachDevicesTotals) {
  const RunReport r = MadeReport();
  std::istringstream csv(LayersCsv(r));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("device,layer,op,type,shape,count,flops,", 0), 0u) << line;
  double flops[2] = {0, 0};
  int rows = 0;
  while (std::getline(csv, line)) {
    std::vector<std::string> f(1);  // fields; a shape with commas is quoted
    bool quoted = false;
    for (const char c : line) {
      if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) f.emplace_back();
      else f.back() += c;
    }
    ASSERT_EQ(f.size(), 25u) << line;
    flops[std::stoi(f[0])] += std::stod(f[6]);
    ++rows;
  }
  EXPECT_EQ(rows, static_cast<int>(r.logs[0].layers().size() + r.logs[1].layers().size()));
  for (int d = 0; d < 2; ++d) EXPECT_DOUBLE_EQ(flops[d], r.logs[d].total().flops);
}

TEST(RunReportTest, TraceHasATrackPerUnitAndAHostProcess) {
  const RunReport r = MadeReport();
  const json t = json::parse(TraceJson(r));
  int mxu = 0, ici = 0, host = 0;
  for (const json& e : t.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    if (e.at("pid") == 3) ++host;  // devices are pids 1 and 2, the host 3
    else if (e.at("tid") == 1) ++mxu;
    else if (e.at("tid") == 4) ++ici;
  }
  EXPECT_EQ(mxu, 2);   // one matmul per device
  EXPECT_EQ(ici, 1);   // device 0's psum
  EXPECT_EQ(host, 2);  // the ops measured on the host
}

TEST(RunReportTest, TableNamesTheChipAndDeviceZerosTotals) {
  const std::string table = ReportTable(MadeReport());
  EXPECT_NE(table.find("device 0 on " + mesh::V5eChip().name), std::string::npos) << table;
  EXPECT_NE(table.find("total"), std::string::npos) << table;
  EXPECT_NE(table.find("HBM of device 0: peak"), std::string::npos) << table;
  EXPECT_NE(table.find("over mesh data=1,model=2"), std::string::npos) << table;
  EXPECT_NE(table.find("ICI of device 0"), std::string::npos) << table;
  RunReport empty;
  EXPECT_EQ(ReportTable(empty).find("total"), std::string::npos);
}

TEST(RunReportTest, WrittenFilesHoldTheTexts) {
  const RunReport r = MadeReport();
  const std::string dir = testing::TestTempDir();
  ASSERT_TRUE(WriteReportJson(dir + "/r.json", r).ok());
  ASSERT_TRUE(WriteTraceJson(dir + "/t.json", r).ok());
  EXPECT_EQ(ReadFile(dir + "/r.json"), ReportJson(r));
  EXPECT_EQ(ReadFile(dir + "/t.json"), TraceJson(r));
  EXPECT_FALSE(WriteReportJson(dir + "/no/such/folder/r.json", r).ok());
}

TEST(ReportFilesTest, AddsOnlyTheFilesAskedForAndWritesThemAll) {
  const RunReport r = MadeReport();
  const std::string dir = testing::TestTempDir();
  ReportPaths paths;
  EXPECT_FALSE(paths.any());
  paths.report = dir + "/report.json";
  paths.csv = dir + "/layers.csv";
  EXPECT_TRUE(paths.any());
  std::vector<std::pair<std::string, std::string>> files;
  AddReportFiles(r, paths, &files);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], std::make_pair(paths.report, ReportJson(r)));
  EXPECT_EQ(files[1], std::make_pair(paths.csv, LayersCsv(r)));
  EXPECT_EQ(paths.flags().size(), 3u);
  EXPECT_EQ(paths.flags()[1].first, "--trace");

  ::testing::internal::CaptureStdout();
  ASSERT_TRUE(WriteReportFiles(r, paths).ok());
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, "report: " + paths.report + "\nper-layer CSV: " + paths.csv + "\n");
  EXPECT_EQ(ReadFile(paths.report), ReportJson(r));
  EXPECT_EQ(ReadFile(paths.csv), LayersCsv(r));
}

TEST(RankReportTest, RecordsRoundTripThroughTheirWireForm) {
  const std::vector<std::vector<mesh::OpRecord>> records = Records();
  const std::vector<TaggedRecords> lists = {{7, 5000, 1000, &records[0]}, {9, 4000, 2000, &records[1]}};
  mesh::Bytes blob;
  EncodeRecords(lists, &blob);
  StatusOr<std::vector<DecodedRecords>> back = DecodeRecords(blob, "rank 1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*back)[i].tag, lists[i].tag);
    EXPECT_EQ((*back)[i].value, lists[i].value);
    EXPECT_EQ((*back)[i].extra, lists[i].extra);
    ASSERT_EQ((*back)[i].records.size(), records[i].size());
    for (size_t k = 0; k < records[i].size(); ++k) {
      const mesh::OpRecord &a = (*back)[i].records[k], &b = records[i][k];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.module, b.module);
      EXPECT_EQ(a.shape, b.shape);
      EXPECT_EQ(a.cost.flops, b.cost.flops);
      EXPECT_EQ(a.repeat, b.repeat);
      EXPECT_EQ(a.ici_seconds, b.ici_seconds);
      EXPECT_EQ(a.mxu.size(), b.mxu.size());
    }
  }
  blob.pop_back();
  StatusOr<std::vector<DecodedRecords>> bad = DecodeRecords(blob, "rank 1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("from rank 1"), std::string::npos) << bad.status().ToString();
}

// One process: the report is Finish's, with this process's host time as
// its one rank's.
TEST(RankReportTest, OneProcessFinishesAsFinish) {
  mesh::MeshSpec spec;
  spec.devices = 2;
  spec.threads_per_device = 1;
  auto m = mesh::CreateMesh(spec);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  RunReport gathered;
  gathered.chip = mesh::V5eChip();
  ASSERT_TRUE(FinishAcrossRanks(**m, Records(), {5000, 4000}, 1.25, false, &gathered).ok());
  RunReport local;
  local.chip = mesh::V5eChip();
  local.Finish(Records(), false);
  ASSERT_EQ(gathered.logs.size(), 2u);
  for (int d = 0; d < 2; ++d) EXPECT_EQ(gathered.logs[d].seconds(), local.logs[d].seconds());
  EXPECT_EQ(gathered.hbm_peak_bytes, (std::vector<int64_t>{5000, 4000}));
  EXPECT_EQ(gathered.host_seconds_per_rank, std::vector<double>{1.25});
  EXPECT_FALSE(FinishAcrossRanks(**m, {Records()[0]}, {1}, 0, false, &gathered).ok());
}

TEST(DevicesTextTest, TextAndJsonDescribeEveryDevice) {
  mesh::MeshSpec spec;
  spec.devices = 4;
  spec.axes = "data=2,model=2";
  spec.threads_per_device = 1;
  auto m = mesh::CreateMesh(spec);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string text = DevicesText(**m);
  EXPECT_EQ(text.rfind("4 devices: ", 0), 0u) << text;
  EXPECT_NE(text.find("Mesh: data=2,model=2"), std::string::npos) << text;
  EXPECT_NE(text.find("Chip " + (*m)->chip().name), std::string::npos) << text;
  const json j = json::parse(DevicesJson(**m));
  ASSERT_EQ(j.at("devices").size(), 4u);
  EXPECT_EQ(j.at("devices")[3].at("mesh_indices"), (std::vector<int>{1, 1}));
  EXPECT_EQ(j.at("mesh").at("axes").size(), 2u);
  EXPECT_EQ(j.at("chip").at("name"), (*m)->chip().name);
}

}  // namespace
}  // namespace tpumesh::report
