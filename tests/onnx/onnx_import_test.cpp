// tg::import_onnx: models tracegraph exports read back (the same outputs), models PyTorch exports
// (tests/onnx/torch_models.py writes them and PyTorch's outputs; CTest runs OnnxTorch.* with
// TG_ONNX_TORCH_DIR set), single ops against values worked out from the ONNX spec, malformed
// files, and fine-tuning an imported model in a traced train_step.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <tracegraph/npy.h>
#include <tracegraph/onnx.h>
#include <tracegraph/tracegraph.h>

#include "support/allocation_counter.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;

fs::path scratch() {
  const fs::path dir = fs::temp_directory_path() / ("tg_onnx_import_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

tg::Tensor uniform(const tg::TensorShape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return tg::random_uniform(shape, lo, hi, seed);
}

// Elementwise |a - b| <= atol + rtol |b|, with the worst element in the message.
void expect_close(const tg::Tensor& got, const tg::Tensor& want, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape().to_string(), want.shape().to_string()) << what;
  const std::vector<double> a = tg::cast(got, tg::float64).to_vector<double>();
  const std::vector<double> b = tg::cast(want, tg::float64).to_vector<double>();
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double excess = std::abs(a[i] - b[i]) - (atol + rtol * std::abs(b[i]));
    if (!(excess <= worst)) {
      worst = std::isnan(excess) ? INFINITY : excess;
      at = i;
    }
  }
  EXPECT_LE(worst, 0.0) << what << ": element " << at << " is " << a[at] << ", expected " << b[at];
}

// ---- a small ModelProto builder for single-op and malformed models --------------------------

struct Model {
  onnx::ModelProto m;
  explicit Model(int64_t opset = 17) {
    m.set_ir_version(8);
    m.set_producer_name("test");
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m.mutable_graph()->set_name("g");
  }
  onnx::GraphProto& g() { return *m.mutable_graph(); }
  // dims: -1 is a symbolic dim.
  void input(const std::string& name, int elem, const std::vector<int64_t>& dims) { value(*g().add_input(), name, elem, dims); }
  void output(const std::string& name) { g().add_output()->set_name(name); }
  void output(const std::string& name, int elem, const std::vector<int64_t>& dims) { value(*g().add_output(), name, elem, dims); }
  static void value(onnx::ValueInfoProto& v, const std::string& name, int elem, const std::vector<int64_t>& dims) {
    v.set_name(name);
    auto* t = v.mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* s = t->mutable_shape();
    for (int64_t d : dims) {
      if (d < 0) s->add_dim()->set_dim_param(name + "_n");
      else s->add_dim()->set_dim_value(d);
    }
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out) {
    auto* n = g().add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g().node_size()));
    for (const auto& s : in) n->add_input(s);
    for (const auto& s : out) n->add_output(s);
    return *n;
  }
  onnx::TensorProto& floats(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
    return *t;
  }
  onnx::TensorProto& ints(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
    return *t;
  }
  std::string bytes() const {
    std::string s;
    m.SerializeToString(&s);
    return s;
  }
  tg::LoadedFunction load(const tg::OnnxImportOptions& o = {}) const {
    const std::string s = bytes();
    return tg::import_onnx_from_memory(s.data(), s.size(), o);
  }
};

void attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void attr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

constexpr int kF = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

// ---- round trips: what tracegraph exports imports back -------------------------------------

struct SmallMlp {
  tg::nn::Dense hidden1{12, 16, tg::relu, /*seed=*/1, tg::float32, "hidden1"};
  tg::nn::Dense hidden2{16, 16, tg::relu, /*seed=*/2, tg::float32, "hidden2"};
  tg::nn::Dense logits{16, 5, nullptr, /*seed=*/3, tg::float32, "logits"};
  tg::Tensor operator()(const tg::Tensor& x) const { return logits(hidden2(hidden1(x))); }
};

TEST(OnnxImport, ExportedMlpImportsBackWithNoneBatch) {
  SmallMlp model;
  auto predict = tg::function([&](const tg::Tensor& x) { return tg::softmax(model(x)); },
                              {.name = "predict",
                               .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 12}, tg::float32)},
                               .arg_names = {"x"}});
  const std::string path = (scratch() / "mlp.onnx").string();
  predict.get_concrete_function(tg::TensorSpec({tg::None, 12}, tg::float32));
  tg::export_onnx(path, predict);
  const tg::LoadedFunction imported = tg::import_onnx(path);
  for (int64_t batch : {3, 6}) {
    const tg::Tensor x = uniform({batch, 12}, 100 + static_cast<uint64_t>(batch));
    expect_close(imported(x), predict(x), 1e-6, 1e-7, "mlp batch " + std::to_string(batch));
  }
  ASSERT_EQ(imported.signatures().size(), 1u);
  EXPECT_NE(imported.signatures()[0].find("(x: TensorSpec(shape=(None, 12), dtype=tg.float32"), std::string::npos)
      << imported.signatures()[0];
  EXPECT_TRUE(imported.variables().empty());
  // The dispatch of a loaded function: a call no signature accepts lists the signature.
  try {
    imported(tg::ones({2, 11}));
    FAIL() << "a (2, 11) input was accepted";
  } catch (const tg::TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("(None, 12)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(imported(tg::ones({2, 12}, tg::float64)), tg::TypeError);
}

TEST(OnnxImport, ExportedCnnImportsBack) {
  tg::nn::Conv2D conv1{1, 4, {3}, {.padding = tg::Padding::Same, .activation = tg::relu, .seed = 11, .name = "conv1"}};
  tg::nn::Conv2D conv2{4, 6, {3}, {.strides = {2}, .padding = tg::Padding::Valid, .activation = tg::relu, .seed = 12, .name = "conv2"}};
  tg::nn::Dense dense{6, 3, nullptr, /*seed=*/13, tg::float32, "dense"};
  auto predict = tg::function(
      [&](const tg::Tensor& x) {
        tg::Tensor h = tg::max_pool2d(conv1(x), {2}, {2}, tg::Padding::Valid);  // (b, 5, 5, 4)
        h = tg::avg_pool2d(conv2(h), {2}, {1}, tg::Padding::Same);               // (b, 2, 2, 6)
        return dense(tg::reduce_mean(h, {1, 2}));
      },
      {.name = "cnn", .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 10, 10, 1}, tg::float32)}});
  predict.get_concrete_function(tg::TensorSpec({tg::None, 10, 10, 1}, tg::float32));
  const std::string path = (scratch() / "cnn.onnx").string();
  tg::export_onnx(path, predict);
  const tg::LoadedFunction imported = tg::import_onnx(path);
  const tg::Tensor x = uniform({3, 10, 10, 1}, 7);
  expect_close(imported(x), predict(x), 1e-5, 1e-6, "cnn");
}

// A pre-norm transformer block: layer norm, one-head self-attention, a gelu MLP, residuals.
TEST(OnnxImport, ExportedTransformerBlockImportsBack) {
  const tg::Tensor wq = uniform({8, 8}, 1), wk = uniform({8, 8}, 2), wv = uniform({8, 8}, 3), wo = uniform({8, 8}, 4);
  const tg::Tensor w1 = uniform({8, 16}, 5), w2 = uniform({16, 8}, 6), gamma = uniform({8}, 8, 0.5f, 1.5f);
  auto norm = [&](const tg::Tensor& x) {
    const tg::Tensor mean = tg::reduce_mean(x, {-1}, true);
    const tg::Tensor var = tg::reduce_mean(tg::square(x - mean), {-1}, true);
    return (x - mean) * tg::rsqrt(var + 1e-5f) * gamma;
  };
  auto block = tg::function(
      [&](const tg::Tensor& x) {
        const tg::Tensor h = norm(x);
        const tg::Tensor q = tg::matmul(h, wq), k = tg::matmul(h, wk), v = tg::matmul(h, wv);
        const tg::Tensor scores = tg::softmax(tg::matmul(q, k, false, true) / std::sqrt(8.0f));
        const tg::Tensor a = x + tg::matmul(tg::matmul(scores, v), wo);
        return a + tg::matmul(tg::gelu(tg::matmul(norm(a), w1)), w2);
      },
      {.name = "block", .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 5, 8}, tg::float32)}});
  block.get_concrete_function(tg::TensorSpec({tg::None, 5, 8}, tg::float32));
  const std::string path = (scratch() / "block.onnx").string();
  tg::export_onnx(path, block);
  const tg::LoadedFunction imported = tg::import_onnx(path);
  const tg::Tensor x = uniform({2, 5, 8}, 9);
  expect_close(imported(x), block(x), 1e-5, 1e-6, "transformer block");
}

// ---- models exported by PyTorch ------------------------------------------------------------

fs::path torch_dir() {
  const char* env = std::getenv("TG_ONNX_TORCH_DIR");
  return env ? fs::path(env) : fs::path();
}

