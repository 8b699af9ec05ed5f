// The guide's "AutoGraph transformations", in C++. There is no source transformation: a C++
// `if` / `for` on a tensor runs while tracing, so in-graph control flow is written with
// tg::cond, tg::while_loop and tg::for_range, and loop results are accumulated in a
// tg::TensorArray.
#include <tracegraph/tracegraph.h>

#include <iostream>
#include <utility>
#include <vector>

namespace {

// "A simple loop": while tf.reduce_sum(x) > 1: tf.print(x); x = tf.tanh(x)
tg::Tensor simple_loop(const tg::Tensor& x) {
  return tg::while_loop([](const tg::Tensor& x) { return tg::reduce_sum(x) > 1.0f; },
                        [](const tg::Tensor& x) {
                          tg::print(x);
                          return tg::tanh(x);
                        },
                        x);
}

// "Conditionals": each if/elif on a tensor is a tg::cond; C++ output shows what is traced.
void fizzbuzz_body(const tg::Tensor& i) {
  std::cout << "Tracing for loop\n";
  tg::cond(i % 15 == 0, [] {
    std::cout << "Tracing fizzbuzz branch\n";
    tg::print("fizzbuzz");
  }, [&] {
    tg::cond(i % 3 == 0, [] {
      std::cout << "Tracing fizz branch\n";
      tg::print("fizz");
    }, [&] {
      tg::cond(i % 5 == 0, [] {
        std::cout << "Tracing buzz branch\n";
        tg::print("buzz");
      }, [&] {
        std::cout << "Tracing default branch\n";
        tg::print(i);
      });
    });
  });
}

template <class F, class... Args>
void measure_graph_size(const std::string& label, F& f, const Args&... args) {
  const tg::ConcreteFunction cf = f.get_concrete_function(args...);
  std::cout << label << " contains " << cf.graph().nodes().size() << " nodes in its graph\n";
}

// "Accumulating values in a loop": dynamic_rnn with a TensorArray.
tg::Tensor rnn_step(const tg::Tensor& inp, const tg::Tensor& state) { return inp + state; }

tg::Tensor dynamic_rnn(const tg::Tensor& input_data, const tg::Tensor& initial_state) {
  // [batch, time, features] -> [time, batch, features]
  const tg::Tensor data = tg::transpose(input_data, {1, 0, 2});
  // A tensor, not a C++ integer: the time dim may be None (a function traced once for every
  // sequence length).
  const tg::Tensor max_seq_len = tg::shape(data)[0];
  const tg::TensorArray states(tg::float32, max_seq_len);
  auto [state, out] = tg::for_range(
      max_seq_len, std::pair{initial_state, states},
      [&](const tg::Tensor& i, const std::pair<tg::Tensor, tg::TensorArray>& s) {
        tg::Tensor next = rnn_step(tg::gather(data, i), s.first);
        return std::pair{next, s.second.write(i, next)};
      });
  return tg::transpose(out.stack(), {1, 0, 2});
}

}  // namespace

int main() {
  std::cout << "# A simple loop\n";
  auto f = tg::function(simple_loop, {.name = "f"});
  std::cout << f(tg::random_uniform({5}, 0.0f, 1.0f, 42)) << "\n\n";

  // What the loop became (the guide prints AutoGraph's generated code): one while node whose
  // condition and body are sub-graphs.
  std::cout << f.get_concrete_function(tg::TensorSpec({5}, tg::float32)).graph().to_string() << "\n";

  std::cout << "# Conditionals\n";
  auto fizzbuzz = tg::function([](const tg::Tensor& n) {
    tg::for_range({1, n + 1}, fizzbuzz_body);
  }, {.name = "fizzbuzz"});
  fizzbuzz(tg::constant(5));
  fizzbuzz(tg::constant(20));

  std::cout << "\n# Loops: the graph of an unrolled C++ loop grows, a tg::for_range loop's does not\n";
  using Data = std::vector<std::pair<tg::Tensor, tg::Tensor>>;
  auto train_unrolled = tg::function([](const Data& dataset) {
    tg::Tensor loss = tg::constant(0);
    for (const auto& [x, y] : dataset) loss = loss + tg::abs(y - x);  // Some dummy computation.
    return loss;
  }, {.name = "train", .optimize = false});
  auto train = tg::function([](const tg::Tensor& xs, const tg::Tensor& ys) {
    return tg::for_range(tg::size(xs), tg::constant(0), [&](const tg::Tensor& i, const tg::Tensor& loss) {
      return loss + tg::abs(tg::gather(ys, i) - tg::gather(xs, i));  // Some dummy computation.
    });
  }, {.name = "train", .optimize = false});
  const Data small_data(3, {tg::constant(1), tg::constant(1)}), big_data(10, {tg::constant(1), tg::constant(1)});
  measure_graph_size("train(small_data: 3 pairs, a C++ loop)", train_unrolled, small_data);
  measure_graph_size("train(big_data: 10 pairs, a C++ loop)", train_unrolled, big_data);
  measure_graph_size("train(3 x int32 tensors)", train, tg::constant({1, 1, 1}), tg::constant({1, 1, 1}));
  measure_graph_size("train(10 x int32 tensors)", train, tg::constant(std::vector<int>(10, 1), {10}),
                     tg::constant(std::vector<int>(10, 1), {10}));

  std::cout << "\n# Accumulating values in a loop: dynamic_rnn with a TensorArray\n";
  const int batch_size = 2, seq_len = 3, feature_size = 4;
  // One trace serves every sequence length: the time dim is None in the signature.
  auto rnn = tg::function(
      dynamic_rnn, {.name = "dynamic_rnn",
                    .input_signature = std::vector<tg::TensorSpec>{
                        tg::TensorSpec({batch_size, tg::None, feature_size}, tg::float32),
                        tg::TensorSpec({batch_size, feature_size}, tg::float32)}});
  std::cout << rnn(tg::random_uniform({batch_size, seq_len, feature_size}, 0.0f, 1.0f, 7),
                   tg::zeros({batch_size, feature_size}))
            << "\n";
}
