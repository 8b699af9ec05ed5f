// Elementwise ops: values, broadcasting, dtypes, TF integer semantics.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/simd_math.h"
#include "tracegraph/gradient.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using namespace ::tg::testing::values;

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
using UnaryFn = Tensor (*)(const Tensor&);


Fn bin(BinaryFn f) {
  return [f](const std::vector<Tensor>& in) { return f(in[0], in[1]); };
}
Fn un(UnaryFn f) {
  return [f](const std::vector<Tensor>& in) { return f(in[0]); };
}
Fn cast_to(DType d) {
  return [d](const std::vector<Tensor>& in) { return cast(in[0], d); };
}
Tensor f64(std::initializer_list<double> v) { return constant(v, float64); }
Tensor i64(std::initializer_list<int64_t> v) { return constant(v); }
Tensor strs(std::initializer_list<const char*> v) { return constant(v); }
Tensor bools(std::initializer_list<bool> v) { return constant(v); }

// ---------------------------------------------------------------------------------------------
// Op cases: run eagerly now, traced and traced+optimised later.

TG_OP_CASES(elementwise_smoke) {
  return {
      {"add", "broadcast (2,1)+(3,)", bin(&add), {constant({{1}, {2}}), constant({10, 20, 30})},
       constant({{11, 21, 31}, {12, 22, 32}})},
  };
}

TG_OP_CASES(elementwise_add_sub_mul) {
  return {
      {"add", "f32", bin(&add), {constant({1.5f, -2.f, 0.25f, 3.f}), constant({0.5f, 2.f, -0.75f, -1.f})},
       constant({2.f, 0.f, -0.5f, 2.f})},
      {"add", "f32 inf and nan", bin(&add), {constant({kInfF, kInfF, kNanF}), constant({1.f, -kInfF, 1.f})},
       constant({kInfF, kNanF, kNanF})},
      {"add", "f64", bin(&add), {f64({0.1, 1e308}), f64({0.2, 1e308})}, f64({0.30000000000000004, kInf})},
      {"add", "i32 wraps on overflow", bin(&add), {constant({1, -2, kI32Max}), constant({2, -3, 1})},
       constant({3, -5, kI32Min})},
      {"add", "i64 wraps on overflow", bin(&add), {i64({kI64Max, 5}), i64({1, -7})}, i64({kI64Min, -2})},
      {"add", "string concatenates", bin(&add), {strs({"a", "", "x"}), strs({"b", "c", ""})},
       strs({"ab", "c", "x"})},
      {"add", "string scalar + vector", bin(&add), {constant("pre-"), strs({"a", "bc"})},
       strs({"pre-a", "pre-bc"})},
      {"add", "scalar + scalar", bin(&add), {constant(2), constant(3)}, constant(5)},
      {"add", "rank 0 + rank 3", bin(&add), {constant(1.5f), constant({{{1.f, 2.f}}, {{3.f, 4.f}}})},
       constant({{{2.5f, 3.5f}}, {{4.5f, 5.5f}}})},
      {"add", "rank 3 + rank 1", bin(&add),
       {constant({{{1, 2, 3}, {4, 5, 6}}, {{7, 8, 9}, {10, 11, 12}}}), constant({100, 200, 300})},
       constant({{{101, 202, 303}, {104, 205, 306}}, {{107, 208, 309}, {110, 211, 312}}})},
      {"add", "(1,2,1) + (2,1,3)", bin(&add),
       {constant({{{1}, {2}}}), constant({{{10, 20, 30}}, {{40, 50, 60}}})},
       constant({{{11, 21, 31}, {12, 22, 32}}, {{41, 51, 61}, {42, 52, 62}}})},
      {"add", "size-1 dims on both sides", bin(&add), {constant({{1.f}}), constant({{2.f}})},
       constant({{3.f}})},
      {"add", "empty (0,3) + (1,3)", bin(&add), {zeros({0, 3}), ones({1, 3})}, zeros({0, 3})},
      {"add", "empty (0,) + scalar", bin(&add), {zeros({0}, int64), constant(int64_t{1})},
       zeros({0}, int64)},
      {"add", "empty (1,) + (0,)", bin(&add), {constant({1}), zeros({0}, int32)}, zeros({0}, int32)},
      {"sub", "f32", bin(&sub), {constant({1.5f, -2.f, 0.f}), constant({0.5f, 2.f, -0.f})},
       constant({1.f, -4.f, 0.f})},
      {"sub", "f64", bin(&sub), {f64({0.3, 1e-300}), f64({0.1, -1e-300})},
       f64({0.19999999999999998, 2e-300})},
      {"sub", "i32 wraps on overflow", bin(&sub), {constant({kI32Min, 5, 0}), constant({1, 7, kI32Min})},
       constant({kI32Max, -2, kI32Min})},
      {"sub", "i64 wraps on overflow", bin(&sub), {i64({kI64Min, 10}), i64({1, 20})}, i64({kI64Max, -10})},
      {"sub", "scalar - tensor", bin(&sub), {constant(10), constant({1, 2, 3})}, constant({9, 8, 7})},
      {"sub", "tensor - scalar", bin(&sub), {constant({1, 2, 3}), constant(10)}, constant({-9, -8, -7})},
      {"sub", "(2,1) - (1,3)", bin(&sub), {constant({{1.0}, {2.0}}, float64), constant({{1.0, 2.0, 3.0}}, float64)},
       constant({{0.0, -1.0, -2.0}, {1.0, 0.0, -1.0}}, float64)},
      {"mul", "f32", bin(&mul), {constant({1.5f, -2.f, 0.f, kInfF}), constant({2.f, 0.25f, -3.f, 0.f})},
       constant({3.f, -0.5f, -0.f, kNanF})},
      {"mul", "f64", bin(&mul), {f64({0.1, 1e200}), f64({3.0, 1e200})}, f64({0.30000000000000004, kInf})},
      {"mul", "i32 wraps on overflow", bin(&mul), {constant({65536, 46341, -3, kI32Min}), constant({65536, 46341, 7, -1})},
       constant({0, -2147479015, -21, kI32Min})},
      {"mul", "i64 wraps on overflow", bin(&mul), {i64({kI64Max, 3000000000, kI64Min}), i64({2, 3000000000, -1})},
       i64({-2, 9000000000000000000, kI64Min})},
      {"mul", "(2,1) x (1,3) outer product", bin(&mul), {constant({{1}, {2}}), constant({{10, 20, 30}})},
       constant({{10, 20, 30}, {20, 40, 60}})},
      {"mul", "empty (2,0) x (2,1)", bin(&mul), {zeros({2, 0}, float64), ones({2, 1}, float64)},
       zeros({2, 0}, float64)},
  };
}

