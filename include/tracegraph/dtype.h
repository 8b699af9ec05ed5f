// Element types of tensors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace tg {

/// The element type of a tensor. Mirrors TensorFlow's tf.float32 ... tf.string, tf.uint8
/// (image bytes) and tf.bfloat16. New dtypes come last so that the values of the others (which
/// files store) stay as they were.
enum class DType : uint8_t { Float32, Float64, Int32, Int64, Bool, String, UInt8, BFloat16 };
/// How many DTypes there are: the size of tables indexed by a DType.
inline constexpr std::size_t kNumDTypes = 8;

inline constexpr DType float32 = DType::Float32;
inline constexpr DType float64 = DType::Float64;
inline constexpr DType int32 = DType::Int32;
inline constexpr DType int64 = DType::Int64;
inline constexpr DType bool_ = DType::Bool;
inline constexpr DType string_ = DType::String;
inline constexpr DType uint8 = DType::UInt8;
/// Brain floating point: float32's sign and 8 exponent bits with 7 mantissa bits. Ops compute
/// on it in float32 and round each result to bfloat16, as TensorFlow does (docs/DECISIONS.md).
inline constexpr DType bfloat16 = DType::BFloat16;

/// One bfloat16 value: the upper 16 bits of a float32. Conversions are explicit, so that no
/// arithmetic happens on it by accident; from a float they round to nearest, ties to even, and
/// keep NaN a (quiet) NaN with its sign, as TensorFlow's and Eigen's bfloat16 do.
struct bfloat16_t {
  uint16_t bits = 0;

  constexpr bfloat16_t() = default;
  explicit constexpr bfloat16_t(float f) : bits(round_from(f)) {}
  explicit constexpr operator float() const { return __builtin_bit_cast(float, static_cast<uint32_t>(bits) << 16); }
  /// The value with these bits.
  static constexpr bfloat16_t from_bits(uint16_t b) {
    bfloat16_t v;
    v.bits = b;
    return v;
  }
  /// Same bits (NaN payloads and the sign of zero included): what tests and files compare.
  friend constexpr bool operator==(bfloat16_t, bfloat16_t) = default;

  /// f's bits rounded to the upper 16, ties to even; NaN stays NaN (quiet bit set).
  static constexpr uint16_t round_from(float f) {
    const uint32_t u = __builtin_bit_cast(uint32_t, f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

/// "float32", "float64", "int32", "int64", "bool", "string", "uint8", "bfloat16".
std::string to_string(DType);
/// Writes to_string(dtype): "float32".
std::ostream& operator<<(std::ostream&, DType);

/// Bytes per element (sizeof(std::string) for String).
std::size_t dtype_size(DType);
/// float32, float64 and bfloat16.
bool is_floating(DType);
/// int32, int64 and uint8.
bool is_integer(DType);
/// Floating or integer: the dtypes arithmetic is defined on.
bool is_numeric(DType);

/// The DType that stores C++ type T: float, double, int32_t, int64_t, bool, std::string, uint8_t,
/// bfloat16_t.
template <class T>
struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<std::string> { static constexpr DType value = DType::String; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<bfloat16_t> { static constexpr DType value = DType::BFloat16; };
template <class T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace tg
