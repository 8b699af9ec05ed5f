// Shape ops: reshape, transpose, expand_dims, squeeze, concat, stack, x[i], shape, size, and the
// ops whose shape is a tensor: fill (zeros / ones) and broadcast_to.
#include <numeric>

#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/op.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

using ::tg::testing::empty;

Fn reshape_to(std::vector<int64_t> s) {
  return [s](const std::vector<Tensor>& in) { return reshape(in[0], s); };
}
Fn transpose_by(std::vector<int> p) {
  return [p](const std::vector<Tensor>& in) { return transpose(in[0], p); };
}
Fn expand_at(int a) {
  return [a](const std::vector<Tensor>& in) { return expand_dims(in[0], a); };
}
Fn squeeze_at(std::vector<int> a) {
  return [a](const std::vector<Tensor>& in) { return squeeze(in[0], a); };
}
Fn concat_on(int a) {
  return [a](const std::vector<Tensor>& in) { return concat(in, a); };
}
Fn stack_on(int a) {
  return [a](const std::vector<Tensor>& in) { return stack(in, a); };
}
Fn index_at(int64_t i) {
  return [i](const std::vector<Tensor>& in) { return in[0][i]; };
}
const Fn shape_fn = [](const std::vector<Tensor>& in) { return shape(in[0]); };
const Fn size_fn = [](const std::vector<Tensor>& in) { return size(in[0]); };

// Shapes at run time: the shape tensor is an input (symbolic, None-dims and unknown-rank in the
// traced modes) or a constant the function captures (its value known while tracing).
const Fn fill_fn = [](const std::vector<Tensor>& in) { return fill(in[0], in[1]); };
const Fn zeros_fn = [](const std::vector<Tensor>& in) { return zeros(in[0], int64); };
const Fn ones_fn = [](const std::vector<Tensor>& in) { return ones(in[0]); };
const Fn broadcast_to_fn = [](const std::vector<Tensor>& in) { return broadcast_to(in[0], in[1]); };

TG_OP_CASES(shape_tensor_ops) {
  return {
      {"fill", "float32 (2,3) from an int32 shape", fill_fn, {constant({2, 3}), constant(1.5f)},
       constant({{1.5f, 1.5f, 1.5f}, {1.5f, 1.5f, 1.5f}})},
      {"fill", "int32 from an int64 shape", fill_fn, {constant({3}, int64), constant(7)}, constant({7, 7, 7})},
      {"fill", "bool", fill_fn, {constant({2, 1}), constant(true)}, constant({{true}, {true}})},
      {"fill", "string", fill_fn, {constant({2}), constant("ab")}, constant({"ab", "ab"})},
      {"fill", "a scalar from an empty shape", fill_fn, {empty<int32_t>({0}, int32), constant(2.5, float64)},
       constant(2.5, float64)},
      {"fill", "empty (0,2)", fill_fn, {constant({0, 2}), constant(1.f)}, empty<float>({0, 2}, float32)},
      {"fill", "a constant shape known while tracing",
       [](const std::vector<Tensor>& in) { return fill(constant({2, 2}), in[0]); }, {constant(-1.f)},
       constant({{-1.f, -1.f}, {-1.f, -1.f}})},
      {"fill", "the C++ scalar overload",
       [](const std::vector<Tensor>& in) { return fill(in[0], 3); }, {constant({1, 2})}, constant({{3, 3}})},
      {"fill", "zeros int64", zeros_fn, {constant({2, 2})}, constant({{0, 0}, {0, 0}}, int64)},
      {"fill", "ones float32 from tg::shape(x)",
       [](const std::vector<Tensor>& in) { return ones(shape(in[0])); }, {constant({{1, 2, 3}})},
       constant({{1.f, 1.f, 1.f}})},
      {"fill", "ones", ones_fn, {constant({2})}, constant({1.f, 1.f})},

      {"broadcast_to", "(3,) to (2,3)", broadcast_to_fn, {constant({1.f, 2.f, 3.f}), constant({2, 3})},
       constant({{1.f, 2.f, 3.f}, {1.f, 2.f, 3.f}})},
      {"broadcast_to", "int32 (2,1) to (2,3), int64 shape", broadcast_to_fn,
       {constant({{1}, {2}}), constant({2, 3}, int64)}, constant({{1, 1, 1}, {2, 2, 2}})},
      {"broadcast_to", "a scalar to (2,2)", broadcast_to_fn, {constant(4.0, float64), constant({2, 2})},
       constant({{4.0, 4.0}, {4.0, 4.0}}, float64)},
      {"broadcast_to", "bool (1,2) to (2,1,2)", broadcast_to_fn, {constant({{true, false}}), constant({2, 1, 2})},
       constant({{{true, false}}, {{true, false}}})},
      {"broadcast_to", "string (2,) to (2,2)", broadcast_to_fn, {constant({"a", "b"}), constant({2, 2})},
       constant({{"a", "b"}, {"a", "b"}})},
      {"broadcast_to", "(1,3) to (0,3)", broadcast_to_fn, {constant({{1.f, 2.f, 3.f}}), constant({0, 3})},
       empty<float>({0, 3}, float32)},
      {"broadcast_to", "same shape", broadcast_to_fn, {constant({5, 6}), constant({2})}, constant({5, 6})},
      {"broadcast_to", "a constant shape known while tracing",
       [](const std::vector<Tensor>& in) { return broadcast_to(in[0], constant({2, 2})); }, {constant({1.f, 2.f})},
       constant({{1.f, 2.f}, {1.f, 2.f}})},
  };
}

