// The message of the Error a call throws, or "(no error)": for tests that check what an error says.
#pragma once

#include <functional>
#include <string>

#include "edgetrain/error.h"

namespace edgetrain::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace edgetrain::test
