// The one header users include.
#pragma once
#include "tracegraph/dtype.h"
#include "tracegraph/errors.h"
#include "tracegraph/function.h"
#include "tracegraph/ops.h"
#include "tracegraph/shape.h"
#include "tracegraph/tensor.h"
#include "tracegraph/trace_type.h"
#include "tracegraph/variable.h"