TG_OP_CASES(shape_ops) {
  const Tensor f23 = constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});
  const Tensor i223 = constant({{{0, 1, 2}, {3, 4, 5}}, {{6, 7, 8}, {9, 10, 11}}});
  return {
      // reshape
      {"reshape", "float32 (2,3)->(3,2)", reshape_to({3, 2}), {f23},
       constant({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}})},
      {"reshape", "int32 -1 flattens", reshape_to({-1}), {constant({{1, 2}, {3, 4}})},
       constant({1, 2, 3, 4})},
      {"reshape", "int64 (2,-1)", reshape_to({2, -1}), {constant({1, 2, 3, 4, 5, 6}, int64)},
       constant({{1, 2, 3}, {4, 5, 6}}, int64)},
      {"reshape", "float64 (-1,1)", reshape_to({-1, 1}), {constant({1.5, 2.5}, float64)},
       constant({{1.5}, {2.5}}, float64)},
      {"reshape", "bool (4,)->(2,2)", reshape_to({2, 2}), {constant({true, false, false, true})},
       constant({{true, false}, {false, true}})},
      {"reshape", "string (2,2)->(4,)", reshape_to({4}), {constant({{"a", "b"}, {"c", "d"}})},
       constant({"a", "b", "c", "d"})},
      {"reshape", "scalar -> (1,1)", reshape_to({1, 1}), {constant(7)}, constant({{7}})},
      {"reshape", "(1,) -> scalar", reshape_to({}), {constant({7.f})}, constant(7.f)},
      {"reshape", "empty (0,3)->(3,0)", reshape_to({3, 0}), {empty<float>({0, 3}, float32)},
       empty<float>({3, 0}, float32)},
      {"reshape", "empty (0,3)->(-1,3)", reshape_to({-1, 3}), {empty<int32_t>({0, 3}, int32)},
       empty<int32_t>({0, 3}, int32)},
      {"reshape", "empty -1 with nonzero others", reshape_to({2, -1}), {empty<int32_t>({0}, int32)},
       empty<int32_t>({2, 0}, int32)},

      // transpose
      {"transpose", "float32 2-D default", transpose_by({}), {f23},
       constant({{1.f, 4.f}, {2.f, 5.f}, {3.f, 6.f}})},
      {"transpose", "int32 3-D default reverses", transpose_by({}), {i223},
       constant({{{0, 6}, {3, 9}}, {{1, 7}, {4, 10}}, {{2, 8}, {5, 11}}})},
      {"transpose", "int32 perm (0,2,1)", transpose_by({0, 2, 1}), {i223},
       constant({{{0, 3}, {1, 4}, {2, 5}}, {{6, 9}, {7, 10}, {8, 11}}})},
      {"transpose", "int32 perm (2,0,1)", transpose_by({2, 0, 1}), {i223},
       constant({{{0, 3}, {6, 9}}, {{1, 4}, {7, 10}}, {{2, 5}, {8, 11}}})},
      {"transpose", "int32 perm (1,0,2)", transpose_by({1, 0, 2}), {i223},
       constant({{{0, 1, 2}, {6, 7, 8}}, {{3, 4, 5}, {9, 10, 11}}})},
      {"transpose", "identity perm", transpose_by({0, 1}), {f23}, f23},
      {"transpose", "int64", transpose_by({1, 0}), {constant({{1, 2}, {3, 4}}, int64)},
       constant({{1, 3}, {2, 4}}, int64)},
      {"transpose", "float64 size-1 dim", transpose_by({}), {constant({{1.0, 2.0, 3.0}}, float64)},
       constant({{1.0}, {2.0}, {3.0}}, float64)},
      {"transpose", "bool", transpose_by({}), {constant({{true, false, true}, {false, false, true}})},
       constant({{true, false}, {false, false}, {true, true}})},
      {"transpose", "string", transpose_by({1, 0}), {constant({{"a", "b"}, {"c", "d"}})},
       constant({{"a", "c"}, {"b", "d"}})},
      {"transpose", "empty (0,3)", transpose_by({}), {empty<float>({0, 3}, float32)},
       empty<float>({3, 0}, float32)},
      {"transpose", "scalar", transpose_by({}), {constant(3)}, constant(3)},
      {"transpose", "vector", transpose_by({0}), {constant({1, 2, 3})}, constant({1, 2, 3})},

      // expand_dims
      {"expand_dims", "axis 0", expand_at(0), {constant({1.f, 2.f})}, constant({{1.f, 2.f}})},
      {"expand_dims", "axis 1 (== rank)", expand_at(1), {constant({1, 2})}, constant({{1}, {2}})},
      {"expand_dims", "axis -1", expand_at(-1), {constant({1, 2}, int64)},
       constant({{1}, {2}}, int64)},
      {"expand_dims", "axis -2 (== -rank-1)", expand_at(-2), {constant({1.0, 2.0}, float64)},
       constant({{1.0, 2.0}}, float64)},
      {"expand_dims", "scalar", expand_at(0), {constant(true)}, constant({true})},
      {"expand_dims", "string middle axis", expand_at(1), {constant({{"a", "b"}, {"c", "d"}})},
       constant({{{"a", "b"}}, {{"c", "d"}}})},
      {"expand_dims", "empty (2,0) axis 1", expand_at(1), {empty<float>({2, 0}, float32)},
       empty<float>({2, 1, 0}, float32)},

      // squeeze
      {"squeeze", "all size-1 dims", squeeze_at({}), {constant({{{1.f}, {2.f}}})},
       constant({1.f, 2.f})},
      {"squeeze", "axis 0", squeeze_at({0}), {constant({{{1}, {2}}})}, constant({{1}, {2}})},
      {"squeeze", "axis -1", squeeze_at({-1}), {constant({{{1}, {2}}}, int64)},
       constant({{1, 2}}, int64)},
      {"squeeze", "(1,1) -> scalar", squeeze_at({}), {constant({{2.5}}, float64)},
       constant(2.5, float64)},
      {"squeeze", "bool", squeeze_at({1}), {constant({{true}, {false}})}, constant({true, false})},
      {"squeeze", "string", squeeze_at({}), {constant({{"x", "y"}})}, constant({"x", "y"})},
      {"squeeze", "no size-1 dims", squeeze_at({}), {constant({1, 2})}, constant({1, 2})},
      {"squeeze", "empty (1,0,1)", squeeze_at({}), {empty<float>({1, 0, 1}, float32)},
       empty<float>({0}, float32)},

      // concat
      {"concat", "one tensor", concat_on(0), {constant({1.f, 2.f})}, constant({1.f, 2.f})},
      {"concat", "int32 axis 1", concat_on(1), {constant({{1, 2}, {3, 4}}), constant({{5}, {6}})},
       constant({{1, 2, 5}, {3, 4, 6}})},
      {"concat", "int32 axis -1, three", concat_on(-1),
       {constant({{1}, {2}}), constant({{3}, {4}}), constant({{5, 6}, {7, 8}})},
       constant({{1, 3, 5, 6}, {2, 4, 7, 8}})},
      {"concat", "float64 axis 0", concat_on(0),
       {constant({{1.0, 2.0}}, float64), constant({{3.0, 4.0}, {5.0, 6.0}}, float64)},
       constant({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}, float64)},
      {"concat", "int64", concat_on(0), {constant({1}, int64), constant({2, 3}, int64)},
       constant({1, 2, 3}, int64)},
      {"concat", "bool", concat_on(0), {constant({true}), constant({false, true})},
       constant({true, false, true})},
      {"concat", "string axis 1", concat_on(1), {constant({{"a"}, {"b"}}), constant({{"c"}, {"d"}})},
       constant({{"a", "c"}, {"b", "d"}})},
      {"concat", "with an empty input", concat_on(0),
       {empty<float>({0, 2}, float32), constant({{1.f, 2.f}})}, constant({{1.f, 2.f}})},
      {"concat", "all empty", concat_on(1),
       {empty<int32_t>({2, 0}, int32), empty<int32_t>({2, 0}, int32)},
       empty<int32_t>({2, 0}, int32)},

      // stack
      {"stack", "one tensor", stack_on(0), {constant({1.f, 2.f})}, constant({{1.f, 2.f}})},
      {"stack", "scalars", stack_on(0), {constant(1), constant(2), constant(3)},
       constant({1, 2, 3})},
      {"stack", "axis 1", stack_on(1), {constant({1, 2}), constant({3, 4})},
       constant({{1, 3}, {2, 4}})},
      {"stack", "axis -1", stack_on(-1), {constant({1, 2}, int64), constant({3, 4}, int64)},
       constant({{1, 3}, {2, 4}}, int64)},
      {"stack", "2-D axis 1", stack_on(1),
       {constant({{1.0, 2.0}, {3.0, 4.0}}, float64), constant({{5.0, 6.0}, {7.0, 8.0}}, float64)},
       constant({{{1.0, 2.0}, {5.0, 6.0}}, {{3.0, 4.0}, {7.0, 8.0}}}, float64)},
      {"stack", "bool", stack_on(0), {constant({true, false}), constant({false, false})},
       constant({{true, false}, {false, false}})},
      {"stack", "string axis -1", stack_on(-1), {constant({"a", "b"}), constant({"c", "d"})},
       constant({{"a", "c"}, {"b", "d"}})},
      {"stack", "empty axis 0", stack_on(0),
       {empty<float>({0}, float32), empty<float>({0}, float32)}, empty<float>({2, 0}, float32)},
      {"stack", "empty axis 1", stack_on(1),
       {empty<float>({0}, float32), empty<float>({0}, float32)}, empty<float>({0, 2}, float32)},

      // x[i]
      {"index", "int32 row", index_at(1), {constant({{1, 2}, {3, 4}, {5, 6}})}, constant({3, 4})},
      {"index", "negative", index_at(-1), {constant({{1, 2}, {3, 4}, {5, 6}})}, constant({5, 6})},
      {"index", "vector -> scalar", index_at(0), {constant({1.5f, 2.5f})}, constant(1.5f)},
      {"index", "float64", index_at(-2), {constant({1.5, 2.5}, float64)}, constant(1.5, float64)},
      {"index", "int64 3-D", index_at(1), {constant({{{1}, {2}}, {{3}, {4}}}, int64)},
       constant({{3}, {4}}, int64)},
      {"index", "bool", index_at(1), {constant({true, false})}, constant(false)},
      {"index", "string", index_at(0), {constant({{"a", "b"}, {"c", "d"}})}, constant({"a", "b"})},
      {"index", "row of zero width", index_at(1), {empty<float>({2, 0}, float32)},
       empty<float>({0}, float32)},

      // shape / size
      {"shape", "float32 (2,3)", shape_fn, {f23}, constant({2, 3})},
      {"shape", "scalar", shape_fn, {constant(1.0, float64)}, empty<int32_t>({0}, int32)},
      {"shape", "string (0,4)", shape_fn, {empty<std::string>({0, 4}, string_)}, constant({0, 4})},
      {"shape", "bool", shape_fn, {constant({true})}, constant({1})},
      {"shape", "int64 3-D", shape_fn, {constant({{{1}, {2}}}, int64)}, constant({1, 2, 1})},
      {"size", "float32 (2,3)", size_fn, {f23}, constant(6)},
      {"size", "scalar", size_fn, {constant(1)}, constant(1)},
      {"size", "empty", size_fn, {empty<float>({0, 4}, float32)}, constant(0)},
      {"size", "string", size_fn, {constant({"a", "b"})}, constant(2)},
      {"size", "bool", size_fn, {constant({{true}, {false}, {true}})}, constant(3)},
      {"size", "int64 / float64", size_fn, {constant({1.0, 2.0, 3.0, 4.0}, float64)}, constant(4)},
  };
}

