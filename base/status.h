// Status and StatusOr<T>: how tpumesh reports errors at every boundary that
// meets the outside world (files, configs, CLI arguments, shape checks before
// compute, a virtual device out of HBM).
//
// Contract: a Status is either OK or carries one of abseil's canonical codes
// and a one-line message that names what went wrong and where. Nothing in
// tpumesh throws across a public API; the CLI turns a non-OK Status into a
// single line on stderr and a non-zero exit.
#ifndef TPUMESH_BASE_STATUS_H_
#define TPUMESH_BASE_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tpumesh {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kNotFound = 5,
  kAlreadyExists = 6,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kDataLoss = 15,
};

// "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", ...
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message)
      : code_(code), message_(code == StatusCode::kOk ? "" : std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "RESOURCE_EXHAUSTED: device 3 ..." ; "OK" when ok().
  std::string ToString() const;

  // Returns a copy whose message is "context: message" (OK stays OK).
  Status WithContext(std::string_view context) const;

  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExistsError(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status ResourceExhaustedError(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status FailedPreconditionError(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status UnimplementedError(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status CancelledError(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // Implicit on purpose, as absl::StatusOr: `return value;` and
  // `return SomeError(...);` both read naturally at call sites.
  StatusOr(const Status& status) : status_(status) {  // NOLINT
    assert(!status_.ok() && "StatusOr built from an OK Status has no value");
    if (status_.ok()) status_ = InternalError("StatusOr built from an OK Status");
  }
  StatusOr(Status&& status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "StatusOr built from an OK Status has no value");
    if (status_.ok()) status_ = InternalError("StatusOr built from an OK Status");
  }
  StatusOr(const T& value) : value_(value) {}       // NOLINT
  StatusOr(T&& value) : value_(std::move(value)) {}  // NOLINT
  template <typename U>
    requires(std::is_constructible_v<T, U&&> &&
             !std::is_same_v<std::decay_t<U>, T> &&
             !std::is_same_v<std::decay_t<U>, Status> &&
             !std::is_same_v<std::decay_t<U>, StatusOr<T>>)
  StatusOr(U&& value) : value_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  const T& value() const& { assert(ok()); return *value_; }
  T& value() & { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;  // OK when value_ holds a value.
  std::optional<T> value_;
};

}  // namespace tpumesh

#define TPUMESH_STATUS_CONCAT_INNER_(a, b) a##b
#define TPUMESH_STATUS_CONCAT_(a, b) TPUMESH_STATUS_CONCAT_INNER_(a, b)

// Returns from the current function when `expr` (a Status) is not OK.
#define TPUMESH_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::tpumesh::Status tpumesh_status_ = (expr);        \
    if (!tpumesh_status_.ok()) return tpumesh_status_; \
  } while (0)

// `TPUMESH_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a StatusOr, or
// returns its Status.
#define TPUMESH_ASSIGN_OR_RETURN(lhs, expr)                                   \
  TPUMESH_ASSIGN_OR_RETURN_IMPL_(                                             \
      TPUMESH_STATUS_CONCAT_(tpumesh_statusor_, __LINE__), lhs, expr)
#define TPUMESH_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // TPUMESH_BASE_STATUS_H_
