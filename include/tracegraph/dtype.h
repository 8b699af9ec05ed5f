// Element types of tensors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace tg {

/// The element type of a tensor. Mirrors TensorFlow's tf.float32 ... tf.string and tf.uint8
/// (image bytes). UInt8 comes last so that the values of the others stay as they were.
enum class DType : uint8_t { Float32, Float64, Int32, Int64, Bool, String, UInt8 };
/// How many DTypes there are: the size of tables indexed by a DType.
inline constexpr std::size_t kNumDTypes = 7;

inline constexpr DType float32 = DType::Float32;
inline constexpr DType float64 = DType::Float64;
inline constexpr DType int32 = DType::Int32;
inline constexpr DType int64 = DType::Int64;
inline constexpr DType bool_ = DType::Bool;
inline constexpr DType string_ = DType::String;
inline constexpr DType uint8 = DType::UInt8;

/// "float32", "float64", "int32", "int64", "bool", "string", "uint8".
std::string to_string(DType);
/// Writes to_string(dtype): "float32".
std::ostream& operator<<(std::ostream&, DType);

/// Bytes per element (sizeof(std::string) for String).
std::size_t dtype_size(DType);
bool is_floating(DType);
/// int32, int64 and uint8.
bool is_integer(DType);
/// Floating or integer: the dtypes arithmetic is defined on.
bool is_numeric(DType);

/// The DType that stores C++ type T: float, double, int32_t, int64_t, bool, std::string, uint8_t.
template <class T>
struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<std::string> { static constexpr DType value = DType::String; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <class T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace tg
