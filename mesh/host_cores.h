// HostCores: a counting semaphore of host cores that device bodies hold while
// they compute (Mesh::Pmap) and hand back while parked in a collective.
//
// A mutex + condition variable on purpose: libstdc++ 12's
// std::counting_semaphore (atomic-wait based, GCC bug 104928) can miss a
// wake-up and sleep forever; we hit exactly that under ThreadSanitizer's
// scheduling, with a token free and a device asleep in acquire().
#ifndef TPUMESH_MESH_HOST_CORES_H_
#define TPUMESH_MESH_HOST_CORES_H_

#include <condition_variable>
#include <mutex>

namespace tpumesh::mesh {

class HostCores {
 public:
  explicit HostCores(int cores) : free_(cores) {}
  void Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return free_ > 0; });
    --free_;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_HOST_CORES_H_
