// tg::export_onnx: models written for the ONNX checker and ONNX Runtime (tests/onnx/check_models.py
// and run_onnxruntime.mjs, run by CTest after this binary), and the exporter's refusals.
//
// Each case writes <case>.onnx, its inputs <case>.r<run>.in.<input>.npy and tracegraph's results
// <case>.r<run>.out.<output>.npy (computed here by calling the traced function), and
// <case>.dims.json: which input dims must be symbolic. With TG_ONNX_CASES_DIR unset the files go
// to a scratch folder and only the C++ side is checked.
#include <gtest/gtest.h>
#include <tracegraph/npy.h>
#include <tracegraph/onnx.h>
#include <tracegraph/tracegraph.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path cases_dir() {
  const char* env = std::getenv("TG_ONNX_CASES_DIR");
  const fs::path dir = env ? fs::path(env) : fs::temp_directory_path() / "tg_onnx_cases";
  fs::create_directories(dir);
  return dir;
}

tg::Tensor uniform(const tg::TensorShape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return tg::random_uniform(shape, lo, hi, seed);
}

tg::Tensor labels(int64_t n, int classes, uint64_t seed) {
  return tg::cast(tg::floor(uniform({n}, seed, 0.0f, static_cast<float>(classes) - 0.01f)), tg::int32);
}

// An ONNX value name as part of a file name: '%' and '/' percent-encoded (run_onnxruntime.mjs
// decodes them), so that a Variable's input "dense/kernel" names a file.
std::string file_part(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '%') out += "%25";
    else if (c == '/') out += "%2F";
    else out += c;
  }
  return out;
}

// Writes one run of a case: its named inputs and the traced function's flattened results, then
// any further named outputs (the new values of the Variables a step writes).
void write_run(const std::string& name, int run, const std::vector<std::pair<std::string, tg::Tensor>>& inputs,
               const std::vector<tg::Tensor>& outputs,
               const std::vector<std::pair<std::string, tg::Tensor>>& named_outputs = {}) {
  const fs::path dir = cases_dir();
  const std::string prefix = name + ".r" + std::to_string(run);
  for (const auto& in : inputs)
    tg::save_npy((dir / (prefix + ".in." + file_part(in.first) + ".npy")).string(), in.second);
  for (std::size_t k = 0; k < outputs.size(); ++k)
    tg::save_npy((dir / (prefix + ".out.output_" + std::to_string(k) + ".npy")).string(), outputs[k]);
  for (const auto& out : named_outputs)
    tg::save_npy((dir / (prefix + ".out." + file_part(out.first) + ".npy")).string(), out.second);
}

void write_dims(const std::string& name, const std::map<std::string, std::vector<int>>& symbolic) {
  std::ofstream out(cases_dir() / (name + ".dims.json"));
  out << "{";
  bool first = true;
  for (const auto& [input, axes] : symbolic) {
    out << (first ? "" : ", ") << "\"" << input << "\": [";
    for (std::size_t k = 0; k < axes.size(); ++k) out << (k ? ", " : "") << axes[k];
    out << "]";
    first = false;
  }
  out << "}\n";
}

std::string model_path(const std::string& name) { return (cases_dir() / (name + ".onnx")).string(); }

// The demo's MLP at a small size: dense layers with relu, fixed seeds.
struct SmallMlp {
  tg::nn::Dense hidden1{12, 16, tg::relu, /*seed=*/1, tg::float32, "hidden1"};
  tg::nn::Dense hidden2{16, 16, tg::relu, /*seed=*/2, tg::float32, "hidden2"};
  tg::nn::Dense logits{16, 5, nullptr, /*seed=*/3, tg::float32, "logits"};
  tg::Tensor operator()(const tg::Tensor& x) const { return logits(hidden2(hidden1(x))); }
  std::vector<tg::Variable> variables() const {
    std::vector<tg::Variable> v;
    for (const auto* layer : {&hidden1, &hidden2, &logits})
      for (const auto& var : layer->trainable_variables()) v.push_back(var);
    return v;
  }
};

// The CNN demo's network at a small size: two conv + max-pool blocks, dense, dropout, dense.
struct SmallCnn {
  tg::nn::Conv2D conv1{1, 4, {3}, {.padding = tg::Padding::Same, .activation = tg::relu, .seed = 11, .name = "conv1"}};
  tg::nn::Conv2D conv2{4, 6, {3}, {.padding = tg::Padding::Same, .activation = tg::relu, .seed = 12, .name = "conv2"}};
  tg::nn::Dense hidden{2 * 2 * 6, 10, tg::relu, /*seed=*/13, tg::float32, "hidden"};
  tg::nn::Dropout dropout{0.25, /*seed=*/14};
  tg::nn::Dense logits{10, 3, nullptr, /*seed=*/15, tg::float32, "logits"};
  tg::Tensor operator()(const tg::Tensor& x, bool training) const {
    tg::Tensor h = tg::reshape(x, {-1, 8, 8, 1});
    h = tg::max_pool2d(conv1(h), {2}, {2}, tg::Padding::Valid);  // (batch, 4, 4, 4)
    h = tg::max_pool2d(conv2(h), {2}, {2}, tg::Padding::Valid);  // (batch, 2, 2, 6)
    h = hidden(tg::reshape(h, {-1, 2 * 2 * 6}));
    return logits(dropout(h, training));
  }
};

TEST(OnnxExport, MlpPredictWithNoneBatch) {
  SmallMlp model;
  auto predict = tg::function([&](const tg::Tensor& x) { return tg::softmax(model(x)); },
                              {.name = "predict",
                               .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 12}, tg::float32)},
                               .arg_names = {"x"}});
  const tg::Tensor x3 = uniform({3, 12}, 21), x5 = uniform({5, 12}, 22);
  const tg::Tensor y3 = predict(x3), y5 = predict(x5);
  const std::vector<std::string> paths = tg::export_onnx(model_path("mlp_predict"), predict);
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_TRUE(fs::exists(paths[0]));
  write_run("mlp_predict", 0, {{"x", x3}}, {y3});
  write_run("mlp_predict", 1, {{"x", x5}}, {y5});
  write_dims("mlp_predict", {{"x", {0}}});
}

