// A latents / eval input file (HDF5): the datasets generate and eval read.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "io/h5io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpumesh::fuzz::MemFile f(data, size);
  for (const char* name : {"latents", "input_ids", "sample", "timestep"})
    (void)tpumesh::pipeline::H5ReadArray(f.path(), name);
  (void)tpumesh::pipeline::H5ReadStrings(f.path(), "prompts");
  return 0;
}
