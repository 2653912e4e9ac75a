#include "py_status.h"

#include <chrono>
#include <exception>
#include <future>
#include <thread>

namespace tpumesh::python {
namespace py = pybind11;

void ThrowIfError(const Status& status, ErrorKind kind) {
  if (status.ok()) return;
  PyObject* type = PyExc_RuntimeError;
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      type = PyExc_ValueError;
      break;
    case StatusCode::kNotFound:
      type = PyExc_FileNotFoundError;
      break;
    case StatusCode::kAlreadyExists:
      type = PyExc_FileExistsError;
      break;
    case StatusCode::kDataLoss:
      type = PyExc_OSError;
      break;
    case StatusCode::kUnimplemented:
      type = PyExc_NotImplementedError;
      break;
    case StatusCode::kCancelled:
      type = PyExc_KeyboardInterrupt;
      break;
    default:
      break;
  }
  // A file that cannot be read or written (a full disk is ResourceExhausted,
  // a short read DataLoss): an OSError whatever the code, bad contents aside.
  if (kind == ErrorKind::kFile && type != PyExc_ValueError && type != PyExc_FileNotFoundError &&
      type != PyExc_FileExistsError && type != PyExc_KeyboardInterrupt)
    type = PyExc_OSError;
  // A path the output guard refuses (a FIFO, a folder, an input): OSError.
  if (kind == ErrorKind::kOutputPath && type == PyExc_ValueError) type = PyExc_OSError;
  PyErr_SetString(type, status.message().c_str());
  throw py::error_already_set();
}

void RunReleased(const std::function<void()>& work, std::atomic<bool>* cancel) {
  std::exception_ptr failure;
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  {
    py::gil_scoped_release release;
    std::thread worker([&] {
      try {
        work();
      } catch (...) {
        failure = std::current_exception();
      }
      done.set_value();
    });
    while (finished.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      py::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) {
        // The exception stays set on this thread until re-raised below.
        // The exception stays set while the worker, which touches no
        // Python object, stops (at its next step when it polls `cancel`).
        if (cancel != nullptr) cancel->store(true);
        worker.join();
        throw py::error_already_set();
      }
    }
    worker.join();
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tpumesh::python
