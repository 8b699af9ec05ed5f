// Index ops: slice, gather, one_hot.
#include <cmath>

#include "core/tensor_impl.h"
#include "ops/grad_helpers.h"
#include "ops/op.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

using ::tg::testing::empty;

Fn slice_of(std::vector<int64_t> begin, std::vector<int64_t> size) {
  return [begin, size](const std::vector<Tensor>& in) { return slice(in[0], begin, size); };
}
Fn gather_on(int axis) {
  return [axis](const std::vector<Tensor>& in) { return gather(in[0], in[1], axis); };
}
Fn one_hot_of(int64_t depth, double on = 1.0, double off = 0.0, int axis = -1,
              DType dtype = float32) {
  return [=](const std::vector<Tensor>& in) { return one_hot(in[0], depth, on, off, axis, dtype); };
}

TG_OP_CASES(index_ops) {
  const Tensor f34 = constant({{0.f, 1.f, 2.f, 3.f}, {4.f, 5.f, 6.f, 7.f}, {8.f, 9.f, 10.f, 11.f}});
  const Tensor i232 = constant({{{0, 1}, {2, 3}, {4, 5}}, {{6, 7}, {8, 9}, {10, 11}}}, int64);
  const Tensor p23 = constant({{1, 2, 3}, {4, 5, 6}});
  return {
      // slice
      {"slice", "float32 2-D, size -1", slice_of({1, 1}, {2, -1}), {f34},
       constant({{5.f, 6.f, 7.f}, {9.f, 10.f, 11.f}})},
      {"slice", "whole rows are one run", slice_of({1, 0}, {2, 4}), {f34},
       constant({{4.f, 5.f, 6.f, 7.f}, {8.f, 9.f, 10.f, 11.f}})},
      {"slice", "int32 1-D", slice_of({2}, {2}), {constant({1, 2, 3, 4, 5})}, constant({3, 4})},
      {"slice", "int64 3-D strided", slice_of({0, 1, 0}, {2, 2, 1}), {i232},
       constant({{{2}, {4}}, {{8}, {10}}}, int64)},
      {"slice", "int64 3-D trailing -1", slice_of({1, 0, 0}, {1, -1, -1}), {i232},
       constant({{{6, 7}, {8, 9}, {10, 11}}}, int64)},
      {"slice", "float64", slice_of({1}, {-1}), {constant({1.0, 2.0, 3.0}, float64)},
       constant({2.0, 3.0}, float64)},
      {"slice", "bool", slice_of({0, 1}, {1, 1}), {constant({{true, false}, {true, true}})},
       constant({{false}})},
      {"slice", "string", slice_of({1, 0}, {1, 2}), {constant({{"a", "b"}, {"c", "d"}})},
       constant({{"c", "d"}})},
      {"slice", "size 0", slice_of({1, 0}, {0, 4}), {f34}, empty<float>({0, 4}, float32)},
      {"slice", "begin at the end, size -1", slice_of({3}, {-1}), {constant({1, 2, 3})},
       empty<int32_t>({0}, int32)},
      {"slice", "empty input", slice_of({0, 0}, {-1, 1}), {empty<float>({0, 2}, float32)},
       empty<float>({0, 1}, float32)},
      {"slice", "scalar", slice_of({}, {}), {constant(4)}, constant(4)},

      // gather
      {"gather", "float32 rows", gather_on(0),
       {constant({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}), constant({2, 0, 2})},
       constant({{5.f, 6.f}, {1.f, 2.f}, {5.f, 6.f}})},
      {"gather", "2-D int64 indices, axis 1", gather_on(1),
       {p23, constant({{0, 2}, {1, 1}}, int64)},
       constant({{{1, 3}, {2, 2}}, {{4, 6}, {5, 5}}})},
      {"gather", "axis -1", gather_on(-1), {p23, constant({2, 0})}, constant({{3, 1}, {6, 4}})},
      {"gather", "scalar index", gather_on(0), {constant({1.5, 2.5, 3.5}, float64), constant(1)},
       constant(2.5, float64)},
      {"gather", "int64 params", gather_on(0), {constant({10, 20, 30}, int64), constant({{2}, {0}})},
       constant({{30}, {10}}, int64)},
      {"gather", "bool", gather_on(0), {constant({true, false}), constant({1, 1, 0})},
       constant({false, false, true})},
      {"gather", "string", gather_on(0), {constant({"x", "y", "z"}), constant({2, 0}, int64)},
       constant({"z", "x"})},
      {"gather", "empty indices", gather_on(0), {p23, empty<int32_t>({0}, int32)},
       empty<int32_t>({0, 3}, int32)},
      {"gather", "empty params axis, no indices", gather_on(1),
       {empty<float>({2, 0}, float32), empty<int64_t>({0}, int64)}, empty<float>({2, 0}, float32)},

      // one_hot
      {"one_hot", "float32, out-of-range and negative give off", one_hot_of(3),
       {constant({0, 2, -1, 3})},
       constant({{1.f, 0.f, 0.f}, {0.f, 0.f, 1.f}, {0.f, 0.f, 0.f}, {0.f, 0.f, 0.f}})},
      {"one_hot", "axis 0", one_hot_of(3, 1.0, 0.0, 0), {constant({0, 2})},
       constant({{1.f, 0.f}, {0.f, 0.f}, {0.f, 1.f}})},
      {"one_hot", "2-D indices axis 1", one_hot_of(2, 1.0, 0.0, 1), {constant({{0, 1}, {1, 0}})},
       constant({{{1.f, 0.f}, {0.f, 1.f}}, {{0.f, 1.f}, {1.f, 0.f}}})},
      {"one_hot", "int64 indices, int32 on/off", one_hot_of(2, 5, -1, -1, int32),
       {constant({1, 0}, int64)}, constant({{-1, 5}, {5, -1}})},
      {"one_hot", "int64 dtype", one_hot_of(3, 7, 0, -1, int64), {constant(1)},
       constant({0, 7, 0}, int64)},
      {"one_hot", "float64", one_hot_of(2, 0.5, -0.5, -1, float64), {constant({1})},
       constant({{-0.5, 0.5}}, float64)},
      {"one_hot", "bool", one_hot_of(3, 1, 0, -1, bool_), {constant({2, 5})},
       constant({{false, false, true}, {false, false, false}})},
      {"one_hot", "depth 0", one_hot_of(0), {constant({0, 1})}, empty<float>({2, 0}, float32)},
      {"one_hot", "empty indices", one_hot_of(3), {empty<int32_t>({0}, int32)},
       empty<float>({0, 3}, float32)},
      {"one_hot", "axis == rank", one_hot_of(2, 1.0, 0.0, 1), {constant({1})},
       constant({{0.f, 1.f}})},
  };
}

