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

// The shortest round-trip decimal digits of v (no sign, no dot) and the decimal exponent of
// the first digit: 0.0125 -> {"125", -2}. Dragon4 in NumPy's "unique" mode picks the same
// digits, so building from them (instead of to_chars' fixed notation, which prints large floats
// exactly: 999999986991104) reproduces NumPy's text.
template <class F>
void shortest_digits(F v, std::string& digits, int& exp10) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::scientific);
  const std::string s(buf, r.ptr);
  const auto e = s.find('e');
  digits.clear();
  for (std::size_t i = 0; i < e; ++i)
    if (s[i] != '.') digits += s[i];
  exp10 = std::stoi(s.substr(e + 1));
}

// Positional notation "123.45" / "1000." / "0.001" (always with a dot); at most max_frac
// fractional digits (rounded, trailing zeros trimmed) when max_frac >= 0.
template <class F>
std::string positional(F v, int max_frac) {
  std::string digits;
  int e = 0;
  shortest_digits(v, digits, e);
  const int frac = std::max(0, static_cast<int>(digits.size()) - 1 - e);
  std::string s;
  if (max_frac >= 0 && frac > max_frac) {
    char buf[400];
    const auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::fixed,
                                 max_frac);
    s.assign(buf, r.ptr);
    while (s.back() == '0') s.pop_back();
  } else if (e < 0) {
    s = "0." + std::string(static_cast<std::size_t>(-e - 1), '0') + digits;
  } else if (static_cast<int>(digits.size()) <= e + 1) {
    s = digits + std::string(static_cast<std::size_t>(e + 1) - digits.size(), '0') + ".";
  } else {
    s = digits.substr(0, static_cast<std::size_t>(e + 1)) + "." +
        digits.substr(static_cast<std::size_t>(e + 1));
  }
  return std::signbit(v) ? "-" + s : s;
}

// Scientific notation split in parts: mantissa "1.5" / "1." (at most max_frac fractional
// digits when max_frac >= 0), exponent sign and digits ("-", "5").
struct SciParts {
  std::string mantissa;
  char exp_sign;
  std::string exp_digits;
};
template <class F>
SciParts scientific(F v, int max_frac) {
  std::string digits;
  int e = 0;
  shortest_digits(v, digits, e);
  if (max_frac >= 0 && static_cast<int>(digits.size()) - 1 > max_frac) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(v),
                                 std::chars_format::scientific, max_frac);
    const std::string s(buf, r.ptr);
    const auto epos = s.find('e');
    digits.clear();
    for (std::size_t i = 0; i < epos; ++i)
      if (s[i] != '.') digits += s[i];
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    e = std::stoi(s.substr(epos + 1));
  }
  SciParts p;
  if (std::signbit(v)) p.mantissa = "-";
  p.mantissa += digits[0];
  p.mantissa += '.';
  p.mantissa.append(digits, 1);
  p.exp_sign = e < 0 ? '-' : '+';
  p.exp_digits = std::to_string(e < 0 ? -e : e);
  return p;
}

// NumPy's str() of a float scalar: positional with all shortest digits ("20.0", "2.2",
// "0.3333333333333333") when 1e-4 <= |v| < 1e16 (compared in double, as NumPy does), else
// scientific with at least two exponent digits ("1e-05", "1.5e+16").
template <class F>
std::string format_float_scalar(F v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  const double a = std::fabs(static_cast<double>(v));
  if (v == 0 || (a >= 1e-4 && a < 1e16)) {
    std::string s = positional(v, -1);
    if (s.back() == '.') s += '0';
    return s;
  }
  SciParts p = scientific(v, -1);
  if (p.mantissa.back() == '.') p.mantissa.pop_back();
  if (p.exp_digits.size() < 2) p.exp_digits.insert(0, 2 - p.exp_digits.size(), '0');
  return p.mantissa + "e" + p.exp_sign + p.exp_digits;
}

// Python's repr of bytes: single quotes unless the text has a ' and no ", escapes otherwise.
std::string quote_bytes(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out = "b";
  out += q;
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c == q) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c >= 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + q;
}

