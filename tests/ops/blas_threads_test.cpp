// OpenBLAS beside tracegraph's pool (kernels/gemm.cpp): a product sets OpenBLAS back to one
// thread and ends the workers another library made it start, which would otherwise spin in
// sched_yield on the cores the pool needs.
#include <cblas.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace tg {
namespace {

std::set<int> threads_of_this_process() {
  std::set<int> ids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    ids.insert(std::atoi(entry.path().filename().c_str()));
  return ids;
}

TEST(BlasThreads, AProductEndsTheWorkersAnotherLibraryStarted) {
  if (openblas_get_parallel() != 1) GTEST_SKIP() << "not OpenBLAS's own thread pool (its pthreads build)";
  const int threads_before = config::num_threads();
  config::set_num_threads(2);
  const Tensor a = random_uniform({256, 256}, -1, 1, 1);
  const Tensor warm = matmul(a, a);  // the pool's threads exist from here on
  const std::set<int> ours = threads_of_this_process();
  // Another library asks OpenBLAS for two threads and multiplies: OpenBLAS starts a worker.
  openblas_set_num_threads(2);
  const int n = 512;
  std::vector<float> x(static_cast<std::size_t>(n * n), 0.5f), y(x.size());
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, x.data(), n, x.data(), n, 0.0f, y.data(), n);
  std::vector<int> workers;
  for (int id : threads_of_this_process())
    if (!ours.count(id)) workers.push_back(id);
  ASSERT_FALSE(workers.empty()) << "OpenBLAS started no worker for a 512 x 512 product on two threads";
  // The next product, float32 (own kernels) or float64 (OpenBLAS), ends them.
  const Tensor p = matmul(cast(a, float64), cast(a, float64));
  EXPECT_EQ(openblas_get_num_threads(), 1);
  const std::set<int> after = threads_of_this_process();
  for (int id : workers) EXPECT_EQ(after.count(id), 0u) << "OpenBLAS's worker " << id << " still runs";
  // OpenBLAS still multiplies, on the calling thread.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, x.data(), n, x.data(), n, 0.0f, y.data(), n);
  EXPECT_EQ(y[0], 0.25f * static_cast<float>(n));
  EXPECT_EQ(p.shape(), warm.shape());
  config::set_num_threads(threads_before);
}

}  // namespace
}  // namespace tg