TEST(OnnxExport, CnnPredictWithNoneBatch) {
  SmallCnn model;
  auto predict = tg::function([&](const tg::Tensor& x) { return model(x, /*training=*/false); },
                              {.name = "cnn_predict",
                               .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 64}, tg::float32)},
                               .arg_names = {"images"}});
  const tg::Tensor x2 = uniform({2, 64}, 31, 0.0f, 1.0f), x4 = uniform({4, 64}, 32, 0.0f, 1.0f);
  const tg::Tensor y2 = predict(x2), y4 = predict(x4);
  tg::export_onnx(model_path("cnn_predict"), predict);
  write_run("cnn_predict", 0, {{"images", x2}}, {y2});
  write_run("cnn_predict", 1, {{"images", x4}}, {y4});
  write_dims("cnn_predict", {{"images", {0}}});
}

// Grouped conv2d (Conv's group), depthwise_conv2d (group = channels, the filter reshaped) and
// conv2d_transpose (ConvTranspose with explicit pads and output_padding), with a None batch; the
// model read back by the importer gives the same results.
TEST(OnnxExport, GroupedDepthwiseAndTransposedConvolutions) {
  const tg::Tensor grouped = uniform({3, 3, 2, 6}, 41), depthwise = uniform({3, 3, 6, 2}, 42);
  const tg::Tensor up_same = uniform({3, 3, 4, 12}, 43), up_valid = uniform({2, 3, 3, 4}, 44);
  auto net = tg::function(
      [&](const tg::Tensor& x) {
        const tg::Tensor h = tg::relu(tg::conv2d(x, grouped, {1, 1}, tg::Padding::Same));              // (n, 7, 7, 6)
        const tg::Tensor d = tg::depthwise_conv2d(h, depthwise, {2, 2}, tg::Padding::Same);            // (n, 4, 4, 12)
        const tg::Tensor u = tg::conv2d_transpose(d, up_same, {tg::None, 7, 7, 4}, {2, 2}, tg::Padding::Same);
        return tg::conv2d_transpose(u, up_valid, {tg::None, 15, 16, 3}, {2, 2}, tg::Padding::Valid);
      },
      {.name = "grouped_convs",
       .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 7, 7, 4}, tg::float32)},
       .arg_names = {"images"}});
  const tg::Tensor x1 = uniform({1, 7, 7, 4}, 45), x3 = uniform({3, 7, 7, 4}, 46);
  const tg::Tensor y1 = net(x1), y3 = net(x3);
  EXPECT_EQ(y3.shape(), tg::TensorShape({3, 15, 16, 3}));
  tg::export_onnx(model_path("grouped_convs"), net);
  write_run("grouped_convs", 0, {{"images", x1}}, {y1});
  write_run("grouped_convs", 1, {{"images", x3}}, {y3});
  write_dims("grouped_convs", {{"images", {0}}});
  tg::LoadedFunction back = tg::import_onnx(model_path("grouped_convs"));
  const tg::Tensor again = back(x3);
  ASSERT_EQ(again.shape(), y3.shape());
  const std::vector<float> a = again.to_vector<float>(), b = y3.to_vector<float>();
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f * (1.0f + std::abs(b[i]))) << "element " << i;
}

// The train step's forward half: the loss and the accuracy (cross-entropy, argmax, equal, cast,
// the reductions), with the labels as int32.
TEST(OnnxExport, MlpLossAndAccuracy) {
  SmallMlp model;
  auto evaluate = tg::function(
      [&](const tg::Tensor& x, const tg::Tensor& y) {
        const tg::Tensor logits = model(x);
        return std::make_pair(tg::nn::sparse_softmax_cross_entropy(logits, y), tg::nn::accuracy(logits, y));
      },
      {.name = "evaluate", .arg_names = {"x", "y"}});
  const tg::Tensor x = uniform({6, 12}, 41), y = labels(6, 5, 42);
  const auto [loss, acc] = evaluate(x, y);
  tg::export_onnx(model_path("mlp_loss"), evaluate);
  write_run("mlp_loss", 0, {{"x", x}, {"y", y}}, {loss, acc});
  write_dims("mlp_loss", {});
}

// The train step's backward half: the gradients of the loss, as the tape records them in a
// trace (matmuls with transposes, the bias sums, relu's gradient, the cross-entropy's).
TEST(OnnxExport, MlpGradients) {
  SmallMlp model;
  auto gradients = tg::function(
      [&](const tg::Tensor& x, const tg::Tensor& y) {
        tg::GradientTape tape;
        const tg::Tensor loss = tg::nn::sparse_softmax_cross_entropy(model(x), y);
        return tape.gradient(loss, model.variables());
      },
      {.name = "gradients",
       .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 12}, tg::float32),
                                                      tg::TensorSpec({tg::None}, tg::int32)},
       .arg_names = {"x", "y"}});
  const tg::Tensor x = uniform({7, 12}, 51), y = labels(7, 5, 52);
  const std::vector<tg::Tensor> grads = gradients(x, y);
  tg::export_onnx(model_path("mlp_gradients"), gradients);
  write_run("mlp_gradients", 0, {{"x", x}, {"y", y}}, grads);
  write_dims("mlp_gradients", {{"x", {0}}, {"y", {0}}});
}

