// NumPy .npy files: a strict parser of the header NumPy writes, and the writer.
//
// Layout: "\x93NUMPY", major, minor, the header length (uint16 LE for 1.0, uint32 LE for 2.0 and
// 3.0), the header - a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape':
// (2, 3), } padded with spaces and ended by '\n' so that the data starts at a multiple of 64 -,
// then the elements.
#include "data/npy.h"

#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "data/file_bytes.h"
#include "tracegraph/npy.h"

namespace tg {
namespace detail {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicBytes = 6;
// The most dimensions a .npy shape may have (NumPy 2's NPY_MAXDIMS): the reader refuses more,
// so the writer does too.
constexpr std::size_t kMaxRank = 64;

// What a descr names: how the elements are stored, and the dtype they become.
struct ElementFormat {
  char kind = 0;          // 'f' float, 'i' signed, 'u' unsigned, 'b' bool
  std::size_t bytes = 0;  // per element in the file
  bool big_endian = false;
  DType dtype = DType::Float32;
};

// Reads the header dict, reporting every mistake with the byte offset in the file.
class HeaderParser {
 public:
  HeaderParser(const std::string& source, const char* text, std::size_t size, std::size_t offset)
      : source_(source), text_(text), size_(size), base_(offset) {}

  [[noreturn]] void fail(const std::string& what) const {
    op_error<ValueError>("load_npy", "'", source_, "' has a malformed header at byte ", base_ + pos_, ": ", what,
                         ". Expected NumPy's header, e.g. {'descr': '<f4', 'fortran_order': False, "
                         "'shape': (2, 3), }");
  }
  void skip_spaces() {
    while (pos_ < size_ && text_[pos_] == ' ') ++pos_;
  }
  bool accept(char c) {
    skip_spaces();
    if (pos_ < size_ && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* what) {
    if (!accept(c)) fail(str_cat("expected ", what, " ('", c, "'), found ", found()));
  }
  std::string found() const {
    if (pos_ >= size_) return "the end of the header";
    const char c = text_[pos_];
    if (c >= 0x20 && c < 0x7f) return str_cat("'", c, "'");
    return str_cat("the byte ", static_cast<int>(static_cast<unsigned char>(c)));
  }
  std::string string_literal() {
    skip_spaces();
    if (pos_ >= size_ || (text_[pos_] != '\'' && text_[pos_] != '"')) fail("expected a quoted string, found " + found());
    const char quote = text_[pos_++];
    std::string s;
    while (pos_ < size_ && text_[pos_] != quote) {
      const char c = text_[pos_];
      if (c == '\\' || c < 0x20 || c >= 0x7f) fail("a string with an escape or a non-ASCII byte, " + found());
      s += c;
      if (s.size() > 64) fail("a string longer than 64 characters");
      ++pos_;
    }
    if (pos_ >= size_) fail("an unterminated string");
    ++pos_;
    return s;
  }
  bool boolean() {
    skip_spaces();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::size_t n = std::strlen(word);
      if (size_ - pos_ >= n && std::memcmp(text_ + pos_, word, n) == 0) {
        pos_ += n;
        return value;
      }
    }
    fail("expected True or False for 'fortran_order', found " + found());
  }
  int64_t dimension() {
    skip_spaces();
    if (pos_ >= size_ || text_[pos_] < '0' || text_[pos_] > '9') fail("expected a dimension (a whole number >= 0), found " + found());
    int64_t v = 0;
    while (pos_ < size_ && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (__builtin_mul_overflow(v, int64_t{10}, &v) || __builtin_add_overflow(v, int64_t{text_[pos_] - '0'}, &v))
        fail("a dimension larger than 2^63 - 1");
      ++pos_;
    }
    accept('L');  // Python 2 wrote longs with a suffix
    return v;
  }
  std::vector<int64_t> shape() {
    expect('(', "a tuple for 'shape'");
    std::vector<int64_t> dims;
    if (accept(')')) return dims;
    for (;;) {
      if (dims.size() == kMaxRank) fail(str_cat("a shape of more than ", kMaxRank, " dimensions"));
      dims.push_back(dimension());
      if (accept(')')) break;
      expect(',', "',' or ')' in 'shape'");
      if (accept(')')) break;
    }
    return dims;
  }
  // The rest after the closing brace: spaces, then one '\n' ending the header.
  void finish() {
    skip_spaces();
    if (pos_ + 1 != size_ || text_[pos_] != '\n')
      fail("expected only spaces and a final newline after the dict, found " + found());
  }
  bool at_value_start(char c) {
    skip_spaces();
    return pos_ < size_ && text_[pos_] == c;
  }

