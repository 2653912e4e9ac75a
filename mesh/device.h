// Device: one virtual TPU device. It has an id and physical coordinates, its
// own TBB task arena (the host threads that run its work), an HBM budget that
// every allocation on it counts against, and a simulated clock that advances
// by the modelled time of what it runs.
//
// Contract: a Device is owned by its Mesh and outlives every Array allocated
// on it. HBM accounting is thread-safe. The simulated clock is advanced only
// by the thread running this device's pmap body, or by a collective while all
// its participants are parked in it; read it after pmap returns.
#ifndef TPUMESH_MESH_DEVICE_H_
#define TPUMESH_MESH_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "mesh/chip_spec.h"
#include "mesh/topology.h"
#include "oneapi/tbb/task_arena.h"

namespace tpumesh::mesh {

class Device;

// Bytes held on a device's HBM; released when the last owner goes away.
class HbmReservation {
 public:
  HbmReservation() = default;
  HbmReservation(const HbmReservation&) = delete;
  HbmReservation& operator=(const HbmReservation&) = delete;
  HbmReservation(HbmReservation&& o) noexcept : device_(o.device_), bytes_(o.bytes_) {
    o.device_ = nullptr;
    o.bytes_ = 0;
  }
  HbmReservation& operator=(HbmReservation&& o) noexcept;
  ~HbmReservation() { Release(); }

  int64_t bytes() const { return bytes_; }
  Device* device() const { return device_; }
  void Release();

 private:
  friend class Device;
  HbmReservation(Device* device, int64_t bytes) : device_(device), bytes_(bytes) {}
  Device* device_ = nullptr;
  int64_t bytes_ = 0;
};

class Device {
 public:
  // threads: host threads this device's arena may use (>= 1).
  Device(int id, const ChipSpec& chip, const DeviceCoords& coords, int threads);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int id() const { return id_; }
  const DeviceCoords& coords() const { return coords_; }
  // "TPU v5 lite (emulated)"
  const std::string& kind() const { return kind_; }
  const ChipSpec& chip() const { return *chip_; }
  int threads() const { return threads_; }
  tbb::task_arena& arena() { return *arena_; }

  // Counts `bytes` against this device's HBM. Fails with ResourceExhausted,
  // naming the device, the bytes asked for and the bytes free, when the
  // capacity would be exceeded. `what` names the allocation in the message.
  StatusOr<HbmReservation> Reserve(int64_t bytes, std::string_view what);
  int64_t hbm_capacity() const { return hbm_capacity_; }
  int64_t hbm_in_use() const { return hbm_in_use_.load(std::memory_order_relaxed); }
  int64_t hbm_peak() const { return hbm_peak_.load(std::memory_order_relaxed); }
  // Starts a new peak from what is in use now (one run's peak, not the
  // device's lifetime).
  void ResetHbmPeak() { hbm_peak_.store(hbm_in_use(), std::memory_order_relaxed); }
  int64_t hbm_free() const { return hbm_capacity_ - hbm_in_use(); }
  // For tests and studies of smaller parts: shrink or grow the budget.
  void set_hbm_capacity(int64_t bytes) { hbm_capacity_ = bytes; }

  // Simulated time on the emulated chip, in seconds (modelled, not measured).
  double clock_seconds() const { return clock_s_; }
  void AdvanceClock(double seconds) { clock_s_ += seconds; }
  void SetClock(double seconds) { clock_s_ = seconds; }

  // Interconnect traffic this device sent, as modelled (bytes).
  int64_t ici_bytes_sent() const { return ici_bytes_sent_; }
  void AddIciBytes(int64_t bytes) { ici_bytes_sent_ += bytes; }

  // Like jax: "TpuDevice(id=0, coords=(0,0,0), core_on_chip=0)".
  std::string ToString() const;

 private:
  friend class HbmReservation;
  void Free(int64_t bytes) { hbm_in_use_.fetch_sub(bytes, std::memory_order_relaxed); }

  int id_;
  const ChipSpec* chip_;
  DeviceCoords coords_;
  std::string kind_;
  int threads_;
  std::unique_ptr<tbb::task_arena> arena_;
  int64_t hbm_capacity_;
  std::atomic<int64_t> hbm_in_use_{0};
  std::atomic<int64_t> hbm_peak_{0};
  double clock_s_ = 0;
  int64_t ici_bytes_sent_ = 0;
};

// "16.0 GiB", "512 B", ...
std::string FormatBytes(int64_t bytes);

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_DEVICE_H_
