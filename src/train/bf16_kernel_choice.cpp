// The bf16 kernel a run takes (train/bf16_kernel_choice.h): a setting, the checkpoint's, the
// host's cached measurement, or a new measurement written to the cache.
#include "mixprec/train/bf16_kernel_choice.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mixprec/backend/backend.h"
#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/regular_file.h"

namespace mixprec::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFormat = "mixprec.bf16_kernels/1";
constexpr uint64_t kMaxCacheBytes = 1 << 20;

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The fastest by median; the table's order breaks ties.
std::string fastest(const std::vector<backend::Bf16KernelTiming>& timings) {
  const auto best =
      std::max_element(timings.begin(), timings.end(),
                       [](const backend::Bf16KernelTiming& a, const backend::Bf16KernelTiming& b) {
                         return a.gflops < b.gflops;
                       });
  return best->kernel;
}

// Serialises the processes of one host that measure at once (two test runs, two ranks'
// worth of jobs): the second waits and then reads what the first wrote. Unlocked on
// destruction; a lock that cannot be taken is just not taken.
class CacheLock {
 public:
  explicit CacheLock(const std::string& path) {
    fd_ = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    int rc = -1;
    while (fd_ >= 0 && (rc = ::flock(fd_, LOCK_EX)) != 0 && errno == EINTR) {
    }
    if (fd_ >= 0 && rc != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~CacheLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_ = -1;
};

// The cache's JSON; an empty object when there is none. Throws Error naming the file when it
// is unreadable or not the cache's format.
nlohmann::json read_cache(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return nlohmann::json::object();
  const std::string text = io::read_regular_file(path, kMaxCacheBytes, path);
  // The cache is a few levels deep: deeper nesting is not ours (and copying it would recurse).
  int depth = 0, deepest = 0;
  for (const char ch : text) {
    depth += ch == '[' || ch == '{' ? 1 : ch == ']' || ch == '}' ? -1 : 0;
    deepest = std::max(deepest, depth);
  }
  nlohmann::json j = deepest > 8 ? nlohmann::json() : nlohmann::json::parse(text, nullptr, false);
  MIXPREC_CHECK(!j.is_discarded() && j.is_object() && j.contains("format") &&
                    j["format"].is_string() && j["format"] == kFormat && j.contains("hosts") &&
                    j["hosts"].is_object(),
                path, std::string("is not a bf16 kernel cache (") + kFormat + ")");
  return j;
}

// This host's entry, when it is well formed and names a kernel the host has.
std::optional<Bf16KernelChoice> cached_entry(const nlohmann::json& cache, const std::string& host) {
  const auto hosts = cache.find("hosts");
  if (hosts == cache.end() || !hosts->contains(host)) return std::nullopt;
  const nlohmann::json& e = (*hosts)[host];
  if (!e.is_object() || !e.contains("kernel") || !e["kernel"].is_string()) return std::nullopt;
  Bf16KernelChoice c{e["kernel"].get<std::string>(), "cached", {}, host};
  if (!has(backend::current().bf16_kernels(), c.kernel)) return std::nullopt;
  if (const auto g = e.find("gflops"); g != e.end() && g->is_object())
    for (const auto& [name, v] : g->items())
      if (v.is_array() && v.size() == 3 && v[0].is_number() && v[1].is_number() && v[2].is_number())
        c.timings.push_back({name, v[0].get<double>(), v[1].get<double>(), v[2].get<double>()});
  return c;
}

nlohmann::json gflops_json(const std::vector<backend::Bf16KernelTiming>& timings) {
  nlohmann::json g = nlohmann::json::object();
  for (const backend::Bf16KernelTiming& t : timings)
    g[t.kernel] = {std::round(t.gflops * 10) / 10, std::round(t.gflops_min * 10) / 10,
                   std::round(t.gflops_max * 10) / 10};
  return g;
}

// The cache's JSON written over `path` atomically (readers see the old or the new file).
void store_cache(const std::string& path, const nlohmann::json& cache) {
  const std::string text = cache.dump(2) + "\n";
  io::write_file_atomically(
      path, [&](int fd) { io::write_all(fd, text.data(), text.size(), path); }, path);
}

void write_cache(const std::string& path, nlohmann::json cache, const Bf16KernelChoice& c) {
  cache["format"] = kFormat;
  if (!cache.contains("hosts") || !cache["hosts"].is_object())
    cache["hosts"] = nlohmann::json::object();
  cache["hosts"][c.host] = {{"kernel", c.kernel}, {"gflops", gflops_json(c.timings)}};
  store_cache(path, cache);
}

std::string cpuinfo_field(const std::string& text, const std::string& key) {
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    if (line.starts_with(key)) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        const size_t v = line.find_first_not_of(" \t", colon + 1);
        return v == std::string::npos ? "" : line.substr(v);
      }
    }
    if (line.empty()) break;  // the first processor's block only
    at = end + 1;
  }
  return "?";
}

Bf16KernelChoice measured(const std::string& host) {
  Bf16KernelChoice c{"", "measured", backend::current().time_bf16_kernels(3), host};
  c.kernel = fastest(c.timings);
  return c;
}

}  // namespace

