// Matrix Market files (https://math.nist.gov/MatrixMarket/formats.html):
// reading `coordinate` (real, integer, pattern; general or symmetric) and
// `array` (real, integer; general) matrices, writing `coordinate` ones
// (real, integer, pattern; general or symmetric).
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

/// Most rows (or columns) without a stored entry that the reader and to_csr
/// accept beyond the entries: CSR stores an offset for every row and a dense
/// vector an element for every row, so without a bound a size line of a few
/// bytes ("2000000000 2000000000 0") would make them allocate gigabytes.
/// 2^24 such rows cost at most 128 MiB.
inline constexpr std::int64_t kMaxEmptyRows = std::int64_t{1} << 24;

/// A matrix as its list of entries, 0-based, in file order; symmetric files
/// expanded (each off-diagonal entry followed by its mirror image). Filled by
/// hand, nothing holds it to that: to_csr checks it.
struct coordinate_matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int64_t> row, col;
  std::vector<double> value;
  bool symmetric = false;  ///< the file said symmetric
};

/// Parses Matrix Market text; `name` is the file name errors carry.
/// Post: row, col and value have one element per entry; every index is in
/// range; max(rows, cols) <= the entries listed + kMaxEmptyRows. Throws
/// matrix_market_error.
coordinate_matrix parse_matrix_market(std::string_view text, const std::string& name);

/// Reads and parses the file at `path` (tally::error if it cannot be opened).
coordinate_matrix read_matrix_market(const std::string& path);

/// `m` as CSR: row i of the result holds row i's entries sorted by column
/// (stable, so duplicates keep file order; they stay separate entries and add
/// up in every product), values rounded to Value.
/// Pre (invalid_argument naming 'm' and the first violation otherwise):
/// rows, cols >= 0; row, col and value of one length, nnz; every (row, col)
/// inside the matrix; rows, cols and nnz within Index; rows <= nnz +
/// kMaxEmptyRows; no finite value that overflows Value. parse_matrix_market's
/// results meet all of these but the bounds of Index and Value.
/// Post: a valid CSR matrix (validate_csr) with nnz entries.
template <class Value, class Index>
host_csr<Value, Index> to_csr(const coordinate_matrix& m);

/// The `field` of a written file: what each entry line holds after i and j.
enum class matrix_market_field {
  real,     ///< the value, with enough digits to read back the same bits
  integer,  ///< the value as an integer: every value must be one (|v| < 2^63)
  pattern,  ///< nothing: the structure only (a reader sees 1 for each entry)
};

/// The `symmetry` of a written file.
enum class matrix_market_symmetry {
  general,    ///< every entry
  symmetric,  ///< the entries on and below the diagonal, of a symmetric matrix
};

struct matrix_market_write_options {
  matrix_market_field field = matrix_market_field::real;
  matrix_market_symmetry symmetry = matrix_market_symmetry::general;
};

/// Writes `a` (host memory) as a `coordinate` file of the options' field and
/// symmetry, 1-based, entries in row order and, within a row, stored order.
/// Pre (invalid_argument naming 'a', before the file is opened): a is a valid
/// CSR matrix (validate_csr); for `integer`, every value is an integer
/// below 2^63 in magnitude; for `symmetric`, a is square and equals its
/// transpose: the entries at (i, j) and (j, i) have the same values, bit for
/// bit (for `pattern`, the same structure), duplicates matched as multisets.
/// Post: reading the file back and to_csr give a's structure (symmetric:
/// row by row sorted by column, as to_csr sorts) and, for `real`, a's value
/// bits. Throws tally::error when the file cannot be written.
template <class Value, class Index>
void write_matrix_market(const std::string& path, const csr_view<Value, Index>& a,
                         const matrix_market_write_options& options = {});

/// A dense vector from a Matrix Market file: an `array` n×1 (or 1×n) file, or
/// a `coordinate` one with one column (or row), absent entries zero and
/// entries listed twice added. Post: rows·cols elements.
/// Throws tally::error naming the path when the file cannot be opened or read,
/// or holds a matrix with more than one row and more than one column; a
/// matrix_market_error ("<path>:<line>: ...") when it is not valid Matrix
/// Market.
std::vector<double> read_matrix_market_vector(const std::string& path);

}  // namespace tally::solvers
