// Arrays in and out of the module through Python's buffer protocol and
// numpy's Python API (ndarray.h has the contract and the why).
#include "ndarray.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>
#include <utility>

namespace tpumesh::python {
namespace py = pybind11;
namespace {

// A buffer export held for a scope; empty when `obj` refused it.
class BufferView {
 public:
  BufferView(py::handle obj, int flags) {
    ok_ = PyObject_GetBuffer(obj.ptr(), &view_, flags) == 0;
    if (!ok_) {  // the exporter's own message is replaced by the caller's
      error_ = py::error_already_set().what();
    }
  }
  ~BufferView() {
    if (ok_) PyBuffer_Release(&view_);
  }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const Py_buffer& view() const { return view_; }

 private:
  Py_buffer view_{};
  bool ok_ = false;
  std::string error_;
};

// numpy's name for `obj`'s dtype ("complex64", ">f4"), else its type's name.
std::string DtypeName(py::handle obj) {
  if (py::hasattr(obj, "dtype")) return py::str(obj.attr("dtype")).cast<std::string>();
  return std::string(Py_TYPE(obj.ptr())->tp_name);
}

Status Unsupported(py::handle obj) {
  return InvalidArgumentError("an input of numpy dtype " + DtypeName(obj) +
                              ": StableHLO takes bool, integer, float and complex64/complex128 arrays");
}

// Copies the elements of `v` in C order into `out`, following its strides
// (numpy exports a transposed or sliced array's own strides, negative ones
// included, with `buf` at the first element).
void CopyStrided(const Py_buffer& v, uint8_t* out) {
  const size_t w = static_cast<size_t>(v.itemsize);
  if (v.ndim == 0 || v.strides == nullptr || PyBuffer_IsContiguous(&v, 'C')) {
    std::memcpy(out, v.buf, static_cast<size_t>(v.len));
    return;
  }
  const int nd = v.ndim;
  for (int d = 0; d < nd; ++d)
    if (v.shape[d] == 0) return;
  const Py_ssize_t inner = v.shape[nd - 1], inner_stride = v.strides[nd - 1];
  std::vector<Py_ssize_t> index(static_cast<size_t>(nd), 0);
  while (true) {
    const uint8_t* row = static_cast<const uint8_t*>(v.buf);
    for (int d = 0; d + 1 < nd; ++d) row += index[d] * v.strides[d];
    if (inner_stride == v.itemsize) {
      std::memcpy(out, row, static_cast<size_t>(inner) * w);
      out += static_cast<size_t>(inner) * w;
    } else {
      for (Py_ssize_t i = 0; i < inner; ++i, out += w) std::memcpy(out, row + i * inner_stride, w);
    }
    int d = nd - 2;
    for (; d >= 0; --d) {
      if (++index[d] < v.shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// numpy's dtype string of a raw ("<f4", "|b1").
std::string DtypeOf(const pipeline::H5Raw& raw) {
  if (raw.dtype == "bool") return "|b1";
  if (raw.dtype == "float16") return "<f2";
  const char kind = raw.cls == 'f' ? 'f' : raw.cls == 'i' ? 'i' : raw.cls == 'c' ? 'c' : 'u';
  return std::string(raw.width == 1 ? "|" : "<") + kind + std::to_string(raw.width);
}

}  // namespace

StatusOr<pipeline::H5Raw> RawFromNumpy(py::handle array, const std::string& tag) {
  BufferView buffer(array, PyBUF_RECORDS_RO);  // strides and format, any layout, read-only
  if (!buffer.ok()) return Unsupported(array);
  const Py_buffer& v = buffer.view();
  // The format: an optional byte-order character, then one element code
  // (numpy writes nothing more for a plain dtype).
  std::string_view format = v.format ? v.format : "B";
  bool big = std::endian::native == std::endian::big;
  if (!format.empty() && std::string_view("@=<>!").find(format[0]) != std::string_view::npos) {
    if (format[0] == '<') big = false;
    if (format[0] == '>' || format[0] == '!') big = true;
    format.remove_prefix(1);
  }
  // complex64 / complex128: 'Z' and the part's code.
  const bool complex = format.size() == 2 && format[0] == 'Z' && (format[1] == 'f' || format[1] == 'd');
  if (complex) format.remove_prefix(1);
  if (format.size() != 1) return Unsupported(array);
  pipeline::H5Raw raw;
  raw.width = static_cast<int>(v.itemsize);
  const char code = format[0];
  if (complex) {
    raw.cls = 'c';
    if (raw.width != (code == 'f' ? 8 : 16)) return Unsupported(array);
  } else if (code == '?') {
    raw.cls = 'u';
    raw.dtype = "bool";
  } else if (code == 'e') {
    raw.cls = 'u';
    raw.dtype = "float16";
  } else if (code == 'f' || code == 'd') {
    raw.cls = 'f';
  } else if (std::string_view("bhilqn").find(code) != std::string_view::npos) {
    raw.cls = 'i';
  } else if (std::string_view("BHILQN").find(code) != std::string_view::npos) {
    raw.cls = 'u';
    if (tag == "bfloat16" && raw.width == 2) raw.dtype = "bfloat16";
  } else {
    return Unsupported(array);
  }
  const int want = code == '?' ? 1 : code == 'e' ? 2 : code == 'f' ? 4 : code == 'd' ? 8 : 0;
  if (!complex &&
      ((want != 0 && raw.width != want) || (raw.width != 1 && raw.width != 2 && raw.width != 4 && raw.width != 8)))
    return Unsupported(array);
  raw.dims.assign(v.shape, v.shape + v.ndim);
  raw.data.resize(static_cast<size_t>(v.len));
  CopyStrided(v, raw.data.data());
  // Big-endian values swapped to little-endian: each part of a complex one.
  const int swap = complex ? raw.width / 2 : raw.width;
  if (big && swap > 1) {
    for (size_t i = 0; i < raw.data.size(); i += static_cast<size_t>(swap))
      std::reverse(raw.data.begin() + static_cast<std::ptrdiff_t>(i),
                   raw.data.begin() + static_cast<std::ptrdiff_t>(i) + swap);
  }
  return raw;
}

StatusOr<pipeline::H5Raw> RawAs(py::handle value, const char* dtype) {
  py::object a;
  try {
    a = py::module_::import("numpy").attr("asarray")(value, dtype);
  } catch (const py::error_already_set&) {
    return InvalidArgumentError(std::string("expected an array of ") + dtype + ", got " + DtypeName(value));
  }
  return RawFromNumpy(a, "");
}

py::tuple NumpyFromRaw(const pipeline::H5Raw& raw) {
  py::object out = NewArray(DtypeOf(raw).c_str(), raw.dims, [&raw](uint8_t* bytes, size_t nbytes) {
    std::memcpy(bytes, raw.data.data(), std::min(nbytes, raw.data.size()));
  });
  return py::make_tuple(out, raw.dtype == "bfloat16" ? "bfloat16" : "");
}

py::object NewArray(const char* dtype, const std::vector<int64_t>& dims,
                    const std::function<void(uint8_t* bytes, size_t nbytes)>& fill) {
  py::tuple shape(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) shape[i] = py::int_(dims[i]);
  py::object out = py::module_::import("numpy").attr("empty")(shape, dtype);
  BufferView buffer(out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS);
  if (!buffer.ok()) throw std::runtime_error("a new numpy array exports no writable buffer: " + buffer.error());
  if (buffer.view().len > 0) fill(static_cast<uint8_t*>(buffer.view().buf), static_cast<size_t>(buffer.view().len));
  return out;
}

}  // namespace tpumesh::python
