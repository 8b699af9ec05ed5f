// A replaceable text destination (tg::print output, diagnostics): a user callback, or a stream.
#pragma once
#include <mutex>
#include <ostream>
#include <string>

namespace tg::detail {

class TextSink {
 public:
  using Callback = void (*)(const std::string& text, void* user);
  explicit TextSink(std::ostream& fallback) : fallback_(fallback) {}
  /// nullptr restores the fallback stream.
  void set(Callback fn, void* user) {
    std::lock_guard lock(mu_);
    fn_ = fn;
    user_ = user;
  }
  /// Writes `text` as one unit: the callback gets it as is, the stream gets it plus `suffix`.
  void write(const std::string& text, const char* suffix = "") {
    std::lock_guard lock(mu_);
    if (fn_) fn_(text, user_);
    else fallback_ << text << suffix << std::flush;
  }

 private:
  std::mutex mu_;
  Callback fn_ = nullptr;
  void* user_ = nullptr;
  std::ostream& fallback_;
};

/// The diagnostics channel (tg::config::set_log_sink): retracing lines and warnings, and what
/// the library cannot raise, such as a tg::from_blob deleter that threw. stderr by default.
TextSink& log_sink();
/// Writes one diagnostic message to log_sink() (a newline follows it on the stream).
void log_message(const std::string& message);

}  // namespace tg::detail
