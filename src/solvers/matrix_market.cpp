// The Matrix Market reader and writer (see matrix_market.hpp).
#include "tally/solvers/matrix_market.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <tuple>

#include "tally/core/backend.hpp"
#include "tally/solvers/validate_csr.hpp"

namespace tally::solvers {

matrix_market_error::matrix_market_error(const std::string& file, std::int64_t line, const std::string& problem)
    : error(file + ":" + std::to_string(line) + ": " + problem), line_(line) {}

namespace {

/// The banner's name of a field.
const char* field_name_of(matrix_market_field f) {
  switch (f) {
    case matrix_market_field::real:
      return "real";
    case matrix_market_field::integer:
      return "integer";
    case matrix_market_field::pattern:
      return "pattern";
  }
  return "?";
}

/// Walks the text line by line, counting lines, and splits lines into tokens.
class line_reader {
 public:
  line_reader(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  /// The next line (without its end of line), or false at the end of the text.
  bool next(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    const std::size_t end = text_.find('\n', pos_);
    const std::size_t stop = end == std::string_view::npos ? text_.size() : end;
    line = text_.substr(pos_, stop - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = stop + 1;
    ++number_;
    return true;
  }
  /// The next line that is neither a comment nor blank, or false at the end.
  bool next_data(std::string_view& line) {
    while (next(line)) {
      const std::size_t first = line.find_first_not_of(" \t");
      if (first == std::string_view::npos || line[first] == '%') continue;
      return true;
    }
    return false;
  }
  std::int64_t number() const { return number_; }
  [[noreturn]] void fail(const std::string& problem, std::int64_t line = -1) const {
    throw matrix_market_error(name_, line < 0 ? number_ : line, problem);
  }

 private:
  std::string_view text_;
  const std::string& name_;
  std::size_t pos_ = 0;
  std::int64_t number_ = 0;
};

/// Whitespace-separated tokens of one line.
std::vector<std::string_view> tokens_of(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string shown(std::string_view token) {
  constexpr std::size_t kMax = 40;
  std::string out(token.substr(0, kMax));
  for (char& c : out)
    if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
  return "'" + out + (token.size() > kMax ? "...'" : "'");
}

/// The token without one leading '+', which from_chars does not take; a sign
/// after it ("+-5") stays, for from_chars to refuse.
std::string_view without_plus(std::string_view token) {
  if (token.size() > 1 && token[0] == '+' && token[1] != '-' && token[1] != '+') token.remove_prefix(1);
  return token;
}

std::int64_t parse_integer(std::string_view token, const char* what, const line_reader& in) {
  token = without_plus(token);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec == std::errc::result_out_of_range) in.fail(std::string(what) + " " + shown(token) + " is out of range");
  if (ec != std::errc() || end != token.data() + token.size() || token.empty())
    in.fail(std::string(what) + " " + shown(token) + " is not an integer");
  return value;
}

double parse_real(std::string_view token, const line_reader& in) {
  token = without_plus(token);
  double value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  // Out of range: from_chars leaves value alone; the file's number is not a double.
  if (ec == std::errc::result_out_of_range) in.fail("value " + shown(token) + " is out of range for a double");
  if (ec != std::errc() || end != token.data() + token.size() || token.empty())
    in.fail("value " + shown(token) + " is not a number");
  return value;
}

}  // namespace

coordinate_matrix parse_matrix_market(std::string_view text, const std::string& name) {
  line_reader in(text, name);
  std::string_view line;
  if (!in.next(line)) in.fail("empty file: expected the banner '%%MatrixMarket matrix ...'", 1);

  // Banner: %%MatrixMarket matrix <format> <field> <symmetry>
  const auto banner = tokens_of(line);
  if (banner.empty() || lower(banner[0]) != "%%matrixmarket")
    in.fail("bad banner: the first line must start with '%%MatrixMarket'");
  if (banner.size() != 5) in.fail("bad banner: expected '%%MatrixMarket matrix <format> <field> <symmetry>'");
  if (lower(banner[1]) != "matrix") in.fail("bad banner: object " + shown(banner[1]) + " is not 'matrix'");
  const std::string format = lower(banner[2]), field_name = lower(banner[3]), symmetry = lower(banner[4]);
  const bool dense = format == "array";
  if (!dense && format != "coordinate")
    in.fail("bad banner: format " + shown(banner[2]) + " is not 'coordinate' or 'array'");
  // The writer's enum and names (field_name_of); pattern files are coordinate only.
  const matrix_market_field fields[] = {matrix_market_field::real, matrix_market_field::integer,
                                        matrix_market_field::pattern};
  const auto* found = std::find_if(std::begin(fields), std::end(fields), [&](matrix_market_field f) {
    return field_name == field_name_of(f) && !(dense && f == matrix_market_field::pattern);
  });
  if (found == std::end(fields))
    in.fail("bad banner: field " + shown(banner[3]) + " is not supported (real, integer" +
            (dense ? ")" : ", pattern)"));
  const matrix_market_field kind = *found;
  coordinate_matrix m;
  if (symmetry == "symmetric") m.symmetric = true;
  else if (symmetry != "general")
    in.fail("bad banner: symmetry " + shown(banner[4]) + " is not supported (general, symmetric)");
  if (dense && m.symmetric) in.fail("bad banner: symmetric array files are not supported");

  // Size line.
  if (!in.next_data(line)) in.fail("truncated file: no size line", in.number() + 1);
  const auto size = tokens_of(line);
  if (size.size() != (dense ? 2u : 3u))
    in.fail(dense ? "size line must be '<rows> <cols>'" : "size line must be '<rows> <cols> <entries>'");
  m.rows = parse_integer(size[0], "row count", in);
  m.cols = parse_integer(size[1], "column count", in);
  if (m.rows < 0 || m.cols < 0) in.fail("negative matrix size");
  if (m.symmetric && m.rows != m.cols) in.fail("a symmetric matrix must be square");
  // rows·cols without overflow: the most entries a file may list.
  const bool huge = m.rows != 0 && m.cols > std::numeric_limits<std::int64_t>::max() / m.rows;
  const std::int64_t capacity = huge ? std::numeric_limits<std::int64_t>::max() : m.rows * m.cols;
  std::int64_t entries;
  if (dense) {
    if (huge) in.fail("array size rows x cols overflows 64 bits");
    entries = capacity;
  } else {
    entries = parse_integer(size[2], "entry count", in);
    if (entries < 0) in.fail("negative entry count");
    if (entries > capacity) in.fail("entry count " + std::to_string(entries) + " exceeds rows x cols");
  }
  // Rows (columns) without entries cost memory in to_csr (and
  // read_matrix_market_vector): bounded. A symmetric file's mirrored entries
  // are not counted, so that to_csr, which counts the entries it gets,
  // accepts every matrix the reader does.
  if (std::max(m.rows, m.cols) - entries > kMaxEmptyRows)
    in.fail(std::to_string(m.rows) + " x " + std::to_string(m.cols) + " with " + std::to_string(entries) +
            " entries: more than " + std::to_string(kMaxEmptyRows) +
            " rows or columns would hold none, and converting them would allocate memory for each");
  // Reserve no more than the text could hold (about 4 bytes an entry at
  // least), so a lying count cannot exhaust memory.
  const auto plausible = static_cast<std::size_t>(std::min<std::int64_t>(entries, text.size() / 4 + 1));
  const std::size_t mirrored = m.symmetric ? 2 : 1;
  m.row.reserve(plausible * mirrored);
  m.col.reserve(plausible * mirrored);
  m.value.reserve(plausible * mirrored);

  const std::size_t per_entry = dense ? 1 : (kind == matrix_market_field::pattern ? 2 : 3);
  for (std::int64_t k = 0; k < entries; ++k) {
    if (!in.next_data(line))
      in.fail("truncated file: expected " + std::to_string(entries) + " entries, found " + std::to_string(k),
              in.number() + 1);
    const auto t = tokens_of(line);
    if (t.size() != per_entry)
      in.fail("expected " + std::to_string(per_entry) + (per_entry == 1 ? " value" : " fields") + ", found " +
              std::to_string(t.size()));
    std::int64_t i, j;
    double v = 1.0;
    if (dense) {  // column-major
      i = k % m.rows;
      j = k / m.rows;
    } else {
      i = parse_integer(t[0], "row index", in) - 1;
      j = parse_integer(t[1], "column index", in) - 1;
      if (i < 0 || i >= m.rows)
        in.fail("row index " + std::to_string(i + 1) + " is out of range 1.." + std::to_string(m.rows));
      if (j < 0 || j >= m.cols)
        in.fail("column index " + std::to_string(j + 1) + " is out of range 1.." + std::to_string(m.cols));
      if (m.symmetric && j > i) in.fail("entry above the diagonal in a symmetric file (only the lower triangle is stored)");
    }
    if (kind == matrix_market_field::real) v = parse_real(t[per_entry - 1], in);
    else if (kind == matrix_market_field::integer)
      v = static_cast<double>(parse_integer(t[per_entry - 1], "value", in));
    m.row.push_back(i);
    m.col.push_back(j);
    m.value.push_back(v);
    if (m.symmetric && i != j) {
      m.row.push_back(j);
      m.col.push_back(i);
      m.value.push_back(v);
    }
  }
  if (in.next_data(line))
    in.fail("more entries than the " + std::to_string(entries) + " the size line declares");
  return m;
}

coordinate_matrix read_matrix_market(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw error("tally: cannot open Matrix Market file '" + path + "'");
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) throw error("tally: cannot read Matrix Market file '" + path + "'");
  return parse_matrix_market(text.str(), path);
}

namespace {

/// The first violation of to_csr's preconditions that costs O(1) to find, or "".
template <class Index>
std::string layout_problem(const coordinate_matrix& m) {
  const std::int64_t nnz = static_cast<std::int64_t>(m.value.size());
  if (m.rows < 0 || m.cols < 0)
    return "has a negative size (" + std::to_string(m.rows) + " x " + std::to_string(m.cols) + ")";
  if (m.row.size() != m.value.size() || m.col.size() != m.value.size())
    return "has " + std::to_string(m.row.size()) + " row indices, " + std::to_string(m.col.size()) +
           " column indices and " + std::to_string(m.value.size()) + " values (one of each per entry)";
  if (m.rows > std::numeric_limits<Index>::max() || m.cols > std::numeric_limits<Index>::max() ||
      nnz > std::numeric_limits<Index>::max())
    return "has more rows, columns or entries than the index type holds";
  if (m.rows - nnz > kMaxEmptyRows)
    return "has " + std::to_string(m.rows) + " rows for " + std::to_string(nnz) + " entries: more than " +
           std::to_string(kMaxEmptyRows) + " rows would be empty (kMaxEmptyRows)";
  return "";
}

}  // namespace

template <class Value, class Index>
host_csr<Value, Index> to_csr(const coordinate_matrix& m) {
  if (const std::string problem = layout_problem<Index>(m); !problem.empty())
    tally::detail::throw_invalid_argument("to_csr", "m", problem);
  const std::int64_t nnz = static_cast<std::int64_t>(m.value.size());
  for (std::int64_t k = 0; k < nnz; ++k) {
    if (m.row[k] < 0 || m.row[k] >= m.rows || m.col[k] < 0 || m.col[k] >= m.cols)
      tally::detail::throw_invalid_argument("to_csr", "m",
                                            "has entry " + std::to_string(k) + " at (" + std::to_string(m.row[k]) +
                                                ", " + std::to_string(m.col[k]) + "), outside its " +
                                                std::to_string(m.rows) + " x " + std::to_string(m.cols) + " size");
    if (!detail::value_fits<Value>(m.value[k]))
      tally::detail::throw_invalid_argument("to_csr", "m",
                                            "has entry " + std::to_string(k) + " of value " +
                                                detail::number_text(m.value[k]) + ", which overflows the value type");
  }
  host_csr<Value, Index> a;
  a.rows = m.rows;
  a.cols = m.cols;
  // Row lengths at [i + 1], then their running sum: the offsets, in Index
  // (every partial sum is at most nnz, which Index holds).
  a.offsets.assign(static_cast<std::size_t>(m.rows) + 1, Index(0));
  for (const std::int64_t i : m.row) ++a.offsets[static_cast<std::size_t>(i) + 1];
  std::partial_sum(a.offsets.begin(), a.offsets.end(), a.offsets.begin());
  // Entry order: by row, then column, file order among equals.
  std::vector<std::int64_t> order(static_cast<std::size_t>(nnz));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) {
    return m.row[x] != m.row[y] ? m.row[x] < m.row[y] : m.col[x] < m.col[y];
  });
  a.columns.resize(static_cast<std::size_t>(nnz));
  a.values.resize(static_cast<std::size_t>(nnz));
  for (std::int64_t k = 0; k < nnz; ++k) {
    a.columns[k] = static_cast<Index>(m.col[order[k]]);
    a.values[k] = static_cast<Value>(m.value[order[k]]);
  }
  return a;
}

