// reshape_to (reshape to a shape tensor) and ensure_same_shape (a shape check that runs with the
// graph when the trace cannot decide it), and the losses that use it.
#include "ops/op.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

Tensor ensure(const Tensor& x, const Tensor& y) {
  return detail::apply_op1(detail::OpId::EnsureSameShape, {x, y}, detail::ShapeCheckAttrs{{"loss", "labels", "logits"}});
}

// ensure_same_shape comparing dim x_dims[k] of x with dim y_dims[k] of y.
Tensor ensure_dims(const Tensor& x, const Tensor& y, std::vector<int64_t> x_dims, std::vector<int64_t> y_dims) {
  return detail::apply_op1(detail::OpId::EnsureSameShape, {x, y},
                           detail::ShapeCheckAttrs{{"einsum", "a", "b"}, std::move(x_dims), std::move(y_dims)});
}

TG_OP_CASES(runtime_shape) {
  const Tensor x = constant({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}});
  return {
      {"reshape_to", "(2,3) to the shape tensor {3, 2}",
       [](const std::vector<Tensor>& in) { return reshape(in[0], in[1]); }, {x, constant({3, 2})},
       constant({{1.0f, 2.0f}, {3.0f, 4.0f}, {5.0f, 6.0f}})},
      {"reshape_to", "(2,3) to {-1} (int64 shape)",
       [](const std::vector<Tensor>& in) { return reshape(in[0], in[1]); }, {x, constant({int64_t{-1}})},
       constant({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f})},
      {"reshape_to", "rows kept, the rest flattened, from tg::shape",
       [](const std::vector<Tensor>& in) { return reshape(in[0], stack({shape(in[0])[0], constant(-1)})); },
       {constant({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}})}, constant({{1, 2, 3, 4}, {5, 6, 7, 8}})},
      {"ensure_same_shape", "equal shapes pass x through",
       [](const std::vector<Tensor>& in) { return ensure(in[0], in[1]); }, {x, zeros({2, 3})}, x},
      {"ensure_same_shape", "dim 1 of a (2,3) against dim 0 of a (3,4) passes x through",
       [](const std::vector<Tensor>& in) { return ensure_dims(in[0], in[1], {1}, {0}); }, {x, zeros({3, 4})}, x},
  };
}

TEST(ReshapeTo, ConstantShapesAreStaticDimsAndRunTimeShapesAreChecked) {
  std::string traced_shape;
  auto f = function([&](const Tensor& x) {
    const Tensor y = reshape(x, constant({-1, 4}));
    traced_shape = y.shape().to_string();
    return y;
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 2}, float32)}});
  f.get_concrete_function(TensorSpec({None, 2}, float32));
  EXPECT_EQ(traced_shape, "(None, 4)");
  EXPECT_TRUE(testing::tensors_near(f(ones({4, 2})), ones({2, 4})));
  EXPECT_THROW_MSG(f(ones({3, 2})), InvalidArgumentError, "[reshape]", "6 elements", "not divisible");
  // A shape tensor that is itself an argument: nothing is known until the run.
  auto g = function([](const Tensor& x, const Tensor& s) { return reshape(x, s); });
  EXPECT_TRUE(testing::tensors_near(g(ones({2, 3}), constant({6})), ones({6})));
  EXPECT_THROW_MSG(g(ones({2, 3}), constant({4})), InvalidArgumentError, "[reshape]", "(2, 3)", "[4]");
  EXPECT_THROW_MSG(g(ones({2, 3}), constant({-1, -1})), InvalidArgumentError, "at most one");
  EXPECT_THROW_MSG(reshape(ones({2}), constant({{2}})), InvalidArgumentError, "1-D");
  EXPECT_THROW_MSG(reshape(ones({2}), constant({2.0f})), TypeError, "int32 or int64");
  EXPECT_THROW_MSG(reshape(ones({2}), Tensor()), ValueError, "empty");
}

TEST(EnsureSameShape, ChecksAtRunTimeWhatTheTraceCouldNotDecide) {
  std::string traced_shape;
  auto f = function([&](const Tensor& a, const Tensor& b) {
    const Tensor y = ensure(a, b);
    traced_shape = y.shape().to_string();
    return y;
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None}, float32), TensorSpec({4, None}, float32)}});
  f.get_concrete_function(TensorSpec({None, None}, float32), TensorSpec({4, None}, float32));
  // The output takes the dims either side knows.
  EXPECT_EQ(traced_shape, "(4, None)");
  EXPECT_TRUE(testing::tensors_near(f(ones({4, 5}), zeros({4, 5})), ones({4, 5})));
  EXPECT_THROW_MSG(f(ones({4, 1}), zeros({4, 5})), InvalidArgumentError, "[loss] labels have shape (4, 1)",
                   "logits have shape (4, 5) when the graph ran", "do not broadcast");
  // Known dims that differ fail while tracing.
  EXPECT_THROW_MSG(ensure(ones({2, 3}), ones({3, 2})), InvalidArgumentError, "(2, 3)", "(3, 2)");
  EXPECT_THROW_MSG(ensure(ones({2}), ones({2, 1})), InvalidArgumentError, "(2,)", "(2, 1)");
}

