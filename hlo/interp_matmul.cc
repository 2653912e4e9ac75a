// dot_general and convolution on kernels/' matmul (convolution as an im2col
// matmul), at f32 or the MXU's precision.
#include "hlo/attrs.h"
#include "hlo/interpreter_impl.h"

#include <algorithm>
#include <complex>
#include <cstring>
#include <numeric>
#include <string>

#include "kernels/ops_parallel.h"

namespace tpumesh::hlo {

kernels::Precision Interpreter::MatmulPrecision(const Op& op) const {
  if (!o_.mxu_precision) return kernels::Precision::kHighest;
  return AttrsOf(op)->precision;
}

StatusOr<Interpreter::F32Operand> Interpreter::AsF32Ordered(const Tensor& t, const Dims& order) {
  F32Operand r;
  bool identity = true;
  for (size_t k = 0; k < order.size(); ++k) identity &= order[k] == static_cast<int64_t>(k);
  const Tensor* src = &t;
  Tensor converted;
  if (t.type.element != ElementType::kF32) {
    Type ft = t.type;
    ft.element = ElementType::kF32;
    TPUMESH_ASSIGN_OR_RETURN(converted, NewTensor(ft, nullptr));
    ConvertParallel(t.type.element, t.data.raw(), ElementType::kF32, t.num_elements(), converted.data.mutable_raw());
    src = &converted;
  }
  if (identity) {
    r.storage = src == &t ? Tensor() : std::move(converted);
    r.data = src == &t ? t.as<float>() : r.storage.as<float>();
    return r;
  }
  Type pt = src->type;
  pt.dims.clear();
  const Dims is = Strides(src->type.dims);
  Dims st;
  for (int64_t k : order) {
    pt.dims.push_back(src->type.dims[static_cast<size_t>(k)]);
    st.push_back(is[static_cast<size_t>(k)]);
  }
  TPUMESH_ASSIGN_OR_RETURN(r.storage, NewTensor(pt, nullptr));
  AffineCopy(*src, r.storage, 0, st);
  r.data = r.storage.as<float>();
  return r;
}

void Interpreter::StoreF32(const float* v, Tensor& out) {
  ConvertParallel(ElementType::kF32, v, out.type.element, out.num_elements(), out.data.mutable_raw());
}

void Interpreter::ConvertParallel(ElementType from, const void* in, ElementType to, int64_t n, void* out) {
  ParallelElements(n, [&](int64_t b, int64_t e) { ConvertElements(from, in, to, b, e, out).IgnoreError(); });
}

Status Interpreter::DotGeneral(const Op& op, const Tensor& l, const Tensor& r, Tensor& out) {
  const auto attrs = AttrsOf(op);  // of the op's types, which are l's, r's and out's
  TPUMESH_RETURN_IF_ERROR(attrs->status);
  const auto* dot = std::get_if<DotAttrs>(&attrs->value);
  if (!dot) return InternalError("dot_general without its dimension numbers");
  const DotDims& d = dot->dims;
  Dims expect;
  for (int64_t k : d.lb) expect.push_back(l.type.dims[static_cast<size_t>(k)]);
  for (int64_t k : d.lf) expect.push_back(l.type.dims[static_cast<size_t>(k)]);
  for (int64_t k : d.rf) expect.push_back(r.type.dims[static_cast<size_t>(k)]);
  if (expect != out.type.dims)
    return InvalidArgumentError("result " + out.type.ToString() + " does not match the operands " + l.type.ToString() +
                                " x " + r.type.ToString());
  const int64_t B = Prod(l.type, d.lb), M = Prod(l.type, d.lf), K = Prod(l.type, d.lc), N = Prod(r.type, d.rf);
  if (IsComplex(l.type.element) || IsComplex(r.type.element) || IsComplex(out.type.element))
    return ComplexDot(l, r, out, d, B, M, K, N);
  if (!IsFloat(l.type.element) || !IsFloat(r.type.element) || !IsFloat(out.type.element)) {
    return IntegerDot(l, r, out, d, B, M, K, N);
  }
  Dims lo = d.lb, ro = d.rb;
  lo.insert(lo.end(), d.lf.begin(), d.lf.end());
  lo.insert(lo.end(), d.lc.begin(), d.lc.end());
  ro.insert(ro.end(), d.rc.begin(), d.rc.end());
  ro.insert(ro.end(), d.rf.begin(), d.rf.end());
  TPUMESH_ASSIGN_OR_RETURN(F32Operand a, AsF32Ordered(l, lo));
  TPUMESH_ASSIGN_OR_RETURN(F32Operand b, AsF32Ordered(r, ro));
  // The product straight into the result when it is f32.
  const bool direct = out.type.element == ElementType::kF32;
  std::vector<float> tmp(direct ? 0 : static_cast<size_t>(B * M * N));
  float* c = direct ? out.mutable_as<float>() : tmp.data();
  kernels::MatmulOptions mo;
  mo.precision = MatmulPrecision(op);
  for (int64_t bi = 0; bi < B; ++bi) {
    if (K == 0 || M == 0 || N == 0) continue;
    TPUMESH_ASSIGN_OR_RETURN(kernels::PackedMatrix p, kernels::PackedMatrix::Pack(K, N, b.data + bi * K * N, N, mo));
    TPUMESH_RETURN_IF_ERROR(kernels::Matmul(M, a.data + bi * M * K, K, p, c + bi * M * N, N, o_.threads));
  }
  if (K == 0) std::fill(c, c + B * M * N, 0.0f);
  if (!direct) StoreF32(c, out);
  return OkStatus();
}

namespace {

// t's elements in the order of its dimensions `order` (each w bytes).
std::vector<uint8_t> OrderedBytes(const Tensor& t, const Dims& order, int w) {
  std::vector<uint8_t> v(static_cast<size_t>(t.num_elements() * w));
  Dims od;
  for (int64_t k : order) od.push_back(t.type.dims[static_cast<size_t>(k)]);
  const Dims is = Strides(t.type.dims);
  Dims idx(od.size(), 0);
  const uint8_t* src = static_cast<const uint8_t*>(t.data.raw());
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    int64_t s = 0;
    for (size_t k = 0; k < od.size(); ++k) s += idx[k] * is[static_cast<size_t>(order[k])];
    std::memcpy(v.data() + i * w, src + s * w, static_cast<size_t>(w));
    for (int k = static_cast<int>(od.size()) - 1; k >= 0; --k) {
      if (++idx[k] < od[k]) break;
      idx[k] = 0;
    }
  }
  return v;
}

template <typename T>
void ComplexMatmul(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int64_t B, int64_t M, int64_t K,
                   int64_t N, std::complex<T>* c) {
  const auto* x = reinterpret_cast<const std::complex<T>*>(a.data());
  const auto* y = reinterpret_cast<const std::complex<T>*>(b.data());
  std::fill(c, c + B * M * N, std::complex<T>());
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const std::complex<T> s = x[(bi * M + i) * K + k];
        const std::complex<T>* row = y + (bi * K + k) * N;
        std::complex<T>* acc = c + (bi * M + i) * N;
        for (int64_t j = 0; j < N; ++j)  // (ac - bd, ad + bc): XLA's complex multiply, no inf recovery
          acc[j] += std::complex<T>(s.real() * row[j].real() - s.imag() * row[j].imag(),
                                    s.real() * row[j].imag() + s.imag() * row[j].real());
      }
}

}  // namespace

