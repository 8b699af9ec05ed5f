// The loader against hand-made malformed files: one test per rule of docs/export.md. Each file
// is built from a valid one (the first test shows it loads and runs) with one thing wrong, and
// must fail with a tg::FormatError that names the section, the byte offset and the fault.
#include <zlib.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>

#include "export/container.h"
#include "ops/op.h"
#include "support/test_util.h"

namespace tg {
namespace {

namespace tgx = detail::tgx;
using tgx::Writer;

// Pieces of a function file, written as the format says (docs/export.md).
void tensor_type(Writer& w, DType d, const TensorShape& s) {
  w.u8(static_cast<uint8_t>(tgx::TypeCode::kTensor));
  w.dtype(d);
  w.shape(s);
  w.str("");
}

struct NodeSpec {
  std::string name;
  tgx::NodeCode kind;
  std::vector<std::pair<uint32_t, uint32_t>> inputs;
  std::vector<std::pair<DType, TensorShape>> outputs;
  int64_t control = -1;
  uint32_t index = 0;       // placeholder: input index; const: tensor index
  uint16_t serial = 0;      // op
  std::function<void(Writer&)> attrs = [](Writer& w) { w.u32(0); };
};

void node(Writer& w, const NodeSpec& n) {
  w.str(n.name);
  w.u8(static_cast<uint8_t>(n.kind));
  w.u32(static_cast<uint32_t>(n.inputs.size()));
  for (auto [from, out] : n.inputs) {
    w.u32(from);
    w.u32(out);
  }
  w.u32(static_cast<uint32_t>(n.outputs.size()));
  for (const auto& [d, s] : n.outputs) {
    w.dtype(d);
    w.shape(s);
  }
  w.i64(n.control);
  switch (n.kind) {
    case tgx::NodeCode::kPlaceholder:
      w.u32(n.index);
      w.str("");
      break;
    case tgx::NodeCode::kConst: w.u32(n.index); break;
    case tgx::NodeCode::kOp:
      w.u16(n.serial);
      n.attrs(w);
      break;
    case tgx::NodeCode::kOutput: break;
  }
}

void graph(Writer& w, const std::vector<NodeSpec>& nodes, std::vector<uint32_t> placeholders, std::vector<uint32_t> outputs) {
  w.u32(static_cast<uint32_t>(nodes.size()));
  for (const auto& n : nodes) node(w, n);
  w.u32(static_cast<uint32_t>(placeholders.size()));
  for (uint32_t p : placeholders) w.u32(p);
  w.u32(static_cast<uint32_t>(outputs.size()));
  for (uint32_t o : outputs) w.u32(o);
}

const TensorShape kVec2{2};
// The valid graph: y = reduce_sum(x + c, axes {0}) for x: float32 (2,), c a constant.
std::vector<NodeSpec> valid_nodes() {
  return {
      {"x", tgx::NodeCode::kPlaceholder, {}, {{float32, kVec2}}},
      {"Const", tgx::NodeCode::kConst, {}, {{float32, kVec2}}, -1, 0},
      {"add", tgx::NodeCode::kOp, {{0, 0}, {1, 0}}, {{float32, kVec2}}, -1, 0, 1},
      {"reduce_sum", tgx::NodeCode::kOp, {{2, 0}}, {{float32, TensorShape{}}}, -1, 0, 70,
       [](Writer& w) {
         w.u32(2);
         w.str("axes");
         w.u8(static_cast<uint8_t>(tgx::FieldCode::kInts));
         w.u32(1);
         w.i64(0);
         w.str("keepdims");
         w.u8(static_cast<uint8_t>(tgx::FieldCode::kBool));
         w.u8(0);
       }},
      {"Identity", tgx::NodeCode::kOutput, {{3, 0}}, {{float32, TensorShape{}}}},
  };
}

// What the tests vary: each part of the file as bytes.
struct Parts {
  std::vector<NodeSpec> nodes = valid_nodes();
  std::function<void(Writer&)> signature = [](Writer& w) {  // the concrete function's parameters
    w.u32(1);
    w.str("x");
    tensor_type(w, float32, kVec2);
  };
  std::function<void(Writer&)> uses = [](Writer& w) {  // the Variables the graph reads, and writes
    w.u32(0);
    w.u32(0);
  };
  uint32_t concretes = 1;
  std::vector<tgx::Section> extra;
};

std::string file_of(const Parts& p) {
  Writer m;
  m.u8(static_cast<uint8_t>(tgx::FileKind::kFunction));
  m.str("tracegraph test");
  m.str("handmade");
  m.u8(1);  // optimize
  m.u32(0);  // Variables
  m.u32(p.concretes);
  Writer g;
  g.u32(p.concretes);
  for (uint32_t i = 0; i < p.concretes; ++i) {
    p.signature(m);
    m.u32(0);  // Variable parameters
    p.uses(m);
    m.u8(static_cast<uint8_t>(tgx::OutputKind::kTensor));
    m.str("TensorSpec(shape=(), dtype=tg.float32, name=None)");
    graph(g, p.nodes, {0}, {4});
  }
  tgx::TensorStore tensors;
  tensors.add(constant({10.0f, 20.0f}));
  std::vector<tgx::Section> sections{{tgx::kManifest, m.bytes}, {tgx::kGraphs, g.bytes}, tensors.table(), tensors.data()};
  for (const auto& s : p.extra) sections.push_back(s);
  return tgx::container_bytes(sections);
}

// Loads `bytes`, expecting a FormatError in `section` whose message has every fragment.
::testing::AssertionResult refused(const std::string& bytes, const std::string& section,
                                   const std::vector<std::string>& fragments, const LoadOptions& options = {}) {
  try {
    load_from_memory(bytes.data(), bytes.size(), options);
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    if (e.section() != section) return ::testing::AssertionFailure() << "section '" << e.section() << "': " << msg;
    if (e.code() != "EFORMAT") return ::testing::AssertionFailure() << "code " << e.code();
    if (msg.find("at byte " + std::to_string(e.offset())) == std::string::npos)
      return ::testing::AssertionFailure() << "the message does not give the offset " << e.offset() << ": " << msg;
    for (const auto& f : fragments)
      if (msg.find(f) == std::string::npos) return ::testing::AssertionFailure() << "message lacks \"" << f << "\": " << msg;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "loaded";
}

// Re-computes the CRC32s after a test edits bytes, so that the edit itself is what is refused.
void fix_checksums(std::string& f) {
  auto u32_at = [&](std::size_t at) { uint32_t v; std::memcpy(&v, f.data() + at, 4); return v; };
  auto u64_at = [&](std::size_t at) { uint64_t v; std::memcpy(&v, f.data() + at, 8); return v; };
  auto put32 = [&](std::size_t at, uint32_t v) { std::memcpy(f.data() + at, &v, 4); };
  auto crc = [&](std::size_t at, std::size_t n) {
    return static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(f.data() + at), n));
  };
  const std::size_t count = u32_at(12), table = u64_at(16);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t e = table + i * 32;
    put32(e + 24, crc(u64_at(e + 8), u64_at(e + 16)));
  }
  put32(32, crc(table, count * 32));
  put32(36, crc(0, 36));
}

