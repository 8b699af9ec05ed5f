#include "tracegraph/dtype.h"

#include <ostream>

#include "core/check.h"

namespace tg {

std::string to_string(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::String: return "string";
    case DType::UInt8: return "uint8";
    case DType::BFloat16: return "bfloat16";
  }
  throw InvalidArgumentError(detail::str_cat("invalid DType value ", static_cast<int>(d)));
}

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::String: return sizeof(std::string);
    case DType::UInt8: return 1;
    case DType::BFloat16: return 2;
  }
  throw InvalidArgumentError(detail::str_cat("invalid DType value ", static_cast<int>(d)));
}

bool is_floating(DType d) { return d == DType::Float32 || d == DType::Float64 || d == DType::BFloat16; }
bool is_integer(DType d) { return d == DType::Int32 || d == DType::Int64 || d == DType::UInt8; }
bool is_numeric(DType d) { return is_floating(d) || is_integer(d); }

}  // namespace tg

namespace tg {
std::ostream& operator<<(std::ostream& os, DType d) { return os << to_string(d); }
}  // namespace tg