// complex<f32> (or complex<f64>) operands and result: a matmul in the
// complex type, as XLA:CPU's (the MXU takes real operands; a TPU runs it as
// real matmuls of the parts, which this does not price apart).
Status Interpreter::ComplexDot(const Tensor& l, const Tensor& r, Tensor& out, const DotDims& d, int64_t B, int64_t M,
                               int64_t K, int64_t N) {
  const ElementType et = out.type.element;
  if (l.type.element != et || r.type.element != et || !IsComplex(et))
    return UnimplementedError("a complex dot_general takes operands of its result's complex type, not " +
                              l.type.ToString() + " x " + r.type.ToString());
  Dims lo = d.lb, ro = d.rb;
  lo.insert(lo.end(), d.lf.begin(), d.lf.end());
  lo.insert(lo.end(), d.lc.begin(), d.lc.end());
  ro.insert(ro.end(), d.rc.begin(), d.rc.end());
  ro.insert(ro.end(), d.rf.begin(), d.rf.end());
  const int w = ElementTypeBytes(et);
  const auto a = OrderedBytes(l, lo, w), b = OrderedBytes(r, ro, w);
  if (et == ElementType::kC64) ComplexMatmul<float>(a, b, B, M, K, N, out.mutable_as<std::complex<float>>());
  else ComplexMatmul<double>(a, b, B, M, K, N, out.mutable_as<std::complex<double>>());
  return OkStatus();
}

