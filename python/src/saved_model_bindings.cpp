// tg.saved_model and tg.train's checkpoints: a Python tg.function's concrete functions saved to
// one .tgx file through the library's own saver (tg::detail::save_function over the function's
// core), .tgx files loaded as tg::LoadedFunction and called from Python, and Variables saved and
// restored by name. The Python side (argument structure, results rebuilt from the file's output
// description) is python/tracegraph/saved_model.py.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "export/loaded.h"
#include "py_trace_types.h"
#include "trace/concrete.h"
#include "trace/function_core.h"

namespace tgpy {

// Defined in function_bindings.cpp: the function core of a tg.function (a _Function), and the
// trace of a ConcreteFunction's handle (a _ConcreteHandle).
std::shared_ptr<tg::detail::FunctionCore> function_core_of(py::handle function);
std::shared_ptr<tg::detail::ConcreteImpl> concrete_impl_of(py::handle concrete);

namespace {

namespace detail = tg::detail;
using tg::TraceType;
using tg::TraceTypePtr;
using Tree = detail::TraceTypeTree;
using Literal = detail::LiteralValue;

std::string short_text(py::handle h) {
  std::string s = py::repr(h).cast<std::string>();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// ---- saving: what cannot leave the process, said in Python terms ---------------------------

// The innermost type inside `t` that a file cannot hold, or nullptr.
const TraceType* unsavable_part(const TraceType& t) {
  Tree tree;
  std::string unsupported;
  if (detail::trace_type_tree(t, tree, unsupported)) return nullptr;
  if (const auto* elements = detail::sequence_elements(t)) {
    for (const auto& e : *elements)
      if (const TraceType* inner = unsavable_part(*e)) return inner;
  }
  for (const Literal& key : tree.keys)  // a mapping: the keys read before the failing value
    if (const TraceType* value = detail::mapping_value(t, key))
      if (const TraceType* inner = unsavable_part(*value)) return inner;
  if (const TraceType* element = detail::optional_element(t))
    if (const TraceType* inner = unsavable_part(*element)) return inner;
  return &t;
}

std::string why_unsavable(const TraceType& t) {
  if (custom_python_type(t) != nullptr)
    return "a TraceType written in Python (__tf_tracing_type__: " + short_text(py::handle(custom_python_type(t))) +
           "); a file holds no code, so the type's own methods could not run where it is loaded";
  if (is_none_type(t))
    return "None; a .tgx file has no None type for arguments (the C++ side has no such value). Give the "
           "parameter a tensor or a literal, or save only the concrete functions traced without None";
  py::object object = object_of(t);
  if (!object.is_none())
    return "the object " + short_text(object) + ", matched by identity; an object's identity cannot leave "
           "this process. Pass its values as tensors or Python literals (a tg.Variable can be passed as it is: "
           "a Variable argument is saved as a Variable parameter, bound to the Variable a caller passes)";
  py::object value = value_of(t);
  if (!value.is_none())
    return "the value " + short_text(value) + " (" + py::type::handle_of(value).attr("__name__").cast<std::string>() +
           ", matched by ==); a file holds Python bool, int (64-bit), float and str literals only";
  const std::string text = t.to_string();
  if (text.rfind("Object[", 0) == 0)
    return "the object " + text + ", matched by identity; an object's identity cannot leave this process";
  return text;
}

void check_savable(const detail::FunctionCore& core, const detail::ConcreteImpl& cf) {
  const auto& type = cf.input_type;
  for (std::size_t i = 0; i < type.params.size(); ++i) {
    const TraceType* bad = unsavable_part(*type.params[i]);
    if (bad == nullptr) continue;
    value_error("tg.saved_model.save: function '" + core.name() + "' has the concrete function " + type.to_string() +
                " whose argument '" + type.names[i] + "' holds " + why_unsavable(*bad) +
                ". A .tgx file holds tensors, tg.Variable arguments, Python literals (bool, int, float, str), tuples, "
                "lists, dicts and namedtuples of them; save the other concrete functions only (signatures=[...]) or trace the "
                "function with arguments of those kinds");
  }
}

void save_python_function(py::handle function, const std::string& path, py::object signatures) {
  std::shared_ptr<detail::FunctionCore> core = function_core_of(function);
  std::vector<tg::ConcreteFunction> chosen;
  if (signatures.is_none()) {
    for (auto& cf : core->concrete_functions()) chosen.emplace_back(cf);
  } else {
    for (py::handle handle : signatures) chosen.emplace_back(concrete_impl_of(handle));
  }
  for (const tg::ConcreteFunction& c : chosen) check_savable(*core, *detail::FunctionAccess::impl(c));
  // An empty list: the saver's own error ("never traced"). Otherwise the list checked above,
  // even if another thread traces meanwhile (a new trace's types were not checked here).
  py::gil_scoped_release release;
  detail::save_function(path, *core, chosen.empty() && signatures.is_none() ? nullptr : &chosen);
}

// ---- calling a loaded function -----------------------------------------------------------

// A Python number or str as the literal `expect` holds (its kind and C++ type name: an int
// argument of a C++ function is "int32", a float "float" or "double"), or as a Python
// tg.function traces it when there is nothing to follow (a number equal to an int64 - a bool,
// an int, an integral float - is the int literal, other floats the float one, as TF's
// default_types); nullopt when it is not a literal of that kind.
std::optional<Literal> literal_like(py::handle value, const Literal* expect) {
  PyObject* p = value.ptr();
  Literal lv{};
  if (PyUnicode_Check(p)) {
    lv.kind = Literal::Kind::kString;
    lv.s = value.cast<std::string>();
    lv.cpp_type = kPyStr;
  } else if (PyBool_Check(p) || PyLong_Check(p) || PyFloat_Check(p)) {
    bool integral = true;
    int64_t i = 0;
    double f = 0;
    if (PyFloat_Check(p)) {
      f = PyFloat_AS_DOUBLE(p);
      integral = std::trunc(f) == f && f >= -0x1p63 && f < 0x1p63;
      if (integral) i = static_cast<int64_t>(f);
    } else {
      int overflow = 0;
      i = PyLong_AsLongLongAndOverflow(p, &overflow);
      if (overflow != 0) return std::nullopt;
      f = static_cast<double>(i);
    }
    const Literal::Kind want = expect ? expect->kind : integral ? Literal::Kind::kInt : Literal::Kind::kFloat;
    switch (want) {
      case Literal::Kind::kFloat: lv.f = f; break;
      case Literal::Kind::kBool:
        if (!integral || (i != 0 && i != 1)) return std::nullopt;
        lv.i = i;
        break;
      case Literal::Kind::kEnum: lv.s = expect->s; [[fallthrough]];
      case Literal::Kind::kInt:
        if (!integral) return std::nullopt;
        lv.i = i;
        break;
      case Literal::Kind::kString: return std::nullopt;
    }
    lv.kind = want;
    lv.cpp_type = want == Literal::Kind::kFloat ? kPyFloat : kPyInt;
  } else {
    return std::nullopt;
  }
  if (expect) {
    if (expect->kind != lv.kind) return std::nullopt;
    lv.cpp_type = expect->cpp_type;
  }
  return lv;
}

bool is_python_key_type(const char* cpp_type) {
  return std::strcmp(cpp_type, kPyInt) == 0 || std::strcmp(cpp_type, kPyStr) == 0;
}

// The order a mapping's tensors were flattened in when it was traced: a Python dict's by the
// keys' text (function_bindings.cpp), a C++ std::map's by the keys themselves.
bool before(const Literal& a, const Literal& b, bool python_order) {
  if (python_order) return a.to_string() < b.to_string();
  if (a.kind == Literal::Kind::kString) return a.s < b.s;
  if (a.kind == Literal::Kind::kFloat) return a.f < b.f;
  return a.i < b.i;
}

bool type_has(py::handle value, const char* name) { return py::hasattr(py::type::handle_of(value), name); }

std::string record_kind(py::handle value) {
  std::string s = py::type::handle_of(value).attr("__qualname__").cast<std::string>() + "(";
  bool first = true;
  for (py::handle f : py::type::handle_of(value).attr("_fields")) {
    s += (first ? "" : ", ") + py::str(f).cast<std::string>();
    first = false;
  }
  return s + ")";
}

// The trace type of a Python argument, shaped like `expect` (one saved signature's parameter)
// where Python's own kinds leave a choice: a literal takes the saved literal's C++ type, a list
// or tuple the saved sequence's kind, None an empty std::optional, a NumPy array or a number a
// tensor of the saved dtype. Without `expect`, Python's own types (what a Python tg.function
// traced with). nullptr when the value cannot be of that type. Tensors go to ctx.leaves, in
// the order the trace flattened them.
TraceTypePtr call_type(py::handle value, const Tree* expect, detail::ArgContext& ctx) {
  using Kind = Tree::Kind;
  if (const tg::Tensor* t = as_tensor_ptr(value)) {
    if (expect && expect->kind != Kind::kTensor) return nullptr;
    return detail::ArgTraits<tg::Tensor>::trace_type(*t, ctx);
  }
  if (const tg::Variable* v = as_variable_ptr(value)) {
    if (!expect || expect->kind == Kind::kVariable) return detail::ArgTraits<tg::Variable>::trace_type(*v, ctx);
    if (expect->kind != Kind::kTensor) return nullptr;  // a tensor parameter reads the Variable (below)
  }
  if (expect && expect->kind == Kind::kOptional) {
    if (value.is_none()) return expect->elements.empty() ? detail::optional_trace_type(nullptr) : nullptr;
    if (expect->elements.empty()) return nullptr;
    TraceTypePtr element = call_type(value, &expect->elements[0], ctx);
    return element ? detail::optional_trace_type(std::move(element)) : nullptr;
  }
  if (value.is_none()) return expect ? nullptr : none_trace_type();
  if (expect && expect->kind == Kind::kTensor) {
    // A NumPy array or a Python number where the signature has a tensor, converted to its dtype
    // as TF converts the arguments of a concrete function.
    try {
      // A NumPy array keeps its dtype (a mismatch is the dispatch's TypeError); Python numbers
      // and lists take the signature's.
      const bool array = py::isinstance(value, py::module_::import("numpy").attr("ndarray"));
      tg::Tensor t = array ? to_tensor(value) : to_tensor(value, expect->dtype, DTypeRule::kRequire);
      ctx.leaves.push_back(t);
      return detail::tensor_trace_type(t.dtype(), t.shape());
    } catch (py::error_already_set&) {
      throw;
    } catch (const std::exception&) {
      return nullptr;
    }
  }
  if (!expect && py::isinstance(value, py::module_::import("numpy").attr("ndarray"))) {
    tg::Tensor t = to_tensor(value);
    ctx.leaves.push_back(t);
    return detail::tensor_trace_type(t.dtype(), t.shape());
  }
  if (expect && expect->kind == Kind::kLiteral) {
    std::optional<Literal> lv = literal_like(value, &expect->literal);
    return lv ? detail::literal_trace_type(std::move(*lv)) : nullptr;
  }
  if (std::optional<Literal> lv = literal_like(value, nullptr)) {
    if (expect) return nullptr;
    return detail::literal_trace_type(std::move(*lv));
  }
  if (PyTuple_Check(value.ptr()) || PyList_Check(value.ptr())) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(value);
    if (expect && (expect->kind != Kind::kSequence || expect->elements.size() != seq.size())) return nullptr;
    std::vector<TraceTypePtr> elements;
    for (std::size_t i = 0; i < seq.size(); ++i) {
      TraceTypePtr e = call_type(seq[i], expect ? &expect->elements[i] : nullptr, ctx);
      if (!e) return nullptr;
      elements.push_back(std::move(e));
    }
    std::string kind = expect                         ? expect->name
                       : PyList_Check(value.ptr())    ? std::string("List")
                       : type_has(value, "_fields")   ? record_kind(value)
                                                      : std::string("Tuple");
    return detail::sequence_trace_type(std::move(kind), std::move(elements));
  }
  if (PyDict_Check(value.ptr())) {
    py::dict dict = py::reinterpret_borrow<py::dict>(value);
    if (expect && (expect->kind != Kind::kMapping || expect->keys.size() != dict.size())) return nullptr;
    struct Item {
      Literal key;
      py::object value;
      const Tree* expect;
    };
    std::vector<Item> items;
    for (auto kv : dict) {
      Item item{{}, py::reinterpret_borrow<py::object>(kv.second), nullptr};
      if (expect) {
        std::size_t k = 0;
        for (; k < expect->keys.size(); ++k) {
          std::optional<Literal> key = literal_like(kv.first, &expect->keys[k]);
          if (key && *key == expect->keys[k]) break;
        }
        if (k == expect->keys.size()) return nullptr;
        item.key = expect->keys[k];
        item.expect = &expect->elements[k];
      } else {
        std::optional<Literal> key = literal_like(kv.first, nullptr);
        if (!key) return nullptr;
        item.key = std::move(*key);
      }
      if (expect && item.key.kind == Literal::Kind::kFloat && std::strcmp(item.key.cpp_type, kPyFloat) == 0)
        type_error("a dict keyed by floats cannot be passed to this loaded function: its file does not say whether "
                   "Python (a dict) or C++ (a std::map<float, ...>) ordered the keys' tensors; key them by str or int");
      items.push_back(std::move(item));
    }
    const bool python_order = items.empty() || is_python_key_type(items[0].key.cpp_type) ||
                              std::strcmp(items[0].key.cpp_type, kPyFloat) == 0;
    std::sort(items.begin(), items.end(),
              [&](const Item& a, const Item& b) { return before(a.key, b.key, python_order); });
    std::vector<std::pair<Literal, TraceTypePtr>> typed;
    for (const Item& item : items) {
      TraceTypePtr t = call_type(item.value, item.expect, ctx);
      if (!t) return nullptr;
      typed.emplace_back(item.key, std::move(t));
    }
    return detail::mapping_trace_type(std::move(typed));
  }
  return nullptr;
}

// A parameter left out of a call: the saved type itself when it holds no tensor (a literal, an
// empty optional, containers of those - a Python default traced by value).
bool holds_values_only(const Tree& t) {
  if (t.kind == Tree::Kind::kTensor || t.kind == Tree::Kind::kVariable) return false;
  return std::all_of(t.elements.begin(), t.elements.end(), holds_values_only);
}

struct PyLoaded {
  std::shared_ptr<detail::LoadedState> state;
  tg::LoadedFunction fn;
  std::vector<std::string> names;  // the parameters (the first concrete function's)
};

std::shared_ptr<PyLoaded> load_function(const std::string& path) {
  std::optional<tg::LoadedFunction> fn;
  {
    py::gil_scoped_release release;
    fn.emplace(tg::load(path));
  }
  auto out = std::make_shared<PyLoaded>(PyLoaded{detail::LoadedAccess::state(*fn), *fn, {}});
  const auto all = out->state->core->concrete_functions();
  if (!all.empty()) out->names = all[0]->input_type.names;
  return out;
}

struct Attempt {
  std::vector<TraceTypePtr> types;
  detail::ArgContext ctx;
};

// One way of typing the call: with `expect` (a saved signature's parameter trees) or Python's own.
std::optional<Attempt> type_call(const std::vector<py::object>& slots, const std::vector<Tree>* expect) {
  Attempt a;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const Tree* e = expect ? &(*expect)[i] : nullptr;
    TraceTypePtr t;
    if (!slots[i]) {
      if (!e || !holds_values_only(*e)) return std::nullopt;
      t = detail::trace_type_from_tree(*e);
    } else {
      t = call_type(slots[i], e, a.ctx);
    }
    if (!t) return std::nullopt;
    a.types.push_back(std::move(t));
  }
  return a;
}

// Calls the loaded function: (the output description of the concrete function that ran, its
// flat output tensors). Dispatch is tg::LoadedFunction's (exact type, else the most specific);
// a call that no signature accepts raises its TypeError listing every signature.
py::tuple call_loaded(const PyLoaded& self, py::args args, py::kwargs kwargs) {
  const detail::FunctionCore& core = *self.state->core;
  const std::size_t n = self.names.size();
  if (args.size() > n)
    type_error("loaded function '" + core.name() + "' takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") +
               " but " + std::to_string(args.size()) + " were given");
  std::vector<py::object> slots(n);
  for (std::size_t i = 0; i < args.size(); ++i) slots[i] = py::reinterpret_borrow<py::object>(args[i]);
  for (auto item : kwargs) {
    const std::string key = py::str(item.first).cast<std::string>();
    const auto it = std::find(self.names.begin(), self.names.end(), key);
    if (it == self.names.end())
      type_error("loaded function '" + core.name() + "' got an unexpected keyword argument '" + key + "'");
    auto& slot = slots[static_cast<std::size_t>(it - self.names.begin())];
    if (slot) type_error("loaded function '" + core.name() + "' got multiple values for argument '" + key + "'");
    slot = py::reinterpret_borrow<py::object>(item.second);
  }
  std::vector<std::optional<Attempt>> attempts;
  attempts.push_back(type_call(slots, nullptr));  // Python's own types: a Python-saved file's
  for (const auto& cf : core.concrete_functions()) {
    std::vector<Tree> trees(cf->input_type.params.size());
    std::string unsupported;
    bool ok = trees.size() == n;
    for (std::size_t i = 0; ok && i < trees.size(); ++i) ok = detail::trace_type_tree(*cf->input_type.params[i], trees[i], unsupported);
    if (ok) attempts.push_back(type_call(slots, &trees));
  }
  std::shared_ptr<detail::ConcreteImpl> cf;
  detail::ArgContext* used = nullptr;
  std::optional<tg::TypeError> first_error;
  for (auto& a : attempts) {
    if (!a) continue;
    try {
      cf = detail::find_loaded(*self.state, a->types, a->ctx, nullptr);
      used = &a->ctx;
      break;
    } catch (const tg::TypeError& e) {
      if (!first_error) first_error.emplace(e);
    }
  }
  if (!cf) {
    if (first_error) throw *first_error;
    std::string missing, kinds;
    for (std::size_t i = 0; i < n; ++i) {
      if (!slots[i]) missing += (missing.empty() ? "'" : ", '") + self.names[i] + "'";
      else if (!as_tensor_ptr(slots[i]))
        kinds += (kinds.empty() ? "" : ", ") + self.names[i] + "=" + short_text(slots[i]);
    }
    std::string signatures;
    for (const std::string& s : self.fn.signatures()) signatures += "\n  " + s;
    type_error("loaded function '" + core.name() + "' cannot be called with these arguments" +
               (missing.empty() ? std::string() : "; missing: " + missing) +
               (kinds.empty() ? std::string() : "; not a tensor, literal or structure of those the file holds: " + kinds) +
               ". Its signatures:" + signatures);
  }
  detail::CallInputs inputs;
  inputs.tensors = std::move(used->leaves);
  inputs.variables = std::move(used->variables);
  tg::Outputs out;
  {
    py::gil_scoped_release release;
    out = detail::run_loaded(*self.state, *cf, std::move(inputs));
  }
  return py::make_tuple(cf->output_description, py::cast(out.values()));
}

}  // namespace

