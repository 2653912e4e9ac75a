// Runs the tpumesh binary as a user would.
#include <sys/wait.h>
#include <filesystem>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/h5io.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cli.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Result = tpumesh::testing::CliResult;
using tpumesh::testing::RunTpumesh;

TEST(CliTest, HelpListsCommands) {
  Result r = RunTpumesh("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("devices"));
  Result d = RunTpumesh("devices --help");
  EXPECT_EQ(d.code, 0);
  EXPECT_THAT(d.out, HasSubstr("--chip"));
  EXPECT_THAT(d.out, HasSubstr("--topology"));
}

TEST(CliTest, DevicesDefaultIsAV5e2x4) {
  Result r = RunTpumesh("devices");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("8 devices: TPU v5 lite (emulated), chip v5e, topology 2x4 (no wraparound)"));
  EXPECT_THAT(r.out, HasSubstr("TpuDevice(id=7, coords=(1,3,0), core_on_chip=0)  HBM 16.0 GiB"));
  EXPECT_THAT(r.out, HasSubstr("Mesh: data=8"));
  // What computes here: kAuto's providers and libblis's configuration.
  EXPECT_THAT(r.out, HasSubstr("Host kernels: path "));
  EXPECT_THAT(r.out, HasSubstr(", highway at highest; BLIS "));
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(CliTest, DevicesJsonIsValid) {
  Result r = RunTpumesh("devices --chip v2 --mesh x=4,y=2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["devices"].size(), 8u);
  EXPECT_EQ(j["devices"][5]["core_on_chip"], 1);
  EXPECT_EQ(j["devices"][5]["mesh_indices"], nlohmann::json({2, 1}));
  EXPECT_EQ(j["chip"]["name"], "v2");
  EXPECT_EQ(j["mesh"]["axes"][0]["name"], "x");
  EXPECT_EQ(j["host_kernels"]["matmul_provider_highest"], "highway");
  EXPECT_TRUE(j["host_kernels"]["blis_configuration"].is_string());
  EXPECT_TRUE(j["host_kernels"]["blis_optimized"].is_boolean());
}

// The presets of Google's newer chips: their figures reach `devices`, and a
// TPU7x slice is two devices (chiplets) per chip.
TEST(CliTest, DevicesNewPresets) {
  Result v6e = RunTpumesh("devices --chip v6e");
  ASSERT_EQ(v6e.code, 0) << v6e.err;
  EXPECT_THAT(v6e.out, HasSubstr("8 devices: TPU v6 lite (emulated), chip v6e, topology 2x4 (no wraparound)"));
  EXPECT_THAT(v6e.out, HasSubstr("1 TensorCore(s) x 2 MXU 256x256 ws @ 3.50 GHz, 918 TFLOP/s bf16 per chip; HBM "
                                 "32.0 GiB @ 1638 GB/s; VMEM 128.0 MiB; ICI 4 links x 100.0 GB/s per direction"));
  Result v5p = RunTpumesh("devices --chip v5p --topology 2x2x1");
  ASSERT_EQ(v5p.code, 0) << v5p.err;
  EXPECT_THAT(v5p.out, HasSubstr("4 devices: TPU v5 (emulated), chip v5p, topology 2x2x1"));
  EXPECT_THAT(v5p.out, HasSubstr("2 TensorCore(s) x 4 MXU 128x128 ws @ 1.75 GHz, 459 TFLOP/s bf16 per chip; HBM "
                                 "95.0 GiB @ 2765 GB/s; VMEM 64.0 MiB; ICI 6 links x 100.0 GB/s per direction"));
  Result x = RunTpumesh("devices --chip tpu7x --topology 2x2x1");
  ASSERT_EQ(x.code, 0) << x.err;
  EXPECT_THAT(x.out, HasSubstr("8 devices on 4 chips: TPU7x (emulated), chip tpu7x, topology 2x2x1"));
  EXPECT_THAT(x.out, HasSubstr("TpuDevice(id=3, coords=(1,0,0), core_on_chip=1)  HBM 96.0 GiB"));
  EXPECT_THAT(x.out, HasSubstr("2307 TFLOP/s bf16 per chip; HBM 192.0 GiB @ 7380 GB/s"));
  EXPECT_THAT(x.out, HasSubstr("2 chiplets per chip (1 device(s) each) joined at 600.0 GB/s per direction"));
  // The default device count (8) is the v7-8's, and the JSON says 4 chips.
  Result j = RunTpumesh("devices --chip tpu7x --json");
  ASSERT_EQ(j.code, 0) << j.err;
  auto json = nlohmann::json::parse(j.out);
  EXPECT_EQ(json["devices"].size(), 8u);
  EXPECT_EQ(json["topology"]["chips"], 4);
  EXPECT_EQ(json["topology"]["chip_dims"], nlohmann::json({2, 2, 1}));
  EXPECT_EQ(json["chip"]["chiplets_per_chip"], 2);
  EXPECT_EQ(json["devices"][7]["core_on_chip"], 1);
  EXPECT_EQ(json["devices"][7]["coords"], nlohmann::json({1, 1, 0}));
}

TEST(CliTest, DevicesCustomChipFile) {
  Result r = RunTpumesh(std::string("devices --chip ") + TPUMESH_SOURCE_DIR + "/docs/examples/custom_chip.json --topology 4x4");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("16 devices"));
}

TEST(CliTest, BadInputIsOneLineAndNonZero) {
  struct Case {
    std::string args;
    int code;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"devices --chip v9", 1, "tpumesh: error: chip 'v9': neither a preset"},
           {"devices --topology 2x", 1, "tpumesh: error: --topology: topology '2x'"},
           {"devices --mesh x=3 --topology 2x4", 1, "--mesh x=3 holds 3 devices but --topology 2x4 holds 8"},
           {"devices --devices 4 --topology 2x4", 1, "--topology 2x4 holds 8 devices but --devices is 4"},
           {"devices --bogus", 2, "--bogus"},
           {"frobnicate", 2, "frobnicate"},
           {"", 2, "subcommand"},
       }) {
    Result r = RunTpumesh(c.args);
    EXPECT_EQ(r.code, c.code) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
    EXPECT_THAT(r.out, Not(HasSubstr("TpuDevice"))) << c.args;
  }
  Result r = RunTpumesh("devices --chip v9");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace

namespace {

TEST(CliTest, ConvertWritesAModelAndRefusesBadInput) {
  const std::string ref = std::string(TPUMESH_SOURCE_DIR) + "/../shared/refdata/tiny-sd-a";
  TPUMESH_REQUIRE_REFDATA(ref + "/model_index.json");
  const std::string out = tpumesh::testing::TestTempDir() + "/cli_convert.h5";
  std::remove(out.c_str());
  Result r = RunTpumesh("convert " + ref + " -o " + out + " --dtype bf16");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("512 tensors, 2153860 parameters"));
  EXPECT_THAT(r.out, HasSubstr("as bf16"));
  EXPECT_EQ(access(out.c_str(), R_OK), 0);

  const std::string none = tpumesh::testing::TestTempDir() + "/cli_convert_none.h5";
  Result bad = RunTpumesh("convert /nonexistent -o " + none);
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("tpumesh: error: /nonexistent: not a directory"));
  EXPECT_NE(access(none.c_str(), F_OK), 0);
  Result dtype = RunTpumesh("convert " + ref + " -o " + none + " --dtype int32");
  EXPECT_EQ(dtype.code, 1);
  EXPECT_THAT(dtype.err, HasSubstr("--dtype must be f32 or bf16"));
  Result missing = RunTpumesh("convert " + ref);
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--output is required"));
}


using tpumesh::mesh::Array;