// ---- views ----

bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.impl()->buffer == b.impl()->buffer;
}

TEST(ShapeOps, ViewsShareStorage) {
  Tensor x = constant({{1, 2, 3}, {4, 5, 6}});
  Tensor r = reshape(x, {3, 2});
  EXPECT_TRUE(shares_storage(x, r));
  EXPECT_EQ(r.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(r.shape(), (TensorShape{3, 2}));
  Tensor e = expand_dims(x, 0);
  EXPECT_TRUE(shares_storage(x, e));
  EXPECT_EQ(squeeze(e).to_vector<int32_t>(), x.to_vector<int32_t>());
  EXPECT_TRUE(shares_storage(x, squeeze(e)));
  Tensor row = x[1];
  EXPECT_TRUE(shares_storage(x, row));
  EXPECT_EQ(row.to_vector<int32_t>(), (std::vector<int32_t>{4, 5, 6}));
  // Views of views keep the offset.
  Tensor rr = reshape(row, {3, 1});
  EXPECT_TRUE(shares_storage(x, rr));
  EXPECT_EQ(rr.to_vector<int32_t>(), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(rr[2].to_vector<int32_t>(), (std::vector<int32_t>{6}));
  // transpose and concat copy.
  EXPECT_FALSE(shares_storage(x, transpose(x)));
  EXPECT_FALSE(shares_storage(x, concat({x}, 0)));
}

TEST(ShapeOps, IndexChainsAndCountsFromTheEnd) {
  Tensor x = constant({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}});
  EXPECT_EQ(x[1][0].to_vector<int32_t>(), (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(x[1][0][1].item<int32_t>(), 6);
  EXPECT_EQ(x[-1][-1][-2].item<int32_t>(), 7);
  EXPECT_EQ(x[-1].to_vector<int32_t>(), (std::vector<int32_t>{5, 6, 7, 8}));
  Tensor s = constant({"p", "q", "r"});
  EXPECT_EQ(s[-1].item<std::string>(), "r");
}

// Views on an offset string buffer stay valid after the parent handle is gone.
TEST(ShapeOps, ViewsKeepTheBufferAlive) {
  Tensor v;
  {
    Tensor s = constant({{"aa", "bb"}, {"cc", "dd"}});
    v = reshape(s[1], {2, 1});
  }
  EXPECT_EQ(v.to_vector<std::string>(), (std::vector<std::string>{"cc", "dd"}));
}

// ---- transpose kernel paths vs a naive reference ----

std::vector<float> naive_transpose(const std::vector<float>& x, const std::vector<int64_t>& dims,
                                   const std::vector<int>& perm) {
  const std::size_t r = dims.size();
  std::vector<int64_t> in_strides(r, 1), out_dims(r);
  for (std::size_t i = r - 1; i-- > 0;) in_strides[i] = in_strides[i + 1] * dims[i + 1];
  for (std::size_t i = 0; i < r; ++i) out_dims[i] = dims[static_cast<std::size_t>(perm[i])];
  std::vector<float> y(x.size());
  std::vector<int64_t> idx(r, 0);
  for (std::size_t o = 0; o < y.size(); ++o) {
    int64_t src = 0;
    for (std::size_t i = 0; i < r; ++i) src += idx[i] * in_strides[static_cast<std::size_t>(perm[i])];
    y[o] = x[static_cast<std::size_t>(src)];
    for (std::size_t i = r; i-- > 0;) {
      if (++idx[i] < out_dims[i]) break;
      idx[i] = 0;
    }
  }
  return y;
}

void check_transpose(const std::vector<int64_t>& dims, const std::vector<int>& perm) {
  SCOPED_TRACE(TensorShape(dims).to_string());
  const int64_t n = std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
  Tensor x = reshape(cast(range(static_cast<int32_t>(n)), float32), dims);
  Tensor y = transpose(x, perm);
  EXPECT_EQ(y.to_vector<float>(), naive_transpose(x.to_vector<float>(), dims, perm));
}

TEST(ShapeOps, TransposeMatchesNaiveReference) {
  check_transpose({67, 45}, {1, 0});        // 2-D, tiles with ragged edges
  check_transpose({3, 40, 35}, {0, 2, 1});  // batched 2-D
  check_transpose({40, 3, 35}, {2, 1, 0});
  check_transpose({5, 1, 7, 1}, {3, 2, 1, 0});  // size-1 dims dropped
  // Contiguous runs of the last dim (a head split): whole cache lines, lines and a tail, and a
  // run too long for the inline copies.
  check_transpose({4, 8, 3, 32}, {0, 2, 1, 3});
  check_transpose({2, 5, 3, 37}, {0, 2, 1, 3});
  check_transpose({2, 3, 4, 200}, {0, 2, 1, 3});
  std::vector<int> perm = {0, 1, 2, 3};
  do {
    SCOPED_TRACE(::testing::PrintToString(perm));
    check_transpose({2, 3, 4, 5}, perm);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(ShapeOps, TransposeOfAViewAndStrings) {
  Tensor x = constant({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}});
  EXPECT_EQ(transpose(x[1]).to_vector<int32_t>(), (std::vector<int32_t>{5, 7, 6, 8}));
  Tensor s = reshape(constant({"a", "b", "c", "d", "e", "f"}), {2, 3});
  EXPECT_EQ(transpose(s).to_vector<std::string>(),
            (std::vector<std::string>{"a", "d", "b", "e", "c", "f"}));
  // Runs of strings (not trivially copyable) keep their copy.
  EXPECT_EQ(transpose(reshape(s, {1, 2, 1, 3}), {0, 2, 1, 3}).to_vector<std::string>(),
            (std::vector<std::string>{"a", "b", "c", "d", "e", "f"}));
  EXPECT_EQ(transpose(reshape(s, {2, 1, 3, 1}), {2, 0, 1, 3}).to_vector<std::string>(),
            (std::vector<std::string>{"a", "d", "b", "e", "c", "f"}));
}

TEST(ShapeOps, ConcatAndStackRoundTrip) {
  Tensor a = constant({{1, 2}, {3, 4}});
  Tensor b = constant({{5, 6}, {7, 8}});
  Tensor s = stack({a, b}, 1);
  EXPECT_TENSOR_EQ(s[0], constant({{1, 2}, {5, 6}}));
  EXPECT_TENSOR_EQ(concat({a, b}, 0)[2], constant({5, 6}));
  // Stacking along axis k equals concatenating expand_dims(., k).
  for (int axis : {0, 1, 2, -1})
    EXPECT_TENSOR_EQ(stack({a, b}, axis), concat({expand_dims(a, axis), expand_dims(b, axis)}, axis));
}

// A concatenation of rows of at least 2 * kParallelMinElements elements copies its pieces on
// every thread, each its range of the result: pieces of odd sizes that straddle the ranges'
// ends land where one thread's copy puts them, whatever the thread count.
TEST(ShapeOps, ALargeConcatenationOfRowsIsTheSameOnOneAndTwoThreads) {
  const int saved = detail::num_threads();
  std::vector<Tensor> pieces;
  std::vector<int32_t> expected;
  for (int64_t rows : {1, 7000, 3, 20011, 517, 9}) {
    std::vector<int32_t> v(static_cast<std::size_t>(rows * 5));
    std::iota(v.begin(), v.end(), static_cast<int32_t>(expected.size()) * 3 + 1);
    expected.insert(expected.end(), v.begin(), v.end());
    pieces.push_back(constant(v, TensorShape({rows, 5}), int32));
  }
  ASSERT_GE(static_cast<int64_t>(expected.size()), 2 * detail::kParallelMinElements);
  for (int threads : {1, 2}) {
    detail::set_num_threads(threads);
    const Tensor c = concat(pieces, 0);
    EXPECT_EQ(c.shape(), TensorShape({static_cast<int64_t>(expected.size()) / 5, 5}));
    EXPECT_EQ(c.to_vector<int32_t>(), expected) << threads << " threads";
  }
  detail::set_num_threads(saved);
}

// ---- traced with None dims: static shapes while tracing, concrete checks when running ----

template <class F>
auto traced_on(F fn, TensorShape shape, DType dtype = int32) {
  return function(fn, {.input_signature = std::vector<TensorSpec>{TensorSpec(shape, dtype)},
                       .arg_names = {"x"}});
}

TEST(ShapeOpsTraced, NoneDimsStayNoneAndKernelsCheckAtRunTime) {
  std::vector<std::string> seen;
  auto flat = traced_on([&](const Tensor& x) {
    Tensor y = reshape(x, {-1});
    seen.push_back(y.to_string());
    return y;
  }, {None, 2});
  EXPECT_EQ(flat(constant({{1, 2}, {3, 4}})).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4}));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_NE(seen[0].find("shape=(None,)"), std::string::npos) << seen[0];

  auto pick = traced_on([&](const Tensor& x) { return x[2]; }, {None, 2});
  EXPECT_EQ(pick(constant({{1, 2}, {3, 4}, {5, 6}})).to_vector<int32_t>(), (std::vector<int32_t>{5, 6}));
  EXPECT_THROW_MSG(pick(constant({{1, 2}})), InvalidArgumentError, "[index]", "index 2",
                   "size 1");

  auto sq = traced_on([&](const Tensor& x) {
    Tensor y = squeeze(x);
    seen.push_back(y.to_string());
    return y;
  }, {None, 1});
  EXPECT_EQ(sq(constant({{1}, {2}})).shape(), (TensorShape{2}));
  EXPECT_EQ(sq(constant({{7}})).shape(), (TensorShape{}));  // the None dim was 1 after all
  EXPECT_NE(seen.back().find("shape=<unknown>"), std::string::npos) << seen.back();

  auto joined = traced_on([&](const Tensor& x) {
    return concat({x, x}, 0);
  }, {None, 2});
  EXPECT_EQ(joined(constant({{1, 2}})).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 1, 2}));

  auto dims = traced_on([&](const Tensor& x) { return shape(x) * size(x); }, {None, 3}, string_);
  EXPECT_EQ(dims(constant({{"a", "b", "c"}, {"d", "e", "f"}})).to_vector<int32_t>(),
            (std::vector<int32_t>{12, 18}));
}

