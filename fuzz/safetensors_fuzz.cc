// A safetensors file: opened, and every float tensor read.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpumesh::fuzz::MemFile f(data, size);
  auto st = tpumesh::pipeline::SafetensorsFile::Open(f.path());
  if (st.ok())
    for (const auto& e : st->entries()) (void)st->Read(e.name, tpumesh::mesh::DType::kF32);
  return 0;
}
