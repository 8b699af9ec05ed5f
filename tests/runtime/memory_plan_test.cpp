// plan_memory on small hand-built graphs: nothing runs, every decision is checked directly.
#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include "tracegraph/ops.h"

namespace tg {
namespace {

using detail::GraphIR;
using detail::GraphNode;
using detail::MemoryPlan;
using detail::NodeKind;
using detail::OpId;
using detail::OutputMemory;
using detail::ValueRef;
using detail::ValueType;

const ValueType f32_4{DType::Float32, TensorShape({4})};

// Builds a graph node by node; the declared types are what the planner reads.
struct Builder {
  GraphIR g{1};

  ValueRef input(const ValueType& type) {
    GraphNode n;
    n.kind = NodeKind::kPlaceholder;
    n.name = g.unique_name("x");
    n.input_index = static_cast<int>(g.placeholders.size());
    n.outputs = {type};
    const int id = g.add_node(std::move(n));
    g.placeholders.push_back(id);
    return {id, 0};
  }
  ValueRef op(OpId op, std::vector<ValueRef> inputs, const ValueType& type) {
    GraphNode n;
    n.kind = NodeKind::kOp;
    n.op = op;
    n.name = g.unique_name(detail::op_def(op).name);
    n.inputs = std::move(inputs);
    n.outputs = {type};
    return {g.add_node(std::move(n)), 0};
  }
  void output(ValueRef v) {
    GraphNode n;
    n.kind = NodeKind::kOutput;
    n.name = g.unique_name("Identity");
    n.inputs = {v};
    n.outputs = {g.nodes[static_cast<std::size_t>(v.node)].outputs[static_cast<std::size_t>(v.output)]};
    g.outputs.push_back(g.add_node(std::move(n)));
  }
};

struct Planned {
  MemoryPlan mp;
  int buffer(ValueRef v) const { return mp.buffer_of[static_cast<std::size_t>(mp.value_of(v))]; }
  bool in_place(ValueRef v) const { return mp.in_place[static_cast<std::size_t>(mp.value_of(v))]; }
  int drop_after(ValueRef v) const { return mp.drop_after[static_cast<std::size_t>(mp.value_of(v))]; }
  OutputMemory memory(ValueRef v) const { return mp.output_memory[static_cast<std::size_t>(v.node)]; }
};

Planned plan(const Builder& b) { return {detail::plan_memory(b.g)}; }

TEST(MemoryPlan, ChainRunsInOneBufferInPlace) {
  Builder b;
  const ValueRef x = b.input(f32_4);
  const ValueRef a = b.op(OpId::Tanh, {x}, f32_4);
  const ValueRef c = b.op(OpId::Neg, {a}, f32_4);
  const ValueRef d = b.op(OpId::Exp, {c}, f32_4);
  const ValueRef e = b.op(OpId::Abs, {d}, f32_4);
  b.output(e);
  const Planned p = plan(b);
  ASSERT_EQ(p.mp.buffers.size(), 1u);
  EXPECT_EQ(p.mp.buffers[0].count, 4);
  EXPECT_EQ(p.buffer(a), 0);
  EXPECT_FALSE(p.in_place(a)) << "the input is the caller's, never written";
  EXPECT_TRUE(p.in_place(c));
  EXPECT_TRUE(p.in_place(d));
  EXPECT_EQ(p.buffer(d), 0);
  EXPECT_EQ(p.memory(e), OutputMemory::kFresh);
  EXPECT_EQ(p.buffer(e), -1);
}

TEST(MemoryPlan, FreedBufferGoesToALaterValueNotToTheOpReadingIt) {
  // Transpose is not in-place: its output cannot take the buffer of the input it reads, but the
  // next transpose can take the first buffer once its value is dead.
  Builder b;
  const ValueType sq{DType::Float32, TensorShape({2, 2})};
  const ValueRef x = b.input(sq);
  const ValueRef a = b.op(OpId::Exp, {x}, sq);
  const ValueRef t1 = b.op(OpId::Transpose, {a}, sq);
  const ValueRef t2 = b.op(OpId::Transpose, {t1}, sq);
  const ValueRef t3 = b.op(OpId::Transpose, {t2}, sq);
  b.output(b.op(OpId::Neg, {t3}, sq));
  const Planned p = plan(b);
  EXPECT_EQ(p.mp.buffers.size(), 2u);
  EXPECT_NE(p.buffer(t1), p.buffer(a));
  EXPECT_EQ(p.buffer(t2), p.buffer(a));
  EXPECT_EQ(p.buffer(t3), p.buffer(t1));
  EXPECT_FALSE(p.in_place(t1) || p.in_place(t2) || p.in_place(t3));
}

TEST(MemoryPlan, ValueWithTwoReadersIsFreedAfterBoth) {
  Builder b;
  const ValueRef x = b.input(f32_4);
  const ValueRef a = b.op(OpId::Exp, {x}, f32_4);
  const ValueRef left = b.op(OpId::Tanh, {a}, f32_4);
  const ValueRef right = b.op(OpId::Neg, {a}, f32_4);
  b.output(b.op(OpId::Add, {left, right}, f32_4));
  const Planned p = plan(b);
  EXPECT_FALSE(p.in_place(left)) << "a is still read by the second branch";
  EXPECT_NE(p.buffer(left), p.buffer(a));
  EXPECT_TRUE(p.in_place(right)) << "the second reader is a's last";
  EXPECT_EQ(p.buffer(right), p.buffer(a));
  EXPECT_EQ(p.drop_after(a), right.node);
  EXPECT_EQ(p.drop_after(left), 4) << "dropped after the add";
}

TEST(MemoryPlan, OpReadingAValueTwiceMayStillWriteOverIt) {
  Builder b;
  const ValueRef x = b.input(f32_4);
  const ValueRef a = b.op(OpId::Exp, {x}, f32_4);
  const ValueRef sq = b.op(OpId::Mul, {a, a}, f32_4);
  b.output(b.op(OpId::Neg, {sq}, f32_4));
  const Planned p = plan(b);
  EXPECT_TRUE(p.in_place(sq));
  EXPECT_EQ(p.mp.buffers.size(), 1u);
}

TEST(MemoryPlan, UnreadValuesFreeTheirBufferRightAway) {
  Builder b;
  const ValueRef x = b.input(f32_4);
  const ValueRef unread = b.op(OpId::Exp, {x}, f32_4);
  const ValueRef a = b.op(OpId::Tanh, {x}, f32_4);
  b.output(b.op(OpId::Neg, {a}, f32_4));
  const Planned p = plan(b);
  EXPECT_EQ(p.drop_after(unread), unread.node);
  EXPECT_EQ(p.buffer(a), p.buffer(unread));
  EXPECT_EQ(p.mp.buffers.size(), 1u);
}

TEST(MemoryPlan, OutputsAndWhatTheyViewAreNeverInTheArena) {
  Builder b;
  const ValueType sq{DType::Float32, TensorShape({2, 2})};
  const ValueRef x = b.input(f32_4);
  const ValueRef a = b.op(OpId::Exp, {x}, f32_4);        // read by an op and returned
  const ValueRef c = b.op(OpId::Tanh, {a}, f32_4);
  const ValueRef viewed = b.op(OpId::Neg, {c}, f32_4);   // returned through a view only
  const ValueRef v = b.op(OpId::Reshape, {viewed}, sq);
  b.output(a);
  b.output(v);
  const Planned p = plan(b);
  EXPECT_EQ(p.memory(a), OutputMemory::kFresh);
  EXPECT_EQ(p.buffer(a), -1);
  EXPECT_EQ(p.drop_after(a), MemoryPlan::kAtEnd);
  EXPECT_EQ(p.memory(c), OutputMemory::kArena);
  EXPECT_FALSE(p.in_place(c)) << "a has no arena buffer to give";
  EXPECT_EQ(p.memory(viewed), OutputMemory::kFresh);
  EXPECT_FALSE(p.in_place(viewed));
  EXPECT_EQ(p.memory(v), OutputMemory::kByKernel);
  EXPECT_EQ(p.mp.storage_of[static_cast<std::size_t>(p.mp.value_of(v))], p.mp.value_of(viewed));
  EXPECT_EQ(p.mp.buffers.size(), 1u);
}

TEST(MemoryPlan, InPlaceOnlyWhenDtypeAndSizeMatch) {
  Builder b;
  const ValueType f32_2x4{DType::Float32, TensorShape({2, 4})};
  const ValueRef x = b.input(f32_4);
  const ValueRef y = b.input(f32_2x4);
  const ValueRef a = b.op(OpId::Exp, {x}, f32_4);
  const ValueRef broadcast = b.op(OpId::Add, {a, y}, f32_2x4);  // bigger than a's buffer
  const ValueRef c = b.op(OpId::Exp, {x}, f32_4);
  // No real op changes dtype in place; the rule is checked on a declared type.
  const ValueRef other_dtype = b.op(OpId::Neg, {c}, ValueType{DType::Int32, TensorShape({4})});
  const ValueRef d = b.op(OpId::Exp, {x}, f32_4);
  // A one-element view of d's buffer, broadcast against x: writing the sum over the buffer
  // would overwrite the element still being read.
  const ValueRef part = b.op(OpId::Index, {d}, ValueType{DType::Float32, TensorShape{}});
  const ValueRef e = b.op(OpId::Add, {part, x}, f32_4);
  b.output(b.op(OpId::Cast, {other_dtype}, f32_4));
  b.output(b.op(OpId::Cast, {broadcast}, f32_2x4));
  b.output(b.op(OpId::Cast, {e}, f32_4));
  const Planned p = plan(b);
  EXPECT_FALSE(p.in_place(broadcast));
  EXPECT_NE(p.buffer(broadcast), p.buffer(a));
  EXPECT_FALSE(p.in_place(other_dtype));
  EXPECT_NE(p.mp.buffers[static_cast<std::size_t>(p.buffer(other_dtype))].dtype, DType::Float32);
  EXPECT_EQ(p.buffer(d), p.buffer(c)) << "same dtype and size: d reuses c's freed buffer";
  EXPECT_FALSE(p.in_place(e)) << "the input covers only part of its buffer";
  EXPECT_NE(p.buffer(e), p.buffer(d));
}

TEST(MemoryPlan, ViewsKeepTheirSourceAlive) {
  Builder b;
  const ValueType sq{DType::Float32, TensorShape({2, 2})};
  const ValueRef x = b.input(f32_4);
  const ValueRef a = b.op(OpId::Exp, {x}, f32_4);
  const ValueRef v = b.op(OpId::Reshape, {a}, sq);  // a itself is not read after this
  const ValueRef c = b.op(OpId::Tanh, {x}, f32_4);  // must not take a's buffer: v still reads it
  const ValueRef cv = b.op(OpId::Reshape, {c}, sq);
  const ValueRef w = b.op(OpId::Mul, {v, cv}, sq);
  b.output(b.op(OpId::Neg, {w}, sq));
  const Planned p = plan(b);
  EXPECT_EQ(p.mp.storage_of[static_cast<std::size_t>(p.mp.value_of(v))], p.mp.value_of(a));
  EXPECT_EQ(p.drop_after(a), v.node) << "the slot goes; the storage lives on through the view";
  EXPECT_NE(p.buffer(c), p.buffer(a));
  EXPECT_TRUE(p.in_place(w)) << "the view's source dies at the mul and covers the whole buffer";
  EXPECT_EQ(p.buffer(w), p.buffer(a));
}

TEST(MemoryPlan, ValuesReachingStatefulOpsStayOutOfTheArena) {
  Builder b;
  const ValueRef x = b.input(f32_4);
  const ValueRef a = b.op(OpId::Exp, {x}, f32_4);
  const ValueRef kept = b.op(OpId::Reshape, {a}, f32_4);
  b.op(OpId::AssignVariable, {kept}, f32_4);  // a Variable may keep the tensor
  b.output(b.op(OpId::Neg, {x}, f32_4));
  const Planned p = plan(b);
  EXPECT_EQ(p.memory(a), OutputMemory::kFresh);
  EXPECT_TRUE(p.mp.buffers.empty());
}

TEST(MemoryPlan, NoneDimValuesAreKeptPerCallAndTheStaticPartUsesTheArena) {
  Builder b;
  const ValueType dyn{DType::Float32, TensorShape({None})};
  const ValueType scalar{DType::Float32, TensorShape{}};
  const ValueRef x = b.input(dyn);
  const ValueRef y = b.input(f32_4);
  const ValueRef a = b.op(OpId::Exp, {x}, dyn);
  const ValueRef s = b.op(OpId::ReduceSum, {a}, scalar);  // static output, None-dim input
  const ValueRef out = b.op(OpId::Neg, {s}, scalar);
  const ValueRef c = b.op(OpId::Tanh, {y}, f32_4);
  b.output(out);
  b.output(b.op(OpId::Neg, {c}, f32_4));
  const Planned p = plan(b);
  EXPECT_EQ(p.memory(a), OutputMemory::kFreshKept);
  EXPECT_EQ(p.memory(s), OutputMemory::kFreshKept) << "its shape is inferred per call too";
  EXPECT_TRUE(p.mp.dynamic_shapes[static_cast<std::size_t>(s.node)]);
  EXPECT_EQ(p.buffer(a), -1);
  EXPECT_EQ(p.memory(out), OutputMemory::kFresh);
  EXPECT_EQ(p.memory(c), OutputMemory::kArena);
  EXPECT_EQ(p.mp.buffers.size(), 1u);
}

}  // namespace
}  // namespace tg
