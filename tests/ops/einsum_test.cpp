// tg::einsum against a naive reference written here (a loop over every assignment of the
// letters, in float64), eagerly, traced, traced and optimised, and traced with None dims.
#include <cmath>
#include <map>

#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

// out[output letters] = sum over the other letters of prod over operands of operand[its letters].
Tensor reference(const std::string& eq, const std::vector<Tensor>& operands) {
  const std::size_t arrow = eq.find("->");
  const std::string out = eq.substr(arrow + 2);
  std::vector<std::string> subs;
  std::string lhs = eq.substr(0, arrow);
  for (std::size_t start = 0;;) {
    const std::size_t c = lhs.find(',', start);
    subs.push_back(lhs.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  std::map<char, int64_t> size;
  std::string letters;
  for (std::size_t k = 0; k < subs.size(); ++k)
    for (std::size_t i = 0; i < subs[k].size(); ++i) {
      if (!size.count(subs[k][i])) letters += subs[k][i];
      size[subs[k][i]] = operands[k].shape().dims()[i];
    }
  std::vector<std::vector<double>> data;
  for (const Tensor& t : operands) data.push_back(cast(t, float64).to_vector<double>());
  std::vector<int64_t> out_dims;
  for (char c : out) out_dims.push_back(size[c]);
  int64_t out_n = 1;
  for (int64_t d : out_dims) out_n *= d;
  std::vector<double> result(static_cast<std::size_t>(out_n), 0.0);
  std::map<char, int64_t> at;
  for (char c : letters) at[c] = 0;
  while (true) {
    double p = 1.0;
    for (std::size_t k = 0; k < subs.size(); ++k) {
      int64_t flat = 0;
      for (std::size_t i = 0; i < subs[k].size(); ++i) flat = flat * size[subs[k][i]] + at[subs[k][i]];
      p *= data[k][static_cast<std::size_t>(flat)];
    }
    int64_t o = 0;
    for (char c : out) o = o * size[c] + at[c];
    result[static_cast<std::size_t>(o)] += p;
    std::size_t i = letters.size();
    while (i > 0 && ++at[letters[i - 1]] == size[letters[i - 1]]) at[letters[--i]] = 0;
    if (i == 0) break;
  }
  return cast(constant(result, TensorShape(out_dims), float64), operands[0].dtype());
}

struct Case {
  std::string eq;
  std::vector<std::vector<int64_t>> shapes;
  bool none_dims_ok = true;  // traceable with every dim None
};

const std::vector<Case> kCases = {
    {"ij,jk->ik", {{2, 3}, {3, 4}}},            // matmul
    {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},   // batched matmul
    {"ij,kj->ik", {{2, 3}, {4, 3}}},            // a times b transposed
    {"ji,jk->ki", {{3, 2}, {3, 4}}},            // output transposed
    {"i,j->ij", {{3}, {4}}},                    // outer
    {"i,i->", {{5}, {5}}},                      // dot
    {"ij,ij->ij", {{2, 3}, {2, 3}}},            // elementwise
    {"ij,ij->", {{2, 3}, {2, 3}}},              // Frobenius inner product
    {"ij,j->i", {{3, 4}, {4}}},                 // matrix-vector
    {"bi,bi->b", {{4, 3}, {4, 3}}},             // batched dot
    {"ij,jk->ki", {{2, 3}, {3, 4}}},
    {"abc,cd->abd", {{2, 3, 4}, {4, 5}}, false},  // M of two letters: a reshape
    {"ik,kj->", {{2, 3}, {3, 2}}},
    {"ijk,jl->il", {{2, 3, 4}, {3, 5}}},        // k summed in a alone first
    {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},  // attention scores
    {"ij->ji", {{2, 3}}},
    {"ij->i", {{2, 3}}},
    {"ij->", {{2, 3}}},
    {"ij->ij", {{2, 3}}},
    {"ii->", {{3, 3}}, false},                  // trace: the dim must be known
    {"ii->i", {{3, 3}}, false},                 // diagonal
    {"iij->j", {{2, 2, 3}}, false},
    {"ii,ij->j", {{3, 3}, {3, 2}}, false},
};

std::vector<Tensor> operands_of(const Case& c, DType dtype = float64) {
  std::vector<Tensor> ops;
  uint64_t seed = 1;
  // Quarters in [-4, 4]: the products and sums of these small cases are exact in every dtype.
  for (const auto& s : c.shapes)
    ops.push_back(testing::seeded_values(s, dtype, seed++, {.step = 1.0 / 16, .scale = 4.0}));
  return ops;
}

Tensor run(const std::string& eq, const std::vector<Tensor>& in) {
  return in.size() == 1 ? einsum(eq, in[0]) : einsum(eq, in[0], in[1]);
}

TEST(Einsum, MatchesTheReferenceEagerlyTracedAndOptimised) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.eq);
    const std::vector<Tensor> in = operands_of(c);
    const Tensor want = reference(c.eq, in);
    EXPECT_TENSOR_NEAR(run(c.eq, in), want, 1e-12);
    for (const bool optimize : {false, true}) {
      auto f = function([eq = c.eq](const std::vector<Tensor>& x) { return run(eq, x); }, {.optimize = optimize});
      EXPECT_TENSOR_NEAR(f(in), want, 1e-12);
    }
    if (c.none_dims_ok) {
      auto f = function([eq = c.eq](const std::vector<Tensor>& x) { return run(eq, x); });
      EXPECT_TENSOR_NEAR(f.get_concrete_function(testing::generalised_specs(in, /*unknown_rank=*/false))(in), want,
                         1e-12);
    }
  }
}

TEST(Einsum, IntegerAndFloat32Operands) {
  const Case c{"ij,jk->ik", {{3, 4}, {4, 2}}};
  for (DType d : {float32, int32, int64}) {
    const std::vector<Tensor> in = operands_of(c, d);
    EXPECT_TENSOR_NEAR(run(c.eq, in), reference(c.eq, in), 1e-6);
  }
}

TEST(Einsum, LowersOntoMatmul) {
  auto f = function([](const Tensor& a, const Tensor& b) { return einsum("bij,bjk->bik", a, b); });
  const std::string g = f.get_concrete_function(TensorSpec({None, 2, 3}, float32), TensorSpec({None, 3, 4}, float32))
                            .graph()
                            .to_string();
  EXPECT_NE(g.find("matmul"), std::string::npos) << g;
}

}  // namespace
}  // namespace tg