// ---- shape inference with unknown dims and ranks (what tracing sees) ----

std::vector<detail::ValueType> infer(detail::OpId id, std::vector<detail::ValueType> in,
                                     const detail::OpAttrs& attrs = {}) {
  return detail::op_def(id).infer(in, attrs);
}
detail::ValueType vt(TensorShape s, DType d = float32) { return {d, std::move(s)}; }
TensorShape out_shape(detail::OpId id, std::vector<detail::ValueType> in,
                      const detail::OpAttrs& attrs = {}) {
  auto out = infer(id, std::move(in), attrs);
  EXPECT_EQ(out.size(), 1u);
  return out[0].shape;
}
const TensorShape unknown = TensorShape::unknown_rank();

TEST(ShapeOpsInfer, Reshape) {
  using detail::OpId;
  detail::ReshapeAttrs a{{-1, 3}};
  EXPECT_EQ(out_shape(OpId::Reshape, {vt({None, 3})}, a), (TensorShape{None, 3}));
  EXPECT_EQ(out_shape(OpId::Reshape, {vt(unknown)}, a), (TensorShape{None, 3}));
  EXPECT_EQ(out_shape(OpId::Reshape, {vt({4, 3})}, a), (TensorShape{4, 3}));
  EXPECT_EQ(out_shape(OpId::Reshape, {vt({None, 0})}, a), (TensorShape{0, 3}));
  a.shape = {6, 2};  // a fully specified target is kept
  EXPECT_EQ(out_shape(OpId::Reshape, {vt({None, 3})}, a), (TensorShape{6, 2}));
  EXPECT_EQ(out_shape(OpId::Reshape, {vt(unknown)}, a), (TensorShape{6, 2}));
  EXPECT_EQ(out_shape(OpId::Reshape, {vt({None, 3}, string_)}, a).rank(), 2);
  EXPECT_EQ(infer(OpId::Reshape, {vt({None}, string_)}, a)[0].dtype, string_);
}

