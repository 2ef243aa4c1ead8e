// index_add: tally::index_add (row scatter) for the package's dtypes.
#include "dispatch.cuh"

namespace tally_py {

namespace {

/// f(type_tag<T>) for T in float16, bfloat16, float32, float64.
template <class F>
void visit_floating(dtype t, const char* argument, F&& f) {
  switch (t) {
    case dtype::f16:
      return f(type_tag<tally::half>{});
    case dtype::bf16:
      return f(type_tag<tally::bfloat16>{});
    case dtype::f32:
      return f(type_tag<float>{});
    case dtype::f64:
      return f(type_tag<double>{});
    default:
      throw_unsupported("index_add", argument, t, "float16, bfloat16, float32, float64");
  }
}

}  // namespace

void index_add(const place& where, const matrix& out, const view& index, const matrix& src, scatter_op op,
               fixed_point deterministic, index_add_sums sums, bool checked) {
  if (src.type != out.type)
    throw unsupported_dtype(std::string("tally.index_add: argument 'src' has dtype ") + name_of(src.type) +
                            " but 'out' has " + name_of(out.type));
  visit_integer(index.type, "index_add", "index", [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    visit_floating(out.type, "out", [&](auto value_tag) {
      using V = typename decltype(value_tag)::type;
      tally::index_add_options o;
      o.checks = checked ? tally::check_mode::checked : tally::check_mode::unchecked;
      if (op == scatter_op::sum) {
        o.deterministic = deterministic.on;
        o.fixed_point_bits = deterministic.bits;
        o.deterministic_sums = sums == index_add_sums::ordered       ? tally::index_add_sums::ordered
                               : sums == index_add_sums::fixed_point ? tally::index_add_sums::fixed_point
                                                                     : tally::index_add_sums::automatic;
      }
      o.src_stride = src.rows > 1 ? src.stride : 0;
      o.out_stride = out.rows > 1 ? out.stride : 0;
      const auto* i = static_cast<const I*>(index.data);
      const auto* s = static_cast<const V*>(src.data);
      auto* d = static_cast<V*>(out.data);
      on_backend(where, [&](const auto& backend) {
        const auto apply = [&](auto op_tag) {
          tally::index_add(backend, i, s, src.rows, src.cols, d, out.rows, op_tag, o);
        };
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