TG_OP_CASES(elementwise_division) {
  return {
      {"div", "f32 true division, by zero gives inf/nan", bin(&div),
       {constant({1.f, -1.f, 0.f, 6.f, -7.f}), constant({0.f, 0.f, 0.f, 4.f, 2.f})},
       constant({kInfF, -kInfF, kNanF, 1.5f, -3.5f})},
      {"div", "f32 by -0", bin(&div), {constant({1.f}), constant({-0.f})}, constant({-kInfF})},
      {"div", "f64", bin(&div), {f64({1.0, 1.0, -7.0}), f64({3.0, 0.0, 2.0})},
       f64({0.3333333333333333, kInf, -3.5})},
      {"div", "i32 is floor division", bin(&div), {constant({-7, 7, -7, 7, 0, 6}), constant({2, 2, -2, -2, 5, 3})},
       constant({-4, 3, 3, -4, 0, 2})},
      {"div", "i32 INT_MIN / -1 wraps", bin(&div), {constant({kI32Min, kI32Min}), constant({-1, 1})},
       constant({kI32Min, kI32Min})},
      {"div", "i64 floor division", bin(&div), {i64({-1, 1, kI64Min, kI64Max}), i64({3, -3, -1, -2})},
       i64({-1, -1, kI64Min, -4611686018427387904})},
      {"div", "scalar / tensor", bin(&div), {constant(12.f), constant({4.f, -8.f})}, constant({3.f, -1.5f})},
      {"floordiv", "f32", bin(&floordiv), {constant({-7.f, 7.f, -7.f, 7.f, 7.5f, -0.5f}), constant({2.f, 2.f, -2.f, -2.f, 2.f, 4.f})},
       constant({-4.f, 3.f, 3.f, -4.f, 3.f, -1.f})},
      {"floordiv", "f32 by zero", bin(&floordiv), {constant({1.f, -1.f, 0.f}), constant({0.f, 0.f, 0.f})},
       constant({kInfF, -kInfF, kNanF})},
      {"floordiv", "f64", bin(&floordiv), {f64({-7.0, 1e300, 0.5}), f64({2.0, 1e-300, -0.25})},
       f64({-4.0, kInf, -2.0})},
      {"floordiv", "i32", bin(&floordiv), {constant({-7, 7, -7, 7, -1, 1, kI32Min}), constant({2, 2, -2, -2, 3, -3, -1})},
       constant({-4, 3, 3, -4, -1, -1, kI32Min})},
      {"floordiv", "i64", bin(&floordiv), {i64({-7, kI64Min, kI64Min, 9}), i64({2, -1, 2, 10})},
       i64({-4, kI64Min, -4611686018427387904, 0})},
      {"floordiv", "broadcast (2,1) // (2,)", bin(&floordiv), {constant({{-9}, {9}}), constant({4, -4})},
       constant({{-3, 2}, {2, -3}})},
      {"mod", "i32 floor modulo has the sign of the divisor", bin(&mod),
       {constant({-7, 7, -7, 7, 6, -6, 0}), constant({2, 2, -2, -2, 3, 3, -5})},
       constant({1, 1, -1, -1, 0, 0, 0})},
      {"mod", "i32 INT_MIN % -1 is 0", bin(&mod), {constant({kI32Min, kI32Min, kI32Max}), constant({-1, 7, kI32Min})},
       constant({0, 5, -1})},
      {"mod", "i64", bin(&mod), {i64({kI64Min, kI64Min, -10, 10}), i64({-1, 3, 3, -3})}, i64({0, 1, 2, -2})},
      {"mod", "f32", bin(&mod), {constant({-7.5f, 7.5f, -7.5f, 7.5f, 4.f}), constant({2.f, 2.f, -2.f, -2.f, 2.f})},
       constant({0.5f, 1.5f, -1.5f, -0.5f, 0.f})},
      {"mod", "f32 by zero is nan", bin(&mod), {constant({1.f}), constant({0.f})}, constant({kNanF})},
      {"mod", "f64", bin(&mod), {f64({5.25, -5.25, 1e-3}), f64({-2.0, 2.0, 1.0})}, f64({-0.75, 0.75, 1e-3})},
      {"mod", "tensor % scalar", bin(&mod), {constant({-3, -2, -1, 0, 1, 2, 3}), constant(3)},
       constant({0, 1, 2, 0, 1, 2, 0})},
  };
}

TG_OP_CASES(elementwise_pow_max_min) {
  return {
      {"pow", "f32", bin(&pow), {constant({2.f, 4.f, 9.f, 2.f, 0.f, -8.f, -2.f}), constant({3.f, 0.5f, 0.5f, -1.f, 0.f, 0.5f, 2.f})},
       constant({8.f, 2.f, 3.f, 0.5f, 1.f, kNanF, 4.f})},
      {"pow", "f32 zero to a negative power", bin(&pow), {constant({0.f}), constant({-1.f})}, constant({kInfF})},
      {"pow", "f64", bin(&pow), {f64({2.0, 10.0, 2.0}), f64({0.5, -2.0, 1024.0})},
       f64({1.4142135623730951, 0.01, kInf})},
      {"pow", "i32 with int exponents", bin(&pow), {constant({2, -3, 0, 5, 1, -1, 7}), constant({10, 3, 0, 0, 31, 7, 1})},
       constant({1024, -27, 1, 1, 1, -1, 7})},
      {"pow", "i32 wraps on overflow", bin(&pow), {constant({2, 3, -2}), constant({31, 21, 31})},
       constant({kI32Min, 1870418611, kI32Min})},
      {"pow", "i64", bin(&pow), {i64({2, 3, -2, 10}), i64({62, 40, 63, 18})},
       i64({4611686018427387904, -6289078614652622815, kI64Min, 1000000000000000000})},
      {"pow", "broadcast base (3,) ^ scalar", bin(&pow), {constant({1, 2, 3}), constant(2)}, constant({1, 4, 9})},
      {"maximum", "f32 propagates nan", bin(&maximum), {constant({1.f, kNanF, -0.5f, 3.f, 2.f}), constant({2.f, 1.f, kNanF, -3.f, kInfF})},
       constant({2.f, kNanF, kNanF, 3.f, kInfF})},
      {"maximum", "f64", bin(&maximum), {f64({-1.0, kNan}), f64({-2.0, kNan})}, f64({-1.0, kNan})},
      {"maximum", "i32", bin(&maximum), {constant({-5, 3, kI32Min}), constant({-7, 3, kI32Max})}, constant({-5, 3, kI32Max})},
      {"maximum", "i64 with a scalar", bin(&maximum), {i64({kI64Min, 0, 9}), constant(int64_t{1})}, i64({1, 1, 9})},
      {"minimum", "f32 propagates nan", bin(&minimum), {constant({1.f, kNanF, -0.5f, 3.f, 2.f}), constant({2.f, 1.f, kNanF, -3.f, -kInfF})},
       constant({1.f, kNanF, kNanF, -3.f, -kInfF})},
      {"minimum", "f64", bin(&minimum), {f64({-1.0, 5.0}), f64({-2.0, kNan})}, f64({-2.0, kNan})},
      {"minimum", "i32 broadcast (2,1) x (3,)", bin(&minimum), {constant({{0}, {5}}), constant({-1, 3, 9})},
       constant({{-1, 0, 0}, {-1, 3, 5}})},
      {"minimum", "i64", bin(&minimum), {i64({kI64Min, kI64Max}), i64({0, 0})}, i64({kI64Min, 0})},
  };
}

