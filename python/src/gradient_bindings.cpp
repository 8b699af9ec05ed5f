// tg.GradientTape's C++ half: one tg::GradientTape per entered Python tape. The TF-facing rules -
// nested structures of targets and sources, output_gradients, watch_accessed_variables,
// trainable, None for what TF gives None, one gradient() call on a non-persistent tape - are in
// python/tracegraph/_gradient.py.
//
// The C++ tape is always persistent: a Python tape needs one gradient() per kind of source (the
// C++ API takes Tensors or Variables, not both), and a sum target built for several targets.
// The Python side enforces TF's one-call rule and drops the C++ tape after it, so a
// non-persistent tape's memory goes as early as TF's.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bindings.h"

namespace tgpy {

namespace {

class PyTape;

// Python tapes recording, with the thread each records on, for note_variable_read. Global rather
// than thread-local so that a tape collected on another thread can still remove itself.
std::mutex g_recording_mu;
std::vector<std::pair<std::thread::id, PyTape*>> g_recording;
std::atomic<int> g_recording_count{0};

void add_recording(PyTape* tape) {
  std::lock_guard lock(g_recording_mu);
  g_recording.emplace_back(std::this_thread::get_id(), tape);
  g_recording_count.store(static_cast<int>(g_recording.size()));
}
void remove_recording(PyTape* tape) {
  std::lock_guard lock(g_recording_mu);
  g_recording.erase(std::remove_if(g_recording.begin(), g_recording.end(),
                                   [tape](const auto& e) { return e.second == tape; }),
                    g_recording.end());
  g_recording_count.store(static_cast<int>(g_recording.size()));
}

// A tg::GradientTape must be destroyed on the thread that made it (it unregisters itself from that
// thread's list of tapes). A Python tape collected on another thread leaves its C++ tape here,
// and the owner thread destroys it the next time it makes or drops a tape.
std::mutex g_orphans_mu;
std::vector<std::pair<std::thread::id, std::unique_ptr<tg::GradientTape>>> g_orphans;

void destroy_orphans_of_this_thread() {
  std::vector<std::unique_ptr<tg::GradientTape>> mine;
  {
    std::lock_guard lock(g_orphans_mu);
    if (g_orphans.empty()) return;
    const std::thread::id self = std::this_thread::get_id();
    for (auto& [owner, tape] : g_orphans)
      if (owner == self) mine.push_back(std::move(tape));
    g_orphans.erase(std::remove_if(g_orphans.begin(), g_orphans.end(), [](const auto& e) { return !e.second; }),
                    g_orphans.end());
  }
}

class PyTape {
 public:
  explicit PyTape(bool watch_accessed_variables) : watch_accessed_(watch_accessed_variables) {}
  PyTape(const PyTape&) = delete;
  PyTape& operator=(const PyTape&) = delete;
  ~PyTape() { release(); }

  // Creates the C++ tape, recording (TF's __enter__ of a tape that has none).
  void start() {
    destroy_orphans_of_this_thread();
    if (tape_) throw py::value_error("GradientTape: the tape already exists");
    tape_ = std::make_unique<tg::GradientTape>(/*persistent=*/true);
    owner_ = std::this_thread::get_id();
    recording_ = true;
    add_recording(this);
  }
  void stop() {
    check_thread("stop recording");
    if (!recording_) return;
    tape_->stop_recording();
    recording_ = false;
    remove_recording(this);
  }
  void resume() {
    check_thread("record");
    if (recording_) return;
    tape_->resume_recording();
    recording_ = true;
    add_recording(this);
  }
  // Drops the C++ tape and what it recorded.
  void release() {
    if (!tape_) return;
    if (recording_) remove_recording(this);
    if (std::this_thread::get_id() == owner_) {
      tape_.reset();
      destroy_orphans_of_this_thread();
    } else {
      // A tape entered by hand (__enter__ without __exit__) and collected elsewhere; `with`
      // always exits on its own thread.
      std::lock_guard lock(g_orphans_mu);
      g_orphans.emplace_back(owner_, std::move(tape_));
    }
    recording_ = false;
    accessed_.clear();
    watched_.clear();
  }

  void watch_tensor(const tg::Tensor& t) {
    check_thread("watch");
    tape_->watch(t);
    watched_.emplace(t.impl().get(), t);
  }
  void watch_variable(const tg::Variable& v) {
    check_thread("watch");
    tape_->watch(v);
  }

  // One gradient per source (None where unconnected and `zero` is false); sources are tg.Tensor
  // or tg.Variable objects, floating-point (the Python side filters the others out).
  py::list gradient(const tg::Tensor& target, const py::list& sources, bool zero) {
    check_thread("compute gradients");
    std::vector<tg::Tensor> tensors;
    std::vector<tg::Variable> variables;
    std::vector<std::pair<bool, std::size_t>> where;  // (is a Variable, index in its list)
    for (py::handle s : sources) {
      if (const tg::Variable* v = as_variable_ptr(s)) {
        where.emplace_back(true, variables.size());
        variables.push_back(*v);
      } else if (const tg::Tensor* t = as_tensor_ptr(s)) {
        where.emplace_back(false, tensors.size());
        tensors.push_back(*t);
      } else {
        type_error("GradientTape: a source must be a tg.Tensor or a tg.Variable, got " +
                   py::repr(s).cast<std::string>());
      }
    }
    const tg::UnconnectedGradients unconnected =
        zero ? tg::UnconnectedGradients::kZero : tg::UnconnectedGradients::kNone;
    std::vector<tg::Gradient> tensor_grads, variable_grads;
    without_gil([&] {
      // The C++ tape gives untracked sources None, as TF (src/autodiff/tape.cpp), and a source
      // only gathered along axis 0 (an Embedding's table) an IndexedSlices, as TF.
      if (!tensors.empty()) tensor_grads = tape_->sparse_gradient(target, tensors, unconnected);
      if (!variables.empty()) variable_grads = tape_->sparse_gradient(target, variables, unconnected);
    });
    py::list out;
    for (const auto& [is_variable, i] : where) {
      const tg::Gradient& g = is_variable ? variable_grads[i] : tensor_grads[i];
      if (!g.defined()) out.append(py::none());
      else if (g.is_sparse()) out.append(py::cast(g.slices()));
      else out.append(py::cast(g.dense()));
    }
    return out;
  }

