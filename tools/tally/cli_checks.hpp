// Number checks for the tool's options. CLI11's own (PositiveNumber,
// NonNegativeNumber, Range with a huge bound) refuse a value by printing the
// bound in full: DBL_MAX as 309 digits.
#pragma once

#include <cmath>
#include <string>

#include <CLI/CLI.hpp>

namespace tally::cli {

/// A finite number, above zero (`positive`) or at least zero.
inline CLI::Validator finite_number(bool positive) {
  return CLI::Validator(
      [positive](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "must be a number (got " + text + ")";
        if (!std::isfinite(value) || (positive ? !(value > 0) : !(value >= 0)))
          return std::string("must be a finite number ") + (positive ? "> 0" : ">= 0") + " (got " + text + ")";
        return {};
      },
      positive ? "POSITIVE" : "NONNEGATIVE");
}

}  // namespace tally::cli
