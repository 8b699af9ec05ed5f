// The .tgx container shared by exported functions and checkpoints: sections of bytes behind a
// header and a section table with CRC32s, and the tensor table with 64-byte aligned data
// (docs/export.md). Function files and checkpoints differ only in their manifest.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "export/tgx_format.h"
#include "ops/variable_state.h"
#include "tracegraph/export.h"
#include "tracegraph/tensor.h"

namespace tg::detail::tgx {

/// Where the bytes of a file go, in order (a file stream, or a string).
using ByteSink = std::function<void(const void* data, std::size_t n)>;

class TensorStore;

/// One section: its bytes, or - for DATA - the stored tensors, streamed from their own memory
/// so that saving a large model copies none of it.
struct Section {
  uint32_t tag;
  std::string bytes;
  const TensorStore* tensors = nullptr;
  uint64_t size() const;
  void write(const ByteSink& out) const;
};

/// The file: header, section table, then each section at a 64-byte boundary.
void write_container(const std::vector<Section>& sections, const ByteSink& out);
/// The same in memory (tests, the fuzz seeds).
std::string container_bytes(const std::vector<Section>& sections);
/// The same to a file, replaced atomically; `op` names the API in errors.
void write_container_file(const char* op, const std::string& path, const std::vector<Section>& sections);

/// Eager tensors written once each (a tensor shared by two constants is stored once): the
/// TNSR table, and the DATA section, which refers to the tensors (keep the store alive while it
/// is written).
class TensorStore {
 public:
  uint32_t add(const Tensor& t);
  Section table() const;
  Section data() const { return {kData, {}, this}; }
  uint64_t data_size() const { return end_; }
  /// The DATA section's bytes in order, padding included.
  void write_data(const ByteSink& out) const;

 private:
  struct Stored {
    Tensor tensor;
    uint64_t offset, size;  // in DATA
    std::string encoded;    // a string tensor's bytes (numeric tensors are written from their memory)
  };
  std::vector<Stored> stored_;
  uint64_t end_ = 0;
  std::unordered_map<const void*, uint32_t> index_;
};

/// One Variable's manifest entry: name, dtype, shape, and its value's tensor (when it has one).
void write_variable(Writer& w, TensorStore& tensors, VariableState& v);

// ---- reading ---------------------------------------------------------------------------------

/// A validated container in memory: its sections by tag, and the tensors of its table, made on
/// demand (numeric tensors share the file's memory when it is aligned; `owner` keeps it alive).
class Container {
 public:
  /// `op` names the API in messages.
  Container(const uint8_t* data, std::size_t size, std::shared_ptr<const void> owner, const LoadOptions& options,
            const char* op = "tg::load");
  /// The section's reader; a FormatError when the file has no section `tag` (`what` says which).
  Reader section(uint32_t tag, const char* what) const;
  bool has(uint32_t tag) const { return sections_.count(tag) != 0; }
  std::size_t tensor_count() const { return entries_.size(); }
  /// The eager tensor at `index` of the table; `r` names where the index was read, for errors.
  Tensor tensor(uint64_t index, const Reader& r, std::size_t at) const;
  const LoadOptions& options() const { return options_; }
  const std::string& producer() const { return producer_; }
  FileKind kind() const { return kind_; }
  /// The manifest after its first fields (kind and producer): what the caller reads next.
  Reader manifest() const;
  /// A variable entry of the manifest (write_variable's), as a new Variable state.
  std::shared_ptr<VariableState> read_variable(Reader& r) const;
  /// A FormatError at `at` when a value of this type (when fully known) would take more than
  /// LoadOptions::max_tensor_bytes.
  void check_bytes(const Reader& r, std::size_t at, const std::string& what, DType dtype, const TensorShape& shape) const;

 private:
  struct Span {
    uint64_t offset, size;
  };
  struct Entry {
    DType dtype;
    TensorShape shape;
    int64_t elements;
    uint64_t offset, size;  // in the file
  };
  void read_tensor_table();
  Tensor make_tensor(uint64_t index) const;
  const uint8_t* data_;
  std::size_t size_;
  std::shared_ptr<const void> owner_;
  LoadOptions options_;
  std::unordered_map<uint32_t, Span> sections_;
  std::vector<Entry> entries_;
  mutable std::vector<Tensor> made_;  // tensors made so far, by index: two constants of one tensor share it
  const char* op_;
  FileKind kind_ = FileKind::kFunction;
  std::string producer_;
  std::size_t manifest_body_ = 0;  // where the manifest continues after kind and producer
};

/// The bytes of a file, memory-mapped privately (writes to the mapping never reach the file),
/// or an InvalidArgumentError naming `op` and the path.
struct MappedFile {
  const uint8_t* data;
  std::size_t size;
  std::shared_ptr<const void> owner;
};
MappedFile map_file(const char* op, const std::string& path, const LoadOptions& options);

/// This library as files name their producer: "tracegraph <version>".
std::string this_producer();

}  // namespace tg::detail::tgx
