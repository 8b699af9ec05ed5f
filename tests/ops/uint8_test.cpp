// uint8 (image bytes): the ops TensorFlow defines on it, as op cases (eager, traced, optimised,
// None dims, saved and loaded), cast to and from every numeric dtype, constants, printing,
// specs, .npy files and to_vector. The ops that refuse it are in
// tests/errors/sort_dtype_errors_test.cpp.
#include <limits>

#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using testing::values::kInf;
using testing::values::kNan;

Tensor u8(std::initializer_list<int> v) {
  std::vector<int64_t> w(v.begin(), v.end());
  return constant(w, TensorShape{static_cast<int64_t>(w.size())}, uint8);
}
Fn bin(Tensor (*f)(const Tensor&, const Tensor&)) {
  return [f](const std::vector<Tensor>& in) { return f(in[0], in[1]); };
}
Fn cast_to(DType d) {
  return [d](const std::vector<Tensor>& in) { return cast(in[0], d); };
}

TG_OP_CASES(uint8) {
  const Tensor a = u8({250, 7, 0, 128, 255});
  const Tensor b = u8({10, 2, 1, 128, 255});
  return {
      // Arithmetic wraps around modulo 256, as TF's does.
      {"add", "uint8 wraps", bin(add), {a, b}, u8({4, 9, 1, 0, 254})},
      {"add", "uint8 broadcast scalar", [](const std::vector<Tensor>& in) { return in[0] + 10; }, {a}, u8({4, 17, 10, 138, 9})},
      {"sub", "uint8 wraps below 0", bin(sub), {a, b}, u8({240, 5, 255, 0, 0})},
      {"mul", "uint8 wraps", bin(mul), {a, b}, u8({196, 14, 0, 0, 1})},
      {"div", "uint8 floors", bin(div), {a, b}, u8({25, 3, 0, 1, 1})},
      {"floordiv", "uint8", bin(floordiv), {a, b}, u8({25, 3, 0, 1, 1})},
      {"mod", "uint8", bin(mod), {a, b}, u8({0, 1, 0, 0, 0})},
      {"maximum", "uint8 (unsigned: 250 > 10)", bin(maximum), {a, b}, u8({250, 7, 1, 128, 255})},
      {"minimum", "uint8", bin(minimum), {a, b}, u8({10, 2, 0, 128, 255})},
      {"square", "uint8 wraps", [](const std::vector<Tensor>& in) { return square(in[0]); }, {u8({3, 16, 255})}, u8({9, 0, 1})},
      {"equal", "uint8", bin(equal), {a, b}, constant({false, false, false, true, true})},
      {"not_equal", "uint8", bin(not_equal), {a, b}, constant({true, true, true, false, false})},
      {"less", "uint8 unsigned order", bin(less), {a, b}, constant({false, false, true, false, false})},
      {"less_equal", "uint8", bin(less_equal), {a, b}, constant({false, false, true, true, true})},
      {"greater", "uint8", bin(greater), {a, b}, constant({true, true, false, false, false})},
      {"greater_equal", "uint8", bin(greater_equal), {a, b}, constant({true, true, false, true, true})},
      {"where", "uint8 operands", [](const std::vector<Tensor>& in) { return where(in[0] > in[1], in[0], in[1]); },
       {a, b}, u8({250, 7, 1, 128, 255})},
      {"identity", "uint8", [](const std::vector<Tensor>& in) { return identity(in[0]); }, {a}, a},
      {"zeros_like", "uint8", [](const std::vector<Tensor>& in) { return zeros_like(in[0]); }, {a}, u8({0, 0, 0, 0, 0})},
      {"ones_like", "uint8", [](const std::vector<Tensor>& in) { return ones_like(in[0]); }, {a}, u8({1, 1, 1, 1, 1})},
      // Casts into uint8: integers keep their low 8 bits (TF's wrap-around); floats truncate
      // toward zero and saturate to [0, 255], NaN gives 0 (docs/DECISIONS.md); bool is 0/1.
      {"cast", "int32 -> uint8 wraps", cast_to(uint8), {constant({-1, 256, 300, 255, -256})}, u8({255, 0, 44, 255, 0})},
      {"cast", "int64 -> uint8 wraps", cast_to(uint8), {constant({int64_t{-2}, int64_t{1} << 40 | 7})}, u8({254, 7})},
      {"cast", "float32 -> uint8 truncates and saturates", cast_to(uint8),
       {constant({1.9f, -0.9f, -1.0f, 255.5f, 256.0f, 1e10f, -1e10f})}, u8({1, 0, 0, 255, 255, 255, 0})},
      {"cast", "float64 -> uint8: NaN and infinities", cast_to(uint8), {constant({kNan, kInf, -kInf, 3.99}, float64)},
       u8({0, 255, 0, 3})},
      {"cast", "bool -> uint8", cast_to(uint8), {constant({true, false})}, u8({1, 0})},
      {"cast", "uint8 -> uint8", cast_to(uint8), {a}, a},
      // Casts out of uint8 are exact (zero extension, never sign extension).
      {"cast", "uint8 -> int32", cast_to(int32), {a}, constant({250, 7, 0, 128, 255})},
      {"cast", "uint8 -> int64", cast_to(int64), {a}, constant({250, 7, 0, 128, 255}, int64)},
      {"cast", "uint8 -> float32", cast_to(float32), {a}, constant({250.f, 7.f, 0.f, 128.f, 255.f})},
      {"cast", "uint8 -> float64", cast_to(float64), {a}, constant({250.0, 7.0, 0.0, 128.0, 255.0}, float64)},
      {"cast", "uint8 -> bool", cast_to(bool_), {a}, constant({true, true, false, true, true})},
      // Ops that move elements work on any dtype.
      {"reshape", "uint8", [](const std::vector<Tensor>& in) { return reshape(in[0], {2, 2}); }, {u8({1, 2, 3, 4})},
       constant({{1, 2}, {3, 4}}, uint8)},
      {"transpose", "uint8", [](const std::vector<Tensor>& in) { return transpose(in[0]); },
       {constant({{1, 2}, {3, 4}}, uint8)}, constant({{1, 3}, {2, 4}}, uint8)},
      {"concat", "uint8", [](const std::vector<Tensor>& in) { return concat({in[0], in[1]}, 0); }, {u8({1}), u8({2, 3})},
       u8({1, 2, 3})},
      {"gather", "uint8", [](const std::vector<Tensor>& in) { return gather(in[0], constant({2, 0})); }, {u8({5, 6, 7})},
       u8({7, 5})},
  };
}

