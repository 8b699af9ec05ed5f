// Sparse gradients (TF's IndexedSlices): what GradientTape::sparse_gradient gives for gathered
// sources, the Variables' row updates, the optimizers' sparse rules (Keras's formulas written out
// here), clipping, and a traced embedding classifier trained, optimised and saved.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <unistd.h>

#include "core/tensor_impl.h"
#include "support/test_util.h"
#include "tracegraph/tracegraph.h"

namespace tg {
namespace {

using testing::same_bits;
using testing::tensors_near;

// `n` ids in [0, bound) from a fixed LCG, as an int32 tensor of `shape`.
Tensor ids_of(const TensorShape& shape, int64_t bound, uint64_t seed) {
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  uint64_t s = seed;
  for (double& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<double>((s >> 33) % static_cast<uint64_t>(bound));
  }
  return cast(constant(v, shape, float64), int32);
}

std::vector<float> row(const Tensor& t, int64_t r) {
  const int64_t width = t.shape().dim(1);
  const std::vector<float> all = t.to_vector<float>();
  return {all.begin() + r * width, all.begin() + (r + 1) * width};
}

// ---- the gradient ----

TEST(SparseGradients, AGatheredVariableGetsIndexedSlicesWithRepeatedIndicesKept) {
  Variable table(random_uniform(TensorShape{5, 3}, -1.0f, 1.0f, uint64_t{1}), "table");
  const Tensor ids = constant({{1, 3}, {1, 4}});
  const Tensor weights = random_uniform(TensorShape{2, 2, 3}, -1.0f, 1.0f, uint64_t{2});
  GradientTape tape;
  const Tensor loss = reduce_sum(gather(table, ids) * weights);
  const std::vector<Gradient> g = tape.sparse_gradient(loss, {table});
  ASSERT_EQ(g.size(), 1u);
  ASSERT_TRUE(g[0].is_sparse());
  const IndexedSlices& s = g[0].slices();
  EXPECT_TRUE(same_bits(s.indices(), constant({1, 3, 1, 4})));
  EXPECT_TRUE(same_bits(s.values(), reshape(weights, {4, 3})));  // d loss / d row = its weight
  EXPECT_EQ(s.dense_shape(), (TensorShape{5, 3}));
  EXPECT_THROW_MSG(g[0].dense(), TypeError, "IndexedSlices", "to_dense()");
  // Row 1 gathered twice: its rows add up in the dense form.
  const std::vector<float> w = weights.to_vector<float>();
  const std::vector<float> dense_row1 = row(g[0].to_dense(), 1);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(dense_row1[k], w[k] + w[6 + k]);
  EXPECT_EQ(row(g[0].to_dense(), 0), (std::vector<float>{0.0f, 0.0f, 0.0f}));
}

// deduplicated(): the distinct indices in order of first appearance, each row the sum of its
// repeats from zero in order (as unsorted_segment_sum adds, so a lone -0 becomes +0), over enough
// indices (strided, repeated, far apart) that any slip in the numbering shows.
TEST(SparseGradients, DeduplicatedSumsRepeatsInOrderOfFirstAppearance) {
  const int64_t n = 5000, width = 3;
  const Tensor ids = ids_of(TensorShape{n}, 700, 9) * 4096 + 7;
  const Tensor values = random_uniform(TensorShape{n, width}, -1.0f, 1.0f, uint64_t{3});
  const std::vector<int32_t> id = ids.to_vector<int32_t>();
  const std::vector<float> v = values.to_vector<float>();
  std::vector<int32_t> want_ids;
  std::vector<float> want;
  for (int64_t j = 0; j < n; ++j) {
    const auto at = std::find(want_ids.begin(), want_ids.end(), id[static_cast<std::size_t>(j)]);
    std::size_t p = static_cast<std::size_t>(at - want_ids.begin());
    if (at == want_ids.end()) {
      want_ids.push_back(id[static_cast<std::size_t>(j)]);
      want.insert(want.end(), width, 0.0f);
    }
    for (int64_t k = 0; k < width; ++k) want[p * width + k] += v[static_cast<std::size_t>(j * width + k)];
  }
  const IndexedSlices d = IndexedSlices(ids, values, TensorShape{700 * 4096 + 7, width}).deduplicated();
  EXPECT_EQ(d.indices().to_vector<int32_t>(), want_ids);
  EXPECT_TRUE(same_bits(d.values(), constant(want, TensorShape{static_cast<int64_t>(want_ids.size()), width})));

  const IndexedSlices zero = IndexedSlices(constant({2, 5, 2}), constant({{-0.0f}, {-0.0f}, {1.0f}}), TensorShape{6, 1})
                                 .deduplicated();
  EXPECT_TRUE(same_bits(zero.values(), constant({{1.0f}, {0.0f}})));
  EXPECT_FALSE(std::signbit(zero.values().to_vector<float>()[1]));
}

TEST(SparseGradients, ToDenseGivesTheDenseGradientsBitsForGatherAndEmbedding) {
  Variable table(random_uniform(TensorShape{50, 8}, -1.0f, 1.0f, uint64_t{3}), "table");
  const Tensor ids = ids_of(TensorShape{20, 10}, 50, 7);  // 200 ids into 50 rows: many repeats
  const Tensor upstream = random_uniform(TensorShape{20, 10, 8}, -1.0f, 1.0f, uint64_t{4});
  auto loss_of = [&] { return reduce_sum(square(gather(table, ids)) * upstream); };
  Tensor dense, sparse;
  {
    GradientTape tape;
    dense = tape.gradient(loss_of(), table);
  }
  {
    GradientTape tape;
    const std::vector<Gradient> g = tape.sparse_gradient(loss_of(), {table});
    ASSERT_TRUE(g[0].is_sparse());
    EXPECT_EQ(g[0].slices().indices().shape(), (TensorShape{200}));
    sparse = g[0].to_dense();
  }
  EXPECT_TRUE(same_bits(sparse, dense));

  nn::Embedding embedding(30, 4, /*seed=*/5);
  const Tensor tokens = ids_of(TensorShape{6, 7}, 30, 9);
  const Tensor target = random_uniform(TensorShape{6, 7, 4}, -1.0f, 1.0f, uint64_t{6});
  Tensor emb_dense;
  std::vector<Gradient> emb_sparse;
  {
    GradientTape tape;
    emb_dense = tape.gradient(reduce_mean(square(embedding(tokens) - target)), embedding.embeddings());
  }
  {
    GradientTape tape;
    emb_sparse = tape.sparse_gradient(reduce_mean(square(embedding(tokens) - target)), {embedding.embeddings()});
  }
  ASSERT_TRUE(emb_sparse[0].is_sparse());
  EXPECT_TRUE(same_bits(emb_sparse[0].to_dense(), emb_dense));
}

TEST(SparseGradients, SeveralGathersConcatenateAndADenseUseMakesTheGradientDense) {
  Variable table(random_uniform(TensorShape{6, 2}, -1.0f, 1.0f, uint64_t{8}), "table");
  const Tensor a = constant({0, 5}), b = constant({5, 2, 2});
  {
    GradientTape tape;
    const Tensor loss = reduce_sum(gather(table, a)) + reduce_sum(square(gather(table, b)));
    const std::vector<Gradient> g = tape.sparse_gradient(loss, {table});
    ASSERT_TRUE(g[0].is_sparse());
    EXPECT_EQ(g[0].slices().indices().shape(), (TensorShape{5}));
    std::multiset<int32_t> got;
    for (int32_t i : g[0].slices().indices().to_vector<int32_t>()) got.insert(i);
    EXPECT_EQ(got, (std::multiset<int32_t>{0, 5, 5, 2, 2}));
    GradientTape again;
    const Tensor dense = again.gradient(reduce_sum(gather(table, a)) + reduce_sum(square(gather(table, b))), table);
    EXPECT_TRUE(tensors_near(g[0].to_dense(), dense, 1e-6));
  }
  {
    GradientTape tape;
    const Tensor loss = reduce_sum(gather(table, a)) + reduce_sum(table * table);
    const std::vector<Gradient> g = tape.sparse_gradient(loss, {table});
    ASSERT_FALSE(g[0].is_sparse());
    GradientTape again;
    const Tensor dense = again.gradient(reduce_sum(gather(table, a)) + reduce_sum(table * table), table);
    EXPECT_TRUE(tensors_near(g[0].dense(), dense, 1e-6));
  }
  {
    // A gather along another axis, and a dense source, stay dense; unconnected sources are zeros.
    Variable other(constant({1.0f, 2.0f}), "other");
    GradientTape tape;
    const Tensor loss = reduce_sum(gather(table, constant({1}), 1));
    const std::vector<Gradient> g = tape.sparse_gradient(loss, {table, other});
    EXPECT_FALSE(g[0].is_sparse());
    EXPECT_TRUE(same_bits(g[1].dense(), zeros({2})));
  }
}

// ---- the Variables' row updates ----

TEST(SparseUpdates, ScatterOpsWriteOnlyTheNamedRows) {
  Variable v(constant({{1.0f, 2.0f}, {3.0f, 4.0f}, {5.0f, 6.0f}}), "v");
  v.scatter_add(IndexedSlices(constant({2, 2}), constant({{1.0f, 1.0f}, {0.5f, 0.5f}}), TensorShape{3, 2}));
  EXPECT_TRUE(same_bits(v.read_value(), constant({{1.0f, 2.0f}, {3.0f, 4.0f}, {6.5f, 7.5f}})));
  v.scatter_sub(IndexedSlices(constant({0}, int64), constant({{1.0f, 1.0f}}), TensorShape{3, 2}));
  EXPECT_TRUE(same_bits(v.read_value(), constant({{0.0f, 1.0f}, {3.0f, 4.0f}, {6.5f, 7.5f}})));
  const Tensor held = v.read_value();  // a held value never changes under its holder
  v.scatter_update(IndexedSlices(constant({1, 0}), constant({{9.0f, 9.0f}, {8.0f, 8.0f}}), TensorShape{3, 2}));
  EXPECT_TRUE(same_bits(v.read_value(), constant({{8.0f, 8.0f}, {9.0f, 9.0f}, {6.5f, 7.5f}})));
  EXPECT_TRUE(same_bits(held, constant({{0.0f, 1.0f}, {3.0f, 4.0f}, {6.5f, 7.5f}})));
  // Traced: ordered stateful ops, as assign.
  Variable w(zeros({4, 1}), "w");
  auto step = function([&](const Tensor& idx, const Tensor& rows) {
    w.scatter_add(IndexedSlices(idx, rows, TensorShape{4, 1}));
    w.scatter_sub(IndexedSlices(idx, rows * 0.5f, TensorShape{4, 1}));
    return w.read_value();
  });
  const Tensor out = step(constant({3, 1, 3}), constant({{2.0f}, {4.0f}, {6.0f}}));
  EXPECT_TRUE(same_bits(out, constant({{0.0f}, {2.0f}, {0.0f}, {4.0f}})));
  const std::string text = step.get_concrete_function(constant({3, 1, 3}), constant({{2.0f}, {4.0f}, {6.0f}}))
                               .graph()
                               .to_string();
  EXPECT_LT(text.find("scatter_add_variable"), text.find("scatter_sub_variable")) << text;
}

// Large enough to be split over threads (by destination rows): repeated rows still add in
// index order, so 1 and 2 threads give a serial loop's bits, for the scatter and for
// deduplicated() alike.
TEST(SparseUpdates, SplitScatterAndDeduplicationGiveTheSerialBits) {
  const int64_t rows = 900, width = 64, n = 6000;
  const Tensor ids = ids_of(TensorShape{n}, rows, 21);
  const Tensor values = random_uniform(TensorShape{n, width}, -1.0f, 1.0f, uint64_t{22});
  const Tensor start = random_uniform(TensorShape{rows, width}, -1.0f, 1.0f, uint64_t{23});
  std::vector<float> want = start.to_vector<float>();
  const std::vector<int32_t> id = ids.to_vector<int32_t>();
  const std::vector<float> v = values.to_vector<float>();
  for (int64_t j = 0; j < n; ++j)
    for (int64_t k = 0; k < width; ++k)
      want[static_cast<std::size_t>(id[static_cast<std::size_t>(j)] * width + k)] += v[static_cast<std::size_t>(j * width + k)];
  const int threads = config::num_threads();
  Tensor dedup_bits[2];
  for (int t : {1, 2}) {
    config::set_num_threads(t);
    Variable table(start, "table");
    const IndexedSlices slices(ids, values, TensorShape{rows, width});
    table.scatter_add(slices);
    EXPECT_TRUE(same_bits(table.read_value(), constant(want, TensorShape{rows, width}))) << t << " threads";
    dedup_bits[t - 1] = slices.deduplicated().values();
  }
  config::set_num_threads(threads);
  EXPECT_TRUE(same_bits(dedup_bits[0], dedup_bits[1]));
}

// ---- the optimizers ----

TEST(SparseOptimizers, SgdWritesOnlyTheNamedRowsWithRepeatsSummedAsTheDensePathDoes) {
  const Tensor init = random_uniform(TensorShape{6, 2}, -1.0f, 1.0f, uint64_t{10});
  Variable sparse_var(init, "sparse"), dense_var(init, "dense");
  const IndexedSlices g(constant({4, 1, 4}), constant({{0.5f, -1.0f}, {2.0f, 0.25f}, {-0.125f, 3.0f}}), TensorShape{6, 2});
  optim::SGD sparse_opt(0.1), dense_opt(0.1);
  sparse_opt.apply_gradients(std::vector<Gradient>{g}, {sparse_var});
  dense_opt.apply_gradients({g.to_dense()}, {dense_var});
  // Keras: the repeated rows summed, then var[i] += -g_i * lr.
  const float lr = 0.1f;
  const std::vector<float> w0 = init.to_vector<float>();
  std::vector<float> want = w0;
  for (int k = 0; k < 2; ++k) {
    const float g4 = (k ? -1.0f : 0.5f) + (k ? 3.0f : -0.125f);
    const float g1 = k ? 0.25f : 2.0f;
    want[8 + k] = w0[8 + k] + (-g4) * lr;
    want[2 + k] = w0[2 + k] + (-g1) * lr;
  }
  EXPECT_EQ(sparse_var.read_value().to_vector<float>(), want);
  EXPECT_TRUE(same_bits(sparse_var.read_value(), dense_var.read_value()));
  EXPECT_EQ(sparse_opt.iterations(), 1);
}

TEST(SparseOptimizers, SgdWithMomentumFollowsKerasSparseRule) {
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "momentum");
    Variable var(constant({{1.0f}, {2.0f}, {3.0f}}), "var");
    optim::SGD opt(0.5, 0.9, nesterov);
    std::vector<float> w{1.0f, 2.0f, 3.0f}, vel{0.0f, 0.0f, 0.0f};
    const std::vector<std::pair<int, float>> steps{{2, 1.0f}, {0, -2.0f}};
    for (const auto& step : steps) {
      opt.apply_gradients(std::vector<Gradient>{IndexedSlices(constant({step.first}), constant({{step.second}}),
                                                              TensorShape{3, 1})},
                          {var});
      const float add = -step.second * 0.5f;
      for (float& x : vel) x = x * 0.9f;
      vel[static_cast<std::size_t>(step.first)] += add;
      if (nesterov) {
        w[static_cast<std::size_t>(step.first)] += add;
        for (std::size_t i = 0; i < 3; ++i) w[i] += vel[i] * 0.9f;
      } else {
        for (std::size_t i = 0; i < 3; ++i) w[i] += vel[i];
      }
    }
    EXPECT_EQ(var.read_value().to_vector<float>(), w);
    EXPECT_EQ(opt.slot(var, "momentum").read_value().to_vector<float>(), vel);
  }
}

