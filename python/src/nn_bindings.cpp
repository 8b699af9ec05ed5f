// The layers, initializers and losses of tg::nn. Keras's classes (tg.keras.layers.Dense, ...,
// built on their first call, as Keras builds) are in python/tracegraph/keras.py; these are the
// C++ layers they hold. Each layer's Variables are the layer's own: the Python side keeps one
// tg.Variable object per Variable, so Module tracking and tapes see them.
#include <cctype>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"

namespace tgpy {

namespace {

namespace nn = tg::nn;
using tg::Tensor;

tg::Padding to_padding(const std::string& padding, const char* op) {
  std::string p;
  for (char c : padding) p.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (p == "valid") return tg::Padding::Valid;
  if (p == "same") return tg::Padding::Same;
  value_error(std::string("[") + op + "] padding must be \"valid\" or \"same\", got \"" + padding + "\"");
}

// A `training` argument: a Python bool, or a bool scalar tensor (symbolic inside a trace).
template <class Layer>
Tensor call_with_training(const Layer& layer, const Tensor& x, py::handle training) {
  if (PyBool_Check(training.ptr())) {
    const bool flag = training.cast<bool>();
    return without_gil([&] { return layer(x, flag); });
  }
  Tensor flag = to_tensor(training, tg::bool_, DTypeRule::kRequire);
  return without_gil([&] { return layer(x, flag); });
}

using Initializer = Tensor (*)(const tg::TensorShape&, uint64_t, tg::DType);

// A layer's dtype argument: a policy name ("float32", "float64", "bfloat16", "mixed_bfloat16";
// tg.keras.mixed_precision.Policy passes its name) or a floating dtype.
nn::DTypePolicy to_policy(py::handle dtype) {
  if (py::isinstance<py::str>(dtype)) return nn::DTypePolicy(dtype.cast<std::string>());
  return nn::DTypePolicy(to_dtype(dtype));
}

}  // namespace

void register_nn(py::module_& m) {
  // tf.keras.mixed_precision over the C++ policy (python/tracegraph/keras.py), so that C++ and
  // Python layers share one global policy.
  m.def("_dtype_policy", [](const std::string& name) {
    const nn::DTypePolicy policy(name);
    return py::make_tuple(policy.name(), tg::to_string(policy.variable_dtype()),
                          tg::to_string(policy.compute_dtype()));
  }, py::arg("name"));
  m.def("_set_global_policy", [](const std::string& name) { nn::set_global_policy(nn::DTypePolicy(name)); },
        py::arg("name"));
  m.def("_global_policy", [] { return nn::global_policy().name(); });

  py::class_<nn::Dense>(m, "_Dense")
      .def(py::init([](int64_t in, int64_t out, uint64_t seed, py::handle dtype, const std::string& name) {
             const nn::DTypePolicy policy = to_policy(dtype);
             return without_gil([&] { return nn::Dense(in, out, nullptr, seed, policy, name); });
           }),
           py::arg("in_features"), py::arg("out_features"), py::arg("seed"), py::arg("dtype"), py::arg("name"))
      .def("__call__", [](const nn::Dense& d, py::handle x) {
        Tensor t = to_tensor(x);
        return without_gil([&] { return d(t); });
      })
      .def_property_readonly("kernel", [](const nn::Dense& d) { return d.kernel(); })
      .def_property_readonly("bias", [](const nn::Dense& d) { return d.bias(); });

  py::class_<nn::Conv2D>(m, "_Conv2D")
      .def(py::init([](int64_t in, int64_t filters, std::vector<int64_t> kernel_size, std::vector<int64_t> strides,
                       const std::string& padding, std::vector<int64_t> dilations, bool use_bias, uint64_t seed,
                       py::handle dtype, const std::string& name, int64_t groups) {
             nn::Conv2DOptions options;
             options.strides = std::move(strides);
             options.padding = to_padding(padding, "Conv2D");
             options.dilations = std::move(dilations);
             options.use_bias = use_bias;
             options.seed = seed;
             options.dtype = to_policy(dtype);
             options.name = name;
             options.groups = groups;
             return without_gil([&] { return nn::Conv2D(in, filters, std::move(kernel_size), std::move(options)); });
           }),
           py::arg("in_channels"), py::arg("filters"), py::arg("kernel_size"), py::arg("strides"),
           py::arg("padding"), py::arg("dilations"), py::arg("use_bias"), py::arg("seed"), py::arg("dtype"),
           py::arg("name"), py::arg("groups") = 1)
      .def("__call__", [](const nn::Conv2D& c, py::handle x) {
        Tensor t = to_tensor(x);
        return without_gil([&] { return c(t); });
      })
      .def_property_readonly("kernel", [](const nn::Conv2D& c) { return c.kernel(); })
      .def_property_readonly("bias", [](const nn::Conv2D& c) -> py::object {
        if (!c.options().use_bias) return py::none();
        return py::cast(c.bias());
      });

  py::class_<nn::DepthwiseConv2D>(m, "_DepthwiseConv2D")
      .def(py::init([](int64_t in, std::vector<int64_t> kernel_size, std::vector<int64_t> strides,
                       const std::string& padding, int64_t depth_multiplier, std::vector<int64_t> dilations,
                       bool use_bias, uint64_t seed, py::handle dtype, const std::string& name) {
             nn::DepthwiseConv2DOptions options;
             options.strides = std::move(strides);
             options.padding = to_padding(padding, "DepthwiseConv2D");
             options.depth_multiplier = depth_multiplier;
             options.dilations = std::move(dilations);
             options.use_bias = use_bias;
             options.seed = seed;
             options.dtype = to_policy(dtype);
             options.name = name;
             return without_gil([&] { return nn::DepthwiseConv2D(in, std::move(kernel_size), std::move(options)); });
           }),
           py::arg("in_channels"), py::arg("kernel_size"), py::arg("strides"), py::arg("padding"),
           py::arg("depth_multiplier"), py::arg("dilations"), py::arg("use_bias"), py::arg("seed"), py::arg("dtype"),
           py::arg("name"))
      .def("__call__", [](const nn::DepthwiseConv2D& c, py::handle x) {
        Tensor t = to_tensor(x);
        return without_gil([&] { return c(t); });
      })
      .def_property_readonly("kernel", [](const nn::DepthwiseConv2D& c) { return c.kernel(); })
      .def_property_readonly("bias", [](const nn::DepthwiseConv2D& c) -> py::object {
        if (!c.options().use_bias) return py::none();
        return py::cast(c.bias());
      });

  py::class_<nn::Conv2DTranspose>(m, "_Conv2DTranspose")
      .def(py::init([](int64_t in, int64_t filters, std::vector<int64_t> kernel_size, std::vector<int64_t> strides,
                       const std::string& padding, std::vector<int64_t> output_padding, std::vector<int64_t> dilations,
                       bool use_bias, uint64_t seed, py::handle dtype, const std::string& name) {
             nn::Conv2DTransposeOptions options;
             options.strides = std::move(strides);
             options.padding = to_padding(padding, "Conv2DTranspose");
             options.output_padding = std::move(output_padding);
             options.dilations = std::move(dilations);
             options.use_bias = use_bias;
             options.seed = seed;
             options.dtype = to_policy(dtype);
             options.name = name;
             return without_gil(
                 [&] { return nn::Conv2DTranspose(in, filters, std::move(kernel_size), std::move(options)); });
           }),
           py::arg("in_channels"), py::arg("filters"), py::arg("kernel_size"), py::arg("strides"), py::arg("padding"),
           py::arg("output_padding"), py::arg("dilations"), py::arg("use_bias"), py::arg("seed"), py::arg("dtype"),
           py::arg("name"))
      .def("__call__", [](const nn::Conv2DTranspose& c, py::handle x) {
        Tensor t = to_tensor(x);
        return without_gil([&] { return c(t); });
      })
      .def_property_readonly("kernel", [](const nn::Conv2DTranspose& c) { return c.kernel(); })
      .def_property_readonly("bias", [](const nn::Conv2DTranspose& c) -> py::object {
        if (!c.options().use_bias) return py::none();
        return py::cast(c.bias());
      });

  py::class_<nn::Dropout>(m, "_Dropout")
      .def(py::init([](double rate, std::optional<uint64_t> seed) { return nn::Dropout(rate, seed); }),
           py::arg("rate"), py::arg("seed"))
      .def("__call__", [](const nn::Dropout& d, py::handle x, py::handle training) {
        return call_with_training(d, to_tensor(x), training);
      });

  py::class_<nn::Embedding>(m, "_Embedding")
      .def(py::init([](int64_t vocab, int64_t dim, uint64_t seed, py::handle dtype, const std::string& name) {
             const tg::DType dt = to_dtype(dtype);
             return without_gil([&] { return nn::Embedding(vocab, dim, seed, dt, name); });
           }),
           py::arg("input_dim"), py::arg("output_dim"), py::arg("seed"), py::arg("dtype"), py::arg("name"))
      .def("__call__", [](const nn::Embedding& e, py::handle ids) {
        Tensor t = to_tensor(ids);
        return without_gil([&] { return e(t); });
      })
      .def_property_readonly("embeddings", [](const nn::Embedding& e) { return e.embeddings(); });

  py::class_<nn::LayerNorm>(m, "_LayerNorm")
      .def(py::init([](int64_t features, double epsilon, py::handle dtype, const std::string& name) {
             const tg::DType dt = to_dtype(dtype);
             return without_gil([&] { return nn::LayerNorm(features, epsilon, dt, name); });
           }),
           py::arg("features"), py::arg("epsilon"), py::arg("dtype"), py::arg("name"))
      .def("__call__", [](const nn::LayerNorm& l, py::handle x) {
        Tensor t = to_tensor(x);
        return without_gil([&] { return l(t); });
      })
      .def_property_readonly("gamma", [](const nn::LayerNorm& l) { return l.gamma(); })
      .def_property_readonly("beta", [](const nn::LayerNorm& l) { return l.beta(); });

  py::class_<nn::BatchNorm>(m, "_BatchNorm")
      .def(py::init([](int64_t features, double momentum, double epsilon, py::handle dtype, const std::string& name) {
             const tg::DType dt = to_dtype(dtype);
             return without_gil([&] { return nn::BatchNorm(features, momentum, epsilon, dt, name); });
           }),
           py::arg("features"), py::arg("momentum"), py::arg("epsilon"), py::arg("dtype"), py::arg("name"))
      .def("__call__", [](const nn::BatchNorm& b, py::handle x, py::handle training) {
        return call_with_training(b, to_tensor(x), training);
      })
      .def_property_readonly("gamma", [](const nn::BatchNorm& b) { return b.gamma(); })
      .def_property_readonly("beta", [](const nn::BatchNorm& b) { return b.beta(); })
      .def_property_readonly("moving_mean", [](const nn::BatchNorm& b) { return b.moving_mean(); })
      .def_property_readonly("moving_variance", [](const nn::BatchNorm& b) { return b.moving_variance(); });

  py::class_<nn::GRUCell>(m, "_GRUCell")
      .def(py::init([](int64_t input_dim, int64_t units, uint64_t seed, py::handle dtype, const std::string& name) {
             const tg::DType dt = to_dtype(dtype);
             return without_gil([&] { return nn::GRUCell(input_dim, units, seed, dt, name); });
           }),
           py::arg("input_dim"), py::arg("units"), py::arg("seed"), py::arg("dtype"), py::arg("name"))
      .def("__call__", [](const nn::GRUCell& c, py::handle x, py::handle h) {
        Tensor tx = to_tensor(x), th = to_tensor(h);
        return without_gil([&] { return c(tx, th); });
      })
      .def("_variables", &nn::GRUCell::trainable_variables);

  py::class_<nn::MultiHeadAttention>(m, "_MultiHeadAttention")
      .def(py::init([](int64_t query_features, int64_t num_heads, int64_t key_dim, std::optional<int64_t> value_dim,
                       double dropout, bool use_bias, std::optional<int64_t> output_dim, int64_t key_features,
                       int64_t value_features, uint64_t seed, std::optional<uint64_t> dropout_seed,
                       py::handle dtype, const std::string& name) {
             nn::MultiHeadAttentionOptions options;
             options.value_dim = value_dim;
             options.dropout = dropout;
             options.use_bias = use_bias;
             options.output_dim = output_dim;
             options.key_features = key_features;
             options.value_features = value_features;
             options.seed = seed;
             options.dropout_seed = dropout_seed;
             options.dtype = to_dtype(dtype);
             options.name = name;
             return without_gil([&] { return nn::MultiHeadAttention(query_features, num_heads, key_dim, options); });
           }),
           py::arg("query_features"), py::arg("num_heads"), py::arg("key_dim"), py::arg("value_dim"),
           py::arg("dropout"), py::arg("use_bias"), py::arg("output_dim"), py::arg("key_features"),
           py::arg("value_features"), py::arg("seed"), py::arg("dropout_seed"), py::arg("dtype"), py::arg("name"))
      .def("__call__",
           [](const nn::MultiHeadAttention& layer, py::handle query, py::handle value, py::handle key,
              py::handle attention_mask, bool use_causal_mask, bool training) {
             const Tensor q = to_tensor(query), v = to_tensor(value);
             nn::AttentionCall call;
             if (!key.is_none()) call.key = to_tensor(key);
             if (!attention_mask.is_none()) call.attention_mask = to_tensor(attention_mask, tg::bool_, DTypeRule::kRequire);
             call.use_causal_mask = use_causal_mask;
             call.training = training;
             return without_gil([&] { return layer(q, v, call); });
           },
           py::arg("query"), py::arg("value"), py::arg("key"), py::arg("attention_mask"), py::arg("use_causal_mask"),
           py::arg("training"))
      .def("_variables", &nn::MultiHeadAttention::trainable_variables);

  py::class_<nn::LSTMCell>(m, "_LSTMCell")
      .def(py::init([](int64_t input_dim, int64_t units, uint64_t seed, py::handle dtype, const std::string& name) {
             const tg::DType dt = to_dtype(dtype);
             return without_gil([&] { return nn::LSTMCell(input_dim, units, seed, dt, name); });
           }),
           py::arg("input_dim"), py::arg("units"), py::arg("seed"), py::arg("dtype"), py::arg("name"))
      .def("__call__", [](const nn::LSTMCell& c, py::handle x, py::handle h, py::handle state) {
        Tensor tx = to_tensor(x), th = to_tensor(h), tc = to_tensor(state);
        auto [h2, c2] = without_gil([&] { return c(tx, th, tc); });
        return py::make_tuple(h2, c2);
      })
      .def("_variables", &nn::LSTMCell::trainable_variables);

  // Keras's initializers: pure functions of (shape, seed, dtype).
  static const std::pair<const char*, Initializer> kInitializers[] = {
      {"_glorot_uniform", &nn::glorot_uniform},
      {"_glorot_normal", &nn::glorot_normal},
      {"_he_normal", &nn::he_normal},
  };
  for (const auto& [name, fn] : kInitializers) {
    const Initializer init = fn;
    m.def(name, [init](py::handle shape, uint64_t seed, py::handle dtype) {
      const tg::TensorShape s = to_static_shape(shape, "initializer");
      const tg::DType dt = to_dtype(dtype);
      return without_gil([&] { return init(s, seed, dt); });
    }, py::arg("shape"), py::arg("seed"), py::arg("dtype"));
  }
  m.def("_truncated_normal_init", [](py::handle shape, uint64_t seed, double mean, double stddev, py::handle dtype) {
    const tg::TensorShape s = to_static_shape(shape, "TruncatedNormal");
    const tg::DType dt = to_dtype(dtype);
    return without_gil([&] { return nn::truncated_normal(s, seed, mean, stddev, dt); });
  }, py::arg("shape"), py::arg("seed"), py::arg("mean"), py::arg("stddev"), py::arg("dtype"));
  m.def("_orthogonal_init", [](py::handle shape, uint64_t seed, double gain, py::handle dtype) {
    const tg::TensorShape s = to_static_shape(shape, "Orthogonal");
    const tg::DType dt = to_dtype(dtype);
    return without_gil([&] { return nn::orthogonal(s, seed, gain, dt); });
  }, py::arg("shape"), py::arg("seed"), py::arg("gain"), py::arg("dtype"));

  // Keras's losses (reduced to the batch mean) and accuracy.
  using Loss = Tensor (*)(const Tensor&, const Tensor&);
  static const std::pair<const char*, Loss> kLosses[] = {
      {"_mean_squared_error", &nn::mean_squared_error},
      {"_binary_crossentropy_with_logits", &nn::binary_crossentropy_with_logits},
      {"_softmax_cross_entropy_mean", &nn::softmax_cross_entropy_with_logits},
      {"_sparse_softmax_cross_entropy_mean", &nn::sparse_softmax_cross_entropy},
      {"_sparse_accuracy", &nn::accuracy},
  };
  for (const auto& [name, fn] : kLosses) {
    const Loss loss = fn;
    m.def(name, [loss](py::handle a, py::handle b) {
      Tensor ta = to_tensor(a), tb = to_tensor(b);
      return without_gil([&] { return loss(ta, tb); });
    }, py::arg("a"), py::arg("b"));
  }
  // For the tests: a 2-layer MLP trained by the C++ API alone (Dense + relu, Dense, Adam,
  // GradientTape, sparse softmax cross-entropy), the losses of each step. The Python frontend
  // must reproduce them from tg.keras.layers.Dense, tg.keras.optimizers.Adam and tg.GradientTape.
  m.def("_train_mlp_reference_for_test", [](py::handle x, py::handle labels, int64_t hidden, int64_t classes,
                                             uint64_t seed, double learning_rate, int steps) {
    Tensor tx = to_tensor(x), ty = to_tensor(labels);
    if (tx.rank() != 2) value_error("_train_mlp_reference_for_test: x must have rank 2");
    const int64_t features = tx.shape().dims()[1];
    return without_gil([&] {
      nn::Dense first(features, hidden, tg::relu, seed, tg::float32, "dense");
      nn::Dense second(hidden, classes, nullptr, seed + 1, tg::float32, "dense_1");
      tg::optim::Adam optimizer(learning_rate);
      const std::vector<tg::Variable> vars{first.kernel(), first.bias(), second.kernel(), second.bias()};
      std::vector<double> losses;
      for (int step = 0; step < steps; ++step) {
        tg::GradientTape tape;
        Tensor loss = nn::sparse_softmax_cross_entropy(second(first(tx)), ty);
        std::vector<Tensor> grads = tape.gradient(loss, vars);
        optimizer.apply_gradients(grads, vars);
        losses.push_back(loss.item<float>());
      }
      return losses;
    });
  });
  m.def("_huber_mean", [](py::handle y_true, py::handle y_pred, double delta) {
    Tensor a = to_tensor(y_true), b = to_tensor(y_pred);
    return without_gil([&] { return nn::huber(a, b, delta); });
  }, py::arg("y_true"), py::arg("y_pred"), py::arg("delta"));
}

}  // namespace tgpy
