// histogram (equal-width and explicit edges) and bincount: tally's
// histogram_custom(_weighted) with NumPy's bin rules (bin_rules.cuh).
#include "bin_rules.cuh"
#include "dispatch.cuh"

namespace tally_py {

namespace {

/// counts = histogram of x under `bin_of`: int64 counts without weights,
/// else sums of the weights in their dtype (float32 or float64).
template <class T, class BinOf>
void histogram_of(const place& where, const T* x, std::int64_t n, const view* weights, const view& counts, BinOf bin_of,
                  fixed_point deterministic, bool checked, const char* function) {
  const auto o = options_for(checked, deterministic);
  if (weights == nullptr) {
    if (counts.type != dtype::i64) throw_unsupported(function, "counts", counts.type, "int64");
    on_backend(where, [&](const auto& backend) {
      tally::histogram_custom(backend, x, n, counts.n, bin_of, static_cast<std::int64_t*>(counts.data), o);
    });
    return;
  }
  if (counts.type != weights->type)
    throw unsupported_dtype(std::string("tally.") + function + ": the counts' dtype " + name_of(counts.type) +
                            " differs from the weights' " + name_of(weights->type));
  // float32 samples take float32 weights only, float64 samples and integer
  // keys (bincount) either (fewer instantiations: CI compiles these). The
  // Python layer widens samples to float64 for the other pairs, exactly.
  const auto weigh = [&](auto tag) {
    using W = typename decltype(tag)::type;
    on_backend(where, [&](const auto& backend) {
      tally::histogram_custom_weighted(backend, x, static_cast<const W*>(weights->data), n, counts.n, bin_of,
                                       static_cast<W*>(counts.data), o);
    });
  };
  if constexpr (std::is_same_v<T, float>) {
    if (weights->type != dtype::f32)
      throw unsupported_dtype(std::string("tally.") + function + ": argument 'weights' has dtype " +
                              name_of(weights->type) + "; float32 samples take float32 weights");
    weigh(type_tag<float>{});
  } else {
    visit_float(weights->type, function, "weights", weigh);
  }
}

}  // namespace

void histogram_even(const place& where, const view& x, const view* weights, const view& counts, double lo, double hi,
                    fixed_point deterministic, bool checked) {
  if (!(lo < hi)) tally::detail::throw_invalid_argument("histogram", "range", "must satisfy lo < hi");
  const double width = hi - lo;
  const numpy_even_bins bins{lo, hi, width, width / static_cast<double>(counts.n), counts.n};
  visit_float(x.type, "histogram", "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    histogram_of(where, static_cast<const T*>(x.data), x.n, weights, counts, bins, deterministic, checked, "histogram");
  });
}

void histogram_edges(const place& where, const view& x, const view* weights, const double* edges,
                     std::int64_t num_edges, const view& counts, fixed_point deterministic, bool checked) {
  if (num_edges < 2 || counts.n != num_edges - 1)
    tally::detail::throw_invalid_argument("histogram", "bins", "needs at least 2 edges");
  const numpy_edge_bins bins{edges, num_edges};
  visit_float(x.type, "histogram", "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    histogram_of(where, static_cast<const T*>(x.data), x.n, weights, counts, bins, deterministic, checked, "histogram");
  });
}

void bincount(const place& where, const view& index, const view* weights, const view& counts, fixed_point deterministic,
              bool checked) {
  visit_integer(index.type, "bincount", "x", [&](auto tag) {
    using I = typename decltype(tag)::type;
    histogram_of(where, static_cast<const I*>(index.data), index.n, weights, counts, index_bins{}, deterministic,
                 checked, "bincount");
  });
}

}  // namespace tally_py