TEST(SparseOptimizers, AdamFollowsKerasSparseRule) {
  Variable var(constant({{0.5f, -0.5f}, {1.0f, 2.0f}, {-1.0f, 0.25f}}), "var");
  optim::Adam opt(0.01);
  std::vector<double> w{0.5, -0.5, 1.0, 2.0, -1.0, 0.25}, m(6, 0.0), v(6, 0.0);
  const double b1 = 0.9, b2 = 0.999, eps = 1e-7;
  // Step 1 touches row 0 twice (summed first) and row 2; step 2 only row 1: rows 0 and 2 still
  // move, through their decaying moments.
  const std::vector<std::pair<std::vector<int>, std::vector<float>>> steps{
      {{0, 2, 0}, {0.5f, -1.0f, 2.0f, 0.25f, -0.25f, 1.0f}}, {{1}, {3.0f, -3.0f}}};
  for (std::size_t t = 1; t <= steps.size(); ++t) {
    const auto& [idx, vals] = steps[t - 1];
    std::vector<double> rows(vals.begin(), vals.end());
    const auto n = static_cast<int64_t>(idx.size());
    const Tensor idx_t = cast(constant(std::vector<double>(idx.begin(), idx.end()), TensorShape{n}, float64), int32);
    const Tensor rows_t = cast(constant(rows, TensorShape{n, 2}, float64), float32);
    opt.apply_gradients(std::vector<Gradient>{IndexedSlices(idx_t, rows_t, TensorShape{3, 2})}, {var});
    std::vector<double> g(6, 0.0);
    for (std::size_t j = 0; j < idx.size(); ++j)
      for (int k = 0; k < 2; ++k) g[static_cast<std::size_t>(idx[j]) * 2 + k] += rows[j * 2 + k];
    std::set<int> touched(idx.begin(), idx.end());
    const double alpha = 0.01 * std::sqrt(1 - std::pow(b2, double(t))) / (1 - std::pow(b1, double(t)));
    for (std::size_t e = 0; e < 6; ++e) {
      m[e] -= m[e] * (1 - b1);
      v[e] -= v[e] * (1 - b2);
      if (touched.count(static_cast<int>(e / 2))) {
        m[e] += g[e] * (1 - b1);
        v[e] += g[e] * g[e] * (1 - b2);
      }
      w[e] -= m[e] * alpha / (std::sqrt(v[e]) + eps);
    }
  }
  EXPECT_TRUE(tensors_near(var.read_value(), cast(constant(w, TensorShape{3, 2}, float64), float32), 1e-5));
  EXPECT_TRUE(tensors_near(opt.slot(var, "m").read_value(), cast(constant(m, TensorShape{3, 2}, float64), float32), 1e-5));
  EXPECT_TRUE(tensors_near(opt.slot(var, "v").read_value(), cast(constant(v, TensorShape{3, 2}, float64), float32), 1e-5));
}

