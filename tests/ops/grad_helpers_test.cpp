// The internal ops gradient rules are written with (src/ops/grad_helpers.h): sum_to_like,
// broadcast_like, unreduce_like, reshape_like, split_like, slice_like, pad_like,
// scatter_add_like. Expected values are worked out by hand.
#include "ops/grad_helpers.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Fn sum_to() {
  return [](const std::vector<Tensor>& in) { return detail::sum_to_like(in[0], in[1]); };
}
Fn broadcast_to() {
  return [](const std::vector<Tensor>& in) { return detail::broadcast_like(in[0], in[1]); };
}
Fn unreduce(std::vector<int64_t> axes, bool keepdims) {
  return [=](const std::vector<Tensor>& in) {
    return detail::unreduce_like(in[0], in[1], axes, keepdims);
  };
}
Fn reshape_to() {
  return [](const std::vector<Tensor>& in) { return detail::reshape_like(in[0], in[1]); };
}
// Piece `k` of splitting in[0] like in[1..].
Fn split_piece(int64_t axis, std::size_t k) {
  return [=](const std::vector<Tensor>& in) {
    return detail::split_like(in[0], std::vector<Tensor>(in.begin() + 1, in.end()), axis)[k];
  };
}
Fn slice_to(std::vector<int64_t> begin) {
  return [=](const std::vector<Tensor>& in) { return detail::slice_like(in[0], in[1], begin); };
}
Fn pad_to(std::vector<int64_t> begin) {
  return [=](const std::vector<Tensor>& in) { return detail::pad_like(in[0], in[1], begin); };
}
Fn scatter_add(int64_t axis) {
  return [=](const std::vector<Tensor>& in) {
    return detail::scatter_add_like(in[0], in[1], in[2], axis);
  };
}

