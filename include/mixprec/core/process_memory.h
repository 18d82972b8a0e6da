// The process's memory as the kernel counts it (Linux /proc/self): what the memory planner's
// RSS prediction is checked against and what the trainer logs beside the allocator's bytes.
#pragma once

#include <cstddef>

namespace mixprec {

// Resident set size now (VmRSS), in bytes; 0 when /proc is not readable.
std::size_t resident_bytes();
// Its high-water mark over the process's life (VmHWM), in bytes; 0 when not readable.
std::size_t peak_resident_bytes();

}  // namespace mixprec
