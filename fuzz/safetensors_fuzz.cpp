// libFuzzer target for the safetensors reader. Every input must either parse into tensors that
// agree with the validated header, byte for byte, or throw mixprec::Error naming the source.
// Anything else (a crash, a sanitizer report, another exception type, a huge allocation) is a
// bug. The same bytes also go through the file reader, load_checkpoint, which must agree.
//
//   build-fuzz-clang/fuzz/safetensors_fuzz tests/fuzz/safetensors   (see scripts/fuzz.sh)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/io/checkpoint_store.h"
#include "mixprec/io/safetensors.h"

namespace {

using namespace mixprec;
using namespace mixprec::io;

constexpr const char* kSource = "fuzz-input";

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "safetensors_fuzz: %s\n", what.c_str());
  std::abort();
}

void require(bool ok, const std::string& what) {
  if (!ok) bug(what);
}

// The tensors must be exactly the header's entries, each holding its own bytes of the input.
void check_consistent(const SafetensorsFile& file, std::span<const std::byte> bytes) {
  const SafetensorsHeader header = parse_safetensors_header(bytes, bytes.size(), kSource);
  require(header.data_start + header.data_size == bytes.size(), "data section size");
  require(file.tensors.size() == header.entries.size(), "tensor count");
  require(file.metadata == header.metadata, "metadata");
  uint64_t covered = 0;
  for (const SafetensorsEntry& e : header.entries) {
    require(e.begin == covered && e.begin <= e.end && e.end <= header.data_size,
            "entry '" + e.name + "' outside the data section or not adjacent");
    covered = e.end;
    const auto it = file.tensors.find(e.name);
    require(it != file.tensors.end(), "no tensor for entry '" + e.name + "'");
    const Tensor& t = it->second;
    require(t.dtype() == e.dtype && t.shape() == e.shape && t.is_contiguous(),
            "tensor '" + e.name + "' dtype/shape");
    require(t.nbytes() == e.end - e.begin, "tensor '" + e.name + "' byte count");
    require(t.nbytes() == 0 || std::memcmp(t.raw_data(), bytes.data() + header.data_start + e.begin,
                                           t.nbytes()) == 0,
            "tensor '" + e.name + "' bytes differ from the input");
  }
  require(covered == header.data_size, "data section not covered");
}

bool same_tensors(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
    if (i->first != j->first || i->second.dtype() != j->second.dtype() ||
        i->second.shape() != j->second.shape() || i->second.nbytes() != j->second.nbytes())
      return false;
    if (i->second.nbytes() &&
        std::memcmp(i->second.raw_data(), j->second.raw_data(), i->second.nbytes()) != 0)
      return false;
  }
  return true;
}

// A file per process, on tmpfs when there is one, removed at exit: the file reader's input.
struct ScratchFile {
  std::string path;
  ~ScratchFile() { std::remove(path.c_str()); }
};

const std::string& scratch_path() {
  static const ScratchFile file{[] {
    const std::filesystem::path dir =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    return (dir / ("mixprec_fuzz_" + std::to_string(::getpid()) + ".safetensors")).string();
  }()};
  return file.path;
}

std::optional<Checkpoint> load_as_file(std::span<const std::byte> bytes) {
  {
    std::ofstream out(scratch_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    require(static_cast<bool>(out), "cannot write " + scratch_path());
  }
  try {
    return load_checkpoint(scratch_path());
  } catch (const Error& e) {
    require(std::string(e.what()).find(scratch_path()) != std::string::npos,
            std::string("file error without the path: ") + e.what());
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  std::optional<SafetensorsFile> parsed;
  try {
    parsed = parse_safetensors(bytes, kSource);
  } catch (const Error& e) {
    require(std::string(e.what()).find(kSource) != std::string::npos,
            std::string("error without the source: ") + e.what());
  }
  if (parsed) check_consistent(*parsed, bytes);

  const std::optional<Checkpoint> loaded = load_as_file(bytes);
  // The checkpoint reader also checks each tensor against metadata 'tensor_checksums' (then
  // drops the key): it may refuse what the plain reader reads, never the other way round.
  Metadata expected = parsed ? parsed->metadata : Metadata{};
  const bool checksummed = expected.erase("tensor_checksums") > 0;
  require(parsed.has_value() == loaded.has_value() || (checksummed && !loaded),
          "file and memory readers disagree on validity");
  if (parsed && loaded)
    require(same_tensors(parsed->tensors, loaded->tensors) && expected == loaded->metadata,
            "file and memory readers read different tensors");
  return 0;
}
