// The IDX reader: whole-file read, gzip inflate (zlib), header and size validation, conversion.
#include <zlib.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "data/file_bytes.h"
#include "data/idx.h"
#include "tracegraph/data.h"
#include "tracegraph/ops.h"

namespace tg::data {

using detail::op_error;
using detail::str_cat;

namespace {

using Bytes = std::vector<uint8_t>;

std::string hex(uint64_t v, int digits) {
  static const char* kDigits = "0123456789ABCDEF";
  std::string s = "0x";
  for (int i = digits - 1; i >= 0; --i) s += kDigits[(v >> (4 * i)) & 0xF];
  return s;
}

const char* type_name(uint8_t code) {
  switch (code) {
    case 0x08: return "ubyte";
    case 0x09: return "sbyte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return nullptr;
  }
}

int type_size(uint8_t code) {
  switch (code) {
    case 0x08: case 0x09: return 1;
    case 0x0B: return 2;
    case 0x0C: case 0x0D: return 4;
    case 0x0E: return 8;
    default: return 0;
  }
}

std::string dims_text(const std::vector<int64_t>& dims) { return TensorShape(dims).to_string(); }

// The decompressed bytes of an IDX file, made as the parser asks for them. A gzipped file is
// inflated (every member: zlib's automatic header detection, 15 + 32) only as far as the parser
// asks - its header, then the size the header declares and one byte more, to see whether data
// follows - so a small file that inflates to gigabytes costs no more than its header says.
class IdxBytes {
 public:
  IdxBytes(const char* op, const std::string& path, Bytes raw)
      : op_(op), path_(path), raw_(std::move(raw)), gz_(raw_.size() >= 2 && raw_[0] == 0x1F && raw_[1] == 0x8B) {
    if (gz_ && inflateInit2(&zs_, 15 + 32) != Z_OK)
      op_error<ValueError>(op_, "cannot initialise zlib to read '", path_, "'");
  }
  ~IdxBytes() {
    if (gz_) inflateEnd(&zs_);
  }
  IdxBytes(const IdxBytes&) = delete;  // zlib's state points back at zs_
  IdxBytes& operator=(const IdxBytes&) = delete;

  bool gzipped() const { return gz_; }
  const uint8_t* data() const { return gz_ ? out_.data() : raw_.data(); }
  /// The bytes available: all of a plain file's, what has been inflated of a gzipped one's.
  std::size_t size() const { return gz_ ? produced_ : raw_.size(); }
  /// Makes at least `n` bytes available, or all there are when there are fewer; returns size().
  std::size_t fill(std::size_t n) {
    while (gz_ && produced_ < n && !ended_) {
      if (produced_ == out_.size()) grow(n);
      inflate_some();
    }
    return size();
  }
  Bytes take() {
    if (!gz_) return std::move(raw_);
    out_.resize(produced_);
    return std::move(out_);
  }

 private:
  // Room for more output: doubling, never past the `n` bytes asked for.
  void grow(std::size_t n) {
    const std::size_t want = std::min(std::max<std::size_t>(out_.size() * 2, 1 << 16), n);
    try {
      out_.resize(want);
    } catch (const std::bad_alloc&) {
      throw ResourceExhaustedError(str_cat("[", op_, "] cannot hold ", want, " bytes of '", path_,
                                           "' (after gzip decompression) in memory; its header declares "
                                           "more data than fits"),
                                   want);
    }
  }

  void inflate_some() {
    constexpr std::size_t kMaxChunk = std::numeric_limits<uInt>::max();
    const std::size_t n = raw_.size();
    zs_.next_in = const_cast<Bytef*>(raw_.data() + consumed_);
    zs_.avail_in = static_cast<uInt>(std::min(n - consumed_, kMaxChunk));
    zs_.next_out = out_.data() + produced_;
    zs_.avail_out = static_cast<uInt>(std::min(out_.size() - produced_, kMaxChunk));
    const uInt in_before = zs_.avail_in, out_before = zs_.avail_out;
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    consumed_ += in_before - zs_.avail_in;
    produced_ += out_before - zs_.avail_out;
    if (rc == Z_STREAM_END) {
      if (consumed_ == n) {
        ended_ = true;
        return;
      }
      // Another gzip member follows (gzip files may be concatenated).
      if (inflateReset(&zs_) != Z_OK) corrupt(rc);
      return;
    }
    if (rc == Z_BUF_ERROR && consumed_ == n)
      op_error<ValueError>(op_, "'", path_, "' is a truncated gzip file: the compressed data ends "
                           "after ", n, " bytes before the end of the stream (", produced_,
                           " bytes decompressed); download or copy it again");
    const bool stuck = rc == Z_BUF_ERROR && in_before == zs_.avail_in && out_before == zs_.avail_out;
    if ((rc != Z_OK && rc != Z_BUF_ERROR) || stuck) corrupt(rc);
  }

