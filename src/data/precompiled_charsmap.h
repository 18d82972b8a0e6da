// A sentencepiece normalization rule (NormalizerSpec.precompiled_charsmap) checked for what
// libsentencepiece 0.1.97 reads of it without bounds checks. Private to src/data.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mixprec::data {

// Why `blob` would make sentencepiece read outside it while normalizing some text, or nullopt
// when no text can: every trie node reachable from the root over any bytes lies inside the
// unit array, and every leaf points at a NUL-terminated string inside the blob. An empty blob
// (no rule) is sound.
std::optional<std::string> precompiled_charsmap_fault(std::string_view blob);

}  // namespace mixprec::data