TG_OP_CASES(elementwise_compare) {
  const Tensor fa = constant({1.f, kNanF, 2.f, -0.f, 3.f});
  const Tensor fb = constant({1.f, kNanF, 3.f, 0.f, 2.f});
  return {
      {"equal", "f32 (nan != nan, -0 == 0)", bin(&equal), {fa, fb}, bools({true, false, false, true, false})},
      {"equal", "f64", bin(&equal), {f64({0.1 + 0.2, 0.5}), f64({0.3, 0.5})}, bools({false, true})},
      {"equal", "i32 broadcast scalar", bin(&equal), {constant({1, 3, 3}), constant(3)}, bools({false, true, true})},
      {"equal", "i64", bin(&equal), {i64({kI64Min, 1}), i64({kI64Min, 2})}, bools({true, false})},
      {"equal", "bool", bin(&equal), {bools({true, true, false, false}), bools({true, false, true, false})},
       bools({true, false, false, true})},
      {"equal", "string", bin(&equal), {strs({"a", "ab", ""}), strs({"a", "a", ""})}, bools({true, false, true})},
      {"equal", "string scalar vs (2,1)", bin(&equal), {constant({{"x"}, {"y"}}), constant("x")},
       constant({{true}, {false}})},
      {"equal", "empty (0,3)", bin(&equal), {zeros({0, 3}), zeros({1, 3})}, zeros({0, 3}, bool_)},
      {"not_equal", "f32 (nan != nan)", bin(&not_equal), {fa, fb}, bools({false, true, true, false, true})},
      {"not_equal", "f64", bin(&not_equal), {f64({1.0, kNan}), f64({1.0, 1.0})}, bools({false, true})},
      {"not_equal", "i32", bin(&not_equal), {constant({1, 2}), constant({1, 3})}, bools({false, true})},
      {"not_equal", "i64", bin(&not_equal), {i64({7}), i64({8})}, bools({true})},
      {"not_equal", "bool (2,1) x (2,)", bin(&not_equal), {constant({{true}, {false}}), bools({true, false})},
       constant({{false, true}, {true, false}})},
      {"not_equal", "string", bin(&not_equal), {strs({"a", "b"}), strs({"a", "c"})}, bools({false, true})},
      {"less", "f32 (nan compares false)", bin(&less), {fa, fb}, bools({false, false, true, false, false})},
      {"less", "f64", bin(&less), {f64({-kInf, 1.0}), f64({0.0, 1.0})}, bools({true, false})},
      {"less", "i32 scalar < tensor", bin(&less), {constant(2), constant({1, 2, 3})}, bools({false, false, true})},
      {"less", "i64", bin(&less), {i64({kI64Min, 5}), i64({kI64Max, 5})}, bools({true, false})},
      {"less_equal", "f32", bin(&less_equal), {fa, fb}, bools({true, false, true, true, false})},
      {"less_equal", "f64", bin(&less_equal), {f64({1.0, 2.0}), f64({1.0, 1.5})}, bools({true, false})},
      {"less_equal", "i32", bin(&less_equal), {constant({-1, 0, 1}), constant(0)}, bools({true, true, false})},
      {"less_equal", "i64", bin(&less_equal), {i64({3}), i64({2})}, bools({false})},
      {"greater", "f32", bin(&greater), {fa, fb}, bools({false, false, false, false, true})},
      {"greater", "f64", bin(&greater), {f64({kInf, kNan}), f64({1e308, 0.0})}, bools({true, false})},
      {"greater", "i32 (2,1) x (1,2)", bin(&greater), {constant({{1}, {3}}), constant({{2, 0}})},
       constant({{false, true}, {true, true}})},
      {"greater", "i64", bin(&greater), {i64({0, -1}), i64({-1, 0})}, bools({true, false})},
      {"greater_equal", "f32", bin(&greater_equal), {fa, fb}, bools({true, false, false, true, true})},
      {"greater_equal", "f64", bin(&greater_equal), {f64({1.0}), f64({1.0})}, bools({true})},
      {"greater_equal", "i32", bin(&greater_equal), {constant({-1, 0, 1}), constant(0)}, bools({false, true, true})},
      {"greater_equal", "i64", bin(&greater_equal), {i64({kI64Min}), i64({kI64Min + 1})}, bools({false})},
  };
}

TG_OP_CASES(elementwise_logical) {
  const Tensor a = bools({true, true, false, false});
  const Tensor b = bools({true, false, true, false});
  return {
      {"logical_and", "truth table", bin(&logical_and), {a, b}, bools({true, false, false, false})},
      {"logical_and", "with a scalar", bin(&logical_and), {a, constant(true)}, a},
      {"logical_and", "(2,1) x (2,)", bin(&logical_and), {constant({{true}, {false}}), bools({true, false})},
       constant({{true, false}, {false, false}})},
      {"logical_and", "empty", bin(&logical_and), {zeros({0}, bool_), constant(true)}, zeros({0}, bool_)},
      {"logical_or", "truth table", bin(&logical_or), {a, b}, bools({true, true, true, false})},
      {"logical_or", "scalar with tensor", bin(&logical_or), {constant(false), b}, b},
      {"logical_or", "(2,1) x (1,2)", bin(&logical_or), {constant({{true}, {false}}), constant({{true, false}})},
       constant({{true, true}, {true, false}})},
      {"logical_not", "bool", un(&logical_not), {a}, bools({false, false, true, true})},
      {"logical_not", "scalar", un(&logical_not), {constant(false)}, constant(true)},
      {"logical_not", "empty", un(&logical_not), {zeros({2, 0}, bool_)}, zeros({2, 0}, bool_)},
  };
}

