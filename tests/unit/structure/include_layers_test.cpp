// The library's folders form layers: a folder may include its own headers and those of lower
// layers only, so lower layers build, test and reason without the ones above them. This reads
// the quoted #include lines of include/mixprec, src and tools as text (no compiler involved)
// and checks the folder graph against the one table below.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Lowest first. A new folder must be placed here (IncludeLayers.EveryFolderHasALayer says so).
const std::vector<std::string> kLayers = {
    "core",   "numerics", "tensor", "backend", "cpu",  "autograd", "amp",    "ops",   "optim",
    "config", "models",   "io",     "dist",    "data", "infer",    "report", "train", "tools"};

// Headers directly in include/mixprec/ front one layer's code; new ones must be classified.
const std::map<std::string, std::string> kTopLevelHeaders = {{"ops.h", "ops"}};

struct Include {
  std::string file;  // relative to the source root, e.g. "src/amp/grad_scaler.cpp"
  std::string line;  // as written, e.g. "mixprec/ops/elementwise.h"
  std::string from;  // folder of `file`
  std::string to;    // folder the include points at; "" if it cannot be classified
};

int rank_of(const std::string& folder) {
  auto it = std::find(kLayers.begin(), kLayers.end(), folder);
  return it == kLayers.end() ? -1 : static_cast<int>(it - kLayers.begin());
}

// `#include "x"` lines (spaces allowed around '#' and before the quote). Parsed by hand:
// std::regex trips GCC 12's -Wmaybe-uninitialized at -O1 under the sanitizers.
std::vector<std::string> quoted_includes(std::istream& in) {
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    std::size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] != '#') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0) continue;
    i = line.find_first_not_of(" \t", i + 7);
    if (i == std::string::npos || line[i] != '"') continue;
    const std::size_t end = line.find('"', i + 1);
    if (end != std::string::npos) out.push_back(line.substr(i + 1, end - i - 1));
  }
  return out;
}

// `rel` is relative to the source root; "" when the path belongs to no folder.
std::string folder_of(const fs::path& rel) {
  std::vector<std::string> parts;
  for (const auto& p : rel) parts.push_back(p.generic_string());
  if (parts.size() >= 2 && parts[0] == "tools") return "tools";
  if (parts.size() >= 3 && parts[0] == "src") return parts[1];
  if (parts.size() >= 3 && parts[0] == "include" && parts[1] == "mixprec") {
    if (parts.size() > 3) return parts[2];
    auto it = kTopLevelHeaders.find(parts[2]);
    return it == kTopLevelHeaders.end() ? "" : it->second;
  }
  return "";
}

// Quoted includes other than mixprec/... are searched next to the file, then in src/ (the
// include path the library builds with); one that resolves nowhere stays in the file's folder.
Include classify(const fs::path& root, const std::string& file, const std::string& line) {
  Include inc{file, line, folder_of(file), ""};
  if (line.starts_with("mixprec/")) {
    inc.to = folder_of(fs::path("include") / line);
    return inc;
  }
  inc.to = inc.from;
  for (const fs::path& base : {fs::path(file).parent_path(), fs::path("src")}) {
    fs::path rel = (base / line).lexically_normal();
    if (!fs::exists(root / rel)) continue;
    if (std::string f = folder_of(rel); !f.empty()) inc.to = f;
    break;
  }
  return inc;
}

