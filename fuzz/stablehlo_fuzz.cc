// A StableHLO module's MLIR text (io/stablehlo_module.h), and the op-table
// verifier over it when it parses (hlo/interpreter.h). Beyond no crash and
// no hang: a text that does not parse is one InvalidArgument error naming
// the file ("fuzz.mlir:LINE:COL: what"), as the reader's contract says.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hlo/interpreter.h"
#include "io/stablehlo_module.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = tpumesh::hlo::ParseModule(text, "fuzz.mlir");
  if (!m.ok()) {
    if (m.status().code() != tpumesh::StatusCode::kInvalidArgument ||
        m.status().message().rfind("fuzz.mlir:", 0) != 0)
      __builtin_trap();
    return 0;
  }
  (void)tpumesh::hlo::Verify(*m);
  return 0;
}
