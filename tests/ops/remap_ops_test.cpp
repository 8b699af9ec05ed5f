// tile, pad, reverse, split / unstack and the adjoints tile_grad and mirror_pad_grad, against
// results written out by hand (TensorFlow's documented examples where it gives them).
#include <algorithm>
#include <cmath>

#include "ops/op.h"
#include "ops/remap.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using ::tg::testing::empty;
using Pads = std::vector<std::pair<int64_t, int64_t>>;

Fn tile_by(std::vector<int64_t> m) {
  return [m](const std::vector<Tensor>& in) { return tile(in[0], m); };
}
Fn pad_by(Pads p, PadMode mode = PadMode::Constant, double c = 0.0) {
  return [=](const std::vector<Tensor>& in) { return pad(in[0], p, mode, c); };
}
Fn reverse_on(std::vector<int64_t> axes) {
  return [axes](const std::vector<Tensor>& in) { return reverse(in[0], axes); };
}
// The pieces joined in reverse order, so that the case sees every piece and their order.
Tensor join_reversed(std::vector<Tensor> pieces, int axis) {
  std::reverse(pieces.begin(), pieces.end());
  return concat(pieces, axis);
}
detail::PadAttrs pad_attrs(std::vector<int64_t> flat, PadMode mode) {
  return detail::PadAttrs{std::move(flat), static_cast<int64_t>(mode), 0.0};
}

