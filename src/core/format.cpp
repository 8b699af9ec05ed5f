// Tensor printing in NumPy's style (the style tf.Tensor's repr uses), on one line.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>

#include "core/check.h"
#include "core/tensor_impl.h"

namespace tg {
namespace {

constexpr int64_t kSummariseThreshold = 1000;  // NumPy's print threshold
constexpr int64_t kEdgeItems = 3;              // NumPy's edgeitems
constexpr int kMaxPrecision = 8;               // NumPy's default precision

// Shortest round-trip digits of v (float or double), in fixed or scientific notation, with at
// most kMaxPrecision fractional digits.
template <class F>
std::string shortest(F v, std::chars_format fmt) {
  char buf[128];
  auto r = std::to_chars(buf, buf + sizeof buf, v, fmt);
  std::string s(buf, r.ptr);
  const auto dot = s.find('.');
  const auto e = s.find('e');
  const std::size_t frac_end = e == std::string::npos ? s.size() : e;
  if (dot != std::string::npos && frac_end - dot - 1 > static_cast<std::size_t>(kMaxPrecision)) {
    r = std::to_chars(buf, buf + sizeof buf, v, fmt, kMaxPrecision);
    s.assign(buf, r.ptr);
    // Trim trailing zeros of the fraction (keeping the exponent).
    const auto e2 = s.find('e');
    std::string mant = s.substr(0, e2), exp = e2 == std::string::npos ? "" : s.substr(e2);
    while (!mant.empty() && mant.back() == '0') mant.pop_back();
    s = mant + exp;
  }
  return s;
}

// "1e-05" style exponent: sign and at least two digits.
std::string fix_exponent(const std::string& s) {
  const auto e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e);
  std::string ex = s.substr(e + 1);
  char sign = '+';
  if (!ex.empty() && (ex[0] == '-' || ex[0] == '+')) {
    sign = ex[0];
    ex = ex.substr(1);
  }
  while (ex.size() < 2) ex = "0" + ex;
  return mant + "e" + sign + ex;
}

template <class F>
std::string format_float_scalar(F v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  const F a = std::fabs(v);
  if (v == 0 || (a >= F(1e-4) && a < F(1e16))) {
    std::string s = shortest(v, std::chars_format::fixed);
    if (s.find('.') == std::string::npos) s += ".0";
    return s;
  }
  return fix_exponent(shortest(v, std::chars_format::scientific));
}

std::string quote_bytes(const std::string& s) {
  std::string out = "b'";
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "'";
}

// Formats the shown elements of an array so that they line up, as NumPy does.
template <class F>
std::vector<std::string> format_float_array(const std::vector<F>& vals) {
  F max_v = 0, min_v = 0;
  bool any = false;
  for (F v : vals) {
    if (!std::isfinite(v) || v == 0) continue;
    const F a = std::fabs(v);
    if (!any) max_v = min_v = a;
    max_v = std::max(max_v, a);
    min_v = std::min(min_v, a);
    any = true;
  }
  const bool sci = any && (max_v >= F(1e8) || min_v < F(1e-4) || max_v / min_v > F(1e3));
  std::vector<std::string> ints(vals.size()), fracs(vals.size()), exps(vals.size());
  std::vector<bool> special(vals.size(), false);
  std::size_t int_w = 0, frac_w = 0, exp_w = 0;
  for (std::size_t i = 0; i < vals.size(); ++i) {
    const F v = vals[i];
    if (!std::isfinite(v)) {
      special[i] = true;
      ints[i] = std::isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf");
      continue;
    }
    std::string s = sci ? fix_exponent(shortest(v, std::chars_format::scientific))
                        : shortest(v, std::chars_format::fixed);
    const auto e = s.find('e');
    if (e != std::string::npos) {
      exps[i] = s.substr(e);
      s = s.substr(0, e);
    }
    const auto dot = s.find('.');
    if (dot == std::string::npos) {
      ints[i] = s;
    } else {
      ints[i] = s.substr(0, dot);
      fracs[i] = s.substr(dot + 1);
    }
    int_w = std::max(int_w, ints[i].size());
    frac_w = std::max(frac_w, fracs[i].size());
    exp_w = std::max(exp_w, exps[i].size());
  }
  const std::size_t total = int_w + 1 + frac_w + exp_w;
  std::vector<std::string> out(vals.size());
  for (std::size_t i = 0; i < vals.size(); ++i) {
    if (special[i]) {
      out[i] = std::string(total > ints[i].size() ? total - ints[i].size() : 0, ' ') + ints[i];
      continue;
    }
    std::string frac = fracs[i];
    // Scientific mantissas are zero-padded ("1.0e+00"), positional ones space-padded.
    frac.append(frac_w - frac.size(), sci ? '0' : ' ');
    out[i] = std::string(int_w - ints[i].size(), ' ') + ints[i] + "." + frac + exps[i];
  }
  return out;
}

std::vector<std::string> right_align(std::vector<std::string> v) {
  std::size_t w = 0;
  for (const auto& s : v) w = std::max(w, s.size());
  for (auto& s : v) s.insert(0, w - s.size(), ' ');
  return v;
}

// The flat indices NumPy would show: everything, or the edge items of every long dim.
void shown_indices(const std::vector<int64_t>& dims, bool summarise, std::size_t d, int64_t base,
                   std::vector<int64_t>& out) {
  if (d == dims.size()) {
    out.push_back(base);
    return;
  }
  int64_t stride = 1;
  for (std::size_t k = d + 1; k < dims.size(); ++k) stride *= dims[k];
  const int64_t n = dims[d];
  for (int64_t i = 0; i < n; ++i) {
    if (summarise && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    shown_indices(dims, summarise, d + 1, base + i * stride, out);
  }
}

void emit(const std::vector<int64_t>& dims, bool summarise, std::size_t d,
          const std::vector<std::string>& elems, std::size_t& next, std::string& out) {
  if (d == dims.size()) {
    out += elems[next++];
    return;
  }
  out += '[';
  const int64_t n = dims[d];
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ' ';
    if (summarise && n > 2 * kEdgeItems && i == kEdgeItems) {
      out += "... ";
      i = n - kEdgeItems;
    }
    emit(dims, summarise, d + 1, elems, next, out);
  }
  out += ']';
}

std::string format_values(const detail::TensorImpl& impl) {
  const auto& dims = impl.shape.dims();
  const int64_t n = impl.shape.num_elements();
  std::vector<int64_t> idx;
  const bool summarise = n > kSummariseThreshold;
  shown_indices(dims, summarise, 0, 0, idx);
  std::vector<std::string> elems;
  const bool scalar = dims.empty();
  switch (impl.dtype) {
    case DType::Float32:
    case DType::Float64: {
      std::vector<double> vals;
      auto fmt = [&](auto* p) {
        using F = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
        if (scalar) {
          elems.push_back(format_float_scalar<F>(p[0]));
          return;
        }
        std::vector<F> shown;
        for (int64_t i : idx) shown.push_back(p[i]);
        elems = format_float_array<F>(shown);
      };
      if (impl.dtype == DType::Float32) fmt(impl.data<float>());
      else fmt(impl.data<double>());
      break;
    }
    case DType::Int32:
      for (int64_t i : idx) elems.push_back(std::to_string(impl.data<int32_t>()[i]));
      elems = right_align(std::move(elems));
      break;
    case DType::Int64:
      for (int64_t i : idx) elems.push_back(std::to_string(impl.data<int64_t>()[i]));
      elems = right_align(std::move(elems));
      break;
    case DType::Bool:
      for (int64_t i : idx) elems.push_back(impl.data<bool>()[i] ? "True" : "False");
      elems = right_align(std::move(elems));
      break;
    case DType::String:
      for (int64_t i : idx) elems.push_back(quote_bytes(impl.data<std::string>()[i]));
      break;
  }
  std::string out;
  std::size_t next = 0;
  emit(dims, summarise, 0, elems, next, out);
  return out;
}

}  // namespace

std::string Tensor::to_string() const {
  if (!impl_) return "tg.Tensor(<empty>)";
  const auto& impl = *impl_;
  if (impl.symbolic)
    return detail::str_cat("Tensor(\"", impl.symbolic->name(), "\", shape=", impl.shape.to_string(),
                           ", dtype=", tg::to_string(impl.dtype), ")");
  return detail::str_cat("tg.Tensor(", format_values(impl), ", shape=", impl.shape.to_string(),
                         ", dtype=", tg::to_string(impl.dtype), ")");
}

}  // namespace tg
