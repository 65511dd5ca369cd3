// The one exception type of the library: every misuse and every failure raises it with a message that
// names the operation and the values involved.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace edgetrain {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
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

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(cat(args...));
}

}  // namespace edgetrain

#define ET_CHECK(cond, ...)                  \
  do {                                       \
    if (!(cond)) ::edgetrain::fail(__VA_ARGS__); \
  } while (0)