// `tpumesh convert` then `tpumesh eval` on the reference folder reproduce
// the golden outputs of diffusers/transformers, through the emulated mesh.
TEST(CliTest, ConvertThenEvalReproducesGolden) {
  const std::string ref = tpumesh::testing::RefdataDir() + "/tiny-sd-a";
  const std::string golden = ref + "/golden.h5";
  TPUMESH_REQUIRE_REFDATA(golden);
  const std::string dir = tpumesh::testing::TestTempDir() + "/cli_eval";
  std::filesystem::create_directories(dir);
  const std::string model = dir + "/tiny.h5";
  ASSERT_EQ(RunTpumesh("convert " + ref + " -o " + model + " -q").code, 0);

  struct Case {
    std::string component;
    std::vector<std::pair<std::string, std::string>> inputs;  // dataset in input <- golden dataset
    std::string output, want;
    std::string mesh;  // device flags
    double tolerance;
  };
  const std::vector<Case> cases = {
      {"text_encoder", {{"input_ids", "text_encoder/input_ids"}}, "last_hidden_state",
       "text_encoder/last_hidden_state", "--mesh data=2,model=2", 1e-4},
      {"text_encoder", {{"input_ids", "text_encoder/input_ids"}}, "last_hidden_state",
       "text_encoder/last_hidden_state", "", 1e-4},
      {"unet", {{"sample", "unet/sample"}, {"timestep", "unet/tpair/timestep"},
                {"encoder_hidden_states", "unet/encoder_hidden_states"}}, "out_sample", "unet/tpair/noise_pred", "--mesh model=2", 1e-4},
      {"vae_decoder", {{"latents", "vae_decode/decoder_input"}}, "sample", "vae_decode/decoded", "--devices 2 --mesh model=2", 1e-4},
      {"vae_encoder", {{"sample", "vae_encode/image"}}, "latent_mean", "vae_encode/mean", "--mesh model=2", 1e-4},
  };
  for (const Case& c : cases) {
    const std::string in = dir + "/in_" + c.component + ".h5", out = dir + "/out_" + c.component + ".h5";
    {
      auto w = tpumesh::pipeline::H5Writer::Create(in);
      ASSERT_TRUE(w.ok());
      for (const auto& [name, src] : c.inputs) ASSERT_TRUE((*w)->Write(name, *tpumesh::pipeline::H5ReadArray(golden, src)).ok());
      ASSERT_TRUE((*w)->Commit().ok());
    }
    Result r = RunTpumesh("eval --model " + model + " --component " + c.component + " --input " + in + " --output " +
                          out + " " + c.mesh + " --report " + dir + "/report.json");
    ASSERT_EQ(r.code, 0) << r.err;
    // Over a model axis the devices exchange activations.
    std::ifstream rf(dir + "/report.json");
    const nlohmann::json report = nlohmann::json::parse(rf);
    EXPECT_EQ(report["summary"]["ici_bytes"].get<double>() > 0, c.mesh.find("model=") != std::string::npos)
        << c.component << " " << c.mesh;
    auto got = tpumesh::pipeline::H5ReadArray(out, c.output);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const Array want = *tpumesh::pipeline::H5ReadArray(golden, c.want);
    ASSERT_EQ(got->shape(), want.shape()) << c.component;
    EXPECT_LT(tpumesh::testing::RelativeError(*got, want), c.tolerance) << c.component;
  }
  // Bad input: batch not divisible, unknown component, missing dataset.
  Result bad = RunTpumesh("eval --model " + model + " --component unet --input " + dir + "/in_unet.h5 --output " + dir +
                          "/bad.h5 --devices 8");
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("not divisible by the mesh's data axis (8)"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.h5"));
  Result comp = RunTpumesh("eval --model " + model + " --component clip --input " + dir + "/in_unet.h5 --output " + dir + "/bad.h5");
  EXPECT_THAT(comp.err, HasSubstr("unknown component 'clip'"));
  Result missing = RunTpumesh("eval --model " + model + " --component vae_decoder --input " + dir +
                              "/in_unet.h5 --output " + dir + "/bad.h5");
  EXPECT_THAT(missing.err, HasSubstr("no dataset 'latents'"));
}

}  // namespace

