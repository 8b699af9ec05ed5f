// Zero-copy interop: tg::from_blob wraps a caller's memory without copying, its deleter runs
// once when the last tensor sharing it dies, and nothing in tracegraph ever writes into it (the
// in-place paths - Variable updates, optimizer steps, the planner's buffer reuse - copy it
// instead). Tensor::data() reads a tensor's storage without copying.
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace tg {
namespace {

TEST(FromBlob, WrapsTheCallersMemoryWithoutCopying) {
  std::vector<float> pixels{1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  int deleted = 0;
  void* seen = nullptr;
  {
    Tensor t = from_blob(pixels.data(), {2, 3}, float32, [&](void* p) {
      ++deleted;
      seen = p;
    });
    EXPECT_EQ(t.data(), pixels.data());
    EXPECT_EQ(t.data<float>(), pixels.data());
    EXPECT_EQ(t.shape(), TensorShape({2, 3}));
    EXPECT_TENSOR_EQ(t, constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}));
    // Views share the memory and keep it alive.
    Tensor row = t[1];
    EXPECT_EQ(row.data<float>(), pixels.data() + 3);
    Tensor flat = reshape(t, {6});
    EXPECT_EQ(flat.data(), pixels.data());
    t = Tensor();
    EXPECT_EQ(deleted, 0);
    EXPECT_TENSOR_EQ(row, constant({4.f, 5.f, 6.f}));
    row = Tensor();
    EXPECT_EQ(deleted, 0);
  }
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(seen, pixels.data());
}

TEST(FromBlob, TheDeleterFreesMemoryTheTensorWasGiven) {
  auto* bytes = static_cast<uint8_t*>(std::malloc(4));
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(250 + i);
  Tensor t = from_blob(bytes, {4}, uint8, [](void* p) { std::free(p); });
  EXPECT_EQ(t.to_vector<uint8_t>(), (std::vector<uint8_t>{250, 251, 252, 253}));
  EXPECT_TENSOR_EQ(cast(t, int32) + 10, constant({260, 261, 262, 263}));
  // (ASan reports a leak or a double free if the deleter does not run exactly once.)
}

TEST(FromBlob, EveryNumericDtypeAndNoDeleter) {
  std::vector<int64_t> i64{1, -2};
  std::vector<double> f64{0.5, 1.5};
  bool flags[2] = {true, false};
  std::vector<int32_t> i32{7};
  EXPECT_TENSOR_EQ(from_blob(i64.data(), {2}, int64), constant({int64_t{1}, int64_t{-2}}));
  EXPECT_TENSOR_EQ(from_blob(f64.data(), {2}, float64), constant({0.5, 1.5}, float64));
  EXPECT_TENSOR_EQ(from_blob(flags, {2}, bool_), constant({true, false}));
  EXPECT_TENSOR_EQ(from_blob(i32.data(), {}, int32), constant(7));
  EXPECT_EQ(from_blob(i32.data(), {0, 3}, int32).num_elements(), 0);
}

// A deleter runs in a destructor, where an exception would end the program: what it throws goes
// to the diagnostics sink instead, once, naming the exception.
TEST(FromBlob, ADeleterThatThrowsIsReportedNotFatal) {
  std::vector<std::string> logged;
  config::set_log_sink([](const std::string& m, void* self) { static_cast<std::vector<std::string>*>(self)->push_back(m); },
                       &logged);
  float v = 1.f;
  int calls = 0;
  {
    Tensor t = from_blob(&v, {}, float32, [&](void*) {
      ++calls;
      throw std::runtime_error("boom");
    });
    Tensor view = reshape(t, {1});
    EXPECT_TRUE(logged.empty()) << "the deleter runs when the last tensor sharing the memory dies";
  }
  { Tensor t = from_blob(&v, {}, float32, [](void*) { throw 42; }); }
  config::set_log_sink(nullptr);
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_EQ(logged[0], "tracegraph: a tg::from_blob deleter threw (boom); deleters must not throw");
  EXPECT_EQ(logged[1], "tracegraph: a tg::from_blob deleter threw; deleters must not throw");
}

// The memory a caller lent must never be written: each path that updates a buffer in place
// when it holds the only reference checks that the buffer is tracegraph's own.
TEST(FromBlob, VariableUpdatesNeverWriteIntoLentMemory) {
  std::vector<float> w{1.f, 2.f};
  Variable v(from_blob(w.data(), {2}, float32));
  v.assign_add(constant({10.f, 10.f}));  // the Variable holds the only handle to w now
  EXPECT_EQ(w, (std::vector<float>{1.f, 2.f}));
  EXPECT_TENSOR_EQ(v.read_value(), constant({11.f, 12.f}));
  std::vector<float> w2{5.f, 5.f};
  v.assign(from_blob(w2.data(), {2}, float32));
  v.assign_sub(constant({1.f, 1.f}));
  EXPECT_EQ(w2, (std::vector<float>{5.f, 5.f}));
  EXPECT_TENSOR_EQ(v.read_value(), constant({4.f, 4.f}));
  // An optimizer step, traced (apply_gradient_descent updates in place when it may).
  std::vector<float> w3{1.f, 1.f};
  Variable u(from_blob(w3.data(), {2}, float32));
  auto step = function([&](const Tensor& g) { u.assign_sub(g * 0.5f); });
  step(constant({2.f, 4.f}));
  step(constant({2.f, 4.f}));
  EXPECT_EQ(w3, (std::vector<float>{1.f, 1.f}));
  EXPECT_TENSOR_EQ(u.read_value(), constant({-1.f, -3.f}));
}

TEST(FromBlob, GraphsNeverReuseAnInputsMemoryInPlace) {
  for (const bool optimize : {false, true}) {
    SCOPED_TRACE(optimize ? "optimised" : "as traced");
    // Chains of in-place-able ops, whose first step reads the argument (and a view of it).
    auto f = function([](const Tensor& x) { return relu(reshape(x, {4}) * 2.0f + 1.0f) - x[0]; },
                      {.optimize = optimize});
    std::vector<float> data{-1.f, 0.f, 1.f, 2.f};
    Tensor x = from_blob(data.data(), {4, 1}, float32);
    for (int call = 0; call < 3; ++call) {
      const Tensor y = f(x);
      EXPECT_TENSOR_EQ(y, constant({1.f, 2.f, 4.f, 6.f}));
      EXPECT_NE(y.data(), static_cast<const void*>(data.data()));
    }
    x = Tensor();  // the function holds no reference to the argument: tensors made from it died
    EXPECT_EQ(data, (std::vector<float>{-1.f, 0.f, 1.f, 2.f}));
  }
}

TEST(FromBlob, AGraphThatReturnsItsArgumentKeepsTheMemoryAlive) {
  int deleted = 0;
  std::vector<float> data{3.f, 4.f};
  auto f = function([](const Tensor& x) { return identity(x); });
  Tensor y;
  {
    Tensor x = from_blob(data.data(), {2}, float32, [&](void*) { ++deleted; });
    y = f(x);
  }
  EXPECT_TENSOR_EQ(y, constant({3.f, 4.f}));
  y = Tensor();
  EXPECT_EQ(deleted, 1);
}

TEST(TensorData, ReadsStorageInPlace) {
  const Tensor t = constant({{1, 2}, {3, 4}});
  const int32_t* p = t.data<int32_t>();
  EXPECT_EQ(p[3], 4);
  EXPECT_EQ(t[1].data<int32_t>(), p + 2);  // a view starts inside its base
  const Tensor s = constant({"a", "bc"});
  EXPECT_EQ(s.data<std::string>()[1], "bc");
  EXPECT_EQ(constant({5}, uint8).data<uint8_t>()[0], 5);
}

}  // namespace
}  // namespace tg