void register_saved_model(py::module_& m) {
  m.def("_saved_model_save", &save_python_function, py::arg("function"), py::arg("path"),
        py::arg("signatures") = py::none());

  py::class_<PyLoaded, std::shared_ptr<PyLoaded>> loaded(m, "_LoadedFunction");
  loaded.def("__call__", &call_loaded);
  loaded.def_property_readonly("name", [](const PyLoaded& f) { return f.fn.name(); });
  loaded.def_property_readonly("producer", [](const PyLoaded& f) { return f.fn.producer(); });
  loaded.def_property_readonly("parameter_names", [](const PyLoaded& f) { return f.names; });
  loaded.def("signatures", [](const PyLoaded& f) { return f.fn.signatures(); });
  loaded.def("variables", [](const PyLoaded& f) { return f.fn.variables(); });
  loaded.def("save", [](const PyLoaded& f, const std::string& path) {
    py::gil_scoped_release release;
    tg::save(path, f.fn);
  });
  m.def("_saved_model_load", &load_function, py::arg("path"));

  m.def("_save_variables", [](const std::string& path, const std::vector<tg::Variable>& variables) {
    py::gil_scoped_release release;
    tg::save_variables(path, variables);
  });
  m.def("_restore_variables", [](const std::string& path, const std::vector<tg::Variable>& variables) {
    py::gil_scoped_release release;
    tg::restore_variables(path, variables);
  });
}

}  // namespace tgpy
