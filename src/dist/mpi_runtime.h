// The process-wide MPI state behind MpiCommunicator: initialisation (once, FUNNELED),
// finalisation at exit, and the datatypes and reductions made once for mixprec's dtypes.
// Only compiled with MIXPREC_HAVE_MPI.
#pragma once

#if MIXPREC_HAVE_MPI
#include <mpi.h>

#include <string>

#include "mixprec/dist/communicator.h"
#include "mixprec/numerics/dtype.h"

namespace mixprec::dist::mpi {

// Initialises MPI on first use (unless someone else already did) and registers the
// finalisation at exit; makes the bf16/f16 datatypes and reductions. Idempotent.
void ensure_initialized();
// True once MPI_Finalize has run (communicators must not touch MPI any more).
bool finalized();

// MPI's text for an error code.
std::string error_string(int code);

// Elements of `dtype` as opaque units of the same size (all-gather, broadcast).
MPI_Datatype move_type(DType dtype);
// Elements of a reducible dtype (f32, bf16, f16, f64, i64) and the reduction `op` over them:
// MPI's own for f32/f64/i64; for bf16/f16 ours, which widens to f32, combines, and rounds
// once to nearest even.
MPI_Datatype reduce_type(DType dtype);
MPI_Op reduce_op(DType dtype, ReduceOp op);

}  // namespace mixprec::dist::mpi
#endif
