// FftF32 / FftF64: a plan per distinct length (mixed-radix Cooley-Tukey or
// Bluestein, twiddles in long double), one batch entry per task, every line
// of a multi-dimensional transform gathered into a contiguous double buffer.
#include "kernels/fft.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops_parallel.h"

namespace tpumesh::kernels {
namespace {

using Cd = std::complex<double>;

// a * b by the schoolbook formula. std::complex's operator* adds C99
// Annex G's inf / NaN recovery (a branch and a libgcc call per product);
// the transforms see finite values, and a NaN input still propagates.
inline Cd Mul(Cd a, Cd b) {
  return {a.real() * b.real() - a.imag() * b.imag(),
          a.real() * b.imag() + a.imag() * b.real()};
}

// Longest transform accepted: keeps 8 k (Root's octant arithmetic) and
// Bluestein's 2^a 3^b 5^c length >= 2n - 1 far inside int64.
constexpr int64_t kMaxLength = int64_t{1} << 40;
// Largest prime a Cooley-Tukey pass handles as a butterfly; a length with a
// larger prime factor runs Bluestein (a generic radix-p pass costs p complex
// multiplies per point, so this bound keeps every length O(n log n)).
constexpr int64_t kMaxRadix = 13;

// exp(-2 pi i k / n) for 0 <= k < n. theta = 2 pi k / n = (pi / 4)(8k / n)
// is split into an octant o and a remainder in [0, pi/4], so cosl / sinl
// see a small argument whose long double rounding is far below a double's
// ulp; the octant's symmetry gives cos and sin of theta exactly from those.
Cd Root(int64_t k, int64_t n) {
  constexpr long double kQuarterPi = 0.785398163397448309615660845819875721L;
  const int64_t u = 8 * k;
  const int64_t o = u / n;
  const int64_t r = u - o * n;
  // Even octants: theta = o pi/4 + phi; odd: theta = (o + 1) pi/4 - phi.
  const long double phi = kQuarterPi *
                          static_cast<long double>(o % 2 == 0 ? r : n - r) /
                          static_cast<long double>(n);
  const long double c = cosl(phi), s = sinl(phi);
  // (cos theta, sin theta) per octant.
  const long double cs[8][2] = {{c, s},   {s, c},   {-s, c}, {-c, s},
                                {-c, -s}, {-s, -c}, {s, -c}, {c, -s}};
  return {static_cast<double>(cs[o][0]), -static_cast<double>(cs[o][1])};
}

// The radices of n, 4s first, or empty when n has a prime factor above
// kMaxRadix (or n == 1).
std::vector<int64_t> Radices(int64_t n) {
  std::vector<int64_t> f;
  while (n % 4 == 0) {
    f.push_back(4);
    n /= 4;
  }
  for (int64_t p : {2, 3, 5, 7, 11, 13}) {
    while (n % p == 0) {
      f.push_back(p);
      n /= p;
    }
  }
  if (n != 1) f.clear();
  return f;
}

// The smallest 2^a 3^b 5^c >= n.
int64_t SmoothLength(int64_t n) {
  int64_t best = int64_t{1} << 62;
  for (int64_t f5 = 1; f5 < best; f5 *= 5) {
    for (int64_t f35 = f5; f35 < best; f35 *= 3) {
      int64_t v = f35;
      while (v < n) v *= 2;
      if (v < best) best = v;
    }
  }
  return best;
}

// One length's forward DFT, out[k] = sum_j in[j] exp(-2 pi i j k / n).
// Immutable after construction: one plan serves every thread.
class Plan {
 public:
  explicit Plan(int64_t n) : n_(n) {
    if (n_ <= 1) return;
    radices_ = Radices(n_);
    if (!radices_.empty()) {
      w_.resize(static_cast<size_t>(n_));
      for (int64_t k = 0; k < n_; ++k) w_[k] = Root(k, n_);
      return;
    }
    // Bluestein: j k = (j^2 + k^2 - (k - j)^2) / 2 turns the DFT into a
    // cyclic convolution of length m >= 2n - 1 with the chirp
    // c_j = exp(-pi i j^2 / n) = Root(j^2 mod 2n, 2n) (j^2 reduced exactly
    // in integers, so the chirp is as exact as any twiddle).
    m_ = SmoothLength(2 * n_ - 1);
    sub_ = std::make_unique<Plan>(m_);
    chirp_.resize(static_cast<size_t>(n_));
    int64_t sq = 0;  // j^2 mod 2n
    for (int64_t j = 0; j < n_; ++j) {
      chirp_[j] = Root(sq, 2 * n_);
      sq = (sq + 2 * j + 1) % (2 * n_);
    }
    std::vector<Cd> b(static_cast<size_t>(m_), Cd(0, 0));
    for (int64_t j = 0; j < n_; ++j) {
      b[j] = std::conj(chirp_[j]);
      if (j > 0) b[m_ - j] = b[j];
    }
    kernel_.resize(static_cast<size_t>(m_));
    sub_->Forward(b.data(), kernel_.data(), nullptr);
    // The 1 / m of the inverse transform, folded into the kernel once.
    const double inv_m = 1.0 / static_cast<double>(m_);
    for (Cd& v : kernel_) v *= inv_m;
  }

