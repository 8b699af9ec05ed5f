// Kinds of callables and literal arguments tg::function accepts.
#include <array>

#include "support/test_util.h"

namespace tg {
namespace {

enum class Mode { kTrain, kEval };

Tensor twice(const Tensor& x) { return x * 2; }

struct Scaler {
  int factor;
  Tensor operator()(const Tensor& x) const { return x * factor; }
};

TEST(Callables, FunctionPointersFunctorsAndGenericLambdas) {
  auto f = function(&twice);
  EXPECT_EQ(f(constant(3)).item<int32_t>(), 6);
  auto g = function(Scaler{5});
  EXPECT_EQ(g(constant(3)).item<int32_t>(), 15);
  int traces = 0;
  auto h = function([&](auto x, auto k) {
    ++traces;
    return x + k;
  });
  EXPECT_EQ(h(constant(1), 2).item<int32_t>(), 3);
  EXPECT_EQ(h(constant(1.5f), 2.5f).item<float>(), 4.0f);
  EXPECT_EQ(traces, 2);
}

TEST(Callables, LiteralKindsAndTheirSignatures) {
  auto f = function(
      [](const Tensor& x, Mode mode, bool training, double rate, std::array<int, 2> dims,
         const std::string& tag) {
        Tensor y = mode == Mode::kTrain && training ? x * rate : x;
        return reshape(y, {dims[0], dims[1]}) + (tag == "one" ? 1.0 : 0.0);
      },
      {.arg_names = {"x", "mode", "training", "rate", "dims", "tag"}});
  Tensor x = constant({1.0, 2.0, 3.0, 4.0}, float64);
  Tensor out = f(x, Mode::kTrain, true, 0.5, std::array<int, 2>{2, 2}, std::string("one"));
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1.5, 2.0, 2.5, 3.0}));
  f(x, Mode::kTrain, true, 0.5, std::array<int, 2>{2, 2}, std::string("one"));
  EXPECT_EQ(f.tracing_count(), 1);
  f(x, Mode::kEval, true, 0.5, std::array<int, 2>{2, 2}, std::string("one"));
  f(x, Mode::kEval, false, 0.5, std::array<int, 2>{2, 2}, std::string("one"));
  f(x, Mode::kEval, false, 0.25, std::array<int, 2>{2, 2}, std::string("one"));
  f(x, Mode::kEval, false, 0.25, std::array<int, 2>{4, 1}, std::string("one"));
  f(x, Mode::kEval, false, 0.25, std::array<int, 2>{4, 1}, std::string("two"));
  EXPECT_EQ(f.tracing_count(), 6);  // every changed literal is a new trace
  const std::string sig = f.concrete_functions()[0].pretty_printed_signature();
  EXPECT_NE(sig.find("mode (POSITIONAL_OR_KEYWORD): Literal[tg::(anonymous namespace)::Mode(0)]"), std::string::npos) << sig;
  EXPECT_NE(sig.find("training (POSITIONAL_OR_KEYWORD): Literal[True]"), std::string::npos) << sig;
  EXPECT_NE(sig.find("rate (POSITIONAL_OR_KEYWORD): Literal[0.5]"), std::string::npos) << sig;
  EXPECT_NE(sig.find("dims (POSITIONAL_OR_KEYWORD): Array[Literal[2], Literal[2]]"), std::string::npos) << sig;
  EXPECT_NE(sig.find("tag (POSITIONAL_OR_KEYWORD): Literal['one']"), std::string::npos) << sig;
}

TEST(Callables, IntAndLongLiteralsAreDifferentTypes) {
  auto f = function([](const Tensor& x, auto k) { return x * static_cast<int>(k); });
  f(constant(1), 2);
  f(constant(1), int64_t{2});
  EXPECT_EQ(f.tracing_count(), 2);
}

TEST(Callables, ContainerPlaceholdersAreNamedByPath) {
  auto f = function([](const std::vector<Tensor>& batch, const std::map<std::string, Tensor>& cfg) {
    return batch[0] + batch[1] * cfg.at("lr");
  }, {.arg_names = {"batch", "config"}});
  auto cf = f.get_concrete_function(std::vector<Tensor>{constant(1.0f), constant(2.0f)},
                                    std::map<std::string, Tensor>{{"lr", constant(0.1f)}});
  auto nodes = cf.graph().nodes();
  ASSERT_GE(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name, "batch_0");
  EXPECT_EQ(nodes[1].name, "batch_1");
  EXPECT_EQ(nodes[2].name, "config_lr");
}

}  // namespace
}  // namespace tg