TEST(SparseOptimizers, RmspropFollowsKerasSparseRule) {
  for (const auto& [momentum, centered] : {std::pair{0.0, false}, std::pair{0.5, true}}) {
    SCOPED_TRACE(centered ? "momentum, centered" : "plain");
    const std::vector<double> init{0.5, -0.5, 1.0, 2.0, -1.0, 0.25};
    Variable var(cast(constant(init, TensorShape{3, 2}, float64), float32), "var");
    optim::RMSprop opt(0.01, 0.9, momentum, 1e-7, centered);
    std::vector<double> w = init, vel(6, 0.0), mom(6, 0.0), avg(6, 0.0);
    const double rho = 0.9, eps = 1e-7, lr = 0.01;
    const std::vector<std::pair<std::vector<int>, std::vector<double>>> steps{
        {{2, 0, 2}, {0.5, -1.0, 2.0, 0.25, -0.25, 1.0}}, {{1}, {3.0, -3.0}}};
    for (const auto& [idx, vals] : steps) {
      const auto n = static_cast<int64_t>(idx.size());
      const Tensor idx_t = cast(constant(std::vector<double>(idx.begin(), idx.end()), TensorShape{n}, float64), int32);
      opt.apply_gradients(std::vector<Gradient>{IndexedSlices(idx_t, cast(constant(vals, TensorShape{n, 2}, float64), float32),
                                                              TensorShape{3, 2})},
                          {var});
      std::vector<double> g(6, 0.0);  // repeated rows summed first
      for (std::size_t j = 0; j < idx.size(); ++j)
        for (int k = 0; k < 2; ++k) g[static_cast<std::size_t>(idx[j]) * 2 + k] += vals[j * 2 + k];
      const std::set<int> touched(idx.begin(), idx.end());
      for (std::size_t e = 0; e < 6; ++e) {
        const bool hit = touched.count(static_cast<int>(e / 2)) != 0;
        vel[e] = rho * vel[e] + (hit ? g[e] * g[e] * (1 - rho) : 0.0);
        avg[e] = rho * avg[e] + (hit ? g[e] * (1 - rho) : 0.0);
        const double increment = hit ? lr * g[e] / std::sqrt((centered ? vel[e] - avg[e] * avg[e] : vel[e]) + eps) : 0.0;
        if (momentum > 0) {
          mom[e] = momentum * mom[e] + increment;
          w[e] -= mom[e];
        } else {
          w[e] -= increment;
        }
      }
    }
    EXPECT_TRUE(tensors_near(var.read_value(), cast(constant(w, TensorShape{3, 2}, float64), float32), 1e-5));
    EXPECT_TRUE(tensors_near(opt.slot(var, "velocity").read_value(), cast(constant(vel, TensorShape{3, 2}, float64), float32), 1e-5));
    if (momentum == 0.0) {
      // Without momentum, a row no step touched is never written.
      Variable fresh(cast(constant(init, TensorShape{3, 2}, float64), float32), "fresh");
      optim::RMSprop again(0.01);
      again.apply_gradients(std::vector<Gradient>{IndexedSlices(constant({1}), constant({{1.0f, 1.0f}}), TensorShape{3, 2})},
                            {fresh});
      EXPECT_EQ(row(fresh.read_value(), 0), row(cast(constant(init, TensorShape{3, 2}, float64), float32), 0));
      EXPECT_EQ(row(fresh.read_value(), 2), row(cast(constant(init, TensorShape{3, 2}, float64), float32), 2));
    }
  }
}

