#include "mesh/device.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/info.h"
#include "oneapi/tbb/task_arena.h"

namespace tpumesh::mesh {
namespace {

// TBB's shared worker pool holds (host threads - 1) workers by default. A
// device asked for more threads than that (--threads-per-device above the
// host's cores: oversubscription on purpose) raises the pool to what it
// asks, rather than TBB's stderr warning and an arena silently smaller.
void EnsureWorkerPool(int threads) {
  static std::mutex mu;
  static std::unique_ptr<tbb::global_control> control;
  static int allowed = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (threads <= std::max(allowed, tbb::info::default_concurrency())) return;
  // The newest control takes effect once the old one (more restrictive) goes.
  auto raised = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, threads);
  control = std::move(raised);
  allowed = threads;
}

}  // namespace

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
  EnsureWorkerPool(threads_);
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
