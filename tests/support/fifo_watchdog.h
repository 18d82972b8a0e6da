// Calling code that must refuse a FIFO, in a way that fails instead of hanging when it does
// not: the call runs on a thread, and if it is still blocked after a while the FIFO is opened
// for reading and writing and closed again, which wakes an open() waiting for the other end
// and ends a read with EOF.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>

namespace mixprec::testing {

template <class Fn>
auto call_without_hanging(const std::filesystem::path& fifo, Fn&& fn,
                          std::chrono::seconds limit = std::chrono::seconds(10)) {
  auto done = std::async(std::launch::async, std::forward<Fn>(fn));
  if (done.wait_for(limit) == std::future_status::timeout) {
    ADD_FAILURE() << "blocked on the FIFO " << fifo << " for " << limit.count() << " s";
    const int fd = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  return done.get();
}

}  // namespace mixprec::testing
