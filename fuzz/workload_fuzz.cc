// A workload file (io/workload.h), both formats: the first byte picks the
// extension (even: .csv, odd: .json), the rest is the text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  (void)tpumesh::pipeline::ParseWorkload(text, data[0] % 2 == 0 ? "fuzz.csv" : "fuzz.json",
                                         tpumesh::kernels::Precision::kDefault);
  return 0;
}
