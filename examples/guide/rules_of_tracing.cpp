// The guide's "Rules of tracing": objects by identity, and a custom trace type (Fruit).
#include <tracegraph/tracegraph.h>

#include <iostream>

struct Fruit {
  virtual ~Fruit() = default;
  virtual tg::Tensor flavor() const = 0;
};
struct Apple : Fruit {
  tg::Tensor flavor() const override { return tg::constant({1, 2}); }
};
struct Mango : Fruit {
  tg::Tensor flavor() const override { return tg::constant({3, 4}); }
};

// Every apple is alike for tracing: the type is the fruit's kind, not the object.
class FruitTraceType : public tg::TraceType {
 public:
  explicit FruitTraceType(std::string kind) : kind_(std::move(kind)) {}
  bool is_subtype_of(const tg::TraceType& other) const override { return equals(other); }
  tg::TraceTypePtr most_specific_common_supertype(const std::vector<const tg::TraceType*>& others) const override {
    for (auto* o : others)
      if (!equals(*o)) return nullptr;
    return std::make_shared<FruitTraceType>(kind_);
  }
  bool equals(const tg::TraceType& other) const override {
    auto* f = dynamic_cast<const FruitTraceType*>(&other);
    return f && f->kind_ == kind_;
  }
  std::size_t hash() const override { return std::hash<std::string>{}(kind_); }
  std::string to_string() const override { return "Fruit[" + kind_ + "]"; }

 private:
  std::string kind_;
};
struct AppleWithTraceType : Apple {
  tg::TraceTypePtr tracing_type() const { return std::make_shared<FruitTraceType>("apple"); }
};
struct MangoWithTraceType : Mango {
  tg::TraceTypePtr tracing_type() const { return std::make_shared<FruitTraceType>("mango"); }
};

int main() {
  auto get_mixed_flavor = tg::function(
      [](std::shared_ptr<Fruit> a, std::shared_ptr<Fruit> b) { return a->flavor() + b->flavor(); });
  // Objects passed by shared_ptr are typed by identity and held weakly: the temporaries are
  // gone after each call, so each call traces again.
  get_mixed_flavor(std::make_shared<Apple>(), std::make_shared<Mango>());
  get_mixed_flavor(std::make_shared<Apple>(), std::make_shared<Mango>());
  std::cout << "traces with plain objects: " << get_mixed_flavor.tracing_count() << "\n";

  auto mixed = tg::function([](const AppleWithTraceType& a, const MangoWithTraceType& b) {
    return a.flavor() + b.flavor();
  });
  mixed(AppleWithTraceType{}, MangoWithTraceType{});
  std::cout << mixed(AppleWithTraceType{}, MangoWithTraceType{}) << "\n";
  std::cout << "traces with a custom trace type: " << mixed.tracing_count() << "\n";
}