// The byte offset of the GRPH section in a file.
std::size_t graphs_offset(const std::string& f) {
  for (std::size_t i = 0; i < 4; ++i) {
    uint32_t tag;
    uint64_t at;
    std::memcpy(&tag, f.data() + 64 + i * 32, 4);
    std::memcpy(&at, f.data() + 64 + i * 32 + 8, 8);
    if (tag == tgx::kGraphs) return at;
  }
  return 0;
}

TEST(MalformedFiles, TheHandMadeFileIsValid) {
  const std::string f = file_of({});
  LoadedFunction loaded = load_from_memory(f.data(), f.size());
  EXPECT_EQ(Tensor(loaded(constant({1.0f, 2.0f}))).item<float>(), 33.0f);
}

TEST(MalformedFiles, HeaderFaults) {
  const std::string good = file_of({});
  std::string f = good;
  f[1] = 'X';
  EXPECT_TRUE(refused(f, "header", {"not a .tgx file"}));
  EXPECT_TRUE(refused(good.substr(0, 10), "header", {"not a .tgx file"}));
  f = good;
  f[8] = 2;  // major version 2
  fix_checksums(f);
  EXPECT_TRUE(refused(f, "header", {"format version 2.0", "load it with a newer tracegraph"}));
  EXPECT_TRUE(refused(good.substr(0, good.size() - 64), "header", {"truncated"}));
  EXPECT_TRUE(refused(good + std::string(64, '\0'), "header", {"bytes appended"}));
  LoadOptions small;
  small.max_file_bytes = 100;
  EXPECT_TRUE(refused(good, "header", {"LoadOptions::max_file_bytes"}, small));
}

