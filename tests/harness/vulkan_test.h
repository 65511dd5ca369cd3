// For the tests that reach into the Vulkan backend (test_vulkan_runtime.cpp, test_vulkan_programs.cpp):
// skip where no Vulkan device is usable, and the shared test backend as its Vulkan type.
#pragma once

#include <gtest/gtest.h>

#include "harness/op_case.h"
#include "vulkan/program.h"

#define NEED_VULKAN()                                                                 \
  do {                                                                                \
    if (!edgetrain::test::vulkan_usable()) GTEST_SKIP() << "no usable Vulkan device"; \
  } while (0)

namespace edgetrain::test {

inline vk::VulkanBackend& vb() { return dynamic_cast<vk::VulkanBackend&>(backend_for_tests("vulkan")); }

}  // namespace edgetrain::test