void check_torch_model(const std::string& name, const std::string& input) {
  const fs::path dir = torch_dir();
  if (dir.empty()) GTEST_SKIP() << "TG_ONNX_TORCH_DIR is not set; CTest's onnx_torch_import runs this with PyTorch's models";
  const tg::LoadedFunction model = tg::import_onnx((dir / (name + ".onnx")).string());
  for (const std::string run : {"", "2"}) {
    const tg::Tensor x = tg::load_npy((dir / (name + ".in" + run + "." + input + ".npy")).string());
    const tg::Tensor want = tg::load_npy((dir / (name + ".out" + run + ".0.npy")).string());
    expect_close(model(x), want, 1e-4, 1e-5, name + " run '" + run + "'");
  }
}

TEST(OnnxTorch, Mlp) { check_torch_model("torch_mlp", "x"); }
TEST(OnnxTorch, CnnWithBatchNormAndPooling) { check_torch_model("torch_cnn", "images"); }
TEST(OnnxTorch, TransformerEncoderLayer) { check_torch_model("torch_encoder", "tokens"); }
// torch.jit.script'ed loops and an if: Loop with a trip count from a shape, If, Loop with a condition.
TEST(OnnxTorch, ScriptedLoopsAndIf) { check_torch_model("torch_control_flow", "x"); }
// The same model fine-tuned: its Linear layer is read inside the Loop's body.
TEST(OnnxTorch, ScriptedLoopsFineTune) {
  const fs::path dir = torch_dir();
  if (dir.empty()) GTEST_SKIP() << "TG_ONNX_TORCH_DIR is not set; CTest's onnx_torch_import runs this with PyTorch's models";
  tg::OnnxImportOptions options;
  options.initializers_as_variables = true;
  const tg::LoadedFunction model = tg::import_onnx((dir / "torch_control_flow.onnx").string(), options);
  std::vector<tg::Variable> vars;
  for (const tg::Variable& v : model.variables())
    if (v.name().rfind("lin.", 0) == 0) vars.push_back(v);
  ASSERT_EQ(vars.size(), 2u);  // lin.weight, lin.bias
  const tg::Tensor x = tg::load_npy((dir / "torch_control_flow.in.x.npy").string());
  const tg::Tensor target = tg::zeros({3, 8}) + 0.02f;
  auto train_step = tg::function([&](const tg::Tensor& xb) {
    tg::GradientTape tape;
    const tg::Tensor loss = tg::reduce_sum(tg::square(tg::Tensor(model(xb)) - target));
    const std::vector<tg::Tensor> grads = tape.gradient(loss, vars);
    for (std::size_t i = 0; i < vars.size(); ++i) {
      tg::Variable v = vars[i];
      v.assign_sub(grads[i] * 0.05f);
    }
    return loss;
  });
  const float first = train_step(x).item<float>();
  float last = first;
  for (int step = 0; step < 8; ++step) last = train_step(x).item<float>();
  EXPECT_EQ(train_step.tracing_count(), 1);
  EXPECT_LT(last, first);
}
// How many nodes of op `op` the traced graph of `f`'s (single) concrete function holds.
int count_ops(const tg::LoadedFunction& f, const std::string& op) {
  int n = 0;
  for (const tg::ConcreteFunction& cf : f.concrete_functions())
    for (const auto& node : cf.graph().nodes()) n += node.op == op;
  return n;
}

// The importer keeps activations channels-last between convolutions: one transpose at the input,
// at most one more where the NCHW value leaves (the flatten before the classifier).
void expect_few_transposes(const std::string& name) {
  const fs::path dir = torch_dir();
  if (dir.empty()) GTEST_SKIP() << "TG_ONNX_TORCH_DIR is not set; CTest's onnx_torch_import runs this with PyTorch's models";
  const tg::LoadedFunction model = tg::import_onnx((dir / (name + ".onnx")).string());
  EXPECT_GE(count_ops(model, "conv2d"), 10) << name;
  EXPECT_LE(count_ops(model, "transpose"), 2) << name;
}

TEST(OnnxTorch, Resnet18) {
  if (!torch_dir().empty() && !fs::exists(torch_dir() / "torch_resnet18.onnx"))
    GTEST_SKIP() << "python3-torchvision is not installed: no resnet18";
  check_torch_model("torch_resnet18", "images");
  expect_few_transposes("torch_resnet18");
}
TEST(OnnxTorch, MobilenetV2) {
  if (!torch_dir().empty() && !fs::exists(torch_dir() / "torch_mobilenet_v2.onnx"))
    GTEST_SKIP() << "python3-torchvision is not installed: no mobilenet_v2";
  check_torch_model("torch_mobilenet_v2", "images");
  expect_few_transposes("torch_mobilenet_v2");
}

// ---- single ops against the spec -----------------------------------------------------------

TEST(OnnxImportOps, IntegerDivTruncatesTowardZero) {
  Model m;
  m.input("a", kI64, {4});
  m.ints("b", {4}, {-3, 3, -2, 2});
  m.node("Div", {"a", "b"}, {"y"});
  m.output("y");
  const tg::Tensor y = m.load()(tg::constant(std::vector<int64_t>{8, -8, 7, -7}, tg::TensorShape({4}), tg::int64));
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{-2, -2, -3, -3}));
}

TEST(OnnxImportOps, SliceClampsAndSteps) {
  Model m;
  m.input("x", kF, {2, 6});
  m.ints("starts", {2}, {-1, 100});
  m.ints("ends", {2}, {-100, 0});
  m.ints("axes", {2}, {1, 0});
  m.ints("steps", {2}, {-2, -1});
  m.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  m.output("y");
  const tg::Tensor x = tg::reshape(tg::range(0.0f, 12.0f, 1.0f), {2, 6});
  const tg::Tensor y = m.load()(x);
  // Rows from 1 down to (excluding) 0: row 1; columns 5, 3, 1.
  EXPECT_EQ(y.shape().to_string(), "(1, 3)");
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{11, 9, 7}));
}

// Found by the fuzzer: a strided Slice over a huge declared dim built its positions on the host
// while importing (2^28 of them, 2 GiB), and a step of INT64_MIN overflowed the count. The
// positions are now a range node that runs with the graph, and the count never overflows.
TEST(OnnxImportOps, StridedSliceOfAHugeDeclaredDimAllocatesNothingWhileImporting) {
  Model m;
  m.input("x", kF, {int64_t{1} << 40});
  m.ints("starts", {1}, {1});
  m.ints("ends", {1}, {std::numeric_limits<int64_t>::max()});
  m.ints("axes", {1}, {0});
  m.ints("steps", {1}, {2});
  m.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  m.output("y");
  {
    tg::testing::RefuseAllocationsOver refuse(64 << 20);
    const tg::LoadedFunction f = m.load();
    EXPECT_EQ(f.signatures().size(), 1u);
  }
  Model small;
  small.input("x", kF, {7});
  small.ints("starts", {1}, {6});
  small.ints("ends", {1}, {std::numeric_limits<int64_t>::min()});
  small.ints("axes", {1}, {0});
  small.ints("steps", {1}, {std::numeric_limits<int64_t>::min()});
  small.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  small.output("y");
  const tg::Tensor y = small.load()(tg::range(0.0f, 7.0f, 1.0f));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{6}));  // one step from 6 leaves the dim

  // No position at all with a step of -INT64_MAX (the fuzzer's next find: the last position was
  // computed anyway, (0 - 1) * step overflowing).
  Model none;
  none.input("x", kF, {2});
  none.ints("starts", {1}, {93});
  none.ints("ends", {1}, {-1});
  none.ints("axes", {1}, {0});
  none.ints("steps", {1}, {-std::numeric_limits<int64_t>::max()});
  none.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  none.output("y");
  const tg::Tensor empty = none.load()(tg::constant({1.0f, 2.0f}));
  EXPECT_EQ(empty.shape().to_string(), "(0,)");
}

TEST(OnnxImportOps, GatherNegativeIndicesAndReshapeZero) {
  Model m;
  m.input("x", kF, {-1, 3, 2});
  m.ints("idx", {2}, {-1, 0});
  m.ints("shape", {2}, {0, -1});
  m.node("Gather", {"x", "idx"}, {"g"});
  attr(*m.g().mutable_node(0), "axis", int64_t{1});
  m.node("Reshape", {"g", "shape"}, {"y"});
  m.output("y");
  const tg::Tensor x = tg::reshape(tg::range(0.0f, 12.0f, 1.0f), {2, 3, 2});
  const tg::Tensor y = m.load()(x);
  EXPECT_EQ(y.shape().to_string(), "(2, 4)");
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{4, 5, 0, 1, 10, 11, 6, 7}));
}

