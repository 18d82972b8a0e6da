// Every differentiable op. Views (reshape, transpose, slice, ...) and casts are Tensor members
// and record history too.
#pragma once

#include "mixprec/autograd/engine.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/ops/activation.h"
#include "mixprec/ops/attention.h"
#include "mixprec/ops/comparison.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/embedding.h"
#include "mixprec/ops/grouped_linear.h"
#include "mixprec/ops/indexing.h"
#include "mixprec/ops/linalg.h"
#include "mixprec/ops/loss.h"
#include "mixprec/ops/moe_routing.h"
#include "mixprec/ops/normalization.h"
#include "mixprec/ops/pointwise.h"
#include "mixprec/ops/reduction.h"
#include "mixprec/ops/softmax.h"
