// The guide's "Obtaining concrete functions" and "Obtaining graphs".
#include <tracegraph/tracegraph.h>

#include <iostream>

int main() {
  auto dbl = tg::function([](const tg::Tensor& a) { return a + a; },
                          {.name = "double", .arg_names = {"a"}});
  std::cout << "Obtaining concrete trace\n";
  auto double_strings = dbl.get_concrete_function(tg::constant("a"));
  std::cout << "Executing traced function\n";
  std::cout << double_strings(tg::constant("a")) << "\n" << double_strings(tg::constant("b")) << "\n\n";

  auto from_spec = dbl.get_concrete_function(tg::TensorSpec({}, tg::string_));
  std::cout << from_spec(tg::constant("c")) << "\n\n";

  std::cout << double_strings << "\n\n";
  std::cout << double_strings.function_type() << "\n\n";
  try {
    double_strings(tg::constant(1));
  } catch (const tg::TypeError& e) {
    std::cout << "Caught expected exception\n  tg::TypeError: " << e.what() << "\n\n";
  }

  auto pow = tg::function(
      [](const tg::Tensor& a, int b) {
        tg::Tensor r = a;
        for (int i = 1; i < b; ++i) r = r * a;
        return r;
      },
      {.arg_names = {"a", "b"}});
  auto square = pow.get_concrete_function(tg::TensorSpec(tg::TensorShape::unknown_rank(), tg::float32), 2);
  std::cout << square << "\n\n";
  std::cout << "square(10.0) = " << square(tg::constant(10.0f), 2) << "\n";
  try {
    square(tg::constant(10.0f), 3);
  } catch (const tg::TypeError& e) {
    std::cout << "Caught expected exception\n  tg::TypeError: " << e.what() << "\n\n";
  }

  for (const auto& node : double_strings.graph().nodes()) {
    std::cout << "[";
    for (std::size_t i = 0; i < node.inputs.size(); ++i) std::cout << (i ? ", " : "") << "'" << node.inputs[i] << "'";
    std::cout << "] -> " << node.name << "\n";
  }
}