TG_OP_CASES(remap_ops) {
  const Tensor t23 = constant({{1, 2, 3}, {4, 5, 6}});
  const Tensor f23 = constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});
  const Tensor r1234 = reshape(range(0, 24), {1, 2, 3, 4});
  return {
      // tile
      {"tile", "TF's example, multiples [1, 2]", tile_by({1, 2}), {t23},
       constant({{1, 2, 3, 1, 2, 3}, {4, 5, 6, 4, 5, 6}})},
      {"tile", "multiples [2, 1], float32", tile_by({2, 1}), {f23},
       constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}, {1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}})},
      {"tile", "a size-1 dim repeated, float64", tile_by({3, 2}), {constant({{1.5}, {2.5}}, float64)},
       constant({{1.5, 1.5}, {2.5, 2.5}, {1.5, 1.5}, {2.5, 2.5}, {1.5, 1.5}, {2.5, 2.5}}, float64)},
      {"tile", "strings, 1-D", tile_by({2}), {constant({"a", "b"})}, constant({"a", "b", "a", "b"})},
      {"tile", "bool, multiple 0", tile_by({0, 2}), {constant({{true, false}})}, zeros({0, 4}, bool_)},
      {"tile", "scalar, no multiples", tile_by({}), {constant(int64_t{7})}, constant(int64_t{7})},
      // pad (TF's examples for the three modes)
      {"pad", "TF's CONSTANT example", pad_by({{1, 1}, {2, 2}}), {t23},
       constant({{0, 0, 0, 0, 0, 0, 0}, {0, 0, 1, 2, 3, 0, 0}, {0, 0, 4, 5, 6, 0, 0}, {0, 0, 0, 0, 0, 0, 0}})},
      {"pad", "TF's REFLECT example", pad_by({{1, 1}, {2, 2}}, PadMode::Reflect), {t23},
       constant({{6, 5, 4, 5, 6, 5, 4}, {3, 2, 1, 2, 3, 2, 1}, {6, 5, 4, 5, 6, 5, 4}, {3, 2, 1, 2, 3, 2, 1}})},
      {"pad", "TF's SYMMETRIC example", pad_by({{1, 1}, {2, 2}}, PadMode::Symmetric), {t23},
       constant({{2, 1, 1, 2, 3, 3, 2}, {2, 1, 1, 2, 3, 3, 2}, {5, 4, 4, 5, 6, 6, 5}, {5, 4, 4, 5, 6, 6, 5}})},
      {"pad", "constant_values -1.5, float32, uneven", pad_by({{0, 1}, {1, 0}}, PadMode::Constant, -1.5), {f23},
       constant({{-1.5f, 1.f, 2.f, 3.f}, {-1.5f, 4.f, 5.f, 6.f}, {-1.5f, -1.5f, -1.5f, -1.5f}})},
      {"pad", "reflect at the limit (dim - 1), float64", pad_by({{2, 2}}, PadMode::Reflect),
       {constant({1.0, 2.0, 3.0}, float64)}, constant({3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0}, float64)},
      {"pad", "symmetric at the limit (dim), int64", pad_by({{3, 1}}, PadMode::Symmetric),
       {constant({1, 2, 3}, int64)}, constant({3, 2, 1, 1, 2, 3, 3}, int64)},
      {"pad", "strings pad with \"\"", pad_by({{1, 0}}), {constant({"a"})}, constant({"", "a"})},
      {"pad", "an empty dim padded", pad_by({{1, 1}, {0, 0}}), {empty<float>({0, 2}, float32)},
       constant({{0.f, 0.f}, {0.f, 0.f}})},
      {"pad", "scalar", pad_by({}), {constant(3.f)}, constant(3.f)},
      // reverse (TF's example tensor of shape (1, 2, 3, 4))
      {"reverse", "TF's example, axis 3", reverse_on({3}), {r1234},
       reshape(constant({3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20}),
               {1, 2, 3, 4})},
      {"reverse", "TF's example, axis 1", reverse_on({1}), {r1234},
       reshape(constant({12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}),
               {1, 2, 3, 4})},
      {"reverse", "TF's example, axis -2", reverse_on({-2}), {r1234},
       reshape(constant({8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3, 20, 21, 22, 23, 16, 17, 18, 19, 12, 13, 14, 15}),
               {1, 2, 3, 4})},
      {"reverse", "both axes, float32", reverse_on({0, 1}), {f23}, constant({{6.f, 5.f, 4.f}, {3.f, 2.f, 1.f}})},
      {"reverse", "no axes, strings", reverse_on({}), {constant({"a", "b"})}, constant({"a", "b"})},
      {"reverse", "bool 1-D", reverse_on({0}), {constant({true, false, false})}, constant({false, false, true})},
      // split
      {"split", "3 equal pieces along axis 1",
       [](const std::vector<Tensor>& in) { return join_reversed(split(in[0], 3, 1), 1); },
       {constant({{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}})},
       constant({{5, 6, 3, 4, 1, 2}, {11, 12, 9, 10, 7, 8}})},
      {"split", "sizes {1, -1, 1} along axis 0, float32",
       [](const std::vector<Tensor>& in) { return join_reversed(split(in[0], {1, -1, 1}), 0); },
       {constant({{1.f}, {2.f}, {3.f}, {4.f}})}, constant({{4.f}, {2.f}, {3.f}, {1.f}})},
      {"split", "a piece of size 0, axis -1, strings",
       [](const std::vector<Tensor>& in) { return join_reversed(split(in[0], {2, 0}, -1), -1); },
       {constant({"a", "b"})}, constant({"a", "b"})},
      {"split", "one piece of size 2 ({2} is a size list, as in TF)",
       [](const std::vector<Tensor>& in) { return split(in[0], {2})[0]; }, {constant({1.0, 2.0}, float64)},
       constant({1.0, 2.0}, float64)},
      // the adjoints (gradient ops)
      {"tile_grad", "the tiles summed",
       [](const std::vector<Tensor>& in) { return detail::tile_grad(in[0], in[1], {1, 2}); },
       {constant({{1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {7.f, 8.f, 9.f, 10.f, 11.f, 12.f}}), zeros({2, 3})},
       constant({{5.f, 7.f, 9.f}, {17.f, 19.f, 21.f}})},
      {"mirror_pad_grad", "reflect (2, 2) onto 3 elements",
       [](const std::vector<Tensor>& in) {
         return detail::mirror_pad_grad(in[0], in[1], pad_attrs({2, 2}, PadMode::Reflect));
       },
       {constant({1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}, float64), zeros({3}, float64)},
       constant({10.0, 12.0, 6.0}, float64)},
      {"mirror_pad_grad", "symmetric (2, 1) onto 3 elements",
       [](const std::vector<Tensor>& in) {
         return detail::mirror_pad_grad(in[0], in[1], pad_attrs({2, 1}, PadMode::Symmetric));
       },
       {constant({1, 2, 3, 4, 5, 6}), zeros({3}, int32)}, constant({5, 5, 11})},
  };
}