// More rows of the table in one graph, each result an output.
TEST(OnnxExport, ManyOps) {
  auto f = tg::function(
      [](const tg::Tensor& a, const tg::Tensor& b) {
        std::vector<tg::Tensor> r;
        r.push_back(tg::log_softmax(a, 0));
        r.push_back(tg::reduce_max(a, {1}, true) - tg::reduce_min(a, {0}));
        r.push_back(tg::reduce_prod(tg::sigmoid(a), {1}));
        r.push_back(tg::cast(tg::argmin(a, 1), tg::int32));
        r.push_back(tg::where(a > b, tg::tanh(a), tg::exp(b)));
        r.push_back(tg::transpose(tg::concat({a, b}, 1), {1, 0}));
        r.push_back(tg::stack({a, b}, 1));
        r.push_back(tg::slice(a, {1, 0}, {2, -1}));
        r.push_back(tg::gelu(a) + tg::gelu(b, /*approximate=*/true));
        r.push_back(tg::sqrt(tg::abs(a)) * tg::rsqrt(tg::square(b) + 1.0f));
        r.push_back(tg::cumsum(a, 1));
        r.push_back(tg::tile(b, {1, 2}));
        r.push_back(tg::pad(a, {{1, 0}, {0, 2}}));
        r.push_back(tg::reverse(a, {1}));
        r.push_back(tg::reduce_any(a > 0.5f, {1}));
        r.push_back(tg::maximum(a, b) / tg::minimum(a, b - 3.0f));
        r.push_back(tg::leaky_relu(a, 0.2f) + tg::elu(b) + tg::softplus(a));
        r.push_back(tg::floordiv(a, b + 2.0f) + tg::mod(a * 3.0f, b + 2.0f));
        r.push_back(tg::expand_dims(tg::squeeze(tg::reshape(a, {1, 4, 3})), -1));
        r.push_back(tg::gather(a, tg::constant({2, 0}), 0));
        return r;
      },
      {.name = "many_ops", .arg_names = {"a", "b"}});
  const tg::Tensor a = uniform({4, 3}, 61), b = uniform({4, 3}, 62);
  const std::vector<tg::Tensor> results = f(a, b);
  tg::export_onnx(model_path("many_ops"), f);
  write_run("many_ops", 0, {{"a", a}, {"b", b}}, results);
  write_dims("many_ops", {});
}

// Shape, indexing and pooling rows, on an NHWC image batch and integer indices.
TEST(OnnxExport, ShapeAndIndexOps) {
  auto f = tg::function(
      [](const tg::Tensor& img, const tg::Tensor& idx) {
        std::vector<tg::Tensor> r;
        r.push_back(tg::avg_pool2d(img, {2}, {2}, tg::Padding::Same));
        for (const tg::Tensor& piece : tg::split(img, std::vector<int64_t>{1, -1}, 3)) r.push_back(piece);
        r.push_back(tg::one_hot(idx, 4, 2.0, -1.0));
        r.push_back(tg::gather_nd(tg::reshape(img, {-1, 2}), tg::reshape(tg::mod(idx, tg::constant(2)), {-1, 1})));
        r.push_back(tg::shape(img));
        r.push_back(tg::size(img));
        r.push_back(img[1]);
        r.push_back(tg::range(tg::constant(1), tg::constant(9), tg::constant(3)));
        r.push_back(tg::zeros_like(img) + tg::ones_like(img) * tg::sign(img) + tg::round(img * 4.0f));
        r.push_back(tg::reduce_all(idx < 3, {0}));
        r.push_back(tg::broadcast_to(tg::reduce_mean(img, {0, 1, 2}), tg::constant({2, 3})));
        return r;
      },
      {.name = "shape_ops", .arg_names = {"img", "idx"}});
  const tg::Tensor img = uniform({2, 3, 5, 3}, 81), idx = tg::constant({0, 3, -1, 2, 5});
  const std::vector<tg::Tensor> results = f(img, idx);
  tg::export_onnx(model_path("shape_ops"), f);
  write_run("shape_ops", 0, {{"img", img}, {"idx", idx}}, results);
  write_dims("shape_ops", {});
}

TEST(OnnxExport, EachTraceIsOneModel) {
  auto f = tg::function([](const tg::Tensor& x) { return tg::relu(x) * 2.0f; }, {.name = "two_traces"});
  f(tg::ones({2}));
  f(tg::ones({2, 3}));
  const std::vector<std::string> paths = tg::export_onnx(model_path("two_traces"), f);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(fs::path(paths[0]).filename(), "two_traces.0.onnx");
  EXPECT_EQ(fs::path(paths[1]).filename(), "two_traces.1.onnx");
  for (const auto& p : paths) EXPECT_TRUE(fs::exists(p));
}

TEST(OnnxExport, LoadedFunctionExportsLikeTheOriginal) {
  SmallMlp model;
  auto predict = tg::function([&](const tg::Tensor& x) { return model(x); }, {.name = "predict", .arg_names = {"x"}});
  const tg::Tensor x = uniform({2, 12}, 71);
  const tg::Tensor y = predict(x);
  const fs::path tgx = cases_dir() / "loaded_mlp.tgx";
  tg::save(tgx.string(), predict);
  tg::export_onnx(model_path("loaded_mlp"), tg::load(tgx.string()));
  write_run("loaded_mlp", 0, {{"x", x}}, {y});
  write_dims("loaded_mlp", {});
}

