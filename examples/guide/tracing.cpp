// The guide's "Tracing": one trace per input type; plain C++ runs only while tracing.
#include <tracegraph/tracegraph.h>

#include <iostream>

int main() {
  auto dbl = tg::function(
      [](const tg::Tensor& a) {
        std::cout << "Tracing with " << a << "\n";
        return a + a;
      },
      {.name = "double", .arg_names = {"a"}});
  std::cout << dbl(tg::constant(1)) << "\n\n";
  std::cout << dbl(tg::constant(1.1)) << "\n\n";
  std::cout << dbl(tg::constant("a")) << "\n\n";
  std::cout << "// This doesn't print 'Tracing with ...'\n";
  std::cout << dbl(tg::constant("b")) << "\n\n";
  std::cout << dbl.pretty_printed_concrete_signatures() << "\n";
}
