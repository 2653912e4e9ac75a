// The matmul frame: argument checks, B packing, provider choice, and the split
// of C into blocks run on TBB (kernels/ops_parallel.h). The arithmetic lives in the providers
// (matmul_bf16.cc, matmul_amx.cc, matmul-inl.h via matmul_highway.cc,
// matmul_blis.cc).
#include "kernels/matmul.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/matmul_internal.h"
#include "kernels/ops_parallel.h"
#include "kernels/peak.h"

namespace tpumesh::kernels {

using matmul_internal::AlignedArray;
using matmul_internal::CallArgs;
using matmul_internal::DriverShape;
using matmul_internal::kPanelWidth;
using matmul_internal::Layout;
using matmul_internal::PackedData;

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kDefault: return "default";
    case Precision::kHigh: return "high";
    case Precision::kHighest: return "highest";
  }
  return "?";
}

std::string_view ProviderName(Provider p) {
  switch (p) {
    case Provider::kAuto: return "auto";
    case Provider::kHighway: return "highway";
    case Provider::kBf16: return "bf16";
    case Provider::kBlis: return "blis";
    case Provider::kAmx: return "amx";
  }
  return "?";
}

int PrecisionPasses(Precision p) {
  switch (p) {
    case Precision::kDefault: return 1;
    case Precision::kHigh: return 3;
    case Precision::kHighest: return 6;
  }
  return 1;
}

StatusOr<Provider> ResolveProvider(Provider requested, Precision precision) {
  switch (requested) {
    case Provider::kAuto:
      if (precision == Precision::kHighest) return Provider::kHighway;  // matmul.h: why not kBlis
      // AMX first where it may run (the self-check runs here, once).
      if (AmxMatmulActive()) return Provider::kAmx;
      return Avx512Bf16Active() && Bf16DotOutrunsFma() ? Provider::kBf16 : Provider::kHighway;
    case Provider::kBf16:
      if (precision == Precision::kHighest) {
        return UnimplementedError(
            "matmul provider bf16 does not implement precision highest (use highway or blis)");
      }
      if (!Avx512Bf16Active()) {
        return UnimplementedError(std::string("matmul provider bf16 needs AVX512_BF16, which ") +
                                  (HostCpuPath() >= CpuPath::kAvx512Bf16 ? "TPUMESH_SIMD turns off" : "this CPU or OS lacks"));
      }
      return Provider::kBf16;
    case Provider::kAmx:
      if (precision == Precision::kHighest) {
        return UnimplementedError(
            "matmul provider amx does not implement precision highest (use highway or blis)");
      }
      if (!AmxMatmulActive()) return UnimplementedError("matmul provider amx is off here: " + AmxMatmulNote());
      return Provider::kAmx;
    case Provider::kHighway:
    case Provider::kBlis:
      return requested;
  }
  return InvalidArgumentError("matmul: unknown provider");
}

