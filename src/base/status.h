#pragma once
// Status and Result<T>: how fracgpu code reports errors (docs/design/STYLE.md: no exceptions thrown
// by our code). A Status carries a code and a message that names the offending input, e.g.
// `container "train": nvidia.com/gpucores must be 0..100, got "150"`.

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace fracgpu {

/// Error categories. They map onto HTTP status codes at the service edges
/// (kInvalidArgument → 400, kPermissionDenied → 403, kNotFound → 404, kConflict → 409,
/// kUnavailable → 503, kInternal → 500).
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   ///< malformed, out-of-range or contradictory input
  kPermissionDenied,  ///< a policy refusal
  kNotFound,
  kConflict,           ///< optimistic-concurrency conflict, lock held by another
  kResourceExhausted,  ///< does not fit
  kUnavailable,        ///< a peer is down or timed out; retrying may help
  kInternal,
};

/// Human-readable name of a code ("INVALID_ARGUMENT", …).
constexpr const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kConflict:
      return "CONFLICT";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

/// The outcome of an operation: OK, or a code with a message naming the offending input.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "INVALID_ARGUMENT: <message>", or "OK".
  std::string ToString() const {
    return ok() ? "OK" : std::string(StatusCodeName(code_)) + ": " + message_;
  }
  /// Returns a copy whose message is "<prefix>: <message>" (adds context while propagating).
  Status WithPrefix(const std::string& prefix) const {
    return ok() ? *this : Status(code_, prefix + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

}  // namespace fracgpu

namespace fracgpu::internal {
/// Prints "FRACGPU_CHECK failed: <cond> at <file>:<line>" to stderr and aborts (src/base/check.cc).
[[noreturn]] void CheckFailed(const char* cond, const char* file, int line);
}  // namespace fracgpu::internal

/// Aborts a daemon on a broken invariant (docs/design/STYLE.md). Never used in libvgpu.so.
#define FRACGPU_CHECK(cond)                                        \
  do {                                                             \
    if (!(cond)) {                                                 \
      ::fracgpu::internal::CheckFailed(#cond, __FILE__, __LINE__); \
    }                                                              \
  } while (0)

namespace fracgpu {

/// A value of type T, or a non-OK Status. Accessing value() of an error is a programming
/// error: checked in every build (release included), it aborts with the file and line.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    // Checked in every build: an OK Status would make a Result that holds neither.
    FRACGPU_CHECK(!std::get<Status>(v_).ok() && "Result constructed from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  /// The error; Status::Ok() when this holds a value.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  const T& value() const& {
    CheckOk();
    return std::get<T>(v_);
  }
  T& value() & {
    CheckOk();
    return std::get<T>(v_);
  }
  T&& value() && {
    CheckOk();
    return std::get<T>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void CheckOk() const {
    if (!ok()) ::fracgpu::internal::CheckFailed("Result::value() of an error", __FILE__, __LINE__);
  }
  std::variant<T, Status> v_;
};

}  // namespace fracgpu

/// Returns early from the enclosing function if `expr` (a Status) is not OK.
#define FRACGPU_RETURN_IF_ERROR(expr) \
  do {                                \
    ::fracgpu::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (0)
