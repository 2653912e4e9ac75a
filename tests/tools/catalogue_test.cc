// The hostile-input catalogue: every case of tests/data/hostile-catalogue.txt
// (bad inputs and faults as a new user meets them: outputs that are inputs,
// device nodes and FIFOs, small files that ask for huge work, values out of
// range, names that are not one line of UTF-8, a full disk) run through the
// real binary and judged by the same fixed rules, whatever the case:
//
//  - refused: exit 1 or 2, stderr exactly one line starting "tpumesh:", of
//    valid UTF-8 with no control character, and nothing in the case's folder
//    (its TMPDIR included) or in a watched path created, changed or removed;
//  - succeeded: exit 0, no temporary left (TMPDIR empty, no ".tpumesh"
//    file), every file written non-empty, and the case's own check passes;
//  - always: no signal, no run past 30 s, no more than 1 GiB of peak RSS.
//
// A case says which outcome it expects (refuse, ok, or either when both are
// right as long as the rules hold). The file's format is described at its
// top.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/printable.h"
#include "gtest/gtest.h"
#include "hdf5.h"
#include "io/h5io.h"
#include "mesh/array.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cli.h"
#include "tests/testing/h5_files.h"
#include "tests/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;

// The ASan build's binary: more time, and shadow memory in its RSS.
constexpr int kSlowdown = tpumesh::testing::kUnderAddressSanitizer ? 4 : 1;

struct Case {
  std::string name;
  std::vector<std::string> setup;
  std::string run;
  std::string expect;  // refuse | ok | either
  std::vector<std::string> watch;
  std::vector<std::string> stderr_has;
  std::string check;
  int64_t fsize = 0;
  int64_t rss_mib = 1024;
  int timeout_s = 30;
  int line = 0;
};

// gtest names a failing case by this (not by its bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// C-style escapes in a run line (\n, \t, \xNN, \\), so a case can pass a
// name holding a newline or a byte that is not UTF-8 through sh.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    if (c == 'n') out += '\n';
    else if (c == 't') out += '\t';
    else if (c == 'r') out += '\r';
    else if (c == 'x' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else out += c;
  }
  return out;
}

std::vector<Case> LoadCases() {
  const std::string path = std::string(TPUMESH_SOURCE_DIR) + "/tests/data/hostile-catalogue.txt";
  std::ifstream in(path);
  std::vector<Case> cases;
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || line[first] == '#') continue;
    if (line.rfind("case ", 0) == 0) {
      cases.push_back({});
      cases.back().name = line.substr(5);
      cases.back().line = no;
      continue;
    }
    const size_t b = line.find_first_not_of(' ');
    const size_t colon = line.find(':');
    if (cases.empty() || b == std::string::npos || colon == std::string::npos) {
      ADD_FAILURE() << path << ":" << no << ": not a case line: " << line;
      continue;
    }
    const std::string key = line.substr(b, colon - b);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    Case& c = cases.back();
    if (key == "setup") c.setup.push_back(value);
    else if (key == "run") c.run = Unescape(value);
    else if (key == "expect") c.expect = value;
    else if (key == "watch") c.watch.push_back(value);
    else if (key == "stderr") c.stderr_has.push_back(value);
    else if (key == "check") c.check = value;
    else if (key == "fsize") c.fsize = std::stoll(value);
    else if (key == "rss-mib") c.rss_mib = std::stoll(value);
    else if (key == "timeout") c.timeout_s = std::stoi(value);
    else ADD_FAILURE() << path << ":" << no << ": unknown key '" << key << "'";
  }
  return cases;
}

// The binary judged: this build's, or TPUMESH_CATALOGUE_BIN's (another
// build, to count how many cases an older one held).
std::string Binary() {
  const char* other = std::getenv("TPUMESH_CATALOGUE_BIN");
  return other != nullptr && *other != '\0' ? other : TPUMESH_BIN;
}

// ------------------------------------------------------------- fixtures

std::string ReadText(hid_t file, const std::string& name) {
  const hid_t d = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  char* p = nullptr;
  H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &p);
  std::string s = p ? p : "";
  const hid_t space = H5Dget_space(d);
  H5Dvlen_reclaim(t, space, H5P_DEFAULT, &p);
  H5Sclose(space);
  H5Tclose(t);
  H5Dclose(d);
  return s;
}