TEST(SparseOptimizers, ClippingByGlobalNormCountsTheValuesAndKeepsTheSlices) {
  const IndexedSlices s(constant({1, 1}), constant({{3.0f}, {0.0f}}), TensorShape{4, 1});
  const std::vector<Gradient> grads{s, constant({4.0f})};
  const Tensor norm = optim::global_norm(grads);
  EXPECT_FLOAT_EQ(norm.item<float>(), 5.0f);
  auto [clipped, before] = optim::clip_by_global_norm(grads, 1.0);
  EXPECT_FLOAT_EQ(before.item<float>(), 5.0f);
  ASSERT_TRUE(clipped[0].is_sparse());
  EXPECT_TRUE(same_bits(clipped[0].slices().indices(), constant({1, 1})));
  EXPECT_TRUE(tensors_near(clipped[0].slices().values(), constant({{0.6f}, {0.0f}}), 1e-6));
  EXPECT_TRUE(tensors_near(clipped[1].dense(), constant({0.8f}), 1e-6));
}

// ---- a traced embedding classifier ----

// Stateful random ops draw anew at every call, even with an op seed (TF 2): one draw for all.
const Tensor& initial_w() {
  static const Tensor w = random_uniform(TensorShape{16, 4}, -0.5f, 0.5f, uint64_t{12});
  return w;
}