  int64_t n() const { return n_; }
  // Complex doubles of scratch Forward needs.
  int64_t scratch_size() const { return sub_ ? 2 * m_ : 0; }

  // in and out contiguous and distinct; scratch of scratch_size().
  void Forward(const Cd* in, Cd* out, Cd* scratch) const {
    if (n_ <= 1) {
      if (n_ == 1) out[0] = in[0];
      return;
    }
    if (!sub_) {
      Recurse(in, 1, n_, 0, out);
      return;
    }
    Cd* a = scratch;
    Cd* spec = scratch + m_;
    for (int64_t j = 0; j < n_; ++j) a[j] = Mul(in[j], chirp_[j]);
    for (int64_t j = n_; j < m_; ++j) a[j] = Cd(0, 0);
    sub_->Forward(a, spec, nullptr);
    // Inverse transform by conjugation: ifft(y) = conj(fft(conj(y))) / m.
    for (int64_t k = 0; k < m_; ++k)
      spec[k] = std::conj(Mul(spec[k], kernel_[k]));
    sub_->Forward(spec, a, nullptr);
    for (int64_t k = 0; k < n_; ++k) out[k] = Mul(chirp_[k], std::conj(a[k]));
  }

 private:
  // out[0, len) = DFT_len of in[0], in[stride], ..., in[(len - 1) stride],
  // len = the product of radices_[f...]: decimation in time,
  // X[k + q m] = sum_r w_p^(r q) (w_len^(r k) X_r[k]) with X_r the DFT of
  // the r-th of p interleaved subsequences, each of length m = len / p.
  void Recurse(const Cd* in, int64_t stride, int64_t len, size_t f,
               Cd* out) const {
    const int64_t p = radices_[f];
    const int64_t m = len / p;
    Cd t[kMaxRadix];
    if (m == 1) {
      for (int64_t r = 0; r < p; ++r) t[r] = in[r * stride];
      Butterfly(p, t, out, 1);
      return;
    }
    for (int64_t r = 0; r < p; ++r) {
      Recurse(in + r * stride, stride * p, m, f + 1, out + r * m);
    }
    const int64_t step = n_ / len;  // w_len^x = w_[x step]
    if (p == 4) {
      // Radix 4 inline (most lengths are mostly 4s), with Mul: 1024 points
      // took 19.5 us per f32 transform before, 15.1 after (1 thread, best
      // user time of 3 runs of 20 x 1024 on the shared 2-core host).
      Cd* o0 = out;
      Cd* o1 = out + m;
      Cd* o2 = out + 2 * m;
      Cd* o3 = out + 3 * m;
      for (int64_t k = 0; k < m; ++k) {
        const Cd x0 = o0[k];
        const Cd x1 = Mul(o1[k], w_[k * step]);
        const Cd x2 = Mul(o2[k], w_[2 * k * step]);
        const Cd x3 = Mul(o3[k], w_[3 * k * step]);
        const Cd a = x0 + x2, b = x0 - x2, c = x1 + x3, d = x1 - x3;
        const Cd minus_i_d(d.imag(), -d.real());  // w_4 = -i
        o0[k] = a + c;
        o1[k] = b + minus_i_d;
        o2[k] = a - c;
        o3[k] = b - minus_i_d;
      }
      return;
    }
    for (int64_t k = 0; k < m; ++k) {
      t[0] = out[k];
      for (int64_t r = 1; r < p; ++r)
        t[r] = Mul(out[r * m + k], w_[r * k * step]);
      Butterfly(p, t, out + k, m);
    }
  }

