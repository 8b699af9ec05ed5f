// The data-parallel demo (`./tg dist-demo`): the flagship demo's Fashion-MNIST MLP trained on
// every rank of an MPI job. Each rank reads its own shard of the training set, every rank starts
// from rank 0's weights, and the traced train_step averages the gradients across the ranks (one
// all_reduce per step, inside the graph) before Adam updates the weights - so every rank holds
// the same model, and a global batch of 128 trains as it does in one process.
//
//   mpirun -np 2 tg_dist_demo [DATA_DIR] [EPOCHS] [CHECKPOINT]
//
// CHECKPOINT: a file the weights are saved to after every epoch (by rank 0); when it exists at
// the start, training resumes from it (rank 0 restores it, then broadcasts the weights).
// The last line, printed by rank 0, is a RESULT line that ./tg dist-demo reads.
#include <tracegraph/dist.h>
#include <tracegraph/tracegraph.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "demo_util.h"

namespace {

using namespace demo;  // the helpers the demos share

constexpr int64_t kGlobalBatch = 128;

// What every rank prints starts with its rank, so that the interleaved output stays readable.
std::string tag() {
  std::ostringstream s;
  s << "[rank " << tg::dist::rank() << "/" << tg::dist::size() << "] ";
  return s.str();
}

// The sum over the ranks of a number (a collective: every rank calls it).
double sum_over_ranks(double v) { return tg::dist::all_reduce(tg::constant(v, tg::float64)).item<double>(); }
double max_over_ranks(double v) {
  return tg::dist::all_reduce(tg::constant(v, tg::float64), tg::dist::ReduceOp::kMax).item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  tg::dist::init();
  const int rank = tg::dist::rank(), size = tg::dist::size();
  const std::string dir = argc > 1 ? argv[1] : tg::data::kFashionMnistDir;
  const int epochs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const std::string checkpoint = argc > 3 ? argv[3] : "";
  if (kGlobalBatch % size != 0) {
    if (rank == 0) std::cout << "The global batch of " << kGlobalBatch << " must divide among " << size << " ranks\n";
    return 1;
  }
  const int64_t local_batch = kGlobalBatch / size;
  std::cout << std::fixed;

  tg::data::LabeledImages train, test;
  try {
    train = tg::dist::load_mnist_shard(dir, "train");
    test = tg::dist::load_mnist_shard(dir, "t10k");
  } catch (const tg::Error& e) {
    if (rank == 0)
      std::cout << "The Fashion-MNIST files are missing or unreadable:\n  " << e.what()
                << "\nInstall them with: sudo apt-get install dataset-fashion-mnist\n";
    return 1;
  }
  if (rank == 0)
    std::cout << "tracegraph data-parallel demo: " << size << " process" << (size == 1 ? "" : "es") << ", "
              << tg::config::num_threads() << " thread" << (tg::config::num_threads() == 1 ? "" : "s")
              << " each; global batch " << kGlobalBatch << " = " << size << " x " << local_batch << "\n";
  std::cout << tag() << "training shard: " << train.size() << " examples; test shard: " << test.size() << "\n";

  Mlp model;
  const std::vector<tg::Variable> vars = model.variables();
  if (!checkpoint.empty() && std::filesystem::exists(checkpoint)) {
    if (rank == 0) {
      tg::restore_variables(checkpoint, vars);
      std::cout << tag() << "resumed from the checkpoint " << checkpoint << "\n";
    }
  }
  // Every rank starts from rank 0's weights (its own initialiser may have drawn others).
  tg::dist::broadcast_variables(vars);
  tg::optim::Adam opt(1e-3);

  auto step_body = [&](const tg::Tensor& x, const tg::Tensor& y) {
    tg::Tensor loss, accuracy;
    std::vector<tg::Tensor> grads;
    {
      tg::dist::DistributedGradientTape tape;  // gradients averaged over the ranks
      const tg::Tensor logits = model(x);
      loss = tg::nn::sparse_softmax_cross_entropy(logits, y);
      grads = tape.gradient(loss, vars);
      accuracy = tg::nn::accuracy(logits, y);
    }
    opt.apply_gradients(grads, vars);
    return std::make_pair(loss, accuracy);
  };
  auto train_step = tg::function(
      [&](const tg::Tensor& x, const tg::Tensor& y) { return step_body(x, y); },
      {.name = "train_step",
       .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 784}, tg::float32),
                                                      tg::TensorSpec({tg::None}, tg::int32)},
       .arg_names = {"x", "y"}});

  std::mt19937 rng(2024 + static_cast<unsigned>(rank));
  std::vector<int32_t> order(static_cast<std::size_t>(train.size()));
  std::iota(order.begin(), order.end(), 0);
  const auto batch_size = static_cast<std::size_t>(local_batch);
  double examples_per_s = 0, test_accuracy = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    // The very first step runs eagerly: it creates Adam's slot Variables. Every rank's shard is
    // as large as the others', so every rank runs as many steps (the last batch is as small on
    // every rank, and the None batch dimension serves it without a retrace).
    if (epoch == 1) {
      auto [x, y] = batch(train, order, 0, batch_size);
      step_body(x, y);
    }
    const EpochTotals t = train_epoch(train_step, train, order, epoch == 1 ? batch_size : 0, batch_size);
    const auto n = static_cast<double>(t.examples);
    std::cout << tag() << "epoch " << epoch << "/" << epochs << ": loss " << std::setprecision(4) << t.loss_sum / n
              << "  train accuracy " << std::setprecision(1) << 100 * t.accuracy_sum / n << "%  "
              << std::setprecision(0) << n / t.seconds << " examples/s on this rank\n";
    // The job's figures: every rank's test shard, and the slowest rank's time.
    const double correct = tg::nn::accuracy(model(test.images), test.labels).item<float>() *
                           static_cast<double>(test.size());
    test_accuracy = sum_over_ranks(correct) / sum_over_ranks(static_cast<double>(test.size()));
    examples_per_s = sum_over_ranks(n) / max_over_ranks(t.seconds);
    if (rank == 0)
      std::cout << "epoch " << epoch << ": test accuracy " << std::setprecision(2) << 100 * test_accuracy
                << "% (all ranks' test shards), " << std::setprecision(0) << examples_per_s
                << " examples/s for the job\n";
    if (rank == 0 && !checkpoint.empty()) tg::save_variables(checkpoint, vars);
  }

  // What the collectives cost per step: the gradients' all_reduce alone, traced, on tensors of
  // the gradients' shapes - in one bucket, and one collective per gradient.
  std::vector<tg::Tensor> like;
  for (const tg::Variable& v : vars) like.push_back(tg::zeros_like(v.read_value()));
  auto reduce_ms = [&](int64_t bucket_bytes) {
    auto reduce = tg::function([bucket_bytes](const std::vector<tg::Tensor>& g) {
      return tg::dist::all_reduce_gradients(g, {.bucket_bytes = bucket_bytes});
    });
    return median_ms([&] { (void)reduce(like); }, 50);
  };
  const double bucketed = max_over_ranks(reduce_ms(64 << 20));
  const double per_tensor = max_over_ranks(reduce_ms(0));
  // Buckets matter when there are many small gradients (a deep model's biases and norms): 100
  // gradients of 1,024 floats.
  like.assign(100, tg::zeros({1024}));
  const double small_bucketed = max_over_ranks(reduce_ms(64 << 20));
  const double small_per_tensor = max_over_ranks(reduce_ms(0));
  auto [x, y] = batch(train, order, 0, static_cast<std::size_t>(local_batch));
  const double step_ms = max_over_ranks(median_ms([&] { (void)train_step(x, y).first.item<float>(); }, 30));
  if (rank == 0) {
    std::cout << std::setprecision(3) << "per step (median, slowest rank): train_step " << step_ms
              << " ms; its gradients' all_reduce alone (269,322 floats) " << bucketed << " ms in one bucket, "
              << per_tensor << " ms as " << vars.size() << " collectives; 100 gradients of 1,024 floats: "
              << small_bucketed << " ms in one bucket, " << small_per_tensor << " ms as 100 collectives\n";
    std::cout << std::setprecision(4) << "RESULT processes=" << size << " test_accuracy=" << test_accuracy
              << " examples_per_s=" << std::setprecision(0) << examples_per_s << std::setprecision(3)
              << " step_ms=" << step_ms << " allreduce_ms=" << bucketed << " allreduce_per_tensor_ms=" << per_tensor
              << " small100_bucket_ms=" << small_bucketed << " small100_per_tensor_ms=" << small_per_tensor << "\n";
  }
  tg::dist::finalize();
  return 0;
}