TG_OP_CASES(elementwise_unary_arith) {
  return {
      {"neg", "f32", un(&neg), {constant({1.f, -2.f, 0.f, kInfF, kNanF})}, constant({-1.f, 2.f, -0.f, -kInfF, kNanF})},
      {"neg", "f64", un(&neg), {f64({0.5, -1e300})}, f64({-0.5, 1e300})},
      {"neg", "i32 (INT_MIN wraps to itself)", un(&neg), {constant({3, -4, 0, kI32Min, kI32Max})},
       constant({-3, 4, 0, kI32Min, -kI32Max})},
      {"neg", "i64", un(&neg), {i64({kI64Min, 5})}, i64({kI64Min, -5})},
      {"neg", "rank 3", un(&neg), {constant({{{1}}, {{2}}})}, constant({{{-1}}, {{-2}}})},
      {"abs", "f32", un(&abs), {constant({-1.5f, 2.f, -0.f, -kInfF, kNanF})}, constant({1.5f, 2.f, 0.f, kInfF, kNanF})},
      {"abs", "f64", un(&abs), {f64({-1e-300, 3.0})}, f64({1e-300, 3.0})},
      {"abs", "i32 (INT_MIN stays INT_MIN)", un(&abs), {constant({-3, 0, 4, kI32Min})}, constant({3, 0, 4, kI32Min})},
      {"abs", "i64", un(&abs), {i64({-9000000000, kI64Min, kI64Max})}, i64({9000000000, kI64Min, kI64Max})},
      {"sign", "f32", un(&sign), {constant({-2.f, 0.f, 3.f, kNanF, -kInfF, 1e-30f})},
       constant({-1.f, 0.f, 1.f, kNanF, -1.f, 1.f})},
      {"sign", "f64", un(&sign), {f64({-0.5, 0.0, 1e300})}, f64({-1.0, 0.0, 1.0})},
      {"sign", "i32", un(&sign), {constant({-5, 0, 7, kI32Min})}, constant({-1, 0, 1, -1})},
      {"sign", "i64", un(&sign), {i64({kI64Min, 0, kI64Max})}, i64({-1, 0, 1})},
      {"square", "f32", un(&square), {constant({-3.f, 0.5f, 1e20f})}, constant({9.f, 0.25f, kInfF})},
      {"square", "f64", un(&square), {f64({-1.5, 1e200})}, f64({2.25, kInf})},
      {"square", "i32 wraps on overflow", un(&square), {constant({-4, 46341, 65536})}, constant({16, -2147479015, 0})},
      {"square", "i64", un(&square), {i64({-3000000000, 4294967296})}, i64({9000000000000000000, 0})},
      {"relu", "f32 (nan propagates)", un(&relu), {constant({-1.f, 0.f, 2.5f, -kInfF, kInfF, kNanF})},
       constant({0.f, 0.f, 2.5f, 0.f, kInfF, kNanF})},
      {"relu", "f64", un(&relu), {f64({-1e-300, 1e-300})}, f64({0.0, 1e-300})},
      {"relu", "i32", un(&relu), {constant({-7, 0, 7, kI32Min})}, constant({0, 0, 7, 0})},
      {"relu", "i64", un(&relu), {i64({kI64Min, kI64Max})}, i64({0, kI64Max})},
      {"relu", "empty", un(&relu), {zeros({0, 2})}, zeros({0, 2})},
  };
}

// Expected values: the functions in double on the float32 inputs, to 9 significant digits.
TG_OP_CASES(elementwise_math) {
  constexpr double kTol32 = 1e-6, kTol64 = 1e-13;
  return {
      {"sqrt", "f32", un(&sqrt), {constant({0.f, 1.f, 2.f, 4.f, 1e-8f, 0.25f, 1e30f})},
       constant({0.f, 1.f, 1.41421356f, 2.f, 9.99999997e-05f, 0.5f, 1.00000001e+15f}), kTol32},
      {"sqrt", "f32 negative is nan", un(&sqrt), {constant({-1.f, kInfF, kNanF, -0.f})},
       constant({kNanF, kInfF, kNanF, -0.f})},
      {"sqrt", "f64", un(&sqrt), {f64({2.0, 1e-8, 1e30, -4.0})}, f64({1.4142135623730951, 1e-4, 1e15, kNan}), kTol64},
      {"rsqrt", "f32", un(&rsqrt), {constant({1.f, 4.f, 0.25f, 2.f, 1e-6f})},
       constant({1.f, 0.5f, 2.f, 0.707106781f, 1000.f}), kTol32},
      {"rsqrt", "f32 at 0, -1 and inf", un(&rsqrt), {constant({0.f, -1.f, kInfF})}, constant({kInfF, kNanF, 0.f})},
      {"rsqrt", "f64", un(&rsqrt), {f64({2.0, 0.25, 0.0})}, f64({0.70710678118654746, 2.0, kInf}), kTol64},
  };
}

TG_OP_CASES(elementwise_cast) {
  return {
      {"cast", "f32 -> i32 truncates, saturates, nan -> 0", cast_to(int32),
       {constant({-2.7f, 2.7f, -0.5f, kNanF, 1e10f, -1e10f, kInfF, -kInfF, 2147483520.f})},
       constant({-2, 2, 0, 0, kI32Max, kI32Min, kI32Max, kI32Min, 2147483520})},
      {"cast", "f32 -> i64", cast_to(int64), {constant({-2.7f, 1e19f, -1e19f, kNanF, 1099511627776.f})},
       i64({-2, kI64Max, kI64Min, 0, 1099511627776})},
      {"cast", "f64 -> i32", cast_to(int32), {f64({2147483647.9, -2147483648.9, 1e300, -3.99})},
       constant({kI32Max, kI32Min, kI32Max, -3})},
      {"cast", "f64 -> i64", cast_to(int64), {f64({9.3e18, -9.3e18, 4503599627370497.0})},
       i64({kI64Max, kI64Min, 4503599627370497})},
      {"cast", "f64 -> f32 rounds", cast_to(float32), {f64({0.1, 1e-50, -2.5})}, constant({0.1f, 0.f, -2.5f})},
      {"cast", "f32 -> f64 widens exactly", cast_to(float64), {constant({0.1f, kInfF})},
       f64({0.100000001490116119384765625, kInf})},
      {"cast", "f32 -> bool is != 0", cast_to(bool_), {constant({0.f, -0.f, 0.5f, kNanF, -kInfF})},
       bools({false, false, true, true, true})},
      {"cast", "f64 -> bool", cast_to(bool_), {f64({0.0, 1e-300})}, bools({false, true})},
      {"cast", "i32 -> bool", cast_to(bool_), {constant({0, 1, -1, kI32Min})}, bools({false, true, true, true})},
      {"cast", "i64 -> bool", cast_to(bool_), {i64({0, 1LL << 40})}, bools({false, true})},
      {"cast", "bool -> f32", cast_to(float32), {bools({true, false})}, constant({1.f, 0.f})},
      {"cast", "bool -> f64", cast_to(float64), {bools({true})}, f64({1.0})},
      {"cast", "bool -> i32", cast_to(int32), {bools({true, false})}, constant({1, 0})},
      {"cast", "bool -> i64", cast_to(int64), {bools({false, true})}, i64({0, 1})},
      {"cast", "bool -> bool", cast_to(bool_), {bools({false, true})}, bools({false, true})},
      {"cast", "i32 -> f32", cast_to(float32), {constant({-3, 16777217})}, constant({-3.f, 16777216.f})},
      {"cast", "i32 -> f64", cast_to(float64), {constant({kI32Min, 7})}, f64({-2147483648.0, 7.0})},
      {"cast", "i32 -> i64 sign-extends", cast_to(int64), {constant({-1, kI32Max, kI32Min})},
       i64({-1, 2147483647, -2147483648LL})},
      {"cast", "i64 -> i32 keeps the low bits", cast_to(int32), {i64({4294967301LL, 2147483648LL, -1, -4294967296LL})},
       constant({5, kI32Min, -1, 0})},
      {"cast", "i64 -> f64", cast_to(float64), {i64({kI64Min, 9007199254740993})},
       f64({-9223372036854775808.0, 9007199254740992.0})},
      {"cast", "i64 -> f32", cast_to(float32), {i64({-5, 1LL << 40})}, constant({-5.f, 1099511627776.f})},
      {"cast", "f32 -> f32", cast_to(float32), {constant({{1.5f}, {kNanF}})}, constant({{1.5f}, {kNanF}})},
      {"cast", "string -> string", cast_to(string_), {strs({"a", "bc"})}, strs({"a", "bc"})},
      {"cast", "scalar", cast_to(float32), {constant(3)}, constant(3.f)},
      {"cast", "empty", cast_to(int64), {zeros({0, 2})}, zeros({0, 2}, int64)},
  };
}