  // out[q os] = sum_r t[r] w_p^(r q) for q < p.
  void Butterfly(int64_t p, const Cd* t, Cd* out, int64_t os) const {
    if (p == 2) {
      out[0] = t[0] + t[1];
      out[os] = t[0] - t[1];
      return;
    }
    if (p == 4) {
      const Cd a = t[0] + t[2], b = t[0] - t[2];
      const Cd c = t[1] + t[3], d = t[1] - t[3];
      const Cd minus_i_d(d.imag(), -d.real());  // w_4 = -i
      out[0] = a + c;
      out[os] = b + minus_i_d;
      out[2 * os] = a - c;
      out[3 * os] = b - minus_i_d;
      return;
    }
    // w_p^(r q) = w_[(r q mod p) step], r q mod p stepped by q without a
    // division: n = 4097 (Bluestein on 8640 = 2^6 3^3 5) took 0.92 ms per
    // transform with the %, 0.55 ms without (and with Mul); n = 1000, 46
    // -> 34 us.
    const int64_t step = n_ / p;
    for (int64_t q = 0; q < p; ++q) {
      Cd acc = t[0];
      int64_t rq = 0;
      for (int64_t r = 1; r < p; ++r) {
        rq += q;
        if (rq >= p) rq -= p;
        acc += Mul(t[r], w_[rq * step]);
      }
      out[q * os] = acc;
    }
  }

  int64_t n_;
  std::vector<int64_t> radices_;
  std::vector<Cd> w_;  // w_[k] = exp(-2 pi i k / n_)
  // Bluestein (lengths with a prime factor > kMaxRadix).
  int64_t m_ = 0;
  std::unique_ptr<Plan> sub_;
  std::vector<Cd> chirp_;   // exp(-pi i j^2 / n_), j < n_
  std::vector<Cd> kernel_;  // DFT_m of the wrapped conj(chirp), over m
};

bool IsComplexIn(FftType t) { return t != FftType::kRfft; }
bool IsComplexOut(FftType t) { return t != FftType::kIrfft; }
bool IsReal(FftType t) { return t == FftType::kRfft || t == FftType::kIrfft; }

// The complex block one transform works on: fft_length, with the last dim
// cut to n / 2 + 1 for RFFT and IRFFT.
std::vector<int64_t> BlockDims(const FftShape& s) {
  std::vector<int64_t> d = s.fft_length;
  if (IsReal(s.type)) d.back() = d.back() / 2 + 1;
  return d;
}

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Per-task buffers, sized for the largest line.
struct Scratch {
  std::vector<Cd> block, line_in, line_out, plan;
};

// Every line of `block` (dims) along `axis`, transformed in place by `plan`;
// inverse by conjugation (no scaling here).
void TransformAxis(Cd* block, const std::vector<int64_t>& dims, size_t axis,
                   const Plan& plan, bool inverse, Scratch& sc) {
  const int64_t len = dims[axis];
  if (len <= 1) return;
  int64_t inner = 1, outer = 1;
  for (size_t a = axis + 1; a < dims.size(); ++a) inner *= dims[a];
  for (size_t a = 0; a < axis; ++a) outer *= dims[a];
  Cd* in = sc.line_in.data();
  Cd* out = sc.line_out.data();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      Cd* line = block + o * len * inner + i;
      for (int64_t j = 0; j < len; ++j) {
        in[j] = inverse ? std::conj(line[j * inner]) : line[j * inner];
      }
      plan.Forward(in, out, sc.plan.data());
      for (int64_t j = 0; j < len; ++j) {
        line[j * inner] = inverse ? std::conj(out[j]) : out[j];
      }
    }
  }
}