namespace matmul_internal {

template <typename T>
AlignedArray<T> AllocateAligned(size_t count) {
  const size_t bytes = std::max<size_t>(64, (count * sizeof(T) + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr) return AlignedArray<T>();
  std::memset(p, 0, bytes);
  return AlignedArray<T>(static_cast<T*>(p));
}
template AlignedArray<uint32_t> AllocateAligned<uint32_t>(size_t);
template AlignedArray<float> AllocateAligned<float>(size_t);
template AlignedArray<bf16> AllocateAligned<bf16>(size_t);

DriverShape DriverShapeOf(Provider provider) {
  switch (provider) {
    case Provider::kBf16: return Bf16DriverShape();
    case Provider::kAmx: return AmxDriverShape();
    case Provider::kBlis: return BlisDriverShape();
    case Provider::kHighway:
    case Provider::kAuto: break;
  }
  return HighwayDriverShape();
}

}  // namespace matmul_internal

// ---------------------------------------------------------------- PackedMatrix

PackedMatrix::PackedMatrix() = default;
PackedMatrix::~PackedMatrix() = default;
PackedMatrix::PackedMatrix(PackedMatrix&&) noexcept = default;
PackedMatrix& PackedMatrix::operator=(PackedMatrix&&) noexcept = default;
PackedMatrix::PackedMatrix(std::unique_ptr<PackedData> data) : data_(std::move(data)) {}

int64_t PackedMatrix::k() const { return data_ ? data_->k : 0; }
int64_t PackedMatrix::n() const { return data_ ? data_->n : 0; }
Precision PackedMatrix::precision() const { return data_ ? data_->precision : Precision::kDefault; }
Provider PackedMatrix::provider() const { return data_ ? data_->provider : Provider::kAuto; }
size_t PackedMatrix::size_bytes() const { return data_ ? data_->bytes : 0; }

namespace {

inline float ToF32(float x) { return x; }
inline float ToF32(bf16 x) { return Bf16ToF32(x); }

// B given row-major (Pack: ldb >= n) or transposed (PackTransposed: its
// rows are B's columns, ldbt >= k).
Status CheckPack(int64_t k, int64_t n, const void* b, int64_t ld, bool transposed) {
  const std::string fn = transposed ? "PackedMatrix::PackTransposed: " : "PackedMatrix::Pack: ";
  const char* ld_name = transposed ? "ldbt" : "ldb";
  const char* row_name = transposed ? "k" : "n";
  const int64_t row = transposed ? k : n;
  if (k < 0) return InvalidArgumentError(fn + "k = " + std::to_string(k) + " must be >= 0");
  if (n < 0) return InvalidArgumentError(fn + "n = " + std::to_string(n) + " must be >= 0");
  if (ld < std::max<int64_t>(row, 1)) {
    return InvalidArgumentError(fn + ld_name + " = " + std::to_string(ld) + " must be >= " + row_name + " = " +
                                std::to_string(row) + " (and >= 1)");
  }
  if (b == nullptr && k > 0 && n > 0) return InvalidArgumentError(fn + (transposed ? "bt" : "b") + " is null");
  return OkStatus();
}

// The packers read B through `at(kk, col)` = B[kk][col]: a row-major B
// (Pack) or B given transposed (PackTransposed).
template <typename T>
struct RowMajorB {
  static constexpr bool kTransposed = false;
  const T* b;
  int64_t ldb;
  float operator()(int64_t kk, int64_t col) const { return ToF32(b[kk * ldb + col]); }
};
template <typename T>
struct TransposedB {
  static constexpr bool kTransposed = true;
  const T* bt;
  int64_t ldbt;
  float operator()(int64_t kk, int64_t col) const { return ToF32(bt[col * ldbt + kk]); }
};

inline uint32_t PairWord(float e0, float e1) {
  return F32ToBf16(e0).bits | (uint32_t{F32ToBf16(e1).bits} << 16);
}

// kDefault: one word per (pair, column), the pad row of odd K zero. The loop
// runs along B's contiguous axis (columns for a row-major B, k for a
// transposed one), which is what makes packing at plan time cheap.
template <typename B>
void PackPairsDefault(const B& at, PackedData& p) {
  const int64_t k = p.k, n = p.n, pairs = (k + 1) / 2;
  auto e1 = [&](int64_t q, int64_t col) { return 2 * q + 1 < k ? at(2 * q + 1, col) : 0.0f; };
  if constexpr (B::kTransposed) {
    for (int64_t col = 0; col < n; ++col) {
      uint32_t* dst = p.words.get() + (col / kPanelWidth) * p.pairs * kPanelWidth + col % kPanelWidth;
      for (int64_t q = 0; q < pairs; ++q) dst[q * kPanelWidth] = PairWord(at(2 * q, col), e1(q, col));
    }
    return;
  }
  for (int64_t q = 0; q < pairs; ++q) {
    for (int64_t c0 = 0; c0 < n; c0 += kPanelWidth) {
      uint32_t* dst = p.words.get() + (c0 / kPanelWidth) * p.pairs * kPanelWidth + q * kPanelWidth;
      const int64_t cols = std::min(kPanelWidth, n - c0);
      for (int64_t c = 0; c < cols; ++c) dst[c] = PairWord(at(2 * q, c0 + c), e1(q, c0 + c));
    }
  }
}

// kHigh: three expanded pairs per original pair (matmul_internal.h).
template <typename B>
void PackPairsHigh(const B& at, PackedData& p) {
  const int64_t k = p.k, n = p.n;
  auto element = [&](int64_t kk, int64_t col) -> float { return kk < k ? at(kk, col) : 0.0f; };
  const int64_t pairs = (k + 1) / 2;  // original pairs
  for (int64_t q = 0; q < pairs; ++q) {
    for (int64_t col = 0; col < n; ++col) {
      uint32_t* panel = p.words.get() + (col / kPanelWidth) * p.pairs * kPanelWidth + col % kPanelWidth;
      bf16 h0, l0, x0, h1, l1, x1;
      matmul_internal::SplitBf16(element(2 * q, col), &h0, &l0, &x0);
      matmul_internal::SplitBf16(element(2 * q + 1, col), &h1, &l1, &x1);
      panel[(3 * q + 0) * kPanelWidth] = h0.bits | (uint32_t{h1.bits} << 16);  // a_hi * b_hi
      panel[(3 * q + 1) * kPanelWidth] = l0.bits | (uint32_t{l1.bits} << 16);  // a_cross * b_lo
      panel[(3 * q + 2) * kPanelWidth] = x0.bits | (uint32_t{x1.bits} << 16);  // a_lo * b_cross
    }
  }
}

template <typename B>
void PackF32Panels(const B& at, PackedData& p) {
  for (int64_t kk = 0; kk < p.k; ++kk) {
    for (int64_t col = 0; col < p.n; ++col) {
      p.floats[(col / kPanelWidth) * p.k * kPanelWidth + kk * kPanelWidth + col % kPanelWidth] = at(kk, col);
    }
  }
}

template <typename B>
void PackRowMajor(const B& at, PackedData& p) {
  const int64_t n = p.n;
  for (int64_t kk = 0; kk < p.k; ++kk) {
    switch (p.precision) {
      case Precision::kDefault:
        for (int64_t j = 0; j < n; ++j) p.floats[kk * n + j] = RoundToBf16(at(kk, j));
        break;
      case Precision::kHigh:
        for (int64_t j = 0; j < n; ++j) {
          bf16 hi, lo, cross;
          matmul_internal::SplitBf16(at(kk, j), &hi, &lo, &cross);
          p.floats[(3 * kk + 0) * n + j] = Bf16ToF32(hi);
          p.floats[(3 * kk + 1) * n + j] = Bf16ToF32(lo);
          p.floats[(3 * kk + 2) * n + j] = Bf16ToF32(cross);
        }
        break;
      case Precision::kHighest:
        for (int64_t j = 0; j < n; ++j) p.floats[kk * n + j] = at(kk, j);
        break;
    }
  }
}

template <typename B>
StatusOr<PackedMatrix> PackImpl(int64_t k, int64_t n, const B& at,
                                const MatmulOptions& options, PackedMatrix (*make)(std::unique_ptr<PackedData>)) {
  static_assert(std::is_invocable_r_v<float, B, int64_t, int64_t>);
  TPUMESH_ASSIGN_OR_RETURN(const Provider provider, ResolveProvider(options.provider, options.precision));
  auto p = std::make_unique<PackedData>();
  p->k = k;
  p->n = n;
  p->precision = options.precision;
  p->provider = provider;
  p->panels = (n + kPanelWidth - 1) / kPanelWidth;
  size_t count = 0;
  if (provider == Provider::kBlis) {
    p->layout = Layout::kRowMajor;
    p->k_rows = options.precision == Precision::kHigh ? 3 * k : k;
    count = static_cast<size_t>(p->k_rows * n);
    p->floats = matmul_internal::AllocateAligned<float>(count);
    if (count > 0 && p->floats == nullptr) return ResourceExhaustedError("PackedMatrix::Pack: out of memory");
    PackRowMajor(at, *p);
    p->bytes = count * sizeof(float);
  } else if (options.precision == Precision::kHighest) {
    p->layout = Layout::kF32Panels;
    count = static_cast<size_t>(p->panels * kPanelWidth * k);
    p->floats = matmul_internal::AllocateAligned<float>(count);
    if (count > 0 && p->floats == nullptr) return ResourceExhaustedError("PackedMatrix::Pack: out of memory");
    PackF32Panels(at, *p);
    p->bytes = count * sizeof(float);
  } else {
    p->layout = Layout::kPairs;
    p->pairs = (k + 1) / 2 * (options.precision == Precision::kHigh ? 3 : 1);
    count = static_cast<size_t>(p->panels * kPanelWidth * p->pairs);
    p->words = matmul_internal::AllocateAligned<uint32_t>(count);
    if (count > 0 && p->words == nullptr) return ResourceExhaustedError("PackedMatrix::Pack: out of memory");
    if (options.precision == Precision::kHigh) {
      PackPairsHigh(at, *p);
    } else {
      PackPairsDefault(at, *p);
    }
    p->bytes = count * sizeof(uint32_t);
  }
  return make(std::move(p));
}

using MakeFn = PackedMatrix (*)(std::unique_ptr<PackedData>);

template <typename T>
StatusOr<PackedMatrix> PackRowMajorB(int64_t k, int64_t n, const T* b, int64_t ldb, const MatmulOptions& options,
                                     MakeFn make) {
  TPUMESH_RETURN_IF_ERROR(CheckPack(k, n, b, ldb, /*transposed=*/false));
  return PackImpl(k, n, RowMajorB<T>{b, ldb}, options, make);
}

}  // namespace

StatusOr<PackedMatrix> PackedMatrix::Pack(int64_t k, int64_t n, const float* b, int64_t ldb,
                                          const MatmulOptions& options) {
  return PackRowMajorB(k, n, b, ldb, options,
                       [](std::unique_ptr<PackedData> d) { return PackedMatrix(std::move(d)); });
}

StatusOr<PackedMatrix> PackedMatrix::Pack(int64_t k, int64_t n, const bf16* b, int64_t ldb,
                                          const MatmulOptions& options) {
  return PackRowMajorB(k, n, b, ldb, options,
                       [](std::unique_ptr<PackedData> d) { return PackedMatrix(std::move(d)); });
}

StatusOr<PackedMatrix> PackedMatrix::PackTransposed(int64_t k, int64_t n, const float* bt, int64_t ldbt,
                                                    const MatmulOptions& options) {
  TPUMESH_RETURN_IF_ERROR(CheckPack(k, n, bt, ldbt, /*transposed=*/true));
  return PackImpl(k, n, TransposedB<float>{bt, ldbt}, options,
                  [](std::unique_ptr<PackedData> d) { return PackedMatrix(std::move(d)); });
}
// ----------------------------------------------------------------------- frame

namespace {

std::string Dim(const char* name, int64_t v) { return std::string(name) + " = " + std::to_string(v); }

// Byte span [begin, end) touched by `batch` row-major matrices.
struct Span {
  uintptr_t begin, end;
};
Span MatrixSpan(const void* p, size_t elem, int64_t batch, int64_t stride, int64_t rows, int64_t ld,
                int64_t cols) {
  const auto base = reinterpret_cast<uintptr_t>(p);
  const int64_t last = (batch - 1) * stride + (rows - 1) * ld + cols;
  return {base, base + static_cast<uintptr_t>(last) * elem};
}

Status CheckMatmul(int64_t batch, int64_t m, const void* a, size_t a_elem, int64_t lda,
                   int64_t stride_a, const PackedMatrix& b, const float* c, int64_t ldc,
                   int64_t stride_c, int threads) {
  if (b.empty()) return InvalidArgumentError("Matmul: B is an empty PackedMatrix (use PackedMatrix::Pack)");
  const int64_t n = b.n(), k = b.k();
  if (batch < 0) return InvalidArgumentError("Matmul: " + Dim("batch", batch) + " must be >= 0");
  if (m < 0) return InvalidArgumentError("Matmul: " + Dim("m", m) + " must be >= 0");
  if (lda < std::max<int64_t>(k, 1)) {
    return InvalidArgumentError("Matmul: " + Dim("lda", lda) + " must be >= " + Dim("k", k) + " (and >= 1)");
  }
  if (ldc < std::max<int64_t>(n, 1)) {
    return InvalidArgumentError("Matmul: " + Dim("ldc", ldc) + " must be >= " + Dim("n", n) + " (and >= 1)");
  }
  if (threads < 0) return InvalidArgumentError("Matmul: " + Dim("threads", threads) + " must be >= 0");
  if (stride_a < 0 || stride_c < 0) {
    return InvalidArgumentError("Matmul: batch strides must be >= 0 (" + Dim("batch_stride_a", stride_a) +
                                ", " + Dim("batch_stride_c", stride_c) + ")");
  }
  if (batch == 0 || m == 0 || n == 0) return OkStatus();
  if (c == nullptr) return InvalidArgumentError("Matmul: c is null");
  if (a == nullptr && k > 0) return InvalidArgumentError("Matmul: a is null");
  if (batch > 1 && stride_c < (m - 1) * ldc + n) {
    return InvalidArgumentError("Matmul: " + Dim("batch_stride_c", stride_c) +
                                " makes the C matrices of the batch overlap (needs >= " +
                                std::to_string((m - 1) * ldc + n) + ")");
  }
  if (k > 0) {
    const Span sa = MatrixSpan(a, a_elem, batch, stride_a, m, lda, k);
    const Span sc = MatrixSpan(c, sizeof(float), batch, stride_c, m, ldc, n);
    if (sa.begin < sc.end && sc.begin < sa.end) return InvalidArgumentError("Matmul: c overlaps a");
  }
  return OkStatus();
}

// How C is cut into tasks: mt row blocks x nt column blocks per batch entry.
struct Grid {
  int64_t mt = 1, nt = 1;
};

// Row blocks are whole micro-tiles of mr rows, column blocks whole panels.
// Every C element is computed the same way in any grid (the drivers never
// split K), so the grid only decides speed: the one whose busiest thread has
// the least work, fewest tasks on a tie.
Grid ChooseGrid(int64_t batch, int64_t m, int64_t n, const DriverShape& shape, int threads) {
  const int64_t row_units = (m + shape.mr - 1) / shape.mr;
  const int64_t col_units = (n + kPanelWidth - 1) / kPanelWidth;
  Grid best;
  best.mt = std::min(row_units, (m + shape.mc - 1) / shape.mc);
  if (threads <= 1) return best;
  const int64_t mt0 = best.mt;
  // Many cores or a long batch: the search below would cost more than it
  // saves; take enough row blocks, then column blocks, for every thread.
  const int64_t span = 2 * threads + 1;
  if (batch >= 4 * threads || span * span * batch * (mt0 + span) * span > 4'000'000) {
    if (batch < threads) {
      const int64_t per_entry = (threads + batch - 1) / batch;  // tasks each entry needs
      best.mt = std::min(row_units, (mt0 + per_entry - 1) / per_entry * per_entry);
      if (best.mt < per_entry) best.nt = std::min(col_units, (per_entry + best.mt - 1) / best.mt);
    }
    return best;
  }
  double best_load = std::numeric_limits<double>::infinity();
  for (int64_t nt = 1; nt <= std::min<int64_t>(col_units, 2 * threads); ++nt) {
    for (int64_t mt = mt0; mt <= std::min<int64_t>(row_units, mt0 + 2 * threads); ++mt) {
      const int64_t tasks = batch * mt * nt;
      // Static partition: thread t runs tasks [t*tasks/T, (t+1)*tasks/T).
      double load = 0;
      for (int t = 0; t < threads; ++t) {
        double mine = 0;
        for (int64_t x = t * tasks / threads; x < (t + 1) * tasks / threads; ++x) {
          const int64_t im = (x / nt) % mt, jn = x % nt;
          const int64_t rows = (im + 1) * row_units / mt - im * row_units / mt;
          const int64_t cols = (jn + 1) * col_units / nt - jn * col_units / nt;
          mine += static_cast<double>(rows) * static_cast<double>(cols) + 1.0;  // + per-task cost
        }
        load = std::max(load, mine);
      }
      if (load < best_load) {
        best_load = load;
        best.mt = mt;
        best.nt = nt;
      }
    }
  }
  return best;
}

// The tasks on kernels/ops_parallel.h's static partition (which, under
// ThreadSanitizer, runs them on std::threads that TSan can follow).
void RunTasks(int64_t tasks, int threads, const std::function<void(int64_t)>& task) {
  ParallelForTasks(tasks, threads, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) task(t);
  });
}