// tg::cond, tg::while_loop (with maximum_iterations, a cond in its body, captures) and
// tg::for_range as If and Loop; two runs take each branch and different trip counts.
TEST(OnnxExport, CondAndWhileLoop) {
  const tg::Tensor w = tg::constant({0.5f, -1.0f, 2.0f});
  auto f = tg::function(
      [&](const tg::Tensor& x, const tg::Tensor& n) {
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
        // a loop with two variables of different dtypes
        const auto [count, halved] = tg::while_loop(
            [](const std::pair<tg::Tensor, tg::Tensor>& v) { return tg::reduce_max(tg::abs(v.second)) > 0.01f; },
            [](const std::pair<tg::Tensor, tg::Tensor>& v) {
              return std::make_pair(v.first + int64_t{1}, v.second * 0.5f);
            },
            std::make_pair(tg::constant(int64_t{0}), x));
        return std::vector<tg::Tensor>{y, grown, total, count, halved};
      },
      {.name = "control_flow",
       .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 3}, tg::float32),
                                                      tg::TensorSpec({}, tg::int32)},
       .arg_names = {"x", "n"}});
  const tg::Tensor x0 = uniform({2, 3}, 95, 0.1f, 1.0f), x1 = uniform({4, 3}, 96, -1.0f, -0.1f);
  const tg::Tensor n0 = tg::constant(3), n1 = tg::constant(0);
  const std::vector<tg::Tensor> r0 = f(x0, n0), r1 = f(x1, n1);
  tg::export_onnx(model_path("control_flow"), f);
  write_run("control_flow", 0, {{"x", x0}, {"n", n0}}, r0);
  write_run("control_flow", 1, {{"x", x1}, {"n", n1}}, r1);
  write_dims("control_flow", {{"x", {0}}});
}

// scaled_dot_product_attention's rows: the default scale, a bool mask that hides every key of
// one query row (zeros, where ONNX's Softmax gives NaN), causal with Tq != Tk combined with the
// mask, a float mask with a given scale.
TEST(OnnxExport, AttentionMasks) {
  auto f = tg::function(
      [](const tg::Tensor& q, const tg::Tensor& k, const tg::Tensor& v, const tg::Tensor& mask,
         const tg::Tensor& bias) {
        std::vector<tg::Tensor> r;
        r.push_back(tg::scaled_dot_product_attention(q, k, v));
        r.push_back(tg::scaled_dot_product_attention(q, k, v, {.mask = mask}));
        r.push_back(tg::scaled_dot_product_attention(q, k, v, {.mask = mask, .causal = true}));
        r.push_back(tg::scaled_dot_product_attention(q, k, v, {.mask = bias, .scale = 0.3}));
        r.push_back(tg::scaled_dot_product_attention(k, q, q, {.causal = true}));
        return r;
      },
      {.name = "attention", .arg_names = {"q", "k", "v", "mask", "bias"}});
  const tg::Tensor q = uniform({2, 3, 4, 8}, 101), k = uniform({2, 3, 5, 8}, 102), v = uniform({2, 3, 5, 6}, 103);
  // (Tq, Tk) = (4, 5): row 2 sees no key
  const tg::Tensor mask = tg::constant({{true, false, true, true, false},
                                        {false, true, true, false, true},
                                        {false, false, false, false, false},
                                        {true, true, false, true, true}});
  const tg::Tensor bias = uniform({2, 1, 4, 5}, 104, -2.0f, 0.0f);
  const std::vector<tg::Tensor> results = f(q, k, v, mask, bias);
  // the hidden row gives zeros, as the op's rule says
  EXPECT_EQ(tg::reduce_max(tg::abs(results[1][0][0][2])).item<float>(), 0.0f);
  tg::export_onnx(model_path("attention"), f);
  write_run("attention", 0, {{"q", q}, {"k", k}, {"v", v}, {"mask", mask}, {"bias", bias}}, results);
  write_dims("attention", {});
}

// A transformer block (PyTorch's TransformerEncoderLayer: MultiHeadAttention, LayerNorm, the
// feed-forward) with a None batch and sequence length, with and without the causal mask.
TEST(OnnxExport, TransformerBlock) {
  tg::nn::TransformerEncoderLayer block(16, 4, 32, {.seed = 7, .name = "block"});
  auto f = tg::function(
      [&](const tg::Tensor& x) {
        return std::make_pair(block(x), block(x, {.use_causal_mask = true}));
      },
      {.name = "transformer",
       .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, tg::None, 16}, tg::float32)},
       .arg_names = {"x"}});
  const tg::Tensor x0 = uniform({2, 5, 16}, 111), x1 = uniform({1, 7, 16}, 112);
  const auto [a0, b0] = f(x0);
  const auto [a1, b1] = f(x1);
  tg::export_onnx(model_path("transformer"), f);
  write_run("transformer", 0, {{"x", x0}}, {a0, b0});
  write_run("transformer", 1, {{"x", x1}}, {a1, b1});
  write_dims("transformer", {{"x", {0, 1}}});
}

// MultiHeadAttention and its gradients: the layer hands the attention op and its gradient op
// heads interleaved in the rows ((batch, T, heads, D)), and the exporter writes the Transposes to
// ONNX's (batch, heads, T, D) around them.
TEST(OnnxExport, MultiHeadAttentionGradients) {
  tg::nn::MultiHeadAttention mha(8, 2, 4, {.value_dim = 3, .output_dim = 5, .seed = 3, .name = "mha"});
  const tg::Variable query_kernel = mha.trainable_variables()[0], value_kernel = mha.trainable_variables()[4];
  auto f = tg::function(
      [&](const tg::Tensor& x, const tg::Tensor& mask) {
        tg::GradientTape tape;
        tape.watch(x);
        const tg::Tensor y = mha(x, x, {.attention_mask = mask, .use_causal_mask = true});
        const std::vector<tg::Tensor> g = tape.gradient(tg::reduce_sum(y * y), {x, query_kernel, value_kernel});
        return std::vector<tg::Tensor>{y, g[0], g[1], g[2]};
      },
      {.name = "mha_gradients",
       .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({2, 6, 8}, tg::float32),
                                                      tg::TensorSpec({2, 6, 6}, tg::bool_)},
       .arg_names = {"x", "mask"}});
  const tg::Tensor x = uniform({2, 6, 8}, 131);
  const tg::Tensor mask = uniform({2, 6, 6}, 132) > 0.0f;
  const std::vector<tg::Tensor> results = f(x, mask);
  tg::export_onnx(model_path("mha_gradients"), f);
  write_run("mha_gradients", 0, {{"x", x}, {"mask", mask}}, results);
  write_dims("mha_gradients", {});
}

