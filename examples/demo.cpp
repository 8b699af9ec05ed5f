// The flagship demo (`./tg demo`). For now: a tour of eager tensors and ops; the training demo
// replaces it once tg::function and gradients land.
#include <tracegraph/tracegraph.h>

#include <algorithm>
#include <chrono>
#include <iostream>

namespace {

void section(const char* title) { std::cout << "\n== " << title << " ==\n"; }

template <class F>
double median_ns_per_call(F&& f, int calls) {
  std::vector<double> samples;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    const auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

int main() {
  section("Tensors print like TensorFlow's");
  tg::Tensor a = tg::ones({2, 2});
  std::cout << a + a << "\n";
  std::cout << tg::constant(1.1) + tg::constant(1.1) << "\n";
  std::cout << tg::constant("a") + tg::constant("a") << "\n";
  std::cout << tg::range(2000) << "\n";

  section("Broadcasting, and C++ scalars adopt the tensor's dtype");
  tg::Tensor col = tg::constant({{1}, {2}, {3}});
  tg::Tensor row = tg::constant({10, 20});
  std::cout << col * row + 1 << "\n";

  section("Integer division and modulo floor, as in TensorFlow");
  tg::Tensor n = tg::constant({-7, -1, 1, 7});
  std::cout << "n / 2 = " << n / 2 << "\nn % 3 = " << n % 3 << "\n";

  section("Linear algebra, reductions, softmax");
  tg::Tensor x = tg::random_uniform({4, 3}, -1.0f, 1.0f, /*seed=*/42);
  tg::Tensor w = tg::random_uniform({3, 2}, -1.0f, 1.0f, /*seed=*/7);
  tg::Tensor logits = tg::matmul(x, w);
  std::cout << "logits  = " << logits << "\n";
  std::cout << "softmax = " << tg::softmax(logits) << "\n";
  std::cout << "argmax  = " << tg::argmax(logits, 1) << "\n";
  std::cout << "mean    = " << tg::reduce_mean(logits, {0}) << "\n";

  section("Shape ops");
  tg::Tensor r = tg::reshape(tg::range(6), {2, -1});
  std::cout << "reshape: " << r << "\ntranspose: " << tg::transpose(r) << "\n";
  std::cout << "r[1] = " << r[1] << ", shape(r) = " << tg::shape(r) << "\n";
  std::cout << "one_hot: " << tg::one_hot(tg::constant({0, 2}), 3) << "\n";

  section("Bad input is a typed error that says what to do");
  try {
    (void)(tg::constant({1, 2}) + tg::constant({1.5f, 2.5f}));
  } catch (const tg::Error& e) {
    std::cout << e.code() << ": " << e.what() << "\n";
  }
  try {
    (void)tg::matmul(tg::ones({2, 3}), tg::ones({2, 3}));
  } catch (const tg::Error& e) {
    std::cout << e.code() << ": " << e.what() << "\n";
  }

  section("Eager op overhead");
  tg::Tensor s1 = tg::constant(1.0f), s2 = tg::constant(2.0f);
  const double ns = median_ns_per_call([&] { (void)(s1 + s2); }, 100000);
  std::cout << "scalar add, eager: " << ns << " ns per op (median of 7 runs)\n";
  return 0;
}
