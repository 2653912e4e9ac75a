#include "mesh/array.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <new>
#include <vector>

namespace tpumesh::mesh {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "s32";
    case DType::kU32: return "u32";
    case DType::kU8: return "u8";
  }
  return "?";
}

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kU32: return 4;
    case DType::kU8: return 1;
  }
  return 0;
}

StatusOr<DType> ParseDType(std::string_view name) {
  if (name == "f32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "s32" || name == "i32" || name == "int32") return DType::kI32;
  if (name == "u32" || name == "uint32") return DType::kU32;
  return InvalidArgumentError("unknown dtype '" + std::string(name) +
                              "' (expected f32, bf16, int32 or uint32)");
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {
constexpr size_t kHugePage = size_t{2} << 20;

// Large mappings freed by arrays, kept for the next array of the same mapped
// size. A model call allocates every activation afresh, and a fresh mapping
// costs a page fault per 2 MiB plus the kernel's zeroing of it: 22 ms for
// SD 1.5's 84 MB GEGLU input on a Zen 5 core pair, more than the matmul that
// fills it. A reused mapping is only zeroed (memset), with no faults.
//
// The cache must not raise the peak memory: on a miss (a size not cached),
// cached mappings of at least that many bytes are unmapped, oldest first,
// before a new one is made. Live plus cached bytes then only grow when the
// cache is empty, i.e. never past the peak of the live arrays (plus one
// array); SD 1.5's generate on 8 devices kept its peak RSS, where a plain
// 1 GiB cache had added up to 1 GiB to it. Bounded by kCacheBytes besides:
// 256 MiB kept the UNet step as fast as 1 GiB did (2.38 vs 2.37 s).
class MappingCache {
 public:
  static MappingCache& Get() {
    static MappingCache* cache = new MappingCache();  // never destroyed: arrays may outlive main
    return *cache;
  }
  // A cached mapping of exactly `mapped` bytes, or nullptr after unmapping
  // cached ones of at least `mapped` bytes in all (the caller maps anew).
  void* Take(size_t mapped) {
    std::vector<Cached> evict;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->mapped == mapped) {
          void* base = it->base;
          bytes_ -= mapped;
          free_.erase(it);
          return base;
        }
      }
      size_t freed = 0;
      while (freed < mapped && !free_.empty()) {  // oldest first
        freed += free_.front().mapped;
        bytes_ -= free_.front().mapped;
        evict.push_back(free_.front());
        free_.pop_front();
      }
    }
    for (const Cached& c : evict) munmap(c.base, c.mapped);
    return nullptr;
  }
  // Keeps the mapping if there is room; false: the caller unmaps it.
  bool Put(void* base, size_t mapped) {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes_ + mapped > kCacheBytes) return false;
    free_.push_back({base, mapped});
    bytes_ += mapped;
    return true;
  }

 private:
  struct Cached {
    void* base;
    size_t mapped;
  };
  static constexpr size_t kCacheBytes = size_t{1} << 28;
  std::mutex mu_;
  std::deque<Cached> free_;  // oldest first; a few dozen entries at most
  size_t bytes_ = 0;
};

}  // namespace