// One train step of the MLP with OnnxOptions::variables_as_inputs: the model takes the Variables
// (weights, the learning rate, the step counter, the optimizer's slots) as inputs and returns the
// loss and their new values, which must be tracegraph's after the same step.
void export_train_step(const std::string& name, tg::optim::Optimizer& opt) {
  SmallMlp model;
  auto train_step = tg::function(
      [&](const tg::Tensor& x, const tg::Tensor& y) {
        tg::GradientTape tape;
        const tg::Tensor loss = tg::reduce_mean(tg::nn::sparse_softmax_cross_entropy(model(x), y));
        opt.apply_gradients(tape.gradient(loss, model.variables()), model.variables());
        return loss;
      },
      {.name = name, .arg_names = {"x", "y"}});
  const tg::Tensor x = uniform({6, 12}, 121), y = labels(6, 5, 122);
  {
    // the optimizer makes its Variables on its first step, which a later trace may not do
    tg::GradientTape tape;
    const tg::Tensor loss = tg::reduce_mean(tg::nn::sparse_softmax_cross_entropy(model(x), y));
    opt.apply_gradients(tape.gradient(loss, model.variables()), model.variables());
  }
  // The step writes the weights, the step counter and the slots; it reads the learning rate
  // (the first of the optimizer's Variables) too.
  std::vector<tg::Variable> written = model.variables();
  const std::vector<tg::Variable> own = opt.variables();
  written.insert(written.end(), own.begin() + 1, own.end());
  std::vector<std::pair<std::string, tg::Tensor>> inputs{{"x", x}, {"y", y}};
  // copies of the values before the step (a Variable's buffer may be updated in place)
  for (const tg::Variable& v : written) inputs.emplace_back(v.name(), v.read_value() * tg::ones_like(v.read_value()));
  inputs.emplace_back(own[0].name(), own[0].read_value());
  const tg::Tensor loss = train_step(x, y);
  std::vector<std::pair<std::string, tg::Tensor>> updated;
  for (const tg::Variable& v : written) updated.emplace_back(v.name() + "/new", v.read_value());
  // the step moved the weights (so the comparison is not of unchanged values)
  EXPECT_GT(tg::reduce_max(tg::abs(updated[0].second - inputs[2].second)).item<float>(), 0.0f);
  tg::OnnxOptions options;
  options.variables_as_inputs = true;
  const std::vector<std::string> paths = tg::export_onnx(model_path(name), train_step, options);
  ASSERT_EQ(paths.size(), 1u);
  write_run(name, 0, inputs, {loss}, updated);
  write_dims(name, {});
}

TEST(OnnxExport, MlpSgdStepWithVariablesAsInputs) {
  tg::optim::SGD sgd(0.1);
  export_train_step("mlp_sgd_step", sgd);
}

TEST(OnnxExport, MlpAdamStepWithVariablesAsInputs) {
  tg::optim::Adam adam(0.01);
  export_train_step("mlp_adam_step", adam);
}

// TensorArrays in loops: a fixed-size array with its element shape (the LSTM's kind), a dynamic
// one without (its first write makes the rows), reads of an array, and stacks after zero and
// more iterations.
TEST(OnnxExport, TensorArraysInLoops) {
  auto f = tg::function(
      [](const tg::Tensor& x, const tg::Tensor& n) {
        const tg::Tensor rows = tg::shape(x)[0];
        // fixed size: row i of x times i, written at i
        const tg::TensorArray fixed = tg::for_range(
            rows, tg::TensorArray(tg::float32, rows, false, tg::TensorShape({3})),
            [&](const tg::Tensor& i, const tg::TensorArray& ta) { return ta.write(i, tg::gather(x, i) * tg::cast(i, tg::float32)); });
        // dynamic, no element shape: n pieces of running sums
        const auto [sum, grown] = tg::for_range(
            n, std::make_pair(tg::zeros({3}), tg::TensorArray(tg::float32, 0, true)),
            [&](const tg::Tensor& i, const std::pair<tg::Tensor, tg::TensorArray>& st) {
              const tg::Tensor next = st.first + tg::gather(x, tg::mod(i, rows));
              return std::make_pair(next, st.second.write(i, next));
            });
        // dynamic with its element shape: stacks to (0, 2) when n is 0
        const tg::TensorArray pairs = tg::for_range(
            n, tg::TensorArray(tg::int32, 0, true, tg::TensorShape({2})),
            [&](const tg::Tensor& i, const tg::TensorArray& ta) { return ta.write(i, tg::stack({i, i * 2})); });
        // reads back from the fixed array, in reverse
        const tg::Tensor reversed = tg::for_range(rows, tg::zeros({3}), [&](const tg::Tensor& i, const tg::Tensor& acc) {
          return acc * 0.5f + fixed.read(rows - 1 - i);
        });
        return std::vector<tg::Tensor>{fixed.stack(), sum, pairs.stack(), reversed, grown.stack()};
      },
      {.name = "tensor_arrays",
       .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 3}, tg::float32), tg::TensorSpec({}, tg::int32)},
       .arg_names = {"x", "n"}});
  const tg::Tensor x0 = uniform({4, 3}, 131), x1 = uniform({2, 3}, 132);
  const tg::Tensor n0 = tg::constant(5), n1 = tg::constant(1);
  const std::vector<tg::Tensor> r0 = f(x0, n0), r1 = f(x1, n1);
  EXPECT_EQ(r0[4].shape().to_string(), "(5, 3)");
  tg::export_onnx(model_path("tensor_arrays"), f);
  write_run("tensor_arrays", 0, {{"x", x0}, {"n", n0}}, r0);
  write_run("tensor_arrays", 1, {{"x", x1}, {"n", n1}}, r1);
  write_dims("tensor_arrays", {{"x", {0}}});
  // With zero iterations the dynamic array without an element shape cannot be stacked (by
  // tracegraph either), so that run goes to a model without that output.
  auto g = tg::function(
      [](const tg::Tensor& n) {
        return tg::for_range(n, tg::TensorArray(tg::float32, 0, true, tg::TensorShape({2})),
                             [](const tg::Tensor& i, const tg::TensorArray& ta) {
                               return ta.write(i, tg::stack({tg::cast(i, tg::float32), tg::constant(1.0f)}));
                             })
            .stack();
      },
      {.name = "empty_array", .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({}, tg::int32)}, .arg_names = {"n"}});
  const tg::Tensor e0 = g(tg::constant(0)), e1 = g(tg::constant(3));
  EXPECT_EQ(e0.shape().to_string(), "(0, 2)");
  tg::export_onnx(model_path("empty_array"), g);
  write_run("empty_array", 0, {{"n", tg::constant(0)}}, {e0});
  write_run("empty_array", 1, {{"n", tg::constant(3)}}, {e1});
  write_dims("empty_array", {});
}

