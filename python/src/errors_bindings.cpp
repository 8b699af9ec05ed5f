// tg:: errors as Python exceptions: tg.errors.* (python/tracegraph/errors.py, TF's tf.errors
// classes) with the C++ message, and Python's TypeError / ValueError for tg::TypeError /
// tg::ValueError, as TF raises those.
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"

namespace tgpy {

namespace {

// Raises tracegraph.errors.<name>(None, None, message) with the error's stable code and any
// attributes of its own. Never throws: a translator that throws would end the process.
void raise_error(const char* name, const std::string& message, const std::string& code,
                 const std::vector<std::pair<const char*, py::object>>& attributes = {}) {
  try {
    py::object cls = py::module_::import("tracegraph.errors").attr(name);
    py::object error = cls(py::none(), py::none(), message);
    error.attr("tg_code") = code;
    for (const auto& [attribute, value] : attributes) error.attr(attribute) = value;
    PyErr_SetObject(cls.ptr(), error.ptr());
  } catch (py::error_already_set& e) {
    // tracegraph.errors could not be imported (the module used on its own): the message survives.
    e.restore();
    PyErr_Clear();
    PyErr_SetString(PyExc_RuntimeError, (std::string(name) + ": " + message).c_str());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, (std::string(name) + ": " + message).c_str());
  }
}

void raise(const char* name, const tg::Error& e) { raise_error(name, e.what(), e.code()); }

void translate(std::exception_ptr pending) {
  try {
    if (pending) std::rethrow_exception(pending);
  } catch (const tg::TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (const tg::ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const tg::InvalidArgumentError& e) {
    raise("InvalidArgumentError", e);
  } catch (const tg::ResourceExhaustedError& e) {
    raise_error("ResourceExhaustedError", e.what(), e.code(),
                {{"bytes_requested", py::int_(e.bytes_requested())}});
  } catch (const tg::FailedPreconditionError& e) {
    raise("FailedPreconditionError", e);
  } catch (const tg::OutOfScopeError& e) {
    raise("OutOfScopeError", e);
  } catch (const tg::StagingError& e) {
    raise("StagingError", e);
  } catch (const tg::RetracingLimitError& e) {
    raise("RetracingLimitError", e);
  } catch (const tg::FormatError& e) {
    raise_error("FormatError", e.what(), e.code(),
                {{"section", py::str(e.section())}, {"offset", py::int_(e.offset())}});
  } catch (const tg::DeadlineExceededError& e) {
    raise_error("DeadlineExceededError", e.what(), e.code(), {{"ranks", py::cast(e.ranks())}});
  } catch (const tg::CollectiveMismatchError& e) {
    raise("CollectiveMismatchError", e);
  } catch (const tg::UnavailableError& e) {
    raise("UnavailableError", e);
  } catch (const tg::InternalError& e) {
    raise("InternalError", e);
  } catch (const tg::Error& e) {
    raise("UnknownError", e);  // a tg:: error class newer than this table
  } catch (const Unimplemented& e) {
    raise_error("UnimplementedError", e.what(), "EUNIMPLEMENTED");
  }
}

}  // namespace

void register_errors(py::module_& m) {
  py::register_exception_translator(&translate);
  // For the tests: raises the C++ error of a code, as the library would.
  m.def("_raise_error_for_test", [](const std::string& code, const std::string& message) {
    if (code == "ETYPE") throw tg::TypeError(message);
    if (code == "EVALUE") throw tg::ValueError(message);
    if (code == "EARG") throw tg::InvalidArgumentError(message);
    if (code == "ESCOPE") throw tg::OutOfScopeError(message);
    if (code == "ESTAGE") throw tg::StagingError(message);
    if (code == "ERTL") throw tg::RetracingLimitError(message);
    if (code == "ERESOURCE") throw tg::ResourceExhaustedError(message, 1234);
    if (code == "EPRECONDITION") throw tg::FailedPreconditionError(message);
    if (code == "EFORMAT") throw tg::FormatError(message, "header", 16);
    if (code == "EDEADLINE") throw tg::DeadlineExceededError(message, {1, 3});
    if (code == "EDESYNC") throw tg::CollectiveMismatchError(message);
    if (code == "EUNAVAILABLE") throw tg::UnavailableError(message);
    if (code == "EINTERNAL") throw tg::InternalError(message);
    if (code == "EUNIMPLEMENTED") unimplemented(message);
    throw tg::Error(code, message);
  });
}

}  // namespace tgpy