template <typename T>
void TransformOne(const FftShape& s, const std::vector<int64_t>& dims,
                  const std::vector<const Plan*>& plans, const T* in, T* out,
                  Scratch& sc) {
  const size_t rank = dims.size();
  const size_t last = rank - 1;
  const int64_t n_last = s.fft_length[last];
  const int64_t h = dims[last];
  const int64_t rows = Product(dims) / h;
  Cd* block = sc.block.data();
  double scale = 1.0;
  if (s.type == FftType::kIfft || s.type == FftType::kIrfft) {
    scale = 1.0 / static_cast<double>(Product(s.fft_length));
  }
  switch (s.type) {
    case FftType::kFft:
    case FftType::kIfft: {
      const int64_t total = rows * h;
      for (int64_t e = 0; e < total; ++e)
        block[e] = Cd(in[2 * e], in[2 * e + 1]);
      const bool inverse = s.type == FftType::kIfft;
      // The spec's order: FFT innermost dim first, IFFT outermost first.
      for (size_t k = 0; k < rank; ++k) {
        const size_t axis = inverse ? k : last - k;
        TransformAxis(block, dims, axis, *plans[axis], inverse, sc);
      }
      for (int64_t e = 0; e < total; ++e) {
        out[2 * e] = static_cast<T>(block[e].real() * scale);
        out[2 * e + 1] = static_cast<T>(block[e].imag() * scale);
      }
      return;
    }
    case FftType::kRfft: {
      // Each real row as a complex line, its first h bins kept; then the
      // other dims, innermost first.
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n_last; ++j) {
          sc.line_in[j] = Cd(in[r * n_last + j], 0.0);
        }
        plans[last]->Forward(sc.line_in.data(), sc.line_out.data(),
                             sc.plan.data());
        for (int64_t k = 0; k < h; ++k) block[r * h + k] = sc.line_out[k];
      }
      for (size_t k = 1; k < rank; ++k) {
        TransformAxis(block, dims, last - k, *plans[last - k], false, sc);
      }
      for (int64_t e = 0; e < rows * h; ++e) {
        out[2 * e] = static_cast<T>(block[e].real());
        out[2 * e + 1] = static_cast<T>(block[e].imag());
      }
      return;
    }
    case FftType::kIrfft: {
      for (int64_t e = 0; e < rows * h; ++e)
        block[e] = Cd(in[2 * e], in[2 * e + 1]);
      for (size_t axis = 0; axis < last; ++axis) {
        TransformAxis(block, dims, axis, *plans[axis], true, sc);
      }
      // Each row's h bins extended to the Hermitian spectrum Y of n_last
      // points (Y[n - k] = conj(Y[k]); bin 0 and an even n's bin n/2 keep
      // their real parts only), inverse-transformed by conjugation; the
      // result is real (its real part is taken).
      Cd* y = sc.line_in.data();
      for (int64_t r = 0; r < rows; ++r) {
        const Cd* x = block + r * h;
        y[0] = Cd(x[0].real(), 0.0);
        for (int64_t k = 1; 2 * k < n_last; ++k) {
          y[k] = std::conj(x[k]);
          y[n_last - k] = x[k];
        }
        if (n_last % 2 == 0) y[n_last / 2] = Cd(x[n_last / 2].real(), 0.0);
        plans[last]->Forward(y, sc.line_out.data(), sc.plan.data());
        for (int64_t j = 0; j < n_last; ++j) {
          out[r * n_last + j] = static_cast<T>(sc.line_out[j].real() * scale);
        }
      }
      return;
    }
  }
}