TEST(MalformedFiles, ChecksumsCatchCorruption) {
  std::string f = file_of({});
  f[graphs_offset(f) + 12] ^= 0x40;  // a bit flipped in the first node's name
  EXPECT_TRUE(refused(f, "graphs", {"'GRPH'", "has a wrong CRC32", "corrupt"}));
  std::string h = file_of({});
  h[20] ^= 1;  // the table offset
  EXPECT_TRUE(refused(h, "header", {"header's CRC32"}));
  LoadOptions unchecked;
  unchecked.verify_checksums = false;
  // Unchecked, the flipped name still loads: the name is not one the graph depends on.
  EXPECT_NO_THROW(load_from_memory(f.data(), f.size(), unchecked));
}

TEST(MalformedFiles, SectionTableFaults) {
  Parts p;
  p.extra.push_back({tgx::tag("ZZZZ"), "future"});
  EXPECT_TRUE(refused(file_of(p), "section table", {"section 'ZZZZ' is required", "unknown to tracegraph"}));
  Parts twice;
  twice.extra.push_back({tgx::kData, ""});
  EXPECT_TRUE(refused(file_of(twice), "section table", {"'DATA' appears twice"}));
  std::string f = file_of({});
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(f.data() + 64 + 16, &huge, 8);  // the manifest's size
  LoadOptions unchecked;  // the section's CRC32 cannot be computed over bytes that are not there
  unchecked.verify_checksums = false;
  EXPECT_TRUE(refused(f, "section table", {"lies outside the file"}, unchecked));
}

TEST(MalformedFiles, CountsAreCheckedBeforeAnythingIsAllocated) {
  Parts p;
  p.signature = [](Writer& w) { w.u32(0xFFFFFFF0u); };  // four billion parameters
  EXPECT_TRUE(refused(file_of(p), "manifest", {"the parameters count is 4294967280", "bytes are left"}));
  Parts nodes;
  nodes.concretes = 1;
  std::string f = file_of(nodes);
  const uint32_t many = 0x7FFFFFFFu;
  std::memcpy(f.data() + graphs_offset(f) + 4, &many, 4);  // the first graph's node count
  fix_checksums(f);
  EXPECT_TRUE(refused(f, "graphs", {"the nodes count is 2147483647"}));
}

TEST(MalformedFiles, UnknownOpsAndAttributesAreRejectedByName) {
  Parts op;
  op.nodes[2].serial = 999;
  EXPECT_TRUE(refused(file_of(op), "graphs", {"node 'add' has op serial 999", "needs a newer tracegraph"}));
  Parts attr;
  attr.nodes[3].attrs = [](Writer& w) {
    w.u32(1);
    w.str("axis_typo");
    w.u8(static_cast<uint8_t>(tgx::FieldCode::kInts));
    w.u32(0);
  };
  EXPECT_TRUE(refused(file_of(attr), "graphs", {"attribute 'axis_typo'", "ReduceAttrs does not have"}));
  Parts dup;
  dup.nodes[3].attrs = [](Writer& w) {
    w.u32(2);
    for (int i = 0; i < 2; ++i) {
      w.str("keepdims");
      w.u8(static_cast<uint8_t>(tgx::FieldCode::kBool));
      w.u8(1);
    }
  };
  EXPECT_TRUE(refused(file_of(dup), "graphs", {"attribute 'keepdims' of node 'reduce_sum' appears twice"}));
  Parts type;
  type.nodes[3].attrs = [](Writer& w) {
    w.u32(1);
    w.str("keepdims");
    w.u8(static_cast<uint8_t>(tgx::FieldCode::kInt));
    w.i64(1);
  };
  EXPECT_TRUE(refused(file_of(type), "graphs", {"attribute 'keepdims'", "field type 1; expected 2"}));
  // Every op only the optimiser makes (fused_elementwise, the epilogues, ...).
  for (const detail::OpDef* d : detail::all_ops()) {
    if (!(d->traits & detail::kOptimizerOnly)) continue;
    SCOPED_TRACE(d->name);
    Parts optimised;
    optimised.nodes[2].serial = static_cast<uint16_t>(d->serial);
    EXPECT_TRUE(refused(file_of(optimised), "graphs", {"is a " + std::string(d->name) + " node", "only the optimiser makes"}));
  }
}