TEST(ShapeOpsInfer, TransposeExpandSqueeze) {
  using detail::OpId;
  detail::TransposeAttrs a;
  EXPECT_EQ(out_shape(OpId::Transpose, {vt({None, 3, 4})}, a), (TensorShape{4, 3, None}));
  EXPECT_FALSE(out_shape(OpId::Transpose, {vt(unknown)}, a).has_rank());
  a.perm = {1, 0, 2};
  EXPECT_EQ(out_shape(OpId::Transpose, {vt(unknown)}, a), (TensorShape{None, None, None}));
  EXPECT_EQ(out_shape(OpId::Transpose, {vt({None, 3, 4})}, a), (TensorShape{3, None, 4}));

  const detail::AxisAttrs e{-1};
  EXPECT_EQ(out_shape(OpId::ExpandDims, {vt({None, 2})}, e), (TensorShape{None, 2, 1}));
  EXPECT_FALSE(out_shape(OpId::ExpandDims, {vt(unknown)}, e).has_rank());

  detail::SqueezeAttrs s;
  // Squeezing every size-1 dim: a None dim may be 1 at run time, so the rank is unknown (TF).
  EXPECT_FALSE(out_shape(OpId::Squeeze, {vt({None, 1, 3})}, s).has_rank());
  EXPECT_EQ(out_shape(OpId::Squeeze, {vt({2, 1, 3})}, s), (TensorShape{2, 3}));
  s.axes = {0};  // a listed None dim is assumed to be 1
  EXPECT_EQ(out_shape(OpId::Squeeze, {vt({None, 1, 3})}, s), (TensorShape{1, 3}));
  s.axes = {1};
  EXPECT_EQ(out_shape(OpId::Squeeze, {vt({None, 1, 3})}, s), (TensorShape{None, 3}));
  EXPECT_FALSE(out_shape(OpId::Squeeze, {vt(unknown)}, s).has_rank());
}

