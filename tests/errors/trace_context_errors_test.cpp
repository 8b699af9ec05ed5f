// An error raised while a tg::function traces says which function, which trace and which
// argument types it came from (TF prints the user's frames; C++ has none to print), keeping the
// error's type, code and data.
#include <string>

#include "support/test_util.h"

namespace tg {
namespace {

// The message of the E that `fn` throws ("" if it throws nothing or something else).
template <class E, class Fn>
std::string message_of(Fn&& fn, std::string* code = nullptr) {
  try {
    fn();
  } catch (const E& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

TEST(TraceContextErrors, OpErrorInTheSecondTraceNamesFunctionTraceAndArguments) {
  const Tensor w = ones({3, 2});
  auto f = function([&](const Tensor& x) { return matmul(x, w); }, {.name = "f", .arg_names = {"x"}});
  f(ones({2, 3}));
  std::string code;
  const std::string m = message_of<InvalidArgumentError>([&] { f(ones({2, 4})); }, &code);
  EXPECT_EQ(m.rfind("[matmul] ", 0), 0u) << "the op's own message comes first: " << m;
  EXPECT_NE(m.find(" (while tracing function 'f', trace 2, for (x: TensorSpec(shape=(2, 4), "
                   "dtype=tg.float32, name=None)))"),
            std::string::npos) << m;
  EXPECT_EQ(code, "EARG") << "the error keeps its type and code";
  EXPECT_EQ(f.tracing_count(), 1);
  // The context names the types the trace used: a signature's, not the call's.
  auto g = function([&](const Tensor& x) { return matmul(x, w); },
                    {.name = "g", .input_signature = std::vector{TensorSpec({None, 4}, float32)}});
  EXPECT_THROW_MSG(g(ones({5, 4})), InvalidArgumentError, "[matmul]",
                   "(while tracing function 'g', trace 1, for (arg0: TensorSpec(shape=(None, 4)");
}

TEST(TraceContextErrors, ANestedFunctionNamesItsOwnTraceBeforeTheOuterTrace) {
  const Tensor w = ones({3, 2});
  auto inner = function([&](const Tensor& x) { return matmul(x, w); }, {.name = "inner"});
  auto outer = function([&](const Tensor& x) { return inner(x * 2.0f); }, {.name = "outer"});
  const std::string m = message_of<InvalidArgumentError>([&] { outer(ones({2, 4})); });
  // The nested function traces itself (then its graph is inlined), so its own trace is named.
  const auto in = m.find("(while tracing function 'inner', trace 1, for (arg0: TensorSpec(shape=(2, 4)");
  const auto out = m.find("(while tracing function 'outer', trace 1, for (arg0: TensorSpec(shape=(2, 4)");
  ASSERT_NE(in, std::string::npos) << m;
  ASSERT_NE(out, std::string::npos) << m;
  EXPECT_LT(in, out) << "innermost first: " << m;
  EXPECT_EQ(m.rfind("[matmul] ", 0), 0u) << m;
}

TEST(TraceContextErrors, ACondBranchOrLoopBodyIsNamed) {
  const Tensor w = ones({3, 2});
  auto f = function([&](const Tensor& x) {
    return cond(reduce_sum(x) > 0.0f, [&] { return matmul(x, w); }, [&] { return x; });
  }, {.name = "f"});
  const std::string m = message_of<InvalidArgumentError>([&] { f(ones({2, 4})); });
  const auto branch = m.find("(while tracing the sub-graph 'cond/then_branch')");
  const auto fn = m.find("(while tracing function 'f', trace 1");
  ASSERT_NE(branch, std::string::npos) << m;
  ASSERT_NE(fn, std::string::npos) << m;
  EXPECT_LT(branch, fn) << m;

  auto loop = function([&](const Tensor& x) {
    return while_loop([](const Tensor& v) { return reduce_sum(v) < 10.0f; },
                      [&](const Tensor& v) { return v + matmul(v, w); }, x);
  }, {.name = "loop"});
  EXPECT_THROW_MSG(loop(ones({2, 4})), InvalidArgumentError, "[matmul]",
                   "(while tracing the sub-graph 'while/body') (while tracing function 'loop', trace 1");
}

TEST(TraceContextErrors, EveryErrorTypeKeepsItsTypeAndData) {
  // ResourceExhaustedError keeps bytes_requested; a ValueError stays a ValueError.
  auto big = function([](const Tensor& x) { return x + zeros({int64_t{1} << 50}); }, {.name = "big"});
  try {
    big(constant(1.0f));
    ADD_FAILURE() << "no error";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_EQ(e.code(), "ERESOURCE");
    EXPECT_EQ(e.bytes_requested(), (std::size_t{1} << 50) * 4);
    EXPECT_NE(std::string(e.what()).find("(while tracing function 'big', trace 1"), std::string::npos) << e.what();
  }
  auto empty = function([](const Tensor& x) { return x + Tensor(); }, {.name = "empty"});
  EXPECT_THROW_MSG(empty(constant(1.0f)), ValueError, "(while tracing function 'empty', trace 1");
}

TEST(TraceContextErrors, ForeignExceptionsPassUnchanged) {
  auto f = function([](const Tensor& x) -> Tensor { throw std::runtime_error("boom"); return x; },
                    {.name = "f"});
  try {
    f(constant(1.0f));
    ADD_FAILURE() << "no error";
  } catch (const Error&) {
    ADD_FAILURE() << "became a tg::Error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
}

TEST(TraceContextErrors, AFunctionRunEagerlySaysSo) {
  const Tensor w = ones({3, 2});
  auto f = function([&](const Tensor& x) { return matmul(x, w); }, {.name = "f"});
  config::run_functions_eagerly(true);
  const std::string m = message_of<InvalidArgumentError>([&] { f(ones({2, 4})); });
  config::run_functions_eagerly(false);
  EXPECT_NE(m.find("[matmul]"), std::string::npos) << m;
  EXPECT_NE(m.find("(in function 'f', run eagerly: tg::config::run_functions_eagerly is on)"),
            std::string::npos) << m;
}

TEST(TraceContextErrors, AddContextAppendsToTheMessage) {
  TypeError e("[op] bad");
  e.add_context("(here)");
  EXPECT_STREQ(e.what(), "[op] bad (here)");
  EXPECT_EQ(e.code(), "ETYPE");
}

}  // namespace
}  // namespace tg
