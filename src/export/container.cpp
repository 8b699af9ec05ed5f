#include "export/container.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/crc32.h"
#include "core/tensor_impl.h"
#include "data/file_bytes.h"

namespace tg::detail::tgx {

static_assert(std::endian::native == std::endian::little,
              "the .tgx writer and reader copy little-endian values as they are in memory");

namespace {

// The CRC32 of bytes (zlib's, at memory speed: src/core/crc32.h), starting or continuing from `crc`.
uint32_t crc_continue(uint32_t crc, const uint8_t* p, std::size_t n) { return tg::detail::crc32(crc, p, n); }
uint32_t crc_of(const uint8_t* p, std::size_t n) { return crc_continue(0, p, n); }

std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// How errors name a section: "manifest", "graphs", "tensor table", "tensor data", or its tag.
std::string section_name(uint32_t tag) {
  return tag == kManifest ? "manifest" : tag == kGraphs ? "graphs" : tag == kTensors ? "tensor table"
                                      : tag == kData     ? "tensor data" : "section '" + tag_name(tag) + "'";
}

}  // namespace

std::string this_producer() { return std::string("tracegraph ") + TG_VERSION_STRING; }

// ---- writing ---------------------------------------------------------------------------------

uint64_t Section::size() const { return tensors ? tensors->data_size() : bytes.size(); }

void Section::write(const ByteSink& out) const {
  if (tensors) tensors->write_data(out);
  else out(bytes.data(), bytes.size());
}

void write_container(const std::vector<Section>& sections, const ByteSink& out) {
  const std::size_t table_offset = kHeaderBytes;
  uint64_t at = aligned(table_offset + sections.size() * kSectionEntryBytes);
  Writer table;
  std::vector<uint64_t> offsets;
  for (const Section& s : sections) {
    offsets.push_back(at);
    uint32_t crc = 0;
    s.write([&](const void* p, std::size_t n) { crc = crc_continue(crc, static_cast<const uint8_t*>(p), n); });
    table.u32(s.tag);
    table.u32(kRequired);
    table.u64(at);
    table.u64(s.size());
    table.u32(crc);
    table.u32(0);
    at = aligned(at + s.size());
  }
  Writer header;
  header.raw(kMagic, sizeof kMagic);
  header.u16(kMajor);
  header.u16(kMinor);
  header.count(sections.size());
  header.u64(table_offset);
  header.u64(at);  // the file's size
  header.u32(crc_of(reinterpret_cast<const uint8_t*>(table.bytes.data()), table.bytes.size()));
  header.u32(crc_of(reinterpret_cast<const uint8_t*>(header.bytes.data()), header.bytes.size()));
  header.pad_to(kHeaderBytes);
  static const char kZeros[kAlign] = {};
  uint64_t written = 0;
  auto emit = [&](const void* p, std::size_t n) {
    out(p, n);
    written += n;
  };
  auto pad_to = [&](uint64_t offset) {
    while (written < offset) emit(kZeros, static_cast<std::size_t>(std::min<uint64_t>(kAlign, offset - written)));
  };
  emit(header.bytes.data(), header.bytes.size());
  emit(table.bytes.data(), table.bytes.size());
  for (std::size_t i = 0; i < sections.size(); ++i) {
    pad_to(offsets[i]);
    sections[i].write(emit);
  }
  pad_to(at);
}

std::string container_bytes(const std::vector<Section>& sections) {
  std::string file;
  write_container(sections, [&](const void* p, std::size_t n) { file.append(static_cast<const char*>(p), n); });
  return file;
}

void write_container_file(const char* op, const std::string& path, const std::vector<Section>& sections) {
  write_file(op, path, [&](std::ostream& out) {
    write_container(sections, [&](const void* p, std::size_t n) { out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); });
  });
}

uint32_t TensorStore::add(const Tensor& t) {
  TG_CHECK(t.defined() && !t.is_symbolic(), "only eager tensors are stored");
  const void* key = t.impl().get();
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  const auto index = static_cast<uint32_t>(stored_.size());
  Stored s{t, aligned(end_), 0, {}};
  const int64_t n = static_shape(t).num_elements();
  if (t.dtype() == DType::String) {
    Writer w;
    const std::string* str = data_of<std::string>(t);
    for (int64_t i = 0; i < n; ++i) {
      w.u64(str[i].size());
      w.raw(str[i].data(), str[i].size());
    }
    s.encoded = std::move(w.bytes);
    s.size = s.encoded.size();
  } else {
    s.size = static_cast<uint64_t>(n) * dtype_size(t.dtype());
  }
  end_ = s.offset + s.size;
  stored_.push_back(std::move(s));
  index_.emplace(key, index);
  return index;
}