TEST(Unstack, SlicesAlongAnAxisAsTensorFlowDoes) {
  const Tensor x = constant({{1, 2, 3}, {4, 5, 6}});
  const std::vector<Tensor> rows = unstack(x);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TENSOR_EQ(rows[0], constant({1, 2, 3}));
  EXPECT_TENSOR_EQ(rows[1], constant({4, 5, 6}));
  const std::vector<Tensor> cols = unstack(x, -1);
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_TENSOR_EQ(cols[2], constant({3, 6}));
  EXPECT_TRUE(unstack(zeros({0, 2})).empty());
  // Traced with a None dim elsewhere; the unstacked dim is known.
  auto f = function([](const Tensor& t) { return stack(unstack(t, 1), 0); });
  const Tensor y = f.get_concrete_function(TensorSpec({None, 3}, int32))(x);
  EXPECT_TENSOR_EQ(y, transpose(x));
}

TEST(Unstack, GradientStacksAndMissingPiecesAreZeros) {
  const Tensor x = constant({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}, float64);
  GradientTape tape;
  tape.watch(x);
  const std::vector<Tensor> rows = unstack(x);
  const Tensor loss = reduce_sum(rows[0] * 2.0) + reduce_sum(rows[2] * rows[2]);  // rows[1] unused
  EXPECT_TENSOR_EQ(tape.gradient(loss, x), constant({{2.0, 2.0}, {0.0, 0.0}, {10.0, 12.0}}, float64));
}

TEST(Split, MissingPieceGradientsAreZerosTraced) {
  auto f = function([](const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    const std::vector<Tensor> p = split(x, {1, -1}, 1);
    return tape.gradient(reduce_sum(p[1] * 3.0), x);
  });
  const Tensor g = f.get_concrete_function(TensorSpec({None, None}, float32))(ones({2, 3}));
  EXPECT_TENSOR_EQ(g, constant({{0.f, 3.f, 3.f}, {0.f, 3.f, 3.f}}));
}

// Sizes only known at run time: the kernels check them against the rules (never a silent cut).
TEST(RemapOps, RunTimeDimsAreCheckedInTheGraph) {
  auto halves = function([](const Tensor& x) { return split(x, 2)[0]; });
  auto cf = halves.get_concrete_function(TensorSpec({None}, float32));
  EXPECT_TENSOR_EQ(cf(constant({1.f, 2.f, 3.f, 4.f})), constant({1.f, 2.f}));
  EXPECT_THROW_MSG(cf(constant({1.f, 2.f, 3.f})), InvalidArgumentError, "[split]", "size 3",
                   "not divisible into 2");
  auto sized = function([](const Tensor& x) { return split(x, {1, 1})[0]; });
  EXPECT_THROW_MSG(sized.get_concrete_function(TensorSpec({None}, float32))(constant({1.f, 2.f, 3.f})),
                   InvalidArgumentError, "[split]", "add up to 2", "size 3");
  auto reflect = function([](const Tensor& x) { return pad(x, {{2, 0}}, PadMode::Reflect); });
  auto rcf = reflect.get_concrete_function(TensorSpec({None}, float32));
  EXPECT_TENSOR_EQ(rcf(constant({1.f, 2.f, 3.f})), constant({3.f, 2.f, 1.f, 2.f, 3.f}));
  EXPECT_THROW_MSG(rcf(constant({1.f, 2.f})), InvalidArgumentError, "[pad]", "REFLECT", "at most 1",
                   "size 2");
}

