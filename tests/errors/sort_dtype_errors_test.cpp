// sort / argsort / top_k, einsum, uint8 and tg::from_blob: each invalid input raises a typed
// error naming what was expected and what was received, eagerly and while tracing.
#include <cstdlib>

#include "ops/sort.h"
#include "support/test_util.h"

namespace tg {
namespace {

TEST(SortErrors, RankDtypeAxisAndK) {
  EXPECT_THROW_MSG(sort(constant(1.0f)), InvalidArgumentError, "[sort]", "rank >= 1", "scalar");
  EXPECT_THROW_MSG(sort(constant({true, false})), InvalidArgumentError, "[sort]", "float32", "uint8", "got bool");
  EXPECT_THROW_MSG(argsort(constant({"b", "a"})), InvalidArgumentError, "[sort]", "got string");
  EXPECT_THROW_MSG(sort(constant({1, 2}), 1), InvalidArgumentError, "[sort]", "axis 1");
  EXPECT_THROW_MSG(argsort(constant({{1, 2}}), -3), InvalidArgumentError, "[argsort]", "axis -3");
  EXPECT_THROW_MSG(top_k(constant({1, 2, 3}), 4), InvalidArgumentError, "[top_k]", "k = 4", "last dimension (3)",
                   "k <= 3");
  EXPECT_THROW_MSG(top_k(constant({1, 2, 3}), -1), InvalidArgumentError, "[top_k]", "k must be >= 0", "-1");
  EXPECT_THROW_MSG(top_k(constant(1.0f), 1), InvalidArgumentError, "[top_k]", "rank >= 1");
  EXPECT_THROW_MSG(sort(Tensor()), ValueError, "[sort]", "empty");
}

TEST(SortErrors, WhileTracing) {
  // A known last dim is checked at tracing; another axis needs a known rank.
  auto f = function([](const Tensor& x) { return top_k(x, 5).values; });
  EXPECT_THROW_MSG(f.get_concrete_function(TensorSpec({None, 3}, float32)), InvalidArgumentError, "[top_k]", "k = 5");
  auto g = function([](const Tensor& x) { return sort(x, 0); });
  EXPECT_THROW_MSG(g.get_concrete_function(TensorSpec(TensorShape::unknown_rank(), float32)), ValueError, "[sort]",
                   "axis 0", "unknown", "axis=-1");
}

TEST(SortErrors, HelperIndicesAreChecked) {
  const Tensor x = constant({{1.f, 2.f}});
  EXPECT_THROW_MSG(detail::gather_last_axis(x, constant({{2}})), InvalidArgumentError, "[gather_last_axis]",
                   "index 2", "[0, 2)");
  EXPECT_THROW_MSG(detail::gather_last_axis(x, constant({{1.f}})), InvalidArgumentError, "[gather_last_axis]",
                   "indices", "int32, int64", "got float32");
  EXPECT_THROW_MSG(detail::gather_last_axis(x, constant({0})), InvalidArgumentError, "[gather_last_axis]",
                   "same rank");
  EXPECT_THROW_MSG(detail::scatter_add_last_axis_like(constant({{1.f}}), constant({{-1}}), x), InvalidArgumentError,
                   "[scatter_add_last_axis_like]", "index -1");
}

TEST(EinsumErrors, MalformedEquations) {
  const Tensor a = zeros({2, 3}), b = zeros({3, 4});
  EXPECT_THROW_MSG(einsum("ij,jk", a, b), InvalidArgumentError, "[einsum]", "no \"->\"", "explicit output");
  EXPECT_THROW_MSG(einsum("...ij,jk->ik", a, b), InvalidArgumentError, "[einsum]", "ellipsis");
  EXPECT_THROW_MSG(einsum("ij->ij", a, b), InvalidArgumentError, "[einsum]", "names 1 operand", "2 tensors");
  EXPECT_THROW_MSG(einsum("ij,jk->ik", a), InvalidArgumentError, "[einsum]", "names 2 operands", "1 tensor was");
  EXPECT_THROW_MSG(einsum("i1,jk->ik", a, b), InvalidArgumentError, "[einsum]", "'1' is not a subscript letter");
  EXPECT_THROW_MSG(einsum("ij,jk->iz", a, b), InvalidArgumentError, "[einsum]", "'z' is in no operand");
  EXPECT_THROW_MSG(einsum("ij,jk->ii", a, b), InvalidArgumentError, "[einsum]", "repeats 'i'");
  EXPECT_THROW_MSG(einsum("iii->i", zeros({2, 2, 2})), InvalidArgumentError, "[einsum]", "more than twice");
}

TEST(EinsumErrors, ShapesMustMatchTheSubscripts) {
  EXPECT_THROW_MSG(einsum("ijk,jk->i", zeros({2, 3}), zeros({3, 4})), InvalidArgumentError, "[einsum]",
                   "operand 0 has 2 dims", "\"ijk\"", "one letter per dim");
  EXPECT_THROW_MSG(einsum("ij,jk->ik", zeros({2, 3}), zeros({4, 5})), InvalidArgumentError, "[einsum]",
                   "'j'", "dim of 3", "of 4", "must be equal");
  EXPECT_THROW_MSG(einsum("ii->", zeros({2, 3})), InvalidArgumentError, "[einsum]", "'i'", "2 and 3");
  auto f = function([](const Tensor& x) { return einsum("ii->", x); });
  EXPECT_THROW_MSG(f.get_concrete_function(TensorSpec({None, None}, float32)), InvalidArgumentError, "[einsum]",
                   "repeated letter 'i'", "known");
  auto g = function([](const Tensor& x, const Tensor& y) { return einsum("ij,jk->ik", x, y); });
  EXPECT_THROW_MSG(g.get_concrete_function(TensorSpec(TensorShape::unknown_rank(), float32), TensorSpec({3, 4}, float32)),
                   ValueError, "[einsum]", "unknown rank");
  // A contraction with dims that only disagree at run time fails in the matmul it lowers to.
  auto h = function([](const Tensor& x, const Tensor& y) { return einsum("ij,jk->ik", x, y); });
  auto cf = h.get_concrete_function(TensorSpec({None, None}, float32), TensorSpec({None, None}, float32));
  EXPECT_THROW(cf(zeros({2, 3}), zeros({4, 5})), InvalidArgumentError);
}

TEST(UInt8Errors, OpsTensorFlowDoesNotDefineOnUInt8) {
  const Tensor x = constant({1, 2}, uint8);
  for (const auto& entry : std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>>{
           {"neg", neg}, {"abs", abs}, {"sign", sign}, {"relu", relu}, {"exp", exp}, {"log", log},
           {"sqrt", sqrt}, {"tanh", tanh}, {"sigmoid", sigmoid}, {"logical_not", logical_not}}) {
    const std::string& name = entry.first;  // not a structured binding: clang 14 cannot capture one
    const auto fn = entry.second;
    SCOPED_TRACE(name);
    EXPECT_THROW_MSG(fn(x), InvalidArgumentError, "[" + name + "]", "uint8");
  }
  EXPECT_THROW_MSG(pow(x, x), InvalidArgumentError, "[pow]", "does not support dtype uint8");
  EXPECT_THROW_MSG(logical_and(x, x), InvalidArgumentError, "[logical_and]", "uint8");
  EXPECT_THROW_MSG(matmul(reshape(x, {1, 2}), reshape(x, {2, 1})), InvalidArgumentError, "[matmul]", "got uint8");
  EXPECT_THROW_MSG(reduce_sum(x), InvalidArgumentError, "[reduce_sum]", "got uint8");
  EXPECT_THROW_MSG(reduce_max(x), InvalidArgumentError, "[reduce_max]", "got uint8");
  EXPECT_THROW_MSG(argmax(x), InvalidArgumentError, "[argmax]", "got uint8");
  EXPECT_THROW_MSG(softmax(x), InvalidArgumentError, "[softmax]", "uint8");
  EXPECT_THROW_MSG(einsum("i,i->", x, x), InvalidArgumentError, "[matmul]", "got uint8");
  EXPECT_THROW_MSG(add(x, constant({1, 2})), InvalidArgumentError, "[add]", "uint8", "int32");
  // Integer division by zero names the operands as numbers.
  EXPECT_THROW_MSG(div(x, constant({0, 1}, uint8)), InvalidArgumentError, "[div]", "(1 / 0)");
  EXPECT_THROW_MSG(mod(x, constant({1, 0}, uint8)), InvalidArgumentError, "[mod]", "(2 % 0)");
}

TEST(UInt8Errors, ValuesOutOfRangeAreRefused) {
  EXPECT_THROW_MSG(constant(256, uint8), InvalidArgumentError, "[constant]", "256", "does not fit in uint8",
                   "(0 to 255)", "tg::cast");
  EXPECT_THROW_MSG(constant({1, -1}, uint8), InvalidArgumentError, "[constant]", "-1", "uint8");
  EXPECT_THROW_MSG(constant(1.5, uint8), InvalidArgumentError, "[constant]", "1.5", "uint8");
  EXPECT_THROW_MSG(constant(256.0, uint8), InvalidArgumentError, "[constant]", "256", "uint8");
  EXPECT_THROW_MSG(constant({1, 2}, uint8) + 300, InvalidArgumentError, "300", "uint8");
  EXPECT_THROW_MSG(one_hot(constant({0}), 2, 256.0, 0.0, -1, uint8), InvalidArgumentError, "[one_hot]", "256", "uint8");
  EXPECT_THROW_MSG(cast(constant({"a"}), uint8), InvalidArgumentError, "[cast]", "string", "uint8");
  EXPECT_THROW_MSG(constant({1, 2}, uint8).to_vector<int32_t>(), TypeError, "[to_vector]", "dtype uint8",
                   "int32 elements");
  EXPECT_THROW_MSG(constant({1, 2}).to_vector<uint8_t>(), TypeError, "[to_vector]", "dtype int32", "uint8 elements");
  EXPECT_THROW_MSG(random_uniform({2}, 0.0, 1.0, uint8), TypeError, "random_uniform", "got uint8");
}

TEST(FromBlobErrors, NullMisalignedStringsAndUnknownShapes) {
  int deleted = 0;
  auto deleter = [&](void*) { ++deleted; };
  alignas(8) static float buffer[4] = {1, 2, 3, 4};
  EXPECT_THROW_MSG(from_blob(nullptr, {2}, float32, deleter), InvalidArgumentError, "[from_blob]", "null pointer",
                   "(2,)");
  EXPECT_THROW_MSG(from_blob(reinterpret_cast<char*>(buffer) + 1, {2}, float32, deleter), InvalidArgumentError,
                   "[from_blob]", "not aligned to 4 bytes", "float32");
  EXPECT_THROW_MSG(from_blob(buffer, {2}, string_, deleter), TypeError, "[from_blob]", "string");
  EXPECT_THROW_MSG(from_blob(buffer, TensorShape({None, 2}), float32, deleter), InvalidArgumentError, "[from_blob]",
                   "fully defined", "(None, 2)");
  EXPECT_THROW_MSG(from_blob(buffer, TensorShape::unknown_rank(), float32, deleter), InvalidArgumentError,
                   "[from_blob]", "fully defined");
  EXPECT_EQ(deleted, 0) << "a refused buffer stays the caller's: its deleter must not run";
}

TEST(FromBlobErrors, DataPointersOfSymbolicTensorsAndWrongTypes) {
  const Tensor t = constant({1.f, 2.f});
  EXPECT_THROW_MSG(t.data<int32_t>(), TypeError, "[data]", "dtype float32", "int32 elements");
  EXPECT_THROW_MSG(Tensor().data(), ValueError, "[data]", "empty");
  auto f = function([](const Tensor& x) {
    EXPECT_THROW_MSG(x.data(), TypeError, "[data]", "symbolic");
    EXPECT_THROW_MSG(x.data<float>(), TypeError, "[data]", "symbolic");
    return x * 2.0f;
  });
  f(t);
}

}  // namespace
}  // namespace tg