// 64-byte aligned so SIMD kernels may use aligned loads on whole arrays.
// Buffers of 2 MiB and more are mapped directly, 2 MiB aligned, with
// MADV_HUGEPAGE on their whole 2 MiB blocks (MADV_NOHUGEPAGE on the rest):
// the kernel hands out zeroed pages (no memset), and first touch faults
// once per 2 MiB instead of once per 4 KiB. Measured on the
// all_gather bench (8 devices, 256 MB): glibc malloc + memset spent most of
// its time in page faults (see bench/mesh_collectives_bench.cc).
Array::Storage::Storage(size_t n, bool lazy) : bytes(n) {
  // Lazy storage reserves nothing (MAP_NORESERVE): it is for arrays never
  // written (dry runs), whatever their size.
  const int reserve = lazy ? MAP_NORESERVE : 0;
  if (lazy && n > 0 && n < kHugePage) {  // whole pages, mapped on first touch
    mapped = (n + 4095) / 4096 * 4096;
    void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | reserve, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    map_base = base;
    ptr = static_cast<std::byte*>(base);
    return;
  }
  if (n >= kHugePage) {
    mapped = (n + kHugePage - 1) / kHugePage * kHugePage + kHugePage;
    void* base = lazy ? nullptr : MappingCache::Get().Take(mapped);
    const bool reused = base != nullptr;
    if (!reused) {
      base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | reserve, -1, 0);
      if (base == MAP_FAILED) throw std::bad_alloc();
    }
    map_base = base;
    cacheable = !lazy;
    const uintptr_t aligned = (reinterpret_cast<uintptr_t>(base) + kHugePage - 1) & ~(kHugePage - 1);
    ptr = reinterpret_cast<std::byte*>(aligned);
    if (reused) {
      std::memset(ptr, 0, n);
    } else {
      // Huge pages for the whole 2 MiB blocks of the array only: a huge
      // page over its last, part-filled block would make all 2 MiB of it
      // resident at the first touch, ~1 MiB of slack per array on average
      // (SDXL's 6.9 GB of bf16 weights loaded with ~1 GB more). The rest is
      // marked no-huge so that a kernel set to "always" leaves it alone.
      const size_t whole = n / kHugePage * kHugePage;
      const size_t rest = mapped - (aligned - reinterpret_cast<uintptr_t>(base)) - whole;
      if (whole > 0) madvise(ptr, whole, MADV_HUGEPAGE);
      madvise(ptr + whole, rest, MADV_NOHUGEPAGE);
    }
    return;
  }
  const size_t rounded = n == 0 ? 64 : (n + 63) / 64 * 64;
  ptr = static_cast<std::byte*>(::operator new(rounded, std::align_val_t{64}));
  std::memset(ptr, 0, rounded);
}

Array::Storage::~Storage() {
  if (map_base != nullptr) {
    if (!cacheable || !MappingCache::Get().Put(map_base, mapped)) munmap(map_base, mapped);
  } else {
    ::operator delete(ptr, std::align_val_t{64});
  }
}

namespace {

Status CheckShape(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgumentError("negative dimension in shape " + ShapeToString(shape));
    if (d > 0 && n > std::numeric_limits<int64_t>::max() / 16 / d)
      return InvalidArgumentError("shape " + ShapeToString(shape) + " is too large");
    n *= d;
  }
  return OkStatus();
}

}  // namespace

Array Array::LazyZeros(DType dtype, Shape shape) {
  Array a;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  assert(CheckShape(a.shape_).ok());
  a.storage_ = std::make_shared<Storage>(static_cast<size_t>(a.size_bytes()), /*lazy=*/true);
  return a;
}

Array Array::Host(DType dtype, Shape shape) {
  Array a;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  assert(CheckShape(a.shape_).ok());
  a.storage_ = std::make_shared<Storage>(static_cast<size_t>(a.size_bytes()));
  return a;
}

StatusOr<Array> Array::Allocate(Device& device, DType dtype, Shape shape,
                                std::string_view what, bool lazy) {
  TPUMESH_RETURN_IF_ERROR(CheckShape(shape));
  const int64_t bytes = NumElements(shape) * static_cast<int64_t>(DTypeSize(dtype));
  TPUMESH_ASSIGN_OR_RETURN(HbmReservation r,
                           device.Reserve(bytes, std::string(what) + " " +
                                                     std::string(DTypeName(dtype)) +
                                                     ShapeToString(shape)));
  Array a = lazy ? LazyZeros(dtype, std::move(shape)) : Host(dtype, std::move(shape));
  a.device_ = &device;
  a.hbm_ = std::make_shared<HbmReservation>(std::move(r));
  return a;
}

