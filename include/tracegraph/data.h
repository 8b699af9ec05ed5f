// Reading data sets stored as IDX files (the MNIST / Fashion-MNIST format), plain or gzipped.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tracegraph/tensor.h"

namespace tg::data {

/// The header of an IDX file: a big-endian magic number 0x0000TTNN (TT the element type code,
/// NN the number of dims) followed by NN big-endian uint32 sizes.
struct IdxHeader {
  uint8_t type_code = 0;        // 0x08 ubyte, 0x09 sbyte, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64
  std::vector<int64_t> dims;    // the sizes, outermost first
  uint32_t magic() const { return (uint32_t{type_code} << 8) | static_cast<uint32_t>(dims.size()); }
};

/// Reads an IDX file into a tensor of its dims. Integer types (ubyte, sbyte, int16, int32)
/// become int32, float32 stays float32, float64 stays float64 (as before uint8 existed; the
/// bytes of an image file as uint8: read_idx_image_bytes).
///
/// The file may be gzip-compressed (recognised by its content, not its name) or plain. Every
/// header field and the data size are checked against the file: a missing or unreadable file
/// throws tg::InvalidArgumentError; an empty, truncated or malformed file (bad magic, unknown type
/// code, data shorter or longer than the dims say, corrupt gzip) throws tg::ValueError. A gzipped
/// file is inflated no further than the header declares (plus one byte, to report trailing
/// data), so a small header cannot make it inflate gigabytes. A path that is not a regular file
/// (a FIFO) is refused without blocking. Each message names the file, what was expected and what
/// was found.
Tensor read_idx(const std::string& path);
/// Only the header (the whole file is still read and decompressed to validate its size).
IdxHeader read_idx_header(const std::string& path);

/// An image file (magic 0x00000803: ubyte, 3 dims (count, rows, cols)) as float32 in [0, 1]
/// (each byte divided by 255), shape (count, rows, cols). Any other magic is a tg::ValueError.
Tensor read_idx_images(const std::string& path);
/// The same image file's bytes as they are: uint8, shape (count, rows, cols) (no copy to float;
/// tg::cast and divide when the model wants floats).
Tensor read_idx_image_bytes(const std::string& path);
/// A label file (magic 0x00000801: ubyte, 1 dim) as int32, int64 or uint8 (`dtype`), shape (count,).
Tensor read_idx_labels(const std::string& path, DType dtype = int32);

/// Images flattened to (count, rows * cols) float32 in [0, 1], and their labels (count,).
struct LabeledImages {
  Tensor images;
  Tensor labels;
  int64_t size() const { return labels.defined() ? labels.shape().dims()[0] : 0; }
};

/// Loads one split of an MNIST-style data set from `dir`: the files
/// `<split>-images-idx3-ubyte` and `<split>-labels-idx1-ubyte`, each with or without `.gz`
/// (the gzipped name is tried first). `split` is "train" or "t10k" for (Fashion-)MNIST. Throws
/// tg::InvalidArgumentError naming both candidate paths when a file is missing, and
/// tg::ValueError when the image and label counts differ.
LabeledImages load_mnist(const std::string& dir, const std::string& split);

/// Shard `index` of `num_shards` (tf.data's Dataset.shard): the examples index,
/// index + num_shards, index + 2 * num_shards, ... Every shard gets size() / num_shards examples;
/// the remainder is dropped, so that the ranks of a data-parallel job, one shard each, all run the
/// same number of steps (a rank with one batch more would wait forever in its collective).
/// Throws tg::InvalidArgumentError unless num_shards >= 1 and 0 <= index < num_shards.
LabeledImages shard(const LabeledImages& data, int64_t num_shards, int64_t index);

/// Where Debian's dataset-fashion-mnist package installs the (gzipped) files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace tg::data
