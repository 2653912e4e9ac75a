// A chip file (JSON), and a mesh on it when it parses.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "mesh/chip_spec.h"
#include "mesh/mesh.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto chip = tpumesh::mesh::ChipSpecFromJson(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (chip.ok()) {
    auto dims = tpumesh::mesh::Topology::DimsForDevices(*chip, 8);
    if (dims.ok()) (void)tpumesh::mesh::Mesh::Create(*chip, *dims, {});
  }
  return 0;
}
