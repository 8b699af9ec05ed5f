#include "core/sink.h"

#include <iostream>

namespace tg::detail {

TextSink& log_sink() {
  // Never destroyed: a Tensor released during the program's exit may still report through it.
  static TextSink* const sink = new TextSink(std::cerr);
  return *sink;
}

void log_message(const std::string& message) { log_sink().write(message, "\n"); }

}  // namespace tg::detail
