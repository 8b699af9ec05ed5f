// The guide's "Executing Python side effects", in C++: plain code runs while tracing,
// tg::print and Variable updates run at every call; symbolic tensors must not leak.
#include <tracegraph/tracegraph.h>

#include <iostream>

int main() {
  auto f = tg::function([](int x) {
    std::cout << "Traced with " << x << "\n";
    tg::print("Executed with", x);
  });
  f(1);
  f(1);
  f(2);

  std::vector<int> external_list;
  auto side_effect = tg::function([&](int x) {
    std::cout << "C++ side effect\n";
    external_list.push_back(x);
  });
  side_effect(1);
  side_effect(1);
  side_effect(1);
  std::cout << "// The push_back only happened once: external_list.size() = " << external_list.size() << "\n\n";

  struct Model {
    tg::Variable v{tg::constant(0)};
    int counter = 0;
  } m;
  auto call = tg::function([&] {
    if (m.counter == 0) {
      ++m.counter;  // a C++ side effect: runs only while tracing
      m.v.assign_add(1);
    }
    return m.v.read_value();
  });
  for (int n = 0; n < 3; ++n) std::cout << call().item<int32_t>() << "\n";  // 1, 2, 3

  tg::Tensor x;
  auto leaky_function = tg::function([&](const tg::Tensor& a) {
    x = a + 1;  // Bad - leaks local tensor
    return a + 2;
  });
  tg::Tensor correct_a = leaky_function(tg::constant(1));
  std::cout << "\n" << correct_a.item<int32_t>() << "  // Good - value obtained from the function's returns\n";
  try {
    std::cout << x.item<int32_t>();  // Bad - tensor leaked from inside the function
  } catch (const tg::TypeError& e) {
    std::cout << "tg::TypeError: " << e.what() << "\n";
  }

  std::cout << "\nWith tg::config::run_functions_eagerly(true) the body runs at every call:\n";
  tg::config::run_functions_eagerly(true);
  f(1);
  f(1);
  tg::config::run_functions_eagerly(false);
}
