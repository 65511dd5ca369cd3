// The one exception type of the library: every misuse and every failure raises it with a message that
// names the operation and the values involved, and a kind that says whose fault it is (the input, this
// build or device, the device's driver, the file system, the numbers), so callers decide by the kind and
// never by the message text.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace edgetrain {

// unsupported is about backends: a file feature edgetrain cannot read (a GGUF tensor type, rope_scaling) is
// misuse, because every backend would fail on it alike and a --backend list must not move on over it.
enum class ErrorKind {
  misuse,       // bad input or API use: a shape, flag, config field or file content, a broken contract
  unsupported,  // this backend, build or device cannot do it: not compiled in, no kernel, a device limit
  device,       // the device or its driver failed: no driver/device, lost, out of memory, pipeline creation
  io,           // the file system failed: cannot open/read/write/rename/sync, disk full, a file cut short
  numeric,      // the numbers went bad: a NaN/Inf loss or gradient, non-finite values in a checkpoint
};

// "misuse", "unsupported", "device", "io", "numeric".
inline const char* kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::misuse: return "misuse";
    case ErrorKind::unsupported: return "unsupported";
    case ErrorKind::device: return "device";
    case ErrorKind::io: return "io";
    case ErrorKind::numeric: return "numeric";
  }
  return "?";
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ErrorKind kind = ErrorKind::misuse)
      : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

// cat("a", 1, "b") -> "a1b": builds messages without a format-string language.
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  return os.str();
}

// Raises a misuse Error: the caller passed something wrong.
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(cat(args...), ErrorKind::misuse);
}

// Raises an Error of another kind; also how a caught Error is re-raised with context and its own kind:
// fail_kind(e.kind(), "file ", path, ": ", e.what()).
template <typename... Args>
[[noreturn]] void fail_kind(ErrorKind kind, const Args&... args) {
  throw Error(cat(args...), kind);
}

}  // namespace edgetrain

// ET_CHECK(cond, message...): a misuse Error unless cond holds.
#define ET_CHECK(cond, ...)                      \
  do {                                           \
    if (!(cond)) ::edgetrain::fail(__VA_ARGS__); \
  } while (0)

// ET_CHECK_KIND(ErrorKind::io, cond, message...): an Error of that kind unless cond holds.
#define ET_CHECK_KIND(kind, cond, ...)                        \
  do {                                                        \
    if (!(cond)) ::edgetrain::fail_kind((kind), __VA_ARGS__); \
  } while (0)