void WriteText(hid_t file, const std::string& name, const std::string& text) {
  H5Ldelete(file, name.c_str(), H5P_DEFAULT);
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t d = H5Dcreate2(file, name.c_str(), t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const char* p = text.c_str();
  H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &p);
  H5Dclose(d);
  H5Sclose(space);
  H5Tclose(t);
}

// A copy of the tiny model with `edit` applied to the open file.
void EditedModel(const std::string& dst, const std::function<void(hid_t)>& edit) {
  fs::copy_file(tpumesh::testing::TinyModelFile(), dst, fs::copy_options::overwrite_existing);
  const hid_t f = H5Fopen(dst.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << dst;
  edit(f);
  H5Fclose(f);
}

void EditConfig(hid_t f, const std::string& dataset, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(ReadText(f, dataset));
  edit(j);
  WriteText(f, dataset, j.dump(1));
}

// The files the cases start from ($FIX/<name>), each made on demand: ctest
// runs every case in a process of its own, so a case makes only the
// fixtures its text names (the 1 GiB gzip'd tensor alone took seconds).
using tpumesh::mesh::Array;
using tpumesh::mesh::DType;

void WriteArray(const std::string& path, const std::string& name, const Array& a) {
  auto w = tpumesh::pipeline::H5Writer::Create(path);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE((*w)->Write(name, a).ok());
  EXPECT_TRUE((*w)->Commit().ok());
}

// A secret beside the fixtures: the bytes external storage points at.
std::string Secret(const std::string& d) {
  std::ofstream(d + "/secret.txt") << std::string(64, 'S');
  return d + "/secret.txt";
}

struct Fixture {
  const char* name;                                 // $FIX/<name>
  std::function<void(const std::string& d)> make;  // makes d/<name>
};

const std::vector<Fixture>& FixtureTable() {
  static const std::vector<Fixture> table = {
      {"tiny.h5", [](const std::string& d) { fs::copy_file(tpumesh::testing::TinyModelFile(), d + "/tiny.h5"); }},
      {"chip.json",
       [](const std::string& d) {
         fs::copy_file(std::string(TPUMESH_SOURCE_DIR) + "/docs/examples/custom_chip.json", d + "/chip.json");
       }},
      // Every PNG colour type (scripts/tools/make_png_cases.py).
      {"png",
       [](const std::string& d) {
         fs::copy(std::string(TPUMESH_SOURCE_DIR) + "/tests/data/png", d + "/png", fs::copy_options::recursive);
       }},
      {"ids.h5", [](const std::string& d) { WriteArray(d + "/ids.h5", "input_ids", Array::Host(DType::kI32, {1, 77})); }},
      // "prompts" as a 2-D array of strings (eval --component tokenizer reads 1-D).
      {"prompts2d.h5",
       [](const std::string& d) {
         const hid_t f = H5Fcreate((d + "/prompts2d.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
         const hid_t t = H5Tcopy(H5T_C_S1);
         H5Tset_size(t, H5T_VARIABLE);
         const hsize_t dims[2] = {2, 2};
         const hid_t space = H5Screate_simple(2, dims, nullptr);
         const hid_t ds = H5Dcreate2(f, "prompts", t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
         const char* p[4] = {"a", "b", "c", "d"};
         H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, p);
         H5Dclose(ds);
         H5Sclose(space);
         H5Tclose(t);
         H5Fclose(f);
       }},
      // Latents for the default model's 8 images (32x32 -> [8,4,4,4]): one
      // holding a NaN, one of the wrong batch, one that declares 4.2e11
      // values and stores none.
      {"latents_nan.h5",
       [](const std::string& d) {
         Array nan_latents = Array::Host(DType::kF32, {8, 4, 4, 4});
         nan_latents.mutable_data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
         WriteArray(d + "/latents_nan.h5", "latents", nan_latents);
       }},
      {"latents_one.h5",
       [](const std::string& d) { WriteArray(d + "/latents_one.h5", "latents", Array::Host(DType::kF32, {1, 4, 4, 4})); }},
      {"latents_huge.h5",
       [](const std::string& d) {
         const hid_t f = H5Fcreate((d + "/latents_huge.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
         const hsize_t dims[4] = {100000, 4, 1024, 1024};
         const hid_t space = H5Screate_simple(4, dims, nullptr);
         H5Dclose(H5Dcreate2(f, "latents", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
         H5Sclose(space);
         H5Fclose(f);
       }},
      // A diffusers folder: tiny-sd-b's components, the tiny tokenizer, PNDM.
      {"sd",
       [](const std::string& d) {
         const std::string src = d + "/sd", data = std::string(TPUMESH_SOURCE_DIR) + "/tests/data/tiny-sd-b";
         fs::create_directories(src + "/scheduler");
         for (const char* c : {"text_encoder", "unet", "vae"})
           fs::copy(data + "/" + c, src + "/" + c, fs::copy_options::recursive);
         fs::copy(std::string(TPUMESH_SOURCE_DIR) + "/text/data/tiny-tokenizer", src + "/tokenizer",
                  fs::copy_options::recursive);
         std::ofstream(src + "/scheduler/scheduler_config.json")
             << R"({"_class_name": "PNDMScheduler", "beta_end": 0.012, "beta_schedule": "scaled_linear",
                    "beta_start": 0.00085, "num_train_timesteps": 1000, "set_alpha_to_one": false,
                    "skip_prk_steps": true, "steps_offset": 1})";
         std::ofstream(src + "/model_index.json") << R"({"_class_name": "StableDiffusionPipeline"})";
       }},
      // run --inputs for @main(tensor<16xf32>) as other writers make them:
      // elements in another file (a secret beside it; /dev/zero declaring
      // 1 GiB), a virtual dataset whose source is missing, and 2^20 mostly
      // zero values gzip-compressed into a few KB (in16.h5: 16 values).
      {"external16.h5",
       [](const std::string& d) {
         EXPECT_TRUE(tpumesh::testing::WriteExternal(d + "/external16.h5", "input_0", Secret(d), 16));
       }},
      {"zero_gib.h5",
       [](const std::string& d) {
         EXPECT_TRUE(tpumesh::testing::WriteExternal(d + "/zero_gib.h5", "input_0", "/dev/zero", hsize_t{1} << 28));
       }},
      {"virtual16.h5",
       [](const std::string& d) {
         EXPECT_TRUE(tpumesh::testing::WriteVirtual(d + "/virtual16.h5", "input_0", d + "/missing.h5", 16));
       }},
      {"sparse.h5",
       [](const std::string& d) {
         std::vector<float> sparse(size_t{1} << 20, 0.0f);
         sparse[3] = 2.5f;
         EXPECT_TRUE(tpumesh::testing::WriteGzip(d + "/sparse.h5", "input_0", sparse, 1 << 16));
       }},
      // The tiny model with unet/conv_in.bias's elements in another file.
      {"external_tensor.h5",
       [](const std::string& d) {
         const std::string secret = Secret(d);
         EditedModel(d + "/external_tensor.h5", [&secret](hid_t f) {
           const hid_t old = H5Dopen2(f, "unet/conv_in.bias", H5P_DEFAULT);
           const hid_t space = H5Dget_space(old);
           const hssize_t n = H5Sget_simple_extent_npoints(space);
           H5Dclose(old);
           H5Ldelete(f, "unet/conv_in.bias", H5P_DEFAULT);
           const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
           H5Pset_external(dcpl, secret.c_str(), 0, static_cast<hsize_t>(n) * 4);
           H5Dclose(H5Dcreate2(f, "unet/conv_in.bias", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
           H5Pclose(dcpl);
           H5Sclose(space);
         });
       }},
      // The tiny model with unet/conv_in.bias a gzip'd dataset of 2^28 zeros
      // (1 GiB declared, about 1 MB stored, every chunk written).
      {"gzip_gib_tensor.h5",
       [](const std::string& d) {
         EditedModel(d + "/gzip_gib_tensor.h5", [](hid_t f) {
           H5Ldelete(f, "unet/conv_in.bias", H5P_DEFAULT);
           const hsize_t n = hsize_t{1} << 28, chunk = hsize_t{1} << 20;
           const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
           H5Pset_chunk(dcpl, 1, &chunk);
           H5Pset_deflate(dcpl, 1);
           const hid_t space = H5Screate_simple(1, &n, nullptr), mem = H5Screate_simple(1, &chunk, nullptr);
           const hid_t ds = H5Dcreate2(f, "unet/conv_in.bias", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
           const std::vector<float> zeros(chunk, 0.0f);
           for (hsize_t start = 0; start < n; start += chunk) {
             H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &chunk, nullptr);
             H5Dwrite(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, zeros.data());
           }
           H5Dclose(ds);
           H5Sclose(mem);
           H5Sclose(space);
           H5Pclose(dcpl);
         });
       }},
      {"v99.h5",
       [](const std::string& d) {
         EditedModel(d + "/v99.h5", [](hid_t f) {
           const hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
           const int v = 99;
           H5Awrite(a, H5T_NATIVE_INT, &v);
           H5Aclose(a);
         });
       }},
      {"negative_sample_size.h5",
       [](const std::string& d) {
         EditedModel(d + "/negative_sample_size.h5", [](hid_t f) {
           EditConfig(f, "unet/config.json", [](nlohmann::json& j) { j["sample_size"] = -8; });
         });
       }},
      {"huge_text_encoder.h5",
       [](const std::string& d) {
         EditedModel(d + "/huge_text_encoder.h5", [](hid_t f) {
           EditConfig(f, "text_encoder/config.json", [](nlohmann::json& j) {
             j["vocab_size"] = 100000000;
             j["num_hidden_layers"] = 1000;
           });
         });
       }},
      {"wide_text_encoder.h5",
       [](const std::string& d) {
         EditedModel(d + "/wide_text_encoder.h5", [](hid_t f) {
           EditConfig(f, "text_encoder/config.json", [](nlohmann::json& j) {
             j["hidden_size"] = 1 << 20;
             j["intermediate_size"] = 1 << 22;
           });
         });
       }},
  };
  return table;
}

// The fixtures folder with the fixtures the case names ($FIX/<name> in its
// setup, run or check) made; a name the table lacks is the test's failure.
std::string Fixtures(const Case& c) {
  const std::string d = tpumesh::testing::ProcessTempDir() + "/fix";
  fs::create_directories(d);
  std::string text = c.run + "\n" + c.check;
  for (const std::string& s : c.setup) text += "\n" + s;
  for (size_t at = text.find("$FIX/"); at != std::string::npos; at = text.find("$FIX/", at + 1)) {
    const size_t from = at + 5;
    const std::string name = text.substr(from, text.find_first_of("/ '\")\n;|&", from) - from);
    if (fs::exists(d + "/" + name)) continue;
    const auto& table = FixtureTable();
    const auto it = std::find_if(table.begin(), table.end(), [&](const Fixture& f) { return name == f.name; });
    if (it == table.end()) {
      ADD_FAILURE() << "no fixture $FIX/" << name << " (catalogue_test.cc FixtureTable)";
      continue;
    }
    it->make(d);
  }
  return d;
}

// ------------------------------------------------------------- judging

// What a path is, as far as a run could change it.
std::string Describe(const fs::path& p) {
  struct stat st;
  if (lstat(p.c_str(), &st) != 0) return "absent";
  std::ostringstream s;
  s << std::oct << st.st_mode << std::dec << " rdev " << st.st_rdev;
  if (S_ISREG(st.st_mode)) {
    s << " size " << st.st_size << " mtime " << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec;
    if (st.st_size <= (64 << 20)) {
      std::ifstream in(p, std::ios::binary);
      s << " bytes " << std::hash<std::string>()(std::string(std::istreambuf_iterator<char>(in), {}));
    }
  } else if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    s << " -> " << fs::read_symlink(p, ec).string();
  }
  return s.str();
}

std::map<std::string, std::string> Snapshot(const std::string& dir, const std::vector<std::string>& watch) {
  std::map<std::string, std::string> m;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec))
    m[fs::relative(it->path(), dir).string()] = Describe(it->path());
  for (const std::string& w : watch) m["watch:" + w] = Describe(w);
  return m;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `script` with sh -e in `dir`, with `env` set; its exit code.
int Shell(const std::string& script, const std::string& dir, const std::map<std::string, std::string>& env) {
  // Through a script file beside the folder: setup lines hold quotes of their own.
  const std::string script_file = dir + ".sh";
  std::ofstream(script_file) << "set -e\n" << script << "\n";
  std::string cmd = "cd '" + dir + "' && ";
  for (const auto& [k, v] : env) cmd += k + "='" + v + "' ";
  cmd += "sh '" + script_file + "'";
  const int status = std::system(cmd.c_str());
  std::remove(script_file.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class CatalogueTest : public ::testing::TestWithParam<Case> {};

TEST_P(CatalogueTest, HoldsTheRules) {
  const Case& c = GetParam();
  SCOPED_TRACE("tests/data/hostile-catalogue.txt:" + std::to_string(c.line) + " case " + c.name + ": tpumesh " +
               tpumesh::Printable(c.run));
  const std::string base = tpumesh::testing::TestTempDir();
  const std::string dir = base + "/case";
  fs::create_directories(dir + "/tmp");
  const std::map<std::string, std::string> env = {
      {"T", Binary()}, {"FIX", Fixtures(c)}, {"TMPDIR", dir + "/tmp"}};
  std::string setup;
  for (const std::string& s : c.setup) setup += s + "\n";
  if (!setup.empty()) {
    ASSERT_EQ(Shell(setup, dir, env), 0) << "setup failed:\n" << setup;
  }
  const auto before = Snapshot(dir, c.watch);

  const std::string out_file = base + "/stdout", err_file = base + "/stderr";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    if (chdir(dir.c_str()) != 0) _exit(127);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    freopen("/dev/null", "r", stdin);
    freopen(out_file.c_str(), "w", stdout);
    freopen(err_file.c_str(), "w", stderr);
    signal(SIGXFSZ, SIG_DFL);  // as a user's shell leaves it: the binary must handle it itself
    if (c.fsize > 0) {
      struct rlimit rl = {static_cast<rlim_t>(c.fsize), static_cast<rlim_t>(c.fsize)};
      setrlimit(RLIMIT_FSIZE, &rl);
    }
    execl("/bin/sh", "sh", "-c", ("exec \"$T\" " + c.run).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(c.timeout_s * kSlowdown);
  bool hung = false;
  while (wait4(pid, &status, WNOHANG, &ru) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      hung = true;
      kill(-pid, SIGKILL);
      wait4(pid, &status, 0, &ru);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(-pid, SIGKILL);  // nothing of the run may outlive it
  const std::string out = ReadFile(out_file), err = ReadFile(err_file);
  ASSERT_FALSE(hung) << "ran past " << c.timeout_s * kSlowdown << " s; stderr: " << err;
  ASSERT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status) << "; stderr: " << err;
  const int code = WEXITSTATUS(status);
  EXPECT_LE(ru.ru_maxrss / 1024, c.rss_mib * kSlowdown) << "peak RSS " << ru.ru_maxrss / 1024 << " MiB";

  const auto after = Snapshot(dir, c.watch);
  if (code == 0) {
    EXPECT_NE(c.expect, "refuse") << "succeeded; stdout: " << out.substr(0, 2000) << "\nstderr: " << err;
    EXPECT_TRUE(fs::is_empty(dir + "/tmp")) << "a temporary was left in TMPDIR";
    for (const auto& [path, what] : after) {
      EXPECT_EQ(path.find(".tpumesh"), std::string::npos) << "a temporary was left: " << path;
      if (before.count(path) == 0 && what.find("size 0 ") != std::string::npos)
        ADD_FAILURE() << "an empty output: " << path;
    }
    if (!c.check.empty()) {
      EXPECT_EQ(Shell(c.check, dir, {{"T", Binary()}, {"OUT", out_file}, {"ERR", err_file}}), 0)
          << "the case's check failed: " << c.check << "\nstdout: " << out.substr(0, 4000);
    }
    return;
  }
  EXPECT_NE(c.expect, "ok") << "exit " << code << "; stderr: " << err;
  EXPECT_TRUE(code == 1 || code == 2) << "exit " << code << "; stderr: " << err;
  EXPECT_TRUE(!err.empty() && err.find('\n') == err.size() - 1) << "not one line on stderr: " << err;
  EXPECT_EQ(err.rfind("tpumesh:", 0), 0u) << "stderr does not start with 'tpumesh:': " << err;
  std::string plain = err.substr(0, err.empty() ? 0 : err.size() - 1), doubled;
  for (char ch : plain) doubled += ch == '\\' ? std::string("\\\\") : std::string(1, ch);
  EXPECT_EQ(tpumesh::Printable(plain), doubled) << "not printable UTF-8 on one line: " << err;
  for (const std::string& s : c.stderr_has) EXPECT_NE(err.find(s), std::string::npos) << "no '" << s << "' in: " << err;
  for (const auto& [path, what] : before) {
    auto it = after.find(path);
    EXPECT_TRUE(it != after.end() && it->second == what)
        << path << " changed: " << what << " -> " << (it == after.end() ? "removed" : it->second);
  }
  for (const auto& [path, what] : after)
    EXPECT_TRUE(before.count(path)) << path << " was created by a refused run: " << what;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string n;
  for (char ch : info.param.name) n += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Cases, CatalogueTest, ::testing::ValuesIn(LoadCases()), CaseName);

}  // namespace
