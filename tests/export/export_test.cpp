// tg::save / tg::load: what a loaded function does - dispatch as the original, Variables that
// keep training, structures, control flow, gradients - and checkpoints.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

#include "support/test_util.h"

namespace tg {
namespace {

using testing::tensors_near;
using testing::throws_with;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "tg_export_" + std::to_string(::getpid()) + "_" + name;
}

// A file removed at the end of the test.
struct TempFile {
  explicit TempFile(const std::string& name) : path(temp_path(name)) {}
  ~TempFile() { std::remove(path.c_str()); }
  std::string path;
};

TEST(Export, AFunctionWithVariablesRoundTrips) {
  Variable w(constant({{1.0f, 2.0f}, {3.0f, 4.0f}}), "w");
  Variable b(constant({0.5f, -0.5f}), "b");
  auto dense = function([&](const Tensor& x) { return tanh(matmul(x, w) + b); }, {.name = "dense", .arg_names = {"x"}});
  const Tensor x = constant({{1.0f, 0.0f}, {0.0f, 1.0f}, {1.0f, 1.0f}});
  const Tensor expected = dense(x);
  TempFile file("dense.tgx");
  save(file.path, dense);
  LoadedFunction loaded = load(file.path);
  EXPECT_EQ(loaded.name(), "dense");
  EXPECT_EQ(loaded.producer().rfind("tracegraph ", 0), 0u) << loaded.producer();
  EXPECT_TRUE(tensors_near(loaded(x), expected, 0.0));
  ASSERT_EQ(loaded.signatures().size(), 1u);
  EXPECT_EQ(loaded.signatures()[0], "(x: TensorSpec(shape=(3, 2), dtype=tg.float32, name=None)) -> "
                                    "TensorSpec(shape=(3, 2), dtype=tg.float32, name=None)");
  std::vector<Variable> vars = loaded.variables();
  ASSERT_EQ(vars.size(), 2u);
  EXPECT_EQ(vars[0].name(), "w");
  EXPECT_EQ(vars[1].name(), "b");
  EXPECT_TRUE(tensors_near(vars[0].read_value(), w.read_value(), 0.0));
  // The loaded Variables are the loaded function's own: assigning one changes its results and
  // leaves the original alone.
  vars[1].assign(constant({0.0f, 0.0f}));
  EXPECT_TRUE(tensors_near(loaded(x), tanh(matmul(x, w.read_value())), 1e-6));
  EXPECT_TRUE(tensors_near(b.read_value(), constant({0.5f, -0.5f}), 0.0));
  // The graphs are the original's, and the optimiser ran on them again.
  const auto original = dense.concrete_functions()[0];
  const auto again = loaded.concrete_functions()[0];
  EXPECT_EQ(again.graph().nodes().size(), original.graph().nodes().size());
  EXPECT_EQ(again.optimized_graph().to_string(), original.optimized_graph().to_string());
}

TEST(Export, DispatchPicksTheMostSpecificSavedSignature) {
  // Traced for (3,) and, through a relaxed signature, for (None,): a (3,) call runs the exact
  // trace, a (5,) call the general one, as in the original.
  int traces = 0;
  auto f = function([&](const Tensor& x) {
    ++traces;
    return x.shape().is_fully_defined() ? x * 2.0f : x * 3.0f;
  }, {.name = "f", .arg_names = {"x"}});
  f(constant({1.0f, 1.0f, 1.0f}));
  f.get_concrete_function(TensorSpec({None}, float32));
  ASSERT_EQ(f.tracing_count(), 2);
  TempFile file("dispatch.tgx");
  save(file.path, f);
  LoadedFunction loaded = load(file.path);
  EXPECT_EQ(loaded.signatures().size(), 2u);
  EXPECT_TRUE(tensors_near(loaded(constant({1.0f, 1.0f, 1.0f})), constant({2.0f, 2.0f, 2.0f}), 0.0));
  EXPECT_TRUE(tensors_near(loaded(constant({1.0f, 1.0f, 1.0f, 1.0f, 1.0f})), constant({3.0f, 3.0f, 3.0f, 3.0f, 3.0f}), 0.0));
  // A dtype no signature takes: a TypeError listing every signature, never a trace.
  EXPECT_TRUE(throws_with<TypeError>([&] { loaded(constant({1, 2})); },
                                     {"Could not find matching concrete function", "'f'", "accepts the 2 signatures",
                                      "Option 1: (x: TensorSpec(shape=(3,), dtype=tg.float32, name=None))",
                                      "Option 2: (x: TensorSpec(shape=(None,), dtype=tg.float32, name=None))",
                                      "TensorSpec(shape=(2,), dtype=tg.int32, name=None)"}));
}

TEST(Export, LiteralArgumentsDispatchByValue) {
  auto power = function([](const Tensor& x, int n) {
    Tensor y = x;
    for (int i = 1; i < n; ++i) y = y * x;
    return y;
  }, {.name = "power", .arg_names = {"x", "n"}});
  const Tensor x = constant({2.0f, 3.0f});
  power(x, 2);
  power(x, 3);
  TempFile file("power.tgx");
  save(file.path, power);
  LoadedFunction loaded = load(file.path);
  EXPECT_TRUE(tensors_near(loaded(x, 2), constant({4.0f, 9.0f}), 0.0));
  EXPECT_TRUE(tensors_near(loaded(x, 3), constant({8.0f, 27.0f}), 0.0));
  EXPECT_TRUE(throws_with<TypeError>([&] { loaded(x, 4); }, {"Literal[4]", "Literal[2]", "Literal[3]"}));
  // A long is another C++ type than the int that traced (as the original tells them apart).
  EXPECT_THROW(loaded(x, 2L), TypeError);
}

TEST(Export, StructuredArgumentsAndResultsRoundTrip) {
  auto f = function([](const std::vector<Tensor>& xs, const std::tuple<Tensor, double>& t,
                       const std::map<std::string, Tensor>& named, const std::optional<Tensor>& maybe) {
    Tensor s = xs[0] + xs[1] + std::get<0>(t) * static_cast<float>(std::get<1>(t)) + named.at("bias");
    if (maybe) s = s + *maybe;
    return std::make_tuple(s, s * 2.0f);
  }, {.name = "structured"});
  const std::vector<Tensor> xs{constant({1.0f}), constant({2.0f})};
  const auto t = std::make_tuple(constant({3.0f}), 0.5);
  const std::map<std::string, Tensor> named{{"bias", constant({10.0f})}};
  auto [a, b] = f(xs, t, named, std::optional<Tensor>(constant({100.0f})));
  f(xs, t, named, std::optional<Tensor>());
  TempFile file("structured.tgx");
  save(file.path, f);
  LoadedFunction loaded = load(file.path);
  Outputs out = loaded(xs, t, named, std::optional<Tensor>(constant({100.0f})));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(tensors_near(out[0], a, 0.0));
  EXPECT_TRUE(tensors_near(out[1], b, 0.0));
  // Not one Tensor: reading it as one says what it is.
  EXPECT_TRUE(throws_with<TypeError>([&] { Tensor one = out; (void)one; }, {"2 tensors", "std::vector<Tensor>"}));
  const std::vector<Tensor> flat = loaded(xs, t, named, std::optional<Tensor>());
  EXPECT_TRUE(tensors_near(flat[0], constant({14.5f}), 0.0));
  // The double literal is part of the type: another value matches no signature.
  EXPECT_THROW(loaded(xs, std::make_tuple(constant({3.0f}), 0.25), named, std::optional<Tensor>()), TypeError);
}

TEST(Export, VariableArgumentsBindToTheCallersVariables) {
  auto step = function([](Variable v, const Tensor& delta) {
    v.assign_add(delta);
    return v.read_value() * 2.0f;
  }, {.name = "step"});
  Variable traced_with(constant({1.0f, 1.0f}), "traced_with");
  step(traced_with, constant({1.0f, 2.0f}));
  TempFile file("varargs.tgx");
  save(file.path, step);
  LoadedFunction loaded = load(file.path);
  EXPECT_TRUE(loaded.variables().empty());  // a parameter is not a Variable of the file
  ASSERT_EQ(loaded.variable_uses().size(), 1u);
  EXPECT_EQ(loaded.variable_uses()[0].argument_reads, std::vector<std::size_t>{0});  // assign_add reads too
  EXPECT_EQ(loaded.variable_uses()[0].argument_writes, std::vector<std::size_t>{0});
  EXPECT_TRUE(loaded.variable_uses()[0].reads.empty());
  Variable mine(constant({10.0f, 20.0f}), "mine");
  EXPECT_TRUE(tensors_near(loaded(mine, constant({1.0f, 1.0f})), constant({22.0f, 42.0f}), 0.0));
  EXPECT_TRUE(tensors_near(mine.read_value(), constant({11.0f, 21.0f}), 0.0));
  EXPECT_TRUE(tensors_near(traced_with.read_value(), constant({2.0f, 3.0f}), 0.0));
  Variable other_shape(constant({1.0f}), "other");
  EXPECT_TRUE(throws_with<TypeError>([&] { loaded(other_shape, constant({1.0f})); }, {"VariableSpec(shape=(2,)"}));
}

// A training step as a user writes it: a closed-over model and optimizer, a tape inside.
struct Model {
  Variable w{constant({{0.1f, -0.2f}, {0.3f, 0.4f}, {-0.5f, 0.6f}}), "w"};
  Variable b{constant({0.0f, 0.0f}), "b"};
  optim::Adam opt{0.05};
  Tensor logits(const Tensor& x) const { return matmul(x, w) + b; }
};

TEST(Export, ALoadedTrainStepKeepsTrainingAsTheOriginalWould) {
  Model m;
  auto train_step = function([&](const Tensor& x, const Tensor& y) {
    GradientTape tape;
    Tensor loss = reduce_mean(square(m.logits(x) - y));
    auto grads = tape.gradient(loss, {m.w, m.b});
    m.opt.apply_gradients(grads, {m.w, m.b});
    return loss;
  }, {.name = "train_step", .input_signature = std::vector<TensorSpec>{TensorSpec({None, 3}, float32), TensorSpec({None, 2}, float32)}});
  const Tensor x = constant({{1.0f, 2.0f, 3.0f}, {0.5f, -1.0f, 2.0f}, {-1.0f, 0.0f, 1.0f}, {2.0f, 2.0f, -2.0f}});
  const Tensor y = constant({{1.0f, 0.0f}, {0.0f, 1.0f}, {1.0f, 1.0f}, {-1.0f, 0.5f}});
  const float first_loss = train_step(x, y).item<float>();
  for (int i = 0; i < 2; ++i) train_step(x, y);
  TempFile file("train_step.tgx");
  save(file.path, train_step);
  LoadedFunction loaded = load(file.path);
  // Both continue from the same state: the same losses, step for step, bit for bit.
  for (int i = 0; i < 5; ++i) {
    const Tensor original = train_step(x, y);
    const Tensor again = loaded(x, y);
    EXPECT_TRUE(tensors_near(again, original, 0.0)) << "step " << i;
  }
  // The loaded Variables (model and optimizer state) moved as the originals did.
  std::map<std::string, Variable> by_name;
  for (const Variable& v : loaded.variables()) by_name.emplace(v.name(), v);
  ASSERT_TRUE(by_name.count("w") && by_name.count("b"));
  EXPECT_TRUE(tensors_near(by_name.at("w").read_value(), m.w.read_value(), 0.0));
  EXPECT_GT(loaded.variables().size(), 2u);  // Adam's step counter and moments came along
  // What the step reads and writes: w and b among both (the model is read, then updated).
  ASSERT_EQ(loaded.variable_uses().size(), 1u);
  const VariableUse& use = loaded.variable_uses()[0];
  const auto has = [](const std::vector<std::size_t>& list, const std::string& name, const std::vector<Variable>& vars) {
    for (std::size_t i : list)
      if (vars[i].name() == name) return true;
    return false;
  };
  EXPECT_TRUE(has(use.reads, "w", loaded.variables()) && has(use.writes, "w", loaded.variables()));
  EXPECT_TRUE(has(use.reads, "b", loaded.variables()) && has(use.writes, "b", loaded.variables()));
  EXPECT_GT(use.writes.size(), 2u);  // and Adam's moments and step counter
  // Training went on: the loss went down.
  EXPECT_LT(Tensor(loaded(x, y)).item<float>(), 0.8f * first_loss);
}

TEST(Export, ALoadedFunctionIsDifferentiable) {
  auto f = function([](const Tensor& x) { return reduce_sum(sin(x) * x); }, {.name = "f"});
  const Tensor x = constant({0.5f, 1.0f, 2.0f});
  f(x);
  TempFile file("grad.tgx");
  save(file.path, f);
  LoadedFunction loaded = load(file.path);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = loaded(x);
  const Tensor g = tape.gradient(y, x);
  EXPECT_TRUE(tensors_near(g, sin(x) + x * cos(x), 1e-6));
}

TEST(Export, ControlFlowRoundTrips) {
  auto f = function([](const Tensor& x, const Tensor& n) {
    Tensor y = cond(reduce_sum(x) > 0.0f, [&] { return x * 2.0f; }, [&] { return -x; });
    auto [i, acc] = while_loop([&](const Tensor& i, const Tensor&) { return i < n; },
                               [&](const Tensor& i, const Tensor& acc) { return std::make_tuple(i + 1, acc + y); },
                               std::make_tuple(constant(0), zeros_like(y)));
    return acc;
  }, {.name = "looping"});
  const Tensor pos = constant({1.0f, 2.0f}), neg = constant({-1.0f, -2.0f});
  const Tensor expect_pos = f(pos, constant(3)), expect_neg = f(neg, constant(2));
  TempFile file("control_flow.tgx");
  save(file.path, f);
  LoadedFunction loaded = load(file.path);
  EXPECT_TRUE(tensors_near(loaded(pos, constant(3)), expect_pos, 0.0));
  EXPECT_TRUE(tensors_near(loaded(neg, constant(2)), expect_neg, 0.0));
  EXPECT_TRUE(tensors_near(loaded(pos, constant(3)), constant({6.0f, 12.0f}), 0.0));
}

TEST(Export, AResavedLoadedFunctionKeepsItsTrainedValues) {
  Variable counter(constant(0.0f), "counter");
  auto tick = function([&](const Tensor& by) {
    counter.assign_add(by);
    return counter.read_value();
  }, {.name = "tick"});
  tick(constant(1.0f));
  TempFile first("tick1.tgx"), second("tick2.tgx");
  save(first.path, tick);
  LoadedFunction loaded = load(first.path);
  loaded(constant(5.0f));
  save(second.path, loaded);
  LoadedFunction again = load(second.path);
  EXPECT_EQ(Tensor(again(constant(1.0f))).item<float>(), 7.0f);
  EXPECT_EQ(Tensor(load(first.path)(constant(1.0f))).item<float>(), 2.0f);  // the first file is unchanged
  EXPECT_EQ(counter.read_value().item<float>(), 1.0f);
}

TEST(Export, SaveTakesTheChosenConcreteFunctions) {
  auto f = function([](const Tensor& x) { return x + 1.0f; }, {.name = "f"});
  f(constant(1.0f));
  f(constant({1.0f, 2.0f}));
  TempFile file("chosen.tgx");
  save(file.path, f, {f.concrete_functions()[1]});
  LoadedFunction loaded = load(file.path);
  ASSERT_EQ(loaded.signatures().size(), 1u);
  EXPECT_NE(loaded.signatures()[0].find("shape=(2,)"), std::string::npos);
  auto g = function([](const Tensor& x) { return x; });
  g(constant(1.0f));
  EXPECT_TRUE(throws_with<ValueError>([&] { save(file.path, f, {g.concrete_functions()[0]}); }, {"is not one of function 'f'"}));
}

TEST(Export, WhatCannotLeaveTheProcessIsAValueError) {
  auto never = function([](const Tensor& x) { return x; }, {.name = "never"});
  TempFile file("bad.tgx");
  EXPECT_TRUE(throws_with<ValueError>([&] { save(file.path, never); }, {"'never' has no concrete functions", "never traced"}));
  struct Config {
    float scale = 2.0f;
  };
  auto scaled = function([](const Tensor& x, const std::shared_ptr<Config>& c) { return x * c->scale; }, {.name = "scaled"});
  scaled(constant(1.0f), std::make_shared<Config>());
  EXPECT_TRUE(throws_with<ValueError>([&] { save(file.path, scaled); }, {"argument 'arg1'", "Object[", "cannot leave this process"}));
}

TEST(Export, ACallThatLeaksASymbolicTensorOrPassesASpecIsRefused) {
  auto f = function([](const Tensor& x) { return x * 2.0f; }, {.name = "f"});
  f(constant(1.0f));
  TempFile file("spec.tgx");
  save(file.path, f);
  LoadedFunction loaded = load(file.path);
  EXPECT_TRUE(throws_with<TypeError>([&] { loaded(TensorSpec({}, float32)); }, {"TensorSpec", "call it with tensors"}));
}

TEST(Export, MissingFilesAndNonFilesAreInvalidArguments) {
  EXPECT_TRUE(throws_with<InvalidArgumentError>([] { load("/nonexistent/model.tgx"); }, {"[tg::load]", "cannot open", "/nonexistent/model.tgx"}));
  EXPECT_TRUE(throws_with<InvalidArgumentError>([] { load("/tmp"); }, {"not a regular file"}));
}

TEST(Checkpoint, VariablesAreRestoredByName) {
  Variable w(constant({1.0f, 2.0f}), "w"), step(constant(int64_t{7}), "step");
  TempFile file("ckpt.tgx");
  save_variables(file.path, {w, step});
  Variable w2(constant({0.0f, 0.0f}), "w"), step2(constant(int64_t{0}), "step");
  restore_variables(file.path, {step2, w2});  // order does not matter, names do
  EXPECT_TRUE(tensors_near(w2.read_value(), w.read_value(), 0.0));
  EXPECT_EQ(step2.read_value().item<int64_t>(), 7);
  // A checkpoint is not a function.
  EXPECT_TRUE(throws_with<FormatError>([&] { load(file.path); }, {"checkpoint", "tg::restore_variables"}));
}

TEST(Checkpoint, MistakesChangeNoVariable) {
  Variable w(constant({1.0f, 2.0f}), "w");
  TempFile file("ckpt_errors.tgx");
  save_variables(file.path, {w});
  Variable a(constant({5.0f, 5.0f}), "w"), missing(constant(1.0f), "missing"), wrong(constant({1.0f, 2.0f, 3.0f}), "w");
  EXPECT_TRUE(throws_with<ValueError>([&] { restore_variables(file.path, {a, missing}); }, {"no Variable named 'missing'", "it has 'w'"}));
  EXPECT_TRUE(tensors_near(a.read_value(), constant({5.0f, 5.0f}), 0.0));  // nothing assigned
  EXPECT_TRUE(throws_with<ValueError>([&] { restore_variables(file.path, {wrong}); }, {"(3,)", "(2,)"}));
  Variable twin(constant(1.0f), "w");
  EXPECT_TRUE(throws_with<ValueError>([&] { save_variables(file.path, {w, twin}); }, {"both named 'w'", "unique name"}));
}

TEST(Checkpoint, AModelFileRestoresItsVariablesIntoATrainingLoop) {
  // Resuming: the Variables of a saved train_step go back into the program's own Variables.
  Variable w(constant({1.0f, 2.0f}), "w");
  auto f = function([&](const Tensor& x) { return w.assign_add(x); }, {.name = "f"});
  f(constant({1.0f, 1.0f}));
  TempFile file("model_ckpt.tgx");
  save(file.path, f);
  Variable fresh(constant({0.0f, 0.0f}), "w");
  restore_variables(file.path, {fresh});
  EXPECT_TRUE(tensors_near(fresh.read_value(), constant({2.0f, 3.0f}), 0.0));
}

}  // namespace
}  // namespace tg

