// ScopedThreadValue, the one save/restore of per-thread context: nested scopes restore in order,
// an exception restores every scope it leaves, each thread sees only its own scopes, and a value
// that owns memory survives the round trip.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>

#include "core/thread_context.h"

namespace tg::detail {
namespace {

thread_local int t_level = 0;
thread_local std::string t_name = "outside";

static_assert(!std::is_copy_constructible_v<ScopedThreadValue<int>>);
static_assert(!std::is_move_constructible_v<ScopedThreadValue<int>>);
static_assert(!std::is_copy_assignable_v<ScopedThreadValue<int>>);
static_assert(!std::is_move_assignable_v<ScopedThreadValue<int>>);

TEST(ScopedThreadValue, NestedScopesSetAndRestoreInOrder) {
  ASSERT_EQ(t_level, 0);
  {
    ScopedThreadValue<int> outer(t_level, 1);
    EXPECT_EQ(t_level, 1);
    EXPECT_EQ(outer.previous(), 0);
    {
      ScopedThreadValue<int> inner(t_level, 2);
      EXPECT_EQ(t_level, 2);
      EXPECT_EQ(inner.previous(), 1);
      t_level = 7;  // code inside a scope may change the value; the exit still restores
    }
    EXPECT_EQ(t_level, 1);
  }
  EXPECT_EQ(t_level, 0);
}

TEST(ScopedThreadValue, AnExceptionRestoresEveryScopeItLeaves) {
  ScopedThreadValue<int> kept(t_level, 1);
  bool caught = false;
  try {
    ScopedThreadValue<int> left(t_level, 2);
    {
      ScopedThreadValue<int> innermost(t_level, 3);
      throw std::runtime_error("out of two scopes");
    }
  } catch (const std::runtime_error&) {
    caught = true;
    EXPECT_EQ(t_level, 1);
  }
  EXPECT_TRUE(caught);
  EXPECT_EQ(t_level, 1);
}

TEST(ScopedThreadValue, AValueThatOwnsMemoryIsRestoredWhole) {
  {
    ScopedThreadValue<std::string> a(t_name, std::string(100, 'a'));
    {
      ScopedThreadValue<std::string> b(t_name, "b");
      EXPECT_EQ(t_name, "b");
      EXPECT_EQ(b.previous(), std::string(100, 'a'));
    }
    EXPECT_EQ(t_name, std::string(100, 'a'));
  }
  EXPECT_EQ(t_name, "outside");
}

TEST(ScopedThreadValue, AnotherThreadSeesItsOwnValue) {
  ScopedThreadValue<int> here(t_level, 5);
  int seen_there = -1;
  int there_inside = -1;
  std::thread other([&] {
    seen_there = t_level;
    ScopedThreadValue<int> there(t_level, 9);
    there_inside = t_level;
  });
  other.join();
  EXPECT_EQ(seen_there, 0);
  EXPECT_EQ(there_inside, 9);
  EXPECT_EQ(t_level, 5);
}

}  // namespace
}  // namespace tg::detail
