# cmake -DMPIEXEC=... -DCLI=... -DCONFIG=... -DRUN_DIR=... -P expect_mpmd_refused.cmake
# An MPMD launch whose two ranks differ in one config key (optimizer.lr) used to train
# silently and exit 0. It must be refused before the first step, on every rank, naming the key
# and both values.
file(REMOVE_RECURSE "${RUN_DIR}")
set(common train "${CONFIG}" --steps 3 --run-dir "${RUN_DIR}" --progress quiet
    --set training.threads=1)
execute_process(COMMAND "${MPIEXEC}" --oversubscribe -np 1 "${CLI}" ${common} :
                        -np 1 "${CLI}" ${common} --set optimizer.lr=0.002
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
set(all "${out}${err}")
message("exit: ${rc}\n--- output ---\n${all}--------------")
if(rc MATCHES "^0$" OR NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "expected a non-zero exit code from mpiexec, got '${rc}'")
endif()
if(NOT all MATCHES "optimizer.lr = 0.003 on rank 0, 0.002 on rank 1")
  message(FATAL_ERROR "the differing key and its values are not named")
endif()
if(EXISTS "${RUN_DIR}/metrics.jsonl")
  file(READ "${RUN_DIR}/metrics.jsonl" metrics)
  if(metrics MATCHES "\"type\":\"train\"")
    message(FATAL_ERROR "a step was trained before the configs were compared")
  endif()
endif()
file(REMOVE_RECURSE "${RUN_DIR}")
