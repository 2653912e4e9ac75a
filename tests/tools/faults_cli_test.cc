// Faults and hostile paths, as a user meets them: a full disk (a file size
// limit makes every write past it fail, as ENOSPC does) during generate,
// eval, init and convert gives one line, exit 1, no crash, and no output or
// temporary file; outputs that would overwrite an input or another output,
// FIFOs and missing folders are refused before the run.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hdf5.h"
#include "io/atomic_file.h"
#include "io/h5io.h"
#include "mesh/array.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using tpumesh::testing::ListDir;
using tpumesh::testing::RunTpumesh;


// The tiny model file, made once (tests/testing/cli.h).
std::string TinyModel() { return tpumesh::testing::TinyModelFile(); }

// generate with images, latents and a report under limits that stop it at
// the first image, at the latents and at the report: never a crash, one
// line, exit 1, and nothing of the run left (its output folder included).
TEST(FaultsCliTest, FullDiskDuringGenerateLeavesNothing) {
  const std::string dir = tpumesh::testing::TestTempDir();
  for (const int64_t limit : {2048, 16384, 24576}) {
    const std::string out = dir + "/out", latents = dir + "/lat.h5", report = dir + "/r.json";
    auto r = RunTpumesh("generate --model " + TinyModel() + " -p x --steps 2 --devices 1 -q -o " + out +
                            " --save-latents " + latents + " --report " + report,
                        limit);
    EXPECT_EQ(r.code, 1) << "limit " << limit << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("tpumesh: error: cannot write")) << limit;
    EXPECT_THAT(r.err, HasSubstr("File too large")) << limit;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_THAT(r.out, Not(HasSubstr("wrote"))) << limit;
    EXPECT_TRUE(ListDir(dir).empty()) << limit << ": " << ::testing::PrintToString(ListDir(dir));
  }
  // With room, the same command writes everything.
  auto ok = RunTpumesh("generate --model " + TinyModel() + " -p x --steps 2 --devices 1 -q -o " + dir +
                       "/out --save-latents " + dir + "/lat.h5 --report " + dir + "/r.json");
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"lat.h5", "out", "r.json"}));
  EXPECT_EQ(ListDir(dir + "/out"), (std::vector<std::string>{"grid.png", "image_00.png"}));
}

TEST(FaultsCliTest, FullDiskDuringEvalLeavesNothing) {
  const std::string dir = tpumesh::testing::TestTempDir();
  {
    auto w = tpumesh::pipeline::H5Writer::Create(dir + "/in.h5");
    ASSERT_TRUE(w.ok());
    tpumesh::mesh::Array ids = tpumesh::mesh::Array::Host(tpumesh::mesh::DType::kI32, {2, 77});
    ASSERT_TRUE((*w)->Write("input_ids", ids).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  auto r = RunTpumesh("eval --model " + TinyModel() + " --component text_encoder --input " + dir +
                          "/in.h5 --output " + dir + "/out.h5",
                      4096);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cannot write " + dir + "/out.h5: File too large"));
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"in.h5"});
  // The output may not be an input.
  r = RunTpumesh("eval --model " + TinyModel() + " --component text_encoder --input " + dir + "/in.h5 --output " +
                 dir + "/in.h5");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("--output " + dir + "/in.h5: the same file as --input (an input is never overwritten)"));
}

TEST(FaultsCliTest, FullDiskDuringInitAndConvertNeverCrashes) {
  const std::string dir = tpumesh::testing::TestTempDir();
  for (const int64_t limit : {2048, 102400, 1048576}) {
    auto r = RunTpumesh("init -q -o " + dir + "/m.h5", limit);
    EXPECT_EQ(r.code, 1) << "init, limit " << limit << ": " << r.err;  // -1: a crash
    EXPECT_THAT(r.err, HasSubstr("disk full")) << limit;
    EXPECT_TRUE(ListDir(dir).empty()) << ::testing::PrintToString(ListDir(dir));
  }
  // A diffusers folder: tiny-sd-b's components, the tiny tokenizer, PNDM.
  const std::string src = tpumesh::testing::ProcessTempDir() + "/sd_b";
  fs::remove_all(src);
  fs::create_directories(src + "/scheduler");
  const std::string data = std::string(TPUMESH_SOURCE_DIR) + "/tests/data/tiny-sd-b";
  for (const char* c : {"text_encoder", "unet", "vae"}) fs::create_directory_symlink(data + "/" + c, src + "/" + c);
  fs::create_directory_symlink(std::string(TPUMESH_SOURCE_DIR) + "/text/data/tiny-tokenizer", src + "/tokenizer");
  std::ofstream(src + "/scheduler/scheduler_config.json")
      << R"({"_class_name": "PNDMScheduler", "beta_end": 0.012, "beta_schedule": "scaled_linear",
             "beta_start": 0.00085, "num_train_timesteps": 1000, "set_alpha_to_one": false,
             "skip_prk_steps": true, "steps_offset": 1})";
  std::ofstream(src + "/model_index.json") << R"({"_class_name": "StableDiffusionPipeline"})";
  for (const int64_t limit : {2048, 65536}) {
    auto c = RunTpumesh("convert " + src + " -q -o " + dir + "/c.h5", limit);
    EXPECT_EQ(c.code, 1) << "convert, limit " << limit << ": " << c.err;
    EXPECT_THAT(c.err, HasSubstr(dir + "/c.h5: cannot write")) << limit;
    EXPECT_TRUE(ListDir(dir).empty()) << ::testing::PrintToString(ListDir(dir));
  }
  auto c = RunTpumesh("convert " + src + " -q -o " + dir + "/c.h5");
  EXPECT_EQ(c.code, 0) << c.err;
}

