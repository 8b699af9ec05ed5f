// The one save/restore of per-thread context. A thread_local that decides what an op does on
// this thread (the recorder, the Variable bindings, ...) is named `t_...`, defined in the .cpp
// that owns it, set only through a guard built on ScopedThreadValue, and read elsewhere through
// an accessor. docs/design.md lists them.
#pragma once
#include <type_traits>
#include <utility>

namespace tg::detail {

/// Sets `slot`, a thread_local context variable, to `value` while the guard lives and restores
/// the value it found when the guard is destroyed - at the end of the scope or while an exception
/// unwinds it - so nested scopes restore in order. Built and destroyed on one thread, like any
/// local; neither copied nor moved, so it restores exactly once. Setting and restoring cannot
/// throw: a scope that fails before its guard is built leaves the slot untouched.
template <class T>
class ScopedThreadValue {
  static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>,
                "a context value must be set and restored without throwing");

 public:
  ScopedThreadValue(T& slot, T value) noexcept : slot_(slot), previous_(std::exchange(slot, std::move(value))) {}
  ~ScopedThreadValue() { slot_ = std::move(previous_); }
  ScopedThreadValue(const ScopedThreadValue&) = delete;
  ScopedThreadValue& operator=(const ScopedThreadValue&) = delete;

  /// The value of the enclosing scope, which destruction restores (scopes that link themselves
  /// into a per-thread list walk it through this).
  const T& previous() const { return previous_; }

 private:
  T& slot_;
  T previous_;
};

}  // namespace tg::detail