TEST(IndexOps, SliceCopiesAndCanBeComposed) {
  Tensor x = reshape(range(24), {2, 3, 4});
  Tensor s = slice(x, {1, 1, 1}, {1, 2, 2});
  EXPECT_EQ(s.to_vector<int32_t>(), (std::vector<int32_t>{17, 18, 21, 22}));
  EXPECT_NE(s.impl()->buffer, x.impl()->buffer);
  // Slicing a view (x[1]) uses the view's offset.
  EXPECT_EQ(slice(x[1], {2, 0}, {1, -1}).to_vector<int32_t>(),
            (std::vector<int32_t>{20, 21, 22, 23}));
  Tensor strs = constant({"aa", "bb", "cc", "dd"});
  EXPECT_EQ(slice(strs, {1}, {2}).to_vector<std::string>(), (std::vector<std::string>{"bb", "cc"}));
}

TEST(IndexOps, GatherEqualsIndexingAndOneHotMatchesEquality) {
  Tensor p = reshape(range(12), {3, 4});
  Tensor g = gather(p, constant({{2, 1}, {0, 0}}));
  EXPECT_EQ(g.shape(), (TensorShape{2, 2, 4}));
  EXPECT_EQ(g[0][0].to_vector<int32_t>(), p[2].to_vector<int32_t>());
  EXPECT_EQ(g[1][1].to_vector<int32_t>(), p[0].to_vector<int32_t>());
  Tensor g1 = gather(p, constant({3}, int64), 1);
  EXPECT_EQ(g1.to_vector<int32_t>(), (std::vector<int32_t>{3, 7, 11}));
  // one_hot(i, depth)[.., d] == (i == d)
  Tensor idx = constant({3, 0, 4, 1});
  Tensor oh = one_hot(idx, 4, 1, 0, -1, bool_);
  for (int d = 0; d < 4; ++d)
    EXPECT_EQ(gather(oh, constant(d), 1).to_vector<bool>(), (idx == d).to_vector<bool>());
}