// Formats the shown elements of an array so that they line up: NumPy's FloatingFormat with
// its defaults (precision 8, floatmode "maxprec", sign "-").
template <class F>
std::vector<std::string> format_float_array(const std::vector<F>& vals) {
  F max_v = 0, min_v = 0;
  bool any = false, any_finite = false, neg_inf = false, non_finite = false;
  for (F v : vals) {
    if (!std::isfinite(v)) {
      non_finite = true;
      neg_inf |= std::isinf(v) && v < 0;
      continue;
    }
    any_finite = true;
    if (v == 0) continue;
    const F a = std::fabs(v);
    if (!any) max_v = min_v = a;
    max_v = std::max(max_v, a);
    min_v = std::min(min_v, a);
    any = true;
  }
  // As NumPy 1.x does: the bounds in double (float32 1e-4 is below 1e-4), the ratio in F.
  const bool sci = any && (static_cast<double>(max_v) >= 1e8 ||
                           static_cast<double>(min_v) < 1e-4 || max_v / min_v > F(1e3));
  const std::size_t n = vals.size();
  std::vector<std::string> ints(n), fracs(n), exps(n);
  std::vector<char> exp_signs(n, '+');
  std::size_t pad_left = 0, pad_right = 0, exp_w = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const F v = vals[i];
    if (!std::isfinite(v)) continue;
    std::string m;
    if (sci) {
      SciParts p = scientific(v, kMaxPrecision);
      m = p.mantissa;
      exp_signs[i] = p.exp_sign;
      exps[i] = p.exp_digits;
      exp_w = std::max(exp_w, exps[i].size());
    } else {
      m = positional(v, kMaxPrecision);
    }
    const auto dot = m.find('.');
    ints[i] = m.substr(0, dot);
    fracs[i] = m.substr(dot + 1);
    pad_left = std::max(pad_left, ints[i].size());
    pad_right = std::max(pad_right, fracs[i].size());
  }
  exp_w = std::max<std::size_t>(exp_w, 2);
  const std::size_t frac_w = pad_right;  // scientific: the common mantissa precision
  if (sci && any_finite) pad_right = frac_w + 2 + exp_w;  // "e", sign and digits, as NumPy counts
  if (!any_finite) pad_left = pad_right = 0;
  if (non_finite) {
    // Widen so that "nan" / "-inf" fit, as NumPy does.
    const std::size_t offset = pad_right + 1;
    const std::size_t inf_len = neg_inf ? 4 : 3;
    if (3 > offset) pad_left = std::max(pad_left, 3 - offset);
    if (inf_len > offset) pad_left = std::max(pad_left, inf_len - offset);
  }
  const std::size_t total = pad_left + pad_right + 1;
  std::vector<std::string> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const F v = vals[i];
    if (!std::isfinite(v)) {
      const std::string s = std::isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf");
      out[i] = std::string(total > s.size() ? total - s.size() : 0, ' ') + s;
      continue;
    }
    std::string s = std::string(pad_left - ints[i].size(), ' ') + ints[i] + ".";
    if (sci) {
      // Mantissas are zero-padded to one precision and exponents to one width ("1.0e+00").
      s += fracs[i] + std::string(frac_w - fracs[i].size(), '0') + "e" + exp_signs[i] +
           std::string(exp_w - exps[i].size(), '0') + exps[i];
    } else {
      s += fracs[i] + std::string(pad_right - fracs[i].size(), ' ');
    }
    out[i] = std::move(s);
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
  if (n == 0) return "[]";  // NumPy prints every empty array so, (2, 0) included
  std::vector<int64_t> idx;
  const bool summarise = n > kSummariseThreshold;
  shown_indices(dims, summarise, 0, 0, idx);
  std::vector<std::string> elems;
  const bool scalar = dims.empty();
  switch (impl.dtype) {
    case DType::Float32:
    case DType::Float64: {
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
    case DType::BFloat16: {
      // Each value is exactly a float32: printed as the float32 it widens to.
      std::vector<float> widened;
      for (int64_t i : idx) widened.push_back(static_cast<float>(impl.data<bfloat16_t>()[i]));
      if (scalar) elems.push_back(format_float_scalar<float>(widened[0]));
      else elems = format_float_array<float>(widened);
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
    case DType::UInt8:
      for (int64_t i : idx) elems.push_back(std::to_string(int{impl.data<uint8_t>()[i]}));
      elems = right_align(std::move(elems));
      break;
    case DType::Bool:
      // NumPy pads True to False's width in every array, even one without a False.
      for (int64_t i : idx)
        elems.push_back(impl.data<bool>()[i] ? (scalar ? "True" : " True") : "False");
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

namespace tg::detail {
// The values part of the repr, for tg::print.
std::string format_values(const Tensor& t) { return ::tg::format_values(*t.impl()); }
}  // namespace tg::detail