TEST(OnnxImportOps, AveragePoolExcludesPadsUnlessAsked) {
  for (int64_t include : {0, 1}) {
    Model m;
    m.input("x", kF, {1, 1, 2, 2});
    auto& n = m.node("AveragePool", {"x"}, {"y"});
    attr(n, "kernel_shape", std::vector<int64_t>{2, 2});
    attr(n, "pads", std::vector<int64_t>{1, 1, 0, 0});
    attr(n, "count_include_pad", include);
    m.output("y");
    const tg::Tensor y = m.load()(tg::reshape(tg::constant({1.0f, 2.0f, 3.0f, 4.0f}), {1, 1, 2, 2}));
    // Windows over the padded [[0 0 0] [0 1 2] [0 3 4]]: top-left holds 1 element, top-right 2,
    // bottom-left 2, bottom-right 4.
    const std::vector<float> want = include ? std::vector<float>{0.25f, 0.75f, 1.0f, 2.5f} : std::vector<float>{1.0f, 1.5f, 2.0f, 2.5f};
    EXPECT_EQ(y.to_vector<float>(), want) << "count_include_pad " << include;
  }
}

TEST(OnnxImportOps, OldSoftmaxFlattensFromAxis) {
  Model m(11);
  m.input("x", kF, {2, 2, 2});
  m.node("Softmax", {"x"}, {"y"});  // axis 1 (opset < 13): over the last 4 elements of each row
  m.output("y");
  const tg::Tensor y = m.load()(tg::zeros({2, 2, 2}));
  for (float v : y.to_vector<float>()) EXPECT_FLOAT_EQ(v, 0.25f);
}

TEST(OnnxImportOps, ScatterNdReplacesOrAddsWithNegativeIndices) {
  for (const char* reduction : {"none", "add"}) {
    Model m;
    m.input("data", kF, {3, 2});
    m.ints("at", {2, 1}, {-1, 0});
    m.floats("rows", {2, 2}, {10.0f, 20.0f, 30.0f, 40.0f});
    attr(m.node("ScatterND", {"data", "at", "rows"}, {"y"}), "reduction", std::string(reduction));
    m.output("y");
    const tg::Tensor got = m.load()(tg::constant({{1.0f, 2.0f}, {3.0f, 4.0f}, {5.0f, 6.0f}}));
    const tg::Tensor want = std::string(reduction) == "none" ? tg::constant({{30.0f, 40.0f}, {3.0f, 4.0f}, {10.0f, 20.0f}})
                                                             : tg::constant({{31.0f, 42.0f}, {3.0f, 4.0f}, {15.0f, 26.0f}});
    expect_close(got, want, 0, 0, reduction);
  }
}

TEST(OnnxImportOps, ExpandBroadcastsBothWays) {
  Model m;
  m.input("x", kF, {3, 1});
  m.ints("shape", {3}, {2, 1, 4});
  m.node("Expand", {"x", "shape"}, {"y"});
  m.output("y");
  const tg::Tensor y = m.load()(tg::reshape(tg::constant({1.0f, 2.0f, 3.0f}), {3, 1}));
  EXPECT_EQ(y.shape().to_string(), "(2, 3, 4)");
}

TEST(OnnxImportOps, GroupedConvMatchesPerGroupConvs) {
  Model m;
  m.input("x", kF, {1, 4, 5, 5});
  std::vector<float> w(4 * 2 * 3 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 7) % 11) / 11.0f - 0.5f;
  m.floats("w", {4, 2, 3, 3}, w);
  auto& n = m.node("Conv", {"x", "w"}, {"y"});
  attr(n, "group", int64_t{2});
  attr(n, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.output("y");
  const tg::Tensor x = uniform({1, 4, 5, 5}, 3);
  const tg::Tensor y = m.load()(x);
  // Reference: each group as an ordinary NHWC conv.
  const tg::Tensor wt = tg::transpose(tg::constant(w, tg::TensorShape({4, 2, 3, 3}), tg::float32), {2, 3, 1, 0});
  const tg::Tensor xt = tg::transpose(x, {0, 2, 3, 1});
  std::vector<tg::Tensor> parts;
  for (int64_t g = 0; g < 2; ++g)
    parts.push_back(tg::conv2d(tg::slice(xt, {0, 0, 0, 2 * g}, {-1, -1, -1, 2}), tg::slice(wt, {0, 0, 0, 2 * g}, {-1, -1, -1, 2}),
                               {1}, tg::Padding::Same));
  expect_close(y, tg::transpose(tg::concat(parts, 3), {0, 3, 1, 2}), 1e-5, 1e-6, "grouped conv");
}

// A Conv's output is held channels-last; the ops after it read it as NCHW values: per-channel
// constants, Concat on channels (with a value held NCHW too), ReduceMean with and without
// keepdims (one reduction leaves its dims out of NHWC order), Flatten, Shape over a None batch,
// pools and graph outputs. The reference computes the same in NCHW with tracegraph's ops.
TEST(OnnxImportOps, ChannelsLastValuesKeepTheirNchwMeaning) {
  Model m;
  m.input("x", kF, {-1, 3, 5, 5});
  std::vector<float> w(4 * 3 * 3 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 5) % 13) / 13.0f - 0.5f;
  m.floats("w", {4, 3, 3, 3}, w);
  m.floats("scale", {4, 1, 1}, {0.5f, -1.0f, 2.0f, 1.5f});
  m.floats("shift", {1, 4, 1, 1}, {0.1f, 0.2f, -0.3f, 0.4f});
  m.floats("row", {5}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f});
  attr(m.node("Conv", {"x", "w"}, {"c"}), "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Mul", {"c", "scale"}, {"scaled"});
  m.node("Add", {"scaled", "shift"}, {"shifted"});
  m.node("Relu", {"shifted"}, {"r"});
  m.node("Mul", {"r", "row"}, {"rowed"});  // a (W,) constant: broadcast over the last NCHW axis
  attr(m.node("Concat", {"rowed", "c"}, {"cat"}), "axis", int64_t{1});
  attr(m.node("Concat", {"r", "x"}, {"cat_x"}), "axis", int64_t{-3});
  const std::pair<const char*, std::vector<int64_t>> means[] = {{"mean_keep", {2, 3}}, {"mean_drop", {-2, -1}}, {"mean_c", {1}}, {"mean_nh", {0, 2}}};
  for (const auto& [name, axes] : means) {
    auto& n = m.node("ReduceMean", {"cat"}, {name});  // opset 17: the axes are an attribute
    attr(n, "axes", axes);
    if (std::string(name) != "mean_keep") attr(n, "keepdims", int64_t{0});
  }
  m.node("Flatten", {"r"}, {"flat"});
  m.node("Shape", {"r"}, {"shape"});
  auto& pool = m.node("MaxPool", {"r"}, {"pooled"});
  attr(pool, "kernel_shape", std::vector<int64_t>{2, 2});
  attr(pool, "strides", std::vector<int64_t>{2, 2});
  m.node("GlobalAveragePool", {"rowed"}, {"gap"});
  for (const char* o : {"rowed", "cat", "cat_x", "mean_keep", "mean_drop", "mean_c", "mean_nh", "flat", "shape", "pooled", "gap"})
    m.output(o);
  const tg::LoadedFunction f = m.load();
  const tg::Tensor x = uniform({2, 3, 5, 5}, 11);
  const std::vector<tg::Tensor> got = f(x);
  ASSERT_EQ(got.size(), 11u);

  const tg::Tensor wt = tg::transpose(tg::constant(w, tg::TensorShape({4, 3, 3, 3}), tg::float32), {2, 3, 1, 0});
  const tg::Tensor c = tg::transpose(tg::conv2d(tg::transpose(x, {0, 2, 3, 1}), wt, {1}, tg::Padding::Same), {0, 3, 1, 2});
  const tg::Tensor scale = tg::reshape(tg::constant({0.5f, -1.0f, 2.0f, 1.5f}), {4, 1, 1});
  const tg::Tensor shift = tg::reshape(tg::constant({0.1f, 0.2f, -0.3f, 0.4f}), {1, 4, 1, 1});
  const tg::Tensor r = tg::relu(c * scale + shift);
  const tg::Tensor rowed = r * tg::constant({1.0f, 2.0f, 3.0f, 4.0f, 5.0f});
  const tg::Tensor cat = tg::concat({rowed, c}, 1);
  const tg::Tensor pooled = tg::transpose(tg::max_pool2d(tg::transpose(r, {0, 2, 3, 1}), {2, 2}, {2, 2}, tg::Padding::Valid), {0, 3, 1, 2});
  const std::vector<tg::Tensor> want{rowed,
                                     cat,
                                     tg::concat({r, x}, 1),
                                     tg::reduce_mean(cat, {2, 3}, true),
                                     tg::reduce_mean(cat, {2, 3}, false),
                                     tg::reduce_mean(cat, {1}, false),
                                     tg::reduce_mean(cat, {0, 2}, false),
                                     tg::reshape(r, {2, 100}),
                                     tg::constant(std::vector<int64_t>{2, 4, 5, 5}, tg::TensorShape({4}), tg::int64),
                                     pooled,
                                     tg::reduce_mean(rowed, {2, 3}, true)};
  const char* names[] = {"rowed", "cat", "cat_x", "mean_keep", "mean_drop", "mean_c", "mean_nh", "flat", "shape", "pooled", "gap"};
  for (std::size_t i = 0; i < want.size(); ++i) expect_close(got[i], want[i], 1e-5, 1e-6, names[i]);
}