TG_OP_CASES(elementwise_like) {
  return {
      {"identity", "f32", un(&identity), {constant({{1.f, kNanF}})}, constant({{1.f, kNanF}})},
      {"identity", "f64", un(&identity), {f64({0.1})}, f64({0.1})},
      {"identity", "i32 scalar", un(&identity), {constant(4)}, constant(4)},
      {"identity", "i64", un(&identity), {i64({kI64Min})}, i64({kI64Min})},
      {"identity", "bool", un(&identity), {bools({true, false})}, bools({true, false})},
      {"identity", "string", un(&identity), {strs({"x", ""})}, strs({"x", ""})},
      {"identity", "empty", un(&identity), {zeros({0, 3}, int32)}, zeros({0, 3}, int32)},
      {"stop_gradient", "f32", un(&stop_gradient), {constant({{1.f, kNanF}})}, constant({{1.f, kNanF}})},
      {"stop_gradient", "i64", un(&stop_gradient), {i64({kI64Min})}, i64({kI64Min})},
      {"stop_gradient", "empty", un(&stop_gradient), {zeros({0, 3})}, zeros({0, 3})},
      {"zeros_like", "f32", un(&zeros_like), {constant({{1.f, kNanF}})}, constant({{0.f, 0.f}})},
      {"zeros_like", "f64", un(&zeros_like), {f64({2.0})}, f64({0.0})},
      {"zeros_like", "i32 scalar", un(&zeros_like), {constant(4)}, constant(0)},
      {"zeros_like", "i64", un(&zeros_like), {i64({kI64Min, 3})}, i64({0, 0})},
      {"zeros_like", "bool", un(&zeros_like), {bools({true})}, bools({false})},
      {"zeros_like", "string", un(&zeros_like), {strs({"x", "y"})}, strs({"", ""})},
      {"zeros_like", "empty", un(&zeros_like), {zeros({2, 0})}, zeros({2, 0})},
      {"ones_like", "f32", un(&ones_like), {constant({{-1.f, kNanF}})}, constant({{1.f, 1.f}})},
      {"ones_like", "f64", un(&ones_like), {f64({0.0})}, f64({1.0})},
      {"ones_like", "i32 scalar", un(&ones_like), {constant(-4)}, constant(1)},
      {"ones_like", "i64", un(&ones_like), {i64({5, 6})}, i64({1, 1})},
      {"ones_like", "bool", un(&ones_like), {bools({false, true})}, bools({true, true})},
      {"ones_like", "empty", un(&ones_like), {zeros({0}, int64)}, zeros({0}, int64)},
  };
}

TG_OP_CASES(elementwise_where) {
  auto w = [](const std::vector<Tensor>& in) { return where(in[0], in[1], in[2]); };
  const Tensor c = bools({true, false, true});
  return {
      {"where", "f32", w, {c, constant({1.f, 2.f, 3.f}), constant({-1.f, -2.f, kNanF})}, constant({1.f, -2.f, 3.f})},
      {"where", "f64", w, {c, f64({1.0, 2.0, 3.0}), f64({-1.0, -2.0, -3.0})}, f64({1.0, -2.0, 3.0})},
      {"where", "i32", w, {c, constant({1, 2, 3}), constant({-1, -2, -3})}, constant({1, -2, 3})},
      {"where", "i64", w, {c, i64({kI64Max, 0, 0}), i64({0, kI64Min, 0})}, i64({kI64Max, kI64Min, 0})},
      {"where", "bool", w, {c, bools({false, false, false}), bools({true, true, true})}, bools({false, true, false})},
      {"where", "string", w, {c, strs({"a", "b", "c"}), strs({"x", "y", "z"})}, strs({"a", "y", "c"})},
      {"where", "scalar condition", w, {constant(false), constant({1, 2}), constant({3, 4})}, constant({3, 4})},
      {"where", "scalar x and y", w, {c, constant(1.f), constant(0.f)}, constant({1.f, 0.f, 1.f})},
      {"where", "(2,1) cond x (1,3) x scalar", w,
       {constant({{true}, {false}}), constant({{1, 2, 3}}), constant(0)}, constant({{1, 2, 3}, {0, 0, 0}})},
      {"where", "(3,) cond x (2,1) x (2,3)", w,
       {c, constant({{10}, {20}}), constant({{1, 2, 3}, {4, 5, 6}})}, constant({{10, 2, 10}, {20, 5, 20}})},
      {"where", "empty", w, {zeros({0}, bool_), zeros({0}), constant(1.f)}, zeros({0})},
  };
}

// ---------------------------------------------------------------------------------------------
// TF semantics that the table shows only in part.

TEST(Elementwise, Smoke) {
  Tensor a = ones({2, 2});
  EXPECT_EQ((a + a).to_string(), "tg.Tensor([[2. 2.] [2. 2.]], shape=(2, 2), dtype=float32)");
  EXPECT_EQ((constant(1.1f) + constant(1.1f)).to_string(), "tg.Tensor(2.2, shape=(), dtype=float32)");
  EXPECT_EQ((constant("a") + constant("a")).to_string(), "tg.Tensor(b'aa', shape=(), dtype=string)");
  EXPECT_EQ((constant({-7, 7}) / 2).to_vector<int32_t>(), (std::vector<int32_t>{-4, 3}));
  EXPECT_EQ((constant({-7, 7}) % 3).to_vector<int32_t>(), (std::vector<int32_t>{2, 1}));
  EXPECT_TENSOR_NEAR(tanh(constant({0.5f, -1.0f})), constant({0.46211716f, -0.7615942f}), 1e-6);
}

TEST(Elementwise, IntegerFloorDivisionAndModuloExamples) {
  EXPECT_EQ(floordiv(constant(-7), constant(2)).item<int32_t>(), -4);
  EXPECT_EQ(mod(constant(-7), constant(2)).item<int32_t>(), 1);
  EXPECT_EQ(mod(constant(7), constant(-2)).item<int32_t>(), -1);
  EXPECT_EQ((constant(kI32Min) / -1).item<int32_t>(), kI32Min);
  EXPECT_EQ((constant(kI64Min) % int64_t{-1}).item<int64_t>(), 0);
}

TEST(Elementwise, OutputsAreFreshTensors) {
  const Tensor x = constant({1.f, 2.f});
  const Tensor y = neg(x);
  EXPECT_NE(x.impl(), y.impl());
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1.f, 2.f}));  // inputs untouched
  const Tensor id = identity(x);
  EXPECT_EQ(id.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(id.shape(), x.shape());
}

