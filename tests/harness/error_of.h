// The message of the Error a call throws, or "(no error)", and EXPECT_HAS(text, needle): for tests that check
// what an error says.
#pragma once

#include <gtest/gtest.h>

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

#define EXPECT_HAS(text, needle) EXPECT_NE(std::string(text).find(needle), std::string::npos) << (text)

}  // namespace edgetrain::test