// The dims form (einsum's shared letters): only the chosen pairs of dims must agree; the output
// takes y's size where x's was None.
TEST(EnsureSameShape, ComparesChosenDimsAtRunTimeWhenTheTraceCannot) {
  std::string traced_shape;
  auto f = function([&](const Tensor& a, const Tensor& b) {
    const Tensor y = ensure_dims(a, b, {1, 0}, {0, 2});
    traced_shape = y.shape().to_string();
    return y;
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None}, float32), TensorSpec({3, 7, None}, float32)}});
  f.get_concrete_function(TensorSpec({None, None}, float32), TensorSpec({3, 7, None}, float32));
  EXPECT_EQ(traced_shape, "(None, 3)");
  EXPECT_TRUE(testing::tensors_near(f(ones({2, 3}), zeros({3, 7, 2})), ones({2, 3})));
  EXPECT_THROW_MSG(f(ones({2, 3}), zeros({3, 7, 5})), InvalidArgumentError,
                   "[einsum] dim 0 of a (shape (2, 3)) is 2 but dim 2 of b (shape (3, 7, 5)) is 5 when the graph ran",
                   "expected equal sizes");
  // Sizes known on both sides are compared while tracing; the other dims need not agree.
  EXPECT_THROW_MSG(ensure_dims(ones({2, 3}), ones({4, 4, 2}), {1}, {0}), InvalidArgumentError,
                   "dim 1 of a (shape (2, 3)) is 3 but dim 0 of b (shape (4, 4, 2)) is 4");
  EXPECT_TENSOR_EQ(ensure_dims(ones({2, 3}), zeros({3, 9}), {1}, {0}), ones({2, 3}));
  // Lists a caller (or a file) may get wrong.
  EXPECT_THROW_MSG(ensure_dims(ones({2, 3}), ones({3}), {1}, {}), InvalidArgumentError, "[ensure_same_shape]",
                   "one dim of y per dim of x");
  EXPECT_THROW_MSG(ensure_dims(ones({2, 3}), ones({3}), {-1}, {0}), InvalidArgumentError, "dims >= 0");
  EXPECT_THROW_MSG(ensure_dims(ones({2, 3}), ones({3}), {2}, {0}), InvalidArgumentError, "compares dim 2 of x",
                   "has rank 2");
  auto unknown = function([&](const Tensor& a, const Tensor& b) { return ensure_dims(a, b, {1}, {0}); },
                          {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), float32),
                                                                      TensorSpec(TensorShape::unknown_rank(), float32)}});
  EXPECT_TRUE(testing::tensors_near(unknown(ones({2, 3}), zeros({3})), ones({2, 3})));
  EXPECT_THROW_MSG(unknown(ones({3}), zeros({3})), InvalidArgumentError, "compares dim 1 of x", "has rank 1");
  EXPECT_THROW_MSG(unknown(ones({2, 3}), zeros({4})), InvalidArgumentError, "when the graph ran");
}

