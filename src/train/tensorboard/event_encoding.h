// TensorBoard's Event messages in protobuf's wire format, encoded here: the library for it
// (Debian's libprotobuf) cannot share a process with Debian's libsentencepiece, which carries
// its own copy of protobuf's symbols (linking both crashed mixprec at start-up, in protobuf's
// static initialisers). Three messages with TensorFlow's field numbers:
//   Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Summary.Value { string tag = 1; float simple_value = 2; }
// tests/reference/tensorboard_test.cpp reads them back with Google's protobuf and TensorBoard.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mixprec::train::tensorboard {

std::string file_version_event(double wall_time, const std::string& version);
std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, double>>& scalars);

}  // namespace mixprec::train::tensorboard