std::string Bf16KernelChoice::describe() const {
  std::string s = kernel + " (";
  if (reason == "training.bf16_kernel")
    s += "set by training.bf16_kernel";
  else if (reason == "checkpoint")
    s += "the checkpoint's";
  else if (reason == "only one")
    s += "the only kernel here";
  else if (reason == "rank 0's choice")
    s += "rank 0's choice";
  else
    s += reason == "cached" ? "measured earlier" : "measured";
  for (size_t i = 0; i < timings.size(); ++i)
    s += fmt::format("{}{} {:.0f}", i == 0 ? ": " : ", ", timings[i].kernel, timings[i].gflops);
  return s + (timings.empty() ? ")" : " GFLOP/s)");
}

std::string Bf16KernelChoice::to_json() const {
  nlohmann::ordered_json j;
  j["kernel"] = kernel;
  j["reason"] = reason;
  nlohmann::ordered_json g = nlohmann::ordered_json::object();
  for (const backend::Bf16KernelTiming& t : timings) g[t.kernel] = std::round(t.gflops * 10) / 10;
  j["gflops"] = g;
  j["host"] = host;
  return j.dump();
}

std::string bf16_kernel_host() {
  std::string info;
  try {
    info = io::read_regular_file("/proc/cpuinfo", 1 << 22, "/proc/cpuinfo");
  } catch (const Error&) {
    // /proc/cpuinfo reads as size 0 on some kernels, then fails the regular-file read.
    std::ifstream in("/proc/cpuinfo");
    info.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string kernels;
  for (const std::string& k : backend::current().bf16_kernels())
    kernels += (kernels.empty() ? "" : ",") + k;
  return fmt::format("{} family {} model {} stepping {} | {} | {}",
                     cpuinfo_field(info, "vendor_id"), cpuinfo_field(info, "cpu family"),
                     cpuinfo_field(info, "model\t"), cpuinfo_field(info, "stepping"),
                     cpuinfo_field(info, "model name"), kernels);
}

std::string bf16_kernel_cache_path() {
  fs::path dir;
  if (const char* d = std::getenv("MIXPREC_CACHE_DIR"); d && *d)
    dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    dir = fs::path(x) / "mixprec";
  else if (const char* h = std::getenv("HOME"); h && *h)
    dir = fs::path(h) / ".cache" / "mixprec";
  else
    return "";
  return (dir / "bf16_kernels.json").string();
}

Bf16KernelChoice choose_bf16_kernel(const std::string& setting,
                                    const std::string& checkpoint_kernel,
                                    const std::function<void(const std::string&)>& warn) {
  const std::string host = bf16_kernel_host();
  const std::vector<std::string> here = backend::current().bf16_kernels();
  Bf16KernelChoice c;
  if (setting != "auto" && !setting.empty()) {
    backend::current().use_bf16_kernel(setting, "training.bf16_kernel");
    c = {setting, "training.bf16_kernel", {}, host};
  } else if (!checkpoint_kernel.empty() && has(here, checkpoint_kernel)) {
    c = {checkpoint_kernel, "checkpoint", {}, host};
  } else {
    if (!checkpoint_kernel.empty())
      warn("the checkpoint's bf16 kernel '" + checkpoint_kernel +
           "' is not available on this host: choosing again (the bits will differ from the run's)");
    const std::string path = bf16_kernel_cache_path();
    if (here.size() == 1) {
      c = {here.front(), "only one", {}, host};
    } else if (path.empty()) {
      warn(
          "no cache folder for the bf16 kernel choice (neither MIXPREC_CACHE_DIR, "
          "XDG_CACHE_HOME nor HOME is set): measured for this run only, a later run may "
          "choose otherwise (set training.bf16_kernel to keep one)");
      c = measured(host);
    } else {
      std::error_code ec;
      fs::create_directories(fs::path(path).parent_path(), ec);
      CacheLock lock(path);
      nlohmann::json cache = nlohmann::json::object();
      try {
        cache = read_cache(path);
      } catch (const std::exception& e) {  // Error, or nlohmann's on a well-formed oddity
        warn(std::string(e.what()) + ": measuring again and replacing it");
        cache = nlohmann::json::object();
      }
      if (auto hit = cached_entry(cache, host)) {
        c = std::move(*hit);
      } else {
        c = measured(host);
        try {
          write_cache(path, cache, c);
        } catch (const Error& e) {
          warn(std::string("the bf16 kernel choice is not kept (") + e.what() +
               "): the next run measures again and may choose otherwise");
        }
      }
    }
  }
  backend::current().use_bf16_kernel(c.kernel, "training.bf16_kernel");
  return c;
}

bool forget_bf16_kernel_choice(const std::function<void(const std::string&)>& warn) {
  const std::string path = bf16_kernel_cache_path();
  if (path.empty()) return false;
  CacheLock lock(path);
  try {
    nlohmann::json cache = read_cache(path);
    const std::string host = bf16_kernel_host();
    if (!cache.contains("hosts") || !cache["hosts"].contains(host)) return false;
    cache["hosts"].erase(host);
    store_cache(path, cache);
    return true;
  } catch (const std::exception& e) {
    warn(e.what());
    return false;
  }
}

}  // namespace mixprec::train