 private:
  const std::string& source_;
  const char* text_;
  std::size_t size_;
  std::size_t base_;
  std::size_t pos_ = 0;
};

ElementFormat element_format(const std::string& source, const std::string& descr, std::size_t offset) {
  auto bad = [&](const std::string& why) -> ElementFormat {
    op_error<ValueError>("load_npy", "'", source, "' has the dtype '", descr, "' (header at byte ", offset, "): ",
                         why);
  };
  if (descr.size() < 2) return bad("expected a byte order, a kind and a size such as '<f4'");
  const char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return bad("expected the byte order '<', '>', '|' or '=' first");
  ElementFormat f;
  f.kind = descr[1];
  if (f.kind == 'O')
    return bad("object arrays hold pickled Python objects, which tracegraph never reads; save the "
               "array with a numeric dtype (numpy.asarray(a, dtype=numpy.float32))");
  std::size_t bytes = 0;
  for (std::size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || bytes > 1000) return bad("expected the element size in bytes after the kind");
    bytes = bytes * 10 + static_cast<std::size_t>(descr[i] - '0');
  }
  f.bytes = bytes;
  f.big_endian = order == '>' || (order == '=' && std::endian::native == std::endian::big);
  const char* supported =
      "tracegraph reads float32 ('<f4'), float64 ('<f8'), bool ('|b1'), int8/16/32/64 ('|i1', '<i2', "
      "'<i4', '<i8') and uint8/16/32 ('|u1', '<u2', '<u4'), in either byte order";
  switch (f.kind) {
    case 'f':
      if (bytes == 4) f.dtype = DType::Float32;
      else if (bytes == 8) f.dtype = DType::Float64;
      else return bad(str_cat("a ", bytes * 8, "-bit float; ", supported));
      break;
    case 'i':
      if (bytes == 1 || bytes == 2 || bytes == 4) f.dtype = DType::Int32;
      else if (bytes == 8) f.dtype = DType::Int64;
      else return bad(str_cat("a ", bytes * 8, "-bit integer; ", supported));
      break;
    case 'u':
      if (bytes == 1) f.dtype = DType::UInt8;
      else if (bytes == 2) f.dtype = DType::Int32;
      else if (bytes == 4) f.dtype = DType::Int64;
      else return bad(str_cat("a ", bytes * 8, "-bit unsigned integer, whose values may not fit int64; ", supported));
      break;
    case 'b':
      if (bytes != 1) return bad(str_cat("a ", bytes, "-byte bool; ", supported));
      f.dtype = DType::Bool;
      break;
    default:
      return bad(str_cat("the kind '", f.kind, "' (strings, dates, complex numbers and structured records "
                         "have no tracegraph dtype); ", supported));
  }
  return f;
}

// Element `i` of the file's data, widened to T.
template <class T>
T element(const uint8_t* data, std::size_t i, const ElementFormat& f) {
  uint8_t b[8];
  std::memcpy(b, data + i * f.bytes, f.bytes);
  if (f.big_endian != (std::endian::native == std::endian::big))
    for (std::size_t k = 0; k < f.bytes / 2; ++k) std::swap(b[k], b[f.bytes - 1 - k]);
  auto as = [&](auto v) {
    std::memcpy(&v, b, sizeof v);
    return static_cast<T>(v);
  };
  switch (f.kind) {
    case 'f': return f.bytes == 4 ? as(float{}) : as(double{});
    case 'b': return static_cast<T>(b[0] != 0);
    case 'i':
      switch (f.bytes) {
        case 1: return as(int8_t{});
        case 2: return as(int16_t{});
        case 4: return as(int32_t{});
        default: return as(int64_t{});
      }
    default:  // 'u'
      switch (f.bytes) {
        case 1: return as(uint8_t{});
        case 2: return as(uint16_t{});
        default: return as(uint32_t{});
      }
  }
}

// Fills `out` (row-major) from the file's elements, which are in Fortran order when `fortran`.
template <class T>
void convert(const uint8_t* data, const ElementFormat& f, const std::vector<int64_t>& dims, bool fortran,
             T* out, int64_t count) {
  if (!fortran || dims.size() < 2) {
    for (int64_t i = 0; i < count; ++i) out[i] = element<T>(data, static_cast<std::size_t>(i), f);
    return;
  }
  // Walk the row-major output with a counter per dim, tracking the column-major source index.
  std::vector<int64_t> index(dims.size(), 0), stride(dims.size(), 1);
  for (std::size_t d = 1; d < dims.size(); ++d) stride[d] = stride[d - 1] * dims[d - 1];
  int64_t src = 0;
  for (int64_t i = 0; i < count; ++i) {
    out[i] = element<T>(data, static_cast<std::size_t>(src), f);
    for (std::size_t d = dims.size(); d-- > 0;) {
      if (++index[d] < dims[d]) {
        src += stride[d];
        break;
      }
      src -= stride[d] * (dims[d] - 1);
      index[d] = 0;
    }
  }
}

}  // namespace