// ---- property checks --------------------------------------------------------------------------

// Deterministic pseudo-random integers covering the whole range and the extremes.
std::vector<int64_t> wide_ints(std::size_t n, uint64_t seed) {
  std::vector<int64_t> v = {0, 1, -1, kI64Min, kI64Max, kI64Min + 1, 7, -7};
  uint64_t s = seed;
  while (v.size() < n) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint64_t r = s ^ (s >> 29);
    const int shift = static_cast<int>(r % 60);  // magnitudes of all sizes
    v.push_back(static_cast<int64_t>(r) >> shift);
  }
  v.resize(n);
  return v;
}

TEST(ElementwiseProperties, SubtractingItselfGivesZero) {
  const Tensor f = random_uniform({257}, -1e6f, 1e6f, 11);
  EXPECT_TENSOR_EQ(f - f, zeros({257}));
  const Tensor d = cast(random_uniform({33}, -5.0f, 5.0f, 12), float64);
  EXPECT_TENSOR_EQ(d - d, zeros({33}, float64));
  const Tensor l = constant(wide_ints(200, 1), {200}, int64);
  EXPECT_TENSOR_EQ(l - l, zeros({200}, int64));
  const Tensor i = cast(l, int32);
  EXPECT_TENSOR_EQ(i - i, zeros({200}, int32));
}

TEST(ElementwiseProperties, AddingZeroIsIdentity) {
  const Tensor f = random_uniform({3, 67}, -100.f, 100.f, 21);
  EXPECT_TENSOR_EQ(f + 0, f);
  EXPECT_TENSOR_EQ(0.0f + f, f);
  EXPECT_TENSOR_EQ(add(f, zeros_like(f)), f);
  const Tensor l = constant(wide_ints(100, 2), {100}, int64);
  EXPECT_TENSOR_EQ(l + 0, l);
  EXPECT_TENSOR_EQ(mul(l, ones_like(l)), l);
  const Tensor s = constant({"a", "bc"});
  EXPECT_TENSOR_EQ(s + "", s);
}

TEST(ElementwiseProperties, CommutativeOpsCommute) {
  const Tensor a = random_uniform({5, 1, 7}, -3.f, 3.f, 31);
  const Tensor b = random_uniform({4, 1}, -3.f, 3.f, 32);
  for (BinaryFn f : {&add, &mul, &maximum, &minimum, &equal, &not_equal})
    EXPECT_TENSOR_EQ(f(a, b), f(b, a));
  const Tensor x = constant(wide_ints(64, 3), {8, 8}, int64);
  const Tensor y = constant(wide_ints(8, 4), {8}, int64);
  for (BinaryFn f : {&add, &mul, &maximum, &minimum}) EXPECT_TENSOR_EQ(f(x, y), f(y, x));
  EXPECT_TENSOR_EQ(logical_and(x > 0, y < 0), logical_and(y < 0, x > 0));
  EXPECT_TENSOR_EQ(logical_or(x > 0, y < 0), logical_or(y < 0, x > 0));
}

TEST(ElementwiseProperties, FloorDivisionAndModuloRecombine) {
  // (a // b) * b + a % b == a for every nonzero b, in wrapping arithmetic.
  std::vector<int64_t> av = wide_ints(400, 5), bv = wide_ints(400, 6);
  for (auto& b : bv)
    if ((b & 0xffffffff) == 0) b += 3;  // nonzero in int32 too
  for (DType d : {int64, int32}) {
    const Tensor a = cast(constant(av, {400}, int64), d);
    const Tensor b = cast(constant(bv, {400}, int64), d);
    EXPECT_TENSOR_EQ(floordiv(a, b) * b + mod(a, b), a) << to_string(d);
    EXPECT_TENSOR_EQ(div(a, b), floordiv(a, b));
    // The remainder has the sign of the divisor and is smaller than it.
    const Tensor r = mod(a, b);
    EXPECT_TENSOR_EQ(logical_or(r == 0, (r < 0) == (b < 0)), fill({400}, true));
  }
  // Small operands in every sign combination, broadcast (n,1) x (m,).
  const Tensor a = range(-12, 13);
  const Tensor b = constant({-5, -3, -2, -1, 1, 2, 3, 5});
  const Tensor a2 = constant(a.to_vector<int32_t>(), {25, 1});
  EXPECT_TENSOR_EQ((a2 / b) * b + a2 % b, a2 + zeros({25, 8}, int32));
}

TEST(ElementwiseProperties, FloatFloorDivisionAndModuloRecombine) {
  const Tensor a = constant({-7.5f, 7.5f, -7.5f, 7.5f, 0.25f, -3.f});
  const Tensor b = constant({2.f, 2.f, -2.f, -2.f, 0.5f, 1.5f});
  EXPECT_TENSOR_NEAR(floordiv(a, b) * b + mod(a, b), a, 1e-6);
}

// ---- leaky_relu, rounding, and softplus at TF's thresholds ----

Tensor f32v(const std::vector<double>& xs) {
  return cast(constant(xs, TensorShape{static_cast<int64_t>(xs.size())}, float64), float32);
}
Tensor f64v(const std::vector<double>& xs) {
  return constant(xs, TensorShape{static_cast<int64_t>(xs.size())}, float64);
}
// f on each value, in float32 / float64 (the double result rounded once); tolerance 4e-7 for
// float32 (a few ULP), 4e-15 for float64.
std::vector<testing::OpCase> unary_cases(const std::string& op, Fn fn, const std::vector<double>& xs,
                                         double (*f)(double), const std::string& what) {
  std::vector<float> y32;
  std::vector<double> y64;
  for (double x : xs) {
    y32.push_back(static_cast<float>(f(x)));
    y64.push_back(f(x));
  }
  return {{op, "f32 " + what, fn, {f32v(xs)}, constant(y32, TensorShape{static_cast<int64_t>(xs.size())}, float32), 4e-7},
          {op, "f64 " + what, fn, {f64v(xs)}, f64v(y64), 4e-15}};
}
void append(std::vector<testing::OpCase>& to, std::vector<testing::OpCase> more) {
  for (auto& c : more) to.push_back(std::move(c));
}
Fn leaky(double alpha) {
  return [alpha](const std::vector<Tensor>& in) { return leaky_relu(in[0], alpha); };
}

