// NumPy .npy files: round trips of every dtype, files laid out as NumPy writes them (both byte
// orders, Fortran order, narrow integers), and every kind of malformed file.
#include <cstring>
#include <filesystem>
#include <limits>

#include "data/npy.h"
#include "support/fifo.h"
#include "support/test_util.h"
#include "train/idx_files.h"

namespace tg {
namespace {

using testing::TempDir;

// A .npy image as NumPy lays it out: version 1.0, the dict, spaces up to a multiple of 64
// (plus NumPy's room for the first axis to grow), '\n', then `data`.
std::vector<uint8_t> npy_image(const std::string& dict, const std::vector<uint8_t>& data, int major = 1,
                               std::size_t growth_room = 0) {
  std::string header = dict + std::string(growth_room, ' ');
  const std::size_t prefix = major == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> b{0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  for (std::size_t k = 0; k < prefix - 8; ++k) b.push_back(static_cast<uint8_t>(header.size() >> (8 * k)));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values, bool big_endian = false) {
  std::vector<uint8_t> b(values.size() * sizeof(T));
  std::memcpy(b.data(), values.data(), b.size());
  if (big_endian)
    for (std::size_t i = 0; i < values.size(); ++i) std::reverse(b.begin() + i * sizeof(T), b.begin() + (i + 1) * sizeof(T));
  return b;
}

Tensor parse(const std::vector<uint8_t>& b) { return detail::parse_npy(b.data(), b.size(), "x.npy"); }

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  TempDir dir;
  const std::vector<Tensor> tensors{
      constant({{1.5f, -2.0f, 3.25f}, {0.0f, 1e30f, -1e-30f}}),
      constant({1.0, -0.5}, float64),
      constant({{1, -2}, {3, std::numeric_limits<int32_t>::min()}}),
      constant({int64_t{1} << 40, int64_t{-7}}),
      constant({true, false, true}),
      constant(7.0f),                                // a scalar: shape ()
      zeros({0, 4}),                                 // no elements
      constant({{1.0f, 2.0f}, {3.0f, 4.0f}})[1],     // a view with an offset
      constant({{1, 2}, {3, 4}})[1],
  };
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].to_string());
    std::string name = std::to_string(i);  // (not "t" + ...: GCC 12 warns falsely, -Wrestrict)
    name += ".npy";
    const std::string path = dir.path(name);
    save_npy(path, tensors[i]);
    const Tensor back = load_npy(path);
    EXPECT_EQ(back.dtype(), tensors[i].dtype());
    EXPECT_EQ(back.shape(), tensors[i].shape());
    EXPECT_EQ(back.to_string(), tensors[i].to_string());
    // The data starts at a multiple of 64, as NumPy requires.
    const auto raw = testing::read_bytes(path);
    const std::size_t header_len = raw[8] | (raw[9] << 8);
    EXPECT_EQ((10 + header_len) % 64, 0u);
    EXPECT_EQ(raw[10 + header_len - 1], '\n');
  }
  // The header is the dict NumPy writes.
  save_npy(dir.path("h.npy"), zeros({2, 3}));
  const auto raw = testing::read_bytes(dir.path("h.npy"));
  EXPECT_EQ(std::string(raw.begin() + 10, raw.begin() + 10 + 59),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  save_npy(dir.path("v.npy"), zeros({3}));
  const auto raw1 = testing::read_bytes(dir.path("v.npy"));
  EXPECT_EQ(std::string(raw1.begin() + 10, raw1.begin() + 10 + 57),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
}

TEST(Npy, ReadsFilesAsNumPyWritesThem) {
  // NumPy's own padding (room for the first axis to grow), version 2.0, both byte orders.
  const Tensor a = parse(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                                   bytes_of<float>({1, 2, 3, 4}), 1, 20));
  EXPECT_EQ(a.to_string(), constant({{1.0f, 2.0f}, {3.0f, 4.0f}}).to_string());
  const Tensor b = parse(npy_image("{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }",
                                   bytes_of<int64_t>({1, -2, int64_t{1} << 50}, true), 2));
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{1, -2, int64_t{1} << 50}));
  // Keys in another order, double quotes, no trailing comma.
  const Tensor c = parse(npy_image("{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<f8\"}",
                                   bytes_of<double>({0.5, -1.5})));
  EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{0.5, -1.5}));
  // Fortran order: element (i, j) of a 2x3 array is at j * 2 + i.
  const Tensor f = parse(npy_image("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                                   bytes_of<int32_t>({1, 4, 2, 5, 3, 6})));
  EXPECT_EQ(f.to_string(), constant({{1, 2, 3}, {4, 5, 6}}).to_string());
  const Tensor f3 = parse(npy_image("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 1, 2), }",
                                    bytes_of<int32_t>({1, 3, 2, 4})));
  EXPECT_EQ(f3.to_string(), reshape(constant({1, 2, 3, 4}), {2, 1, 2}).to_string());
  // uint8 stays uint8; other narrow integers widen: int8/int16/uint16 to int32, uint32 to int64.
  const Tensor u8 = parse(npy_image("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", {0, 128, 255}));
  EXPECT_EQ(u8.dtype(), uint8);
  EXPECT_EQ(u8.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 128, 255}));
  const Tensor i16 = parse(npy_image("{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }",
                                     bytes_of<int16_t>({-300, 7}, true)));
  EXPECT_EQ(i16.to_vector<int32_t>(), (std::vector<int32_t>{-300, 7}));
  const Tensor u32 = parse(npy_image("{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }",
                                     bytes_of<uint32_t>({4000000000u})));
  EXPECT_EQ(u32.dtype(), int64);
  EXPECT_EQ(u32.to_vector<int64_t>(), (std::vector<int64_t>{4000000000}));
  const Tensor bools = parse(npy_image("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", {1, 0}));
  EXPECT_EQ(bools.to_string(), constant({true, false}).to_string());
}

