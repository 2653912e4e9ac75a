#include "mesh/device.h"

#include <cstdio>
#include <string>

#include "oneapi/tbb/task_arena.h"

namespace tpumesh::mesh {

HbmReservation& HbmReservation::operator=(HbmReservation&& o) noexcept {
  if (this != &o) {
    Release();
    device_ = o.device_;
    bytes_ = o.bytes_;
    o.device_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void HbmReservation::Release() {
  if (device_ != nullptr && bytes_ > 0) device_->Free(bytes_);
  device_ = nullptr;
  bytes_ = 0;
}

Device::Device(int id, const ChipSpec& chip, const DeviceCoords& coords, int threads)
    : id_(id),
      chip_(&chip),
      coords_(coords),
      kind_(chip.device_kind + " (emulated)"),
      threads_(threads < 1 ? 1 : threads),
      // One slot is reserved for the device's own host thread, which enters
      // the arena; the rest are filled from TBB's shared worker pool, so N
      // arenas on few cores never oversubscribe them.
      arena_(std::make_unique<tbb::task_arena>(threads_, 1)),
      hbm_capacity_(chip.hbm_bytes_per_device()) {
  // Initialised here, in the thread that builds the mesh, not lazily by the
  // first execute(): the devices' threads of a pmap would otherwise set up
  // their arenas concurrently inside TBB (TSan reports it as a race, libtbb
  // not being instrumented), and the cost moves out of the first pmap.
  arena_->initialize();
}

Device::~Device() = default;

StatusOr<HbmReservation> Device::Reserve(int64_t bytes, std::string_view what) {
  if (bytes < 0) return InvalidArgumentError("negative allocation size");
  int64_t used = hbm_in_use_.load(std::memory_order_relaxed);
  while (true) {
    if (bytes > hbm_capacity_ - used) {
      return ResourceExhaustedError(
          "device " + std::to_string(id_) + " (" + kind_ + ") out of HBM: " +
          std::string(what) + " asks for " + std::to_string(bytes) + " bytes (" +
          FormatBytes(bytes) + "), " + std::to_string(hbm_capacity_ - used) +
          " bytes free (" + FormatBytes(hbm_capacity_ - used) + ") of " +
          FormatBytes(hbm_capacity_));
    }
    if (hbm_in_use_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed)) break;
  }
  int64_t now = used + bytes;
  int64_t peak = hbm_peak_.load(std::memory_order_relaxed);
  while (now > peak && !hbm_peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return HbmReservation(this, bytes);
}

std::string Device::ToString() const {
  return "TpuDevice(id=" + std::to_string(id_) + ", coords=(" +
         std::to_string(coords_.chip[0]) + "," + std::to_string(coords_.chip[1]) + "," +
         std::to_string(coords_.chip[2]) + "), core_on_chip=" +
         std::to_string(coords_.core_on_chip) + ")";
}

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace tpumesh::mesh
