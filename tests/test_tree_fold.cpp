// The one-pass evaluations of the fixed tree (tree::balanced_fold and
// tree::balanced_fold_batched) against the tree's definition written here:
// recursive halving over the padded power of two, empty leaves skipped. The
// operator builds the parenthesised expression, so equal strings mean the
// same tree, not just the same value. Compiled as plain C++.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "tally/core/tree.hpp"

namespace {

std::string leaf(std::int64_t j) { return std::to_string(j); }
std::string combine(const std::string& a, const std::string& b) { return "(" + a + " " + b + ")"; }

/// The node over leaves [first, first + size) of n, "" when all are padding.
std::string node(std::int64_t n, std::int64_t first, std::int64_t size) {
  if (first >= n) return "";
  if (size == 1) return leaf(first);
  const std::string left = node(n, first, size / 2), right = node(n, first + size / 2, size / 2);
  return right.empty() ? left : combine(left, right);
}

std::string definition(std::int64_t n) {
  std::int64_t padded = 1;
  while (padded < n) padded *= 2;
  return node(n, 0, padded);
}

TEST(TreeFold, OnePassIsTheBalancedTreeForEveryCount) {
  for (std::int64_t n = 1; n <= 1100; ++n)
    ASSERT_EQ((tally::tree::balanced_fold<11, std::string>(n, leaf, combine)), definition(n)) << n << " leaves";
  // A full tree of the largest count the stack takes.
  EXPECT_EQ((tally::tree::balanced_fold<4, std::string>(16, leaf, combine)), definition(16));
}

TEST(TreeFold, BatchedIsTheSameTree) {
  for (std::int64_t n = 1; n <= 1100; ++n) {
    ASSERT_EQ((tally::tree::balanced_fold_batched<11, 1, std::string>(n, leaf, combine)), definition(n)) << n;
    ASSERT_EQ((tally::tree::balanced_fold_batched<11, 3, std::string>(n, leaf, combine)), definition(n)) << n;
    ASSERT_EQ((tally::tree::balanced_fold_batched<11, 5, std::string>(n, leaf, combine)), definition(n)) << n;
  }
}

}  // namespace