namespace tg {
namespace {

// uint8 (dtype code 7) in signatures, graphs, constants and Variables.
TEST(Export, UInt8FunctionsRoundTrip) {
  Variable offset(constant({1, 2, 3}, uint8), "offset");
  const Tensor lut = constant({10, 20, 30}, uint8);
  auto f = function([&](const Tensor& img) { return std::pair{img + offset + lut, cast(img, float32) / 255.0f}; },
                    {.name = "bytes", .arg_names = {"img"}});
  const Tensor img = constant({250, 0, 128}, uint8);
  const auto [sum, scaled] = f(img);
  f.get_concrete_function(TensorSpec({None}, uint8));
  TempFile file("uint8.tgx");
  save(file.path, f);
  LoadedFunction loaded = load(file.path);
  bool mentions_uint8 = false;
  for (const std::string& s : loaded.signatures()) mentions_uint8 |= s.find("dtype=tg.uint8") != std::string::npos;
  EXPECT_TRUE(mentions_uint8);
  const Outputs out = loaded(img);
  EXPECT_TRUE(tensors_near(out[0], sum, 0.0));
  EXPECT_TRUE(tensors_near(out[0], constant({5, 22, 161}, uint8), 0.0));
  EXPECT_TRUE(tensors_near(out[1], scaled, 0.0));
  ASSERT_EQ(loaded.variables().size(), 1u);
  EXPECT_EQ(loaded.variables()[0].dtype(), uint8);
}

TEST(Export, UInt8Checkpoints) {
  Variable v(constant({7, 255}, uint8), "v");
  TempFile file("uint8.ckpt");
  save_variables(file.path, {v});
  Variable w(constant({0, 0}, uint8), "v");
  restore_variables(file.path, {w});
  EXPECT_TRUE(tensors_near(w.read_value(), constant({7, 255}, uint8), 0.0));
}

}  // namespace
}  // namespace tg