// An integer tensor's elements as int64, its dimensions visited in `order`
// (the last fastest): an operand laid out as a loop nest reads it.
std::vector<int64_t> Interpreter::IntegersInOrder(const Tensor& t, const Dims& order) {
  std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
  Dims od;
  for (int64_t k : order) od.push_back(t.type.dims[static_cast<size_t>(k)]);
  const Dims is = Strides(t.type.dims);
  Dims idx(od.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t at = 0;
    for (size_t k = 0; k < od.size(); ++k) at += idx[k] * is[static_cast<size_t>(order[k])];
    v[i] = IntAt(t, at);
    for (int k = static_cast<int>(od.size()) - 1; k >= 0; --k) {
      if (++idx[k] < od[k]) break;
      idx[k] = 0;
    }
  }
  return v;
}

Status Interpreter::IntegerDot(const Tensor& l, const Tensor& r, Tensor& out,
                               const DotDims& d, int64_t B, int64_t M,
                               int64_t K, int64_t N) {
  if (IsFloat(l.type.element) || IsFloat(r.type.element) || IsFloat(out.type.element))
    return UnimplementedError("mixed float and integer dot_general");
  Dims lo = d.lb, ro = d.rb;
  lo.insert(lo.end(), d.lf.begin(), d.lf.end());
  lo.insert(lo.end(), d.lc.begin(), d.lc.end());
  ro.insert(ro.end(), d.rc.begin(), d.rc.end());
  ro.insert(ro.end(), d.rf.begin(), d.rf.end());
  const auto a = IntegersInOrder(l, lo), b = IntegersInOrder(r, ro);
  std::vector<int64_t> c(static_cast<size_t>(B * M * N), 0);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t x = a[static_cast<size_t>((bi * M + i) * K + k)];
        for (int64_t j = 0; j < N; ++j)
          c[static_cast<size_t>((bi * M + i) * N + j)] += x * b[static_cast<size_t>((bi * K + k) * N + j)];
      }
  return ConvertElements(ElementType::kI64, c.data(), out.type.element, 0, out.num_elements(), out.data.mutable_raw());
}

// Integer operands: exact sums in int64, wrapped to an integer result's
// type (as XLA's integer arithmetic wraps) or rounded once to a float one
// (preferred_element_type), by direct loops over taps (the MXU takes int8;
// this is for correctness, not speed).
Status Interpreter::IntegerConvolution(const ConvShape& s, const Tensor& l, const Tensor& r, Tensor& out) {
  if (IsComplex(out.type.element))
    return UnimplementedError("an integer convolution with a complex result is not computed");
  const std::vector<int64_t> x = IntegersInOrder(l, s.in_order), w = IntegersInOrder(r, s.k_order);
  const size_t ns = s.in_sp.size();
  int64_t taps = 1, pixels = 1, in_pixels = 1;
  for (size_t k = 0; k < ns; ++k) {
    taps *= s.k_sp[k];
    pixels *= s.out_sp[k];
    in_pixels *= s.in_sp[k];
  }
  const int64_t G = s.all_groups(), ig = s.group_in(), og = s.group_out(), N = s.out_batch();
  const Dims osd = Strides(s.out_sp), ksd = Strides(s.k_sp), isd = Strides(s.in_sp);
  auto source = [&](int64_t p, int64_t t) -> int64_t {  // as Convolution's
    int64_t off = 0;
    for (size_t k = 0; k < ns; ++k) {
      const int64_t o = (p / osd[k]) % s.out_sp[k];
      int64_t kk = (t / ksd[k]) % s.k_sp[k];
      if (s.reverse[k]) kk = s.k_sp[k] - 1 - kk;
      const int64_t pos = o * s.stride[k] + kk * s.rhs_dil[k] - s.pad_lo[k];
      if (pos < 0 || pos % s.lhs_dil[k]) return -1;
      const int64_t q = pos / s.lhs_dil[k];
      if (q >= s.in_sp[k]) return -1;
      off += q * isd[k];
    }
    return off;
  };
  std::vector<int64_t> y(static_cast<size_t>(N * pixels * s.cout), 0);  // [N, spatial..., O]
  for (int64_t g = 0; g < G; ++g) {
    const int64_t image0 = s.batch_groups > 1 ? g * N : 0, feature0 = s.groups > 1 ? g * ig : 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t p = 0; p < pixels; ++p) {
        int64_t* yo = y.data() + (n * pixels + p) * s.cout + g * og;
        for (int64_t t = 0; t < taps; ++t) {
          const int64_t src = source(p, t);
          if (src < 0) continue;
          const int64_t* xi = x.data() + ((image0 + n) * in_pixels + src) * s.cin + feature0;
          for (int64_t i = 0; i < ig; ++i) {
            const int64_t* wi = w.data() + (t * ig + i) * s.cout + g * og;
            for (int64_t o = 0; o < og; ++o)  // wrapping products and sums, as the result type's arithmetic
              yo[o] = static_cast<int64_t>(static_cast<uint64_t>(yo[o]) +
                                           static_cast<uint64_t>(xi[i]) * static_cast<uint64_t>(wi[o]));
          }
        }
      }
  }
  // out dim out_order[j] holds y's dim j
  Dims y_dims = {N};
  y_dims.insert(y_dims.end(), s.out_sp.begin(), s.out_sp.end());
  y_dims.push_back(s.cout);
  const Dims os = Strides(out.type.dims);
  std::vector<int64_t> permuted(y.size());
  Dims idx(y_dims.size(), 0);
  for (size_t i = 0; i < y.size(); ++i) {
    int64_t at = 0;
    for (size_t j = 0; j < y_dims.size(); ++j) at += idx[j] * os[static_cast<size_t>(s.out_order[j])];
    permuted[static_cast<size_t>(at)] = y[i];
    for (int j = static_cast<int>(y_dims.size()) - 1; j >= 0; --j) {
      if (++idx[static_cast<size_t>(j)] < y_dims[static_cast<size_t>(j)]) break;
      idx[static_cast<size_t>(j)] = 0;
    }
  }
  return ConvertElements(ElementType::kI64, permuted.data(), out.type.element, 0, out.num_elements(),
                         out.data.mutable_raw());
}