template <typename TA>
Status MatmulImpl(int64_t batch, int64_t m, const TA* a, int64_t lda, int64_t stride_a,
                  const PackedMatrix& b, float* c, int64_t ldc, int64_t stride_c, int threads,
                  const float* bias = nullptr, bool a_rounded = false) {
  TPUMESH_RETURN_IF_ERROR(CheckMatmul(batch, m, a, sizeof(TA), lda, stride_a, b, c, ldc, stride_c, threads));
  const PackedData& data = *b.internal_data();
  const int64_t n = data.n, k = data.k;
  if (batch == 0 || m == 0 || n == 0) return OkStatus();
  if (k == 0) {
    for (int64_t x = 0; x < batch; ++x) {
      for (int64_t i = 0; i < m; ++i) {
        float* row = c + x * stride_c + i * ldc;
        std::memset(row, 0, n * sizeof(float));
        if (bias != nullptr) matmul_internal::AddBiasTile(row, ldc, 1, n, bias);
      }
    }
    return OkStatus();
  }
  matmul_internal::BlockFn block = nullptr;
  DriverShape shape{};
  switch (data.provider) {
    case Provider::kBf16:
      if (!Avx512Bf16Active()) {
        return UnimplementedError("Matmul: B was packed for provider bf16, which this CPU lacks");
      }
      block = &matmul_internal::Bf16Block;
      break;
    case Provider::kAmx:
      if (!AmxMatmulActive()) {
        return UnimplementedError("Matmul: B was packed for provider amx, which is off here: " + AmxMatmulNote());
      }
      block = &matmul_internal::AmxBlock;
      break;
    case Provider::kHighway:
      block = matmul_internal::HighwayBlockFn();
      break;
    case Provider::kBlis:
      block = &matmul_internal::BlisBlock;
      break;
    case Provider::kAuto:
      return InternalError("Matmul: PackedMatrix with an unresolved provider");
  }
  shape = matmul_internal::DriverShapeOf(data.provider);
  // Threads that can help: small products stay on the calling thread.
  int team = ParallelConcurrency(threads);
  const double flops = 2.0 * static_cast<double>(batch) * m * n * k;
  if (flops < 4e6) team = 1;
  const Grid grid = ChooseGrid(batch, m, n, shape, team);
  const int64_t row_units = (m + shape.mr - 1) / shape.mr;
  const int64_t col_units = (n + kPanelWidth - 1) / kPanelWidth;
  const int64_t tasks = batch * grid.mt * grid.nt;
  auto task = [&](int64_t x) {
    const int64_t bi = x / (grid.mt * grid.nt);
    const int64_t im = (x / grid.nt) % grid.mt, jn = x % grid.nt;
    const int64_t i0 = std::min(m, im * row_units / grid.mt * shape.mr);
    const int64_t i1 = std::min(m, (im + 1) * row_units / grid.mt * shape.mr);
    const int64_t j0 = std::min(n, jn * col_units / grid.nt * kPanelWidth);
    const int64_t j1 = std::min(n, (jn + 1) * col_units / grid.nt * kPanelWidth);
    if (i0 >= i1 || j0 >= j1) return;
    CallArgs args;
    if constexpr (std::is_same_v<TA, float>) {
      args.a_f32 = a + bi * stride_a;
    } else {
      args.a_bf16 = a + bi * stride_a;
    }
    args.lda = lda;
    args.b = &data;
    args.c = c + bi * stride_c;
    args.ldc = ldc;
    args.bias = bias;
    args.a_rounded = a_rounded;
    block(args, i0, i1, j0, j1);
  };
  RunTasks(tasks, team == 1 ? 1 : threads, task);
  return OkStatus();
}