namespace {

// The path `bench peak` reports as the host's ("host path NAME,").
std::string HostPath() {
  Result peak = RunTpumesh("bench peak --threads 1 --seconds 0.02");
  const size_t at = peak.out.find("host path ");
  if (peak.code != 0 || at == std::string::npos) return "";
  const size_t from = at + 10;
  return peak.out.substr(from, peak.out.find(',', from) - from);
}

// Every path the host has can be forced with TPUMESH_SIMD, and `bench` runs
// on each, against the best peak of the paths left; a path above the host's
// is the host's; an unknown one is refused before anything runs.
TEST(CliTest, BenchRunsOnEverySimdPathTheHostHas) {
  const std::string host = HostPath();
  const std::vector<std::string> paths = {"baseline", "avx2", "avx512", "avx512bf16", "amx"};
  const auto host_at = std::find(paths.begin(), paths.end(), host);
  ASSERT_NE(host_at, paths.end()) << "bench peak names no host path";
  for (auto path = paths.begin(); path <= host_at; ++path) {
    SCOPED_TRACE("TPUMESH_SIMD=" + *path);
    ASSERT_EQ(setenv("TPUMESH_SIMD", path->c_str(), 1), 0);
    Result peak = RunTpumesh("bench peak --threads 1 --seconds 0.02");
    ASSERT_EQ(peak.code, 0) << peak.err;
    EXPECT_THAT(peak.out, HasSubstr("host path " + host + ", active path " + *path + " (TPUMESH_SIMD=" + *path + ")"));
    for (auto p = paths.begin(); p != paths.end(); ++p) {
      const std::string row = "  " + *p + std::string(12 - p->size(), ' ');
      const size_t at = peak.out.find(row);
      ASSERT_NE(at, std::string::npos) << *p;
      const std::string line = peak.out.substr(at, peak.out.find('\n', at) - at);
      // AMX also needs Linux's leave: a refusal is its own note.
      if (*p == "amx" && p <= path && line.find("refused by the kernel") != std::string::npos) continue;
      EXPECT_THAT(line, HasSubstr(p <= path ? "GFLOP/s (measured)" : p <= host_at ? "off (TPUMESH_SIMD)"
                                                                                 : "not on this CPU"));
    }
    EXPECT_THAT(peak.out, HasSubstr("best peak: "));
    EXPECT_THAT(peak.out, HasSubstr("f32 FMA peak: "));
    EXPECT_THAT(peak.out, HasSubstr("the matmul's auto provider at highest: highway (Highway "));
    EXPECT_THAT(peak.out, HasSubstr("; BLIS, on request: "));
    Result mm = RunTpumesh("bench matmul --m 32 --n 40 --k 48 --repeats 1");
    ASSERT_EQ(mm.code, 0) << mm.err;
    EXPECT_THAT(mm.out, HasSubstr("of the host's best peak, "));
    EXPECT_THAT(mm.out, HasSubstr(", measured)"));
    if (*path != "avx512bf16") {
      EXPECT_THAT(mm.out, Not(HasSubstr("provider bf16")));
    }
    if (*path == "avx2") {
      EXPECT_THAT(mm.out, HasSubstr("(Highway target AVX2)"));
    }
  }
  ASSERT_EQ(setenv("TPUMESH_SIMD", "amx", 1), 0);
  Result above = RunTpumesh("bench peak --threads 1 --seconds 0.02");
  EXPECT_THAT(above.out, HasSubstr("host path " + host + ", active path "));
  if (host != "amx") {
    EXPECT_THAT(above.out, HasSubstr("active path " + host + " (TPUMESH_SIMD=amx)"));
  }
  ASSERT_EQ(setenv("TPUMESH_SIMD", "avx3", 1), 0);
  Result bad = RunTpumesh("devices");
  unsetenv("TPUMESH_SIMD");
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err, "tpumesh: error: TPUMESH_SIMD=avx3: 'avx3' is not a SIMD path (baseline, avx2, avx512, "
                     "avx512bf16, amx)\n");
}