// Each output path checked before the run: no output may be an input or
// another output, a FIFO is never written, a missing folder is named.
TEST(FaultsCliTest, OutputPathsAreCheckedBeforeTheRun) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string model = TinyModel();
  const std::string gen = "generate --model " + model + " -p x --steps 1 --devices 1 -q -o " + dir + "/out ";
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--report " + model, "--report " + model + ": the same file as --model (an input is never overwritten)"},
           {"--save-latents " + model, "the same file as --model"},
           {"--report " + dir + "/r.json --trace " + dir + "/r.json",
            "--trace " + dir + "/r.json: the same file as --report (two outputs cannot share a file)"},
           {"--report " + dir + "/fifo", "--report " + dir + "/fifo: not a regular file"},
           {"--trace " + dir + "/no/such/t.json", "--trace " + dir + "/no/such/t.json: cannot write there"},
           {"--save-latents " + dir, "is a directory"},
       }) {
    auto r = RunTpumesh(gen + c.args);
    EXPECT_EQ(r.code, 1) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
    EXPECT_THAT(r.out, Not(HasSubstr("run 1"))) << c.args;  // refused before the run
    EXPECT_FALSE(fs::exists(dir + "/out")) << c.args;
  }
  // A prompts file inside the image folder under an image's name.
  fs::create_directories(dir + "/imgs");
  { std::ofstream(dir + "/imgs/image_00.png") << "a red fox\n"; }
  auto r = RunTpumesh("generate --model " + model + " --prompts-file " + dir + "/imgs/image_00.png --steps 1 --devices 1 -q -o " +
                      dir + "/imgs");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("in the image folder, where generate writes image_00.png"));
}