TEST(ShapeOpsInfer, ConcatStack) {
  using detail::OpId;
  const detail::AxisAttrs a{1};
  EXPECT_EQ(out_shape(OpId::Concat, {vt({None, 2}), vt({3, 4})}, a), (TensorShape{3, 6}));
  EXPECT_EQ(out_shape(OpId::Concat, {vt({2, None}), vt({2, 4})}, a), (TensorShape{2, None}));
  EXPECT_EQ(out_shape(OpId::Concat, {vt(unknown), vt({2, 4})}, a), (TensorShape{2, None}));
  EXPECT_FALSE(out_shape(OpId::Concat, {vt(unknown), vt(unknown)}, a).has_rank());
  EXPECT_EQ(out_shape(OpId::Stack, {vt({None, 2}), vt({3, None}), vt(unknown)}, a),
            (TensorShape{3, 3, 2}));
  EXPECT_FALSE(out_shape(OpId::Stack, {vt(unknown)}, a).has_rank());
}

TEST(ShapeOpsInfer, IndexShapeSize) {
  using detail::OpId;
  const detail::IndexAttrs a{7};  // dim 0 unknown: the bound is checked by the kernel
  EXPECT_EQ(out_shape(OpId::Index, {vt({None, 3})}, a), (TensorShape{3}));
  EXPECT_FALSE(out_shape(OpId::Index, {vt(unknown)}, a).has_rank());
  EXPECT_EQ(out_shape(OpId::Shape, {vt({None, 3})}), (TensorShape{2}));
  EXPECT_EQ(out_shape(OpId::Shape, {vt(unknown)}), (TensorShape{None}));
  EXPECT_EQ(infer(OpId::Shape, {vt({None}, string_)})[0].dtype, int32);
  EXPECT_EQ(out_shape(OpId::Size, {vt(unknown)}), (TensorShape{}));
  EXPECT_EQ(infer(OpId::Size, {vt({None}, bool_)})[0].dtype, int32);
}

