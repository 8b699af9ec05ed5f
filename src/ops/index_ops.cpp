#include "ops/op.h"

namespace tg::detail {

void register_index_ops(OpDef*) {}

}  // namespace tg::detail
