// Uses only the installed public header; exits non-zero if the result is wrong.
#include <tracegraph/tracegraph.h>

#include <iostream>

int main() {
  tg::Tensor x = tg::constant({{1.0f, 2.0f}, {3.0f, 4.0f}});
  tg::Tensor y = tg::reduce_sum(tg::matmul(x, x) + 1.0f);
  std::cout << "consumer: " << y << "\n";
  return y.item<float>() == 58.0f ? 0 : 1;  // [[7,10],[15,22]] + 1 summed
}
