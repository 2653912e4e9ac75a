// How much memory the host can still give: MemAvailable of /proc/meminfo,
// for the checks that refuse a run before it would be killed for memory
// (generate's loading, bench's buffers, the StableHLO interpreter's values).
#ifndef TPUMESH_BASE_HOST_MEMORY_H_
#define TPUMESH_BASE_HOST_MEMORY_H_

#include <cstdint>

namespace tpumesh {

// MemAvailable in bytes; -1 when it cannot be read.
int64_t HostMemoryAvailable();

}  // namespace tpumesh

#endif  // TPUMESH_BASE_HOST_MEMORY_H_