void TensorStore::write_data(const ByteSink& out) const {
  static const char kZeros[kAlign] = {};
  uint64_t at = 0;
  for (const Stored& s : stored_) {
    if (s.offset > at) out(kZeros, static_cast<std::size_t>(s.offset - at));
    if (s.tensor.dtype() == DType::String) out(s.encoded.data(), s.encoded.size());
    else if (s.size) out(data_of<char>(s.tensor), static_cast<std::size_t>(s.size));
    at = s.offset + s.size;
  }
}

Section TensorStore::table() const {
  Writer w;
  w.count(stored_.size());
  for (const Stored& s : stored_) {
    w.dtype(s.tensor.dtype());
    w.shape(static_shape(s.tensor), "a tensor");
    w.u64(s.offset);
    w.u64(s.size);
  }
  return {kTensors, std::move(w.bytes)};
}

void write_variable(Writer& w, TensorStore& tensors, VariableState& v) {
  Tensor value;
  {
    std::lock_guard lock(v.mu);
    value = v.value;
  }
  w.str(v.name);
  w.dtype(v.dtype);
  try {
    w.shape(v.shape, "a Variable");
  } catch (ValueError& e) {
    e.add_context("(Variable '" + v.name + "')");
    throw;
  }
  w.u8(value.defined() ? 1 : 0);
  if (value.defined()) w.u32(tensors.add(value));
}

// ---- reading ---------------------------------------------------------------------------------

Container::Container(const uint8_t* data, std::size_t size, std::shared_ptr<const void> owner, const LoadOptions& options,
                     const char* op)
    : data_(data), size_(size), owner_(std::move(owner)), options_(options), op_(op) {
  Reader h(data_, 0, size_, "header", op_);
  if (size_ > options_.max_file_bytes)
    h.fail_at(0, str_cat("the file has ", size_, " bytes, more than LoadOptions::max_file_bytes (", options_.max_file_bytes, ")"));
  if (size_ < kHeaderBytes || std::memcmp(data_, kMagic, sizeof kMagic) != 0)
    h.fail_at(0, "this is not a .tgx file (its first bytes are not the .tgx magic 89 'TGX' 0D 0A 1A 0A)");
  for (std::size_t i = 0; i < sizeof kMagic; ++i) h.u8();
  const uint16_t major = h.u16(), minor = h.u16();
  if (major != kMajor)
    h.fail_at(8, str_cat("format version ", major, ".", minor, " is not readable by this tracegraph (", this_producer(),
                         " reads version ", kMajor, ".x); ", major > kMajor ? "load it with a newer tracegraph"
                                                                           : "no tracegraph release wrote that version"));
  const std::size_t count = h.u32();
  const uint64_t table_offset = h.u64(), file_size = h.u64();
  const uint32_t table_crc = h.u32(), header_crc = h.u32();
  if (options_.verify_checksums && crc_of(data_, 36) != header_crc) h.fail_at(36, "the header's CRC32 does not match: the file is corrupt");
  for (std::size_t at = 40; at < kHeaderBytes; ++at)
    if (data_[at] != 0) h.fail_at(at, "the header's reserved bytes 40-63 are not zero");
  if (file_size != size_)
    h.fail_at(24, str_cat("the header says the file has ", file_size, " bytes but it has ", size_,
                          file_size > size_ ? " (truncated)" : " (bytes appended)"));
  if (table_offset < kHeaderBytes || table_offset > size_ || count > (size_ - table_offset) / kSectionEntryBytes)
    h.fail_at(12, str_cat("the section table (", count, " entries at byte ", table_offset, ") does not fit the file"));
  const std::size_t table_end = table_offset + count * kSectionEntryBytes;
  if (options_.verify_checksums && crc_of(data_ + table_offset, count * kSectionEntryBytes) != table_crc)
    h.fail_at(32, "the section table's CRC32 does not match: the file is corrupt");
  Reader t(data_, table_offset, table_end, "section table", op_);
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // (offset, size) of every section
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t at = t.offset();
    const uint32_t tag = t.u32(), flags = t.u32();
    const uint64_t offset = t.u64(), bytes = t.u64();
    const uint32_t crc = t.u32();
    if (t.u32() != 0 || (flags & ~kRequired) != 0) t.fail_at(at, str_cat("section '", tag_name(tag), "' has reserved bits set"));
    const bool known = tag == kManifest || tag == kGraphs || tag == kTensors || tag == kData;
    if (!known && (flags & kRequired))
      t.fail_at(at, str_cat("section '", tag_name(tag), "' is required to read the file but unknown to ", this_producer(),
                            "; load it with the tracegraph that wrote it (or newer)"));
    if (offset < table_end || offset > size_ || bytes > size_ - offset)
      t.fail_at(at, str_cat("section '", tag_name(tag), "' (", bytes, " bytes at byte ", offset, ") lies outside the file"));
    if (offset % kAlign != 0) t.fail_at(at, str_cat("section '", tag_name(tag), "' starts at byte ", offset, ", not a multiple of 64"));
    if (known && sections_.count(tag)) t.fail_at(at, str_cat("section '", tag_name(tag), "' appears twice"));
    if (options_.verify_checksums && crc_of(data_ + offset, bytes) != crc)
      Reader(data_, offset, offset + bytes, section_name(tag), op_)
          .fail_at(offset, str_cat("section '", tag_name(tag), "' (", bytes, " bytes) has a wrong CRC32: the file is corrupt"));
    spans.emplace_back(offset, bytes);
    if (known) sections_[tag] = {offset, bytes};
  }
  // No two sections share a byte (sorted, each must end before the next begins).
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].first + spans[i - 1].second)
      t.fail_at(table_offset, str_cat("the section at byte ", spans[i].first, " overlaps the one at byte ", spans[i - 1].first));
  Reader m = section(kManifest, "the manifest");
  const uint8_t kind = m.u8();
  if (kind != static_cast<uint8_t>(FileKind::kFunction) && kind != static_cast<uint8_t>(FileKind::kCheckpoint))
    m.fail_at(m.offset() - 1, str_cat("the file kind is ", int(kind), "; expected 1 (a function) or 2 (a checkpoint)"));
  kind_ = static_cast<FileKind>(kind);
  producer_ = m.str("the producer");
  manifest_body_ = m.offset();
  read_tensor_table();
}

