// einsum has no gradient rule of its own: it lowers to transpose, reshape, mul, matmul and
// reduce_sum, whose rules are checked op by op. These cases check the composition against
// central finite differences, eagerly and traced (exact shapes and, for the forms that allow
// it, None dims).
#include "autodiff/grad_check.h"

namespace tg {
namespace {

TEST(EinsumGradients, MatchFiniteDifferences) {
  testing::Random r(5);
  auto u = [&](TensorShape s) { return r.uniform(s); };
  auto two = [](std::string eq) {
    return [eq](const std::vector<Tensor>& in) { return einsum(eq, in[0], in[1]); };
  };
  auto one = [](std::string eq) { return [eq](const std::vector<Tensor>& in) { return einsum(eq, in[0]); }; };
  const std::vector<testing::GradCase> cases = {
      {"", "ij,jk->ik", two("ij,jk->ik"), {u({2, 3}), u({3, 4})}},
      {"", "bij,bjk->bik", two("bij,bjk->bik"), {u({2, 2, 3}), u({2, 3, 2})}},
      {"", "ij,kj->ik", two("ij,kj->ik"), {u({2, 3}), u({4, 3})}},
      {"", "i,j->ij", two("i,j->ij"), {u({3}), u({2})}},
      {"", "i,i->", two("i,i->"), {u({4}), u({4})}},
      {"", "ij,ij->ij", two("ij,ij->ij"), {u({2, 3}), u({2, 3})}},
      {"", "ijk,jl->il", two("ijk,jl->il"), {u({2, 3, 2}), u({3, 2})}},
      {"", "ij->ji", one("ij->ji"), {u({2, 3})}},
      {"", "ij->i", one("ij->i"), {u({2, 3})}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    testing::check_gradients(c);
  }
}

}  // namespace
}  // namespace tg
