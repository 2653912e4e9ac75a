// A process-wide pool of byte buffers for data received from other ranks
// (cluster_mpi.cc takes them, collective_hub.cc gives them back when a
// collective's devices are done reading). A fresh buffer costs its page
// faults and zeroing on every collective: a 64 MB psum over 2 ranks
// receives 128 MB per rank, and reusing the buffers cut that exchange from
// 115-145 ms to 15-30 ms here (2 vCPUs; docs/cluster.md).
//
// Contract: TakeBytes(n) returns a buffer of size n (its contents
// unspecified), reused when one with the capacity is pooled. GiveBytes
// returns buffers; the pool keeps those of at least kMinPooledBytes, at
// most kMaxPooled of them and kMaxPooledBytes in all (the largest first),
// and frees the rest. Thread-safe. A rank so keeps up to its largest recent
// collective's received bytes after it (at most 1 GiB).
#ifndef TPUMESH_MESH_BYTE_POOL_H_
#define TPUMESH_MESH_BYTE_POOL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mesh/cluster.h"

namespace tpumesh::mesh {

inline constexpr int64_t kMinPooledBytes = int64_t{1} << 20;
inline constexpr int kMaxPooled = 16;
inline constexpr int64_t kMaxPooledBytes = int64_t{1} << 30;

Bytes TakeBytes(size_t n);
void GiveBytes(std::vector<Bytes>&& buffers);

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_BYTE_POOL_H_
