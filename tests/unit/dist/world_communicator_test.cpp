// Which backend make_world_communicator() picks, from the launcher's environment and the build.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "dist/mpi_launch.h"
#include "mixprec/dist/communicator.h"
#include "support/op_testing.h"
#include "support/scoped_env.h"

namespace mixprec::dist {
namespace {

using detail::choose_world_backend;
using detail::WorldBackend;
using mixprec::testing::error_of;

using mixprec::testing::ScopedEnv;

struct NoLauncher {
  ScopedEnv a{"OMPI_COMM_WORLD_SIZE", nullptr}, b{"PMIX_RANK", nullptr}, c{"PMI_RANK", nullptr},
      d{"PMI_SIZE", nullptr};
};

TEST(WorldCommunicator, ChoosesMpiOnlyWhenLaunchedAndBuilt) {
  EXPECT_EQ(choose_world_backend(true, true, 2), WorldBackend::mpi);
  EXPECT_EQ(choose_world_backend(true, true, 1), WorldBackend::mpi);
  EXPECT_EQ(choose_world_backend(true, false, 0), WorldBackend::single);
  EXPECT_EQ(choose_world_backend(false, false, 0), WorldBackend::single);
  EXPECT_EQ(choose_world_backend(false, true, 1), WorldBackend::single);
}

TEST(WorldCommunicator, SeveralRanksWithoutMpiInTheBuildIsAnError) {
  const std::string msg = error_of([] { choose_world_backend(false, true, 4); });
  EXPECT_NE(msg.find("[dist]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 ranks"), std::string::npos) << msg;
  EXPECT_NE(msg.find("built without MPI"), std::string::npos) << msg;
}

TEST(WorldCommunicator, LauncherIsSeenInTheEnvironment) {
  NoLauncher clean;
  EXPECT_FALSE(launched_by_mpi());
  EXPECT_EQ(detail::launcher_world_size(), 0);
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    ScopedEnv set(name, "3");
    EXPECT_TRUE(launched_by_mpi()) << name;
  }
  ScopedEnv size("OMPI_COMM_WORLD_SIZE", "3");
  EXPECT_EQ(detail::launcher_world_size(), 3);
}

TEST(WorldCommunicator, WithoutLauncherIsASingleProcess) {
  NoLauncher clean;
  auto world = make_world_communicator();
  EXPECT_EQ(world->backend(), "single");
  EXPECT_EQ(world->size(), 1);
}

TEST(WorldCommunicator, MpiFactoryWithoutMpiSaysSo) {
  if (mpi_built()) GTEST_SKIP() << "built with MPI: tests/mpi covers make_mpi_communicator";
  EXPECT_NE(error_of([] { make_mpi_communicator(); }).find("built without MPI"), std::string::npos);
}

}  // namespace
}  // namespace mixprec::dist