namespace {

/// The bits of v, widened, so that values compare as the file must keep them.
template <class Value>
std::uint64_t bits_of(Value v) {
  std::conditional_t<sizeof(Value) == 4, std::uint32_t, std::uint64_t> b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

/// Throws invalid_argument unless `a` (valid CSR) equals its transpose:
/// the entries (i, j, bits of the value) and (j, i, the same), sorted, are
/// the same lists (values ignored for a pattern).
template <class Value, class Index>
void check_symmetric(const csr_view<Value, Index>& a, bool values) {
  if (a.rows != a.cols)
    tally::detail::throw_invalid_argument(
        "write_matrix_market", "a",
        "is " + std::to_string(a.rows) + " x " + std::to_string(a.cols) + ": a symmetric file needs a square matrix");
  using entry = std::tuple<std::int64_t, std::int64_t, std::uint64_t>;
  std::vector<entry> entries, mirrored;
  entries.reserve(static_cast<std::size_t>(a.nnz));
  mirrored.reserve(static_cast<std::size_t>(a.nnz));
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t k = a.offsets[i]; k < a.offsets[i + 1]; ++k) {
      const std::int64_t j = a.columns[k];
      const std::uint64_t v = values ? bits_of(a.values[k]) : 0;
      entries.emplace_back(i, j, v);
      mirrored.emplace_back(j, i, v);
    }
  std::sort(entries.begin(), entries.end());
  std::sort(mirrored.begin(), mirrored.end());
  const auto [mine, theirs] = std::mismatch(entries.begin(), entries.end(), mirrored.begin());
  if (mine != entries.end())
    tally::detail::throw_invalid_argument(
        "write_matrix_market", "a",
        "is not symmetric: the entries at (" + std::to_string(std::get<0>(*mine)) + ", " +
            std::to_string(std::get<1>(*mine)) + ") and (" + std::to_string(std::get<1>(*mine)) + ", " +
            std::to_string(std::get<0>(*mine)) + ") differ" + (values ? " (values compared bit for bit)" : ""));
}

/// Throws invalid_argument unless every value of `a` is an integer that a
/// long long holds (what an integer file's reader reads back exactly).
template <class Value, class Index>
void check_integers(const csr_view<Value, Index>& a) {
  constexpr double kLimit = 9223372036854775808.0;  // 2^63
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t k = a.offsets[i]; k < a.offsets[i + 1]; ++k) {
      const double v = a.values[k];
      if (!(std::trunc(v) == v && v < kLimit && v >= -kLimit))
        tally::detail::throw_invalid_argument("write_matrix_market", "a",
                                              "has value " + detail::number_text(v) + " at (" + std::to_string(i) +
                                                  ", " + std::to_string(static_cast<std::int64_t>(a.columns[k])) +
                                                  "), which an integer file cannot hold");
    }
}


}  // namespace