// Row updates of Variables (scatter_add / scatter_sub / scatter_update, as optimizers apply
// sparse gradients) in a step exported with variables_as_inputs.
TEST(OnnxExport, ScatterVariableStepWithVariablesAsInputs) {
  tg::Variable table(uniform({5, 3}, 141), "table"), counts(tg::constant({1.0f, 2.0f, 3.0f, 4.0f}), "counts");
  auto step = tg::function(
      [&](const tg::Tensor& rows, const tg::Tensor& updates) {
        table.scatter_add(tg::IndexedSlices(rows, updates, tg::TensorShape({5, 3})));
        table.scatter_sub(tg::IndexedSlices(tg::constant({0}), tg::ones({1, 3}) * 0.25f, tg::TensorShape({5, 3})));
        counts.scatter_update(tg::IndexedSlices(tg::constant({int64_t{2}}), tg::constant({-7.0f}), tg::TensorShape({4})));
        return tg::reduce_sum(table.read_value());
      },
      {.name = "scatter_step", .arg_names = {"rows", "updates"}});
  const tg::Tensor rows = tg::constant({4, 1, 4}), updates = uniform({3, 3}, 142);
  std::vector<std::pair<std::string, tg::Tensor>> inputs{{"rows", rows}, {"updates", updates}};
  inputs.emplace_back("table", table.read_value() * tg::ones_like(table.read_value()));
  inputs.emplace_back("counts", counts.read_value() + tg::zeros_like(counts.read_value()));
  const tg::Tensor total = step(rows, updates);
  const std::vector<std::pair<std::string, tg::Tensor>> updated{{"table/new", table.read_value()},
                                                               {"counts/new", counts.read_value()}};
  EXPECT_EQ(counts.read_value().to_vector<float>(), (std::vector<float>{1, 2, -7, 4}));
  tg::OnnxOptions options;
  options.variables_as_inputs = true;
  tg::export_onnx(model_path("scatter_step"), step, options);
  write_run("scatter_step", 0, inputs, {total}, updated);
  write_dims("scatter_step", {});
}

// scaled_dot_product_attention's gradient op, expanded: the gradients of q, k and v with a bool
// mask that hides a whole query row, causal, and a float mask with a given scale.
TEST(OnnxExport, AttentionGradients) {
  auto f = tg::function(
      [](const tg::Tensor& q, const tg::Tensor& k, const tg::Tensor& v, const tg::Tensor& mask, const tg::Tensor& bias) {
        tg::GradientTape tape;
        tape.watch(q);
        tape.watch(k);
        tape.watch(v);
        const tg::Tensor a = tg::scaled_dot_product_attention(q, k, v, {.mask = mask});
        const tg::Tensor b = tg::scaled_dot_product_attention(q, k, v, {.causal = true});
        const tg::Tensor c = tg::scaled_dot_product_attention(q, k, v, {.mask = bias, .scale = 0.3});
        const tg::Tensor loss = tg::reduce_sum(tg::square(a)) + tg::reduce_sum(b * tg::cos(b)) + tg::reduce_sum(tg::tanh(c));
        return tape.gradient(loss, std::vector<tg::Tensor>{q, k, v});
      },
      {.name = "attention_grad", .arg_names = {"q", "k", "v", "mask", "bias"}});
  const tg::Tensor q = uniform({2, 2, 4, 3}, 151), k = uniform({2, 2, 4, 3}, 152), v = uniform({2, 2, 4, 5}, 153);
  // query 1 sees no key
  const tg::Tensor mask = tg::constant({{true, true, false, true},
                                        {false, false, false, false},
                                        {true, false, true, true},
                                        {true, true, true, false}});
  const tg::Tensor bias = uniform({1, 1, 4, 4}, 154);
  const std::vector<tg::Tensor> grads = f(q, k, v, mask, bias);
  tg::export_onnx(model_path("attention_grad"), f);
  write_run("attention_grad", 0, {{"q", q}, {"k", k}, {"v", v}, {"mask", mask}, {"bias", bias}}, grads);
  write_dims("attention_grad", {});
}

