// Uses the installed optional component tracegraph::dist; exits non-zero if a result is wrong.
// Run without a launcher, it is a job of one process.
#include <tracegraph/dist.h>
#include <tracegraph/tracegraph.h>

#include <iostream>

int main() {
  tg::dist::init();
  const tg::Tensor sum = tg::dist::all_reduce(tg::constant({1.0f, 2.0f}));
  std::cout << "consumer_dist: rank " << tg::dist::rank() << " of " << tg::dist::size() << ", all_reduce " << sum
            << "\n";
  const bool ok = tg::dist::size() == 1 && sum.to_vector<float>() == std::vector<float>{1.0f, 2.0f};
  tg::dist::finalize();
  return ok ? 0 : 1;
}
