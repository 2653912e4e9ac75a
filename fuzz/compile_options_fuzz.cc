// A serialized xla.CompileOptionsProto as PJRT_Client_Compile receives it
// (pjrt/compile_options.h): read, and when it parses, its device
// assignment written back and read again, which must give the same devices.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "pjrt/compile_options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto o = tpumesh::pjrt::ParseCompileOptions(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!o.ok() || o->devices.empty() || o->devices[0].empty()) return 0;
  for (const auto& row : o->devices)
    if (row.size() != o->devices[0].size()) return 0;  // ragged: not an assignment to write back
  // CompileOptionsProto{executable_build_options(3){device_assignment(9){...}}}
  const std::string assignment = tpumesh::pjrt::SerializeDeviceAssignment(o->devices);
  auto wrap = [](int field, const std::string& body) {
    std::string out(1, static_cast<char>(field << 3 | 2));
    for (uint64_t n = body.size(); ; n >>= 7) {
      out.push_back(static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0)));
      if (n < 0x80) break;
    }
    return out + body;
  };
  auto again = tpumesh::pjrt::ParseCompileOptions(wrap(3, wrap(9, assignment)));
  if (!again.ok() || again->devices != o->devices) std::abort();
  return 0;
}