// ---- shapes at run time: the static shapes fill / broadcast_to infer while tracing ----

TEST(ShapeTensorOps, ConstantShapesAreStaticAndRunTimeSizesAreNone) {
  std::vector<TensorShape> seen;
  auto f = traced_on([&](const Tensor& x) {
    const Tensor batch = shape(x)[0];
    const Tensor h = zeros(stack({batch, constant(4)}));  // zeros({b, H}) with a None batch
    seen.push_back(detail::static_shape(h));
    seen.push_back(detail::static_shape(ones(constant({2, 4}))));
    seen.push_back(detail::static_shape(fill(shape(x), 1.f)));
    const Tensor row = broadcast_to(constant({1.f, 2.f, 3.f, 4.f}), stack({batch, constant(4)}));
    seen.push_back(detail::static_shape(row));  // x's known dim fills the unknown one
    seen.push_back(detail::static_shape(broadcast_to(cast(x, float32), constant({3, 2}))));
    return h + row;
  }, {None, 2});
  const Tensor out = f(constant({{1, 2}, {3, 4}}));
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[0], TensorShape({None, 4}));  // the constant's size is known (TF's constant_value_as_shape)
  EXPECT_EQ(seen[1], TensorShape({2, 4}));
  EXPECT_EQ(seen[2], TensorShape({None, 2}));  // tg::shape(x) knows x's static dims
  EXPECT_EQ(seen[3], TensorShape({None, 4}));
  EXPECT_EQ(seen[4], TensorShape({3, 2}));
  EXPECT_TENSOR_EQ(out, constant({{1.f, 2.f, 3.f, 4.f}, {1.f, 2.f, 3.f, 4.f}}));
  // the same function serves every batch size
  EXPECT_EQ(f(constant({{1, 2}, {3, 4}, {5, 6}})).shape(), TensorShape({3, 4}));
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(ShapeTensorOps, StaticShapeOverloadsStillTakeBraces) {
  // the shape-tensor overloads bind to a tg::Tensor only: braces stay static shapes
  EXPECT_TENSOR_EQ(zeros({}), constant(0.f));
  EXPECT_TENSOR_EQ(ones({2}, int32), constant({1, 1}));
  EXPECT_TENSOR_EQ(fill({}, 4), constant(4));
  EXPECT_TENSOR_EQ(zeros(constant({1, 2}), int32), constant({{0, 0}}));
  EXPECT_TENSOR_EQ(fill(constant({2}), 2.5, float64), constant({2.5, 2.5}, float64));
}

}  // namespace
}  // namespace tg
