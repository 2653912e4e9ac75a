// The C boundary of the plugin: Status inside, PJRT_Error at the API.
//
// Contract: a PJRT function returns nullptr on success, else a PJRT_Error
// the caller frees with PJRT_Error_Destroy; ToError makes one from a
// failed Status (nullptr from an ok one). CheckArgs refuses an argument
// struct smaller than its 0.91 STRUCT_SIZE (a framework built against an
// older API version), so no function reads or writes past the caller's
// struct.
#ifndef TPUMESH_PJRT_C_BOUNDARY_H_
#define TPUMESH_PJRT_C_BOUNDARY_H_

#include <string>
#include <utility>

#include "base/status.h"
#include "pjrt/pjrt_c_api.h"

struct PJRT_Error {
  tpumesh::Status status;
};

namespace tpumesh::pjrt {

inline PJRT_Error* ToError(Status status) {
  if (status.ok()) return nullptr;
  return new PJRT_Error{std::move(status)};
}

// UNIMPLEMENTED: "tpumesh: <function> is not implemented".
inline PJRT_Error* NotImplemented(const char* function) {
  return ToError(UnimplementedError(std::string("tpumesh: ") + function + " is not implemented"));
}

template <typename Args>
Status CheckArgs(const Args* args, const char* function) {
  static_assert(kPjrtStructSize<Args> > 0, "kPjrtStructSize is not declared for this struct");
  if (args == nullptr) return InvalidArgumentError(std::string("tpumesh: ") + function + ": no arguments");
  if (args->struct_size < kPjrtStructSize<Args>)
    return InvalidArgumentError(std::string("tpumesh: ") + function + ": argument struct of " +
                                std::to_string(args->struct_size) + " bytes, expected at least " +
                                std::to_string(kPjrtStructSize<Args>) + " (PJRT C API " +
                                std::to_string(kPjrtApiMajor) + "." + std::to_string(kPjrtApiMinor) + ")");
  return OkStatus();
}

}  // namespace tpumesh::pjrt

// In a function returning PJRT_Error*: returns CheckArgs's failure.
#define TPUMESH_PJRT_CHECK(args, function)                                              \
  do {                                                                                  \
    if (::tpumesh::Status s = ::tpumesh::pjrt::CheckArgs(args, function); !s.ok())      \
      return ::tpumesh::pjrt::ToError(std::move(s));                                    \
  } while (0)

#endif  // TPUMESH_PJRT_C_BOUNDARY_H_