TEST(MalformedFiles, GraphsAreAcyclicAndWellFormed) {
  Parts later;
  later.nodes[2].inputs = {{0, 0}, {3, 0}};
  EXPECT_TRUE(refused(file_of(later), "graphs", {"node 'add' (node 2) reads node 3", "only earlier nodes"}));
  Parts self;
  self.nodes[2].inputs = {{0, 0}, {2, 0}};
  EXPECT_TRUE(refused(file_of(self), "graphs", {"reads node 2"}));
  Parts output;
  output.nodes[2].inputs = {{0, 0}, {1, 5}};
  EXPECT_TRUE(refused(file_of(output), "graphs", {"reads output 5 of node 'Const'"}));
  Parts arity;
  arity.nodes[2].inputs = {{0, 0}};
  EXPECT_TRUE(refused(file_of(arity), "graphs", {"malformed", "has 1 inputs, op add takes 2"}));
  Parts names;
  names.nodes[1].name = "x";
  EXPECT_TRUE(refused(file_of(names), "graphs", {"node name 'x' appears twice"}));
  Parts control;
  control.nodes[2].control = 1;  // a control edge to a constant
  EXPECT_TRUE(refused(file_of(control), "graphs", {"control edge to a stateless node"}));
}

TEST(MalformedFiles, TypesAreTheOpsOwnRules) {
  // The dtype of an op's output edited to disagree with its inputs (TF's CVE-2022-23583), and
  // an edge whose two ends disagree (CVE-2020-26271).
  Parts dtype;
  dtype.nodes[2].outputs = {{int32, kVec2}};
  dtype.nodes[3].outputs = {{int32, TensorShape{}}};
  dtype.nodes[4].outputs = {{int32, TensorShape{}}};
  EXPECT_TRUE(refused(file_of(dtype), "graphs", {"node 2 'add' (op add) declares outputs (int32 (2,))", "give (float32 (2,))"}));
  Parts shape;
  shape.nodes[3].outputs = {{float32, TensorShape{2}}};
  shape.nodes[4].outputs = {{float32, TensorShape{2}}};
  EXPECT_TRUE(refused(file_of(shape), "graphs", {"node 3 'reduce_sum' (op reduce_sum) declares outputs (float32 (2,))", "give (float32 ())"}));
  Parts invalid;
  invalid.nodes[3].attrs = [](Writer& w) {
    w.u32(1);
    w.str("axes");
    w.u8(static_cast<uint8_t>(tgx::FieldCode::kInts));
    w.u32(1);
    w.i64(7);
  };
  EXPECT_TRUE(refused(file_of(invalid), "graphs", {"node 3 'reduce_sum' (op reduce_sum) is invalid", "[reduce_sum]"}));
  Parts constant;
  constant.nodes[1].outputs = {{float64, kVec2}};
  EXPECT_TRUE(refused(file_of(constant), "graphs", {"malformed constant"}));
}

TEST(MalformedFiles, TheSignatureMustFitTheGraph) {
  Parts dtype;
  dtype.signature = [](Writer& w) {
    w.u32(1);
    w.str("x");
    tensor_type(w, int32, kVec2);
  };
  EXPECT_TRUE(refused(file_of(dtype), "manifest", {"parameter x is TensorSpec(shape=(2,), dtype=tg.int32", "float32 (2,)"}));
  Parts more;
  more.signature = [](Writer& w) {
    w.u32(2);
    w.str("x");
    tensor_type(w, float32, kVec2);
    w.str("y");
    tensor_type(w, float32, kVec2);
  };
  EXPECT_TRUE(refused(file_of(more), "manifest", {"more tensors than the graph's 1 inputs"}));
  Parts twice;
  twice.concretes = 2;
  EXPECT_TRUE(refused(file_of(twice), "manifest", {"has the FunctionType", "saved once"}));
}

TEST(MalformedFiles, TheVariablesReadAndWrittenMustBeTheGraphs) {
  Parts uses;
  uses.uses = [](Writer& w) {
    w.u32(1);  // claims to read Variable parameter 0, which does not exist
    w.u8(1);
    w.u32(0);
    w.u32(0);
  };
  EXPECT_TRUE(refused(file_of(uses), "manifest", {"a Variable use names Variable parameter 0 of 0"}));
}