// layer_norm and its gradient op, expanded: nn::LayerNorm's output and the gradients of its
// input, gamma and beta, over a rank-3 input.
TEST(OnnxExport, LayerNormAndItsGradients) {
  tg::nn::LayerNorm ln(6, 1e-3, tg::float32, "ln");
  ln.gamma().assign(uniform({6}, 161));
  ln.beta().assign(uniform({6}, 162));
  const tg::Tensor w = uniform({3, 4, 6}, 163);
  auto f = tg::function(
      [&](const tg::Tensor& x) {
        tg::GradientTape tape;
        tape.watch(x);
        const tg::Tensor y = ln(x);
        std::vector<tg::Tensor> out = tape.gradient(tg::reduce_sum(tg::square(y) * w), {x, ln.gamma(), ln.beta()});
        out.insert(out.begin(), y);
        return out;
      },
      {.name = "layer_norm_grad", .arg_names = {"x"}});
  const tg::Tensor x = uniform({3, 4, 6}, 164, -2.0f, 2.0f);
  const std::vector<tg::Tensor> outs = f(x);
  tg::export_onnx(model_path("layer_norm_grad"), f);
  write_run("layer_norm_grad", 0, {{"x", x}}, outs);
  write_dims("layer_norm_grad", {});
}

// gelu's gradient is the op gelu_grad (Phi(x) + x phi(x)), exported as TF's formula; inputs on both
// sides of its zero near -0.75 and into the tails.
TEST(OnnxExport, GeluGradient) {
  auto f = tg::function(
      [](const tg::Tensor& x, const tg::Tensor& w) {
        tg::GradientTape tape;
        tape.watch(x);
        const tg::Tensor loss = tg::reduce_sum(tg::gelu(x) * w);
        return tape.gradient(loss, {x})[0];
      },
      {.name = "gelu_grad", .arg_names = {"x", "w"}});
  const tg::Tensor x = uniform({5, 8}, 171, -6.0f, 6.0f), w = uniform({5, 8}, 172);
  const tg::Tensor dx = f(x, w);
  tg::export_onnx(model_path("gelu_grad"), f);
  write_run("gelu_grad", 0, {{"x", x}, {"w", w}}, {dx});
  write_dims("gelu_grad", {});
}

// A train step of a recurrent layer (tg::for_range over the time steps, a TensorArray for the
// outputs, and the loop's gradient) exported with variables_as_inputs; a mask skips steps.
template <class Layer>
void export_recurrent_step(const std::string& name, const Layer& rnn, tg::optim::Optimizer& opt) {
  tg::nn::Dense head{4, 2, nullptr, /*seed=*/162, tg::float32, "head"};
  std::vector<tg::Variable> vars = rnn.trainable_variables();
  for (const auto& v : head.trainable_variables()) vars.push_back(v);
  const tg::Tensor x = uniform({2, 5, 3}, 163), y = uniform({2, 5, 2}, 164);
  const tg::Tensor mask = tg::constant({{true, true, false, true, true}, {true, true, true, true, false}});
  auto loss_of = [&](const tg::Tensor& xb, const tg::Tensor& yb, const tg::Tensor& mb) {
    return tg::reduce_mean(tg::square(head(rnn(xb, {.mask = mb})[0]) - yb));
  };
  auto train_step = tg::function(
      [&](const tg::Tensor& xb, const tg::Tensor& yb, const tg::Tensor& mb) {
        tg::GradientTape tape;
        const tg::Tensor loss = loss_of(xb, yb, mb);
        opt.apply_gradients(tape.gradient(loss, vars), vars);
        return loss;
      },
      {.name = name, .arg_names = {"x", "y", "mask"}});
  {
    // the optimizer makes its Variables on its first step
    tg::GradientTape tape;
    const tg::Tensor loss = loss_of(x, y, mask);
    opt.apply_gradients(tape.gradient(loss, vars), vars);
  }
  // The step writes the weights, the step counter and any slots, and reads the learning rate.
  std::vector<tg::Variable> written = vars;
  const std::vector<tg::Variable> own = opt.variables();
  written.insert(written.end(), own.begin() + 1, own.end());
  std::vector<std::pair<std::string, tg::Tensor>> inputs{{"x", x}, {"y", y}, {"mask", mask}};
  for (const tg::Variable& v : written) inputs.emplace_back(v.name(), v.read_value() + tg::zeros_like(v.read_value()));
  inputs.emplace_back(own[0].name(), own[0].read_value());
  const tg::Tensor loss = train_step(x, y, mask);
  std::vector<std::pair<std::string, tg::Tensor>> updated;
  for (const tg::Variable& v : written) updated.emplace_back(v.name() + "/new", v.read_value());
  EXPECT_GT(tg::reduce_max(tg::abs(updated[0].second - inputs[3].second)).item<float>(), 0.0f);
  tg::OnnxOptions options;
  options.variables_as_inputs = true;
  tg::export_onnx(model_path(name), train_step, options);
  write_run(name, 0, inputs, {loss}, updated);
  write_dims(name, {});
}

TEST(OnnxExport, LstmTrainStepWithVariablesAsInputs) {
  tg::nn::LSTM lstm(3, 4, {.return_sequences = true, .seed = 161, .name = "lstm"});
  tg::optim::SGD sgd(0.1);
  export_recurrent_step("lstm_step", lstm, sgd);
}

TEST(OnnxExport, GruAdamTrainStepWithVariablesAsInputs) {
  tg::nn::GRU gru(3, 4, {.return_sequences = true, .go_backwards = true, .seed = 165, .name = "gru"});
  tg::optim::Adam adam(0.01);
  export_recurrent_step("gru_step", gru, adam);
}