struct Classifier {
  nn::Embedding embedding{1000, 16, /*seed=*/11};
  Variable w{initial_w(), "w"};
  optim::SGD opt{2.0};

  Tensor step(const Tensor& ids, const Tensor& labels) {
    GradientTape tape;
    const Tensor pooled = reduce_mean(embedding(ids), {1});
    const Tensor logits = matmul(pooled, w);
    const Tensor loss = -reduce_mean(reduce_sum(labels * log_softmax(logits), {1}));
    const std::vector<Gradient> grads = tape.sparse_gradient(loss, {embedding.embeddings(), w});
    opt.apply_gradients(grads, {embedding.embeddings(), w});
    return loss;
  }
};

TEST(SparseTraining, ATracedEmbeddingClassifierTrainsAndTouchesOnlyItsRows) {
  const Tensor ids = ids_of(TensorShape{8, 5}, 200, 13);  // rows 200.. are never used
  const Tensor labels = one_hot(ids_of(TensorShape{8}, 4, 14), 4);
  Classifier eager, traced, plain;
  const Tensor table_before = eager.embedding.embeddings().read_value();
  auto traced_step = function([&](const Tensor& i, const Tensor& l) { return traced.step(i, l); },
                              {.name = "train_step"});
  auto plain_step = function([&](const Tensor& i, const Tensor& l) { return plain.step(i, l); },
                             {.name = "train_step_unoptimised", .optimize = false});
  std::vector<float> losses;
  for (int k = 0; k < 30; ++k) {
    const Tensor a = eager.step(ids, labels), b = traced_step(ids, labels), c = plain_step(ids, labels);
    EXPECT_TRUE(tensors_near(b, a, 1e-4)) << "step " << k;
    EXPECT_TRUE(tensors_near(c, a, 1e-4)) << "step " << k;
    losses.push_back(b.item<float>());
  }
  EXPECT_LT(losses.back(), 0.8f * losses.front());
  EXPECT_TRUE(tensors_near(traced.embedding.embeddings().read_value(), eager.embedding.embeddings().read_value(), 1e-4));
  EXPECT_TRUE(tensors_near(plain.embedding.embeddings().read_value(), eager.embedding.embeddings().read_value(), 1e-4));
  // The step writes the rows where the table lies (nothing else holds its value): no copy of
  // the table per step.
  const float* table_data = detail::data_of<float>(traced.embedding.embeddings().read_value());
  traced_step(ids, labels);
  EXPECT_EQ(detail::data_of<float>(traced.embedding.embeddings().read_value()), table_data);
  // Only the rows of the ids moved.
  std::set<int32_t> used;
  for (int32_t i : ids.to_vector<int32_t>()) used.insert(i);
  const Tensor table_after = traced.embedding.embeddings().read_value();
  for (int64_t r = 0; r < 1000; ++r)
    if (used.count(static_cast<int32_t>(r))) EXPECT_NE(row(table_after, r), row(table_before, r)) << r;
    else ASSERT_EQ(row(table_after, r), row(table_before, r)) << r;
  // No dense (1000, 16) gradient is built: the step scatters rows into the table.
  const std::string text = traced_step.get_concrete_function(ids, labels).graph().to_string();
  EXPECT_NE(text.find("scatter_add_variable"), std::string::npos) << text;
  EXPECT_EQ(text.find("scatter_add_like"), std::string::npos) << text;
}

