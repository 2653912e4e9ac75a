// How the Python module meets the library: a Status becomes a Python
// exception carrying its one-line message, and long calls run with the GIL
// released and stop cleanly on Ctrl-C.
//
// Contract: ThrowIfError raises ValueError for bad arguments
// (InvalidArgument, OutOfRange), FileNotFoundError / FileExistsError / OSError
// for NotFound / AlreadyExists / DataLoss, NotImplementedError for
// Unimplemented, KeyboardInterrupt for Cancelled, RuntimeError otherwise;
// with kFile (a file being read or written) every code but InvalidArgument
// is an OSError; with kOutputPath (the output guard's refusal of a path)
// InvalidArgument is an OSError too. RunReleased calls `work` on a thread of its own with the
// GIL released; the calling thread polls Python's signal handlers every
// 50 ms, and when one raises (Ctrl-C: KeyboardInterrupt) it sets `*cancel`
// (when given), waits for `work` to return and re-raises. `work` must not
// touch Python objects.
#ifndef TPUMESH_PYTHON_PY_STATUS_H_
#define TPUMESH_PYTHON_PY_STATUS_H_

#include <atomic>
#include <functional>
#include <utility>

#include "base/status.h"
#include "pybind11/pybind11.h"

namespace tpumesh::python {

enum class ErrorKind { kArgument, kFile, kOutputPath };

// Raises the exception for `status` (a pybind11::error_already_set); OK
// returns.
void ThrowIfError(const Status& status, ErrorKind kind = ErrorKind::kArgument);

template <typename T>
T ValueOrThrow(StatusOr<T> s, ErrorKind kind = ErrorKind::kArgument) {
  ThrowIfError(s.status(), kind);
  return std::move(s).value();
}

// Runs `work` with the GIL released (see above).
void RunReleased(const std::function<void()>& work, std::atomic<bool>* cancel = nullptr);

}  // namespace tpumesh::python

#endif  // TPUMESH_PYTHON_PY_STATUS_H_