std::vector<std::string> source_files(const fs::path& root) {
  std::vector<std::string> files;
  for (const char* dir : {"include/mixprec", "src", "tools"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      if (e.is_regular_file()) files.push_back(e.path().lexically_relative(root).generic_string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Include> scan_tree(const fs::path& root) {
  std::vector<Include> out;
  for (const auto& file : source_files(root)) {
    std::ifstream in(root / file);
    for (const auto& line : quoted_includes(in)) out.push_back(classify(root, file, line));
  }
  return out;
}

std::vector<std::string> rank_violations(const std::vector<Include>& includes) {
  std::set<std::string> out;  // sorted and without duplicates
  for (const auto& i : includes) {
    if (i.from == i.to || i.to.empty() || rank_of(i.from) < 0 || rank_of(i.to) < 0) continue;
    if (rank_of(i.to) >= rank_of(i.from)) {
      out.insert(i.file + " includes " + i.line + ": " + i.from + " may not include " + i.to +
                 " (" + i.to + " is above " + i.from + ")");
    }
  }
  return {out.begin(), out.end()};
}

// Depth-first search over the folder graph: one cycle {a, b, ..., a} per edge that leads back
// onto the current path, so every cycle shows up in at least one report (not all of them
// separately: a longer one may already contain a shorter one).
std::vector<std::vector<std::string>> find_cycles(const std::vector<Include>& includes) {
  std::map<std::string, std::set<std::string>> graph;
  for (const auto& i : includes) {
    if (i.from != i.to && !i.to.empty()) graph[i.from].insert(i.to);
  }
  std::map<std::string, int> state;  // 0 unvisited, 1 on the current path, 2 done
  std::vector<std::string> path;
  std::vector<std::vector<std::string>> cycles;
  auto visit = [&](auto& self, const std::string& node) -> void {
    state[node] = 1;
    path.push_back(node);
    for (const auto& next : graph[node]) {
      if (state[next] == 1) {
        cycles.emplace_back(std::find(path.begin(), path.end(), next), path.end());
        cycles.back().push_back(next);
      } else if (state[next] == 0) {
        self(self, next);
      }
    }
    path.pop_back();
    state[node] = 2;
  };
  for (const auto& [node, edges] : graph) {
    if (state[node] == 0) visit(visit, node);
  }
  return cycles;
}

// "a -> b -> a", then one include per edge so the cycle can be traced to files.
std::string describe_cycle(const std::vector<std::string>& cycle,
                           const std::vector<Include>& includes) {
  std::string out;
  for (const auto& f : cycle) out += (out.empty() ? "" : " -> ") + f;
  for (size_t k = 0; k + 1 < cycle.size(); ++k) {
    for (const auto& i : includes) {
      if (i.from != cycle[k] || i.to != cycle[k + 1]) continue;
      out += "\n    " + i.file + " includes " + i.line + ": " + i.from + " -> " + i.to;
      break;
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "\n  " + l;
  return out;
}

const fs::path kRoot = fs::path(MIXPREC_SOURCE_DIR).lexically_normal();

TEST(IncludeLayers, EveryFolderHasALayer) {
  std::set<std::string> problems;
  for (const auto& file : source_files(kRoot)) {
    if (std::string f = folder_of(file); rank_of(f) < 0) {
      problems.insert(file + ": folder \"" + f + "\" is not in the layer table");
    }
  }
  for (const auto& i : scan_tree(kRoot)) {
    if (rank_of(i.to) < 0) {
      problems.insert(i.file + " includes " + i.line + ": folder \"" + i.to +
                      "\" is not in the layer table");
    }
  }
  EXPECT_TRUE(problems.empty()) << join({problems.begin(), problems.end()});
}

// Kernels are reached through the backend table (mixprec/backend/backend.h) only: no folder
// but cpu itself includes a cpu kernel header, so no op, optimizer or scan calls one by name.
TEST(IncludeLayers, OnlyTheBackendTableReachesTheCpuKernels) {
  std::set<std::string> problems;
  for (const auto& i : scan_tree(kRoot))
    if (i.to == "cpu" && i.from != "cpu")
      problems.insert(i.file + " includes " + i.line + " (use backend::current())");
  EXPECT_TRUE(problems.empty()) << join({problems.begin(), problems.end()});
}

// On a scratch tree, so that files moving in the real one cannot break it.
TEST(IncludeLayers, ReadsQuotedIncludesOnly) {
  std::istringstream text(
      "#include \"a.h\"\n  #  include \"b/c.h\"\n#include <vector>\n// #include \"x.h\"\n"
      "#include_next \"y.h\"\nint include = 1;\n#\tinclude\t\"d.h\" // why\n");
  EXPECT_EQ(quoted_includes(text), (std::vector<std::string>{"a.h", "b/c.h", "d.h"}));
}

TEST(IncludeLayers, ClassifiesPathsAndIncludes) {
  EXPECT_EQ(folder_of("include/mixprec/amp/autocast.h"), "amp");
  EXPECT_EQ(folder_of("src/cpu/gemm.cpp"), "cpu");
  EXPECT_EQ(folder_of("tools/mixprec/main.cpp"), "tools");
  EXPECT_EQ(folder_of("include/mixprec/ops.h"), "ops");
  EXPECT_EQ(folder_of("include/mixprec/unknown.h"), "");
  const fs::path root = fs::path(::testing::TempDir()) / "include_layers_test";
  fs::create_directories(root / "src/numerics");
  fs::create_directories(root / "src/cpu");
  std::ofstream(root / "src/numerics/lanes.h").put('\n');
  std::ofstream(root / "src/cpu/lanes.h").put('\n');
  EXPECT_EQ(classify(root, "src/cpu/a.cpp", "../numerics/lanes.h").to, "numerics");
  EXPECT_EQ(classify(root, "src/amp/a.cpp", "numerics/lanes.h").to, "numerics");  // via src/
  EXPECT_EQ(classify(root, "src/cpu/a.cpp", "lanes.h").to, "cpu");  // next to the file first
  EXPECT_EQ(classify(root, "src/cpu/a.cpp", "not_there.h").to, "cpu");
  EXPECT_EQ(classify(root, "src/amp/a.cpp", "mixprec/ops.h").to, "ops");
  fs::remove_all(root);
}

TEST(IncludeLayers, NoIncludeFromALowerLayerToAHigherOne) {
  auto violations = rank_violations(scan_tree(kRoot));
  EXPECT_TRUE(violations.empty()) << violations.size() << " upward include(s):" << join(violations);
}

TEST(IncludeLayers, FolderGraphHasNoCycle) {
  auto includes = scan_tree(kRoot);
  auto cycles = find_cycles(includes);
  std::vector<std::string> described;
  for (const auto& c : cycles) described.push_back(describe_cycle(c, includes));
  EXPECT_TRUE(cycles.empty()) << cycles.size() << " include cycle(s):" << join(described);
}

// The checks above pass vacuously if they cannot fail; prove that they can.
TEST(IncludeLayers, CheckerReportsSyntheticViolations) {
  const fs::path nowhere = "/nonexistent-mixprec-root";
  std::vector<Include> includes = {
      classify(nowhere, "src/amp/grad_scaler.cpp", "mixprec/ops/elementwise.h"),
      classify(nowhere, "src/ops/elementwise.cpp", "mixprec/tensor/tensor.h"),
      classify(nowhere, "src/tensor/tensor.cpp", "mixprec/amp/autocast.h"),
      classify(nowhere, "src/tensor/tensor.cpp", "local_helper.h"),
      classify(nowhere, "src/ops/elementwise.cpp", "mixprec/core/error.h"),
  };
  EXPECT_EQ(rank_violations(includes),
            (std::vector<std::string>{
                "src/amp/grad_scaler.cpp includes mixprec/ops/elementwise.h: amp may not include "
                "ops (ops is above amp)",
                "src/tensor/tensor.cpp includes mixprec/amp/autocast.h: tensor may not include amp "
                "(amp is above tensor)"}));
  auto cycles = find_cycles(includes);
  ASSERT_EQ(cycles.size(), 1u);
  EXPECT_EQ(describe_cycle(cycles[0], includes),
            "amp -> ops -> tensor -> amp"
            "\n    src/amp/grad_scaler.cpp includes mixprec/ops/elementwise.h: amp -> ops"
            "\n    src/ops/elementwise.cpp includes mixprec/tensor/tensor.h: ops -> tensor"
            "\n    src/tensor/tensor.cpp includes mixprec/amp/autocast.h: tensor -> amp");
  includes.erase(includes.begin());  // breaking one edge breaks the cycle
  EXPECT_TRUE(find_cycles(includes).empty());
}

}  // namespace