// `tpumesh bench`: the fields a user reads, and one clear line for bad flags
// (no timing is checked).
// simulate --workload: a SCALE-Sim CSV priced per layer, the table on
// stdout and every layer in --report and --report-csv.
TEST(CliTest, SimulateWorkloadWritesPerLayerFigures) {
  const std::string dir = tpumesh::testing::TestTempDir();
  std::ofstream(dir + "/net.csv")
      << "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
         "Conv1, 227, 227, 11, 11, 3, 96, 4,\nConv2, 31, 31, 5, 5, 96, 256, 1,\n";
  Result r = RunTpumesh("simulate --workload " + dir + "/net.csv --devices 1 --dataflow is --report " + dir +
                        "/r.json --report-csv " + dir + "/l.csv");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 layer(s) on 1 emulated v5e device(s), mesh data=1, dataflow is"));
  EXPECT_THAT(r.out, HasSubstr("Conv1 "));
  EXPECT_THAT(r.out, HasSubstr("per-layer CSV: " + dir + "/l.csv"));
  std::ifstream rf(dir + "/r.json");
  const nlohmann::json report = nlohmann::json::parse(rf);
  ASSERT_EQ(report["devices"][0]["layers"].size(), 2u);
  EXPECT_EQ(report["devices"][0]["layers"][1]["layer"], "Conv2");
  EXPECT_EQ(report["devices"][0]["layers"][1]["bound"], "MXU");
  std::ifstream cf(dir + "/l.csv");
  std::string header, row;
  std::getline(cf, header);
  std::getline(cf, row);
  EXPECT_EQ(header.rfind("device,layer,op,type,shape,count,flops,mxu_cycles,", 0), 0u) << header;
  Result dev = RunTpumesh("devices --dataflow is");
  ASSERT_EQ(dev.code, 0) << dev.err;
  EXPECT_THAT(dev.out, HasSubstr("4 MXU 128x128 is @ 1.50 GHz"));
  EXPECT_EQ(row.rfind("0,Conv1,conv2d,conv,\"x[1,3,227,227] w[96,3,11,11] stride 4\",1,", 0), 0u) << row;
}