Reader Container::section(uint32_t tag, const char* what) const {
  auto it = sections_.find(tag);
  if (it == sections_.end())
    Reader(data_, 0, size_, "section table", op_).fail_at(kHeaderBytes, str_cat("the file has no '", tag_name(tag), "' section (", what, ")"));
  return Reader(data_, it->second.offset, it->second.offset + it->second.size, section_name(tag), op_);
}

Reader Container::manifest() const {
  Reader m = section(kManifest, "the manifest");
  m.skip(manifest_body_ - m.offset());  // kind and producer, read once by the constructor
  return m;
}

void Container::read_tensor_table() {
  Reader r = section(kTensors, "the tensor table");
  const Span data = sections_.count(kData) ? sections_.at(kData) : Span{size_, 0};
  const std::size_t n = r.count("the tensors", 1 + 1 + 16);
  entries_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t at = r.offset();
    Entry e{r.dtype("a tensor"), r.shape("a tensor"), 0, 0, 0};
    const uint64_t offset = r.u64(), bytes = r.u64();
    if (!e.shape.is_fully_defined()) r.fail_at(at, str_cat("tensor ", i, " has shape ", e.shape.to_string(), "; stored tensors have known shapes"));
    uint64_t elements = 1;
    for (int64_t d : e.shape.dims())
      if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements) || elements > INT64_MAX)
        r.fail_at(at, str_cat("tensor ", i, " of shape ", e.shape.to_string(), " has more elements than fit 64 bits"));
    e.elements = static_cast<int64_t>(elements);
    uint64_t want = 0;
    if (e.dtype == DType::String) {
      if (elements > bytes / 8) r.fail_at(at, str_cat("string tensor ", i, " has ", elements, " elements in ", bytes, " bytes (each takes at least 8)"));
    } else if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dtype_size(e.dtype)), &want) || want != bytes) {
      r.fail_at(at, str_cat("tensor ", i, " (", to_string(e.dtype), ", shape ", e.shape.to_string(), ") takes ", bytes,
                            " bytes; its shape needs ", want));
    }
    if (bytes > options_.max_tensor_bytes)
      r.fail_at(at, str_cat("tensor ", i, " has ", bytes, " bytes, more than LoadOptions::max_tensor_bytes (", options_.max_tensor_bytes, ")"));
    if (offset % kAlign != 0) r.fail_at(at, str_cat("tensor ", i, " starts at byte ", offset, " of the data, not a multiple of 64"));
    if (offset > data.size || bytes > data.size - offset)
      r.fail_at(at, str_cat("tensor ", i, " (", bytes, " bytes at byte ", offset, " of the data) lies outside the data section"));
    e.offset = data.offset + offset;
    e.size = bytes;
    entries_.push_back(std::move(e));
  }
  r.expect_end();
  made_.resize(entries_.size());
}

Tensor Container::tensor(uint64_t index, const Reader& r, std::size_t at) const {
  if (index >= entries_.size()) r.fail_at(at, str_cat("tensor index ", index, " is out of range (the file has ", entries_.size(), ")"));
  if (made_[index].defined()) return made_[index];
  made_[index] = make_tensor(index);
  return made_[index];
}

