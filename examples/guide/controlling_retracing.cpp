// The guide's "Controlling retracing": input_signature, None dimensions, reduce_retracing,
// and literals versus tensors.
#include <tracegraph/tracegraph.h>

#include <iostream>

int main() {
  auto next_collatz = tg::function(
      [](const tg::Tensor& x) {
        std::cout << "Tracing with " << x << "\n";
        return tg::where(x % 2 == 0, x / 2, 3 * x + 1);
      },
      {.input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None}, tg::int32)},
       .arg_names = {"x"}});
  std::cout << next_collatz(tg::constant({1, 2})) << "\n";
  for (const tg::Tensor& bad : {tg::constant({{1, 2}, {3, 4}}), tg::constant({1.0f, 2.0f})}) {
    try {
      next_collatz(bad);
    } catch (const tg::TypeError& e) {
      std::cout << "Caught expected exception\n  tg::TypeError: " << e.what() << "\n";
    }
  }

  auto g = tg::function(
      [](const tg::Tensor& x) {
        std::cout << "Tracing with " << x << "\n";
        return x;
      },
      {.input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None}, tg::int32)},
       .arg_names = {"x"}});
  std::cout << "// No retrace!\n";
  std::cout << g(tg::constant({1, 2, 3})) << "\n" << g(tg::constant({1, 2, 3, 4, 5})) << "\n\n";

  auto h = tg::function(
      [](const tg::Tensor& x) {
        std::cout << "Tracing with " << x << "\n";
        return x;
      },
      {.reduce_retracing = true, .arg_names = {"x"}});
  std::cout << h(tg::range(1, 4)) << "\n";
  std::cout << h(tg::range(1, 6)) << "\n";
  std::cout << "// No more tracing!\n";
  std::cout << h(tg::range(1, 8)) << "\n" << h(tg::range(1, 10)) << "\n\n";

  // A literal argument is part of the type: each new value traces again.
  auto train = [](auto num_steps) {
    std::cout << "Tracing with num_steps = " << num_steps << "\n";
    tg::print("Executing with num_steps = ", num_steps);
  };
  auto train_literal = tg::function([&](int n) { train(n); }, {.name = "train", .arg_names = {"num_steps"}});
  auto train_tensor = tg::function([&](const tg::Tensor& n) { train(n); }, {.arg_names = {"num_steps"}});
  std::cout << "Retracing occurs for different C++ literal arguments.\n";
  train_literal(10);
  train_literal(20);
  std::cout << "\nTraces are reused for Tensor arguments.\n";
  train_tensor(tg::constant(10));
  train_tensor(tg::constant(20));
}