template <typename T>
Status RunFft(const FftShape& s, const T* in, T* out, int num_threads) {
  TPUMESH_RETURN_IF_ERROR(CheckFft(s));
  const int64_t per_in = FftOperandElements(s) / std::max<int64_t>(s.batch, 1);
  const int64_t per_out = FftResultElements(s) / std::max<int64_t>(s.batch, 1);
  if (s.batch == 0 || per_in == 0 || per_out == 0) return OkStatus();
  const std::vector<int64_t> dims = BlockDims(s);
  // One plan per distinct length, shared read-only by the tasks.
  std::vector<std::unique_ptr<Plan>> owned;
  std::vector<const Plan*> plans;
  int64_t max_line = 1, max_scratch = 0;
  for (int64_t n : s.fft_length) {
    const Plan* found = nullptr;
    for (const auto& p : owned) {
      if (p->n() == n) found = p.get();
    }
    if (!found) {
      owned.push_back(std::make_unique<Plan>(n));
      found = owned.back().get();
    }
    plans.push_back(found);
    max_line = std::max(max_line, n);
    max_scratch = std::max(max_scratch, found->scratch_size());
  }
  const int64_t in_stride = per_in * (IsComplexIn(s.type) ? 2 : 1);
  const int64_t out_stride = per_out * (IsComplexOut(s.type) ? 2 : 1);
  ParallelForTasks(s.batch, num_threads, [&](int64_t begin, int64_t end) {
    Scratch sc;
    sc.block.resize(static_cast<size_t>(Product(dims)));
    sc.line_in.resize(static_cast<size_t>(max_line));
    sc.line_out.resize(static_cast<size_t>(max_line));
    sc.plan.resize(static_cast<size_t>(max_scratch));
    for (int64_t b = begin; b < end; ++b) {
      TransformOne(s, dims, plans, in + b * in_stride, out + b * out_stride,
                   sc);
    }
  });
  return OkStatus();
}

bool MulFits(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

}  // namespace

const char* FftTypeName(FftType type) {
  switch (type) {
    case FftType::kFft:
      return "FFT";
    case FftType::kIfft:
      return "IFFT";
    case FftType::kRfft:
      return "RFFT";
    case FftType::kIrfft:
      return "IRFFT";
  }
  return "?";
}

Status CheckFft(const FftShape& s) {
  if (s.type != FftType::kFft && s.type != FftType::kIfft &&
      s.type != FftType::kRfft && s.type != FftType::kIrfft) {
    return UnimplementedError("fft: unknown fft_type " +
                              std::to_string(static_cast<int>(s.type)));
  }
  if (s.fft_length.empty() || s.fft_length.size() > 3) {
    return InvalidArgumentError("fft: fft_length has " +
                                std::to_string(s.fft_length.size()) +
                                " entries; 1 to 3 are allowed");
  }
  if (s.batch < 0) {
    return InvalidArgumentError("fft: batch " + std::to_string(s.batch) +
                                " must be >= 0");
  }
  int64_t total = std::max<int64_t>(s.batch, 1) * 2;
  for (size_t i = 0; i < s.fft_length.size(); ++i) {
    const int64_t n = s.fft_length[i];
    if (n < 0 || n > kMaxLength) {
      return InvalidArgumentError("fft: fft_length[" + std::to_string(i) +
                                  "] = " + std::to_string(n) +
                                  " must be in [0, 2^40]");
    }
    if (!MulFits(total, std::max<int64_t>(n, 1), &total)) {
      return InvalidArgumentError("fft: the element count overflows int64");
    }
  }
  return OkStatus();
}