// Conv -> BatchNormalization -> Relu -> MaxPool -> Conv + a residual Add: one transpose at the
// input and one at the output, none between.
TEST(OnnxImportOps, ConvChainsTransposeOnlyAtTheEnds) {
  Model m;
  m.input("x", kF, {1, 2, 6, 6});
  std::vector<float> w(2 * 2 * 3 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 3) % 7) / 7.0f - 0.4f;
  m.floats("w", {2, 2, 3, 3}, w);
  m.floats("gamma", {2}, {1.5f, 0.5f});
  m.floats("beta", {2}, {0.1f, -0.2f});
  m.floats("mu", {2}, {0.3f, -0.1f});
  m.floats("var", {2}, {2.0f, 0.5f});
  attr(m.node("Conv", {"x", "w"}, {"c1"}), "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("BatchNormalization", {"c1", "gamma", "beta", "mu", "var"}, {"bn"});
  m.node("Relu", {"bn"}, {"r"});
  auto& pool = m.node("MaxPool", {"r"}, {"p"});
  attr(pool, "kernel_shape", std::vector<int64_t>{3, 3});
  attr(pool, "pads", std::vector<int64_t>{1, 1, 1, 1});
  attr(m.node("Conv", {"p", "w"}, {"c2"}), "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Add", {"c2", "r"}, {"y"});
  m.output("y");
  const tg::LoadedFunction f = m.load();
  EXPECT_EQ(count_ops(f, "transpose"), 2);
  // The Convs' pads (1 each side of a 3x3 window, stride 1) are SAME's: padded inside conv2d.
  // The MaxPool's are explicit (-inf).
  EXPECT_EQ(count_ops(f, "pad"), 1);
  const tg::Tensor x = uniform({1, 2, 6, 6}, 5);
  const tg::Tensor wt = tg::transpose(tg::constant(w, tg::TensorShape({2, 2, 3, 3}), tg::float32), {2, 3, 1, 0});
  auto per_c = [](const std::vector<float>& v) { return tg::constant(v, tg::TensorShape({1, 2, 1, 1}), tg::float32); };
  const tg::Tensor xh = tg::transpose(x, {0, 2, 3, 1});
  const tg::Tensor c1 = tg::transpose(tg::conv2d(xh, wt, {1}, tg::Padding::Same), {0, 3, 1, 2});
  const tg::Tensor r = tg::relu((c1 - per_c({0.3f, -0.1f})) * per_c({1.5f, 0.5f}) / tg::sqrt(per_c({2.0f, 0.5f}) + 1e-5f) +
                                per_c({0.1f, -0.2f}));
  const tg::Tensor p = tg::max_pool2d(tg::pad(tg::transpose(r, {0, 2, 3, 1}), {{0, 0}, {1, 1}, {1, 1}, {0, 0}}, tg::PadMode::Constant,
                                              -INFINITY),
                                      {3, 3}, {1, 1}, tg::Padding::Valid);
  const tg::Tensor c2 = tg::transpose(tg::conv2d(p, wt, {1}, tg::Padding::Same), {0, 3, 1, 2});
  expect_close(f(x), c2 + r, 1e-5, 1e-5, "conv chain");
}

// ---- malformed and refused models ------------------------------------------------------------

Model relu_model() {
  Model m;
  m.input("x", kF, {-1, 3});
  m.node("Relu", {"x"}, {"y"});
  m.output("y", kF, {-1, 3});
  return m;
}

template <class E>
std::string error_of(const Model& m) {
  try {
    m.load();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "another error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "the model was accepted";
  return "";
}

// ReduceMean reads its axes from an input from opset 18 on; before, an axes input is refused
// (it was ignored, reducing over every axis).
TEST(OnnxImportErrors, ReduceAxesInputBeforeItsOpsetIsRefused) {
  Model m(17);
  m.input("x", kF, {2, 3});
  m.ints("axes", {1}, {1});
  m.node("ReduceMean", {"x", "axes"}, {"y"});
  m.output("y");
  EXPECT_NE(error_of<tg::FormatError>(m).find("before opset 18 it takes one and reads its axes from the attribute"), std::string::npos);
  Model n(18);
  n.input("x", kF, {2, 3});
  n.ints("axes", {1}, {1});
  attr(n.node("ReduceMean", {"x", "axes"}, {"y"}), "keepdims", int64_t{0});
  n.output("y");
  expect_close(n.load()(tg::constant({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}})), tg::constant({2.0f, 5.0f}), 0, 0, "opset 18 axes input");
}

TEST(OnnxImportErrors, TruncatedAndGarbageBytes) {
  const std::string s = relu_model().bytes();
  for (std::size_t n = 1; n < s.size(); n += 3)
    try {
      tg::import_onnx_from_memory(s.data(), n);
      // A prefix can be a valid (smaller) message; then the graph checks must refuse it.
      ADD_FAILURE() << "a " << n << "-byte prefix was accepted";
    } catch (const tg::Error&) {
    }
  const std::string garbage = "\xff\xff\xff\xff this is not a model";
  EXPECT_THROW(tg::import_onnx_from_memory(garbage.data(), garbage.size()), tg::FormatError);
  EXPECT_THROW(tg::import_onnx("/nonexistent/model.onnx"), tg::Error);
}

TEST(OnnxImportErrors, RawDataOfTheWrongSize) {
  Model m = relu_model();
  m.floats("w", {2, 3}, {1, 2, 3, 4, 5});
  EXPECT_NE(error_of<tg::FormatError>(m).find("raw_data has 20 bytes but 6 FLOAT values need 24"), std::string::npos);
}

TEST(OnnxImportErrors, ACycle) {
  Model m;
  m.input("x", kF, {3});
  m.node("Add", {"x", "b"}, {"a"});
  m.node("Relu", {"a"}, {"b"});
  m.output("b");
  EXPECT_NE(error_of<tg::FormatError>(m).find("cycle"), std::string::npos);
}

TEST(OnnxImportErrors, AnUndefinedInput) {
  Model m = relu_model();
  m.node("Add", {"y", "nowhere"}, {"z"});
  EXPECT_NE(error_of<tg::FormatError>(m).find("'nowhere', which no node, graph input or initializer defines"), std::string::npos);
}

TEST(OnnxImportErrors, AnUnknownOpIsNamedWithItsNode) {
  Model m = relu_model();
  m.node("Einsum", {"y"}, {"z"});
  m.node("com.example.Thing", {"y"}, {"w"}).set_domain("com.example");
  const std::string e = error_of<tg::ValueError>(m);
  EXPECT_NE(e.find("Einsum (first at node 'Einsum_2' (Einsum))"), std::string::npos) << e;
  EXPECT_NE(e.find("com.example::"), std::string::npos) << e;
}

TEST(OnnxImportErrors, AnUnknownAttributeIsRefused) {
  Model m = relu_model();
  attr(*m.g().mutable_node(0), "alpha", int64_t{2});
  EXPECT_NE(error_of<tg::ValueError>(m).find("attribute 'alpha' is not read"), std::string::npos);
}

// An input the rule does not read is refused, as an unread attribute is: ignored, it could
// change what the model means (a Reduce* node's axes input before its opset read them).
TEST(OnnxImportErrors, AnInputTheRuleDoesNotReadIsRefused) {
  Model m = relu_model();
  m.g().mutable_node(0)->add_input("x");
  const std::string e = error_of<tg::ValueError>(m);
  EXPECT_NE(e.find("input 1 ('x') is not read by the importer's Relu rule"), std::string::npos) << e;
}

TEST(OnnxImportErrors, ExternalDataAndUnknownTypes) {
  Model m = relu_model();
  auto& t = m.floats("w", {1}, {1.0f});
  t.clear_raw_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  EXPECT_NE(error_of<tg::ValueError>(m).find("external file"), std::string::npos);

  Model u;
  u.input("x", 99, {3});
  u.node("Relu", {"x"}, {"y"});
  u.output("y");
  EXPECT_NE(error_of<tg::FormatError>(u).find("is not an ONNX type"), std::string::npos);

  Model h;
  h.input("x", onnx::TensorProto::FLOAT16, {3});
  h.node("Relu", {"x"}, {"y"});
  h.output("y");
  EXPECT_NE(error_of<tg::ValueError>(h).find("FLOAT16"), std::string::npos);
}

