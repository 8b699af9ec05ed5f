// tg::GradientTape (tf.GradientTape): reverse-mode automatic differentiation, eagerly and inside
// traced functions.
#pragma once
#include <concepts>
#include <initializer_list>
#include <memory>
#include <variant>
#include <vector>

#include "tracegraph/indexed_slices.h"
#include "tracegraph/tensor.h"
#include "tracegraph/variable.h"

namespace tg {

/// What gradient() returns for a source the target does not depend on.
enum class UnconnectedGradients {
  kZero,  // a zero tensor shaped like the source (the default)
  kNone,  // an empty tg::Tensor (defined() == false), as TF's None
};

class GradientTape;

/// One element of a brace list of gradient() sources: a Tensor or a Variable, so that
/// `tape.gradient(loss, {w, b})`, `tape.gradient(y, {x})` and `tape.gradient(loss, {w, x})` all
/// name their sources directly.
class GradientSource {
 public:
  GradientSource(const Tensor& t) : source_(t) {}    // NOLINT: implicit, for brace lists
  GradientSource(const Variable& v) : source_(v) {}  // NOLINT: implicit, for brace lists
  const std::variant<Tensor, Variable>& get() const { return source_; }

 private:
  std::variant<Tensor, Variable> source_;
};

namespace detail {
struct TapeState;
std::vector<Tensor> tape_gradient(GradientTape& tape, const std::vector<Tensor>& targets,
                                  const std::vector<Tensor>& target_grads,
                                  const std::vector<Tensor>& sources);
}  // namespace detail

/// Records the operations run on watched tensors while it is alive, so that gradient() can
/// differentiate a result with respect to them.
///
/// - Trainable state is watched automatically: every read of a floating-point tg::Variable.
///   Other tensors are watched with watch().
/// - Works eagerly and inside tg::function bodies (the backward ops are then recorded into the
///   graph, so a traced train_step runs forward and backward at graph speed).
/// - Calling a traced tg::function under a tape differentiates through it; its backward pass is
///   itself a traced graph, built once per concrete function and cached.
/// - Tapes nest: a tape alive while another tape computes its gradient records that
///   computation, which gives higher-order derivatives.
/// - A non-persistent tape allows one gradient() call; a persistent one allows any number.
///
/// A tape belongs to the thread that created it.
class GradientTape {
 public:
  explicit GradientTape(bool persistent = false);
  ~GradientTape();
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  /// Starts tracking `t` (a floating-point tensor, eager or symbolic).
  void watch(const Tensor& t);
  /// Tracks every read of `v` (already automatic for floating-point Variables).
  void watch(const Variable& v);

  /// d(sum of target)/d(source) for each source, shaped like the source. A Variable source
  /// stands for all its reads recorded on this tape. Throws tg::ValueError for a second call on
  /// a non-persistent tape and tg::TypeError for non-floating targets or sources.
  ///
  /// A brace list always gives one gradient per source, whatever it holds:
  ///   std::vector<Tensor> g1 = tape.gradient(y, {x});        // one Tensor
  ///   std::vector<Tensor> g2 = tape.gradient(loss, {w, b});  // Variables
  ///   std::vector<Tensor> g3 = tape.gradient(loss, {w, x});  // mixed
  ///   Tensor g4 = tape.gradient(y, x);                        // a single source, no braces
  std::vector<Tensor> gradient(const Tensor& target, std::initializer_list<GradientSource> sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::kZero);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::kZero);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Variable>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::kZero);
  /// One source, one gradient. A template so that a one-element brace list, `{x}`, can never
  /// select it (it deduces nothing): clang, unlike g++, would prefer a plain `const Tensor&`
  /// overload to the brace-list one and return a Tensor where a vector was written.
  template <class S>
    requires(std::same_as<S, Tensor> || std::same_as<S, Variable>)
  Tensor gradient(const Tensor& target, const S& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::kZero) {
    return gradient(target, std::vector<S>{source}, unconnected)[0];
  }

  /// gradient() as TensorFlow returns it for gathered sources: a source whose every use on this
  /// tape is a tg::gather along axis 0 of its full value (an nn::Embedding's table, a
  /// Variable's rows) gets a tg::IndexedSlices - the gathered rows' gradients, one per index,
  /// repeated indices kept - instead of a dense tensor as large as the source. Several gathers
  /// give their slices concatenated; a source also used densely gets the dense sum. Every
  /// other gradient is the dense tensor gradient() gives. The optimizers' apply_gradients and
  /// the clipping functions take the result as it is; Gradient::to_dense() converts one.
  /// The gathers must be recorded by this tape itself: a call of a traced tg::function under an
  /// eager tape differentiates as one dense op.
  ///   std::vector<tg::Gradient> g = tape.sparse_gradient(loss, {embedding.embeddings(), w});
  ///   optimizer.apply_gradients(g, {embedding.embeddings(), w});
  std::vector<Gradient> sparse_gradient(const Tensor& target, std::initializer_list<GradientSource> sources,
                                        UnconnectedGradients unconnected = UnconnectedGradients::kZero);
  std::vector<Gradient> sparse_gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                        UnconnectedGradients unconnected = UnconnectedGradients::kZero);
  std::vector<Gradient> sparse_gradient(const Tensor& target, const std::vector<Variable>& sources,
                                        UnconnectedGradients unconnected = UnconnectedGradients::kZero);

  /// Stops / resumes recording (tf.GradientTape.stop_recording as two calls).
  void stop_recording();
  void resume_recording();

 private:
  friend std::vector<Tensor> detail::tape_gradient(GradientTape&, const std::vector<Tensor>&,
                                                   const std::vector<Tensor>&,
                                                   const std::vector<Tensor>&);
  std::shared_ptr<detail::TapeState> state_;
};

/// The value of `x` with no gradient flowing through it (tf.stop_gradient).
Tensor stop_gradient(const Tensor& x);

}  // namespace tg
