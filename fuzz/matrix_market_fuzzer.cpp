// libFuzzer target for the Matrix Market reader: any input must parse or
// raise matrix_market_error, never crash, hang or read out of bounds; a
// parsed matrix must convert to CSR with every index in range.
//
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude \
//     -I/usr/local/cuda/include fuzz/matrix_market_fuzzer.cpp src/solvers/matrix_market.cpp src/error.cpp \
//     -o build/mm_fuzzer
//   build/mm_fuzzer fuzz/corpus -max_len=4096 -max_total_time=300
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tally/solvers/matrix_market.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tally::solvers;
  try {
    const coordinate_matrix m = parse_matrix_market(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    if (m.row.size() != m.value.size() || m.col.size() != m.value.size()) std::abort();
    for (std::size_t k = 0; k < m.value.size(); ++k)
      if (m.row[k] < 0 || m.row[k] >= m.rows || m.col[k] < 0 || m.col[k] >= m.cols) std::abort();
    if (m.rows < (1 << 20)) {
      const auto a = to_csr<double, std::int64_t>(m);
      if (static_cast<std::int64_t>(a.offsets.size()) != a.rows + 1 || a.offsets.back() != a.nnz()) std::abort();
    }
  } catch (const matrix_market_error&) {
  }
  return 0;
}
