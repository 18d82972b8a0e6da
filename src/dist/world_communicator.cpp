// The job's communicator: which backend this process gets, from its launcher and its build.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/dist/communicator.h"
#include "mpi_launch.h"

namespace mixprec::dist {
namespace detail {

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return 0;
}

WorldBackend choose_world_backend(bool mpi_built, bool launched, int launcher_size) {
  if (launched && mpi_built) return WorldBackend::mpi;
  MIXPREC_CHECK(!launched || launcher_size <= 1, "dist",
                "started by an MPI launcher with " + std::to_string(launcher_size) +
                    " ranks, but this mixprec was built without MPI (install libopenmpi-dev "
                    "and rebuild with -DMIXPREC_WITH_MPI=ON)");
  return WorldBackend::single;
}

}  // namespace detail

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

int ranks_on_this_machine(const Communicator& comm) {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return local ? std::max(1, std::atoi(local)) : comm.size();
}

std::unique_ptr<Communicator> make_world_communicator() {
  const auto backend =
      detail::choose_world_backend(mpi_built(), launched_by_mpi(), detail::launcher_world_size());
  return backend == detail::WorldBackend::mpi ? make_mpi_communicator()
                                              : make_single_process_communicator();
}

}  // namespace mixprec::dist
