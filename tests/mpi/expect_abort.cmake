# cmake -DMPIEXEC=... -DPROGRAM=... -P expect_abort.cmake
# Runs the abort probe on 2 ranks and checks that the job ends by itself, quickly, non-zero,
# with the failed rank named, and that the waiting rank never got past its barrier.
string(TIMESTAMP start "%s" UTC)
execute_process(COMMAND "${MPIEXEC}" --oversubscribe -np 2 "${PROGRAM}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
string(TIMESTAMP end "%s" UTC)
math(EXPR seconds "${end} - ${start}")
set(all "${out}${err}")
message("exit: ${rc} after ${seconds} s\n--- output ---\n${all}--------------")
if(rc MATCHES "^0$" OR NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "expected a non-zero exit code from mpiexec, got '${rc}'")
endif()
if(NOT all MATCHES "mixprec: rank 1 of 2 failed: abort_probe stops on purpose")
  message(FATAL_ERROR "the failed rank is not named in the output")
endif()
if(all MATCHES "passed the barrier")
  message(FATAL_ERROR "a rank got past a barrier that rank 1 never reached")
endif()
if(seconds GREATER 30)
  message(FATAL_ERROR "the job took ${seconds} s to stop (expected seconds)")
endif()