TEST(MalformedFiles, LimitsAndNestingAreEnforced) {
  LoadOptions few;
  few.max_nodes = 3;
  EXPECT_TRUE(refused(file_of({}), "graphs", {"LoadOptions::max_nodes (3)"}, few));
  LoadOptions tiny;
  tiny.max_tensor_bytes = 4;
  EXPECT_TRUE(refused(file_of({}), "tensor table", {"LoadOptions::max_tensor_bytes (4)"}, tiny));
  Parts big;
  big.nodes[0].outputs = {{float32, TensorShape{1 << 20, 1 << 20}}};
  EXPECT_TRUE(refused(file_of(big), "graphs", {"node 'x'", "more than LoadOptions::max_tensor_bytes"}));
  Parts deep;
  deep.signature = [](Writer& w) {
    w.u32(1);
    w.str("x");
    for (int i = 0; i < 100; ++i) {
      w.u8(static_cast<uint8_t>(tgx::TypeCode::kSequence));
      w.str("List");
      w.u32(1);
    }
    tensor_type(w, float32, kVec2);
  };
  EXPECT_TRUE(refused(file_of(deep), "manifest", {"types nest deeper than LoadOptions::max_nesting (64)"}));
}

TEST(MalformedFiles, BadCodesAreNamed) {
  Parts kind;
  kind.nodes[2].kind = static_cast<tgx::NodeCode>(9);
  EXPECT_TRUE(refused(file_of(kind), "graphs", {"node 'add' has kind 9"}));
  Parts dtype;
  dtype.signature = [](Writer& w) {
    w.u32(1);
    w.str("x");
    w.u8(static_cast<uint8_t>(tgx::TypeCode::kTensor));
    w.u8(42);
  };
  EXPECT_TRUE(refused(file_of(dtype), "manifest", {"dtype code 42", "(1-8)"}));
  Parts past_last = dtype;  // 8 is bfloat16, the last code
  past_last.signature = [](Writer& w) {
    w.u32(1);
    w.str("x");
    w.u8(static_cast<uint8_t>(tgx::TypeCode::kTensor));
    w.u8(9);
  };
  EXPECT_TRUE(refused(file_of(past_last), "manifest", {"dtype code 9"}));
  Parts dims;
  dims.nodes[0].outputs = {{float32, TensorShape::unknown_rank()}};
  // An input of unknown rank takes the (2,) signature, but then add's rule no longer gives
  // the (2,) the file declares.
  EXPECT_TRUE(refused(file_of(dims), "graphs", {"node 2 'add' (op add) declares outputs (float32 (2,))", "float32 <unknown>"}));
}

TEST(MalformedFiles, ReservedBytesAndUnusedFieldsMustBeZero) {
  std::string f = file_of({});
  f[50] = 1;
  fix_checksums(f);
  EXPECT_TRUE(refused(f, "header", {"reserved bytes 40-63"}));
  Parts literal;
  literal.signature = [](Writer& w) {
    w.u32(2);
    w.str("x");
    tensor_type(w, float32, kVec2);
    w.str("n");
    w.u8(static_cast<uint8_t>(tgx::TypeCode::kLiteral));
    w.u8(0);  // an int
    w.i64(3);
    w.f64(0.5);  // a float field set on an int
    w.str("");
    w.str("int");
  };
  EXPECT_TRUE(refused(file_of(literal), "manifest", {"a literal of kind 0 sets fields its kind does not have"}));
}