template <class Value, class Index>
void write_matrix_market(const std::string& path, const csr_view<Value, Index>& a,
                         const matrix_market_write_options& options) {
  const matrix_market_field field = options.field;
  if (field != matrix_market_field::real && field != matrix_market_field::integer &&
      field != matrix_market_field::pattern)
    tally::detail::throw_invalid_argument("write_matrix_market", "options.field", "is not a matrix_market_field");
  if (options.symmetry != matrix_market_symmetry::general && options.symmetry != matrix_market_symmetry::symmetric)
    tally::detail::throw_invalid_argument("write_matrix_market", "options.symmetry", "is not a matrix_market_symmetry");
  detail::check_csr_layout("write_matrix_market", "a", a);
  detail::check_csr_entries(tally::cpu, a, "write_matrix_market", "a");
  const bool symmetric = options.symmetry == matrix_market_symmetry::symmetric;
  if (field == matrix_market_field::integer) check_integers(a);
  if (symmetric) check_symmetric(a, field != matrix_market_field::pattern);
  // A symmetric file lists the lower triangle (j <= i) only.
  std::int64_t listed = a.nnz;
  if (symmetric) {
    listed = 0;
    for (std::int64_t i = 0; i < a.rows; ++i)
      for (std::int64_t k = a.offsets[i]; k < a.offsets[i + 1]; ++k) listed += a.columns[k] <= i;
  }

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!file) throw error("tally: cannot write Matrix Market file '" + path + "'");
  std::FILE* f = file.get();
  std::fprintf(f, "%%%%MatrixMarket matrix coordinate %s %s\n%% written by tally\n", field_name_of(field),
               symmetric ? "symmetric" : "general");
  std::fprintf(f, "%lld %lld %lld\n", static_cast<long long>(a.rows), static_cast<long long>(a.cols),
               static_cast<long long>(listed));
  const int digits = std::numeric_limits<Value>::max_digits10;
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t k = a.offsets[i]; k < a.offsets[i + 1]; ++k) {
      const auto row = static_cast<long long>(i + 1), col = static_cast<long long>(a.columns[k]) + 1;
      if (symmetric && col > row) continue;
      switch (field) {
        case matrix_market_field::real:
          std::fprintf(f, "%lld %lld %.*g\n", row, col, digits, static_cast<double>(a.values[k]));
          break;
        case matrix_market_field::integer:
          std::fprintf(f, "%lld %lld %lld\n", row, col, static_cast<long long>(a.values[k]));
          break;
        case matrix_market_field::pattern:
          std::fprintf(f, "%lld %lld\n", row, col);
          break;
      }
    }
  if (std::fflush(f) != 0 || std::ferror(f)) throw error("tally: error writing Matrix Market file '" + path + "'");
}