// Values that used to be taken silently or named wrongly: one line naming
// the flag or field, exit 1 (2 for a value the command line's own checks
// refuse), and no image written.
TEST(FaultsCliTest, BadValuesAreRefusedWithOneLine) {
  const std::string dir = tpumesh::testing::TestTempDir();
  std::ofstream(dir + "/big.json")
      << R"({"name":"big","device_kind":"k","tensorcores_per_chip":1,"devices_per_chip":1,"mxus_per_tensorcore":4,
             "mxu_rows":128,"mxu_cols":128,"clock_hz":1.5e9,"peak_bf16_flops":1.97e14,"hbm_bytes":1e30,
             "hbm_bandwidth":8.19e11,"vmem_bytes":134217728,"ici_ports":4,"ici_link_bandwidth":5e10,
             "ici_hop_latency_s":1e-6,"torus_wrap_size":16,"default_topology":[2,4]})";
  std::ofstream(dir + "/w.csv") << "Layer, M, N, K,\nfc1, 64, 64, 64,\nfc2, 64, sixty, 64,\n";
  std::ofstream(dir + "/w.json") << R"({"layers": [{"name": "s", "op": "psum", "axis": "model", "bytes": 64}]})";
  std::ofstream(dir + "/tiny_hbm.json")
      << R"({"name":"tiny_hbm","device_kind":"k","tensorcores_per_chip":1,"devices_per_chip":1,"mxus_per_tensorcore":4,
             "mxu_rows":128,"mxu_cols":128,"clock_hz":1.5e9,"peak_bf16_flops":1.97e14,"hbm_bytes":1,
             "hbm_bandwidth":8.19e11,"vmem_bytes":134217728,"ici_ports":4,"ici_link_bandwidth":5e10,
             "ici_hop_latency_s":1e-6,"torus_wrap_size":16,"default_topology":[2,4]})";
  fs::create_directory_symlink(dir + "/missing", dir + "/dangling");
  const std::string gen = "generate --model " + TinyModel() + " -p x --steps 1 --devices 1 -q ";
  const std::string out = " -o " + dir + "/out";
  struct Case {
    std::string args;
    int code;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {gen + "--seed -1" + out, 1, "--seed '-1': expected a whole number from 0 to 18446744073709551615"},
           {gen + "--seed 18446744073709551616" + out, 1, "--seed '18446744073709551616': expected a whole number"},
           {gen + "--height 0" + out, 2, "--height: Value 0 not in range"},
           {gen + "--width -64" + out, 2, "--width: Value -64 not in range"},
           {gen + "--scheduler-opt beta_start=-1" + out, 1, "the noise schedule has beta[0] = "},
           {gen + "--scheduler-opt beta_schedule=linear --scheduler-opt beta_end=1.5" + out, 1, "outside [0, 1)"},
           {gen + "--scheduler-opt num_train_timesteps=1000000000" + out, 1, "must be from 1 to 100000"},
           {gen + "-o " + dir + "/dangling", 1, "is a symlink to " + dir + "/missing, which does not exist"},
           {"bench matmul --peak 0", 2, "--peak: Value 0 is not a peak: give a positive number of GFLOP/s"},
           {"devices --mesh x2", 1, "'x2' is neither NAME=SIZE nor a size"},
           {"devices --mesh data=x", 1, "axis 'data' needs a whole size >= 1, got 'x'"},
           {"devices --chip " + dir + "/big.json", 1, "field 'hbm_bytes' is 1e+30, out of range"},
           {"simulate --arch tiny --guidance nan", 1, "--guidance must be a finite number"},
           {"simulate --workload " + dir + "/w.csv", 1, "w.csv:3:3: n is 'sixty', not an integer from 1 to"},
           {"simulate --workload " + dir + "/w.json --devices 2", 1, "w.json: layer 's': unknown mesh axis 'model'"},
           {"simulate --workload " + dir + "/missing.csv", 1, "missing.csv"},
           {"simulate --workload " + dir + "/w.csv --arch tiny", 1, "give it without --arch or --model"},
           {"simulate --workload " + dir + "/w.json --dataflow rs", 1, "--dataflow: dataflow 'rs': ws (weight"},
           {"simulate --arch tiny --vmem-mib -5", 2,
            "--vmem-mib: Value -5 is neither 0 (none modelled) nor from 1/1024 (1 KiB) to 1048576 MiB"},
           {"simulate --arch tiny --vmem-mib 3e6", 2,
            "--vmem-mib: Value 3e6 is neither 0 (none modelled) nor from 1/1024 (1 KiB) to 1048576 MiB"},
           {"simulate --arch tiny --attention splash", 2, "--attention: splash not in {flash,standard}"},
           {"simulate --arch tiny --sweep-dataflow --dataflow os", 1,
            "--sweep-dataflow tries every dataflow and VMEM size: give neither --dataflow nor --vmem-mib"},
           {"simulate --arch tiny --sweep-dataflow --sweep-mesh", 1, "one sweep at a time"},
           {"simulate --arch tiny --sweep-dataflow --report " + dir + "/r.json", 1, "are for one run"},
           {"simulate --arch tiny --svg " + dir + "/c.svg", 1, "--json and --svg go with --sweep-mesh or"},
           // A chip with 1 byte of HBM: simulate refuses it as generate does.
           {"simulate --arch tiny --chip " + dir + "/tiny_hbm.json", 1, "out of HBM"},
           {gen + "--chip " + dir + "/tiny_hbm.json" + out, 1, "out of HBM"},
           // Absurd sizes are refused before anything is allocated.
           {"simulate --arch sd15 --batch-per-device 100000", 1, "--batch-per-device 100000: at most 1024 images"},
           {"simulate --arch sd15 --height 65536", 1, "--height 65536: at most 16384 pixels"},
           {"simulate --arch sd15 --steps 1000000000", 1, "--steps 1000000000: at most 10000"},
           {"simulate --arch tiny --devices 100000", 2, "--devices: Value 100000 is not from 1 to 1024"},
           {"simulate --arch tiny --mesh data=2000000000,model=4", 1, "more than 1024 devices"},
           {"devices --topology 100x100", 1, "--topology 100x100: more than 1024 devices"},
           {"generate -p x --devices 5000 -o " + dir + "/out", 2, "--devices: Value 5000 is not from 1 to 1024"},
       }) {
    auto r = RunTpumesh(c.args);
    EXPECT_EQ(r.code, c.code) << c.args << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_FALSE(fs::exists(dir + "/out")) << c.args;
  }
  // The largest seed is a seed.
  auto r = RunTpumesh(gen + "--seed 18446744073709551615" + out);
  EXPECT_EQ(r.code, 0) << r.err;
}