// simulate --sweep-dataflow: ws / os / is x four VMEM sizes, as a table, as
// JSON, and as an SVG chart; the figures follow the dataflow.
TEST(CliTest, SimulateSweepDataflow) {
  const std::string dir = tpumesh::testing::TestTempDir();
  std::ofstream(dir + "/net.csv") << "Layer, M, N, K,\nfc1, 4096, 1024, 8192,\nfc2, 64, 64, 64,\n";
  Result table = RunTpumesh("simulate --workload " + dir + "/net.csv --devices 1 --sweep-dataflow");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("energy and power are estimates"));
  EXPECT_THAT(table.out, HasSubstr("dataflow  VMEM MiB"));
  Result json = RunTpumesh("simulate --workload " + dir + "/net.csv --devices 1 --sweep-dataflow --json --svg " +
                           dir + "/c.svg");
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json rows = nlohmann::json::parse(json.out);
  ASSERT_EQ(rows.size(), 12u);
  std::map<std::string, double> cycles;
  for (const auto& row : rows) {
    EXPECT_TRUE(row["modelled"].get<bool>());
    EXPECT_TRUE(row["energy_estimated"].get<bool>());
    EXPECT_GT(row["energy_joules"].get<double>(), 0);
    EXPECT_NEAR(row["average_watts"].get<double>(),
                row["energy_joules"].get<double>() / row["modelled_seconds"].get<double>(),
                1e-9 * row["average_watts"].get<double>());
    cycles[row["dataflow"].get<std::string>()] = row["mxu_cycles"].get<double>();
  }
  EXPECT_EQ(rows[0]["dataflow"], "ws");
  EXPECT_EQ(rows[0]["vmem_mib"], 16);
  // fc1's weights are 16 MiB in bf16: at 16 MiB of VMEM ws reads A twice.
  EXPECT_GT(rows[0]["hbm_bytes"].get<double>(), rows[3]["hbm_bytes"].get<double>());
  EXPECT_EQ(cycles.size(), 3u);
  EXPECT_NE(cycles["ws"], cycles["os"]);
  std::ifstream svg(dir + "/c.svg");
  const std::string chart((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_EQ(chart.rfind("<svg", 0), 0u);
  EXPECT_THAT(chart, HasSubstr("energy"));
  EXPECT_THAT(chart, HasSubstr("</svg>"));
  // A workload whose file name is not UTF-8: the chart names it escaped,
  // and stays well-formed XML (it held the raw byte).
  std::ofstream(dir + "/n\xff.csv") << "Layer, M, N, K,\nfc1, 64, 64, 64,\n";
  Result odd = RunTpumesh("simulate --workload '" + dir + "/n\xff.csv' --devices 1 --sweep-dataflow --svg " + dir +
                          "/odd.svg");
  ASSERT_EQ(odd.code, 0) << odd.err;
  std::ifstream odd_svg(dir + "/odd.svg");
  const std::string odd_chart((std::istreambuf_iterator<char>(odd_svg)), std::istreambuf_iterator<char>());
  EXPECT_EQ(odd_chart.find('\xff'), std::string::npos);
  EXPECT_THAT(odd_chart, HasSubstr("n\\xff.csv"));
  // Here all of it ASCII: printable characters and newlines.
  EXPECT_TRUE(std::all_of(odd_chart.begin(), odd_chart.end(), [](char c) { return c == '\n' || (c >= 0x20 && c < 0x7f); }));
}

TEST(CliTest, BenchPrintsHostRateAndModelledTime) {
  Result mm = RunTpumesh("bench matmul --m 64 --n 48 --k 80 --repeats 1 --peak 100");
  ASSERT_EQ(mm.code, 0) << mm.err;
  EXPECT_THAT(mm.out, HasSubstr("matmul 64x48x80 (MxNxK)"));
  EXPECT_THAT(mm.out, HasSubstr("GFLOP/s"));
  // The fraction is of the host's best peak, here the one --peak assumes.
  EXPECT_THAT(mm.out, HasSubstr("of the host's best peak, 100.0 GFLOP/s ("));
  EXPECT_THAT(mm.out, HasSubstr(", assumed (--peak))"));
  EXPECT_THAT(mm.out, HasSubstr("modelled on one v5e device (4 MXU 128x128 at 1.50 GHz"));
  Result shape = RunTpumesh("bench matmul --shape 64,48,80 --dtype f32 --precision highest --threads 1 "
                            "--repeats 1 --peak 100");
  ASSERT_EQ(shape.code, 0) << shape.err;
  // highest: Highway's f32 kernel, against the f32 FMA peak.
  EXPECT_THAT(shape.out, HasSubstr("matmul 64x48x80 (MxNxK), f32 operands, precision highest, provider highway "
                                   "(Highway target "));
  EXPECT_THAT(shape.out, HasSubstr("of the host's f32 FMA peak, 100.0 GFLOP/s ("));
  // BLIS on request, named by the configuration libblis selected.
  Result blis = RunTpumesh("bench matmul --shape 64,48,80 --dtype f32 --precision highest --provider blis "
                           "--threads 1 --repeats 1 --peak 100");
  ASSERT_EQ(blis.code, 0) << blis.err;
  EXPECT_THAT(blis.out, HasSubstr("precision highest, provider blis (BLIS configuration "));
  Result conv = RunTpumesh("bench conv --shape 1,8,10,10,16,3 --repeats 1 --peak 100 --chip v2");
  ASSERT_EQ(conv.code, 0) << conv.err;
  EXPECT_THAT(conv.out, HasSubstr("conv2d N=1 C_in=8 10x10 -> C_out=16, 3x3 kernel, stride 1, pad 1"));
  EXPECT_THAT(conv.out, HasSubstr("modelled on one v2 device (1 MXU 128x128"));
  EXPECT_THAT(conv.out, HasSubstr("packing the weight once (plan time)"));
  Result conv_hwy = RunTpumesh("bench conv --shape 2,5,9,7,6,3,2 --provider highway --precision high --repeats 1 "
                               "--peak 100");
  ASSERT_EQ(conv_hwy.code, 0) << conv_hwy.err;
  EXPECT_THAT(conv_hwy.out, HasSubstr("conv2d N=2 C_in=5 9x7 -> C_out=6, 3x3 kernel, stride 2, pad 1, precision "
                                      "high, provider highway"));
  Result att = RunTpumesh("bench attention --shape 1,16,16,2,8 --repeats 1 --peak 100");
  ASSERT_EQ(att.code, 0) << att.err;
  EXPECT_THAT(att.out, HasSubstr("attention B=1 Lq=16 Lk=16 heads=2 head_dim=8"));
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"bench matmul --m 0", "--m, --n and --k must be >= 1 and at most 1048576, got 0,2048,2048"},
           {"bench matmul --n 1048577", "--m, --n and --k must be >= 1 and at most 1048576, got 2048,1048577,2048"},
           {"bench matmul --shape 1,1,-1", "--shape '1,1,-1'"},
           {"bench matmul --provider mkl", "--provider must be auto, highway, bf16, blis or amx"},
           {"bench matmul --precision fast", "--precision must be default, high or highest"},
           {"bench conv --shape 1,2,3", "--shape '1,2,3': expected N,C_in,H,W,C_out,kernel"},
           {"bench matmul --provider bf16 --precision highest", "bf16"},
           {"bench conv --provider bf16 --precision highest", "bf16"},
           {"bench conv --provider cudnn", "--provider must be auto, highway, bf16, blis or amx"},
           {"bench matmul --shape 64,48", "--shape '64,48': expected M,N,K"},
           {"bench matmul --dtype f16", "--dtype must be bf16 or f32"},
       }) {
    Result r = RunTpumesh(args + " --repeats 1 --peak 100");
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_THAT(r.err, HasSubstr(message)) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
  // The peak probe alone: a line per path (BenchRunsOnEverySimdPathTheHostHas
  // checks each), and the provider choice where vdpbf16ps runs.
  Result peak = RunTpumesh("bench peak --threads 1 --seconds 0.02");
  ASSERT_EQ(peak.code, 0) << peak.err;
  EXPECT_THAT(peak.out,
              ::testing::ContainsRegex("best peak: [0-9.]+ GFLOP/s \\((baseline|avx2|avx512|avx512bf16|amx)\\)"));
  // The provider kAuto resolves to at default/high, with why: on an
  // avx512bf16 host the measured vdpbf16ps / FMA ratio; on an AMX host amx
  // with its self-check passed, or the one below and the self-check's note.
  EXPECT_THAT(peak.out, ::testing::ContainsRegex("the matmul's auto provider at default/high: (bf16|highway|amx)"));
  if (peak.out.find("host path avx512bf16") != std::string::npos) {
    EXPECT_THAT(peak.out, ::testing::ContainsRegex("the matmul's auto provider at default/high: (bf16|highway) "
                                                   "\\(vdpbf16ps / FMA flops on one thread: [0-9.]+\\)"));
  }
  if (peak.out.find("host path amx") != std::string::npos) {
    EXPECT_THAT(peak.out, ::testing::ContainsRegex("auto provider at default/high: (amx \\(AMX tiles, self-check "
                                                   "passed\\)|(bf16|highway) .*amx )"));
  }
  // Counts outside their documented ranges: the command line is wrong (2).
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"bench matmul --repeats 0", "--repeats: Value 0 not in range 1 to 10000"},
           {"bench matmul --threads -1", "--threads: Value -1 not in range 0 to 1024"},
           {"bench matmul --threads 100000", "--threads: Value 100000 not in range 0 to 1024"},
       }) {
    Result r = RunTpumesh(args + " --peak 100");
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_THAT(r.err, HasSubstr(message)) << args;
  }
  Result both = RunTpumesh("bench matmul --m 8 --shape 8,8,8");
  EXPECT_EQ(both.code, 2);
  EXPECT_THAT(both.err, HasSubstr("excludes"));
  EXPECT_EQ(std::count(both.err.begin(), both.err.end(), '\n'), 1) << both.err;
}

}  // namespace