TEST(OnnxImportErrors, LimitsAndOpsets) {
  Model m = relu_model();
  tg::OnnxImportOptions o;
  o.max_tensor_bytes = 8;
  m.floats("w", {3}, {1, 2, 3});
  try {
    m.load(o);
    ADD_FAILURE() << "accepted";
  } catch (const tg::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("max_tensor_bytes"), std::string::npos) << e.what();
  }
  Model late(30);
  late.input("x", kF, {3});
  late.node("Relu", {"x"}, {"y"});
  late.output("y");
  EXPECT_NE(error_of<tg::ValueError>(late).find("opset 30"), std::string::npos);
  Model gelu(17);
  gelu.input("x", kF, {3});
  gelu.node("Gelu", {"x"}, {"y"});
  gelu.output("y");
  EXPECT_NE(error_of<tg::ValueError>(gelu).find("read from opset 20"), std::string::npos);
}

TEST(OnnxImportErrors, AttributesThatCannotBeHonoured) {
  Model m;
  m.input("x", kF, {1, 1, 5, 5});
  auto& n = m.node("MaxPool", {"x"}, {"y"});
  attr(n, "kernel_shape", std::vector<int64_t>{2, 2});
  attr(n, "strides", std::vector<int64_t>{2, 2});
  attr(n, "ceil_mode", int64_t{1});
  m.output("y");
  EXPECT_NE(error_of<tg::ValueError>(m).find("ceil_mode 1 adds a partial window"), std::string::npos);

  Model b;
  b.input("x", kF, {1, 2, 3, 3});
  for (const char* p : {"s", "bias", "mean", "var"}) b.floats(p, {2}, {1, 1});
  auto& bn = b.node("BatchNormalization", {"x", "s", "bias", "mean", "var"}, {"y"});
  attr(bn, "training_mode", int64_t{1});
  b.output("y");
  EXPECT_NE(error_of<tg::ValueError>(b).find("training_mode is 1"), std::string::npos);

  Model p;
  p.input("x", kF, {2, 3});
  p.ints("pads", {4}, {0, 1, 0, 1});
  attr(p.node("Pad", {"x", "pads"}, {"y"}), "mode", std::string("edge"));
  p.output("y");
  EXPECT_NE(error_of<tg::ValueError>(p).find("mode 'edge' is not computed"), std::string::npos);
}

TEST(OnnxImportErrors, AnOutputOfAnotherTypeThanDeclared) {
  Model m;
  m.input("x", kF, {3});
  m.node("Relu", {"x"}, {"y"});
  m.output("y", kI64, {3});
  EXPECT_NE(error_of<tg::FormatError>(m).find("declares it INT64 (3,) but its graph computes float32 (3,)"), std::string::npos);
}

// The fuzzer's seeds (tests/fuzz/corpus/onnx) are models the importer reads and runs, so that
// the fuzzer starts from inputs that reach the ops.
TEST(OnnxImportErrors, FuzzSeedsImportAndRun) {
  const fs::path dir = fs::path(__FILE__).parent_path().parent_path() / "fuzz" / "corpus" / "onnx";
  auto load = [&](const char* name) { return tg::import_onnx((dir / name).string()); };
  const tg::Tensor mlp = load("mlp.onnx")(tg::ones({2, 4}));
  EXPECT_EQ(mlp.shape().to_string(), "(2, 3)");
  expect_close(tg::reduce_sum(mlp, {1}), tg::ones({2}), 1e-6, 1e-6, "softmax rows");
  EXPECT_EQ(tg::Tensor(load("cnn.onnx")(uniform({2, 2, 6, 6}, 5))).shape().to_string(), "(2, 3)");
  const tg::Tensor shaped = load("shapes.onnx")(uniform({2, 6}, 6), tg::constant({true}));
  EXPECT_EQ(shaped.shape().to_string(), "(2, 3, 1)");
  // A Loop (M = 3, its body's condition, a scan output) and an If whose branches read the
  // Loop's results from the enclosing graph.
  const tg::LoadedFunction cf = load("control_flow.onnx");
  const tg::Tensor x = tg::constant({1.0f, 2.0f});
  const tg::Outputs taken = cf(x, tg::constant(true));
  expect_close(taken[0], tg::constant({4.0f, 5.0f}), 0, 0, "then: relu(acc)");
  expect_close(taken[1], tg::constant({{1.0f, 4.0f}, {2.0f, 6.0f}, {4.0f, 10.0f}}), 0, 0, "scan rows");
  expect_close(cf(x, tg::constant(false))[0], tg::constant({-7.0f / 3, -20.0f / 3}), 1e-6, 0, "else: -mean(rows)");
  const tg::Outputs both = load("ops11.onnx")(uniform({2, 3, 4}, 7));
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].shape().to_string(), "(2, 4)");
  EXPECT_EQ(both[1].shape().to_string(), "(2, 3, 6)");
}

// ---- fine-tuning an imported model ---------------------------------------------------------

TEST(OnnxImportTraining, ImportedMlpFineTunesInATracedTrainStep) {
  SmallMlp original;
  auto predict = tg::function([&](const tg::Tensor& x) { return original(x); },
                              {.input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 12}, tg::float32)}});
  predict.get_concrete_function(tg::TensorSpec({tg::None, 12}, tg::float32));
  const std::string path = (scratch() / "mlp_train.onnx").string();
  tg::export_onnx(path, predict);
  tg::OnnxImportOptions options;
  options.initializers_as_variables = true;
  const tg::LoadedFunction model = tg::import_onnx(path, options);
  const std::vector<tg::Variable> vars = model.variables();
  ASSERT_EQ(vars.size(), 6u);  // three kernels, three biases
  const tg::Tensor x = uniform({16, 12}, 70), target = uniform({16, 5}, 71);
  auto train_step = tg::function([&](const tg::Tensor& xb, const tg::Tensor& yb) {
    tg::GradientTape tape;
    const tg::Tensor loss = tg::reduce_mean(tg::square(tg::Tensor(model(xb)) - yb));
    const std::vector<tg::Tensor> grads = tape.gradient(loss, vars);
    for (std::size_t i = 0; i < vars.size(); ++i) {
      tg::Variable v = vars[i];
      v.assign_sub(grads[i] * 0.1f);
    }
    return loss;
  });
  std::vector<float> losses;
  for (int step = 0; step < 6; ++step) losses.push_back(train_step(x, target).item<float>());
  EXPECT_EQ(train_step.tracing_count(), 1);
  for (std::size_t i = 1; i < losses.size(); ++i) EXPECT_LT(losses[i], losses[i - 1]) << "step " << i;
  // The imported function reads the trained Variables.
  const float after = tg::reduce_mean(tg::square(tg::Tensor(model(x)) - target)).item<float>();
  EXPECT_LT(after, losses.front());
}

// ---- If and Loop -----------------------------------------------------------------------------

// A sub-graph for a graph attribute (an If branch, a Loop body).
struct Sub {
  onnx::GraphProto g;
  explicit Sub(const std::string& name) { g.set_name(name); }
  void input(const std::string& name, int elem, const std::vector<int64_t>& dims) { Model::value(*g.add_input(), name, elem, dims); }
  void output(const std::string& name) { g.add_output()->set_name(name); }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out) {
    auto* n = g.add_node();
    n->set_op_type(op);
    n->set_name(g.name() + "/" + op + "_" + std::to_string(g.node_size()));
    for (const auto& x : in) n->add_input(x);
    for (const auto& x : out) n->add_output(x);
    return *n;
  }
};

void attr(onnx::NodeProto& n, const std::string& name, const onnx::GraphProto& g) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

constexpr int kBool = onnx::TensorProto::BOOL;

void bools(Model& m, const std::string& name, const std::vector<int64_t>& dims, const std::vector<bool>& v) {
  auto* t = m.g().add_initializer();
  t->set_name(name);
  t->set_data_type(kBool);
  for (int64_t d : dims) t->add_dims(d);
  for (bool b : v) t->add_int32_data(b ? 1 : 0);
}

// The function of OnnxExport.CondAndWhileLoop: a cond, a while_loop with maximum_iterations
// and a cond in its body, a for_range, a loop over two dtypes.
std::vector<tg::Tensor> control_flow_model(const tg::Tensor& x, const tg::Tensor& n, const tg::Tensor& w) {
  const tg::Tensor y = tg::cond(tg::reduce_sum(x) > 0.0f, [&] { return x * 2.0f + w; }, [&] { return x - w; });
  const tg::Tensor grown = tg::while_loop(
      [](const tg::Tensor& v) { return tg::reduce_sum(tg::abs(v)) < 1000.0f; },
      [&](const tg::Tensor& v) {
        return tg::cond(tg::reduce_max(v) > 10.0f, [&] { return v * 1.5f + w; }, [&] { return v * 3.0f + 1.0f; });
      },
      y, {.shape_invariants = {}, .maximum_iterations = 6, .name = "grow"});
  const tg::Tensor total = tg::for_range(n, tg::zeros_like(x), [&](const tg::Tensor& i, const tg::Tensor& s) {
    return s + tg::cast(i, tg::float32) * x;
  });
  const auto [count, halved] = tg::while_loop(
      [](const std::pair<tg::Tensor, tg::Tensor>& v) { return tg::reduce_max(tg::abs(v.second)) > 0.01f; },
      [](const std::pair<tg::Tensor, tg::Tensor>& v) { return std::make_pair(v.first + int64_t{1}, v.second * 0.5f); },
      std::make_pair(tg::constant(int64_t{0}), x));
  return {y, grown, total, count, halved};
}