// A large tile and a reflect pad against the same values built from concat and slices.
TEST(RemapOps, LargeInputsMatchAReferenceBuiltFromConcat) {
  const Tensor x = reshape(cast(range(0, 64 * 33), float32), {64, 33});
  EXPECT_TENSOR_EQ(tile(x, {2, 3}), concat({concat({x, x, x}, 1), concat({x, x, x}, 1)}, 0));
  const Tensor left = reverse(slice(x, {0, 1}, {-1, 4}), {1});
  const Tensor right = reverse(slice(x, {0, 28}, {-1, 4}), {1});
  EXPECT_TENSOR_EQ(pad(x, {{0, 0}, {4, 4}}, PadMode::Reflect), concat({left, x, right}, 1));
}

// Trailing dims left as they are move as blocks (whole NHWC pixels): the same values as the
// element-wise definition built from slices, concat, reverse and gather.
TEST(RemapOps, TrailingDimsMoveAsBlocks) {
  const Tensor x = reshape(cast(range(0, 2 * 5 * 6 * 3), float32), {2, 5, 6, 3});
  const Tensor h = concat({reverse(slice(x, {0, 0, 0, 0}, {-1, 2, -1, -1}), {1}), x,
                           slice(x, {0, 4, 0, 0}, {-1, 1, -1, -1})}, 1);
  const Tensor hw = concat({slice(h, {0, 0, 0, 0}, {-1, -1, 1, -1}), h,
                            reverse(slice(h, {0, 0, 4, 0}, {-1, -1, 2, -1}), {2})}, 2);
  EXPECT_TENSOR_EQ(pad(x, {{0, 0}, {2, 1}, {1, 2}, {0, 0}}, PadMode::Symmetric), hw);
  EXPECT_TENSOR_EQ(pad(x, {{0, 0}, {1, 0}, {0, 0}, {0, 0}}, PadMode::Constant, 7.0),
                   concat({fill(TensorShape{2, 1, 6, 3}, 7.f), x}, 1));
  EXPECT_TENSOR_EQ(tile(x, {1, 2, 1, 1}), concat({x, x}, 1));
  EXPECT_TENSOR_EQ(tile(slice(x, {0, 0, 0, 0}, {-1, 1, -1, -1}), {1, 3, 1, 1}),
                   gather(x, constant({0, 0, 0}), 1));
  EXPECT_TENSOR_EQ(reverse(x, {2}), gather(x, constant({5, 4, 3, 2, 1, 0}), 2));
  const Tensor g = reshape(cast(range(0, 2 * 10 * 6 * 3), float32), {2, 10, 6, 3});
  EXPECT_TENSOR_EQ(detail::tile_grad(g, x, {1, 2, 1, 1}),
                   slice(g, {0, 0, 0, 0}, {-1, 5, -1, -1}) + slice(g, {0, 5, 0, 0}, {-1, 5, -1, -1}));
  EXPECT_TENSOR_EQ(detail::tile_grad(g, slice(x, {0, 0, 0, 0}, {-1, 1, -1, -1}), {1, 10, 1, 1}),
                   reduce_sum(g, {1}, true));
}

// Copies of at least 2 x 65,536 elements run by rows on the pool: the same values on one
// thread and two, and as the definitions built from concat, slices and reverse (a batch-1
// image padded split inside its rows; two images; a fill on every side; a reversed dim).
TEST(RemapOps, LargeCopiesSplitByRowsOnTheThreads) {
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    for (const int64_t images : {1, 2}) {
      const int size = static_cast<int>(images * 112 * 113 * 24);
      const Tensor x = reshape(cast(range(0, size), float32), {images, 112, 113, 24});
      const Tensor rows =
          concat({fill(TensorShape{images, 1, 113, 24}, -3.f), x, fill(TensorShape{images, 2, 113, 24}, -3.f)}, 1);
      const Tensor want = concat({rows, fill(TensorShape{images, 115, 1, 24}, -3.f)}, 2);
      EXPECT_TENSOR_EQ(pad(x, {{0, 0}, {1, 2}, {0, 1}, {0, 0}}, PadMode::Constant, -3.0), want);
      EXPECT_TENSOR_EQ(tile(x, {1, 2, 1, 1}), concat({x, x}, 1));
      EXPECT_TENSOR_EQ(reverse(x, {1}), gather(x, reverse(range(0, 112), {0}), 1));
    }
  }
  config::set_num_threads(threads_before);
}