// gather's gradient (scatter_add_like) along axis 0 with repeated rows and along axis 1 with
// 2-D indices.
TEST(OnnxExport, GatherGradients) {
  auto f = tg::function(
      [](const tg::Tensor& table, const tg::Tensor& rows, const tg::Tensor& cols) {
        tg::GradientTape tape;
        tape.watch(table);
        const tg::Tensor a = tg::gather(table, rows);      // (4, 3)
        const tg::Tensor b = tg::gather(table, cols, 1);   // (5, 2, 2)
        const tg::Tensor loss = tg::reduce_sum(tg::square(a)) + tg::reduce_sum(tg::sin(b));
        return tape.gradient(loss, table);
      },
      {.name = "gather_grad", .arg_names = {"table", "rows", "cols"}});
  const tg::Tensor table = uniform({5, 3}, 181), rows = tg::constant({4, 0, 4, 2}), cols = tg::constant({{2, 0}, {2, 2}});
  const tg::Tensor g = f(table, rows, cols);
  tg::export_onnx(model_path("gather_grad"), f);
  write_run("gather_grad", 0, {{"table", table}, {"rows", rows}, {"cols", cols}}, {g});
  write_dims("gather_grad", {});
}

// Refusals: a typed error naming the op, and no file.
void expect_refused(const std::string& name, const std::function<void(const std::string&)>& export_fn,
                    const std::string& op) {
  const std::string path = (fs::temp_directory_path() / ("tg_onnx_refused_" + name + ".onnx")).string();
  fs::remove(path);
  try {
    export_fn(path);
    ADD_FAILURE() << name << ": exported, expected a tg::ValueError naming op " << op;
  } catch (const tg::ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("(op " + op + ")"), std::string::npos) << what;
    EXPECT_NE(what.find("[tg::export_onnx]"), std::string::npos) << what;
    EXPECT_NE(what.find("Nothing was written"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(path)) << path;
}

TEST(OnnxExportErrors, VariableWriteIsRefused) {
  tg::Variable v(tg::zeros({2}), "counter");
  auto step = tg::function([&](const tg::Tensor& x) {
    v.assign_add(x);
    return v.read_value();
  }, {.name = "step"});
  step(tg::ones({2}));
  expect_refused("assign", [&](const std::string& p) { tg::export_onnx(p, step); }, "assign_add_variable");
}

TEST(OnnxExportErrors, AVariableWriteInALoopIsRefused) {
  tg::Variable total(tg::zeros({3}), "total");
  auto f = tg::function([&](const tg::Tensor& x) {
    return tg::while_loop([](const tg::Tensor& v) { return tg::reduce_sum(v) < 100.0f; },
                          [&](const tg::Tensor& v) {
                            total.assign_add(v);
                            return v * 2.0f;
                          },
                          x);
  }, {.name = "accumulating"});
  f(tg::ones({3}));
  for (bool as_inputs : {false, true})
    expect_refused("while_write", [&](const std::string& p) {
      tg::OnnxOptions options;
      options.variables_as_inputs = as_inputs;
      tg::export_onnx(p, f, options);
    }, "assign_add_variable");
}

// A cond without results writes no If; a print in one of its branches is refused, not dropped.
TEST(OnnxExportErrors, APrintInACondWithoutResultsIsRefused) {
  auto quiet = tg::function([](const tg::Tensor& x) {
    tg::cond(tg::reduce_sum(x) > 0.0f, [] {}, [] {});
    return x * 2.0f;
  }, {.name = "quiet_cond", .arg_names = {"x"}});
  const tg::Tensor x = tg::constant({1.0f, -3.0f});
  const tg::Tensor y = quiet(x);
  EXPECT_NO_THROW(tg::export_onnx(model_path("quiet_cond"), quiet));
  write_run("quiet_cond", 0, {{"x", x}}, {y});
  write_dims("quiet_cond", {});
  auto loud = tg::function([](const tg::Tensor& x) {
    tg::cond(tg::reduce_sum(x) > 0.0f, [&] { tg::print(x); }, [] {});
    return x * 2.0f;
  }, {.name = "printing_cond"});
  loud(tg::ones({2}));
  expect_refused("print_in_cond", [&](const std::string& p) { tg::export_onnx(p, loud); }, "print");
}

TEST(OnnxExportErrors, AttentionDropoutIsRefused) {
  auto f = tg::function([](const tg::Tensor& q) {
    return tg::scaled_dot_product_attention(q, q, q, {.dropout = 0.5, .training = true, .seed = 3});
  }, {.name = "attention_dropout"});
  f(uniform({1, 2, 3, 4}, 91));
  // The dropout's seed pair is drawn by a random op before the attention: that node is refused,
  // and the message says that the attention reads it.
  const std::string path = (fs::temp_directory_path() / "tg_onnx_refused_dropout.onnx").string();
  fs::remove(path);
  try {
    tg::export_onnx(path, f);
    ADD_FAILURE() << "exported an attention with dropout";
  } catch (const tg::ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("draws random numbers"), std::string::npos) << what;
    EXPECT_NE(what.find("(op scaled_dot_product_attention)"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(OnnxExportErrors, AHostCallIsRefused) {
  auto f = tg::function([](const tg::Tensor& x) {
    return tg::host_call([](const std::vector<tg::Tensor>& in) { return std::vector<tg::Tensor>{in[0]}; }, {x},
                         {tg::float32}, "echo")[0];
  }, {.name = "calls_host"});
  f(tg::ones({2}));
  expect_refused("host_call", [&](const std::string& p) { tg::export_onnx(p, f); }, "host_call");
}

TEST(OnnxExportErrors, AnOpWithoutARuleIsRefused) {
  auto f = tg::function([](const tg::Tensor& x) { return tg::sort(x); }, {.name = "sorting"});
  f(tg::constant({3.0f, 1.0f, 2.0f}));
  expect_refused("sort", [&](const std::string& p) { tg::export_onnx(p, f); }, "sort");
}

TEST(OnnxExportErrors, NothingTracedIsRefused) {
  auto f = tg::function([](const tg::Tensor& x) { return x; }, {.name = "never_called"});
  EXPECT_THROW(tg::export_onnx((fs::temp_directory_path() / "tg_onnx_never.onnx").string(), f), tg::ValueError);
}

}  // namespace