TG_OP_CASES(grad_helpers) {
  const Tensor g23 = constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});
  const Tensor z23 = zeros({2, 3});
  const Tensor f34 = constant({{0.f, 1.f, 2.f, 3.f}, {4.f, 5.f, 6.f, 7.f}, {8.f, 9.f, 10.f, 11.f}});
  return {
      // sum_to_like
      {"sum_to_like", "(2,3) to (3,)", sum_to(), {g23, zeros({3})}, constant({5.f, 7.f, 9.f})},
      {"sum_to_like", "(2,3) to (2,1)", sum_to(), {g23, zeros({2, 1})}, constant({{6.f}, {15.f}})},
      {"sum_to_like", "(2,3) to a scalar", sum_to(), {g23, constant(0.f)}, constant(21.f)},
      {"sum_to_like", "float64 (2,2,2) to (2,1,2)", sum_to(),
       {constant({{{1.0, 2.0}, {3.0, 4.0}}, {{5.0, 6.0}, {7.0, 8.0}}}, float64), zeros({2, 1, 2}, float64)},
       constant({{{4.0, 6.0}}, {{12.0, 14.0}}}, float64)},
      {"sum_to_like", "int32 (2,2) to (1,2)", sum_to(), {constant({{1, 2}, {3, 4}}), constant({{0, 0}})},
       constant({{4, 6}})},

      // broadcast_like
      {"broadcast_like", "(3,) to (2,3)", broadcast_to(), {constant({1.f, 2.f, 3.f}), z23},
       constant({{1.f, 2.f, 3.f}, {1.f, 2.f, 3.f}})},
      {"broadcast_like", "(2,1) to (2,3)", broadcast_to(), {constant({{1.f}, {2.f}}), z23},
       constant({{1.f, 1.f, 1.f}, {2.f, 2.f, 2.f}})},
      {"broadcast_like", "scalar float64 to (2,)", broadcast_to(),
       {constant(5.0, float64), zeros({2}, float64)}, constant({5.0, 5.0}, float64)},
      {"broadcast_like", "bool (1,) to (3,)", broadcast_to(),
       {constant({true}), constant({false, false, false})}, constant({true, true, true})},

      // unreduce_like
      {"unreduce_like", "axis 1 dropped", unreduce({1}, false), {constant({1.f, 2.f}), z23},
       constant({{1.f, 1.f, 1.f}, {2.f, 2.f, 2.f}})},
      {"unreduce_like", "axis 0 kept", unreduce({0}, true), {constant({{10.f, 20.f, 30.f}}), z23},
       constant({{10.f, 20.f, 30.f}, {10.f, 20.f, 30.f}})},
      {"unreduce_like", "all axes", unreduce({}, false), {constant(7.0, float64), zeros({2, 2}, float64)},
       constant({{7.0, 7.0}, {7.0, 7.0}}, float64)},
      {"unreduce_like", "axis -1, int32", unreduce({-1}, false), {constant({1, 2}), constant({{0, 0}, {0, 0}})},
       constant({{1, 1}, {2, 2}})},

      // reshape_like
      {"reshape_like", "(2,3) like (3,2)", reshape_to(), {g23, zeros({3, 2})},
       constant({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}})},
      {"reshape_like", "int64 (4,) like (2,2)", reshape_to(), {constant({1, 2, 3, 4}, int64), zeros({2, 2})},
       constant({{1, 2}, {3, 4}}, int64)},

      // split_like
      {"split_like", "axis 1, piece 0", split_piece(1, 0),
       {constant({{0.f, 1.f, 2.f, 3.f, 4.f}, {5.f, 6.f, 7.f, 8.f, 9.f}}), zeros({2, 2}), zeros({2, 3})},
       constant({{0.f, 1.f}, {5.f, 6.f}})},
      {"split_like", "axis -1, piece 1", split_piece(-1, 1),
       {constant({{0.f, 1.f, 2.f, 3.f, 4.f}, {5.f, 6.f, 7.f, 8.f, 9.f}}), zeros({2, 2}), zeros({2, 3})},
       constant({{2.f, 3.f, 4.f}, {7.f, 8.f, 9.f}})},
      {"split_like", "axis 0, three pieces, float64", split_piece(0, 2),
       {constant({1.0, 2.0, 3.0, 4.0}, float64), zeros({1}), zeros({1}), zeros({2})},
       constant({3.0, 4.0}, float64)},

      // slice_like
      {"slice_like", "inner block", slice_to({1, 1}), {f34, zeros({2, 2})},
       constant({{5.f, 6.f}, {9.f, 10.f}})},
      {"slice_like", "missing begin entries are 0", slice_to({}), {f34, zeros({1, 4})},
       constant({{0.f, 1.f, 2.f, 3.f}})},
      {"slice_like", "negative begin", slice_to({-1}), {f34, zeros({1, 4})},
       constant({{8.f, 9.f, 10.f, 11.f}})},

      // pad_like
      {"pad_like", "inner block", pad_to({1, 1}), {constant({{1.f, 2.f}, {3.f, 4.f}}), zeros({3, 4})},
       constant({{0.f, 0.f, 0.f, 0.f}, {0.f, 1.f, 2.f, 0.f}, {0.f, 3.f, 4.f, 0.f}})},
      {"pad_like", "negative begin, float64", pad_to({-1}),
       {constant({{1.0, 2.0, 3.0}}, float64), zeros({2, 3})},
       constant({{0.0, 0.0, 0.0}, {1.0, 2.0, 3.0}}, float64)},
      {"pad_like", "scalar", pad_to({}), {constant(3.f), constant(0.f)}, constant(3.f)},

      // scatter_add_like
      {"scatter_add_like", "rows, repeated index adds", scatter_add(0),
       {constant({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}), constant({2, 0, 2}), zeros({3, 2})},
       constant({{3.f, 4.f}, {0.f, 0.f}, {6.f, 8.f}})},
      {"scatter_add_like", "axis 1, int64 indices, float64", scatter_add(1),
       {constant({{1.0, 2.0}, {3.0, 4.0}}, float64), constant({1, 1}, int64), zeros({2, 3})},
       constant({{0.0, 3.0, 0.0}, {0.0, 7.0, 0.0}}, float64)},
  };
}

}  // namespace
}  // namespace tg