// leaky_relu, and rounding: half to even, signed zeros kept, integers unchanged.
TG_OP_CASES(elementwise_leaky_relu_and_rounding) {
  std::vector<testing::OpCase> c;
  c.push_back({"leaky_relu", "f32 alpha 0.2 (default)", un([](const Tensor& x) { return leaky_relu(x); }),
               {f32v({-1.0, 0.0, -0.0, 2.0, -kInf, kInf, kNan})},
               constant({-0.2f, 0.0f, -0.0f, 2.0f, -kInfF, kInfF, kNanF})});
  c.push_back({"leaky_relu", "f64 alpha 3 (> 1: a select, not a max)", leaky(3.0), {f64v({-1.0, 2.0, -0.5})},
               f64v({-3.0, 2.0, -1.5})});
  c.push_back({"leaky_relu", "f32 negative alpha", leaky(-0.5), {f32v({-2.0, 4.0})}, constant({1.0f, 4.0f})});
  c.push_back({"leaky_relu", "f32 (2,3)", leaky(0.1), {constant({{-1.f, 1.f, -10.f}, {0.f, 3.f, -0.5f}})},
               constant({{-0.1f, 1.f, -1.f}, {0.f, 3.f, -0.05f}})});
  // Rounding: half to even, signed zeros kept, integers unchanged.
  const std::vector<double> halves = {-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 0.49999997, 1e20, kInf, -kInf, kNan};
  append(c, unary_cases("floor", un(&floor), halves, [](double x) { return std::floor(x); }, "halves and specials"));
  append(c, unary_cases("ceil", un(&ceil), halves, [](double x) { return std::ceil(x); }, "halves and specials"));
  c.push_back({"round", "f32 half to even", un(&round), {f32v(halves)},
               f32v({-2.0, -2.0, -0.0, -0.0, 0.0, 2.0, 2.0, 0.0, 1e20, kInf, -kInf, kNan})});
  c.push_back({"round", "f64 half to even", un(&round), {f64v({-3.5, 3.5, 0.5000000000000001, -0.49999999999999994})},
               f64v({-4.0, 4.0, 1.0, -0.0})});
  c.push_back({"round", "i32 unchanged", un(&round), {constant({-3, 0, 7, kI32Max})}, constant({-3, 0, 7, kI32Max})});
  c.push_back({"round", "i64 unchanged", un(&round), {constant({kI64Min, int64_t{5}})}, constant({kI64Min, int64_t{5}})});
  return c;
}

// TF's Softplus kernel (tensorflow/core/kernels/softplus_op.h) with t = log(epsilon) + 2
// computed in the dtype: x where x > -t, e^x where x < t, log1p(e^x) between. The float32 e^x
// and log1p are the library's exp and log1p ops (the routines every float32 path evaluates, see
// simd_math.h); float64's are libm's, as the float64 kernels'.
Tensor tf_softplus_f32(const std::vector<float>& xs) {
  const float t = std::log(std::numeric_limits<float>::epsilon()) + 2.0f;
  const auto n = static_cast<int64_t>(xs.size());
  const Tensor x = constant(xs, TensorShape{n}, float32);
  const std::vector<float> e = exp(x).to_vector<float>();
  const std::vector<float> l = log1p(exp(x)).to_vector<float>();
  std::vector<float> y(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) y[i] = xs[i] > -t ? xs[i] : xs[i] < t ? e[i] : l[i];
  return constant(y, TensorShape{n}, float32);
}
Tensor tf_softplus_f64(const std::vector<double>& xs) {
  const double t = std::log(std::numeric_limits<double>::epsilon()) + 2.0;
  std::vector<double> y;
  for (double x : xs) y.push_back(x > -t ? x : x < t ? std::exp(x) : std::log1p(std::exp(x)));
  return constant(y, TensorShape{static_cast<int64_t>(y.size())}, float64);
}

// Each threshold, its neighbours on both sides and points a little further off, plus the
// special values; every mode of the harness must give these bits exactly. The "fused" cases
// subtract a zero input first, so that the optimised graph runs softplus inside a fused kernel.
TG_OP_CASES(math_softplus_thresholds) {
  const float t32 = std::log(std::numeric_limits<float>::epsilon()) + 2.0f;  // -13.942385
  const double t64 = std::log(std::numeric_limits<double>::epsilon()) + 2.0;  // -34.04365338911715
  std::vector<float> x32 = {-kInfF, -100.0f, -15.0f, -14.9f, -14.0f, -13.9f, -13.0f, 0.0f, 13.0f, 13.9f, 14.0f, 15.0f,
                            kInfF, kNanF};
  std::vector<double> x64 = {-kInf, -100.0, -36.0, -34.1, -34.0, -30.0, 0.0, 30.0, 34.0, 34.1, 36.0, kInf, kNan};
  // Two floats below each edge, the edge, two above.
  for (float edge : {t32, -t32}) {
    float x = std::nextafter(std::nextafter(edge, -kInfF), -kInfF);
    for (int k = 0; k < 5; ++k, x = std::nextafter(x, kInfF)) x32.push_back(x);
  }
  for (double edge : {t64, -t64}) {
    double x = std::nextafter(std::nextafter(edge, -kInf), -kInf);
    for (int k = 0; k < 5; ++k, x = std::nextafter(x, kInf)) x64.push_back(x);
  }
  const Tensor x32t = constant(x32, TensorShape{static_cast<int64_t>(x32.size())}, float32);
  const Tensor x64t = constant(x64, TensorShape{static_cast<int64_t>(x64.size())}, float64);
  const Fn shifted = [](const std::vector<Tensor>& in) { return softplus(in[0] - in[1]); };
  return {
      {"softplus", "f32 around TF's thresholds", un(&softplus), {x32t}, tf_softplus_f32(x32), 0.0},
      {"softplus", "f64 around TF's thresholds", un(&softplus), {x64t}, tf_softplus_f64(x64), 0.0},
      {"softplus", "f32 around TF's thresholds, fused", shifted, {x32t, zeros_like(x32t)}, tf_softplus_f32(x32), 0.0},
      {"softplus", "f64 around TF's thresholds, fused", shifted, {x64t, zeros_like(x64t)}, tf_softplus_f64(x64), 0.0},
  };
}

TEST(MathSoftplus, ThresholdsAreTfsForEachDtype) {
  EXPECT_EQ(detail::simd::kSoftplusLinearAboveF32, -(std::log(std::numeric_limits<float>::epsilon()) + 2.0f));
  EXPECT_EQ(detail::simd::kSoftplusLinearAboveF64, -(std::log(std::numeric_limits<double>::epsilon()) + 2.0));
  // Below the threshold the result is e^x itself, not log1p(e^x) (which differs in the last bits).
  const Tensor x = constant({-14.9f, -20.0f});
  EXPECT_TENSOR_EQ(softplus(x), exp(x));
  EXPECT_FALSE(testing::tensors_near(log1p(exp(x)), exp(x), 0.0));
  const Tensor x64 = constant({-34.5, -36.0}, float64);
  EXPECT_TENSOR_EQ(softplus(x64), exp(x64));
  EXPECT_FALSE(testing::tensors_near(log1p(exp(x64)), exp(x64), 0.0));
}

// ---- float32 transcendental ops on the SIMD path ---------------------------------------------

