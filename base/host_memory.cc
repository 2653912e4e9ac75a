#include "base/host_memory.h"

#include <cinttypes>
#include <cstdio>

namespace tpumesh {

int64_t HostMemoryAvailable() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "MemAvailable: %" SCNd64 " kB", &kib) == 1) break;
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

}  // namespace tpumesh