std::vector<double> read_matrix_market_vector(const std::string& path) {
  const coordinate_matrix m = read_matrix_market(path);
  if (m.rows != 1 && m.cols != 1)
    throw error("tally: " + path + ": a vector must have one row or one column, not " + std::to_string(m.rows) + " x " +
                std::to_string(m.cols));
  std::vector<double> v(static_cast<std::size_t>(m.rows * m.cols), 0.0);
  for (std::size_t k = 0; k < m.value.size(); ++k) v[static_cast<std::size_t>(m.row[k] + m.col[k])] += m.value[k];
  return v;
}

#define TALLY_MATRIX_MARKET_TYPES(V, I)                                              \
  template host_csr<V, I> to_csr<V, I>(const coordinate_matrix&);                    \
  template void write_matrix_market<V, I>(const std::string&, const csr_view<V, I>&, \
                                          const matrix_market_write_options&);
TALLY_MATRIX_MARKET_TYPES(float, std::int32_t)
TALLY_MATRIX_MARKET_TYPES(float, std::int64_t)
TALLY_MATRIX_MARKET_TYPES(double, std::int32_t)
TALLY_MATRIX_MARKET_TYPES(double, std::int64_t)
#undef TALLY_MATRIX_MARKET_TYPES

}  // namespace tally::solvers