Tensor parse_npy(const uint8_t* data, std::size_t size, const std::string& source) {
  auto bad = [&](const auto&... what) { op_error<ValueError>("load_npy", "'", source, "' ", what...); };
  if (size < kMagicBytes + 4 || std::memcmp(data, kMagic, kMagicBytes) != 0)
    bad("is not a .npy file: it does not start with the magic \\x93NUMPY followed by a version and a "
        "header length (", size, " bytes in all)");
  const int major = data[6], minor = data[7];
  if (major < 1 || major > 3 || minor != 0)
    bad("has the format version ", major, ".", minor, "; tracegraph reads 1.0, 2.0 and 3.0");
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = kMagicBytes + 2 + length_bytes;
  if (size < prefix) bad("is truncated: ", size, " bytes, but a version ", major, ".0 header starts after ", prefix);
  std::size_t header_len = 0;
  for (std::size_t k = 0; k < length_bytes; ++k) header_len |= std::size_t{data[8 + k]} << (8 * k);
  if (header_len > kMaxNpyHeaderBytes)
    bad("declares a header of ", header_len, " bytes (at byte 8); tracegraph, like NumPy, refuses headers "
        "over ", kMaxNpyHeaderBytes, " bytes");
  if (header_len > size - prefix)
    bad("is truncated: its header declares ", header_len, " bytes after byte ", prefix, ", but only ", size - prefix,
        " follow");

  HeaderParser p(source, reinterpret_cast<const char*>(data + prefix), header_len, prefix);
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> dims;
  p.expect('{', "the header dict");
  while (!p.accept('}')) {
    const std::string key = p.string_literal();
    p.expect(':', "':' after a key");
    auto once = [&](const auto& slot) {
      if (slot.has_value()) p.fail("the key '" + key + "' appears twice");
    };
    if (key == "descr") {
      once(descr);
      if (!p.at_value_start('\'') && !p.at_value_start('"'))
        p.fail("'descr' is not a string: structured (record) dtypes have no tracegraph dtype");
      descr = p.string_literal();
    } else if (key == "fortran_order") {
      once(fortran);
      fortran = p.boolean();
    } else if (key == "shape") {
      once(dims);
      dims = p.shape();
    } else {
      p.fail("the unknown key '" + key + "' (expected 'descr', 'fortran_order' and 'shape')");
    }
    if (p.accept('}')) break;
    p.expect(',', "',' or '}' after a value");
  }
  p.finish();
  if (!descr || !fortran || !dims)
    bad("has a header without the key '", !descr ? "descr" : !fortran ? "fortran_order" : "shape",
        "'; NumPy writes all of 'descr', 'fortran_order' and 'shape'");
  const ElementFormat f = element_format(source, *descr, prefix);

  int64_t count = 1;
  bool overflow = false;
  for (int64_t d : *dims) overflow = overflow || __builtin_mul_overflow(count, d, &count);
  uint64_t need = 0;
  overflow = overflow || __builtin_mul_overflow(static_cast<uint64_t>(count), uint64_t{f.bytes}, &need);
  const std::size_t data_offset = prefix + header_len;
  const uint64_t have = size - data_offset;
  if (overflow || need != have)
    bad(need > have || overflow ? "is truncated" : "has bytes after its data", ": the header declares shape ",
        TensorShape(*dims).to_string(), " of '", *descr, "', which is ", overflow ? std::string("more than 2^64") : std::to_string(need),
        " bytes of data from byte ", data_offset, ", but the file has ", have);

  Tensor t = allocate_tensor(f.dtype, TensorShape(*dims));
  const uint8_t* elements = data + data_offset;
  switch (f.dtype) {
    case DType::Float32: convert(elements, f, *dims, *fortran, data_of<float>(t), count); break;
    case DType::Float64: convert(elements, f, *dims, *fortran, data_of<double>(t), count); break;
    case DType::Int32: convert(elements, f, *dims, *fortran, data_of<int32_t>(t), count); break;
    case DType::Int64: convert(elements, f, *dims, *fortran, data_of<int64_t>(t), count); break;
    case DType::Bool: convert(elements, f, *dims, *fortran, data_of<bool>(t), count); break;
    case DType::UInt8: convert(elements, f, *dims, *fortran, data_of<uint8_t>(t), count); break;
    case DType::String:
    case DType::BFloat16: TG_CHECK(false, "a .npy descr mapped to ", to_string(f.dtype));
  }
  return t;
}