TEST(OnnxImportControlFlow, ExportedCondAndWhileImportBack) {
  const tg::Tensor w = tg::constant({0.5f, -1.0f, 2.0f});
  auto f = tg::function([&](const tg::Tensor& x, const tg::Tensor& n) { return control_flow_model(x, n, w); },
                        {.name = "control_flow",
                         .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 3}, tg::float32),
                                                                        tg::TensorSpec({}, tg::int32)},
                         .arg_names = {"x", "n"}});
  f.get_concrete_function(tg::TensorSpec({tg::None, 3}, tg::float32), tg::TensorSpec({}, tg::int32));
  const std::string path = (scratch() / "control_flow.onnx").string();
  tg::export_onnx(path, f);
  const tg::LoadedFunction imported = tg::import_onnx(path);
  const std::pair<tg::Tensor, tg::Tensor> runs[] = {{uniform({2, 3}, 95, 0.1f, 1.0f), tg::constant(3)},
                                                    {uniform({4, 3}, 96, -1.0f, -0.1f), tg::constant(0)},
                                                    {uniform({1, 3}, 97, -5.0f, 5.0f), tg::constant(7)}};
  for (const auto& run : runs) {
    const std::vector<tg::Tensor> want = f(run.first, run.second);
    const tg::Outputs got = imported(run.first, run.second);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < want.size(); ++k)
      expect_close(got[k], want[k], 1e-6, 1e-6, "output " + std::to_string(k) + " for n = " + std::to_string(run.second.item<int32_t>()));
  }
}

// Recurrent layers as exported (a Loop over the time steps writing a TensorArray, as ScatterND)
// read back: the same sequences for two batch sizes.
TEST(OnnxImportControlFlow, ExportedRecurrentLayersImportBack) {
  tg::nn::LSTM lstm(3, 4, {.return_sequences = true, .seed = 171, .name = "lstm"});
  tg::nn::GRU gru(3, 4, {.return_sequences = true, .go_backwards = true, .seed = 172, .name = "gru"});
  auto predict = tg::function([&](const tg::Tensor& x) { return std::make_pair(lstm(x)[0], gru(x)[0]); },
                              {.name = "recurrent",
                               .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 5, 3}, tg::float32)}});
  predict.get_concrete_function(tg::TensorSpec({tg::None, 5, 3}, tg::float32));
  const std::string path = (scratch() / "recurrent.onnx").string();
  tg::export_onnx(path, predict);
  const tg::LoadedFunction imported = tg::import_onnx(path);
  for (int64_t batch : {1, 3}) {
    const tg::Tensor x = uniform({batch, 5, 3}, 173 + static_cast<uint64_t>(batch));
    const auto [a, b] = predict(x);
    const tg::Outputs got = imported(x);
    expect_close(got[0], a, 1e-6, 1e-7, "lstm, batch " + std::to_string(batch));
    expect_close(got[1], b, 1e-6, 1e-7, "gru, batch " + std::to_string(batch));
  }
}

// Loop (M = 4, no cond): acc = 2 acc + i, a scan output acc + x (x and the 2 read from the
// enclosing graph), and the body's condition passed through.
TEST(OnnxImportControlFlow, LoopWithTripCountAndScanOutput) {
  Model m;
  m.input("x", kF, {3});
  m.ints("M", {}, {4});
  m.floats("two", {}, {2.0f});
  m.floats("acc0", {3}, {1.0f, 0.0f, -1.0f});
  Sub body("body");
  body.input("i", kI64, {});
  body.input("c", kBool, {});
  body.input("acc", kF, {3});
  body.node("Cast", {"i"}, {"fi"});
  attr(*body.g.mutable_node(0), "to", int64_t{kF});
  body.node("Mul", {"acc", "two"}, {"doubled"});
  body.node("Add", {"doubled", "fi"}, {"acc_next"});
  body.node("Add", {"acc_next", "x"}, {"row"});
  body.node("Identity", {"c"}, {"c_next"});
  body.output("c_next");
  body.output("acc_next");
  body.output("row");
  attr(m.node("Loop", {"M", "", "acc0"}, {"acc_final", "rows"}), "body", body.g);
  m.output("acc_final");
  m.output("rows");
  const tg::LoadedFunction f = m.load();
  const tg::Tensor x = tg::constant({10.0f, 20.0f, 30.0f});
  const tg::Outputs out = f(x);
  std::vector<float> acc{1.0f, 0.0f, -1.0f}, rows;
  for (int i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      acc[j] = 2 * acc[j] + static_cast<float>(i);
      rows.push_back(acc[j] + x.to_vector<float>()[j]);
    }
  expect_close(out[0], tg::constant(acc, {3}), 0, 0, "final acc");
  expect_close(out[1], tg::constant(rows, {4, 3}), 0, 0, "scan rows");
}

// Loop (no M, cond): a loop-carried value that grows every iteration (its shape becomes None),
// stopped by the body's condition.
TEST(OnnxImportControlFlow, LoopWithConditionOnlyAndAGrowingValue) {
  Model m;
  m.input("start", kI64, {1});
  bools(m, "go", {}, {true});
  m.ints("axes", {1}, {0});
  m.ints("three", {}, {3});
  Sub body("body");
  body.input("i", kI64, {});
  body.input("c", kBool, {});
  body.input("v", kI64, {-1});
  body.node("Unsqueeze", {"i", "axes"}, {"i1"});
  attr(body.node("Concat", {"v", "i1"}, {"v_next"}), "axis", int64_t{0});
  body.node("Less", {"i", "three"}, {"again"});
  body.output("again");
  body.output("v_next");
  Model both_empty = m;  // no M and no cond: the first iteration runs, then the body's condition decides
  attr(m.node("Loop", {"", "go", "start"}, {"v_final"}), "body", body.g);
  m.output("v_final");
  const tg::LoadedFunction f = m.load();
  expect_close(f(tg::constant(std::vector<int64_t>{7}, {1})), tg::constant(std::vector<int64_t>{7, 0, 1, 2, 3}, {5}), 0, 0, "grown");
  attr(both_empty.node("Loop", {"", "", "start"}, {"v_final"}), "body", body.g);
  both_empty.output("v_final");
  expect_close(both_empty.load()(tg::constant(std::vector<int64_t>{7}, {1})),
               tg::constant(std::vector<int64_t>{7, 0, 1, 2, 3}, {5}), 0, 0, "grown without M and cond");

  // A body that passes its values through (no nodes) and scans an enclosing value: M rows of it.
  Model p;
  p.input("v", kF, {2});
  p.ints("M", {}, {3});
  p.floats("w", {2}, {5.0f, 6.0f});
  Sub pass("pass");
  pass.input("i", kI64, {});
  pass.input("c", kBool, {});
  pass.input("u", kF, {2});
  pass.output("c");
  pass.output("u");
  pass.output("w");
  attr(p.node("Loop", {"M", "", "v"}, {"u_final", "ws"}), "body", pass.g);
  p.output("u_final");
  p.output("ws");
  const tg::Outputs out = p.load()(tg::constant({1.0f, 2.0f}));
  expect_close(out[0], tg::constant({1.0f, 2.0f}), 0, 0, "passed through");
  expect_close(out[1], tg::constant({{5.0f, 6.0f}, {5.0f, 6.0f}, {5.0f, 6.0f}}), 0, 0, "scanned w");
}

// Loop with M and cond both graph inputs: M bounds the count, cond false runs nothing, a
// negative M runs nothing.
TEST(OnnxImportControlFlow, LoopWithRunTimeTripCountAndCondition) {
  Model m;
  m.input("M", kI64, {});
  m.input("go", kBool, {});
  m.input("s0", kF, {});
  m.floats("one", {}, {1.0f});
  m.floats("limit", {}, {100.0f});
  Sub body("body");
  body.input("i", kI64, {});
  body.input("c", kBool, {});
  body.input("s", kF, {});
  body.node("Add", {"s", "one"}, {"s_next"});
  body.node("Less", {"s_next", "limit"}, {"again"});
  body.node("Cast", {"i"}, {"fi"});
  attr(*body.g.mutable_node(2), "to", int64_t{kF});
  body.output("again");
  body.output("s_next");
  body.output("fi");
  attr(m.node("Loop", {"M", "go", "s0"}, {"s_final", "iterations"}), "body", body.g);
  m.output("s_final");
  m.output("iterations");
  const tg::LoadedFunction f = m.load();
  auto run = [&](int64_t trip, bool go, float s0) { return f(tg::constant(trip), tg::constant(go), tg::constant(s0)); };
  tg::Outputs out = run(5, true, 0.0f);
  EXPECT_EQ(out[0].item<float>(), 5.0f);
  expect_close(out[1], tg::constant({0.0f, 1.0f, 2.0f, 3.0f, 4.0f}), 0, 0, "iteration numbers");
  EXPECT_EQ(run(5, false, 2.0f)[0].item<float>(), 2.0f);
  EXPECT_EQ(run(-3, true, 2.0f)[0].item<float>(), 2.0f);
  out = run(1000, true, 97.0f);  // the body's condition stops it: 98, 99, 100
  EXPECT_EQ(out[0].item<float>(), 100.0f);
  EXPECT_EQ(out[1].shape().to_string(), "(3,)");
}