// Second order: the gradient of <d loss / d x, v> for loss = sum(f(x)^3), whose first gradient
// runs the op's rule (tile_grad, mirror_pad_grad, slice_like, concat, scatter / gather), against
// central differences of that inner product; eagerly and traced with None dims.
void expect_second_order_matches_finite_differences(const std::string& what,
                                                    const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  SCOPED_TRACE(what);
  std::vector<double> vv;
  for (int64_t i = 0; i < x.num_elements(); ++i) vv.push_back(0.25 * static_cast<double>(i % 5) - 0.4);
  const Tensor v = constant(vv, x.shape(), float64);
  auto inner = [&](const Tensor& xv) {
    GradientTape tape;
    tape.watch(xv);
    const Tensor y = f(xv);
    return reduce_sum(tape.gradient(reduce_sum(y * y * y), xv) * v);
  };
  auto second = [&](const Tensor& xv) {
    GradientTape outer;
    outer.watch(xv);
    return outer.gradient(inner(xv), xv);
  };
  const Tensor eager = second(x);
  std::vector<double> xs = x.to_vector<double>();
  const std::vector<double> tape_d = eager.to_vector<double>();
  for (std::size_t j = 0; j < xs.size(); ++j) {
    const double keep = xs[j], eps = 1e-6;
    xs[j] = keep + eps;
    const double up = inner(constant(xs, x.shape(), float64)).item<double>();
    xs[j] = keep - eps;
    const double down = inner(constant(xs, x.shape(), float64)).item<double>();
    xs[j] = keep;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(tape_d[j], numeric, 1e-6 * (1 + std::abs(numeric))) << "element " << j;
  }
  auto traced = function([&](const Tensor& xv) { return second(xv); });
  const Tensor graph = traced.get_concrete_function(
      TensorSpec(TensorShape(std::vector<int64_t>(static_cast<std::size_t>(x.rank()), None)), float64))(x);
  EXPECT_TENSOR_EQ(graph, eager);
}

TEST(RemapOps, SecondOrderGradientsMatchFiniteDifferences) {
  const Tensor x = constant({{0.3, -0.6, 0.9}, {1.2, -0.2, 0.5}}, float64);
  expect_second_order_matches_finite_differences("tile", [](const Tensor& t) { return tile(t, {2, 2}); }, x);
  expect_second_order_matches_finite_differences(
      "pad reflect", [](const Tensor& t) { return pad(t, {{1, 1}, {2, 1}}, PadMode::Reflect); }, x);
  expect_second_order_matches_finite_differences(
      "pad symmetric", [](const Tensor& t) { return pad(t, {{2, 0}, {1, 3}}, PadMode::Symmetric); }, x);
  expect_second_order_matches_finite_differences(
      "pad constant", [](const Tensor& t) { return pad(t, {{1, 0}, {0, 2}}, PadMode::Constant, 1.5); }, x);
  expect_second_order_matches_finite_differences(
      "split, a piece unused", [](const Tensor& t) { return split(t, {2, -1}, 1)[0]; }, x);
  expect_second_order_matches_finite_differences("reverse", [](const Tensor& t) { return reverse(t, {0, 1}); }, x);
  expect_second_order_matches_finite_differences(
      "gather_nd", [](const Tensor& t) { return gather_nd(t, constant({{1, 2}, {0, 0}, {1, 2}})); }, x);
  expect_second_order_matches_finite_differences(
      "scatter_nd", [](const Tensor& t) { return scatter_nd(constant({{2}, {0}}), t, constant({3, 3})); }, x);
  expect_second_order_matches_finite_differences(
      "tensor_scatter_nd_add",
      [](const Tensor& t) { return tensor_scatter_nd_add(t, constant({{1, 1}, {1, 1}}), constant({2.0, -1.0}, float64)); },
      x);
  expect_second_order_matches_finite_differences(
      "boolean_mask at axis 1", [](const Tensor& t) { return boolean_mask(t, constant({true, false, true}), 1); }, x);
}

}  // namespace
}  // namespace tg
