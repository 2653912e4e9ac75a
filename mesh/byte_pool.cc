#include "mesh/byte_pool.h"

#include <algorithm>
#include <mutex>

namespace tpumesh::mesh {
namespace {

std::mutex& PoolMutex() {
  static std::mutex mu;
  return mu;
}

std::vector<Bytes>& Pool() {
  static auto* pool = new std::vector<Bytes>();  // never destroyed: used until exit
  return *pool;
}

}  // namespace

Bytes TakeBytes(size_t n) {
  Bytes b;
  if (static_cast<int64_t>(n) < kMinPooledBytes) {
    // A round's header: not worth a pooled buffer (and it would keep one
    // from the next large exchange).
    b.resize(n);
    return b;
  }
  {
    std::lock_guard<std::mutex> lock(PoolMutex());
    auto& pool = Pool();
    // The smallest buffer that holds n.
    auto best = pool.end();
    for (auto it = pool.begin(); it != pool.end(); ++it)
      if (it->capacity() >= n && (best == pool.end() || it->capacity() < best->capacity())) best = it;
    if (best != pool.end()) {
      b = std::move(*best);
      pool.erase(best);
    }
  }
  // Shrinking touches nothing; growing within the capacity zeroes only the
  // difference (a buffer comes back at the size it was last used at).
  b.resize(n);
  return b;
}

void GiveBytes(std::vector<Bytes>&& buffers) {
  std::lock_guard<std::mutex> lock(PoolMutex());
  auto& pool = Pool();
  for (Bytes& b : buffers)
    if (static_cast<int64_t>(b.capacity()) >= kMinPooledBytes) pool.push_back(std::move(b));
  buffers.clear();
  std::sort(pool.begin(), pool.end(), [](const Bytes& a, const Bytes& b) { return a.capacity() > b.capacity(); });
  int64_t total = 0;
  size_t keep = 0;
  while (keep < pool.size() && static_cast<int>(keep) < kMaxPooled &&
         total + static_cast<int64_t>(pool[keep].capacity()) <= kMaxPooledBytes)
    total += static_cast<int64_t>(pool[keep++].capacity());
  pool.resize(keep);
}

}  // namespace tpumesh::mesh
