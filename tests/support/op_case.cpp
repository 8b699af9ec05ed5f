#include "support/op_case.h"

namespace tg::testing {

namespace {
std::vector<std::vector<OpCase> (*)()>& factories() {
  static std::vector<std::vector<OpCase> (*)()> f;
  return f;
}
}  // namespace

OpCaseRegistrar::OpCaseRegistrar(std::vector<OpCase> (*make)()) { factories().push_back(make); }

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> all = [] {
    std::vector<OpCase> v;
    for (auto make : factories())
      for (auto& c : make()) v.push_back(std::move(c));
    return v;
  }();
  return all;
}

}  // namespace tg::testing