// If: branches that read the enclosing graph's values (an input, an initializer, a value a node
// after the If in the file computes); a condition that is a constant imports one branch.
TEST(OnnxImportControlFlow, IfReadsEnclosingValues) {
  Model m;
  m.input("p", kBool, {});
  m.input("x", kF, {2});
  m.floats("w", {2}, {1.0f, -2.0f});
  Sub then_branch("then"), else_branch("else");
  then_branch.node("Add", {"x", "w"}, {"t"});
  then_branch.output("t");
  else_branch.node("Mul", {"x", "later"}, {"e"});
  else_branch.output("e");
  onnx::NodeProto& n = m.node("If", {"p"}, {"y"});
  attr(n, "then_branch", then_branch.g);
  attr(n, "else_branch", else_branch.g);
  m.node("Neg", {"x"}, {"later"});  // read by the else branch, listed after the If
  m.output("y");
  const tg::LoadedFunction f = m.load();
  const tg::Tensor x = tg::constant({3.0f, 4.0f});
  expect_close(f(tg::constant(true), x), tg::constant({4.0f, 2.0f}), 0, 0, "then");
  expect_close(f(tg::constant(false), x), tg::constant({-9.0f, -16.0f}), 0, 0, "else");

  Model c;
  c.input("x", kF, {2});
  bools(c, "p", {1}, {false});
  Sub t2("then"), e2("else");
  t2.node("Relu", {"x"}, {"t"});
  t2.output("t");
  e2.node("Neg", {"x"}, {"e"});
  e2.output("e");
  onnx::NodeProto& n2 = c.node("If", {"p"}, {"y"});
  attr(n2, "then_branch", t2.g);
  attr(n2, "else_branch", e2.g);
  c.output("y");
  expect_close(c.load()(x), tg::constant({-3.0f, -4.0f}), 0, 0, "constant condition");

  // Branches without nodes: the outputs are the enclosing graph's values themselves.
  Model d;
  d.input("p", kBool, {});
  d.input("x", kF, {2});
  d.floats("w", {2}, {1.0f, -2.0f});
  Sub t3("then"), e3("else");
  t3.output("x");
  e3.output("w");
  onnx::NodeProto& n3 = d.node("If", {"p"}, {"y"});
  attr(n3, "then_branch", t3.g);
  attr(n3, "else_branch", e3.g);
  d.output("y");
  const tg::LoadedFunction passthrough = d.load();
  expect_close(passthrough(tg::constant(true), x), x, 0, 0, "then: x");
  expect_close(passthrough(tg::constant(false), x), tg::constant({1.0f, -2.0f}), 0, 0, "else: w");
}

// A Conv's output, held channels-last, read inside If branches: an elementwise op on it there, and
// a branch that returns it as it is; the If's result is the NCHW value either way.
TEST(OnnxImportControlFlow, BranchesReadChannelsLastValues) {
  Model m;
  m.input("p", kBool, {});
  m.input("x", kF, {1, 2, 3, 3});
  std::vector<float> w(3 * 2);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) - 2.5f;
  m.floats("w", {3, 2, 1, 1}, w);
  m.floats("scale", {3, 1, 1}, {1.0f, -2.0f, 0.5f});
  m.node("Conv", {"x", "w"}, {"c"});
  Sub then_branch("then"), else_branch("else");
  then_branch.node("Mul", {"c", "scale"}, {"t"});
  then_branch.output("t");
  else_branch.output("c");
  onnx::NodeProto& n = m.node("If", {"p"}, {"y"});
  attr(n, "then_branch", then_branch.g);
  attr(n, "else_branch", else_branch.g);
  m.output("y");
  const tg::LoadedFunction f = m.load();
  const tg::Tensor x = uniform({1, 2, 3, 3}, 21);
  const tg::Tensor wt = tg::transpose(tg::constant(w, tg::TensorShape({3, 2, 1, 1}), tg::float32), {2, 3, 1, 0});
  const tg::Tensor c = tg::transpose(tg::conv2d(tg::transpose(x, {0, 2, 3, 1}), wt, {1}, tg::Padding::Valid), {0, 3, 1, 2});
  const tg::Tensor scale = tg::constant(std::vector<float>{1.0f, -2.0f, 0.5f}, tg::TensorShape({3, 1, 1}), tg::float32);
  expect_close(f(tg::constant(true), x), c * scale, 1e-6, 1e-6, "then");
  expect_close(f(tg::constant(false), x), c, 1e-6, 1e-6, "else");
}

// With initializers as Variables the per-channel constants and BatchNormalization's statistics
// are Variable reads in the graph: the same result, and gradients reach them.
TEST(OnnxImportTraining, ChannelsLastConvModelFineTunes) {
  Model m;
  m.input("x", kF, {2, 2, 4, 4});
  std::vector<float> w(3 * 2 * 3 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 5) % 9) / 9.0f - 0.45f;
  m.floats("w", {3, 2, 3, 3}, w);
  m.floats("gamma", {3}, {1.0f, 0.5f, 2.0f});
  m.floats("beta", {3}, {0.0f, 0.1f, -0.1f});
  m.floats("mu", {3}, {0.2f, 0.0f, -0.2f});
  m.floats("var", {3}, {1.0f, 2.0f, 0.5f});
  m.floats("scale", {1, 3, 1, 1}, {0.5f, 1.0f, -1.0f});
  attr(m.node("Conv", {"x", "w"}, {"c"}), "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("BatchNormalization", {"c", "gamma", "beta", "mu", "var"}, {"bn"});
  m.node("Mul", {"bn", "scale"}, {"s"});
  m.node("Relu", {"s"}, {"r"});
  m.node("GlobalAveragePool", {"r"}, {"g"});
  m.node("Flatten", {"g"}, {"y"});
  m.output("y");
  tg::OnnxImportOptions options;
  options.initializers_as_variables = true;
  const tg::LoadedFunction plain = m.load(), trainable = m.load(options);
  const tg::Tensor x = uniform({2, 2, 4, 4}, 8);
  expect_close(trainable(x), plain(x), 1e-6, 1e-6, "Variables as initializers");
  // The input's, and the Conv weight's (a Variable read, OIHW to HWIO); the Flatten after the
  // (N, C, 1, 1) pool reshapes.
  EXPECT_EQ(count_ops(trainable, "transpose"), 2);
  std::vector<tg::Variable> vars = trainable.variables();
  ASSERT_EQ(vars.size(), 6u);
  auto train_step = tg::function([&](const tg::Tensor& xb) {
    tg::GradientTape tape;
    const tg::Tensor loss = tg::reduce_sum(tg::square(tg::Tensor(trainable(xb)) - 1.0f));
    const std::vector<tg::Tensor> grads = tape.gradient(loss, vars);
    for (std::size_t i = 0; i < vars.size(); ++i) {
      tg::Variable v = vars[i];
      v.assign_sub(grads[i] * 0.02f);
    }
    return loss;
  });
  const float first = train_step(x).item<float>();
  float last = first;
  for (int step = 0; step < 5; ++step) last = train_step(x).item<float>();
  EXPECT_LT(last, first);
}

