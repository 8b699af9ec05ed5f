// The IDX reader on small synthetic files, plain and gzipped: values, dtypes, and every kind of
// broken file (each error names the file, what was expected and what was found).
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "support/fifo.h"
#include "support/test_util.h"
#include "train/idx_files.h"

namespace tg {
namespace {

using testing::idx_bytes;
using testing::TempDir;

TEST(ReadIdx, PlainAndGzippedImagesAndLabels) {
  TempDir dir;
  // 2 images of 2x3; bytes 0..255 map to [0, 1].
  const std::vector<uint8_t> pixels{0, 255, 51, 102, 1, 2, 10, 20, 30, 40, 50, 60};
  const auto images = idx_bytes(0x08, {2, 2, 3}, pixels);
  const auto labels = idx_bytes(0x08, {2}, {9, 3});
  for (bool gz : {false, true}) {
    SCOPED_TRACE(gz ? "gzip" : "plain");
    const std::string ip = dir.write(gz ? "i.gz" : "i", images, gz);
    const std::string lp = dir.write(gz ? "l.gz" : "l", labels, gz);
    const Tensor t = data::read_idx_images(ip);
    EXPECT_EQ(t.shape(), TensorShape({2, 2, 3}));
    EXPECT_EQ(t.dtype(), float32);
    std::vector<float> expected;
    for (uint8_t p : pixels) expected.push_back(static_cast<float>(p) / 255.0f);
    EXPECT_TENSOR_NEAR(t, constant(expected, {2, 2, 3}), 1e-7);
    EXPECT_TENSOR_EQ(data::read_idx_labels(lp), constant({9, 3}));
    EXPECT_TENSOR_EQ(data::read_idx_labels(lp, int64), constant({int64_t{9}, int64_t{3}}));
    EXPECT_TENSOR_EQ(data::read_idx(lp), constant({9, 3}));
    // The bytes as they are, as uint8 (read_idx keeps int32 for existing callers).
    EXPECT_TENSOR_EQ(data::read_idx_image_bytes(ip), constant(pixels, {2, 2, 3}));
    EXPECT_TENSOR_EQ(data::read_idx_labels(lp, uint8), constant({9, 3}, uint8));
    EXPECT_THROW_MSG(data::read_idx_image_bytes(lp), ValueError, "[read_idx_image_bytes]", "expected 0x00000803");
    const data::IdxHeader h = data::read_idx_header(ip);
    EXPECT_EQ(h.magic(), 0x00000803u);
    EXPECT_EQ(h.dims, (std::vector<int64_t>{2, 2, 3}));
  }
}

TEST(ReadIdx, EveryElementTypeIsBigEndian) {
  TempDir dir;
  // sbyte -1, 5; int16 -2, 300; int32 -70000, 1; float32 1.5, -2; float64 0.1, 3.
  EXPECT_TENSOR_EQ(data::read_idx(dir.write("s", idx_bytes(0x09, {2}, {0xFF, 0x05}))),
                   constant({-1, 5}));
  EXPECT_TENSOR_EQ(data::read_idx(dir.write("h", idx_bytes(0x0B, {2}, {0xFF, 0xFE, 0x01, 0x2C}))),
                   constant({-2, 300}));
  EXPECT_TENSOR_EQ(data::read_idx(dir.write("i", idx_bytes(0x0C, {1, 2},
                                                          {0xFF, 0xFE, 0xEE, 0x90, 0, 0, 0, 1}))),
                   constant({{-70000, 1}}));
  EXPECT_TENSOR_EQ(data::read_idx(dir.write("f", idx_bytes(0x0D, {2},
                                                          {0x3F, 0xC0, 0, 0, 0xC0, 0, 0, 0}))),
                   constant({1.5f, -2.0f}));
  EXPECT_TENSOR_EQ(data::read_idx(dir.write("d", idx_bytes(0x0E, {2},
                                                          {0x3F, 0xB9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9A,
                                                           0x40, 0x08, 0, 0, 0, 0, 0, 0}))),
                   constant({0.1, 3.0}, float64));
  EXPECT_EQ(data::read_idx(dir.write("e", idx_bytes(0x08, {0, 4}, {}))).shape(), TensorShape({0, 4}));
}

TEST(ReadIdx, ConcatenatedGzipMembersAreOneFile) {
  TempDir dir;
  const auto whole = idx_bytes(0x08, {4}, {1, 2, 3, 4});
  const std::vector<uint8_t> first(whole.begin(), whole.begin() + 7), second(whole.begin() + 7, whole.end());
  const std::string a = dir.write("a.gz", first, true), b = dir.write("b.gz", second, true);
  std::vector<uint8_t> both = testing::read_bytes(a), tail = testing::read_bytes(b);
  both.insert(both.end(), tail.begin(), tail.end());
  EXPECT_TENSOR_EQ(data::read_idx(dir.write("ab.gz", both)), constant({1, 2, 3, 4}));
}

TEST(ReadIdxErrors, MissingEmptyAndDirectory) {
  TempDir dir;
  const std::string missing = dir.path("nope-idx1-ubyte");
  EXPECT_THROW_MSG(data::read_idx(missing), InvalidArgumentError, "[read_idx]", missing, "cannot open");
  const std::string empty = dir.write("empty", {});
  EXPECT_THROW_MSG(data::read_idx(empty), ValueError, "[read_idx]", empty, "is empty", "0x00000803");
  const std::string empty_gz = dir.write("empty.gz", {}, true);
  EXPECT_THROW_MSG(data::read_idx(empty_gz), ValueError, empty_gz, "is empty", "after gzip");
  EXPECT_THROW_MSG(data::read_idx(dir.path("")), InvalidArgumentError, "is a directory");
}

TEST(ReadIdxErrors, MalformedHeaders) {
  TempDir dir;
  const std::string magic = dir.write("magic", {0x12, 0x34, 0x08, 0x01, 0, 0, 0, 0});
  EXPECT_THROW_MSG(data::read_idx(magic), ValueError, magic, "magic number 0x12340801",
                   "expected 0x0000TTNN");
  const std::string code = dir.write("code", {0, 0, 0x07, 0x01, 0, 0, 0, 0});
  EXPECT_THROW_MSG(data::read_idx(code), ValueError, code, "unknown element type code 0x07",
                   "0x08 (ubyte)");
  const std::string nodims = dir.write("nodims", {0, 0, 0x08, 0x00});
  EXPECT_THROW_MSG(data::read_idx(nodims), ValueError, nodims, "0 dimensions");
  const std::string short_magic = dir.write("short", {0, 0});
  EXPECT_THROW_MSG(data::read_idx(short_magic), ValueError, short_magic, "truncated", "2 bytes");
  const std::string short_header = dir.write("shorthdr", {0, 0, 0x08, 0x03, 0, 0, 0, 2, 0, 0});
  EXPECT_THROW_MSG(data::read_idx(short_header), ValueError, short_header, "truncated",
                   "declares 3 dims", "needs 16 bytes", "has 10");
}

TEST(ReadIdxErrors, DataSizeMustMatchTheDims) {
  TempDir dir;
  auto images = idx_bytes(0x08, {3, 2, 2}, std::vector<uint8_t>(12, 7));
  const std::vector<uint8_t> truncated(images.begin(), images.end() - 5);
  const std::string t = dir.write("trunc", truncated);
  EXPECT_THROW_MSG(data::read_idx_images(t), ValueError, "[read_idx_images]", t, "truncated",
                   "(3, 2, 2)", "need 12 bytes", "has 7");
  auto longer = images;
  longer.push_back(1);
  const std::string l = dir.write("long", longer);
  EXPECT_THROW_MSG(data::read_idx_images(l), ValueError, l, "1 bytes after the data", "(3, 2, 2)");
  // A count that is far too large for the file (the usual sign of a wrong header).
  const std::string huge = dir.write("huge", idx_bytes(0x0E, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {}));
  EXPECT_THROW_MSG(data::read_idx(huge), ValueError, huge, "truncated");
}

TEST(ReadIdxErrors, TruncatedAndCorruptGzip) {
  TempDir dir;
  std::vector<uint8_t> payload(5000);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7919 % 251);
  const std::string whole = dir.write("w.gz", idx_bytes(0x08, {5000}, payload), true);
  auto gz = testing::read_bytes(whole);
  auto cut = gz;
  cut.resize(gz.size() / 2);
  const std::string t = dir.write("cut.gz", cut);
  EXPECT_THROW_MSG(data::read_idx(t), ValueError, t, "truncated gzip");
  auto bad = gz;
  for (std::size_t i = 12; i < 40 && i < bad.size(); ++i) bad[i] ^= 0x5A;
  const std::string c = dir.write("bad.gz", bad);
  EXPECT_THROW_MSG(data::read_idx(c), ValueError, c, "gzip");
}

// One gzip member holding `bytes` (zlib's deflate with a gzip wrapper).
std::vector<uint8_t> gzip_member(const std::vector<uint8_t>& bytes) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<uint8_t> out(deflateBound(&zs, bytes.size()));
  zs.next_in = const_cast<Bytef*>(bytes.data());
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST(ReadIdxErrors, GzipDataPastTheDeclaredSizeIsNotInflated) {
  // A one-element header, then megabytes of zeros in more gzip members (a "zip bomb" scaled
  // down), then a member cut short. The reader stops one byte past the size the header declares:
  // it reports the data that follows - never the damaged member at the end, which it must not
  // reach, nor std::bad_alloc.
  TempDir dir;
  std::vector<uint8_t> gz = gzip_member(idx_bytes(0x08, {1}, {7}));
  const std::vector<uint8_t> zeros = gzip_member(std::vector<uint8_t>(4 << 20, 0));
  for (int i = 0; i < 4; ++i) gz.insert(gz.end(), zeros.begin(), zeros.end());
  gz.insert(gz.end(), zeros.begin(), zeros.begin() + static_cast<std::ptrdiff_t>(zeros.size() / 2));
  const std::string bomb = dir.write("bomb.gz", gz);
  for (auto read : {+[](const std::string& p) { data::read_idx(p); }, +[](const std::string& p) { data::read_idx_labels(p); },
                    +[](const std::string& p) { data::read_idx_header(p); }})
    EXPECT_THROW_MSG(read(bomb), ValueError, bomb, "bytes after the data", "(after gzip decompression)", "(1,)",
                     "the header and the data do not match");
  // Without the damaged tail the file is just as wrong, for the same reason.
  gz.resize(gz.size() - zeros.size() / 2);
  const std::string whole = dir.write("whole.gz", gz);
  EXPECT_THROW_MSG(data::read_idx(whole), ValueError, "bytes after the data", "(after gzip decompression)");
  // Data that ends exactly where the header says, over several members, is read.
  std::vector<uint8_t> two = gzip_member(idx_bytes(0x08, {3}, {})), rest = gzip_member({4, 5, 6});
  two.insert(two.end(), rest.begin(), rest.end());
  EXPECT_TENSOR_EQ(data::read_idx(dir.write("two.gz", two)), constant({4, 5, 6}));
}

TEST(ReadIdxErrors, AGzipHeaderDeclaringTerabytesIsTruncatedNotAnAllocation) {
  // 2^40 bytes declared, a few present: memory grows with the data inflated, not the header.
  TempDir dir;
  const std::string t = dir.write("t.gz", gzip_member(idx_bytes(0x08, {1024, 1024, 1024, 1024}, {1, 2, 3})));
  EXPECT_THROW_MSG(data::read_idx(t), ValueError, t, "truncated", "1099511627776 bytes", "has 3");
}

TEST(ReadIdxErrors, AFifoIsRefusedWithoutWaitingForAWriter) {
  testing::TempFifo fifo("train-labels-idx1-ubyte");
  for (auto read : {+[](const std::string& p) { data::read_idx(p); }, +[](const std::string& p) { data::read_idx_images(p); },
                    +[](const std::string& p) { data::read_idx_header(p); }})
    EXPECT_TRUE(testing::refuses_fifo_at_once(fifo.path(), [&] { read(fifo.path()); },
                                              {fifo.path(), "is a FIFO (named pipe), not a regular file",
                                               "expected an IDX file"}));
  testing::TempFifo images("train-images-idx3-ubyte");
  const auto labels = idx_bytes(0x08, {1}, {3});
  std::ofstream(images.dir() + "/train-labels-idx1-ubyte", std::ios::binary)
      .write(reinterpret_cast<const char*>(labels.data()), static_cast<std::streamsize>(labels.size()));
  EXPECT_TRUE(testing::refuses_fifo_at_once(images.path(), [&] { data::load_mnist(images.dir(), "train"); },
                                            {"[read_idx_images]", "is a FIFO"}));
}

TEST(ReadIdxErrors, ImagesAndLabelsCheckTheirMagic) {
  TempDir dir;
  const std::string labels = dir.write("l", idx_bytes(0x08, {2}, {1, 2}));
  EXPECT_THROW_MSG(data::read_idx_images(labels), ValueError, "[read_idx_images]", labels,
                   "magic number 0x00000801", "expected 0x00000803");
  const std::string images = dir.write("i", idx_bytes(0x08, {1, 1, 2}, {1, 2}));
  EXPECT_THROW_MSG(data::read_idx_labels(images), ValueError, "[read_idx_labels]", images,
                   "0x00000803", "expected 0x00000801");
  const std::string ints = dir.write("n", idx_bytes(0x0C, {1}, {0, 0, 0, 1}));
  EXPECT_THROW_MSG(data::read_idx_labels(ints), ValueError, "0x00000C01", "int32");
  EXPECT_THROW_MSG(data::read_idx_labels(labels, float32), TypeError, "int32, int64 or uint8", "not float32");
}

TEST(LoadMnist, FindsGzippedOrPlainFilesAndChecksCounts) {
  TempDir dir;
  dir.write("train-images-idx3-ubyte.gz", idx_bytes(0x08, {2, 2, 2}, {0, 255, 0, 255, 255, 0, 255, 0}), true);
  dir.write("train-labels-idx1-ubyte", idx_bytes(0x08, {2}, {4, 7}));
  const data::LabeledImages train = data::load_mnist(dir.path(""), "train");
  EXPECT_EQ(train.size(), 2);
  EXPECT_TENSOR_EQ(train.images, constant({{0.0f, 1.0f, 0.0f, 1.0f}, {1.0f, 0.0f, 1.0f, 0.0f}}));
  EXPECT_TENSOR_EQ(train.labels, constant({4, 7}));
  EXPECT_THROW_MSG(data::load_mnist(dir.path(""), "t10k"), InvalidArgumentError, "[load_mnist]",
                   "t10k-images-idx3-ubyte.gz", "dataset-fashion-mnist");
  dir.write("t10k-images-idx3-ubyte", idx_bytes(0x08, {3, 1, 1}, {1, 2, 3}));
  dir.write("t10k-labels-idx1-ubyte", idx_bytes(0x08, {2}, {1, 2}));
  EXPECT_THROW_MSG(data::load_mnist(dir.path(""), "t10k"), ValueError, "3 images", "2 labels");
}

TEST(LoadMnist, ImageSizesPastInt64AreAValueError) {
  // Zero images of 2^32-1 x 2^32-1 pixels is a valid (empty) file, but rows * cols overflowed
  // int64 when the images were flattened (UB, caught by UBSan builds).
  TempDir dir;
  dir.write("train-images-idx3-ubyte", idx_bytes(0x08, {0, 0xFFFFFFFF, 0xFFFFFFFF}, {}));
  dir.write("train-labels-idx1-ubyte", idx_bytes(0x08, {0}, {}));
  EXPECT_THROW_MSG(data::load_mnist(dir.path(""), "train"), ValueError, "[load_mnist]",
                   "4294967295 x 4294967295", "more than int64", "train-images-idx3-ubyte");
}

}  // namespace
}  // namespace tg
