// Matrix Market files (https://math.nist.gov/MatrixMarket/formats.html):
// reading `coordinate` (real, integer, pattern; general or symmetric) and
// `array` (real, integer; general) matrices, writing coordinate real general.
//
// A malformed file -- bad banner, wrong counts, an index out of range, a
// non-number, a truncated file -- is a matrix_market_error naming the file and
// the line; never a crash (the reader is fuzzed: fuzz/matrix_market_fuzzer.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tally/core/error.hpp"
#include "tally/solvers/csr.hpp"

namespace tally::solvers {

/// A file that is not valid Matrix Market. what() reads "<file>:<line>: <problem>".
class matrix_market_error : public error {
 public:
  matrix_market_error(const std::string& file, std::int64_t line, const std::string& problem);
  /// The 1-based line the problem is on (the line after the last for a truncated file).
  std::int64_t line() const noexcept { return line_; }

 private:
  std::int64_t line_;
};

/// A matrix as its list of entries, 0-based, in file order; symmetric files
/// expanded (each off-diagonal entry followed by its mirror image).
struct coordinate_matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int64_t> row, col;
  std::vector<double> value;
  bool symmetric = false;  ///< the file said symmetric
};

/// Parses Matrix Market text; `name` is the file name errors carry.
/// Post: every index is in range. Throws matrix_market_error.
coordinate_matrix parse_matrix_market(std::string_view text, const std::string& name);

/// Reads and parses the file at `path` (tally::error if it cannot be opened).
coordinate_matrix read_matrix_market(const std::string& path);

/// Row i of the result holds row i's entries sorted by column (stable, so
/// duplicates keep file order; they stay separate entries and add up in
/// every product). Throws invalid_argument when Index cannot hold the sizes.
template <class Value, class Index>
host_csr<Value, Index> to_csr(const coordinate_matrix& m);

/// Writes `a` (host memory) as `coordinate real general`, 1-based, values
/// with enough digits to read back the same bits. Throws tally::error when
/// the file cannot be written.
template <class Value, class Index>
void write_matrix_market(const std::string& path, const csr_view<Value, Index>& a);

/// A dense vector from a Matrix Market file: an `array` n×1 (or 1×n) file, or
/// a `coordinate` one with one column (or row), absent entries zero.
std::vector<double> read_matrix_market_vector(const std::string& path);

}  // namespace tally::solvers
