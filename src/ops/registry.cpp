#include <array>

#include "core/check.h"
#include "ops/op.h"

namespace tg::detail {

namespace {
struct Registry {
  std::array<OpDef, kNumOps> table{};
  std::vector<const OpDef*> all;
  Registry() {
#define TG_OP(id_, name_, arity_, traits_, serial_, attrs_) \
  table[static_cast<std::size_t>(OpId::id_)] =                 \
      OpDef{OpId::id_, name_, arity_, traits_, serial_, attrs_kind_of<attrs_>};
#include "ops/ops.def"
#undef TG_OP
    register_all_ops(table.data());
    for (const OpDef& d : table) all.push_back(&d);
  }
};
const Registry& registry() {
  static const Registry r;
  return r;
}
}  // namespace

const OpDef& op_def(OpId id) {
  const auto i = static_cast<std::size_t>(id);
  TG_CHECK(i < kNumOps, "op id ", i);
  return registry().table[i];
}

const std::vector<const OpDef*>& all_ops() { return registry().all; }

std::vector<std::shared_ptr<VariableState>> variables_named(const OpAttrs& attrs) {
  std::vector<std::shared_ptr<VariableState>> out;
  if (const auto* a = attrs.get_if<VariableAttrs>()) {
    out.push_back(a->variable);
  } else if (const auto* adam = attrs.get_if<AdamSlotsAttrs>()) {
    out = {adam->variable, adam->m, adam->v};
  } else if (const auto* group = attrs.get_if<VariableGroupAttrs>(); group && group->group) {
    out = group->group->variables;
  }
  std::erase(out, nullptr);
  return out;
}

const OpDef* find_op(const std::string& name) {
  for (const OpDef* d : registry().all)
    if (name == d->name) return d;
  return nullptr;
}

int64_t normalize_axis(const char* op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    op_error<InvalidArgumentError>(op, "axis ", axis, " is out of range for a tensor of rank ",
                                   rank, "; expected an axis in [", -rank, ", ", rank, ")");
  return axis < 0 ? axis + rank : axis;
}

std::string describe(const ValueType& t) {
  return str_cat(to_string(t.dtype), " ", t.shape.to_string());
}

}  // namespace tg::detail