TEST(ElementwiseSimd, SaturationAndSpecialValues) {
  // Large |x|: tanh and sigmoid saturate without producing nan.
  std::vector<float> big;
  for (float m = 10.f; m < 3e38f; m *= 7.f) {
    big.push_back(m);
    big.push_back(-m);
  }
  big.push_back(std::numeric_limits<float>::max());
  big.push_back(-std::numeric_limits<float>::max());
  const Tensor x = constant(big, {static_cast<int64_t>(big.size())});
  const auto t = tanh(x).to_vector<float>();
  const auto s = sigmoid(x).to_vector<float>();
  for (std::size_t i = 0; i < big.size(); ++i) {
    const bool pos = big[i] > 0;
    EXPECT_EQ(t[i], pos ? 1.f : -1.f) << big[i];
    EXPECT_FALSE(std::isnan(s[i])) << big[i];
    if (big[i] >= 20.f) {
      EXPECT_EQ(s[i], 1.f) << big[i];
    }
    if (big[i] <= -110.f) {
      EXPECT_EQ(s[i], 0.f) << big[i];
    }
  }
  EXPECT_EQ(exp(constant({88.8f, 100.f, 1e30f})).to_vector<float>(),
            (std::vector<float>{kInfF, kInfF, kInfF}));
  EXPECT_EQ(log(constant(0.f)).item<float>(), -kInfF);
  EXPECT_TRUE(std::isnan(log(constant(-1.f)).item<float>()));
  // 17 elements: the special values in the vector body and in the tail.
  std::vector<float> sp(17, 1.f);
  sp[0] = 0.f;
  sp[1] = -1.f;
  sp[15] = 0.f;
  sp[16] = -1.f;
  const auto l = log(constant(sp, {17})).to_vector<float>();
  EXPECT_EQ(l[0], -kInfF);
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_EQ(l[15], -kInfF);
  EXPECT_TRUE(std::isnan(l[16]));
  EXPECT_EQ(l[8], 0.f);
}

// ---- operators and C++ scalars ----------------------------------------------------------------

TEST(ElementwiseOperators, TensorsWithTensors) {
  const Tensor x = constant({1.f, 2.f, 3.f});
  const Tensor y = constant({2.f, 2.f, 2.f});
  EXPECT_TENSOR_EQ(x + y, constant({3.f, 4.f, 5.f}));
  EXPECT_TENSOR_EQ(x - y, constant({-1.f, 0.f, 1.f}));
  EXPECT_TENSOR_EQ(x * y, constant({2.f, 4.f, 6.f}));
  EXPECT_TENSOR_EQ(x / y, constant({0.5f, 1.f, 1.5f}));
  EXPECT_TENSOR_EQ(x % y, constant({1.f, 0.f, 1.f}));
  EXPECT_TENSOR_EQ(x == y, bools({false, true, false}));
  EXPECT_TENSOR_EQ(x != y, bools({true, false, true}));
  EXPECT_TENSOR_EQ(x < y, bools({true, false, false}));
  EXPECT_TENSOR_EQ(x <= y, bools({true, true, false}));
  EXPECT_TENSOR_EQ(x > y, bools({false, false, true}));
  EXPECT_TENSOR_EQ(x >= y, bools({false, true, true}));
  EXPECT_TENSOR_EQ(-x, constant({-1.f, -2.f, -3.f}));
  const Tensor b = bools({true, false});
  const Tensor c = bools({true, true});
  EXPECT_TENSOR_EQ(b && c, bools({true, false}));
  EXPECT_TENSOR_EQ(b || c, bools({true, true}));
  EXPECT_TENSOR_EQ(!b, bools({false, true}));
  EXPECT_TENSOR_EQ(constant({7, -7}) / constant({2, 2}), constant({3, -4}));  // ints: floor
}

TEST(ElementwiseOperators, CppScalarsOnEitherSide) {
  const Tensor x = constant({1.f, 2.f, 4.f});
  EXPECT_TENSOR_EQ(x + 1, constant({2.f, 3.f, 5.f}));
  EXPECT_TENSOR_EQ(2 * x, constant({2.f, 4.f, 8.f}));
  EXPECT_TENSOR_EQ(x / 2.0f, constant({0.5f, 1.f, 2.f}));
  EXPECT_TENSOR_EQ(8.0 / x, constant({8.f, 4.f, 2.f}));
  EXPECT_TENSOR_EQ(1 - x, constant({0.f, -1.f, -3.f}));
  EXPECT_TENSOR_EQ(x - 0.5, constant({0.5f, 1.5f, 3.5f}));
  EXPECT_TENSOR_EQ(x % 3, constant({1.f, 2.f, 1.f}));
  EXPECT_TENSOR_EQ(x == 2, bools({false, true, false}));
  EXPECT_TENSOR_EQ(4 == x, bools({false, false, true}));
  EXPECT_TENSOR_EQ(x != 2, bools({true, false, true}));
  EXPECT_TENSOR_EQ(x < 2.5, bools({true, true, false}));
  EXPECT_TENSOR_EQ(2 <= x, bools({false, true, true}));
  EXPECT_TENSOR_EQ(x > 1, bools({false, true, true}));
  EXPECT_TENSOR_EQ(x >= 4, bools({false, false, true}));
  const Tensor i = constant({-7, 7, 3});
  EXPECT_TENSOR_EQ(i / 2, constant({-4, 3, 1}));
  EXPECT_TENSOR_EQ(10 / i, constant({-2, 1, 3}));
  EXPECT_TENSOR_EQ(i % 3, constant({2, 1, 0}));
  EXPECT_TENSOR_EQ(i == 3, bools({false, false, true}));
  EXPECT_TENSOR_EQ(i + 2.0, constant({-5, 9, 5}));  // integral doubles are fine
  const Tensor b = bools({true, false});
  EXPECT_TENSOR_EQ(b && true, b);
  EXPECT_TENSOR_EQ(false || b, b);
  EXPECT_TENSOR_EQ(b == false, bools({false, true}));
  const Tensor s = constant({"a", "b"});
  EXPECT_TENSOR_EQ(s + "!", strs({"a!", "b!"}));
  EXPECT_TENSOR_EQ("<" + s, strs({"<a", "<b"}));
  EXPECT_TENSOR_EQ(s + std::string("c"), strs({"ac", "bc"}));
  EXPECT_TENSOR_EQ(s == "a", bools({true, false}));
  EXPECT_TENSOR_EQ(std::string("b") != s, bools({true, false}));
}

TEST(ElementwiseOperators, CppScalarsAdoptTheTensorsDtype) {
  const Tensor d = constant({1.5}, float64) + 1;
  EXPECT_EQ(d.dtype(), float64);
  EXPECT_EQ(d.to_vector<double>()[0], 2.5);
  EXPECT_EQ((constant(0.1, float64) + 0.2).item<double>(), 0.1 + 0.2);  // 0.2 stays a double
  EXPECT_EQ((constant(1.f) + 0.1).dtype(), float32);
  const Tensor l = constant({int64_t{1}}) * 3000000000LL;
  EXPECT_EQ(l.dtype(), int64);
  EXPECT_EQ(l.to_vector<int64_t>()[0], 3000000000LL);
  EXPECT_EQ((constant(int64_t{5}) + 1).dtype(), int64);
  EXPECT_EQ((constant(5) + int64_t{1}).dtype(), int32);
  EXPECT_EQ((constant(5) + 'a').item<int32_t>(), 5 + 'a');
  EXPECT_EQ((constant(true) && true).dtype(), bool_);
}

}  // namespace
}  // namespace tg
