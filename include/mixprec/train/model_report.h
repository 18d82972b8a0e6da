// One-paragraph description of a model before it is allocated (meta device): its family's
// line (kind, shape), the parameter count (and the count a token reads, when that is fewer)
// and the bytes its parameters will take under a precision policy.
#pragma once

#include <string>

#include "mixprec/amp/policy.h"
#include "mixprec/models/model.h"

namespace mixprec::train {

std::string describe_model(const models::Model& model, const amp::MixedPrecisionPolicy& policy);

}  // namespace mixprec::train