TEST(SparseTraining, ASavedSparseTrainStepLoadsAndTrainsAsTheOriginal) {
  const Tensor ids = ids_of(TensorShape{8, 5}, 1000, 15);
  const Tensor labels = one_hot(ids_of(TensorShape{8}, 4, 16), 4);
  Classifier model;
  auto train_step = function([&](const Tensor& i, const Tensor& l) { return model.step(i, l); },
                             {.name = "train_step"});
  train_step(ids, labels);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tg_sparse_step_" + std::to_string(::getpid()) + ".tgx")).string();
  save(path, train_step);
  LoadedFunction loaded = load(path);
  std::remove(path.c_str());
  for (int k = 0; k < 3; ++k) {
    const Tensor original = train_step(ids, labels);
    const Tensor again = loaded(ids, labels);
    EXPECT_TRUE(same_bits(again, original)) << "step " << k;
  }
  // An id outside the vocabulary is the gather's typed error, traced or loaded.
  const Tensor bad = constant({{1, 2, 3, 4, 1000}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0},
                               {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}});
  EXPECT_THROW_MSG(train_step(bad, labels), InvalidArgumentError, "1000", "[0, 1000)");
  EXPECT_THROW_MSG(loaded(bad, labels), InvalidArgumentError, "1000", "[0, 1000)");
}

}  // namespace
}  // namespace tg
