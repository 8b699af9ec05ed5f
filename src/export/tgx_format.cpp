#include "export/tgx_format.h"

namespace tg::detail::tgx {

std::string tag_name(uint32_t t) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const auto c = static_cast<char>((t >> (8 * i)) & 0xff);
    s += c >= 0x20 && c < 0x7f ? c : '?';
  }
  return s;
}

uint8_t dtype_code(DType d) {
  switch (d) {
    case DType::Float32: return 1;
    case DType::Float64: return 2;
    case DType::Int32: return 3;
    case DType::Int64: return 4;
    case DType::Bool: return 5;
    case DType::String: return 6;
    case DType::UInt8: return 7;
    case DType::BFloat16: return 8;
  }
  throw InternalError("dtype_code: unknown dtype");
}

bool dtype_from_code(uint8_t code, DType* d) {
  static constexpr DType kByCode[] = {DType::Float32, DType::Float64, DType::Int32, DType::Int64,
                                      DType::Bool,    DType::String,  DType::UInt8, DType::BFloat16};
  if (code < 1 || code > 8) return false;
  *d = kByCode[code - 1];
  return true;
}

void Writer::count(std::size_t n) {
  if (n > UINT32_MAX) throw ValueError(str_cat("[tg::save] a list of ", n, " elements does not fit the .tgx format's 32-bit counts"));
  u32(static_cast<uint32_t>(n));
}

std::string rank_defect(const char* what, std::size_t rank) {
  if (rank <= kMaxRank) return "";
  return str_cat(what, " has rank ", rank, "; at most ", kMaxRank, " is supported");
}

std::string type_name_defect(std::size_t length) {
  if (length >= 1 && length <= kMaxTypeName) return "";
  return str_cat("a literal's C++ type name has ", length, " characters; expected 1 to ", kMaxTypeName);
}

std::string literal_defect(int kind, int64_t i, double f, const std::string& s, const std::string& cpp_type) {
  // The codes are LiteralValue::Kind's: int, float, bool, string, enum (its type's name in s).
  const bool ok = kind == 0   ? f == 0 && s.empty()
                  : kind == 1 ? i == 0 && s.empty()
                  : kind == 2 ? (i == 0 || i == 1) && f == 0 && s.empty()
                  : kind == 3 ? i == 0 && f == 0
                  : kind == 4 ? f == 0 && s == cpp_type
                              : false;
  if (ok) return "";
  return str_cat("a literal of kind ", kind, " sets fields its kind does not have");
}

void Writer::shape(const TensorShape& s, const char* what) {
  u8(s.has_rank() ? 1 : 0);
  if (!s.has_rank()) return;
  const TensorShape plain = s.none_aware();  // dims() of a traced shape would refuse None
  if (const std::string defect = rank_defect(what, plain.dims().size()); !defect.empty())
    throw ValueError(str_cat("[tg::save] ", defect, " in a .tgx file (TensorFlow's limit too): tg::load would refuse "
                             "the file, so nothing was written. Keep the saved function's tensors at rank ", kMaxRank,
                             " or less (reshape to fewer dimensions)"));
  count(plain.dims().size());
  for (int64_t d : plain.dims()) i64(d);
}

void Reader::fail_at(std::size_t offset, const std::string& what) const {
  throw FormatError(str_cat("[", op_, "] ", section_, " at byte ", offset, ": ", what), section_, offset);
}

bool Reader::boolean(const char* what) {
  const uint8_t v = u8();
  if (v > 1) fail_at(pos_ - 1, str_cat(what, " is ", int(v), "; expected 0 or 1"));
  return v == 1;
}

std::size_t Reader::count(const char* what, std::size_t min_bytes) {
  const std::size_t at = pos_;
  const uint32_t n = u32();
  if (min_bytes > 0 && n > left() / min_bytes)
    fail_at(at, str_cat(what, " count is ", n, " but only ", left(), " bytes are left in the section (each takes at least ",
                        min_bytes, ")"));
  return n;
}

std::string Reader::str(const char* what) {
  const std::size_t n = count(what, 1);
  std::string s(reinterpret_cast<const char*>(file_ + pos_), n);
  pos_ += n;
  return s;
}

DType Reader::dtype(const char* what) {
  DType d;
  const uint8_t code = u8();
  if (!dtype_from_code(code, &d)) fail_at(pos_ - 1, str_cat(what, " has dtype code ", int(code), ", which no dtype has (1-8)"));
  return d;
}

TensorShape Reader::shape(const char* what) {
  if (!boolean("a shape's rank flag")) return TensorShape::unknown_rank();
  const std::size_t at = pos_;
  const std::size_t rank = count("the dims", 8);
  if (const std::string defect = rank_defect(what, rank); !defect.empty()) fail_at(at, defect);
  std::vector<int64_t> dims(rank);
  for (auto& d : dims) {
    d = i64();
    if (d < -1) fail_at(pos_ - 8, str_cat(what, " has dim ", d, "; dims are >= 0, or -1 for None"));
  }
  return TensorShape(std::move(dims));
}

void Reader::expect_end() {
  if (pos_ != end_) fail(str_cat(left(), " bytes follow the section's content; expected none"));
}

}  // namespace tg::detail::tgx
