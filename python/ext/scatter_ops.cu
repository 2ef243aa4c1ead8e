// scatter_add / scatter_reduce: tally::scatter_reduce for the package's dtypes.
#include "dispatch.cuh"

namespace tally_py {

void scatter(const place& where, const view& out, const view& index, const view& src, scatter_op op,
             fixed_point deterministic, bool checked) {
  if (src.type != out.type)
    throw unsupported_dtype(std::string("tally.scatter_reduce: argument 'src' has dtype ") + name_of(src.type) +
                            " but 'out' has " + name_of(out.type));
  visit_integer(index.type, "scatter_reduce", "index", [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    visit_numeric(out.type, "scatter_reduce", "out", [&](auto value_tag) {
      using V = typename decltype(value_tag)::type;
      // Deterministic sums apply to float values; integer sums are exact anyway.
      const auto o = options_for(checked, std::is_floating_point_v<V> ? deterministic : fixed_point{});
      const auto* i = static_cast<const I*>(index.data);
      const auto* s = static_cast<const V*>(src.data);
      auto* d = static_cast<V*>(out.data);
      on_backend(where, [&](const auto& backend) {
        const auto apply = [&](auto op_tag) { tally::scatter_reduce(backend, i, s, src.n, d, out.n, op_tag, o); };
        switch (op) {
          case scatter_op::sum: return apply(tally::plus{});
          case scatter_op::prod: return apply(tally::multiplies{});
          case scatter_op::min: return apply(tally::minimum{});
          case scatter_op::max: return apply(tally::maximum{});
        }
      });
    });
  });
}

}  // namespace tally_py