template <typename T>
Status UnpackedImpl(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
                    float* c, int64_t ldc, const MatmulOptions& options, int threads) {
  if (m < 0) return InvalidArgumentError("Matmul: " + Dim("m", m) + " must be >= 0");
  TPUMESH_ASSIGN_OR_RETURN(const PackedMatrix packed, PackedMatrix::Pack(k, n, b, ldb, options));
  return MatmulImpl(1, m, a, lda, 0, packed, c, ldc, 0, threads);
}

}  // namespace

Status Matmul(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c, int64_t ldc,
              int threads, const float* bias) {
  return MatmulImpl(1, m, a, lda, 0, b, c, ldc, 0, threads, bias);
}

Status Matmul(int64_t m, const bf16* a, int64_t lda, const PackedMatrix& b, float* c, int64_t ldc,
              int threads, const float* bias) {
  return MatmulImpl(1, m, a, lda, 0, b, c, ldc, 0, threads, bias);
}

namespace matmul_internal {
Status MatmulRoundedA(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c,
                      int64_t ldc, int threads) {
  return MatmulImpl(1, m, a, lda, 0, b, c, ldc, 0, threads, nullptr, /*a_rounded=*/true);
}
}  // namespace matmul_internal

Status MatmulBatch(int64_t batch, int64_t m, const float* a, int64_t lda, int64_t batch_stride_a,
                   const PackedMatrix& b, float* c, int64_t ldc, int64_t batch_stride_c, int threads) {
  return MatmulImpl(batch, m, a, lda, batch_stride_a, b, c, ldc, batch_stride_c, threads);
}

Status MatmulBatch(int64_t batch, int64_t m, const bf16* a, int64_t lda, int64_t batch_stride_a,
                   const PackedMatrix& b, float* c, int64_t ldc, int64_t batch_stride_c, int threads) {
  return MatmulImpl(batch, m, a, lda, batch_stride_a, b, c, ldc, batch_stride_c, threads);
}

Status Matmul(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
              int64_t ldb, float* c, int64_t ldc, const MatmulOptions& options, int threads) {
  return UnpackedImpl(m, n, k, a, lda, b, ldb, c, ldc, options, threads);
}

Status Matmul(int64_t m, int64_t n, int64_t k, const bf16* a, int64_t lda, const bf16* b,
              int64_t ldb, float* c, int64_t ldc, const MatmulOptions& options, int threads) {
  return UnpackedImpl(m, n, k, a, lda, b, ldb, c, ldc, options, threads);
}

}  // namespace tpumesh::kernels