Tensor Container::make_tensor(uint64_t index) const {
  const Entry& e = entries_[index];
  const uint8_t* p = data_ + e.offset;
  if (e.dtype == DType::Bool) {
    // A bool is one byte that must be 0 or 1: any other value read as a C++ bool is undefined.
    for (uint64_t i = 0; i < e.size; ++i)
      if (p[i] > 1)
        Reader(data_, e.offset, e.offset + e.size, "tensor data", op_)
            .fail_at(e.offset + i, str_cat("element ", i, " of bool tensor ", index, " is ", int(p[i]), "; expected 0 or 1"));
  }
  if (e.dtype != DType::String) {
    if (reinterpret_cast<uintptr_t>(p) % kBufferAlignment == 0 && e.elements > 0) {
      // Zero-copy: the tensor is the file's memory (a private mapping: writes stay in the process).
      auto impl = new_tensor_impl();
      impl->dtype = e.dtype;
      impl->shape = e.shape;
      impl->buffer = Buffer::wrap(e.dtype, e.elements, const_cast<uint8_t*>(p), owner_);
      return Tensor(std::move(impl));
    }
    Tensor t = allocate_tensor(e.dtype, e.shape);
    if (e.size) std::memcpy(data_of<uint8_t>(t), p, e.size);
    return t;
  }
  Tensor t = allocate_tensor(e.dtype, e.shape);
  Reader s(data_, e.offset, e.offset + e.size, "tensor data", op_);
  std::string* out = data_of<std::string>(t);
  for (int64_t i = 0; i < e.elements; ++i) {
    const uint64_t n = s.u64();
    if (n > s.left()) s.fail(str_cat("string ", i, " of tensor ", index, " has ", n, " bytes but ", s.left(), " are left"));
    out[i].assign(reinterpret_cast<const char*>(p + (s.offset() - e.offset)), n);
    s.skip(n);
  }
  s.expect_end();
  return t;
}

std::shared_ptr<VariableState> Container::read_variable(Reader& r) const {
  std::string name = r.str("a Variable's name");
  const DType dtype = r.dtype("a Variable");
  const std::size_t shape_at = r.offset();
  TensorShape shape = r.shape("a Variable");
  if (!shape.is_fully_defined()) r.fail_at(shape_at, str_cat("Variable '", name, "' has shape ", shape.to_string(), "; a Variable's shape is known"));
  check_bytes(r, shape_at, "Variable '" + name + "'", dtype, shape);
  Tensor value;
  if (r.boolean("a Variable's has-value flag")) {
    const std::size_t at = r.offset();
    value = tensor(r.u32(), r, at);
    if (value.dtype() != dtype || !(static_shape(value) == shape))
      r.fail_at(at, str_cat("Variable '", name, "' is ", to_string(dtype), " ", shape.to_string(), " but its value is ",
                            to_string(value.dtype()), " ", static_shape(value).to_string()));
  }
  return make_variable_state(std::move(name), dtype, std::move(shape), std::move(value));
}

void Container::check_bytes(const Reader& r, std::size_t at, const std::string& what, DType dtype, const TensorShape& shape) const {
  if (!shape.is_fully_defined()) return;
  uint64_t bytes = dtype == DType::String ? 8 : dtype_size(dtype);
  for (int64_t d : shape.dims())
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) bytes = UINT64_MAX;
  if (bytes > options_.max_tensor_bytes)
    r.fail_at(at, str_cat(what, " is ", to_string(dtype), " ", shape.to_string(), " (", bytes == UINT64_MAX ? std::string("more than 2^64") : std::to_string(bytes),
                          " bytes), more than LoadOptions::max_tensor_bytes (", options_.max_tensor_bytes, ")"));
}

MappedFile map_file(const char* op, const std::string& path, const LoadOptions& options) {
  const RegularFile file(op, path, "a .tgx file");  // never blocks: a FIFO or device is refused first
  const uint64_t size = file.size();
  if (size > options.max_file_bytes)
    throw FormatError(str_cat("[", op, "] header at byte 0: '", path, "' has ", size, " bytes, more than LoadOptions::max_file_bytes (",
                              options.max_file_bytes, ")"), "header", 0);
  if (size == 0) throw FormatError(str_cat("[", op, "] header at byte 0: '", path, "' is empty; expected a .tgx file"), "header", 0);
  // Private and writable: Variables and constants use the pages in place; a write (an assign)
  // copies its page and never reaches the file.
  void* p = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd(), 0);
  if (p == MAP_FAILED) op_error<InvalidArgumentError>(op, "cannot map '", path, "': ", std::strerror(errno));
  const auto bytes = static_cast<std::size_t>(size);
  std::shared_ptr<const void> owner(p, [bytes](const void* q) { ::munmap(const_cast<void*>(q), bytes); });
  return {static_cast<const uint8_t*>(p), bytes, std::move(owner)};
}

}  // namespace tg::detail::tgx