int64_t Array::ReleaseHostPages() const {
  if (!storage_ || storage_->map_base == nullptr) return 0;
  Storage& st = *storage_;
  if (st.released) return 0;
  const size_t len = st.mapped;
  // The whole mapping (its alignment slack included) goes; the range stays
  // reserved, inaccessible.
  if (madvise(st.map_base, len, MADV_DONTNEED) != 0 || mprotect(st.map_base, len, PROT_NONE) != 0) return 0;
  st.released = true;
  st.cacheable = false;
  return static_cast<int64_t>(st.bytes);
}

void* Array::mutable_raw() {
  assert(!read_only_ && "writing to a replicated (shared, read-only) array");
  return storage_ ? storage_->data() : nullptr;
}

std::string Array::ToString() const {
  std::string s = std::string(DTypeName(dtype_)) + ShapeToString(shape_) + "@";
  s += device_ ? std::to_string(device_->id()) : "host";
  return s;
}

StatusOr<Array> Array::CopyTo(Device* device, std::string_view what) const {
  Array out;
  if (device != nullptr) {
    TPUMESH_ASSIGN_OR_RETURN(out, Allocate(*device, dtype_, shape_, what));
  } else {
    out = Host(dtype_, shape_);
  }
  if (size_bytes() > 0) std::memcpy(out.mutable_raw(), raw(), static_cast<size_t>(size_bytes()));
  return out;
}

StatusOr<Array> Array::ShareTo(Device& device, std::string_view what) const {
  TPUMESH_ASSIGN_OR_RETURN(
      HbmReservation r,
      device.Reserve(size_bytes(), std::string(what) + " " + std::string(DTypeName(dtype_)) +
                                       ShapeToString(shape_)));
  Array a = *this;
  a.device_ = &device;
  a.hbm_ = std::make_shared<HbmReservation>(std::move(r));
  a.read_only_ = true;
  return a;
}

StatusOr<Array> Array::View(DType dtype, Shape shape) const {
  TPUMESH_RETURN_IF_ERROR(CheckShape(shape));
  if (NumElements(shape) * static_cast<int64_t>(DTypeSize(dtype)) != size_bytes()) {
    return InvalidArgumentError("cannot view " + ToString() + " as " + std::string(DTypeName(dtype)) +
                                ShapeToString(shape) + ": byte sizes differ");
  }
  Array a = *this;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  return a;
}

StatusOr<Array> Array::Reshape(Shape shape) const {
  TPUMESH_RETURN_IF_ERROR(CheckShape(shape));
  if (NumElements(shape) != num_elements()) {
    return InvalidArgumentError("cannot reshape " + ToString() + " to " + ShapeToString(shape) +
                                ": element counts differ");
  }
  Array a = *this;
  a.shape_ = std::move(shape);
  return a;
}

StatusOr<Array> Array::SliceLeading(int64_t begin, int64_t end, Device* device,
                                    std::string_view what) const {
  if (rank() == 0) return InvalidArgumentError("cannot slice a scalar " + ToString());
  if (begin < 0 || end > shape_[0] || begin > end) {
    return InvalidArgumentError("slice [" + std::to_string(begin) + "," + std::to_string(end) +
                                ") out of range for " + ToString());
  }
  Shape s = shape_;
  s[0] = end - begin;
  Array out;
  if (device != nullptr) {
    TPUMESH_ASSIGN_OR_RETURN(out, Allocate(*device, dtype_, s, what));
  } else {
    out = Host(dtype_, s);
  }
  const int64_t row = shape_[0] ? size_bytes() / shape_[0] : 0;
  if (out.size_bytes() > 0) {
    std::memcpy(out.mutable_raw(), static_cast<const std::byte*>(raw()) + begin * row,
                static_cast<size_t>(out.size_bytes()));
  }
  return out;
}

void BoundHostHeap() {
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHugePage));
  mallopt(M_ARENA_MAX, 2);
}

void TrimHostHeap() { malloc_trim(0); }

bool Array::BitwiseEquals(const Array& o) const {
  if (dtype_ != o.dtype_ || shape_ != o.shape_) return false;
  return size_bytes() == 0 || std::memcmp(raw(), o.raw(), static_cast<size_t>(size_bytes())) == 0;
}

}  // namespace tpumesh::mesh
