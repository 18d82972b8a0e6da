# cmake -DMPIEXEC=... -DPROGRAM=... -DPIDFILE=... -P expect_stall.cmake
# Runs the stall probe on 2 ranks (rank 1 SIGSTOPs itself, collectives time out after 2 s) and
# checks that the job ends by itself, quickly, non-zero, with rank 1 and the collective named,
# that rank 0 did not get past the all-gather, and that the stopped rank is gone.
file(REMOVE "${PIDFILE}")
include("${CMAKE_CURRENT_LIST_DIR}/failing_job.cmake")
run_failing_job(90 "${PROGRAM}" "${PIDFILE}")
set(expected "mixprec: rank 0 of 2 failed: \\[dist\\] all_gather \\(MPI_Iallgather\\) on rank 0 of 2: rank 1 did not reach all_gather #2 within 2 s \\(comm.train_timeout_seconds; after step 3\\) and does not answer \\(stopped, hung, or busy outside any collective\\); rank 0 is waiting in all_gather #2")
if(NOT all MATCHES "${expected}")
  message(FATAL_ERROR "the stopped rank and the collective are not named as expected")
endif()
# Rank 1 may pass it: mpirun sends SIGCONT before SIGTERM, and rank 0's half of the all-gather
# is still posted. Rank 0 must not (it gave up).
if(all MATCHES "rank 0 passed the all_gather")
  message(FATAL_ERROR "rank 0 got past an all-gather that rank 1 never reached (no timeout?)")
endif()
if(seconds GREATER 30)
  message(FATAL_ERROR "the job took ${seconds} s to stop (expected seconds)")
endif()
file(STRINGS "${PIDFILE}" pid LIMIT_COUNT 1)
if(NOT pid MATCHES "^[0-9]+$")
  message(FATAL_ERROR "rank 1 wrote no pid to ${PIDFILE}")
endif()
# Dead is enough: a zombie (State Z) waits only for its new parent to reap it.
if(EXISTS "/proc/${pid}/status")
  file(READ "/proc/${pid}/status" status)
  if(NOT status MATCHES "State:[ \t]+Z")
    message(FATAL_ERROR "the stopped rank (pid ${pid}) is still there:\n${status}")
  endif()
endif()