  bool recording() const { return recording_; }
  bool exists() const { return tape_ != nullptr; }
  bool watch_accessed() const { return watch_accessed_; }

  // The trainable Variables read while this tape recorded, in order, each once (TF's
  // watched_variables() beside the explicitly watched ones).
  void note_read(py::handle variable, uint64_t id) {
    for (const auto& [seen, obj] : accessed_)
      if (seen == id) return;
    accessed_.emplace_back(id, py::reinterpret_borrow<py::object>(variable));
  }
  py::list accessed() const {
    py::list out;
    for (const auto& entry : accessed_) out.append(entry.second);
    return out;
  }
  void clear_accessed() { accessed_.clear(); }

 private:
  void check_thread(const char* what) const {
    if (!tape_)
      throw py::value_error(std::string("GradientTape: cannot ") + what +
                            ": the tape is not active (enter it with `with tape:` first)");
    if (std::this_thread::get_id() != owner_)
      throw py::value_error(std::string("GradientTape: cannot ") + what +
                            " on this thread: a tape belongs to the thread that entered it. Create "
                            "one tape per thread");
  }

  std::unique_ptr<tg::GradientTape> tape_;
  std::unordered_map<const void*, tg::Tensor> watched_;  // explicitly watched tensors (kept alive)
  std::thread::id owner_;
  bool recording_ = false;
  bool watch_accessed_;
  std::vector<std::pair<uint64_t, py::object>> accessed_;
};

}  // namespace

void note_variable_read(py::handle variable) {
  if (g_recording_count.load(std::memory_order_relaxed) == 0) return;
  const tg::Variable* v = as_variable_ptr(variable);
  if (v == nullptr || !tg::is_floating(v->dtype())) return;
  // TF watches trainable Variables automatically; tracegraph/_variables.py keeps the flag.
  py::object trainable = py::getattr(variable, "trainable", py::bool_(true));
  if (!trainable.cast<bool>()) return;
  std::vector<PyTape*> tapes;
  {
    std::lock_guard lock(g_recording_mu);
    const std::thread::id self = std::this_thread::get_id();
    for (const auto& [owner, tape] : g_recording)
      if (owner == self && tape->watch_accessed()) tapes.push_back(tape);
  }
  for (PyTape* tape : tapes) tape->note_read(variable, v->id());
}

void register_gradient(py::module_& m) {
  py::class_<tg::IndexedSlices>(
      m, "_IndexedSlices",
      "Rows of a dense tensor (tf.IndexedSlices): row indices[i] of a tensor of shape dense_shape is "
      "values[i], repeated indices summed. What GradientTape.gradient gives for a source only gathered "
      "along axis 0 (tg.gather, keras.layers.Embedding); tg.convert_to_tensor makes it dense.")
      .def(py::init([](py::handle values, py::handle indices, py::handle dense_shape) {
             if (dense_shape.is_none())
               throw py::value_error("IndexedSlices: pass dense_shape (the shape of the dense tensor); "
                                     "tracegraph needs it to convert the slices");
             return tg::IndexedSlices(to_tensor(indices), to_tensor(values),
                                      to_static_shape(dense_shape, "IndexedSlices"));
           }),
           py::arg("values"), py::arg("indices"), py::arg("dense_shape") = py::none())
      .def_property_readonly("values", &tg::IndexedSlices::values)
      .def_property_readonly("indices", &tg::IndexedSlices::indices)
      .def_property_readonly("dense_shape",
                             [](const tg::IndexedSlices& s) {
                               const std::vector<int64_t>& dims = s.dense_shape().dims();
                               return tg::constant(dims, tg::TensorShape{static_cast<int64_t>(dims.size())}, tg::int64);
                             })
      .def("__neg__",
           [](const tg::IndexedSlices& s) { return tg::IndexedSlices(s.indices(), tg::neg(s.values()), s.dense_shape()); })
      .def("__repr__", [](const tg::IndexedSlices& s) {
        return "tg.IndexedSlices(indices=" + s.indices().to_string() + ", values=" + s.values().to_string() +
               ", dense_shape=" + s.dense_shape().to_string() + ")";
      });
  py::class_<PyTape>(m, "_Tape", "tg.GradientTape's C++ half (see tracegraph/_gradient.py).")
      .def(py::init<bool>(), py::arg("watch_accessed_variables"))
      .def("_start", &PyTape::start)
      .def("_stop", &PyTape::stop)
      .def("_resume", &PyTape::resume)
      .def("_release", &PyTape::release)
      .def("_watch_tensor", &PyTape::watch_tensor)
      .def("_watch_variable", &PyTape::watch_variable)
      .def("_gradient", &PyTape::gradient, py::arg("target"), py::arg("sources"), py::arg("zero"))
      .def("_accessed", &PyTape::accessed)
      .def("_clear_accessed", &PyTape::clear_accessed)
      .def_property_readonly("_recording", &PyTape::recording)
      .def_property_readonly("_exists", &PyTape::exists);
}

}  // namespace tgpy
