// The one place where arrays cross between Python and the library, both
// ways, without numpy's C ABI (pybind11/numpy.h reads numpy's C structs
// with the layout of the numpy it was written for: pybind11 2.10's reads a
// numpy 2 dtype's item size wrong, and every array came in as zeros).
//
// In: Python's buffer protocol (PEP 3118), which numpy 1.x and 2.x, and
// memoryview, implement alike: the element kind and byte order from the
// buffer's format, the width from its item size, strides followed (a
// non-contiguous view is copied in C order), big-endian elements swapped.
// Out: numpy.empty(shape, dtype) called through Python, filled through its
// buffer. Every copy is the caller's own: nothing Python owns is read after
// a call returns, and nothing returned points into the library.
//
// Contract: a `raw` is pipeline::H5Raw (io/h5io.h): class 'f' / 'i' / 'u',
// width 1/2/4/8 bytes, or class 'c' (complex64 / complex128: width 8 / 16,
// (re, im) pairs), dims, dtype tag ("bool", "float16", "bfloat16" or ""),
// elements little-endian in C order. A dtype with no StableHLO element type
// (object, datetime, structured, long double, clongdouble, an object with no
// buffer) is InvalidArgument naming the dtype, in one line. Call with the
// GIL held.
#ifndef TPUMESH_PYTHON_NDARRAY_H_
#define TPUMESH_PYTHON_NDARRAY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/h5io.h"
#include "pybind11/pybind11.h"

namespace tpumesh::python {

// The elements of `array` (anything with the buffer protocol: a numpy array
// or scalar, a memoryview) as a raw. `tag` "bfloat16" marks uint16 bits of
// bf16 values (python/tpumesh/io.py to_tagged); float16 and bool get their
// tags from the dtype.
StatusOr<pipeline::H5Raw> RawFromNumpy(pybind11::handle array, const std::string& tag);

// `value` converted by numpy to `dtype` first (numpy.asarray(value, dtype):
// lists, scalars and other dtypes as numpy casts them), then as above.
StatusOr<pipeline::H5Raw> RawAs(pybind11::handle value, const char* dtype);

// (numpy array, tag) of a raw: its dtype from class, width and tag
// (bfloat16 crosses as uint16 with the tag "bfloat16", "" otherwise; numpy
// has no bf16, python/tpumesh/ views it as ml_dtypes' when that is there).
pybind11::tuple NumpyFromRaw(const pipeline::H5Raw& raw);

// A new C-contiguous numpy array of `dtype` (a numpy dtype string, "<f4",
// "|u1") and `dims`, its `nbytes` bytes written by `fill` (which may
// release the GIL: the array's buffer stays exported until it returns).
pybind11::object NewArray(const char* dtype, const std::vector<int64_t>& dims,
                          const std::function<void(uint8_t* bytes, size_t nbytes)>& fill);

}  // namespace tpumesh::python

#endif  // TPUMESH_PYTHON_NDARRAY_H_
