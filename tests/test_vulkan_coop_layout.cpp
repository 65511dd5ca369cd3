// The accumulator layout the tensor-core attention kernels rely on (vulkan/coop_layout.h): the fit of the
// device probe's answer, from answers written here (no device needed; the probe itself is checked in
// test_vulkan_runtime.cpp). (Native only: the browser's op tests take the files that register op cases.)
#include <gtest/gtest.h>

#include <array>
#include <utility>
#include <vector>

#include "vulkan/coop_layout.h"

namespace edgetrain::test {
namespace {

using Cell = std::pair<int, int>;  // (row, column) within a 16 x 16 tile

// A probe answer: lane l's element i at where(l, i).
template <typename F>
std::vector<float> answer(float per_lane, F where) {
  std::vector<float> out(1 + 32 * 8, -1.0f);
  out[0] = per_lane;
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 8; ++i) {
      const Cell c = where(lane, i);
      out[1 + lane * 8 + i] = float(c.first * 16 + c.second);
    }
  return out;
}

// NVIDIA's mma tiles: quad g = lane / 4 holds rows g and g + 8, two adjacent columns per 8-wide half.
Cell mma(int lane, int i, const std::array<Cell, 8>& order) {
  return {lane / 4 + order[i].first, 2 * (lane % 4) + order[i].second};
}

TEST(CoopLayout, MmaTilesInAnyElementOrderAreKnown) {
  const std::array<Cell, 8> usual{{{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}}};
  vk::CoopAccLayout l = vk::fit_coop_acc_layout(answer(8, [&](int lane, int i) { return mma(lane, i, usual); }).data());
  ASSERT_TRUE(l.known) << l.what;
  EXPECT_EQ(l.rows_high, 0xCCu);
  EXPECT_EQ(l.columns, 0x98981010u);

  const std::array<Cell, 8> other{{{8, 9}, {0, 0}, {0, 8}, {8, 1}, {0, 1}, {8, 8}, {0, 9}, {8, 0}}};
  l = vk::fit_coop_acc_layout(answer(8, [&](int lane, int i) { return mma(lane, i, other); }).data());
  ASSERT_TRUE(l.known) << l.what;
  EXPECT_EQ(l.rows_high, 0b10101001u);
  EXPECT_EQ(l.columns, 0x09811809u);
}

TEST(CoopLayout, OtherLayoutsAreRefusedWithAReason) {
  const std::array<Cell, 8> usual{{{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}}};
  // Transposed: lanes of a quad share columns, not rows.
  auto transposed = [&](int lane, int i) {
    const Cell c = mma(lane, i, usual);
    return Cell{c.second, c.first};
  };
  vk::CoopAccLayout l = vk::fit_coop_acc_layout(answer(8, transposed).data());
  EXPECT_FALSE(l.known);
  EXPECT_FALSE(l.what.empty());
  // Lanes 0 and 1 swapped: lane 0 fits the form, lane 1 does not.
  auto swapped = [&](int lane, int i) { return mma(lane < 2 ? 1 - lane : lane, i, usual); };
  l = vk::fit_coop_acc_layout(answer(8, swapped).data());
  EXPECT_FALSE(l.known);
  EXPECT_NE(l.what.find("lane 1"), std::string::npos) << l.what;
  // Another element count.
  l = vk::fit_coop_acc_layout(answer(4, [&](int lane, int i) { return mma(lane, i, usual); }).data());
  EXPECT_FALSE(l.known);
  EXPECT_NE(l.what.find("elements per lane"), std::string::npos) << l.what;
  // Two elements of a lane in one cell.
  auto doubled = [&](int lane, int i) { return mma(lane, i == 1 ? 0 : i, usual); };
  l = vk::fit_coop_acc_layout(answer(8, doubled).data());
  EXPECT_FALSE(l.known);
}

}  // namespace
}  // namespace edgetrain::test