TEST(UInt8, NamesConstantsAndElements) {
  EXPECT_EQ(to_string(uint8), "uint8");
  EXPECT_EQ(dtype_size(uint8), 1u);
  EXPECT_TRUE(is_integer(uint8));
  EXPECT_FALSE(is_floating(uint8));
  // A uint8_t value or vector makes a uint8 tensor; other C++ integers keep their dtypes.
  EXPECT_EQ(constant(uint8_t{7}).dtype(), uint8);
  const std::vector<uint8_t> pixels{0, 128, 255};
  const Tensor t = constant(pixels, TensorShape{3});
  EXPECT_EQ(t.dtype(), uint8);
  EXPECT_EQ(t.to_vector<uint8_t>(), pixels);
  EXPECT_EQ(constant(255, uint8).item<uint8_t>(), 255);
  EXPECT_EQ(t.to_string(), "tg.Tensor([  0 128 255], shape=(3,), dtype=uint8)");
  EXPECT_EQ(zeros({2}, uint8).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(ones({2}, uint8).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(fill({2}, 9, uint8).to_vector<uint8_t>(), (std::vector<uint8_t>{9, 9}));
  EXPECT_EQ(range(250, 253, 1, uint8).to_vector<uint8_t>(), (std::vector<uint8_t>{250, 251, 252}));
  EXPECT_TRUE(static_cast<bool>(constant(3, uint8)));
  EXPECT_EQ(TensorSpec({None, 28, 28}, uint8).to_string(), "TensorSpec(shape=(None, 28, 28), dtype=tg.uint8, name=None)");
  EXPECT_EQ(one_hot(constant({1}), 3, 255, 0, -1, uint8).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 255, 0}));
}

TEST(UInt8, TracedFunctionsTakeAndReturnUInt8) {
  auto normalise = function([](const Tensor& img) { return cast(img, float32) / 255.0f; });
  auto cf = normalise.get_concrete_function(TensorSpec({None}, uint8));
  EXPECT_NE(cf.function_type().find("dtype=tg.uint8"), std::string::npos) << cf.function_type();
  EXPECT_TENSOR_NEAR(normalise(u8({0, 51, 255})), constant({0.f, 0.2f, 1.f}), 1e-6);
  auto brighten = function([](const Tensor& img) { return img + 100; }, {.optimize = true});
  EXPECT_TENSOR_EQ(brighten(u8({0, 200})), u8({100, 44}));
}

TEST(UInt8, NpyFilesRoundTripAsU1) {
  const Tensor t = constant({{0, 1}, {254, 255}}, uint8);
  const std::string path = ::testing::TempDir() + "/uint8.npy";
  save_npy(path, t);
  const Tensor back = load_npy(path);
  EXPECT_TENSOR_EQ(back, t);
}

}  // namespace
}  // namespace tg
