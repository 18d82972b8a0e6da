# Shared by the expect_*.cmake scripts: runs `${MPIEXEC} --oversubscribe -np 2 ARGS...`, prints
# its exit and output, fails unless it exited non-zero by itself, and leaves the output in
# `all` and the wall seconds in `seconds` for the caller's own checks.
macro(run_failing_job timeout)
  string(TIMESTAMP start "%s" UTC)
  execute_process(COMMAND "${MPIEXEC}" --oversubscribe -np 2 ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${timeout})
  string(TIMESTAMP end "%s" UTC)
  math(EXPR seconds "${end} - ${start}")
  set(all "${out}${err}")
  message("exit: ${rc} after ${seconds} s\n--- output ---\n${all}--------------")
  if(rc MATCHES "^0$" OR NOT rc MATCHES "^[0-9]+$")
    message(FATAL_ERROR "expected a non-zero exit code from mpiexec, got '${rc}'")
  endif()
endmacro()
