// Flags, model files and the mesh, as a user meets them (issue 28): every
// numeric flag has a documented range and a value outside it is refused in
// one line; a model file's declared sizes are checked before anything is
// allocated for them; the mesh flags agree with the docs (--topology alone
// sets the device count, model=M leaves data the rest).
#include <sys/resource.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hdf5.h"
#include "io/h5io.h"
#include "io/model_file.h"
#include "mesh/array.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using tpumesh::testing::RunTpumesh;

// The tiny model file, made once (tests/testing/cli.h).
std::string TinyModel() { return tpumesh::testing::TinyModelFile(); }

// One "tpumesh: error: ..." line and exit 1.
void ExpectOneLineError(const tpumesh::testing::CliResult& r, const std::string& what) {
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tpumesh: error: "));
  EXPECT_THAT(r.err, HasSubstr(what));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// The tiny model's texts (configs, tokenizer) with `edits` merged into the
// named JSON datasets ({"text_encoder/config.json", {...}}), and `tensors`
// of the tiny model copied: a model file as small as a user can make one.
std::string EditedModel(const std::string& name, const std::map<std::string, nlohmann::json>& edits,
                        bool copy_tensors) {
  namespace p = tpumesh::pipeline;
  auto src = p::ModelFile::Open(TinyModel());
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  const std::string path = tpumesh::testing::TestTempDir() + "/" + name;
  auto w = p::ModelFileWriter::Create(path);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  for (const char* text : {"model_index.json", "scheduler/scheduler_config.json", "text_encoder/config.json",
                           "unet/config.json", "vae/config.json", "tokenizer/vocab.json", "tokenizer/merges.txt",
                           "tokenizer/special_tokens_map.json", "tokenizer/tokenizer_config.json"}) {
    if (!(*src)->Has(text)) continue;
    auto t = (*src)->ReadText(text);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    std::string out = *t;
    if (auto e = edits.find(text); e != edits.end()) {
      nlohmann::json j = nlohmann::json::parse(out);
      j.merge_patch(e->second);
      out = j.dump();
    }
    EXPECT_TRUE((*w)->WriteText(text, out).ok());
  }
  if (copy_tensors) {
    for (const char* component : {"text_encoder", "unet", "vae"}) {
      auto names = (*src)->TensorNames(component);
      EXPECT_TRUE(names.ok());
      for (const std::string& n : *names) {
        auto a = (*src)->ReadTensor(component, n, tpumesh::mesh::DType::kF32);
        EXPECT_TRUE(a.ok());
        EXPECT_TRUE((*w)->WriteTensor(component, n, *a, tpumesh::mesh::DType::kF32).ok());
      }
    }
  }
  EXPECT_TRUE((*w)->Commit().ok());
  return path;
}

// Runs with an address-space limit of 1 GiB (none under AddressSanitizer):
// a run that would allocate more fails (and the test with it) instead of
// swapping the host.
tpumesh::testing::CliResult RunBounded(const std::string& args) {
  return RunTpumesh("--version >/dev/null; " + tpumesh::testing::AddressSpaceLimit(1048576) + "exec " +
                    std::string(TPUMESH_BIN) + " " + args);
}

// A config declaring 2^40 text-encoder parameters in a file of 36 KB (and
// one of 8 MB with the tiny tensors): refused by the declared count against
// the file's size, before a tensor is read, under a 1 GiB address limit.
TEST(FlagsCliTest, HugeDeclaredTextEncoderIsRefusedBeforeAllocating) {
  const nlohmann::json huge = {{"vocab_size", 1 << 24}, {"hidden_size", 1 << 16}};
  for (const bool tensors : {false, true}) {
    const std::string m = EditedModel(tensors ? "huge_te_full.h5" : "huge_te.h5",
                                      {{"text_encoder/config.json", huge}}, tensors);
    if (!tensors) {
      ASSERT_LT(fs::file_size(m), 1 << 20);
    }
    auto r = RunBounded("generate --model " + m + " -p x --steps 1 --devices 1 -q -o " +
                        tpumesh::testing::TestTempDir() + "/out");
    ExpectOneLineError(r, "text_encoder/config.json declares 1185443348665 parameters, more than the file's");
    EXPECT_FALSE(fs::exists(tpumesh::testing::TestTempDir() + "/out"));
  }
}

// A tensor whose dataset declares its shape but stores nothing (HDF5 would
// read it as zeros): refused naming the dataset, where it used to load.
TEST(FlagsCliTest, TensorDeclaredButNotStoredIsRefused) {
  const std::string m = EditedModel("hollow.h5", {}, true);
  const std::string name = "text_encoder/text_model.embeddings.token_embedding.weight";
  {
    const hid_t f = H5Fopen(m.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t old = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    const hid_t space = H5Dget_space(old);
    H5Dclose(old);
    ASSERT_GE(H5Ldelete(f, name.c_str(), H5P_DEFAULT), 0);
    const hid_t ds = H5Dcreate2(f, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    H5Dclose(ds);
    H5Sclose(space);
    H5Fclose(f);
  }
  auto r = RunBounded("generate --model " + m + " -p x --steps 1 --devices 1 -q -o " +
                      tpumesh::testing::TestTempDir() + "/out");
  ExpectOneLineError(r, name + " declares shape [1000,32] (128000 bytes) but stores 0 bytes");
}

// eval checks each input's shape against the component before it runs,
// naming the file, the dataset, its shape and the one expected (before: a
// model's own check inside the run named neither, on a device's shard).
TEST(FlagsCliTest, EvalInputShapesAreCheckedPerComponent) {
  namespace p = tpumesh::pipeline;
  using tpumesh::mesh::Array;
  using tpumesh::mesh::DType;
  const std::string dir = tpumesh::testing::TestTempDir();
  struct Case {
    std::string component;
    std::vector<std::pair<std::string, Array>> inputs;
    std::string message;
  };
  const Array ehs = Array::Host(DType::kF32, {1, 77, 32});
  const Array t = Array::Host(DType::kF32, {1});
  for (const Case& c : std::vector<Case>{
           {"text_encoder", {{"input_ids", Array::Host(DType::kI32, {2, 3, 77})}},
            "'input_ids' has shape [2,3,77], expected [B, L], L from 1 to 77"},
           {"text_encoder", {{"input_ids", Array::Host(DType::kI32, {1, 78})}},
            "'input_ids' has shape [1,78], expected [B, L], L from 1 to 77"},
           {"unet",
            {{"sample", Array::Host(DType::kF32, {1, 4, 8})}, {"encoder_hidden_states", ehs}, {"timestep", t}},
            "'sample' has shape [1,4,8], expected [B, 4, h, w], h and w multiples of 2"},
           {"unet",
            {{"sample", Array::Host(DType::kF32, {1, 4, 8, 8})},
             {"encoder_hidden_states", Array::Host(DType::kF32, {1, 77})},
             {"timestep", t}},
            "'encoder_hidden_states' has shape [1,77], expected [1, L, 32]"},
           {"unet",
            {{"sample", Array::Host(DType::kF32, {1, 4, 8, 8})},
             {"encoder_hidden_states", ehs},
             {"timestep", Array::Host(DType::kF32, {1, 1})}},
            "'timestep' has shape [1,1], expected a scalar, [1] or [1]"},
           {"vae_decoder", {{"latents", Array::Host(DType::kF32, {1, 3, 8, 8})}},
            "'latents' has shape [1,3,8,8], expected [B, 4, h, w]"},
           {"vae_encoder", {{"sample", Array::Host(DType::kF32, {1, 3, 9, 9})}},
            "'sample' has shape [1,3,9,9], expected [B, 3, H, W], H and W multiples of 2"},
       }) {
    const std::string in = dir + "/in.h5", out = dir + "/out.h5";
    auto w = p::H5Writer::Create(in);
    ASSERT_TRUE(w.ok());
    for (const auto& [name, a] : c.inputs) ASSERT_TRUE((*w)->Write(name, a).ok());
    ASSERT_TRUE((*w)->Commit().ok());
    auto r = RunTpumesh("eval --model " + TinyModel() + " --component " + c.component + " --input " + in +
                        " --output " + out);
    ExpectOneLineError(r, in + ": " + c.message);
    EXPECT_FALSE(fs::exists(out));
  }
}

// Every numeric flag of every command, given -1, 0, a huge value, 1e-9,
// nan or inf (those its documented range leaves out): refused in one line,
// exit 1 or 2, nothing created. --guidance -1 ran as "none" and 1e11 ran.
TEST(FlagsCliTest, NumericFlagsOutsideTheirRangeAreRefused) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string out = dir + "/out";
  const std::vector<std::string> all = {"-1", "0", "99999999999", "1e-9", "nan", "inf"};
  const std::vector<std::string> zero_ok = {"-1", "99999999999", "1e-9", "nan", "inf"};
  const std::vector<std::string> runs = {"generate -p x -q -o " + out, "simulate --arch tiny --steps 1"};
  struct Flag {
    std::string command, flag;
    std::vector<std::string> bad;
  };
  std::vector<Flag> flags;
  for (const std::string& cmd : runs) {
    for (const char* f : {"--steps", "--height", "--width", "--batch-per-device", "--devices"})
      flags.push_back({cmd, f, all});
    flags.push_back({cmd, "--guidance", {"-1", "1001", "99999999999", "nan", "inf"}});
    flags.push_back({cmd, "--vmem-mib", {"-1", "1e-9", "99999999999", "nan", "inf"}});
  }
  flags.push_back({runs[0], "--threads-per-device", zero_ok});
  flags.push_back({runs[0], "--runs", all});
  flags.push_back({runs[0], "--seed", {"-1", "18446744073709551616", "1e-9", "nan", "inf"}});
  flags.push_back({runs[1], "--max-layers", all});
  flags.push_back({"init -q -o " + dir + "/m.h5", "--seed", {"-1", "18446744073709551616", "1e-9", "nan", "inf"}});
  for (const char* f : {"--devices", "--threads-per-device"})
    flags.push_back({"devices", f, std::string(f) == "--devices" ? all : zero_ok});
  const std::string eval = "eval --model " + TinyModel() + " --component vae_decoder --input " + dir +
                           "/in.h5 --output " + dir + "/o.h5";
  flags.push_back({eval, "--devices", all});
  flags.push_back({eval, "--threads-per-device", zero_ok});
  for (const char* sub : {"matmul", "conv", "attention", "peak"}) {
    flags.push_back({std::string("bench ") + sub, "--threads", zero_ok});
    if (std::string(sub) != "peak") flags.push_back({std::string("bench ") + sub, "--repeats", all});
  }
  for (const char* f : {"--m", "--n", "--k"}) flags.push_back({"bench matmul", f, all});
  flags.push_back({"bench peak", "--seconds", all});
  for (const Flag& f : flags) {
    for (const std::string& v : f.bad) {
      const auto r = RunTpumesh(f.command + " " + f.flag + " " + v);
      const std::string what = f.command + " " + f.flag + " " + v;
      EXPECT_TRUE(r.code == 1 || r.code == 2) << what << ": exit " << r.code << " " << r.err;
      EXPECT_EQ(r.err.rfind("tpumesh:", 0), 0u) << what << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << r.err;
      EXPECT_THAT(tpumesh::testing::ListDir(dir), ::testing::IsEmpty()) << what;
    }
  }
}

// eval runs on one device unless a flag gives the count: --topology alone
// gives its own (it was refused: "--topology 4x4 holds 16 devices but
// --devices is 1", a --devices the user never gave).
TEST(FlagsCliTest, EvalTakesTheTopologysDeviceCount) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string in = dir + "/in.h5", out = dir + "/out.h5", report = dir + "/r.json";
  auto w = tpumesh::pipeline::H5Writer::Create(in);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Write("latents", tpumesh::mesh::Array::Host(tpumesh::mesh::DType::kF32, {4, 4, 4, 4})).ok());
  ASSERT_TRUE((*w)->Commit().ok());
  auto r = RunTpumesh("eval --model " + TinyModel() + " --component vae_decoder --input " + in + " --output " + out +
                      " --topology 2x2 --report " + report);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(report);
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["summary"]["devices"], 4) << j["summary"].dump();
}

// eval --component tokenizer reads "prompts" as a list: a 2-D table of
// strings is refused naming its shape (it was read flat, silently).
TEST(FlagsCliTest, EvalTokenizerRefusesATableOfPrompts) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string in = dir + "/prompts2d.h5", out = dir + "/out.h5";
  {
    const hid_t f = H5Fcreate(in.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    const hsize_t dims[2] = {2, 2};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t ds = H5Dcreate2(f, "prompts", t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const char* p[4] = {"a", "b", "c", "d"};
    ASSERT_GE(H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, p), 0);
    H5Dclose(ds);
    H5Sclose(space);
    H5Tclose(t);
    H5Fclose(f);
  }
  auto r = RunTpumesh("eval --model " + TinyModel() + " --component tokenizer --input " + in + " --output " + out);
  ExpectOneLineError(r, "prompts");
  EXPECT_THAT(r.err, HasSubstr("2,2"));
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