// Inputs that would hang or allocate without bound: a FIFO or a device
// given as a file, an HDF5 file that declares a huge dataset it does not
// store. One line each, exit 1, at once.
TEST(FaultsCliTest, HostileInputsAreRefusedAtOnce) {
  const std::string dir = tpumesh::testing::TestTempDir();
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  // latents [100000, 4, 1024, 1024] f32 declared (1.6 TB), nothing stored.
  {
    const hid_t f = H5Fcreate((dir + "/huge.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[4] = {100000, 4, 1024, 1024};
    const hid_t space = H5Screate_simple(4, dims, nullptr);
    const hid_t ds = H5Dcreate2(f, "latents", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t ids = H5Dcreate2(f, "input_ids", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ids);
    H5Dclose(ds);
    H5Sclose(space);
    H5Fclose(f);
  }
  const std::string model = TinyModel();
  const std::string gen = "generate -p x --steps 1 --devices 1 -q -o " + dir + "/out ";
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {gen + "--model " + dir + "/fifo", dir + "/fifo: not a regular file"},
           {gen + "--model " + model + " --latents " + dir + "/fifo", "--latents: " + dir + "/fifo: not a regular file"},
           {"generate --prompts-file " + dir + "/fifo --steps 1 -q -o " + dir + "/out", "--prompts-file: " + dir + "/fifo: not a regular file"},
           {"generate --prompts-file /dev/urandom --steps 1 -q -o " + dir + "/out", "/dev/urandom: not a regular file"},
           {"devices --chip " + dir + "/fifo", "not a regular file"},
           {gen + "--model " + model + " --latents " + dir + "/huge.h5",
            "dataset 'latents' declares 419430400000 values but stores 0 bytes"},
           {"eval --model " + model + " --component text_encoder --input " + dir + "/huge.h5 --output " + dir + "/o.h5",
            "dataset 'input_ids' declares 419430400000 values"},
           {"eval --model " + model + " --component text_encoder --input " + dir + "/fifo --output " + dir + "/o.h5",
            "not a regular file"},
       }) {
    auto r = RunTpumesh(c.args);
    EXPECT_EQ(r.code, 1) << c.args << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_FALSE(fs::exists(dir + "/out")) << c.args;
  }
}

// init (and every writer of a model file) killed by SIGTERM or SIGINT
// mid-write: the process dies of the signal and leaves no temporary file.
TEST(FaultsCliTest, KilledWriterLeavesNoTemporaryFile) {
  for (const int sig : {SIGTERM, SIGINT}) {
    const std::string dir = tpumesh::testing::TestTempDir() + "/" + std::to_string(sig);
    fs::create_directories(dir);
    const std::string out = dir + "/m.h5";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      execl(TPUMESH_BIN, TPUMESH_BIN, "init", "--arch", "sd15", "-q", "-o", out.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Until the temporary model file exists and is growing.
    bool started = false;
    for (int i = 0; i < 600 && !started; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      for (const std::string& f : ListDir(dir)) started |= f.rfind(tpumesh::kTemporaryPrefix, 0) == 0;
    }
    EXPECT_TRUE(started);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "signal " << sig;
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_TRUE(ListDir(dir).empty()) << "signal " << sig << ": " << ::testing::PrintToString(ListDir(dir));
  }
}

// NaN or Inf in the inputs: refused with the place named, not a black image.
TEST(FaultsCliTest, NonFiniteInputsAreRefused) {
  const std::string dir = tpumesh::testing::TestTempDir();
  // Latents with one NaN (the tiny model at 32x32: 1 device, 16x16 latents).
  {
    auto w = tpumesh::pipeline::H5Writer::Create(dir + "/nan.h5");
    ASSERT_TRUE(w.ok());
    tpumesh::mesh::Array l = tpumesh::mesh::Array::Host(tpumesh::mesh::DType::kF32, {1, 4, 16, 16});
    l.mutable_data<float>()[5] = std::nanf("");
    ASSERT_TRUE((*w)->Write("latents", l).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  auto r = RunTpumesh("generate --model " + TinyModel() + " -p x --steps 1 --devices 1 -q -o " + dir +
                      "/out --latents " + dir + "/nan.h5");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("'latents' holds nan at index 5 (every value must be finite)"));
  // A model file whose weight holds an Inf.
  const std::string bad = dir + "/inf.h5";
  fs::copy_file(TinyModel(), bad);
  {
    const hid_t f = H5Fopen(bad.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t ds = H5Dopen2(f, "unet/conv_in.weight", H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    const hid_t space = H5Dget_space(ds);
    std::vector<float> v(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
    ASSERT_GE(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
    v[3] = INFINITY;
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
    H5Sclose(space);
    H5Dclose(ds);
    H5Fclose(f);
  }
  r = RunTpumesh("generate --model " + bad + " -p x --steps 1 --devices 1 -q -o " + dir + "/out");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tensor unet/conv_in.weight holds NaN or Inf at index 3"));
  EXPECT_FALSE(fs::exists(dir + "/out"));
}

// A diffusers folder tiny-sd-b can make, with one part replaced.
std::string SdBFolder(const std::string& dir, const std::string& component = "", const std::string& file = "",
                      const std::string& text = "") {
  const std::string data = std::string(TPUMESH_SOURCE_DIR) + "/tests/data/tiny-sd-b";
  const std::string tok = std::string(TPUMESH_SOURCE_DIR) + "/text/data/tiny-tokenizer";
  fs::create_directories(dir + "/scheduler");
  for (const std::string c : {"text_encoder", "unet", "vae", "tokenizer"}) {
    const std::string src = c == "tokenizer" ? tok : data + "/" + c;
    if (c != component) {
      fs::create_directory_symlink(src, dir + "/" + c);
      continue;
    }
    fs::create_directories(dir + "/" + c);
    for (const auto& e : fs::directory_iterator(src))
      if (e.path().filename() != file) fs::create_symlink(e.path(), dir + "/" + c + "/" + e.path().filename().string());
    std::ofstream(dir + "/" + c + "/" + file) << text;
  }
  std::ofstream(dir + "/scheduler/scheduler_config.json")
      << R"({"_class_name": "PNDMScheduler", "beta_end": 0.012, "beta_schedule": "scaled_linear",
             "beta_start": 0.00085, "num_train_timesteps": 1000, "set_alpha_to_one": false,
             "skip_prk_steps": true, "steps_offset": 1})";
  std::ofstream(dir + "/model_index.json") << R"({"_class_name": "StableDiffusionPipeline"})";
  return dir;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// convert refuses a folder generate would refuse, before writing anything:
// a config value of the wrong type, channels or layers that disagree with
// the weights, a broken vocabulary or merges list. A converted file runs.
TEST(FaultsCliTest, ConvertRefusesFoldersThatWouldNotRun) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string data = std::string(TPUMESH_SOURCE_DIR) + "/tests/data/tiny-sd-b";
  std::string unet = ReadAll(data + "/unet/config.json");
  auto with = [&](const std::string& key, const std::string& value) {
    std::string t = unet;
    const size_t k = t.find("\"" + key + "\":");
    const size_t v = k + key.size() + 3, end = t.find_first_of(",\n", v);
    return t.replace(v, end - v, " " + value);
  };
  struct Case {
    std::string name, component, file, text, message;
  };
  int n = 0;
  for (const Case& c : std::vector<Case>{
           {"type", "unet", "config.json", with("in_channels", "\"four\""), "'in_channels' must be an integer"},
           {"channels", "unet", "config.json", with("in_channels", "8"), "tensor conv_in.weight has shape"},
           {"layers", "unet", "config.json", with("layers_per_block", "3"), "no tensor down_blocks.0.resnets.1"},
           {"vocab", "tokenizer", "vocab.json", "{\"a\": ", "vocab"},
           {"merges", "tokenizer", "merges.txt", "#version: 0.2\ni n g\n", "merges.txt: line 2 has 3 fields, want two symbols"},
       }) {
    const std::string src = SdBFolder(dir + "/" + c.name, c.component, c.file, c.text);
    auto r = RunTpumesh("convert " + src + " -q -o " + dir + "/m" + std::to_string(n++) + ".h5");
    EXPECT_EQ(r.code, 1) << c.name << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.name;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.name << ": " << r.err;
  }
  for (int i = 0; i < n; ++i) EXPECT_FALSE(fs::exists(dir + "/m" + std::to_string(i) + ".h5"));
  // Tensors: one of the wrong dtype, one holding a NaN (the UNet's
  // safetensors rewritten: header dtype, or the first value).
  {
    const std::string st = ReadAll(data + "/unet/diffusion_pytorch_model.safetensors");
    uint64_t len = 0;
    std::memcpy(&len, st.data(), 8);
    nlohmann::json header = nlohmann::json::parse(st.substr(8, len));
    const uint64_t begin = header["conv_in.weight"]["data_offsets"][0].get<uint64_t>();
    for (const std::string kind : {"dtype", "nan"}) {
      std::string out = st;
      if (kind == "dtype") {
        nlohmann::json h = header;
        h["conv_in.weight"]["dtype"] = "I32";
        std::string text = h.dump();
        text.resize(len, ' ');  // the same length: the data stays in place
        out.replace(8, len, text);
      } else {
        const float nan = std::nanf("");
        std::memcpy(out.data() + 8 + len + begin, &nan, 4);
      }
      const std::string src = SdBFolder(dir + "/" + kind, "unet", "diffusion_pytorch_model.safetensors", out);
      auto r = RunTpumesh("convert " + src + " -q -o " + dir + "/" + kind + ".h5");
      EXPECT_EQ(r.code, 1) << kind << ": " << r.err;
      EXPECT_THAT(r.err, HasSubstr(kind == "dtype" ? "tensor conv_in.weight is I32, not a float"
                                                   : "tensor conv_in.weight holds NaN or Inf at index 0"))
          << kind;
      EXPECT_FALSE(fs::exists(dir + "/" + kind + ".h5")) << kind;
    }
  }
  // init --tokenizer checks the tokenizer files as generate will.
  fs::create_directories(dir + "/tok");
  fs::copy_file(std::string(TPUMESH_SOURCE_DIR) + "/text/data/tiny-tokenizer/vocab.json", dir + "/tok/vocab.json");
  std::ofstream(dir + "/tok/merges.txt") << "#version: 0.2\ni n g\n";
  auto init = RunTpumesh("init -q --tokenizer " + dir + "/tok -o " + dir + "/i.h5");
  EXPECT_EQ(init.code, 1) << init.err;
  EXPECT_THAT(init.err, HasSubstr("merges.txt: line 2 has 3 fields"));
  EXPECT_FALSE(fs::exists(dir + "/i.h5"));
  // The folder as it is converts, and the file runs.
  const std::string ok = SdBFolder(dir + "/ok");
  ASSERT_EQ(RunTpumesh("convert " + ok + " -q -o " + dir + "/ok.h5").code, 0);
  auto r = RunTpumesh("generate --model " + dir + "/ok.h5 -p x --steps 1 --devices 1 -q -o " + dir + "/img");
  EXPECT_EQ(r.code, 0) << r.err;
}

// ---- Issue 28: the outputs of every command (io/run_files.h
// CheckRunFiles, io/atomic_file.h). ----

// The bytes and kind of every entry of `dir`, to show that a refusal changed
// nothing there.
std::vector<std::string> Snapshot(const std::string& dir) {
  std::vector<std::string> s;
  for (const std::string& name : ListDir(dir)) {
    struct stat st;
    if (lstat((dir + "/" + name).c_str(), &st) != 0) st.st_mode = 0;
    std::string kind = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" : S_ISFIFO(st.st_mode) ? "fifo"
                                                  : S_ISCHR(st.st_mode) ? "chr" : S_ISSOCK(st.st_mode) ? "sock" : "other";
    s.push_back(name + " " + kind + " " + std::to_string(st.st_ino) + " " +
                (S_ISREG(st.st_mode) ? std::to_string(std::hash<std::string>()(ReadAll(dir + "/" + name))) : ""));
  }
  return s;
}

// Every command's outputs, refused before any work when an output is a
// device node, FIFO, socket, one of the command's inputs (model, workload,
// chip file, eval's --input, convert's folder), another output or one of
// generate's image names (image_NN.png, grid.png; a folder or FIFO there
// too): exit 1, one line naming the flag, and the folder exactly as it was.
// Before issue 28 simulate replaced /dev/null, its model, workload and chip
// file; generate and eval wrote over --chip; generate wrote its report over
// out/grid.png and failed on a grid.png folder after writing the images.
TEST(FaultsCliTest, EveryOutputOfEveryCommandIsCheckedBeforeTheRun) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string model = TinyModel();
  fs::copy_file(model, dir + "/m.h5");
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  // A character device like /dev/null (1, 3), made here, never the host's.
  const bool root = geteuid() == 0;
  if (root) {
    ASSERT_EQ(mknod((dir + "/null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  }
  {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string sock = dir + "/sock";
    ASSERT_LT(sock.size(), sizeof addr.sun_path);
    std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    close(fd);
  }
  std::ofstream(dir + "/w.csv") << "Layer name,IFMAP Height,IFMAP Width,Filter Height,Filter Width,Channels,Num Filter,"
                                   "Strides,\nconv1,8,8,3,3,4,8,1,\n";
  ASSERT_EQ(RunTpumesh("devices --chip v5e --json > " + dir + "/chip.json").code, 0);
  {
    auto w = tpumesh::pipeline::H5Writer::Create(dir + "/in.h5");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write("input_ids", tpumesh::mesh::Array::Host(tpumesh::mesh::DType::kI32, {1, 77})).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  fs::create_directories(dir + "/imgs");
  std::ofstream(dir + "/imgs/image_00.png") << "an image of an earlier run";
  fs::create_directories(dir + "/dirgrid/grid.png");
  fs::create_directories(dir + "/fifoimg");
  ASSERT_EQ(mkfifo((dir + "/fifoimg/image_00.png").c_str(), 0600), 0);
  const std::string src = SdBFolder(dir + "/sd_b");
  const std::string sim = "simulate --arch tiny --steps 1 ";
  const std::string gen = "generate --model " + dir + "/m.h5 -p x --steps 1 --devices 1 -q ";
  const std::string eval = "eval --model " + dir + "/m.h5 --component text_encoder --input " + dir + "/in.h5 ";
  const std::string d = dir + "/";
  struct Case {
    std::string args, message;
  };
  std::vector<Case> cases = {
      {sim + "--report " + d + "fifo", "--report " + d + "fifo: not a regular file (a FIFO, device or socket"},
      {sim + "--report-csv " + d + "sock", "--report-csv " + d + "sock: not a regular file"},
      {"simulate --model " + d + "m.h5 --steps 1 --report " + d + "m.h5",
       "--report " + d + "m.h5: the same file as --model (an input is never overwritten)"},
      {"simulate --workload " + d + "w.csv --report-csv " + d + "w.csv",
       "--report-csv " + d + "w.csv: the same file as --workload (an input is never overwritten)"},
      {sim + "--chip " + d + "chip.json --report " + d + "chip.json",
       "--report " + d + "chip.json: the same file as --chip (an input is never overwritten)"},
      {sim + "--report " + d + "r.json --trace " + d + "./r.json",
       "--trace " + d + "./r.json: the same file as --report (two outputs cannot share a file)"},
      {"simulate --model " + d + "m.h5 --steps 1 --sweep-mesh --devices 2 --svg " + d + "m.h5",
       "--svg " + d + "m.h5: the same file as --model"},
      {sim + "--sweep-dataflow --svg " + d + "fifo", "--svg " + d + "fifo: not a regular file"},
      {gen + "-o " + d + "out --chip " + d + "chip.json --report " + d + "chip.json",
       "--report " + d + "chip.json: the same file as --chip"},
      {gen + "-o " + d + "imgs --report " + d + "imgs/grid.png",
       "--report " + d + "imgs/grid.png: in the image folder, where generate writes grid.png"},
      {gen + "-o " + d + "imgs --trace " + d + "imgs/image_00.png",
       "--trace " + d + "imgs/image_00.png: in the image folder, where generate writes image_00.png"},
      {gen + "-o " + d + "dirgrid", d + "dirgrid/grid.png: a directory where generate writes an image"},
      {gen + "-o " + d + "fifoimg", d + "fifoimg/image_00.png: not a regular file where generate writes an image"},
      {gen + "-o " + d + "out --save-latents " + d + "sock", "--save-latents " + d + "sock: not a regular file"},
      {gen + "-o " + d + "out --report " + d + "out", "--report " + d + "out: the image folder -o " + d + "out"},
      {gen + "-o " + d + "new/out --save-latents " + d + "new",
       "--save-latents " + d + "new: a folder above the image folder -o " + d + "new/out"},
      {eval + "--output " + d + "o.h5 --chip " + d + "chip.json --report " + d + "chip.json",
       "--report " + d + "chip.json: the same file as --chip"},
      {eval + "--output " + d + "fifo", "--output " + d + "fifo: not a regular file"},
      {eval + "--output " + d + "o.h5 --trace " + d + "o.h5", "--trace " + d + "o.h5: the same file as --output"},
      {"init -q -o " + d + "fifo", "--output " + d + "fifo: not a regular file"},
      {"init -q -o " + d + "sd_b/tokenizer/m.h5 --tokenizer " + d + "sd_b/tokenizer",
       "inside " + d + "sd_b/tokenizer, the folder --tokenizer reads"},
      {"convert " + src + " -q -o " + d + "sock", "--output " + d + "sock: not a regular file"},
      {"convert " + src + " -q -o " + src + "/unet/m.h5", "inside " + src + ", the folder the diffusers folder reads"},
      // unet/ is a symlink to tests/data/tiny-sd-b/unet: the file it reads.
      {"convert " + src + " -q -o " + d + "sd_b/unet/config.json", "inside " + src},
  };
  if (root)
    for (const std::string& c : {sim + "--report", gen + "-o " + d + "out --report", eval + "--output",
                                 std::string("init -q -o"), "convert " + src + " -q -o"})
      cases.push_back({c + " " + d + "null", d + "null: not a regular file (a FIFO, device or socket"});
  const std::vector<std::string> before = Snapshot(dir), imgs = Snapshot(dir + "/imgs");
  for (const Case& c : cases) {
    auto r = RunTpumesh(c.args);
    EXPECT_EQ(r.code, 1) << c.args << ": " << r.err;
    EXPECT_THAT(r.err, StartsWith("tpumesh: error: ")) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_THAT(r.out, Not(HasSubstr("simulated"))) << c.args;  // refused before the run
    EXPECT_EQ(Snapshot(dir), before) << c.args;
    EXPECT_EQ(Snapshot(dir + "/imgs"), imgs) << c.args;
    EXPECT_EQ(ListDir(dir + "/dirgrid"), std::vector<std::string>{"grid.png"}) << c.args;
  }
  // A folder named like no image of the run is not one of its outputs.
  fs::create_directories(dir + "/notes/image_notes.png");
  auto ok = RunTpumesh(gen + "-o " + d + "notes");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ListDir(dir + "/notes"), (std::vector<std::string>{"grid.png", "image_00.png", "image_notes.png"}));
}

// The way docs/errors.md emulates a full disk, `prlimit --fsize`, with
// SIGXFSZ at its default as a shell leaves it: generate on the embedded
// default model, simulate --report and eval --output each end with one line
// and exit 1, leave nothing in the output folder (a folder the run made,
// nested ones too, is removed) and nothing in TMPDIR. Before issue 28 they
// died of SIGXFSZ with temporaries left in both; the default model was
// written to TMPDIR to be loaded.
TEST(FaultsCliTest, AFileSizeLimitIsAWriteErrorInEveryCommand) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string tmp = dir + "/tmp", work = dir + "/work";
  fs::create_directories(tmp);
  fs::create_directories(work);
  // TMPDIR for the runs; GoogleTest's own temporary folder unchanged.
  const std::string gtest_tmp = ::testing::TempDir();
  setenv("TEST_TMPDIR", gtest_tmp.c_str(), 1);
  const char* old_tmpdir = getenv("TMPDIR");
  const std::string saved = old_tmpdir ? old_tmpdir : "";
  setenv("TMPDIR", tmp.c_str(), 1);
  {
    auto w = tpumesh::pipeline::H5Writer::Create(dir + "/in.h5");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write("input_ids", tpumesh::mesh::Array::Host(tpumesh::mesh::DType::kI32, {1, 77})).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  struct Case {
    std::string args;
    int64_t limit;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"generate -p 'a red circle on a blue background' --steps 1 --devices 1 -q -o " + work + "/new/out", 512,
            "cannot write " + work + "/new/out/image_00.png: File too large"},
           {"simulate --arch tiny --steps 1 --report " + work + "/r.json --report-csv " + work + "/r.csv", 4096,
            "cannot write " + work + "/r.json: File too large"},
           {"eval --model " + TinyModel() + " --component text_encoder --input " + dir + "/in.h5 --output " + work +
                "/o.h5",
            4096, "cannot write " + work + "/o.h5: File too large"},
       }) {
    auto r = RunTpumesh(c.args, c.limit);
    EXPECT_EQ(r.code, 1) << c.args << ": " << r.err;  // -1: killed by SIGXFSZ
    EXPECT_THAT(r.err, HasSubstr("tpumesh: error: " + c.message)) << c.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_TRUE(ListDir(work).empty()) << c.args << ": " << ::testing::PrintToString(ListDir(work));
    EXPECT_TRUE(ListDir(tmp).empty()) << c.args << ": " << ::testing::PrintToString(ListDir(tmp));
  }
  // The default model is read from memory: a TMPDIR that does not exist is
  // never needed.
  setenv("TMPDIR", (dir + "/no/such/folder").c_str(), 1);
  auto ok = RunTpumesh("generate -p 'a red circle on a blue background' --steps 1 --devices 1 -q -o " + work + "/out");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ListDir(work + "/out"), (std::vector<std::string>{"grid.png", "image_00.png"}));
  if (old_tmpdir) setenv("TMPDIR", saved.c_str(), 1);
  else unsetenv("TMPDIR");
  unsetenv("TEST_TMPDIR");
  EXPECT_TRUE(ListDir(tmp).empty());
}

// Output names of 250 characters (NAME_MAX is 255): the temporary's name
// does not grow with the target's, so every command writes them. Before
// issue 28 the temporary was the name plus a suffix, past NAME_MAX.
TEST(FaultsCliTest, OutputNamesOf250CharactersAreWritten) {
  const std::string dir = tpumesh::testing::TestTempDir();
  {
    auto w = tpumesh::pipeline::H5Writer::Create(dir + "/in.h5");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write("input_ids", tpumesh::mesh::Array::Host(tpumesh::mesh::DType::kI32, {1, 77})).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  auto name = [&](char c, const std::string& ext) { return dir + "/" + std::string(250 - ext.size(), c) + ext; };
  for (const auto& [args, path] : std::vector<std::pair<std::string, std::string>>{
           {"generate -p x --steps 1 --devices 1 -q -o " + dir + "/out --report ", name('g', ".json")},
           {"simulate --arch tiny --steps 1 --report ", name('s', ".json")},
           {"eval --model " + TinyModel() + " --component text_encoder --input " + dir + "/in.h5 --output ",
            name('e', ".h5")},
           {"init -q -o ", name('i', ".h5")},
       }) {
    auto r = RunTpumesh(args + path);
    EXPECT_EQ(r.code, 0) << args << ": " << r.err;
    EXPECT_TRUE(fs::is_regular_file(path)) << args;
    EXPECT_GT(fs::file_size(path), 0u) << args;
  }
  for (const std::string& f : ListDir(dir)) EXPECT_NE(f.rfind(tpumesh::kTemporaryPrefix, 0), 0u) << f;
}

}  // namespace