Status Interpreter::Convolution(const Op& op, const Tensor& l, const Tensor& r, Tensor& out) {
  const auto attrs = AttrsOf(op);  // of the op's types, which are l's, r's and out's
  TPUMESH_RETURN_IF_ERROR(attrs->status);
  const auto* conv = std::get_if<ConvAttrs>(&attrs->value);
  if (!conv) return InternalError("convolution without its dimension numbers");
  const ConvShape& s = conv->shape;
  TPUMESH_RETURN_IF_ERROR(ConvolutionComputable(s, l.type, r.type));
  if (!IsFloat(l.type.element)) return IntegerConvolution(s, l, r, out);
  const size_t ns = s.in_sp.size();
  TPUMESH_ASSIGN_OR_RETURN(F32Operand xo, AsF32Ordered(l, s.in_order));
  TPUMESH_ASSIGN_OR_RETURN(F32Operand wo, AsF32Ordered(r, s.k_order));
  const float* x = xo.data;
  const float* w = wo.data;
  int64_t taps = 1, pixels = 1, in_pixels = 1;
  for (size_t k = 0; k < ns; ++k) {
    taps *= s.k_sp[k];
    pixels *= s.out_sp[k];
    in_pixels *= s.in_sp[k];
  }
  // Group g: input features [g * ig, ...) of every image for feature
  // groups, every feature of images [g * N, ...) for batch groups; output
  // features [g * og, ...) of the N result images.
  const int64_t G = s.all_groups(), ig = s.group_in(), og = s.group_out(), K = taps * ig, N = s.out_batch();
  bool out_identity = true;
  for (size_t k = 0; k < s.out_order.size(); ++k) out_identity &= s.out_order[k] == static_cast<int64_t>(k);
  // [N, spatial..., O]: the result itself when it is f32 in that layout.
  const bool direct = out_identity && out.type.element == ElementType::kF32;
  std::vector<float> y_storage(direct ? 0 : static_cast<size_t>(N * pixels * s.cout));
  float* y = direct ? out.mutable_as<float>() : y_storage.data();
  kernels::MatmulOptions mo;
  mo.precision = MatmulPrecision(op);
  // Each output pixel's input position per tap, or -1 (padding / a hole).
  const Dims osd = Strides(s.out_sp), ksd = Strides(s.k_sp), isd = Strides(s.in_sp);
  auto source = [&](int64_t p, int64_t t) -> int64_t {
    int64_t off = 0;
    for (size_t k = 0; k < ns; ++k) {
      const int64_t o = (p / osd[k]) % s.out_sp[k];
      int64_t kk = (t / ksd[k]) % s.k_sp[k];
      if (s.reverse[k]) kk = s.k_sp[k] - 1 - kk;
      const int64_t pos = o * s.stride[k] + kk * s.rhs_dil[k] - s.pad_lo[k];  // in the dilated input
      if (pos < 0 || pos % s.lhs_dil[k]) return -1;
      const int64_t q = pos / s.lhs_dil[k];
      if (q >= s.in_sp[k]) return -1;
      off += q * isd[k];
    }
    return off;
  };
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(pixels, (int64_t{1} << 21) / std::max<int64_t>(1, K)));
  for (int64_t g = 0; g < G; ++g) {
    std::vector<float> wg(static_cast<size_t>(K * og));  // [(taps, ig), og]
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t i = 0; i < ig; ++i)
        std::memcpy(wg.data() + (t * ig + i) * og, w + (t * ig + i) * s.cout + g * og,
                    static_cast<size_t>(og) * sizeof(float));
    TPUMESH_ASSIGN_OR_RETURN(kernels::PackedMatrix p, kernels::PackedMatrix::Pack(K, og, wg.data(), og, mo));
    const int64_t chunks = (pixels + chunk - 1) / chunk;
    Status st;
    std::mutex mu;
    const int64_t image0 = s.batch_groups > 1 ? g * N : 0, feature0 = s.groups > 1 ? g * ig : 0;
    kernels::ParallelForTasks(N * chunks, o_.threads, [&](int64_t tb, int64_t te) {
      std::vector<float> col(static_cast<size_t>(chunk * K)), res(static_cast<size_t>(chunk * og));
      for (int64_t task = tb; task < te; ++task) {
        const int64_t n = task / chunks, p0 = (task % chunks) * chunk, p1 = std::min(pixels, p0 + chunk);
        const float* xn = x + (image0 + n) * in_pixels * s.cin + feature0;
        for (int64_t p = p0; p < p1; ++p) {
          float* row = col.data() + (p - p0) * K;
          for (int64_t t = 0; t < taps; ++t) {
            const int64_t src = source(p, t);
            if (src < 0) std::memset(row + t * ig, 0, static_cast<size_t>(ig) * sizeof(float));
            else std::memcpy(row + t * ig, xn + src * s.cin, static_cast<size_t>(ig) * sizeof(float));
          }
        }
        Status ms = kernels::Matmul(p1 - p0, col.data(), K, p, res.data(), og, 1);
        if (!ms.ok()) {
          std::lock_guard<std::mutex> l(mu);
          st = ms;
          return;
        }
        for (int64_t p = p0; p < p1; ++p)
          std::memcpy(y + (n * pixels + p) * s.cout + g * og, res.data() + (p - p0) * og,
                      static_cast<size_t>(og) * sizeof(float));
      }
    });
    TPUMESH_RETURN_IF_ERROR(st);
  }
  // y is [N, spatial..., O]: write it in the output's layout.
  if (direct) return OkStatus();
  Dims y_dims = {N};
  y_dims.insert(y_dims.end(), s.out_sp.begin(), s.out_sp.end());
  y_dims.push_back(s.cout);
  Tensor yt;
  yt.type = out.type;
  yt.type.element = ElementType::kF32;
  yt.type.dims = y_dims;
  TPUMESH_ASSIGN_OR_RETURN(yt.data, mesh::Array::Host(mesh::DType::kF32, {static_cast<int64_t>(y_storage.size())})
                                        .View(mesh::DType::kU8, {yt.type.size_bytes()}));
  std::memcpy(yt.data.mutable_raw(), y, y_storage.size() * sizeof(float));
  if (out_identity) {
    StoreF32(yt.as<float>(), out);
    return OkStatus();
  }
  // out dim out_order[j] holds y's dim j
  Type pt = yt.type;
  pt.dims = out.type.dims;
  TPUMESH_ASSIGN_OR_RETURN(Tensor permuted, NewTensor(pt, nullptr));
  const Dims ys = Strides(y_dims);
  Dims st(out.type.dims.size());
  for (size_t j = 0; j < s.out_order.size(); ++j) st[static_cast<size_t>(s.out_order[j])] = ys[j];
  AffineCopy(yt, permuted, 0, st);
  StoreF32(permuted.as<float>(), out);
  return OkStatus();
}

}  // namespace tpumesh::hlo