  [[noreturn]] void corrupt(int rc) const {
    const std::string msg = zs_.msg ? zs_.msg : "error code " + std::to_string(rc);
    op_error<ValueError>(op_, "'", path_, "' is a corrupt gzip file (zlib: ", msg, " after ", consumed_,
                         " compressed bytes); expected a gzip-compressed IDX file");
  }

  const char* op_;
  const std::string& path_;
  Bytes raw_;
  bool gz_;
  z_stream zs_{};
  Bytes out_;
  std::size_t consumed_ = 0, produced_ = 0;
  bool ended_ = false;  // every member inflated
};

// The file's decompressed content and its parsed, size-checked header.
struct IdxFile {
  Bytes bytes;
  IdxHeader header;
  std::size_t data_offset = 0;
  int64_t count = 0;
};

// Parses an IDX image (plain or gzipped) read from `path` (which names it in errors).
IdxFile parse(const char* op, const std::string& path, Bytes raw) {
  IdxFile f;
  IdxBytes in(op, path, std::move(raw));
  const bool gz = in.gzipped();
  const char* what = gz ? " (after gzip decompression)" : "";
  in.fill(4);
  if (in.size() == 0)
    op_error<ValueError>(op, "'", path, "' is empty", what, "; expected an IDX file starting with "
                         "a 4-byte magic number such as 0x00000803");
  if (in.size() < 4)
    op_error<ValueError>(op, "'", path, "' is truncated: ", in.size(), " bytes", what,
                         ", but an IDX header needs at least 4 (the magic number)");
  const uint8_t* b = in.data();
  const uint32_t magic = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  if (b[0] != 0 || b[1] != 0)
    op_error<ValueError>(op, "'", path, "' has the magic number ", hex(magic, 8),
                         "; expected 0x0000TTNN (two zero bytes, a type code, the number of "
                         "dims), e.g. 0x00000803 for images. Is it an IDX file?");
  f.header.type_code = b[2];
  if (!type_name(b[2]))
    op_error<ValueError>(op, "'", path, "' has the unknown element type code ", hex(b[2], 2),
                         " (magic ", hex(magic, 8), "); expected 0x08 (ubyte), 0x09 (sbyte), "
                         "0x0B (int16), 0x0C (int32), 0x0D (float32) or 0x0E (float64)");
  const int ndims = b[3];
  if (ndims == 0)
    op_error<ValueError>(op, "'", path, "' declares 0 dimensions (magic ", hex(magic, 8),
                         "); expected at least 1");
  const std::size_t header_bytes = 4 + 4 * static_cast<std::size_t>(ndims);
  if (in.fill(header_bytes) < header_bytes)
    op_error<ValueError>(op, "'", path, "' is truncated: its header declares ", ndims,
                         " dims and needs ", header_bytes, " bytes, but the file has ", in.size(),
                         what);
  b = in.data();
  int64_t count = 1;
  bool overflow = false;
  for (int i = 0; i < ndims; ++i) {
    const uint8_t* p = b + 4 + 4 * i;
    const int64_t d = (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | p[3];
    f.header.dims.push_back(d);
    overflow = overflow || __builtin_mul_overflow(count, d, &count);
  }
  const int elem = type_size(f.header.type_code);
  int64_t need = 0;
  overflow = overflow || __builtin_mul_overflow(count, int64_t{elem}, &need);
  // Only what the header declares, and one byte more: whether anything follows the data.
  if (!overflow) in.fill(header_bytes + static_cast<std::size_t>(need) + 1);
  const auto have = static_cast<int64_t>(in.size() - header_bytes);
  if (overflow || need > have)
    op_error<ValueError>(op, "'", path, "' is truncated: its header declares dims ",
                         dims_text(f.header.dims), " of ", type_name(f.header.type_code),
                         ", which need ", overflow ? std::string("more") : std::to_string(need),
                         " bytes of data after the ", header_bytes, "-byte header, but the file",
                         what, " has ", have);
  if (need < have && gz)
    op_error<ValueError>(op, "'", path, "' has bytes after the data", what, ": its header declares dims ",
                         dims_text(f.header.dims), " of ", type_name(f.header.type_code), " (", need,
                         " bytes), but more than ", need, " bytes follow the header (decompression stopped "
                         "there); the header and the data do not match");
  if (need < have)
    op_error<ValueError>(op, "'", path, "' has ", have - need, " bytes after the data: its header "
                         "declares dims ", dims_text(f.header.dims), " of ",
                         type_name(f.header.type_code), " (", need, " bytes), but ", have,
                         " bytes follow the header; the header and the data do not match");
  f.bytes = in.take();
  f.data_offset = header_bytes;
  f.count = count;
  return f;
}

IdxFile load(const char* op, const std::string& path) {
  return parse(op, path, detail::read_file_bytes(op, path, "an IDX file",
                                                 "; check the path (Fashion-MNIST: install the Debian "
                                                 "package dataset-fashion-mnist)"));
}

void expect_magic(const char* op, const std::string& path, const IdxFile& f, uint32_t expected,
                  const char* meaning) {
  if (f.header.magic() == expected) return;
  op_error<ValueError>(op, "'", path, "' has the magic number ", hex(f.header.magic(), 8), " (",
                       type_name(f.header.type_code), ", ", f.header.dims.size(), " dims ",
                       dims_text(f.header.dims), "); expected ", hex(expected, 8), " (", meaning,
                       ")");
}

template <class T>
T big_endian(const uint8_t* p) {
  using U = std::conditional_t<sizeof(T) == 1, uint8_t,
                               std::conditional_t<sizeof(T) == 2, uint16_t,
                                                  std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  U u = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) u = static_cast<U>((u << 8) | p[i]);
  T v;
  std::memcpy(&v, &u, sizeof(T));
  return v;
}

template <class Src, class Dst>
void convert(const uint8_t* p, Dst* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Dst>(big_endian<Src>(p + i * sizeof(Src)));
}

}  // namespace

IdxHeader read_idx_header(const std::string& path) { return load("read_idx_header", path).header; }

namespace {
Tensor idx_tensor(const IdxFile& f) {
  const uint8_t* p = f.bytes.data() + f.data_offset;
  const TensorShape shape(f.header.dims);
  switch (f.header.type_code) {
    case 0x0D: {
      Tensor t = detail::allocate_tensor(float32, shape);
      convert<float>(p, detail::data_of<float>(t), f.count);
      return t;
    }
    case 0x0E: {
      Tensor t = detail::allocate_tensor(float64, shape);
      convert<double>(p, detail::data_of<double>(t), f.count);
      return t;
    }
    default: {
      Tensor t = detail::allocate_tensor(int32, shape);
      int32_t* out = detail::data_of<int32_t>(t);
      if (f.header.type_code == 0x08) convert<uint8_t>(p, out, f.count);
      else if (f.header.type_code == 0x09) convert<int8_t>(p, out, f.count);
      else if (f.header.type_code == 0x0B) convert<int16_t>(p, out, f.count);
      else convert<int32_t>(p, out, f.count);
      return t;
    }
  }
}
}  // namespace

Tensor read_idx(const std::string& path) { return idx_tensor(load("read_idx", path)); }


Tensor read_idx_images(const std::string& path) {
  const IdxFile f = load("read_idx_images", path);
  expect_magic("read_idx_images", path, f, 0x00000803, "ubyte images: count, rows, cols");
  Tensor t = detail::allocate_tensor(float32, TensorShape(f.header.dims));
  float* out = detail::data_of<float>(t);
  const uint8_t* p = f.bytes.data() + f.data_offset;
  for (int64_t i = 0; i < f.count; ++i) out[i] = static_cast<float>(p[i]) * (1.0f / 255.0f);
  return t;
}

Tensor read_idx_image_bytes(const std::string& path) {
  const IdxFile f = load("read_idx_image_bytes", path);
  expect_magic("read_idx_image_bytes", path, f, 0x00000803, "ubyte images: count, rows, cols");
  Tensor t = detail::allocate_tensor(uint8, TensorShape(f.header.dims));
  if (f.count > 0) std::memcpy(detail::data_of<uint8_t>(t), f.bytes.data() + f.data_offset, static_cast<std::size_t>(f.count));
  return t;
}

Tensor read_idx_labels(const std::string& path, DType dtype) {
  if (dtype != int32 && dtype != int64 && dtype != uint8)
    op_error<TypeError>("read_idx_labels", "labels can be read as int32, int64 or uint8, not ",
                        to_string(dtype));
  const IdxFile f = load("read_idx_labels", path);
  expect_magic("read_idx_labels", path, f, 0x00000801, "ubyte labels: count");
  Tensor t = detail::allocate_tensor(dtype, TensorShape(f.header.dims));
  const uint8_t* p = f.bytes.data() + f.data_offset;
  if (dtype == int32) convert<uint8_t>(p, detail::data_of<int32_t>(t), f.count);
  else if (dtype == int64) convert<uint8_t>(p, detail::data_of<int64_t>(t), f.count);
  else convert<uint8_t>(p, detail::data_of<uint8_t>(t), f.count);
  return t;
}

LabeledImages load_mnist(const std::string& dir, const std::string& split) {
  auto find = [&](const std::string& stem) {
    const std::string plain = (std::filesystem::path(dir) / stem).string();
    std::error_code ec;
    if (std::filesystem::exists(plain + ".gz", ec)) return plain + ".gz";
    if (std::filesystem::exists(plain, ec)) return plain;
    op_error<InvalidArgumentError>("load_mnist", "no '", plain, ".gz' or '", plain,
                                   "'; expected the ", split, " split of an MNIST-style data set "
                                   "in '", dir, "' (Fashion-MNIST: apt-get install "
                                   "dataset-fashion-mnist)");
  };
  const std::string images_path = find(split + "-images-idx3-ubyte");
  const std::string labels_path = find(split + "-labels-idx1-ubyte");
  LabeledImages out;
  const Tensor images = read_idx_images(images_path);
  out.labels = read_idx_labels(labels_path);
  const std::vector<int64_t> d = images.shape().dims();
  if (d[0] != out.labels.shape().dims()[0])
    op_error<ValueError>("load_mnist", "'", images_path, "' holds ", d[0], " images but '",
                         labels_path, "' holds ", out.labels.shape().dims()[0],
                         " labels; expected one label per image");
  int64_t pixels = 0;  // a valid header may declare 0 images of any size
  if (__builtin_mul_overflow(d[1], d[2], &pixels))
    op_error<ValueError>("load_mnist", "'", images_path, "' declares images of ", d[1], " x ", d[2],
                         " pixels, more than int64 can count; expected an MNIST-style file of small "
                         "images (e.g. 28 x 28); is its header damaged?");
  out.images = reshape(images, {d[0], pixels});
  return out;
}

LabeledImages shard(const LabeledImages& data, int64_t num_shards, int64_t index) {
  if (num_shards < 1 || index < 0 || index >= num_shards)
    op_error<InvalidArgumentError>("shard", "shard ", index, " of ", num_shards, " does not exist; expected "
                                   "num_shards >= 1 and 0 <= index < num_shards (a data-parallel job passes "
                                   "tg::dist::size() and tg::dist::rank())");
  const int64_t per_shard = data.size() / num_shards;
  // Strided, as tf.data's shard: example i goes to shard i % num_shards. The remainder is
  // dropped so that every shard - every rank - has as many examples, hence as many steps.
  const Tensor rows = range(index, index + per_shard * num_shards, num_shards, int64);
  return LabeledImages{gather(data.images, rows), gather(data.labels, rows)};
}

}  // namespace tg::data

namespace tg::detail {
Tensor parse_idx(const uint8_t* data, std::size_t size, const std::string& source) {
  return data::idx_tensor(data::parse("read_idx", source, std::vector<uint8_t>(data, data + size)));
}
}  // namespace tg::detail
