// Names the entries behind a safetensors layout error. load_safetensors reports that a file
// is bad; this reads the header again, leniently, to say which tensors are involved (the
// tensor cut off by a truncated file, the two tensors that overlap, the one after a hole),
// so a checkpoint error points at the entry at fault.
#pragma once

#include <string>

namespace mixprec::io {

// A one-line description of the first layout problem found ("" when the header cannot be
// read as JSON or the layout looks fine).
std::string diagnose_safetensors_layout(const std::string& path);

}  // namespace mixprec::io
