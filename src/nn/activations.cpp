// nn::Activation: Keras's activation names (keras.activations.get), composed from public ops so
// that gradients come from the ops' own rules.
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "tracegraph/nn.h"
#include "tracegraph/ops.h"

namespace tg::nn {

namespace {

using Fn = Tensor (*)(const Tensor&);

Tensor relu6(const Tensor& x) { return clip_by_value(x, 0.0, 6.0); }

// Keras's SELU constants (Klambauer et al.): scale * (x > 0 ? x : alpha * (e^x - 1)).
Tensor selu(const Tensor& x) {
  constexpr double kAlpha = 1.6732632423543772848170429916717;
  constexpr double kScale = 1.0507009873554804934193349852946;
  return where(x > 0.0, x, expm1(x) * kAlpha) * kScale;
}

struct Named {
  const char* name;
  Fn fn;  // null: linear
};

const std::vector<Named>& table() {
  static const std::vector<Named> kTable = {
      {"linear", nullptr},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"relu6", &relu6},
      {"elu", [](const Tensor& x) { return elu(x); }},
      {"selu", &selu},
      {"gelu", [](const Tensor& x) { return gelu(x, false); }},
      {"gelu_approximate", [](const Tensor& x) { return gelu(x, true); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"hard_sigmoid", [](const Tensor& x) { return relu6(x + 3.0) * (1.0 / 6.0); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }},
      {"softplus", [](const Tensor& x) { return softplus(x); }},
      {"softsign", [](const Tensor& x) { return x / (abs(x) + 1.0); }},
      {"silu", [](const Tensor& x) { return x * sigmoid(x); }},
      {"swish", [](const Tensor& x) { return x * sigmoid(x); }},
      {"exponential", [](const Tensor& x) { return exp(x); }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }},
  };
  return kTable;
}

}  // namespace

std::vector<std::string> Activation::names() {
  std::vector<std::string> out;
  for (const Named& n : table()) out.emplace_back(n.name);
  return out;
}

Activation::Activation(const std::string& name) {
  if (name.empty()) return;  // Keras's None
  for (const Named& n : table()) {
    if (name != n.name) continue;
    if (n.fn) fn_ = n.fn;
    name_ = n.name;
    return;
  }
  std::string known;
  for (const Named& n : table()) known += detail::str_cat(known.empty() ? "" : ", ", "\"", n.name, "\"");
  detail::op_error<ValueError>("Activation", "unknown activation \"", name, "\"; expected one of ", known,
                               ", or a function object taking a const tg::Tensor&");
}

Activation::Activation(const char* name) : Activation(std::string(name ? name : "")) {}

Activation::Activation(Tensor (*fn)(const Tensor&, bool)) : name_("custom") {
  if (fn) fn_ = [fn](const Tensor& x) { return fn(x, false); };
  else name_ = "linear";
}

Activation::Activation(Tensor (*fn)(const Tensor&, int)) : name_("custom") {
  if (fn) fn_ = [fn](const Tensor& x) { return fn(x, -1); };
  else name_ = "linear";
}

}  // namespace tg::nn