TEST(OnnxImportControlFlow, MalformedSubGraphsAreRefused) {
  auto if_model = [](const Sub& then_branch, const Sub& else_branch) {
    Model m;
    m.input("p", kBool, {});
    m.input("x", kF, {2});
    onnx::NodeProto& n = m.node("If", {"p"}, {"y"});
    attr(n, "then_branch", then_branch.g);
    attr(n, "else_branch", else_branch.g);
    m.output("y");
    return m;
  };
  Sub ok("ok");
  ok.node("Relu", {"x"}, {"r"});
  ok.output("r");
  {
    Sub shadow("shadow");  // defines "x" again
    shadow.node("Relu", {"p"}, {"x"});
    shadow.output("x");
    EXPECT_NE(error_of<tg::FormatError>(if_model(ok, shadow)).find("also a value of an enclosing graph"), std::string::npos);
  }
  {
    Sub undefined("undefined");
    undefined.node("Relu", {"nowhere"}, {"r2"});
    undefined.output("r2");
    EXPECT_NE(error_of<tg::FormatError>(if_model(ok, undefined)).find("'nowhere', which no node"), std::string::npos);
  }
  {
    Sub two("two");
    two.node("Relu", {"x"}, {"a"});
    two.node("Neg", {"x"}, {"b"});
    two.output("a");
    two.output("b");
    EXPECT_NE(error_of<tg::FormatError>(if_model(ok, two)).find("then_branch returns 1 values and else_branch 2"),
              std::string::npos);
  }
  {
    Sub unknown("unknown");
    unknown.node("Einsum", {"x"}, {"u"});
    unknown.output("u");
    EXPECT_NE(error_of<tg::ValueError>(if_model(ok, unknown)).find("Einsum (first at node 'unknown/Einsum_1'"), std::string::npos);
  }
  {
    // A cycle through a branch: the If reads "z" in a branch, and "z" is computed from the If.
    Model m;
    m.input("p", kBool, {});
    m.input("x", kF, {2});
    Sub reads("reads");
    reads.node("Relu", {"z"}, {"r"});
    reads.output("r");
    onnx::NodeProto& n = m.node("If", {"p"}, {"y"});
    attr(n, "then_branch", reads.g);
    attr(n, "else_branch", ok.g);
    m.node("Neg", {"y"}, {"z"});
    m.output("z");
    EXPECT_NE(error_of<tg::FormatError>(m).find("cycle"), std::string::npos);
  }
  {
    // Loop bodies nested deeper than max_graph_depth.
    Model m;
    m.input("x", kF, {2});
    m.ints("M", {}, {1});
    Sub inner("level0");
    inner.input("i", kI64, {});
    inner.input("c", kBool, {});
    inner.input("v", kF, {2});
    inner.node("Relu", {"v"}, {"v0"});
    inner.output("c");
    inner.output("v0");
    for (int level = 1; level < 5; ++level) {
      Sub outer("level" + std::to_string(level));
      const std::string l = std::to_string(level);
      outer.input("i" + l, kI64, {});
      outer.input("c" + l, kBool, {});
      outer.input("v" + l, kF, {2});
      attr(outer.node("Loop", {"M", "", "v" + l}, {"w" + l}), "body", inner.g);
      outer.output("c" + l);
      outer.output("w" + l);
      inner = outer;
    }
    attr(m.node("Loop", {"M", "", "x"}, {"y"}), "body", inner.g);
    m.output("y");
    tg::OnnxImportOptions o;
    o.max_graph_depth = 3;
    try {
      const std::string s = m.bytes();
      tg::import_onnx_from_memory(s.data(), s.size(), o);
      ADD_FAILURE() << "a model nested 5 deep was accepted with max_graph_depth 3";
    } catch (const tg::FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("max_graph_depth (3)"), std::string::npos) << e.what();
    }
    const tg::LoadedFunction f = m.load();  // within the default depth
    expect_close(f(tg::constant({-1.0f, 2.0f})), tg::constant({0.0f, 2.0f}), 0, 0, "nested loops");
  }
  {
    // A Loop body with the wrong number of inputs.
    Model m;
    m.input("x", kF, {2});
    m.ints("M", {}, {2});
    Sub body("body");
    body.input("i", kI64, {});
    body.input("v", kF, {2});
    body.node("Relu", {"v"}, {"r"});
    body.output("r");
    attr(m.node("Loop", {"M", "", "x"}, {"y"}), "body", body.g);
    m.output("y");
    EXPECT_NE(error_of<tg::FormatError>(m).find("its body has 2 inputs; with 1 loop-carried values it takes 3"), std::string::npos);
  }
}

// Fine-tuning through imported control flow: an If whose branches read a weight, and a Loop
// that applies another one; the gradients of the imported Variables are the original's.
TEST(OnnxImportTraining, GradientsFlowThroughImportedCondAndLoop) {
  tg::Variable w1(uniform({3, 3}, 120), "w1"), w2(uniform({3, 3}, 121, -0.5f, 0.5f), "w2");
  // The Variables are read before the cond and the loop (gradients flow through captured tensors).
  auto model_fn = [&](const tg::Tensor& x) {
    const tg::Tensor a = w1.read_value(), b = w2.read_value();
    const tg::Tensor h = tg::cond(tg::reduce_sum(x) > 0.0f, [&] { return tg::tanh(tg::matmul(x, a)); },
                                  [&] { return tg::matmul(x, a) * 0.5f; });
    return tg::for_range(3, h, [&](const tg::Tensor&, const tg::Tensor& s) { return tg::tanh(tg::matmul(s, b)) + s; });
  };
  auto predict = tg::function(model_fn, {.input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 3}, tg::float32)}});
  predict.get_concrete_function(tg::TensorSpec({tg::None, 3}, tg::float32));
  const std::string path = (scratch() / "cf_train.onnx").string();
  tg::export_onnx(path, predict);
  tg::OnnxImportOptions options;
  options.initializers_as_variables = true;
  const tg::LoadedFunction imported = tg::import_onnx(path, options);
  const std::vector<tg::Variable> vars = imported.variables();
  // The weights, and the float constants the export wrote as initializers.
  auto named = [&](const std::string& name) {
    for (const tg::Variable& v : vars)
      if (v.name() == name) return v;
    ADD_FAILURE() << "no Variable '" << name << "'";
    return vars.at(0);
  };
  const tg::Variable iw1 = named("w1"), iw2 = named("w2");
  for (const tg::Tensor& x : {uniform({4, 3}, 122, 0.1f, 1.0f), uniform({2, 3}, 123, -1.0f, -0.1f)}) {
    auto grads_of = [&](auto&& f, const tg::Variable& a, const tg::Variable& b) {
      auto step = tg::function([&](const tg::Tensor& xb) {
        tg::GradientTape tape;
        const tg::Tensor loss = tg::reduce_sum(tg::square(tg::Tensor(f(xb))));
        return tape.gradient(loss, std::vector<tg::Variable>{a, b});
      });
      return step(x);
    };
    const std::vector<tg::Tensor> want = grads_of(model_fn, w1, w2);
    const std::vector<tg::Tensor> got = grads_of(imported, iw1, iw2);
    ASSERT_EQ(got.size(), 2u);
    expect_close(got[0], want[0], 1e-5, 1e-6, "d w1");
    expect_close(got[1], want[1], 1e-5, 1e-6, "d w2");
  }
}

// Gradients through a Loop's scan output: with a constant M and a static element shape the
// arrays are whole from the start. acc <- acc * x from acc = x: the rows are x^2 .. x^5. With a
// condition that stops the loop early, the rows are cut to the iterations run.
TEST(OnnxImportTraining, GradientsFlowThroughAScanOutput) {
  auto loop_model = [](bool stop_early) {
    Model m;
    m.input("x", kF, {3});
    m.ints("M", {}, {4});
    m.floats("limit", {}, {10.0f});
    Sub body("body");
    body.input("i", kI64, {});
    body.input("c", kBool, {});
    body.input("acc", kF, {3});
    body.node("Mul", {"acc", "x"}, {"acc_next"});
    if (stop_early) {
      body.node("ReduceMax", {"acc_next"}, {"top"});
      attr(*body.g.mutable_node(1), "keepdims", int64_t{0});
      body.node("Less", {"top", "limit"}, {"c_next"});
    } else {
      body.node("Identity", {"c"}, {"c_next"});
    }
    body.output("c_next");
    body.output("acc_next");
    body.output("acc_next");
    attr(m.node("Loop", {"M", "", "x"}, {"acc_final", "rows"}), "body", body.g);
    m.output("acc_final");
    m.output("rows");
    return m.load();
  };
  const tg::Tensor x = tg::constant({1.0f, 2.0f, 0.5f});
  for (const bool stop_early : {false, true}) {
    const tg::LoadedFunction f = loop_model(stop_early);
    auto step = tg::function([&](const tg::Tensor& xb) {
      tg::GradientTape tape;
      tape.watch(xb);
      const tg::Outputs o = f(xb);
      return std::make_pair(o[1], tape.gradient(tg::reduce_sum(o[1]), xb));
    });
    const auto [rows, grad] = step(x);
    // Without the stop: 4 rows. With it: 2^2, 2^3 = 8, 2^4 = 16 >= 10 stops after 3 rows.
    const int n = stop_early ? 3 : 4;
    std::vector<float> want_rows, want_grad(3, 0.0f);
    for (int k = 0; k < n; ++k)
      for (std::size_t j = 0; j < 3; ++j) {
        const float v = x.to_vector<float>()[j];
        want_rows.push_back(std::pow(v, static_cast<float>(k + 2)));
        want_grad[j] += static_cast<float>(k + 2) * std::pow(v, static_cast<float>(k + 1));
      }
    expect_close(rows, tg::constant(want_rows, {n, 3}), 1e-6, 0, "rows");
    expect_close(grad, tg::constant(want_grad, {3}), 1e-5, 0, "gradient");
  }
}

}  // namespace
