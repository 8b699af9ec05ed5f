// The .tgx container (docs/export.md is the specification): constants shared by the writer and
// the reader, and the byte-level writer and bounds-checked reader they use.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/shape_limits.h"
#include "tracegraph/dtype.h"
#include "tracegraph/errors.h"
#include "tracegraph/shape.h"

namespace tg::detail::tgx {

inline constexpr uint8_t kMagic[8] = {0x89, 'T', 'G', 'X', '\r', '\n', 0x1a, '\n'};
// Major: a reader loads its own major version's files. Minor: only additions - optional
// sections, ops (new serials), codes, attribute fields whose default keeps the old behaviour;
// an older reader refuses a file that uses one it lacks, by name. Changing an existing encoding
// is a new major version (docs/export.md, "Compatibility", has the table).
inline constexpr uint16_t kMajor = 1;
inline constexpr uint16_t kMinor = 0;
inline constexpr std::size_t kHeaderBytes = 64;
inline constexpr std::size_t kSectionEntryBytes = 32;
inline constexpr std::size_t kAlign = 64;  // sections and tensor data start at multiples of it

constexpr uint32_t tag(const char (&s)[5]) {
  return uint32_t(uint8_t(s[0])) | uint32_t(uint8_t(s[1])) << 8 | uint32_t(uint8_t(s[2])) << 16 |
         uint32_t(uint8_t(s[3])) << 24;
}
inline constexpr uint32_t kManifest = tag("MANI");
inline constexpr uint32_t kGraphs = tag("GRPH");
inline constexpr uint32_t kTensors = tag("TNSR");
inline constexpr uint32_t kData = tag("DATA");
inline constexpr uint32_t kRequired = 1;  // section flag: a reader that does not know the tag refuses the file
std::string tag_name(uint32_t t);

enum class FileKind : uint8_t { kFunction = 1, kCheckpoint = 2 };
enum class NodeCode : uint8_t { kPlaceholder = 0, kConst = 1, kOp = 2, kOutput = 3 };
enum class FieldCode : uint8_t { kInt = 1, kBool = 2, kFloat = 3, kDType = 4, kInts = 5, kStrings = 6,
                                 kVariable = 7, kControlFlow = 8 };
enum class TypeCode : uint8_t { kTensor = 1, kLiteral = 2, kSequence = 3, kMapping = 4, kOptional = 5,
                                kVariable = 6 };
enum class OutputKind : uint8_t { kNone = 0, kTensor = 1, kFlat = 2 };
enum class VariableRef : uint8_t { kVariable = 0, kParameter = 1 };

/// The file's code of a dtype (stable, unlike the enum's values).
uint8_t dtype_code(DType d);
/// False for a code no dtype has.
bool dtype_from_code(uint8_t code, DType* d);

/// Appends little-endian values to a byte string.
class Writer {
 public:
  std::string bytes;
  void u8(uint8_t v) { bytes.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void count(std::size_t n);  // a u32 count; more than 2^32-1 elements is a ValueError
  void str(const std::string& s) {
    count(s.size());
    bytes.append(s);
  }
  void dtype(DType d) { u8(dtype_code(d)); }
  /// A shape, refused (ValueError) when tg::load would refuse it: rank_defect. `what` names it.
  void shape(const TensorShape& s, const char* what = "a shape");
  void pad_to(std::size_t alignment) { bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, '\0'); }
  void raw(const void* p, std::size_t n) { bytes.append(static_cast<const char*>(p), n); }
};

/// Reads little-endian values from one section of a file, never past its end: every failure is
/// a tg::FormatError naming the section and the byte offset in the file.
class Reader {
 public:
  /// `op` names the API in messages ("tg::load", "tg::restore_variables").
  Reader(const uint8_t* file, std::size_t begin, std::size_t end, std::string section, const char* op = "tg::load")
      : file_(file), pos_(begin), end_(end), section_(std::move(section)), op_(op) {}
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }
  [[noreturn]] void fail_at(std::size_t offset, const std::string& what) const;
  std::size_t offset() const { return pos_; }
  std::size_t left() const { return end_ - pos_; }
  const std::string& section() const { return section_; }

  uint8_t u8() { return take<uint8_t>(); }
  uint16_t u16() { return take<uint16_t>(); }
  uint32_t u32() { return take<uint32_t>(); }
  uint64_t u64() { return take<uint64_t>(); }
  int64_t i64() { return take<int64_t>(); }
  double f64() { return take<double>(); }
  bool boolean(const char* what);
  /// A count of elements that each take at least `min_bytes`: checked against the bytes left
  /// before anything is allocated for them.
  std::size_t count(const char* what, std::size_t min_bytes);
  std::string str(const char* what);
  DType dtype(const char* what);
  TensorShape shape(const char* what);
  void expect_end();
  /// Moves past `n` bytes (a FormatError if fewer are left).
  void skip(std::size_t n) {
    if (n > left()) fail(str_cat("ends ", n - left(), " bytes early"));
    pos_ += n;
  }

 private:
  template <class T>
  T take() {
    if (left() < sizeof(T)) fail(str_cat("ends ", sizeof(T) - left(), " bytes early"));
    T v;
    std::memcpy(&v, file_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  const uint8_t* file_;
  std::size_t pos_, end_;
  std::string section_;
  const char* op_;
};

/// The largest rank a file may give a shape is tracegraph's limit on ranks read from data,
/// TensorFlow's own: detail::kMaxRank (core/shape_limits.h).
using detail::kMaxRank;
/// The longest C++ type name a literal may carry (the loader keeps each for the process's life).
inline constexpr std::size_t kMaxTypeName = 256;

// The format's own limits - those no LoadOptions field sets - each defined once here and checked
// by the reader (a FormatError) and by the writer (a ValueError before anything is written), so
// that whatever tg::save writes tg::load reads. Each returns why a value breaks its limit, or ""
// when it does not.
/// `what` (e.g. "an output") has rank `rank`, more than kMaxRank.
std::string rank_defect(const char* what, std::size_t rank);
/// A literal's C++ type name of `length` characters: 1 to kMaxTypeName.
std::string type_name_defect(std::size_t length);
/// A literal that sets fields its kind does not have (equal values must be equal bytes).
std::string literal_defect(int kind, int64_t i, double f, const std::string& s, const std::string& cpp_type);

}  // namespace tg::detail::tgx
