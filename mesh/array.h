// Array: a dense row-major array with a dtype, a shape and an owning device
// (or none: a host array). Storage is reference-counted host memory; HBM use
// is counted on the owning device for as long as any handle to the array
// lives.
//
// Contract: Array is a cheap handle (copying it shares the data, like a PJRT
// buffer reference). Arrays made by ShareTo (replication) share read-only
// storage with the source but are each counted on their own device, as a
// replicated parameter occupies HBM on every chip; writing through
// mutable_data() of a shared array is a programming error (asserted).
#ifndef TPUMESH_MESH_ARRAY_H_
#define TPUMESH_MESH_ARRAY_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/bf16.h"
#include "mesh/device.h"

namespace tpumesh::mesh {

// kU8: raw bytes (a StableHLO value of any element type, hlo/), moved by
// the data collectives but never summed.
enum class DType { kF32, kBF16, kI32, kU32, kU8 };

std::string_view DTypeName(DType t);  // "f32", "bf16", "s32", "u32", "u8" as XLA
size_t DTypeSize(DType t);
StatusOr<DType> ParseDType(std::string_view name);  // also accepts "float32"...

using Shape = std::vector<int64_t>;
int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "[2,77]"

// The host heap's policy for a process that runs virtual devices, called
// once at the start of main: blocks of 2 MiB and more (the size from which
// arrays map their own storage) are mapped on their own, given back to the
// OS when freed, and malloc keeps at most 2 arenas. glibc's defaults (a
// mapping threshold that climbs to 32 MiB as large blocks are freed, 8
// arenas per core) left SD 1.5's `generate` on 8 devices with ~670 MB of
// freed heap resident, growing with every device that ran; a 1 MiB
// threshold cost the text encoder 30% in page faults (docs/mesh.md).
void BoundHostHeap();
// Returns the heap's free pages to the OS (malloc_trim), after a large
// release of blocks under 2 MiB (models::ParamMap::GiveBack's small packs).
void TrimHostHeap();

template <typename T> constexpr DType DTypeOf();
template <> constexpr DType DTypeOf<float>() { return DType::kF32; }
template <> constexpr DType DTypeOf<kernels::bf16>() { return DType::kBF16; }
template <> constexpr DType DTypeOf<int32_t>() { return DType::kI32; }
template <> constexpr DType DTypeOf<uint32_t>() { return DType::kU32; }
template <> constexpr DType DTypeOf<uint8_t>() { return DType::kU8; }

class Array {
 public:
  Array() = default;  // an empty f32[0] host array

  // A zero-filled host array (no device, no HBM accounting).
  static Array Host(DType dtype, Shape shape);
  // The same, with pages mapped only when first touched whatever its size
  // (Host maps lazily only from 2 MiB): for the weights of a dry run, which
  // are never read.
  static Array LazyZeros(DType dtype, Shape shape);
  template <typename T>
  static Array HostFrom(Shape shape, std::span<const T> values);
  // A zero-filled array on `device`, counted against its HBM. lazy: its
  // pages are reserved from nothing and mapped only if touched (a dry run's
  // activations, which are never written), so a dry run of any size costs
  // the host no memory.
  static StatusOr<Array> Allocate(Device& device, DType dtype, Shape shape,
                                  std::string_view what = "array", bool lazy = false);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t num_elements() const { return NumElements(shape_); }
  int64_t size_bytes() const { return num_elements() * static_cast<int64_t>(DTypeSize(dtype_)); }
  Device* device() const { return device_; }
  bool read_only() const { return read_only_; }
  // "f32[2,77]@3" (device 3) or "f32[2,77]@host"
  std::string ToString() const;

  const void* raw() const { return storage_ ? storage_->data() : nullptr; }
  void* mutable_raw();
  template <typename T> const T* data() const;
  template <typename T> T* mutable_data();
  template <typename T> std::vector<T> ToVector() const;

  // A deep copy onto `device` (counted there), or onto the host when null.
  StatusOr<Array> CopyTo(Device* device, std::string_view what = "copy") const;
  // A read-only view of the same storage, counted on `device`.
  StatusOr<Array> ShareTo(Device& device, std::string_view what = "replica") const;
  // Same storage, new shape with the same element count.
  StatusOr<Array> Reshape(Shape shape) const;
  // Same storage and device accounting seen as another dtype and shape of
  // the same byte size (a bitcast).
  StatusOr<Array> View(DType dtype, Shape shape) const;
  // Rows [begin, end) of the leading dimension, copied onto `device`.
  StatusOr<Array> SliceLeading(int64_t begin, int64_t end, Device* device,
                               std::string_view what = "shard") const;

  bool SharesStorageWith(const Array& o) const { return storage_ && storage_ == o.storage_; }
  // Handles sharing this array's storage (this one included); 0 for none.
  // 1: nothing else reads it, so an op may write its result into it.
  long storage_users() const { return storage_ ? storage_.use_count() : 0; }
  // Gives the host pages of this array's storage back to the OS for good,
  // for every view sharing them, and makes them unreadable (a later read
  // faults instead of seeing zeros); the address stays reserved, so raw()
  // still tells the array apart. For arrays whose only use left is a copy
  // in another layout (models::WeightPacks releases a Linear or conv weight
  // once it is packed). Only storage mapped on its own (2 MiB and more) can
  // go: returns the bytes released, 0 otherwise (nothing changes then).
  int64_t ReleaseHostPages() const;
  // Same dtype, shape and bytes.
  bool BitwiseEquals(const Array& o) const;

 private:
  struct Storage {
    explicit Storage(size_t bytes, bool lazy = false);
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    std::byte* data() { return ptr; }
    std::byte* ptr = nullptr;
    size_t bytes = 0;
    void* map_base = nullptr;  // set when mapped directly (large buffers)
    size_t mapped = 0;
    bool cacheable = false;  // the mapping may go back to the mapping cache (array.cc)
    bool released = false;   // ReleaseHostPages: unmapped at the end, never cached
  };

  DType dtype_ = DType::kF32;
  Shape shape_ = {0};
  std::shared_ptr<Storage> storage_;
  Device* device_ = nullptr;
  std::shared_ptr<HbmReservation> hbm_;
  bool read_only_ = false;
};

template <typename T>
Array Array::HostFrom(Shape shape, std::span<const T> values) {
  Array a = Host(DTypeOf<T>(), std::move(shape));
  const size_t n = std::min<size_t>(values.size(), static_cast<size_t>(a.num_elements()));
  if (n) std::memcpy(a.mutable_raw(), values.data(), n * sizeof(T));
  return a;
}

template <typename T>
const T* Array::data() const {
  assert(DTypeOf<T>() == dtype_);
  return static_cast<const T*>(raw());
}

template <typename T>
T* Array::mutable_data() {
  assert(DTypeOf<T>() == dtype_);
  return static_cast<T*>(mutable_raw());
}

template <typename T>
std::vector<T> Array::ToVector() const {
  const T* p = data<T>();
  return std::vector<T>(p, p + num_elements());
}

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_ARRAY_H_