// Gathers, their gradients and broadcasts of 2 * 64K elements and more take ranges of rows on
// the pool's threads: the same bytes as a reference loop on one thread and on two.
TEST(IndexOps, LargeGathersAndBroadcastsGiveTheSameBytesOnOneAndTwoThreads) {
  const int threads_before = config::num_threads();
  const Tensor params = tg::testing::seeded_values({3000, 64}, float32, 7);
  const Tensor wide = tg::testing::seeded_values({3, 500, 96}, float32, 8);
  std::vector<int32_t> idx(64 * 50);
  for (std::size_t j = 0; j < idx.size(); ++j) idx[j] = static_cast<int32_t>((j * 7919) % 3000);
  const Tensor indices = constant(idx, TensorShape{64, 50}, int32);
  const std::vector<float> p = params.to_vector<float>(), w = wide.to_vector<float>();
  std::vector<float> rows, cols;  // gather along axis 0 of params, along axis 1 of wide
  for (int32_t i : idx) rows.insert(rows.end(), p.begin() + i * 64, p.begin() + (i + 1) * 64);
  for (int64_t o = 0; o < 3; ++o)
    for (int32_t i : idx) {
      const int64_t r = (o * 500 + i % 500) * 96;
      cols.insert(cols.end(), w.begin() + r, w.begin() + r + 96);
    }
  std::vector<int32_t> idx500(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) idx500[j] = idx[j] % 500;
  const Tensor indices500 = constant(idx500, TensorShape{64, 50}, int32);
  // Broadcasts of (64, 1, 64), (1, 50, 64) and (50, 64) to (64, 50, 64).
  const Tensor b_mid = tg::testing::seeded_values({64, 1, 64}, float32, 9);
  const Tensor b_first = tg::testing::seeded_values({1, 50, 64}, float32, 10);
  const Tensor b_low = tg::testing::seeded_values({50, 64}, float32, 11);
  std::vector<float> e_mid, e_first, e_low;
  const std::vector<float> m = b_mid.to_vector<float>(), f = b_first.to_vector<float>(), l = b_low.to_vector<float>();
  for (int64_t a = 0; a < 64; ++a)
    for (int64_t t = 0; t < 50; ++t)
      for (int64_t c = 0; c < 64; ++c) {
        e_mid.push_back(m[static_cast<std::size_t>(a * 64 + c)]);
        e_first.push_back(f[static_cast<std::size_t>(t * 64 + c)]);
        e_low.push_back(l[static_cast<std::size_t>(t * 64 + c)]);
      }
  // gather's gradient: rows added in index order (3200 rows into 3000, many repeated; and along
  // axis 1 of wide).
  const Tensor g_rows = tg::testing::seeded_values({64, 50, 64}, float32, 12);
  const Tensor g_cols = tg::testing::seeded_values({3, 64, 50, 96}, float32, 13);
  std::vector<float> e_rows(3000 * 64, 0.0f), e_cols(3 * 500 * 96, 0.0f);
  const std::vector<float> gr = g_rows.to_vector<float>(), gc = g_cols.to_vector<float>();
  for (std::size_t j = 0; j < idx.size(); ++j)
    for (std::size_t k = 0; k < 64; ++k) e_rows[static_cast<std::size_t>(idx[j]) * 64 + k] += gr[j * 64 + k];
  for (std::size_t o = 0; o < 3; ++o)
    for (std::size_t j = 0; j < idx500.size(); ++j)
      for (std::size_t k = 0; k < 96; ++k)
        e_cols[(o * 500 + static_cast<std::size_t>(idx500[j])) * 96 + k] += gc[(o * idx500.size() + j) * 96 + k];
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    config::set_num_threads(threads);
    EXPECT_TRUE(tg::testing::same_bits(detail::scatter_add_like(g_rows, indices, params, 0),
                                       constant(e_rows, TensorShape{3000, 64}, float32)));
    EXPECT_TRUE(tg::testing::same_bits(detail::scatter_add_like(g_cols, indices500, wide, 1),
                                       constant(e_cols, TensorShape{3, 500, 96}, float32)));
    EXPECT_TRUE(tg::testing::same_bits(gather(params, indices),
                                       constant(rows, TensorShape{64, 50, 64}, float32)));
    EXPECT_TRUE(tg::testing::same_bits(gather(wide, indices500, 1),
                                       constant(cols, TensorShape{3, 64, 50, 96}, float32)));
    const TensorShape to{64, 50, 64};
    const Tensor dims = constant({64, 50, 64});
    EXPECT_TRUE(tg::testing::same_bits(broadcast_to(b_mid, dims), constant(e_mid, to, float32)));
    EXPECT_TRUE(tg::testing::same_bits(broadcast_to(b_first, dims), constant(e_first, to, float32)));
    EXPECT_TRUE(tg::testing::same_bits(broadcast_to(b_low, dims), constant(e_low, to, float32)));
  }
  config::set_num_threads(threads_before);
}

