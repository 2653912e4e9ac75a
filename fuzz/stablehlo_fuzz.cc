// A StableHLO module's MLIR text (hlo/module.h), the op-table
// verifier over it when it parses, and a dry run of @main on one emulated
// device when it verifies (hlo/interpreter.h: shapes, HBM and prices, the
// values of at most 4,096 elements computed, so every op's checks and small
// computations run on hostile attributes). Beyond no crash and no hang: a
// text that does not parse is one InvalidArgument error naming the file
// ("fuzz.mlir:LINE:COL: what"), as the reader's contract says.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "hlo/interpreter.h"
#include "hlo/module.h"
#include "mesh/mesh.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = tpumesh::hlo::ParseModule(text, "fuzz.mlir");
  if (!m.ok()) {
    if (m.status().code() != tpumesh::StatusCode::kInvalidArgument ||
        m.status().message().rfind("fuzz.mlir:", 0) != 0)
      __builtin_trap();
    return 0;
  }
  if (!tpumesh::hlo::Verify(*m).ok()) return 0;
  static std::unique_ptr<tpumesh::mesh::Mesh> mesh = [] {
    tpumesh::mesh::MeshSpec spec;
    spec.devices = 1;
    spec.threads_per_device = 1;
    return std::move(tpumesh::mesh::CreateMesh(spec).value());
  }();
  const tpumesh::hlo::Func* main = m->FindFunc("main");
  tpumesh::hlo::DeviceSite site;
  site.device = &mesh->device(0);
  site.axes = mesh->axes();
  site.topology = &mesh->topology();
  std::vector<tpumesh::hlo::Tensor> args;
  for (const auto& t : main->arg_types) {
    auto a = tpumesh::hlo::NewTensor(t, site.device, /*lazy=*/true, "argument");
    if (!a.ok()) return 0;  // past the device's HBM: refused, as run refuses it
    args.push_back(std::move(*a));
  }
  tpumesh::hlo::Options o;
  o.dry_run = true;
  // A fuzzed loop ends with an error, not a time-out: about 50 us per op under
  // ASan (more on a loaded host), against libFuzzer's -timeout=20.
  o.max_executed_ops = 20000;
  (void)tpumesh::hlo::RunFunction(*m, "main", std::move(args), site, o);
  return 0;
}
