// The world communicator of an MPI test program (made once by mpi_test_main.cpp).
#pragma once

#include "mixprec/dist/communicator.h"

namespace mixprec::testing {

dist::Communicator& world();

}  // namespace mixprec::testing