// Eagerly and with exact shapes, a loss's mismatched arguments are an error; traced over None
// dims they used to broadcast and return a plausible number (labels (4,5) with logits (4,1)
// gave a loss of 0). The check now runs with the graph.
TEST(EnsureSameShape, LossesKeepTheirShapeCheckUnderNoneDims) {
  using Loss = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, Loss>> losses{
      {"softmax_cross_entropy_with_logits", &nn::softmax_cross_entropy_with_logits},
      {"mean_squared_error", &nn::mean_squared_error},
      {"binary_crossentropy_with_logits", &nn::binary_crossentropy_with_logits},
      {"huber", [](const Tensor& a, const Tensor& b) { return nn::huber(a, b); }},
  };
  for (const auto& entry : losses) {
    const char* name = entry.first;  // not a structured binding: clang 14 cannot capture those
    const Loss loss = entry.second;
    SCOPED_TRACE(name);
    EXPECT_THROW_MSG(loss(ones({4, 5}), zeros({4, 1})), InvalidArgumentError, name);
    auto traced = function([loss = loss](const Tensor& a, const Tensor& b) { return loss(a, b); },
                           {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None}, float32), TensorSpec({None, None}, float32)}});
    EXPECT_THROW_MSG(traced(ones({4, 5}), zeros({4, 1})), InvalidArgumentError, name, "(4, 5)", "(4, 1)",
                     "when the graph ran");
    auto unknown_rank = function([loss = loss](const Tensor& a, const Tensor& b) { return loss(a, b); },
                                 {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), float32),
                                                      TensorSpec(TensorShape::unknown_rank(), float32)}});
    EXPECT_THROW_MSG(unknown_rank(ones({4, 5}), zeros({5, 4})), InvalidArgumentError, name, "when the graph ran");
    // Matching shapes give the eager value, and the labels' gradient flows through the check.
    const Tensor a = constant({{0.25f, 0.75f}, {1.0f, 0.0f}}), b = constant({{0.5f, -1.0f}, {2.0f, 0.5f}});
    EXPECT_TRUE(testing::tensors_near(traced(a, b), loss(a, b), 1e-6));
    auto grads = function([loss = loss](const Tensor& x, const Tensor& y) {
      GradientTape tape;
      tape.watch(x);
      return tape.gradient(loss(x, y), x);
    }, {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None}, float32), TensorSpec({None, None}, float32)}});
    GradientTape tape;
    tape.watch(a);
    const Tensor eager_grad = tape.gradient(loss(a, b), a);
    EXPECT_TRUE(testing::tensors_near(grads(a, b), eager_grad, 1e-6));
  }
}

}  // namespace
}  // namespace tg

namespace tg {
namespace {

// TF's constant_value_as_shape: a shape built from tg::shape and constants keeps the sizes that
// are known while tracing, instead of becoming all None.
TEST(KnownShapeElements, ShapesBuiltFromShapeAndConstantsKeepTheirKnownSizes) {
  std::vector<std::string> shapes;
  auto f = function([&](const Tensor& x) {
    const Tensor rows = shape(x)[0];
    const std::vector<Tensor> built{
        zeros(stack({rows, constant(16)})),                              // stack: (None, 16)
        ones(concat({shape(x), constant({2})}, 0)),                      // concat: (None, 3, 2)
        fill(stack({constant(2) * constant(3), shape(x)[1] + 1}), 1.0f),  // arithmetic: (6, 4)
        zeros(cast(slice(shape(x), {1}, {1}), int64)),                   // slice, cast: (3,)
        broadcast_to(constant(1.0f), stack({rows, shape(x)[-1]})),       // broadcast_to: (None, 3)
        reshape(x, stack({rows * 3, constant(1)})),                      // reshape: (None, 1)
    };
    shapes.clear();
    for (const Tensor& t : built) shapes.push_back(t.shape().to_string());
    return built[0];
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 3}, float32)}});
  EXPECT_EQ(f(ones({5, 3})).shape().to_string(), "(5, 16)");
  EXPECT_EQ(shapes, (std::vector<std::string>{"(None, 16)", "(None, 3, 2)", "(6, 4)", "(3,)", "(None, 3)",
                                              "(None, 1)"}));
}

// The case a user hit: a loop state of (None, H) whose body rebuilds it from tg::shape. With the
// rebuilt state all None the loop refused it.
TEST(KnownShapeElements, ALoopStateRebuiltFromShapeKeepsItsStaticDims) {
  auto f = function([](const Tensor& x) {
    const auto [i, state] = while_loop(
        [](const Tensor& i, const Tensor&) { return i < 3; },
        [&](const Tensor& i, const Tensor& s) {
          return std::tuple{i + 1, s + zeros(stack({shape(x)[0], constant(4)})) + 1.0f};
        },
        std::tuple{constant(0), matmul(x, ones({3, 4}))});
    return state;
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 3}, float32)}});
  EXPECT_TRUE(testing::tensors_near(f(ones({2, 3})), fill({2, 4}, 6.0f)));
}

// A value tracing knew must still be what runs: a shape argument whose value only the run
// knows is checked there, and a saved function keeps its partially known shapes.
TEST(KnownShapeElements, PartiallyKnownShapesSurviveSaveAndLoad) {
  auto f = function([](const Tensor& x) { return zeros(stack({shape(x)[0], constant(4)})); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 3}, float32)}});
  f(ones({1, 3}));
  const std::string path = ::testing::TempDir() + "/known_shape_elements.tgx";
  save(path, f);
  LoadedFunction loaded = load(path);
  EXPECT_TRUE(testing::tensors_near(loaded(ones({2, 3})), zeros({2, 4})));
}

}  // namespace
}  // namespace tg