TEST(MalformedFiles, BoolTensorsHoldOnlyZeroAndOne) {
  const std::string path = ::testing::TempDir() + "bool_ckpt_" + std::to_string(::getpid()) + ".tgx";
  Variable flags(constant({true, false, true}), "flags");
  save_variables(path, {flags});
  std::string f;
  {
    std::FILE* in = std::fopen(path.c_str(), "rb");
    ASSERT_NE(in, nullptr);
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) f.append(buf, n);
    std::fclose(in);
  }
  const std::size_t data = f.rfind(std::string("\x01\x00\x01", 3));
  ASSERT_NE(data, std::string::npos);
  f[data + 1] = 7;
  fix_checksums(f);
  {
    std::FILE* out = std::fopen(path.c_str(), "wb");
    std::fwrite(f.data(), 1, f.size(), out);
    std::fclose(out);
  }
  Variable target(constant({false, false, false}), "flags");
  try {
    restore_variables(path, {target});
    ADD_FAILURE() << "restored";
  } catch (const FormatError& e) {
    EXPECT_EQ(e.section(), "tensor data");
    EXPECT_EQ(e.offset(), data + 1);
    EXPECT_NE(std::string(e.what()).find("[tg::restore_variables]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is 7; expected 0 or 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// A shape tensor's length is the rank of the shape it holds: a file whose shape tensor is
// (2^38,) - 1 TiB of int32, within LoadOptions::max_tensor_bytes - is refused by fill's rank
// limit, where its shape rule once built a vector of 2^38 dims (2 TiB), whose std::bad_alloc made
// `tgx validate` report an internal error.
TEST(MalformedFiles, AShapeTensorsLengthIsBoundedByTheRankLimit) {
  const TensorShape huge{int64_t{1} << 38};
  Parts p;
  p.signature = [huge](Writer& w) {
    w.u32(1);
    w.str("x");
    tensor_type(w, int32, huge);
  };
  const std::vector<NodeSpec> valid = valid_nodes();
  p.nodes = {
      {"x", tgx::NodeCode::kPlaceholder, {}, {{int32, huge}}},
      valid[1],  // Const (2,)
      valid[3],  // reduce_sum: a float32 scalar
      {"fill", tgx::NodeCode::kOp, {{0, 0}, {2, 0}}, {{float32, TensorShape::unknown_rank()}}, -1, 0,
       static_cast<uint16_t>(detail::op_def(detail::OpId::Fill).serial)},
      {"Identity", tgx::NodeCode::kOutput, {{3, 0}}, {{float32, TensorShape::unknown_rank()}}},
  };
  p.nodes[2].inputs = {{1, 0}};
  EXPECT_TRUE(refused(file_of(p), "graphs",
                      {"node 3 'fill' (op fill) is invalid", "[fill] the shape tensor has 274877906944 elements",
                       "at most 254"}));
}

// ensure_same_shape's x_dims and y_dims were added to ShapeCheckAttrs after its first files: a
// node without them keeps their defaults (the whole shapes compared), and lists its shape rule
// refuses are refused by name.
TEST(MalformedFiles, ShapeCheckDimsMayBeLeftOutAndAreChecked) {
  const auto file_with = [](std::vector<int64_t>* x_dims, std::vector<int64_t>* y_dims) {
    Parts p;
    const std::vector<NodeSpec> valid = valid_nodes();
    p.nodes = {valid[0], valid[1],
               {"check", tgx::NodeCode::kOp, {{0, 0}, {1, 0}}, {{float32, kVec2}}, -1, 0,
                static_cast<uint16_t>(detail::op_def(detail::OpId::EnsureSameShape).serial),
                [x_dims, y_dims](Writer& w) {
                  w.u32(1 + (x_dims ? 1 : 0) + (y_dims ? 1 : 0));
                  w.str("names");
                  w.u8(static_cast<uint8_t>(tgx::FieldCode::kStrings));
                  w.u32(3);
                  for (const char* n : {"test", "x", "c"}) w.str(n);
                  for (auto [name, dims] : {std::pair{"x_dims", x_dims}, std::pair{"y_dims", y_dims}}) {
                    if (!dims) continue;
                    w.str(name);
                    w.u8(static_cast<uint8_t>(tgx::FieldCode::kInts));
                    w.u32(static_cast<uint32_t>(dims->size()));
                    for (int64_t d : *dims) w.i64(d);
                  }
                }},
               valid[3], valid[4]};
    return file_of(p);
  };
  std::vector<int64_t> zero{0}, one{1};
  using Dims = std::vector<int64_t>*;
  for (auto [x_dims, y_dims] : {std::pair<Dims, Dims>{nullptr, nullptr}, std::pair<Dims, Dims>{&zero, &zero}}) {
    const std::string f = file_with(x_dims, y_dims);
    LoadedFunction loaded = load_from_memory(f.data(), f.size());
    EXPECT_EQ(Tensor(loaded(constant({1.0f, 2.0f}))).item<float>(), 3.0f);
  }
  EXPECT_TRUE(refused(file_with(&one, &zero), "graphs",
                      {"node 2 'check' (op ensure_same_shape) is invalid", "compares dim 1 of x", "has rank 1"}));
  EXPECT_TRUE(refused(file_with(&zero, nullptr), "graphs",
                      {"node 2 'check' (op ensure_same_shape) is invalid", "one dim of y per dim of x"}));
}

}  // namespace
}  // namespace tg
