// The guide's "Basics / Usage": a tg::function is used like any op.
#include <tracegraph/tracegraph.h>

#include <iostream>

int main() {
  auto add = tg::function([](const tg::Tensor& a, const tg::Tensor& b) { return a + b; });
  std::cout << add(tg::ones({2, 2}), tg::ones({2, 2})) << "\n";

  // "You can compute gradients": the traced add is differentiated through its graph.
  tg::Variable v(tg::constant(1.0f));
  tg::GradientTape tape;
  tg::Tensor result = add(v, tg::constant(1.0f));
  std::cout << tape.gradient(result, v) << "\n";

  auto dense_layer = [&](const tg::Tensor& x, const tg::Tensor& w, const tg::Tensor& b) {
    return add(tg::matmul(x, w), b);
  };
  std::cout << dense_layer(tg::ones({3, 2}), tg::ones({2, 2}), tg::ones({2})) << "\n";
}
