// The guide's "Depending on Python global and free variables" and "Creating tf.Variables".
#include <tracegraph/tracegraph.h>

#include <iostream>
#include <optional>

int main() {
  int foo = 1;
  auto buggy_add = tg::function([&] { return 1 + tg::constant(foo); });
  auto recommended_add = tg::function([](const tg::Tensor& f) { return 1 + f; });
  std::cout << "Buggy: " << buggy_add() << "\nCorrect: " << recommended_add(tg::constant(foo)) << "\n";
  std::cout << "Updating the value of `foo` to 100!\n";
  foo = 100;
  std::cout << "Buggy: " << buggy_add() << "\nCorrect: " << recommended_add(tg::constant(foo)) << "\n\n";

  tg::Variable foo_var(tg::constant(1));
  auto variable_add = tg::function([&] { return 1 + foo_var; });
  std::cout << "Variable: " << variable_add() << "\n";
  std::cout << "Updating the value of `foo` to 100!\n";
  foo_var.assign(100);
  std::cout << "Variable: " << variable_add() << "\n\n";

  struct BetterModel {
    tg::Variable bias{tg::constant(0.0f)};
    tg::Variable weight{tg::constant(2.0f)};
  };
  auto better_model = std::make_shared<BetterModel>();
  auto evaluate = tg::function([](std::shared_ptr<BetterModel> model, const tg::Tensor& x) {
    return model->weight * x + model->bias;
  });
  tg::Tensor x = tg::constant(10.0f);
  std::cout << evaluate(better_model, x) << "\n";
  std::cout << "Adding bias!\n";
  better_model->bias.assign_add(5.0f);
  std::cout << evaluate(better_model, x) << "  // This works, without retracing\n\n";

  auto f = tg::function([](const tg::Tensor&) { return tg::Variable(tg::constant(1.0f)).read_value(); });
  try {
    f(tg::constant(1.0f));
  } catch (const tg::ValueError& e) {
    std::cout << "Caught expected exception\n  tg::ValueError: " << e.what() << "\n\n";
  }

  std::optional<tg::Variable> count;
  auto c = tg::function([&] {
    if (!count) count.emplace(tg::constant(0));
    return count->assign_add(1);
  });
  std::cout << c() << "\n" << c() << "\n";
}
