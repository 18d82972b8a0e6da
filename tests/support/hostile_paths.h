// Paths that name no regular file, for the tests of readers that must refuse them without
// blocking: a FIFO, a directory, a link to /dev/zero and a symbolic link to itself.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

namespace mixprec::testing {

struct HostilePaths {
  std::filesystem::path fifo, folder, zero, loop;
};

// Made in `dir`, each named `<kind><suffix>` (e.g. "fifo.toml").
inline HostilePaths make_hostile_paths(const std::filesystem::path& dir,
                                       const std::string& suffix) {
  HostilePaths p{dir / ("fifo" + suffix), dir / ("folder" + suffix), dir / ("zero" + suffix),
                 dir / ("loop" + suffix)};
  EXPECT_EQ(::mkfifo(p.fifo.c_str(), 0644), 0) << p.fifo;
  std::filesystem::create_directory(p.folder);
  std::filesystem::create_symlink("/dev/zero", p.zero);
  std::filesystem::create_symlink(p.loop, p.loop);
  return p;
}

}  // namespace mixprec::testing