StatusOr<FftShape> MakeFftShape(FftType type,
                                std::span<const int64_t> operand_dims,
                                std::span<const int64_t> fft_length) {
  FftShape s;
  s.type = type;
  s.fft_length.assign(fft_length.begin(), fft_length.end());
  const size_t rank = operand_dims.size(), l = fft_length.size();
  if (l < 1 || l > 3) {
    return InvalidArgumentError("fft: fft_length has " + std::to_string(l) +
                                " entries; 1 to 3 are allowed");
  }
  if (rank < l) {
    return InvalidArgumentError("fft: operand rank " + std::to_string(rank) +
                                " is below the size of fft_length " +
                                std::to_string(l));
  }
  for (size_t d = 0; d < rank; ++d) {
    if (operand_dims[d] < 0) {
      return InvalidArgumentError("fft: operand dim " + std::to_string(d) +
                                  " is negative");
    }
  }
  s.batch = 1;
  for (size_t d = 0; d + l < rank; ++d) {
    if (!MulFits(s.batch, operand_dims[d], &s.batch)) {
      return InvalidArgumentError("fft: the batch overflows int64");
    }
  }
  for (size_t i = 0; i < l; ++i) {
    const int64_t n = fft_length[i];
    int64_t want = n;
    if (type == FftType::kIrfft && i + 1 == l) want = n == 0 ? 0 : n / 2 + 1;
    const int64_t got = operand_dims[rank - l + i];
    if (got != want) {
      return InvalidArgumentError(
          std::string("fft: ") + FftTypeName(type) + " operand dim " +
          std::to_string(rank - l + i) + " is " + std::to_string(got) +
          "; fft_length[" + std::to_string(i) + "] = " + std::to_string(n) +
          " requires " + std::to_string(want));
    }
  }
  TPUMESH_RETURN_IF_ERROR(CheckFft(s));
  return s;
}

int64_t FftOperandElements(const FftShape& s) {
  std::vector<int64_t> d = s.fft_length;
  if (s.type == FftType::kIrfft) d.back() = d.back() / 2 + 1;
  return s.batch * Product(d);
}

int64_t FftResultElements(const FftShape& s) {
  std::vector<int64_t> d = s.fft_length;
  if (s.type == FftType::kRfft) d.back() = d.back() / 2 + 1;
  return s.batch * Product(d);
}

Status FftF32(const FftShape& s, const float* in, float* out, int num_threads) {
  return RunFft(s, in, out, num_threads);
}

Status FftF64(const FftShape& s, const double* in, double* out,
              int num_threads) {
  return RunFft(s, in, out, num_threads);
}

OpCost FftCost(const FftShape& s, int bytes_per_real) {
  // XLA: kFmaFlops (2) * kFmaPerComplexMul (4) * prod Log2Floor(n) *
  // ElementsIn(operand).
  double log_factors = 1;
  for (int64_t n : s.fft_length) {
    // Log2Floor, in integers (a double log2 could round up below 2^k).
    log_factors *= n > 0 ? 63 - __builtin_clzll(static_cast<uint64_t>(n)) : 0;
  }
  const double in = static_cast<double>(FftOperandElements(s));
  const double out = static_cast<double>(FftResultElements(s));
  OpCost c;
  c.flops = 2.0 * 4.0 * log_factors * in;
  c.bytes_read = in * (IsComplexIn(s.type) ? 2 : 1) * bytes_per_real;
  c.bytes_written = out * (IsComplexOut(s.type) ? 2 : 1) * bytes_per_real;
  return c;
}

double FftTextbookFlops(const FftShape& s) {
  const double n = static_cast<double>(Product(s.fft_length));
  if (n <= 1) return 0;
  const double per = 5.0 * n * std::log2(n) * (IsReal(s.type) ? 0.5 : 1.0);
  return per * static_cast<double>(s.batch);
}

}  // namespace tpumesh::kernels
