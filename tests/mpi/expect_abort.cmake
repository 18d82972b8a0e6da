# cmake -DMPIEXEC=... -DPROGRAM=... -P expect_abort.cmake
# Runs the abort probe on 2 ranks and checks that the job ends by itself, quickly, non-zero,
# with the failed rank named, and that the waiting rank never got past its barrier.
include("${CMAKE_CURRENT_LIST_DIR}/failing_job.cmake")
run_failing_job(60 "${PROGRAM}")
if(NOT all MATCHES "mixprec: rank 1 of 2 failed: abort_probe stops on purpose")
  message(FATAL_ERROR "the failed rank is not named in the output")
endif()
if(all MATCHES "passed the barrier")
  message(FATAL_ERROR "a rank got past a barrier that rank 1 never reached")
endif()
if(seconds GREATER 30)
  message(FATAL_ERROR "the job took ${seconds} s to stop (expected seconds)")
endif()
