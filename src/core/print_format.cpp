// Tensor values as tf.print writes them (TF's print_v2 summary), which differs from the repr's
// NumPy style: elements are not padded to one width, floats have the fewest of 6 or 9 (float32)
// / 15 or 17 (float64) significant digits that read back to the same value ("43.5", "1",
// "0.722626925"), bools print as 1 and 0, strings inside a tensor are double-quoted with C
// escapes, rows of a matrix go on lines of their own, and every dimension longer than twice
// `summarize` shows its first and last `summarize` entries around "...".
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "core/tensor_impl.h"

namespace tg::detail {
namespace {

// The shortest of the two precisions TF tries whose text reads back as the same value.
template <class F>
std::string print_float(F v) {
  constexpr int kShort = std::is_same_v<F, float> ? FLT_DIG : DBL_DIG;
  constexpr int kLong = std::is_same_v<F, float> ? FLT_DIG + 3 : DBL_DIG + 2;
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", kShort, static_cast<double>(v));
  const F back = std::is_same_v<F, float> ? static_cast<F>(std::strtof(buf, nullptr)) : static_cast<F>(std::strtod(buf, nullptr));
  if (back != v) std::snprintf(buf, sizeof buf, "%.*g", kLong, static_cast<double>(v));
  return buf;
}

// C escapes for quotes, backslashes and control bytes (octal), UTF-8 bytes kept as they are.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '"': out += "\\\""; break;
      case '\'': out += "\\'"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\%03o", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string print_element(const TensorImpl& t, int64_t i) {
  switch (t.dtype) {
    case DType::Float32: return print_float(t.data<float>()[i]);
    case DType::Float64: return print_float(t.data<double>()[i]);
    case DType::BFloat16: return print_float(static_cast<float>(t.data<bfloat16_t>()[i]));
    case DType::Int32: return std::to_string(t.data<int32_t>()[i]);
    case DType::Int64: return std::to_string(t.data<int64_t>()[i]);
    case DType::UInt8: return std::to_string(int{t.data<uint8_t>()[i]});
    case DType::Bool: return t.data<bool>()[i] ? "1" : "0";
    case DType::String: return quoted(t.data<std::string>()[i]);
  }
  return "?";
}

// Between two entries of dimension `d` of a rank-`rank` tensor: a space in the last dimension;
// otherwise one newline per inner dimension, then an indent of d + 1 spaces.
void separate(std::size_t d, std::size_t rank, std::string& out) {
  if (d + 1 == rank) {
    out += ' ';
    return;
  }
  out.append(rank - d - 1, '\n');
  out.append(d + 1, ' ');
}

void print_dims(const TensorImpl& t, const std::vector<int64_t>& dims, int64_t summarize, std::size_t d,
                int64_t base, std::string& out) {
  int64_t stride = 1;
  for (std::size_t k = d + 1; k < dims.size(); ++k) stride *= dims[k];
  const int64_t n = dims[d];
  const bool cut = summarize >= 0 && n > 2 * summarize;
  if (cut && summarize == 0) {
    out += "[...]";
    return;
  }
  out += '[';
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) separate(d, dims.size(), out);
    if (cut && i == summarize) {
      out += "...";
      separate(d, dims.size(), out);
      i = n - summarize;
    }
    if (d + 1 == dims.size()) out += print_element(t, base + i);
    else print_dims(t, dims, summarize, d + 1, base + i * stride, out);
  }
  out += ']';
}

}  // namespace

std::string format_print_values(const Tensor& t, int64_t summarize) {
  const TensorImpl& impl = *t.impl();
  const auto& dims = impl.shape.dims();
  if (dims.empty()) return print_element(impl, 0);
  std::string out;
  print_dims(impl, dims, summarize, 0, 0, out);
  return out;
}

}  // namespace tg::detail