std::string encode_npy(const Tensor& t) {
  if (!t.defined()) op_error<TypeError>("save_npy", "the tensor is empty (a default tg::Tensor); pass a value");
  if (t.is_symbolic())
    op_error<TypeError>("save_npy", "the tensor ", t.to_string(), " is symbolic: it has no value while a function is "
                        "traced. Save the tensor the function returns");
  const char* descr = nullptr;
  switch (t.dtype()) {
    case DType::Float32: descr = "<f4"; break;
    case DType::Float64: descr = "<f8"; break;
    case DType::Int32: descr = "<i4"; break;
    case DType::Int64: descr = "<i8"; break;
    case DType::Bool: descr = "|b1"; break;
    case DType::UInt8: descr = "|u1"; break;
    case DType::String:
      op_error<TypeError>("save_npy", "a string tensor has no .npy form tracegraph writes; save numbers or bools");
    case DType::BFloat16:
      op_error<TypeError>("save_npy", "a bfloat16 tensor has no standard .npy form (NumPy has no bfloat16); "
                          "tg::cast it to float32 first, which holds every bfloat16 value exactly");
  }
  const TensorShape& shape = static_shape(t);
  if (shape.dims().size() > kMaxRank)
    op_error<ValueError>("save_npy", "the tensor has rank ", shape.dims().size(), "; a .npy file holds at most ", kMaxRank,
                         " dimensions (NumPy's limit), so load_npy and NumPy would refuse the file and nothing was "
                         "written. Reshape it to fewer dimensions first");
  std::string dims;
  for (int64_t d : shape.dims()) dims += std::to_string(d) + ", ";
  if (shape.rank() > 1) dims.resize(dims.size() - 2);  // (2, 3), but (3,) keeps its comma
  else if (shape.rank() == 1) dims.pop_back();
  std::string header = str_cat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", dims, "), }");
  std::size_t prefix = kMagicBytes + 2 + 2;
  int major = 1;
  if (header.size() + 1 + 63 + prefix > 0xFFFF) {
    major = 2;
    prefix += 2;
  }
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicBytes);
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t k = 0; k < prefix - kMagicBytes - 2; ++k) out += static_cast<char>((header.size() >> (8 * k)) & 0xFF);
  out += header;
  const std::size_t bytes = static_cast<std::size_t>(shape.num_elements()) * dtype_size(t.dtype());
  const void* first = nullptr;  // data_of counts a view's offset in elements of its type
  switch (t.dtype()) {
    case DType::Float32: first = data_of<float>(t); break;
    case DType::Float64: first = data_of<double>(t); break;
    case DType::Int32: first = data_of<int32_t>(t); break;
    case DType::Int64: first = data_of<int64_t>(t); break;
    case DType::Bool: first = data_of<bool>(t); break;
    case DType::UInt8: first = data_of<uint8_t>(t); break;
    case DType::String:
    case DType::BFloat16: break;
  }
  const char* p = static_cast<const char*>(first);
  static_assert(std::endian::native == std::endian::little, "save_npy writes little-endian data as it is in memory");
  out.append(p, bytes);
  return out;
}

}  // namespace detail

Tensor load_npy(const std::string& path) {
  const std::vector<uint8_t> bytes =
      detail::read_file_bytes("load_npy", path, "a .npy file", "; check the path");
  return detail::parse_npy(bytes.data(), bytes.size(), path);
}

void save_npy(const std::string& path, const Tensor& t) {
  detail::write_file_bytes("save_npy", path, detail::encode_npy(t));
}

}  // namespace tg
