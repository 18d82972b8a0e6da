// How make_world_communicator() picks a backend, apart from the environment so tests can
// drive every case.
#pragma once

namespace mixprec::dist::detail {

enum class WorldBackend { single, mpi };

// The world size the launcher announced (OMPI_COMM_WORLD_SIZE, else PMI_SIZE); 0 when none.
int launcher_world_size();

// MPI when launched by an MPI launcher and built with MPI; else a single process, except that
// a launch with more than one rank and no MPI in the build is an Error (each rank would train
// alone, silently).
WorldBackend choose_world_backend(bool mpi_built, bool launched, int launcher_size);

}  // namespace mixprec::dist::detail