// scatter_add_like writes each row once: a row's first term as 0 + term (what adding it to a
// row of zeros gave: -0.0 becomes +0.0), later terms added in index order, rows no index names
// zeros. A small case and one split over threads (32 rows of 32 x 512, as a loop gradient's
// stored rows), against sums worked out element by element, on 1 and 2 threads.
TEST(IndexOps, ScatterAddLikeWritesARowsFirstTermAsZeroPlusTerm) {
  const float nz = -0.0f;
  const Tensor g = constant({{nz, 2.f}, {nz, nz}, {1.f, nz}});
  const std::vector<float> small = detail::scatter_add_like(g, constant({2, 0, 2}), zeros({4, 2}), 0).to_vector<float>();
  // row 0: 0 + (-0, -0); row 2: (0 + (-0, 2)) + (1, -0); rows 1 and 3 not named.
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{6}, std::size_t{7}})
    EXPECT_TRUE(small[i] == 0.0f && !std::signbit(small[i])) << "element " << i;
  EXPECT_EQ(small[4], 1.0f);
  EXPECT_EQ(small[5], 2.0f);

  const int64_t rows = 32, inner = 32 * 512;
  std::vector<float> values = tg::testing::seeded_values({rows + 2, inner}, float32, 21).to_vector<float>();
  for (std::size_t k = 0; k < values.size(); k += 7) values[k] = nz;
  std::vector<int32_t> idx;
  for (int64_t j = 0; j < rows + 2; ++j) idx.push_back(static_cast<int32_t>((rows - 1 - j + rows) % rows));
  idx[5] = idx[9];  // one row twice, one row (idx 5's) never
  std::vector<float> expected(static_cast<std::size_t>(rows * inner), 0.0f);
  for (std::size_t j = 0; j < idx.size(); ++j)
    for (int64_t k = 0; k < inner; ++k)
      expected[static_cast<std::size_t>(idx[j] * inner + k)] += values[j * static_cast<std::size_t>(inner) + static_cast<std::size_t>(k)];
  const Tensor big = constant(values, TensorShape{rows + 2, 32, 512}, float32);
  const Tensor indices = constant(idx, TensorShape{rows + 2}, int32);
  const int threads = config::num_threads();
  for (int n : {1, 2}) {
    config::set_num_threads(n);
    EXPECT_TRUE(tg::testing::same_bits(detail::scatter_add_like(big, indices, zeros({rows, 32, 512}), 0),
                                       constant(expected, TensorShape{rows, 32, 512}, float32)))
        << n << " threads";
  }
  config::set_num_threads(threads);
}