TEST(Npy, MalformedFilesAreValueErrorsThatSayWhere) {
  const auto ok_dict = std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
  const auto two = bytes_of<float>({1, 2});
  EXPECT_THROW_MSG(parse({'P', 'K', 3, 4}), ValueError, "'x.npy' is not a .npy file");
  auto v4 = npy_image(ok_dict, two);
  v4[6] = 4;
  EXPECT_THROW_MSG(parse(v4), ValueError, "format version 4.0", "reads 1.0, 2.0 and 3.0");
  auto huge = npy_image(ok_dict, two);
  huge[8] = 0x20;  // a header length of 20000 (0x4E20)
  huge[9] = 0x4E;
  EXPECT_THROW_MSG(parse(huge), ValueError, "declares a header of 20000 bytes", "refuses headers over 10000");
  auto cut = npy_image(ok_dict, two);
  cut.resize(40);
  EXPECT_THROW_MSG(parse(cut), ValueError, "is truncated: its header declares");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '<f4', 'shape': (2,), }", two)), ValueError,
                   "without the key 'fortran_order'");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", two)),
                   ValueError, "the key 'descr' appears twice", "at byte");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1, }", two)),
                   ValueError, "the unknown key 'x'");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", bytes_of<uint64_t>({0, 0}))),
                   ValueError, "object arrays hold pickled Python objects, which tracegraph never reads");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", two)),
                   ValueError, "structured (record) dtypes");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '<U5', 'fortran_order': False, 'shape': (1,), }", std::vector<uint8_t>(20))),
                   ValueError, "the kind 'U'");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", {0, 0, 0, 0})),
                   ValueError, "a 16-bit float");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }", std::vector<uint8_t>(8))),
                   ValueError, "64-bit unsigned integer");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }", two)), ValueError,
                   "expected True or False");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", two)), ValueError,
                   "expected a dimension");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", two)),
                   ValueError, "larger than 2^63 - 1");
  // Sizes: data short, long, or a count that overflows before it could be compared.
  EXPECT_THROW_MSG(parse(npy_image(ok_dict, bytes_of<float>({1}))), ValueError, "is truncated", "8 bytes of data",
                   "has 4");
  EXPECT_THROW_MSG(parse(npy_image(ok_dict, bytes_of<float>({1, 2, 3}))), ValueError, "has bytes after its data");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", two)),
                   ValueError, "more than 2^64");
  std::string deep = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 70; ++i) deep += "1, ";
  EXPECT_THROW_MSG(parse(npy_image(deep + "), }", bytes_of<float>({1}))), ValueError, "more than 64 dimensions");
  // Junk after the dict, a missing newline, a non-ASCII byte.
  auto junk = npy_image(ok_dict + " x", two);
  EXPECT_THROW_MSG(parse(junk), ValueError, "expected only spaces and a final newline");
  EXPECT_THROW_MSG(parse(npy_image("{'descr': '<f\xff', 'fortran_order': False, 'shape': (2,), }", two)), ValueError,
                   "non-ASCII byte");
}

TEST(Npy, FilesAndTensorsThatCannotBeWritten) {
  TempDir dir;
  EXPECT_THROW_MSG(load_npy(dir.path("missing.npy")), InvalidArgumentError, "cannot open");
  EXPECT_THROW_MSG(load_npy(dir.path("")), InvalidArgumentError, "is a directory");
  EXPECT_THROW_MSG(save_npy(dir.path("s.npy"), constant("a")), TypeError, "a string tensor");
  EXPECT_THROW_MSG(save_npy(dir.path("no/such/dir/x.npy"), constant(1)), InvalidArgumentError, "cannot create");
  EXPECT_THROW_MSG(save_npy(dir.path("e.npy"), Tensor()), TypeError, "empty");
  auto f = function([&](const Tensor& x) {
    save_npy(dir.path("sym.npy"), x);
    return x;
  });
  EXPECT_THROW_MSG(f(constant(1)), TypeError, "is symbolic");
}

TEST(Npy, WhatSaveNpyWritesLoadNpyReads) {
  // 64 dims is the format's limit (NumPy's): written and read back; 65 is refused at save time
  // (it used to write a file that load_npy refused), and nothing is written.
  TempDir dir;
  const Tensor at_limit = zeros(TensorShape(std::vector<int64_t>(64, 1)));
  save_npy(dir.path("64.npy"), at_limit);
  EXPECT_EQ(load_npy(dir.path("64.npy")).shape(), at_limit.shape());
  EXPECT_THROW_MSG(save_npy(dir.path("65.npy"), zeros(TensorShape(std::vector<int64_t>(65, 1)))), ValueError,
                   "[save_npy]", "rank 65", "at most 64");
  EXPECT_FALSE(std::filesystem::exists(dir.path("65.npy")));
}

TEST(Npy, AFifoIsRefusedWithoutWaitingForAWriter) {
  testing::TempFifo fifo("x.npy");
  EXPECT_TRUE(testing::refuses_fifo_at_once(fifo.path(), [&] { load_npy(fifo.path()); },
                                            {"[load_npy]", fifo.path(), "is a FIFO (named pipe), not a regular file",
                                             "expected a .npy file"}));
}

}  // namespace
}  // namespace tg
