// Every stored JAX program (tests/data/stablehlo/<generation>/, as
// programs_test runs them) through the plugin's C API as JAX drives it:
// compiled from its MLIR text with the device assignment JAX would give,
// each device's buffers made from the stored inputs (its slice for jax
// 0.4's pmap, its piece under the declared sharding for a global program),
// executed, and each device's results put back together. They must equal
// `tpumesh run`'s outputs (hlo::RunModule) bit for bit, and the executable's
// cost_analysis flops must equal what a dry run prices (simulate
// --stablehlo).
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/program.h"
#include "hlo/run.h"
#include "nlohmann/json.hpp"
#include "tests/testing/pjrt_api.h"

namespace tpumesh::pjrt {
namespace {

using namespace testing;  // NOLINT: the tests' helpers
using hlo::ArrayPiece;
using hlo::Layout;
using hlo::Tensor;

struct Case {
  std::string generation, name;
};

std::string Dir(const std::string& gen) { return std::string(TPUMESH_SOURCE_DIR) + "/tests/data/stablehlo/" + gen; }

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (const char* gen : {"jax-0.4.38", "jax-current"}) {
    std::ifstream in(Dir(gen) + "/manifest.json");
    if (!in) continue;
    const auto m = nlohmann::json::parse(in);
    for (const auto& p : m["programs"])
      if (p["files"].contains("h5")) out.push_back({gen, p["name"]});
  }
  return out;
}

PJRT_Buffer_Type TypeOf(hlo::ElementType t) {
  using E = hlo::ElementType;
  switch (t) {
    case E::kPred: return PJRT_Buffer_Type_PRED;
    case E::kI8: return PJRT_Buffer_Type_S8;
    case E::kI16: return PJRT_Buffer_Type_S16;
    case E::kI32: return PJRT_Buffer_Type_S32;
    case E::kI64: return PJRT_Buffer_Type_S64;
    case E::kU8: return PJRT_Buffer_Type_U8;
    case E::kU16: return PJRT_Buffer_Type_U16;
    case E::kU32: return PJRT_Buffer_Type_U32;
    case E::kU64: return PJRT_Buffer_Type_U64;
    case E::kF16: return PJRT_Buffer_Type_F16;
    case E::kBF16: return PJRT_Buffer_Type_BF16;
    case E::kF32: return PJRT_Buffer_Type_F32;
    case E::kF64: return PJRT_Buffer_Type_F64;
    case E::kC64: return PJRT_Buffer_Type_C64;
    case E::kC128: return PJRT_Buffer_Type_C128;
  }
  return PJRT_Buffer_Type_INVALID;
}

// The bytes of the block of `local` dims at element `offset` of a row-major
// array of `global` dims (element by element: the test's own way, not the
// plugin's).
std::vector<char> Block(const char* g, const std::vector<int64_t>& global, const std::vector<int64_t>& local,
                        const std::vector<int64_t>& offset, size_t eb) {
  int64_t n = 1;
  for (int64_t d : local) n *= d;
  std::vector<char> out(static_cast<size_t>(n) * eb);
  std::vector<int64_t> at(local.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t flat = 0;
    for (size_t k = 0; k < global.size(); ++k) flat = flat * global[k] + offset[k] + at[k];
    std::memcpy(out.data() + static_cast<size_t>(i) * eb, g + static_cast<size_t>(flat) * eb, eb);
    for (size_t k = local.size(); k-- > 0;) {
      if (++at[k] < local[k]) break;
      at[k] = 0;
    }
  }
  return out;
}

// Device d's piece (or pmap slice) of @main's argument / result i: its dims
// and offset in the global array.
void PieceOf(const hlo::Module& m, const Layout& layout, bool result, size_t i, int d, const std::vector<int64_t>& global,
             std::vector<int64_t>& local, std::vector<int64_t>& offset) {
  local = global;
  offset.assign(global.size(), 0);
  if (layout.kind == Layout::Kind::kReplicas) {
    const auto& per = result ? m.FindFunc("main")->result_types[i].dims : m.FindFunc("main")->arg_types[i].dims;
    local = per;
    offset[0] = d * per[0];  // jax 0.4's pmap: the leading axis is the devices' (tpumesh's stacking)
    return;
  }
  auto piece = hlo::DeclaredPiece(m, layout, result, i, d);
  ASSERT_TRUE(piece.ok()) << piece.status().message();
  for (size_t k = 0; k < global.size(); ++k) {
    local[k] = global[k] / piece->count[k];
    offset[k] = piece->index[k] * local[k];
  }
}

class ProgramsPjrtTest : public ::testing::TestWithParam<Case> {};

TEST_P(ProgramsPjrtTest, EqualsTpumeshRunBitForBit) {
  const Case& c = GetParam();
  const std::string base = Dir(c.generation) + "/" + c.name;
  std::ifstream f(base + ".mlir");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto m = hlo::ParseModule(text, c.name + ".mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto layout = hlo::LayoutOf(*m);
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  // The pieces each device gets: the results' shardings as the plugin
  // completes them (those the program leaves to the compiler).
  ASSERT_TRUE(hlo::CompleteResultShardings(*m, *layout, c.name).ok());
  auto inputs = hlo::ReadInputs(base + ".h5", *layout);
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  const int n = layout->devices;
  if (layout->kind == Layout::Kind::kReplicas) {
    for (const Tensor& t : *inputs)  // pmap slices the leading axis; skip programs that cannot
      if (t.type.dims.empty() || t.type.dims[0] % n != 0) GTEST_SKIP() << "not sliceable";
  }

  // tpumesh run.
  hlo::RunOptions o;
  o.program = c.name;
  auto want = hlo::RunModule(*m, o, [&](const Layout&) { return *inputs; });
  ASSERT_TRUE(want.ok()) << want.status().message();

  // Through the plugin: one replica of n partitions, or n replicas (pmap).
  setenv("TPUMESH_PJRT_DEVICES", std::to_string(n).c_str(), 1);
  TestClient client(*GetPjrtApi());
  unsetenv("TPUMESH_PJRT_DEVICES");
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) ids[static_cast<size_t>(d)] = d;
  PJRT_Error* error = nullptr;
  PJRT_LoadedExecutable* exe = Compile(client, text, OptionsOnDevices(ids), &error);
  ExpectOk(client.api, error);
  ASSERT_NE(exe, nullptr);

  const size_t args = inputs->size();
  std::vector<std::vector<PJRT_Buffer*>> in(static_cast<size_t>(n), std::vector<PJRT_Buffer*>(args));
  for (size_t i = 0; i < args; ++i) {
    const Tensor& t = (*inputs)[i];
    const size_t eb = static_cast<size_t>(hlo::ElementTypeBytes(t.type.element));
    for (int d = 0; d < n; ++d) {
      std::vector<int64_t> local, offset;
      PieceOf(*m, *layout, false, i, d, t.type.dims, local, offset);
      const std::vector<char> bytes = Block(static_cast<const char*>(t.data.raw()), t.type.dims, local, offset, eb);
      in[static_cast<size_t>(d)][i] = FromHost(client, bytes.data(), TypeOf(t.type.element), local, {}, d, &error);
      ExpectOk(client.api, error);
    }
  }
  const size_t outs = want->run.outputs.size();
  std::vector<std::vector<PJRT_Buffer*>> out(static_cast<size_t>(n), std::vector<PJRT_Buffer*>(outs, nullptr));
  std::vector<PJRT_Buffer* const*> arg_lists;
  std::vector<PJRT_Buffer**> out_lists;
  for (int d = 0; d < n; ++d) {
    arg_lists.push_back(in[static_cast<size_t>(d)].data());
    out_lists.push_back(out[static_cast<size_t>(d)].data());
  }
  auto options = Make<PJRT_ExecuteOptions>();
  auto run = Make<PJRT_LoadedExecutable_Execute_Args>();
  run.executable = exe;
  run.options = &options;
  run.argument_lists = arg_lists.data();
  run.num_devices = static_cast<size_t>(n);
  run.num_args = args;
  run.output_lists = out_lists.data();
  ExpectOk(client.api, client.api.PJRT_LoadedExecutable_Execute(&run));

  for (size_t k = 0; k < outs; ++k) {
    const Tensor& w = want->run.outputs[k];
    const size_t eb = static_cast<size_t>(hlo::ElementTypeBytes(w.type.element));
    for (int d = 0; d < n; ++d) {
      std::vector<int64_t> local, offset;
      PieceOf(*m, *layout, true, k, d, w.type.dims, local, offset);
      PJRT_Buffer* b = out[static_cast<size_t>(d)][k];
      ASSERT_NE(b, nullptr) << "output " << k << " device " << d;
      const std::vector<char> expect = Block(static_cast<const char*>(w.data.raw()), w.type.dims, local, offset, eb);
      const std::vector<char> got = ToHost<char>(client, b);
      ASSERT_EQ(got.size(), expect.size()) << c.name << " output " << k << " device " << d;
      EXPECT_TRUE(got == expect) << c.name << " output " << k << " device " << d << " differs from tpumesh run";
      DestroyBuffer(client.api, b);
    }
  }
  for (auto& row : in)
    for (PJRT_Buffer* b : row) DestroyBuffer(client.api, b);

  // cost_analysis: the dry run's priced flops of one device.
  hlo::RunOptions dry;
  dry.program = c.name;
  dry.dry_run = true;
  auto priced = hlo::RunModule(*m, dry, {});
  ASSERT_TRUE(priced.ok()) << priced.status().message();
  EXPECT_EQ(CostFigures(client, exe)["flops"], static_cast<float>(priced->report.logs[0].total().flops)) << c.name;
  auto destroy = Make<PJRT_LoadedExecutable_Destroy_Args>();
  destroy.executable = exe;
  ExpectOk(client.api, client.api.PJRT_LoadedExecutable_Destroy(&destroy));
}

INSTANTIATE_TEST_SUITE_P(Stored, ProgramsPjrtTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string s = info.param.generation + "_" + info.param.name;
                           for (char& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace tpumesh::pjrt