TEST(IndexOpsTraced, GatherBoundsAreCheckedWhenTheGraphRuns) {
  auto f = function([](const Tensor& p, const Tensor& i) { return gather(p, i); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, float32),
                                                                TensorSpec({None}, int64)}});
  EXPECT_EQ(f(constant({1.f, 2.f, 3.f}), constant({2, 0}, int64)).to_vector<float>(),
            (std::vector<float>{3.f, 1.f}));
  EXPECT_THROW_MSG(f(constant({1.f, 2.f}), constant({2}, int64)), InvalidArgumentError,
                   "[gather]", "indices[0] = 2 is not in [0, 2)");
  auto s = function([](const Tensor& x) { return slice(x, {1}, {-1}); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, string_)}});
  EXPECT_EQ(s(constant({"a", "b", "c"})).to_vector<std::string>(),
            (std::vector<std::string>{"b", "c"}));
  EXPECT_THROW_MSG(s(constant(std::vector<std::string>{}, {0}, string_)), InvalidArgumentError,
                   "[slice]", "begin 1 to the end");
}

// ---- shape inference with unknown dims and ranks ----

detail::ValueType vt(TensorShape s, DType d = float32) { return {d, std::move(s)}; }
std::vector<detail::ValueType> infer(detail::OpId id, std::vector<detail::ValueType> in,
                                     const detail::OpAttrs& attrs) {
  return detail::op_def(id).infer(in, attrs);
}
const TensorShape unknown = TensorShape::unknown_rank();

TEST(IndexOpsInfer, Slice) {
  const detail::SliceAttrs a{{1, 0}, {-1, 2}};
  EXPECT_EQ(infer(detail::OpId::Slice, {vt({None, 5})}, a)[0].shape, (TensorShape{None, 2}));
  EXPECT_EQ(infer(detail::OpId::Slice, {vt({4, None})}, a)[0].shape, (TensorShape{3, 2}));
  EXPECT_EQ(infer(detail::OpId::Slice, {vt(unknown, string_)}, a)[0].shape, (TensorShape{None, 2}));
}

TEST(IndexOpsInfer, Gather) {
  const detail::AxisAttrs a{1};
  auto out = infer(detail::OpId::Gather, {vt({None, 5, 2}, string_), vt({None, 3}, int64)}, a);
  EXPECT_EQ(out[0].shape, (TensorShape{None, None, 3, 2}));
  EXPECT_EQ(out[0].dtype, string_);
  EXPECT_FALSE(infer(detail::OpId::Gather, {vt({4, 5}), vt(unknown, int32)}, a)[0].shape.has_rank());
  EXPECT_FALSE(infer(detail::OpId::Gather, {vt(unknown), vt({2}, int32)}, a)[0].shape.has_rank());
}

TEST(IndexOpsInfer, OneHot) {
  detail::OneHotAttrs a;
  a.depth = 4;
  a.axis = -1;
  a.dtype = int64;
  auto out = infer(detail::OpId::OneHot, {vt({None, 2}, int32)}, a);
  EXPECT_EQ(out[0].shape, (TensorShape{None, 2, 4}));
  EXPECT_EQ(out[0].dtype, int64);
  a.axis = 0;
  EXPECT_EQ(infer(detail::OpId::OneHot, {vt({None}, int64)}, a)[0].shape, (TensorShape{4, None}));
  EXPECT_FALSE(infer(detail::OpId::OneHot, {vt(unknown, int64)}, a)[0].shape.has_rank());
}

}  // namespace
}  // namespace tg
